/* pyroscope_scrape: target groups, the labels of a (target, profile type) as Alloy builds them
 * (spec/scrape.md §2.3) and the live set of targets (added and removed while running). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "receivers/pyroscope_scrape/model.h"

const char *const scrape_reason_names[R_COUNT] = {
    "connect", "timeout", "http_status", "too_large", "not_pprof", "decode", "pipeline", "overlap"};

static void map_free(pc_strmap *m)
{
    for (size_t i = 0; i < m->n; i++)
        free(m->keys[i]), free(m->vals[i]);
    free(m->keys), free(m->vals);
    *m = (pc_strmap){0};
}

void sd_targets_free(sd_target *ts, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(ts[i].address);
        map_free(&ts[i].labels);
    }
    free(ts);
}

static const char *map_get(const pc_strmap *m, const char *k)
{
    for (size_t i = 0; i < m->n; i++)
        if (!strcmp(m->keys[i], k)) return m->vals[i];
    return NULL;
}

/* k = v; when only_empty, only where k is absent or empty (Alloy's "set if absent"). */
static void map_set(pc_strmap *m, const char *k, const char *v, bool only_empty)
{
    for (size_t i = 0; i < m->n; i++)
        if (!strcmp(m->keys[i], k)) {
            if (only_empty && *m->vals[i]) return;
            free(m->vals[i]);
            m->vals[i] = pc_xstrdup(v);
            return;
        }
    m->keys = pc_xrealloc(m->keys, (m->n + 1) * sizeof(char *));
    m->vals = pc_xrealloc(m->vals, (m->n + 1) * sizeof(char *));
    m->keys[m->n] = pc_xstrdup(k);
    m->vals[m->n++] = pc_xstrdup(v);
}

static void map_copy(pc_strmap *dst, const pc_strmap *src)
{
    for (size_t i = 0; i < src->n; i++)
        map_set(dst, src->keys[i], src->vals[i], false);
}

static int group_parse(const pc_node *g, const char *path, const char *const *meta, size_t n_meta,
                       sd_target **ts, size_t *n, pc_error *err)
{
    if (g->kind != PC_NODE_MAP)
        return pc_cfg_errorf(err, g, path, "a target group is a map {targets, labels}");
    for (size_t k = 0; k < g->n; k++)
        if (strcmp(g->keys[k], "targets") && strcmp(g->keys[k], "labels"))
            return pc_cfg_errorf(err, g->vals[k], path, "unknown key \"%s\" (targets, labels)",
                                 g->keys[k]);
    const pc_node *tl = pc_node_get(g, "targets"), *ll = pc_node_get(g, "labels");
    if (tl && tl->kind != PC_NODE_SEQ)
        return pc_cfg_errorf(err, tl, path, "targets: a list of host:port");
    if (ll && ll->kind != PC_NODE_MAP && ll->kind != PC_NODE_NULL)
        return pc_cfg_errorf(err, ll, path, "labels: a map of names to values");
    for (size_t i = 0; ll && ll->kind == PC_NODE_MAP && i < ll->n; i++)
        if (ll->vals[i]->kind != PC_NODE_SCALAR)
            return pc_cfg_errorf(err, ll->vals[i], path, "labels::%s: a string", ll->keys[i]);
    for (size_t i = 0; tl && i < tl->n; i++) {
        const pc_node *a = tl->vals[i];
        if (a->kind != PC_NODE_SCALAR || !*a->scalar)
            return pc_cfg_errorf(err, a, path, "targets: each a host:port");
        *ts = pc_xrealloc(*ts, (*n + 1) * sizeof **ts);
        sd_target *t = &(*ts)[(*n)++];
        *t = (sd_target){.address = pc_xstrdup(a->scalar)};
        for (size_t m = 0; m + 1 < n_meta * 2; m += 2)
            map_set(&t->labels, meta[m], meta[m + 1], false);
        for (size_t l = 0; ll && ll->kind == PC_NODE_MAP && l < ll->n; l++)
            map_set(&t->labels, ll->keys[l], ll->vals[l]->scalar, false);
        map_set(&t->labels, "__address__", a->scalar, false);
    }
    return 0;
}

int sd_parse_groups(const pc_node *list, const char *path, const char *const *meta, size_t n_meta,
                    sd_target **ts, size_t *n, pc_error *err)
{
    if (!list || list->kind == PC_NODE_NULL) return 0;
    if (list->kind != PC_NODE_SEQ)
        return pc_cfg_errorf(err, list, path, "a list of {targets: [host:port...], labels: {...}}");
    for (size_t i = 0; i < list->n; i++)
        if (group_parse(list->vals[i], path, meta, n_meta, ts, n, err)) return PC_EINVAL;
    return 0;
}

/* ---- labels (spec/scrape.md §2.3) ---------------------------------------------------------- */

/* service_name when the target has none: the Kubernetes and Docker meta labels Alloy reads. */
static void infer_service(pc_strmap *l)
{
    const char *v = map_get(l, "__meta_kubernetes_pod_annotation_pyroscope_io_service_name");
    char buf[512];
    const char *ns = map_get(l, "__meta_kubernetes_namespace");
    const char *ctr = map_get(l, "__meta_kubernetes_pod_container_name");
    if (!(v && *v) && ns && *ns && ctr && *ctr) {
        snprintf(buf, sizeof buf, "%s/%s", ns, ctr);
        v = buf;
    }
    static const char *const more[] = {"__meta_docker_container_name",
                                       "__meta_dockerswarm_container_label_service_name",
                                       "__meta_dockerswarm_service_name"};
    for (size_t i = 0; i < 3 && !(v && *v); i++)
        v = map_get(l, more[i]);
    map_set(l, "service_name", v && *v ? v : "unspecified", true);
}

/* "a\"b" for a Prometheus label value. */
static void esc(char *out, size_t n, const char *s)
{
    size_t o = 0;
    for (; *s && o + 3 < n; s++) {
        if (*s == '"' || *s == '\\') out[o++] = '\\';
        if (*s == '\n') {
            out[o++] = '\\', out[o++] = 'n';
            continue;
        }
        out[o++] = *s;
    }
    out[o] = 0;
}

static void series_metrics(series *s, const pc_strmap *l)
{
    scrape_recv *x = s->t->x;
    char r[256], j[256], in[256], sv[256];
    esc(r, sizeof r, x->c->id);
    esc(j, sizeof j, pc_nz(map_get(l, "job")));
    esc(in, sizeof in, pc_nz(map_get(l, "instance")));
    esc(sv, sizeof sv, s->service);
    snprintf(s->mlabels, sizeof s->mlabels,
             "receiver=\"%s\",job=\"%s\",instance=\"%s\",service_name=\"%s\",profile_type=\"%s\"",
             r, j, in, sv, s->type->name);
    pc_metric_u64(s, "profcol_scrape_up",
                  "1 if the last scrape of the target's profile type succeeded, else 0",
                  PC_METRIC_GAUGE, s->mlabels, &s->up);
    pc_metric_u64(s, "profcol_scrape_samples_scraped",
                  "Samples the last scrape sent on (after the delta of cumulative types)",
                  PC_METRIC_GAUGE, s->mlabels, &s->samples);
    pc_metric_u64(s, "profcol_scrapes_total", "Scrapes attempted", PC_METRIC_COUNTER, s->mlabels,
                  &s->scrapes);
    char lab[sizeof s->mlabels + 64];
    for (int i = 0; i < R_COUNT; i++) {
        snprintf(lab, sizeof lab, "%s,reason=\"%s\"", s->mlabels, scrape_reason_names[i]);
        pc_metric_u64(s, "profcol_scrape_errors_total", "Scrapes that failed, by reason",
                      PC_METRIC_COUNTER, lab, &s->errors[i]);
    }
}

static double duration_fn(const void *arg)
{
    return ((const series *)arg)->duration_s;
}

static series *series_new(target *t, const ptype *ty, const pc_strmap *tl)
{
    scrape_recv *x = t->x;
    const scrape_cfg *cfg = x->c->cfg;
    pc_strmap l = {0};
    map_copy(&l, tl);
    map_set(&l, "__name__", ty->report, true);
    map_set(&l, "__profile_path__", ty->path, true);
    map_set(&l, "__profile_path_prefix__", pc_nz(cfg->path_prefix), true);
    map_set(&l, "job", cfg->job_name ? cfg->job_name : x->c->id, true);
    map_set(&l, "instance", t->address, true);
    infer_service(&l);
    series *s = pc_xcalloc(1, sizeof *s);
    s->t = t;
    s->type = ty;
    char q[64] = "";
    uint64_t secs = cfg->cpu_ms ? cfg->cpu_ms / 1000 : cfg->interval_ms / 1000 - 1;
    if (ty->seconds) snprintf(q, sizeof q, "?seconds=%llu", (unsigned long long)secs);
    const char *prefix = pc_nz(map_get(&l, "__profile_path_prefix__"));
    size_t n = strlen(prefix) + strlen(ty->path) + strlen(q) + 1;
    s->path = pc_xmalloc(n);
    snprintf(s->path, n, "%s%s%s", prefix, ty->path, q);
    s->service = pc_xstrdup(map_get(&l, "service_name"));
    s->attrs = pc_xcalloc(l.n, sizeof *s->attrs);
    for (size_t i = 0; i < l.n; i++) {
        if (!strncmp(l.keys[i], "__", 2) || !strcmp(l.keys[i], "service_name")) continue;
        s->attrs[s->n_attrs++] = (pc_format_attr){pc_xstrdup(l.keys[i]), pc_xstrdup(l.vals[i])};
    }
    if (ty->sub || ty->sub_all) s->delta = pc_delta_new();
    series_metrics(s, &l);
    pc_metric_fn(s, "profcol_scrape_duration_seconds", "How long the last scrape took",
                 PC_METRIC_GAUGE, s->mlabels, duration_fn, s);
    map_free(&l);
    return s;
}

void series_release(series *s)
{
    pc_metric_unregister(s);
    for (size_t i = 0; i < s->n_attrs; i++)
        free((char *)s->attrs[i].key), free((char *)s->attrs[i].value);
    free(s->attrs);
    free(s->path);
    free(s->service);
    pc_delta_free(s->delta);
    free(s);
}

/* address with the scheme's port when it has none; host and port split. 0, or -1. */
static int target_address(target *t, const char *addr)
{
    pc_error e = {0};
    bool https = !strcmp(t->scheme, "https");
    char buf[300];
    const char *colon = strrchr(addr, ':');
    bool v6 = addr[0] == '[';
    if (!colon || (v6 && colon < strchr(addr, ']'))) { /* Alloy: :80 or :443 appended */
        snprintf(buf, sizeof buf, "%s:%d", addr, https ? 443 : 80);
        addr = buf;
    }
    if (pc_hostport_parse(addr, t->host, sizeof t->host, &t->port, &e) || !t->host[0] ||
        t->port < 1)
        return -1;
    t->address = pc_xstrdup(addr);
    return 0;
}

static char *target_key(const char *source, const sd_target *d)
{
    pc_buf b = {0};
    pc_buf_printf(&b, "%s\n%s", source, d->address);
    for (size_t i = 0; i < d->labels.n; i++) /* group order is stable per source */
        pc_buf_printf(&b, "\n%s=%s", d->labels.keys[i], d->labels.vals[i]);
    char *k = pc_xstrdup((char *)b.data);
    pc_buf_free(&b);
    return k;
}

static target *target_new(scrape_recv *x, const char *source, const sd_target *d, char *key)
{
    const scrape_cfg *cfg = x->c->cfg;
    target *t = pc_xcalloc(1, sizeof *t);
    t->x = x;
    t->source = pc_xstrdup(source);
    t->key = key;
    const char *sch = map_get(&d->labels, "__scheme__");
    t->scheme = pc_xstrdup(sch && *sch ? sch : cfg->scheme ? "https" : "http");
    if ((strcmp(t->scheme, "http") && strcmp(t->scheme, "https")) ||
        target_address(t, d->address) < 0 || (!strcmp(t->scheme, "https") && !x->tls)) {
        PC_WARN(x->c->id, "target %s (%s): not scraped: %s", d->address, source,
                strcmp(t->scheme, "http") && strcmp(t->scheme, "https")
                    ? "__scheme__ must be http or https"
                : t->address ? "https needs the tls settings (tls::insecure is set)"
                             : "not a host:port");
        free(t->address);
        t->address = NULL;
        return t; /* kept (without series) so that it is not reported again */
    }
    pc_http_client_opts o = {.host = t->host,
                             .port = t->port,
                             .max_connections = (unsigned)cfg->client.max_connections,
                             .log_id = x->c->id,
                             .tls = !strcmp(t->scheme, "https") ? x->tls : NULL,
                             .max_body = cfg->max_body};
    t->client = pc_http_client_new(x->c->loop, &o);
    for (size_t i = 0; i < x->n_types; i++) {
        series *s = series_new(t, &x->types[i], &d->labels);
        s->next = t->series;
        t->series = s;
        s->t->x->ops.schedule(s);
    }
    x->n_targets++;
    PC_INFO(x->c->id, "target %s://%s added (%s, %zu profile types)", t->scheme, t->address, source,
            x->n_types);
    return t;
}

void scrape_sync(scrape_recv *x, const char *source, sd_target *ts, size_t n)
{
    char **keys = pc_xcalloc(n ? n : 1, sizeof(char *));
    for (size_t i = 0; i < n; i++)
        keys[i] = target_key(source, &ts[i]);
    for (target **pp = &x->targets; *pp;) { /* the vanished ones go */
        target *t = *pp;
        bool keep = strcmp(t->source, source) != 0;
        for (size_t i = 0; i < n && !keep; i++)
            keep = keys[i] && !strcmp(keys[i], t->key);
        if (keep) {
            pp = &t->next;
            continue;
        }
        *pp = t->next;
        if (t->address) x->n_targets--;
        PC_INFO(x->c->id, "target %s removed (%s)", t->address ? t->address : "-", source);
        t->x->ops.release(t);
    }
    for (size_t i = 0; i < n; i++) { /* the new ones come */
        bool have = false;
        for (target *t = x->targets; t && !have; t = t->next)
            have = !strcmp(t->key, keys[i]);
        for (size_t k = 0; k < i && !have; k++) /* the same target twice in one source */
            have = keys[k] && !strcmp(keys[k], keys[i]);
        if (have) {
            free(keys[i]);
            keys[i] = NULL;
            continue;
        }
        target *t = target_new(x, source, &ts[i], keys[i]);
        keys[i] = NULL;
        t->next = x->targets;
        x->targets = t;
    }
    for (size_t i = 0; i < n; i++)
        free(keys[i]);
    free(keys);
    sd_targets_free(ts, n);
}

void scrape_drop_all(scrape_recv *x)
{
    while (x->targets) {
        target *t = x->targets;
        x->targets = t->next;
        t->x->ops.release(t);
    }
}
