/* Extension "profilez": a live flame graph of the profiles passing through, on its own HTTP
 * endpoint (like the Collector's zpages, for profiles).
 *
 * The service adds this extension's tap (a consumer that never refuses) to every profiles
 * pipeline as one more target of its exporters' fan-out (ARCHITECTURE.md §2, the tap). The tap
 * keeps a reference to the batch, answers done(PC_OK) at once and queues the batch; one work item
 * at a time on the thread pool takes the next queued batches (about 1 MiB of them) and
 * requests, aggregates the batches (agg.h: bounded by a stack budget per series and a window of
 * time slices) and builds the JSON the requests ask for, so the aggregate is only ever touched
 * by one thread at a time and never on the loop. When the batches waiting or
 * being aggregated hold max_pending_size, newer ones are released unread and counted: the tap
 * never holds data back, and what it keeps alive is bounded.
 *
 * GET /                 the page (profilez_page.html, embedded at build time)
 * GET /api/series       services and profile types seen in the window, limits and drops
 * GET /api/flamegraph?service=S&type=T     the merged stacks of one series as a tree
 * GET /api/top?service=S&type=T&limit=N    its top functions (the debug exporter's table)
 * GET /api/timeline?service=S&type=T        its total per time slice of the window
 * GET /api/labels?service=S&type=T&group_by=K  its label keys, and a total per value of K
 * all of these take labels=K%3DV%1FK2%3DV2 (only the stacks with those labels); flamegraph and
 * top base_from, base_to, base_labels (a diff against that baseline: docs/profilez.md)
 * flamegraph and top also take from=MS&to=MS (wall clock, the slices overlapping them), top
 * focus=A%1FB (only below that path, the zoomed frame) and search=TERM (only matching rows)
 *
 * Every request is checked first (issue 28): its Host (and Origin, when sent) must name an
 * allowed host, so a page of another site cannot reach it through DNS rebinding; with
 * auth::authenticator it needs the credentials receivers need; at most max_concurrent_requests
 * API requests are queued or answered at once (503 beyond). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/arena.h"
#include "extensions/profilez/agg.h"
#include "net/http_server.h"
#include "net/tls.h"
#include "net/url.h"
#include "sdk/auth.h"
#include "sdk/component.h"
#include "sdk/telemetry.h"
#include "sdk/tls_config.h"

extern const char pc_profilez_page[];

/* Decoded batch bytes one work item aggregates at most (but at least one batch). */
#define JOB_BYTES ((size_t)1 << 20)

typedef struct pz_cfg {
    char *endpoint;
    uint64_t window_ms;
    int64_t slices;
    int64_t max_stacks;
    int64_t max_series;
    int64_t max_label_sets;
    uint64_t max_pending_size;
    pc_strlist allowed_hosts;
    int64_t max_requests;
    char *authenticator;
    pc_tls_server_cfg tls;
} pz_cfg;

/* clang-format off */
static const pc_cfg_key pz_keys[] = {
    {"endpoint", PC_CFG_STRING, "localhost:1778", offsetof(pz_cfg, endpoint), "host:port of the page and its JSON", NULL},
    {"window", PC_CFG_DURATION, "5m", offsetof(pz_cfg, window_ms), "how far back the page looks (what is older is dropped)", NULL},
    {"slices", PC_CFG_INT, "10", offsetof(pz_cfg, slices), "time slices the window is cut into: memory is given back a slice at a time, the oldest first", NULL},
    {"max_stacks", PC_CFG_INT, "5000", offsetof(pz_cfg, max_stacks), "aggregated stacks kept per service and profile type (the oldest slices make room)", NULL},
    {"max_series", PC_CFG_INT, "32", offsetof(pz_cfg, max_series), "services x profile types kept; profiles of more are dropped (counted)", NULL},
    {"max_label_sets", PC_CFG_INT, "1000", offsetof(pz_cfg, max_label_sets), "distinct label sets (resource and sample attributes, trace and span ids of a stack) kept over all series; a stack with a new set beyond that keeps its frames under the set [labels]=[over budget] (counted); 0: no labels", NULL},
    {"max_pending_size", PC_CFG_SIZE, "32MiB", offsetof(pz_cfg, max_pending_size), "decoded size of the batches waiting for or in aggregation at most (at least one batch); more are released unread (counted)", NULL},
    {"allowed_hosts", PC_CFG_LIST, "", offsetof(pz_cfg, allowed_hosts), "host names the Host (and Origin) header of a request may name; others get 403, so another site's page cannot reach profilez by DNS rebinding (default: the endpoint's host, localhost, 127.0.0.1 and ::1; \"*\": any)", NULL},
    {"max_concurrent_requests", PC_CFG_INT, "8", offsetof(pz_cfg, max_requests), "API requests queued or being answered at once; more get 503 with Retry-After", NULL},
    {"", PC_CFG_GROUP, "", offsetof(pz_cfg, tls), "TLS of a server", pc_tls_server_keys},
    {"auth.authenticator", PC_CFG_STRING, "", offsetof(pz_cfg, authenticator), "id of an authenticator extension (bearertokenauth, basicauth with htpasswd): requests without valid credentials get 401", NULL},
    {0},
};
/* clang-format on */

/* A unit of the work queue: a batch to aggregate or a request to answer. */
typedef enum { T_BATCH, T_SERIES, T_FLAME, T_TOP, T_TIMELINE, T_LABELS } task_kind;
typedef struct task {
    struct task *next;
    task_kind kind;
    pc_batch *batch;
    pc_http_req *req;
    char *service, *type, *search, *focus_buf, *labels_buf, *group_by;
    char **focus;  /* into focus_buf */
    char **labels; /* into labels_buf: key, value, ... */
    char *base_labels_buf, **base_labels;
    pz_query base_q; /* a diff's baseline (q.base) */
    pz_query q;
    size_t bytes; /* the batch's decoded size, counted in pending_bytes until done */
    int status;
    pc_buf body;
} task;

typedef struct counters {
    uint64_t profiles, samples, evicted_stacks, over_budget_samples, dropped_profiles, series,
        stacks, dropped_batches, label_sets, over_budget_label_samples, dropped_labels;
    uint64_t cpu_ns; /* thread CPU time of the work items */
} counters;

typedef struct pz {
    pc_component *c;
    pc_consumer tap;
    pz_agg *agg; /* only touched by the work item in flight */
    pc_http_server *srv;
    pc_tls_ctx *tls;
    pc_auth *auth;        /* auth::authenticator, or NULL */
    char *bind_host;      /* the endpoint's host, allowed by default */
    size_t api_active;    /* API requests queued or being answered */
    task *head, **tail;   /* queued, not yet handed to a work item */
    size_t pending_bytes; /* batches queued or being aggregated */
    int64_t clock_off_ms; /* wall clock - now_ms(), taken once: slice starts must not jitter */
    bool busy, started, stopping, srv_open;
    counters m; /* self-metrics: loop thread */
    pc_shutdown_done done;
} pz;

typedef struct job {
    uv_work_t w;
    pz *z;
    task *tasks;
    uint64_t dropped_batches;
    uint64_t cpu_ns;
    pz_stats st;
} job;

static int pz_validate(void *cfgp, const pc_node *node, const char *path, pc_error *err)
{
    pz_cfg *cfg = cfgp;
    char host[256];
    pc_error e = {0};
    int port;
    if (pc_hostport_parse(cfg->endpoint, host, sizeof host, &port, &e) < 0)
        return pc_cfg_key_errorf(err, node, path, "endpoint", "%s", e.msg);
    if (cfg->slices < 1 || cfg->slices > 1000)
        return pc_cfg_key_errorf(err, node, path, "slices", "must be between 1 and 1000");
    if (cfg->window_ms < 1000 || cfg->window_ms > 24 * 3600 * 1000ull)
        return pc_cfg_key_errorf(err, node, path, "window", "must be between 1s and 24h");
    if (cfg->window_ms / (uint64_t)cfg->slices < 100)
        return pc_cfg_key_errorf(err, node, path, "slices",
                                 "a slice must be at least 100ms (window / slices)");
    if (cfg->max_stacks < 1 || cfg->max_stacks > 10000000)
        return pc_cfg_key_errorf(err, node, path, "max_stacks", "must be between 1 and 10000000");
    if (cfg->max_series < 1 || cfg->max_series > 100000)
        return pc_cfg_key_errorf(err, node, path, "max_series", "must be between 1 and 100000");
    if (cfg->max_label_sets < 0 || cfg->max_label_sets > 1000000)
        return pc_cfg_key_errorf(err, node, path, "max_label_sets",
                                 "must be between 0 and 1000000");
    if (cfg->max_pending_size < 1024 * 1024)
        return pc_cfg_key_errorf(err, node, path, "max_pending_size", "must be at least 1MiB");
    if (cfg->max_requests < 1 || cfg->max_requests > 10000)
        return pc_cfg_key_errorf(err, node, path, "max_concurrent_requests",
                                 "must be between 1 and 10000");
    return pc_tls_server_validate(&cfg->tls, node, path, "", err);
}

static uint64_t now_ms(void)
{
    return uv_hrtime() / 1000000u;
}

/* Wall-clock milliseconds: the API's from, to and timeline are in these, so a link holds. */
static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- the work queue ---- */

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)) return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void run_tasks(uv_work_t *w)
{
    job *j = w->data;
    uint64_t cpu0 = thread_cpu_ns();
    pz_agg *a = j->z->agg;
    pz_agg_set_dropped_batches(a, j->dropped_batches);
    const task *series = NULL; /* the job's readers of /api/series share one rendering */
    for (task *t = j->tasks; t; t = t->next) {
        uint64_t now = now_ms();
        switch (t->kind) {
        case T_BATCH:
            series = NULL; /* what readers after it see has changed */
            pz_agg_add_batch(a, t->batch, now);
            pc_batch_unref(t->batch); /* the last reference frees the arena here, off the loop */
            t->batch = NULL;
            break;
        case T_SERIES:
            if (series)
                pc_buf_append(&t->body, series->body.data, series->body.len);
            else
                pz_agg_series_json(a, now, &t->body);
            series = t;
            t->status = 200;
            break;
        case T_FLAME:
        case T_TOP:
        case T_TIMELINE:
        case T_LABELS: {
            t->q.clock_off_ms = t->base_q.clock_off_ms = j->z->clock_off_ms;
            int rc = t->kind == T_FLAME      ? pz_agg_flamegraph_q(a, &t->q, now, &t->body)
                     : t->kind == T_TOP      ? pz_agg_top_q(a, &t->q, now, &t->body)
                     : t->kind == T_TIMELINE ? pz_agg_timeline_q(a, &t->q, now, &t->body)
                                             : pz_agg_labels_q(a, &t->q, now, &t->body);
            t->status = rc ? 404 : 200;
            if (rc) {
                t->body.len = 0;
                pc_buf_printf(&t->body, "{\"error\":\"no such series in the window\"}");
            }
            break;
        }
        }
    }
    j->st = *pz_agg_stats(a);
    j->cpu_ns = thread_cpu_ns() - cpu0;
}

static void task_free(task *t)
{
    if (t->batch) pc_batch_unref(t->batch);
    pc_buf_free(&t->body);
    free(t->service);
    free(t->type);
    free(t->search);
    free(t->focus_buf);
    free(t->focus);
    free(t->labels_buf);
    free(t->labels);
    free(t->base_labels_buf);
    free(t->base_labels);
    free(t->group_by);
    free(t);
}

static void answer(pz *z, task *t)
{
    if (!t->req) return;
    z->api_active--;
    if (!t->status) {
        static const char m[] = "{\"error\":\"profilez is stopping\"}";
        pc_http_respond(t->req, 503, "application/json", m, sizeof m - 1, NULL);
    } else {
        pc_http_respond(t->req, t->status, "application/json", t->body.data, t->body.len,
                        "Cache-Control: no-store\r\n");
    }
    t->req = NULL;
}

static void maybe_done(pz *z);
static void tasks_done(uv_work_t *w, int status);

static void kick(pz *z)
{
    if (z->busy || !z->head || z->stopping) return;
    /* about JOB_BYTES of batches per work item (at least one task): the pool's other work (the
     * relay's decode and encode) gets its turn between two items, and many small batches do not
     * each wait for a turn of their own */
    job *j = pc_xcalloc(1, sizeof *j);
    j->w.data = j;
    j->z = z;
    j->dropped_batches = z->m.dropped_batches;
    task **jt = &j->tasks;
    size_t bytes = 0;
    while (z->head && (jt == &j->tasks || bytes + z->head->bytes <= JOB_BYTES)) {
        task *t = z->head;
        z->head = t->next;
        bytes += t->bytes;
        t->next = NULL;
        *jt = t;
        jt = &t->next;
    }
    if (!z->head) z->tail = &z->head;
    z->busy = true;
    uv_queue_work(z->c->loop, &j->w, run_tasks, tasks_done);
}

static void tasks_done(uv_work_t *w, int status)
{
    (void)status;
    job *j = w->data;
    pz *z = j->z;
    z->busy = false;
    z->m.profiles = j->st.profiles;
    z->m.samples = j->st.samples;
    z->m.evicted_stacks = j->st.evicted_stacks;
    z->m.over_budget_samples = j->st.over_budget_samples;
    z->m.dropped_profiles = j->st.dropped_profiles;
    z->m.series = j->st.series;
    z->m.stacks = j->st.stacks;
    z->m.label_sets = j->st.label_sets;
    z->m.over_budget_label_samples = j->st.over_budget_label_samples;
    z->m.dropped_labels = j->st.dropped_labels;
    z->m.cpu_ns += j->cpu_ns;
    for (task *t = j->tasks, *next; t; t = next) {
        next = t->next;
        z->pending_bytes -= t->bytes;
        answer(z, t);
        task_free(t);
    }
    free(j);
    if (z->stopping)
        maybe_done(z);
    else
        kick(z);
}

static void enqueue(pz *z, task *t)
{
    t->next = NULL;
    *z->tail = t;
    z->tail = &t->next;
    kick(z);
}

/* ---- the tap ---- */

static void tap_consume(pc_consumer *self, pc_batch *b, pc_done_fn done, void *arg)
{
    pz *z = (pz *)((char *)self - offsetof(pz, tap));
    pz_cfg *cfg = z->c->cfg;
    size_t bytes = pc_arena_size(b->arena);
    if (!z->started || z->stopping || b->signal != PC_SIGNAL_PROFILES) {
        pc_batch_unref(b);
    } else if (z->pending_bytes && z->pending_bytes + bytes > cfg->max_pending_size) {
        z->m.dropped_batches++; /* aggregation is behind: never hold the pipeline's data */
        pc_batch_unref(b);
    } else {
        task *t = pc_xcalloc(1, sizeof *t);
        t->kind = T_BATCH;
        t->batch = b;
        t->bytes = bytes;
        z->pending_bytes += bytes;
        enqueue(z, t);
    }
    done(arg, PC_OK, NULL);
}

static pc_consumer *pz_tap(pc_component *c)
{
    pz *z = c->priv;
    return &z->tap;
}

/* ---- HTTP ---- */

static void respond_text(pc_http_req *req, int status, const char *ctype, const char *msg)
{
    pc_http_respond(req, status, ctype, msg, strlen(msg), NULL);
}

/* Whether the host named by a Host header ("h", "h:port", "[v6]:port") or an Origin
 * ("scheme://h:port") is one profilez answers to. */
static bool host_allowed(const pz *z, const char *value, bool origin)
{
    const pz_cfg *cfg = z->c->cfg;
    if (!value) return false;
    if (origin) {
        const char *p = strstr(value, "://");
        if (!p) return false; /* "null" (a sandboxed or file: page) and the like */
        value = p + 3;
    }
    char host[256];
    size_t n = *value == '[' ? strcspn(value + 1, "]") : strcspn(value, ":/");
    const char *h = *value == '[' ? value + 1 : value;
    if (n >= sizeof host) return false;
    memcpy(host, h, n);
    host[n] = 0;
    if (cfg->allowed_hosts.n) {
        for (size_t i = 0; i < cfg->allowed_hosts.n; i++)
            if (!strcmp(cfg->allowed_hosts.v[i], "*") || !strcasecmp(cfg->allowed_hosts.v[i], host))
                return true;
        return false;
    }
    static const char *const local[] = {"localhost", "127.0.0.1", "::1"};
    for (size_t i = 0; i < sizeof local / sizeof local[0]; i++)
        if (!strcasecmp(local[i], host)) return true;
    return z->bind_host && *z->bind_host && strcmp(z->bind_host, "0.0.0.0") &&
           strcmp(z->bind_host, "::") && !strcasecmp(z->bind_host, host);
}

/* Host, Origin and credentials: 0, or the request was answered. */
static int admit(pz *z, pc_http_req *req)
{
    const char *origin = pc_http_req_header(req, "origin");
    if (!host_allowed(z, pc_http_req_header(req, "host"), false) ||
        (origin && !host_allowed(z, origin, true))) {
        respond_text(req, 403, "text/plain",
                     "403 forbidden: Host or Origin not in profilez's allowed_hosts\n");
        return -1;
    }
    if (z->auth && pc_auth_check(z->auth, req)) {
        static const char m[] = "401 unauthorized: missing or invalid credentials\n";
        pc_http_respond(req, 401, "text/plain", m, sizeof m - 1, pc_auth_challenge(z->auth));
        return -1;
    }
    return 0;
}

/* A whole decimal number of [lo, hi] from the query's key into *v (left alone when absent);
 * false when malformed. */
static bool query_num(pc_http_req *req, const char *key, int64_t lo, int64_t hi, int64_t *v)
{
    char *s = pc_http_req_query(req, key);
    if (!s) return true;
    char *end;
    long long x = strtoll(s, &end, 10);
    bool ok = *s && !*end && x >= lo && x <= hi;
    free(s);
    if (ok) *v = x;
    return ok;
}

/* focus: frame names root first, separated by U+001F (no frame name holds that control). */
static void parse_focus(task *t, char *f)
{
    t->focus_buf = f;
    size_t n = 1;
    for (const char *p = f; *p; p++)
        n += *p == '\x1f';
    if (!*f) return;
    if (n > PZ_MAX_DEPTH) {
        t->q.n_focus = n; /* deeper than any stack: matches none (focus_cut never reads it) */
        return;
    }
    t->focus = pc_xmalloc(n * sizeof *t->focus);
    for (char *p = f, *q;; p = q + 1) {
        q = strchr(p, '\x1f');
        t->focus[t->q.n_focus++] = p;
        if (!q) break;
        *q = 0;
    }
    t->q.focus = (const char *const *)t->focus;
}

/* labels: key=value pairs separated by U+001F (the first '=' splits) into *arr (key, value,
 * ...) and *n pairs; false when malformed. */
static bool split_labels(char *l, char ***arr, size_t *n)
{
    if (!*l) return true;
    size_t max = 1;
    for (const char *p = l; *p; p++)
        max += *p == '\x1f';
    if (max > PZ_MAX_LABELS) return false; /* a set holds no more: it could match none */
    *arr = pc_xmalloc(2 * max * sizeof **arr);
    for (char *p = l, *q;; p = q + 1) {
        q = strchr(p, '\x1f');
        if (q) *q = 0;
        char *eq = strchr(p, '=');
        if (!eq || eq == p) return false;
        *eq = 0;
        (*arr)[2 * *n] = p;
        (*arr)[2 * (*n)++ + 1] = eq + 1;
        if (!q) break;
    }
    return true;
}

/* base_from, base_to, base_labels: a baseline, the query with those in place of its own. */
static const char *parse_base(pc_http_req *req, task *t)
{
    t->base_q = t->q;
    t->base_q.base = NULL;
    bool any = false;
    char *v = pc_http_req_query(req, "base_from");
    any |= v != NULL;
    free(v);
    if (!query_num(req, "base_from", 0, INT64_MAX / 2, &t->base_q.from_ms) ||
        !query_num(req, "base_to", 0, INT64_MAX / 2, &t->base_q.to_ms))
        return "{\"error\":\"base_from, base_to: milliseconds since 1970 (UTC)\"}";
    if ((t->base_labels_buf = pc_http_req_query(req, "base_labels"))) {
        any = true;
        t->base_q.n_labels = 0;
        if (!split_labels(t->base_labels_buf, &t->base_labels, &t->base_q.n_labels))
            return "{\"error\":\"base_labels: key=value pairs separated by %1F\"}";
        t->base_q.labels = (const char *const *)t->base_labels;
    }
    if (any) t->q.base = &t->base_q;
    return NULL;
}

/* The series and view a flame graph, top, timeline or labels request names: NULL, or why not. */
static const char *parse_query(pc_http_req *req, task *t)
{
    t->service = pc_http_req_query(req, "service");
    t->type = pc_http_req_query(req, "type");
    if (!t->service || !t->type)
        return "{\"error\":\"want ?service=...&type=... (as /api/series lists them)\"}";
    t->q.service = t->service;
    t->q.type = t->type;
    int64_t limit = 50;
    if (!query_num(req, "limit", 1, 10000, &limit))
        return "{\"error\":\"limit: a number from 1 to 10000\"}";
    t->q.limit = (size_t)limit;
    if (!query_num(req, "from", 0, INT64_MAX / 2, &t->q.from_ms) ||
        !query_num(req, "to", 0, INT64_MAX / 2, &t->q.to_ms))
        return "{\"error\":\"from, to: milliseconds since 1970 (UTC)\"}";
    t->search = pc_http_req_query(req, "search");
    t->q.search = t->search;
    char *f = pc_http_req_query(req, "focus");
    if (f) parse_focus(t, f);
    if ((t->labels_buf = pc_http_req_query(req, "labels"))) {
        if (!split_labels(t->labels_buf, &t->labels, &t->q.n_labels))
            return "{\"error\":\"labels: key=value pairs separated by %1F\"}";
        t->q.labels = (const char *const *)t->labels;
    }
    t->group_by = pc_http_req_query(req, "group_by");
    t->q.group_by = t->group_by;
    return parse_base(req, t);
}

static void on_request(pc_http_req *req, void *arg)
{
    pz *z = arg;
    if (admit(z, req)) return;
    if (strcmp(req->method, "GET") != 0) {
        pc_http_respond(req, 405, "text/plain", "method not allowed\n", 19, "Allow: GET\r\n");
        return;
    }
    if (!strcmp(req->path, "/") || !strcmp(req->path, "/index.html")) {
        pc_http_respond(req, 200, "text/html; charset=utf-8", pc_profilez_page,
                        strlen(pc_profilez_page),
                        "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n"
                        "Content-Security-Policy: default-src 'self'; script-src 'unsafe-inline'; "
                        "style-src 'unsafe-inline'; img-src 'self' data:\r\n");
        return;
    }
    task_kind kind;
    if (!strcmp(req->path, "/api/series"))
        kind = T_SERIES;
    else if (!strcmp(req->path, "/api/flamegraph"))
        kind = T_FLAME;
    else if (!strcmp(req->path, "/api/top"))
        kind = T_TOP;
    else if (!strcmp(req->path, "/api/timeline"))
        kind = T_TIMELINE;
    else if (!strcmp(req->path, "/api/labels"))
        kind = T_LABELS;
    else {
        respond_text(req, 404, "text/plain", "404 page not found\n");
        return;
    }
    if (z->stopping) {
        respond_text(req, 503, "application/json", "{\"error\":\"profilez is stopping\"}");
        return;
    }
    if (z->api_active >= (size_t)((pz_cfg *)z->c->cfg)->max_requests) {
        static const char m[] = "{\"error\":\"too many requests at once\"}";
        pc_http_respond(req, 503, "application/json", m, sizeof m - 1, "Retry-After: 1\r\n");
        return;
    }
    task *t = pc_xcalloc(1, sizeof *t);
    t->kind = kind;
    t->req = req;
    const char *bad = kind == T_SERIES ? NULL : parse_query(req, t);
    if (bad) {
        task_free(t);
        respond_text(req, 400, "application/json", bad);
        return;
    }
    z->api_active++; /* until answer() */
    enqueue(z, t);
}

/* ---- lifecycle ---- */

static int pz_create(pc_component *c, pc_error *err)
{
    (void)err;
    pz_cfg *cfg = c->cfg;
    pz *z = pc_xcalloc(1, sizeof *z);
    z->c = c;
    z->tap.consume = tap_consume;
    z->tap.mutates = false;
    z->tail = &z->head;
    z->clock_off_ms = wall_ms() - (int64_t)now_ms();
    pz_limits l = {.window_ms = cfg->window_ms,
                   .slices = (unsigned)cfg->slices,
                   .max_stacks = (size_t)cfg->max_stacks,
                   .max_series = (size_t)cfg->max_series,
                   .max_label_sets = (size_t)cfg->max_label_sets};
    z->agg = pz_agg_new(&l);
    c->priv = z;
    return 0;
}

/* The self-metrics, each a field of counters, labelled extension (its id). */
typedef struct pz_metric {
    const char *name, *help;
    pc_metric_kind kind;
    size_t offset;
} pz_metric;

/* clang-format off */
static const pz_metric pz_metrics[] = {
    {"profcol_profilez_profiles_total", "Profiles aggregated for the profilez page", PC_METRIC_COUNTER, offsetof(counters, profiles)},
    {"profcol_profilez_samples_total", "Samples aggregated for the profilez page", PC_METRIC_COUNTER, offsetof(counters, samples)},
    {"profcol_profilez_evicted_stacks_total", "Aggregated stacks dropped from the oldest time slices to make room (max_stacks)", PC_METRIC_COUNTER, offsetof(counters, evicted_stacks)},
    {"profcol_profilez_over_budget_samples_total", "Samples whose stack found no room in the current slice, shown as [over budget]", PC_METRIC_COUNTER, offsetof(counters, over_budget_samples)},
    {"profcol_profilez_dropped_profiles_total", "Profiles not aggregated: a new series over max_series, or a batch over its frame budget", PC_METRIC_COUNTER, offsetof(counters, dropped_profiles)},
    {"profcol_profilez_dropped_batches_total", "Batches released unread: max_pending_size was held by batches waiting for aggregation", PC_METRIC_COUNTER, offsetof(counters, dropped_batches)},
    {"profcol_profilez_series", "Series (service, profile type) in the window", PC_METRIC_GAUGE, offsetof(counters, series)},
    {"profcol_profilez_stacks", "Aggregated stacks held", PC_METRIC_GAUGE, offsetof(counters, stacks)},
    {"profcol_profilez_label_sets", "Distinct label sets held (max_label_sets)", PC_METRIC_GAUGE, offsetof(counters, label_sets)},
    {"profcol_profilez_over_budget_label_samples_total", "Samples whose label set found no room (max_label_sets): kept as [labels]=[over budget]", PC_METRIC_COUNTER, offsetof(counters, over_budget_label_samples)},
    {"profcol_profilez_dropped_labels_total", "Labels of a sample beyond the 16 a label set keeps", PC_METRIC_COUNTER, offsetof(counters, dropped_labels)},
};
/* clang-format on */

static double cpu_seconds(const void *arg)
{
    return (double)((const pz *)arg)->m.cpu_ns / 1e9;
}

static int pz_start(pc_component *c, pc_error *err)
{
    pz_cfg *cfg = c->cfg;
    pz *z = c->priv;
    char host[256];
    int port;
    pc_hostport_parse(cfg->endpoint, host, sizeof host, &port, NULL);
    if (cfg->authenticator && !(z->auth = pc_host_authenticator(c, cfg->authenticator, true, err)))
        return err ? err->code : PC_EINVAL;
    z->bind_host = pc_xstrdup(host);
    pc_http_server_opts o = pc_http_server_small_opts(host, port, c->id);
    if (pc_tls_server_enabled(&cfg->tls)) {
        z->tls = pc_tls_server_ctx_new(&cfg->tls, "http/1.1", c->id, err);
        if (!z->tls) return err ? err->code : PC_EINVAL;
        o.tls = z->tls;
    }
    z->srv = pc_http_server_new(c->loop, &o, on_request, z);
    z->srv_open = true;
    int rc = pc_http_server_start(z->srv, err);
    if (rc < 0) return rc;
    char labels[300];
    snprintf(labels, sizeof labels, "extension=\"%s\"", c->id);
    for (size_t i = 0; i < sizeof pz_metrics / sizeof pz_metrics[0]; i++) {
        const pz_metric *m = &pz_metrics[i];
        pc_metric_u64(c, m->name, m->help, m->kind, labels,
                      (const uint64_t *)((const char *)&z->m + m->offset));
    }
    pc_metric_fn(c, "profcol_profilez_cpu_seconds_total",
                 "CPU time of profilez's work items on the thread pool (aggregating, answering)",
                 PC_METRIC_COUNTER, labels, cpu_seconds, z);
    z->started = true;
    PC_INFO(c->id,
            "live flame graphs on %s://%s:%d/ (window %" PRIu64 "s, %" PRId64 " stacks per series)",
            z->tls ? "https" : "http", host, pc_http_server_port(z->srv), cfg->window_ms / 1000,
            cfg->max_stacks);
    return 0;
}

/* Done once the server closed (its requests answered) and no work item runs. */
static void maybe_done(pz *z)
{
    if (z->busy || z->srv_open || !z->done) return;
    /* what was queued and never handed over: released, requests answered 503 */
    for (task *t = z->head, *next; t; t = next) {
        next = t->next;
        answer(z, t);
        task_free(t);
    }
    z->head = NULL;
    z->tail = &z->head;
    z->pending_bytes = 0;
    pc_shutdown_done done = z->done;
    z->done = NULL;
    done(z->c);
}

static void srv_closed(void *arg)
{
    pz *z = arg;
    z->srv = NULL;
    z->srv_open = false;
    maybe_done(z);
}

static void pz_shutdown(pc_component *c, pc_shutdown_done done)
{
    pz *z = c->priv;
    if (!z) {
        done(c);
        return;
    }
    z->stopping = true;
    z->done = done;
    /* queries still queued are answered 503 now, so the server's shutdown need not wait */
    task **pp = &z->head;
    while (*pp) {
        task *t = *pp;
        if (t->req) {
            *pp = t->next;
            answer(z, t);
            task_free(t);
        } else {
            pp = &t->next;
        }
    }
    z->tail = pp;
    if (z->srv)
        pc_http_server_shutdown(z->srv, srv_closed, z);
    else
        maybe_done(z);
}

static void pz_destroy(pc_component *c)
{
    pz *z = c->priv;
    if (!z) return;
    for (task *t = z->head, *next; t; t = next) {
        next = t->next;
        task_free(t);
    }
    pz_agg_free(z->agg);
    pc_tls_ctx_free(z->tls);
    free(z->bind_host);
    free(z);
}

const pc_component_type pc_extension_profilez = {
    .name = "profilez",
    .kind = PC_KIND_EXTENSION,
    .stability = "development",
    .cfg_size = sizeof(pz_cfg),
    .cfg = pz_keys,
    .validate = pz_validate,
    .create = pz_create,
    .start = pz_start,
    .shutdown = pz_shutdown,
    .destroy = pz_destroy,
    .tap = pz_tap,
    .doc = "live flame graphs of the profiles passing through (every profiles pipeline), with "
           "top functions and JSON, over the last window, in bounded memory",
};
