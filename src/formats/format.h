/* Input formats: the translators from a wire format of profiles into a batch of OTLP profiles
 * (pprof, JFR, collapsed stacks and lines, Pyroscope's trie, tree and speedscope), all with one
 * signature and one options struct, and the table (pc_formats[]) a receiver picks one from.
 * Floor 2: on pdata/ and base/ only; nothing here includes sdk/, net/ or a component, so any
 * receiver (or a test, a fuzz target, a bench) can call a translator on any thread.
 *
 * Adding an input format:
 *   1. src/formats/<name>.{c,h}: `PC_FORMAT_DECODER(pc_<name>_decode);` in the header (the
 *      signature of pc_format_decode_fn, below), reading what it needs from pc_format_opts (add
 *      a field there when nothing fits) and returning the codes below; formats of frame names
 *      build through the stacks builder (folded.h).
 *   2. One row in pc_formats[] (format.c): its name, the Pyroscope format= values and the
 *      Content-Type that select it, the multipart part that holds it, the decoder. The pyroscope
 *      receiver then accepts it with no change of its own.
 *   3. The .c in meson.build's core_src; a unit test (tests/unit, tests/meson.build) and a fuzz
 *      target (tests/fuzz, tests/fuzz/meson.build); docs/formats.md: what it reads, from where,
 *      and where profcol differs. */
#ifndef PC_FORMATS_FORMAT_H
#define PC_FORMATS_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/budget.h"
#include "base/err.h"
#include "pdata/pdata.h"

/* One resource attribute (a string). */
typedef struct pc_format_attr {
    const char *key, *value;
} pc_format_attr;

/* Cap on a body a translator inflates itself (pprof, JFR parts) when max_bytes is 0. */
#define PC_FORMAT_DEFAULT_MAX_BYTES (64u << 20)

/* JFR limits (docs/limits.md; the pyroscope receiver's jfr.* keys). 0: the PC_JFR_DEFAULT_*. */
#define PC_JFR_DEFAULT_MAX_CHUNKS            64
#define PC_JFR_DEFAULT_MAX_STACK_DEPTH       8192
#define PC_JFR_DEFAULT_MAX_METADATA_STRINGS  65536
#define PC_JFR_DEFAULT_MAX_METADATA_ELEMENTS 262144
#define PC_JFR_DEFAULT_MAX_POOL_ENTRIES      4194304

typedef struct pc_jfr_limits {
    size_t max_chunks;            /* chunks per recording */
    size_t max_stack_depth;       /* frames of one stack trace */
    size_t max_metadata_strings;  /* strings of a chunk's metadata record */
    size_t max_metadata_elements; /* elements (class, field, annotation...) of its tree */
    size_t max_pool_entries;      /* constant-pool entries of a chunk, all types */
} pc_jfr_limits;

struct pc_jfr_stats;

/* What every translator is given; a translator reads the fields its format needs and ignores the
 * others. Zeroed, it is a valid set of options. */
typedef struct pc_format_opts {
    /* where the profiles come from: every ResourceProfiles / ScopeProfiles made */
    const pc_format_attr *attrs; /* resource attributes, copied (service.name: see service) */
    size_t n_attrs;
    const char *scope_name, *scope_version; /* InstrumentationScope; NULL = unset */
    /* service.name: service when not NULL, else derived from app (the formats that take their
     * profile type from app's ".type" suffix drop it), else not written */
    const char *service;
    const char *app;      /* Pyroscope's application name, "name" or "name.type" */
    int64_t time_ns;      /* the upload's from, for profiles that carry no time; 0: unset */
    int64_t duration_ns;  /* until - from */
    int64_t sample_rate;  /* Hz (sampleRate=): scales cpu/wall counts to nanoseconds */
    const char *units;    /* units=, for types without a unit of their own, or NULL */
    const uint8_t *extra; /* a second part of the upload (JFR: the LabelsSnapshot), or NULL */
    size_t extra_len;
    /* limits */
    size_t max_bytes;  /* cap on a body inflated inside the translator; 0 = 64 MiB */
    pc_jfr_limits jfr; /* 0 = defaults */
    pc_budget *budget; /* the request's decode budget (docs/limits.md), or NULL */
    /* optional outputs */
    struct pc_jfr_stats *jfr_stats; /* JFR: what the recording held, also on failure; or NULL */
} pc_format_opts;

/* Translate data[0..len) into a batch of profiles.
 * In: *out NULL (a new batch is made); pprof also appends to a writable *out.
 * Out: 0 with the batch in *out, its arena charged to o->budget until pc_batch_end_budget();
 * or a code with the detail in e and nothing in *out (appended to: unchanged):
 *   PC_EBADMSG  the request is well formed but the body cannot be decoded (Pyroscope: 422);
 *   PC_EINVAL   a bad parameter, such as an unknown profile type in the app name (400);
 *   PC_E2BIG    over a limit or the decode budget's limit (413);
 *   PC_EAGAIN   the budget has no room now (503), as budget->state says. */
typedef int (*pc_format_decode_fn)(const uint8_t *data, size_t len, const pc_format_opts *o,
                                   pc_batch **out, pc_error *e);
/* Declares (or, followed by a body, defines) a translator of exactly that signature: each
 * format's header states it with this, so no decoder can drift from the table's type. */
#define PC_FORMAT_DECODER(fn)                                                                      \
    int fn(const uint8_t *data, size_t len, const pc_format_opts *o, pc_batch **out, pc_error *e)

/* One input format, as a receiver picks it. */
typedef struct pc_format {
    const char *name;          /* "pprof" */
    const char *const *params; /* the Pyroscope format= values selecting it; NULL-ended */
    const char *content_type;  /* a Content-Type selecting it (see pc_format_select) */
    const char *part;          /* in a multipart/form-data upload, the part holding it */
    const char *extra_part;    /* ... and the one passed as o->extra; NULL: none */
    int form_code;             /* a broken multipart form: PC_EBADMSG when the form is
                                  the format's own container (JFR), PC_EINVAL when it is
                                  the request's (pprof) */
    pc_format_decode_fn decode;
} pc_format;

/* Every input format, in the order they are selected (spec/pyroscope.md §1.4); NULL-ended. */
extern const pc_format pc_formats[];

/* The format a Pyroscope upload is in: the first row whose params hold format or whose
 * content_type matches (exactly; multipart/form-data as a substring, for its boundary); else
 * the last row (collapsed stacks). Either argument may be NULL. */
const pc_format *pc_format_select(const char *format, const char *content_type);
/* The row named name, or NULL. */
const pc_format *pc_format_find(const char *name);

#endif
