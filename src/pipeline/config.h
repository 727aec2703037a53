/* YAML config as a tree of nodes with file/line, the Collector's confmap providers (${env:...},
 * ${file:...}, --config file:/env:/yaml: URIs, --set) and multi-source merge. */
#ifndef PC_CONFIG_H
#define PC_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef enum { PC_NODE_NULL, PC_NODE_SCALAR, PC_NODE_MAP, PC_NODE_SEQ } pc_node_kind;

typedef struct pc_node {
    pc_node_kind kind;
    char *scalar;          /* PC_NODE_SCALAR: value after ${...} substitution */
    size_t n;              /* MAP/SEQ: number of children */
    char **keys;           /* MAP only */
    struct pc_node **vals; /* MAP and SEQ */
    const char *file;      /* interned, lives as long as the process */
    int line;              /* 1-based */
    bool from_path;        /* MAP made for an "a::b" key: a later "a:" merges into it */
} pc_node;

/* One config error: where (file, line), which key (path, "exporters::otlp::endpoint") and what. */
typedef struct pc_cfg_issue {
    const char *file; /* interned; NULL when no file applies */
    int line;         /* 0 when unknown */
    char path[192];
    char msg[320];
} pc_cfg_issue;

#define PC_CFG_MAX_ISSUES 24

/* Every error found in a config, in the order found: the error object config errors travel in
 * (a candidate for issue 16's one error object: each entry carries file, line and key path). It
 * lives on the caller's stack, zero-initialised (`pc_cfg_err e = {{0}};`); nothing to free. msg
 * is the latest error formatted "file:line: path: message" for callers that show one line. The
 * members sit in an anonymous struct led by a scalar so that `{{0}}` stays warning-free. */
typedef struct pc_cfg_err {
    struct {
        size_t n; /* errors found; only the first PC_CFG_MAX_ISSUES are kept */
        char msg[512];
        pc_cfg_issue issues[PC_CFG_MAX_ISSUES];
    };
} pc_cfg_err;

/* Add an error at node `at` (file and line; may be NULL) and key path `path` (may be NULL). */
void pc_cfg_errorf(pc_cfg_err *e, const pc_node *at, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The same with an explicit place (file may be NULL, line 0). */
void pc_cfg_error_at(pc_cfg_err *e, const char *file, int line, const char *path, const char *fmt,
                     ...) __attribute__((format(printf, 5, 6)));
static inline size_t pc_cfg_err_count(const pc_cfg_err *e)
{
    return e->n;
}
/* Entry i as "file:line: path: message". */
void pc_cfg_issue_format(const pc_cfg_issue *is, char *out, size_t outlen);
/* Every error, one line each, each prefixed by prefix ("profcol: invalid config: "), then a line
 * saying how many were left out, if any. */
void pc_cfg_err_print(const pc_cfg_err *e, FILE *f, const char *prefix);
void pc_cfg_err_clear(pc_cfg_err *e);

/* Parse one YAML document; name is the file name used in errors. NULL on error. */
pc_node *pc_config_parse(const char *text, size_t len, const char *name, pc_cfg_err *err);
pc_node *pc_config_load_file(const char *path, pc_cfg_err *err);
/* Merge src over dst (maps merge key by key, everything else replaces); src is consumed. */
void pc_config_merge(pc_node *dst, pc_node *src);
void pc_node_free(pc_node *n);
pc_node *pc_node_clone(const pc_node *n);
/* Same shape and values (maps compared key by key in any order; file and line ignored). */
bool pc_node_equal(const pc_node *a, const pc_node *b);

const pc_node *pc_node_get(const pc_node *map, const char *key);
/* Closest key in candidates within a small edit distance, or NULL ("did you mean"). */
const char *pc_closest(const char *key, const char *const *candidates, size_t n);

/* Where a config comes from, as otelcol's flags say it, kept so SIGHUP can read it again:
 * --config URIs (a path, file:PATH, env:NAME or yaml:<key::path: value>) merged in order, then
 * each --set key::path=value (key.path=value) as a yaml: source. No URI: default_yaml. */
typedef struct pc_config_sources {
    const char *const *uris;
    size_t n_uris;
    const char *const *sets;
    size_t n_sets;
    const char *default_yaml; /* used when n_uris == 0 */
} pc_config_sources;

/* Read, substitute and merge every source; NULL with every error found in err. */
pc_node *pc_config_load(const pc_config_sources *src, pc_cfg_err *err);
/* Check a --set argument ("key::path=value"); -1 with a message (otelcol: "missing equal sign"). */
int pc_config_set_check(const char *set, char *err, size_t errlen);

/* print-config: the tree as YAML (or JSON); redacted replaces secrets by "[REDACTED]": values of
 * headers maps, bearertokenauth tokens, passwords, and everything under auth, basic_auth,
 * client_auth and htpasswd but the authenticator id, user names and file names. */
typedef enum { PC_PRINT_YAML, PC_PRINT_JSON } pc_print_format;
int pc_config_print(const pc_node *root, pc_print_format fmt, bool redacted, FILE *out);

#endif
