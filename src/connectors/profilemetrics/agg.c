/* profilemetrics: what one batch adds up to (pm.h), on the pool, from the batch alone. Frames
 * are named and function self/total counted by pdata/summary.h's pc_stack_frames and pc_top,
 * the `pprof -top` table the debug exporter and profilez use. */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/hash.h"
#include "connectors/profilemetrics/pm.h"
#include "pdata/summary.h"

/* Frames named per stack at most (a bound on a hostile stack; pprof's deepest are ~1000s). */
#define PM_MAX_FRAMES 65536

static uint64_t name_hash(const char *s)
{
    pc_hash h;
    pc_hash_begin(&h);
    pc_hash_bytes(&h, s, strlen(s));
    return pc_hash_end(&h);
}

static void map_grow(pm_map *m)
{
    size_t cap = m->cap ? m->cap * 2 : 16;
    void **old = m->slots;
    size_t ocap = m->cap;
    m->slots = pc_xcalloc(cap, sizeof *m->slots);
    m->cap = cap;
    for (size_t i = 0; i < ocap; i++) {
        if (!old[i]) continue;
        size_t j = name_hash(*(char **)old[i]) & (cap - 1);
        while (m->slots[j])
            j = (j + 1) & (cap - 1);
        m->slots[j] = old[i];
    }
    free(old);
}

void *pm_map_get(const pm_map *m, const char *name)
{
    if (!m->n) return NULL;
    for (size_t j = name_hash(name) & (m->cap - 1); m->slots[j]; j = (j + 1) & (m->cap - 1))
        if (!strcmp(*(char **)m->slots[j], name)) return m->slots[j];
    return NULL;
}

void pm_map_put(pm_map *m, void *ent)
{
    if ((m->n + 1) * 2 > m->cap) map_grow(m);
    size_t j = name_hash(*(char **)ent) & (m->cap - 1);
    while (m->slots[j])
        j = (j + 1) & (m->cap - 1);
    m->slots[j] = ent;
    m->n++;
}

void pm_map_filter(pm_map *m, bool (*keep)(void *ent, void *arg), void *arg,
                   void (*free_ent)(void *ent))
{
    void **old = m->slots;
    size_t ocap = m->cap;
    *m = (pm_map){0};
    for (size_t i = 0; i < ocap; i++) {
        if (!old[i]) continue;
        if (keep && keep(old[i], arg))
            pm_map_put(m, old[i]);
        else
            free_ent(old[i]);
    }
    free(old);
}

void pm_ent_free(void *ent)
{
    pm_ent *e = ent;
    free(e->name);
    free(e);
}

void pm_group_free(void *gp)
{
    pm_group *g = gp;
    pm_map_filter(&g->fns, NULL, NULL, pm_ent_free);
    pm_map_filter(&g->window, NULL, NULL, pm_ent_free);
    pm_map_filter(&g->frames, NULL, NULL, pm_ent_free);
    for (size_t i = 0; i < g->nres; i++)
        free(g->res[i]);
    free(g->res);
    free(g->key);
    free(g->type);
    free(g->unit);
    free(g->other.name);
    free(g);
}

/* The entry name of m, made (zero) when missing. */
static pm_ent *ent_at(pm_map *m, const char *name)
{
    pm_ent *e = pm_map_get(m, name);
    if (!e) {
        e = pc_xcalloc(1, sizeof *e);
        e->name = pc_xstrdup(name);
        pm_map_put(m, e);
    }
    return e;
}

/* The group of profile it of b, made when missing. */
static pm_group *group_of(pm_part *p, const pm_cfg *cfg, const pc_batch *b,
                          const pc_profile_iter *it)
{
    const pc_dictionary *d = pc_batch_req(b)->dictionary;
    const pc_resource_profiles *rp = pc_batch_req(b)->resource_profiles[it->r];
    const pc_resource *res = rp ? rp->resource : NULL;
    size_t n = cfg->resource_attributes.n;
    const char *vals[64];
    if (n > 64) n = 64;
    pc_buf key = {0};
    for (size_t i = 0; i < n; i++) {
        const char *k = cfg->resource_attributes.v[i];
        /* service.name as every other component names a resource without one */
        vals[i] =
            !strcmp(k, "service.name") ? pc_service_name(d, res) : pc_resource_attr_str(d, res, k);
        pc_buf_printf(&key, "%c%s\x1f", vals[i] ? '+' : '-', vals[i] ? vals[i] : "");
    }
    const pc_value_type *st = it->prof->sample_type;
    const char *type = pc_dict_str(d, st ? st->type_strindex : 0);
    const char *unit = pc_dict_str(d, st ? st->unit_strindex : 0);
    pc_buf_printf(&key, "\x1e%s\x1f%s", type, unit);
    pc_buf_append(&key, "", 1);
    pm_group *g = pm_map_get(&p->groups, (char *)key.data);
    if (g) {
        pc_buf_free(&key);
        return g;
    }
    g = pc_xcalloc(1, sizeof *g);
    g->key = pc_xstrdup((char *)key.data);
    pc_buf_free(&key);
    g->nres = n;
    g->res = pc_xcalloc(n ? n : 1, sizeof(char *));
    for (size_t i = 0; i < n; i++)
        g->res[i] = vals[i] ? pc_xstrdup(vals[i]) : NULL;
    g->type = pc_xstrdup(type);
    g->unit = pc_xstrdup(unit);
    pm_map_put(&p->groups, g);
    return g;
}

/* The leaf frame's profile.frame.type (spec otlp-profiles.md, metrics.md §1.3), or "unknown". */
static const char *frame_type(const pc_dictionary *d, const pc_stack *st)
{
    if (!st || !st->n_location_indices) return "unknown";
    int32_t li = st->location_indices[0];
    if (li <= 0 || (size_t)li >= d->n_location_table || !d->location_table[li]) return "unknown";
    const pc_location *loc = d->location_table[li];
    for (size_t i = 0; i < loc->n_attribute_indices; i++) {
        const pc_kvu *a = pc_dict_attr_at(d, loc->attribute_indices[i]);
        if (!a || strcmp(pc_dict_str(d, a->key_strindex), "profile.frame.type")) continue;
        const char *v = pc_anyvalue_str(d, a->value);
        return v && *v ? v : "unknown";
    }
    return "unknown";
}

static const pc_stack *stack_of(const pc_dictionary *d, const pc_sample *s)
{
    int32_t i = s->stack_index;
    return i > 0 && (size_t)i < d->n_stack_table ? d->stack_table[i] : NULL;
}

static void top_visit(void *arg, const char *name, bool stable)
{
    pc_top_frame(arg, name, stable);
}

/* One profile's samples into g. */
static void add_profile(pm_part *p, pm_group *g, const pm_cfg *cfg, const pc_dictionary *d,
                        const pc_profile *prof)
{
    pc_top *top = cfg->functions ? pc_top_new() : NULL;
    for (size_t i = 0; i < prof->n_samples; i++) {
        const pc_sample *s = prof->samples[i];
        if (!s) continue;
        int64_t v = pc_sample_value(s);
        p->samples++;
        g->value = pc_sat_add(g->value, v);
        const pc_stack *st = stack_of(d, s);
        if (top) {
            size_t budget = PM_MAX_FRAMES;
            pc_top_stack(top, v);
            if (st) pc_stack_frames(d, st, &budget, top_visit, top);
            if (budget == PM_MAX_FRAMES) /* no frame to own it: other, so the sum holds */
                g->win_other = pc_sat_add(g->win_other, v);
        }
        if (cfg->frame_types) {
            pm_ent *e = ent_at(&g->frames, frame_type(d, st));
            e->self = pc_sat_add(e->self, v);
        }
        if (cfg->spans) {
            int32_t li = s->link_index;
            bool linked = li > 0 && (size_t)li < d->n_link_table && d->link_table[li] &&
                          d->link_table[li]->trace_id.len;
            g->linked[linked] = pc_sat_add(g->linked[linked], v);
        }
    }
    if (!top) return;
    size_t n;
    pc_top_row *rows = pc_top_rows(top, &n);
    for (size_t i = 0; i < n; i++) {
        pm_ent *e = ent_at(&g->fns, rows[i].name);
        e->self = pc_sat_add(e->self, rows[i].flat);
        e->cum = pc_sat_add(e->cum, rows[i].cum);
    }
    free(rows);
    pc_top_free(top);
}

void pm_part_fill(pm_part *p, const pm_cfg *cfg, const pc_batch *b)
{
    if (!pc_batch_req(b) || !pc_batch_req(b)->dictionary) return;
    pc_profile_iter it = {0};
    while (pc_profile_next(pc_batch_req(b), &it))
        if (it.prof)
            add_profile(p, group_of(p, cfg, b, &it), cfg, pc_batch_req(b)->dictionary, it.prof);
}

void pm_part_free(pm_part *p)
{
    pm_map_filter(&p->groups, NULL, NULL, pm_group_free);
}
