/* profilemetrics: the state partials fold into, on the loop thread (docs/profilemetrics.md,
 * "Top N and the bounds"). Every series counts against max_series: per group its value (and,
 * with functions, its function="other" self series; with spans, its two span.linked series),
 * two per tracked function (self, total), one per frame type. */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "connectors/profilemetrics/pm.h"
#include "pdata/summary.h"

/* Functions of a window kept by name per group: beyond, their self goes to the window's other. */
static size_t window_cap(const pm_cfg *cfg)
{
    return (size_t)cfg->top_n * 8 + 64;
}

static uint64_t group_cost(const pm_cfg *cfg)
{
    return 1 + (cfg->functions ? 1 : 0) + (cfg->spans ? 2 : 0);
}

/* Room for cost more series: true, or counted as dropped (and logged the first time). */
static bool room(pm_state *s, uint64_t cost)
{
    if (s->series + cost <= (uint64_t)s->cfg->max_series) {
        s->series += cost;
        return true;
    }
    s->dropped += cost;
    if (!s->warned)
        PC_WARN(s->log_id,
                "max_series (%lld) reached: new series are dropped and counted "
                "(profcol_connector_profilemetrics_series_dropped_total)",
                (long long)s->cfg->max_series);
    s->warned = true;
    return false;
}

/* The state's group for partial group pg (taken over when new), or NULL: no room. */
static pm_group *state_group(pm_state *s, pm_group *pg, uint64_t now_ns, bool *taken)
{
    pm_group *g = pm_map_get(&s->groups, pg->key);
    *taken = false;
    if (g) return g;
    if (!room(s, group_cost(s->cfg))) return NULL;
    g = pc_xcalloc(1, sizeof *g);
    g->key = pg->key;
    g->res = pg->res;
    g->nres = pg->nres;
    g->type = pg->type;
    g->unit = pg->unit;
    pg->key = pg->type = pg->unit = NULL;
    pg->res = NULL;
    pg->nres = 0;
    g->start_ns = now_ns;
    g->other.name = pc_xstrdup("other");
    g->other.start_ns = now_ns;
    pm_map_put(&s->groups, g);
    *taken = true;
    return g;
}

static void add_frames(pm_state *s, pm_group *g, pm_group *pg, uint64_t now, uint64_t now_ns)
{
    for (size_t i = 0; i < pg->frames.cap; i++) {
        pm_ent *pe = pg->frames.slots[i];
        if (!pe) continue;
        pm_ent *e = pm_map_get(&g->frames, pe->name);
        if (!e) {
            if (!room(s, 1)) continue;
            e = pc_xcalloc(1, sizeof *e);
            e->name = pc_xstrdup(pe->name);
            e->start_ns = now_ns;
            pm_map_put(&g->frames, e);
        }
        e->self = pc_sat_add(e->self, pe->self);
        e->seen_ms = now;
    }
}

/* The batch's functions into the window (folded into series at flush). */
static void add_window(pm_state *s, pm_group *g, pm_group *pg)
{
    g->win_other = pc_sat_add(g->win_other, pg->win_other);
    for (size_t i = 0; i < pg->fns.cap; i++) {
        pm_ent *pe = pg->fns.slots[i];
        if (!pe) continue;
        pm_ent *e = pm_map_get(&g->window, pe->name);
        if (!e && g->window.n >= window_cap(s->cfg)) {
            g->win_other = pc_sat_add(g->win_other, pe->self);
            continue;
        }
        if (!e) {
            e = pc_xcalloc(1, sizeof *e);
            e->name = pc_xstrdup(pe->name);
            pm_map_put(&g->window, e);
        }
        e->self = pc_sat_add(e->self, pe->self);
        e->cum = pc_sat_add(e->cum, pe->cum);
    }
}

void pm_state_add(pm_state *s, pm_part *p, uint64_t now, uint64_t now_ns)
{
    for (size_t i = 0; i < p->groups.cap; i++) {
        pm_group *pg = p->groups.slots[i];
        if (!pg) continue;
        bool taken;
        pm_group *g = state_group(s, pg, now_ns, &taken);
        if (!g) continue;
        g->value = pc_sat_add(g->value, pg->value);
        g->seen_ms = now;
        g->linked[0] = pc_sat_add(g->linked[0], pg->linked[0]);
        g->linked[1] = pc_sat_add(g->linked[1], pg->linked[1]);
        add_frames(s, g, pg, now, now_ns);
        add_window(s, g, pg);
    }
}

static int by_self_desc(const void *a, const void *b)
{
    const pm_ent *x = *(pm_ent *const *)a, *y = *(pm_ent *const *)b;
    if (x->self != y->self) return x->self > y->self ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* The window into the series: a tracked function adds to its own; one of the window's top N
 * becomes tracked while fewer than top_n are (and max_series allows); the rest adds to other. */
static void fold_window(pm_state *s, pm_group *g, uint64_t now, uint64_t window_start_ns)
{
    size_t n = 0;
    pm_ent **v = pc_xcalloc(g->window.n + 1, sizeof *v);
    for (size_t i = 0; i < g->window.cap; i++)
        if (g->window.slots[i]) v[n++] = g->window.slots[i];
    qsort(v, n, sizeof *v, by_self_desc);
    for (size_t i = 0; i < n; i++) {
        pm_ent *e = pm_map_get(&g->fns, v[i]->name);
        if (!e && i < (size_t)s->cfg->top_n && g->fns.n < (size_t)s->cfg->top_n && room(s, 2)) {
            e = pc_xcalloc(1, sizeof *e);
            e->name = pc_xstrdup(v[i]->name);
            e->start_ns = window_start_ns;
            pm_map_put(&g->fns, e);
        }
        if (e) {
            e->self = pc_sat_add(e->self, v[i]->self);
            e->cum = pc_sat_add(e->cum, v[i]->cum);
            e->seen_ms = now;
        } else {
            g->other.self = pc_sat_add(g->other.self, v[i]->self);
        }
    }
    g->other.self = pc_sat_add(g->other.self, g->win_other);
    g->win_other = 0;
    free(v);
    pm_map_filter(&g->window, NULL, NULL, pm_ent_free);
}

typedef struct expiry {
    pm_state *s;
    uint64_t now;
    uint64_t per; /* series an entry holds */
} expiry;

static bool fresh(void *ent, void *arg)
{
    expiry *x = arg;
    pm_ent *e = ent;
    uint64_t exp = x->s->cfg->expiration_ms;
    if (!exp || e->seen_ms + exp > x->now) return true;
    x->s->series -= x->per;
    x->s->expired += x->per;
    return false;
}

static bool group_fresh(void *gp, void *arg)
{
    expiry *x = arg;
    pm_group *g = gp;
    uint64_t exp = x->s->cfg->expiration_ms;
    if (!exp || g->seen_ms + exp > x->now) {
        expiry fx = {x->s, x->now, 2};
        pm_map_filter(&g->fns, fresh, &fx, pm_ent_free);
        fx.per = 1;
        pm_map_filter(&g->frames, fresh, &fx, pm_ent_free);
        return true;
    }
    uint64_t n = group_cost(x->s->cfg) + 2 * g->fns.n + g->frames.n;
    x->s->series -= n;
    x->s->expired += n;
    return false;
}

void pm_state_fold(pm_state *s, uint64_t now, uint64_t now_ns)
{
    uint64_t window_start_ns = s->window_ns ? s->window_ns : now_ns;
    s->window_ns = now_ns;
    for (size_t i = 0; i < s->groups.cap; i++)
        if (s->groups.slots[i]) fold_window(s, s->groups.slots[i], now, window_start_ns);
    expiry x = {s, now, 0};
    pm_map_filter(&s->groups, group_fresh, &x, pm_group_free);
}

void pm_state_free(pm_state *s)
{
    pm_map_filter(&s->groups, NULL, NULL, pm_group_free);
}
