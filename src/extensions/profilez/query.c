/* The profilez aggregate's answers (agg.h): series, flame graph, top table, timeline. */
#include <ctype.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/hash.h"
#include "extensions/profilez/agg_impl.h"
#include "pdata/summary.h"

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
                *total = pc_sat_add(*total, sl->tab[k].value);
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
        ",\"stacks\":%" PRIu64 ",\"label_sets\":%" PRIu64 ",\"over_budget_label_samples\":%" PRIu64
        ",\"dropped_labels\":%" PRIu64 "},\"max_label_sets\":%zu,\"series\":[",
        a->l.window_ms, a->slice_ms, a->l.slices, a->l.max_stacks, a->l.max_series, st->profiles,
        st->samples, st->evicted_stacks, st->over_budget_samples, st->dropped_profiles,
        st->dropped_batches, st->series, st->stacks, st->label_sets, st->over_budget_label_samples,
        st->dropped_labels, a->l.max_label_sets);
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

/* Whether sl holds data of the query's time range: a slice overlapping [from_ms, to_ms) of the
 * caller's clock (the aggregate's + clock_off_ms); to_ms 0: no end. */
static bool slice_in(const pz_agg *a, const slice *sl, const pz_query *q)
{
    if (!sl->used) return false;
    int64_t start = (int64_t)(sl->slot * a->slice_ms) + q->clock_off_ms;
    int64_t end = start + (int64_t)a->slice_ms;
    return end > q->from_ms && (q->to_ms <= 0 || start < q->to_ms);
}

/* Whether e is a stack (not an empty slot) with the query's labels. */
static bool stk_in(const pz_agg *a, const stk *e, const pz_query *q)
{
    return e->frames && pz_lset_match(a, e->lset, q);
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
    int64_t base;          /* the baseline's total (a diff) */
    uint32_t first, count; /* children in kids[first .. first + count) once built */
} fnode;

typedef struct ftree {
    fnode *v;
    size_t n, cap;
    uint32_t *slots; /* node index + 1 keyed by (parent, name) */
    size_t nslots;   /* 2^bits */
    unsigned bits;
} ftree;

/* Node ids and name ids are the aggregate's, so a multiply-shift slot (base/hash.h) is enough. */
static size_t pair_slot(const ftree *t, uint32_t parent, uint32_t name)
{
    return pc_hash_slot_u64(((uint64_t)parent << 32) | name, t->bits);
}

static void ftree_grow(ftree *t)
{
    t->bits = t->nslots ? t->bits + 1 : 10;
    size_t ns = (size_t)1 << t->bits;
    t->nslots = ns;
    uint32_t *s = pc_xcalloc(ns, sizeof *s);
    for (size_t i = 1; i < t->n; i++) {
        size_t j = pair_slot(t, t->v[i].parent, t->v[i].name);
        while (s[j])
            j = (j + 1) & (ns - 1);
        s[j] = (uint32_t)i + 1;
    }
    free(t->slots);
    t->slots = s;
}

static uint32_t ftree_child(ftree *t, uint32_t parent, uint32_t name)
{
    if ((t->n + 1) * 10 > t->nslots * 7) ftree_grow(t);
    size_t j = pair_slot(t, parent, name);
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
/* base: into the nodes' base totals (a diff's baseline; the tree is made by the first call). */
static void tree_build(const pz_agg *a, const series *se, const pz_query *q, ftree *t, bool base)
{
    if (!t->v) {
        t->cap = 1024;
        t->v = pc_xmalloc(t->cap * sizeof *t->v);
        t->v[0] = (fnode){0};
        t->n = 1;
    }
    for (unsigned i = 0; i < a->l.slices; i++) {
        const slice *sl = &se->sl[i];
        for (size_t k = 0; slice_in(a, sl, q) && k < sl->cap; k++) {
            const stk *e = &sl->tab[k];
            if (!stk_in(a, e, q)) continue;
            uint32_t node = 0;
            for (uint32_t f = e->n + 1; f-- > 0;) {
                if (f < e->n) node = ftree_child(t, node, e->frames[f]);
                int64_t *v = base ? &t->v[node].base : &t->v[node].total;
                *v = pc_sat_add(*v, e->value);
            }
            if (!base) t->v[node].self = pc_sat_add(t->v[node].self, e->value);
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

/* ",[name,total,self,depth(,base)]" without printf: a flame graph is thousands of these. */
static void put_node(pc_buf *tree, uint32_t name, const fnode *n, size_t depth, bool diff)
{
    char b[8 + 5 * 21], *p = b;
    *p++ = ',';
    *p++ = '[';
    p += pc_fmt_i64(p, name);
    *p++ = ',';
    p += pc_fmt_i64(p, n->total);
    *p++ = ',';
    p += pc_fmt_i64(p, n->self);
    *p++ = ',';
    p += pc_fmt_i64(p, (int64_t)depth);
    if (diff) {
        *p++ = ',';
        p += pc_fmt_i64(p, n->base);
    }
    *p++ = ']';
    pc_buf_append(tree, b, (size_t)(p - b));
}

/* The nodes in pre-order with an explicit stack into tree, their names into nms (numbered as
 * first used, 0 = "total"); nodes under 1/PZ_PRUNE_DIV of the total are left out, counted. */
static uint64_t tree_emit(const pz_agg *a, const ftree *t, const uint32_t *kids, bool diff,
                          pc_buf *tree, pc_buf *nms)
{
    int64_t root_total = t->v[0].total, root_base = t->v[0].base;
    double min_total = root_total > 0 ? (double)root_total / PZ_PRUNE_DIV : 0;
    double min_base = root_base > 0 ? (double)root_base / PZ_PRUNE_DIV : 0;
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
    pc_buf_printf(tree, "[0,%" PRId64 ",%" PRId64 ",0", t->v[0].total, t->v[0].self);
    pc_buf_printf(tree, diff ? ",%" PRId64 "]" : "]", t->v[0].base);
    while (depth) {
        frame *fr = &stack[depth - 1];
        const fnode *n = &t->v[fr->node];
        if (fr->next == n->count) {
            depth--;
            continue;
        }
        uint32_t c = kids[n->first + fr->next++];
        const fnode *cn = &t->v[c];
        bool small = root_total > 0 && (double)cn->total < min_total;
        if (small && (!diff || (root_base > 0 && (double)cn->base < min_base))) {
            pruned++;
            continue;
        }
        if (!remap[cn->name]) {
            remap[cn->name] = next_name++;
            pc_buf_printf(nms, ",");
            pz_json_str(nms, a->nm.v[cn->name].s);
        }
        put_node(tree, remap[cn->name], cn, depth, diff);
        stack[depth++] = (frame){c, 0};
    }
    free(stack);
    free(remap);
    return pruned;
}

int pz_agg_flamegraph_q(pz_agg *a, const pz_query *q, uint64_t now_ms, pc_buf *out)
{
    series *se = series_by_key(a, q->service, q->type, now_ms);
    if (!se) return PC_ENOENT;
    ftree t = {0};
    tree_build(a, se, q, &t, false);
    if (q->base) tree_build(a, se, q->base, &t, true);
    uint32_t *kids = tree_children(a, &t);
    pc_buf tree = {0}, nms = {0};
    uint64_t pruned = tree_emit(a, &t, kids, q->base != NULL, &tree, &nms);
    series_head_json(se, t.v[0].total, out);
    if (q->base) pc_buf_printf(out, ",\"base_total\":%" PRId64, t.v[0].base);
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

/* How many of e's frames, leaf first, are at or below the focus path: -1 when e does not pass
 * through it (no focus: all of them). */
static long focus_cut(const pz_agg *a, const stk *e, const pz_query *q)
{
    if (q->n_focus > e->n) return -1;
    for (size_t i = 0; i < q->n_focus; i++)
        if (strcmp(a->nm.v[e->frames[e->n - 1 - i]].s, q->focus[i])) return -1;
    return (long)(e->n - q->n_focus) + (q->n_focus ? 1 : 0);
}

/* Flat and cum by name id first (arrays: no name hashed per frame of every stack, which was
 * most of a top table's cost), then one row per function into the pc_top. */
pc_top *pz_top_collect(const pz_agg *a, const series *se, const pz_query *q, int64_t *total_out)
{
    size_t nn = a->nm.n ? a->nm.n : 1;
    /* flat, cum and the stamp of each name id in one block: one allocation a query */
    int64_t *flat = pc_xcalloc(3 * nn, sizeof *flat), *cum = flat + nn;
    uint64_t *stamp = (uint64_t *)(cum + nn), cur = 0;
    int64_t total = 0;
    for (unsigned i = 0; i < a->l.slices; i++) {
        const slice *sl = &se->sl[i];
        for (size_t k = 0; slice_in(a, sl, q) && k < sl->cap; k++) {
            const stk *e = &sl->tab[k];
            long m = stk_in(a, e, q) ? focus_cut(a, e, q) : -1;
            if (m < 0) continue;
            total = pc_sat_add(total, e->value);
            cur++;
            if (m > 0) flat[e->frames[0]] = pc_sat_add(flat[e->frames[0]], e->value);
            for (long f = 0; f < m; f++) {
                uint32_t id = e->frames[f];
                if (stamp[id] == cur) continue; /* once per stack, even when it recurses */
                stamp[id] = cur;
                cum[id] = pc_sat_add(cum[id], e->value);
            }
        }
    }
    pc_top *t = pc_top_new();
    for (size_t id = 0; id < a->nm.n; id++)
        if (stamp[id]) pc_top_add(t, a->nm.v[id].s, true, flat[id], cum[id]);
    free(flat);
    *total_out = total;
    return t;
}

int pz_agg_top_q(pz_agg *a, const pz_query *q, uint64_t now_ms, pc_buf *out)
{
    series *se = series_by_key(a, q->service, q->type, now_ms);
    if (!se) return PC_ENOENT;
    int64_t total;
    pc_top *t = pz_top_collect(a, se, q, &total);
    if (q->base) {
        int64_t btotal;
        pc_top *bt = pz_top_collect(a, se, q->base, &btotal);
        series_head_json(se, total, out);
        pz_top_diff_json(q, t, total, bt, btotal, out);
        pc_top_free(bt);
        pc_top_free(t);
        return 0;
    }
    size_t n, shown = 0, hits = 0;
    pc_top_row *rows = pc_top_rows(t, &n);
    for (size_t i = 0; i < n; i++)
        hits += pz_search_hit(rows[i].name, q->search);
    series_head_json(se, total, out);
    pc_buf_printf(out, ",\"functions\":%zu,\"rows\":[", hits);
    for (size_t i = 0; i < n && shown < q->limit; i++) {
        if (!pz_search_hit(rows[i].name, q->search)) continue;
        pc_buf_printf(out, "%s{\"name\":", shown++ ? "," : "");
        pz_json_str(out, rows[i].name);
        pc_buf_printf(out, ",\"flat\":%" PRId64 ",\"cum\":%" PRId64 "}", rows[i].flat, rows[i].cum);
    }
    pc_buf_printf(out, "]}");
    free(rows);
    pc_top_free(t);
    return 0;
}

int pz_agg_timeline_q(pz_agg *a, const pz_query *q, uint64_t now_ms, pc_buf *out)
{
    series *se = series_by_key(a, q->service, q->type, now_ms);
    if (!se) return PC_ENOENT;
    uint64_t now = now_ms / a->slice_ms;
    int64_t all = 0;
    pc_buf pts = {0};
    for (uint64_t slot = now + 1 > a->l.slices ? now + 1 - a->l.slices : 0; slot <= now; slot++) {
        const slice *sl = &se->sl[slot % a->l.slices];
        int64_t v = 0;
        uint64_t samples = 0;
        for (size_t k = 0; sl->used && sl->slot == slot && k < sl->cap; k++)
            if (stk_in(a, &sl->tab[k], q)) {
                v = pc_sat_add(v, sl->tab[k].value);
                samples += sl->tab[k].samples;
            }
        all = pc_sat_add(all, v);
        pc_buf_printf(&pts, "%s[%" PRId64 ",%" PRId64 ",%" PRIu64 "]", pts.len ? "," : "",
                      (int64_t)(slot * a->slice_ms) + q->clock_off_ms, v, samples);
    }
    series_head_json(se, all, out);
    pc_buf_printf(out, ",\"slice_ms\":%" PRIu64 ",\"now_ms\":%" PRId64 ",\"points\":[", a->slice_ms,
                  (int64_t)now_ms + q->clock_off_ms);
    pc_buf_append(out, pts.data, pts.len);
    pc_buf_printf(out, "]}");
    pc_buf_free(&pts);
    return 0;
}

int pz_agg_flamegraph_json(pz_agg *a, const char *service, const char *type, uint64_t now_ms,
                           pc_buf *out)
{
    pz_query q = {.service = service, .type = type};
    return pz_agg_flamegraph_q(a, &q, now_ms, out);
}

int pz_agg_top_json(pz_agg *a, const char *service, const char *type, size_t limit, uint64_t now_ms,
                    pc_buf *out)
{
    pz_query q = {.service = service, .type = type, .limit = limit};
    return pz_agg_top_q(a, &q, now_ms, out);
}

/* ---- labels: the keys, and a row per value of one ---- */

typedef struct lrow {
    uint32_t key, value; /* name ids; value UINT32_MAX: keys[] counts its values */
    int64_t total;
    uint64_t samples;
} lrow;

typedef struct lmap {
    lrow *v;
    size_t n, cap; /* cap: a power of two, open addressing on (key, value) */
} lmap;

static lrow *lmap_get(lmap *m, uint32_t key, uint32_t value, bool *fresh)
{
    if ((m->n + 1) * 10 > m->cap * 7) {
        lmap g = {pc_xcalloc(m->cap ? m->cap * 2 : 64, sizeof(lrow)), 0, m->cap ? m->cap * 2 : 64};
        for (size_t i = 0; i < m->cap; i++)
            if (m->v[i].key) *lmap_get(&g, m->v[i].key, m->v[i].value, NULL) = m->v[i];
        free(m->v);
        *m = g;
    }
    size_t j = (size_t)pc_hash_u64(((uint64_t)key << 32) | value) & (m->cap - 1);
    while (m->v[j].key && (m->v[j].key != key || m->v[j].value != value))
        j = (j + 1) & (m->cap - 1);
    if (fresh) *fresh = !m->v[j].key;
    if (!m->v[j].key) {
        m->v[j] = (lrow){.key = key, .value = value};
        m->n++;
    }
    return &m->v[j];
}

static _Thread_local const pz_agg *g_lsort; /* qsort has no argument */

static int cmp_lrow(const void *x, const void *y)
{
    const lrow *a = x, *b = y;
    if (a->total != b->total) return a->total < b->total ? 1 : -1;
    return strcmp(g_lsort->nm.v[a->value].s, g_lsort->nm.v[b->value].s);
}

static int cmp_lkey(const void *x, const void *y)
{
    const lrow *a = x, *b = y;
    return strcmp(g_lsort->nm.v[a->key].s, g_lsort->nm.v[b->key].s);
}

/* Every (key, value) of the query's stacks with its total, and each key's number of values
 * (value UINT32_MAX); the total of them all. Key ids are names + 1 (0: an empty slot). */
static int64_t labels_scan(const pz_agg *a, const series *se, const pz_query *q, lmap *m)
{
    int64_t total = 0;
    for (unsigned i = 0; i < a->l.slices; i++) {
        const slice *sl = &se->sl[i];
        for (size_t k = 0; slice_in(a, sl, q) && k < sl->cap; k++) {
            const stk *e = &sl->tab[k];
            if (!stk_in(a, e, q)) continue;
            total = pc_sat_add(total, e->value);
            const lset *ls = &a->ls.v[e->lset];
            for (uint32_t p = 0; p < ls->n; p++) {
                bool fresh;
                lrow *r = lmap_get(m, ls->kv[2 * p] + 1, ls->kv[2 * p + 1], &fresh);
                if (fresh) {
                    lmap_get(m, ls->kv[2 * p] + 1, UINT32_MAX, NULL)->samples++;
                    r = lmap_get(m, ls->kv[2 * p] + 1, ls->kv[2 * p + 1], NULL); /* moved? */
                }
                r->total = pc_sat_add(r->total, e->value);
                r->samples += e->samples;
            }
        }
    }
    return total;
}

/* keys: each key once with its number of values; rows: group_by's values, by total. */
static void labels_emit(const pz_agg *a, const pz_query *q, const lmap *m, int64_t total,
                        pc_buf *out)
{
    lrow *keys = pc_xmalloc((m->n + 1) * sizeof *keys),
         *rows = pc_xmalloc((m->n + 1) * sizeof *rows);
    size_t nk = 0, nr = 0;
    int64_t grouped = 0;
    for (size_t i = 0; i < m->cap; i++) {
        lrow r = m->v[i];
        if (!r.key) continue;
        r.key--;
        if (r.value == UINT32_MAX) {
            keys[nk++] = r;
        } else if (q->group_by && !strcmp(a->nm.v[r.key].s, q->group_by)) {
            rows[nr++] = r;
            grouped = pc_sat_add(grouped, r.total);
        }
    }
    g_lsort = a;
    qsort(keys, nk, sizeof *keys, cmp_lkey);
    qsort(rows, nr, sizeof *rows, cmp_lrow);
    pc_buf_printf(out, ",\"keys\":[");
    for (size_t i = 0; i < nk; i++) {
        pc_buf_printf(out, "%s{\"key\":", i ? "," : "");
        pz_json_str(out, a->nm.v[keys[i].key].s);
        pc_buf_printf(out, ",\"values\":%" PRIu64 "}", keys[i].samples);
    }
    pc_buf_printf(out, "],\"group_by\":");
    pz_json_str(out, q->group_by ? q->group_by : "");
    pc_buf_printf(out, ",\"values\":%zu,\"rows\":[", nr);
    for (size_t i = 0; i < nr && i < q->limit; i++) {
        pc_buf_printf(out, "%s{\"value\":", i ? "," : "");
        pz_json_str(out, a->nm.v[rows[i].value].s);
        pc_buf_printf(out, ",\"total\":%" PRId64 ",\"samples\":%" PRIu64 "}", rows[i].total,
                      rows[i].samples);
    }
    if (q->group_by && total != grouped) /* the stacks without that key */
        pc_buf_printf(out, "%s{\"value\":null,\"total\":%" PRId64 "}", nr && q->limit ? "," : "",
                      pc_sat_add(total, -grouped));
    pc_buf_printf(out, "]}");
    free(keys);
    free(rows);
}

int pz_agg_labels_q(pz_agg *a, const pz_query *q, uint64_t now_ms, pc_buf *out)
{
    series *se = series_by_key(a, q->service, q->type, now_ms);
    if (!se) return PC_ENOENT;
    lmap m = {0};
    int64_t total = labels_scan(a, se, q, &m);
    series_head_json(se, total, out);
    labels_emit(a, q, &m, total, out);
    free(m.v);
    return 0;
}
