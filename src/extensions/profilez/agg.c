/* The profilez aggregate (agg.h): series of time slices of stacks, a stack budget per series. */
#include "extensions/profilez/agg_impl.h"

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

/* The names hash with the process's seeded hash (base/hash.h): frames are the clients', and a
 * fixed hash would let a client fill one probe run. A stack is a vector of name ids the aggregate
 * gave out, hashed by multiply-add-shift: sum of a_i * x_i over its 32-bit words with random
 * 64-bit a_i (derived from the process's key in pz_agg_new), its top bits the slot. For keys a
 * client does not know, two different vectors share a slot with probability about 1 / slots
 * (Dietzfelbinger 1996, "Universal hashing and k-wise independent random variables via integer
 * arithmetic without primes"), at one multiplication a frame where SipHash was a fifth of adding
 * a stack (perf, bench/README.md "The live view's APIs"). The words are the frames, the label set,
 * and the length with the over flag (so that a shorter stack is not a longer one's prefix). */
static uint64_t stack_hash(const pz_agg *a, const uint32_t *f, size_t n, bool over, uint32_t lset)
{
    const uint64_t *k = a->stack_keys;
    uint64_t h = k[0] * ((uint64_t)n << 1 | over) + k[1] * lset;
    for (size_t i = 0; i < n; i++)
        h += k[i + 2] * f[i];
    return h;
}

/* A stack's slot in a table of cap (a power of two, at least 64) slots: the hash's top bits. */
static size_t stk_slot(uint64_t h, size_t cap)
{
    return (size_t)(h >> (64 - __builtin_ctzll(cap)));
}

static void slice_clear(pz_agg *a, series *se, slice *sl)
{
    for (size_t i = 0; i < sl->cap; i++) {
        stk *e = &sl->tab[i];
        if (!e->frames) continue;
        for (uint32_t k = 0; k < e->n; k++)
            pz_name_unref(&a->nm, e->frames[k]);
        pz_lset_unref(a, e->lset);
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

/* A stack is its frames and its label set: the same frames with other labels are another. */
static stk *slice_find(slice *sl, const uint32_t *f, size_t n, bool over, uint32_t lset, uint64_t h)
{
    if (!sl->cap) return NULL;
    size_t j = stk_slot(h, sl->cap);
    while (sl->tab[j].frames) {
        stk *e = &sl->tab[j];
        if (e->hash == h && e->over == over && e->lset == lset && e->n == n &&
            !memcmp(e->frames, f, n * sizeof *f))
            return e;
        j = (j + 1) & (sl->cap - 1);
    }
    return NULL;
}

static stk *slice_insert(pz_agg *a, slice *sl, const uint32_t *f, size_t n, bool over,
                         uint32_t lset, uint64_t h)
{
    if ((sl->n + 1) * 10 > sl->cap * 7) {
        size_t ncap = sl->cap ? sl->cap * 2 : 64;
        stk *nt = pc_xcalloc(ncap, sizeof *nt);
        for (size_t i = 0; i < sl->cap; i++) {
            if (!sl->tab[i].frames) continue;
            size_t j = stk_slot(sl->tab[i].hash, ncap);
            while (nt[j].frames)
                j = (j + 1) & (ncap - 1);
            nt[j] = sl->tab[i];
        }
        free(sl->tab);
        sl->tab = nt;
        sl->cap = ncap;
    }
    size_t j = stk_slot(h, sl->cap);
    while (sl->tab[j].frames)
        j = (j + 1) & (sl->cap - 1);
    stk *e = &sl->tab[j];
    e->frames = pc_xmalloc((n ? n : 1) * sizeof *f);
    memcpy(e->frames, f, n * sizeof *f);
    for (size_t k = 0; k < n; k++)
        a->nm.v[f[k]].refs++;
    e->n = (uint32_t)n;
    e->over = over;
    e->lset = lset;
    pz_lset_retain(a, lset);
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
    const char *service = pz_name_cut(service_in, sbuf), *type = pz_name_cut(type_in, tbuf),
               *unit = pz_name_cut(unit_in, ubuf);
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

/* One stack of interned frames and label set lset (the caller holds its own references) into
 * sl, se's current slice at now_ms. */
static void add_ids(pz_agg *a, series *se, slice *sl, const uint32_t *f, size_t n, uint32_t lset,
                    int64_t value, uint64_t samples, uint64_t now_ms)
{
    uint64_t h = stack_hash(a, f, n, false, lset);
    stk *e = slice_find(sl, f, n, false, lset, h);
    if (!e) {
        /* the budget: room for a new stack is made by dropping the oldest slices first */
        while (se->n_stacks >= a->l.max_stacks && evict_oldest(a, se, sl->slot))
            ;
        if (se->n_stacks < a->l.max_stacks) {
            e = slice_insert(a, sl, f, n, false, lset, h);
            sl->counted++;
            se->n_stacks++;
            a->st.stacks++;
        } else {
            uint64_t ho = stack_hash(a, &a->id_over, 1, true, 0);
            e = slice_find(sl, &a->id_over, 1, true, 0, ho);
            if (!e) e = slice_insert(a, sl, &a->id_over, 1, true, 0, ho);
            se->over_samples += samples;
            a->st.over_budget_samples += samples;
        }
    }
    e->value = pc_sat_add(e->value, value);
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
        ids[i] = pz_name_ref(&a->nm, i == PZ_MAX_DEPTH - 1 && n > m ? "[truncated]" : frames[i]);
    add_ids(a, se, slice_now(a, se, now_ms), ids, m, 0, value, samples, now_ms);
    for (size_t i = 0; i < m; i++)
        pz_name_unref(&a->nm, ids[i]);
    free(ids);
    return 0;
}

/* ---- a batch ---- */

/* Each location of the batch's dictionary is named once (pc_location_frames, the debug
 * exporter's naming), its frames interned and held until the batch is done. Each function is
 * interned once too: a function has several locations (call sites), and hashing its name was
 * most of naming a location (perf, bench/README.md "The live view's APIs"). */
typedef struct batch_ctx {
    pz_agg *a;
    const pc_dictionary *d;
    size_t nloc;         /* locations: slot nloc is for an index out of range */
    uint32_t *off, *cnt; /* a location's frames: ids[off .. off + cnt) */
    bool *named;
    size_t nfn;    /* functions: slot 0 (and any bad index) is "<unknown>" */
    uint32_t *fid; /* a function's name id + 1, 0: not named yet (the reference is in ids) */
    uint32_t *ids; /* one reference each */
    size_t nids, capids;
    uint32_t stack[PZ_MAX_DEPTH];
    size_t budget; /* frames this batch may still add */
} batch_ctx;

static void cache_visit_id(batch_ctx *c, uint32_t id)
{
    if (c->nids == c->capids) {
        c->capids = c->capids ? c->capids * 2 : 1024;
        c->ids = pc_xrealloc(c->ids, c->capids * sizeof *c->ids);
    }
    c->ids[c->nids++] = id;
}

static void cache_visit(void *arg, const char *name, bool stable)
{
    (void)stable; /* interned: copied */
    batch_ctx *c = arg;
    cache_visit_id(c, pz_name_ref(&c->a->nm, name));
}

/* What pc_location_frames visits for a location with lines, each function named once a batch. */
static void location_lines(batch_ctx *c, const pc_location *loc)
{
    for (size_t k = 0; k < loc->n_lines; k++) {
        const pc_line *ln = loc->lines[k];
        int32_t fi = ln ? ln->function_index : 0;
        size_t slot = fi > 0 && (size_t)fi < c->nfn ? (size_t)fi : 0;
        if (!c->fid[slot]) {
            cache_visit(c, pc_function_name(c->d, (int32_t)slot), true);
            c->fid[slot] = c->ids[c->nids - 1] + 1;
            continue;
        }
        uint32_t id = c->fid[slot] - 1;
        c->a->nm.v[id].refs++; /* the ids entry's reference */
        cache_visit_id(c, id);
    }
}

static void location(batch_ctx *c, int32_t li, uint32_t *off, uint32_t *cnt)
{
    size_t slot = li > 0 && (size_t)li < c->nloc ? (size_t)li : c->nloc;
    if (!c->named[slot]) {
        size_t unlimited = SIZE_MAX;
        c->off[slot] = (uint32_t)c->nids;
        const pc_location *loc = slot < c->nloc ? c->d->location_table[slot] : NULL;
        if (loc && loc->lines && loc->n_lines)
            location_lines(c, loc);
        else
            pc_location_frames(c->d, li, &unlimited, cache_visit, c);
        c->cnt[slot] = (uint32_t)(c->nids - c->off[slot]);
        c->named[slot] = true;
    }
    *off = c->off[slot];
    *cnt = c->cnt[slot];
}

/* The frames of stack si, leaf first, into c->stack: its PZ_MAX_DEPTH - 1 leaf-most frames
 * under "[truncated]" when deeper. -1 when the batch's frame budget ran out. */
/* The locations of st not named yet, asked of memory at once: naming them one by one waited for
 * each (a third of aggregating's own time was that first load, perf annotate). */
static void prefetch_locations(const batch_ctx *c, const pc_stack *st)
{
    size_t nl = ARR_N(st->location_indices, st->n_location_indices);
    for (size_t i = 0; i < nl && i < PZ_MAX_DEPTH; i++) {
        int32_t li = st->location_indices[i];
        if (li > 0 && (size_t)li < c->nloc && !c->named[li])
            __builtin_prefetch(c->d->location_table[li]);
    }
}

static long stack_of(batch_ctx *c, int32_t si)
{
    const pc_stack *st = c->d->stack_table[si];
    size_t n = 0;
    bool cut = false;
    prefetch_locations(c, st);
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
    uint32_t lset; /* one reference */
    int64_t val;
    uint64_t samples;
} stack_val;

/* sv by stack, then label set (the order stacks meet the budget in), by an LSD radix sort
 * (8 bits a pass, as many passes as the largest stack and set need): linear in the samples
 * whatever the size of the batch's stack table, where qsort was a tenth of aggregating (perf,
 * bench/README.md "The live view's APIs"). Stable: samples of one stack and set keep their order.
 */
static void sort_stack_vals(stack_val *sv, size_t m)
{
    if (m < 2) return;
    uint32_t smax = 0, lmax = 0;
    for (size_t i = 0; i < m; i++) {
        smax |= (uint32_t)sv[i].stack; /* >= 0 (add_profile) */
        lmax |= sv[i].lset;
    }
    unsigned lbits = 0, bits;
    while (lbits < 32 && lmax >> lbits)
        lbits++;
    for (bits = lbits; bits - lbits < 32 && smax >> (bits - lbits); bits++)
        ;
    stack_val *tmp = pc_xmalloc(m * sizeof *tmp), *src = sv, *dst = tmp;
    for (unsigned shift = 0; shift < bits; shift += 8) {
        size_t at[257] = {0};
        for (size_t i = 0; i < m; i++)
            at[((((uint64_t)(uint32_t)src[i].stack << lbits) | src[i].lset) >> shift & 0xff) + 1]++;
        for (size_t k = 1; k < 257; k++)
            at[k] += at[k - 1];
        for (size_t i = 0; i < m; i++)
            dst[at[(((uint64_t)(uint32_t)src[i].stack << lbits) | src[i].lset) >> shift & 0xff]++] =
                src[i];
        stack_val *t = src;
        src = dst;
        dst = t;
    }
    if (src != sv) memcpy(sv, src, m * sizeof *sv);
    free(tmp);
}

/* One profile; false when the batch's frame budget ran out. */
static bool add_profile(batch_ctx *c, series *se, const pc_resource *r, const pc_profile *p,
                        uint64_t now_ms)
{
    pz_agg *a = c->a;
    const pc_dictionary *d = c->d;
    size_t ns = ARR_N(p->samples, p->n_samples);
    size_t nstk = d ? ARR_N(d->stack_table, d->n_stack_table) : 0;
    stack_val *sv = pc_xmalloc((ns ? ns : 1) * sizeof *sv);
    size_t m = 0;
    pz_lset_memo *memo = pc_xcalloc(1, sizeof *memo);
    for (size_t i = 0; i < ns; i++) {
        const pc_sample *s = p->samples[i];
        if (!s) continue;
        int32_t si =
            s->stack_index > 0 && (size_t)s->stack_index < nstk && d->stack_table[s->stack_index]
                ? s->stack_index
                : 0; /* no stack: the root's own value */
        sv[m++] = (stack_val){si, pz_sample_lset(a, memo, d, r, s), pc_sample_value(s), 1};
    }
    pz_lset_memo_clear(a, memo);
    free(memo);
    sort_stack_vals(sv, m);
    slice *sl = slice_now(a, se, now_ms);
    bool ok = true;
    for (size_t i = 0; i < m && ok;) {
        size_t j = i;
        int64_t v = 0;
        uint64_t cnt = 0;
        while (j < m && sv[j].stack == sv[i].stack && sv[j].lset == sv[i].lset) {
            v = pc_sat_add(v, sv[j].val);
            cnt += sv[j++].samples;
        }
        long n = sv[i].stack ? stack_of(c, sv[i].stack) : 0;
        if (n < 0)
            ok = false;
        else
            add_ids(a, se, sl, c->stack, (size_t)n, sv[i].lset, v, cnt, now_ms);
        i = j;
    }
    for (size_t i = 0; i < m; i++)
        pz_lset_unref(a, sv[i].lset);
    free(sv);
    return ok;
}

void pz_agg_add_batch(pz_agg *a, const pc_batch *b, uint64_t now_ms)
{
    const pc_request *req = b ? pc_batch_req(b) : NULL;
    if (!req || b->signal != PC_SIGNAL_PROFILES) return;
    batch_ctx *c = pc_xcalloc(1, sizeof *c);
    c->a = a;
    c->d = req->dictionary;
    c->nloc = c->d ? ARR_N(c->d->location_table, c->d->n_location_table) : 0;
    c->off = pc_xmalloc((c->nloc + 1) * sizeof *c->off);
    c->cnt = pc_xmalloc((c->nloc + 1) * sizeof *c->cnt);
    c->named = pc_xcalloc(c->nloc + 1, sizeof *c->named);
    c->nfn = c->d ? ARR_N(c->d->function_table, c->d->n_function_table) : 0;
    c->fid = pc_xcalloc(c->nfn + 1, sizeof *c->fid);
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
                ok = add_profile(c, se, rp->resource, p, now_ms);
                if (ok)
                    a->st.profiles++;
                else
                    a->st.dropped_profiles++;
            }
        }
    }
    for (size_t i = 0; i < c->nids; i++)
        pz_name_unref(&a->nm, c->ids[i]);
    free(c->ids);
    free(c->off);
    free(c->cnt);
    free(c->named);
    free(c->fid);
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
    for (size_t i = 0; i < PZ_MAX_DEPTH + 2; i++)
        a->stack_keys[i] = pc_hash_u64(i); /* secret: SipHash under the process's key */
    a->id_over = pz_name_ref(&a->nm, "[over budget]");
    a->id_trunc = pz_name_ref(&a->nm, "[truncated]");
    pz_lsets_init(a);
    return a;
}

void pz_agg_free(pz_agg *a)
{
    if (!a) return;
    for (size_t i = 0; i < a->n_ser; i++)
        series_free(a, a->ser[i]);
    free(a->ser);
    pz_lsets_free(a);
    pz_names_free(&a->nm);
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
