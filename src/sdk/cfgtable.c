/* The config-table engine: one table per component gives defaults, parsing, validation and docs. */
#include "sdk/cfgtable.h"

#include <ctype.h>
#include <pthread.h>
#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/alloc.h"

int pc_parse_bool(const char *s, bool *out)
{
    if (!strcasecmp(s, "true") || !strcasecmp(s, "yes") || !strcasecmp(s, "on"))
        *out = true;
    else if (!strcasecmp(s, "false") || !strcasecmp(s, "no") || !strcasecmp(s, "off"))
        *out = false;
    else
        return PC_EINVAL;
    return 0;
}

/* Number followed by a unit from the table; bare numbers use bare_mult. */
typedef struct unit {
    const char *name;
    double mult;
} unit;

static int parse_with_units(const char *s, const unit *units, double bare_mult, uint64_t *out)
{
    while (isspace((unsigned char)*s))
        s++;
    if (!*s || *s == '-') return PC_EINVAL;
    double total = 0;
    int parts = 0;
    while (*s) {
        char *end;
        errno = 0;
        double v = strtod(s, &end);
        if (end == s || errno) return PC_EINVAL;
        s = end;
        while (isspace((unsigned char)*s))
            s++;
        const char *u = s;
        while (isalpha((unsigned char)*s))
            s++;
        size_t ulen = (size_t)(s - u);
        double mult = -1;
        if (ulen == 0) {
            if (parts > 0 || *s) return PC_EINVAL;
            mult = bare_mult;
        }
        for (const unit *x = units; ulen && x->name; x++)
            if (strlen(x->name) == ulen && strncasecmp(x->name, u, ulen) == 0) mult = x->mult;
        if (mult < 0) return PC_EINVAL;
        total += v * mult;
        parts++;
        while (isspace((unsigned char)*s))
            s++;
    }
    if (total < 0 || total > 1.8e19) return PC_EINVAL;
    *out = (uint64_t)(total + 0.5);
    return 0;
}

int pc_parse_duration_ms(const char *s, uint64_t *out)
{
    static const unit units[] = {{"ns", 1e-6}, {"us", 1e-3},  {"ms", 1}, {"s", 1e3},
                                 {"m", 60e3},  {"h", 3600e3}, {NULL, 0}};
    /* Go's time.ParseDuration accepts "1m30s"; a bare number is seconds, like most users mean */
    return parse_with_units(s, units, 1e3, out);
}

int pc_parse_size(const char *s, uint64_t *out)
{
    static const unit units[] = {{"b", 1},
                                 {"k", 1e3},
                                 {"kb", 1e3},
                                 {"m", 1e6},
                                 {"mb", 1e6},
                                 {"g", 1e9},
                                 {"gb", 1e9},
                                 {"kib", 1024.0},
                                 {"mib", 1048576.0},
                                 {"gib", 1073741824.0},
                                 {"ki", 1024.0},
                                 {"mi", 1048576.0},
                                 {"gi", 1073741824.0},
                                 {NULL, 0}};
    return parse_with_units(s, units, 1, out);
}

static void free_value(const pc_cfg_key *k, void *cfg)
{
    char *p = (char *)cfg + k->offset;
    switch (k->type) {
    case PC_CFG_STRING:
        free(*(char **)p);
        *(char **)p = NULL;
        break;
    case PC_CFG_LIST: {
        pc_strlist *l = (pc_strlist *)p;
        for (size_t i = 0; i < l->n; i++)
            free(l->v[i]);
        free(l->v);
        memset(l, 0, sizeof *l);
        break;
    }
    case PC_CFG_MAP: {
        pc_strmap *m = (pc_strmap *)p;
        for (size_t i = 0; i < m->n; i++) {
            free(m->keys[i]);
            free(m->vals[i]);
        }
        free(m->keys);
        free(m->vals);
        memset(m, 0, sizeof *m);
        break;
    }
    default: break;
    }
}

static const char *type_name(pc_cfg_type t)
{
    static const char *const names[] = {"a string",  "an integer", "a boolean", "a duration",
                                        "a size",    "one of",     "a list",    "a map",
                                        "a mapping", "a number"};
    return names[t];
}

static void list_push(pc_strlist *l, const char *s)
{
    l->v = pc_xrealloc(l->v, (l->n + 1) * sizeof(char *));
    l->v[l->n++] = pc_xstrdup(s);
}

/* "a, b, c": an enum's choices, for its errors. */
static void choices_text(const pc_cfg_key *k, char *out, size_t len)
{
    const char *const *choices = pc_cfg_key_choices(k);
    out[0] = 0;
    for (int i = 0; choices && choices[i]; i++) {
        strncat(out, i ? ", " : "", len - strlen(out) - 1);
        strncat(out, choices[i], len - strlen(out) - 1);
    }
}

static int bad_type(const pc_cfg_key *k, const pc_node *n, const char *path, pc_error *err)
{
    char opts[256] = "";
    if (k->type == PC_CFG_ENUM) choices_text(k, opts, sizeof opts);
    return pc_cfg_errorf(err, n, path, "must be %s%s%s", type_name(k->type), opts[0] ? ": " : "",
                         opts);
}

/* A list: a sequence of strings, or one scalar ("a,b" in defaults, or a single item). */
static int set_list(const pc_cfg_key *k, void *cfg, const pc_node *n, const char *path,
                    pc_error *err)
{
    free_value(k, cfg);
    pc_strlist *l = (pc_strlist *)((char *)cfg + k->offset);
    if (n->kind == PC_NODE_NULL) return 0;
    if (n->kind == PC_NODE_SCALAR) {
        list_push(l, n->scalar);
        return 0;
    }
    if (n->kind != PC_NODE_SEQ) return bad_type(k, n, path, err);
    int rc = 0;
    for (size_t i = 0; i < n->n; i++) {
        if (n->vals[i]->kind != PC_NODE_SCALAR) {
            rc = pc_cfg_errorf(err, n->vals[i], path, "list items must be strings");
            continue;
        }
        list_push(l, n->vals[i]->scalar);
    }
    return rc;
}

static int set_map(const pc_cfg_key *k, void *cfg, const pc_node *n, const char *path,
                   pc_error *err)
{
    free_value(k, cfg);
    pc_strmap *m = (pc_strmap *)((char *)cfg + k->offset);
    if (n->kind == PC_NODE_NULL) return 0;
    if (n->kind != PC_NODE_MAP) return bad_type(k, n, path, err);
    m->keys = pc_xcalloc(n->n ? n->n : 1, sizeof(char *));
    m->vals = pc_xcalloc(n->n ? n->n : 1, sizeof(char *));
    for (size_t i = 0; i < n->n; i++) {
        if (n->vals[i]->kind == PC_NODE_MAP || n->vals[i]->kind == PC_NODE_SEQ)
            return pc_cfg_errorf(err, n->vals[i], path, "values of %s must be strings", k->key);
        m->keys[m->n] = pc_xstrdup(n->keys[i]);
        m->vals[m->n++] = pc_xstrdup(n->vals[i]->scalar ? n->vals[i]->scalar : "");
    }
    return 0;
}

static int set_enum(const pc_cfg_key *k, int *p, const pc_node *n, const char *path, pc_error *err)
{
    const char *s = n->scalar;
    const char *const *choices = pc_cfg_key_choices(k);
    for (int i = 0; choices[i]; i++)
        if (strcasecmp(choices[i], s) == 0) {
            *p = i;
            return 0;
        }
    char opts[256];
    choices_text(k, opts, sizeof opts);
    return pc_cfg_errorf(err, n, path, "\"%s\" is not one of: %s", s, opts);
}

/* A scalar's value of a numeric, boolean, duration or size key. */
static int set_number(const pc_cfg_key *k, char *p, const pc_node *n, const char *path,
                      pc_error *err)
{
    const char *s = n->scalar;
    char *end;
    errno = 0;
    switch (k->type) {
    case PC_CFG_INT: {
        long long v = strtoll(s, &end, 10);
        if (end == s || *end || errno)
            return pc_cfg_errorf(err, n, path, "\"%s\" is not an integer", s);
        *(int64_t *)p = v;
        return 0;
    }
    case PC_CFG_FLOAT: {
        double v = strtod(s, &end);
        if (end == s || *end || errno)
            return pc_cfg_errorf(err, n, path, "\"%s\" is not a number", s);
        *(double *)p = v;
        return 0;
    }
    case PC_CFG_BOOL:
        if (pc_parse_bool(s, (bool *)p))
            return pc_cfg_errorf(err, n, path, "\"%s\" is not a boolean (true or false)", s);
        return 0;
    case PC_CFG_DURATION:
        if (pc_parse_duration_ms(s, (uint64_t *)p))
            return pc_cfg_errorf(err, n, path, "\"%s\" is not a duration (e.g. 200ms, 5s, 1m)", s);
        return 0;
    case PC_CFG_SIZE:
        if (pc_parse_size(s, (uint64_t *)p))
            return pc_cfg_errorf(err, n, path, "\"%s\" is not a size (e.g. 512KiB, 20MiB, 1048576)",
                                 s);
        return 0;
    default: return bad_type(k, n, path, err);
    }
}

/* Parse one scalar (or list/map node) into its slot. */
static int set_value(const pc_cfg_key *k, void *cfg, const pc_node *n, const char *path,
                     pc_error *err)
{
    char *p = (char *)cfg + k->offset;
    switch (k->type) {
    case PC_CFG_NODE: *(const pc_node **)p = n; return 0;
    case PC_CFG_LIST: return set_list(k, cfg, n, path, err);
    case PC_CFG_MAP: return set_map(k, cfg, n, path, err);
    default: break;
    }
    if (n->kind == PC_NODE_NULL) return 0; /* "key:" with no value keeps the default */
    if (n->kind != PC_NODE_SCALAR) return bad_type(k, n, path, err);
    switch (k->type) {
    case PC_CFG_STRING:
        free_value(k, cfg);
        *(char **)p = pc_xstrdup(n->scalar);
        return 0;
    case PC_CFG_ENUM: return set_enum(k, (int *)p, n, path, err);
    default: return set_number(k, p, n, path, err);
    }
}

/* Walk a map node at dotted prefix `prefix`, matching keys against the table. Every key is
 * looked at, so one pass reports every unknown key and bad value. */
static int walk(const pc_cfg_key *table, void *cfg, const pc_node *n, const char *prefix,
                const char *path, pc_error *err)
{
    if (n->kind == PC_NODE_NULL) return 0;
    if (n->kind != PC_NODE_MAP) {
        pc_cfg_errorf(err, n, path, "must be a mapping");
        return PC_EINVAL;
    }
    size_t plen = strlen(prefix);
    int rc = 0;
    for (size_t i = 0; i < n->n; i++) {
        char full[256], sub[512];
        snprintf(full, sizeof full, "%s%s%s", prefix, plen ? "." : "", n->keys[i]);
        snprintf(sub, sizeof sub, "%s::%s", path, n->keys[i]);
        size_t flen = strlen(full);
        const pc_cfg_key *exact = NULL;
        int is_prefix = 0;
        for (const pc_cfg_key *k = table; k->key; k++) {
            if (strcmp(k->key, full) == 0)
                exact = k;
            else if (strncmp(k->key, full, flen) == 0 && k->key[flen] == '.')
                is_prefix = 1;
        }
        if (exact) {
            if (set_value(exact, cfg, n->vals[i], sub, err)) rc = PC_EINVAL;
        } else if (is_prefix) {
            if (walk(table, cfg, n->vals[i], full, sub, err)) rc = PC_EINVAL;
        } else {
            /* candidates: the next path segment of every key under this prefix */
            const char *cands[64];
            char segs[64][64];
            size_t nc = 0;
            for (const pc_cfg_key *k = table; k->key && nc < 64; k++) {
                if (plen && (strncmp(k->key, prefix, plen) != 0 || k->key[plen] != '.')) continue;
                const char *seg = k->key + (plen ? plen + 1 : 0);
                size_t sl = strcspn(seg, ".");
                if (sl >= 64) continue;
                memcpy(segs[nc], seg, sl);
                segs[nc][sl] = 0;
                cands[nc] = segs[nc];
                nc++;
            }
            const char *close = pc_closest(n->keys[i], cands, nc);
            /* a key of a ${file:} document is the file's content: not shown */
            const char *shown = n->vals[i]->provided ? "[REDACTED]" : n->keys[i];
            if (n->vals[i]->provided) snprintf(sub, sizeof sub, "%s::[REDACTED]", path);
            if (close)
                pc_cfg_errorf(err, n->vals[i], sub, "unknown key \"%s\" (did you mean \"%s\"?)",
                              shown, close);
            else
                pc_cfg_errorf(err, n->vals[i], sub, "unknown key \"%s\"", shown);
            rc = PC_EINVAL;
        }
    }
    return rc;
}

/* ---- groups ---- */

typedef struct flat_table {
    const pc_cfg_key *table;
    pc_cfg_key *flat;
} flat_table;

static flat_table *g_flat;
static size_t g_n_flat;
static pthread_mutex_t g_flat_lock = PTHREAD_MUTEX_INITIALIZER;

/* Append table's rows to *out (n used, cap room), groups expanded under prefix and base. */
static void flatten(const pc_cfg_key *table, const char *prefix, size_t base, pc_cfg_key **out,
                    size_t *n, size_t *cap)
{
    for (const pc_cfg_key *k = table; k->key; k++) {
        size_t pl = strlen(prefix), kl = strlen(k->key);
        char *key = pc_xmalloc(pl + kl + 1);
        memcpy(key, prefix, pl);
        memcpy(key + pl, k->key, kl + 1);
        if (k->type == PC_CFG_GROUP) {
            flatten(k->more, key, base + k->offset, out, n, cap);
            free(key);
            continue;
        }
        if (*n + 1 >= *cap) {
            *cap = *cap ? *cap * 2 : 32;
            *out = pc_xrealloc(*out, *cap * sizeof **out);
        }
        (*out)[(*n)++] = (pc_cfg_key){key, k->type, k->def, base + k->offset, k->doc, k->more};
    }
}

static bool has_group(const pc_cfg_key *table)
{
    for (const pc_cfg_key *k = table; k->key; k++)
        if (k->type == PC_CFG_GROUP) return true;
    return false;
}

const pc_cfg_key *pc_cfgtable_flat(const pc_cfg_key *table)
{
    if (!table || !has_group(table)) return table;
    pthread_mutex_lock(&g_flat_lock);
    const pc_cfg_key *flat = NULL;
    for (size_t i = 0; i < g_n_flat && !flat; i++)
        if (g_flat[i].table == table) flat = g_flat[i].flat;
    if (!flat) {
        pc_cfg_key *rows = NULL;
        size_t n = 0, cap = 0;
        flatten(table, "", 0, &rows, &n, &cap);
        if (!rows) rows = pc_xmalloc(sizeof *rows); /* groups with no rows at all */
        rows[n] = (pc_cfg_key){0};                  /* the terminator */
        g_flat = pc_xrealloc(g_flat, (g_n_flat + 1) * sizeof *g_flat);
        g_flat[g_n_flat++] = (flat_table){table, rows};
        flat = rows;
    }
    pthread_mutex_unlock(&g_flat_lock);
    return flat;
}

int pc_cfgtable_apply(const pc_cfg_key *table, void *cfg, const pc_node *node, const char *path,
                      pc_error *err)
{
    table = pc_cfgtable_flat(table);
    if (!table) {
        if (node && node->kind == PC_NODE_MAP && node->n) {
            pc_cfg_errorf(err, node, path, "takes no settings");
            return PC_EINVAL;
        }
        return 0;
    }
    for (const pc_cfg_key *k = table; k->key; k++) {
        if (!pc_cfg_key_has_default(k)) continue;
        pc_node d = {.kind = PC_NODE_SCALAR, .scalar = (char *)k->def};
        if (k->type == PC_CFG_LIST) {
            /* defaults for lists are comma-separated */
            pc_strlist *l = (pc_strlist *)((char *)cfg + k->offset);
            char *copy = pc_xstrdup(k->def), *save = NULL;
            for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save))
                list_push(l, t);
            free(copy);
            continue;
        }
        int rc = set_value(k, cfg, &d, path, err);
        if (rc < 0) return rc;
    }
    return node ? walk(table, cfg, node, "", path, err) : 0;
}

int pc_cfg_key_errorf(pc_error *e, const pc_node *component, const char *path, const char *key,
                      const char *fmt, ...)
{
    char full[512], seg[128];
    const pc_node *at = component;
    size_t n = (size_t)snprintf(full, sizeof full, "%s", path);
    for (const char *k = key; *k && n < sizeof full;) {
        size_t l = strcspn(k, ".");
        snprintf(seg, sizeof seg, "%.*s", (int)(l < sizeof seg ? l : sizeof seg - 1), k);
        n += (size_t)snprintf(full + n, sizeof full - n, "::%s", seg);
        const pc_node *child = pc_node_get(at, seg); /* NULL-safe */
        if (child) at = child;
        k += l + (k[l] == '.');
    }
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return pc_cfg_errorf(e, at, full, "%s", msg);
}

void pc_cfgtable_free(const pc_cfg_key *table, void *cfg)
{
    if (!table || !cfg) return;
    table = pc_cfgtable_flat(table);
    for (const pc_cfg_key *k = table; k->key; k++)
        free_value(k, cfg);
}
