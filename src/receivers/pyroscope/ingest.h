/* Parsing for Pyroscope's /ingest API (spec/pyroscope.md §1): the name grammar, from/until,
 * multipart forms, collapsed stacks and sample_type_config. Pure functions, fuzzed. */
#ifndef PC_PYROSCOPE_INGEST_H
#define PC_PYROSCOPE_INGEST_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "pdata/dict.h"
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
    pc_budget *budget;   /* the request's decode budget, or NULL (docs/limits.md) */
    const char *service; /* an explicit service name (label service_name) for service.name, or
                            NULL: the app name without its type suffix (legacy formats) */
} pc_folded_opts;

/* Parse collapsed stacks into a new batch; *service gets the app name without the type suffix
 * (malloc'd). 0 ok; PC_EINVAL with e for an unknown profile type, a malformed line, a count
 * outside int64 or one that overflows once scaled by the sampleRate period; PC_E2BIG (over) or
 * PC_EAGAIN (no room now) when budget->state says the body is over the decode budget. The new
 * batch's arena stays charged to the budget until pc_batch_end_budget(). */
int pc_folded_to_batch(const char *text, size_t len, const pc_folded_opts *o, pc_batch **out,
                       char **service, pc_error *e);

/* A batch built as pc_folded_to_batch builds one, for the decoders that turn other formats into
 * stacks of frame names (legacy.h): one dictionary, and per profile a ResourceProfiles with
 * service.name, the opts' attributes and scope, one sample type from the app name's suffix
 * (§1.6), the sampleRate period, time and duration. Use, on a zeroed builder: pc_ingest_begin
 * (the first pc_ingest_profile_begin may come before it, to learn the type and period while
 * counting), then per profile
 * pc_ingest_profile_begin, pc_ingest_frame / pc_dict_stack / pc_ingest_sample, and
 * pc_ingest_profile_end; then pc_ingest_finish, or pc_ingest_abort on any failure. */
typedef struct pc_ingest_builder {
    const pc_folded_opts *o;
    pc_batch *b;
    pc_dict_builder *db; /* intern stacks here (pc_dict_stack, leaf first) */
    int64_t period;      /* of the current profile: ns per count (cpu/wall with a sampleRate),
                            0 when values stay as counted; the caller scales by it */
    const struct pc_ingest_type *type;
    const char *app, *units;
    size_t app_len;
    struct pc_ingest_sample *samples;
    size_t n, cap;
} pc_ingest_builder;

/* What a batch of samples (with stack_frames location indices in all) and frames new frames
 * (frame_bytes name bytes in all) may take at most: the estimate to pass to pc_ingest_begin. */
size_t pc_ingest_estimate(size_t samples, size_t stack_frames, size_t frames, size_t frame_bytes);
/* Reserve estimate bytes from o->budget (what names the data in the refusal) and start a new
 * batch charged to it: 0, or the budget's refusal (PC_E2BIG over the limit, PC_EAGAIN no room
 * now). */
int pc_ingest_begin(pc_ingest_builder *ib, const pc_folded_opts *o, size_t estimate,
                    const char *what, pc_error *e);
/* Start a profile for app ("name" or "name.type") at sample_rate Hz (0: none) with a units=
 * parameter (or NULL), by the rules of pc_folded_to_batch: 0, or PC_EINVAL "unknown profile
 * type: x". */
int pc_ingest_profile_begin(pc_ingest_builder *ib, const char *app, int64_t sample_rate,
                            const char *units, pc_error *e);
/* The location of a frame named name[0..len): one line, a function of that name. */
int32_t pc_ingest_frame(pc_ingest_builder *ib, const char *name, size_t len);
/* One sample of the current profile: a stack index and its value, already scaled. */
void pc_ingest_sample(pc_ingest_builder *ib, int32_t stack, int64_t value);
/* End the current profile; n extra resource attributes are added, each replacing an opts'
 * attribute of the same key (a NULL value only removes it). */
void pc_ingest_profile_end(pc_ingest_builder *ib, const char *const *keys, const char *const *vals,
                           size_t n);
/* The batch built (still charged to the budget until pc_batch_end_budget), or everything freed. */
pc_batch *pc_ingest_finish(pc_ingest_builder *ib);
void pc_ingest_abort(pc_ingest_builder *ib);

/* Apply a sample_type_config JSON object to the profiles of the last n ResourceProfiles of b:
 * "display-name" renames the sample type, "units" fills an empty unit. PC_EINVAL with e on bad
 * JSON. */
int pc_ingest_apply_sample_type_config(pc_batch *b, size_t first_rp, const char *json, size_t len,
                                       pc_error *e);

#endif
