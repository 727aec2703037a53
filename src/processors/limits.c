/* Processor "limits": the guards users set on agents, applied on the thread pool.
 *
 * - max_stack_depth: a deeper stack keeps its leaf-most N-1 locations plus one synthetic location
 *   whose function is "[truncated]" (so the stack has exactly N).
 * - max_samples_per_profile: a profile with more samples keeps the N-1 heaviest (|sum of values|;
 *   a timestamps-only sample weighs its number of timestamps) and folds the rest into one sample
 *   whose stack is the single frame "[other]", so the profile's value total is unchanged. The
 *   folded sample keeps the profile's shape where the folded samples share one (timestamps only,
 *   or values with timestamps: concatenated), otherwise it holds one value, their total.
 * - max_profile_bytes: drops whole profiles whose encoded size is larger. The size is that of the
 *   Profile message plus every dictionary entry it references (each counted once, with its field
 *   tag and length), i.e. what the profile would weigh alone in a request.
 * Order: depth, then samples, then bytes (a profile that fits after the first two is kept). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pdata/dict.h"
#include "pdata/merge.h"
#include "sdk/component.h"
#include "sdk/telemetry.h"
#include "sdk/processor.h"

typedef struct limits_cfg {
    int64_t max_stack_depth;
    int64_t max_samples_per_profile;
    uint64_t max_profile_bytes;
} limits_cfg;

/* clang-format off */
static const pc_cfg_key limits_keys[] = {
    {"max_stack_depth", PC_CFG_INT, "0", offsetof(limits_cfg, max_stack_depth), "deeper stacks keep the leaf-most frames plus one \"[truncated]\" frame (0: off)", NULL},
    {"max_samples_per_profile", PC_CFG_INT, "0", offsetof(limits_cfg, max_samples_per_profile), "keep the heaviest samples, fold the rest into one \"[other]\" sample (0: off)", NULL},
    {"max_profile_bytes", PC_CFG_SIZE, "0", offsetof(limits_cfg, max_profile_bytes), "drop profiles whose encoding (with the dictionary entries they use) is larger (0: off)", NULL},
    {0},
};
/* clang-format on */

/* What was done to one batch; added to the component's counters on the loop thread. */
typedef struct limits_stats {
    uint64_t samples_truncated, profiles_truncated;            /* max_stack_depth */
    uint64_t samples_folded, profiles_folded;                  /* max_samples_per_profile */
    uint64_t profiles_dropped, samples_dropped, bytes_dropped; /* max_profile_bytes */
} limits_stats;

typedef struct limits_proc {
    limits_stats total; /* self-metrics */
    pc_proc_core core;
} limits_proc;

typedef struct limits_job {
    pc_proc_job j; /* first: the processor core's */
    limits_stats st;
} limits_job;

static int limits_validate(void *cfgp, const pc_node *node, const char *path, pc_error *err)
{
    limits_cfg *cfg = cfgp;
    if (cfg->max_stack_depth < 0)
        return pc_cfg_key_errorf(err, node, path, "max_stack_depth", "must be >= 0");
    if (cfg->max_samples_per_profile < 0)
        return pc_cfg_key_errorf(err, node, path, "max_samples_per_profile", "must be >= 0");
    if (cfg->max_stack_depth > INT32_MAX)
        return pc_cfg_key_errorf(err, node, path, "max_stack_depth", "must be < 2^31");
    if (cfg->max_samples_per_profile > INT32_MAX)
        return pc_cfg_key_errorf(err, node, path, "max_samples_per_profile", "must be < 2^31");
    return 0;
}

static int limits_create(pc_component *c, pc_error *err)
{
    (void)err;
    limits_proc *lp = pc_xcalloc(1, sizeof(limits_proc));
    c->priv = lp;
    const limits_stats *st = &lp->total;
    pc_proc_metric(c, "otelcol_processor_limits_samples_truncated",
                   "Samples whose stack was cut to max_stack_depth", &st->samples_truncated);
    pc_proc_metric(c, "otelcol_processor_limits_samples_folded",
                   "Samples folded into [other] by max_samples_per_profile", &st->samples_folded);
    pc_proc_metric(c, "otelcol_processor_limits_profiles_dropped",
                   "Profiles dropped by max_profile_bytes", &st->profiles_dropped);
    pc_proc_metric(c, "otelcol_processor_limits_samples_dropped",
                   "Samples dropped with profiles over max_profile_bytes", &st->samples_dropped);
    return 0;
}

static void limits_destroy(pc_component *c)
{
    free(c->priv);
}

/* A location whose only frame is the (otherwise empty) function `name`. */
static int32_t synthetic_location(pc_dict_builder *db, const char *name)
{
    int32_t fn = pc_dict_function(db, pc_dict_cstring(db, name), 0, 0, 0);
    pc_line line;
    opentelemetry__proto__profiles__v1development__line__init(&line);
    line.function_index = fn;
    pc_line *lines[1] = {&line};
    pc_location loc;
    opentelemetry__proto__profiles__v1development__location__init(&loc);
    loc.n_lines = 1;
    loc.lines = lines;
    return pc_dict_location(db, &loc);
}

/* State of one pass over a batch: the dictionary builder is made on first need. */
typedef struct pass {
    pc_batch *b;
    const pc_dictionary *d; /* the batch's dictionary as it came in */
    pc_dict_builder *db;
    int32_t *trunc; /* original stack index -> truncated stack index (0: not yet) */
    int32_t trunc_loc, other_stack;
    int32_t *locs;
    size_t locs_cap;
} pass;

static pc_dict_builder *builder(pass *ps)
{
    if (!ps->db) ps->db = pc_dict_builder_from(ps->b->arena, ps->d);
    return ps->db;
}

static int32_t truncated_stack(pass *ps, int32_t idx, size_t max)
{
    if (!ps->trunc) ps->trunc = pc_xcalloc(ps->d->n_stack_table, sizeof(int32_t));
    if (ps->trunc[idx]) return ps->trunc[idx];
    pc_dict_builder *db = builder(ps);
    if (!ps->trunc_loc) ps->trunc_loc = synthetic_location(db, "[truncated]");
    if (max > ps->locs_cap) {
        ps->locs_cap = max;
        ps->locs = pc_xrealloc(ps->locs, max * sizeof(int32_t));
    }
    const pc_stack *s = ps->d->stack_table[idx];
    memcpy(ps->locs, s->location_indices, (max - 1) * sizeof(int32_t)); /* leaf first */
    ps->locs[max - 1] = ps->trunc_loc;
    return ps->trunc[idx] = pc_dict_stack(db, ps->locs, max);
}

static void limit_depth(pass *ps, pc_profile *p, size_t max, limits_stats *st)
{
    const pc_dictionary *d = ps->d;
    size_t nst = d->stack_table ? d->n_stack_table : 0;
    uint64_t hit = 0;
    for (size_t i = 0; i < pc_profile_n_samples(p); i++) {
        pc_sample *s = p->samples[i];
        if (!s || s->stack_index <= 0 || (size_t)s->stack_index >= nst) continue;
        const pc_stack *stk = d->stack_table[s->stack_index];
        if (!stk || !stk->location_indices || stk->n_location_indices <= max) continue;
        s->stack_index = truncated_stack(ps, s->stack_index, max);
        hit++;
    }
    if (hit) {
        st->samples_truncated += hit;
        st->profiles_truncated++;
    }
}

typedef struct weighted {
    double w;
    size_t i;
} weighted;

static int by_weight(const void *a, const void *b)
{
    const weighted *x = a, *y = b;
    if (x->w != y->w) return x->w < y->w ? 1 : -1; /* heaviest first */
    return (x->i > y->i) - (x->i < y->i);
}

static int64_t sample_total(const pc_sample *s)
{
    if (s->values && s->n_values) {
        int64_t t = 0;
        for (size_t k = 0; k < s->n_values; k++)
            t += s->values[k];
        return t;
    }
    return (int64_t)(s->timestamps_unix_nano ? s->n_timestamps_unix_nano : 0);
}

/* One sample holding the value total of samples `folded` (n of them), stack "[other]". */
static pc_sample *fold(pass *ps, pc_sample **folded, size_t n)
{
    pc_arena *a = ps->b->arena;
    bool all_ts = true, no_vals = true, per_ts = true;
    size_t nts = 0;
    int64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        const pc_sample *s = folded[i];
        size_t t = s->timestamps_unix_nano ? s->n_timestamps_unix_nano : 0;
        size_t v = s->values ? s->n_values : 0;
        all_ts &= t > 0;
        no_vals &= v == 0;
        per_ts &= t > 0 && v == t;
        nts += t;
        total += sample_total(s);
    }
    pc_sample *o = pc_arena_alloc(a, sizeof *o);
    opentelemetry__proto__profiles__v1development__sample__init(o);
    if (!ps->other_stack) {
        int32_t loc = synthetic_location(builder(ps), "[other]");
        ps->other_stack = pc_dict_stack(builder(ps), &loc, 1);
    }
    o->stack_index = ps->other_stack;
    if (all_ts && (no_vals || per_ts)) { /* keep the profile's shape: concatenate */
        o->n_timestamps_unix_nano = nts;
        o->timestamps_unix_nano = pc_arena_alloc(a, nts * sizeof(uint64_t));
        if (per_ts) {
            o->n_values = nts;
            o->values = pc_arena_alloc(a, nts * sizeof(int64_t));
        }
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            const pc_sample *s = folded[i];
            memcpy(o->timestamps_unix_nano + k, s->timestamps_unix_nano,
                   s->n_timestamps_unix_nano * sizeof(uint64_t));
            if (per_ts) memcpy(o->values + k, s->values, s->n_values * sizeof(int64_t));
            k += s->n_timestamps_unix_nano;
        }
        return o;
    }
    o->n_values = 1;
    o->values = pc_arena_alloc(a, sizeof(int64_t));
    o->values[0] = total;
    return o;
}

static void limit_samples(pass *ps, pc_profile *p, size_t max, limits_stats *st)
{
    size_t n = pc_profile_n_samples(p), live = 0;
    for (size_t i = 0; i < n; i++)
        live += p->samples[i] != NULL;
    if (live <= max) return;
    weighted *w = pc_xmalloc(live * sizeof *w);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!p->samples[i]) continue;
        int64_t t = sample_total(p->samples[i]);
        w[k++] = (weighted){t < 0 ? -(double)t : (double)t, i};
    }
    qsort(w, live, sizeof *w, by_weight);
    bool *keep = pc_xcalloc(n, 1);
    for (size_t i = 0; i + 1 < max; i++)
        keep[w[i].i] = true;
    pc_sample **folded = pc_xmalloc(live * sizeof *folded);
    size_t nf = 0, out = 0;
    for (size_t i = 0; i < n; i++) {
        if (!p->samples[i]) continue;
        if (keep[i])
            p->samples[out++] = p->samples[i]; /* kept ones stay in their order */
        else
            folded[nf++] = p->samples[i];
    }
    p->samples[out++] = fold(ps, folded, nf);
    p->n_samples = out;
    st->samples_folded += nf;
    st->profiles_folded++;
    free(folded);
    free(keep);
    free(w);
}

static void limit_bytes(pc_request *r, uint64_t max, limits_stats *st)
{
    pc_dict_used *u = pc_dict_used_new(r->dictionary);
    for (size_t i = 0; i < r->n_resource_profiles; i++) {
        pc_resource_profiles *rp = r->resource_profiles[i];
        for (size_t j = 0; rp && rp->scope_profiles && j < rp->n_scope_profiles; j++) {
            pc_scope_profiles *sp = rp->scope_profiles[j];
            for (size_t k = 0; sp && sp->profiles && k < sp->n_profiles; k++) {
                pc_profile *p = sp->profiles[k];
                if (!p) continue;
                pc_dict_used_reset(u);
                pc_dict_used_profile(u, p, 0, pc_profile_n_samples(p));
                size_t size = protobuf_c_message_get_packed_size(&p->base) + pc_dict_used_bytes(u);
                if (size <= max) continue;
                st->profiles_dropped++;
                st->samples_dropped += pc_profile_n_samples(p);
                st->bytes_dropped += size;
                sp->profiles[k] = NULL;
            }
        }
    }
    pc_dict_used_free(u);
    if (st->profiles_dropped) pc_request_prune(r);
}

static void limits_work(pc_proc_job *pj)
{
    limits_job *j = (limits_job *)pj;
    const limits_cfg *cfg = pj->c->cfg;
    pc_batch_make_writable(&pj->b);
    pc_request *r = pc_batch_req(pj->b);
    pass ps = {.b = pj->b, .d = r->dictionary};
    if (ps.d && (cfg->max_stack_depth || cfg->max_samples_per_profile)) {
        for (size_t i = 0; i < r->n_resource_profiles; i++) {
            pc_resource_profiles *rp = r->resource_profiles[i];
            for (size_t k = 0; rp && rp->scope_profiles && k < rp->n_scope_profiles; k++) {
                pc_scope_profiles *sp = rp->scope_profiles[k];
                for (size_t m = 0; sp && sp->profiles && m < sp->n_profiles; m++) {
                    pc_profile *p = sp->profiles[m];
                    if (!p) continue;
                    if (cfg->max_stack_depth)
                        limit_depth(&ps, p, (size_t)cfg->max_stack_depth, &j->st);
                    if (cfg->max_samples_per_profile)
                        limit_samples(&ps, p, (size_t)cfg->max_samples_per_profile, &j->st);
                }
            }
        }
    }
    if (ps.db) r->dictionary = pc_dict_builder_finish(ps.db);
    pc_dict_builder_free(ps.db);
    free(ps.trunc);
    free(ps.locs);
    if (cfg->max_profile_bytes) limit_bytes(r, cfg->max_profile_bytes, &j->st);
    /* everything was dropped on purpose (and counted): nothing to pass on */
    pj->drop = r->n_resource_profiles == 0;
}

static void limits_after(pc_proc_job *pj)
{
    limits_job *j = (limits_job *)pj;
    pc_component *c = pj->c;
    limits_proc *lp = c->priv;
    const limits_stats *st = &j->st;
    lp->total.samples_truncated += st->samples_truncated;
    lp->total.profiles_truncated += st->profiles_truncated;
    lp->total.samples_folded += st->samples_folded;
    lp->total.profiles_folded += st->profiles_folded;
    lp->total.profiles_dropped += st->profiles_dropped;
    lp->total.samples_dropped += st->samples_dropped;
    lp->total.bytes_dropped += st->bytes_dropped;
    if (st->profiles_truncated)
        PC_DEBUG(c->id, "max_stack_depth: truncated the stacks of %llu samples in %llu profiles",
                 (unsigned long long)st->samples_truncated,
                 (unsigned long long)st->profiles_truncated);
    if (st->profiles_folded)
        PC_DEBUG(c->id,
                 "max_samples_per_profile: folded %llu samples of %llu profiles into [other]",
                 (unsigned long long)st->samples_folded, (unsigned long long)st->profiles_folded);
    if (st->profiles_dropped)
        PC_WARN(c->id,
                "max_profile_bytes: dropped %llu profiles (%llu samples, ~%llu bytes) larger than "
                "%llu bytes",
                (unsigned long long)st->profiles_dropped, (unsigned long long)st->samples_dropped,
                (unsigned long long)st->bytes_dropped,
                (unsigned long long)((limits_cfg *)c->cfg)->max_profile_bytes);
}

static void limits_consume(pc_component *c, pc_batch *b, pc_done_fn done, void *arg)
{
    const limits_cfg *cfg = c->cfg;
    if (!cfg->max_stack_depth && !cfg->max_samples_per_profile && !cfg->max_profile_bytes) {
        pc_consume(c->next, b, done, arg);
        return;
    }
    limits_job *j = pc_xcalloc(1, sizeof *j);
    j->j = (pc_proc_job){.c = c,
                         .core = &((limits_proc *)c->priv)->core,
                         .b = b,
                         .done = done,
                         .arg = arg,
                         .run = limits_work,
                         .after = limits_after};
    pc_proc_job_submit(&j->j);
}

static void limits_shutdown(pc_component *c, pc_shutdown_done done)
{
    pc_proc_core_shutdown(&((limits_proc *)c->priv)->core, c, done);
}

const pc_component_type pc_processor_limits = {
    .name = "limits",
    .kind = PC_KIND_PROCESSOR,
    .stability = "development",
    .cfg_size = sizeof(limits_cfg),
    .cfg = limits_keys,
    .validate = limits_validate,
    .create = limits_create,
    .consume = limits_consume,
    .shutdown = limits_shutdown,
    .destroy = limits_destroy,
    .mutates = true,
    .doc = "caps stack depth ([truncated]) and samples per profile ([other], totals kept); drops "
           "oversized profiles; everything counted",
};
