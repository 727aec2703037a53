/* Receiver "kafka": every signal from Kafka topics, as the Collector's kafkareceiver (its keys and
 * defaults), through librdkafka's balanced consumer (a consumer group).
 *
 * One message's way (ARCHITECTURE.md §2, with Kafka instead of a socket):
 *   loop   the hand-off of sdk/kafka.h wakes the loop; serve() takes every message waiting
 *          (rd_kafka_consumer_poll(rk, 0)) into its partition's list, in offset order;
 *   pool   a partition offers its messages in order, a few at a time: each is decoded (OTLP
 *          protobuf or JSON, under a decode budget as the OTLP receiver's, through the one decode
 *          gate of sdk/receiver_http.h), validated, and given the header_extraction
 *          attributes;
 *   loop   the batch goes to the signal's route; once the pipeline answers:
 *          - accepted: the message is done. Its offset is stored (rd_kafka_offsets_store; the
 *            auto-commit or an explicit commit sends it) only when every message before it in
 *            the partition is done too: what is committed was accepted (at least once);
 *          - refused (memory limiter, a full sending queue, ...): the partition is paused
 *            (rd_kafka_pause_partitions: nothing more is fetched for it) and the same message is
 *            offered again after a backoff (100 ms, doubling up to 5 s) until the pipeline takes
 *            it. Nothing is skipped, unless message_marking::on_error (on_permanent_error for a
 *            permanent refusal) says to mark refused messages anyway;
 *          - undecodable or invalid: counted (otelcol_kafka_receiver_unmarshal_failed_*), logged
 *            with topic, partition and offset, and skipped: it can never succeed.
 * A partition with many messages waiting is paused until the pipeline catches up. Rebalances
 * arrive in serve() too: a revoked partition's waiting messages are dropped (its next owner
 * starts at the committed offset) and answers for its messages in flight are ignored.
 * Shutdown stops taking messages, waits for the pipeline's answers to those in flight, then
 * closes the consumer (rd_kafka_consumer_close: the stored offsets are committed, the group is
 * left) on the thread pool. */
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/budget.h"
#include "base/utf8.h"
#include "sdk/component.h"
#include "sdk/kafka.h"
#include "sdk/receiver.h"
#include "sdk/telemetry.h"

#define WINDOW         4  /* messages of one partition in decode or in the pipeline at once */
#define MAX_JOBS       16 /* ... of every partition (each holds a decoded batch) */
#define HIGH_WATER     64 /* a partition with this many waiting is paused */
#define LOW_WATER      16 /* ... and resumed below this */
#define WAITING_BYTES  (32u << 20) /* every partition is paused while this much waits */
#define BACKOFF_MIN_MS 100         /* after a refusal */
#define BACKOFF_MAX_MS 5000
#define DECODE_BASE    (4u << 20) /* a message's decode budget: 16 x max(its size, this) */

static const char *const encodings[] = {"otlp_proto", "otlp_json", NULL};
static const char *const offsets[] = {"latest", "earliest", NULL};

typedef struct kafka_recv_cfg {
    pc_kafka_client_cfg client;
    char *topic[PC_SIGNAL_COUNT]; /* <signal>::topic (deprecated in the Collector for topics) */
    pc_strlist topics[PC_SIGNAL_COUNT];
    int encoding[PC_SIGNAL_COUNT];
    char *group_id;
    int initial_offset;
    uint64_t session_timeout_ms, heartbeat_interval_ms;
    bool autocommit;
    uint64_t autocommit_interval_ms;
    int64_t min_fetch_size, max_fetch_size, max_partition_fetch_size;
    uint64_t max_fetch_wait_ms;
    bool mark_after, mark_on_error, mark_on_permanent_error;
    bool extract_headers;
    pc_strlist headers;
} kafka_recv_cfg;

/* clang-format off */
#define SIGNAL_KEYS(sig, name, path, deftopic) \
    {name ".topics", PC_CFG_LIST, deftopic, offsetof(kafka_recv_cfg, topics[sig]), "topics " name " are consumed from (a leading ^ makes one a regular expression)", NULL}, \
    {name ".topic", PC_CFG_STRING, "", offsetof(kafka_recv_cfg, topic[sig]), "deprecated in the Collector: one topic, instead of " name "::topics", NULL}, \
    {name ".encoding", PC_CFG_ENUM, "otlp_proto", offsetof(kafka_recv_cfg, encoding[sig]), "message encoding of " name, encodings},
static const pc_cfg_key kafka_recv_keys[] = {
    {"", PC_CFG_GROUP, "", offsetof(kafka_recv_cfg, client), "the Kafka client", pc_kafka_client_keys},
    PC_SIGNALS_EACH(SIGNAL_KEYS)
    {"group_id", PC_CFG_STRING, "otel-collector", offsetof(kafka_recv_cfg, group_id), "consumer group", NULL},
    {"initial_offset", PC_CFG_ENUM, "latest", offsetof(kafka_recv_cfg, initial_offset), "where a partition without a committed offset starts", offsets},
    {"session_timeout", PC_CFG_DURATION, "10s", offsetof(kafka_recv_cfg, session_timeout_ms), "a member not heard from for this long leaves the group", NULL},
    {"heartbeat_interval", PC_CFG_DURATION, "3s", offsetof(kafka_recv_cfg, heartbeat_interval_ms), "time between heartbeats to the group", NULL},
    {"autocommit.enable", PC_CFG_BOOL, "true", offsetof(kafka_recv_cfg, autocommit), "commit marked offsets every autocommit::interval (false: commit each at once)", NULL},
    {"autocommit.interval", PC_CFG_DURATION, "1s", offsetof(kafka_recv_cfg, autocommit_interval_ms), "how often marked offsets are committed", NULL},
    {"min_fetch_size", PC_CFG_INT, "1", offsetof(kafka_recv_cfg, min_fetch_size), "least bytes a fetch waits for (up to max_fetch_wait)", NULL},
    {"max_fetch_size", PC_CFG_INT, "1048576", offsetof(kafka_recv_cfg, max_fetch_size), "most bytes one fetch returns", NULL},
    {"max_partition_fetch_size", PC_CFG_INT, "1048576", offsetof(kafka_recv_cfg, max_partition_fetch_size), "most bytes one fetch returns for a partition", NULL},
    {"max_fetch_wait", PC_CFG_DURATION, "250ms", offsetof(kafka_recv_cfg, max_fetch_wait_ms), "longest a broker waits for min_fetch_size", NULL},
    {"message_marking.after", PC_CFG_BOOL, "true", offsetof(kafka_recv_cfg, mark_after), "commit a message's offset only once the pipeline accepted it (at least once; the Collector's default is false: marked when taken, lost if profcol dies before the pipeline took it)", NULL},
    {"message_marking.on_error", PC_CFG_BOOL, "false", offsetof(kafka_recv_cfg, mark_on_error), "mark a message the pipeline refused with a retryable error and go on (false: pause the partition and offer the message again until accepted)", NULL},
    {"message_marking.on_permanent_error", PC_CFG_BOOL, "", offsetof(kafka_recv_cfg, mark_on_permanent_error), "the same for a permanent refusal (default: on_error)", NULL},
    {"header_extraction.extract_headers", PC_CFG_BOOL, "false", offsetof(kafka_recv_cfg, extract_headers), "add the headers listed in header_extraction::headers to every resource as kafka.header.<name>", NULL},
    {"header_extraction.headers", PC_CFG_LIST, "", offsetof(kafka_recv_cfg, headers), "header names (exact match)", NULL},
    {0},
};
/* clang-format on */

/* ---- state ----------------------------------------------------------------------------------- */

enum { M_WAITING, M_FLIGHT, M_DONE };

typedef struct tp tp;

/* One message taken from Kafka, until its offset is stored. */
typedef struct msg {
    struct msg *next;
    tp *t; /* NULL once its partition was revoked (an answer for it is then ignored) */
    rd_kafka_message_t *m;
    int64_t offset;
    int state;
} msg;

/* One topic partition this member has been assigned (kept, with its counters, when revoked). */
struct tp {
    tp *next;
    struct kafka_recv *x;
    char *topic;
    int32_t partition;
    pc_signal sig;
    bool assigned, paused, backing_off;
    msg *head, *tail; /* every message taken whose offset is not stored yet, in offset order */
    size_t n_waiting, n_flight;
    unsigned backoff_ms;
    uv_timer_t timer; /* the backoff */
    bool timer_open;
    uint64_t ok, failed, bytes_ok, bytes_failed, unmarshal_failed;
    uint64_t current_offset; /* gauge: the last offset taken */
    int64_t next_offset;     /* after the last offset taken */
};

typedef struct kafka_recv {
    pc_kafka k; /* first: librdkafka's opaque */
    pc_component *c;
    tp *tps;
    size_t jobs;          /* decodes and pipeline calls in flight */
    size_t waiting_bytes; /* of the messages taken and not yet offered */
    bool stopping;
    int timers_closing;
    regex_t *re[PC_SIGNAL_COUNT]; /* the ^regular expression topics of each signal */
    size_t n_re[PC_SIGNAL_COUNT];
    pc_receiver_core core;
    pc_receiver_stats stats;
    uint64_t partitions_started, partitions_closed, skipped;
    pc_log_limiter skipped_log, consume_log;
    pc_shutdown_done shutdown_done;
} kafka_recv;

typedef struct job {
    pc_receive rq; /* first: the recipe's part */
    kafka_recv *x;
    msg *mm;
    bool json;
    char who[320]; /* "topic t, partition 0, offset 7 (120 bytes)" */
} job;

/* ---- config ------------------------------------------------------------------------------- */

static int kafka_recv_validate(void *cfgp, const pc_node *node, const char *path, pc_error *err)
{
    kafka_recv_cfg *cfg = cfgp;
    if (pc_kafka_client_validate(&cfg->client, node, path, err)) return PC_EINVAL;
    for (int sig = 0; sig < PC_SIGNAL_COUNT; sig++) {
        const char *name = pc_signal_infos[sig].name;
        const pc_node *sn = pc_node_get(node, name);
        char key[32];
        if (cfg->topic[sig]) { /* as the Collector: topic stands for topics when they are unset */
            snprintf(key, sizeof key, "%s.topic", name);
            if (pc_node_get(sn, "topics"))
                return pc_cfg_key_errorf(err, node, path, key,
                                         "set %s::topic or %s::topics, not both", name, name);
            for (size_t i = 0; i < cfg->topics[sig].n; i++) /* the default's */
                free(cfg->topics[sig].v[i]);
            free(cfg->topics[sig].v);
            cfg->topics[sig].v = pc_xmalloc(sizeof(char *));
            cfg->topics[sig].v[0] = pc_xstrdup(cfg->topic[sig]);
            cfg->topics[sig].n = 1;
        }
        snprintf(key, sizeof key, "%s.topics", name);
        if (cfg->topics[sig].n == 0)
            return pc_cfg_key_errorf(err, node, path, key, "at least one topic");
        for (size_t i = 0; i < cfg->topics[sig].n; i++) {
            const char *t = cfg->topics[sig].v[i];
            regex_t re;
            if (!*t) return pc_cfg_key_errorf(err, node, path, key, "a topic must not be empty");
            if (t[0] == '^') {
                if (regcomp(&re, t, REG_EXTENDED | REG_NOSUB))
                    return pc_cfg_key_errorf(err, node, path, key,
                                             "\"%s\" is not a valid regular expression", t);
                regfree(&re);
            }
        }
    }
    if (!cfg->group_id || !*cfg->group_id)
        return pc_cfg_key_errorf(err, node, path, "group_id", "must not be empty");
    if (!node || !pc_node_get(pc_node_get(node, "message_marking"), "on_permanent_error"))
        cfg->mark_on_permanent_error = cfg->mark_on_error;
    if (cfg->session_timeout_ms < 1000 || cfg->session_timeout_ms > 3600000)
        return pc_cfg_key_errorf(err, node, path, "session_timeout", "must be between 1s and 1h");
    if (cfg->heartbeat_interval_ms == 0 || cfg->heartbeat_interval_ms >= cfg->session_timeout_ms)
        return pc_cfg_key_errorf(err, node, path, "heartbeat_interval",
                                 "must be above 0 and below session_timeout");
    if (cfg->autocommit_interval_ms == 0)
        return pc_cfg_key_errorf(err, node, path, "autocommit.interval", "must be > 0");
    if (cfg->min_fetch_size < 1 || cfg->min_fetch_size > 100000000)
        return pc_cfg_key_errorf(err, node, path, "min_fetch_size",
                                 "must be between 1 and 100000000");
    if (cfg->max_fetch_size < cfg->min_fetch_size || cfg->max_fetch_size > 2147483135)
        return pc_cfg_key_errorf(err, node, path, "max_fetch_size",
                                 "must be at least min_fetch_size and below 2 GiB");
    if (cfg->max_partition_fetch_size < 1 || cfg->max_partition_fetch_size > cfg->max_fetch_size)
        return pc_cfg_key_errorf(err, node, path, "max_partition_fetch_size",
                                 "must be between 1 and max_fetch_size");
    if (cfg->max_fetch_wait_ms > 300000)
        return pc_cfg_key_errorf(err, node, path, "max_fetch_wait", "must be at most 5m");
    if (cfg->extract_headers && cfg->headers.n == 0)
        return pc_cfg_key_errorf(err, node, path, "header_extraction.headers",
                                 "list the headers to extract");
    return 0;
}

/* The signal a topic's messages are, or -1 (a topic the subscription no longer names). */
static int signal_of(const kafka_recv *x, const char *topic)
{
    const kafka_recv_cfg *cfg = x->c->cfg;
    for (int sig = 0; sig < PC_SIGNAL_COUNT; sig++) {
        if (!x->c->route[sig]) continue;
        for (size_t i = 0; i < cfg->topics[sig].n; i++)
            if (cfg->topics[sig].v[i][0] != '^' && !strcmp(cfg->topics[sig].v[i], topic))
                return sig;
        for (size_t i = 0; i < x->n_re[sig]; i++)
            if (regexec(&x->re[sig][i], topic, 0, NULL, 0) == 0) return sig;
    }
    return -1;
}

/* ---- partitions ----------------------------------------------------------------------------- */

static double lag_metric(const void *arg)
{
    const tp *t = arg;
    int64_t lo, hi;
    if (!t->x->k.rk || t->x->k.closing || !t->assigned || t->next_offset < 0) return 0;
    if (rd_kafka_get_watermark_offsets(t->x->k.rk, t->topic, t->partition, &lo, &hi) ||
        hi < t->next_offset)
        return 0;
    return (double)(hi - t->next_offset);
}

static tp *tp_find(kafka_recv *x, const char *topic, int32_t partition, bool create)
{
    for (tp *t = x->tps; t; t = t->next)
        if (t->partition == partition && !strcmp(t->topic, topic)) return t;
    int sig = signal_of(x, topic);
    if (!create || sig < 0) return NULL;
    tp *t = pc_xcalloc(1, sizeof *t);
    t->x = x;
    t->topic = pc_xstrdup(topic);
    t->partition = partition;
    t->sig = (pc_signal)sig;
    t->next_offset = -1;
    t->backoff_ms = BACKOFF_MIN_MS;
    uv_timer_init(x->c->loop, &t->timer);
    t->timer.data = t;
    t->timer_open = true;
    t->next = x->tps;
    x->tps = t;
    char labels[512], name[128];
    pc_component *c = x->c;
    for (int ok = 1; ok >= 0; ok--) {
        snprintf(labels, sizeof labels,
                 "receiver=\"%s\",topic=\"%s\",partition=\"%d\",outcome=\"%s\"", c->id, topic,
                 (int)partition, ok ? "success" : "failure");
        pc_metric_u64(c, "otelcol_kafka_receiver_records", "Messages (records) received",
                      PC_METRIC_COUNTER, labels, ok ? &t->ok : &t->failed);
        pc_metric_u64(c, "otelcol_kafka_receiver_messages",
                      "Messages received (deprecated in the Collector for "
                      "otelcol_kafka_receiver_records)",
                      PC_METRIC_COUNTER, labels, ok ? &t->ok : &t->failed);
        pc_metric_u64(c, "otelcol_kafka_receiver_bytes_uncompressed",
                      "Bytes of message values received, uncompressed", PC_METRIC_COUNTER, labels,
                      ok ? &t->bytes_ok : &t->bytes_failed);
    }
    snprintf(labels, sizeof labels, "receiver=\"%s\",topic=\"%s\",partition=\"%d\"", c->id, topic,
             (int)partition);
    pc_metric_u64(c, "otelcol_kafka_receiver_current_offset", "Offset of the last message taken",
                  PC_METRIC_GAUGE, labels, &t->current_offset);
    pc_metric_fn(c, "otelcol_kafka_receiver_offset_lag",
                 "Messages in the partition after the last one taken", PC_METRIC_GAUGE, labels,
                 lag_metric, t);
    snprintf(name, sizeof name, "otelcol_kafka_receiver_unmarshal_failed_%s",
             t->sig == PC_SIGNAL_PROFILES ? "profiles" : pc_signal_infos[t->sig].metric);
    pc_metric_u64(c, name, "Messages that could not be decoded (skipped)", PC_METRIC_COUNTER,
                  labels, &t->unmarshal_failed);
    return t;
}

static void tp_list(tp *t, rd_kafka_topic_partition_list_t **l)
{
    if (!*l) *l = rd_kafka_topic_partition_list_new(4);
    rd_kafka_topic_partition_list_add(*l, t->topic, t->partition);
}

/* Stop or restart fetching t (nothing is lost: librdkafka resumes after the last message
 * handed to us). */
static void tp_pause(tp *t, bool pause)
{
    if (t->paused == pause || !t->assigned) return;
    rd_kafka_topic_partition_list_t *l = NULL;
    tp_list(t, &l);
    if (pause)
        rd_kafka_pause_partitions(t->x->k.rk, l);
    else
        rd_kafka_resume_partitions(t->x->k.rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    t->paused = pause;
}

static void msg_free(msg *mm)
{
    if (mm->m) rd_kafka_message_destroy(mm->m);
    free(mm);
}

/* Store the offset after the longest run of done messages at the head (at least once: never past
 * a message the pipeline has not accepted). */
static void tp_advance(tp *t)
{
    kafka_recv *x = t->x;
    const kafka_recv_cfg *cfg = x->c->cfg;
    int64_t store = -1;
    while (t->head && t->head->state == M_DONE) {
        msg *mm = t->head;
        t->head = mm->next;
        if (!t->head) t->tail = NULL;
        store = mm->offset + 1;
        msg_free(mm);
    }
    if (store < 0 || !cfg->mark_after || !t->assigned) return;
    rd_kafka_topic_partition_list_t *l = NULL;
    tp_list(t, &l);
    l->elems[0].offset = store;
    rd_kafka_offsets_store(x->k.rk, l);
    if (!cfg->autocommit) rd_kafka_commit(x->k.rk, l, 1);
    rd_kafka_topic_partition_list_destroy(l);
}

/* Drop t's messages (revoked, or shutting down): waiting and done ones at once, those in flight
 * when their answer comes. */
static void tp_drop(tp *t)
{
    for (msg *mm = t->head, *next; mm; mm = next) {
        next = mm->next;
        if (mm->state == M_FLIGHT) {
            mm->t = NULL;
            continue;
        }
        if (mm->state == M_WAITING) t->x->waiting_bytes -= mm->m->len;
        msg_free(mm);
    }
    t->head = t->tail = NULL;
    t->n_waiting = t->n_flight = 0;
    t->backing_off = false;
    t->backoff_ms = BACKOFF_MIN_MS;
    if (t->timer_open) uv_timer_stop(&t->timer);
}

/* ---- decode (thread pool) ------------------------------------------------------------------- */

static int decode(pc_receive *rq, pc_budget *budget, pc_error *e)
{
    job *j = (job *)rq;
    const rd_kafka_message_t *m = j->mm->m;
    const uint8_t *data = m->payload ? m->payload : (const uint8_t *)"";
    return pc_batch_decode(rq->sig, data, m->len, j->json, budget, &rq->batch, e);
}

/* header_extraction: the headers named, as resource attributes kafka.header.<name>. */
static void decoded(pc_receive *rq)
{
    job *j = (job *)rq;
    const kafka_recv_cfg *cfg = j->x->c->cfg;
    rd_kafka_headers_t *hdrs;
    if (!cfg->extract_headers || rd_kafka_message_headers(j->mm->m, &hdrs)) return;
    for (size_t i = 0; i < cfg->headers.n; i++) {
        const void *v;
        size_t len;
        char key[300];
        if (rd_kafka_header_get_last(hdrs, cfg->headers.v[i], &v, &len) || !v ||
            !pc_utf8_valid(v, len))
            continue;
        snprintf(key, sizeof key, "kafka.header.%s", cfg->headers.v[i]);
        pc_batch_set_resource_attr(rq->batch, key, v, len);
    }
}

/* ---- the loop side -------------------------------------------------------------------------- */

static void dispatch(tp *t);
static void maybe_close(kafka_recv *x);

static void job_end(job *j)
{
    j->x->jobs--;
    free(j);
}

static void retry_fire(uv_timer_t *h)
{
    tp *t = h->data;
    t->backing_off = false;
    dispatch(t);
}

/* The message is done with: accepted, or skipped (undecodable, or marked on a refusal). */
static void msg_done(msg *mm, bool ok, size_t bytes)
{
    tp *t = mm->t;
    mm->state = M_DONE;
    rd_kafka_message_destroy(mm->m); /* only its offset matters now */
    mm->m = NULL;
    t->n_flight--;
    if (ok) {
        t->ok++;
        t->bytes_ok += bytes;
        if (!t->backing_off) t->backoff_ms = BACKOFF_MIN_MS;
    } else {
        t->failed++;
        t->bytes_failed += bytes;
    }
    tp_advance(t);
}

/* Offer mm again after the backoff, with its partition paused meanwhile. */
static void msg_retry(msg *mm)
{
    tp *t = mm->t;
    kafka_recv *x = t->x;
    mm->state = M_WAITING;
    t->n_flight--;
    t->n_waiting++;
    x->waiting_bytes += mm->m->len;
    if (x->stopping) return; /* not committed: offered again at the next start */
    tp_pause(t, true);
    if (!t->backing_off) {
        t->backing_off = true;
        uv_timer_start(&t->timer, retry_fire, t->backoff_ms, 0);
        t->backoff_ms = t->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : t->backoff_ms * 2;
    }
}

/* The pipelines' refusal: the message offered again after a backoff, or marked and skipped
 * (counted and logged) as message_marking says. */
static void refused(job *j, int st, const char *msg_text)
{
    kafka_recv *x = j->x;
    msg *mm = j->mm;
    const kafka_recv_cfg *cfg = x->c->cfg;
    bool mark = pc_err_retryable(st) ? cfg->mark_on_error : cfg->mark_on_permanent_error;
    if (!mark) {
        msg_retry(mm);
        return;
    }
    x->skipped++;
    PC_WARN_RATELIMITED(&x->skipped_log, x->c->id,
                        "skipped %zu %s refused by the pipeline (message_marking): %s: %s",
                        j->rq.items, pc_signal_infos[j->rq.sig].items, j->who,
                        msg_text ? msg_text : pc_strerror(st));
    msg_done(mm, false, mm->m->len);
}

/* The recipe's outcome for one message (sdk/receiver.h). */
static void answer(pc_receive *rq, int st, const char *msg_text)
{
    job *j = (job *)rq;
    kafka_recv *x = j->x;
    msg *mm = j->mm;
    tp *t = mm->t;
    if (!t || st == PC_ECANCELED) { /* revoked meanwhile: its next owner takes it from the
                                       committed offset */
        msg_free(mm);
    } else if (st == PC_OK) {
        msg_done(mm, true, mm->m->len);
    } else if (st == PC_EAGAIN && rq->stage != PC_RECEIVE_PIPELINE) {
        msg_retry(mm); /* no memory now, or a full queue: offered again later */
    } else if (rq->stage == PC_RECEIVE_DECODE) {
        t->unmarshal_failed++; /* it will never decode: counted and logged by the recipe */
        msg_done(mm, false, mm->m->len);
    } else {
        refused(j, st, msg_text);
    }
    bool admission = rq->stage == PC_RECEIVE_ADMISSION;
    job_end(j);
    if (admission) return; /* inside dispatch(), which goes on by itself */
    if (t) dispatch(t);
    maybe_close(x);
}

/* A message whose partition was revoked while it decoded is let go, not consumed. */
static bool wanted(pc_receive *rq)
{
    return ((job *)rq)->mm->t != NULL;
}

static const pc_receive_ops kafka_ops = {
    .decode = decode, .decoded = decoded, .wanted = wanted, .answer = answer};

static job *job_new(kafka_recv *x, tp *t, msg *mm)
{
    const kafka_recv_cfg *cfg = x->c->cfg;
    size_t len = mm->m->len;
    job *j = pc_xcalloc(1, sizeof *j);
    j->x = x;
    j->mm = mm;
    j->json = cfg->encoding[t->sig] == 1;
    snprintf(j->who, sizeof j->who, "topic %s, partition %d, offset %lld (%zu bytes)", t->topic,
             (int)t->partition, (long long)mm->offset, len);
    j->rq.ops = &kafka_ops;
    j->rq.core = &x->core;
    j->rq.stats = &x->stats;
    j->rq.route = &x->c->route[t->sig];
    j->rq.sig = t->sig;
    j->rq.who = j->who;
    j->rq.max_decoded = PC_DECODED_PER_BODY * (len > DECODE_BASE ? len : DECODE_BASE);
    j->rq.decoded_key = "decode budget";
    j->rq.invalid_code = PC_EINVAL;
    return j;
}

/* Offer t's waiting messages, oldest first, up to the window. */
static void dispatch(tp *t)
{
    kafka_recv *x = t->x;
    if (x->stopping || !t->assigned) return;
    for (msg *mm = t->head; mm && !t->backing_off; mm = mm->next) {
        if (t->n_flight >= WINDOW || x->jobs >= MAX_JOBS) break;
        if (mm->state != M_WAITING) continue;
        mm->state = M_FLIGHT;
        t->n_waiting--;
        t->n_flight++;
        x->waiting_bytes -= mm->m->len;
        x->jobs++;
        pc_receive_start(&job_new(x, t, mm)->rq);
    }
    if (t->n_waiting >= HIGH_WATER || x->waiting_bytes > WAITING_BYTES)
        tp_pause(t, true);
    else if (t->n_waiting < LOW_WATER && !t->backing_off && x->waiting_bytes < WAITING_BYTES / 2)
        tp_pause(t, false);
}

static void dispatch_all(kafka_recv *x)
{
    for (tp *t = x->tps; t; t = t->next) /* also those paused while too much waited */
        dispatch(t);
}

/* A message taken from Kafka. */
static void take(kafka_recv *x, rd_kafka_message_t *m)
{
    const char *topic = rd_kafka_topic_name(m->rkt);
    tp *t = tp_find(x, topic, m->partition, false);
    if (!t || !t->assigned || x->stopping) { /* not ours (any more): not stored, not lost */
        rd_kafka_message_destroy(m);
        return;
    }
    const kafka_recv_cfg *cfg = x->c->cfg;
    msg *mm = pc_xcalloc(1, sizeof *mm);
    mm->t = t;
    mm->m = m;
    mm->offset = m->offset;
    mm->state = M_WAITING;
    if (t->tail)
        t->tail->next = mm;
    else
        t->head = mm;
    t->tail = mm;
    t->n_waiting++;
    x->waiting_bytes += m->len;
    t->current_offset = (uint64_t)m->offset;
    t->next_offset = m->offset + 1;
    if (!cfg->mark_after) { /* marked when taken (at most once) */
        rd_kafka_topic_partition_list_t *l = NULL;
        tp_list(t, &l);
        l->elems[0].offset = m->offset + 1;
        rd_kafka_offsets_store(x->k.rk, l);
        if (!cfg->autocommit) rd_kafka_commit(x->k.rk, l, 1);
        rd_kafka_topic_partition_list_destroy(l);
    }
}

/* Loop: everything waiting on the consumer queue (messages, rebalances, errors, log lines). */
static void serve(pc_kafka *k)
{
    kafka_recv *x = (kafka_recv *)k;
    for (int i = 0; i < 10000; i++) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(k->rk, 0);
        if (!m) {
            dispatch_all(x);
            return;
        }
        if (m->err) {
            if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
                PC_WARN_RATELIMITED(&x->consume_log, x->c->id, "kafka: %s%s%s",
                                    rd_kafka_message_errstr(m), m->rkt ? ": topic " : "",
                                    m->rkt ? rd_kafka_topic_name(m->rkt) : "");
            rd_kafka_message_destroy(m);
            continue;
        }
        take(x, m);
    }
    dispatch_all(x);
    uv_async_send(&k->async); /* more than a turn's worth: the rest on the next one */
}

/* Loop (inside rd_kafka_consumer_poll), or the thread pool during rd_kafka_consumer_close. */
static void rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts, void *opaque)
{
    kafka_recv *x = opaque;
    const char *proto = rd_kafka_rebalance_protocol(rk);
    bool cooperative = proto && !strcmp(proto, "COOPERATIVE");
    bool assign = err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS;
    if (!x->k.closing) {
        for (int i = 0; i < parts->cnt; i++) {
            tp *t = tp_find(x, parts->elems[i].topic, parts->elems[i].partition, assign);
            if (!t) continue;
            if (assign) {
                t->assigned = true;
                t->paused = false;
                t->next_offset = -1;
                x->partitions_started++;
                PC_INFO(x->c->id, "assigned %s [%d] (%s)", t->topic, (int)t->partition,
                        pc_signal_infos[t->sig].name);
            } else if (t->assigned) {
                tp_drop(t);
                if (t->paused) { /* a later owner (maybe this member again) starts unpaused */
                    tp_pause(t, false);
                }
                t->assigned = false;
                x->partitions_closed++;
                PC_INFO(x->c->id, "revoked %s [%d]", t->topic, (int)t->partition);
            }
        }
        if (!assign) rd_kafka_commit(rk, NULL, 1); /* what was stored, before it goes */
    }
    if (err != RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS && err != RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS)
        PC_WARN(x->c->id, "rebalance: %s", rd_kafka_err2str(err));
    if (cooperative) {
        rd_kafka_error_t *e = assign ? rd_kafka_incremental_assign(rk, parts)
                                     : rd_kafka_incremental_unassign(rk, parts);
        if (e) rd_kafka_error_destroy(e);
    } else {
        rd_kafka_assign(rk, assign ? parts : NULL);
    }
}

static void commit_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                      rd_kafka_topic_partition_list_t *offsets, void *opaque)
{
    kafka_recv *x = opaque;
    (void)rk;
    (void)offsets;
    if (err && err != RD_KAFKA_RESP_ERR__NO_OFFSET && !x->k.closing)
        PC_WARN_RATELIMITED(&x->consume_log, x->c->id, "offset commit failed (retried): %s",
                            rd_kafka_err2str(err));
}

/* Pool, at close: commit what was stored and leave the group. */
static void close_work(pc_kafka *k)
{
    rd_kafka_consumer_close(k->rk);
}

/* ---- lifecycle ---------------------------------------------------------------------------- */

static int kafka_recv_create(pc_component *c, pc_error *err)
{
    (void)err;
    kafka_recv *x = pc_xcalloc(1, sizeof *x);
    x->c = c;
    pc_receiver_core_init(&x->core, c);
    x->k.id = c->id;
    x->k.serve = serve;
    x->k.close_work = close_work;
    c->priv = x;
    return 0;
}

static int consumer_conf_set(rd_kafka_conf_t *conf, const kafka_recv_cfg *cfg, pc_error *e)
{
    char v[7][32];
    snprintf(v[0], sizeof v[0], "%llu", (unsigned long long)cfg->session_timeout_ms);
    snprintf(v[1], sizeof v[1], "%llu", (unsigned long long)cfg->heartbeat_interval_ms);
    snprintf(v[2], sizeof v[2], "%llu", (unsigned long long)cfg->autocommit_interval_ms);
    snprintf(v[3], sizeof v[3], "%lld", (long long)cfg->min_fetch_size);
    snprintf(v[4], sizeof v[4], "%lld", (long long)cfg->max_fetch_size);
    snprintf(v[5], sizeof v[5], "%lld", (long long)cfg->max_partition_fetch_size);
    snprintf(v[6], sizeof v[6], "%llu", (unsigned long long)cfg->max_fetch_wait_ms);
    const char *max_msg = cfg->max_fetch_size < 1000000 ? v[4] : "1000000";
    return pc_kafka_conf_set(conf, "group.id", cfg->group_id, e) ||
           pc_kafka_conf_set(conf, "auto.offset.reset", offsets[cfg->initial_offset], e) ||
           pc_kafka_conf_set(conf, "session.timeout.ms", v[0], e) ||
           pc_kafka_conf_set(conf, "heartbeat.interval.ms", v[1], e) ||
           pc_kafka_conf_set(conf, "enable.auto.commit", cfg->autocommit ? "true" : "false", e) ||
           pc_kafka_conf_set(conf, "auto.commit.interval.ms", v[2], e) ||
           /* offsets are stored by the receiver, once marked: never by librdkafka on its own */
           pc_kafka_conf_set(conf, "enable.auto.offset.store", "false", e) ||
           pc_kafka_conf_set(conf, "fetch.min.bytes", v[3], e) ||
           pc_kafka_conf_set(conf, "message.max.bytes", max_msg, e) ||
           pc_kafka_conf_set(conf, "fetch.max.bytes", v[4], e) ||
           pc_kafka_conf_set(conf, "max.partition.fetch.bytes", v[5], e) ||
           pc_kafka_conf_set(conf, "fetch.wait.max.ms", v[6], e) ||
           /* what librdkafka prefetches beside what waits here (WAITING_BYTES) */
           pc_kafka_conf_set(conf, "queued.max.messages.kbytes", "16384", e);
}

static int kafka_recv_start(pc_component *c, pc_error *e)
{
    kafka_recv *x = c->priv;
    const kafka_recv_cfg *cfg = c->cfg;
    char desc[1024] = "";
    rd_kafka_topic_partition_list_t *topics = rd_kafka_topic_partition_list_new(4);
    for (int sig = 0; sig < PC_SIGNAL_COUNT; sig++) {
        if (!c->route[sig]) continue;
        snprintf(desc + strlen(desc), sizeof desc - strlen(desc), "%s%s from", desc[0] ? "; " : "",
                 pc_signal_infos[sig].name);
        for (size_t i = 0; i < cfg->topics[sig].n; i++) {
            const char *t = cfg->topics[sig].v[i];
            for (int o = 0; o < sig; o++)
                for (size_t k = 0; c->route[o] && k < cfg->topics[o].n; k++)
                    if (!strcmp(cfg->topics[o].v[k], t)) {
                        rd_kafka_topic_partition_list_destroy(topics);
                        return pc_error_set(e, PC_EINVAL,
                                            "topic %s is configured for both %s and %s", t,
                                            pc_signal_infos[o].name, pc_signal_infos[sig].name);
                    }
            rd_kafka_topic_partition_list_add(topics, t, RD_KAFKA_PARTITION_UA);
            if (t[0] == '^') {
                x->re[sig] = pc_xrealloc(x->re[sig], (x->n_re[sig] + 1) * sizeof(regex_t));
                regcomp(&x->re[sig][x->n_re[sig]++], t, REG_EXTENDED | REG_NOSUB);
            }
            snprintf(desc + strlen(desc), sizeof desc - strlen(desc), " %s", t);
        }
        snprintf(desc + strlen(desc), sizeof desc - strlen(desc), " (%s)",
                 encodings[cfg->encoding[sig]]);
    }
    pc_receiver_stats_register(c, &x->stats, "kafka");
    pc_receiver_register_in_flight(c, &x->core.in_flight);
    char labels[300];
    snprintf(labels, sizeof labels, "receiver=\"%s\"", c->id);
    pc_metric_u64(c, "otelcol_kafka_receiver_partition_start", "Partitions assigned",
                  PC_METRIC_COUNTER, labels, &x->partitions_started);
    pc_metric_u64(c, "otelcol_kafka_receiver_partition_close", "Partitions revoked",
                  PC_METRIC_COUNTER, labels, &x->partitions_closed);
    rd_kafka_conf_t *conf = pc_kafka_conf_new(&x->k, &cfg->client, e);
    if (!conf || consumer_conf_set(conf, cfg, e)) {
        if (conf) rd_kafka_conf_destroy(conf);
        rd_kafka_topic_partition_list_destroy(topics);
        return e ? e->code : PC_EINVAL;
    }
    rd_kafka_conf_set_rebalance_cb(conf, rebalance_cb);
    rd_kafka_conf_set_offset_commit_cb(conf, commit_cb);
    int rc = pc_kafka_open(&x->k, c->loop, RD_KAFKA_CONSUMER, conf, true, e);
    if (rc < 0) {
        rd_kafka_topic_partition_list_destroy(topics);
        return rc;
    }
    rd_kafka_resp_err_t err = rd_kafka_subscribe(x->k.rk, topics);
    rd_kafka_topic_partition_list_destroy(topics);
    if (err) return pc_error_set(e, PC_EINVAL, "kafka: subscribe: %s", rd_kafka_err2str(err));
    char brokers[512];
    pc_kafka_brokers_str(&cfg->client.brokers, brokers, sizeof brokers);
    PC_INFO(c->id, "consuming %s; group %s, brokers %s%s%s", desc, cfg->group_id, brokers,
            cfg->client.tls_on ? ", TLS" : "",
            cfg->client.sasl_mechanism || cfg->client.plain_username ? ", SASL" : "");
    return 0;
}

static void finish(kafka_recv *x)
{
    pc_receiver_core_flush(&x->core);
    pc_log_limiter_flush(&x->skipped_log, PC_LOG_WARN, x->c->id, "skipped messages");
    char totals[400] = "";
    for (int sig = 0; sig < PC_SIGNAL_COUNT; sig++)
        if (x->c->route[sig])
            snprintf(totals + strlen(totals), sizeof totals - strlen(totals),
                     "%s%llu %s (%llu refused)", totals[0] ? ", " : "",
                     (unsigned long long)x->stats.accepted[sig], pc_signal_infos[sig].items,
                     (unsigned long long)x->stats.refused[sig]);
    PC_INFO(x->c->id, "stopped (accepted %s)", totals[0] ? totals : "nothing");
    x->shutdown_done(x->c);
}

static void timer_closed(uv_handle_t *h)
{
    tp *t = h->data;
    t->timer_open = false;
    if (--t->x->timers_closing == 0) finish(t->x);
}

static void consumer_closed(void *arg)
{
    kafka_recv *x = arg;
    for (tp *t = x->tps; t; t = t->next) /* counted before any close starts */
        x->timers_closing += t->timer_open;
    if (!x->timers_closing) {
        finish(x);
        return;
    }
    for (tp *t = x->tps; t; t = t->next)
        if (t->timer_open) uv_close((uv_handle_t *)&t->timer, timer_closed);
}

/* Once nothing is in flight: let go of every message (librdkafka's destroy waits for them),
 * then close the consumer. */
static void maybe_close(kafka_recv *x)
{
    if (!x->stopping || x->jobs || x->k.closing) return;
    for (tp *t = x->tps; t; t = t->next)
        for (msg *mm = t->head; mm; mm = mm->next)
            if (mm->m) {
                rd_kafka_message_destroy(mm->m);
                mm->m = NULL;
            }
    pc_kafka_close(&x->k, consumer_closed, x);
}

static void kafka_recv_shutdown(pc_component *c, pc_shutdown_done done)
{
    kafka_recv *x = c->priv;
    x->shutdown_done = done;
    x->stopping = true;
    rd_kafka_topic_partition_list_t *l = NULL;
    for (tp *t = x->tps; t; t = t->next) {
        /* what waits is not offered any more: it stays in the list, so no offset after it is
         * stored, and is taken again at the next start */
        if (t->timer_open) uv_timer_stop(&t->timer);
        t->backing_off = false;
        if (t->assigned && !t->paused) tp_list(t, &l);
        t->paused = true;
    }
    if (l && x->k.rk) rd_kafka_pause_partitions(x->k.rk, l); /* fetch nothing more */
    if (l) rd_kafka_topic_partition_list_destroy(l);
    maybe_close(x);
}

static void kafka_recv_destroy(pc_component *c)
{
    kafka_recv *x = c->priv;
    if (!x) return;
    for (tp *t = x->tps, *next; t; t = next) {
        next = t->next;
        for (msg *mm = t->head, *mn; mm; mm = mn) {
            mn = mm->next;
            msg_free(mm);
        }
        free(t->topic);
        free(t);
    }
    for (int sig = 0; sig < PC_SIGNAL_COUNT; sig++) {
        for (size_t i = 0; i < x->n_re[sig]; i++)
            regfree(&x->re[sig][i]);
        free(x->re[sig]);
    }
    free(x);
}

const pc_component_type pc_receiver_kafka = {
    .name = "kafka",
    .kind = PC_KIND_RECEIVER,
    .stability = "alpha",
    .cfg_size = sizeof(kafka_recv_cfg),
    .cfg = kafka_recv_keys,
    .validate = kafka_recv_validate,
    .create = kafka_recv_create,
    .start = kafka_recv_start,
    .shutdown = kafka_recv_shutdown,
    .destroy = kafka_recv_destroy,
    .signals = PC_SIGNALS_ALL,
    .doc = "every signal from Kafka topics through librdkafka's consumer group (OTLP protobuf or "
           "JSON messages); an offset is committed only once the pipeline accepted its message",
};
