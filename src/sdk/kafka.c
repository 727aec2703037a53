/* What the kafka receiver and exporter share (see kafka.h). */
#include "sdk/kafka.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/url.h"

/* ---- config ------------------------------------------------------------------------------- */

static const char *const sasl_mechanisms[] = {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", NULL};

int pc_kafka_client_validate(pc_kafka_client_cfg *cfg, const pc_node *node, const char *path,
                             pc_error *err)
{
    if (cfg->brokers.n == 0)
        return pc_cfg_key_errorf(err, node, path, "brokers", "at least one broker (host:port)");
    for (size_t i = 0; i < cfg->brokers.n; i++) {
        char host[256];
        int port;
        pc_error e = {0};
        if (pc_hostport_parse(cfg->brokers.v[i], host, sizeof host, &port, &e) < 0 || port <= 0)
            return pc_cfg_key_errorf(err, node, path, "brokers", "\"%s\": %s", cfg->brokers.v[i],
                                     e.msg[0] ? e.msg : "want host:port");
    }
    if (!cfg->client_id || !*cfg->client_id)
        return pc_cfg_key_errorf(err, node, path, "client_id", "must not be empty");
    const char *mech = cfg->sasl_mechanism;
    if (mech && *mech) {
        bool known = false;
        for (int i = 0; sasl_mechanisms[i]; i++)
            known |= strcmp(mech, sasl_mechanisms[i]) == 0;
        if (!known)
            return pc_cfg_key_errorf(err, node, path, "auth.sasl.mechanism",
                                     "\"%s\" is not supported (PLAIN, SCRAM-SHA-256, "
                                     "SCRAM-SHA-512)",
                                     mech);
        if (!cfg->sasl_username || !*cfg->sasl_username)
            return pc_cfg_key_errorf(err, node, path, "auth.sasl.username",
                                     "required with auth::sasl::mechanism");
        if (!cfg->sasl_password)
            return pc_cfg_key_errorf(err, node, path, "auth.sasl.password",
                                     "required with auth::sasl::mechanism");
    } else if (cfg->sasl_username || cfg->sasl_password) {
        return pc_cfg_key_errorf(err, node, path, "auth.sasl.mechanism",
                                 "required with auth::sasl (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)");
    }
    if (cfg->sasl_version != 0 && cfg->sasl_version != 1)
        return pc_cfg_key_errorf(err, node, path, "auth.sasl.version", "must be 0 or 1");
    if ((cfg->plain_username || cfg->plain_password) && mech && *mech)
        return pc_cfg_key_errorf(err, node, path, "auth.plain_text",
                                 "set auth::sasl or auth::plain_text, not both");
    if ((cfg->plain_username != NULL) != (cfg->plain_password != NULL))
        return pc_cfg_key_errorf(err, node, path,
                                 cfg->plain_username ? "auth.plain_text.password"
                                                     : "auth.plain_text.username",
                                 "auth::plain_text needs username and password");
    /* as the Collector: a tls block turns TLS on, unless it says insecure: true */
    cfg->tls_on = pc_node_get(node, "tls") != NULL && !cfg->tls.insecure;
    if (cfg->tls.server_name_override)
        return pc_cfg_key_errorf(err, node, path, "tls.server_name_override",
                                 "not supported by the kafka components (librdkafka verifies the "
                                 "broker's own name)");
    if (cfg->tls.min_version != 0)
        return pc_cfg_key_errorf(err, node, path, "tls.min_version",
                                 "only 1.2 (librdkafka takes the system's OpenSSL minimum)");
    if (cfg->tls_on && pc_tls_client_validate(&cfg->tls, node, path, "", err)) return PC_EINVAL;
    return 0;
}

int pc_kafka_conf_set(rd_kafka_conf_t *conf, const char *name, const char *value, pc_error *e)
{
    char why[256];
    if (rd_kafka_conf_set(conf, name, value, why, sizeof why) != RD_KAFKA_CONF_OK)
        return pc_error_set(e, PC_EINVAL, "librdkafka %s=%s: %s", name, value, why);
    return 0;
}

void pc_kafka_brokers_str(const pc_strlist *l, char *out, size_t n)
{
    size_t len = 0;
    out[0] = 0;
    for (size_t i = 0; i < l->n && len < n; i++)
        len += (size_t)snprintf(out + len, n - len, "%s%s", i ? "," : "", l->v[i]);
}

/* ---- callbacks (on the loop thread: they run inside the poll calls of serve) --------------- */

static void log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    pc_kafka *k = pc_kafka_of(rd_kafka_opaque(rk));
    /* syslog levels: 0..3 errors, 4 warnings, 5..6 notices and info, 7 debug */
    if (level <= 4)
        pc_log_limited(&k->log_limit, level <= 3 ? PC_LOG_ERROR : PC_LOG_WARN, k->id,
                       "librdkafka %s: %s", fac, buf);
    else
        pc_log(level == 7 ? PC_LOG_DEBUG : PC_LOG_INFO, k->id, "librdkafka %s: %s", fac, buf);
}

static void error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
    pc_kafka *k = pc_kafka_of(opaque);
    (void)rk;
    pc_log_limited(&k->error_limit, err == RD_KAFKA_RESP_ERR__FATAL ? PC_LOG_ERROR : PC_LOG_WARN,
                   k->id, "kafka: %s: %s", rd_kafka_err2name((rd_kafka_resp_err_t)err), reason);
}

rd_kafka_conf_t *pc_kafka_conf_new(pc_kafka *k, const pc_kafka_client_cfg *cfg, pc_error *e)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char brokers[4096];
    pc_kafka_brokers_str(&cfg->brokers, brokers, sizeof brokers);
    bool sasl = (cfg->sasl_mechanism && *cfg->sasl_mechanism) || cfg->plain_username;
    const char *proto =
        sasl ? (cfg->tls_on ? "sasl_ssl" : "sasl_plaintext") : (cfg->tls_on ? "ssl" : "plaintext");
    rd_kafka_conf_set_opaque(conf, k);
    rd_kafka_conf_set_log_cb(conf, log_cb);
    rd_kafka_conf_set_error_cb(conf, error_cb);
    if (pc_kafka_conf_set(conf, "bootstrap.servers", brokers, e) ||
        pc_kafka_conf_set(conf, "client.id", cfg->client_id, e) ||
        /* log lines wait on the queue the loop serves, never spontaneously on a broker thread */
        pc_kafka_conf_set(conf, "log.queue", "true", e) ||
        pc_kafka_conf_set(conf, "security.protocol", proto, e))
        goto fail;
    if (sasl) {
        const char *mech = cfg->plain_username ? "PLAIN" : cfg->sasl_mechanism;
        const char *user = cfg->plain_username ? cfg->plain_username : cfg->sasl_username;
        const char *pass = cfg->plain_username ? cfg->plain_password : cfg->sasl_password;
        if (pc_kafka_conf_set(conf, "sasl.mechanisms", mech, e) ||
            pc_kafka_conf_set(conf, "sasl.username", user, e) ||
            pc_kafka_conf_set(conf, "sasl.password", pass ? pass : "", e))
            goto fail;
    }
    if (cfg->tls_on) {
        const pc_tls_client_cfg *t = &cfg->tls;
        if ((t->ca_file && pc_kafka_conf_set(conf, "ssl.ca.location", t->ca_file, e)) ||
            (t->cert_file &&
             pc_kafka_conf_set(conf, "ssl.certificate.location", t->cert_file, e)) ||
            (t->key_file && pc_kafka_conf_set(conf, "ssl.key.location", t->key_file, e)))
            goto fail;
        if (t->insecure_skip_verify &&
            (pc_kafka_conf_set(conf, "enable.ssl.certificate.verification", "false", e) ||
             pc_kafka_conf_set(conf, "ssl.endpoint.identification.algorithm", "none", e)))
            goto fail;
    }
    return conf;
fail:
    rd_kafka_conf_destroy(conf);
    return NULL;
}

/* ---- the hand-off ------------------------------------------------------------------------- */

/* librdkafka's thread: the queue was empty and is not any more. Nothing but the wake-up. */
static void wake(rd_kafka_t *rk, void *arg)
{
    (void)rk;
    uv_async_send(&((pc_kafka *)arg)->async);
}

/* Loop thread. */
static void on_async(uv_async_t *h)
{
    pc_kafka *k = h->data;
    if (k->closing) return;
    k->wakes++;
    k->serve(k);
}

static void on_tick(uv_timer_t *t)
{
    pc_kafka *k = t->data;
    if (!k->closing) k->serve(k);
}

void pc_kafka_serve_now(pc_kafka *k)
{
    if (k->rk && !k->closing) k->serve(k);
}

int pc_kafka_open(pc_kafka *k, uv_loop_t *loop, rd_kafka_type_t type, rd_kafka_conf_t *conf,
                  bool consumer, pc_error *e)
{
    char why[512];
    k->loop = loop;
    int rc = uv_async_init(loop, &k->async, on_async);
    if (rc) {
        rd_kafka_conf_destroy(conf);
        return pc_error_set(e, PC_EIO, "uv_async_init: %s", uv_strerror(rc));
    }
    k->async.data = k;
    k->async_open = true;
    uv_timer_init(loop, &k->tick);
    k->tick.data = k;
    k->tick_open = true;
    k->rk = rd_kafka_new(type, conf, why, sizeof why);
    if (!k->rk) {
        rd_kafka_conf_destroy(conf);
        return pc_error_set(e, PC_EINVAL, "librdkafka: %s", why);
    }
    if (consumer) {
        /* the main queue (logs, errors, rebalances) forwarded to the consumer queue: one queue */
        rd_kafka_poll_set_consumer(k->rk);
        k->q = rd_kafka_queue_get_consumer(k->rk);
    } else {
        k->q = rd_kafka_queue_get_main(k->rk);
    }
    rd_kafka_set_log_queue(k->rk, NULL); /* the main queue (forwarded as above for a consumer) */
    rd_kafka_queue_cb_event_enable(k->q, wake, k);
    uv_async_send(&k->async); /* whatever queued before the callback was set */
    uv_timer_start(&k->tick, on_tick, 1000, 1000);
    return 0;
}

static void close_work(uv_work_t *w)
{
    pc_kafka *k = w->data;
    if (k->close_work) k->close_work(k);
    rd_kafka_queue_destroy(k->q);
    k->q = NULL;
    rd_kafka_destroy(k->rk);
    k->rk = NULL;
}

static void handle_closed(uv_handle_t *h)
{
    pc_kafka *k = h->data;
    if (h == (uv_handle_t *)&k->async)
        k->async_open = false;
    else
        k->tick_open = false;
    if (!k->async_open && !k->tick_open) k->closed(k->closed_arg);
}

static void close_done(uv_work_t *w, int status)
{
    pc_kafka *k = w->data;
    (void)status;
    if (!k->async_open && !k->tick_open) {
        k->closed(k->closed_arg);
        return;
    }
    /* both started before either may finish */
    if (k->async_open) uv_close((uv_handle_t *)&k->async, handle_closed);
    if (k->tick_open) uv_close((uv_handle_t *)&k->tick, handle_closed);
}

void pc_kafka_close(pc_kafka *k, void (*closed)(void *arg), void *arg)
{
    k->closing = true;
    k->closed = closed;
    k->closed_arg = arg;
    k->work.data = k;
    if (k->tick_open) uv_timer_stop(&k->tick);
    if (k->rk) {
        /* from here on librdkafka wakes nobody; the queue is served only by close_work */
        rd_kafka_queue_cb_event_enable(k->q, NULL, NULL);
        uv_queue_work(k->loop ? k->loop : uv_default_loop(), &k->work, close_work, close_done);
        return;
    }
    close_done(&k->work, 0);
}

int pc_kafka_err(rd_kafka_resp_err_t err)
{
    switch (err) {
    case RD_KAFKA_RESP_ERR_NO_ERROR: return PC_OK;
    case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
    case RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE: return PC_E2BIG;
    case RD_KAFKA_RESP_ERR__TRANSPORT:
    case RD_KAFKA_RESP_ERR__MSG_TIMED_OUT:
    case RD_KAFKA_RESP_ERR__TIMED_OUT:
    case RD_KAFKA_RESP_ERR__TIMED_OUT_QUEUE:
    case RD_KAFKA_RESP_ERR__QUEUE_FULL:
    case RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN:
    case RD_KAFKA_RESP_ERR__RESOLVE:
    case RD_KAFKA_RESP_ERR__WAIT_COORD:
    case RD_KAFKA_RESP_ERR__PURGE_QUEUE:
    case RD_KAFKA_RESP_ERR__PURGE_INFLIGHT:
    case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC: /* it may yet be created */
    case RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION:
    case RD_KAFKA_RESP_ERR__STATE:
    case RD_KAFKA_RESP_ERR__NODE_UPDATE:
    case RD_KAFKA_RESP_ERR__PARTITION_EOF:
    case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
    case RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION:
    case RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT:
    case RD_KAFKA_RESP_ERR_BROKER_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_REPLICA_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_NETWORK_EXCEPTION:
    case RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS:
    case RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_NOT_COORDINATOR:
    case RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS:
    case RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND:
    case RD_KAFKA_RESP_ERR_KAFKA_STORAGE_ERROR:
    case RD_KAFKA_RESP_ERR_THROTTLING_QUOTA_EXCEEDED: return PC_EAGAIN;
    default: return PC_EINVAL;
    }
}

/* Config-table groups (sdk/cfgtable.h): keys and offsets relative to their struct. */
/* clang-format off */
const pc_cfg_key pc_kafka_client_keys[] = {
    {"brokers", PC_CFG_LIST, "localhost:9092", offsetof(pc_kafka_client_cfg, brokers), "bootstrap brokers, host:port", NULL},
    {"client_id", PC_CFG_STRING, "otel-collector", offsetof(pc_kafka_client_cfg, client_id), "client id sent to the brokers", NULL},
    {"protocol_version", PC_CFG_STRING, "2.1.0", offsetof(pc_kafka_client_cfg, protocol_version), "accepted for Collector configs; librdkafka negotiates each request's version with the broker", NULL},
    {"", PC_CFG_GROUP, "", offsetof(pc_kafka_client_cfg, tls), "TLS of a client", pc_tls_client_keys},
    {"auth.sasl.mechanism", PC_CFG_STRING, "", offsetof(pc_kafka_client_cfg, sasl_mechanism), "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (with TLS when a tls block is set)", NULL},
    {"auth.sasl.username", PC_CFG_STRING, "", offsetof(pc_kafka_client_cfg, sasl_username), "SASL user name", NULL},
    {"auth.sasl.password", PC_CFG_STRING, "", offsetof(pc_kafka_client_cfg, sasl_password), "SASL password", NULL},
    {"auth.sasl.version", PC_CFG_INT, "0", offsetof(pc_kafka_client_cfg, sasl_version), "SASL handshake version, 0 or 1 (librdkafka picks what the broker supports)", NULL},
    {"auth.plain_text.username", PC_CFG_STRING, "", offsetof(pc_kafka_client_cfg, plain_username), "deprecated in the Collector: SASL PLAIN user name (use auth::sasl)", NULL},
    {"auth.plain_text.password", PC_CFG_STRING, "", offsetof(pc_kafka_client_cfg, plain_password), "deprecated in the Collector: SASL PLAIN password (use auth::sasl)", NULL},
    {0},
};
/* clang-format on */
