/* Human-readable batch summaries for the `debug` exporter, and the pieces the profilez extension
 * shares with it: how a frame is named, a sample's value, a resource's service, and the
 * top-functions table. */
#ifndef PC_SUMMARY_H
#define PC_SUMMARY_H

#include <stdbool.h>
#include <stdint.h>

#include "pdata/pdata.h"

/* a + b, held at INT64_MAX / INT64_MIN instead of overflowing (sample values are int64) */
static inline int64_t pc_sat_add(int64_t a, int64_t b)
{
    if (b > 0 && a > INT64_MAX - b) return INT64_MAX;
    if (b < 0 && a < INT64_MIN - b) return INT64_MIN;
    return a + b;
}

typedef enum {
    PC_VERBOSITY_BASIC = 0,
    PC_VERBOSITY_NORMAL = 1,
    PC_VERBOSITY_DETAILED = 2
} pc_verbosity;

/* Default number of rows in the detailed top-functions table (used when top <= 0). */
#define PC_SUMMARY_DEFAULT_TOP 10

/* Append a human-readable summary of b to out. who = component id printed as prefix of every
 * line.
 *  basic:    `<who>: resources=R profiles=P samples=S`
 *  normal:   plus one line per profile (service, sample/period type, samples, total value,
 *            duration, start time, linked samples)
 *  detailed: plus resource attributes, scope name/version, and per profile a `pprof -top` style
 *            table of the top `top` functions by self (flat) value with cumulative values.
 * Never reads out of range: bad dictionary indices are treated as absent. Strings from the batch
 * are escaped (control characters as \xNN) so one line stays one line. */
void pc_summary_format(const pc_batch *b, pc_verbosity v, int top, const char *who, pc_buf *out);

/* The value of one sample: the sum of its values (saturating), or one per timestamp when it has
 * no values. */
int64_t pc_sample_value(const pc_sample *s);
/* A resource's service.name, or "unknown_service" (as the Collector and Pyroscope name it). */
const char *pc_service_name(const pc_dictionary *d, const pc_resource *r);

/* How frames are named: visit(arg, name, stable) for each frame of st, leaf first. Within a
 * location lines[0] is the innermost (inlined) function and the last line its caller; a line is
 * named by its function's name, else its system name, else "<unknown>"; a location without lines
 * by its address ("0x4a2f10"), else "<unknown>". stable is false when name lives only for the
 * call (copy it to keep it). At most *budget frames are visited (it is decremented): false when it
 * ran out. Bad indices are treated as absent, never dereferenced. */
typedef void (*pc_frame_visit)(void *arg, const char *name, bool stable);
bool pc_stack_frames(const pc_dictionary *d, const pc_stack *st, size_t *budget,
                     pc_frame_visit visit, void *arg);
/* The same for one location (index li of d's location table): what pc_stack_frames visits for
 * it, so a caller can name each location of a batch once. */
bool pc_location_frames(const pc_dictionary *d, int32_t li, size_t *budget, pc_frame_visit visit,
                        void *arg);
/* The name a line of function index fidx gets above: the function's name, else its system
 * name, else "<unknown>" (also for a bad index); it lives as long as d. */
const char *pc_function_name(const pc_dictionary *d, int32_t fidx);

/* The top-functions table (`pprof -top`): per function name, flat (self: the value of stacks it
 * is the leaf of) and cum (the value of stacks it is in, once per stack even when it recurses). */
typedef struct pc_top pc_top;
typedef struct pc_top_row {
    const char *name; /* valid until pc_top_free */
    int64_t flat, cum;
} pc_top_row;
pc_top *pc_top_new(void);
void pc_top_free(pc_top *t);
/* Begin a stack of this value; then pc_top_frame for each of its frames, leaf first. */
void pc_top_stack(pc_top *t, int64_t value);
void pc_top_frame(pc_top *t, const char *name, bool stable);
/* A function's flat and cum added at once (a caller that summed them itself, per id). */
void pc_top_add(pc_top *t, const char *name, bool stable, int64_t flat, int64_t cum);
/* Every function seen, by flat descending then name; a malloc'd array of *n rows (free()). */
pc_top_row *pc_top_rows(const pc_top *t, size_t *n);

#endif
