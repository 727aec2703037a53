/* The profilez extension's aggregate: what passed through in the last window, per series (service,
 * profile type), as stacks of function names with their summed values, in bounded memory.
 *
 * - The window (window_ms) is cut into `slices` time slices aligned to multiples of
 *   window_ms / slices; a slice older than the window is cleared (it expired).
 * - A series keeps at most max_stacks aggregated stacks over all its slices (a stack seen in two
 *   slices counts twice: that is what it stores). A new stack that does not fit makes room by
 *   dropping the series' oldest slice, then the next oldest, never the current one
 *   (evicted_stacks counts the stacks dropped). When the current slice alone holds max_stacks,
 *   the value of a new stack goes to one "[over budget]" frame of that slice (over_budget_samples
 *   counts its samples): totals stay right, the detail is lost.
 * - At most max_series series; the profiles of a new one beyond that are dropped
 *   (dropped_profiles). A series with nothing left in the window is removed.
 * - Frame names are cut at PZ_MAX_NAME bytes (on a UTF-8 boundary) and interned once with a
 *   reference count; a stack keeps its PZ_MAX_DEPTH - 1 leaf-most frames under "[truncated]".
 * - A stack is its frames and its label set (resource and sample attributes, link ids; labels.c):
 *   at most max_label_sets distinct sets over all series, interned with a reference count; a
 *   new one beyond that is "[labels]=[over budget]" (over_budget_label_samples counts samples).
 *
 * Not thread-safe: the extension touches one aggregate from one work item at a time. Times are
 * milliseconds of a clock that does not go backwards (the extension uses uv_hrtime). */
#ifndef PC_PZ_AGG_H
#define PC_PZ_AGG_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "pdata/pdata.h"

#define PZ_MAX_NAME  1024
#define PZ_MAX_DEPTH 512
/* Flame-graph nodes whose total is under 1 / PZ_PRUNE_DIV of the series' total are left out of
 * /api/flamegraph (less than a pixel on any screen); their value stays in their parent's total. */
#define PZ_PRUNE_DIV 8192

typedef struct pz_limits {
    uint64_t window_ms;
    unsigned slices;
    size_t max_stacks; /* per series */
    size_t max_series;
    size_t max_label_sets; /* distinct label sets kept over all series (0: no labels kept) */
} pz_limits;

/* Labels a label set keeps at most (more are dropped, counted); keys and values are names (cut
 * at PZ_MAX_NAME bytes). */
#define PZ_MAX_LABELS 16

typedef struct pz_stats {
    uint64_t profiles, samples;         /* aggregated */
    uint64_t evicted_stacks;            /* dropped from older slices to make room (the budget) */
    uint64_t over_budget_samples;       /* folded into "[over budget]": no room even after that */
    uint64_t dropped_profiles;          /* of new series beyond max_series */
    uint64_t series, stacks;            /* now (gauges) */
    uint64_t dropped_batches;           /* told by the caller: batches it released unread */
    uint64_t label_sets;                /* now (gauge) */
    uint64_t over_budget_label_samples; /* samples whose label set found no room (max_label_sets) */
    uint64_t dropped_labels;            /* labels of a sample beyond PZ_MAX_LABELS */
} pz_stats;

typedef struct pz_agg pz_agg;

pz_agg *pz_agg_new(const pz_limits *l);
void pz_agg_free(pz_agg *a);
const pz_stats *pz_agg_stats(const pz_agg *a);
/* The caller's count of batches it released without handing them over (shown with the rest). */
void pz_agg_set_dropped_batches(pz_agg *a, uint64_t n);

/* Every profile of b (a profiles batch, only read) at time now_ms: series from the resource's
 * service.name (pc_service_name) and the profile's sample type and unit; frames named as the debug
 * exporter names them (pc_stack_frames); a sample's value as pc_sample_value. */
void pz_agg_add_batch(pz_agg *a, const pc_batch *b, uint64_t now_ms);
/* One stack (frames leaf first, n may be 0) of value with `samples` samples. 0, or PC_E2BIG when
 * the series could not be created (max_series). */
int pz_agg_add_stack(pz_agg *a, const char *service, const char *type, const char *unit,
                     const char *const *frames, size_t n, int64_t value, uint64_t samples,
                     uint64_t now_ms);
/* Expire what left the window (each query does it first). */
void pz_agg_advance(pz_agg *a, uint64_t now_ms);

/* The JSON behind the page (README, "profilez"):
 * series: {"window_ms","slice_ms","slices","max_stacks","max_series","stats":{...},
 *          "series":[{"service","type","unit","total","samples","stacks","age_ms",
 *                     "evicted_stacks","over_budget_samples"}]} (by service, then type);
 * flamegraph: {"service","type","unit","total","pruned":N,"names":[...],
 *              "nodes":[[name,total,self,depth]...]} the tree in pre-order (a node's children
 *              follow it, by name, one deeper), the root first at depth 0; name indexes names,
 *              names[0] is the root's "total"; PC_ENOENT when there is no such series;
 * top: {"service","type","unit","total","functions":N,"rows":[{"name","flat","cum"}...]} the
 *      first `limit` rows by flat (pc_top_rows). type is "type:unit", e.g. "cpu:nanoseconds". */
void pz_agg_series_json(pz_agg *a, uint64_t now_ms, pc_buf *out);
int pz_agg_flamegraph_json(pz_agg *a, const char *service, const char *type, uint64_t now_ms,
                           pc_buf *out);
int pz_agg_top_json(pz_agg *a, const char *service, const char *type, size_t limit, uint64_t now_ms,
                    pc_buf *out);

/* What a flame graph, top table or timeline looks at. Times are of the caller's clock: the
 * aggregate's (now_ms) + clock_off_ms, so a page can ask in wall-clock milliseconds. */
typedef struct pz_query {
    const char *service, *type; /* type as "type:unit" */
    int64_t from_ms, to_ms;     /* the slices overlapping [from_ms, to_ms); 0, 0: all of them */
    int64_t clock_off_ms;
    const char *const *focus; /* top: only the stacks under this path (root first, without the
                               * root "total"), counted from its last frame down */
    size_t n_focus;
    const char *search; /* top: only the functions whose names contain it (ASCII case folded) */
    size_t limit;       /* top: rows at most */
    const char *const *labels;   /* key, value, key, value...: only stacks with all of them */
    size_t n_labels;             /* pairs */
    const char *group_by;        /* labels: the key whose values get a row each */
    const struct pz_query *base; /* flamegraph, top: a baseline to compare with (a diff) */
} pz_query;

/* As pz_agg_flamegraph_json and pz_agg_top_json, of the query's time range (and focus, search);
 * timeline: {"service","type","unit","total","slice_ms","now_ms","points":[[start_ms,total,
 * samples]...]} the window's slices oldest first, the current one last (empty ones as 0). */
int pz_agg_flamegraph_q(pz_agg *a, const pz_query *q, uint64_t now_ms, pc_buf *out);
int pz_agg_top_q(pz_agg *a, const pz_query *q, uint64_t now_ms, pc_buf *out);
int pz_agg_timeline_q(pz_agg *a, const pz_query *q, uint64_t now_ms, pc_buf *out);
/* A diff (q->base): the flame graph's nodes get a fifth member, the baseline's total, and the
 * answer "base_total"; the top's rows are {"name","flat","cum","base_flat","base_cum","change"},
 * change = flat / total - base_flat / base_total (shares: the two totals normalised), by
 * |change| descending, then name.
 * labels: {"service","type","unit","total","keys":[{"key","values"}...] (by key),
 * "group_by","rows":[{"value","total","samples"}...]} the label keys of the stacks of the query
 * (range, labels) with their number of values, and with group_by a row per value of that key
 * by total, descending (the first `limit`; value null: the stacks without that key). */
int pz_agg_labels_q(pz_agg *a, const pz_query *q, uint64_t now_ms, pc_buf *out);

/* A JSON string (quoted, escaped) of s. */
void pz_json_str(pc_buf *out, const char *s);

#endif
