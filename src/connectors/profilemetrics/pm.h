/* The profilemetrics connector's aggregate (docs/profilemetrics.md): what one batch of profiles
 * adds up to (a partial, made on the pool from the batch alone), and the state the loop folds
 * partials into and emits as cumulative sums every metrics_flush_interval. */
#ifndef PC_CONNECTORS_PM_H
#define PC_CONNECTORS_PM_H

#include <stdbool.h>
#include <stdint.h>

#include "pdata/pdata.h"
#include "sdk/cfgtable.h"

typedef struct pm_cfg {
    char *ns;
    pc_strlist resource_attributes;
    uint64_t flush_ms, expiration_ms;
    int64_t max_series;
    bool functions, frame_types, spans;
    int64_t top_n;
} pm_cfg;

/* A string-keyed table of entries whose first member is their char *name (malloc'd). */
typedef struct pm_map {
    void **slots; /* open addressing, NULL = empty */
    size_t cap, n;
} pm_map;
void *pm_map_get(const pm_map *m, const char *name);
void pm_map_put(pm_map *m, void *ent); /* name not present */
/* Keep the entries keep(ent, arg) says; free_ent the others. */
void pm_map_filter(pm_map *m, bool (*keep)(void *ent, void *arg), void *arg,
                   void (*free_ent)(void *ent));

/* One series' counters: a function (self, total), a frame type or span share (self only). */
typedef struct pm_ent {
    char *name;
    int64_t self, cum;
    uint64_t start_ns, seen_ms; /* state: when it began (the point's start), last added to */
} pm_ent;
void pm_ent_free(void *ent);

/* Per (resource labels, profile type and unit). */
typedef struct pm_group {
    char *key;  /* resource values, type and unit, joined (the map key) */
    char **res; /* values of cfg resource_attributes (NULL: absent) */
    size_t nres;
    char *type, *unit;
    int64_t value;
    uint64_t start_ns, seen_ms;
    pm_map fns;        /* partial: the batch's functions; state: the tracked ones */
    pm_map window;     /* state: this window's functions, folded at flush */
    int64_t win_other; /* window self of samples without frames (partial: only those), and of
                          functions beyond the window table */
    pm_ent other;      /* state: cumulative self of untracked functions */
    pm_map frames;     /* frame types */
    int64_t linked[2]; /* self value of samples without / with a span link */
} pm_group;
void pm_group_free(void *g);

/* What one batch adds up to. */
typedef struct pm_part {
    pm_map groups;
    uint64_t samples;
} pm_part;
/* Aggregate b (read only; any thread). */
void pm_part_fill(pm_part *p, const pm_cfg *cfg, const pc_batch *b);
void pm_part_free(pm_part *p);

typedef struct pm_state {
    const pm_cfg *cfg;
    pm_map groups;
    uint64_t series;                   /* series held (self-metric) */
    uint64_t dropped, points, expired; /* series refused by max_series; points emitted */
    bool warned;                       /* max_series logged once */
    uint64_t window_ns;                /* wall clock the current window began (0: not yet) */
    const char *log_id;
} pm_state;
/* Fold a partial in (loop thread); now: uv_now ms, now_ns: wall clock. */
void pm_state_add(pm_state *s, pm_part *p, uint64_t now, uint64_t now_ns);
/* Fold the window into the series (top N) and drop what expired. */
void pm_state_fold(pm_state *s, uint64_t now, uint64_t now_ns);
/* pm_state_fold, then return the metrics of every series held (a
 * new batch), or NULL when there is none. */
pc_batch *pm_state_flush(pm_state *s, uint64_t now, uint64_t now_ns);
void pm_state_free(pm_state *s);

#endif
