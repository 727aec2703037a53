/* YAML config as a tree of nodes with file/line, the Collector's confmap providers (${env:...},
 * ${file:...}, --config file:/env:/yaml: URIs, --set) and multi-source merge. */
#ifndef PC_CONFIG_H
#define PC_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "base/err.h"

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
    bool provided;         /* from ${env:} or ${file:}: never printed in an error (issue 28) */
} pc_node;

/* Config errors travel in the one error object (base/err.h). A caller that wants every issue
 * attaches a list (`pc_error_issues list = {0}; pc_error e = PC_ERROR_WITH_ISSUES(&list);`) and
 * prints them with pc_error_print; without a list only the latest is kept. */

/* Add an issue (PC_EINVAL) at node `at` (file and line; may be NULL) and key path `path` (may
 * be NULL); returns PC_EINVAL. A value below `at` that came from ${env:} or ${file:}, or sits
 * under a key print-config redacts, is replaced by [REDACTED] wherever the message quotes it. */
int pc_cfg_errorf(pc_error *e, const pc_node *at, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The same with an explicit place (file may be NULL, line 0). */
int pc_cfg_error_at(pc_error *e, const char *file, int line, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Parse one YAML document; name is the file name used in errors. NULL on error. */
pc_node *pc_config_parse(const char *text, size_t len, const char *name, pc_error *err);
pc_node *pc_config_load_file(const char *path, pc_error *err);
/* Any YAML (or JSON) document, whatever its top level (an empty one is a PC_NODE_NULL): data
 * files such as a scrape receiver's file_sd_configs. NULL with the error in err. */
pc_node *pc_yaml_parse(const char *text, size_t len, const char *name, pc_error *err);
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

/* Read, substitute and merge every source; NULL with every error found in err (without a list,
 * err must hold no error yet). */
pc_node *pc_config_load(const pc_config_sources *src, pc_error *err);
/* Check a --set argument ("key::path=value"); PC_EINVAL with a message (otelcol: "missing equal
 * sign"). */
int pc_config_set_check(const char *set, pc_error *e);

/* print-config: the tree as YAML (or JSON); redacted replaces secrets by "[REDACTED]": values of
 * headers maps, bearertokenauth tokens, passwords, and everything under auth, basic_auth,
 * client_auth and htpasswd but the authenticator id, user names and file names. */
typedef enum { PC_PRINT_YAML, PC_PRINT_JSON } pc_print_format;
/* 0, or PC_EIO when the output could not be written. */
int pc_config_print(const pc_node *root, pc_print_format fmt, bool redacted, FILE *out);

#endif
