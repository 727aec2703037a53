/* JFR (Java Flight Recorder) recordings into the model, as Pyroscope's own JFR ingest maps them
 * (spec/jfr.md §2 the format, §3 the mapping). Hostile input: every size, count and offset is
 * checked against the buffer before use, recursion is capped, the checkpoint chain can only walk
 * backwards, and what the decode holds is charged to the request's budget. jfr_reader.c reads the
 * container; jfr.c maps its events as Pyroscope does (this header).
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
 * order), which formats/pprof_out.c joins back into one two-value pprof. period is 0 (not set),
 * time is opts.time_ns, duration opts.duration_ns.
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
#ifndef PC_FORMATS_JFR_H
#define PC_FORMATS_JFR_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "formats/format.h"
#include "pdata/pdata.h"

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

/* What a recording held (o->jfr_stats). */
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

/* Decode the recording data[0..len) (a concatenation of chunks, gzip or not) into a new batch
 * *out (format.h; arena charged to o->budget until pc_batch_end_budget), reading o->attrs,
 * service.name (o->service, else o->app whole, when set), scope, time_ns, duration_ns,
 * sample_rate (Hz; a negative one is 100, 0 makes CPU/wall values 0), extra (the LabelsSnapshot
 * protobuf, gzip or not, or NULL), max_bytes (cap on each inflated part), jfr (limits) and budget;
 * o->jfr_stats, when set, is filled also on failure. A recording with no usable event gives a
 * batch with no profiles. Returns 0; PC_EBADMSG for a bad recording, gzip or labels snapshot (the
 * message names the offset and what was expected there, e.g. "jfr: offset 1234: string of
 * 4294967295 bytes runs past the end of the record at offset 1300"); PC_E2BIG over a limit (the
 * message names it) or the budget (o->budget->state then says whether it was over the request's
 * limit or the process had no room now). */
PC_FORMAT_DECODER(pc_jfr_decode);

#endif
