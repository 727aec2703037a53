/* The connection core (net/conn.h, net/conn_server.h) under a tiny protocol of one-letter
 * commands, driven by plain sockets from the loop's own thread: the deadlines (quiet, idle,
 * writes not read, the protocol's), the linger after a final answer, the eviction order, the
 * memory limiter's pause for pausable servers only, references and shutdown. The HTTP and
 * HTTP/2 servers' own tests cover what they build on it. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "check.h"
#include "net/conn_server.h"
#include "net/http_pause.h"

static uv_loop_t *loop;

/* ---- the protocol: each byte a command ---- */

typedef struct tconn {
    pc_conn base;
    bool held;
} tconn;

static struct {
    int opened, freed, timeouts, evicted, shutdowns;
    pc_conn *last; /* the connection that received the last command */
} ev;

enum { BIG = 32 << 20 };

static void t_data(pc_conn *c, const uint8_t *p, size_t n)
{
    tconn *t = (tconn *)c;
    ev.last = c;
    for (size_t i = 0; i < n && !c->finishing && !c->closing; i++) {
        switch (p[i]) {
        case 's': pc_conn_spoke(c); break;
        case 'e': pc_conn_write(c, "echo\n", 5, NULL, 0, 1); break;
        case 'f': /* a final answer */
            pc_conn_write(c, "bye\n", 4, NULL, 0, 1);
            pc_conn_finish(c, false);
            break;
        case 'b': { /* more than the socket buffers hold */
            char *big = calloc(1, BIG);
            pc_conn_write(c, big, BIG, NULL, 0, 1);
            free(big);
            break;
        }
        case 't': pc_conn_timer(c, uv_now(loop) + 100); break;
        case 'h': /* a request the "handler" holds */
            t->held = true;
            pc_conn_idle(c, false);
            pc_conn_busy(c, true);
            pc_conn_ref(c);
            break;
        }
    }
}

static int t_open(pc_conn *c)
{
    (void)c;
    ev.opened++;
    return 0;
}

static void t_timeout(pc_conn *c)
{
    (void)c;
    ev.timeouts++;
}

static void t_evict(pc_conn *c)
{
    (void)c;
    ev.evicted++;
}

static void t_shutdown(pc_conn *c)
{
    ev.shutdowns++;
    if (!((tconn *)c)->held) pc_conn_close(c);
}

static void t_free(pc_conn *c)
{
    (void)c;
    ev.freed++;
}

static const pc_conn_proto tproto = {
    .conn_size = sizeof(tconn),
    .open = t_open,
    .data = t_data,
    .timeout = t_timeout,
    .evict = t_evict,
    .shutdown = t_shutdown,
    .free = t_free,
};

/* ---- running the loop ---- */

static void on_tick(uv_timer_t *t)
{
    (void)t;
}

/* Run the loop until pred(arg) holds or ms pass; whether it holds. */
static bool run_until(bool (*pred)(void *), void *arg, int ms)
{
    uv_timer_t t;
    uv_timer_init(loop, &t);
    uv_timer_start(&t, on_tick, 5, 5); /* wakes the loop to look at pred (sockets elsewhere) */
    uint64_t end = uv_now(loop) + (uint64_t)ms;
    bool ok;
    while (!(ok = pred(arg)) && uv_now(loop) < end)
        uv_run(loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
    return ok;
}

static bool never(void *arg)
{
    (void)arg;
    return false;
}

static void run_for(int ms)
{
    run_until(never, NULL, ms);
}

static bool freed_at_least(void *arg)
{
    return ev.freed >= *(int *)arg;
}

/* ---- plain sockets ---- */

static int cli_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK_EQ_INT(connect(fd, (struct sockaddr *)&a, sizeof a), 0); /* loopback: no loop needed */
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

static void cli_send(int fd, const char *s)
{
    CHECK_EQ_INT(send(fd, s, strlen(s), MSG_NOSIGNAL), (long long)strlen(s));
}

typedef struct reader {
    int fd;
    char got[256];
    size_t len;
    int eof; /* 1: orderly end; -errno: reset or other error */
} reader;

/* Take what arrived; whether the peer ended the stream (or it failed). */
static bool reader_ended(void *arg)
{
    reader *r = arg;
    for (;;) {
        char buf[4096];
        ssize_t n = recv(r->fd, buf, sizeof buf, 0);
        if (n > 0) {
            size_t k =
                (size_t)n < sizeof r->got - 1 - r->len ? (size_t)n : sizeof r->got - 1 - r->len;
            memcpy(r->got + r->len, buf, k);
            r->len += k;
            r->got[r->len] = 0;
            continue;
        }
        if (n == 0)
            r->eof = 1;
        else if (errno != EAGAIN && errno != EWOULDBLOCK)
            r->eof = -errno;
        return r->eof != 0;
    }
}

static bool reader_got(void *arg)
{
    reader *r = arg;
    reader_ended(r);
    return r->len > 0;
}

/* ---- a server ---- */

static pc_conn_server *srv_start(pc_conn_server_opts o, pc_conn_stats *st, int *port)
{
    o.host = "127.0.0.1";
    o.log_id = "test-conn";
    o.stats = st;
    pc_conn_server *s = pc_conn_server_new(loop, &o, &tproto, NULL);
    char bound[80];
    pc_error err = {0};
    CHECK_EQ_INT(pc_conn_server_start(s, bound, sizeof bound, &err), 0);
    *port = pc_conn_server_port(s);
    return s;
}

static void set_done(void *arg)
{
    *(int *)arg = 1;
}

static bool flag(void *arg)
{
    return *(int *)arg != 0;
}

static void srv_stop(pc_conn_server *s)
{
    int done = 0;
    pc_conn_server_shutdown(s, set_done, &done);
    CHECK(run_until(flag, &done, 5000));
}

static void reset_events(void)
{
    memset(&ev, 0, sizeof ev);
}

/* ================================ tests ================================ */

/* Silent since accept: closed after quiet_ms; once it spoke, idle_ms applies. */
static void test_quiet_then_idle(void)
{
    reset_events();
    pc_conn_stats st = {0};
    int port;
    pc_conn_server *s = srv_start(
        (pc_conn_server_opts){.quiet_timeout_ms = 200, .idle_timeout_ms = 3000}, &st, &port);
    reader silent = {.fd = cli_connect(port)}, spoke = {.fd = cli_connect(port)};
    cli_send(spoke.fd, "s");
    CHECK(run_until(reader_ended, &silent, 2500));
    CHECK_EQ_INT(silent.eof, 1);
    CHECK(!reader_ended(&spoke)); /* still open: its idle clock runs for 3 s */
    CHECK_EQ_INT(st.open, 1);
    CHECK(run_until(reader_ended, &spoke, 8000));
    CHECK_EQ_INT(spoke.eof, 1);
    CHECK_EQ_INT(ev.opened, 2);
    CHECK_EQ_INT(st.open, 0);
    close(silent.fd);
    close(spoke.fd);
    srv_stop(s);
    CHECK_EQ_INT(ev.freed, 2);
}

/* A peer that does not read what we write is closed after write_ms, whatever the idle clock
 * says; the protocol's own deadline fires once. */
static void test_write_stall_and_timer(void)
{
    reset_events();
    pc_conn_stats st = {0};
    int port;
    pc_conn_server *s = srv_start((pc_conn_server_opts){.quiet_timeout_ms = 60000,
                                                        .idle_timeout_ms = 60000,
                                                        .write_timeout_ms = 300},
                                  &st, &port);
    int fd = cli_connect(port);
    cli_send(fd, "t");
    run_for(400);
    CHECK_EQ_INT(ev.timeouts, 1);
    CHECK_EQ_INT(ev.freed, 0);
    cli_send(fd, "b"); /* never read */
    int one = 1;
    CHECK(run_until(freed_at_least, &one, 5000));
    CHECK_EQ_INT(st.open, 0);
    CHECK_EQ_INT(ev.timeouts, 1);
    close(fd);
    srv_stop(s);
}

/* After a final answer the connection half-closes and drains what the peer still sends for
 * linger_ms (no reset that could destroy the answer), then closes. */
static void test_linger(void)
{
    reset_events();
    pc_conn_stats st = {0};
    int port;
    pc_conn_server *s = srv_start((pc_conn_server_opts){.quiet_timeout_ms = 60000,
                                                        .idle_timeout_ms = 60000,
                                                        .linger_ms = 600},
                                  &st, &port);
    reader r = {.fd = cli_connect(port)};
    char upload[65536];
    memset(upload, 'x', sizeof upload);
    cli_send(r.fd, "f");
    CHECK_EQ_INT(send(r.fd, upload, sizeof upload, MSG_NOSIGNAL), (long long)sizeof upload);
    CHECK(run_until(reader_ended, &r, 3000));
    CHECK_STR(r.got, "bye\n");
    CHECK_EQ_INT(r.eof, 1); /* FIN after the answer, not a reset */
    CHECK_EQ_INT(ev.freed, 0);
    CHECK_EQ_INT(st.open, 1); /* still draining */
    /* more input while lingering is swallowed */
    CHECK_EQ_INT(send(r.fd, upload, sizeof upload, MSG_NOSIGNAL), (long long)sizeof upload);
    int one = 1;
    CHECK(run_until(freed_at_least, &one, 5000));
    CHECK_EQ_INT(st.open, 0);
    close(r.fd);
    srv_stop(s);
}

/* At the limit the newcomer takes the place of a lingering connection before an older idle
 * one (which got no last word: only idle ones are evicted with proto->evict). */
static void test_evicts_lingering_first(void)
{
    reset_events();
    pc_conn_stats st = {0};
    int port;
    pc_conn_server *s = srv_start((pc_conn_server_opts){.max_connections = 2,
                                                        .quiet_timeout_ms = 60000,
                                                        .idle_timeout_ms = 60000,
                                                        .linger_ms = 10000},
                                  &st, &port);
    reader older = {.fd = cli_connect(port)}, done = {.fd = cli_connect(port)};
    cli_send(done.fd, "f");
    CHECK(run_until(reader_ended, &done, 3000));
    CHECK_STR(done.got, "bye\n");
    reader newcomer = {.fd = cli_connect(port)};
    cli_send(newcomer.fd, "e");
    CHECK(run_until(reader_got, &newcomer, 3000));
    CHECK_STR(newcomer.got, "echo\n");
    CHECK_EQ_INT(st.evicted, 1);
    CHECK_EQ_INT(ev.evicted, 0);
    CHECK(!reader_ended(&older));
    /* the next one takes the older idle one's place, with a last word */
    reader third = {.fd = cli_connect(port)};
    CHECK(run_until(reader_ended, &older, 3000));
    CHECK_EQ_INT(st.evicted, 2);
    CHECK_EQ_INT(ev.evicted, 1);
    CHECK_EQ_INT(st.refused, 0);
    close(older.fd);
    close(done.fd);
    close(newcomer.fd);
    close(third.fd);
    srv_stop(s);
}

/* The memory limiter's pause stops reads of pausable servers only. */
static void test_pause_only_pausable(void)
{
    reset_events();
    pc_conn_stats st1 = {0}, st2 = {0};
    int p1, p2;
    pc_conn_server_opts o = {.quiet_timeout_ms = 60000, .idle_timeout_ms = 60000};
    pc_conn_server *plain = srv_start(o, &st1, &p1);
    o.pausable = true;
    pc_conn_server *pausable = srv_start(o, &st2, &p2);
    reader a = {.fd = cli_connect(p1)}, b = {.fd = cli_connect(p2)};
    run_for(50); /* both accepted */
    pc_http_servers_pause(1);
    cli_send(a.fd, "e");
    cli_send(b.fd, "e");
    CHECK(run_until(reader_got, &a, 3000));
    run_for(300);
    CHECK(!reader_got(&b)); /* read nothing while paused */
    pc_http_servers_pause(0);
    CHECK(run_until(reader_got, &b, 3000));
    CHECK_STR(b.got, "echo\n");
    close(a.fd);
    close(b.fd);
    srv_stop(plain);
    srv_stop(pausable);
}

/* A reference the protocol holds keeps the connection's memory past the peer's going away;
 * shutdown asks the held one, closes the rest, and ends once the reference is dropped. */
static void test_refs_and_shutdown(void)
{
    reset_events();
    pc_conn_stats st = {0};
    int port;
    pc_conn_server *s = srv_start(
        (pc_conn_server_opts){.quiet_timeout_ms = 60000, .idle_timeout_ms = 60000}, &st, &port);
    int gone = cli_connect(port);
    cli_send(gone, "h");
    run_for(100);
    pc_conn *held = ev.last;
    CHECK(held != NULL);
    close(gone); /* the peer leaves: the connection closes, its memory stays */
    run_for(200);
    CHECK(held && held->closing);
    CHECK_EQ_INT(ev.freed, 0);
    CHECK_EQ_INT(st.open, 0);
    if (held) pc_conn_unref(held);
    CHECK_EQ_INT(ev.freed, 1);
    /* shutdown with one held, one idle */
    reader busy = {.fd = cli_connect(port)}, idle = {.fd = cli_connect(port)};
    cli_send(busy.fd, "h");
    run_for(100);
    held = ev.last;
    int done = 0;
    pc_conn_server_shutdown(s, set_done, &done);
    CHECK_EQ_INT(ev.shutdowns, 2);
    CHECK(run_until(reader_ended, &idle, 3000));
    run_for(200);
    CHECK(!done); /* the held one is still open */
    CHECK(!reader_ended(&busy));
    pc_conn_close(held);
    pc_conn_unref(held);
    CHECK(run_until(flag, &done, 3000));
    CHECK_EQ_INT(ev.freed, 3);
    close(busy.fd);
    close(idle.fd);
}

int main(void)
{
    pc_log_set_level(PC_LOG_ERROR);
    loop = uv_default_loop();
    RUN(test_quiet_then_idle);
    RUN(test_write_stall_and_timer);
    RUN(test_linger);
    RUN(test_evicts_lingering_first);
    RUN(test_pause_only_pausable);
    RUN(test_refs_and_shutdown);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_loop_close(loop);
    return check_report();
}
