/* Processor "tracelink": sample attributes that carry trace context become a Link.
 *
 * A sample whose attributes hold a trace id (keys `trace_id_keys`) and/or a span id (keys
 * `span_id_keys`, which include Pyroscope's `profile_id` span label) gets a Link in the
 * dictionary and its link_index. Values are hex (any case) of 32 characters for trace ids and 16
 * for span ids, as string, string_value_strindex or bytes values (bytes may also hold the raw 16
 * or 8 id bytes). Invalid values are left alone and counted. A span id without a trace id makes
 * a link with a zero trace id (counted), a trace id alone one with a zero span id.
 * `remove_attributes` (default true) drops the attributes that made the link, cutting label
 * cardinality. Samples that already have a link are left alone. Samples are never merged, so
 * two samples that now differ only by link_index stay two samples. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "pdata/dict.h"
#include "pipeline/component.h"
#include "processors/proc_util.h"

typedef struct tracelink_cfg {
    pc_strlist trace_id_keys, span_id_keys;
    bool remove_attributes;
} tracelink_cfg;

static const pc_cfg_key tracelink_keys[] = {
    {"trace_id_keys", PC_CFG_LIST, "trace_id,traceID,trace.id",
     offsetof(tracelink_cfg, trace_id_keys), "sample attribute keys holding a trace id (32 hex)",
     NULL},
    {"span_id_keys", PC_CFG_LIST, "span_id,spanID,span.id,profile_id",
     offsetof(tracelink_cfg, span_id_keys), "sample attribute keys holding a span id (16 hex)",
     NULL},
    {"remove_attributes", PC_CFG_BOOL, "true", offsetof(tracelink_cfg, remove_attributes),
     "remove the attributes that made a link", NULL},
    {NULL, 0, NULL, 0, NULL, NULL},
};

typedef struct tracelink_counts {
    uint64_t linked;    /* samples given a link */
    uint64_t span_only; /* of which without a trace id */
    uint64_t invalid;   /* trace context attributes that are not valid ids */
} tracelink_counts;

typedef struct tracelink_state {
    pc_proc_async as;
    tracelink_counts total; /* self-metrics (loop thread) */
    uint64_t batches;
} tracelink_state;

static int tracelink_validate(void *cfgp, const pc_node *node, const char *path, pc_cfg_err *err)
{
    tracelink_cfg *cfg = cfgp;
    for (size_t i = 0; i < cfg->trace_id_keys.n; i++)
        for (size_t j = 0; j < cfg->span_id_keys.n; j++)
            if (strcmp(cfg->trace_id_keys.v[i], cfg->span_id_keys.v[j]) == 0) {
                pc_cfg_errorf(err, node, path, "\"%s\" is in both trace_id_keys and span_id_keys",
                              cfg->trace_id_keys.v[i]);
                return -1;
            }
    return 0;
}

static int tracelink_create(pc_component *c, pc_cfg_err *err)
{
    (void)err;
    tracelink_state *st = pc_xcalloc(1, sizeof *st);
    c->priv = st;
    pc_proc_metric(c, "otelcol_processor_tracelink_linked_samples",
                   "Samples given a link from trace context attributes", &st->total.linked);
    pc_proc_metric(c, "otelcol_processor_tracelink_span_only_links",
                   "Links made from a span id without a trace id", &st->total.span_only);
    pc_proc_metric(c, "otelcol_processor_tracelink_invalid_ids",
                   "Trace context attributes that are not valid ids (kept)", &st->total.invalid);
    return 0;
}

static void tracelink_destroy(pc_component *c)
{
    if (c->priv) pc_metric_unregister(c);
    free(c->priv);
    c->priv = NULL;
}

/* ---- ids -------------------------------------------------------------------------------- */

static int hexval(int ch)
{
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

static bool parse_hex(const char *s, size_t len, uint8_t *out, size_t n)
{
    if (len != 2 * n) return false;
    for (size_t i = 0; i < n; i++) {
        int hi = hexval((unsigned char)s[2 * i]), lo = hexval((unsigned char)s[2 * i + 1]);
        if (hi < 0 || lo < 0) return false;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return true;
}

/* An id of n bytes from an attribute value; false if it is not one (all-zero ids are invalid,
 * as in OTLP). */
static bool parse_id(const pc_dictionary *d, const pc_anyvalue *v, uint8_t *out, size_t n)
{
    bool ok = false;
    const char *s = pc_anyvalue_str(d, v);
    if (s)
        ok = parse_hex(s, strlen(s), out, n);
    else if (v && v->value_case == PC_AV_BYTES) {
        if (v->bytes_value.len == n) {
            memcpy(out, v->bytes_value.data, n);
            ok = true;
        } else {
            ok = parse_hex((const char *)v->bytes_value.data, v->bytes_value.len, out, n);
        }
    }
    if (!ok) return false;
    for (size_t i = 0; i < n; i++)
        if (out[i]) return true;
    return false;
}

static bool in_list(const pc_strlist *l, const char *key)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i], key) == 0) return true;
    return false;
}

/* ---- one batch -------------------------------------------------------------------------- */

typedef struct link_ctx {
    const tracelink_cfg *cfg;
    pc_batch *b;
    const pc_dictionary *d;
    pc_dict_builder *db;
    /* per attribute index: 0 unknown, 1 not trace context, 2 trace id, 3 span id, 4 invalid */
    uint8_t *kind;
    tracelink_counts n;
} link_ctx;

enum { K_UNKNOWN, K_OTHER, K_TRACE, K_SPAN, K_INVALID };

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
    x->kind[ai] = (uint8_t)k;
    return k;
}

static void link_sample(link_ctx *x, pc_sample *s)
{
    if (s->link_index != 0 || !s->n_attribute_indices || !s->attribute_indices) return;
    uint8_t trace[16] = {0}, span[8] = {0};
    ssize_t ti = -1, si = -1;
    for (size_t i = 0; i < s->n_attribute_indices; i++) {
        int32_t ai = s->attribute_indices[i];
        int k = attr_kind(x, ai);
        if (k == K_INVALID)
            x->n.invalid++;
        else if (k == K_TRACE && ti < 0)
            ti = (ssize_t)i;
        else if (k == K_SPAN && si < 0)
            si = (ssize_t)i;
    }
    if (ti < 0 && si < 0) return;
    if (ti >= 0) parse_id(x->d, pc_dict_attr_at(x->d, s->attribute_indices[ti])->value, trace, 16);
    if (si >= 0) parse_id(x->d, pc_dict_attr_at(x->d, s->attribute_indices[si])->value, span, 8);
    if (!x->db) x->db = pc_dict_builder_from(x->b->arena, x->d);
    s->link_index = pc_dict_link(x->db, trace, span);
    x->n.linked++;
    if (ti < 0) x->n.span_only++;
    if (!x->cfg->remove_attributes) return;
    size_t n = s->n_attribute_indices, k = 0;
    int32_t *out = pc_arena_alloc(x->b->arena, n * sizeof *out);
    for (size_t i = 0; i < n; i++)
        if ((ssize_t)i != ti && (ssize_t)i != si) out[k++] = s->attribute_indices[i];
    s->attribute_indices = k ? out : NULL;
    s->n_attribute_indices = k;
}

typedef struct tracelink_job {
    pc_proc_job j;
    tracelink_counts n;
} tracelink_job;

static void tracelink_run(pc_proc_job *pj)
{
    tracelink_job *job = (tracelink_job *)pj;
    pc_batch_make_writable(&pj->b);
    pc_batch *b = pj->b;
    link_ctx x = {.cfg = pj->c->cfg, .b = b, .d = b->req->dictionary};
    if (!x.d || x.d->n_attribute_table < 2) return; /* no attributes, nothing to link */
    x.kind = pc_xcalloc(x.d->n_attribute_table, 1);
    for (size_t i = 0; i < b->req->n_resource_profiles; i++) {
        pc_resource_profiles *rp = b->req->resource_profiles[i];
        for (size_t j = 0; rp && j < rp->n_scope_profiles; j++) {
            pc_scope_profiles *sp = rp->scope_profiles[j];
            for (size_t k = 0; sp && k < sp->n_profiles; k++) {
                pc_profile *p = sp->profiles[k];
                for (size_t s = 0; p && s < p->n_samples; s++)
                    if (p->samples[s]) link_sample(&x, p->samples[s]);
            }
        }
    }
    if (x.db) {
        b->req->dictionary = pc_dict_builder_finish(x.db);
        pc_dict_builder_free(x.db);
    }
    free(x.kind);
    job->n = x.n;
}

static void tracelink_after(pc_proc_job *pj)
{
    tracelink_job *job = (tracelink_job *)pj;
    tracelink_state *st = pj->c->priv;
    st->batches++;
    st->total.linked += job->n.linked;
    st->total.span_only += job->n.span_only;
    st->total.invalid += job->n.invalid;
    if (job->n.invalid)
        PC_DEBUG(pj->c->id, "%" PRIu64 " trace context attributes are not valid ids; kept",
                 job->n.invalid);
}

static void tracelink_consume(pc_component *c, pc_batch *b, pc_done_fn done, void *arg)
{
    tracelink_state *st = c->priv;
    tracelink_job *job = pc_xcalloc(1, sizeof *job);
    job->j = (pc_proc_job){.c = c,
                           .as = &st->as,
                           .b = b,
                           .done = done,
                           .arg = arg,
                           .run = tracelink_run,
                           .after = tracelink_after};
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
    pc_proc_async_shutdown(&st->as, c, done);
}

size_t pc_tracelink_counters(const pc_component *c, pc_proc_counter *out, size_t max)
{
    const tracelink_state *st = c->priv;
    const pc_proc_counter all[] = {{"samples_linked", st->total.linked},
                                   {"span_only_links", st->total.span_only},
                                   {"invalid_ids", st->total.invalid}};
    return pc_proc_counters_copy(all, sizeof all / sizeof all[0], out, max);
}

const pc_component_type pc_processor_tracelink = {
    .name = "tracelink",
    .kind = PC_KIND_PROCESSOR,
    .stability = "development",
    .doc = "turns trace_id / span_id sample attributes into links",
    .cfg_size = sizeof(tracelink_cfg),
    .cfg = tracelink_keys,
    .validate = tracelink_validate,
    .create = tracelink_create,
    .consume = tracelink_consume,
    .shutdown = tracelink_shutdown,
    .destroy = tracelink_destroy,
    .mutates = true,
};
