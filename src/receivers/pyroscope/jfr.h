/* JFR (Java Flight Recorder) recordings into the model, as Pyroscope's own JFR ingest maps them
 * (spec/jfr.md §2 the format, §3 the mapping). Hostile input: every size, count and offset is
 * checked against the buffer before use, recursion is capped, the checkpoint chain can only walk
 * backwards, and what the decode holds is charged to the request's budget. Stands on pdata/ and
 * base/ only; the receiver (receiver.c) calls it on the thread pool.
 *
 * Output: ONE ResourceProfiles (the given attributes) with ONE ScopeProfiles, and one Profile per
 * Pyroscope sample type the recording has samples for, in this order (§3.2):
 *   cpu/nanoseconds (period cpu/nanoseconds)        jdk.ExecutionSample, profiler.WallClockSample
 *   wall/nanoseconds (period wall/nanoseconds)      the same, with async-profiler's event=wall
 *   alloc_in_new_tlab_{objects/count,bytes/bytes}   jdk.ObjectAllocationInNewTLAB (space/bytes)
 *   alloc_outside_tlab_{objects,bytes}              jdk.ObjectAllocationOutsideTLAB (space/bytes)
 *   alloc_sample_{objects,bytes}                    jdk.ObjectAllocationSample (space/bytes)
 *   live/count (period objects/count)               profiler.LiveObject
 *   contentions/count, delay/nanoseconds            jdk.JavaMonitorEnter (period mutex/count)
 *   contentions/count, delay/nanoseconds            jdk.ThreadPark (period block/count)
 *   malloc_{objects/count,bytes/bytes} (no period)  profiler.Malloc
 * A two-value type is two consecutive Profiles whose samples line up (same stacks, attributes,
 * order), which pdata/pprof.c joins back into one two-value pprof. period is 0 (not set), time is
 * opts.time_ns, duration opts.duration_ns.
 *
 * Attributes written (README "JFR" and docs/limits.md say the same):
 *   profile  pyroscope.profile.name   Pyroscope's __name__: process_cpu, wall, memory, mutex, block
 *            pyroscope.jfr_event      async-profiler's `event` setting (itimer, cpu, wall...), the
 *                                     last one seen; absent when the recording has none (JDK)
 *            jfr.event.type           the JFR event type(s) the profile was built from
 *   location jfr.frame.type           the frame type (Interpreted, JIT compiled, Inlined,
 * Native...) sample   the contextId's labels from the LabelsSnapshot, span_id (16 hex digits of
 * spanId), span_name, trace_id (32 hex digits) - the names the tracelink processor reads Functions
 * are named Class.method with Pyroscope's symbol rewrites (§3.5); a location keeps its line (a
 * 32-bit unsigned value: the JDK's -1 is 4294967295, as Pyroscope has it). A stack the recording
 * marks truncated gets a root frame "[truncated]".
 *
 * Quirk decisions (§3.3): every event counts 1 object/contention (Pyroscope's shared count slot,
 * which a WallClockSample's `samples` overwrites, is not replicated); lock durations are converted
 * from ticks to nanoseconds with the chunk's ticks per second (the same as Pyroscope's raw ticks
 * on JDK/Linux, where a tick is 1 ns); a WallClockSample without a `samples` field counts 1.
 * Everything else as Pyroscope: ExecutionSample counts as CPU unless its state is STATE_SLEEPING
 * (and not when the state cannot be resolved), the `event` setting is the last seen, samples are
 * merged per (stack, correlation ids), no thread labels, ObjectAllocationSample / ThreadPark /
 * LiveObject / Malloc carry no labels, frames whose method or class is missing are dropped (the
 * sample kept), events whose stack is missing are dropped, constant pools are per chunk (a key
 * written only in an earlier chunk is missing; the JDK's reader may resolve it through its
 * parsers' last-key cache, Pyroscope does not); jdk.NativeMethodSample,
 * jdk.CPUTimeSample, profiler.Free and every other event type are skipped and counted. */
#ifndef PC_RECEIVERS_PYROSCOPE_JFR_H
#define PC_RECEIVERS_PYROSCOPE_JFR_H

#include <stddef.h>
#include <stdint.h>

#include "base/budget.h"
#include "base/err.h"
#include "pdata/pdata.h"

/* Limits (the receiver's jfr.* keys; docs/limits.md). 0 in the options means the default. */
#define PC_JFR_DEFAULT_MAX_CHUNKS            64
#define PC_JFR_DEFAULT_MAX_STACK_DEPTH       8192
#define PC_JFR_DEFAULT_MAX_METADATA_STRINGS  65536
#define PC_JFR_DEFAULT_MAX_METADATA_ELEMENTS 262144
#define PC_JFR_DEFAULT_MAX_POOL_ENTRIES      4194304
/* Fixed caps on nesting (real recordings: values 3 deep, the metadata tree 5). */
#define PC_JFR_MAX_VALUE_DEPTH    32
#define PC_JFR_MAX_METADATA_DEPTH 16

/* The event types that become profiles, plus the setting that names the profiling mode. */
typedef enum pc_jfr_kind {
    PC_JFR_EXECUTION_SAMPLE,
    PC_JFR_WALL_CLOCK_SAMPLE,
    PC_JFR_ALLOC_IN_NEW_TLAB,
    PC_JFR_ALLOC_OUTSIDE_TLAB,
    PC_JFR_ALLOC_SAMPLE,
    PC_JFR_LIVE_OBJECT,
    PC_JFR_MONITOR_ENTER,
    PC_JFR_THREAD_PARK,
    PC_JFR_MALLOC,
    PC_JFR_ACTIVE_SETTING,
    PC_JFR_KIND_COUNT
} pc_jfr_kind;
/* "jdk.ExecutionSample", ... per pc_jfr_kind. */
extern const char *const pc_jfr_kind_names[PC_JFR_KIND_COUNT];

typedef struct pc_jfr_opts {
    int64_t sample_rate;          /* Hz from sampleRate= (100 when absent; 0: CPU/wall values 0) */
    int64_t time_ns, duration_ns; /* from, until - from */
    const char *const *attr_keys, *const *attr_vals; /* resource attributes */
    size_t n_attrs;
    const char *scope_name, *scope_version;
    const uint8_t *labels; /* LabelsSnapshot protobuf (gunzipped), or NULL */
    size_t labels_len;
    /* limits; 0: the PC_JFR_DEFAULT_* */
    size_t max_chunks;            /* chunks per recording */
    size_t max_stack_depth;       /* frames of one stack trace */
    size_t max_metadata_strings;  /* strings of a chunk's metadata record */
    size_t max_metadata_elements; /* elements (class, field, annotation...) of its tree */
    size_t max_pool_entries;      /* constant-pool entries of a chunk, all types */
    pc_budget *budget;            /* the request's decode budget (base/budget.h), or NULL */
} pc_jfr_opts;

typedef struct pc_jfr_stats {
    uint64_t chunks;
    uint64_t events[PC_JFR_KIND_COUNT]; /* events decoded, per kind */
    uint64_t skipped_events;            /* events of every other type, skipped */
    uint64_t stacks_not_found;          /* events dropped: their stack trace is not in a pool */
    uint64_t frames_dropped;            /* frames whose method or class is not in a pool */
    uint64_t truncated_stacks;          /* distinct stacks the recorder marked truncated */
    uint64_t samples;                   /* samples produced, over all profiles */
    uint64_t profiles;                  /* profiles produced */
} pc_jfr_stats;

/* Decode the recording data[0..len) (a concatenation of chunks; gunzipped by the caller) into a
 * new batch *out (arena charged to o->budget until pc_batch_end_budget). A recording with no
 * usable event gives a batch with no profiles. st may be NULL; it is filled also on failure.
 * Returns 0; PC_EINVAL for a bad recording or labels snapshot (the message names the offset and
 * what was expected there, e.g. "offset 1234: string of 4294967295 bytes runs past the end of the
 * record at offset 1300"); PC_E2BIG over a limit above (the message names it) or the budget
 * (o->budget->state then says whether it was over the request's limit or the process had no
 * room now). */
int pc_jfr_to_batch(const uint8_t *data, size_t len, const pc_jfr_opts *o, pc_batch **out,
                    pc_jfr_stats *st, pc_error *e);

#endif
