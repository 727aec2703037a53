/* Processor "symbolizer": names the native frames the OpenTelemetry eBPF profiler sends as bare
 * addresses (docs/symbolization.md). A location with an address, no function, and a mapping with
 * a build id (`process.executable.build_id.gnu`, `.htlhash`, `.go`) or a file name is looked up in
 * the local sources, in order: `debug_dirs` in the /usr/lib/debug layout (.build-id/xx/rest.debug,
 * and .build-id/xx/rest for the executable; GNU build ids only), then `elf_files` indexed by their
 * three ids (read once at start) or, without any id, by the mapping's file name; debuginfod for
 * GNU build ids. The address is placed in the ELF
 * through the executable's PT_LOAD headers; DWARF gives function, file, line and the inline chain
 * (one Line per frame, innermost first), the symbol table is the fallback; C++ and Rust names are
 * demangled (libiberty). What was found is written through the dictionary builder, so strings and
 * functions already there are shared. Unresolved locations stay as they came (or, with
 * `fallback_name`, get one Line named binary+0xoffset) and are counted by reason.
 *
 * The lookups run on the thread pool (the processor core's job); libdw is not thread-safe, so
 * one lock guards the resolver and its two bounded LRU caches (resolved addresses, open files). */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>

#include "cache.h"
#include "fetch.h"
#include "ids.h"
#include "pdata/dict.h"
#include "resolver.h"
#include "sdk/component.h"
#include "sdk/processor.h"

typedef struct symbolizer_cfg {
    pc_strlist debug_dirs, elf_files;
    bool fallback_name;
    int64_t cache_size, max_open_files;
    sym_fetch_cfg fetch;
} symbolizer_cfg;

/* clang-format off */
static const pc_cfg_key symbolizer_keys[] = {
    {"debug_dirs", PC_CFG_LIST, "", offsetof(symbolizer_cfg, debug_dirs), "directories in the /usr/lib/debug layout: .build-id/xx/rest.debug (debug file) and .build-id/xx/rest (executable)", NULL},
    {"elf_files", PC_CFG_LIST, "", offsetof(symbolizer_cfg, elf_files), "ELF files (with symbols or DWARF), or directories of them (not recursive), matched by GNU build id, htlhash or Go build id, or by file name when a mapping has no id", NULL},
    {"fallback_name", PC_CFG_BOOL, "false", offsetof(symbolizer_cfg, fallback_name), "give an unresolved location one line named binary+0xoffset", NULL},
    {"cache_size", PC_CFG_INT, "65536", offsetof(symbolizer_cfg, cache_size), "resolved (build id, address) pairs kept (LRU)", NULL},
    {"max_open_files", PC_CFG_INT, "16", offsetof(symbolizer_cfg, max_open_files), "debug files kept open and parsed (LRU)", NULL},
    {"", PC_CFG_GROUP, "", offsetof(symbolizer_cfg, fetch), "debuginfod servers for build ids no local source has", sym_fetch_keys},
    {0},
};
/* clang-format on */

static const char *const reason_names[SYM_N_REASONS] = {"",           "no_file",     "bad_file",
                                                        "no_segment", "no_symbol",   "bad_build_id",
                                                        "fetch_wait", "fetch_error", "too_large"};

typedef struct elf_entry {
    char *path, *base;
    sym_ids ids; /* "" for an id the file does not have */
} elf_entry;

typedef struct sym_counts {
    uint64_t resolved, cache_hits, cache_misses, unresolved[SYM_N_REASONS];
} sym_counts;

typedef struct sym_state {
    pc_proc_core core;
    const symbolizer_cfg *cfg;
    pthread_mutex_t mu; /* the resolver and both caches */
    sym_lru *results;   /* key -> sym_frames* (n == 0: no symbol there) */
    sym_lru *files;     /* "b:<id>" or "f:<name>" -> sym_elf* */
    elf_entry *elves;   /* elf_files, read at create */
    size_t n_elves;
    sym_fetch *fetch;                     /* NULL without debuginfod urls */
    sym_counts total;                     /* self-metrics (loop thread) */
    sym_fetch_stats fetched;              /* the fetcher's, copied after each batch (loop thread) */
    uint64_t batches, open_files, cached; /* gauges of the two caches' sizes */
} sym_state;

/* ---- config ----------------------------------------------------------------------------- */

static int symbolizer_validate(void *cfgp, const pc_node *node, const char *path, pc_error *err)
{
    symbolizer_cfg *cfg = cfgp;
    if (cfg->cache_size < 1)
        return pc_cfg_errorf(err, node, path, "cache_size: must be at least 1");
    if (cfg->max_open_files < 1)
        return pc_cfg_errorf(err, node, path, "max_open_files: must be at least 1");
    const sym_fetch_cfg *f = &cfg->fetch;
    if (f->max_concurrent < 1 || f->max_concurrent > 64)
        return pc_cfg_errorf(err, node, path, "debuginfod.max_concurrent: must be 1 to 64");
    if (f->breaker_failures < 1)
        return pc_cfg_errorf(err, node, path, "debuginfod.breaker_failures: must be at least 1");
    if (f->timeout_ms < 1)
        return pc_cfg_errorf(err, node, path, "debuginfod.timeout: must be positive");
    for (size_t i = 0; i < f->urls.n; i++)
        if (strncmp(f->urls.v[i], "http://", 7) && strncmp(f->urls.v[i], "https://", 8))
            return pc_cfg_errorf(err, node, path, "debuginfod.urls[%zu]: not an http(s) URL", i);
    return 0;
}

static void frames_release(void *p)
{
    sym_frames_free(p);
    free(p);
}

static void state_free(sym_state *st)
{
    sym_fetch_free(st->fetch);
    sym_lru_free(st->results);
    sym_lru_free(st->files);
    for (size_t i = 0; i < st->n_elves; i++)
        free(st->elves[i].path);
    free(st->elves);
    pthread_mutex_destroy(&st->mu);
    free(st);
}

enum { MAX_ELVES = 4096 }; /* files read from elf_files directories, in all */

static void add_elf(sym_state *st, const char *path, const char *id, bool quiet)
{
    sym_ids ids;
    if (sym_read_ids(path, &ids) < 0) {
        if (!quiet) PC_WARN(id, "elf_files: %s: not an ELF file", path);
        return;
    }
    if (st->n_elves % 16 == 0)
        st->elves = pc_xrealloc(st->elves, (st->n_elves + 16) * sizeof *st->elves);
    elf_entry *e = &st->elves[st->n_elves++];
    e->path = pc_xstrdup(path);
    const char *slash = strrchr(e->path, '/');
    e->base = slash ? (char *)slash + 1 : e->path;
    e->ids = ids;
}

/* elf_files, each indexed by its GNU and Go build ids and htlhash (a directory: the ELF files in
 * it, not recursively), once at start. */
static void read_elves(sym_state *st, const char *id)
{
    const pc_strlist *l = &st->cfg->elf_files;
    for (size_t i = 0; i < l->n; i++) {
        struct stat sb;
        DIR *dir = stat(l->v[i], &sb) == 0 && S_ISDIR(sb.st_mode) ? opendir(l->v[i]) : NULL;
        if (!dir) {
            add_elf(st, l->v[i], id, false);
            continue;
        }
        struct dirent *de;
        char p[4096];
        while ((de = readdir(dir)) != NULL && st->n_elves < MAX_ELVES) {
            if (de->d_name[0] == '.') continue;
            snprintf(p, sizeof p, "%s/%s", l->v[i], de->d_name);
            if (stat(p, &sb) == 0 && S_ISREG(sb.st_mode)) add_elf(st, p, id, true);
        }
        closedir(dir);
    }
}

static void register_metrics(pc_component *c, sym_state *st)
{
    pc_proc_metric(c, "profcol_processor_symbolizer_locations_resolved",
                   "Locations given function, file and line", &st->total.resolved);
    pc_proc_metric(c, "profcol_processor_symbolizer_cache_hits",
                   "Locations answered from the resolved-address cache", &st->total.cache_hits);
    pc_proc_metric(c, "profcol_processor_symbolizer_cache_misses",
                   "Locations looked up in a debug file", &st->total.cache_misses);
    char labels[300], with[400];
    pc_proc_labels(c, labels, sizeof labels);
    for (int r = 1; r < SYM_N_REASONS; r++) {
        snprintf(with, sizeof with, "%s,reason=\"%s\"", labels, reason_names[r]);
        pc_metric_u64(c, "profcol_processor_symbolizer_locations_unresolved",
                      "Locations left without a function, by reason", PC_METRIC_COUNTER, with,
                      &st->total.unresolved[r]);
    }
    pc_metric_u64(c, "profcol_processor_symbolizer_open_files", "Debug files open", PC_METRIC_GAUGE,
                  labels, &st->open_files);
    pc_metric_u64(c, "profcol_processor_symbolizer_cached_locations",
                  "Resolved (build id, address) pairs in the cache (at most cache_size)",
                  PC_METRIC_GAUGE, labels, &st->cached);
    if (!st->fetch) return;
    const struct {
        const char *name, *help;
        const uint64_t *v;
        bool gauge;
    } m[] = {
        {"fetches", "debuginfod requests (one server, one build id)", &st->fetched.fetches, false},
        {"fetches_found", "debuginfod requests that brought a debug file", &st->fetched.found,
         false},
        {"fetches_not_found", "debuginfod requests answered not found", &st->fetched.not_found,
         false},
        {"fetches_too_large", "debuginfod answers refused for a size above debuginfod.max_size",
         &st->fetched.too_large, false},
        {"fetch_errors", "debuginfod requests failed (no answer, timeout, breaker)",
         &st->fetched.errors, false},
        {"fetched_bytes", "Bytes of debug files fetched", &st->fetched.bytes, false},
        {"breakers_open", "debuginfod servers whose circuit breaker is open",
         &st->fetched.breaker_open, true},
    };
    pc_metric_histogram(c, "profcol_processor_symbolizer_fetch_duration_seconds",
                        "Time of debuginfod requests (one server, one build id)", labels,
                        &st->fetched.latency);
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        char name[128];
        snprintf(name, sizeof name, "profcol_processor_symbolizer_%s", m[i].name);
        pc_metric_u64(c, name, m[i].help, m[i].gauge ? PC_METRIC_GAUGE : PC_METRIC_COUNTER, labels,
                      m[i].v);
    }
}

static int symbolizer_create(pc_component *c, pc_error *err)
{
    const symbolizer_cfg *cfg = c->cfg;
    sym_fetch *fetch = NULL;
    int rc = sym_fetch_new(&cfg->fetch, c->id, &fetch, err);
    if (rc) return rc;
    sym_state *st = pc_xcalloc(1, sizeof *st);
    st->cfg = c->cfg;
    pthread_mutex_init(&st->mu, NULL);
    st->results = sym_lru_new((size_t)st->cfg->cache_size, frames_release);
    st->files = sym_lru_new((size_t)st->cfg->max_open_files, sym_elf_close);
    read_elves(st, c->id);
    st->fetch = fetch;
    c->priv = st;
    register_metrics(c, st);
    return 0;
}

static void symbolizer_destroy(pc_component *c)
{
    if (!c->priv) return;
    state_free(c->priv);
}

/* What a mapping says about its binary: clean build ids, or only a file name. key names the
 * binary in both caches: the GNU build id, else the htlhash, else the Go build id, else the
 * file name. */
typedef struct map_info {
    sym_ids ids;
    char key[1100];
    bool has_id, bad_id;
    const char *name;
    sym_mapping m;
} map_info;

/* ---- finding the file ------------------------------------------------------------------- */

static bool is_file(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* Debug file and executable for a build id from the local sources (either may stay NULL). */
/* Debug file and executable for a GNU build id from the local sources (either may stay NULL). */
static void local_by_id(const sym_state *st, const char *id, char **dbg, char **exe)
{
    const pc_strlist *dirs = &st->cfg->debug_dirs;
    char p[4096];
    for (size_t i = 0; i < dirs->n && (!*dbg || !*exe); i++) {
        snprintf(p, sizeof p, "%s/.build-id/%.2s/%s.debug", dirs->v[i], id, id + 2);
        if (!*dbg && is_file(p)) *dbg = pc_xstrdup(p);
        snprintf(p, sizeof p, "%s/.build-id/%.2s/%s", dirs->v[i], id, id + 2);
        if (!*exe && is_file(p)) *exe = pc_xstrdup(p);
    }
    for (size_t i = 0; i < st->n_elves && !*exe; i++)
        if (strcmp(st->elves[i].ids.gnu, id) == 0) *exe = pc_xstrdup(st->elves[i].path);
}

/* The elf_files entry with the mapping's htlhash or Go build id, or NULL. */
static const elf_entry *local_by_other(const sym_state *st, const sym_ids *ids)
{
    for (size_t i = 0; i < st->n_elves; i++) {
        const sym_ids *e = &st->elves[i].ids;
        if ((ids->htl[0] && strcmp(e->htl, ids->htl) == 0) ||
            (ids->go[0] && strcmp(e->go, ids->go) == 0))
            return &st->elves[i];
    }
    return NULL;
}

static void local_by_name(const sym_state *st, const char *name, char **exe)
{
    const char *slash = strrchr(name, '/');
    const char *base = slash ? slash + 1 : name;
    for (size_t i = 0; i < st->n_elves && !*exe; i++)
        if (strcmp(st->elves[i].path, name) == 0 || strcmp(st->elves[i].base, base) == 0)
            *exe = pc_xstrdup(st->elves[i].path);
}

/* The open object for a mapping (lock held): from the cache or opened now. By GNU build id,
 * else by htlhash or Go build id (then the debug file of the file's own GNU build id, if the
 * debug_dirs have it), else, with no id at all, by file name. */
static sym_elf *elf_for(sym_state *st, const map_info *mi, sym_reason *why)
{
    sym_elf *e = sym_lru_get(st->files, mi->key, strlen(mi->key));
    if (e) return e;
    char *dbg = NULL, *exe = NULL;
    const sym_ids *ids = &mi->ids;
    if (ids->gnu[0]) local_by_id(st, ids->gnu, &dbg, &exe);
    const elf_entry *other = !dbg && !exe ? local_by_other(st, ids) : NULL;
    if (other) {
        exe = pc_xstrdup(other->path);
        if (other->ids.gnu[0]) {
            char *unused = NULL;
            local_by_id(st, other->ids.gnu, &dbg, &unused);
            free(unused);
        }
    }
    if (!mi->has_id) local_by_name(st, mi->name, &exe);
    *why = SYM_NO_FILE;
    if (dbg || exe) e = sym_elf_open(dbg ? dbg : exe, exe, why);
    free(dbg);
    free(exe);
    if (e) sym_lru_put(st->files, mi->key, strlen(mi->key), e);
    return e;
}

/* ---- one location ----------------------------------------------------------------------- */

typedef struct sym_job {
    pc_proc_job j;
    sym_counts n;
} sym_job;

/* One build-id attribute into mi (hostile values are dropped and remembered). */
static void map_id(map_info *mi, const char *key, const char *v)
{
    bool ok;
    if (strcmp(key, "process.executable.build_id.gnu") == 0)
        ok = sym_clean_hex(v, mi->ids.gnu, sizeof mi->ids.gnu);
    else if (strcmp(key, "process.executable.build_id.htlhash") == 0)
        ok = strlen(v) == SYM_HTL_LEN && sym_clean_hex(v, mi->ids.htl, sizeof mi->ids.htl);
    else if (strcmp(key, "process.executable.build_id.go") == 0)
        ok = sym_clean_go_id(v, mi->ids.go, sizeof mi->ids.go);
    else
        return;
    mi->bad_id |= !ok;
}

static void map_info_read(const pc_dictionary *d, const pc_mapping *pm, map_info *mi)
{
    memset(mi, 0, sizeof *mi);
    mi->name = pc_dict_str(d, pm->filename_strindex);
    mi->m = (sym_mapping){pm->memory_start, pm->memory_limit, pm->file_offset};
    for (size_t i = 0; i < pm->n_attribute_indices; i++) {
        const pc_kvu *a = pc_dict_attr_at(d, pm->attribute_indices[i]);
        const char *v = a ? pc_anyvalue_str(d, a->value) : NULL;
        if (v && v[0]) map_id(mi, pc_dict_str(d, a->key_strindex), v);
    }
    const sym_ids *ids = &mi->ids;
    mi->has_id = ids->gnu[0] || ids->htl[0] || ids->go[0];
    if (mi->has_id) mi->bad_id = false; /* one good id is enough */
    if (ids->gnu[0])
        snprintf(mi->key, sizeof mi->key, "b:%s", ids->gnu);
    else if (ids->htl[0])
        snprintf(mi->key, sizeof mi->key, "h:%s", ids->htl);
    else if (ids->go[0])
        snprintf(mi->key, sizeof mi->key, "g:%s", ids->go);
    else
        snprintf(mi->key, sizeof mi->key, "f:%.1000s", mi->name);
}

/* The debug file of a build id no local source has, from debuginfod (lock held, released while
 * the fetcher is asked: other jobs go on meanwhile). */
static sym_elf *fetched(sym_state *st, const char *id, uint64_t deadline, sym_reason *why)
{
    pthread_mutex_unlock(&st->mu);
    char *exe = NULL;
    char *path = sym_fetch_get(st->fetch, id, deadline, &exe, why);
    pthread_mutex_lock(&st->mu);
    if (!path) return NULL;
    char key[600];
    snprintf(key, sizeof key, "b:%s", id);
    /* another job may have opened it meanwhile (putting it again would free it) */
    sym_elf *e = sym_lru_get(st->files, key, strlen(key));
    if (!e && (e = sym_elf_open(path, exe, why))) sym_lru_put(st->files, key, strlen(key), e);
    free(path);
    free(exe);
    return e;
}

/* The frames at one address (lock held): a copy the caller frees, or NULL with *why. */
static sym_frames *lookup(sym_state *st, const map_info *mi, uint64_t addr, uint64_t deadline,
                          sym_counts *n, sym_reason *why)
{
    struct {
        uint64_t start, offset, addr;
        char id[1100];
    } key;
    memset(&key, 0, sizeof key);
    key.start = mi->m.start, key.offset = mi->m.file_offset, key.addr = addr;
    snprintf(key.id, sizeof key.id, "%s", mi->key);
    size_t klen = offsetof(__typeof__(key), id) + strlen(key.id);
    sym_frames *hit = sym_lru_get(st->results, &key, klen);
    if (hit) {
        n->cache_hits++;
        *why = SYM_NO_SYMBOL;
        return hit->n ? sym_frames_dup(hit) : NULL;
    }
    n->cache_misses++;
    sym_elf *e = elf_for(st, mi, why);
    /* debuginfod knows GNU build ids only (docs/symbolization.md) */
    if (!e && mi->ids.gnu[0] && st->fetch && *why == SYM_NO_FILE)
        e = fetched(st, mi->ids.gnu, deadline, why);
    if (!e) return NULL;
    uint64_t vaddr;
    sym_frames fr = {0};
    if ((*why = sym_elf_normalize(e, &mi->m, addr, &vaddr)) != SYM_OK) return NULL;
    *why = sym_elf_resolve(e, vaddr, &fr);
    sym_frames *kept = sym_frames_dup(&fr);
    sym_lru_put(st->results, &key, klen, kept); /* an address with no symbol is kept too */
    sym_frames_free(&fr);
    return kept->n ? sym_frames_dup(kept) : NULL;
}

static int32_t intern_or_zero(pc_dict_builder *db, const char *s)
{
    return s ? pc_dict_cstring(db, s) : 0;
}

static void write_lines(pc_dict_builder *db, pc_location *loc, const sym_frames *fr)
{
    pc_arena *a = pc_dict_builder_arena(db);
    pc_line **lines = pc_arena_alloc(a, fr->n * sizeof *lines);
    for (size_t i = 0; i < fr->n; i++) {
        const sym_frame *f = &fr->f[i];
        int32_t name = intern_or_zero(db, f->name);
        int32_t sys = intern_or_zero(db, f->system_name);
        int32_t file = intern_or_zero(db, f->file);
        pc_line *l = pc_arena_alloc(a, sizeof *l);
        opentelemetry__proto__profiles__v1development__line__init(l);
        l->function_index = pc_dict_function(db, name, sys, file, f->start_line);
        l->line = f->line;
        l->column = f->column;
        lines[i] = l;
    }
    loc->lines = lines;
    loc->n_lines = fr->n;
}

static void write_fallback(pc_dict_builder *db, pc_location *loc, const map_info *mi)
{
    const char *slash = strrchr(mi->name, '/');
    const char *base = mi->name[0] ? (slash ? slash + 1 : mi->name) : "unknown";
    uint64_t off = loc->address - mi->m.start + mi->m.file_offset;
    char name[600];
    snprintf(name, sizeof name, "%s+0x%" PRIx64, base, off);
    sym_frame f = {.name = name, .system_name = name};
    sym_frames fr = {.n = 1, .f = &f};
    write_lines(db, loc, &fr);
}

/* Whether loc is a native frame still without a function. */
static bool wants_symbols(const pc_dictionary *d, const pc_location *loc)
{
    if (!loc || !loc->address || loc->mapping_index <= 0 ||
        (size_t)loc->mapping_index >= d->n_mapping_table || !d->mapping_table[loc->mapping_index])
        return false;
    for (size_t i = 0; i < loc->n_lines; i++)
        if (loc->lines[i] && loc->lines[i]->function_index > 0) return false;
    for (size_t i = 0; i < loc->n_attribute_indices; i++) {
        const pc_kvu *a = pc_dict_attr_at(d, loc->attribute_indices[i]);
        if (!a || strcmp(pc_dict_str(d, a->key_strindex), "profile.frame.type")) continue;
        const char *v = pc_anyvalue_str(d, a->value);
        if (v && strcmp(v, "native") != 0) return false;
    }
    return true;
}

static void symbolize_location(sym_state *st, pc_dict_builder *db, const pc_dictionary *d,
                               pc_location *loc, uint64_t deadline, sym_counts *n)
{
    map_info mi;
    map_info_read(d, d->mapping_table[loc->mapping_index], &mi);
    sym_reason why = SYM_NO_FILE;
    sym_frames *fr = NULL;
    if (mi.bad_id) {
        why = SYM_BAD_ID;
    } else if (mi.has_id || mi.name[0]) {
        pthread_mutex_lock(&st->mu);
        fr = lookup(st, &mi, loc->address, deadline, n, &why);
        pthread_mutex_unlock(&st->mu);
    }
    if (fr) {
        write_lines(db, loc, fr);
        frames_release(fr);
        n->resolved++;
        return;
    }
    n->unresolved[why]++;
    if (st->cfg->fallback_name) write_fallback(db, loc, &mi);
}

static void symbolizer_run(pc_proc_job *pj)
{
    sym_job *job = (sym_job *)pj;
    sym_state *st = pj->c->priv;
    const pc_dictionary *d = pc_batch_req(pj->b) ? pc_batch_req(pj->b)->dictionary : NULL;
    size_t want = 0;
    for (size_t i = 1; d && i < d->n_location_table; i++)
        want += wants_symbols(d, d->location_table[i]);
    if (!want) return;
    pc_batch_make_writable(&pj->b);
    d = pc_batch_req(pj->b)->dictionary;
    pc_dict_builder *db = pc_dict_builder_from(pj->b->arena, d);
    /* one wait for the whole batch, however many build ids are being fetched */
    uint64_t deadline = sym_now_ms() + st->cfg->fetch.wait_ms;
    for (size_t i = 1; i < d->n_location_table; i++)
        if (wants_symbols(d, d->location_table[i]))
            symbolize_location(st, db, d, d->location_table[i], deadline, &job->n);
    pc_batch_req(pj->b)->dictionary = pc_dict_builder_finish(db);
    pc_dict_builder_free(db);
}

static void symbolizer_after(pc_proc_job *pj)
{
    sym_job *job = (sym_job *)pj;
    sym_state *st = pj->c->priv;
    st->batches++;
    st->total.resolved += job->n.resolved;
    st->total.cache_hits += job->n.cache_hits;
    st->total.cache_misses += job->n.cache_misses;
    for (int r = 0; r < SYM_N_REASONS; r++)
        st->total.unresolved[r] += job->n.unresolved[r];
    pthread_mutex_lock(&st->mu);
    st->open_files = sym_lru_size(st->files);
    st->cached = sym_lru_size(st->results);
    pthread_mutex_unlock(&st->mu);
    if (st->fetch) sym_fetch_stats_get(st->fetch, &st->fetched);
}

static void symbolizer_consume(pc_component *c, pc_batch *b, pc_done_fn done, void *arg)
{
    sym_state *st = c->priv;
    sym_job *job = pc_xcalloc(1, sizeof *job);
    job->j = (pc_proc_job){.c = c,
                           .core = &st->core,
                           .b = b,
                           .done = done,
                           .arg = arg,
                           .run = symbolizer_run,
                           .after = symbolizer_after};
    pc_proc_job_submit(&job->j);
}

static void symbolizer_shutdown(pc_component *c, pc_shutdown_done done)
{
    sym_state *st = c->priv;
    if (!st) {
        done(c);
        return;
    }
    PC_DEBUG(c->id, "%" PRIu64 " batches, %" PRIu64 " locations resolved", st->batches,
             st->total.resolved);
    pc_proc_core_shutdown(&st->core, c, done);
}

const pc_component_type pc_processor_symbolizer = {
    .name = "symbolizer",
    .kind = PC_KIND_PROCESSOR,
    .stability = "development",
    .cfg_size = sizeof(symbolizer_cfg),
    .cfg = symbolizer_keys,
    .validate = symbolizer_validate,
    .create = symbolizer_create,
    .consume = symbolizer_consume,
    .shutdown = symbolizer_shutdown,
    .destroy = symbolizer_destroy,
    .mutates = true,
    .doc = "names native frames (function, file, line, inline chain) from debug files found by "
           "build id locally or on debuginfod servers",
};
