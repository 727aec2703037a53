/* pyroscope_scrape: file_sd_configs and dns_sd_configs, as Prometheus has them (spec/scrape.md
 * §4.2, §4.3). Both feed scrape_sync (targets.c) per source, on the loop thread:
 *   file   every second the patterns are globbed again and each file's (inode, size, mtime)
 *          compared: a file that changed, appeared or went is read again (JSON or YAML through
 *          the config parser: JSON is YAML), and every file at refresh_interval anyway. A file
 *          that cannot be read or parsed keeps its targets (logged); one that is gone loses them.
 *   dns    each name at refresh_interval: A and AAAA through uv_getaddrinfo (the resolver the
 *          loadbalancing exporter uses), SRV through res_nsearch on the thread pool. A failed
 *          lookup keeps the name's targets (logged). */
#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <glob.h>
#include <netdb.h>
#include <resolv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "receivers/pyroscope_scrape/model.h"

#define TICK_MS 1000

enum { DNS_SRV, DNS_A, DNS_AAAA };
static const char *const dns_types[] = {"SRV", "A", "AAAA"};

typedef struct sd_file {
    char *path;
    struct stat st;
    bool present;
} sd_file;

typedef struct file_sd {
    pc_strlist patterns;
    uint64_t refresh_ms, last_ms;
    sd_file *files;
    size_t n;
} file_sd;

typedef struct dns_sd dns_sd;
typedef struct dns_name {
    dns_sd *d;
    char *name;
    bool busy;
    uv_getaddrinfo_t gai;
    uv_work_t work;
    sd_target *found; /* SRV: the pool's answer */
    size_t n_found;
    int rc;
} dns_name;

struct dns_sd {
    struct discovery *disc;
    dns_name *names;
    size_t n;
    int type, port;
    uint64_t refresh_ms, last_ms;
};

struct discovery {
    scrape_recv *x;
    file_sd *f;
    size_t nf;
    dns_sd *d;
    size_t nd;
    uv_timer_t tick;
    bool started;
};

/* ---- config --------------------------------------------------------------------------------- */

static int duration_of(const pc_node *n, const char *key, uint64_t def, const char *path,
                       uint64_t *out, pc_error *e)
{
    const pc_node *v = pc_node_get(n, key);
    *out = def;
    if (!v) return 0;
    if (v->kind != PC_NODE_SCALAR || pc_parse_duration_ms(v->scalar, out) || *out < 1000)
        return pc_cfg_errorf(e, v, path, "%s: a duration of at least 1s", key);
    return 0;
}

static int only_keys(const pc_node *n, const char *const *keys, const char *path, pc_error *e)
{
    if (n->kind != PC_NODE_MAP) return pc_cfg_errorf(e, n, path, "a map");
    for (size_t i = 0; i < n->n; i++) {
        size_t k = 0;
        while (keys[k] && strcmp(keys[k], n->keys[i]))
            k++;
        if (!keys[k]) return pc_cfg_errorf(e, n->vals[i], path, "unknown key \"%s\"", n->keys[i]);
    }
    return 0;
}

/* A pattern Prometheus takes: an extension, at most one * and only in the last segment. */
static bool pattern_ok(const char *p)
{
    const char *dot = strrchr(p, '.'), *star = strchr(p, '*'), *slash = strrchr(p, '/');
    if (!dot || (strcasecmp(dot, ".json") && strcasecmp(dot, ".yml") && strcasecmp(dot, ".yaml")))
        return false;
    return !star || (strchr(star + 1, '*') == NULL && (!slash || star > slash));
}

static int file_parse(const pc_node *n, const char *path, file_sd *f, pc_error *e)
{
    static const char *const keys[] = {"files", "refresh_interval", NULL};
    if (only_keys(n, keys, path, e)) return PC_EINVAL;
    const pc_node *fl = pc_node_get(n, "files");
    if (!fl || fl->kind != PC_NODE_SEQ || !fl->n)
        return pc_cfg_errorf(e, n, path, "file_sd_configs: files: a list of paths");
    for (size_t i = 0; i < fl->n; i++)
        if (fl->vals[i]->kind != PC_NODE_SCALAR || !pattern_ok(fl->vals[i]->scalar))
            return pc_cfg_errorf(e, fl->vals[i], path,
                                 "file_sd_configs: files: a path ending in .json, .yml or .yaml "
                                 "with at most one *, in its last part");
    uint64_t refresh;
    if (duration_of(n, "refresh_interval", 300000, path, &refresh, e)) return PC_EINVAL;
    if (!f) return 0;
    f->refresh_ms = refresh;
    f->patterns.v = pc_xcalloc(fl->n, sizeof(char *));
    for (size_t i = 0; i < fl->n; i++)
        f->patterns.v[f->patterns.n++] = pc_xstrdup(fl->vals[i]->scalar);
    return 0;
}

static int dns_parse(const pc_node *n, const char *path, dns_sd *d, pc_error *e)
{
    static const char *const keys[] = {"names", "type", "port", "refresh_interval", NULL};
    if (only_keys(n, keys, path, e)) return PC_EINVAL;
    const pc_node *nl = pc_node_get(n, "names"), *t = pc_node_get(n, "type");
    const pc_node *p = pc_node_get(n, "port");
    if (!nl || nl->kind != PC_NODE_SEQ || !nl->n)
        return pc_cfg_errorf(e, n, path, "dns_sd_configs: names: a list of names");
    for (size_t i = 0; i < nl->n; i++)
        if (nl->vals[i]->kind != PC_NODE_SCALAR || !*nl->vals[i]->scalar)
            return pc_cfg_errorf(e, nl->vals[i], path, "dns_sd_configs: names: each a name");
    int type = DNS_SRV;
    if (t) {
        while (type <= DNS_AAAA &&
               (t->kind != PC_NODE_SCALAR || strcasecmp(t->scalar, dns_types[type])))
            type++;
        if (type > DNS_AAAA)
            return pc_cfg_errorf(e, t, path, "dns_sd_configs: type: SRV, A or AAAA");
    }
    long port = 0;
    if (p) {
        char *end = NULL;
        port = p->kind == PC_NODE_SCALAR ? strtol(p->scalar, &end, 10) : 0;
        if (!end || *end || port < 1 || port > 65535)
            return pc_cfg_errorf(e, p, path, "dns_sd_configs: port: 1..65535");
    }
    if (type != DNS_SRV && !port)
        return pc_cfg_errorf(e, n, path, "dns_sd_configs: port: required for type %s",
                             dns_types[type]);
    uint64_t refresh;
    if (duration_of(n, "refresh_interval", 30000, path, &refresh, e)) return PC_EINVAL;
    if (!d) return 0;
    d->type = type;
    d->port = (int)port;
    d->refresh_ms = refresh;
    d->names = pc_xcalloc(nl->n, sizeof *d->names);
    for (size_t i = 0; i < nl->n; i++)
        d->names[d->n++] = (dns_name){.d = d, .name = pc_xstrdup(nl->vals[i]->scalar)};
    return 0;
}

static int each(const pc_node *list, const char *what, const char *path,
                int (*parse)(const pc_node *, const char *, void *, pc_error *), void *out,
                size_t size, pc_error *e)
{
    if (!list || list->kind == PC_NODE_NULL) return 0;
    if (list->kind != PC_NODE_SEQ) return pc_cfg_errorf(e, list, path, "%s: a list", what);
    for (size_t i = 0; i < list->n; i++)
        if (parse(list->vals[i], path, out ? (char *)out + i * size : NULL, e)) return PC_EINVAL;
    return 0;
}

static int file_parse_v(const pc_node *n, const char *path, void *f, pc_error *e)
{
    return file_parse(n, path, f, e);
}

static int dns_parse_v(const pc_node *n, const char *path, void *d, pc_error *e)
{
    return dns_parse(n, path, d, e);
}

int discovery_validate(const scrape_cfg *cfg, const pc_node *node, const char *path, pc_error *e)
{
    (void)node;
    return each(cfg->file_sd, "file_sd_configs", path, file_parse_v, NULL, 0, e) ||
                   each(cfg->dns_sd, "dns_sd_configs", path, dns_parse_v, NULL, 0, e)
               ? PC_EINVAL
               : 0;
}

/* ---- files ---------------------------------------------------------------------------------- */

static void file_read(scrape_recv *x, sd_file *sf)
{
    char source[1100];
    snprintf(source, sizeof source, "file:%s", sf->path);
    if (!sf->present) {
        scrape_sync(x, source, NULL, 0);
        return;
    }
    pc_error e = {0};
    pc_node *root = NULL;
    pc_buf text = {0};
    FILE *fp = fopen(sf->path, "rb");
    char chunk[8192];
    size_t got;
    while (fp && (got = fread(chunk, 1, sizeof chunk, fp)) > 0 && text.len < (16u << 20))
        pc_buf_append(&text, chunk, got);
    if (fp && !ferror(fp))
        root = pc_yaml_parse(text.data ? (char *)text.data : "", text.len, sf->path, &e);
    if (fp) fclose(fp);
    pc_buf_free(&text);
    const char *meta[] = {"__meta_filepath", sf->path};
    sd_target *ts = NULL;
    size_t n = 0;
    if (!root || sd_parse_groups(root, sf->path, meta, 1, &ts, &n, &e)) {
        PC_WARN(x->c->id, "file_sd_configs: %s: %s (its targets are kept)", sf->path,
                e.msg[0] ? e.msg : "cannot be read");
        sd_targets_free(ts, n);
        pc_node_free(root);
        return;
    }
    pc_node_free(root);
    scrape_sync(x, source, ts, n);
}

static bool same_stat(const struct stat *a, const struct stat *b)
{
    return a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

static sd_file *file_find(file_sd *f, const char *path)
{
    for (size_t i = 0; i < f->n; i++)
        if (!strcmp(f->files[i].path, path)) return &f->files[i];
    f->files = pc_xrealloc(f->files, (f->n + 1) * sizeof *f->files);
    f->files[f->n] = (sd_file){.path = pc_xstrdup(path)};
    return &f->files[f->n++];
}

/* Glob again, read what changed (everything when full). */
static void file_check(scrape_recv *x, file_sd *f, bool full)
{
    bool *seen = pc_xcalloc(f->n + 64, sizeof(bool));
    for (size_t p = 0; p < f->patterns.n; p++) {
        glob_t g;
        if (glob(f->patterns.v[p], 0, NULL, &g)) continue;
        for (size_t i = 0; i < g.gl_pathc; i++) {
            struct stat st;
            if (stat(g.gl_pathv[i], &st) || !S_ISREG(st.st_mode)) continue;
            size_t before = f->n;
            sd_file *sf = file_find(f, g.gl_pathv[i]);
            if (f->n > before) seen = pc_xrealloc(seen, (f->n + 64) * sizeof(bool));
            seen[sf - f->files] = true;
            bool changed = !sf->present || !same_stat(&sf->st, &st);
            sf->st = st;
            sf->present = true;
            if (changed || full) file_read(x, sf);
        }
        globfree(&g);
    }
    for (size_t i = 0; i < f->n; i++)
        if (!seen[i] && f->files[i].present) {
            f->files[i].present = false;
            file_read(x, &f->files[i]); /* gone: its targets go */
        }
    free(seen);
}

/* ---- DNS ------------------------------------------------------------------------------------ */

static void dns_sync(dns_name *dn, sd_target *ts, size_t n)
{
    char source[600];
    snprintf(source, sizeof source, "dns:%s", dn->name);
    scrape_sync(dn->d->disc->x, source, ts, n);
}

static void add_target(sd_target **ts, size_t *n, const char *addr, const char *const *meta,
                       size_t n_meta)
{
    *ts = pc_xrealloc(*ts, (*n + 1) * sizeof **ts);
    sd_target *t = &(*ts)[(*n)++];
    *t = (sd_target){.address = pc_xstrdup(addr)};
    t->labels.keys = pc_xcalloc(n_meta + 1, sizeof(char *));
    t->labels.vals = pc_xcalloc(n_meta + 1, sizeof(char *));
    for (size_t i = 0; i < n_meta; i++) {
        t->labels.keys[t->labels.n] = pc_xstrdup(meta[2 * i]);
        t->labels.vals[t->labels.n++] = pc_xstrdup(meta[2 * i + 1]);
    }
    t->labels.keys[t->labels.n] = pc_xstrdup("__address__");
    t->labels.vals[t->labels.n++] = pc_xstrdup(addr);
}

static void gai_done(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    dns_name *dn = req->data;
    scrape_recv *x = dn->d->disc->x;
    dn->busy = false;
    x->closing--;
    if (x->stopping) {
        uv_freeaddrinfo(res);
        x->ops.try_finish(x);
        return;
    }
    if (status) {
        PC_WARN(x->c->id, "dns_sd_configs: %s: %s (its targets are kept)", dn->name,
                uv_strerror(status));
        return;
    }
    sd_target *ts = NULL;
    size_t n = 0;
    const char *meta[] = {"__meta_dns_name", dn->name};
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        char ip[INET6_ADDRSTRLEN], addr[INET6_ADDRSTRLEN + 10];
        bool v6 = a->ai_family == AF_INET6;
        const void *p = v6 ? (const void *)&((struct sockaddr_in6 *)a->ai_addr)->sin6_addr
                           : (const void *)&((struct sockaddr_in *)a->ai_addr)->sin_addr;
        if (!inet_ntop(a->ai_family, p, ip, sizeof ip)) continue;
        snprintf(addr, sizeof addr, v6 ? "[%s]:%d" : "%s:%d", ip, dn->d->port);
        bool dup = false;
        for (size_t i = 0; i < n && !dup; i++)
            dup = !strcmp(ts[i].address, addr);
        if (!dup) add_target(&ts, &n, addr, meta, 1);
    }
    uv_freeaddrinfo(res);
    dns_sync(dn, ts, n);
}

/* Pool: the SRV records of the name (a resolver state of its own: res_nsearch is reentrant). */
static void srv_work(uv_work_t *w)
{
    dns_name *dn = w->data;
    struct __res_state st;
    memset(&st, 0, sizeof st);
    unsigned char ans[8192];
    dn->rc = -1;
    if (res_ninit(&st)) return;
    int len = res_nsearch(&st, dn->name, ns_c_in, ns_t_srv, ans, sizeof ans);
    ns_msg msg;
    if (len >= 0 && ns_initparse(ans, len, &msg) == 0) {
        dn->rc = 0;
        for (int i = 0; i < ns_msg_count(msg, ns_s_an); i++) {
            ns_rr rr;
            char host[NS_MAXDNAME], addr[NS_MAXDNAME + 8], port[8];
            if (ns_parserr(&msg, ns_s_an, i, &rr) || ns_rr_type(rr) != ns_t_srv ||
                ns_rr_rdlen(rr) < 7)
                continue; /* CNAMEs in the answer are skipped */
            const unsigned char *rd = ns_rr_rdata(rr);
            if (dn_expand(ans, ans + len, rd + 6, host, sizeof host) < 0) continue;
            size_t hl = strlen(host);
            if (hl && host[hl - 1] == '.') host[hl - 1] = 0;
            snprintf(port, sizeof port, "%u", (unsigned)ns_get16(rd + 4));
            snprintf(addr, sizeof addr, "%s:%s", host, port);
            const char *meta[] = {"__meta_dns_name",
                                  dn->name,
                                  "__meta_dns_srv_record_target",
                                  host,
                                  "__meta_dns_srv_record_port",
                                  port};
            add_target(&dn->found, &dn->n_found, addr, meta, 3);
        }
    } else if (len < 0 && (st.res_h_errno == HOST_NOT_FOUND || st.res_h_errno == NO_DATA)) {
        dn->rc = 0; /* the name has no records: no targets */
    }
    res_nclose(&st);
}

static void srv_done(uv_work_t *w, int status)
{
    dns_name *dn = w->data;
    scrape_recv *x = dn->d->disc->x;
    sd_target *ts = dn->found;
    size_t n = dn->n_found;
    dn->found = NULL;
    dn->n_found = 0;
    dn->busy = false;
    x->closing--;
    if (x->stopping || status || dn->rc) {
        if (!x->stopping)
            PC_WARN(x->c->id, "dns_sd_configs: %s: SRV lookup failed (its targets are kept)",
                    dn->name);
        sd_targets_free(ts, n);
        x->ops.try_finish(x);
        return;
    }
    dns_sync(dn, ts, n);
}

static void dns_refresh(scrape_recv *x, dns_sd *d)
{
    for (size_t i = 0; i < d->n; i++) {
        dns_name *dn = &d->names[i];
        if (dn->busy) continue;
        dn->busy = true;
        x->closing++;
        if (d->type == DNS_SRV) {
            dn->work.data = dn;
            uv_queue_work(x->c->loop, &dn->work, srv_work, srv_done);
            continue;
        }
        struct addrinfo hints = {.ai_family = d->type == DNS_A ? AF_INET : AF_INET6,
                                 .ai_socktype = SOCK_STREAM};
        dn->gai.data = dn;
        int rc = uv_getaddrinfo(x->c->loop, &dn->gai, gai_done, dn->name, NULL, &hints);
        if (rc) {
            dn->busy = false;
            x->closing--;
            PC_WARN(x->c->id, "dns_sd_configs: %s: %s", dn->name, uv_strerror(rc));
        }
    }
}

/* ---- the tick ------------------------------------------------------------------------------- */

static void tick(uv_timer_t *h)
{
    struct discovery *ds = h->data;
    scrape_recv *x = ds->x;
    uint64_t now = uv_now(x->c->loop);
    for (size_t i = 0; i < ds->nf; i++) {
        bool full = now - ds->f[i].last_ms >= ds->f[i].refresh_ms;
        if (full) ds->f[i].last_ms = now;
        file_check(x, &ds->f[i], full);
    }
    for (size_t i = 0; i < ds->nd; i++)
        if (now - ds->d[i].last_ms >= ds->d[i].refresh_ms) {
            ds->d[i].last_ms = now;
            dns_refresh(x, &ds->d[i]);
        }
}

int discovery_start(scrape_recv *x, pc_error *e)
{
    const scrape_cfg *cfg = x->c->cfg;
    struct discovery *ds = pc_xcalloc(1, sizeof *ds);
    x->disc = ds;
    ds->x = x;
    const pc_node *fl = cfg->file_sd, *dl = cfg->dns_sd;
    ds->nf = fl && fl->kind == PC_NODE_SEQ ? fl->n : 0;
    ds->nd = dl && dl->kind == PC_NODE_SEQ ? dl->n : 0;
    ds->f = pc_xcalloc(ds->nf + 1, sizeof *ds->f);
    ds->d = pc_xcalloc(ds->nd + 1, sizeof *ds->d);
    for (size_t i = 0; i < ds->nd; i++)
        ds->d[i].disc = ds;
    if (each(fl, "file_sd_configs", x->c->id, file_parse_v, ds->f, sizeof *ds->f, e) ||
        each(dl, "dns_sd_configs", x->c->id, dns_parse_v, ds->d, sizeof *ds->d, e))
        return PC_EINVAL;
    for (size_t i = 0; i < ds->nd; i++)
        ds->d[i].disc = ds; /* parse filled the rest */
    if (!ds->nf && !ds->nd) return 0;
    uv_timer_init(x->c->loop, &ds->tick);
    ds->tick.data = ds;
    ds->started = true;
    uint64_t now = uv_now(x->c->loop);
    for (size_t i = 0; i < ds->nf; i++) {
        ds->f[i].last_ms = now;
        file_check(x, &ds->f[i], true);
    }
    for (size_t i = 0; i < ds->nd; i++) {
        ds->d[i].last_ms = now;
        dns_refresh(x, &ds->d[i]);
    }
    uv_timer_start(&ds->tick, tick, TICK_MS, TICK_MS);
    return 0;
}

static void tick_closed(uv_handle_t *h)
{
    struct discovery *ds = h->data;
    ds->x->closing--;
    ds->x->ops.try_finish(ds->x);
}

void discovery_stop(scrape_recv *x)
{
    struct discovery *ds = x->disc;
    if (!ds || !ds->started) return;
    ds->started = false;
    uv_timer_stop(&ds->tick);
    x->closing++;
    uv_close((uv_handle_t *)&ds->tick, tick_closed);
}

void discovery_free(scrape_recv *x)
{
    struct discovery *ds = x->disc;
    if (!ds) return;
    for (size_t i = 0; i < ds->nf; i++) {
        for (size_t k = 0; k < ds->f[i].patterns.n; k++)
            free(ds->f[i].patterns.v[k]);
        free(ds->f[i].patterns.v);
        for (size_t k = 0; k < ds->f[i].n; k++)
            free(ds->f[i].files[k].path);
        free(ds->f[i].files);
    }
    for (size_t i = 0; i < ds->nd; i++) {
        for (size_t k = 0; k < ds->d[i].n; k++) {
            free(ds->d[i].names[k].name);
            sd_targets_free(ds->d[i].names[k].found, ds->d[i].names[k].n_found);
        }
        free(ds->d[i].names);
    }
    free(ds->f);
    free(ds->d);
    free(ds);
    x->disc = NULL;
}
