/* YAML config as a tree of nodes with file/line, env substitution and multi-file merge. */
#ifndef PC_CONFIG_H
#define PC_CONFIG_H

#include <stddef.h>

typedef enum { PC_NODE_NULL, PC_NODE_SCALAR, PC_NODE_MAP, PC_NODE_SEQ } pc_node_kind;

typedef struct pc_node {
    pc_node_kind kind;
    char *scalar;          /* PC_NODE_SCALAR: value after ${env} substitution */
    size_t n;              /* MAP/SEQ: number of children */
    char **keys;           /* MAP only */
    struct pc_node **vals; /* MAP and SEQ */
    const char *file;      /* interned, lives as long as the root */
    int line;              /* 1-based */
} pc_node;

/* A config error: file:line: path: message. */
typedef struct pc_cfg_err {
    char msg[512];
} pc_cfg_err;
void pc_cfg_errorf(pc_cfg_err *e, const pc_node *at, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Parse one YAML document; name is the file name used in errors. NULL on error. */
pc_node *pc_config_parse(const char *text, size_t len, const char *name, pc_cfg_err *err);
pc_node *pc_config_load_file(const char *path, pc_cfg_err *err);
/* Merge src over dst (maps merge key by key, everything else replaces); src is consumed. */
void pc_config_merge(pc_node *dst, pc_node *src);
void pc_node_free(pc_node *n);

const pc_node *pc_node_get(const pc_node *map, const char *key);
/* Closest key in candidates within a small edit distance, or NULL ("did you mean"). */
const char *pc_closest(const char *key, const char *const *candidates, size_t n);

#endif
