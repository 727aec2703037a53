/* YAML (libyaml) to a small node tree that remembers file and line, with the Collector's confmap
 * providers: ${env:NAME} (${NAME}, ${env:NAME:-default}) and ${file:PATH} in every scalar, and
 * --config URIs (path, file:, env:, yaml:) and --set merged in order. Keys written "a::b" are
 * nested maps, as confmap's "::" delimiter makes them. */
#include "sdk/config.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "pdata/pdata.h"
#include "base/alloc.h"
#include "base/log.h"

#define MAX_NODES      100000 /* alias expansion cannot blow up memory ("billion laughs") */
#define MAX_DEPTH      64
#define MAX_EXPANSIONS 10         /* ${...} whose value holds ${...}, and so on */
#define MAX_FILE_BYTES (16 << 20) /* ${file:...} and config files */

/* ---- errors ---- */

static int path_mode(const char *path);
static int child_mode(const char *key, int mode);
enum { NEVER = -1, NO = 0, SECRET = 1, ALL_VALUES = 2, BLOCK = 3 };

/* Every value below n that an error must not print: the providers', and the secrets print-config
 * redacts (mode as there). */
static void scrub(char *msg, size_t cap, const pc_node *n, int mode)
{
    if (n->kind == PC_NODE_SCALAR) {
        if ((n->provided || mode == SECRET) && n->scalar && *n->scalar)
            pc_redact(msg, cap, n->scalar);
        return;
    }
    for (size_t i = 0; i < n->n; i++)
        scrub(msg, cap, n->vals[i], child_mode(n->keys ? n->keys[i] : NULL, mode));
}

int pc_cfg_errorf(pc_error *e, const pc_node *at, const char *path, const char *fmt, ...)
{
    char msg[640];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (at) scrub(msg, sizeof msg, at, path_mode(path));
    return pc_error_issue_add(e, PC_EINVAL, at ? at->file : NULL, at ? at->line : 0, path, "%s",
                              msg);
}

int pc_cfg_error_at(pc_error *e, const char *file, int line, const char *path, const char *fmt, ...)
{
    char msg[640];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return pc_error_issue_add(e, PC_EINVAL, file, line, path, "%s", msg);
}

/* Interned file names: nodes point at them; they live for the process. A reload parses on a
 * pool thread while a scrape receiver may read its target files, hence the lock. */
static const char *intern_file(const char *name)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static char *names[256];
    static size_t n;
    const char *found = "config";
    pthread_mutex_lock(&lock);
    size_t i = 0;
    while (i < n && strcmp(names[i], name) != 0)
        i++;
    if (i < n)
        found = names[i];
    else if (n < 256)
        found = names[n++] = pc_xstrdup(name);
    pthread_mutex_unlock(&lock);
    return found;
}

/* ---- nodes ---- */

static pc_node *node_new(pc_node_kind kind, const char *file, int line)
{
    pc_node *n = pc_xcalloc(1, sizeof(*n));
    n->kind = kind;
    n->file = file;
    n->line = line;
    return n;
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

pc_node *pc_node_clone(const pc_node *n)
{
    if (!n) return NULL;
    pc_node *c = node_new(n->kind, n->file, n->line);
    c->provided = n->provided;
    if (n->scalar) c->scalar = pc_xstrdup(n->scalar);
    if (n->kind == PC_NODE_MAP || n->kind == PC_NODE_SEQ) {
        c->vals = pc_xcalloc(n->n ? n->n : 1, sizeof(pc_node *));
        if (n->kind == PC_NODE_MAP) c->keys = pc_xcalloc(n->n ? n->n : 1, sizeof(char *));
        for (size_t i = 0; i < n->n; i++) {
            if (c->keys) c->keys[i] = pc_xstrdup(n->keys[i]);
            c->vals[i] = pc_node_clone(n->vals[i]);
        }
        c->n = n->n;
    }
    return c;
}

bool pc_node_equal(const pc_node *a, const pc_node *b)
{
    if (!a || !b) return a == b;
    if (a->kind != b->kind || a->n != b->n) return false;
    switch (a->kind) {
    case PC_NODE_NULL: return true;
    case PC_NODE_SCALAR: return strcmp(a->scalar, b->scalar) == 0;
    case PC_NODE_SEQ:
        for (size_t i = 0; i < a->n; i++)
            if (!pc_node_equal(a->vals[i], b->vals[i])) return false;
        return true;
    case PC_NODE_MAP:
        for (size_t i = 0; i < a->n; i++) { /* keys are unique within a map */
            const pc_node *other = pc_node_get(b, a->keys[i]);
            if (!other || !pc_node_equal(a->vals[i], other)) return false;
        }
        return true;
    }
    return false;
}

static void map_append(pc_node *m, char *key, pc_node *val)
{
    m->keys = pc_xrealloc(m->keys, (m->n + 1) * sizeof(char *));
    m->vals = pc_xrealloc(m->vals, (m->n + 1) * sizeof(pc_node *));
    m->keys[m->n] = key;
    m->vals[m->n++] = val;
}

/* ---- ${...} substitution (confmap's env and file providers) ---- */

typedef struct subst {
    const char *file;
    int line;
    const char *path;
    pc_error *err;
    bool provided; /* something was substituted */
} subst;

static bool env_name_ok(const char *s, size_t len)
{
    if (!len || !((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z') || s[0] == '_'))
        return false;
    for (size_t i = 1; i < len; i++)
        if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
            return false;
    return true;
}

/* A regular file's contents, at most MAX_FILE_BYTES; PC_EIO, PC_EINVAL (not a regular file) or
 * PC_E2BIG with the reason in why. */
static int read_file(const char *path, pc_buf *out, pc_error *why)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st)) {
        int rc = pc_error_set(why, PC_EIO, "%s", strerror(errno));
        if (fd >= 0) close(fd);
        return rc;
    }
    if (!S_ISREG(st.st_mode)) { /* a FIFO or device could block or never end */
        close(fd);
        return pc_error_set(why, PC_EINVAL, "not a regular file");
    }
    char chunk[8192];
    for (;;) {
        ssize_t r = read(fd, chunk, sizeof chunk);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int rc = pc_error_set(why, PC_EIO, "%s", strerror(errno));
            close(fd);
            return rc;
        }
        if (r == 0) break;
        if (out->len + (size_t)r > MAX_FILE_BYTES) {
            close(fd);
            return pc_error_set(why, PC_E2BIG, "larger than %d MiB", MAX_FILE_BYTES >> 20);
        }
        pc_buf_append(out, chunk, (size_t)r);
    }
    close(fd);
    return 0;
}

/* The raw value of one reference (the text between "${" and "}"): an environment variable or a
 * file's contents, verbatim, as the Collector's providers return them (a file's trailing newline
 * stays). 0 ok, PC_EINVAL error (recorded). */
static int retrieve(subst *c, const char *ref, pc_buf *out)
{
    const char *colon = strchr(ref, ':');
    size_t name_len = colon ? (size_t)(colon - ref) : strlen(ref);
    const char *name = ref, *def = NULL;
    /* "${NAME}" and "${NAME:-default}" are the env provider, as confmap's default scheme */
    if (!colon || (env_name_ok(ref, name_len) && colon[1] == '-')) {
        def = colon ? colon + 2 : NULL;
    } else if (!strncmp(ref, "env:", 4)) {
        name = ref + 4;
        const char *sep = strstr(name, ":-");
        name_len = sep ? (size_t)(sep - name) : strlen(name);
        def = sep ? sep + 2 : NULL;
    } else if (!strncmp(ref, "file:", 5)) {
        pc_error e = {0};
        if (!ref[5])
            return pc_cfg_error_at(c->err, c->file, c->line, c->path, "${%s}: no file name", ref);
        if (read_file(ref + 5, out, &e) < 0)
            return pc_cfg_error_at(c->err, c->file, c->line, c->path, "${%s}: cannot read %s: %s",
                                   ref, ref + 5, e.msg);
        return 0;
    } else {
        int http = !strncmp(ref, "http:", 5) || !strncmp(ref, "https:", 6);
        return pc_cfg_error_at(c->err, c->file, c->line, c->path,
                               "${%s}: unsupported provider \"%.*s\" (profcol has env and file%s)",
                               ref, (int)name_len, ref,
                               http ? "; it fetches nothing over HTTP" : "");
    }
    if (!env_name_ok(name, name_len))
        return pc_cfg_error_at(c->err, c->file, c->line, c->path,
                               "${%s}: environment variable \"%.*s\" has an invalid name (letters, "
                               "digits and '_', not starting with a digit)",
                               ref, (int)name_len, name);
    char var[256];
    snprintf(var, sizeof var, "%.*s", (int)name_len, name);
    const char *val = getenv(var);
    if (!val || (!*val && def)) {
        if (!def && !val)
            PC_WARN(NULL,
                    "%s:%d: %s%sconfiguration references unset environment variable \"%s\" "
                    "(the value is empty)",
                    c->file, c->line, c->path, *c->path ? ": " : "", var);
        val = def ? def : "";
    }
    pc_buf_append(out, val, strlen(val));
    return 0;
}

/* A file's trailing newline stays in the value, as in the Collector: say so, since it is rarely
 * what a token or header wants (bearertokenauth's filename trims it). */
static void newline_hint(subst *c, const char *ref, const pc_buf *raw)
{
    if (!strncmp(ref, "file:", 5) && raw->len && raw->data[raw->len - 1] == '\n')
        PC_WARN(NULL,
                "%s:%d: %s%s${%s} ends with a newline, which stays in the value (as in the "
                "Collector)",
                c->file, c->line, c->path, *c->path ? ": " : "", ref);
}

/* Expand every ${...} in s; "$$" is a literal '$'. A retrieved value is expanded again (as the
 * Collector's resolver does), up to MAX_EXPANSIONS deep. NULL on error (recorded). */
static char *expand(subst *c, const char *s, int depth)
{
    if (depth > MAX_EXPANSIONS) {
        pc_cfg_error_at(c->err, c->file, c->line, c->path,
                        "too many recursive expansions (a value refers to itself?)");
        return NULL;
    }
    pc_buf out = {0};
    while (*s) {
        if (s[0] == '$' && s[1] == '$') {
            pc_buf_append(&out, "$", 1);
            s += 2;
            continue;
        }
        const char *end;
        if (s[0] == '$' && s[1] == '{' && (end = strchr(s + 2, '}'))) {
            size_t len = (size_t)(end - (s + 2));
            char *ref = pc_xmalloc(len + 1);
            memcpy(ref, s + 2, len);
            ref[len] = 0;
            pc_buf raw = {0};
            int rc = retrieve(c, ref, &raw);
            if (!rc) newline_hint(c, ref, &raw);
            c->provided = true;
            free(ref);
            char *inner = rc ? NULL : expand(c, raw.data ? (char *)raw.data : "", depth + 1);
            pc_buf_free(&raw);
            if (!inner) {
                pc_buf_free(&out);
                return NULL;
            }
            pc_buf_append(&out, inner, strlen(inner));
            free(inner);
            s = end + 1;
            continue;
        }
        pc_buf_append(&out, s, 1);
        s++;
    }
    char *r = pc_xstrdup(out.data ? (char *)out.data : "");
    pc_buf_free(&out);
    return r;
}

/* ---- YAML to nodes ---- */

typedef struct convert_ctx {
    yaml_document_t *doc;
    const char *file;
    size_t count;
    int depth_base; /* a retrieved document nests below the reference */
    int expansions;
    pc_error *err;
    bool provided; /* a ${file:}/${env:} document: errors name none of its keys */
} convert_ctx;

#define SHOWN(c, key) ((c)->provided ? "[REDACTED]" : (key))

static pc_node *parse_any(const char *text, size_t len, const char *file, int depth, int expansions,
                          bool provided, const char *path, pc_error *err, int *empty);

static int is_null_scalar(const yaml_node_t *y)
{
    const char *v = (const char *)y->data.scalar.value;
    if (y->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return 0;
    return !*v || !strcmp(v, "~") || !strcmp(v, "null") || !strcmp(v, "Null") || !strcmp(v, "NULL");
}

/* The kind of a YAML document's root without building anything: -1 not YAML, 0 empty. Walks
 * libyaml's events to the end (a syntax error anywhere makes it text), but only until the
 * nesting passes MAX_DEPTH: parse_any then refuses it without the quadratic scan. */
static int yaml_root_kind(const char *text, size_t len)
{
    yaml_parser_t parser;
    yaml_event_t ev;
    if (!yaml_parser_initialize(&parser)) abort();
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    int kind = 0, depth = 0;
    for (bool end = false; !end;) {
        if (!yaml_parser_parse(&parser, &ev)) {
            kind = -1;
            break;
        }
        bool open = ev.type == YAML_MAPPING_START_EVENT || ev.type == YAML_SEQUENCE_START_EVENT;
        if (!kind && (open || ev.type == YAML_SCALAR_EVENT || ev.type == YAML_ALIAS_EVENT))
            kind = ev.type == YAML_MAPPING_START_EVENT    ? YAML_MAPPING_NODE
                   : ev.type == YAML_SEQUENCE_START_EVENT ? YAML_SEQUENCE_NODE
                                                          : YAML_SCALAR_NODE;
        if (open) depth++;
        if (ev.type == YAML_MAPPING_END_EVENT || ev.type == YAML_SEQUENCE_END_EVENT) depth--;
        end = ev.type == YAML_STREAM_END_EVENT || depth > MAX_DEPTH;
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&parser);
    return kind;
}

/* A retrieved document's nodes, keys' values and all, are the provider's. */
static void mark_provided(pc_node *n)
{
    if (!n) return;
    n->provided = true;
    for (size_t i = 0; i < n->n; i++)
        mark_provided(n->vals[i]);
}

/* A scalar that is exactly one ${...} whose value is a YAML mapping or sequence becomes that
 * subtree (e.g. `receivers: ${file:receivers.yaml}`), as confmap makes it; any other value is
 * text, verbatim. */
static pc_node *expand_scalar(convert_ctx *c, const char *v, int line, int depth, const char *path)
{
    subst sc = {c->file, line, path, c->err, false};
    size_t len = strlen(v);
    if (len > 3 && v[0] == '$' && v[1] == '{' && v[len - 1] == '}' &&
        !memchr(v + 2, '}', len - 3) && !memchr(v + 2, '$', len - 3)) {
        char *ref = pc_xmalloc(len - 2);
        memcpy(ref, v + 2, len - 3);
        ref[len - 3] = 0;
        pc_buf raw = {0};
        pc_node *n = NULL;
        if (retrieve(&sc, ref, &raw) == 0) {
            const char *text = raw.data ? (const char *)raw.data : "";
            int kind = yaml_root_kind(text, raw.len);
            if (kind == YAML_MAPPING_NODE || kind == YAML_SEQUENCE_NODE) {
                if (c->expansions >= MAX_EXPANSIONS) {
                    pc_cfg_error_at(c->err, c->file, line, path,
                                    "too many recursive expansions (a value refers to itself?)");
                } else {
                    char name[300];
                    snprintf(name, sizeof name, "${%.280s}", ref);
                    int empty = 0;
                    n = parse_any(text, raw.len,
                                  intern_file(!strncmp(ref, "file:", 5) ? ref + 5 : name), depth,
                                  c->expansions + 1, true, path, c->err, &empty);
                    mark_provided(n);
                }
            } else {
                newline_hint(&sc, ref, &raw);
                char *val = expand(&sc, text, c->expansions + 1);
                if (val) {
                    n = node_new(PC_NODE_SCALAR, c->file, line);
                    n->scalar = val;
                    n->provided = true;
                }
            }
        }
        free(ref);
        pc_buf_free(&raw);
        return n;
    }
    char *val = expand(&sc, v, c->expansions);
    if (!val) return NULL;
    pc_node *n = node_new(PC_NODE_SCALAR, c->file, line);
    n->scalar = val;
    n->provided = sc.provided;
    return n;
}

static char *join_path(const char *path, const char *key)
{
    size_t a = strlen(path), b = strlen(key);
    char *p = pc_xmalloc(a + b + 3);
    memcpy(p, path, a);
    if (a) memcpy(p + a, "::", 2);
    memcpy(p + (a ? a + 2 : 0), key, b + 1);
    return p;
}

/* Put key: val into map m. "a::b" keys nest (confmap's delimiter), merging with the map `a`
 * already there; any other repeated key is an error. Consumes val; PC_EINVAL on error (recorded).
 */
static int map_insert(convert_ctx *c, pc_node *m, const char *key, pc_node *val, int line,
                      const char *path)
{
    const char *sep = strstr(key, "::");
    size_t seg = sep ? (size_t)(sep - key) : strlen(key);
    if (sep && (seg == 0 || !sep[2])) {
        pc_cfg_error_at(c->err, c->file, line, path, "key \"%s\" has an empty part around \"::\"",
                        SHOWN(c, key));
        pc_node_free(val);
        return PC_EINVAL;
    }
    char *name = pc_xmalloc(seg + 1);
    memcpy(name, key, seg);
    name[seg] = 0;
    pc_node *have = NULL;
    for (size_t i = 0; i < m->n; i++)
        if (strcmp(m->keys[i], name) == 0) have = m->vals[i];
    int rc = 0;
    if (sep) {
        if (!have) {
            have = node_new(PC_NODE_MAP, c->file, line);
            have->from_path = true;
            map_append(m, pc_xstrdup(name), have);
        }
        if (have->kind == PC_NODE_MAP) {
            char *sub = join_path(path, SHOWN(c, name));
            rc = map_insert(c, have, sep + 2, val, line, sub);
            free(sub);
        } else {
            pc_cfg_error_at(c->err, c->file, line, path, "\"%s\" is set twice", SHOWN(c, key));
            pc_node_free(val);
            rc = PC_EINVAL;
        }
    } else if (!have) {
        map_append(m, pc_xstrdup(name), val);
    } else if (have->kind == PC_NODE_MAP && have->from_path && val->kind == PC_NODE_MAP) {
        have->from_path = false; /* `a:` itself may appear once */
        pc_config_merge(have, val);
    } else {
        pc_cfg_error_at(c->err, c->file, line, NULL, "duplicate key \"%s\"", SHOWN(c, name));
        pc_node_free(val);
        rc = PC_EINVAL;
    }
    free(name);
    return rc;
}

static pc_node *convert(convert_ctx *c, yaml_node_t *y, int depth, const char *path)
{
    int line = (int)y->start_mark.line + 1;
    if (++c->count > MAX_NODES || depth + c->depth_base > MAX_DEPTH) {
        pc_cfg_error_at(c->err, c->file, line, NULL, "document too large or too deeply nested");
        return NULL;
    }
    pc_node *n;
    switch (y->type) {
    case YAML_SCALAR_NODE:
        if (is_null_scalar(y)) return node_new(PC_NODE_NULL, c->file, line);
        return expand_scalar(c, (const char *)y->data.scalar.value, line, depth + c->depth_base,
                             path);
    case YAML_SEQUENCE_NODE: {
        n = node_new(PC_NODE_SEQ, c->file, line);
        size_t cnt = (size_t)(y->data.sequence.items.top - y->data.sequence.items.start);
        n->vals = pc_xcalloc(cnt ? cnt : 1, sizeof(pc_node *));
        int bad = 0;
        for (yaml_node_item_t *it = y->data.sequence.items.start; it < y->data.sequence.items.top;
             it++) {
            pc_node *child = convert(c, yaml_document_get_node(c->doc, *it), depth + 1, path);
            if (!child) {
                bad = 1;
                if (c->count > MAX_NODES) break;
                continue;
            }
            n->vals[n->n++] = child;
        }
        if (bad) goto fail;
        return n;
    }
    case YAML_MAPPING_NODE: {
        n = node_new(PC_NODE_MAP, c->file, line);
        int bad = 0;
        for (yaml_node_pair_t *p = y->data.mapping.pairs.start; p < y->data.mapping.pairs.top;
             p++) {
            yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
            if (!k || k->type != YAML_SCALAR_NODE) {
                pc_cfg_error_at(c->err, c->file, (int)(k ? k->start_mark.line + 1 : (size_t)line),
                                path, "mapping keys must be scalars");
                bad = 1;
                continue;
            }
            const char *key = (const char *)k->data.scalar.value;
            int kline = (int)k->start_mark.line + 1;
            char *sub = join_path(path, SHOWN(c, key));
            pc_node *child = convert(c, yaml_document_get_node(c->doc, p->value), depth + 1, sub);
            free(sub);
            if (!child) {
                bad = 1;
                if (c->count > MAX_NODES) break;
                continue;
            }
            if (child->file == c->file) child->line = kline; /* errors point at the key */
            if (map_insert(c, n, key, child, kline, path)) bad = 1;
        }
        if (bad) goto fail;
        return n;
    }
    default: return node_new(PC_NODE_NULL, c->file, line);
    }
fail:
    pc_node_free(n);
    return NULL;
}

/* Refuses a document nested deeper than `room` before libyaml's loader sees it: the loader builds
 * the whole tree first, and the scanner is quadratic in flow nesting (a 200 KB "[[[[..." took
 * over a minute), while this walk of the events stops at the first node too deep, having read
 * little more than the nesting so far. 0, or PC_EINVAL with the error (syntax errors too). */
static int check_nesting(const char *text, size_t len, const char *file, int room, pc_error *err)
{
    yaml_parser_t parser;
    yaml_event_t ev;
    int depth = 0, rc = 0;
    if (!yaml_parser_initialize(&parser)) abort();
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    for (bool end = false; !end && rc == 0;) {
        if (!yaml_parser_parse(&parser, &ev)) {
            rc = pc_cfg_error_at(err, file, (int)parser.problem_mark.line + 1, NULL,
                                 "invalid YAML: %s",
                                 parser.problem ? parser.problem : "syntax error");
            break;
        }
        if (ev.type == YAML_SEQUENCE_START_EVENT || ev.type == YAML_MAPPING_START_EVENT) {
            if (++depth > room)
                rc = pc_cfg_error_at(err, file, (int)ev.start_mark.line + 1, NULL,
                                     "nested deeper than %d levels", MAX_DEPTH);
        } else if (ev.type == YAML_SEQUENCE_END_EVENT || ev.type == YAML_MAPPING_END_EVENT) {
            depth--;
        }
        end = ev.type == YAML_STREAM_END_EVENT;
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&parser);
    return rc < 0 ? PC_EINVAL : 0;
}

/* Any YAML document (map, sequence, scalar). *empty is set for a document without content. */
static pc_node *parse_any(const char *text, size_t len, const char *file, int depth, int expansions,
                          bool provided, const char *path, pc_error *err, int *empty)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    if (check_nesting(text, len, file, MAX_DEPTH - depth, err) < 0) return NULL;
    if (!yaml_parser_initialize(&parser)) abort();
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        pc_cfg_error_at(err, file, (int)parser.problem_mark.line + 1, NULL, "invalid YAML: %s",
                        parser.problem ? parser.problem : "syntax error");
        yaml_parser_delete(&parser);
        return NULL;
    }
    pc_node *root = NULL;
    yaml_node_t *top = yaml_document_get_root_node(&doc);
    *empty = top == NULL;
    if (top) {
        convert_ctx c = {&doc, file, 0, depth, expansions, err, provided};
        root = convert(&c, top, 0, path);
    }
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    return root;
}

pc_node *pc_config_parse(const char *text, size_t len, const char *name, pc_error *err)
{
    const char *file = intern_file(name);
    int empty = 0;
    pc_node *root = parse_any(text, len, file, 0, 0, false, "", err, &empty);
    if (empty) return node_new(PC_NODE_MAP, file, 1); /* an empty file is an empty map */
    if (root && root->kind == PC_NODE_NULL) root->kind = PC_NODE_MAP;
    if (root && root->kind != PC_NODE_MAP) {
        pc_cfg_errorf(err, root, NULL, "the config must be a mapping at the top level");
        pc_node_free(root);
        root = NULL;
    }
    return root;
}

pc_node *pc_yaml_parse(const char *text, size_t len, const char *name, pc_error *err)
{
    const char *file = intern_file(name);
    int empty = 0;
    pc_node *root = parse_any(text, len, file, 0, 0, false, "", err, &empty);
    return empty ? node_new(PC_NODE_NULL, file, 1) : root;
}

pc_node *pc_config_load_file(const char *path, pc_error *err)
{
    const char *p = strncmp(path, "file:", 5) == 0 ? path + 5 : path;
    pc_buf b = {0};
    pc_error e = {0};
    if (read_file(p, &b, &e) < 0) {
        pc_cfg_error_at(err, NULL, 0, NULL, "cannot read config %s: %s", p, e.msg);
        pc_buf_free(&b);
        return NULL;
    }
    pc_node *root = pc_config_parse(b.data ? (char *)b.data : "", b.len, p, err);
    pc_buf_free(&b);
    return root;
}

/* ---- sources: --config URIs and --set ---- */

/* confmap's URI: a scheme of two or more [A-Za-z0-9+.-] starting with a letter, then ':'. */
static size_t uri_scheme_len(const char *s)
{
    size_t i = 0;
    if (!((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z'))) return 0;
    while (s[i] && s[i] != ':') {
        char ch = s[i];
        if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
              ch == '+' || ch == '.' || ch == '-'))
            return 0;
        i++;
    }
    return s[i] == ':' && i >= 2 ? i : 0;
}

static pc_node *load_uri(const char *uri, pc_error *err)
{
    size_t sl = uri_scheme_len(uri);
    if (!sl || (sl == 4 && !strncmp(uri, "file", 4))) return pc_config_load_file(uri, err);
    const char *rest = uri + sl + 1;
    char name[120];
    if (sl == 3 && !strncmp(uri, "env", 3)) {
        const char *v = getenv(rest);
        snprintf(name, sizeof name, "env:%.100s", rest);
        if (!env_name_ok(rest, strlen(rest))) {
            pc_cfg_error_at(err, NULL, 0, NULL, "--config %s: invalid environment variable name",
                            uri);
            return NULL;
        }
        if (!v) PC_WARN(NULL, "--config %s: environment variable %s is not set", uri, rest);
        return pc_config_parse(v ? v : "", v ? strlen(v) : 0, name, err);
    }
    if (sl == 4 && !strncmp(uri, "yaml", 4)) {
        snprintf(name, sizeof name, "--config %.100s", uri);
        return pc_config_parse(rest, strlen(rest), name, err);
    }
    pc_cfg_error_at(err, NULL, 0, NULL,
                    "--config %s: unsupported scheme \"%.*s\" (want a file path, file:, env: or "
                    "yaml:)",
                    uri, (int)sl, uri);
    return NULL;
}

int pc_config_set_check(const char *set, pc_error *e)
{
    const char *eq = strchr(set, '=');
    if (!eq)
        return pc_error_set(e, PC_EINVAL, "--set %s: missing equal sign (want key::path=value)",
                            set);
    if (eq == set) return pc_error_set(e, PC_EINVAL, "--set %s: missing key before '='", set);
    return 0;
}

/* otelcol turns --set k.e.y=value into the yaml: source "k::e::y: value". */
static pc_node *load_set(const char *set, pc_error *err)
{
    pc_error e = {0};
    if (pc_config_set_check(set, &e) < 0) {
        pc_cfg_error_at(err, NULL, 0, NULL, "%s", e.msg);
        return NULL;
    }
    const char *eq = strchr(set, '=');
    const char *k = set, *kend = eq, *v = eq + 1;
    while (k < kend && (*k == ' ' || *k == '\t'))
        k++;
    while (kend > k && (kend[-1] == ' ' || kend[-1] == '\t'))
        kend--;
    while (*v == ' ' || *v == '\t')
        v++;
    pc_buf y = {0};
    for (const char *p = k; p < kend; p++)
        pc_buf_append(&y, *p == '.' ? "::" : p, *p == '.' ? 2 : 1);
    pc_buf_append(&y, ": ", 2);
    pc_buf_append(&y, v, strlen(v));
    char name[160];
    snprintf(name, sizeof name, "--set %.*s", (int)(eq - set) > 140 ? 140 : (int)(eq - set), set);
    pc_node *n = pc_config_parse((const char *)y.data, y.len, name, err);
    pc_buf_free(&y);
    return n;
}

pc_node *pc_config_load(const pc_config_sources *src, pc_error *err)
{
    pc_node *root = NULL;
    pc_error none = {0};
    if (!err) err = &none;
    size_t before = pc_error_count(err);
    if (src->n_uris == 0 && src->default_yaml)
        root = pc_config_parse(src->default_yaml, strlen(src->default_yaml),
                               "<embedded default config>", err);
    /* read every source even after a failure, so one run reports every error */
    for (size_t i = 0; i < src->n_uris + src->n_sets; i++) {
        pc_node *one = i < src->n_uris ? load_uri(src->uris[i], err)
                                       : load_set(src->sets[i - src->n_uris], err);
        if (!one) continue;
        if (!root)
            root = one;
        else
            pc_config_merge(root, one);
    }
    if (pc_error_count(err) != before) {
        pc_node_free(root);
        return NULL;
    }
    return root;
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
            map_append(dst, src->keys[i], src->vals[i]);
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

/* ---- print-config ---- */

/* Keys whose value is a secret wherever they appear, and blocks whose contents are, but for the
 * names listed in keep (the Collector prints configopaque values as "[REDACTED]"). */
static const char *const secret_keys[] = {"password", "token",  "client_secret", "api_key",
                                          "key_pem",  "inline", "bearer_token",  NULL};
static const char *const secret_blocks[] = {"auth", "basic_auth", "client_auth", "htpasswd", NULL};
static const char *const keep_in_blocks[] = {"authenticator", "username", "file", "filename", NULL};

static bool in_list(const char *s, const char *const *list)
{
    for (size_t i = 0; list[i]; i++)
        if (!strcmp(s, list[i])) return true;
    return false;
}

/* Redaction state of a node (the enum above pc_cfg_errorf): NEVER (unredacted output), NO, SECRET
 * (print "[REDACTED]" for its scalars), ALL_VALUES (a headers map: every value is a secret),
 * BLOCK (an auth block: every value but the names in keep_in_blocks). */

static int child_mode(const char *key, int mode)
{
    switch (mode) {
    case NEVER: return NEVER;
    case SECRET:
    case ALL_VALUES: return SECRET;
    case BLOCK: return key && in_list(key, keep_in_blocks) ? NO : SECRET;
    default: break;
    }
    if (!key) return NO; /* a list item */
    if (in_list(key, secret_keys)) return SECRET;
    if (!strcmp(key, "headers")) return ALL_VALUES;
    if (in_list(key, secret_blocks)) return BLOCK;
    return NO;
}

/* The mode of the node at an error's key path ("exporters::otlphttp::headers::x"). */
static int path_mode(const char *path)
{
    int mode = NO;
    char seg[128];
    for (const char *p = path ? path : ""; *p;) {
        const char *sep = strstr(p, "::");
        size_t l = sep ? (size_t)(sep - p) : strlen(p);
        snprintf(seg, sizeof seg, "%.*s", (int)(l < sizeof seg ? l : sizeof seg - 1), p);
        mode = child_mode(seg, mode);
        p += l + (sep ? 2 : 0);
    }
    return mode;
}

typedef struct emit_ctx {
    yaml_emitter_t em;
    int failed;
} emit_ctx;

static void emit_event(emit_ctx *c, yaml_event_t *ev)
{
    if (!c->failed && !yaml_emitter_emit(&c->em, ev)) c->failed = 1;
}

static void emit_scalar(emit_ctx *c, const char *s, bool is_null)
{
    yaml_event_t ev;
    const char *v = is_null ? "null" : s;
    /* a string that would read back as null is quoted */
    bool nullish = !is_null && (!*v || !strcmp(v, "~") || !strcmp(v, "null") ||
                                !strcmp(v, "Null") || !strcmp(v, "NULL"));
    yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)v, (int)strlen(v), 1, 1,
                                 is_null   ? YAML_PLAIN_SCALAR_STYLE
                                 : nullish ? YAML_SINGLE_QUOTED_SCALAR_STYLE
                                           : YAML_ANY_SCALAR_STYLE);
    emit_event(c, &ev);
}

static void emit_node(emit_ctx *c, const pc_node *n, int mode)
{
    yaml_event_t ev;
    switch (n->kind) {
    case PC_NODE_NULL: emit_scalar(c, NULL, true); return;
    case PC_NODE_SCALAR: emit_scalar(c, mode == SECRET ? "[REDACTED]" : n->scalar, false); return;
    case PC_NODE_SEQ:
        yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_SEQUENCE_STYLE);
        emit_event(c, &ev);
        for (size_t i = 0; i < n->n; i++)
            emit_node(c, n->vals[i], child_mode(NULL, mode));
        yaml_sequence_end_event_initialize(&ev);
        emit_event(c, &ev);
        return;
    case PC_NODE_MAP:
        yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE);
        emit_event(c, &ev);
        for (size_t i = 0; i < n->n; i++) {
            emit_scalar(c, n->keys[i], false);
            emit_node(c, n->vals[i], child_mode(n->keys[i], mode));
        }
        yaml_mapping_end_event_initialize(&ev);
        emit_event(c, &ev);
        return;
    }
}

static int write_out(void *data, unsigned char *buffer, size_t size)
{
    return fwrite(buffer, 1, size, data) == size;
}

static json_t *to_json(const pc_node *n, int mode)
{
    switch (n->kind) {
    case PC_NODE_NULL: return json_null();
    case PC_NODE_SCALAR: return json_string(mode == SECRET ? "[REDACTED]" : n->scalar);
    case PC_NODE_SEQ: {
        json_t *a = json_array();
        for (size_t i = 0; i < n->n; i++)
            json_array_append_new(a, to_json(n->vals[i], child_mode(NULL, mode)));
        return a;
    }
    case PC_NODE_MAP: {
        json_t *o = json_object();
        for (size_t i = 0; i < n->n; i++)
            json_object_set_new(o, n->keys[i], to_json(n->vals[i], child_mode(n->keys[i], mode)));
        return o;
    }
    }
    return json_null();
}

int pc_config_print(const pc_node *root, pc_print_format fmt, bool redacted, FILE *out)
{
    int mode = redacted ? NO : NEVER;
    if (fmt == PC_PRINT_JSON) {
        json_t *j = to_json(root, mode);
        int rc = json_dumpf(j, out, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        fputc('\n', out);
        json_decref(j);
        return rc ? PC_EIO : 0;
    }
    emit_ctx c = {0};
    if (!yaml_emitter_initialize(&c.em)) abort();
    yaml_emitter_set_output(&c.em, write_out, out);
    yaml_emitter_set_unicode(&c.em, 1);
    yaml_emitter_set_width(&c.em, -1);
    yaml_event_t ev;
    yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING);
    emit_event(&c, &ev);
    yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1);
    emit_event(&c, &ev);
    emit_node(&c, root, mode);
    yaml_document_end_event_initialize(&ev, 1);
    emit_event(&c, &ev);
    yaml_stream_end_event_initialize(&ev);
    emit_event(&c, &ev);
    yaml_emitter_delete(&c.em);
    return c.failed ? PC_EIO : 0;
}
