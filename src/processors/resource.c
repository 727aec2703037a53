/* Processor "resource": edits the Resource of every ResourceProfiles (ResourceSpans, ...: it works
 * on every signal), like the Collector's
 * resource processor. `attributes` is a list of actions applied in order:
 *
 *   - key: deployment.environment      insert (only if absent), update (only if present), upsert
 *     value: staging                   with a literal `value` or `from_attribute` (copy another
 *     action: upsert                   attribute's value; absent source = no change)
 *   - key: user.id                     delete; hash (SHA-256 hex of the value by default, as the
 *     action: hash                     Collector does since v0.79; `algorithm: sha1` for the older
 *                                      SHA-1); delete and hash also take `pattern` (keys matching)
 *   - key: host.name                   extract: named groups of `pattern` become attributes
 *     pattern: ^(?P<host>[^.]+)\.(?P<domain>.*)$
 *     action: extract
 *
 * Values keep their YAML type: integers become int values, true/false bool values, decimal
 * numbers double values, anything else a string; `converted_type` (string, int, double, bool)
 * forces one (the config tree does not record YAML quoting, so "123" needs converted_type: string).
 * Patterns are POSIX extended regexes; POSIX has no named groups, so the Collector's
 * `(?P<name>...)` is rewritten to a plain group and the name remembered by group number.
 *
 * Attributes may use the plain key/string_value or the profiles-only key_strindex /
 * string_value_strindex forms; both are read. A written attribute is always in the plain form,
 * and any other entry with the same key (in either form) is removed, so one entry per key remains.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>
#include <openssl/evp.h>

#include "sdk/component.h"
#include "base/hex.h"
#include "base/regex.h"
#include "sdk/processor.h"

typedef struct resource_cfg {
    const pc_node *attributes;
} resource_cfg;

/* clang-format off */
static const pc_cfg_key resource_keys[] = {
    {"attributes", PC_CFG_NODE, "", offsetof(resource_cfg, attributes), "list of {key, value | from_attribute, action, pattern, converted_type, algorithm}; actions insert, update, upsert, delete, hash, extract", NULL},
    {0},
};
/* clang-format on */

typedef enum { A_INSERT, A_UPDATE, A_UPSERT, A_DELETE, A_HASH, A_EXTRACT } action;
static const char *const action_names[] = {"insert", "update", "upsert",
                                           "delete", "hash",   "extract"};
enum { N_ACTIONS = sizeof action_names / sizeof action_names[0] };

typedef enum { CT_NONE, CT_STRING, CT_INT, CT_DOUBLE, CT_BOOL } conv_type;
static const char *const conv_names[] = {"", "string", "int", "double", "bool"};

static const char *const rule_keys[] = {"key",     "value",          "from_attribute", "action",
                                        "pattern", "converted_type", "algorithm"};

typedef struct rule {
    action act;
    char *key;            /* NULL for delete/hash by pattern */
    char *from_attribute; /* NULL unless copying */
    bool has_value;
    pc_anyvalue value; /* string_value malloc'd */
    conv_type conv;
    bool sha1;
    bool has_re;
    regex_t re;
    char **groups; /* extract: group names by number */
    size_t n_groups;
} rule;

typedef struct resource_state {
    pc_proc_core core;
    rule *rules;
    size_t n_rules;
    uint64_t batches, resources_changed; /* self-metrics (loop thread) */
} resource_state;

/* ---- SHA-1 and SHA-256: OpenSSL's (linked for TLS; the symbolizer's ids and the auth
 * extensions hash with it too) ------------------------------------------------------------- */

/* Hash data into hex (40 or 64 characters plus NUL). Should OpenSSL fail (no memory), the value
 * becomes "": never the value in clear. */
static void sha_hex(bool sha1, const uint8_t *data, size_t len, char *hex)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    hex[0] = '\0';
    if (EVP_Digest(data, len, md, &n, sha1 ? EVP_sha1() : EVP_sha256(), NULL))
        pc_hex_encode(hex, md, n);
}

/* ---- config ----------------------------------------------------------------------------- */

static void rule_free(rule *r)
{
    free(r->key);
    free(r->from_attribute);
    if (r->value.value_case == PC_AV_STRING) free(r->value.string_value);
    if (r->has_re) regfree(&r->re);
    pc_regex_names_free(r->groups, r->n_groups);
    memset(r, 0, sizeof *r);
}

static void rules_free(rule *rules, size_t n)
{
    for (size_t i = 0; i < n; i++)
        rule_free(&rules[i]);
    free(rules);
}

static bool parse_int(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno) return false;
    *out = v;
    return true;
}

static bool parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !isfinite(v)) return false;
    *out = v;
    return true;
}

/* A literal YAML scalar as a typed value. */
static int scalar_value(const char *s, conv_type conv, pc_anyvalue *v)
{
    opentelemetry__proto__common__v1__any_value__init(v);
    bool bv;
    if (conv == CT_BOOL ||
        (conv == CT_NONE && (!strcasecmp(s, "true") || !strcasecmp(s, "false")))) {
        if (pc_parse_bool(s, &bv) < 0) return PC_EINVAL;
        v->value_case = PC_AV_BOOL;
        v->bool_value = bv;
        return 0;
    }
    if ((conv == CT_INT || conv == CT_NONE) && parse_int(s, &v->int_value)) {
        v->value_case = PC_AV_INT;
        return 0;
    }
    if (conv == CT_INT) return PC_EINVAL;
    if ((conv == CT_DOUBLE || (conv == CT_NONE && strpbrk(s, ".eE"))) &&
        parse_double(s, &v->double_value)) {
        v->value_case = PC_AV_DOUBLE;
        return 0;
    }
    if (conv == CT_DOUBLE) return PC_EINVAL;
    v->value_case = PC_AV_STRING;
    v->string_value = pc_xstrdup(s);
    return 0;
}

static const char *scalar_of(const pc_node *m, const char *key)
{
    const pc_node *n = pc_node_get(m, key);
    return n && n->kind == PC_NODE_SCALAR ? n->scalar : NULL;
}

/* Every key of a rule is known and a scalar. */
static int check_rule_keys(const pc_node *m, const char *path, pc_error *err)
{
    char sub[320];
    if (m->kind != PC_NODE_MAP)
        return pc_cfg_errorf(err, m, path, "must be a mapping with key and action");
    for (size_t i = 0; i < m->n; i++) {
        size_t nk = sizeof rule_keys / sizeof rule_keys[0], j = 0;
        while (j < nk && strcmp(m->keys[i], rule_keys[j]) != 0)
            j++;
        snprintf(sub, sizeof sub, "%s::%s", path, m->keys[i]);
        if (j == nk) {
            const char *close = pc_closest(m->keys[i], rule_keys, nk);
            return pc_cfg_errorf(err, m->vals[i], sub, "unknown key \"%s\"%s%s%s", m->keys[i],
                                 close ? " (did you mean \"" : "", close ? close : "",
                                 close ? "\"?)" : "");
        }
        if (m->vals[i]->kind == PC_NODE_MAP || m->vals[i]->kind == PC_NODE_SEQ)
            return pc_cfg_errorf(err, m->vals[i], sub, "must be a scalar");
    }
    return 0;
}

#define FAIL(at, ...)                                                                              \
    do {                                                                                           \
        return pc_cfg_errorf(err, (at) ? (at) : m, path, __VA_ARGS__);                             \
    } while (0)

/* converted_type, algorithm and value, once the action is known. */
static int parse_rule_value(const pc_node *m, const char *path, rule *r, bool sets, const char *act,
                            pc_error *err)
{
    const char *value = scalar_of(m, "value"), *conv = scalar_of(m, "converted_type");
    const char *algo = scalar_of(m, "algorithm");
    if (conv) {
        int c = 1;
        while (c <= CT_BOOL && strcasecmp(conv, conv_names[c]) != 0)
            c++;
        if (c > CT_BOOL)
            FAIL(pc_node_get(m, "converted_type"),
                 "converted_type: \"%s\" is not one of string, int, double, bool", conv);
        if (!sets)
            FAIL(pc_node_get(m, "converted_type"), "converted_type: not used by action %s", act);
        r->conv = (conv_type)c;
    }
    if (algo) {
        if (r->act != A_HASH) FAIL(pc_node_get(m, "algorithm"), "algorithm: only for action hash");
        if (!strcasecmp(algo, "sha1"))
            r->sha1 = true;
        else if (strcasecmp(algo, "sha256"))
            FAIL(pc_node_get(m, "algorithm"), "algorithm: \"%s\" is not one of sha256, sha1", algo);
    }
    if (pc_node_get(m, "value")) {
        /* value: (empty) is YAML null: the empty string */
        if (scalar_value(value ? value : "", r->conv, &r->value))
            FAIL(pc_node_get(m, "value"), "value: \"%s\" is not %s", value ? value : "",
                 r->conv == CT_INT      ? "an integer"
                 : r->conv == CT_DOUBLE ? "a number"
                                        : "a boolean");
        r->has_value = true;
    }
    return 0;
}

/* pattern: compiled, with its named groups (extract needs one). */
static int parse_rule_pattern(const pc_node *m, const char *path, rule *r, const char *pattern,
                              pc_error *err)
{
    pc_error e = {0};
    char **names = NULL;
    size_t n_names = 0;
    if (pc_regex_compile(&r->re, pattern, 0, &names, &n_names, &e) < 0)
        FAIL(pc_node_get(m, "pattern"), "pattern: %s", e.msg);
    r->has_re = true;
    r->groups = names;
    r->n_groups = n_names;
    bool named = false;
    for (size_t i = 0; i < n_names; i++)
        named |= names[i] != NULL;
    if (r->act == A_EXTRACT && !named)
        FAIL(pc_node_get(m, "pattern"),
             "pattern: extract needs at least one named group (?P<name>...)");
    return 0;
}

static int parse_rule(const pc_node *m, const char *path, rule *r, pc_error *err)
{
    char sub[320];
    if (check_rule_keys(m, path, err)) return PC_EINVAL;
    const char *act = scalar_of(m, "action");
    snprintf(sub, sizeof sub, "%s::action", path);
    if (!act)
        return pc_cfg_errorf(err, m, sub,
                             "missing (one of insert, update, upsert, delete, hash, extract)");
    int a = 0;
    while (a < N_ACTIONS && strcasecmp(act, action_names[a]) != 0)
        a++;
    if (a == N_ACTIONS)
        return pc_cfg_errorf(err, pc_node_get(m, "action"), sub,
                             "\"%s\" is not one of insert, update, upsert, delete, hash, extract",
                             act);
    r->act = (action)a;
    const char *key = scalar_of(m, "key"), *from = scalar_of(m, "from_attribute");
    const char *pattern = scalar_of(m, "pattern");
    bool has_value = pc_node_get(m, "value") != NULL;
    if (key && !*key) key = NULL;
    bool sets = r->act == A_INSERT || r->act == A_UPDATE || r->act == A_UPSERT;
    if ((sets || r->act == A_EXTRACT) && !key) FAIL(NULL, "key: required for action %s", act);
    if ((r->act == A_DELETE || r->act == A_HASH) && !key && !pattern)
        FAIL(NULL, "action %s needs key or pattern", act);
    if (sets && has_value == (from != NULL))
        FAIL(NULL, "action %s needs exactly one of value and from_attribute", act);
    if (!sets && (has_value || from))
        FAIL(pc_node_get(m, has_value ? "value" : "from_attribute"), "%s: not used by action %s",
             has_value ? "value" : "from_attribute", act);
    if (r->act == A_EXTRACT && !pattern) FAIL(NULL, "pattern: required for action extract");
    if (sets && pattern) FAIL(pc_node_get(m, "pattern"), "pattern: not used by action %s", act);
    if (parse_rule_value(m, path, r, sets, act, err) ||
        (pattern && parse_rule_pattern(m, path, r, pattern, err)))
        return PC_EINVAL;
    r->key = key ? pc_xstrdup(key) : NULL;
    r->from_attribute = from ? pc_xstrdup(from) : NULL;
    return 0;
}
#undef FAIL

static int parse_rules(const pc_node *list, const char *path, rule **out, size_t *n_out,
                       pc_error *err)
{
    *out = NULL;
    *n_out = 0;
    if (!list || list->kind == PC_NODE_NULL) return 0;
    if (list->kind != PC_NODE_SEQ)
        return pc_cfg_errorf(err, list, path, "attributes: must be a list of actions");
    rule *rules = pc_xcalloc(list->n ? list->n : 1, sizeof *rules);
    for (size_t i = 0; i < list->n; i++) {
        char sub[256];
        snprintf(sub, sizeof sub, "%s::attributes[%zu]", path, i);
        if (parse_rule(list->vals[i], sub, &rules[i], err)) {
            rules_free(rules, i + 1);
            return PC_EINVAL;
        }
    }
    *out = rules;
    *n_out = list->n;
    return 0;
}

static int resource_validate(void *cfgp, const pc_node *node, const char *path, pc_error *err)
{
    resource_cfg *cfg = cfgp;
    rule *rules;
    size_t n;
    (void)node;
    if (parse_rules(cfg->attributes, path, &rules, &n, err)) return PC_EINVAL;
    rules_free(rules, n);
    return 0;
}

static int resource_create(pc_component *c, pc_error *err)
{
    resource_cfg *cfg = c->cfg;
    resource_state *st = pc_xcalloc(1, sizeof *st);
    char path[256];
    snprintf(path, sizeof path, "processors::%s", c->id);
    if (parse_rules(cfg->attributes, path, &st->rules, &st->n_rules, err)) {
        free(st);
        return PC_EINVAL;
    }
    c->priv = st;
    pc_proc_metric(c, "otelcol_processor_resource_changed_resources",
                   "Resources whose attributes the resource processor changed",
                   &st->resources_changed);
    return 0;
}

static void resource_destroy(pc_component *c)
{
    resource_state *st = c->priv;
    if (!st) return;
    rules_free(st->rules, st->n_rules);
    free(st);
}

/* ---- applying the rules to one Resource ------------------------------------------------- */

typedef struct kvlist {
    pc_keyvalue **v;
    size_t n, cap;
    bool changed;
} kvlist;

static ssize_t kv_find(const kvlist *l, const pc_dictionary *d, const char *key)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(pc_keyvalue_key(d, l->v[i]), key) == 0) return (ssize_t)i;
    return -1;
}

static void kv_remove_at(kvlist *l, size_t i)
{
    memmove(&l->v[i], &l->v[i + 1], (l->n - i - 1) * sizeof *l->v);
    l->n--;
    l->changed = true;
}

static void kv_remove_key(kvlist *l, const pc_dictionary *d, const char *key, size_t from)
{
    for (size_t i = from; i < l->n;)
        if (strcmp(pc_keyvalue_key(d, l->v[i]), key) == 0)
            kv_remove_at(l, i);
        else
            i++;
}

/* Write key = v (v arena-owned) in the plain form: replaces the first entry with that key and
 * removes any other, or appends. */
static void kv_set(kvlist *l, const pc_dictionary *d, pc_arena *a, const char *key, pc_anyvalue *v)
{
    pc_keyvalue *kv = pc_arena_alloc(a, sizeof *kv);
    opentelemetry__proto__common__v1__key_value__init(kv);
    kv->key = pc_arena_strndup(a, key, strlen(key));
    kv->value = v;
    ssize_t i = kv_find(l, d, key);
    if (i >= 0) {
        l->v[i] = kv;
        kv_remove_key(l, d, key, (size_t)i + 1);
    } else {
        if (l->n == l->cap) {
            l->cap = l->cap ? 2 * l->cap : 8;
            l->v = pc_xrealloc(l->v, l->cap * sizeof *l->v);
        }
        l->v[l->n++] = kv;
    }
    l->changed = true;
}

static pc_anyvalue *new_str_value(pc_arena *a, const char *s, size_t len)
{
    pc_anyvalue *v = pc_arena_alloc(a, sizeof *v);
    opentelemetry__proto__common__v1__any_value__init(v);
    v->value_case = PC_AV_STRING;
    v->string_value = pc_arena_strndup(a, s, len);
    return v;
}

/* A copy of src in the plain form (strindex strings resolved), converted when asked; when the
 * conversion does not apply the value is copied as is (as the Collector's convert does). */
static pc_anyvalue *copy_value(pc_arena *a, const pc_dictionary *d, const pc_anyvalue *src,
                               conv_type conv)
{
    pc_anyvalue *v = pc_arena_alloc(a, sizeof *v);
    if (src)
        *v = *src;
    else
        opentelemetry__proto__common__v1__any_value__init(v);
    const char *s = pc_anyvalue_str(d, src);
    if (s) {
        v->value_case = PC_AV_STRING;
        v->string_value = (char *)s; /* arena or string table: lives as long as the batch */
    }
    char buf[64];
    switch (conv) {
    case CT_STRING:
        if (v->value_case == PC_AV_INT)
            snprintf(buf, sizeof buf, "%" PRId64, v->int_value);
        else if (v->value_case == PC_AV_DOUBLE)
            snprintf(buf, sizeof buf, "%.17g", v->double_value);
        else if (v->value_case == PC_AV_BOOL)
            snprintf(buf, sizeof buf, "%s", v->bool_value ? "true" : "false");
        else
            break;
        return new_str_value(a, buf, strlen(buf));
    case CT_INT:
    case CT_DOUBLE:
    case CT_BOOL: {
        pc_anyvalue tmp;
        if (s && scalar_value(s, conv, &tmp) == 0) {
            if (tmp.value_case == PC_AV_STRING)
                free(tmp.string_value);
            else
                *v = tmp;
        } else if (conv == CT_INT && v->value_case == PC_AV_DOUBLE) {
            v->value_case = PC_AV_INT;
            v->int_value = (int64_t)v->double_value;
        } else if (conv == CT_INT && v->value_case == PC_AV_BOOL) {
            v->value_case = PC_AV_INT;
            v->int_value = v->bool_value ? 1 : 0;
        } else if (conv == CT_DOUBLE && v->value_case == PC_AV_INT) {
            v->value_case = PC_AV_DOUBLE;
            v->double_value = (double)v->int_value;
        }
        break;
    }
    default: break;
    }
    return v;
}

/* The Collector's hash encoding: strings as bytes, bools as one byte, int and double as 8
 * little-endian bytes; anything else hashes to "". */
static pc_anyvalue *hash_value(pc_arena *a, const pc_dictionary *d, const pc_anyvalue *v, bool sha1)
{
    uint8_t num[8];
    const uint8_t *data = NULL;
    size_t len = 0;
    const char *s = pc_anyvalue_str(d, v);
    uint64_t bits = 0;
    if (s) {
        data = (const uint8_t *)s;
        len = strlen(s);
    } else if (v && v->value_case == PC_AV_BOOL) {
        num[0] = v->bool_value ? 1 : 0;
        data = num;
        len = 1;
    } else if (v && (v->value_case == PC_AV_INT || v->value_case == PC_AV_DOUBLE)) {
        if (v->value_case == PC_AV_INT)
            bits = (uint64_t)v->int_value;
        else
            memcpy(&bits, &v->double_value, sizeof bits);
        for (int i = 0; i < 8; i++)
            num[i] = (uint8_t)(bits >> (8 * i));
        data = num;
        len = 8;
    }
    char hex[65] = "";
    if (len) sha_hex(sha1, data, len, hex);
    return new_str_value(a, hex, strlen(hex));
}

static void apply_extract(const rule *r, kvlist *l, const pc_dictionary *d, pc_arena *a)
{
    ssize_t i = kv_find(l, d, r->key);
    if (i < 0) return;
    const char *s = pc_anyvalue_str(d, l->v[i]->value);
    if (!s) return;
    regmatch_t m[32];
    size_t nm = r->re.re_nsub + 1 < 32 ? r->re.re_nsub + 1 : 32;
    if (regexec(&r->re, s, nm, m, 0) != 0) return;
    for (size_t g = 1; g < nm; g++) {
        const char *name = r->groups[g - 1];
        if (!name) continue;
        size_t len = m[g].rm_so >= 0 ? (size_t)(m[g].rm_eo - m[g].rm_so) : 0;
        const char *start = m[g].rm_so >= 0 ? s + m[g].rm_so : "";
        kv_set(l, d, a, name, new_str_value(a, start, len));
    }
}

static void apply_rule(const rule *r, kvlist *l, const pc_dictionary *d, pc_arena *a)
{
    ssize_t at = r->key ? kv_find(l, d, r->key) : -1;
    switch (r->act) {
    case A_INSERT:
    case A_UPDATE:
    case A_UPSERT: {
        if (r->act == A_INSERT && at >= 0) return;
        if (r->act == A_UPDATE && at < 0) return;
        pc_anyvalue *v;
        if (r->from_attribute) {
            if (strcmp(r->from_attribute, r->key) == 0 && r->conv == CT_NONE) return; /* no-op */
            ssize_t src = kv_find(l, d, r->from_attribute);
            if (src < 0) return; /* absent source: no change */
            v = copy_value(a, d, l->v[src]->value, r->conv);
        } else {
            v = pc_arena_memdup(a, &r->value, sizeof r->value);
            if (v->value_case == PC_AV_STRING)
                v->string_value = pc_arena_strndup(a, v->string_value, strlen(v->string_value));
        }
        kv_set(l, d, a, r->key, v);
        return;
    }
    case A_DELETE:
        if (r->key)
            kv_remove_key(l, d, r->key, 0);
        else
            for (size_t i = 0; i < l->n;)
                if (regexec(&r->re, pc_keyvalue_key(d, l->v[i]), 0, NULL, 0) == 0)
                    kv_remove_at(l, i);
                else
                    i++;
        return;
    case A_HASH:
        for (size_t i = 0; i < l->n; i++) {
            const char *k = pc_keyvalue_key(d, l->v[i]);
            bool hit = r->key ? (ssize_t)i == at : regexec(&r->re, k, 0, NULL, 0) == 0;
            if (!hit) continue;
            pc_keyvalue *kv = pc_arena_alloc(a, sizeof *kv);
            opentelemetry__proto__common__v1__key_value__init(kv);
            kv->key = pc_arena_strndup(a, k, strlen(k));
            kv->value = hash_value(a, d, l->v[i]->value, r->sha1);
            l->v[i] = kv;
            l->changed = true;
        }
        if (r->key && at >= 0) kv_remove_key(l, d, r->key, (size_t)at + 1);
        return;
    case A_EXTRACT: apply_extract(r, l, d, a); return;
    }
}

/* ---- consume ---------------------------------------------------------------------------- */

typedef struct resource_job {
    pc_proc_job j;
    size_t changed;
} resource_job;

static void resource_run(pc_proc_job *pj)
{
    resource_job *job = (resource_job *)pj;
    resource_state *st = pj->c->priv;
    pc_batch_make_writable(&pj->b);
    pc_batch *b = pj->b;
    const pc_dictionary *d =
        pc_batch_req(b) ? pc_batch_req(b)->dictionary : NULL; /* profiles only */
    kvlist l = {0};
    size_t n = pc_batch_n_resources(b);
    for (size_t i = 0; i < n; i++) {
        pc_resource **slot = pc_batch_resource_slot(b, i);
        if (!*slot) {
            *slot = pc_arena_alloc(b->arena, sizeof **slot);
            opentelemetry__proto__resource__v1__resource__init(*slot);
        }
        pc_resource *res = *slot;
        l.n = 0;
        l.changed = false;
        if (res->n_attributes > l.cap) {
            l.cap = res->n_attributes;
            l.v = pc_xrealloc(l.v, l.cap * sizeof *l.v);
        }
        for (size_t k = 0; k < res->n_attributes; k++)
            if (res->attributes[k]) l.v[l.n++] = res->attributes[k];
        for (size_t r = 0; r < st->n_rules; r++)
            apply_rule(&st->rules[r], &l, d, b->arena);
        if (!l.changed) continue;
        res->n_attributes = l.n;
        res->attributes = l.n ? pc_arena_memdup(b->arena, l.v, l.n * sizeof *l.v) : NULL;
        job->changed++;
    }
    free(l.v);
}

static void resource_after(pc_proc_job *pj)
{
    resource_job *job = (resource_job *)pj;
    resource_state *st = pj->c->priv;
    st->batches++;
    st->resources_changed += job->changed;
}

static void resource_consume(pc_component *c, pc_batch *b, pc_done_fn done, void *arg)
{
    resource_state *st = c->priv;
    if (st->n_rules == 0) {
        pc_consume(c->next, b, done, arg);
        return;
    }
    resource_job *job = pc_xcalloc(1, sizeof *job);
    job->j = (pc_proc_job){.c = c,
                           .core = &st->core,
                           .b = b,
                           .done = done,
                           .arg = arg,
                           .run = resource_run,
                           .after = resource_after};
    pc_proc_job_submit(&job->j);
}

static void resource_shutdown(pc_component *c, pc_shutdown_done done)
{
    resource_state *st = c->priv;
    if (!st) {
        done(c);
        return;
    }
    PC_DEBUG(c->id, "%" PRIu64 " batches, %" PRIu64 " resources changed", st->batches,
             st->resources_changed);
    pc_proc_core_shutdown(&st->core, c, done);
}

size_t pc_resource_counters(const pc_component *c, pc_proc_counter *out, size_t max)
{
    const resource_state *st = c->priv;
    const pc_proc_counter all[] = {{"batches", st->batches},
                                   {"resources_changed", st->resources_changed}};
    return pc_proc_counters_copy(all, sizeof all / sizeof all[0], out, max);
}

const pc_component_type pc_processor_resource = {
    .name = "resource",
    .kind = PC_KIND_PROCESSOR,
    .stability = "development",
    .cfg_size = sizeof(resource_cfg),
    .cfg = resource_keys,
    .validate = resource_validate,
    .create = resource_create,
    .consume = resource_consume,
    .shutdown = resource_shutdown,
    .destroy = resource_destroy,
    .mutates = true,
    .signals = PC_SIGNALS_ALL,
    .doc = "inserts, updates, upserts, deletes, hashes and extracts resource attributes",
};
