/* Processor "filter": keeps or drops whole profiles, with the Collector filter processor's
 * semantics: a profile is kept if it matches `include` (when given) and does not match `exclude`
 * (when given).
 *
 * A block matches a profile when every criterion it gives matches (AND); a criterion matches when
 * any of its entries does (OR):
 * - profile_types: "type" or "type:unit", compared exactly with the profile's sample_type
 *   (e.g. "cpu", "alloc_space:bytes");
 * - services: POSIX extended regular expressions matched against the WHOLE service.name resource
 *   attribute ("checkout" matches only "checkout"; "check.*" matches "checkout-v2"); a resource
 *   without a string service.name matches none;
 * - resource_attributes: key -> extended regular expression matched against the whole string
 *   value of that resource attribute; every key must match (absent or non-string: no match).
 * Samples are filtered too, by `sample_attributes` (key -> regular expression over the whole
 * value; integers are matched as decimal text; every key must match): in `exclude` a matching
 * sample is dropped, in `include` only matching samples are kept (of the profiles kept).
 * Dropped profiles are counted; emptied ScopeProfiles/ResourceProfiles are removed; a batch left
 * empty is acknowledged (PC_OK) and not passed on. Deciding is cheap (per profile, on the loop
 * thread); copying a shared batch before removing profiles is not, so that runs on the pool. */
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pdata/merge.h"
#include "sdk/component.h"
#include "sdk/telemetry.h"
#include "sdk/processor.h"

typedef struct match_cfg {
    pc_strlist profile_types;
    pc_strlist services;
    pc_strmap resource_attributes;
    pc_strmap sample_attributes;
} match_cfg;

typedef struct filter_cfg {
    match_cfg include, exclude;
} filter_cfg;

/* clang-format off */
/* One block's keys (include or exclude), relative to its match_cfg. */
static const pc_cfg_key match_keys[] = {
    {"profile_types", PC_CFG_LIST, "", offsetof(match_cfg, profile_types), "sample types (\"cpu\" or \"alloc_space:bytes\"); any may match", NULL},
    {"services", PC_CFG_LIST, "", offsetof(match_cfg, services), "service.name regular expressions (whole value); any may match", NULL},
    {"resource_attributes", PC_CFG_MAP, "", offsetof(match_cfg, resource_attributes), "resource attribute -> regular expression (whole value); all must match", NULL},
    {"sample_attributes", PC_CFG_MAP, "", offsetof(match_cfg, sample_attributes), "sample attribute -> regular expression (whole value); all must match (per sample)", NULL},
    {0},
};

static const pc_cfg_key filter_keys[] = {
    {"include.", PC_CFG_GROUP, "", offsetof(filter_cfg, include), "what is kept", match_keys},
    {"exclude.", PC_CFG_GROUP, "", offsetof(filter_cfg, exclude), "what is dropped", match_keys},
    {0},
};
/* clang-format on */

/* One block, compiled. */
typedef struct matcher {
    const match_cfg *cfg;
    bool set; /* the block gives at least one criterion */
    regex_t *services, *attrs, *sattrs;
    size_t n_services, n_attrs, n_sattrs;
} matcher;

typedef struct filter_proc {
    matcher include, exclude;
    uint64_t profiles_dropped, samples_dropped, batches_dropped; /* self-metrics */
    pc_proc_core core;
} filter_proc;

typedef struct filter_job {
    pc_proc_job j; /* first: the processor core's */
    size_t profiles, samples;
} filter_job;

static void matcher_free(matcher *m)
{
    for (size_t i = 0; i < m->n_services; i++)
        regfree(&m->services[i]);
    for (size_t i = 0; i < m->n_attrs; i++)
        regfree(&m->attrs[i]);
    for (size_t i = 0; i < m->n_sattrs; i++)
        regfree(&m->sattrs[i]);
    free(m->services);
    free(m->attrs);
    free(m->sattrs);
    memset(m, 0, sizeof *m);
}

/* Anchored: the expression must match the whole value. 0, or PC_EINVAL with regcomp's message
 * in e. */
static int compile(regex_t *re, const char *pat, pc_error *e)
{
    size_t n = strlen(pat) + 5;
    char *full = pc_xmalloc(n);
    snprintf(full, n, "^(%s)$", pat);
    int rc = regcomp(re, full, REG_EXTENDED | REG_NOSUB);
    free(full);
    if (!rc) return 0;
    char msg[256];
    regerror(rc, re, msg, sizeof msg);
    return pc_error_set(e, PC_EINVAL, "%s", msg);
}

/* One anchored expression per value of an attribute map (resource_attributes,
 * sample_attributes), counted in *n as compiled; PC_EINVAL naming the key that fails. */
static int compile_map(regex_t **out, size_t *n, const pc_strmap *map, const char *what,
                       const char *block, const pc_node *bn, const pc_node *node, const char *path,
                       pc_error *err)
{
    pc_error e = {0};
    *out = pc_xcalloc(map->n + 1, sizeof(regex_t));
    for (size_t i = 0; i < map->n; i++) {
        if (compile(&(*out)[i], map->vals[i], &e) < 0) {
            char sub[512];
            snprintf(sub, sizeof sub, "%s::%s::%s::%s", path, block, what, map->keys[i]);
            const pc_node *at = pc_node_get(pc_node_get(bn, what), map->keys[i]);
            return pc_cfg_errorf(err, at ? at : node, sub, "invalid regular expression \"%s\": %s",
                                 map->vals[i], e.msg);
        }
        (*n)++;
    }
    return 0;
}

static int matcher_init(matcher *m, const match_cfg *cfg, const char *block, const pc_node *node,
                        const char *path, pc_error *err)
{
    memset(m, 0, sizeof *m);
    m->cfg = cfg;
    m->set = cfg->profile_types.n || cfg->services.n || cfg->resource_attributes.n;
    char sub[512];
    pc_error e = {0};
    const pc_node *bn = pc_node_get(node, block), *at;
    m->services = pc_xcalloc(cfg->services.n + 1, sizeof(regex_t));
    for (size_t i = 0; i < cfg->services.n; i++) {
        if (compile(&m->services[i], cfg->services.v[i], &e) < 0) {
            snprintf(sub, sizeof sub, "%s::%s::services[%zu]", path, block, i);
            at = pc_node_get(bn, "services");
            matcher_free(m);
            return pc_cfg_errorf(err, at ? at : node, sub, "invalid regular expression \"%s\": %s",
                                 cfg->services.v[i], e.msg);
        }
        m->n_services++;
    }
    if (compile_map(&m->attrs, &m->n_attrs, &cfg->resource_attributes, "resource_attributes", block,
                    bn, node, path, err) ||
        compile_map(&m->sattrs, &m->n_sattrs, &cfg->sample_attributes, "sample_attributes", block,
                    bn, node, path, err)) {
        matcher_free(m);
        return PC_EINVAL;
    }
    for (size_t i = 0; i < cfg->profile_types.n; i++) {
        const char *t = cfg->profile_types.v[i];
        if (!*t || *t == ':' || (strchr(t, ':') && !strchr(t, ':')[1])) {
            snprintf(sub, sizeof sub, "%s::%s::profile_types[%zu]", path, block, i);
            at = pc_node_get(bn, "profile_types");
            matcher_free(m);
            return pc_cfg_errorf(err, at ? at : node, sub,
                                 "\"%s\" is not \"type\" or \"type:unit\"", t);
        }
    }
    return 0;
}

static int filter_validate(void *cfgp, const pc_node *node, const char *path, pc_error *err)
{
    filter_cfg *cfg = cfgp;
    matcher m;
    if (matcher_init(&m, &cfg->include, "include", node, path, err)) return PC_EINVAL;
    matcher_free(&m);
    if (matcher_init(&m, &cfg->exclude, "exclude", node, path, err)) return PC_EINVAL;
    matcher_free(&m);
    return 0;
}

static int filter_create(pc_component *c, pc_error *err)
{
    filter_cfg *cfg = c->cfg;
    filter_proc *fp = pc_xcalloc(1, sizeof *fp);
    if (matcher_init(&fp->include, &cfg->include, "include", NULL, c->id, err) ||
        matcher_init(&fp->exclude, &cfg->exclude, "exclude", NULL, c->id, err)) {
        matcher_free(&fp->include);
        free(fp);
        return PC_EINVAL;
    }
    c->priv = fp;
    pc_proc_metric(c, "otelcol_processor_filter_profiles_dropped", "Profiles dropped by the filter",
                   &fp->profiles_dropped);
    pc_proc_metric(c, "otelcol_processor_filter_samples_dropped",
                   "Samples dropped by the filter (with their profiles or alone)",
                   &fp->samples_dropped);
    return 0;
}

static void filter_destroy(pc_component *c)
{
    filter_proc *fp = c->priv;
    if (!fp) return;
    matcher_free(&fp->include);
    matcher_free(&fp->exclude);
    free(fp);
}

/* ---- matching ------------------------------------------------------------------------------- */

static bool rx_whole(const regex_t *re, const char *s)
{
    return s && regexec(re, s, 0, NULL, 0) == 0;
}

/* The resource-level criteria (services, resource_attributes) of block m. */
static bool match_resource(const matcher *m, const pc_dictionary *d, const pc_resource *r)
{
    if (m->n_services) {
        const char *svc = pc_resource_attr_str(d, r, "service.name");
        size_t i = 0;
        while (i < m->n_services && !rx_whole(&m->services[i], svc))
            i++;
        if (i == m->n_services) return false;
    }
    for (size_t i = 0; i < m->n_attrs; i++)
        if (!rx_whole(&m->attrs[i],
                      pc_resource_attr_str(d, r, m->cfg->resource_attributes.keys[i])))
            return false;
    return true;
}

static bool match_type(const matcher *m, const pc_dictionary *d, const pc_profile *p)
{
    const pc_strlist *l = &m->cfg->profile_types;
    if (!l->n) return true;
    const char *type = p->sample_type ? pc_dict_str(d, p->sample_type->type_strindex) : "";
    const char *unit = p->sample_type ? pc_dict_str(d, p->sample_type->unit_strindex) : "";
    for (size_t i = 0; i < l->n; i++) {
        const char *want = l->v[i], *colon = strchr(want, ':');
        size_t tl = colon ? (size_t)(colon - want) : strlen(want);
        if (strlen(type) != tl || strncmp(type, want, tl) != 0) continue;
        if (!colon || strcmp(unit, colon + 1) == 0) return true;
    }
    return false;
}

/* The string (or decimal) form of sample attribute `key`, or NULL when the sample lacks it. */
static const char *sample_attr(const pc_dictionary *d, const pc_sample *s, const char *key,
                               char *num, size_t numlen)
{
    for (size_t i = 0; d && i < s->n_attribute_indices; i++) {
        int32_t ai = s->attribute_indices[i];
        if (ai <= 0 || (size_t)ai >= d->n_attribute_table) continue;
        const pc_kvu *a = d->attribute_table[ai];
        if (strcmp(pc_dict_str(d, a->key_strindex), key) != 0 || !a->value) continue;
        switch (a->value->value_case) {
        case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE:
            return a->value->string_value;
        case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE_STRINDEX:
            return pc_dict_str(d, a->value->string_value_strindex);
        case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE:
            snprintf(num, numlen, "%lld", (long long)a->value->int_value);
            return num;
        default: return NULL;
        }
    }
    return NULL;
}

/* Every sample_attributes criterion of m matches s (false when m gives none). */
static bool match_sample(const matcher *m, const pc_dictionary *d, const pc_sample *s)
{
    if (!m->n_sattrs) return false;
    char num[32];
    for (size_t i = 0; i < m->n_sattrs; i++)
        if (!rx_whole(&m->sattrs[i],
                      sample_attr(d, s, m->cfg->sample_attributes.keys[i], num, sizeof num)))
            return false;
    return true;
}

/* Drop (with apply, remove) the samples of p the sample criteria reject; returns how many. */
static size_t filter_samples(const filter_proc *fp, const pc_dictionary *d, pc_profile *p,
                             bool apply)
{
    if ((!fp->include.n_sattrs && !fp->exclude.n_sattrs) || !p->samples) return 0;
    size_t keep = 0, dropped = 0;
    for (size_t i = 0; i < p->n_samples; i++) {
        const pc_sample *s = p->samples[i];
        bool ok = s && (!fp->include.n_sattrs || match_sample(&fp->include, d, s)) &&
                  !match_sample(&fp->exclude, d, s);
        if (!ok)
            dropped++;
        else if (apply)
            p->samples[keep++] = p->samples[i];
    }
    if (apply) p->n_samples = keep;
    return dropped;
}

/* Walk the request; count (and with apply, remove) the profiles and samples to drop. */
static void evaluate(const filter_proc *fp, pc_request *r, bool apply, size_t *profiles,
                     size_t *samples, size_t *sample_drops)
{
    const pc_dictionary *d = r->dictionary;
    *profiles = *samples = *sample_drops = 0;
    for (size_t i = 0; i < r->n_resource_profiles; i++) {
        pc_resource_profiles *rp = r->resource_profiles[i];
        if (!rp) continue;
        const pc_resource *res = rp->resource;
        bool inc_res = !fp->include.set || match_resource(&fp->include, d, res);
        bool exc_res = fp->exclude.set && match_resource(&fp->exclude, d, res);
        for (size_t j = 0; rp->scope_profiles && j < rp->n_scope_profiles; j++) {
            pc_scope_profiles *sp = rp->scope_profiles[j];
            for (size_t k = 0; sp && sp->profiles && k < sp->n_profiles; k++) {
                pc_profile *p = sp->profiles[k];
                if (!p) continue;
                bool keep = inc_res && (!fp->include.set || match_type(&fp->include, d, p));
                if (keep && exc_res && match_type(&fp->exclude, d, p)) keep = false;
                if (keep) {
                    size_t n = filter_samples(fp, d, p, apply);
                    *sample_drops += n;
                    *samples += n;
                    continue;
                }
                (*profiles)++;
                *samples += pc_profile_n_samples(p);
                if (apply) sp->profiles[k] = NULL;
            }
        }
    }
    if (apply && *profiles) pc_request_prune(r);
}

/* ---- flow ----------------------------------------------------------------------------------- */

static void count_drops(pc_component *c, size_t profiles, size_t samples, bool whole)
{
    filter_proc *fp = c->priv;
    fp->profiles_dropped += profiles;
    fp->samples_dropped += samples;
    fp->batches_dropped += whole;
    PC_DEBUG(c->id, "dropped %zu profiles (%zu samples)%s", profiles, samples,
             whole ? ", the whole request" : "");
}

/* Sample criteria walk every sample, so deciding runs here too, and a batch is copied only
 * when something is actually dropped. */
static void filter_work(pc_proc_job *pj)
{
    filter_job *j = (filter_job *)pj;
    size_t sample_drops;
    evaluate(pj->c->priv, pc_batch_req(pj->b), false, &j->profiles, &j->samples, &sample_drops);
    if (!j->profiles && !sample_drops) return;
    /* nothing is left: acknowledged, nothing passed on */
    pj->drop = j->profiles == pc_batch_counts(pj->b).profiles;
    if (pj->drop) return;
    pc_batch_make_writable(&pj->b);
    evaluate(pj->c->priv, pc_batch_req(pj->b), true, &j->profiles, &j->samples, &sample_drops);
}

static void filter_after(pc_proc_job *pj)
{
    filter_job *j = (filter_job *)pj;
    if (j->profiles || j->samples) count_drops(pj->c, j->profiles, j->samples, pj->drop);
}

static void filter_consume(pc_component *c, pc_batch *b, pc_done_fn done, void *arg)
{
    filter_proc *fp = c->priv;
    size_t drop = 0, samples = 0, sample_drops = 0;
    bool per_sample = fp->include.n_sattrs || fp->exclude.n_sattrs;
    if (!per_sample) /* per-profile criteria are cheap enough to decide on the loop thread */
        evaluate(fp, pc_batch_req(b), false, &drop, &samples, &sample_drops);
    if (!per_sample && drop == 0) {
        pc_consume(c->next, b, done, arg);
        return;
    }
    if (!per_sample && drop == pc_batch_counts(b).profiles) {
        count_drops(c, drop, samples, true);
        pc_batch_unref(b);
        done(arg, PC_OK, NULL);
        return;
    }
    filter_job *j = pc_xcalloc(1, sizeof *j);
    j->j = (pc_proc_job){.c = c,
                         .core = &fp->core,
                         .b = b,
                         .done = done,
                         .arg = arg,
                         .run = filter_work,
                         .after = filter_after};
    pc_proc_job_submit(&j->j);
}

static void filter_shutdown(pc_component *c, pc_shutdown_done done)
{
    pc_proc_core_shutdown(&((filter_proc *)c->priv)->core, c, done);
}

const pc_component_type pc_processor_filter = {
    .name = "filter",
    .kind = PC_KIND_PROCESSOR,
    .stability = "development",
    .cfg_size = sizeof(filter_cfg),
    .cfg = filter_keys,
    .validate = filter_validate,
    .create = filter_create,
    .consume = filter_consume,
    .shutdown = filter_shutdown,
    .destroy = filter_destroy,
    .mutates = true,
    .doc = "keeps or drops profiles by profile type, service.name and resource attributes, and "
           "samples by sample attributes (include / exclude blocks)",
};
