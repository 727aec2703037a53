/* The prometheus exporter's files share this: its settings, the accumulator of series (accum.c)
 * and the text rendering (render.c).
 *
 * The accumulator keeps one point per series (metric name + label set), as the Collector's
 * prometheus exporter does (docs: /work/shared/spec/metrics.md §3). Names and label sets are
 * formats/prom.h's (shared with prometheusremotewrite). It is updated on the thread
 * pool (the exporter core's encode step) and read on the thread pool (a scrape's rendering), so a
 * mutex guards it; the loop thread never touches it. */
#ifndef PC_PROM_MODEL_H
#define PC_PROM_MODEL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "formats/prom.h"
#include "pdata/pdata.h"
#include "sdk/cfgtable.h"
#include "sdk/receiver_http.h"

typedef struct prom_cfg {
    pc_http_server_cfg server; /* endpoint included */
    char *namespace_;
    pc_strmap const_labels;
    bool send_timestamps;
    uint64_t expiration_ms;
    bool resource_to_labels;
    bool open_metrics;
    bool suffixes;
    int64_t max_series;
} prom_cfg;

/* A hash-table link: the first member of a family and of a series. */
typedef struct prom_node {
    struct prom_node *next;
    uint64_t hash;
} prom_node;

typedef struct prom_table {
    prom_node **b;
    size_t nb, n;
} prom_table;

typedef struct prom_family {
    prom_node node;
    char *name; /* as exposed in 0.0.4 (a counter with its _total when suffixes are on) */
    char *help;
    pc_prom_type type;
    size_t n_series;
} prom_family;

typedef struct prom_series {
    prom_node node;
    prom_family *fam;
    char *labels; /* a="x",b="y": sorted by name, escaped; "" for none */
    uint64_t start_ns, time_ns;
    uint64_t seen_ms; /* monotonic time of the last update, for metric_expiration */
    double value;     /* gauge, counter */
    /* histogram: bounds[n] and counts[n + 1] (per bucket, not cumulative); summary: bounds are
     * the quantiles and qvals their values */
    size_t n;
    double *bounds;
    uint64_t *counts;
    double *qvals;
    uint64_t count;
    double sum;
} prom_series;

/* What one batch came to (counted on the loop afterwards). */
typedef struct prom_tally {
    uint64_t points;         /* data points kept */
    uint64_t dropped_points; /* unsupported kind or temporality, out of order */
    uint64_t dropped_series; /* new series refused at max_series */
    uint64_t series;         /* series held after the batch */
} prom_tally;

typedef struct prom_accum {
    pthread_mutex_t mu;
    const prom_cfg *cfg;
    prom_table fams, series;
    uint64_t expired_ms; /* the last walk for expired series */
} prom_accum;

void prom_accum_init(prom_accum *a, const prom_cfg *cfg);
void prom_accum_free(prom_accum *a);
/* Thread pool: fold a metrics batch in. */
void prom_accum_add(prom_accum *a, const pc_batch *b, prom_tally *t);
/* Thread pool: drop expired series, then render every series (OpenMetrics when om). */
void prom_accum_render(prom_accum *a, bool om, pc_buf *out, prom_tally *t);
/* Monotonic milliseconds. */
uint64_t prom_now_ms(void);

/* Series table (accum.c): find or NULL. */
prom_series *prom_series_find(prom_accum *a, const char *fam, const char *labels, uint64_t h);
uint64_t prom_series_hash(const char *fam, const char *labels);

/* render.c */
void prom_render_series(pc_buf *out, prom_series *const *s, size_t n, bool om, bool timestamps);

#endif
