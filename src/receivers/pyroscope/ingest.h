/* Parsing for Pyroscope's /ingest API (spec/pyroscope.md §1): the name grammar, from/until,
 * multipart forms and sample_type_config. The profile formats themselves are in src/formats/.
 * Pure functions, fuzzed. */
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

/* sampleRate= in Hz: 100 when absent or not an integer (Pyroscope logs it and uses the default). */
int64_t pc_ingest_sample_rate(const char *s);

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

/* Apply a sample_type_config JSON object to the profiles of the last n ResourceProfiles of b:
 * "display-name" renames the sample type, "units" fills an empty unit. PC_EINVAL with e on bad
 * JSON. */
int pc_ingest_apply_sample_type_config(pc_batch *b, size_t first_rp, const char *json, size_t len,
                                       pc_error *e);

#endif
