/* Declarative per-component config tables: defaults, parsing, validation and docs at once. */
#ifndef PC_CFGTABLE_H
#define PC_CFGTABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sdk/config.h"

typedef enum {
    PC_CFG_STRING,   /* char * */
    PC_CFG_INT,      /* int64_t */
    PC_CFG_BOOL,     /* bool */
    PC_CFG_DURATION, /* uint64_t milliseconds; "200ms", "1s", "5m", "1h" or a bare number of seconds
                      */
    PC_CFG_SIZE,     /* uint64_t bytes; "20MiB", "512KiB", "1GB" or a bare number */
    PC_CFG_ENUM,     /* int: index into choices */
    PC_CFG_LIST,     /* pc_strlist */
    PC_CFG_MAP,      /* pc_strmap: string keys to string values */
    PC_CFG_NODE,     /* const pc_node *: the component parses it in create (lists of maps etc.) */
    PC_CFG_FLOAT,    /* double */
    PC_CFG_GROUP,    /* a struct with a table of its own (key: its keys' prefix, "" or "a.b.") */
} pc_cfg_type;

typedef struct pc_strlist {
    size_t n;
    char **v;
} pc_strlist;

typedef struct pc_strmap {
    size_t n;
    char **keys;
    char **vals;
} pc_strmap;

/* A component's table has a key a line, clang-format off, so that tables read as tables and
 * every row has one shape: {"key", PC_CFG_TYPE, "default", offsetof(T, field), "doc", more};
 * {0} ends the table.
 * An unset default is "" (never NULL: no setting takes an empty string as its default). Settings
 * that several components share (TLS, the sending queue, an HTTP client or server) are a group
 * row: {"protocols.grpc.", PC_CFG_GROUP, "", offsetof(T, grpc_tls), "doc", pc_tls_server_keys},
 * whose table (sdk/tls_config.h, ...) is written once for its struct, as the Collector's configs
 * embed configtls and friends. */
typedef struct pc_cfg_key {
    const char *key; /* dotted path below the component, e.g. "protocols.http.endpoint" */
    pc_cfg_type type;
    const char *def; /* default as the YAML scalar would say it; "" (or NULL) = unset */
    size_t offset;   /* where the value (a group: its struct) lands in the config struct */
    const char *doc;
    /* PC_CFG_ENUM: the NULL-terminated names (pc_cfg_key_choices); PC_CFG_GROUP: its table */
    const void *more;
} pc_cfg_key;

static inline const char *const *pc_cfg_key_choices(const pc_cfg_key *k)
{
    return (const char *const *)k->more;
}

/* The table with every group row replaced by its keys (prefixed, offsets added), as the engine,
 * the docs and the components listing see it; built once per table, kept for the process. */
const pc_cfg_key *pc_cfgtable_flat(const pc_cfg_key *table);

/* Fill cfg from the table defaults, then from node (may be NULL). Unknown keys are errors with a
 * "did you mean". path is the key path used in messages, e.g. "exporters::otlphttp/a". 0, or
 * PC_EINVAL with every error in err. */
int pc_cfgtable_apply(const pc_cfg_key *table, void *cfg, const pc_node *node, const char *path,
                      pc_error *err);
void pc_cfgtable_free(const pc_cfg_key *table, void *cfg);
static inline bool pc_cfg_key_has_default(const pc_cfg_key *k)
{
    return k->def && *k->def;
}

/* An error about one key of a component: the message names path::a::b and the line of that key
 * (or of the component when the key is absent, i.e. came from a default). key is dotted. Returns
 * PC_EINVAL. */
int pc_cfg_key_errorf(pc_error *e, const pc_node *component, const char *path, const char *key,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* The value parsers of the table types: 0, or PC_EINVAL for a malformed value. */
int pc_parse_duration_ms(const char *s, uint64_t *out);
int pc_parse_size(const char *s, uint64_t *out);
int pc_parse_bool(const char *s, bool *out);

#endif
