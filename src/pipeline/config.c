/* YAML (libyaml) to a small node tree that remembers file and line, with the Collector's
 * ${env:NAME}, ${NAME} and ${env:NAME:-default} substitution and multi-file merge. */
#include "pipeline/config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "pdata/pdata.h"
#include "pipeline/log.h"

#define MAX_NODES 100000 /* alias expansion cannot blow up memory ("billion laughs") */
#define MAX_DEPTH 64

void pc_cfg_errorf(pc_cfg_err *e, const pc_node *at, const char *path, const char *fmt, ...)
{
    int n = 0;
    if (at && at->file) n = snprintf(e->msg, sizeof e->msg, "%s:%d: ", at->file, at->line);
    if (path && *path && n < (int)sizeof e->msg)
        n += snprintf(e->msg + n, sizeof e->msg - (size_t)n, "%s: ", path);
    if (n >= (int)sizeof e->msg) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg + n, sizeof e->msg - (size_t)n, fmt, ap);
    va_end(ap);
}

/* Interned file names: nodes point at them; they live for the process. */
static const char *intern_file(const char *name)
{
    static char *names[64];
    static size_t n;
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0) return names[i];
    if (n == 64) return "config";
    return names[n++] = pc_xstrdup(name);
}

/* Expand ${...} references; "$$" is a literal '$'. */
static char *substitute_env(const char *s)
{
    pc_buf out = {0};
    while (*s) {
        if (s[0] == '$' && s[1] == '$') {
            pc_buf_append(&out, "$", 1);
            s += 2;
            continue;
        }
        const char *end;
        if (s[0] == '$' && s[1] == '{' && (end = strchr(s + 2, '}'))) {
            char ref[256];
            size_t len = (size_t)(end - (s + 2));
            if (len < sizeof ref) {
                memcpy(ref, s + 2, len);
                ref[len] = 0;
                char *name = ref, *def = NULL;
                if (strncmp(name, "env:", 4) == 0) name += 4;
                char *sep = strstr(name, ":-");
                if (sep) {
                    *sep = 0;
                    def = sep + 2;
                }
                const char *val = getenv(name);
                if (!val || (!*val && def)) val = def ? def : "";
                pc_buf_append(&out, val, strlen(val));
                s = end + 1;
                continue;
            }
        }
        pc_buf_append(&out, s, 1);
        s++;
    }
    char *r = pc_xstrdup(out.data ? (char *)out.data : "");
    pc_buf_free(&out);
    return r;
}

typedef struct convert_ctx {
    yaml_document_t *doc;
    const char *file;
    size_t count;
    pc_cfg_err *err;
} convert_ctx;

static pc_node *node_new(pc_node_kind kind, const char *file, int line)
{
    pc_node *n = pc_xcalloc(1, sizeof(*n));
    n->kind = kind;
    n->file = file;
    n->line = line;
    return n;
}

static int is_null_scalar(const yaml_node_t *y)
{
    const char *v = (const char *)y->data.scalar.value;
    if (y->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return 0;
    return !*v || !strcmp(v, "~") || !strcmp(v, "null") || !strcmp(v, "Null") || !strcmp(v, "NULL");
}

static pc_node *convert(convert_ctx *c, yaml_node_t *y, int depth)
{
    int line = (int)y->start_mark.line + 1;
    if (++c->count > MAX_NODES || depth > MAX_DEPTH) {
        pc_cfg_errorf(c->err, NULL, NULL, "%s:%d: document too large or too deeply nested", c->file,
                      line);
        return NULL;
    }
    pc_node *n;
    switch (y->type) {
    case YAML_SCALAR_NODE:
        if (is_null_scalar(y)) return node_new(PC_NODE_NULL, c->file, line);
        n = node_new(PC_NODE_SCALAR, c->file, line);
        n->scalar = substitute_env((const char *)y->data.scalar.value);
        return n;
    case YAML_SEQUENCE_NODE: {
        n = node_new(PC_NODE_SEQ, c->file, line);
        size_t cnt = (size_t)(y->data.sequence.items.top - y->data.sequence.items.start);
        n->vals = pc_xcalloc(cnt ? cnt : 1, sizeof(pc_node *));
        for (yaml_node_item_t *it = y->data.sequence.items.start; it < y->data.sequence.items.top;
             it++) {
            pc_node *child = convert(c, yaml_document_get_node(c->doc, *it), depth + 1);
            if (!child) goto fail;
            n->vals[n->n++] = child;
        }
        return n;
    }
    case YAML_MAPPING_NODE: {
        n = node_new(PC_NODE_MAP, c->file, line);
        size_t cnt = (size_t)(y->data.mapping.pairs.top - y->data.mapping.pairs.start);
        n->keys = pc_xcalloc(cnt ? cnt : 1, sizeof(char *));
        n->vals = pc_xcalloc(cnt ? cnt : 1, sizeof(pc_node *));
        for (yaml_node_pair_t *p = y->data.mapping.pairs.start; p < y->data.mapping.pairs.top;
             p++) {
            yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
            if (!k || k->type != YAML_SCALAR_NODE) {
                pc_cfg_errorf(c->err, NULL, NULL, "%s:%d: mapping keys must be scalars", c->file,
                              (int)(k ? k->start_mark.line + 1 : (size_t)line));
                goto fail;
            }
            const char *key = (const char *)k->data.scalar.value;
            for (size_t i = 0; i < n->n; i++) {
                if (strcmp(n->keys[i], key) == 0) {
                    pc_cfg_errorf(c->err, NULL, NULL, "%s:%d: duplicate key \"%s\"", c->file,
                                  (int)k->start_mark.line + 1, key);
                    goto fail;
                }
            }
            pc_node *child = convert(c, yaml_document_get_node(c->doc, p->value), depth + 1);
            if (!child) goto fail;
            child->line = (int)k->start_mark.line + 1; /* errors point at the key */
            n->keys[n->n] = pc_xstrdup(key);
            n->vals[n->n++] = child;
        }
        return n;
    }
    default: return node_new(PC_NODE_NULL, c->file, line);
    }
fail:
    pc_node_free(n);
    return NULL;
}

pc_node *pc_config_parse(const char *text, size_t len, const char *name, pc_cfg_err *err)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    const char *file = intern_file(name);
    if (!yaml_parser_initialize(&parser)) abort();
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        pc_cfg_errorf(err, NULL, NULL, "%s:%zu: invalid YAML: %s", file,
                      parser.problem_mark.line + 1,
                      parser.problem ? parser.problem : "syntax error");
        yaml_parser_delete(&parser);
        return NULL;
    }
    pc_node *root;
    yaml_node_t *top = yaml_document_get_root_node(&doc);
    if (!top) {
        root = node_new(PC_NODE_MAP, file, 1); /* an empty file is an empty map */
    } else {
        convert_ctx c = {&doc, file, 0, err};
        root = convert(&c, top, 0);
        if (root && root->kind == PC_NODE_NULL) root->kind = PC_NODE_MAP;
        if (root && root->kind != PC_NODE_MAP) {
            pc_cfg_errorf(err, root, NULL, "the config must be a mapping at the top level");
            pc_node_free(root);
            root = NULL;
        }
    }
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    return root;
}

pc_node *pc_config_load_file(const char *path, pc_cfg_err *err)
{
    const char *p = strncmp(path, "file:", 5) == 0 ? path + 5 : path;
    FILE *f = fopen(p, "rb");
    if (!f) {
        pc_cfg_errorf(err, NULL, NULL, "cannot read config %s: %s", p, strerror(errno));
        return NULL;
    }
    pc_buf b = {0};
    char chunk[8192];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        pc_buf_append(&b, chunk, n);
    fclose(f);
    pc_node *root = pc_config_parse(b.data ? (char *)b.data : "", b.len, p, err);
    pc_buf_free(&b);
    return root;
}

void pc_node_free(pc_node *n)
{
    if (!n) return;
    for (size_t i = 0; i < n->n; i++) {
        if (n->keys) free(n->keys[i]);
        pc_node_free(n->vals[i]);
    }
    free(n->keys);
    free(n->vals);
    free(n->scalar);
    free(n);
}

void pc_config_merge(pc_node *dst, pc_node *src)
{
    if (dst->kind != PC_NODE_MAP || src->kind != PC_NODE_MAP) {
        /* replace dst's content by src's */
        pc_node tmp = *dst;
        *dst = *src;
        *src = tmp;
        pc_node_free(src);
        return;
    }
    for (size_t i = 0; i < src->n; i++) {
        size_t j = 0;
        while (j < dst->n && strcmp(dst->keys[j], src->keys[i]) != 0)
            j++;
        if (j < dst->n) {
            pc_config_merge(dst->vals[j], src->vals[i]);
            free(src->keys[i]);
        } else {
            dst->keys = pc_xrealloc(dst->keys, (dst->n + 1) * sizeof(char *));
            dst->vals = pc_xrealloc(dst->vals, (dst->n + 1) * sizeof(pc_node *));
            dst->keys[dst->n] = src->keys[i];
            dst->vals[dst->n++] = src->vals[i];
        }
    }
    free(src->keys);
    free(src->vals);
    free(src->scalar);
    free(src);
}

const pc_node *pc_node_get(const pc_node *map, const char *key)
{
    if (!map || map->kind != PC_NODE_MAP) return NULL;
    for (size_t i = 0; i < map->n; i++)
        if (strcmp(map->keys[i], key) == 0) return map->vals[i];
    return NULL;
}

static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64) return 99;
    size_t row[65];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t prev = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t cur = row[j];
            size_t best = prev + (a[i - 1] != b[j - 1]);
            if (row[j] + 1 < best) best = row[j] + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            prev = cur;
        }
    }
    return row[lb];
}

const char *pc_closest(const char *key, const char *const *candidates, size_t n)
{
    const char *best = NULL;
    size_t best_d = 3; /* only suggest close matches */
    for (size_t i = 0; i < n; i++) {
        size_t d = edit_distance(key, candidates[i]);
        if (d < best_d) {
            best_d = d;
            best = candidates[i];
        }
    }
    return best;
}
