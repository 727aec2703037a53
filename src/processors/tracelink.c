/* Processor "tracelink": sample attributes that carry trace context become a Link.
 *
 * A sample whose attributes hold a trace id (keys `trace_id_keys`) and/or a span id (keys
 * `span_id_keys`, which include Pyroscope's `profile_id` span label) gets a Link in the
 * dictionary and its link_index. Values are hex (any case) of 32 characters for trace ids and 16
 * for span ids, as string, string_value_strindex or bytes values (bytes may also hold the raw 16
 * or 8 id bytes). Invalid values are left alone and counted. A span id without a trace id makes
 * a link with a zero trace id (counted), a trace id alone one with a zero span id.
 * `remove_attributes` (default true) drops the attributes that made the link, cutting label
 * cardinality. Samples that already have a link are left alone (but see the span index). Samples
 * are never merged, so two samples that now differ only by link_index stay two samples.
 *
 * Span index (`span_index.enabled`): listed in a traces pipeline, tracelink records every span
 * (span id -> trace id, name, resource service.name) and passes the traces on untouched. Every
 * instance of the same component id (one per pipeline) shares one index, so the same id listed
 * in a profiles pipeline completes span-only context from it: a span id label without a trace
 * id, or a link with a zero trace id (made upstream, e.g. by a sidecar), gets the span's trace
 * id. `add_span_name` adds the span's name as the sample attribute `span.name` to every sample
 * whose span is in the index. Entries live `span_index.ttl`; at most `span_index.max_spans` are
 * kept, the oldest evicted first. Profiles that arrive before their spans are not filled. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "base/hash.h"
#include "pdata/dict.h"
#include "sdk/component.h"
#include "sdk/shared.h"
#include "sdk/processor.h"
#include "base/hex.h"

#define SPAN_NAME_KEY "span.name"
/* Keeps slot numbers in uint32_t and the eagerly reserved (lazily touched) tables sane. */
#define MAX_SPANS_LIMIT 10000000

typedef struct tracelink_cfg {
    pc_strlist trace_id_keys, span_id_keys;
    bool remove_attributes;
    bool index_enabled;
    uint64_t index_ttl_ms;
    int64_t index_max_spans;
    bool add_span_name;
} tracelink_cfg;

/* clang-format off */
static const pc_cfg_key tracelink_keys[] = {
    {"trace_id_keys", PC_CFG_LIST, "trace_id,traceID,trace.id", offsetof(tracelink_cfg, trace_id_keys), "sample attribute keys holding a trace id (32 hex)", NULL},
    {"span_id_keys", PC_CFG_LIST, "span_id,spanID,span.id,profile_id", offsetof(tracelink_cfg, span_id_keys), "sample attribute keys holding a span id (16 hex)", NULL},
    {"remove_attributes", PC_CFG_BOOL, "true", offsetof(tracelink_cfg, remove_attributes), "remove the attributes that made a link", NULL},
    {"span_index.enabled", PC_CFG_BOOL, "false", offsetof(tracelink_cfg, index_enabled), "index spans of traces pipelines listing this id; fill in trace ids of span-only samples", NULL},
    {"span_index.ttl", PC_CFG_DURATION, "5m", offsetof(tracelink_cfg, index_ttl_ms), "how long an indexed span is kept", NULL},
    {"span_index.max_spans", PC_CFG_INT, "100000", offsetof(tracelink_cfg, index_max_spans), "most spans kept (about 70 bytes + name + service.name each); the oldest go first", NULL},
    {"add_span_name", PC_CFG_BOOL, "false", offsetof(tracelink_cfg, add_span_name), "add the indexed span's name as sample attribute span.name", NULL},
    {0},
};
/* clang-format on */

/* ---- span index ------------------------------------------------------------------------- */

/* Tests replace the clock to step over the ttl without sleeping. */
static uint64_t clock_ms(void)
{
    return uv_hrtime() / 1000000;
}
uint64_t (*pc_tracelink_now_ms)(void) = clock_ms;

typedef struct span_entry {
    uint64_t span; /* the 8 id bytes as they lie in memory: only hashed and compared */
    uint8_t trace[16];
    uint64_t at_ms; /* when first indexed */
    char *strs;     /* "name\0service\0", malloc'd */
    uint32_t next;  /* hash chain: slot + 1, 0 ends it */
} span_entry;

/* A ring of slots in insertion order (so the oldest, first to expire or to be evicted, is at
 * head) and a chained hash table over it. Shared by thread-pool jobs of several pipelines: mu
 * guards head, n, slots and buckets; the other fields below it are fixed at creation. */
typedef struct span_index {
    uv_mutex_t mu; /* a traces pipeline's work records while a profiles pipeline's looks up */
    uint64_t ttl_ms;
    size_t cap, head, n;
    span_entry *slots;
    uint32_t *buckets; /* slot + 1, 0 = empty */
    size_t mask;
} span_index;

/* Span ids come from clients: the process's seeded hash keeps the bucket of an id unpredictable
 * (a clock-derived seed XORed into a fixed mixer could be guessed). */
static uint32_t *ix_bucket(span_index *ix, uint64_t span)
{
    return &ix->buckets[pc_hash_u64(span) & ix->mask];
}

static span_entry *ix_find(span_index *ix, uint64_t span)
{
    for (uint32_t i = *ix_bucket(ix, span); i; i = ix->slots[i - 1].next)
        if (ix->slots[i - 1].span == span) return &ix->slots[i - 1];
    return NULL;
}

static bool ix_expired(const span_index *ix, const span_entry *e, uint64_t now)
{
    return now >= e->at_ms && now - e->at_ms >= ix->ttl_ms;
}

static void ix_pop_oldest(span_index *ix)
{
    span_entry *e = &ix->slots[ix->head];
    uint32_t *p = ix_bucket(ix, e->span);
    while (*p != ix->head + 1)
        p = &ix->slots[*p - 1].next;
    *p = e->next;
    free(e->strs);
    e->strs = NULL;
    ix->head = (ix->head + 1) % ix->cap;
    ix->n--;
}

static void ix_expire(span_index *ix, uint64_t now)
{
    while (ix->n && ix_expired(ix, &ix->slots[ix->head], now))
        ix_pop_oldest(ix);
}

/* A span prepared outside the lock. */
typedef struct span_rec {
    uint64_t span;
    uint8_t trace[16];
    char *strs; /* handed to the index */
} span_rec;

/* Record n spans; *evicted counts those pushed out by max_spans before their ttl. */
static void ix_record(span_index *ix, span_rec *r, size_t n, uint64_t *evicted)
{
    uv_mutex_lock(&ix->mu);
    uint64_t now = pc_tracelink_now_ms();
    ix_expire(ix, now);
    for (size_t i = 0; i < n; i++) {
        span_entry *e = ix_find(ix, r[i].span);
        if (e) { /* seen again (a retry, a second receiver): newest data, first time kept */
            memcpy(e->trace, r[i].trace, 16);
            free(e->strs);
            e->strs = r[i].strs;
            continue;
        }
        if (ix->n == ix->cap) {
            ix_pop_oldest(ix);
            (*evicted)++;
        }
        size_t slot = (ix->head + ix->n++) % ix->cap;
        uint32_t *b = ix_bucket(ix, r[i].span);
        ix->slots[slot] =
            (span_entry){.span = r[i].span, .at_ms = now, .strs = r[i].strs, .next = *b};
        memcpy(ix->slots[slot].trace, r[i].trace, 16);
        *b = (uint32_t)slot + 1;
    }
    uv_mutex_unlock(&ix->mu);
}

/* The trace id, name and service of a span (strings copied into arena); false if unknown. */
static bool ix_lookup(span_index *ix, const uint8_t span_id[8], uint8_t trace[16], pc_arena *arena,
                      const char **name, const char **service)
{
    uint64_t span;
    memcpy(&span, span_id, 8);
    uv_mutex_lock(&ix->mu);
    uint64_t now = pc_tracelink_now_ms();
    ix_expire(ix, now);
    span_entry *e = ix_find(ix, span);
    if (e) {
        memcpy(trace, e->trace, 16);
        size_t nl = strlen(e->strs);
        *name = pc_arena_strndup(arena, e->strs, nl);
        *service = pc_arena_strndup(arena, e->strs + nl + 1, strlen(e->strs + nl + 1));
    }
    uv_mutex_unlock(&ix->mu);
    return e != NULL;
}

/* The index of c's id (sdk/shared.h: one per component id, whatever pipeline an instance is
 * in), made with the config of the first instance. */
static void *ix_make(const pc_component *c)
{
    const tracelink_cfg *cfg = c->cfg;
    span_index *ix = pc_xcalloc(1, sizeof *ix);
    if (uv_mutex_init(&ix->mu)) abort();
    ix->ttl_ms = cfg->index_ttl_ms;
    ix->cap = (size_t)cfg->index_max_spans;
    size_t nb = 16;
    while (nb < ix->cap)
        nb *= 2;
    ix->mask = nb - 1;
    /* large callocs are mapped lazily: memory grows with what the index holds */
    ix->slots = pc_xcalloc(ix->cap, sizeof *ix->slots);
    ix->buckets = pc_xcalloc(nb, sizeof *ix->buckets);
    return ix;
}

static void ix_free(void *obj)
{
    span_index *ix = obj;
    while (ix->n)
        ix_pop_oldest(ix);
    uv_mutex_destroy(&ix->mu);
    free(ix->slots);
    free(ix->buckets);
    free(ix);
}

/* ---- component -------------------------------------------------------------------------- */

typedef struct tracelink_counts {
    uint64_t linked;    /* samples given a link */
    uint64_t span_only; /* of which without a trace id */
    uint64_t invalid;   /* trace context attributes that are not valid ids */
    uint64_t indexed;   /* spans recorded in the span index */
    uint64_t filled;    /* samples given a trace id from the span index */
    uint64_t evicted;   /* spans pushed out of the index by max_spans before their ttl */
    uint64_t mismatch;  /* filled samples whose service.name differs from the span's */
} tracelink_counts;

typedef struct tracelink_state {
    pc_proc_core core;
    tracelink_counts total; /* self-metrics (loop thread) */
    uint64_t batches;
    span_index *ix; /* shared with the instances of the same id; NULL when disabled */
    bool warned_traces;
} tracelink_state;

static int tracelink_validate(void *cfgp, const pc_node *node, const char *path, pc_error *err)
{
    tracelink_cfg *cfg = cfgp;
    for (size_t i = 0; i < cfg->trace_id_keys.n; i++)
        for (size_t j = 0; j < cfg->span_id_keys.n; j++)
            if (strcmp(cfg->trace_id_keys.v[i], cfg->span_id_keys.v[j]) == 0)
                return pc_cfg_errorf(err, node, path,
                                     "\"%s\" is in both trace_id_keys and span_id_keys",
                                     cfg->trace_id_keys.v[i]);
    if (cfg->index_ttl_ms == 0)
        return pc_cfg_key_errorf(err, node, path, "span_index.ttl", "must be > 0");
    if (cfg->index_max_spans < 1 || cfg->index_max_spans > MAX_SPANS_LIMIT)
        return pc_cfg_key_errorf(err, node, path, "span_index.max_spans", "must be 1 to %d",
                                 MAX_SPANS_LIMIT);
    if (cfg->add_span_name && !cfg->index_enabled)
        return pc_cfg_key_errorf(
            err, node, path, "add_span_name",
            "span names come from the span index: set span_index.enabled: true");
    return 0;
}

static int tracelink_create(pc_component *c, pc_error *err)
{
    (void)err;
    const tracelink_cfg *cfg = c->cfg;
    tracelink_state *st = pc_xcalloc(1, sizeof *st);
    c->priv = st;
    pc_proc_metric(c, "otelcol_processor_tracelink_linked_samples",
                   "Samples given a link from trace context attributes", &st->total.linked);
    pc_proc_metric(c, "otelcol_processor_tracelink_span_only_links",
                   "Links made from a span id without a trace id", &st->total.span_only);
    pc_proc_metric(c, "otelcol_processor_tracelink_invalid_ids",
                   "Trace context attributes that are not valid ids (kept)", &st->total.invalid);
    if (!cfg->index_enabled) return 0;
    st->ix = pc_shared_acquire(c, ix_make, ix_free);
    pc_proc_metric(c, "otelcol_processor_tracelink_indexed_spans",
                   "Spans recorded in the span index", &st->total.indexed);
    pc_proc_metric(c, "otelcol_processor_tracelink_filled_samples",
                   "Samples given a trace id from the span index", &st->total.filled);
    pc_proc_metric(c, "otelcol_processor_tracelink_evicted_spans",
                   "Spans evicted from the span index before their ttl (max_spans reached)",
                   &st->total.evicted);
    pc_proc_metric(c, "otelcol_processor_tracelink_service_mismatches",
                   "Samples filled from a span whose service.name differs from the profile's",
                   &st->total.mismatch);
    return 0;
}

static void tracelink_destroy(pc_component *c)
{
    tracelink_state *st = c->priv;
    if (st) pc_shared_release(st->ix);
    free(st);
}

/* ---- ids -------------------------------------------------------------------------------- */

static bool all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i]) return false;
    return true;
}

/* An id of n bytes from an attribute value; false if it is not one (all-zero ids are invalid,
 * as in OTLP). */
static bool parse_id(const pc_dictionary *d, const pc_anyvalue *v, uint8_t *out, size_t n)
{
    bool ok = false;
    const char *s = pc_anyvalue_str(d, v);
    if (s)
        ok = pc_hex_decode(s, strlen(s), out, n);
    else if (v && v->value_case == PC_AV_BYTES) {
        if (v->bytes_value.len == n) {
            memcpy(out, v->bytes_value.data, n);
            ok = true;
        } else {
            ok = pc_hex_decode((const char *)v->bytes_value.data, v->bytes_value.len, out, n);
        }
    }
    return ok && !all_zero(out, n);
}

static bool in_list(const pc_strlist *l, const char *key)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i], key) == 0) return true;
    return false;
}

/* ---- one profiles batch ----------------------------------------------------------------- */

/* One span looked up in the index, once per batch per attribute or link index. */
typedef struct span_hit {
    uint8_t state; /* 0 not looked up, H_MISS, H_HIT */
    uint8_t trace[16];
    int32_t link;               /* link cache: the link with the filled trace id (0: not yet) */
    int32_t name_attr;          /* the span.name attribute (0: not interned yet) */
    const char *name, *service; /* in the batch arena */
} span_hit;

enum { H_MISS = 1, H_HIT };

typedef struct link_ctx {
    const tracelink_cfg *cfg;
    pc_batch *b;
    const pc_dictionary *d;
    pc_dict_builder *db;
    /* per attribute index: 0 unknown, 1 not trace context, 2 trace id, 3 span id, 4 invalid,
     * 5 a span.name attribute */
    uint8_t *kind;
    span_index *ix;      /* NULL: no index lookups */
    const char *service; /* service.name of the current resource, NULL if none */
    span_hit *by_attr;   /* per attribute index (span id attributes), lazily allocated */
    span_hit *by_link;   /* per link index (links with a span id), lazily allocated */
    tracelink_counts n;
} link_ctx;

enum { K_UNKNOWN, K_OTHER, K_TRACE, K_SPAN, K_INVALID, K_NAME };

static int attr_kind(link_ctx *x, int32_t ai)
{
    const pc_kvu *a = pc_dict_attr_at(x->d, ai);
    if (!a) return K_OTHER;
    if (x->kind[ai]) return x->kind[ai];
    const char *key = pc_dict_str(x->d, a->key_strindex);
    uint8_t id[16];
    int k = K_OTHER;
    if (in_list(&x->cfg->trace_id_keys, key))
        k = parse_id(x->d, a->value, id, 16) ? K_TRACE : K_INVALID;
    else if (in_list(&x->cfg->span_id_keys, key))
        k = parse_id(x->d, a->value, id, 8) ? K_SPAN : K_INVALID;
    else if (strcmp(key, SPAN_NAME_KEY) == 0)
        k = K_NAME;
    x->kind[ai] = (uint8_t)k;
    return k;
}

static pc_dict_builder *builder(link_ctx *x)
{
    if (!x->db) x->db = pc_dict_builder_from(x->b->arena, x->d);
    return x->db;
}

/* The index's entry for span (cached in (*cache)[idx], a table of n); NULL if not indexed. */
static span_hit *lookup(link_ctx *x, span_hit **cache, size_t n, int32_t idx, const uint8_t *span)
{
    if (!*cache) *cache = pc_xcalloc(n, sizeof **cache);
    span_hit *h = &(*cache)[idx];
    if (!h->state)
        h->state =
            ix_lookup(x->ix, span, h->trace, x->b->arena, &h->name, &h->service) ? H_HIT : H_MISS;
    return h->state == H_HIT ? h : NULL;
}

/* A sample got its trace id from h: count it, and whether the services disagree. */
static void filled(link_ctx *x, const span_hit *h)
{
    x->n.filled++;
    if (x->service && h->service[0] && strcmp(x->service, h->service) != 0) x->n.mismatch++;
}

/* The span.name attribute to add for h, or 0 (not asked for, or no name). */
static int32_t name_attr(link_ctx *x, span_hit *h)
{
    if (!h || !x->cfg->add_span_name || !h->name[0]) return 0;
    if (!h->name_attr)
        h->name_attr = pc_dict_attr_str(builder(x), SPAN_NAME_KEY, h->name, strlen(h->name));
    return h->name_attr;
}

/* The sample's attributes without those at positions skip1/skip2 (-1: none), plus add (0: none). */
static void set_attrs(link_ctx *x, pc_sample *s, ssize_t skip1, ssize_t skip2, int32_t add)
{
    size_t n = s->n_attribute_indices, k = 0;
    int32_t *out = pc_arena_alloc(x->b->arena, (n + 1) * sizeof *out);
    for (size_t i = 0; i < n; i++)
        if ((ssize_t)i != skip1 && (ssize_t)i != skip2) out[k++] = s->attribute_indices[i];
    if (add) out[k++] = add;
    s->attribute_indices = k ? out : NULL;
    s->n_attribute_indices = k;
}

static bool has_name_attr(link_ctx *x, const pc_sample *s)
{
    for (size_t i = 0; s->attribute_indices && i < s->n_attribute_indices; i++)
        if (attr_kind(x, s->attribute_indices[i]) == K_NAME) return true;
    return false;
}

/* A sample that already has a link: with the index, a zero trace id is filled in and the span
 * name added. */
static void complete_link(link_ctx *x, pc_sample *s)
{
    int32_t li = s->link_index;
    if (li < 0 || (size_t)li >= x->d->n_link_table || !x->d->link_table[li]) return;
    const pc_link *l = x->d->link_table[li];
    if (l->span_id.len != 8 || all_zero(l->span_id.data, 8)) return;
    span_hit *h = lookup(x, &x->by_link, x->d->n_link_table, li, l->span_id.data);
    if (!h) return;
    if (l->trace_id.len != 16 || all_zero(l->trace_id.data, 16)) {
        if (!h->link) h->link = pc_dict_link(builder(x), h->trace, l->span_id.data);
        s->link_index = h->link;
        filled(x, h);
    } else if (memcmp(l->trace_id.data, h->trace, 16) != 0) {
        return; /* the same span id in another trace: not this span's name */
    }
    int32_t add = name_attr(x, h);
    if (add && !has_name_attr(x, s)) set_attrs(x, s, -1, -1, add);
}

static void link_sample(link_ctx *x, pc_sample *s)
{
    if (s->link_index != 0) {
        if (x->ix) complete_link(x, s);
        return;
    }
    if (!s->n_attribute_indices || !s->attribute_indices) return;
    uint8_t trace[16] = {0}, span[8] = {0};
    ssize_t ti = -1, si = -1;
    bool named = false;
    for (size_t i = 0; i < s->n_attribute_indices; i++) {
        int32_t ai = s->attribute_indices[i];
        int k = attr_kind(x, ai);
        if (k == K_INVALID)
            x->n.invalid++;
        else if (k == K_TRACE && ti < 0)
            ti = (ssize_t)i;
        else if (k == K_SPAN && si < 0)
            si = (ssize_t)i;
        else if (k == K_NAME)
            named = true;
    }
    if (ti < 0 && si < 0) return;
    if (ti >= 0) parse_id(x->d, pc_dict_attr_at(x->d, s->attribute_indices[ti])->value, trace, 16);
    if (si >= 0) parse_id(x->d, pc_dict_attr_at(x->d, s->attribute_indices[si])->value, span, 8);
    span_hit *h = NULL;
    if (x->ix && si >= 0)
        h = lookup(x, &x->by_attr, x->d->n_attribute_table, s->attribute_indices[si], span);
    if (h && ti < 0) {
        memcpy(trace, h->trace, 16);
        filled(x, h);
    } else if (h && memcmp(trace, h->trace, 16) != 0) {
        h = NULL; /* the same span id in another trace: not this span's name */
    }
    s->link_index = pc_dict_link(builder(x), trace, span);
    x->n.linked++;
    if (all_zero(trace, 16)) x->n.span_only++;
    int32_t add = named ? 0 : name_attr(x, h);
    if (x->cfg->remove_attributes)
        set_attrs(x, s, ti, si, add);
    else if (add)
        set_attrs(x, s, -1, -1, add);
}

static void link_profiles(pc_proc_job *pj, span_index *ix, tracelink_counts *counts)
{
    pc_batch_make_writable(&pj->b);
    pc_batch *b = pj->b;
    link_ctx x = {.cfg = pj->c->cfg, .b = b, .d = pc_batch_req(b)->dictionary, .ix = ix};
    if (!x.d) return;
    /* nothing to link, nor (with the index) any link to complete */
    if (x.d->n_attribute_table < 2 && !(ix && x.d->n_link_table >= 2)) return;
    x.kind = pc_xcalloc(x.d->n_attribute_table + 1, 1);
    for (size_t i = 0; i < pc_batch_req(b)->n_resource_profiles; i++) {
        pc_resource_profiles *rp = pc_batch_req(b)->resource_profiles[i];
        if (!rp) continue;
        x.service = pc_resource_attr_str(x.d, rp->resource, "service.name");
        for (size_t j = 0; j < rp->n_scope_profiles; j++) {
            pc_scope_profiles *sp = rp->scope_profiles[j];
            for (size_t k = 0; sp && k < sp->n_profiles; k++) {
                pc_profile *p = sp->profiles[k];
                for (size_t s = 0; p && s < p->n_samples; s++)
                    if (p->samples[s]) link_sample(&x, p->samples[s]);
            }
        }
    }
    if (x.db) {
        pc_batch_req(b)->dictionary = pc_dict_builder_finish(x.db);
        pc_dict_builder_free(x.db);
    }
    free(x.kind);
    free(x.by_attr);
    free(x.by_link);
    *counts = x.n;
}

/* ---- one traces batch ------------------------------------------------------------------- */

#define REC_CHUNK 256 /* spans per lock: profiles lookups wait at most this long */

static char *span_strs(const char *name, const char *service)
{
    size_t nl = strlen(name), sl = strlen(service);
    char *s = pc_xmalloc(nl + sl + 2);
    memcpy(s, name, nl + 1);
    memcpy(s + nl + 1, service, sl + 1);
    return s;
}

/* Record every span of the batch; the batch itself is only read (it may be shared). */
static void index_traces(const pc_batch *b, span_index *ix, tracelink_counts *counts)
{
    const pc_traces_request *r = (const pc_traces_request *)b->msg;
    span_rec rec[REC_CHUNK];
    size_t n = 0;
    for (size_t i = 0; r && i < r->n_resource_spans; i++) {
        const pc_resource_spans *rs = r->resource_spans[i];
        if (!rs) continue;
        const char *service = pc_resource_attr_str(NULL, rs->resource, "service.name");
        for (size_t j = 0; j < rs->n_scope_spans; j++) {
            const pc_scope_spans *ss = rs->scope_spans[j];
            for (size_t k = 0; ss && k < ss->n_spans; k++) {
                const pc_span *sp = ss->spans[k];
                if (!sp || sp->span_id.len != 8 || sp->trace_id.len != 16 ||
                    all_zero(sp->span_id.data, 8) || all_zero(sp->trace_id.data, 16))
                    continue; /* invalid in OTLP: nothing to link to */
                memcpy(&rec[n].span, sp->span_id.data, 8);
                memcpy(rec[n].trace, sp->trace_id.data, 16);
                rec[n].strs = span_strs(sp->name ? sp->name : "", service ? service : "");
                counts->indexed++;
                if (++n == REC_CHUNK) {
                    ix_record(ix, rec, n, &counts->evicted);
                    n = 0;
                }
            }
        }
    }
    if (n) ix_record(ix, rec, n, &counts->evicted);
}

/* ---- jobs ------------------------------------------------------------------------------- */

typedef struct tracelink_job {
    pc_proc_job j;
    span_index *ix;
    tracelink_counts n;
} tracelink_job;

static void tracelink_run(pc_proc_job *pj)
{
    tracelink_job *job = (tracelink_job *)pj;
    if (pj->b->signal == PC_SIGNAL_TRACES)
        index_traces(pj->b, job->ix, &job->n);
    else
        link_profiles(pj, job->ix, &job->n);
}

static void tracelink_after(pc_proc_job *pj)
{
    tracelink_job *job = (tracelink_job *)pj;
    tracelink_state *st = pj->c->priv;
    tracelink_counts *t = &st->total, *n = &job->n;
    st->batches++;
    t->linked += n->linked;
    t->span_only += n->span_only;
    t->invalid += n->invalid;
    t->indexed += n->indexed;
    t->filled += n->filled;
    t->evicted += n->evicted;
    t->mismatch += n->mismatch;
    if (n->invalid)
        PC_DEBUG(pj->c->id, "%" PRIu64 " trace context attributes are not valid ids; kept",
                 n->invalid);
    if (n->evicted)
        PC_DEBUG(pj->c->id,
                 "%" PRIu64 " spans evicted from the span index before their ttl; raise "
                 "span_index.max_spans",
                 n->evicted);
}

static void tracelink_consume(pc_component *c, pc_batch *b, pc_done_fn done, void *arg)
{
    tracelink_state *st = c->priv;
    if (b->signal != PC_SIGNAL_PROFILES && (b->signal != PC_SIGNAL_TRACES || !st->ix)) {
        /* nothing to do: a traces pipeline is only useful with the index */
        if (b->signal == PC_SIGNAL_TRACES && !st->warned_traces) {
            st->warned_traces = true;
            PC_WARN(c->id, "span_index.enabled is false: traces pass through unindexed");
        }
        pc_consume(c->next, b, done, arg);
        return;
    }
    tracelink_job *job = pc_xcalloc(1, sizeof *job);
    job->j = (pc_proc_job){.c = c,
                           .core = &st->core,
                           .b = b,
                           .done = done,
                           .arg = arg,
                           .run = tracelink_run,
                           .after = tracelink_after};
    job->ix = st->ix;
    pc_proc_job_submit(&job->j);
}

static void tracelink_shutdown(pc_component *c, pc_shutdown_done done)
{
    tracelink_state *st = c->priv;
    if (!st) {
        done(c);
        return;
    }
    PC_DEBUG(c->id,
             "%" PRIu64 " batches: %" PRIu64 " samples linked (%" PRIu64 " span only), %" PRIu64
             " invalid ids",
             st->batches, st->total.linked, st->total.span_only, st->total.invalid);
    if (st->ix)
        PC_DEBUG(c->id,
                 "span index: %" PRIu64 " spans indexed, %" PRIu64 " evicted early, %" PRIu64
                 " samples filled (%" PRIu64 " from another service)",
                 st->total.indexed, st->total.evicted, st->total.filled, st->total.mismatch);
    pc_proc_core_shutdown(&st->core, c, done);
}

size_t pc_tracelink_counters(const pc_component *c, pc_proc_counter *out, size_t max)
{
    const tracelink_state *st = c->priv;
    const pc_proc_counter all[] = {
        {"samples_linked", st->total.linked},      {"span_only_links", st->total.span_only},
        {"invalid_ids", st->total.invalid},        {"spans_indexed", st->total.indexed},
        {"samples_filled", st->total.filled},      {"spans_evicted", st->total.evicted},
        {"service_mismatches", st->total.mismatch}};
    return pc_proc_counters_copy(all, sizeof all / sizeof all[0], out, max);
}

const pc_component_type pc_processor_tracelink = {
    .name = "tracelink",
    .kind = PC_KIND_PROCESSOR,
    .stability = "development",
    .cfg_size = sizeof(tracelink_cfg),
    .cfg = tracelink_keys,
    .validate = tracelink_validate,
    .create = tracelink_create,
    .consume = tracelink_consume,
    .shutdown = tracelink_shutdown,
    .destroy = tracelink_destroy,
    .mutates = true, /* profiles only; traces are read, never written */
    .signals = PC_SIGNAL_BIT(PC_SIGNAL_PROFILES) | PC_SIGNAL_BIT(PC_SIGNAL_TRACES),
    .doc = "turns trace_id / span_id sample attributes into links; optionally indexes spans of a "
           "traces pipeline to fill in trace ids and span names",
};
