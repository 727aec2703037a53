/* The debuginfod fetcher of fetch.h.
 *
 * libdebuginfod (0.188) takes its servers and cache from the environment (DEBUGINFOD_URLS,
 * DEBUGINFOD_CACHE_PATH, ...), read when a find call starts, and has no setter. To ask one server
 * at a time (the breaker is per server) a fetch sets them under env_mu, a lock of the process as
 * the environment is, and releases it at the call's first progress callback, when the library has
 * read them, or when the call returns. Each server gets a cache directory of its own
 * (cache_dir/s<i>): libdebuginfod's negative entries (a 404) would otherwise answer for the next
 * server. Its cache_miss_s file is written with negative_ttl so both forget a 404 together. */
#include "fetch.h"

#include <elfutils/debuginfod.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/dynlib.h"
#include "base/log.h"
#include "cache.h"

/* clang-format off */
const pc_cfg_key sym_fetch_keys[] = {
    {"debuginfod.urls", PC_CFG_LIST, "", offsetof(sym_fetch_cfg, urls), "debuginfod servers (as DEBUGINFOD_URLS, one per entry), asked in order for build ids no local source has", NULL},
    {"debuginfod.cache_dir", PC_CFG_STRING, "", offsetof(sym_fetch_cfg, cache_dir), "libdebuginfod's on-disk cache (one subdirectory per server); default $XDG_CACHE_HOME or ~/.cache, then profcol/debuginfod", NULL},
    {"debuginfod.timeout", PC_CFG_DURATION, "30s", offsetof(sym_fetch_cfg, timeout_ms), "longest one request to one server may take", NULL},
    {"debuginfod.wait", PC_CFG_DURATION, "2s", offsetof(sym_fetch_cfg, wait_ms), "longest a batch waits for fetches before it goes on with those locations unsymbolized", NULL},
    {"debuginfod.max_concurrent", PC_CFG_INT, "2", offsetof(sym_fetch_cfg, max_concurrent), "fetches at once (threads of the fetcher)", NULL},
    {"debuginfod.negative_ttl", PC_CFG_DURATION, "10m", offsetof(sym_fetch_cfg, negative_ttl_ms), "how long a build id no server had (or a failed fetch) is not asked again", NULL},
    {"debuginfod.max_size", PC_CFG_SIZE, "1GiB", offsetof(sym_fetch_cfg, max_size), "largest debug file or executable fetched (as DEBUGINFOD_MAXSIZE; 0: no limit): a server announcing more is refused", NULL},
    {"debuginfod.executables", PC_CFG_BOOL, "false", offsetof(sym_fetch_cfg, executables), "also fetch each executable: its program headers place runtime addresses (a pprof's); the eBPF profiler's ELF addresses need none", NULL},
    {"debuginfod.breaker_failures", PC_CFG_INT, "5", offsetof(sym_fetch_cfg, breaker_failures), "consecutive failures (no answer, timeout) that open a server's circuit breaker", NULL},
    {"debuginfod.breaker_cooldown", PC_CFG_DURATION, "1m", offsetof(sym_fetch_cfg, breaker_cooldown_ms), "how long an open breaker skips its server before one request tries again", NULL},
    {0},
};
/* clang-format on */

static pthread_mutex_t env_mu = PTHREAD_MUTEX_INITIALIZER; /* the process environment's */

enum { FE_PENDING, FE_OK, FE_FAILED };

typedef struct fentry {
    int state;
    char *path, *exe; /* exe: only with debuginfod.executables, NULL when the server had none */
    sym_reason why;
    uint64_t until; /* FE_FAILED: asked again after this */
} fentry;

typedef struct server {
    char *url, *cache;
    int64_t failures;
    uint64_t open_until;
} server;

typedef struct qitem {
    struct qitem *next;
    char id[];
} qitem;

/* libdebuginfod's calls, loaded when a symbolizer has urls (base/dynlib.h: the library pulls
 * libcurl, GnuTLS and Kerberos into every process that links it) */
typedef struct dfn {
    debuginfod_client *(*begin)(void);
    void (*end)(debuginfod_client *c);
    int (*find_debuginfo)(debuginfod_client *c, const unsigned char *id, int len, char **path);
    int (*find_executable)(debuginfod_client *c, const unsigned char *id, int len, char **path);
    void (*set_progressfn)(debuginfod_client *c, debuginfod_progressfn_t fn);
    void (*set_verbose_fd)(debuginfod_client *c, int fd);
} dfn;

struct sym_fetch {
    const sym_fetch_cfg *cfg;
    dfn d;
    int null_fd; /* /dev/null: libdebuginfod's verbose fd */
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    sym_lru *entries; /* build id -> fentry* */
    qitem *head, *tail;
    server *servers;
    size_t n_servers;
    pthread_t *threads;
    size_t n_threads;
    bool stop;
    sym_fetch_stats stats;
};

uint64_t sym_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void fentry_free(void *p)
{
    fentry *e = p;
    if (e) free(e->path), free(e->exe);
    free(e);
}

/* ---- one request ------------------------------------------------------------------------ */

typedef struct fctx {
    sym_fetch *f;
    bool env_locked;
    uint64_t deadline;
} fctx;

static void env_release(fctx *x)
{
    if (!x->env_locked) return;
    x->env_locked = false;
    pthread_mutex_unlock(&env_mu);
}

/* The request this fetch thread is making (one client per thread): progress's context. */
static _Thread_local fctx *current;

static int progress(debuginfod_client *c, long a, long b)
{
    (void)c, (void)a, (void)b;
    fctx *x = current;
    env_release(x);
    return __atomic_load_n(&x->f->stop, __ATOMIC_RELAXED) || sym_now_ms() > x->deadline;
}

/* One server, the debug file or the executable: fd's path (malloc'd) and *rc 0, or NULL and *rc
 * the -errno. */
static char *ask(sym_fetch *f, debuginfod_client *c, const server *s, const char *id, bool exe,
                 int *rc)
{
    char tmo[32];
    snprintf(tmo, sizeof tmo, "%" PRIu64, (f->cfg->timeout_ms + 999) / 1000);
    fctx x = {.f = f, .env_locked = true, .deadline = sym_now_ms() + f->cfg->timeout_ms};
    pthread_mutex_lock(&env_mu);
    setenv("DEBUGINFOD_URLS", s->url, 1);
    setenv("DEBUGINFOD_CACHE_PATH", s->cache, 1);
    setenv("DEBUGINFOD_TIMEOUT", tmo, 1);
    setenv("DEBUGINFOD_RETRY_LIMIT", "0", 1); /* our breaker and negative cache decide */
    char maxsize[32];
    snprintf(maxsize, sizeof maxsize, "%" PRIu64, f->cfg->max_size);
    /* libdebuginfod refuses (-EFBIG) a Content-Length above it, before the body is read
     * (docs/symbolization.md, ../shared/spec/symbolization.md §4.2) */
    setenv("DEBUGINFOD_MAXSIZE", maxsize, 1);
    current = &x;
    f->d.set_progressfn(c, progress);
    char *path = NULL;
    int fd = exe ? f->d.find_executable(c, (const unsigned char *)id, 0, &path)
                 : f->d.find_debuginfo(c, (const unsigned char *)id, 0, &path);
    current = NULL;
    env_release(&x);
    if (fd < 0) {
        free(path);
        *rc = fd;
        return NULL;
    }
    close(fd);
    *rc = 0;
    return path;
}

static bool breaker_allows(sym_fetch *f, server *s, uint64_t now)
{
    if (s->failures < f->cfg->breaker_failures) return true;
    if (now < s->open_until) return false;
    s->open_until = now + f->cfg->breaker_cooldown_ms; /* half open: this one request */
    return true;
}

/* Every server in order until one has it; the entry's outcome (lock not held). */
static fentry fetch_one(sym_fetch *f, debuginfod_client *c, const char *id)
{
    fentry out = {.state = FE_FAILED, .why = SYM_NO_FILE};
    bool errors = false, big = false;
    for (size_t i = 0; i < f->n_servers && out.state != FE_OK; i++) {
        server *s = &f->servers[i];
        pthread_mutex_lock(&f->mu);
        bool allowed = breaker_allows(f, s, sym_now_ms());
        pthread_mutex_unlock(&f->mu);
        if (!allowed) {
            errors = true;
            continue;
        }
        uint64_t t0 = sym_now_ms();
        int rc;
        char *path = ask(f, c, s, id, false, &rc);
        char *exe = path && f->cfg->executables ? ask(f, c, s, id, true, &rc) : NULL;
        struct stat sb;
        pthread_mutex_lock(&f->mu);
        f->stats.fetches++;
        pc_histogram_observe(&f->stats.latency, (double)(sym_now_ms() - t0) / 1000.0);
        if (path) {
            out = (fentry){.state = FE_OK, .path = path, .exe = exe};
            f->stats.found++;
            if (stat(path, &sb) == 0) f->stats.bytes += (uint64_t)sb.st_size;
            if (exe && stat(exe, &sb) == 0) f->stats.bytes += (uint64_t)sb.st_size;
            rc = 0; /* a missing executable is no failure of the server */
        }
        if (path || rc == -ENOENT || rc == -EFBIG) { /* the server answered */
            s->failures = 0;
            f->stats.not_found += !path && rc == -ENOENT;
            f->stats.too_large += !path && rc == -EFBIG;
            big |= !path && rc == -EFBIG;
        } else {
            errors = true;
            f->stats.errors++;
            if (++s->failures >= f->cfg->breaker_failures)
                s->open_until = sym_now_ms() + f->cfg->breaker_cooldown_ms;
        }
        pthread_mutex_unlock(&f->mu);
    }
    if (out.state != FE_OK && big) out.why = SYM_TOO_LARGE;
    if (out.state != FE_OK && errors) out.why = SYM_FETCH_ERROR;
    return out;
}

static void *worker(void *arg)
{
    sym_fetch *f = arg;
    debuginfod_client *c = f->d.begin();
    /* libdebuginfod 0.188 prints "using max size" to its verbose fd whenever that fd is not 0,
     * the default -1 included, and glibc's dprintf to a bad fd leaks its 8 KiB buffer: one per
     * request (ASan). Its lines go to /dev/null instead. */
    if (c && f->null_fd >= 0) f->d.set_verbose_fd(c, f->null_fd);
    pthread_mutex_lock(&f->mu);
    while (!f->stop) {
        qitem *q = f->head;
        if (!q) {
            pthread_cond_wait(&f->work, &f->mu);
            continue;
        }
        f->head = q->next;
        if (!f->head) f->tail = NULL;
        pthread_mutex_unlock(&f->mu);
        fentry r = {.state = FE_FAILED, .why = SYM_FETCH_ERROR};
        if (c) r = fetch_one(f, c, q->id);
        pthread_mutex_lock(&f->mu);
        fentry *e = pc_xmalloc(sizeof *e);
        *e = r;
        if (r.state == FE_FAILED) e->until = sym_now_ms() + f->cfg->negative_ttl_ms;
        sym_lru_put(f->entries, q->id, strlen(q->id), e);
        free(q);
        pthread_cond_broadcast(&f->done);
    }
    pthread_mutex_unlock(&f->mu);
    if (c) f->d.end(c);
    return NULL;
}

/* ---- the fetcher ------------------------------------------------------------------------ */

static void mkdirs(const char *path)
{
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(tmp, 0700);
            *p = '/';
        }
    mkdir(tmp, 0700);
}

static char *cache_root(const sym_fetch_cfg *cfg)
{
    char buf[4096];
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (cfg->cache_dir && cfg->cache_dir[0])
        snprintf(buf, sizeof buf, "%s", cfg->cache_dir);
    else if (xdg && xdg[0])
        snprintf(buf, sizeof buf, "%s/profcol/debuginfod", xdg);
    else
        snprintf(buf, sizeof buf, "%s/.cache/profcol/debuginfod", home ? home : "/tmp");
    return pc_xstrdup(buf);
}

static void servers_init(sym_fetch *f)
{
    char *root = cache_root(f->cfg);
    f->n_servers = f->cfg->urls.n;
    f->servers = pc_xcalloc(f->n_servers, sizeof *f->servers);
    for (size_t i = 0; i < f->n_servers; i++) {
        char dir[4200], file[4300];
        snprintf(dir, sizeof dir, "%s/s%zu", root, i);
        mkdirs(dir);
        snprintf(file, sizeof file, "%s/cache_miss_s", dir);
        FILE *fp = fopen(file, "w");
        if (fp) {
            fprintf(fp, "%" PRIu64 "\n", (f->cfg->negative_ttl_ms + 999) / 1000);
            fclose(fp);
        }
        f->servers[i].url = pc_xstrdup(f->cfg->urls.v[i]);
        f->servers[i].cache = pc_xstrdup(dir);
    }
    free(root);
}

static int load_debuginfod(dfn *d, pc_error *e)
{
    static const char *const names[] = {"debuginfod_begin",          "debuginfod_end",
                                        "debuginfod_find_debuginfo", "debuginfod_find_executable",
                                        "debuginfod_set_progressfn", "debuginfod_set_verbose_fd"};
    void *fns[6];
    int rc = pc_dynlib_load("libdebuginfod.so.1", "libdebuginfod1", names, fns, 6, e);
    if (rc) return rc;
    /* a function pointer travels through void * here as dlsym(3) documents */
    memcpy(&d->begin, &fns[0], sizeof fns[0]);
    memcpy(&d->end, &fns[1], sizeof fns[1]);
    memcpy(&d->find_debuginfo, &fns[2], sizeof fns[2]);
    memcpy(&d->find_executable, &fns[3], sizeof fns[3]);
    memcpy(&d->set_progressfn, &fns[4], sizeof fns[4]);
    memcpy(&d->set_verbose_fd, &fns[5], sizeof fns[5]);
    return 0;
}

int sym_fetch_new(const sym_fetch_cfg *cfg, const char *id, sym_fetch **out, pc_error *e)
{
    *out = NULL;
    if (!cfg->urls.n) return 0;
    dfn d;
    int rc = load_debuginfod(&d, e);
    if (rc) return rc;
    sym_fetch *f = pc_xcalloc(1, sizeof *f);
    f->cfg = cfg;
    f->d = d;
    f->null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    pthread_mutex_init(&f->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&f->done, &ca);
    pthread_cond_init(&f->work, NULL);
    pthread_condattr_destroy(&ca);
    static const double bounds[] = {0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
    f->stats.latency.bounds = bounds;
    f->stats.latency.n_bounds = sizeof bounds / sizeof bounds[0];
    f->entries = sym_lru_new(4096, fentry_free);
    servers_init(f);
    /* Add the variables now, at start: a later setenv then replaces a value in place instead of
     * growing the environment array under another thread's getenv. */
    static const char *const vars[] = {"DEBUGINFOD_URLS", "DEBUGINFOD_CACHE_PATH",
                                       "DEBUGINFOD_TIMEOUT", "DEBUGINFOD_RETRY_LIMIT",
                                       "DEBUGINFOD_MAXSIZE"};
    pthread_mutex_lock(&env_mu);
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        setenv(vars[i], "", 0);
    pthread_mutex_unlock(&env_mu);
    size_t n = cfg->max_concurrent > 0 ? (size_t)cfg->max_concurrent : 1;
    f->threads = pc_xcalloc(n, sizeof *f->threads);
    for (size_t i = 0; i < n; i++) {
        if (pthread_create(&f->threads[f->n_threads], NULL, worker, f) != 0) {
            PC_WARN(id, "debuginfod: cannot start fetch thread %zu", i);
            break;
        }
        f->n_threads++;
    }
    *out = f;
    return 0;
}

void sym_fetch_free(sym_fetch *f)
{
    if (!f) return;
    pthread_mutex_lock(&f->mu);
    __atomic_store_n(&f->stop, true, __ATOMIC_RELAXED);
    pthread_cond_broadcast(&f->work);
    pthread_mutex_unlock(&f->mu);
    for (size_t i = 0; i < f->n_threads; i++)
        pthread_join(f->threads[i], NULL);
    for (qitem *q = f->head, *next; q; q = next) {
        next = q->next;
        free(q);
    }
    for (size_t i = 0; i < f->n_servers; i++) {
        free(f->servers[i].url);
        free(f->servers[i].cache);
    }
    free(f->servers);
    free(f->threads);
    sym_lru_free(f->entries);
    pthread_cond_destroy(&f->work);
    pthread_cond_destroy(&f->done);
    pthread_mutex_destroy(&f->mu);
    if (f->null_fd >= 0) close(f->null_fd);
    free(f);
}

static void enqueue(sym_fetch *f, const char *id)
{
    size_t n = strlen(id);
    qitem *q = pc_xmalloc(sizeof *q + n + 1);
    q->next = NULL;
    memcpy(q->id, id, n + 1);
    if (f->tail)
        f->tail->next = q;
    else
        f->head = q;
    f->tail = q;
    fentry *e = pc_xcalloc(1, sizeof *e);
    e->state = FE_PENDING;
    sym_lru_put(f->entries, id, n, e);
    pthread_cond_signal(&f->work);
}

char *sym_fetch_get(sym_fetch *f, const char *id, uint64_t deadline_ms, char **exe, sym_reason *why)
{
    size_t n = strlen(id);
    char *path = NULL;
    pthread_mutex_lock(&f->mu);
    fentry *e = sym_lru_get(f->entries, id, n);
    if (!e || (e->state == FE_FAILED && sym_now_ms() >= e->until)) enqueue(f, id);
    for (;;) {
        e = sym_lru_get(f->entries, id, n);
        if (!e || e->state == FE_PENDING) {
            uint64_t now = sym_now_ms();
            *why = SYM_FETCH_WAIT;
            if (!e || now >= deadline_ms) break;
            struct timespec ts = {(time_t)(deadline_ms / 1000),
                                  (long)(deadline_ms % 1000) * 1000000};
            pthread_cond_timedwait(&f->done, &f->mu, &ts);
            continue;
        }
        if (e->state == FE_OK) {
            path = pc_xstrdup(e->path);
            *exe = e->exe ? pc_xstrdup(e->exe) : NULL;
        } else
            *why = e->why;
        break;
    }
    pthread_mutex_unlock(&f->mu);
    return path;
}

void sym_fetch_stats_get(sym_fetch *f, sym_fetch_stats *out)
{
    pthread_mutex_lock(&f->mu);
    *out = f->stats;
    uint64_t now = sym_now_ms();
    out->breaker_open = 0;
    for (size_t i = 0; i < f->n_servers; i++)
        out->breaker_open +=
            f->servers[i].failures >= f->cfg->breaker_failures && now < f->servers[i].open_until;
    pthread_mutex_unlock(&f->mu);
}
