/* Processor "redaction": removes secrets from symbols and attributes.
 *
 * Symbols: function names, system names and file names, and mapping file names matching any of
 * `blocked_symbols` (POSIX extended regexes, unanchored) and none of `allowed_symbols` become
 * `replacement`; `strip_path_prefixes` (literal) are cut from function and mapping file names.
 * Attributes of samples, profiles, resources and scopes: a key matching `blocked_keys` removes
 * the attribute; in a string value every match of `blocked_values` is replaced by `replacement`
 * (the Collector's redaction processor masks the matching parts the same way, so a pattern that
 * should hide the whole value should match the whole value, e.g. ".*secret.*").
 * `case_insensitive` applies to every pattern and prefix; a pattern may also start with "(?i)".
 *
 * The dictionary's strings are shared: one string may be a function name and an attribute value
 * or a sample type at once. So string_table entries are never overwritten; new strings are
 * interned through the dictionary builder and only the Function / Mapping strindex fields (and
 * the attribute indices of what was masked) are re-pointed. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "pdata/dict.h"
#include "sdk/component.h"
#include "base/regex.h"
#include "sdk/processor.h"

typedef struct redaction_cfg {
    pc_strlist blocked_symbols, allowed_symbols, blocked_values, blocked_keys, strip_path_prefixes;
    char *replacement;
    bool case_insensitive;
} redaction_cfg;

/* clang-format off */
static const pc_cfg_key redaction_keys[] = {
    {"blocked_symbols", PC_CFG_LIST, "", offsetof(redaction_cfg, blocked_symbols), "regexes for function, system and file names and mapping file names to redact", NULL},
    {"allowed_symbols", PC_CFG_LIST, "", offsetof(redaction_cfg, allowed_symbols), "regexes for symbols that are kept even when a blocked_symbols pattern matches", NULL},
    {"blocked_values", PC_CFG_LIST, "", offsetof(redaction_cfg, blocked_values), "regexes whose matches in string attribute values are replaced by the replacement", NULL},
    {"blocked_keys", PC_CFG_LIST, "", offsetof(redaction_cfg, blocked_keys), "regexes for attribute keys whose attributes are removed (sample, profile, resource, scope)", NULL},
    {"replacement", PC_CFG_STRING, "[REDACTED]", offsetof(redaction_cfg, replacement), "what redacted symbols and masked values become", NULL},
    {"strip_path_prefixes", PC_CFG_LIST, "", offsetof(redaction_cfg, strip_path_prefixes), "literal prefixes removed from function and mapping file names", NULL},
    {"case_insensitive", PC_CFG_BOOL, "false", offsetof(redaction_cfg, case_insensitive), "match every pattern and prefix ignoring case", NULL},
    {0},
};
/* clang-format on */

typedef struct relist {
    regex_t *re;
    size_t n;
} relist;

typedef struct redaction_counts {
    uint64_t symbols, paths, keys, values;
} redaction_counts;

typedef struct redaction_state {
    pc_proc_core core;
    relist blocked_symbols, allowed_symbols, blocked_values, blocked_keys;
    const redaction_cfg *cfg;
    redaction_counts total; /* self-metrics (loop thread) */
    uint64_t batches;
} redaction_state;

/* ---- config ----------------------------------------------------------------------------- */

static void relist_free(relist *l)
{
    for (size_t i = 0; i < l->n; i++)
        regfree(&l->re[i]);
    free(l->re);
    memset(l, 0, sizeof *l);
}

static int relist_compile(relist *l, const pc_strlist *src, const char *key, int flags,
                          const pc_node *node, const char *path, pc_error *err)
{
    l->re = pc_xcalloc(src->n ? src->n : 1, sizeof *l->re);
    l->n = 0;
    for (size_t i = 0; i < src->n; i++) {
        pc_error e = {0};
        if (pc_regex_compile(&l->re[i], src->v[i], flags, NULL, NULL, &e) < 0) {
            const pc_node *list = pc_node_get(node, key);
            const pc_node *at =
                list && list->kind == PC_NODE_SEQ && i < list->n ? list->vals[i] : list;
            char sub[300];
            snprintf(sub, sizeof sub, "%s::%s[%zu]", path, key, i);
            relist_free(l);
            return pc_cfg_errorf(err, at ? at : node, sub, "%s", e.msg);
        }
        l->n++;
    }
    return 0;
}

static void state_free(redaction_state *st)
{
    relist_free(&st->blocked_symbols);
    relist_free(&st->allowed_symbols);
    relist_free(&st->blocked_values);
    relist_free(&st->blocked_keys);
    free(st);
}

static redaction_state *state_new(const redaction_cfg *cfg, const pc_node *node, const char *path,
                                  pc_error *err)
{
    redaction_state *st = pc_xcalloc(1, sizeof *st);
    int icase = cfg->case_insensitive ? REG_ICASE : 0;
    st->cfg = cfg;
    if (relist_compile(&st->blocked_symbols, &cfg->blocked_symbols, "blocked_symbols",
                       icase | REG_NOSUB, node, path, err) ||
        relist_compile(&st->allowed_symbols, &cfg->allowed_symbols, "allowed_symbols",
                       icase | REG_NOSUB, node, path, err) ||
        relist_compile(&st->blocked_values, &cfg->blocked_values, "blocked_values", icase, node,
                       path, err) ||
        relist_compile(&st->blocked_keys, &cfg->blocked_keys, "blocked_keys", icase | REG_NOSUB,
                       node, path, err)) {
        state_free(st);
        return NULL;
    }
    return st;
}

static int redaction_validate(void *cfgp, const pc_node *node, const char *path, pc_error *err)
{
    redaction_cfg *cfg = cfgp;
    if (!cfg->replacement) cfg->replacement = pc_xstrdup("");
    for (size_t i = 0; i < cfg->strip_path_prefixes.n; i++) {
        if (!cfg->strip_path_prefixes.v[i][0])
            return pc_cfg_errorf(err, node, path, "strip_path_prefixes[%zu]: must not be empty", i);
    }
    redaction_state *st = state_new(cfg, node, path, err);
    if (!st) return PC_EINVAL;
    state_free(st);
    return 0;
}

static int redaction_create(pc_component *c, pc_error *err)
{
    char path[256];
    snprintf(path, sizeof path, "processors::%s", c->id);
    redaction_state *st = state_new(c->cfg, NULL, path, err);
    if (!st) return PC_EINVAL;
    c->priv = st;
    pc_proc_metric(c, "otelcol_processor_redaction_redacted_symbols",
                   "Function, system, file and mapping names replaced", &st->total.symbols);
    pc_proc_metric(c, "otelcol_processor_redaction_stripped_paths",
                   "File names shortened by strip_path_prefixes", &st->total.paths);
    pc_proc_metric(c, "otelcol_processor_redaction_removed_attributes",
                   "Attributes removed for a blocked key", &st->total.keys);
    pc_proc_metric(c, "otelcol_processor_redaction_masked_values",
                   "Attribute values masked for a blocked value", &st->total.values);
    return 0;
}

static void redaction_destroy(pc_component *c)
{
    if (c->priv) state_free(c->priv);
}

/* ---- matching ----------------------------------------------------------------------------- */

static bool any_match(const relist *l, const char *s)
{
    for (size_t i = 0; i < l->n; i++)
        if (regexec(&l->re[i], s, 0, NULL, 0) == 0) return true;
    return false;
}

/* s with every match of every blocked_values pattern replaced (patterns applied in order, each
 * to the previous result); NULL when nothing matched. malloc'd. */
static char *mask_value(const redaction_state *st, const char *s)
{
    const char *rep = st->cfg->replacement;
    size_t rlen = strlen(rep);
    char *cur = NULL;
    for (size_t i = 0; i < st->blocked_values.n; i++) {
        const char *in = cur ? cur : s;
        pc_buf out = {0};
        size_t off = 0, len = strlen(in);
        bool hit = false;
        regmatch_t m;
        while (off <= len &&
               regexec(&st->blocked_values.re[i], in + off, 1, &m, off ? REG_NOTBOL : 0) == 0) {
            hit = true;
            pc_buf_append(&out, in + off, (size_t)m.rm_so);
            pc_buf_append(&out, rep, rlen);
            if (m.rm_eo == m.rm_so) { /* empty match: keep one character and move on */
                if (off + (size_t)m.rm_eo < len) pc_buf_append(&out, in + off + m.rm_eo, 1);
                off += (size_t)m.rm_eo + 1;
            } else {
                off += (size_t)m.rm_eo;
            }
        }
        if (!hit) {
            pc_buf_free(&out);
            continue;
        }
        if (off < len) pc_buf_append(&out, in + off, len - off);
        pc_buf_append(&out, "", 1);
        free(cur);
        cur = (char *)out.data;
    }
    return cur;
}

/* ---- one batch -------------------------------------------------------------------------- */

typedef struct redact_ctx {
    const redaction_state *st;
    pc_batch *b;
    const pc_dictionary *d;
    pc_dict_builder *db;             /* created on first need */
    int32_t replacement;             /* string index of the replacement, -1 until interned */
    int32_t *sym_cache, *file_cache; /* old string index -> new, -1 = not yet decided */
    int32_t *attr_cache;             /* old attribute index -> new, -1 = remove, -2 = undecided */
    size_t n_str, n_attr;
    redaction_counts n;
} redact_ctx;

static pc_dict_builder *builder(redact_ctx *x)
{
    if (!x->db) x->db = pc_dict_builder_from(x->b->arena, x->d);
    return x->db;
}

static int32_t replacement_index(redact_ctx *x)
{
    if (x->replacement < 0) x->replacement = pc_dict_cstring(builder(x), x->st->cfg->replacement);
    return x->replacement;
}

static bool blocked_symbol(const redaction_state *st, const char *s)
{
    return *s && any_match(&st->blocked_symbols, s) && !any_match(&st->allowed_symbols, s);
}

/* The new string index for a symbol (is_file: also strip path prefixes). */
static int32_t redact_string(redact_ctx *x, int32_t idx, bool is_file)
{
    if (idx <= 0 || (size_t)idx >= x->n_str) return idx;
    int32_t *cache = is_file ? x->file_cache : x->sym_cache;
    if (cache[idx] >= 0) return cache[idx];
    const char *s = pc_dict_str(x->d, idx);
    int32_t out = idx;
    if (blocked_symbol(x->st, s)) {
        out = replacement_index(x);
    } else if (is_file) {
        const pc_strlist *pre = &x->st->cfg->strip_path_prefixes;
        for (size_t i = 0; i < pre->n; i++) {
            size_t plen = strlen(pre->v[i]);
            bool starts = x->st->cfg->case_insensitive ? strncasecmp(s, pre->v[i], plen) == 0
                                                       : strncmp(s, pre->v[i], plen) == 0;
            if (starts && s[plen]) { /* never strip a name down to nothing */
                out = pc_dict_cstring(builder(x), s + plen);
                break;
            }
        }
    }
    cache[idx] = out;
    return out;
}

static void redact_symbols(redact_ctx *x)
{
    const pc_dictionary *d = x->d;
    for (size_t i = 1; i < d->n_function_table; i++) {
        pc_function *f = d->function_table[i];
        if (!f) continue;
        int32_t name = redact_string(x, f->name_strindex, false);
        int32_t sys = redact_string(x, f->system_name_strindex, false);
        int32_t file = redact_string(x, f->filename_strindex, true);
        x->n.symbols += (name != f->name_strindex) + (sys != f->system_name_strindex);
        if (file != f->filename_strindex) {
            if (file == x->replacement)
                x->n.symbols++;
            else
                x->n.paths++;
        }
        f->name_strindex = name;
        f->system_name_strindex = sys;
        f->filename_strindex = file;
    }
    for (size_t i = 1; i < d->n_mapping_table; i++) {
        pc_mapping *m = d->mapping_table[i];
        if (!m) continue;
        int32_t file = redact_string(x, m->filename_strindex, true);
        if (file != m->filename_strindex) {
            if (file == x->replacement)
                x->n.symbols++;
            else
                x->n.paths++;
        }
        m->filename_strindex = file;
    }
}

/* Decide one dictionary attribute: -1 remove, else the (possibly new) index. */
static int32_t redact_attr(redact_ctx *x, int32_t ai)
{
    if (ai <= 0 || (size_t)ai >= x->n_attr) return ai;
    if (x->attr_cache[ai] != -2) return x->attr_cache[ai];
    const pc_kvu *a = x->d->attribute_table[ai];
    int32_t out = ai;
    if (a && any_match(&x->st->blocked_keys, pc_dict_str(x->d, a->key_strindex))) {
        out = -1;
    } else if (a) {
        const char *s = pc_anyvalue_str(x->d, a->value);
        char *masked = s && x->st->blocked_values.n ? mask_value(x->st, s) : NULL;
        if (masked) {
            pc_anyvalue v;
            opentelemetry__proto__common__v1__any_value__init(&v);
            v.value_case = PC_AV_STRING;
            v.string_value = masked;
            out = pc_dict_attribute(builder(x), a->key_strindex, &v, a->unit_strindex);
            free(masked);
        }
    }
    x->attr_cache[ai] = out;
    return out;
}

/* Rewrite an attribute index list; a new array in the arena only when something changed. */
static void redact_indices(redact_ctx *x, int32_t **v, size_t *n)
{
    if (!*n || !*v) return;
    int32_t *out = NULL;
    size_t k = 0;
    for (size_t i = 0; i < *n; i++) {
        int32_t ni = redact_attr(x, (*v)[i]);
        if (ni != (*v)[i] && !out) {
            out = pc_arena_alloc(x->b->arena, *n * sizeof *out);
            memcpy(out, *v, i * sizeof *out);
            k = i;
        }
        if (ni == -1)
            x->n.keys++;
        else if (ni != (*v)[i])
            x->n.values++;
        if (out && ni != -1) out[k++] = ni;
    }
    if (!out) return;
    *v = k ? out : NULL;
    *n = k;
}

/* Resource and scope attributes: KeyValue lists in either form. */
static void redact_kvs(redact_ctx *x, pc_keyvalue ***v, size_t *n)
{
    if (!*n || !*v) return;
    pc_keyvalue **out = NULL;
    size_t k = 0;
    for (size_t i = 0; i < *n; i++) {
        pc_keyvalue *kv = (*v)[i], *nkv = kv;
        if (kv && any_match(&x->st->blocked_keys, pc_keyvalue_key(x->d, kv))) {
            nkv = NULL;
            x->n.keys++;
        } else if (kv) {
            const char *s = pc_anyvalue_str(x->d, kv->value);
            char *masked = s && x->st->blocked_values.n ? mask_value(x->st, s) : NULL;
            if (masked) {
                pc_arena *a = x->b->arena;
                nkv = pc_arena_memdup(a, kv, sizeof *kv);
                nkv->value = pc_arena_alloc(a, sizeof *nkv->value);
                opentelemetry__proto__common__v1__any_value__init(nkv->value);
                nkv->value->value_case = PC_AV_STRING;
                nkv->value->string_value = pc_arena_strndup(a, masked, strlen(masked));
                free(masked);
                x->n.values++;
            }
        }
        if (nkv != kv && !out) {
            out = pc_arena_alloc(x->b->arena, *n * sizeof *out);
            memcpy(out, *v, i * sizeof *out);
            k = i;
        }
        if (out && nkv) out[k++] = nkv;
    }
    if (!out) return;
    *v = k ? out : NULL;
    *n = k;
}

static void redact_attributes(redact_ctx *x)
{
    pc_request *r = pc_batch_req(x->b);
    for (size_t i = 0; i < r->n_resource_profiles; i++) {
        pc_resource_profiles *rp = r->resource_profiles[i];
        if (!rp) continue;
        if (rp->resource) redact_kvs(x, &rp->resource->attributes, &rp->resource->n_attributes);
        for (size_t j = 0; j < rp->n_scope_profiles; j++) {
            pc_scope_profiles *sp = rp->scope_profiles[j];
            if (!sp) continue;
            if (sp->scope) redact_kvs(x, &sp->scope->attributes, &sp->scope->n_attributes);
            for (size_t k = 0; k < sp->n_profiles; k++) {
                pc_profile *p = sp->profiles[k];
                if (!p) continue;
                redact_indices(x, &p->attribute_indices, &p->n_attribute_indices);
                for (size_t s = 0; s < p->n_samples; s++)
                    if (p->samples[s])
                        redact_indices(x, &p->samples[s]->attribute_indices,
                                       &p->samples[s]->n_attribute_indices);
            }
        }
    }
}

typedef struct redaction_job {
    pc_proc_job j;
    redaction_counts n;
} redaction_job;

static void redaction_run(pc_proc_job *pj)
{
    redaction_job *job = (redaction_job *)pj;
    pc_batch_make_writable(&pj->b);
    redact_ctx x = {
        .st = pj->c->priv, .b = pj->b, .d = pc_batch_req(pj->b)->dictionary, .replacement = -1};
    if (x.d) {
        x.n_str = x.d->n_string_table;
        x.n_attr = x.d->n_attribute_table;
        x.sym_cache = pc_xmalloc((x.n_str + 1) * sizeof(int32_t));
        x.file_cache = pc_xmalloc((x.n_str + 1) * sizeof(int32_t));
        x.attr_cache = pc_xmalloc((x.n_attr + 1) * sizeof(int32_t));
        memset(x.sym_cache, 0xff, (x.n_str + 1) * sizeof(int32_t)); /* -1 */
        memset(x.file_cache, 0xff, (x.n_str + 1) * sizeof(int32_t));
        for (size_t i = 0; i <= x.n_attr; i++)
            x.attr_cache[i] = -2;
        if (x.st->blocked_symbols.n || x.st->cfg->strip_path_prefixes.n) redact_symbols(&x);
    }
    if (x.st->blocked_keys.n || x.st->blocked_values.n) redact_attributes(&x);
    if (x.db) {
        pc_batch_req(pj->b)->dictionary = pc_dict_builder_finish(x.db);
        pc_dict_builder_free(x.db);
    }
    free(x.sym_cache);
    free(x.file_cache);
    free(x.attr_cache);
    job->n = x.n;
}

static void redaction_after(pc_proc_job *pj)
{
    redaction_job *job = (redaction_job *)pj;
    redaction_state *st = pj->c->priv;
    st->batches++;
    st->total.symbols += job->n.symbols;
    st->total.paths += job->n.paths;
    st->total.keys += job->n.keys;
    st->total.values += job->n.values;
    if (job->n.symbols || job->n.paths || job->n.keys || job->n.values)
        PC_DEBUG(pj->c->id,
                 "redacted %" PRIu64 " symbols, stripped %" PRIu64 " paths, removed %" PRIu64
                 " attributes, masked %" PRIu64 " values",
                 job->n.symbols, job->n.paths, job->n.keys, job->n.values);
}

static void redaction_consume(pc_component *c, pc_batch *b, pc_done_fn done, void *arg)
{
    redaction_state *st = c->priv;
    if (!st->blocked_symbols.n && !st->cfg->strip_path_prefixes.n && !st->blocked_keys.n &&
        !st->blocked_values.n) {
        pc_consume(c->next, b, done, arg); /* nothing configured */
        return;
    }
    redaction_job *job = pc_xcalloc(1, sizeof *job);
    job->j = (pc_proc_job){.c = c,
                           .core = &st->core,
                           .b = b,
                           .done = done,
                           .arg = arg,
                           .run = redaction_run,
                           .after = redaction_after};
    pc_proc_job_submit(&job->j);
}

static void redaction_shutdown(pc_component *c, pc_shutdown_done done)
{
    redaction_state *st = c->priv;
    if (!st) {
        done(c);
        return;
    }
    PC_DEBUG(c->id,
             "%" PRIu64 " batches: %" PRIu64 " symbols redacted, %" PRIu64
             " paths stripped, %" PRIu64 " attributes removed, %" PRIu64 " values masked",
             st->batches, st->total.symbols, st->total.paths, st->total.keys, st->total.values);
    pc_proc_core_shutdown(&st->core, c, done);
}

size_t pc_redaction_counters(const pc_component *c, pc_proc_counter *out, size_t max)
{
    const redaction_state *st = c->priv;
    const pc_proc_counter all[] = {{"symbols_redacted", st->total.symbols},
                                   {"paths_stripped", st->total.paths},
                                   {"attributes_removed", st->total.keys},
                                   {"values_masked", st->total.values}};
    return pc_proc_counters_copy(all, sizeof all / sizeof all[0], out, max);
}

const pc_component_type pc_processor_redaction = {
    .name = "redaction",
    .kind = PC_KIND_PROCESSOR,
    .stability = "development",
    .cfg_size = sizeof(redaction_cfg),
    .cfg = redaction_keys,
    .validate = redaction_validate,
    .create = redaction_create,
    .consume = redaction_consume,
    .shutdown = redaction_shutdown,
    .destroy = redaction_destroy,
    .mutates = true,
    .doc = "redacts symbols (function, system, file and mapping names) and attribute keys/values",
};
