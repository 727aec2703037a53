/* Receiver "pyroscope_scrape": pulls profiles from applications' pprof endpoints (Go's
 * net/http/pprof, godeltaprof, anything serving pprof over HTTP), as Grafana Alloy's
 * pyroscope.scrape does (spec/scrape.md §2) and in place of the Collector contrib's pprof
 * receiver's HTTP scraper (§3).
 *
 * One scrape's way (ARCHITECTURE.md §2, with a GET of ours instead of a client's request):
 *   loop   a series (target x profile type) is due: its timer fires (first at a hash-derived
 *          offset within the interval, so targets do not fire together); at most
 *          max_concurrent_scrapes run, the others wait in order; GET through the target's client
 *          (net/http_client.c: the body capped at max_body_size); the answer is checked (2xx,
 *          something that can be a profile: not empty, HTML or JSON);
 *   pool   the receiver recipe (sdk/receiver.h): decode with the pprof format under the decode
 *          budget (a gzip bomb stops at max_body_size inflated), then the resource attributes
 *          (the target's public labels) and the profile name; for a cumulative type, minus the
 *          previous scrape (pdata/delta.h): the first of a series sends nothing;
 *   loop   consumed by the pipelines; the outcome is counted per series (profcol_scrape_*).
 * A target that fails is counted by reason and logged at most once per interval; the others go
 * on. Targets come from static_configs, file_sd_configs and dns_sd_configs (targets.c,
 * discovery.c) and are added and removed while running. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/gzip.h"
#include "formats/pprof.h"
#include "pdata/dict.h"
#include "receivers/pyroscope_scrape/model.h"
#include "sdk/tls_config.h"

static const char *const schemes[] = {"http", "https", NULL};

/* clang-format off */
#define PTYPE_KEYS(i, name, pth, en, dl, cum)                                                   \
    {"profiling_config." name ".enabled", PC_CFG_BOOL, en, offsetof(scrape_cfg, types[i].enabled), \
     "scrape " name, NULL},                                                                        \
    {"profiling_config." name ".path", PC_CFG_STRING, pth, offsetof(scrape_cfg, types[i].path),   \
     "its path", NULL},                                                                            \
    {"profiling_config." name ".delta", PC_CFG_BOOL, dl, offsetof(scrape_cfg, types[i].delta),  \
     "as Alloy's delta: ask for a window (?seconds=N, N from delta_profiling_duration)", NULL},    \
    {"profiling_config." name ".cumulative", PC_CFG_BOOL, cum,                                     \
     offsetof(scrape_cfg, types[i].cumulative),                                                    \
     "values only grow: send each scrape minus the previous one", NULL}
/* clang-format on */

/* clang-format off */
static const pc_cfg_key scrape_keys[] = {
    {"job_name", PC_CFG_STRING, "", offsetof(scrape_cfg, job_name), "the label job (default: the receiver's id)", NULL},
    {"scrape_interval", PC_CFG_DURATION, "15s", offsetof(scrape_cfg, interval_ms), "time between two scrapes of a target's profile type", NULL},
    {"scrape_timeout", PC_CFG_DURATION, "10s", offsetof(scrape_cfg, timeout_ms), "time for one scrape (for a ?seconds=N window: N seconds more)", NULL},
    {"delta_profiling_duration", PC_CFG_DURATION, "", offsetof(scrape_cfg, cpu_ms), "the window of CPU (delta) profiles (default: scrape_interval - 1s)", NULL},
    {"max_concurrent_scrapes", PC_CFG_INT, "64", offsetof(scrape_cfg, max_concurrent), "scrapes running at once; the others wait in order", NULL},
    {"max_body_size", PC_CFG_SIZE, "16MiB", offsetof(scrape_cfg, max_body), "largest profile taken, as received and inflated", NULL},
    {"max_decoded_size", PC_CFG_SIZE, "0", offsetof(scrape_cfg, max_decoded), "decode budget of one profile (docs/limits.md); 0: 16 x max_body_size", NULL},
    {"scheme", PC_CFG_ENUM, "http", offsetof(scrape_cfg, scheme), "http or https (a target's __scheme__ label overrides it)", schemes},
    {"profiling_config.path_prefix", PC_CFG_STRING, "", offsetof(scrape_cfg, path_prefix), "put before every path (a target's __profile_path_prefix__ label overrides it)", NULL},
    PTYPE_KEYS(T_CPU, "process_cpu", "/debug/pprof/profile", "true", "true", "false"),
    PTYPE_KEYS(T_MEMORY, "memory", "/debug/pprof/heap", "true", "false", "true"),
    PTYPE_KEYS(T_GOROUTINE, "goroutine", "/debug/pprof/goroutine", "true", "false", "false"),
    PTYPE_KEYS(T_MUTEX, "mutex", "/debug/pprof/mutex", "true", "false", "true"),
    PTYPE_KEYS(T_BLOCK, "block", "/debug/pprof/block", "true", "false", "true"),
    PTYPE_KEYS(T_FGPROF, "fgprof", "/debug/fgprof", "false", "true", "false"),
    PTYPE_KEYS(T_DMEMORY, "godeltaprof_memory", "/debug/pprof/delta_heap", "false", "false", "false"),
    PTYPE_KEYS(T_DMUTEX, "godeltaprof_mutex", "/debug/pprof/delta_mutex", "false", "false", "false"),
    PTYPE_KEYS(T_DBLOCK, "godeltaprof_block", "/debug/pprof/delta_block", "false", "false", "false"),
    {"profiling_config.custom", PC_CFG_NODE, "", offsetof(scrape_cfg, custom), "more types: name -> {path, enabled (true), delta (false), cumulative (false)}", NULL},
    {"static_configs", PC_CFG_NODE, "", offsetof(scrape_cfg, static_configs), "[{targets: [host:port...], labels: {name: value}}]", NULL},
    {"file_sd_configs", PC_CFG_NODE, "", offsetof(scrape_cfg, file_sd), "[{files: [path or pattern with one * (.json, .yml, .yaml)], refresh_interval (5m)}]: target groups read from files, again when they change", NULL},
    {"dns_sd_configs", PC_CFG_NODE, "", offsetof(scrape_cfg, dns_sd), "[{names: [...], type (A, AAAA or SRV), port, refresh_interval (30s)}]", NULL},
    {"headers", PC_CFG_MAP, "", offsetof(scrape_cfg, client.headers), "extra request headers", NULL},
    {"max_connections", PC_CFG_INT, "4", offsetof(scrape_cfg, client.max_connections), "keep-alive connections to one target", NULL},
    {"", PC_CFG_GROUP, "", offsetof(scrape_cfg, client.tls), "TLS of a client", pc_tls_client_keys},
    {"auth.authenticator", PC_CFG_STRING, "", offsetof(scrape_cfg, client.authenticator), "id of an authenticator extension (bearertokenauth, basicauth with client_auth) whose credentials are added to every request", NULL},
    {0},
};
/* clang-format on */

/* The built-in types' names as Pyroscope knows them, and what is subtracted. */
static const char *const builtin_names[N_BUILTIN] = {"process_cpu",
                                                     "memory",
                                                     "goroutine",
                                                     "mutex",
                                                     "block",
                                                     "fgprof",
                                                     "godeltaprof_memory",
                                                     "godeltaprof_mutex",
                                                     "godeltaprof_block"};
static const char *const builtin_reports[N_BUILTIN] = {
    "process_cpu", "memory", "goroutine", "mutex", "block", "fgprof", "memory", "mutex", "block"};
static const char *const sub_memory[] = {"alloc_objects", "alloc_space", NULL};
static const char *const sub_contention[] = {"contentions", "delay", NULL};

/* ---- config --------------------------------------------------------------------------------- */

static const char *const custom_keys[] = {"path", "enabled", "delta", "cumulative"};

/* One custom type {path, enabled, delta, cumulative} into *t (t may be NULL: check only). */
static int custom_parse(const char *name, const pc_node *n, const char *path, ptype *t, bool *on,
                        pc_error *err)
{
    bool f[3] = {true, false, false};
    if (n->kind != PC_NODE_MAP) return pc_cfg_errorf(err, n, path, "custom::%s: a map", name);
    for (size_t i = 0; i < n->n; i++) {
        size_t k = 0;
        while (k < 4 && strcmp(n->keys[i], custom_keys[k]))
            k++;
        if (k == 4 || n->vals[i]->kind != PC_NODE_SCALAR)
            return pc_cfg_errorf(err, n->vals[i], path, "custom::%s::%s: unknown key", name,
                                 n->keys[i]);
        if (k > 0 && pc_parse_bool(n->vals[i]->scalar, &f[k - 1]))
            return pc_cfg_errorf(err, n->vals[i], path, "custom::%s::%s: true or false", name,
                                 n->keys[i]);
    }
    const pc_node *p = pc_node_get(n, "path");
    if (!p || p->scalar[0] != '/')
        return pc_cfg_errorf(err, n, path, "custom::%s::path: required, starting with /", name);
    *on = f[0];
    if (t)
        *t = (ptype){.name = pc_xstrdup(name),
                     .report = pc_xstrdup(name),
                     .path = pc_xstrdup(p->scalar),
                     .seconds = f[1],
                     .sub_all = f[2]};
    return 0;
}

/* The enabled types, built-in then custom, into x (NULL: check only). */
static int types_build(const scrape_cfg *cfg, const char *path, scrape_recv *x, pc_error *err)
{
    const pc_node *c = cfg->custom;
    if (c && c->kind != PC_NODE_MAP && c->kind != PC_NODE_NULL)
        return pc_cfg_errorf(err, c, path, "profiling_config::custom: a map of name -> type");
    size_t nc = c && c->kind == PC_NODE_MAP ? c->n : 0;
    if (x) x->types = pc_xcalloc(N_BUILTIN + nc, sizeof(ptype));
    for (int i = 0; i < N_BUILTIN; i++) {
        const ptype_cfg *tc = &cfg->types[i];
        if (!tc->enabled) continue;
        if (!tc->path || tc->path[0] != '/')
            return pc_cfg_errorf(err, NULL, path, "profiling_config::%s::path: must start with /",
                                 builtin_names[i]);
        if (!x) continue;
        bool go_cum = i == T_MEMORY || i == T_MUTEX || i == T_BLOCK;
        x->types[x->n_types++] = (ptype){
            .name = pc_xstrdup(builtin_names[i]),
            .report = pc_xstrdup(builtin_reports[i]),
            .path = pc_xstrdup(tc->path),
            .seconds = tc->delta,
            .sub = tc->cumulative && go_cum ? (i == T_MEMORY ? sub_memory : sub_contention) : NULL,
            .sub_all = tc->cumulative && !go_cum};
    }
    for (size_t i = 0; i < nc; i++) {
        for (int b = 0; b < N_BUILTIN; b++)
            if (!strcmp(c->keys[i], builtin_names[b]))
                return pc_cfg_errorf(err, c->vals[i], path,
                                     "profiling_config::custom::%s: a built-in type's name",
                                     c->keys[i]);
        ptype t = {0};
        bool on = false;
        if (custom_parse(c->keys[i], c->vals[i], path, x ? &t : NULL, &on, err)) return PC_EINVAL;
        if (x && on) x->types[x->n_types++] = t;
        if (x && !on) free(t.name), free(t.report), free(t.path);
    }
    return 0;
}

static int scrape_validate(void *cfgp, const pc_node *node, const char *path, pc_error *err)
{
    scrape_cfg *cfg = cfgp;
    cfg->client.timeout_ms = cfg->timeout_ms; /* the shared client settings' check wants one */
    if (pc_http_client_validate(&cfg->client, node, path, "", err)) return PC_EINVAL;
    if (cfg->client.max_connections == 0) /* no sender here to size it from */
        return pc_cfg_key_errorf(err, node, path, "max_connections", "must be > 0");
    if (cfg->interval_ms < 1000)
        return pc_cfg_key_errorf(err, node, path, "scrape_interval", "must be at least 1s");
    if (cfg->timeout_ms == 0)
        return pc_cfg_key_errorf(err, node, path, "scrape_timeout", "must be > 0");
    bool windowed = false;
    for (int i = 0; i < N_BUILTIN; i++)
        windowed |= cfg->types[i].enabled && cfg->types[i].delta;
    /* Alloy's rule, with the default following the interval instead of a fixed 14s */
    uint64_t cpu = cfg->cpu_ms ? cfg->cpu_ms : cfg->interval_ms - 1000;
    if (windowed && (cpu < 1000 || cpu + 1000 > cfg->interval_ms))
        return pc_cfg_key_errorf(err, node, path,
                                 cfg->cpu_ms ? "delta_profiling_duration" : "scrape_interval",
                                 "the CPU window (%llu ms) must be at least 1s and at most "
                                 "scrape_interval - 1s",
                                 (unsigned long long)cpu);
    if (cfg->max_concurrent < 1)
        return pc_cfg_key_errorf(err, node, path, "max_concurrent_scrapes", "must be > 0");
    if (cfg->max_body < 1024)
        return pc_cfg_key_errorf(err, node, path, "max_body_size", "must be at least 1KiB");
    if (types_build(cfg, path, NULL, err)) return PC_EINVAL;
    sd_target *ts = NULL;
    size_t n = 0;
    int rc = sd_parse_groups(cfg->static_configs, path, NULL, 0, &ts, &n, err);
    sd_targets_free(ts, n);
    if (rc) return rc;
    return discovery_validate(cfg, node, path, err);
}

/* ---- the schedule (loop) -------------------------------------------------------------------- */

static void run(series *s);

static uint64_t hash_str(const char *a, const char *b)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const char *p = a; *p; p++)
        h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
    for (const char *p = b; *p; p++)
        h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
    return h;
}

/* A slot is free: start the longest waiting. */
static void pump(scrape_recv *x)
{
    const scrape_cfg *cfg = x->c->cfg;
    while (x->qhead && x->active < (size_t)cfg->max_concurrent && !x->stopping) {
        series *s = x->qhead;
        x->qhead = s->qnext;
        if (!x->qhead) x->qtail = NULL;
        s->queued = false;
        s->qnext = NULL;
        run(s);
    }
}

/* Loop: the failure of a scrape, counted; logged at most once per interval per target (a dead
 * target fails every profile type). */
static void fail(series *s, scrape_reason r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(series *s, scrape_reason r, const char *fmt, ...)
{
    target *t = s->t;
    const scrape_cfg *cfg = t->x->c->cfg;
    s->errors[r]++;
    if (r != R_PIPELINE && r != R_OVERLAP) s->up = 0; /* the target did not fail */
    uint64_t now = uv_now(t->x->c->loop);
    if (t->logged && now - t->last_log_ms < cfg->interval_ms) {
        t->held_back++;
        return;
    }
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    PC_WARN(t->x->c->id, "scrape of %s://%s%s (%s) failed (%s): %s%s", t->scheme, t->address,
            s->path, s->type->name, scrape_reason_names[r], msg,
            t->held_back ? " (more failures of this target not logged)" : "");
    t->held_back = 0;
    t->last_log_ms = now;
    t->logged = true;
}

/* A Go process runs one CPU profile at a time: a second answers 500 (spec/scrape.md §1.2). */
static bool cpu_busy(const series *s)
{
    if (!s->type->seconds) return false;
    for (const target *t = s->t->x->targets; t; t = t->next) {
        if (!t->address || strcmp(t->address, s->t->address)) continue;
        for (const series *o = t->series; o; o = o->next)
            if (o != s && o->busy && o->type->seconds) return true;
    }
    return false;
}

/* Time until the series' next phase: offset + k x interval after the receiver started. Each fire
 * re-arms from the phase, not from when it ran, so a stalled loop (a slow start, a long pause)
 * spreads the targets again at their next interval instead of keeping them together. */
static uint64_t until_phase(const series *s, bool now_ok)
{
    const scrape_recv *x = s->t->x;
    uint64_t interval = ((const scrape_cfg *)x->c->cfg)->interval_ms;
    uint64_t elapsed = uv_now(x->c->loop) - x->base_ms;
    uint64_t r = (s->offset_ms + interval - elapsed % interval) % interval;
    return r || now_ok ? r : interval;
}

static void due(uv_timer_t *h)
{
    series *s = h->data;
    scrape_recv *x = s->t->x;
    const scrape_cfg *cfg = x->c->cfg;
    uv_timer_start(&s->timer, due, until_phase(s, false), 0);
    if (x->stopping || s->t->removed || s->queued) return;
    if (s->busy || cpu_busy(s)) {
        fail(s, R_OVERLAP, "the previous scrape%s is still running: this one is skipped",
             s->busy ? "" : " of a CPU profile of the same address");
        return;
    }
    if (x->active >= (size_t)cfg->max_concurrent) {
        s->queued = true;
        if (x->qtail)
            x->qtail->qnext = s;
        else
            x->qhead = s;
        x->qtail = s;
        return;
    }
    run(s);
}

static void series_schedule(series *s)
{
    scrape_recv *x = s->t->x;
    const scrape_cfg *cfg = x->c->cfg;
    uv_timer_init(x->c->loop, &s->timer);
    s->timer.data = s;
    s->timer_open = true;
    /* a stable offset within the interval per (address, path): spread, as Prometheus does */
    s->offset_ms = hash_str(s->t->address, s->path) % cfg->interval_ms;
    uv_timer_start(&s->timer, due, until_phase(s, true), 0);
}

/* ---- one scrape ----------------------------------------------------------------------------- */

typedef struct job {
    pc_receive rq; /* first: the recipe's part */
    series *s;
    uint8_t *body;
    size_t len;
    pc_delta_result dres;
    bool skip; /* nothing to send: a series' first scrape, or no samples */
    char who[400];
} job;

/* A series is freed once let go, its timer closed and no scrape of it runs. */
static void series_maybe_free(series *s)
{
    target *t = s->t;
    if (!t->removed || s->timer_open || s->busy) return;
    for (series **pp = &t->series; *pp; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    series_release(s);
    if (!t->series && !t->client) {
        free(t->source), free(t->key), free(t->address), free(t->scheme);
        free(t);
    }
}

/* The scrape is over, whatever its outcome. */
static void scrape_try_finish(scrape_recv *x);

static void scrape_end(series *s)
{
    scrape_recv *x = s->t->x;
    s->busy = false;
    s->duration_s = (double)(uv_now(x->c->loop) - s->started_ms) / 1000.0;
    x->active--;
    series_maybe_free(s);
    pump(x);
    scrape_try_finish(x);
}

/* Pool: the profile into a batch, named, and for a cumulative type minus the previous one. */
static int decode(pc_receive *rq, pc_budget *budget, pc_error *e)
{
    job *j = (job *)rq;
    series *s = j->s;
    const scrape_cfg *cfg = s->t->x->c->cfg;
    pc_format_opts o = {.attrs = s->attrs,
                        .n_attrs = s->n_attrs,
                        .service = s->service,
                        .scope_name = "profcol/pyroscope_scrape",
                        .max_bytes = cfg->max_body,
                        .budget = budget};
    int rc = pc_pprof_decode(j->body, j->len, &o, &rq->batch, e);
    if (rc) return rc;
    pc_batch *b = rq->batch;
    /* the exporters' __name__ (exporters/pyroscope.c): godeltaprof's is memory, mutex, block */
    pc_dict_builder *db = pc_dict_builder_from(b->arena, pc_batch_req(b)->dictionary);
    int32_t a =
        pc_dict_attr_str(db, "pyroscope.profile.name", s->type->report, strlen(s->type->report));
    pc_profile_iter it = {0};
    while (pc_profile_next(pc_batch_req(b), &it)) {
        pc_profile *p = (pc_profile *)it.prof;
        int32_t *idx = pc_arena_alloc(b->arena, (p->n_attribute_indices + 1) * sizeof(int32_t));
        if (p->n_attribute_indices)
            memcpy(idx, p->attribute_indices, p->n_attribute_indices * sizeof(int32_t));
        idx[p->n_attribute_indices++] = a;
        p->attribute_indices = idx;
    }
    pc_batch_req(b)->dictionary = pc_dict_builder_finish(db);
    pc_dict_builder_free(db);
    if (s->delta) {
        j->dres = pc_delta_apply(s->delta, b, s->type->sub_all ? NULL : s->type->sub);
        j->skip = j->dres != PC_DELTA_OK;
    }
    if (!pc_batch_items(b)) j->skip = true;
    return 0;
}

static bool wanted(pc_receive *rq)
{
    return !((job *)rq)->skip;
}

/* Loop: the recipe's outcome. */
static void answer(pc_receive *rq, int st, const char *msg)
{
    job *j = (job *)rq;
    series *s = j->s;
    static const char *const dres[] = {"delta", "first of a series", "a value went down"};
    PC_DEBUG(s->t->x->c->id, "%s%s (%s): %s, %zu samples sent%s%s", s->t->address, s->path,
             s->type->name, pc_strerror(st), st == PC_OK ? rq->items : 0, s->delta ? ", " : "",
             s->delta ? dres[j->dres] : "");
    if (st == PC_OK || st == PC_ECANCELED) {
        s->up = 1;
        s->samples = st == PC_OK ? rq->items : 0;
        if (j->dres == PC_DELTA_RESET)
            PC_INFO(s->t->x->c->id,
                    "%s%s (%s): a value went down (restarted?): a new delta series, this scrape "
                    "seeds it",
                    s->t->address, s->path, s->type->name);
    } else if (rq->stage == PC_RECEIVE_DECODE) {
        fail(s, st == PC_E2BIG ? R_TOO_LARGE : R_DECODE, "%s", msg ? msg : pc_strerror(st));
    } else {
        fail(s, R_PIPELINE, "%s", msg ? msg : pc_strerror(st));
    }
    free(j->body);
    free(j);
    scrape_end(s);
}

static const pc_receive_ops scrape_ops = {.decode = decode, .wanted = wanted, .answer = answer};

/* Not a profile (spec/scrape.md §2.5): empty, HTML, JSON, text. */
static const char *not_pprof(const pc_http_response *r)
{
    const char *ct = r->content_type ? r->content_type : "";
    size_t i = 0;
    while (i < r->body_len &&
           (r->body[i] == ' ' || r->body[i] == '\n' || r->body[i] == '\r' || r->body[i] == '\t'))
        i++;
    if (r->body_len <= 2) return "empty body";
    if (!strncasecmp(ct, "text/", 5) || strstr(ct, "json")) return "Content-Type is not a profile";
    if (r->body_len - i >= 10 && r->body[i] == '<') return "HTML body";
    if (r->body_len - i > 20 && (r->body[i] == '{' || r->body[i] == '[')) return "JSON body";
    if (!pc_is_gzip(r->body, r->body_len) && ((r->body[0] & 7) == 6 || (r->body[0] & 7) == 7))
        return "neither gzip nor protobuf";
    return NULL;
}

static void on_response(const pc_http_response *r, void *arg)
{
    series *s = arg;
    scrape_recv *x = s->t->x;
    const scrape_cfg *cfg = x->c->cfg;
    const char *why;
    if (r->error == UV_ECANCELED) { /* let go of, or shutting down */
    } else if (r->error) {
        scrape_reason re = r->error == UV_ETIMEDOUT  ? R_TIMEOUT
                           : r->error == UV_EMSGSIZE ? R_TOO_LARGE
                                                     : R_CONNECT;
        fail(s, re, "%s", r->error_msg ? r->error_msg : uv_strerror(r->error));
    } else if (r->status < 200 || r->status > 299) {
        fail(s, R_STATUS, "HTTP %d%s%.*s", r->status, r->body_len ? ": " : "",
             (int)(r->body_len > 120 ? 120 : r->body_len), (const char *)r->body);
    } else if ((why = not_pprof(r))) {
        fail(s, R_NOT_PPROF, "%s (%zu bytes, Content-Type %s)", why, r->body_len,
             r->content_type ? r->content_type : "none");
    } else if (!x->stopping && !s->t->removed) {
        job *j = pc_xcalloc(1, sizeof *j);
        j->s = s;
        j->body = pc_xmalloc(r->body_len);
        memcpy(j->body, r->body, r->body_len);
        j->len = r->body_len;
        snprintf(j->who, sizeof j->who, "%s://%s%s", s->t->scheme, s->t->address, s->path);
        j->rq.ops = &scrape_ops;
        j->rq.core = &x->core;
        j->rq.stats = &x->stats;
        j->rq.route = &x->c->next;
        j->rq.sig = PC_SIGNAL_PROFILES;
        j->rq.who = j->who;
        j->rq.max_decoded = pc_decoded_limit(cfg->max_decoded, cfg->max_body);
        j->rq.decoded_key = "max_decoded_size";
        j->rq.invalid_code = PC_EBADMSG;
        pc_receive_start(&j->rq);
        return; /* the scrape ends in answer() */
    }
    scrape_end(s);
}

static void run(series *s)
{
    scrape_recv *x = s->t->x;
    const scrape_cfg *cfg = x->c->cfg;
    x->active++;
    s->busy = true;
    s->scrapes++;
    s->started_ms = uv_now(x->c->loop);
    pc_buf h = {0};
    pc_buf_printf(&h, "User-Agent: profcol/%s\r\n%s", PROFCOL_VERSION, pc_nz(x->headers));
    if (x->auth) pc_auth_headers(x->auth, &h); /* per scrape: a token file may have changed */
    uint64_t timeout = cfg->timeout_ms;
    if (s->type->seconds) /* the window, then the answer */
        timeout += cfg->cpu_ms ? cfg->cpu_ms : cfg->interval_ms - 1000;
    pc_http_client_request(s->t->client, "GET", s->path, (const char *)h.data, NULL, 0,
                           (unsigned)timeout, on_response, s);
    pc_buf_free(&h);
}

/* ---- letting go ----------------------------------------------------------------------------- */

static void timer_closed(uv_handle_t *hd)
{
    series *s = hd->data;
    scrape_recv *x = s->t->x;
    s->timer_open = false;
    x->closing--;
    series_maybe_free(s);
    scrape_try_finish(x);
}

static void client_closed(void *arg)
{
    target *t = arg;
    scrape_recv *x = t->x;
    t->client = NULL;
    x->closing--;
    if (!t->series) {
        free(t->source), free(t->key), free(t->address), free(t->scheme);
        free(t);
    }
    scrape_try_finish(x);
}

static void target_release(target *t)
{
    scrape_recv *x = t->x;
    t->removed = true;
    for (series *s = t->series; s; s = s->next) {
        if (s->queued) {
            series **pp = &x->qhead;
            while (*pp != s)
                pp = &(*pp)->qnext;
            *pp = s->qnext;
            x->qtail = NULL;
            for (series *q = x->qhead; q; q = q->qnext)
                x->qtail = q;
            s->queued = false;
        }
        if (s->timer_open) {
            uv_timer_stop(&s->timer);
            x->closing++;
            uv_close((uv_handle_t *)&s->timer, timer_closed);
        }
    }
    if (t->client) {
        x->closing++;
        pc_http_client_close_now(t->client, client_closed, t);
    } else if (!t->series) {
        free(t->source), free(t->key), free(t->address), free(t->scheme);
        free(t);
    }
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

static int scrape_create(pc_component *c, pc_error *err)
{
    (void)err;
    scrape_recv *x = pc_xcalloc(1, sizeof *x);
    x->c = c;
    x->ops = (scrape_calls){series_schedule, target_release, scrape_try_finish};
    pc_receiver_core_init(&x->core, c);
    c->priv = x;
    return 0;
}

static int scrape_start(pc_component *c, pc_error *e)
{
    scrape_recv *x = c->priv;
    const scrape_cfg *cfg = c->cfg;
    if (types_build(cfg, c->id, x, e)) return PC_EINVAL;
    if (cfg->client.authenticator &&
        !(x->auth = pc_host_authenticator(c, cfg->client.authenticator, false, e)))
        return PC_EINVAL;
    if (!cfg->client.tls.insecure &&
        !(x->tls = pc_tls_client_ctx_new(&cfg->client.tls, "http/1.1", c->id, e)))
        return e ? e->code : PC_EINVAL;
    pc_buf h = {0};
    for (size_t i = 0; i < cfg->client.headers.n; i++)
        pc_buf_printf(&h, "%s: %s\r\n", cfg->client.headers.keys[i], cfg->client.headers.vals[i]);
    x->headers = h.data ? pc_xstrdup((char *)h.data) : NULL;
    pc_buf_free(&h);
    pc_receiver_stats_register(c, &x->stats, "http");
    pc_receiver_register_in_flight(c, &x->core.in_flight);
    char labels[300];
    snprintf(labels, sizeof labels, "receiver=\"%s\"", c->id);
    pc_metric_u64(c, "profcol_scrape_targets", "Targets being scraped", PC_METRIC_GAUGE, labels,
                  &x->n_targets);
    sd_target *ts = NULL;
    size_t n = 0;
    if (sd_parse_groups(cfg->static_configs, c->id, NULL, 0, &ts, &n, e)) return PC_EINVAL;
    uv_update_time(c->loop);
    x->base_ms = uv_now(c->loop);
    scrape_sync(x, "static", ts, n);
    if (discovery_start(x, e)) return e ? e->code : PC_EINVAL;
    PC_INFO(c->id, "scraping %llu target(s) every %llu ms (%zu profile types)",
            (unsigned long long)x->n_targets, (unsigned long long)cfg->interval_ms, x->n_types);
    return 0;
}

static void scrape_try_finish(scrape_recv *x)
{
    if (!x->stopping || x->active || x->closing || x->core.in_flight || !x->shutdown_done) return;
    pc_shutdown_done done = x->shutdown_done;
    x->shutdown_done = NULL;
    pc_receiver_core_flush(&x->core);
    PC_INFO(x->c->id, "stopped (accepted %llu samples, refused %llu)",
            (unsigned long long)x->stats.accepted[PC_SIGNAL_PROFILES],
            (unsigned long long)x->stats.refused[PC_SIGNAL_PROFILES]);
    done(x->c);
}

static void scrape_shutdown(pc_component *c, pc_shutdown_done done)
{
    scrape_recv *x = c->priv;
    x->stopping = true;
    x->shutdown_done = done;
    x->qhead = x->qtail = NULL;
    for (target *t = x->targets; t; t = t->next)
        for (series *s = t->series; s; s = s->next)
            s->queued = false;
    discovery_stop(x);
    scrape_drop_all(x);
    scrape_try_finish(x);
}

static void scrape_destroy(pc_component *c)
{
    scrape_recv *x = c->priv;
    if (!x) return;
    for (size_t i = 0; i < x->n_types; i++)
        free(x->types[i].name), free(x->types[i].report), free(x->types[i].path);
    free(x->types);
    free(x->headers);
    discovery_free(x);
    if (x->tls) pc_tls_ctx_free(x->tls);
    free(x);
}

const pc_component_type pc_receiver_pyroscope_scrape = {
    .name = "pyroscope_scrape",
    .kind = PC_KIND_RECEIVER,
    .stability = "alpha",
    .doc = "pulls profiles from pprof endpoints (Go net/http/pprof, godeltaprof): replaces "
           "Grafana Alloy's pyroscope.scrape and the Collector contrib's pprof receiver's HTTP "
           "scraper; deltas of cumulative types, static, file and DNS discovery",
    .cfg_size = sizeof(scrape_cfg),
    .cfg = scrape_keys,
    .validate = scrape_validate,
    .create = scrape_create,
    .start = scrape_start,
    .shutdown = scrape_shutdown,
    .destroy = scrape_destroy,
};
