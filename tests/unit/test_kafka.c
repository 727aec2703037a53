/* The kafka exporter and receiver against librdkafka's mock cluster, started in this process (a
 * real Kafka protocol on 127.0.0.1), with the test's own librdkafka clients on the other side:
 *   - config: the Collector's defaults and keys made into librdkafka's settings (read back from
 *     the running client), the deprecated top-level topic and encoding, what is refused;
 *   - the hand-off: delivery reports and consumed messages reach the component on the loop
 *     thread, woken by librdkafka through the uv_async_t;
 *   - the exporter: upstream told OK only once the broker acknowledged (no sending queue); a
 *     broker down keeps the request retried until it is back; requests over max_message_bytes
 *     split into messages that fit and together hold every sample; partition keys;
 *   - the receiver: a refused message is offered again, never skipped; an undecodable one is
 *     counted and skipped; the committed offset never passes a message the pipeline has not
 *     accepted; header_extraction; JSON messages. */
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "payload.h"
#include "testcomp.h"
#include "testloop.h"
#include "pdata/json.h"
#include "sdk/exporter.h"
#include "sdk/kafka.h"
#include "sdk/telemetry.h"

extern const pc_component_type pc_exporter_kafka;
extern const pc_component_type pc_receiver_kafka;

static uv_loop_t *loop;
static uv_thread_t loop_thread;
static rd_kafka_t *mock_rk;
static rd_kafka_mock_cluster_t *mc;
static char bootstraps[256];

/* ---- fixtures ------------------------------------------------------------------------------- */

/* A profiles request: one resource per name in svcs (service.name), each with n samples of
 * stack main;work, values 1..n, and the sample attribute seq=<seq + its index>. */
static pc_batch *request_multi(const char *const *svcs, int nres, int n, int seq)
{
    pc_buf j = {0};
    pc_buf_printf(&j, "{\"resourceProfiles\":[");
    for (int r = 0; r < nres; r++) {
        pc_buf_printf(&j,
                      "%s{\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":"
                      "{\"stringValue\":\"%s\"}}]},\"scopeProfiles\":[{\"profiles\":[{"
                      "\"sampleType\":{\"typeStrindex\":1,\"unitStrindex\":2},\"samples\":[",
                      r ? "," : "", svcs[r]);
        for (int i = 0; i < n; i++)
            pc_buf_printf(&j, "%s{\"stackIndex\":1,\"values\":[%d],\"attributeIndices\":[%d]}",
                          i ? "," : "", i + 1, r + 1);
        pc_buf_printf(&j, "]}]}]}");
    }
    pc_buf_printf(&j, "],\"dictionary\":{\"mappingTable\":[{}],\"locationTable\":[{},"
                      "{\"lines\":[{\"functionIndex\":1}]},{\"lines\":[{\"functionIndex\":2}]}],"
                      "\"functionTable\":[{},{\"nameStrindex\":3},{\"nameStrindex\":4}],"
                      "\"stringTable\":[\"\",\"cpu\",\"nanoseconds\",\"work\",\"main\",\"seq\"],"
                      "\"attributeTable\":[{}");
    for (int r = 0; r < nres; r++)
        pc_buf_printf(&j, ",{\"keyStrindex\":5,\"value\":{\"intValue\":\"%d\"}}", seq + r);
    pc_buf_printf(&j, "],\"stackTable\":[{},{\"locationIndices\":[1,2]}]}}");
    pc_batch *b = batch_from_json((const char *)j.data);
    pc_buf_free(&j);
    return b;
}

static pc_batch *request(const char *svc, int n, int seq)
{
    return request_multi(&svc, 1, n, seq);
}

/* Sum of the first value of every sample. */
static int64_t value_total(const pc_batch *b)
{
    int64_t t = 0;
    for (size_t r = 0; r < b->req->n_resource_profiles; r++)
        for (size_t s = 0; s < b->req->resource_profiles[r]->n_scope_profiles; s++) {
            const pc_scope_profiles *sp = b->req->resource_profiles[r]->scope_profiles[s];
            for (size_t p = 0; p < sp->n_profiles; p++)
                for (size_t k = 0; k < sp->profiles[p]->n_samples; k++)
                    t += sp->profiles[p]->samples[k]->values[0];
        }
    return t;
}

/* The seq attribute of a request made by request() (-1 if none). */
static int seq_of(const pc_batch *b)
{
    const pc_dictionary *d = b->req->dictionary;
    if (!d || d->n_attribute_table < 2) return -1;
    return (int)d->attribute_table[1]->value->int_value;
}

/* ---- the test's own librdkafka clients (blocking: they run beside the loop) ----------------- */

static rd_kafka_t *client(rd_kafka_type_t type, const char *group)
{
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", bootstraps, err, sizeof err);
    rd_kafka_conf_set(conf, "log_level", "2", err, sizeof err);
    if (group) {
        rd_kafka_conf_set(conf, "group.id", group, err, sizeof err);
        rd_kafka_conf_set(conf, "auto.offset.reset", "earliest", err, sizeof err);
        rd_kafka_conf_set(conf, "enable.auto.commit", "false", err, sizeof err);
    }
    rd_kafka_t *rk = rd_kafka_new(type, conf, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "client: %s\n", err);
        exit(1);
    }
    if (group) rd_kafka_poll_set_consumer(rk);
    return rk;
}

/* Copies of consumed messages (librdkafka's destroy waits for its own to be let go). */
typedef struct kmsg {
    void *payload, *key;
    size_t len, key_len;
} kmsg;

typedef struct got {
    kmsg *m[256];
    int n;
} got;

static kmsg *kmsg_copy(const rd_kafka_message_t *m)
{
    kmsg *k = calloc(1, sizeof *k);
    k->len = m->len;
    k->payload = malloc(m->len + 1);
    if (m->len) memcpy(k->payload, m->payload, m->len);
    k->key_len = m->key_len;
    if (m->key) {
        k->key = malloc(m->key_len + 1);
        memcpy(k->key, m->key, m->key_len);
    }
    return k;
}

/* Every message of topic (all partitions) from the start, until want arrived or 15 s passed. */
static void consume_all(const char *topic, int want, got *g)
{
    char group[64];
    static int seq;
    snprintf(group, sizeof group, "reader-%d-%d", (int)getpid(), ++seq);
    rd_kafka_t *rk = client(RD_KAFKA_CONSUMER, group);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, topic, RD_KAFKA_PARTITION_UA);
    rd_kafka_subscribe(rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    memset(g, 0, sizeof *g);
    double deadline = now_ms() + 15000;
    while (g->n < want && now_ms() < deadline) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (!m) continue;
        if (!m->err && g->n < 256) g->m[g->n++] = kmsg_copy(m);
        rd_kafka_message_destroy(m);
    }
    /* anything more that arrives soon (what should not be there) */
    for (double until = now_ms() + 300; now_ms() < until && g->n < 256;) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 50);
        if (m && !m->err) g->m[g->n++] = kmsg_copy(m);
        if (m) rd_kafka_message_destroy(m);
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
}

static void got_free(got *g)
{
    for (int i = 0; i < g->n; i++) {
        free(g->m[i]->payload);
        free(g->m[i]->key);
        free(g->m[i]);
    }
    g->n = 0;
}

static pc_batch *decode_msg(const kmsg *m, bool json)
{
    pc_batch *b = NULL;
    pc_error e = {0};
    if (pc_batch_decode(PC_SIGNAL_PROFILES, m->payload, m->len, json, NULL, &b, &e) < 0) {
        fprintf(stderr, "message does not decode: %s\n", e.msg);
        return NULL;
    }
    return b;
}

static void produce(const char *topic, const void *value, size_t len, const char *hdr_name,
                    const char *hdr_value)
{
    rd_kafka_t *rk = client(RD_KAFKA_PRODUCER, NULL);
    rd_kafka_headers_t *h = rd_kafka_headers_new(1);
    if (hdr_name) rd_kafka_header_add(h, hdr_name, -1, hdr_value, -1);
    rd_kafka_resp_err_t err = rd_kafka_producev(
        rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_VALUE((void *)value, len),
        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADERS(h), RD_KAFKA_V_END);
    if (err) {
        rd_kafka_headers_destroy(h);
        fprintf(stderr, "produce: %s\n", rd_kafka_err2str(err));
        exit(1);
    }
    CHECK_EQ_INT(rd_kafka_flush(rk, 10000), 0);
    rd_kafka_destroy(rk);
}

static void produce_batch(const char *topic, const pc_batch *b, bool json)
{
    pc_buf v = {0};
    if (json)
        pc_batch_encode_json(b, &v);
    else
        pc_batch_encode_proto(b, &v);
    produce(topic, v.data, v.len, NULL, NULL);
    pc_buf_free(&v);
}

/* The committed offset of group on topic [partition] (RD_KAFKA_OFFSET_INVALID: none). */
static int64_t committed(const char *group, const char *topic, int32_t partition)
{
    rd_kafka_t *rk = client(RD_KAFKA_CONSUMER, group);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, topic, partition);
    rd_kafka_resp_err_t err = rd_kafka_committed(rk, l, 10000);
    int64_t off = err ? -2 : l->elems[0].offset;
    rd_kafka_topic_partition_list_destroy(l);
    rd_kafka_destroy(rk);
    return off;
}

/* ---- components ----------------------------------------------------------------------------- */

static pc_component *start(const pc_component_type *t, const char *kind, const char *yaml,
                           pc_consumer *next)
{
    pc_error err = {0};
    pc_component *c = tc_new(t, kind, yaml, loop, next, &err);
    if (!c) {
        fprintf(stderr, "config: %s\n", err.msg);
        exit(1);
    }
    if (t->kind == PC_KIND_RECEIVER) c->route[PC_SIGNAL_PROFILES] = next;
    if (t->start(c, &err) < 0) {
        fprintf(stderr, "start: %s\n", err.msg);
        exit(1);
    }
    return c;
}

/* The librdkafka handle of a started kafka component (its state starts with a pc_kafka). */
static pc_kafka *kafka_of(pc_component *c)
{
    return c->type->kind == PC_KIND_EXPORTER ? pc_exporter_of(c)->priv : c->priv;
}

static const char *conf_get(pc_component *c, const char *name)
{
    static char v[8][512];
    static int i;
    char *out = v[i++ % 8];
    size_t n = sizeof v[0];
    if (rd_kafka_conf_get(rd_kafka_conf(kafka_of(c)->rk), name, out, &n) != RD_KAFKA_CONF_OK)
        return "(unset)";
    return out;
}

static void stop(pc_component *c)
{
    tc_shutdown(c);
    tc_free(c);
}

/* Upstream answers, and on which thread. */
typedef struct up {
    int calls, st, off_loop;
} up;

static void up_done(void *arg, int st, const char *msg)
{
    up *u = arg;
    uv_thread_t self = uv_thread_self();
    (void)msg;
    if (!uv_thread_equal(&self, &loop_thread)) u->off_loop++;
    u->calls++;
    u->st = st;
}

static int up_answered(void *arg)
{
    return ((up *)arg)->calls > 0;
}

/* ---- config --------------------------------------------------------------------------------- */

static void test_exporter_defaults(void)
{
    pc_component *c = start(&pc_exporter_kafka, "exporters", "", NULL);
    CHECK_STR(conf_get(c, "bootstrap.servers"), "localhost:9092");
    CHECK_STR(conf_get(c, "client.id"), "otel-collector");
    CHECK_STR(conf_get(c, "acks"), "1");
    CHECK_STR(conf_get(c, "message.max.bytes"), "1000000");
    CHECK_STR(conf_get(c, "compression.codec"), "none");
    CHECK_STR(conf_get(c, "batch.num.messages"), "10000");
    CHECK_STR(conf_get(c, "message.timeout.ms"), "5000");
    CHECK_STR(conf_get(c, "linger.ms"), "10");
    CHECK_STR(conf_get(c, "security.protocol"), "plaintext");
    stop(c);
}

static void test_exporter_keys(void)
{
    bool have_ca = access("/etc/ssl/certs/ca-certificates.crt", R_OK) == 0;
    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             "brokers: [b1:9092, b2:9093]\nclient_id: me\n"
             "producer:\n  required_acks: -1\n  compression: zstd\n"
             "  compression_params: {level: 3}\n  max_message_bytes: 5000\n"
             "  flush_max_messages: 7\n  linger: 1ms\n"
             "timeout: 2s\n%s"
             "auth:\n  sasl: {mechanism: SCRAM-SHA-512, username: u, password: p}\n",
             have_ca ? "tls:\n  ca_file: /etc/ssl/certs/ca-certificates.crt\n" : "");
    pc_component *c = start(&pc_exporter_kafka, "exporters", yaml, NULL);
    CHECK_STR(conf_get(c, "bootstrap.servers"), "b1:9092,b2:9093");
    CHECK_STR(conf_get(c, "client.id"), "me");
    CHECK_STR(conf_get(c, "acks"), "-1");
    CHECK_STR(conf_get(c, "compression.codec"), "zstd");
    CHECK_STR(conf_get(c, "compression.level"), "3");
    CHECK_STR(conf_get(c, "message.max.bytes"), "5000");
    CHECK_STR(conf_get(c, "batch.num.messages"), "7");
    CHECK_STR(conf_get(c, "linger.ms"), "1");
    CHECK_STR(conf_get(c, "message.timeout.ms"), "2000");
    CHECK_STR(conf_get(c, "security.protocol"), have_ca ? "sasl_ssl" : "sasl_plaintext");
    CHECK_STR(conf_get(c, "sasl.mechanisms"), "SCRAM-SHA-512");
    CHECK_STR(conf_get(c, "sasl.username"), "u");
    if (have_ca) CHECK_STR(conf_get(c, "ssl.ca.location"), "/etc/ssl/certs/ca-certificates.crt");
    stop(c);

    /* an empty tls block is TLS (the system's CAs); insecure: true is not; plain_text is PLAIN */
    c = start(&pc_exporter_kafka, "exporters", "tls:\n", NULL);
    CHECK_STR(conf_get(c, "security.protocol"), "ssl");
    stop(c);
    c = start(&pc_exporter_kafka, "exporters",
              "tls: {insecure: true}\nauth: {plain_text: {username: a, password: b}}\n", NULL);
    CHECK_STR(conf_get(c, "security.protocol"), "sasl_plaintext");
    CHECK_STR(conf_get(c, "sasl.mechanisms"), "PLAIN");
    CHECK_STR(conf_get(c, "sasl.username"), "a");
    stop(c);
    c = start(&pc_exporter_kafka, "exporters", "tls: {insecure_skip_verify: true}\n", NULL);
    CHECK_STR(conf_get(c, "security.protocol"), "ssl");
    CHECK_STR(conf_get(c, "enable.ssl.certificate.verification"), "false");
    stop(c);
}

static void test_receiver_defaults(void)
{
    tc_rec rec;
    tc_rec_init(&rec);
    pc_component *c = start(&pc_receiver_kafka, "receivers", "", &rec.base);
    CHECK_STR(conf_get(c, "bootstrap.servers"), "localhost:9092");
    CHECK_STR(conf_get(c, "group.id"), "otel-collector");
    CHECK_STR(conf_get(c, "client.id"), "otel-collector");
    CHECK_STR(conf_get(c, "auto.offset.reset"), "largest"); /* librdkafka's name for latest */
    CHECK_STR(conf_get(c, "session.timeout.ms"), "10000");
    CHECK_STR(conf_get(c, "heartbeat.interval.ms"), "3000");
    CHECK_STR(conf_get(c, "enable.auto.offset.store"), "false");
    CHECK_STR(conf_get(c, "enable.auto.commit"), "true");
    stop(c);
    c = start(&pc_receiver_kafka, "receivers",
              "initial_offset: earliest\nsession_timeout: 30s\nheartbeat_interval: 5s\n"
              "group_id: g\nclient_id: c\n",
              &rec.base);
    CHECK_STR(conf_get(c, "auto.offset.reset"), "smallest");
    CHECK_STR(conf_get(c, "session.timeout.ms"), "30000");
    CHECK_STR(conf_get(c, "heartbeat.interval.ms"), "5000");
    CHECK_STR(conf_get(c, "group.id"), "g");
    CHECK_STR(conf_get(c, "client.id"), "c");
    stop(c);
}

static void test_config_errors(void)
{
    static const struct {
        const pc_component_type *t;
        const char *yaml, *want;
    } cases[] = {
        {&pc_exporter_kafka,
         "partition_logs_by_resource_attributes: true\npartition_logs_by_trace_id: true\n",
         "cannot both be enabled"},
        {&pc_exporter_kafka, "producer: {required_acks: 2}\n", "required_acks"},
        {&pc_exporter_kafka, "producer: {max_message_bytes: 10}\n", "max_message_bytes"},
        {&pc_exporter_kafka, "producer: {compression: brotli}\n", "zstd"},
        {&pc_exporter_kafka, "encoding: jaeger_proto\n", "otlp_proto, otlp_json"},
        {&pc_exporter_kafka, "profiles: {encoding: zipkin_json}\n", "otlp_json"},
        {&pc_exporter_kafka, "timeout: 0s\n", "timeout"},
        {&pc_exporter_kafka, "brokers: [nohostport]\n", "brokers"},
        {&pc_exporter_kafka, "brokers: []\n", "at least one broker"},
        {&pc_exporter_kafka, "auth: {sasl: {mechanism: PLAIN, password: p}}\n", "username"},
        {&pc_exporter_kafka, "auth: {sasl: {mechanism: GSSAPI, username: u, password: p}}\n",
         "not supported"},
        {&pc_exporter_kafka, "auth: {sasl: {username: u, password: p}}\n", "mechanism"},
        {&pc_exporter_kafka, "tls: {server_name_override: x}\n", "server_name_override"},
        {&pc_exporter_kafka, "tls: {ca_file: /nonexistent/ca.pem}\n", "ca_file"},
        {&pc_exporter_kafka, "sending_queue: {num_consumers: 0}\n", "num_consumers"},
        {&pc_receiver_kafka, "profiles: {topic: a, topics: [b]}\n", "not both"},
        {&pc_receiver_kafka, "profiles: {topics: [\"^(\"]}\n", "regular expression"},
        {&pc_receiver_kafka, "initial_offset: newest\n", "earliest"},
        {&pc_receiver_kafka, "group_id: \"\"\n", "group_id"},
        {&pc_receiver_kafka, "heartbeat_interval: 20s\n", "below session_timeout"},
        {&pc_receiver_kafka, "header_extraction: {extract_headers: true}\n", "headers"},
        {&pc_receiver_kafka, "profile: {topics: [x]}\n", "profiles"}, /* did you mean */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *e = tc_config_error(
            cases[i].t, cases[i].t->kind == PC_KIND_EXPORTER ? "exporters" : "receivers",
            cases[i].yaml);
        CHECK(e != NULL);
        if (e) CHECK_CONTAINS(e, cases[i].want);
    }
    /* what is accepted: the Collector's keys as its docs show them */
    CHECK(tc_config_error(&pc_exporter_kafka, "exporters",
                          "brokers: [127.0.0.1:9092]\nprofiles: {topic: otlp_profiles, "
                          "encoding: otlp_proto}\nprotocol_version: 3.0.0\n") == NULL);
    CHECK(tc_config_error(&pc_receiver_kafka, "receivers",
                          "profiles: {topic: p}\nmessage_marking: {after: true, on_error: "
                          "true}\nheader_extraction: {extract_headers: true, headers: [a]}\n") ==
          NULL);
}

/* ---- the exporter --------------------------------------------------------------------------- */

/* The top-level topic and encoding stand in for every signal that does not set its own; an
 * acknowledged request is on the broker; the component heard of it on the loop thread. */
static void test_exporter_acknowledged_on_the_loop(void)
{
    char yaml[512];
    snprintf(yaml, sizeof yaml,
             "brokers: [%s]\ntopic: legacy\nencoding: otlp_json\n"
             "sending_queue: {enabled: false}\n",
             bootstraps);
    pc_component *c = start(&pc_exporter_kafka, "exporters", yaml, NULL);
    up u[3] = {{0}};
    for (int i = 0; i < 3; i++)
        c->type->consume(c, request("svc", 4, i), up_done, &u[i]);
    for (int i = 0; i < 3; i++) {
        CHECK(wait_until(loop, up_answered, &u[i], 15000));
        CHECK_EQ_INT(u[i].st, PC_OK);
        CHECK_EQ_INT(u[i].off_loop, 0);
    }
    CHECK(kafka_of(c)->wakes > 0); /* the reports came through the uv_async_t */
    stop(c);
    got g;
    consume_all("legacy", 3, &g);
    CHECK_EQ_INT(g.n, 3);
    for (int i = 0; i < g.n; i++) {
        pc_batch *b = decode_msg(g.m[i], true); /* JSON, as the top-level encoding said */
        CHECK(b != NULL);
        if (!b) continue;
        CHECK_EQ_INT(pc_batch_items(b), 4);
        CHECK_EQ_INT(value_total(b), 10);
        CHECK(g.m[i]->key == NULL);
        pc_batch_unref(b);
    }
    got_free(&g);
}

/* The broker down: the request is retried (upstream waits, no sending queue) until it is back. */
static void test_exporter_broker_down(void)
{
    char yaml[512];
    snprintf(yaml, sizeof yaml,
             "brokers: [%s]\nprofiles: {topic: down}\ntimeout: 1s\n"
             "sending_queue: {enabled: false}\n"
             "retry_on_failure: {initial_interval: 100ms, max_interval: 200ms}\n",
             bootstraps);
    rd_kafka_mock_topic_create(mc, "down", 1, 1);
    pc_component *c = start(&pc_exporter_kafka, "exporters", yaml, NULL);
    up u0 = {0};
    c->type->consume(c, request("svc", 2, 0), up_done, &u0); /* connects while the broker is up */
    CHECK(wait_until(loop, up_answered, &u0, 15000));
    rd_kafka_mock_broker_set_down(mc, 1);
    up u = {0};
    c->type->consume(c, request("svc", 3, 1), up_done, &u);
    CHECK(!wait_until(loop, up_answered, &u, 2500)); /* timed out at least twice: retried */
    rd_kafka_mock_broker_set_up(mc, 1);
    CHECK(wait_until(loop, up_answered, &u, 20000));
    CHECK_EQ_INT(u.st, PC_OK);
    CHECK_EQ_INT(u.off_loop, 0);
    stop(c);
    got g;
    consume_all("down", 2, &g);
    CHECK(g.n >= 2); /* an attempt may have reached the broker before its answer was lost */
    int64_t total = 0;
    for (int i = 0; i < g.n; i++) {
        pc_batch *b = decode_msg(g.m[i], false);
        if (b && seq_of(b) == 1) total = value_total(b);
        pc_batch_unref(b);
    }
    CHECK_EQ_INT(total, 6);
    got_free(&g);
}

/* A request over max_message_bytes: messages that fit, holding every sample once; with
 * partition_profiles_by_resource_attributes one key per resource content, the same in every
 * request. */
static void test_exporter_splits_and_keys(void)
{
    char yaml[512];
    snprintf(yaml, sizeof yaml,
             "brokers: [%s]\nprofiles: {topic: split}\nproducer: {max_message_bytes: 1000}\n"
             "partition_profiles_by_resource_attributes: true\n"
             "sending_queue: {enabled: false}\n",
             bootstraps);
    rd_kafka_mock_topic_create(mc, "split", 3, 1);
    pc_component *c = start(&pc_exporter_kafka, "exporters", yaml, NULL);
    static const char *const two[] = {"alpha", "beta"};
    up u1 = {0}, u2 = {0};
    c->type->consume(c, request_multi(two, 2, 300, 0), up_done, &u1); /* seq 0 and 1 */
    c->type->consume(c, request("alpha", 300, 2), up_done, &u2);      /* alpha again */
    CHECK(wait_until(loop, up_answered, &u1, 15000));
    CHECK(wait_until(loop, up_answered, &u2, 15000));
    CHECK_EQ_INT(u1.st, PC_OK);
    CHECK_EQ_INT(u2.st, PC_OK);
    stop(c);
    got g;
    consume_all("split", 256, &g);
    CHECK(g.n > 6);
    int64_t total[3] = {0, 0, 0};
    size_t samples = 0;
    char keys[3][64] = {"", "", ""};
    for (int i = 0; i < g.n; i++) {
        CHECK(g.m[i]->len + g.m[i]->key_len + 64 <= 1000);
        pc_batch *m = decode_msg(g.m[i], false);
        if (!m) continue;
        int s = seq_of(m);
        CHECK(s >= 0 && s <= 2);
        if (s < 0 || s > 2) {
            pc_batch_unref(m);
            continue;
        }
        CHECK_EQ_INT(pc_batch_n_resources(m), 1);
        total[s] += value_total(m);
        samples += pc_batch_items(m);
        /* every message of one resource has the same 16-hex-digit key */
        CHECK_EQ_INT(g.m[i]->key_len, 16);
        char k[64];
        snprintf(k, sizeof k, "%.*s", (int)g.m[i]->key_len, (const char *)g.m[i]->key);
        if (!keys[s][0]) snprintf(keys[s], sizeof keys[s], "%s", k);
        CHECK_STR(k, keys[s]);
        pc_batch_unref(m);
    }
    CHECK_EQ_INT(samples, 900);
    for (int s = 0; s < 3; s++)
        CHECK_EQ_INT(total[s], 300 * 301 / 2);
    CHECK(strcmp(keys[0], keys[1]) != 0);
    CHECK_STR(keys[0], keys[2]); /* alpha, whichever request it came in */
    got_free(&g);
}

/* ---- the receiver --------------------------------------------------------------------------- */

/* A pipeline that refuses the first `refuse` offers of seq refuse_seq (retryable), answers
 * seq never_seq with never_st for ever, and records the seqs it accepted. */
typedef struct pipe {
    pc_consumer base;
    int refuse, refuse_seq, never_seq, never_st;
    int offers[64], accepted[64], n_accepted;
    char header[64];
} pipe_t;

static void pipe_consume(pc_consumer *self, pc_batch *b, pc_done_fn done, void *arg)
{
    pipe_t *p = (pipe_t *)self;
    uv_thread_t t = uv_thread_self();
    CHECK(uv_thread_equal(&t, &loop_thread));
    int s = seq_of(b);
    if (s >= 0 && s < 64) p->offers[s]++;
    const char *h = pc_resource_attr_str(b->req->dictionary, b->req->resource_profiles[0]->resource,
                                         "kafka.header.tenant");
    if (h) snprintf(p->header, sizeof p->header, "%s", h);
    pc_batch_unref(b);
    if (s == p->refuse_seq && p->refuse > 0) {
        p->refuse--;
        done(arg, PC_EAGAIN, "full");
        return;
    }
    if (s == p->never_seq) {
        done(arg, p->never_st, "never");
        return;
    }
    if (s >= 0 && s < 64) p->accepted[s]++;
    p->n_accepted++;
    done(arg, PC_OK, NULL);
}

static int accepted_reached(void *arg)
{
    pipe_t *p = arg;
    return p->n_accepted >= p->offers[63]; /* offers[63]: the test's target, never a seq */
}

static void pipe_init(pipe_t *p, int want)
{
    memset(p, 0, sizeof *p);
    p->base.consume = pipe_consume;
    p->never_seq = p->refuse_seq = -1;
    p->offers[63] = want;
}

static const char *metric_line(const char *name)
{
    static char line[512];
    pc_buf out = {0};
    pc_metrics_render(&out);
    const char *p = strstr((const char *)out.data, name);
    line[0] = 0;
    while (p && p[-1] != '\n')
        p = strstr(p + 1, name);
    if (p) snprintf(line, sizeof line, "%.*s", (int)strcspn(p, "\n"), p);
    pc_buf_free(&out);
    return line;
}

/* Five good messages around an undecodable one: the first offer is refused and the message
 * offered again; the undecodable one counted, logged and skipped; the committed offset is past
 * all six. */
static void test_receiver_refusal_and_garbage(void)
{
    rd_kafka_mock_topic_create(mc, "in1", 1, 1);
    for (int i = 0; i < 6; i++) {
        if (i == 3) {
            produce("in1", "\xff\xff garbage", 10, NULL, NULL);
            continue;
        }
        pc_batch *b = request("svc", 2, i);
        produce_batch("in1", b, false);
        pc_batch_unref(b);
    }
    char yaml[512];
    snprintf(yaml, sizeof yaml,
             "brokers: [%s]\nprofiles: {topic: in1}\ninitial_offset: earliest\ngroup_id: g1\n"
             "session_timeout: 6s\nheartbeat_interval: 1s\n",
             bootstraps);
    pipe_t p;
    pipe_init(&p, 5);
    p.refuse = 1;
    p.refuse_seq = 0;
    pc_component *c = start(&pc_receiver_kafka, "receivers", yaml, &p.base);
    CHECK(wait_until(loop, accepted_reached, &p, 30000));
    for (int i = 0; i < 6; i++)
        if (i != 3) CHECK_EQ_INT(p.accepted[i], 1);
    CHECK_EQ_INT(p.offers[0], 2); /* refused once, offered again */
    CHECK_CONTAINS(metric_line("otelcol_kafka_receiver_unmarshal_failed_profiles{"), "} 1");
    CHECK_CONTAINS(metric_line("otelcol_receiver_accepted_profile_samples{receiver=\"kafka\""),
                   "} 10");
    CHECK_CONTAINS(metric_line("otelcol_kafka_receiver_partition_start{"), "} 1");
    CHECK(kafka_of(c)->wakes > 0);
    stop(c);
    CHECK_EQ_INT(committed("g1", "in1", 0), 6);
}

static int offered_twice(void *arg)
{
    return ((pipe_t *)arg)->offers[1] >= 2;
}

/* A message the pipeline never accepts holds the committed offset before it (and, its partition
 * paused, the messages after it wait); with message_marking::on_error it is marked, the
 * messages after it go on and the offset moves past them all. */
static void test_receiver_commits_only_accepted(void)
{
    rd_kafka_mock_topic_create(mc, "in2", 1, 1);
    for (int i = 0; i < 4; i++) {
        pc_batch *b = request("svc", 1, i);
        produce_batch("in2", b, false);
        pc_batch_unref(b);
    }
    for (int on_error = 0; on_error <= 1; on_error++) {
        char yaml[512], group[16];
        snprintf(group, sizeof group, "g2-%d", on_error);
        snprintf(yaml, sizeof yaml,
                 "brokers: [%s]\nprofiles: {topic: in2}\ninitial_offset: earliest\n"
                 "group_id: %s\nmessage_marking: {on_error: %s}\n"
                 "session_timeout: 6s\nheartbeat_interval: 1s\n",
                 bootstraps, group, on_error ? "true" : "false");
        pipe_t p;
        pipe_init(&p, 3);
        p.never_seq = 1;
        p.never_st = PC_EBUSY;
        pc_component *c = start(&pc_receiver_kafka, "receivers", yaml, &p.base);
        if (on_error) {
            CHECK(wait_until(loop, accepted_reached, &p, 30000));
            CHECK_EQ_INT(p.offers[1], 1); /* marked at the first refusal */
            for (int i = 0; i < 4; i++)
                CHECK_EQ_INT(p.accepted[i], i != 1);
        } else {
            /* offered again after the backoff, never skipped */
            CHECK(wait_until(loop, offered_twice, &p, 30000));
            CHECK_EQ_INT(p.accepted[0], 1);
            CHECK_EQ_INT(p.accepted[1], 0);
        }
        stop(c);
        CHECK_EQ_INT(committed(group, "in2", 0), on_error ? 4 : 1);
    }
}

/* header_extraction, and JSON messages. */
static void test_receiver_headers_and_json(void)
{
    rd_kafka_mock_topic_create(mc, "in3", 2, 1);
    pc_batch *b = request("svc", 3, 7);
    pc_buf v = {0};
    pc_batch_encode_json(b, &v);
    produce("in3", v.data, v.len, "tenant", "acme");
    pc_buf_free(&v);
    pc_batch_unref(b);
    char yaml[512];
    snprintf(yaml, sizeof yaml,
             "brokers: [%s]\nprofiles: {topic: in3, encoding: otlp_json}\n"
             "initial_offset: earliest\ngroup_id: g3\n"
             "header_extraction: {extract_headers: true, headers: [tenant]}\n"
             "session_timeout: 6s\nheartbeat_interval: 1s\n",
             bootstraps);
    pipe_t p;
    pipe_init(&p, 1);
    pc_component *c = start(&pc_receiver_kafka, "receivers", yaml, &p.base);
    CHECK(wait_until(loop, accepted_reached, &p, 30000));
    CHECK_EQ_INT(p.accepted[7], 1);
    CHECK_STR(p.header, "acme");
    stop(c);
}

int main(void)
{
    uv_loop_t storage;
    loop = test_loop_open(&storage);
    loop_thread = uv_thread_self();
    pc_log_set_level(PC_LOG_WARN);
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "log_level", "2", err, sizeof err);
    mock_rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    mc = rd_kafka_mock_cluster_new(mock_rk, 1);
    snprintf(bootstraps, sizeof bootstraps, "%s", rd_kafka_mock_cluster_bootstraps(mc));

    RUN(test_exporter_defaults);
    RUN(test_exporter_keys);
    RUN(test_receiver_defaults);
    RUN(test_config_errors);
    RUN(test_exporter_acknowledged_on_the_loop);
    RUN(test_exporter_broker_down);
    RUN(test_exporter_splits_and_keys);
    RUN(test_receiver_refusal_and_garbage);
    RUN(test_receiver_commits_only_accepted);
    RUN(test_receiver_headers_and_json);

    rd_kafka_mock_cluster_destroy(mc);
    rd_kafka_destroy(mock_rk);
    return test_loop_close(loop);
}
