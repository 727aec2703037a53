/* Exporter "pyroscope": profiles to a Grafana Pyroscope server (spec/pyroscope.md §1, §2, §7),
 * over the Connect push API (push.v1.PusherService/Push, default) or the legacy /ingest.
 *
 * Every (resource, scope, profile group) of a batch becomes one gzip pprof through the one
 * OTLP -> pprof translator (formats/pprof.h). Its series labels come from the resource:
 * service.name -> service_name, every other attribute with its name sanitized as Pyroscope's
 * distributor does (§1.7: characters outside [A-Za-z0-9_] -> '_'; "__" names dropped), then
 * external_labels on top, then the limits on count and length (what is cut is counted and
 * logged, rate-limited). __name__ is the profile attribute pyroscope.profile.name when a receiver
 * set it (the JFR decoder does, with pyroscope.jfr_event for the label jfr_event), else the
 * server's /ingest heuristic (§1.6).
 *
 * push: one request per batch, one RawProfileSeries per pprof.
 * ingest: one request per pprof: name=service{k=v,...} (§1.3, no escaping, so ',' and '}' in
 * values become '_'), from/until in unix seconds, format=pprof, the gzip pprof as the body.
 *
 * On the exporter core (sdk/exporter.h: queue, retries, counting, lifecycle). Translation
 * and encoding run on the thread pool; HTTP on the loop thread. One attempt is answered once
 * every request of it has been (for ingest, the worst answer counts). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/base64.h"
#include "sdk/auth.h"
#include "net/http_client.h"
#include "net/tls.h"
#include "sdk/tls_config.h"
#include "net/url.h"
#include "formats/pprof.h"
#include "pdata/proto_pack.h"
#include "sdk/component.h"
#include "sdk/exporter.h"
#include "sdk/exporter_http.h"
#include "sdk/sender.h"
#include "pyroscope_push.pb-c.h"

#define CUT_LOG_INTERVAL_MS 10000
#define SPY_NAME            "profcol"

typedef struct pyro_cfg {
    char *endpoint;
    int protocol; /* 0 push, 1 ingest */
    char *tenant_id;
    bool tenant_from_request;
    char *username, *password;
    pc_strmap external_labels;
    int64_t max_label_names;
    int64_t max_label_value_length;
    int64_t max_label_name_length;
    pc_http_client_cfg client; /* headers, timeout, max_connections, tls, auth */
    pc_sender_cfg sender;
} pyro_cfg;

enum { PROTO_PUSH = 0, PROTO_INGEST = 1 };
static const char *const protocols[] = {"push", "ingest", NULL};

/* clang-format off */
static const pc_cfg_key pyro_keys[] = {
    {"endpoint", PC_CFG_STRING, "", offsetof(pyro_cfg, endpoint), "Pyroscope base URL, e.g. http://pyroscope:4040", NULL},
    {"protocol", PC_CFG_ENUM, "push", offsetof(pyro_cfg, protocol), "push: Connect push API, one request per batch; ingest: legacy /ingest, one per pprof", protocols},
    {"tenant_id", PC_CFG_STRING, "", offsetof(pyro_cfg, tenant_id), "tenant sent as X-Scope-OrgID", NULL},
    {"tenant_from_request", PC_CFG_BOOL, "false", offsetof(pyro_cfg, tenant_from_request), "send the received request's X-Scope-OrgID when present (else tenant_id)", NULL},
    {"basic_auth.username", PC_CFG_STRING, "", offsetof(pyro_cfg, username), "HTTP basic auth user", NULL},
    {"basic_auth.password", PC_CFG_STRING, "", offsetof(pyro_cfg, password), "HTTP basic auth password", NULL},
    {"external_labels", PC_CFG_MAP, "", offsetof(pyro_cfg, external_labels), "labels added to every series (override labels from the resource)", NULL},
    {"max_label_names", PC_CFG_INT, "30", offsetof(pyro_cfg, max_label_names), "labels per series, __name__ and service_name included; extra ones are dropped", NULL},
    {"max_label_value_length", PC_CFG_INT, "2048", offsetof(pyro_cfg, max_label_value_length), "longer label values are truncated (bytes)", NULL},
    {"max_label_name_length", PC_CFG_INT, "1024", offsetof(pyro_cfg, max_label_name_length), "labels with longer names are dropped (bytes)", NULL},
    {"", PC_CFG_GROUP, "", offsetof(pyro_cfg, client), "the HTTP client", pc_http_client_keys},
    {"", PC_CFG_GROUP, "", offsetof(pyro_cfg, sender), "the sending queue and retries", pc_sender_keys},
    {0},
};
/* clang-format on */

/* What the label rules cut, per job (worker) and in total (loop thread). */
typedef struct cut_stats {
    uint64_t dropped_count;    /* over max_label_names */
    uint64_t dropped_name_len; /* name over max_label_name_length */
    uint64_t values_truncated; /* value over max_label_value_length */
    uint64_t values_sanitized; /* ingest: ',' or '}' in a value, bad chars in the app name */
    char example[200];         /* first cut seen, for the log line */
} cut_stats;

typedef struct pyro {
    pc_url url;
    char *base_path; /* url.path + "/ingest" or "/push.v1.PusherService/Push" */
    char *headers;   /* preformatted "Name: value\r\n" lines, without the tenant */
    pc_tls_ctx *tls; /* NULL: plain text */
    pc_auth *auth;   /* NULL: no authenticator */
    pc_http_client *client;
    uint64_t requests;
    cut_stats cuts_total;   /* since start */
    cut_stats cuts_pending; /* since the last log line */
    uint64_t last_cut_log_ms;
    bool cut_logged;
} pyro;

typedef struct send_job send_job;

/* One /ingest request (ingest), or the single push request (push). */
typedef struct send_req {
    send_job *j;
    char *path;
    pc_buf body;
    size_t samples;
} send_req;

/* One attempt: every request of one batch. */
struct send_job {
    pc_export_req r;
    char *headers; /* x->headers + tenant */
    /* filled by the worker */
    send_req **reqs;
    size_t n_reqs, cap_reqs;
    cut_stats cuts;
    /* completion */
    size_t pending;
    pc_export_outcome outcome; /* the worst answer so far, the longest Retry-After */
};

/* ---- config ---- */

static int label_name_ok(const char *s)
{
    if (!s || !*s || (*s >= '0' && *s <= '9')) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_'))
            return 0;
    return 1;
}

static int pyro_validate(void *cfgp, const pc_node *node, const char *path, pc_error *err)
{
    pyro_cfg *cfg = cfgp;
    pc_url u;
    pc_error e = {0};
    if (!cfg->endpoint || !*cfg->endpoint)
        return pc_cfg_errorf(err, node, path, "endpoint is required");
    if (pc_url_parse(cfg->endpoint, &u, &e) < 0)
        return pc_cfg_errorf(err, node, path, "endpoint: %s", e.msg);
    if (pc_http_client_validate(&cfg->client, node, path, "", err)) return PC_EINVAL;
    if (cfg->client.authenticator && cfg->username)
        return pc_cfg_key_errorf(err, node, path, "auth.authenticator",
                                 "conflicts with basic_auth");
    for (size_t i = 0; i < cfg->client.headers.n; i++) {
        const char *k = cfg->client.headers.keys[i];
        if ((cfg->tenant_id || cfg->tenant_from_request) && !strcasecmp(k, "X-Scope-OrgID"))
            return pc_cfg_errorf(err, node, path,
                                 "headers::%s: conflicts with tenant_id / tenant_from_request", k);
        if ((cfg->username || cfg->password) && !strcasecmp(k, "Authorization"))
            return pc_cfg_errorf(err, node, path, "headers::%s: conflicts with basic_auth", k);
    }
    if (cfg->tenant_id && !pc_http_header_safe(cfg->tenant_id))
        return pc_cfg_errorf(err, node, path, "tenant_id: line breaks are not allowed");
    if (cfg->password && !cfg->username)
        return pc_cfg_errorf(err, node, path, "basic_auth::username is required with a password");
    if (cfg->username && strchr(cfg->username, ':'))
        return pc_cfg_errorf(err, node, path, "basic_auth::username: must not contain ':'");
    if (cfg->max_label_value_length <= 0 || cfg->max_label_name_length <= 0)
        return pc_cfg_errorf(err, node, path,
                             "max_label_value_length and max_label_name_length must be > 0");
    /* __name__, service_name (and pyroscope_spy, added by /ingest) always take a slot */
    int64_t fixed = 2 + (cfg->protocol == PROTO_INGEST) + (int64_t)cfg->external_labels.n;
    if (cfg->max_label_names < fixed)
        return pc_cfg_errorf(err, node, path,
                             "max_label_names must be at least %" PRId64
                             " (__name__, service_name%s and the external_labels)",
                             fixed, cfg->protocol == PROTO_INGEST ? ", pyroscope_spy" : "");
    for (size_t i = 0; i < cfg->external_labels.n; i++) {
        const char *k = cfg->external_labels.keys[i];
        if (!label_name_ok(k) || !strncmp(k, "__", 2))
            return pc_cfg_errorf(
                err, node, path,
                "external_labels::%s: label names must match [A-Za-z_][A-Za-z0-9_]* "
                "and not start with \"__\"",
                k);
        if ((int64_t)strlen(k) > cfg->max_label_name_length)
            return pc_cfg_errorf(err, node, path,
                                 "external_labels::%s: longer than max_label_name_length", k);
    }
    return pc_sender_validate(&cfg->sender, node, path, err);
}

static int pyro_create(pc_exporter *ex, pc_error *err)
{
    pyro_cfg *cfg = ex->c->cfg;
    pyro *x = pc_xcalloc(1, sizeof(*x));
    (void)err;
    ex->priv = x;
    pc_url_parse(cfg->endpoint, &x->url, NULL);
    pc_buf p = {0};
    pc_buf_printf(&p, "%s%s", x->url.path,
                  cfg->protocol == PROTO_PUSH ? "/push.v1.PusherService/Push" : "/ingest");
    x->base_path = pc_xstrdup((char *)p.data);
    pc_buf_free(&p);

    pc_buf h = {0};
    pc_buf_printf(&h, "User-Agent: profcol/%s\r\n", PROFCOL_VERSION);
    if (cfg->protocol == PROTO_PUSH)
        pc_buf_printf(&h,
                      "Content-Type: application/proto\r\nConnect-Protocol-Version: 1\r\n"
                      "Connect-Timeout-Ms: %" PRIu64 "\r\n",
                      cfg->client.timeout_ms);
    else
        pc_buf_printf(&h, "Content-Type: application/octet-stream\r\n");
    if (cfg->username) {
        pc_buf up = {0};
        pc_buf_printf(&up, "%s:%s", cfg->username, cfg->password ? cfg->password : "");
        char *b64 = pc_base64_encode(up.data, up.len, true);
        pc_buf_printf(&h, "Authorization: Basic %s\r\n", b64);
        free(b64);
        pc_buf_free(&up);
    }
    for (size_t i = 0; i < cfg->client.headers.n; i++)
        pc_buf_printf(&h, "%s: %s\r\n", cfg->client.headers.keys[i], cfg->client.headers.vals[i]);
    x->headers = pc_xstrdup((char *)h.data);
    pc_buf_free(&h);
    return 0;
}

static int pyro_start(pc_exporter *e, pc_error *err)
{
    pc_component *c = e->c;
    pyro *x = e->priv;
    pyro_cfg *cfg = c->cfg;
    int rc = pc_exporter_http_open(c, &x->url, &cfg->client, &cfg->sender, &x->client, &x->tls,
                                   &x->auth, err);
    if (rc < 0) return rc;
    PC_INFO(c->id, "sending to %s://%s:%d%s (%s)", x->tls ? "https" : "http", x->url.host,
            x->url.port, x->base_path, protocols[cfg->protocol]);
    return 0;
}

/* ---- labels (worker thread) ---- */

typedef struct label {
    char *name, *value;
    bool fixed; /* __name__, service_name, external labels: never dropped for the count */
} label;

typedef struct labelset {
    label *v;
    size_t n, cap;
} labelset;

static void cut_note(cut_stats *cs, const char *fmt, const char *name)
{
    if (!cs->example[0]) snprintf(cs->example, sizeof cs->example, fmt, name);
}

static label *ls_find(labelset *ls, const char *name)
{
    for (size_t i = 0; i < ls->n; i++)
        if (!strcmp(ls->v[i].name, name)) return &ls->v[i];
    return NULL;
}

/* Takes ownership of name and value. An existing label is replaced when override is set. */
static void ls_put(labelset *ls, char *name, char *value, bool fixed, bool override)
{
    label *l = ls_find(ls, name);
    if (l) {
        if (override) {
            free(l->value);
            l->value = value;
            l->fixed = l->fixed || fixed;
        } else {
            free(value);
        }
        free(name);
        return;
    }
    if (ls->n == ls->cap) {
        ls->cap = ls->cap ? ls->cap * 2 : 16;
        ls->v = pc_xrealloc(ls->v, ls->cap * sizeof(label));
    }
    ls->v[ls->n++] = (label){name, value, fixed};
}

static void ls_free(labelset *ls)
{
    for (size_t i = 0; i < ls->n; i++) {
        free(ls->v[i].name);
        free(ls->v[i].value);
    }
    free(ls->v);
    memset(ls, 0, sizeof *ls);
}

static int label_cmp(const void *a, const void *b)
{
    return strcmp(((const label *)a)->name, ((const label *)b)->name);
}

/* Pyroscope's rule: every character outside [A-Za-z0-9_] becomes '_'; a leading digit gets a
 * '_' in front (label names must match [A-Za-z_][A-Za-z0-9_]*). */
static char *sanitize_name(const char *in)
{
    size_t n = strlen(in);
    bool digit = in[0] >= '0' && in[0] <= '9';
    char *out = pc_xmalloc(n + 2), *o = out;
    if (digit) *o++ = '_';
    for (const char *p = in; *p; p++) {
        char ch = *p;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '_';
        *o++ = ok ? ch : '_';
    }
    *o = 0;
    return out;
}

/* String form of a scalar AnyValue (or a one-element array of one); NULL for other types. */
static char *anyvalue_text(const pc_dictionary *d, const pc_anyvalue *v, int depth)
{
    char buf[64];
    if (!v) return NULL;
    switch (v->value_case) {
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE:
        return pc_xstrdup(v->string_value ? v->string_value : "");
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE_STRINDEX: {
        int32_t i = v->string_value_strindex;
        if (i < 0 || (i > 0 && (!d || !d->string_table || (size_t)i >= d->n_string_table)))
            return NULL;
        return pc_xstrdup(pc_dict_str(d, i));
    }
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE:
        snprintf(buf, sizeof buf, "%" PRId64, v->int_value);
        return pc_xstrdup(buf);
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE:
        return pc_xstrdup(v->bool_value ? "true" : "false");
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_DOUBLE_VALUE:
        snprintf(buf, sizeof buf, "%.17g", v->double_value);
        return pc_xstrdup(buf);
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_ARRAY_VALUE:
        if (depth == 0 && v->array_value && v->array_value->values && v->array_value->n_values == 1)
            return anyvalue_text(d, v->array_value->values[0], 1);
        return NULL;
    default: return NULL;
    }
}

/* Cut s to at most max bytes without splitting a UTF-8 sequence. True if it was cut. */
static bool truncate_utf8(char *s, size_t max)
{
    size_t n = strlen(s);
    if (n <= max) return false;
    size_t cut = max;
    while (cut > 0 && ((unsigned char)s[cut] & 0xC0) == 0x80)
        cut--;
    s[cut] = 0;
    return true;
}

static bool has_sub(const char *s, const char *sub)
{
    return strstr(s, sub) != NULL;
}

/* The string value of profile attribute key of the pprof's first profile, or NULL. */
static const char *profile_attr(const pc_dictionary *d, const pc_pprof_out *o, const char *key)
{
    const pc_profile *p = o->n_profiles ? o->profiles[0] : NULL;
    size_t n = p && p->attribute_indices ? p->n_attribute_indices : 0;
    size_t na = d && d->attribute_table ? d->n_attribute_table : 0;
    for (size_t i = 0; i < n; i++) {
        int32_t ai = p->attribute_indices[i];
        if (ai <= 0 || (size_t)ai >= na || !d->attribute_table[ai]) continue;
        const pc_kvu *a = d->attribute_table[ai];
        if (!strcmp(pc_dict_str(d, a->key_strindex), key)) return pc_anyvalue_str(d, a->value);
    }
    return NULL;
}

/* The profile's own name when a receiver gave it (pyroscope.profile.name: the JFR decoder gives
 * Pyroscope's), else the server's /ingest heuristic (spec §1.6) over the pprof's sample types,
 * with its default display names (samples -> cpu, goroutine -> goroutines, contentions/delay ->
 * mutex_*). */
static char *profile_name(const pc_dictionary *d, const pc_pprof_out *o)
{
    const char *given = profile_attr(d, o, "pyroscope.profile.name");
    if (given && *given) return sanitize_name(given);
    const char *last = "";
    for (size_t i = 0; i < o->n_profiles; i++) {
        const pc_value_type *vt = o->profiles[i]->sample_type;
        if (vt && !strcmp(pc_dict_str(d, vt->type_strindex), "wall")) return pc_xstrdup("wall");
    }
    const pc_value_type *pt = o->n_profiles ? o->profiles[0]->period_type : NULL;
    const char *period = pt ? pc_dict_str(d, pt->type_strindex) : "";
    for (size_t i = 0; i < o->n_profiles; i++) {
        const pc_value_type *vt = o->profiles[i]->sample_type;
        const char *st = vt ? pc_dict_str(d, vt->type_strindex) : "";
        const char *unit = vt ? pc_dict_str(d, vt->unit_strindex) : "";
        if (*st) last = st;
        if (!strcmp(st, "samples") || (!strcmp(period, "cpu") && !strcmp(unit, "count")))
            st = "cpu";
        else if (!strcmp(st, "goroutine"))
            st = "goroutines";
        else if (!strcmp(st, "contentions"))
            st = "mutex_count";
        else if (!strcmp(st, "delay"))
            st = "mutex_duration";
        if (has_sub(st, "cpu")) return pc_xstrdup("process_cpu");
        if (has_sub(st, "alloc_") || has_sub(st, "inuse_") || !strcmp(st, "space") ||
            !strcmp(st, "objects"))
            return pc_xstrdup("memory");
        if (has_sub(st, "mutex_")) return pc_xstrdup("mutex");
        if (has_sub(st, "block_")) return pc_xstrdup("block");
        if (has_sub(st, "goroutines")) return pc_xstrdup("goroutines");
    }
    /* the last sample type, as a valid metric name */
    return *last ? sanitize_name(last) : pc_xstrdup("unknown");
}

/* The resource's attributes as labels (names sanitized; too long ones dropped, counted). */
static void resource_labels(const pyro_cfg *cfg, const pc_dictionary *d, const pc_resource *r,
                            labelset *ls, cut_stats *cs)
{
    size_t na = r && r->attributes ? r->n_attributes : 0;
    for (size_t i = 0; i < na; i++) {
        const pc_keyvalue *kv = r->attributes[i];
        if (!kv) continue;
        const char *key = pc_keyvalue_key(d, kv);
        if (!*key || !strcmp(key, "service.name")) continue;
        char *name = sanitize_name(key);
        char *value = anyvalue_text(d, kv->value, 0);
        if (!strncmp(name, "__", 2) || !value || !*value) {
            free(name);
            free(value);
            continue;
        }
        if ((int64_t)strlen(name) > cfg->max_label_name_length) {
            cs->dropped_name_len++;
            cut_note(cs, "label \"%.100s...\" dropped: name longer than max_label_name_length",
                     name);
            free(name);
            free(value);
            continue;
        }
        ls_put(ls, name, value, false, false); /* first of two that sanitize alike wins */
    }
}

/* max_label_value_length, and for /ingest the characters its name grammar cannot carry. */
static void value_rules(const pyro_cfg *cfg, labelset *ls, cut_stats *cs)
{
    bool ingest = cfg->protocol == PROTO_INGEST;
    for (size_t i = 0; i < ls->n; i++) {
        label *l = &ls->v[i];
        if (!strcmp(l->name, "__name__")) continue; /* ours, short and valid */
        if (truncate_utf8(l->value, (size_t)cfg->max_label_value_length)) {
            cs->values_truncated++;
            cut_note(cs, "label \"%.100s\" value truncated to max_label_value_length", l->name);
        }
        if (!ingest) continue;
        /* the name grammar has no escaping: a ',' or '}' would end the value */
        bool changed = false;
        for (char *p = l->value; *p; p++)
            if (*p == ',' || *p == '}') {
                *p = '_';
                changed = true;
            }
        if (!strcmp(l->name, "service_name")) /* the app name: [A-Za-z0-9_.\-/] only */
            for (char *p = l->value; *p; p++) {
                char ch = *p;
                if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                      (ch >= '0' && ch <= '9') || strchr("_.-/", ch))) {
                    *p = '_';
                    changed = true;
                }
            }
        if (changed) {
            cs->values_sanitized++;
            cut_note(cs, "label \"%.100s\": characters the ingest name cannot carry became '_'",
                     l->name);
        }
    }
}

/* The series labels of one produced pprof, sorted by name, limits applied. */
static void build_labels(const pyro_cfg *cfg, const pc_dictionary *d, const pc_pprof_out *o,
                         labelset *ls, cut_stats *cs)
{
    bool ingest = cfg->protocol == PROTO_INGEST;
    const pc_resource *r = o->rp ? o->rp->resource : NULL;
    const char *svc = pc_resource_attr_str(d, r, "service.name");
    ls_put(ls, pc_xstrdup("__name__"), profile_name(d, o), true, true);
    ls_put(ls, pc_xstrdup("service_name"), pc_xstrdup(svc && *svc ? svc : "unknown_service"), true,
           true);
    /* the profiling mode of a JFR recording, as Pyroscope labels its JFR series (spec/jfr.md §3.4)
     */
    const char *jfr_event = profile_attr(d, o, "pyroscope.jfr_event");
    if (jfr_event && *jfr_event)
        ls_put(ls, pc_xstrdup("jfr_event"), pc_xstrdup(jfr_event), true, true);
    for (size_t i = 0; i < cfg->external_labels.n; i++)
        ls_put(ls, pc_xstrdup(cfg->external_labels.keys[i]),
               pc_xstrdup(cfg->external_labels.vals[i]), true, true);

    resource_labels(cfg, d, r, ls, cs);
    value_rules(cfg, ls, cs);
    qsort(ls->v, ls->n, sizeof(label), label_cmp);
    size_t max = (size_t)cfg->max_label_names - (ingest ? 1 : 0); /* + pyroscope_spy */
    if (ls->n > max) {
        /* drop resource labels from the end of the sorted order: stable across batches */
        size_t excess = ls->n - max;
        for (size_t i = ls->n; i-- > 0 && excess;) {
            if (ls->v[i].fixed) continue;
            cs->dropped_count++;
            cut_note(cs, "label \"%.100s\" dropped: more than max_label_names labels",
                     ls->v[i].name);
            free(ls->v[i].name);
            free(ls->v[i].value);
            memmove(&ls->v[i], &ls->v[i + 1], (ls->n - i - 1) * sizeof(label));
            ls->n--;
            excess--;
        }
    }
}

/* ---- encoding (worker thread) ---- */

static size_t pprof_samples(const pc_pprof_out *o)
{
    size_t n = 0;
    for (size_t i = 0; i < o->n_profiles; i++)
        n += pc_profile_n_samples(o->profiles[i]);
    return n;
}

static send_req *job_add_req(send_job *j)
{
    if (j->n_reqs == j->cap_reqs) {
        j->cap_reqs = j->cap_reqs ? j->cap_reqs * 2 : 4;
        j->reqs = pc_xrealloc(j->reqs, j->cap_reqs * sizeof(send_req *));
    }
    send_req *r = pc_xcalloc(1, sizeof(*r));
    r->j = j;
    j->reqs[j->n_reqs++] = r;
    return r;
}

static void url_encode(pc_buf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            strchr("-._~", *p)) {
            pc_buf_append(b, p, 1);
        } else {
            char e[3] = {'%', hex[*p >> 4], hex[*p & 15]};
            pc_buf_append(b, e, 3);
        }
    }
}

/* A random (version 4) UUID in its text form. */
static void uuid_v4(char out[37])
{
    uint8_t u[16];
    if (uv_random(NULL, NULL, u, sizeof u, 0, NULL) != 0) {
        /* no entropy source: still unique enough for an ID that is only a hint */
        uint64_t t = uv_hrtime();
        for (size_t i = 0; i < sizeof u; i++)
            u[i] = (uint8_t)((t >> (8 * (i % 8))) ^ (uint64_t)rand());
    }
    u[6] = (uint8_t)((u[6] & 0x0F) | 0x40);
    u[8] = (uint8_t)((u[8] & 0x3F) | 0x80);
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
             u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
             u[14], u[15]);
}

/* Append one PushRequest.series entry. A PushRequest is just its repeated field 1, so the
 * request is built series by series without holding every pprof at once. */
static void push_append_series(pc_buf *body, const labelset *ls, const pc_pprof_out *o)
{
    Push__V1__LabelPair *pairs = pc_xcalloc(ls->n ? ls->n : 1, sizeof(*pairs));
    Push__V1__LabelPair **pp = pc_xcalloc(ls->n ? ls->n : 1, sizeof(*pp));
    for (size_t i = 0; i < ls->n; i++) {
        push__v1__label_pair__init(&pairs[i]);
        pairs[i].name = ls->v[i].name;
        pairs[i].value = ls->v[i].value;
        pp[i] = &pairs[i];
    }
    char id[37];
    uuid_v4(id);
    Push__V1__RawSample sample = PUSH__V1__RAW_SAMPLE__INIT;
    sample.raw_profile.data = (uint8_t *)o->data;
    sample.raw_profile.len = o->len;
    sample.id = id;
    Push__V1__RawSample *samples[1] = {&sample};
    Push__V1__RawProfileSeries series = PUSH__V1__RAW_PROFILE_SERIES__INIT;
    series.n_labels = ls->n;
    series.labels = pp;
    series.n_samples = 1;
    series.samples = samples;
    size_t n = push__v1__raw_profile_series__get_packed_size(&series);
    pc_buf_append(body, "\x0a", 1);
    pc_proto_buf_varint(body, n);
    pc_buf_reserve(body, n);
    push__v1__raw_profile_series__pack(&series, body->data + body->len);
    body->len += n;
    free(pairs);
    free(pp);
}

typedef struct enc_ctx {
    send_job *j;
    const pyro *x;
    const pyro_cfg *cfg;
    const pc_dictionary *d;
    send_req *push; /* the one push request */
    int64_t now_s;
} enc_ctx;

static void ingest_path(pc_buf *p, const char *base, const labelset *ls, const pc_pprof_out *o,
                        int64_t now_s)
{
    const label *svc = NULL, *spy = NULL;
    pc_buf name = {0};
    for (size_t i = 0; i < ls->n; i++) {
        if (!strcmp(ls->v[i].name, "service_name")) svc = &ls->v[i];
        /* the receiver keeps a client's spyName as pyroscope.spy: give it back as spyName */
        if (!strcmp(ls->v[i].name, "pyroscope_spy")) spy = &ls->v[i];
    }
    pc_buf_printf(&name, "%s{", svc ? svc->value : "unknown_service");
    bool first = true;
    for (size_t i = 0; i < ls->n; i++) {
        const label *l = &ls->v[i];
        /* the app name is service_name; __name__ is the server's to compute */
        if (l == svc || l == spy || !strcmp(l->name, "__name__")) continue;
        pc_buf_printf(&name, "%s%s=%s", first ? "" : ",", l->name, l->value);
        first = false;
    }
    pc_buf_append(&name, "}", 2); /* with the NUL */

    const pc_profile *p0 = o->profiles[0];
    int64_t from = now_s - 10, until = now_s;
    if (p0->time_unix_nano) {
        from = (int64_t)(p0->time_unix_nano / 1000000000u);
        until = (int64_t)((p0->time_unix_nano + p0->duration_nano) / 1000000000u);
        if (until < from) until = from;
    }
    pc_buf_printf(p, "%s?name=", base);
    url_encode(p, (const char *)name.data);
    pc_buf_printf(p, "&from=%" PRId64 "&until=%" PRId64 "&format=pprof&spyName=", from, until);
    url_encode(p, spy ? spy->value : SPY_NAME);
    pc_buf_append(p, "", 1);
    pc_buf_free(&name);
}

static int encode_one(const pc_pprof_out *o, void *ud)
{
    enc_ctx *e = ud;
    send_job *j = e->j;
    if (!o->n_profiles) return 0;
    labelset ls = {0};
    build_labels(e->cfg, e->d, o, &ls, &j->cuts);
    size_t samples = pprof_samples(o);
    if (e->cfg->protocol == PROTO_PUSH) {
        if (!e->push) e->push = job_add_req(j);
        push_append_series(&e->push->body, &ls, o);
        e->push->samples += samples;
    } else {
        send_req *r = job_add_req(j);
        pc_buf path = {0};
        ingest_path(&path, e->x->base_path, &ls, o, e->now_s);
        r->path = (char *)path.data;
        pc_buf_append(&r->body, o->data, o->len);
        r->samples = samples;
    }
    ls_free(&ls);
    return 0;
}

static void pyro_encode(pc_export_req *r)
{
    send_job *j = (send_job *)r;
    enc_ctx e = {.j = j,
                 .x = r->e->priv,
                 .cfg = r->e->c->cfg,
                 .d = pc_batch_req(r->batch)->dictionary,
                 .now_s = (int64_t)time(NULL)};
    static const pc_dictionary empty =
        OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__PROFILES_DICTIONARY__INIT;
    if (!e.d) e.d = &empty;
    pc_batch_to_pprof(r->batch, encode_one, &e);
    if (e.push) e.push->path = pc_xstrdup(e.x->base_path);
}

/* ---- sending (loop thread) ---- */

static void free_req(send_req *r)
{
    free(r->path);
    pc_buf_free(&r->body);
    free(r);
}

static void pyro_release(pc_export_req *r)
{
    send_job *j = (send_job *)r;
    for (size_t i = 0; i < j->n_reqs; i++)
        if (j->reqs[i]) free_req(j->reqs[i]);
    free(j->reqs);
    free(j->headers);
}

static void on_response(const pc_http_response *resp, void *arg)
{
    send_req *q = arg;
    send_job *j = q->j;
    pyro *x = j->r.e->priv;
    pc_export_outcome o;
    pc_exporter_http_outcome(resp, &x->url, &o);
    pc_export_outcome_merge(&j->outcome, &o);
    if (--j->pending == 0) pc_export_done(&j->r, &j->outcome);
}

static void cuts_add(cut_stats *dst, const cut_stats *src)
{
    dst->dropped_count += src->dropped_count;
    dst->dropped_name_len += src->dropped_name_len;
    dst->values_truncated += src->values_truncated;
    dst->values_sanitized += src->values_sanitized;
    if (!dst->example[0]) memcpy(dst->example, src->example, sizeof dst->example);
}

/* Count what the label rules cut; log it at most once per CUT_LOG_INTERVAL_MS. */
static void account_cuts(pc_exporter *e, const cut_stats *cs)
{
    pyro *x = e->priv;
    if (!cs->dropped_count && !cs->dropped_name_len && !cs->values_truncated &&
        !cs->values_sanitized)
        return;
    cuts_add(&x->cuts_total, cs);
    cuts_add(&x->cuts_pending, cs);
    uint64_t now = uv_now(e->c->loop);
    if (x->cut_logged && now - x->last_cut_log_ms < CUT_LOG_INTERVAL_MS) return;
    const cut_stats *p = &x->cuts_pending;
    PC_WARN(e->c->id,
            "labels cut to Pyroscope's rules: %" PRIu64 " dropped over max_label_names, %" PRIu64
            " dropped over max_label_name_length, %" PRIu64 " values truncated, %" PRIu64
            " values sanitized (e.g. %s)",
            p->dropped_count, p->dropped_name_len, p->values_truncated, p->values_sanitized,
            p->example);
    memset(&x->cuts_pending, 0, sizeof x->cuts_pending);
    x->last_cut_log_ms = now;
    x->cut_logged = true;
}

/* x->headers, the authenticator's and the tenant. */
static char *request_headers(pc_exporter *e, const pc_batch *b)
{
    pyro *x = e->priv;
    pyro_cfg *cfg = e->c->cfg;
    const char *tenant = cfg->tenant_id;
    if (cfg->tenant_from_request) {
        const char *t = pc_batch_tenant(b);
        if (t && *t && pc_http_header_safe(t))
            tenant = t;
        else if (t && *t)
            PC_WARN(e->c->id, "ignoring a received tenant id with a line break");
    }
    pc_buf h = {0};
    pc_buf_printf(&h, "%s", x->headers);
    if (x->auth) pc_auth_headers(x->auth, &h); /* per send: a token file may have been reloaded */
    if (tenant && *tenant) pc_buf_printf(&h, "X-Scope-OrgID: %s\r\n", tenant);
    char *out = pc_xstrdup((char *)h.data);
    pc_buf_free(&h);
    return out;
}

/* One attempt: one push, or one /ingest per pprof. A retry after a partial ingest failure
 * resends every pprof of the batch: Pyroscope may see some twice. */
static void pyro_send(pc_export_req *r)
{
    send_job *j = (send_job *)r;
    pyro *x = r->e->priv;
    pyro_cfg *cfg = r->e->c->cfg;
    j->outcome = PC_EXPORT_OK;
    account_cuts(r->e, &j->cuts);
    j->headers = request_headers(r->e, r->batch);
    if (j->n_reqs == 0) { /* nothing to send (no profiles): done */
        pc_export_done(r, &j->outcome);
        return;
    }
    j->pending = j->n_reqs;
    x->requests += j->n_reqs;
    /* the client copies each body: free it right away so a batch is held once, not twice */
    for (size_t i = 0; i < j->n_reqs; i++) {
        send_req *q = j->reqs[i];
        pc_http_client_request(x->client, "POST", q->path, j->headers, q->body.data, q->body.len,
                               (unsigned)cfg->client.timeout_ms, on_response, q);
        pc_buf_free(&q->body);
    }
}

/* ---- shutdown ---- */

static void pyro_stopping(pc_exporter *e)
{
    pyro *x = e->priv;
    if (!x->client) return; /* never started */
    const cut_stats *t = &x->cuts_total;
    PC_INFO(e->c->id,
            "stopping (%" PRIu64 " requests sent; labels dropped %" PRIu64
            ", values truncated %" PRIu64 ", sanitized %" PRIu64 ")",
            x->requests, t->dropped_count + t->dropped_name_len, t->values_truncated,
            t->values_sanitized);
}

static void pyro_close(pc_exporter *e)
{
    pyro *x = e->priv;
    pc_http_client *cl = x->client;
    x->client = NULL;
    if (cl)
        pc_http_client_close(cl, pc_exporter_closed, e);
    else
        pc_exporter_closed(e);
}

static void pyro_destroy(pc_exporter *e)
{
    pyro *x = e->priv;
    if (!x) return;
    pc_tls_ctx_free(x->tls);
    free(x->headers);
    free(x->base_path);
    free(x);
}

static const pc_exporter_def pyro_def = {
    .req_size = sizeof(send_job),
    .sender_cfg = offsetof(pyro_cfg, sender),
    .create = pyro_create,
    .start = pyro_start,
    .encode = pyro_encode,
    .send = pyro_send,
    .release = pyro_release,
    .stopping = pyro_stopping,
    .close = pyro_close,
    .destroy = pyro_destroy,
};

const pc_component_type pc_exporter_pyroscope = {
    .name = "pyroscope",
    .kind = PC_KIND_EXPORTER,
    .stability = "development",
    .cfg_size = sizeof(pyro_cfg),
    .cfg = pyro_keys,
    .validate = pyro_validate,
    PC_EXPORTER_CORE(&pyro_def),
    .doc = "Grafana Pyroscope exporter (Connect push API or /ingest, gzip pprof)",
};
