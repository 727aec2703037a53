/* Human-readable batch summaries for the `debug` exporter. */
#ifndef PC_SUMMARY_H
#define PC_SUMMARY_H

#include "pdata/pdata.h"

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

#endif
