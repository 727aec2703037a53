/* The profilez aggregate (agg.h): series of time slices of stacks, a stack budget per series. */
#include "extensions/profilez/agg.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/hash.h"
#include "pdata/summary.h"

#define ARR_N(arr, n) ((arr) ? (n) : 0)
/* Frames walked per batch at most (as the debug exporter's summary): a hostile batch of deep
 * stacks cannot make aggregation run away; the profiles after it are dropped and counted. */
#define PZ_MAX_FRAMES_PER_BATCH ((size_t)1 << 25)

static int64_t sat_add(int64_t a, int64_t b)
{
    if (b > 0 && a > INT64_MAX - b) return INT64_MAX;
    if (b < 0 && a < INT64_MIN - b) return INT64_MIN;
    return a + b;
}

/* The names, stacks and trees below hash with the process's seeded hash (base/hash.h): frames and
 * stacks are the clients', and a fixed hash would let a client fill one probe run. */

/* ---- interned frame names, reference counted ---- */

typedef struct name_ent {
    char *s; /* NULL: dead (its slot in the hash table is a tombstone until the next rebuild) */
    uint64_t hash;
    uint32_t refs;
    bool free_listed;
} name_ent;

typedef struct names {
    name_ent *v;
    size_t n, cap;
    uint32_t *slots; /* id + 1, 0 = empty */
    size_t nslots, used_slots;
    size_t live, dead;
    uint32_t *freeids;
    size_t nfree, capfree;
} names;

static void names_rebuild(names *nm, size_t nslots)
{
    free(nm->slots);
    nm->slots = pc_xcalloc(nslots, sizeof *nm->slots);
    nm->nslots = nslots;
    nm->used_slots = 0;
    for (size_t id = 0; id < nm->n; id++) {
        name_ent *e = &nm->v[id];
        if (!e->s) {
            if (!e->free_listed) {
                if (nm->nfree == nm->capfree) {
                    nm->capfree = nm->capfree ? nm->capfree * 2 : 64;
                    nm->freeids = pc_xrealloc(nm->freeids, nm->capfree * sizeof *nm->freeids);
                }
                nm->freeids[nm->nfree++] = (uint32_t)id;
                e->free_listed = true;
            }
            continue;
        }
        size_t j = (size_t)e->hash & (nslots - 1);
        while (nm->slots[j])
            j = (j + 1) & (nslots - 1);
        nm->slots[j] = (uint32_t)id + 1;
        nm->used_slots++;
    }
    nm->dead = 0;
}

/* How much of s a name keeps: PZ_MAX_NAME bytes at most, cut on a UTF-8 boundary. */
static size_t name_len(const char *s)
{
    size_t len = strlen(s);
    if (len > PZ_MAX_NAME) {
        len = PZ_MAX_NAME;
        while (len > 0 && ((unsigned char)s[len] & 0xC0) == 0x80)
            len--;
    }
    return len;
}

/* s as a name keeps it, in out (PZ_MAX_NAME + 1 bytes). */
static const char *name_cut(const char *s, char *out)
{
    size_t len = name_len(s);
    memcpy(out, s, len);
    out[len] = 0;
    return out;
}

/* The id of s (cut as name_len says) with one more reference. */
static uint32_t name_ref(names *nm, const char *s)
{
    size_t len = name_len(s);
    uint64_t h = pc_hash_mem(s, len);
    if ((nm->used_slots + 1) * 10 > nm->nslots * 7) {
        size_t ns = nm->nslots ? nm->nslots : 256;
        while ((nm->live + 1) * 10 > ns * 5)
            ns *= 2;
        names_rebuild(nm, ns);
    }
    size_t j = (size_t)h & (nm->nslots - 1);
    while (nm->slots[j]) {
        name_ent *e = &nm->v[nm->slots[j] - 1];
        if (e->s && e->hash == h && strncmp(e->s, s, len) == 0 && e->s[len] == 0) {
            e->refs++;
            return nm->slots[j] - 1;
        }
        j = (j + 1) & (nm->nslots - 1);
    }
    uint32_t id;
    if (nm->nfree) {
        id = nm->freeids[--nm->nfree];
    } else {
        if (nm->n == nm->cap) {
            nm->cap = nm->cap ? nm->cap * 2 : 256;
            nm->v = pc_xrealloc(nm->v, nm->cap * sizeof *nm->v);
        }
        id = (uint32_t)nm->n++;
    }
    name_ent *e = &nm->v[id];
    e->s = pc_xmalloc(len + 1);
    memcpy(e->s, s, len);
    e->s[len] = 0;
    e->hash = h;
    e->refs = 1;
    e->free_listed = false;
    nm->slots[j] = id + 1;
    nm->used_slots++;
    nm->live++;
    return id;
}

static void name_unref(names *nm, uint32_t id)
{
    name_ent *e = &nm->v[id];
    if (--e->refs) return;
    free(e->s);
    e->s = NULL;
    nm->live--;
    nm->dead++;
    if (nm->dead > 64 && nm->dead > nm->live) {
        size_t ns = 256;
        while ((nm->live + 1) * 10 > ns * 5)
            ns *= 2;
        names_rebuild(nm, ns);
    }
}

static void names_free(names *nm)
{
    for (size_t i = 0; i < nm->n; i++)
        free(nm->v[i].s);
    free(nm->v);
    free(nm->slots);
    free(nm->freeids);
}

/* ---- stacks, slices, series ---- */

typedef struct stk {
    uint32_t *frames; /* leaf first; NULL = empty slot (a stack of no frames has frames != NULL) */
    uint32_t n;
    bool over; /* the slice's "[over budget]" entry: not counted in the budget */
    uint64_t hash;
    int64_t value;
    uint64_t samples;
} stk;

typedef struct slice {
    uint64_t slot; /* now_ms / slice_ms when it was filled */
    bool used;
    stk *tab;
    size_t cap, n;  /* n: entries, the over entry included */
    size_t counted; /* entries counted in the budget */
} slice;

typedef struct series {
    char *service, *type, *unit, *key; /* key: "type:unit" */
    slice *sl;
    size_t n_stacks;
    uint64_t last_ms;
    uint64_t evicted, over_samples;
} series;

struct pz_agg {
    pz_limits l;
    uint64_t slice_ms;
    names nm;
    series **ser;
    size_t n_ser;
    pz_stats st;
    uint32_t id_over, id_trunc;
};

static uint64_t stack_hash(const uint32_t *f, size_t n, bool over)
{
    pc_hash h;
    pc_hash_begin(&h);
    pc_hash_word(&h, over);
    pc_hash_bytes(&h, f, n * sizeof *f);
    return pc_hash_end(&h);
}

static void slice_clear(pz_agg *a, series *se, slice *sl)
{
    for (size_t i = 0; i < sl->cap; i++) {
        stk *e = &sl->tab[i];
        if (!e->frames) continue;
        for (uint32_t k = 0; k < e->n; k++)
            name_unref(&a->nm, e->frames[k]);
        free(e->frames);
    }
    free(sl->tab);
    se->n_stacks -= sl->counted;
    a->st.stacks -= sl->counted;
    *sl = (slice){0};
}

/* Clear the slices that left the window ending at slot now. */
static void series_expire(pz_agg *a, series *se, uint64_t now)
{
    for (unsigned i = 0; i < a->l.slices; i++) {
        slice *sl = &se->sl[i];
        if (sl->used && sl->slot + a->l.slices <= now) slice_clear(a, se, sl);
    }
}

/* Drop the oldest slice but the current one: false when there is none left. */
static bool evict_oldest(pz_agg *a, series *se, uint64_t now)
{
    slice *old = NULL;
    for (unsigned i = 0; i < a->l.slices; i++) {
        slice *sl = &se->sl[i];
        if (sl->used && sl->slot != now && (!old || sl->slot < old->slot)) old = sl;
    }
    if (!old) return false;
    se->evicted += old->counted;
    a->st.evicted_stacks += old->counted;
    slice_clear(a, se, old);
    return true;
}

static slice *current_slice(pz_agg *a, series *se, uint64_t now)
{
    slice *sl = &se->sl[now % a->l.slices];
    if (sl->used && sl->slot != now) slice_clear(a, se, sl); /* older: expired */
    sl->used = true;
    sl->slot = now;
    return sl;
}

static stk *slice_find(slice *sl, const uint32_t *f, size_t n, bool over, uint64_t h)
{
    if (!sl->cap) return NULL;
    size_t j = (size_t)h & (sl->cap - 1);
    while (sl->tab[j].frames) {
        stk *e = &sl->tab[j];
        if (e->hash == h && e->over == over && e->n == n && !memcmp(e->frames, f, n * sizeof *f))
            return e;
        j = (j + 1) & (sl->cap - 1);
    }
    return NULL;
}

static stk *slice_insert(pz_agg *a, slice *sl, const uint32_t *f, size_t n, bool over, uint64_t h)
{
    if ((sl->n + 1) * 10 > sl->cap * 7) {
        size_t ncap = sl->cap ? sl->cap * 2 : 64;
        stk *nt = pc_xcalloc(ncap, sizeof *nt);
        for (size_t i = 0; i < sl->cap; i++) {
            if (!sl->tab[i].frames) continue;
            size_t j = (size_t)sl->tab[i].hash & (ncap - 1);
            while (nt[j].frames)
                j = (j + 1) & (ncap - 1);
            nt[j] = sl->tab[i];
        }
        free(sl->tab);
        sl->tab = nt;
        sl->cap = ncap;
    }
    size_t j = (size_t)h & (sl->cap - 1);
    while (sl->tab[j].frames)
        j = (j + 1) & (sl->cap - 1);
    stk *e = &sl->tab[j];
    e->frames = pc_xmalloc((n ? n : 1) * sizeof *f);
    memcpy(e->frames, f, n * sizeof *f);
    for (size_t k = 0; k < n; k++)
        a->nm.v[f[k]].refs++;
    e->n = (uint32_t)n;
    e->over = over;
    e->hash = h;
    sl->n++;
    return e;
}

static void series_free(pz_agg *a, series *se)
{
    for (unsigned i = 0; i < a->l.slices; i++)
        slice_clear(a, se, &se->sl[i]);
    free(se->sl);
    free(se->service);
    free(se->type);
    free(se->unit);
    free(se->key);
    free(se);
}

static bool series_empty(const pz_agg *a, const series *se)
{
    for (unsigned i = 0; i < a->l.slices; i++)
        if (se->sl[i].used && se->sl[i].n) return false;
    return true;
}

void pz_agg_advance(pz_agg *a, uint64_t now_ms)
{
    uint64_t now = now_ms / a->slice_ms;
    size_t keep = 0;
    for (size_t i = 0; i < a->n_ser; i++) {
        series *se = a->ser[i];
        series_expire(a, se, now);
        if (series_empty(a, se)) {
            series_free(a, se);
            continue;
        }
        a->ser[keep++] = se;
    }
    a->n_ser = keep;
    a->st.series = keep;
}

static series *series_find(pz_agg *a, const char *service, const char *type, const char *unit)
{
    for (size_t i = 0; i < a->n_ser; i++) {
        series *se = a->ser[i];
        if (!strcmp(se->service, service) && !strcmp(se->type, type) && !strcmp(se->unit, unit))
            return se;
    }
    return NULL;
}

/* Service, type and unit are cut as frame names are (issue 28: a 4 MB service name made every
 * /api/series answer 4 MB per series). */
static series *series_get(pz_agg *a, const char *service_in, const char *type_in,
                          const char *unit_in, uint64_t now_ms)
{
    char sbuf[PZ_MAX_NAME + 1], tbuf[PZ_MAX_NAME + 1], ubuf[PZ_MAX_NAME + 1];
    const char *service = name_cut(service_in, sbuf), *type = name_cut(type_in, tbuf),
               *unit = name_cut(unit_in, ubuf);
    series *se = series_find(a, service, type, unit);
    if (se) return se;
    if (a->n_ser >= a->l.max_series) pz_agg_advance(a, now_ms); /* room from expired series? */
    if (a->n_ser >= a->l.max_series) return NULL;
    se = pc_xcalloc(1, sizeof *se);
    se->service = pc_xstrdup(service);
    se->type = pc_xstrdup(type);
    se->unit = pc_xstrdup(unit);
    size_t kl = strlen(type) + strlen(unit) + 2;
    se->key = pc_xmalloc(kl);
    snprintf(se->key, kl, "%s:%s", type, unit);
    se->sl = pc_xcalloc(a->l.slices, sizeof *se->sl);
    se->last_ms = now_ms;
    a->ser = pc_xrealloc(a->ser, (a->n_ser + 1) * sizeof *a->ser);
    a->ser[a->n_ser++] = se;
    a->st.series = a->n_ser;
    return se;
}

/* The slice of se that takes data at now_ms, after expiring what left the window. */
static slice *slice_now(pz_agg *a, series *se, uint64_t now_ms)
{
    uint64_t now = now_ms / a->slice_ms;
    series_expire(a, se, now);
    return current_slice(a, se, now);
}

/* One stack of interned frames (the caller holds its own references) into sl, se's current
 * slice at now_ms. */
static void add_ids(pz_agg *a, series *se, slice *sl, const uint32_t *f, size_t n, int64_t value,
                    uint64_t samples, uint64_t now_ms)
{
    uint64_t h = stack_hash(f, n, false);
    stk *e = slice_find(sl, f, n, false, h);
    if (!e) {
        /* the budget: room for a new stack is made by dropping the oldest slices first */
        while (se->n_stacks >= a->l.max_stacks && evict_oldest(a, se, sl->slot))
            ;
        if (se->n_stacks < a->l.max_stacks) {
            e = slice_insert(a, sl, f, n, false, h);
            sl->counted++;
            se->n_stacks++;
            a->st.stacks++;
        } else {
            uint64_t ho = stack_hash(&a->id_over, 1, true);
            e = slice_find(sl, &a->id_over, 1, true, ho);
            if (!e) e = slice_insert(a, sl, &a->id_over, 1, true, ho);
            se->over_samples += samples;
            a->st.over_budget_samples += samples;
        }
    }
    e->value = sat_add(e->value, value);
    e->samples += samples;
    se->last_ms = now_ms;
    a->st.samples += samples;
}

int pz_agg_add_stack(pz_agg *a, const char *service, const char *type, const char *unit,
                     const char *const *frames, size_t n, int64_t value, uint64_t samples,
                     uint64_t now_ms)
{
    series *se = series_get(a, service, type, unit, now_ms);
    if (!se) return PC_E2BIG;
    size_t m = n < PZ_MAX_DEPTH ? n : PZ_MAX_DEPTH;
    uint32_t *ids = pc_xmalloc((m ? m : 1) * sizeof *ids);
    for (size_t i = 0; i < m; i++)
        ids[i] = name_ref(&a->nm, i == PZ_MAX_DEPTH - 1 && n > m ? "[truncated]" : frames[i]);
    add_ids(a, se, slice_now(a, se, now_ms), ids, m, value, samples, now_ms);
    for (size_t i = 0; i < m; i++)
        name_unref(&a->nm, ids[i]);
    free(ids);
    return 0;
}

/* ---- a batch ---- */

/* Each location of the batch's dictionary is named once (pc_location_frames, the debug
 * exporter's naming), its frames interned and held until the batch is done. */
typedef struct batch_ctx {
    pz_agg *a;
    const pc_dictionary *d;
    size_t nloc;         /* locations: slot nloc is for an index out of range */
    uint32_t *off, *cnt; /* a location's frames: ids[off .. off + cnt) */
    bool *named;
    uint32_t *ids; /* one reference each */
    size_t nids, capids;
    uint32_t stack[PZ_MAX_DEPTH];
    size_t budget; /* frames this batch may still add */
} batch_ctx;

static void cache_visit(void *arg, const char *name, bool stable)
{
    (void)stable; /* interned: copied */
    batch_ctx *c = arg;
    if (c->nids == c->capids) {
        c->capids = c->capids ? c->capids * 2 : 1024;
        c->ids = pc_xrealloc(c->ids, c->capids * sizeof *c->ids);
    }
    c->ids[c->nids++] = name_ref(&c->a->nm, name);
}

static void location(batch_ctx *c, int32_t li, uint32_t *off, uint32_t *cnt)
{
    size_t slot = li > 0 && (size_t)li < c->nloc ? (size_t)li : c->nloc;
    if (!c->named[slot]) {
        size_t unlimited = SIZE_MAX;
        c->off[slot] = (uint32_t)c->nids;
        pc_location_frames(c->d, li, &unlimited, cache_visit, c);
        c->cnt[slot] = (uint32_t)(c->nids - c->off[slot]);
        c->named[slot] = true;
    }
    *off = c->off[slot];
    *cnt = c->cnt[slot];
}

/* The frames of stack si, leaf first, into c->stack: its PZ_MAX_DEPTH - 1 leaf-most frames
 * under "[truncated]" when deeper. -1 when the batch's frame budget ran out. */
static long stack_of(batch_ctx *c, int32_t si)
{
    const pc_stack *st = c->d->stack_table[si];
    size_t n = 0;
    bool cut = false;
    for (size_t i = 0; i < ARR_N(st->location_indices, st->n_location_indices) && !cut; i++) {
        uint32_t off, cnt;
        location(c, st->location_indices[i], &off, &cnt);
        for (uint32_t k = 0; k < cnt; k++) {
            if (n == PZ_MAX_DEPTH - 1) {
                cut = true;
                break;
            }
            c->stack[n++] = c->ids[off + k];
        }
    }
    if (cut) c->stack[n++] = c->a->id_trunc;
    if (n > c->budget) return -1;
    c->budget -= n;
    return (long)n;
}

typedef struct stack_val {
    int32_t stack;
    int64_t val;
    uint64_t samples;
} stack_val;

static int cmp_stack_val(const void *x, const void *y)
{
    int32_t a = ((const stack_val *)x)->stack, b = ((const stack_val *)y)->stack;
    return (a > b) - (a < b);
}

/* One profile; false when the batch's frame budget ran out. */
static bool add_profile(batch_ctx *c, series *se, const pc_profile *p, uint64_t now_ms)
{
    pz_agg *a = c->a;
    const pc_dictionary *d = c->d;
    size_t ns = ARR_N(p->samples, p->n_samples);
    size_t nstk = d ? ARR_N(d->stack_table, d->n_stack_table) : 0;
    stack_val *sv = pc_xmalloc((ns ? ns : 1) * sizeof *sv);
    size_t m = 0;
    for (size_t i = 0; i < ns; i++) {
        const pc_sample *s = p->samples[i];
        if (!s) continue;
        int32_t si =
            s->stack_index > 0 && (size_t)s->stack_index < nstk && d->stack_table[s->stack_index]
                ? s->stack_index
                : 0; /* no stack: the root's own value */
        sv[m++] = (stack_val){si, pc_sample_value(s), 1};
    }
    if (m > 1) qsort(sv, m, sizeof *sv, cmp_stack_val);
    slice *sl = slice_now(a, se, now_ms);
    bool ok = true;
    for (size_t i = 0; i < m && ok;) {
        size_t j = i;
        int64_t v = 0;
        uint64_t cnt = 0;
        while (j < m && sv[j].stack == sv[i].stack) {
            v = sat_add(v, sv[j].val);
            cnt += sv[j++].samples;
        }
        long n = sv[i].stack ? stack_of(c, sv[i].stack) : 0;
        if (n < 0)
            ok = false;
        else
            add_ids(a, se, sl, c->stack, (size_t)n, v, cnt, now_ms);
        i = j;
    }
    free(sv);
    return ok;
}

void pz_agg_add_batch(pz_agg *a, const pc_batch *b, uint64_t now_ms)
{
    const pc_request *req = b ? b->req : NULL;
    if (!req || b->signal != PC_SIGNAL_PROFILES) return;
    batch_ctx *c = pc_xcalloc(1, sizeof *c);
    c->a = a;
    c->d = req->dictionary;
    c->nloc = c->d ? ARR_N(c->d->location_table, c->d->n_location_table) : 0;
    c->off = pc_xmalloc((c->nloc + 1) * sizeof *c->off);
    c->cnt = pc_xmalloc((c->nloc + 1) * sizeof *c->cnt);
    c->named = pc_xcalloc(c->nloc + 1, sizeof *c->named);
    c->budget = PZ_MAX_FRAMES_PER_BATCH;
    bool ok = true;
    for (size_t ri = 0; ri < ARR_N(req->resource_profiles, req->n_resource_profiles); ri++) {
        const pc_resource_profiles *rp = req->resource_profiles[ri];
        if (!rp) continue;
        const char *service = pc_service_name(c->d, rp->resource);
        for (size_t si = 0; si < ARR_N(rp->scope_profiles, rp->n_scope_profiles); si++) {
            const pc_scope_profiles *sp = rp->scope_profiles[si];
            if (!sp) continue;
            for (size_t pi = 0; pi < ARR_N(sp->profiles, sp->n_profiles); pi++) {
                const pc_profile *p = sp->profiles[pi];
                if (!p) continue;
                const pc_dictionary *d = c->d;
                const char *type =
                    p->sample_type ? pc_dict_str(d, p->sample_type->type_strindex) : "";
                const char *unit =
                    p->sample_type ? pc_dict_str(d, p->sample_type->unit_strindex) : "";
                series *se = ok ? series_get(a, service, *type ? type : "unknown",
                                             *unit ? unit : "unknown", now_ms)
                                : NULL;
                if (!se) {
                    a->st.dropped_profiles++;
                    continue;
                }
                ok = add_profile(c, se, p, now_ms);
                if (ok)
                    a->st.profiles++;
                else
                    a->st.dropped_profiles++;
            }
        }
    }
    for (size_t i = 0; i < c->nids; i++)
        name_unref(&a->nm, c->ids[i]);
    free(c->ids);
    free(c->off);
    free(c->cnt);
    free(c->named);
    free(c);
}

/* ---- life ---- */

pz_agg *pz_agg_new(const pz_limits *l)
{
    pz_agg *a = pc_xcalloc(1, sizeof *a);
    a->l = *l;
    if (a->l.slices == 0) a->l.slices = 1;
    a->slice_ms = a->l.window_ms / a->l.slices;
    if (a->slice_ms == 0) a->slice_ms = 1;
    a->id_over = name_ref(&a->nm, "[over budget]");
    a->id_trunc = name_ref(&a->nm, "[truncated]");
    return a;
}

void pz_agg_free(pz_agg *a)
{
    if (!a) return;
    for (size_t i = 0; i < a->n_ser; i++)
        series_free(a, a->ser[i]);
    free(a->ser);
    names_free(&a->nm);
    free(a);
}

const pz_stats *pz_agg_stats(const pz_agg *a)
{
    return &a->st;
}

void pz_agg_set_dropped_batches(pz_agg *a, uint64_t n)
{
    a->st.dropped_batches = n;
}

/* ---- JSON ---- */

void pz_json_str(pc_buf *out, const char *s)
{
    pc_buf_append(out, "\"", 1);
    const char *run = s;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != 0x7f) continue;
        pc_buf_append(out, run, (size_t)(s - run));
        if (c == '"' || c == '\\')
            pc_buf_printf(out, "\\%c", c);
        else
            pc_buf_printf(out, "\\u%04x", c);
        run = s + 1;
    }
    pc_buf_append(out, run, (size_t)(s - run));
    pc_buf_append(out, "\"", 1);
}

static int cmp_series(const void *x, const void *y)
{
    const series *a = *(series *const *)x, *b = *(series *const *)y;
    int c = strcmp(a->service, b->service);
    return c ? c : strcmp(a->key, b->key);
}

static void series_totals(const pz_agg *a, const series *se, int64_t *total, uint64_t *samples)
{
    *total = 0;
    *samples = 0;
    for (unsigned i = 0; i < a->l.slices; i++) {
        const slice *sl = &se->sl[i];
        for (size_t k = 0; sl->used && k < sl->cap; k++)
            if (sl->tab[k].frames) {
                *total = sat_add(*total, sl->tab[k].value);
                *samples += sl->tab[k].samples;
            }
    }
}

/* Opens a series' object: {"service", "type", ("sample_type",) "unit". */
static void series_id_json(const series *se, bool sample_type, pc_buf *out)
{
    pc_buf_printf(out, "{\"service\":");
    pz_json_str(out, se->service);
    pc_buf_printf(out, ",\"type\":");
    pz_json_str(out, se->key);
    if (sample_type) {
        pc_buf_printf(out, ",\"sample_type\":");
        pz_json_str(out, se->type);
    }
    pc_buf_printf(out, ",\"unit\":");
    pz_json_str(out, se->unit);
}

void pz_agg_series_json(pz_agg *a, uint64_t now_ms, pc_buf *out)
{
    pz_agg_advance(a, now_ms);
    if (a->n_ser > 1) qsort(a->ser, a->n_ser, sizeof *a->ser, cmp_series);
    const pz_stats *st = &a->st;
    pc_buf_printf(
        out,
        "{\"window_ms\":%" PRIu64 ",\"slice_ms\":%" PRIu64
        ",\"slices\":%u,\"max_stacks\":%zu,\"max_series\":%zu,\"stats\":{\"profiles\":%" PRIu64
        ",\"samples\":%" PRIu64 ",\"evicted_stacks\":%" PRIu64 ",\"over_budget_samples\":%" PRIu64
        ",\"dropped_profiles\":%" PRIu64 ",\"dropped_batches\":%" PRIu64 ",\"series\":%" PRIu64
        ",\"stacks\":%" PRIu64 "},\"series\":[",
        a->l.window_ms, a->slice_ms, a->l.slices, a->l.max_stacks, a->l.max_series, st->profiles,
        st->samples, st->evicted_stacks, st->over_budget_samples, st->dropped_profiles,
        st->dropped_batches, st->series, st->stacks);
    for (size_t i = 0; i < a->n_ser; i++) {
        const series *se = a->ser[i];
        int64_t total;
        uint64_t samples;
        series_totals(a, se, &total, &samples);
        if (i) pc_buf_printf(out, ",");
        series_id_json(se, true, out);
        pc_buf_printf(
            out,
            ",\"total\":%" PRId64 ",\"samples\":%" PRIu64 ",\"stacks\":%zu,\"age_ms\":%" PRIu64
            ",\"evicted_stacks\":%" PRIu64 ",\"over_budget_samples\":%" PRIu64 "}",
            total, samples, se->n_stacks, now_ms >= se->last_ms ? now_ms - se->last_ms : 0,
            se->evicted, se->over_samples);
    }
    pc_buf_printf(out, "]}");
}

static series *series_by_key(pz_agg *a, const char *service, const char *type, uint64_t now_ms)
{
    if (!service || !type) return NULL;
    pz_agg_advance(a, now_ms);
    for (size_t i = 0; i < a->n_ser; i++)
        if (!strcmp(a->ser[i]->service, service) && !strcmp(a->ser[i]->key, type)) return a->ser[i];
    return NULL;
}

static void series_head_json(const series *se, int64_t total, pc_buf *out)
{
    series_id_json(se, false, out);
    pc_buf_printf(out, ",\"total\":%" PRId64, total);
}

/* The flame graph: a tree of (parent, name) nodes with total and self values. */
typedef struct fnode {
    uint32_t name, parent;
    int64_t total, self;
    uint32_t first, count; /* children in kids[first .. first + count) once built */
} fnode;

typedef struct ftree {
    fnode *v;
    size_t n, cap;
    uint32_t *slots; /* node index + 1 keyed by (parent, name) */
    size_t nslots;
} ftree;

static uint64_t pair_hash(uint32_t parent, uint32_t name)
{
    return pc_hash_u64(((uint64_t)parent << 32) | name);
}

static void ftree_grow(ftree *t)
{
    size_t ns = t->nslots ? t->nslots * 2 : 1024;
    uint32_t *s = pc_xcalloc(ns, sizeof *s);
    for (size_t i = 1; i < t->n; i++) {
        size_t j = (size_t)pair_hash(t->v[i].parent, t->v[i].name) & (ns - 1);
        while (s[j])
            j = (j + 1) & (ns - 1);
        s[j] = (uint32_t)i + 1;
    }
    free(t->slots);
    t->slots = s;
    t->nslots = ns;
}

static uint32_t ftree_child(ftree *t, uint32_t parent, uint32_t name)
{
    if ((t->n + 1) * 10 > t->nslots * 7) ftree_grow(t);
    size_t j = (size_t)pair_hash(parent, name) & (t->nslots - 1);
    while (t->slots[j]) {
        fnode *c = &t->v[t->slots[j] - 1];
        if (c->parent == parent && c->name == name) return t->slots[j] - 1;
        j = (j + 1) & (t->nslots - 1);
    }
    if (t->n == t->cap) {
        t->cap *= 2;
        t->v = pc_xrealloc(t->v, t->cap * sizeof *t->v);
    }
    t->v[t->n] = (fnode){.name = name, .parent = parent};
    t->slots[j] = (uint32_t)t->n + 1;
    return (uint32_t)t->n++;
}

typedef struct kid_sort {
    const names *nm;
    const fnode *v;
} kid_sort;
static _Thread_local kid_sort g_sort; /* qsort has no argument */

static int cmp_kid(const void *x, const void *y)
{
    const fnode *a = &g_sort.v[*(const uint32_t *)x], *b = &g_sort.v[*(const uint32_t *)y];
    return strcmp(g_sort.nm->v[a->name].s, g_sort.nm->v[b->name].s);
}

/* The call tree of every stack of se's slices, root first (node 0). */
static void tree_build(const pz_agg *a, const series *se, ftree *t)
{
    t->cap = 1024;
    t->v = pc_xmalloc(t->cap * sizeof *t->v);
    t->v[0] = (fnode){0};
    t->n = 1;
    for (unsigned i = 0; i < a->l.slices; i++) {
        const slice *sl = &se->sl[i];
        for (size_t k = 0; sl->used && k < sl->cap; k++) {
            const stk *e = &sl->tab[k];
            if (!e->frames) continue;
            uint32_t node = 0;
            t->v[0].total = sat_add(t->v[0].total, e->value);
            for (uint32_t f = e->n; f-- > 0;) {
                node = ftree_child(t, node, e->frames[f]);
                t->v[node].total = sat_add(t->v[node].total, e->value);
            }
            t->v[node].self = sat_add(t->v[node].self, e->value);
        }
    }
}

/* Children lists, each sorted by name: node i's are kids[first .. first + count). */
static uint32_t *tree_children(pz_agg *a, ftree *t)
{
    uint32_t *kids = pc_xmalloc(t->n * sizeof *kids);
    for (size_t i = 1; i < t->n; i++)
        t->v[t->v[i].parent].count++;
    uint32_t at = 0;
    for (size_t i = 0; i < t->n; i++) {
        t->v[i].first = at;
        at += t->v[i].count;
        t->v[i].count = 0;
    }
    for (size_t i = 1; i < t->n; i++) {
        fnode *p = &t->v[t->v[i].parent];
        kids[p->first + p->count++] = (uint32_t)i;
    }
    g_sort = (kid_sort){&a->nm, t->v};
    for (size_t i = 0; i < t->n; i++)
        if (t->v[i].count > 1) qsort(kids + t->v[i].first, t->v[i].count, sizeof *kids, cmp_kid);
    return kids;
}

/* The nodes in pre-order with an explicit stack into tree, their names into nms (numbered as
 * first used, 0 = "total"); nodes under 1/PZ_PRUNE_DIV of the total are left out, counted. */
static uint64_t tree_emit(const pz_agg *a, const ftree *t, const uint32_t *kids, pc_buf *tree,
                          pc_buf *nms)
{
    int64_t root_total = t->v[0].total;
    double min_total = root_total > 0 ? (double)root_total / PZ_PRUNE_DIV : 0;
    uint32_t *remap = pc_xcalloc(a->nm.n ? a->nm.n : 1, sizeof *remap);
    pc_buf_printf(nms, "\"total\"");
    uint32_t next_name = 1;
    uint64_t pruned = 0;
    typedef struct {
        uint32_t node, next;
    } frame;
    frame *stack = pc_xmalloc((PZ_MAX_DEPTH + 2) * sizeof *stack);
    size_t depth = 0;
    stack[depth++] = (frame){0, 0};
    pc_buf_printf(tree, "[0,%" PRId64 ",%" PRId64 ",0]", t->v[0].total, t->v[0].self);
    while (depth) {
        frame *fr = &stack[depth - 1];
        const fnode *n = &t->v[fr->node];
        if (fr->next == n->count) {
            depth--;
            continue;
        }
        uint32_t c = kids[n->first + fr->next++];
        const fnode *cn = &t->v[c];
        if (root_total > 0 && (double)cn->total < min_total) {
            pruned++;
            continue;
        }
        if (!remap[cn->name]) {
            remap[cn->name] = next_name++;
            pc_buf_printf(nms, ",");
            pz_json_str(nms, a->nm.v[cn->name].s);
        }
        pc_buf_printf(tree, ",[%u,%" PRId64 ",%" PRId64 ",%zu]", remap[cn->name], cn->total,
                      cn->self, depth);
        stack[depth++] = (frame){c, 0};
    }
    free(stack);
    free(remap);
    return pruned;
}

int pz_agg_flamegraph_json(pz_agg *a, const char *service, const char *type, uint64_t now_ms,
                           pc_buf *out)
{
    series *se = series_by_key(a, service, type, now_ms);
    if (!se) return PC_ENOENT;
    ftree t = {0};
    tree_build(a, se, &t);
    uint32_t *kids = tree_children(a, &t);
    pc_buf tree = {0}, nms = {0};
    uint64_t pruned = tree_emit(a, &t, kids, &tree, &nms);
    series_head_json(se, t.v[0].total, out);
    pc_buf_printf(out, ",\"pruned\":%" PRIu64 ",\"names\":[", pruned);
    pc_buf_append(out, nms.data, nms.len);
    pc_buf_printf(out, "],\"nodes\":[");
    pc_buf_append(out, tree.data, tree.len);
    pc_buf_printf(out, "]}");
    pc_buf_free(&tree);
    pc_buf_free(&nms);
    free(kids);
    free(t.v);
    free(t.slots);
    return 0;
}

int pz_agg_top_json(pz_agg *a, const char *service, const char *type, size_t limit, uint64_t now_ms,
                    pc_buf *out)
{
    series *se = series_by_key(a, service, type, now_ms);
    if (!se) return PC_ENOENT;
    pc_top *t = pc_top_new();
    int64_t total = 0;
    for (unsigned i = 0; i < a->l.slices; i++) {
        const slice *sl = &se->sl[i];
        for (size_t k = 0; sl->used && k < sl->cap; k++) {
            const stk *e = &sl->tab[k];
            if (!e->frames) continue;
            total = sat_add(total, e->value);
            pc_top_stack(t, e->value);
            for (uint32_t f = 0; f < e->n; f++)
                pc_top_frame(t, a->nm.v[e->frames[f]].s, true);
        }
    }
    size_t n;
    pc_top_row *rows = pc_top_rows(t, &n);
    series_head_json(se, total, out);
    pc_buf_printf(out, ",\"functions\":%zu,\"rows\":[", n);
    for (size_t i = 0; i < n && i < limit; i++) {
        pc_buf_printf(out, "%s{\"name\":", i ? "," : "");
        pz_json_str(out, rows[i].name);
        pc_buf_printf(out, ",\"flat\":%" PRId64 ",\"cum\":%" PRId64 "}", rows[i].flat, rows[i].cum);
    }
    pc_buf_printf(out, "]}");
    free(rows);
    pc_top_free(t);
    return 0;
}
