/* A server of connections (see conn_server.h). The env it shares with its connections is its
 * first member, so a connection's env is its server. */
#include "net/conn_server.h"

#include <stdio.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "net/http_pause.h"

enum {
    LOG_TICK_MS = 10000, /* summaries of suppressed log lines, at most this often */
    MAX_LIMITERS = 4,
};

typedef struct limiter {
    pc_log_limiter l;
    pc_log_level lvl;
    const char *what;
} limiter;

struct pc_conn_server {
    pc_conn_env env; /* first: see above */
    pc_conn_server_opts o;
    char *host, *log_id;
    pc_listener *listener;
    uv_timer_t tick; /* writes the rate-limited log lines' summaries */
    int port;
    /* the eviction order: counted connections not busy, oldest first (since accept or their
     * last answer; those done with a final one at the front) */
    pc_conn *lru_head, *lru_tail;
    unsigned n_active;
    bool started;
    int closing_handles; /* listener and tick, during shutdown */
    void (*done)(void *arg);
    void *done_arg;
    pc_conn_stats own_stats, *st;
    /* per-connection lines a peer can trigger at will */
    pc_log_limiter refuse_log, evict_log;
    limiter extra[MAX_LIMITERS];
    int n_extra;
};

static pc_conn_server *server_of(const pc_conn *c)
{
    return (pc_conn_server *)c->env;
}

/* ---- the eviction order (O(1) per change) ---- */

static void lru_remove(pc_conn *c)
{
    if (!c->in_lru) return;
    pc_conn_server *s = server_of(c);
    if (c->lru_prev)
        c->lru_prev->lru_next = c->lru_next;
    else
        s->lru_head = c->lru_next;
    if (c->lru_next)
        c->lru_next->lru_prev = c->lru_prev;
    else
        s->lru_tail = c->lru_prev;
    c->lru_prev = c->lru_next = NULL;
    c->in_lru = false;
}

/* (Re)insert a counted connection: at the back (the newest), or at the front for one that is
 * done anyway (lingering after its last answer). */
static void lru_insert(pc_conn *c, bool front)
{
    if (!c->counted || c->closing) return;
    lru_remove(c);
    pc_conn_server *s = server_of(c);
    pc_conn *prev = front ? NULL : s->lru_tail, *next = front ? s->lru_head : NULL;
    c->in_lru = true;
    c->lru_prev = prev;
    c->lru_next = next;
    if (prev)
        prev->lru_next = c;
    else
        s->lru_head = c;
    if (next)
        next->lru_prev = c;
    else
        s->lru_tail = c;
}

void pc_conn_busy(pc_conn *c, bool busy)
{
    c->busy = busy;
    if (busy)
        lru_remove(c);
    else
        lru_insert(c, false);
}

/* ---- the connections' hooks ---- */

static void on_conn_close(pc_conn *c)
{
    lru_remove(c);
    if (!c->counted) return;
    c->counted = false;
    pc_conn_server *s = server_of(c);
    s->st->open = --s->n_active;
}

static void on_conn_linger(pc_conn *c)
{
    lru_insert(c, true); /* done: the first to go when room is needed */
}

static void maybe_done(pc_conn_server *s)
{
    if (!s->env.stopping || s->env.conns || s->closing_handles) return;
    void (*done)(void *) = s->done;
    void *arg = s->done_arg;
    if (s->env.proto->stopped) s->env.proto->stopped(s->env.user);
    free(s->host);
    free(s->log_id);
    free(s);
    if (done) done(arg);
}

static void on_conn_free(pc_conn_env *env)
{
    maybe_done((pc_conn_server *)env);
}

/* ---- accepting ---- */

/* Close the connection idle or incomplete longest (never a busy one): a client that opens
 * connections and sends nothing, or too little, cannot lock others out. */
static bool evict_one(pc_conn_server *s, const char *why, const char *for_peer)
{
    pc_conn *v = s->lru_head;
    if (!v) return false;
    const pc_conn_proto *p = s->env.proto;
    s->st->evicted++;
    PC_WARN_RATELIMITED(&s->evict_log, s->log_id,
                        "%s: closed %s (%s, the longest) to make room for %s", why, v->peer,
                        v->lingering ? "closing"
                        : p->state   ? p->state(v)
                                     : "idle",
                        for_peer);
    if (p->evict && !v->finishing) p->evict(v);
    pc_conn_close(v);
    return true;
}

/* The listener is out of descriptors. */
static int make_room(void *arg)
{
    return evict_one(arg, "out of file descriptors", "a new connection");
}

static void refuse(pc_conn_server *s, pc_conn *c)
{
    s->st->refused++;
    PC_WARN_RATELIMITED(&s->refuse_log, s->log_id,
                        "connection limit %u reached, every connection busy with a %s: "
                        "refusing %s",
                        s->o.max_connections, s->o.busy_with, c->peer);
    if (s->env.proto->refuse) s->env.proto->refuse(c);
    if (!c->finishing) pc_conn_close(c);
}

static void on_accept(void *arg, uv_os_sock_t fd)
{
    pc_conn_server *s = arg;
    pc_conn *c = pc_conn_new(&s->env);
    pc_error e = {0};
    if (pc_conn_open(c, fd, &e) < 0) {
        s->st->accept_errors++;
        PC_ERROR_RATELIMITED(&s->refuse_log, s->log_id, "accept: %s", e.msg);
        return;
    }
    if (s->env.stopping) {
        pc_conn_close(c);
        return;
    }
    if (s->o.pausable) c->paused = pc_http_servers_paused();
    if (s->n_active >= s->o.max_connections) {
        char why[64];
        snprintf(why, sizeof why, "connection limit %u reached", s->o.max_connections);
        if (!evict_one(s, why, c->peer)) {
            refuse(s, c);
            return;
        }
    }
    s->st->open = ++s->n_active;
    c->counted = true;
    lru_insert(c, false);
    pc_conn_start(c, s->o.tls);
}

/* The memory limiter's global pause: stop reading every connection, or resume them. */
static void on_pause(void *arg, int paused)
{
    pc_conn_server *s = arg;
    for (pc_conn *c = s->env.conns; c; c = c->next)
        pc_conn_pause(c, paused);
}

static void flush_logs(pc_conn_server *s)
{
    pc_log_limiter_flush(&s->refuse_log, PC_LOG_WARN, s->log_id,
                         "connections refused (limit reached, every connection busy)");
    pc_log_limiter_flush(&s->evict_log, PC_LOG_WARN, s->log_id, "connections closed to make room");
    for (int i = 0; i < s->n_extra; i++)
        pc_log_limiter_flush(&s->extra[i].l, s->extra[i].lvl, s->log_id, s->extra[i].what);
    pc_log_limiter_flush(&s->env.tls_log, PC_LOG_WARN, s->log_id, "TLS failures");
}

static void on_tick(uv_timer_t *t)
{
    flush_logs(t->data);
}

/* ---- public API ---- */

pc_conn_server *pc_conn_server_new(uv_loop_t *loop, const pc_conn_server_opts *o,
                                   const pc_conn_proto *proto, void *user)
{
    pc_conn_server *s = pc_xcalloc(1, sizeof *s);
    s->o = *o;
    s->host = pc_xstrdup(o->host && o->host[0] ? o->host : "localhost");
    s->log_id = pc_xstrdup(o->log_id ? o->log_id : "server");
    s->o.host = s->host;
    s->o.log_id = s->log_id;
    if (!s->o.max_connections) s->o.max_connections = 1024;
    if (!s->o.busy_with) s->o.busy_with = "request";
    s->st = o->stats ? o->stats : &s->own_stats;
    s->env = (pc_conn_env){.loop = loop,
                           .proto = proto,
                           .user = user,
                           .log_id = s->log_id,
                           .alpn = o->tls ? o->alpn : NULL,
                           .quiet_ms = o->quiet_timeout_ms,
                           .idle_ms = o->idle_timeout_ms,
                           .write_ms = o->write_timeout_ms,
                           .linger_ms = o->linger_ms,
                           .on_close = on_conn_close,
                           .on_linger = on_conn_linger,
                           .on_free = on_conn_free};
    uv_timer_init(loop, &s->tick);
    s->tick.data = s;
    return s;
}

pc_log_limiter *pc_conn_server_limiter(pc_conn_server *s, pc_log_level lvl, const char *what)
{
    if (s->n_extra == MAX_LIMITERS) abort(); /* a programming error: raise MAX_LIMITERS */
    limiter *l = &s->extra[s->n_extra++];
    l->lvl = lvl;
    l->what = what;
    return &l->l;
}

int pc_conn_server_start(pc_conn_server *s, char *bound, size_t boundlen, pc_error *e)
{
    if (s->started || s->env.stopping)
        return pc_error_set(e, PC_EINVAL, "listen %s:%d: server already started", s->host,
                            s->o.port);
    pc_listener_opts lo = {.host = s->host,
                           .port = s->o.port,
                           .log_id = s->log_id,
                           .on_accept = on_accept,
                           .make_room = make_room,
                           .arg = s,
                           .stats = s->st};
    pc_error own = {0}; /* the listener's code, also when the caller passed no e */
    if (!e) e = &own;
    s->listener = pc_listener_start(s->env.loop, &lo, &s->port, bound, boundlen, e);
    if (!s->listener) return e->code;
    s->started = true;
    uv_timer_start(&s->tick, on_tick, LOG_TICK_MS, LOG_TICK_MS);
    uv_unref((uv_handle_t *)&s->tick);
    if (s->o.pausable) pc_http_pause_register(on_pause, s);
    return PC_OK;
}

const char *pc_conn_server_log_id(const pc_conn_server *s)
{
    return s->log_id;
}

int pc_conn_server_port(const pc_conn_server *s)
{
    return s->port;
}

static void on_listener_closed(void *arg)
{
    pc_conn_server *s = arg;
    s->closing_handles--;
    maybe_done(s);
}

static void on_tick_closed(uv_handle_t *h)
{
    on_listener_closed(h->data);
}

void pc_conn_server_shutdown(pc_conn_server *s, void (*done)(void *arg), void *arg)
{
    if (s->env.stopping) return;
    s->env.stopping = true;
    if (s->o.pausable) pc_http_pause_unregister(s);
    s->done = done;
    s->done_arg = arg;
    flush_logs(s);
    /* closing is asynchronous: no connection is freed while we walk them */
    for (pc_conn *c = s->env.conns; c; c = c->next) {
        if (c->closing || (c->finishing && !c->lingering)) continue;
        if (c->lingering || !s->env.proto->shutdown)
            pc_conn_close(c);
        else
            s->env.proto->shutdown(c);
    }
    /* both counted before either closes */
    s->closing_handles = 1 + (s->listener != NULL);
    uv_close((uv_handle_t *)&s->tick, on_tick_closed);
    if (s->listener) pc_listener_close(s->listener, on_listener_closed, s);
}
