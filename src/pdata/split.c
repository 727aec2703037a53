/* Splitting requests (see split.h). */
#include "pdata/split.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/alloc.h"
#include "base/log.h"
#include "pdata/proto_pack.h"

/* ---- a plan over profiles ------------------------------------------------------------------- */

static void plan_push(pc_split_plan *pl, size_t input, size_t r, size_t s, size_t p, size_t from,
                      size_t to)
{
    if (pl->n == pl->cap) {
        pl->cap = pl->cap ? pl->cap * 2 : 64;
        pl->v = pc_xrealloc(pl->v, pl->cap * sizeof *pl->v);
    }
    pl->v[pl->n++] =
        (pc_split_slice){{.r = r, .s = s, .p = p, .from = from, .to = to}, input, pl->chunks - 1};
}

void pc_split_plan_make(pc_batch *const *in, size_t n_in, size_t max, pc_split_plan *pl)
{
    size_t fill = 0;
    pl->chunks = 1;
    for (size_t i = 0; i < n_in; i++) {
        pc_profile_iter it = {0};
        while (pc_profile_next(pc_batch_req(in[i]), &it)) {
            size_t n = pc_profile_n_samples(it.prof), from = 0;
            do {
                if (max && fill == max) { /* samples are independent: split anywhere */
                    pl->chunks++;
                    fill = 0;
                }
                size_t take = max && n - from > max - fill ? max - fill : n - from;
                plan_push(pl, i, it.r, it.s, it.p, from, from + take);
                from += take;
                fill += take;
            } while (from < n);
        }
    }
}

void pc_split_plan_free(pc_split_plan *pl)
{
    free(pl->v);
    memset(pl, 0, sizeof *pl);
}

static pc_batch **one_part(const pc_batch *b)
{
    pc_batch **v = pc_xmalloc(sizeof *v);
    v[0] = pc_batch_ref((pc_batch *)b);
    return v;
}

/* Profiles: each chunk of the plan through a merger, with only what its slices reach. */
static size_t split_profiles(const pc_batch *b, size_t max, pc_batch ***out)
{
    pc_split_plan pl = {0};
    pc_batch *in = (pc_batch *)b;
    pc_split_plan_make(&in, 1, max, &pl);
    if (pl.chunks <= 1 || pl.n == 0) {
        pc_split_plan_free(&pl);
        *out = one_part(b);
        return 1;
    }
    pc_batch **parts = pc_xcalloc(pl.chunks, sizeof *parts);
    pc_merge_slice *tmp = pc_xmalloc(pl.n * sizeof *tmp);
    size_t k = 0;
    for (size_t ch = 0; ch < pl.chunks; ch++) {
        size_t n = 0;
        while (k < pl.n && pl.v[k].chunk == ch)
            tmp[n++] = pl.v[k++].sl;
        pc_merger *m = pc_merger_new();
        pc_merger_add(m, b, tmp, n);
        parts[ch] = pc_merger_finish(m);
        pc_batch_copy_meta(b, parts[ch]);
    }
    free(tmp);
    size_t n = pl.chunks;
    pc_split_plan_free(&pl);
    *out = parts;
    return n;
}

/* ---- traces, metrics, logs: shallow views ---------------------------------------------------- */

/* The three requests have one shape: request {1: repeated Resource<X>}, Resource<X> {2: repeated
 * Scope<X>}, Scope<X> {2: repeated item (Span, Metric, LogRecord)}. */
#define F_RESOURCES 1
#define F_SCOPES    2
#define F_ITEMS     2

typedef Opentelemetry__Proto__Metrics__V1__Metric pc_metric;

static size_t children(const ProtobufCMessage *m, unsigned id, ProtobufCMessage *const **v)
{
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(m->descriptor, id);
    *v = *(ProtobufCMessage *const *const *)((const char *)m + f->offset);
    return *v ? *(const size_t *)((const char *)m + f->quantifier_offset) : 0;
}

static void set_children(ProtobufCMessage *m, unsigned id, ProtobufCMessage **v, size_t n)
{
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(m->descriptor, id);
    *(ProtobufCMessage ***)((char *)m + f->offset) = v;
    *(size_t *)((char *)m + f->quantifier_offset) = n;
}

/* The message holding a metric's data points (its field 1), NULL without data. */
static ProtobufCMessage **metric_data(pc_metric *m)
{
    switch (m->data_case) {
    case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_GAUGE:
        return (ProtobufCMessage **)&m->gauge;
    case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_SUM: return (ProtobufCMessage **)&m->sum;
    case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_HISTOGRAM:
        return (ProtobufCMessage **)&m->histogram;
    case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_EXPONENTIAL_HISTOGRAM:
        return (ProtobufCMessage **)&m->exponential_histogram;
    case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_SUMMARY:
        return (ProtobufCMessage **)&m->summary;
    default: return NULL;
    }
}

static size_t metric_points(const pc_metric *m)
{
    ProtobufCMessage **d = metric_data((pc_metric *)m);
    ProtobufCMessage *const *v;
    return d && *d ? children(*d, 1, &v) : 0;
}

/* Items (or, for metrics, data points [from, to) of item i) of scope s of resource r. */
typedef struct piece {
    size_t r, s, i;
    size_t from, to;
    size_t chunk;
} piece;

typedef struct pieces {
    piece *v;
    size_t n, cap, chunks;
} pieces;

static void piece_push(pieces *ps, piece p)
{
    if (ps->n == ps->cap) {
        ps->cap = ps->cap ? ps->cap * 2 : 64;
        ps->v = pc_xrealloc(ps->v, ps->cap * sizeof *ps->v);
    }
    ps->v[ps->n++] = p;
}

/* Every item of a request, in order, with where it is. */
typedef struct item_ref {
    size_t r, s, i;
    ProtobufCMessage *item;
} item_ref;

static size_t items_of(const pc_batch *b, item_ref **out)
{
    item_ref *v = NULL;
    size_t n = 0, cap = 0;
    ProtobufCMessage *const *rv, *const *sv, *const *iv;
    size_t nr = children(b->msg, F_RESOURCES, &rv);
    for (size_t r = 0; r < nr; r++) {
        size_t ns = rv[r] ? children(rv[r], F_SCOPES, &sv) : 0;
        for (size_t s = 0; s < ns; s++) {
            size_t ni = sv[s] ? children(sv[s], F_ITEMS, &iv) : 0;
            for (size_t i = 0; i < ni; i++) {
                if (!iv[i]) continue;
                if (n == cap) {
                    cap = cap ? 2 * cap : 64;
                    v = pc_xrealloc(v, cap * sizeof *v);
                }
                v[n++] = (item_ref){r, s, i, iv[i]};
            }
        }
    }
    *out = v;
    return n;
}

/* What an item counts for: 1, or a metric's data points. */
static size_t weight(const pc_batch *b, const ProtobufCMessage *item)
{
    return b->signal == PC_SIGNAL_METRICS ? metric_points((const pc_metric *)item) : 1;
}

/* A copy of metric m (in a) carrying only data points [from, to). */
static ProtobufCMessage *metric_slice(pc_arena *a, const pc_metric *m, size_t from, size_t to)
{
    pc_metric *c = pc_arena_memdup(a, m, sizeof *m);
    ProtobufCMessage **d = metric_data(c);
    ProtobufCMessage *data = pc_arena_memdup(a, *d, (*d)->descriptor->sizeof_message);
    ProtobufCMessage *const *pts;
    children(data, 1, &pts);
    set_children(data, 1, (ProtobufCMessage **)(pts + from), to - from);
    *d = data;
    return &c->base;
}

/* A request of b's signal holding exactly pieces v[0..n) (in (r, s, i) order), decoded anew. */
static pc_batch *build(const pc_batch *b, const piece *v, size_t n)
{
    pc_arena *a = pc_arena_new(4096);
    const ProtobufCMessage *req = b->msg;
    ProtobufCMessage *rq = pc_arena_memdup(a, req, req->descriptor->sizeof_message);
    ProtobufCMessage *const *rv, *const *sv, *const *iv;
    children(req, F_RESOURCES, &rv);
    ProtobufCMessage **rs = pc_arena_alloc(a, (n ? n : 1) * sizeof *rs);
    size_t nr = 0;
    for (size_t k = 0; k < n;) {
        size_t r = v[k].r;
        ProtobufCMessage *rc = pc_arena_memdup(a, rv[r], rv[r]->descriptor->sizeof_message);
        children(rv[r], F_SCOPES, &sv);
        ProtobufCMessage **ss = pc_arena_alloc(a, n * sizeof *ss);
        size_t ns = 0;
        while (k < n && v[k].r == r) {
            size_t s = v[k].s;
            ProtobufCMessage *sc = pc_arena_memdup(a, sv[s], sv[s]->descriptor->sizeof_message);
            children(sv[s], F_ITEMS, &iv);
            ProtobufCMessage **is = pc_arena_alloc(a, n * sizeof *is);
            size_t ni = 0;
            for (; k < n && v[k].r == r && v[k].s == s; k++) {
                ProtobufCMessage *item = iv[v[k].i];
                if (b->signal == PC_SIGNAL_METRICS) {
                    const pc_metric *m = (const pc_metric *)item;
                    if (v[k].from != 0 || v[k].to != metric_points(m))
                        item = metric_slice(a, m, v[k].from, v[k].to);
                }
                is[ni++] = item;
            }
            set_children(sc, F_ITEMS, is, ni);
            ss[ns++] = sc;
        }
        set_children(rc, F_SCOPES, ss, ns);
        rs[nr++] = rc;
    }
    set_children(rq, F_RESOURCES, rs, nr);
    pc_buf buf = {0};
    pc_proto_pack(rq, &buf);
    pc_arena_free(a);
    pc_batch *out = NULL;
    pc_error e = {0};
    if (pc_batch_decode(b->signal, buf.data, buf.len, false, NULL, &out, &e) < 0) {
        /* cannot happen: the parts of a request that decoded */
        PC_ERROR(NULL, "splitting a %s request failed (%s)", pc_signal_infos[b->signal].name,
                 e.msg);
        out = pc_batch_new_signal(b->signal);
    }
    pc_buf_free(&buf);
    pc_batch_copy_meta(b, out);
    return out;
}

/* Build every chunk of ps (its pieces are in chunk order). */
static size_t build_chunks(const pc_batch *b, const pieces *ps, pc_batch ***out)
{
    pc_batch **parts = pc_xcalloc(ps->chunks ? ps->chunks : 1, sizeof *parts);
    size_t k = 0;
    for (size_t ch = 0; ch < ps->chunks; ch++) {
        size_t from = k;
        while (k < ps->n && ps->v[k].chunk == ch)
            k++;
        parts[ch] = build(b, ps->v + from, k - from);
    }
    *out = parts;
    return ps->chunks;
}

static size_t split_views(const pc_batch *b, size_t max, pc_batch ***out)
{
    pieces ps = {0};
    item_ref *it;
    size_t n_items = items_of(b, &it), fill = 0;
    bool metrics = b->signal == PC_SIGNAL_METRICS;
    ps.chunks = 1;
    for (size_t k = 0; k < n_items; k++) {
        size_t w = weight(b, it[k].item), from = 0;
        do { /* data points are independent: a metric is cut anywhere */
            if (fill == max) {
                ps.chunks++;
                fill = 0;
            }
            size_t take = metrics ? (w - from > max - fill ? max - fill : w - from) : 1;
            piece_push(&ps, (piece){it[k].r, it[k].s, it[k].i, from, metrics ? from + take : 1,
                                    ps.chunks - 1});
            from += take;
            fill += metrics ? take : 1;
        } while (from < w);
    }
    free(it);
    size_t n;
    if (ps.chunks <= 1) {
        *out = one_part(b);
        n = 1;
    } else {
        n = build_chunks(b, &ps, out);
    }
    free(ps.v);
    return n;
}

size_t pc_batch_split(const pc_batch *b, size_t max_items, pc_batch ***out)
{
    if (max_items == 0) max_items = 1;
    if (b->signal == PC_SIGNAL_PROFILES) return split_profiles(b, max_items, out);
    return split_views(b, max_items, out);
}

/* ---- by resource ------------------------------------------------------------------------- */

static uint32_t by_resource(void *arg, const pc_batch *b, size_t r, size_t s, size_t p, size_t i)
{
    (void)arg, (void)b, (void)s, (void)p, (void)i;
    return (uint32_t)r;
}

size_t pc_batch_split_resources(const pc_batch *b, pc_batch ***out)
{
    size_t n = 0;
    if (b->signal == PC_SIGNAL_PROFILES) {
        /* routed by resource index; resources without profiles make no part */
        size_t nr = pc_batch_req(b)->n_resource_profiles;
        pc_batch **parts = pc_xcalloc(nr + 1, sizeof *parts);
        if (nr) pc_batch_route(b, (uint32_t)nr, by_resource, NULL, parts);
        for (size_t r = 0; r < nr; r++)
            if (parts[r]) parts[n++] = parts[r];
        *out = parts;
        return n;
    }
    pieces ps = {0};
    item_ref *it;
    size_t n_items = items_of(b, &it), last = SIZE_MAX;
    for (size_t k = 0; k < n_items; k++) {
        if (it[k].r != last) {
            ps.chunks++;
            last = it[k].r;
        }
        piece_push(&ps,
                   (piece){it[k].r, it[k].s, it[k].i, 0, weight(b, it[k].item), ps.chunks - 1});
    }
    free(it);
    n = build_chunks(b, &ps, out);
    free(ps.v);
    return n;
}

const pc_resource *pc_batch_first_resource(const pc_batch *b, const pc_dictionary **d)
{
    *d = pc_batch_req(b) ? pc_batch_req(b)->dictionary : NULL;
    if (!pc_batch_n_resources(b)) return NULL;
    return *pc_batch_resource_slot((pc_batch *)b, 0);
}

/* ---- by trace id -------------------------------------------------------------------------- */

typedef struct group {
    uint8_t id[16];
    pieces ps;
} group;

/* Seeded: trace ids are the client's (base/hash.h). */
static uint64_t id_hash(const uint8_t *id)
{
    return pc_hash_mem(id, 16);
}

size_t pc_batch_split_trace_ids(const pc_batch *b, pc_batch ***out, uint8_t **ids)
{
    group *g = NULL;
    size_t ng = 0, capg = 0, tcap = 64;
    size_t *table = pc_xmalloc(tcap * sizeof *table); /* group index + 1; 0: empty */
    memset(table, 0, tcap * sizeof *table);
    item_ref *it;
    size_t n_items = items_of(b, &it);
    const ProtobufCFieldDescriptor *tf =
        n_items
            ? protobuf_c_message_descriptor_get_field_by_name(it[0].item->descriptor, "trace_id")
            : NULL;
    for (size_t k = 0; k < n_items; k++) {
        uint8_t id[16] = {0};
        if (tf) {
            const ProtobufCBinaryData *v =
                (const ProtobufCBinaryData *)((const char *)it[k].item + tf->offset);
            if (v->len == 16) memcpy(id, v->data, 16);
        }
        if (2 * (ng + 1) > tcap) { /* grow and rehash */
            size_t nc = 2 * tcap;
            size_t *nt = pc_xcalloc(nc, sizeof *nt);
            for (size_t j = 0; j < ng; j++) {
                size_t h = (size_t)id_hash(g[j].id) & (nc - 1);
                while (nt[h])
                    h = (h + 1) & (nc - 1);
                nt[h] = j + 1;
            }
            free(table);
            table = nt;
            tcap = nc;
        }
        size_t h = (size_t)id_hash(id) & (tcap - 1);
        while (table[h] && memcmp(g[table[h] - 1].id, id, 16))
            h = (h + 1) & (tcap - 1);
        if (!table[h]) {
            if (ng == capg) {
                capg = capg ? 2 * capg : 16;
                g = pc_xrealloc(g, capg * sizeof *g);
            }
            memset(&g[ng], 0, sizeof g[ng]);
            memcpy(g[ng].id, id, 16);
            table[h] = ++ng;
        }
        piece_push(&g[table[h] - 1].ps, (piece){it[k].r, it[k].s, it[k].i, 0, 1, 0});
    }
    free(it);
    free(table);
    pc_batch **parts = pc_xcalloc(ng ? ng : 1, sizeof *parts);
    *ids = pc_xmalloc(ng ? 16 * ng : 1);
    for (size_t k = 0; k < ng; k++) {
        parts[k] = ng == 1 ? pc_batch_ref((pc_batch *)b) : build(b, g[k].ps.v, g[k].ps.n);
        memcpy(*ids + 16 * k, g[k].id, 16);
        free(g[k].ps.v);
    }
    free(g);
    *out = parts;
    return ng;
}

/* ---- routing: a per-item choice ------------------------------------------------------------ */

/* Profiles: one merger per part over slices of the source's profiles (a range when a part gets
 * a whole profile, picks otherwise), so each part gets a compact dictionary of its own. */
/* One part's slices; a pick slice's pick pointer is set once its part's picks stop moving. */
typedef struct route_part {
    pc_merge_slice *sl;
    size_t *off; /* per slice: offset of its picks in pick, or (size_t)-1 for a range */
    size_t n, cap;
    uint32_t *pick;
    size_t npick, cappick;
    size_t in_profile; /* samples of the current profile */
    size_t start;      /* where the current profile's picks start */
} route_part;

static void push_slice(route_part *pt, pc_merge_slice sl, size_t off)
{
    if (pt->n == pt->cap) {
        pt->cap = pt->cap ? pt->cap * 2 : 16;
        pt->sl = pc_xrealloc(pt->sl, pt->cap * sizeof *pt->sl);
        pt->off = pc_xrealloc(pt->off, pt->cap * sizeof *pt->off);
    }
    pt->sl[pt->n] = sl;
    pt->off[pt->n++] = off;
}

static void push_pick(route_part *pt, uint32_t i)
{
    if (pt->npick == pt->cappick) {
        pt->cappick = pt->cappick ? pt->cappick * 2 : 256;
        pt->pick = pc_xrealloc(pt->pick, pt->cappick * sizeof *pt->pick);
    }
    pt->pick[pt->npick++] = i;
}

/* Walk every item: the part of each, in dst (one per sample, one per empty profile). */
static size_t route_assign_profiles(const pc_batch *b, uint32_t nparts, pc_split_fn part_of,
                                    void *arg, uint32_t **dst_out)
{
    size_t n = 0, cap = 0;
    uint32_t *dst = NULL;
    pc_profile_iter it = {0};
    while (pc_profile_next(pc_batch_req(b), &it)) {
        size_t k = pc_profile_n_samples(it.prof);
        size_t slots = k ? k : 1;
        if (n + slots > cap) {
            cap = (n + slots) * 2;
            dst = pc_xrealloc(dst, cap * sizeof *dst);
        }
        for (size_t i = 0; i < slots; i++) {
            uint32_t d = part_of(arg, b, it.r, it.s, it.p, k ? i : PC_SPLIT_WHOLE);
            dst[n++] = d < nparts ? d : 0;
        }
    }
    *dst_out = dst;
    return n;
}

static void route_profiles(const pc_batch *b, uint32_t nparts, const uint32_t *dst, pc_batch **out)
{
    route_part *pt = pc_xcalloc(nparts, sizeof *pt);
    uint32_t *touched = pc_xmalloc(nparts * sizeof *touched);
    size_t at = 0;
    pc_profile_iter it = {0};
    while (pc_profile_next(pc_batch_req(b), &it)) {
        size_t k = pc_profile_n_samples(it.prof);
        pc_merge_slice sl = {.r = it.r, .s = it.s, .p = it.p, .from = 0, .to = k};
        if (!k) { /* a profile without samples goes whole */
            push_slice(&pt[dst[at++]], sl, (size_t)-1);
            continue;
        }
        size_t nt = 0;
        for (size_t i = 0; i < k; i++) {
            route_part *q = &pt[dst[at + i]];
            if (!q->in_profile++) {
                touched[nt++] = dst[at + i];
                q->start = q->npick;
            }
            push_pick(q, (uint32_t)i);
        }
        at += k;
        for (size_t t = 0; t < nt; t++) {
            route_part *q = &pt[touched[t]];
            pc_merge_slice qs = sl;
            if (q->in_profile == k) { /* all of it: a range, no picks */
                q->npick = q->start;
                push_slice(q, qs, (size_t)-1);
            } else {
                qs.n_pick = q->in_profile;
                push_slice(q, qs, q->start);
            }
            q->in_profile = 0;
        }
    }
    for (uint32_t d = 0; d < nparts; d++) {
        route_part *q = &pt[d];
        if (q->n) {
            for (size_t i = 0; i < q->n; i++)
                if (q->off[i] != (size_t)-1) q->sl[i].pick = q->pick + q->off[i];
            pc_merger *m = pc_merger_new();
            pc_merger_add(m, b, q->sl, q->n);
            out[d] = pc_merger_finish(m);
            pc_batch_copy_meta(b, out[d]);
        }
        free(q->sl);
        free(q->off);
        free(q->pick);
    }
    free(touched);
    free(pt);
}

/* Other signals: item k's part in dst[k], in items_of order. */
static size_t route_assign_items(const pc_batch *b, uint32_t nparts, pc_split_fn part_of, void *arg,
                                 item_ref **items, uint32_t **dst_out)
{
    size_t n = items_of(b, items);
    uint32_t *dst = pc_xmalloc((n ? n : 1) * sizeof *dst);
    for (size_t k = 0; k < n; k++) {
        uint32_t d = part_of(arg, b, (*items)[k].r, (*items)[k].s, 0, (*items)[k].i);
        dst[k] = d < nparts ? d : 0;
    }
    *dst_out = dst;
    return n;
}

void pc_batch_route(const pc_batch *b, uint32_t nparts, pc_split_fn part_of, void *arg,
                    pc_batch **out)
{
    for (uint32_t d = 0; d < nparts; d++)
        out[d] = NULL;
    if (!nparts) return;
    uint32_t *dst = NULL;
    item_ref *items = NULL;
    size_t n;
    if (b->signal == PC_SIGNAL_PROFILES)
        n = route_assign_profiles(b, nparts, part_of, arg, &dst);
    else
        n = route_assign_items(b, nparts, part_of, arg, &items, &dst);
    bool one = true;
    for (size_t i = 1; i < n && one; i++)
        one = dst[i] == dst[0];
    if (n && one) {
        out[dst[0]] = pc_batch_ref((pc_batch *)b);
    } else if (n && b->signal == PC_SIGNAL_PROFILES) {
        route_profiles(b, nparts, dst, out);
    } else if (n) { /* each part's pieces in request order, built as the size split builds */
        pieces *ps = pc_xcalloc(nparts, sizeof *ps);
        for (size_t k = 0; k < n; k++)
            piece_push(&ps[dst[k]],
                       (piece){items[k].r, items[k].s, items[k].i, 0, weight(b, items[k].item), 0});
        for (uint32_t d = 0; d < nparts; d++) {
            if (ps[d].n) out[d] = build(b, ps[d].v, ps[d].n);
            free(ps[d].v);
        }
        free(ps);
    }
    free(items);
    free(dst);
}
