/* Exporter "kafka": every signal to Kafka topics, as the Collector's kafkaexporter (its keys and
 * defaults), through librdkafka.
 *
 * On the exporter core (sdk/exporter.h: sending queue, retries, counting, lifecycle). One
 * send attempt of one batch:
 *   pool   encode: the batch is cut into messages. First by partition key when one is asked for
 *          (one message per resource, keyed by the hash of its attributes; or one per trace id,
 *          keyed by its hex), then by size: a message whose encoded value would be over
 *          producer::max_message_bytes is split through pdata's splitter (pdata/split.h: profiles
 *          through the merger's slices, each part with only the dictionary entries it reaches;
 *          other signals by resource, scope, item, a metric's data points) until every part fits.
 *          Nothing is dropped; only a single item that alone is over the limit fails, for good.
 *   loop   send: each message goes to rd_kafka_producev with its part as the opaque; the value is
 *          not copied (it lives in the request until its delivery report).
 *   loop   delivery reports arrive through the hand-off of sdk/kafka.h (rd_kafka_poll on
 *          the loop, woken by a uv_async_t): each part's outcome is merged
 *          (pc_export_outcome_merge); when the last part is reported the core gets one outcome
 *          (pc_export_done). A part is delivered once the broker acknowledged it as
 *          producer::required_acks asks; a retryable failure of any part retries the request
 *          (parts already delivered are then delivered again: at least once).
 * At close, rd_kafka_flush and rd_kafka_destroy run on the thread pool. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pdata/merge.h"
#include "pdata/split.h"
#include "sdk/component.h"
#include "sdk/exporter.h"
#include "sdk/kafka.h"
#include "sdk/sender.h"
#include "sdk/telemetry.h"

/* What librdkafka adds to a message beyond value and key (a record's framing); parts are cut so
 * value + key + this fits producer::max_message_bytes, as librdkafka checks it. */
#define RECORD_OVERHEAD 64

static const char *const encodings[] = {"otlp_proto", "otlp_json", NULL};
static const char *const compressions[] = {"none", "gzip", "snappy", "lz4", "zstd", NULL};

typedef struct kafka_exp_cfg {
    pc_kafka_client_cfg client;
    char *topic[PC_SIGNAL_COUNT];
    int encoding[PC_SIGNAL_COUNT];  /* index into encodings */
    char *old_topic, *old_encoding; /* the top-level topic and encoding (deprecated) */
    bool partition_by_resource[PC_SIGNAL_COUNT];
    bool partition_traces_by_id, partition_logs_by_trace_id;
    int64_t max_message_bytes, required_acks, compression_level, flush_max_messages;
    int compression;
    uint64_t linger_ms;
    bool auto_create_topics;
    uint64_t timeout_ms;
    pc_sender_cfg sender;
} kafka_exp_cfg;

/* clang-format off */
#define SIGNAL_KEYS(sig, name, path, deftopic) \
    {name ".topic", PC_CFG_STRING, deftopic, offsetof(kafka_exp_cfg, topic[sig]), "topic " name " are produced to (default " deftopic ", or the top-level topic)", NULL}, \
    {name ".encoding", PC_CFG_ENUM, "otlp_proto", offsetof(kafka_exp_cfg, encoding[sig]), "message encoding of " name " (or the top-level encoding)", encodings},
static const pc_cfg_key kafka_exp_keys[] = {
    {"", PC_CFG_GROUP, "", offsetof(kafka_exp_cfg, client), "the Kafka client", pc_kafka_client_keys},
    PC_SIGNALS_EACH(SIGNAL_KEYS)
    {"topic", PC_CFG_STRING, "", offsetof(kafka_exp_cfg, old_topic), "deprecated in the Collector: the topic of every signal whose <signal>::topic is not set", NULL},
    {"encoding", PC_CFG_STRING, "", offsetof(kafka_exp_cfg, old_encoding), "deprecated in the Collector: the encoding of every signal whose <signal>::encoding is not set (otlp_proto, otlp_json)", NULL},
    {"partition_profiles_by_resource_attributes", PC_CFG_BOOL, "false", offsetof(kafka_exp_cfg, partition_by_resource[PC_SIGNAL_PROFILES]), "a message per resource, keyed by the hash of its attributes (one resource, one partition)", NULL},
    {"partition_metrics_by_resource_attributes", PC_CFG_BOOL, "false", offsetof(kafka_exp_cfg, partition_by_resource[PC_SIGNAL_METRICS]), "a message per resource, keyed by the hash of its attributes", NULL},
    {"partition_logs_by_resource_attributes", PC_CFG_BOOL, "false", offsetof(kafka_exp_cfg, partition_by_resource[PC_SIGNAL_LOGS]), "a message per resource, keyed by the hash of its attributes", NULL},
    {"partition_traces_by_id", PC_CFG_BOOL, "false", offsetof(kafka_exp_cfg, partition_traces_by_id), "a message per trace, keyed by the trace id (hex)", NULL},
    {"partition_logs_by_trace_id", PC_CFG_BOOL, "false", offsetof(kafka_exp_cfg, partition_logs_by_trace_id), "a message per trace id of the log records, keyed by it (hex; none for records without)", NULL},
    {"producer.max_message_bytes", PC_CFG_INT, "1000000", offsetof(kafka_exp_cfg, max_message_bytes), "largest message (before compression); larger requests are split, never dropped", NULL},
    {"producer.required_acks", PC_CFG_INT, "1", offsetof(kafka_exp_cfg, required_acks), "acknowledgements a message needs before it counts as sent: 0 none, 1 the leader, -1 every in-sync replica", NULL},
    {"producer.compression", PC_CFG_ENUM, "none", offsetof(kafka_exp_cfg, compression), "compression of message batches", compressions},
    {"producer.compression_params.level", PC_CFG_INT, "-1", offsetof(kafka_exp_cfg, compression_level), "compression level (-1: the codec's default)", NULL},
    {"producer.flush_max_messages", PC_CFG_INT, "10000", offsetof(kafka_exp_cfg, flush_max_messages), "most messages in one produce request", NULL},
    {"producer.linger", PC_CFG_DURATION, "10ms", offsetof(kafka_exp_cfg, linger_ms), "how long a partition waits for more messages before a produce request is sent", NULL},
    {"producer.allow_auto_topic_creation", PC_CFG_BOOL, "true", offsetof(kafka_exp_cfg, auto_create_topics), "let the broker create a topic on first use (when it allows it)", NULL},
    {"timeout", PC_CFG_DURATION, "5s", offsetof(kafka_exp_cfg, timeout_ms), "time one attempt has to get every message of a request acknowledged", NULL},
    {"", PC_CFG_GROUP, "", offsetof(kafka_exp_cfg, sender), "the sending queue and retries", pc_sender_keys},
    {0},
};
/* clang-format on */

/* The counters of one (topic, partition, outcome): otelcol_kafka_exporter_*. */
typedef struct part_stats {
    struct part_stats *next;
    pc_signal sig;
    int32_t partition;
    bool ok;
    uint64_t records, bytes;
} part_stats;

typedef struct kafka_exp {
    pc_kafka k; /* first: librdkafka's opaque */
    pc_exporter *e;
    part_stats *stats;
    uint64_t in_flight; /* messages produced, not yet reported */
} kafka_exp;

/* One message of a request. */
typedef struct part {
    pc_buf value;
    char key[33];
    size_t keylen; /* 0: no key */
    struct kreq *req;
} part;

typedef struct kreq {
    pc_export_req r;
    part *parts;
    size_t n_parts, cap, pending;
    int fail; /* encode: PC_E2BIG when one item alone is over the limit */
    char why[256];
    pc_export_outcome acc;
} kreq;

/* ---- config ------------------------------------------------------------------------------- */

static const pc_node *node_at(const pc_node *n, const char *a, const char *b)
{
    return pc_node_get(pc_node_get(n, a), b);
}

static int encoding_index(const char *s)
{
    for (int i = 0; encodings[i]; i++)
        if (!strcmp(encodings[i], s)) return i;
    return -1;
}

static int kafka_exp_validate(void *cfgp, const pc_node *node, const char *path, pc_error *err)
{
    kafka_exp_cfg *cfg = cfgp;
    if (pc_kafka_client_validate(&cfg->client, node, path, err)) return PC_EINVAL;
    int old_enc = -1;
    if (cfg->old_encoding && (old_enc = encoding_index(cfg->old_encoding)) < 0)
        return pc_cfg_key_errorf(err, node, path, "encoding",
                                 "\"%s\" is not one of: otlp_proto, otlp_json", cfg->old_encoding);
    for (int sig = 0; sig < PC_SIGNAL_COUNT; sig++) {
        const char *name = pc_signal_infos[sig].name;
        /* as the Collector: the top-level topic and encoding stand in for unset signal ones */
        if (cfg->old_topic && *cfg->old_topic && !node_at(node, name, "topic")) {
            free(cfg->topic[sig]);
            cfg->topic[sig] = pc_xstrdup(cfg->old_topic);
        }
        if (old_enc >= 0 && !node_at(node, name, "encoding")) cfg->encoding[sig] = old_enc;
        if (!cfg->topic[sig] || !*cfg->topic[sig]) {
            char key[32];
            snprintf(key, sizeof key, "%s.topic", name);
            return pc_cfg_key_errorf(err, node, path, key, "must not be empty");
        }
    }
    if (cfg->partition_by_resource[PC_SIGNAL_LOGS] && cfg->partition_logs_by_trace_id)
        return pc_cfg_key_errorf(err, node, path, "partition_logs_by_trace_id",
                                 "partition_logs_by_resource_attributes and "
                                 "partition_logs_by_trace_id cannot both be enabled");
    if (cfg->max_message_bytes < 1000 || cfg->max_message_bytes > 1000000000)
        return pc_cfg_key_errorf(err, node, path, "producer.max_message_bytes",
                                 "must be between 1000 and 1000000000");
    if (cfg->required_acks < -1 || cfg->required_acks > 1)
        return pc_cfg_key_errorf(err, node, path, "producer.required_acks",
                                 "must be -1 (all in-sync replicas), 0 or 1");
    if (cfg->compression_level < -1 || cfg->compression_level > 12)
        return pc_cfg_key_errorf(err, node, path, "producer.compression_params.level",
                                 "must be -1 (the codec's default) to 12");
    if (cfg->flush_max_messages < 1 || cfg->flush_max_messages > 1000000)
        return pc_cfg_key_errorf(err, node, path, "producer.flush_max_messages",
                                 "must be between 1 and 1000000");
    if (cfg->linger_ms > 900000)
        return pc_cfg_key_errorf(err, node, path, "producer.linger", "must be at most 15m");
    if (cfg->timeout_ms == 0 || cfg->timeout_ms > 3600000)
        return pc_cfg_key_errorf(err, node, path, "timeout", "must be between 1ms and 1h");
    return pc_sender_validate(&cfg->sender, node, path, err);
}

/* The producer's librdkafka settings. */
static rd_kafka_conf_t *producer_conf(kafka_exp *x, const kafka_exp_cfg *cfg, pc_error *e)
{
    rd_kafka_conf_t *conf = pc_kafka_conf_new(&x->k, &cfg->client, e);
    if (!conf) return NULL;
    char v[64];
    struct {
        const char *name;
        long long val;
    } nums[] = {
        {"acks", (long long)cfg->required_acks},
        {"message.max.bytes", (long long)cfg->max_message_bytes},
        {"batch.size", (long long)cfg->max_message_bytes},
        {"batch.num.messages", (long long)cfg->flush_max_messages},
        {"linger.ms", (long long)cfg->linger_ms},
        /* one attempt: delivered, or reported failed, within timeout */
        {"message.timeout.ms", (long long)cfg->timeout_ms},
        {"request.timeout.ms", (long long)cfg->timeout_ms},
    };
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        snprintf(v, sizeof v, "%lld", nums[i].val);
        if (pc_kafka_conf_set(conf, nums[i].name, v, e)) goto fail;
    }
    if (pc_kafka_conf_set(conf, "compression.codec", compressions[cfg->compression], e) ||
        pc_kafka_conf_set(conf, "allow.auto.create.topics",
                          cfg->auto_create_topics ? "true" : "false", e))
        goto fail;
    if (cfg->compression_level >= 0) {
        snprintf(v, sizeof v, "%lld", (long long)cfg->compression_level);
        if (pc_kafka_conf_set(conf, "compression.level", v, e)) goto fail;
    }
    return conf;
fail:
    rd_kafka_conf_destroy(conf);
    return NULL;
}

/* ---- encode (thread pool) ------------------------------------------------------------------- */

static void add_part(kreq *q, pc_buf *value, const char *key, size_t keylen)
{
    if (q->n_parts == q->cap) {
        q->cap = q->cap ? 2 * q->cap : 4;
        q->parts = pc_xrealloc(q->parts, q->cap * sizeof *q->parts);
    }
    part *p = &q->parts[q->n_parts++];
    memset(p, 0, sizeof *p);
    p->value = *value;
    memset(value, 0, sizeof *value);
    memcpy(p->key, key, keylen);
    p->keylen = keylen;
}

static void encode_value(const kafka_exp_cfg *cfg, const pc_batch *b, pc_buf *out)
{
    if (cfg->encoding[b->signal])
        pc_batch_encode_json(b, out);
    else
        pc_batch_encode_proto(b, out);
}

/* b as messages of at most the limit each, split as often as need be. */
static void emit_sized(kreq *q, const kafka_exp_cfg *cfg, const pc_batch *b, const char *key,
                       size_t keylen)
{
    if (q->fail) return;
    size_t limit = (size_t)cfg->max_message_bytes - RECORD_OVERHEAD - keylen;
    pc_buf v = {0};
    encode_value(cfg, b, &v);
    if (v.len <= limit) {
        add_part(q, &v, key, keylen);
        return;
    }
    size_t items = pc_batch_items(b), len = v.len;
    pc_buf_free(&v);
    pc_batch **parts = NULL;
    size_t n = 0;
    if (items > 1) {
        /* as many parts as the size asks for, each cut again below if it still does not fit
         * (every part brings its own share of dictionary, resource and scope) */
        size_t k = len / limit + 1, max = (items + k - 1) / k;
        n = pc_batch_split(b, max < items ? max : items - 1, &parts);
    }
    if (n <= 1) {
        q->fail = PC_E2BIG;
        snprintf(q->why, sizeof q->why,
                 "%zu %s of %zu bytes encoded cannot be split below producer::max_message_bytes "
                 "(%lld)",
                 items, pc_signal_infos[b->signal].items, len, (long long)cfg->max_message_bytes);
    }
    for (size_t i = 0; i < n; i++) {
        emit_sized(q, cfg, parts[i], key, keylen);
        pc_batch_unref(parts[i]);
    }
    free(parts);
}

static void hex(const uint8_t *p, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[p[i] >> 4];
        out[2 * i + 1] = digits[p[i] & 15];
    }
    out[2 * n] = 0;
}

static void kafka_exp_encode(pc_export_req *r)
{
    kreq *q = (kreq *)r;
    const kafka_exp_cfg *cfg = r->e->c->cfg;
    const pc_batch *b = r->batch;
    pc_batch **parts = NULL;
    size_t n;
    char key[33];
    if (cfg->partition_by_resource[b->signal]) {
        n = pc_batch_split_resources(b, &parts);
        for (size_t i = 0; i < n; i++) {
            const pc_dictionary *d;
            const pc_resource *res = pc_batch_first_resource(parts[i], &d);
            uint64_t h =
                pc_attrs_hash(d, res ? res->attributes : NULL, res ? res->n_attributes : 0);
            uint8_t be[8];
            for (int k = 0; k < 8; k++)
                be[k] = (uint8_t)(h >> (56 - 8 * k));
            hex(be, 8, key);
            emit_sized(q, cfg, parts[i], key, 16);
        }
    } else if ((b->signal == PC_SIGNAL_TRACES && cfg->partition_traces_by_id) ||
               (b->signal == PC_SIGNAL_LOGS && cfg->partition_logs_by_trace_id)) {
        uint8_t *ids = NULL;
        static const uint8_t none[16];
        n = pc_batch_split_trace_ids(b, &parts, &ids);
        for (size_t i = 0; i < n; i++) {
            bool has = memcmp(ids + 16 * i, none, 16) != 0;
            if (has) hex(ids + 16 * i, 16, key);
            emit_sized(q, cfg, parts[i], key, has ? 32 : 0);
        }
        free(ids);
    } else {
        emit_sized(q, cfg, b, "", 0);
        return;
    }
    for (size_t i = 0; i < n; i++)
        pc_batch_unref(parts[i]);
    free(parts);
}

/* ---- send and delivery (loop) --------------------------------------------------------------- */

static part_stats *stats_for(kafka_exp *x, pc_signal sig, int32_t partition, bool ok)
{
    for (part_stats *s = x->stats; s; s = s->next)
        if (s->sig == sig && s->partition == partition && s->ok == ok) return s;
    part_stats *s = pc_xcalloc(1, sizeof *s);
    s->sig = sig;
    s->partition = partition;
    s->ok = ok;
    s->next = x->stats;
    x->stats = s;
    const kafka_exp_cfg *cfg = x->e->c->cfg;
    char labels[512];
    snprintf(labels, sizeof labels, "exporter=\"%s\",topic=\"%s\",partition=\"%d\",outcome=\"%s\"",
             x->e->c->id, cfg->topic[sig], (int)partition, ok ? "success" : "failure");
    pc_metric_u64(x->e->c, "otelcol_kafka_exporter_records", "Messages (records) produced",
                  PC_METRIC_COUNTER, labels, &s->records);
    pc_metric_u64(x->e->c, "otelcol_kafka_exporter_messages",
                  "Messages produced (deprecated in the Collector for "
                  "otelcol_kafka_exporter_records)",
                  PC_METRIC_COUNTER, labels, &s->records);
    pc_metric_u64(x->e->c, "otelcol_kafka_exporter_bytes_uncompressed",
                  "Bytes of message values and keys produced, before compression",
                  PC_METRIC_COUNTER, labels, &s->bytes);
    return s;
}

static void part_done(kafka_exp *x, kreq *q, const pc_export_outcome *o)
{
    pc_export_outcome_merge(&q->acc, o);
    if (--q->pending == 0) pc_export_done(&q->r, &q->acc);
    (void)x;
}

/* Loop thread (rd_kafka_poll in serve): a message was acknowledged, or failed for good. */
static void dr_msg_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    kafka_exp *x = opaque;
    part *p = m->_private;
    (void)rk;
    x->in_flight--;
    if (x->k.closing) { /* cannot happen: the core closes once every send has its outcome */
        PC_ERROR(x->k.id, "delivery report after close (%s)", rd_kafka_err2str(m->err));
        return;
    }
    kreq *q = p->req;
    part_stats *s = stats_for(x, q->r.sig, m->partition, m->err == RD_KAFKA_RESP_ERR_NO_ERROR);
    s->records++;
    s->bytes += m->len + m->key_len;
    pc_export_outcome o = PC_EXPORT_OK;
    if (m->err)
        pc_export_outcome_set(&o, pc_kafka_err(m->err), "kafka: %s (topic %s, partition %d)",
                              rd_kafka_err2str(m->err), rd_kafka_topic_name(m->rkt),
                              (int)m->partition);
    part_done(x, q, &o);
}

static void kafka_exp_send(pc_export_req *r)
{
    kreq *q = (kreq *)r;
    kafka_exp *x = r->e->priv;
    const kafka_exp_cfg *cfg = r->e->c->cfg;
    q->acc = PC_EXPORT_OK;
    if (q->fail) {
        pc_export_outcome o;
        pc_export_outcome_set(&o, q->fail, "%s", q->why);
        pc_export_done(r, &o);
        return;
    }
    if (!q->n_parts) { /* an empty request: nothing to produce */
        pc_export_done(r, &q->acc);
        return;
    }
    q->pending = q->n_parts;
    for (size_t i = 0; i < q->n_parts; i++) {
        part *p = &q->parts[i];
        p->req = q;
        /* no RD_KAFKA_MSG_F_COPY: the value stays in the request until its delivery report */
        rd_kafka_resp_err_t err =
            rd_kafka_producev(x->k.rk, RD_KAFKA_V_TOPIC(cfg->topic[r->sig]),
                              RD_KAFKA_V_VALUE(p->value.data, p->value.len),
                              RD_KAFKA_V_KEY(p->keylen ? p->key : NULL, p->keylen),
                              RD_KAFKA_V_OPAQUE(p), RD_KAFKA_V_END);
        if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
            x->in_flight++;
            continue;
        }
        /* this part and the ones after it are not produced: one outcome for them all */
        pc_export_outcome o;
        pc_export_outcome_set(&o, pc_kafka_err(err), "kafka: %s (topic %s)", rd_kafka_err2str(err),
                              cfg->topic[r->sig]);
        part_stats *s = stats_for(x, r->sig, RD_KAFKA_PARTITION_UA, false);
        s->records += q->n_parts - i;
        pc_export_outcome_merge(&q->acc, &o);
        q->pending -= q->n_parts - i - 1;
        part_done(x, q, &o); /* may complete the request */
        return;
    }
}

static void kafka_exp_release(pc_export_req *r)
{
    kreq *q = (kreq *)r;
    for (size_t i = 0; i < q->n_parts; i++)
        pc_buf_free(&q->parts[i].value);
    free(q->parts);
}

/* Loop: serve the delivery reports (and log lines, errors) waiting. */
static void serve(pc_kafka *k)
{
    for (int i = 0; i < 1000; i++)
        if (rd_kafka_poll(k->rk, 0) == 0) return;
    uv_async_send(&k->async); /* more than a turn's worth: the rest on the next one */
}

/* Pool, at close: every request has its outcome, so nothing is left to deliver; flush anyway so
 * whatever librdkafka still holds is settled before destroy. */
static void close_work(pc_kafka *k)
{
    rd_kafka_flush(k->rk, 1000);
}

/* ---- lifecycle ---------------------------------------------------------------------------- */

static int kafka_exp_create(pc_exporter *e, pc_error *err)
{
    (void)err;
    kafka_exp *x = pc_xcalloc(1, sizeof *x);
    x->e = e;
    x->k.id = e->c->id;
    x->k.serve = serve;
    x->k.close_work = close_work;
    e->priv = x;
    return 0;
}

static int kafka_exp_start(pc_exporter *e, pc_error *err)
{
    kafka_exp *x = e->priv;
    const kafka_exp_cfg *cfg = e->c->cfg;
    rd_kafka_conf_t *conf = producer_conf(x, cfg, err);
    if (!conf) return err ? err->code : PC_EINVAL;
    rd_kafka_conf_set_dr_msg_cb(conf, dr_msg_cb);
    int rc = pc_kafka_open(&x->k, e->c->loop, RD_KAFKA_PRODUCER, conf, false, err);
    if (rc < 0) return rc;
    char brokers[512];
    pc_kafka_brokers_str(&cfg->client.brokers, brokers, sizeof brokers);
    PC_INFO(e->c->id,
            "producing to %s (profiles: topic %s, %s; acks %lld, max message %lld bytes%s%s)",
            brokers, cfg->topic[PC_SIGNAL_PROFILES], encodings[cfg->encoding[PC_SIGNAL_PROFILES]],
            (long long)cfg->required_acks, (long long)cfg->max_message_bytes,
            cfg->client.tls_on ? ", TLS" : "",
            cfg->client.sasl_mechanism || cfg->client.plain_username ? ", SASL" : "");
    return 0;
}

static void kafka_exp_close(pc_exporter *e)
{
    kafka_exp *x = e->priv;
    pc_kafka_close(&x->k, pc_exporter_closed, e);
}

static void kafka_exp_destroy(pc_exporter *e)
{
    kafka_exp *x = e->priv;
    if (!x) return;
    for (part_stats *s = x->stats, *next; s; s = next) {
        next = s->next;
        free(s);
    }
    free(x);
}

static const pc_exporter_def kafka_exp_def = {
    .req_size = sizeof(kreq),
    .sender_cfg = offsetof(kafka_exp_cfg, sender),
    .create = kafka_exp_create,
    .start = kafka_exp_start,
    .encode = kafka_exp_encode,
    .send = kafka_exp_send,
    .release = kafka_exp_release,
    .close = kafka_exp_close,
    .destroy = kafka_exp_destroy,
};

const pc_component_type pc_exporter_kafka = {
    .name = "kafka",
    .kind = PC_KIND_EXPORTER,
    .stability = "alpha",
    .cfg_size = sizeof(kafka_exp_cfg),
    .cfg = kafka_exp_keys,
    .validate = kafka_exp_validate,
    PC_EXPORTER_CORE(&kafka_exp_def),
    .signals = PC_SIGNALS_ALL,
    .doc = "every signal to Kafka topics through librdkafka (OTLP protobuf or JSON messages; "
           "counted as sent once the broker acknowledged them; split above "
           "producer::max_message_bytes)",
};
