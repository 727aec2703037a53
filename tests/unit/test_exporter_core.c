/* The exporter core (sdk/exporter.h) driven by a made-up exporter type, as a new exporter
 * would plug in: encode runs on the thread pool (on the loop when it is only a copy), the outcomes
 * a send reports reach upstream and the counters as the sender's rules say (retry, permanent,
 * queue, sink), the shutdown drains before it closes the transport; and the reading of HTTP answers
 * and the merging of the outcomes of a request sent in parts. */
#include <string.h>
#include <uv.h>

#include "check.h"
#include "net/http_client.h"
#include "net/url.h"
#include "sdk/config.h"
#include "sdk/exporter.h"
#include "sdk/exporter_http.h"
#include "sdk/pool.h"
#include "service/internal.h"
#include "proc_driver.h"

static uv_loop_t *loop;
static uv_thread_t loop_thread;

/* ---- the made-up exporter ---- */

typedef struct fake_cfg {
    pc_sender_cfg sender;
} fake_cfg;

static const pc_cfg_key fake_keys[] = {
    {"", PC_CFG_GROUP, "", offsetof(fake_cfg, sender), "the sending queue", pc_sender_keys},
    {0},
};

/* What the backend answers, attempt after attempt; what the exporter saw. */
static struct {
    pc_export_outcome script[8];
    int n_script;
    int attempts;
    int encoded_off_loop; /* encodes that ran on another thread than the loop's */
    bool is_copy;         /* what copy_def's encode_is_copy answers */
    int is_copy_calls;
    int encodes;
    char last_body[64];
    int in_flight;          /* requests sent, not answered */
    int in_flight_at_close; /* -1: close not called */
    uint64_t sent_at_close, failed_at_close;
    int stopping_calls;
    int closed, destroyed;
} fk;

typedef struct fake_req {
    pc_export_req r;
    uv_timer_t answer;
    pc_export_outcome o;
} fake_req;

static void fake_encode(pc_export_req *r)
{
    uv_thread_t self = uv_thread_self();
    if (!uv_thread_equal(&self, &loop_thread)) __atomic_add_fetch(&fk.encoded_off_loop, 1, 0);
    __atomic_add_fetch(&fk.encodes, 1, 0);
    pc_buf_printf(&r->body, "items=%zu", pc_batch_items(r->batch));
}

static void answered(uv_handle_t *h)
{
    fake_req *q = h->data;
    fk.in_flight--;
    pc_export_done(&q->r, &q->o);
}

static void answer(uv_timer_t *t)
{
    uv_close((uv_handle_t *)t, answered);
}

/* Answers a little later, as a backend does. */
static void fake_send(pc_export_req *r)
{
    fake_req *q = (fake_req *)r;
    snprintf(fk.last_body, sizeof fk.last_body, "%.*s", (int)r->body.len, (char *)r->body.data);
    q->o = fk.attempts < fk.n_script ? fk.script[fk.attempts] : PC_EXPORT_OK;
    fk.attempts++;
    fk.in_flight++;
    uv_timer_init(loop, &q->answer);
    q->answer.data = q;
    uv_timer_start(&q->answer, answer, 20, 0);
}

static void fake_stopping(pc_exporter *e)
{
    (void)e;
    fk.stopping_calls++;
}

static void fake_close(pc_exporter *e)
{
    fk.in_flight_at_close = fk.in_flight;
    fk.sent_at_close = e->counts.sent[PC_SIGNAL_PROFILES];
    fk.failed_at_close = e->counts.failed[PC_SIGNAL_PROFILES];
    fk.closed = 1;
    pc_exporter_closed(e);
}

static void fake_destroy(pc_exporter *e)
{
    (void)e;
    fk.destroyed = 1;
}

static const pc_exporter_def fake_def = {
    .req_size = sizeof(fake_req),
    .sender_cfg = offsetof(fake_cfg, sender),
    .encode = fake_encode,
    .send = fake_send,
    .stopping = fake_stopping,
    .close = fake_close,
    .destroy = fake_destroy,
};

static const pc_component_type fake_type = {
    .name = "fake",
    .kind = PC_KIND_EXPORTER,
    .cfg_size = sizeof(fake_cfg),
    .cfg = fake_keys,
    PC_EXPORTER_CORE(&fake_def),
    .signals = PC_SIGNALS_ALL,
};

/* The same exporter, but its encode may be only a copy (a request passed through). */
static bool fake_is_copy(const pc_export_req *r)
{
    CHECK(r->batch != NULL);
    fk.is_copy_calls++;
    return fk.is_copy;
}

static const pc_exporter_def copy_def = {
    .req_size = sizeof(fake_req),
    .sender_cfg = offsetof(fake_cfg, sender),
    .encode = fake_encode,
    .encode_is_copy = fake_is_copy,
    .send = fake_send,
    .close = fake_close,
};

static const pc_component_type copy_type = {
    .name = "fakecopy",
    .kind = PC_KIND_EXPORTER,
    .cfg_size = sizeof(fake_cfg),
    .cfg = fake_keys,
    PC_EXPORTER_CORE(&copy_def),
    .signals = PC_SIGNALS_ALL,
};

static const pc_cfg_key no_keys[] = {{0}};

static const pc_exporter_def sink_def = {
    .req_size = sizeof(fake_req),
    .sink = true,
    .encode = fake_encode,
    .send = fake_send,
    .close = fake_close,
};

static const pc_component_type sink_type = {
    .name = "fakesink",
    .kind = PC_KIND_EXPORTER,
    .cfg_size = sizeof(fake_cfg),
    .cfg = no_keys,
    PC_EXPORTER_CORE(&sink_def),
};

/* ---- driving it ---- */

/* Configured, created and started (proc_driver.h serves any component type); fk reset. */
static driver *exporter_new(const pc_component_type *t, const char *yaml)
{
    pc_error err = {0};
    driver *d = driver_new(t, yaml, &err);
    if (!d) {
        fprintf(stderr, "config: %s\n", err.msg);
        exit(1);
    }
    pc_error e = {0};
    CHECK_EQ_INT(t->start(&d->c, &e), 0);
    memset(&fk, 0, sizeof fk);
    fk.in_flight_at_close = -1;
    d->c.drain_deadline_ms = uv_now(loop) + 10000;
    return d;
}

/* Three samples in two profiles. */
static pc_batch *three_samples(void)
{
    return batch_from_json(
        "{\"resourceProfiles\":[{\"scopeProfiles\":[{\"profiles\":["
        "{\"sampleType\":{\"typeStrindex\":1,\"unitStrindex\":2},"
        "\"samples\":[{\"stackIndex\":1,\"values\":[\"5\"]},{\"stackIndex\":1,\"values\":[\"6\"]}]}"
        ","
        "{\"sampleType\":{\"typeStrindex\":1,\"unitStrindex\":2},"
        "\"samples\":[{\"stackIndex\":1,\"values\":[\"7\"]}]}]}]}],"
        "\"dictionary\":{\"mappingTable\":[{}],\"locationTable\":[{},{\"lines\":[{\"functionIndex\""
        ":1}]}],\"functionTable\":[{},{\"nameStrindex\":3}],\"linkTable\":[{}],"
        "\"stringTable\":[\"\",\"cpu\",\"nanoseconds\",\"main\"],\"attributeTable\":[{}],"
        "\"stackTable\":[{},{\"locationIndices\":[1]}]}}");
}

static uint64_t sent(driver *d)
{
    return pc_exporter_of(&d->c)->counts.sent[PC_SIGNAL_PROFILES];
}

static uint64_t failed(driver *d)
{
    return pc_exporter_of(&d->c)->counts.failed[PC_SIGNAL_PROFILES];
}

static pc_export_outcome outcome(int st, int retry_after_s, const char *msg)
{
    pc_export_outcome o;
    pc_export_outcome_set(&o, st, "%s", msg);
    o.retry_after_s = retry_after_s;
    return o;
}

#define NO_QUEUE                                                                                   \
    "sending_queue:\n  enabled: false\n"                                                           \
    "retry_on_failure:\n  initial_interval: 10ms\n  max_interval: 20ms\n"

/* ---- the tests ---- */

static void consume(driver *d)
{
    d->c.type->consume(&d->c, three_samples(), tc_up_done, &d->up);
}

/* A retryable answer is retried (Retry-After 0: at once); the second attempt's OK is what
 * upstream, waiting without a queue, is told; the samples count as sent once. */
static void test_retry_then_ok(void)
{
    driver *d = exporter_new(&fake_type, NO_QUEUE);
    fk.script[0] = outcome(PC_EAGAIN, 0, "backend busy");
    fk.n_script = 1;
    consume(d);
    uv_run(loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(d->up.calls, 1);
    CHECK_EQ_INT(d->up.st, PC_OK);
    CHECK_EQ_INT(fk.attempts, 2);
    CHECK_EQ_INT(fk.encodes, 2);
    CHECK_EQ_INT(fk.encoded_off_loop, 2);
    CHECK_STR(fk.last_body, "items=3");
    CHECK_EQ_INT(sent(d), 3);
    CHECK_EQ_INT(failed(d), 0);
    driver_free(d);
}

/* An encode that is only a copy runs on the loop (no hand-off to the pool and back), each
 * attempt; any other on the pool. */
static void test_encode_copy_on_loop(void)
{
    for (int copy = 0; copy < 2; copy++) {
        driver *d = exporter_new(&copy_type, NO_QUEUE);
        fk.is_copy = copy;
        fk.script[0] = outcome(PC_EAGAIN, 0, "backend busy");
        fk.n_script = 1;
        consume(d);
        uv_run(loop, UV_RUN_DEFAULT);
        CHECK_EQ_INT(d->up.st, PC_OK);
        CHECK_EQ_INT(fk.attempts, 2);
        CHECK_EQ_INT(fk.encodes, 2);
        CHECK_EQ_INT(fk.is_copy_calls, 2);
        CHECK_EQ_INT(fk.encoded_off_loop, copy ? 0 : 2);
        CHECK_STR(fk.last_body, "items=3");
        CHECK_EQ_INT(sent(d), 3);
        driver_free(d);
    }
}

static char upstream_msg[256];
static void msg_done(void *arg, int st, const char *msg)
{
    snprintf(upstream_msg, sizeof upstream_msg, "%s", msg ? msg : "(null)");
    tc_up_done(arg, st, msg);
}

/* A permanent answer is not retried: upstream hears it with the message, the samples count as
 * failed. */
static void test_permanent(void)
{
    driver *d = exporter_new(&fake_type, NO_QUEUE);
    fk.script[0] = outcome(PC_EINVAL, -1, "backend answered HTTP 400: bad");
    fk.n_script = 1;
    d->c.type->consume(&d->c, three_samples(), msg_done, &d->up);
    uv_run(loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(d->up.calls, 1);
    CHECK_EQ_INT(d->up.st, PC_EINVAL);
    CHECK_STR(upstream_msg, "backend answered HTTP 400: bad");
    CHECK_EQ_INT(fk.attempts, 1);
    CHECK_EQ_INT(failed(d), 3);
    CHECK_EQ_INT(sent(d), 0);
    driver_free(d);
}

/* With the queue (the default), upstream is told OK once the batch is queued, before any
 * answer; an overload and a partial success later, the batch counts as sent. */
static void test_queued(void)
{
    driver *d = exporter_new(&fake_type, "retry_on_failure:\n  initial_interval: 10ms\n");
    fk.script[0] = outcome(PC_EBUSY, 0, "slow down");
    fk.script[1] = PC_EXPORT_OK;
    fk.script[1].partial = true;
    fk.script[1].rejected = 1;
    fk.n_script = 2;
    consume(d);
    CHECK_EQ_INT(d->up.calls, 1); /* at once: queued */
    CHECK_EQ_INT(d->up.st, PC_OK);
    CHECK_EQ_INT(fk.attempts, 0);
    uv_run(loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(d->up.calls, 1);
    CHECK_EQ_INT(fk.attempts, 2);
    CHECK_EQ_INT(sent(d), 3);
    driver_free(d);
}

/* The exporter's admission (pc_exporter_admit, asked by receivers before decoding). */
static pc_admit admit(driver *d)
{
    size_t room = SIZE_MAX;
    return pc_exporter_admit(&d->c, &room);
}

/* A round of sends waiting behind the ones in flight (as many queued as there are consumers)
 * admits as behind (the pipeline's decodes are not chained to, sdk/pool.h) until the queue
 * drains; without the queue nothing is queued, so nothing is behind. */
static void test_backlog_admits_behind(void)
{
    driver *d = exporter_new(&fake_type, "sending_queue:\n  num_consumers: 2\n");
    CHECK_EQ_INT(admit(d), PC_ADMIT_OK);
    for (int i = 0; i < 3; i++)
        consume(d); /* two in flight, one queued */
    CHECK_EQ_INT(admit(d), PC_ADMIT_OK);
    consume(d);
    CHECK_EQ_INT(admit(d), PC_ADMIT_BEHIND);
    uv_run(loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(fk.attempts, 4);
    CHECK_EQ_INT(admit(d), PC_ADMIT_OK);
    driver_free(d);

    /* A failing backend's backlog is not behind: no CPU given to the loop sends it sooner. */
    d = exporter_new(&fake_type, "sending_queue:\n  num_consumers: 2\n"
                                 "retry_on_failure:\n  initial_interval: 50ms\n");
    fk.script[0] = fk.script[1] = outcome(PC_EAGAIN, -1, "backend down");
    fk.n_script = 2;
    for (int i = 0; i < 4; i++)
        consume(d);
    CHECK_EQ_INT(admit(d), PC_ADMIT_BEHIND); /* no answer yet */
    while (fk.attempts < 2 || fk.in_flight > 0)
        uv_run(loop, UV_RUN_ONCE);
    CHECK_EQ_INT(fk.attempts, 2);        /* both answered, their retries wait */
    CHECK_EQ_INT(admit(d), PC_ADMIT_OK); /* two still queued */
    uv_run(loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(fk.attempts, 6);
    CHECK_EQ_INT(sent(d), 12);
    CHECK_EQ_INT(admit(d), PC_ADMIT_OK);
    driver_free(d);

    /* A full queue refuses. */
    d = exporter_new(&fake_type, "sending_queue:\n  num_consumers: 1\n  queue_size: 2\n");
    for (int i = 0; i < 3; i++)
        consume(d); /* one in flight, two queued */
    CHECK_EQ_INT(admit(d), PC_ADMIT_QUEUE_FULL);
    uv_run(loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(admit(d), PC_ADMIT_OK);
    driver_free(d);

    d = exporter_new(&fake_type, "sending_queue:\n  enabled: false\n  num_consumers: 1\n");
    for (int i = 0; i < 3; i++)
        consume(d);
    CHECK_EQ_INT(admit(d), PC_ADMIT_OK);
    uv_run(loop, UV_RUN_DEFAULT);
    driver_free(d);
}

/* A consumer whose admission is fixed (a pipeline's verdict). */
typedef struct fixed_admit {
    pc_consumer base;
    pc_admit a;
} fixed_admit;

static pc_admit fixed_admit_fn(pc_consumer *self, size_t *room)
{
    (void)room;
    return ((fixed_admit *)self)->a;
}

/* A receiver feeding several pipelines is admitted as the worst of them: behind where one is
 * behind and none refuses, refused where one refuses. */
static void test_fanout_admits_worst(void)
{
    static const pc_admit cases[][3] = {
        /* first, second, the fan-out's */
        {PC_ADMIT_OK, PC_ADMIT_OK, PC_ADMIT_OK},
        {PC_ADMIT_OK, PC_ADMIT_BEHIND, PC_ADMIT_BEHIND},
        {PC_ADMIT_BEHIND, PC_ADMIT_OK, PC_ADMIT_BEHIND},
        {PC_ADMIT_BEHIND, PC_ADMIT_QUEUE_FULL, PC_ADMIT_QUEUE_FULL},
        {PC_ADMIT_MEMORY, PC_ADMIT_BEHIND, PC_ADMIT_MEMORY},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        fixed_admit t[2] = {{.base.admit = fixed_admit_fn, .a = cases[k][0]},
                            {.base.admit = fixed_admit_fn, .a = cases[k][1]}};
        pc_consumer *targets[2] = {&t[0].base, &t[1].base};
        pc_consumer *f = pc_fanout_new(targets, 2);
        size_t room = SIZE_MAX;
        CHECK_EQ_INT(pc_consumer_admit(f, &room), cases[k][2]);
        CHECK_EQ_INT(pc_admit_refused(cases[k][2]), cases[k][2] > PC_ADMIT_BEHIND);
        pc_fanout_free(f);
    }
    CHECK(!pc_admit_refused(PC_ADMIT_BEHIND));
    CHECK(pc_admit_refused(PC_ADMIT_QUEUE_FULL));
}

/* A component type whose admission is fixed. */
static pc_admit fixed_type_admit(pc_component *c, size_t *room)
{
    (void)room;
    return *(const pc_admit *)c->priv;
}

/* Along a pipeline (the service's svc_component_admit): a processor's own verdict, then what
 * follows it, the worse of the two; an exporter behind makes its whole chain behind, and a
 * refusal anywhere refuses. */
static void test_chain_admits_worst(void)
{
    static const pc_component_type proc = {
        .name = "p", .kind = PC_KIND_PROCESSOR, .admit = fixed_type_admit};
    static const pc_component_type exp = {
        .name = "e", .kind = PC_KIND_EXPORTER, .admit = fixed_type_admit};
    static const pc_admit cases[][3] = {
        /* processor, exporter, the processor's consumer */
        {PC_ADMIT_OK, PC_ADMIT_OK, PC_ADMIT_OK},
        {PC_ADMIT_OK, PC_ADMIT_BEHIND, PC_ADMIT_BEHIND},
        {PC_ADMIT_OK, PC_ADMIT_QUEUE_FULL, PC_ADMIT_QUEUE_FULL},
        {PC_ADMIT_MEMORY, PC_ADMIT_BEHIND, PC_ADMIT_MEMORY},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        pc_admit pa = cases[k][0], ea = cases[k][1];
        pc_component e = {.type = &exp, .priv = &ea};
        e.self.admit = svc_component_admit;
        pc_component p = {.type = &proc, .priv = &pa, .next = &e.self};
        p.self.admit = svc_component_admit;
        size_t room = SIZE_MAX;
        CHECK_EQ_INT(pc_consumer_admit(&p.self, &room), cases[k][2]);
    }
}

/* Shutdown with a request in flight (driver_free shuts down, runs the loop, destroys): the
 * stopping hook first; the transport is closed only once the answer came and was counted. */
static void test_shutdown_drains_then_closes(void)
{
    driver *d = exporter_new(&fake_type, NULL);
    consume(d);
    driver_free(d);
    CHECK_EQ_INT(fk.stopping_calls, 1);
    CHECK(fk.closed);
    CHECK_EQ_INT(fk.in_flight_at_close, 0);
    CHECK_EQ_INT(fk.sent_at_close, 3);
    CHECK_EQ_INT(fk.attempts, 1);
    CHECK(fk.destroyed);
}

/* A sink: no sender, no retry; a failed write counts as failed while upstream is told OK; its
 * shutdown waits for the batch in flight. */
static void test_sink(void)
{
    driver *d = exporter_new(&sink_type, NULL);
    fk.script[0] = outcome(PC_EINVAL, -1, "cannot write");
    fk.n_script = 1;
    consume(d);
    uv_run(loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(d->up.calls, 1);
    CHECK_EQ_INT(d->up.st, PC_OK);
    CHECK_EQ_INT(fk.attempts, 1);
    CHECK_EQ_INT(failed(d), 3);
    CHECK_EQ_INT(sent(d), 0);
    CHECK(pc_exporter_of(&d->c)->sender == NULL);
    consume(d); /* in flight when the shutdown starts */
    driver_free(d);
    CHECK_EQ_INT(fk.attempts, 2);
    CHECK_EQ_INT(fk.in_flight_at_close, 0);
    CHECK_EQ_INT(fk.sent_at_close, 3);
    CHECK_EQ_INT(fk.failed_at_close, 3);
}

/* The OTLP/HTTP spec's reading of answers: 2xx OK; 429, 502, 503, 504 and network errors
 * retryable (429 as overload) with Retry-After; any other status permanent. */
static void test_http_outcome(void)
{
    pc_url u = {.port = 4318};
    snprintf(u.host, sizeof u.host, "backend");
    pc_export_outcome o;
    static const struct {
        int status;
        int st;
    } table[] = {{200, PC_OK},     {204, PC_OK},     {429, PC_EBUSY},  {502, PC_EAGAIN},
                 {503, PC_EAGAIN}, {504, PC_EAGAIN}, {400, PC_EINVAL}, {401, PC_EINVAL},
                 {500, PC_EINVAL}, {301, PC_EINVAL}};
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        pc_http_response r = {.status = table[i].status, .retry_after_s = 7};
        pc_exporter_http_outcome(&r, &u, &o);
        CHECK_EQ_INT(o.st, table[i].st);
        bool retried = table[i].st == PC_EAGAIN || table[i].st == PC_EBUSY;
        CHECK_EQ_INT(o.retry_after_s, retried ? 7 : -1);
    }
    static const char body[] = "no such\r\ntenant";
    pc_http_response bad = {.status = 400,
                            .retry_after_s = -1,
                            .body = (const uint8_t *)body,
                            .body_len = sizeof body - 1};
    pc_exporter_http_outcome(&bad, &u, &o);
    CHECK_STR(o.msg, "backend answered HTTP 400: no such  tenant");
    pc_http_response down = {.error = UV_ECONNREFUSED, .retry_after_s = -1};
    pc_exporter_http_outcome(&down, &u, &o);
    CHECK_EQ_INT(o.st, PC_EAGAIN);
    CHECK_CONTAINS(o.msg, "sending to backend:4318 failed: ");
}

/* A request sent in parts: retryable wins over permanent (the client should send again), the
 * message is the winner's, the Retry-After the longest. */
static void test_merge(void)
{
    pc_export_outcome acc = PC_EXPORT_OK;
    pc_export_outcome parts[] = {PC_EXPORT_OK, outcome(PC_EINVAL, -1, "bad label"),
                                 outcome(PC_EBUSY, 9, "slow down"),
                                 outcome(PC_EAGAIN, 3, "unavailable"), PC_EXPORT_OK};
    pc_export_outcome_merge(&acc, &parts[0]);
    CHECK_EQ_INT(acc.st, PC_OK);
    pc_export_outcome_merge(&acc, &parts[1]);
    CHECK_EQ_INT(acc.st, PC_EINVAL);
    CHECK_STR(acc.msg, "bad label");
    for (size_t i = 2; i < sizeof parts / sizeof parts[0]; i++)
        pc_export_outcome_merge(&acc, &parts[i]);
    CHECK_EQ_INT(acc.st, PC_EAGAIN);
    CHECK_STR(acc.msg, "unavailable");
    CHECK_EQ_INT(acc.retry_after_s, 9);
}

int main(void)
{
    loop = uv_default_loop();
    loop_thread = uv_thread_self();
    (void)driver_run; /* proc_driver.h's, for processors: an exporter passes nothing on */
    RUN(test_retry_then_ok);
    RUN(test_encode_copy_on_loop);
    RUN(test_permanent);
    RUN(test_queued);
    RUN(test_backlog_admits_behind);
    RUN(test_fanout_admits_worst);
    RUN(test_chain_admits_worst);
    RUN(test_shutdown_drains_then_closes);
    RUN(test_sink);
    RUN(test_http_outcome);
    RUN(test_merge);
    uv_loop_close(loop);
    fprintf(stderr, "%d checks, %d failures\n", check_count, check_failures);
    return check_failures ? 1 : 0;
}
