/* Parsing for Pyroscope's /ingest API (spec/pyroscope.md §1): the name grammar, from/until,
 * multipart forms, collapsed stacks and sample_type_config. Pure functions, fuzzed. */
#ifndef PC_PYROSCOPE_INGEST_H
#define PC_PYROSCOPE_INGEST_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "pdata/pdata.h"

#define PC_INGEST_MAX_LABELS 64

typedef struct pc_ingest_name {
    char *app; /* __name__: the part before '{', trimmed */
    size_t n;
    char *keys[PC_INGEST_MAX_LABELS];
    char *vals[PC_INGEST_MAX_LABELS];
} pc_ingest_name;

/* "app{k=v,...}" exactly as Pyroscope parses it (§1.3); 0 ok, PC_EINVAL with e (a 400). */
int pc_ingest_parse_name(const char *s, pc_ingest_name *out, pc_error *e);
void pc_ingest_name_free(pc_ingest_name *n);

/* from/until: digit count decides the unit (8 YYYYMMDD, 13 ms, 16 µs, 19 ns, else s); "now",
 * "now-1h" style relative values; empty -> now. Returns unix nanoseconds, or PC_EINVAL if
 * invalid (a time before 1970 is). */
int64_t pc_ingest_parse_time(const char *s, int64_t now_ns);

/* One part of a multipart/form-data body. */
typedef struct pc_form_part {
    char name[128];
    char filename[128];
    const uint8_t *data;
    size_t len;
} pc_form_part;

/* The boundary from a Content-Type header; 0 ok, PC_EINVAL if absent. */
int pc_multipart_boundary(const char *content_type, char *out, size_t outlen);
/* Split a multipart body into at most max parts; returns the number of parts, or PC_EINVAL with
 * e. */
int pc_multipart_parse(const uint8_t *body, size_t len, const char *boundary, pc_form_part *parts,
                       int max, pc_error *e);

/* Collapsed stacks: "root;child;leaf 12" per line ("groups"/folded) or one stack per line, each
 * counting 1 ("lines"). The profile type comes from the app name's last '.' component (§1.6). */
typedef struct pc_folded_opts {
    const char *app;     /* __name__ with the optional ".type" suffix */
    int lines;           /* 1: "lines" format */
    int64_t sample_rate; /* Hz; scales cpu/wall counts to nanoseconds when > 0 */
    const char *units;   /* units= parameter, for types without a known unit */
    int64_t time_ns, duration_ns;
    const char *const *attr_keys; /* resource attributes */
    const char *const *attr_vals;
    size_t n_attrs;
    const char *scope_name, *scope_version;
    pc_budget *budget; /* the request's decode budget, or NULL (docs/limits.md) */
} pc_folded_opts;

/* Parse collapsed stacks into a new batch; *service gets the app name without the type suffix
 * (malloc'd). 0 ok; PC_EINVAL with e for an unknown profile type, a malformed line, a count
 * outside int64 or one that overflows once scaled by the sampleRate period; PC_E2BIG (over) or
 * PC_EAGAIN (no room now) when budget->state says the body is over the decode budget. The new
 * batch's arena stays charged to the budget until pc_batch_end_budget(). */
int pc_folded_to_batch(const char *text, size_t len, const pc_folded_opts *o, pc_batch **out,
                       char **service, pc_error *e);

/* Apply a sample_type_config JSON object to the profiles of the last n ResourceProfiles of b:
 * "display-name" renames the sample type, "units" fills an empty unit. PC_EINVAL with e on bad
 * JSON. */
int pc_ingest_apply_sample_type_config(pc_batch *b, size_t first_rp, const char *json, size_t len,
                                       pc_error *e);

#endif
