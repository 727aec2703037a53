/* What the two directions of the pprof translator (pprof.c in, pprof_out.c out) share: the
 * protocol's types, the attribute names pprof fields travel as in OTLP, small vectors. Private to
 * src/formats/. */
#ifndef PC_FORMATS_PPROF_COMMON_H
#define PC_FORMATS_PPROF_COMMON_H

#include <stdint.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "pprof.pb-c.h"

typedef Perftools__Profiles__Profile pp_profile;
typedef Perftools__Profiles__ValueType pp_value_type;
typedef Perftools__Profiles__Sample pp_sample;
typedef Perftools__Profiles__Label pp_label;
typedef Perftools__Profiles__Mapping pp_mapping;
typedef Perftools__Profiles__Location pp_location;
typedef Perftools__Profiles__Line pp_line;
typedef Perftools__Profiles__Function pp_function;

#define ATTR_BUILD_ID       "process.executable.build_id.gnu"
#define ATTR_HAS_FUNCTIONS  "pprof.mapping.has_functions"
#define ATTR_HAS_FILENAMES  "pprof.mapping.has_filenames"
#define ATTR_HAS_LINES      "pprof.mapping.has_line_numbers"
#define ATTR_HAS_INLINE     "pprof.mapping.has_inline_frames"
#define ATTR_IS_FOLDED      "pprof.location.is_folded"
#define ATTR_DROP_FRAMES    "pprof.profile.drop_frames"
#define ATTR_KEEP_FRAMES    "pprof.profile.keep_frames"
#define ATTR_DOC_URL        "pprof.profile.doc_url"
#define ATTR_COMMENT        "pprof.profile.comment"
#define ATTR_DEFAULT_SAMPLE "pprof.scope.default_sample_type"

/* ---- small growable vectors (malloc-owned) ---------------------------------------------- */

typedef struct i32vec {
    int32_t *v;
    size_t n, cap;
} i32vec;

static inline void i32_push(i32vec *x, int32_t v)
{
    if (x->n == x->cap) {
        x->cap = x->cap ? x->cap * 2 : 32;
        x->v = pc_xrealloc(x->v, x->cap * sizeof(int32_t));
    }
    x->v[x->n++] = v;
}

typedef struct ptrvec {
    void **v;
    size_t n, cap;
} ptrvec;

static inline void ptr_push(ptrvec *x, void *p)
{
    if (x->n == x->cap) {
        x->cap = x->cap ? x->cap * 2 : 32;
        x->v = pc_xrealloc(x->v, x->cap * sizeof(void *));
    }
    x->v[x->n++] = p;
}

#endif
