/* Label sets of the profilez aggregate (agg.h, agg_impl.h): interned, reference counted, at most
 * max_label_sets of them; and the /api/labels answer (the keys, a table per value of one). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/hash.h"
#include "base/hex.h"
#include "extensions/profilez/agg_impl.h"

#define ARR_N(arr, n) ((arr) ? (n) : 0)

static uint64_t kv_hash(const uint32_t *kv, size_t n)
{
    pc_hash h;
    pc_hash_begin(&h);
    pc_hash_bytes(&h, kv, 2 * n * sizeof *kv);
    return pc_hash_end(&h);
}

static void slot_put(lsets *ls, uint32_t id)
{
    size_t j = (size_t)ls->v[id].hash & (ls->nslots - 1);
    while (ls->slots[j] && ls->slots[j] != LSET_TOMB)
        j = (j + 1) & (ls->nslots - 1);
    if (!ls->slots[j]) ls->used++;
    ls->slots[j] = id + 1;
}

static void lsets_rebuild(lsets *ls)
{
    size_t ns = 64;
    while ((ls->live + 1) * 10 > ns * 5)
        ns *= 2;
    free(ls->slots);
    ls->slots = pc_xcalloc(ns, sizeof *ls->slots);
    ls->nslots = ns;
    ls->used = 0;
    for (size_t id = 2; id < ls->n; id++)
        if (ls->v[id].kv) slot_put(ls, (uint32_t)id);
}

void pz_lsets_init(pz_agg *a)
{
    lsets *ls = &a->ls;
    ls->cap = 16;
    ls->v = pc_xcalloc(ls->cap, sizeof *ls->v);
    ls->n = 2;
    ls->v[0].kv = pc_xmalloc(sizeof *ls->v[0].kv); /* no labels */
    uint32_t *over = pc_xmalloc(2 * sizeof *over);
    over[0] = pz_name_ref(&a->nm, "[labels]");
    over[1] = pz_name_ref(&a->nm, "[over budget]");
    ls->v[PZ_LSET_OVER] = (lset){.kv = over, .n = 1};
    lsets_rebuild(ls);
}

void pz_lsets_free(pz_agg *a)
{
    for (size_t i = 0; i < a->ls.n; i++)
        free(a->ls.v[i].kv);
    free(a->ls.v);
    free(a->ls.slots);
    free(a->ls.freeids);
}

void pz_lset_retain(pz_agg *a, uint32_t id)
{
    if (id > PZ_LSET_OVER) a->ls.v[id].refs++;
}

void pz_lset_unref(pz_agg *a, uint32_t id)
{
    lsets *ls = &a->ls;
    if (id <= PZ_LSET_OVER || --ls->v[id].refs) return;
    lset *e = &ls->v[id];
    size_t j = (size_t)e->hash & (ls->nslots - 1);
    while (ls->slots[j] != id + 1)
        j = (j + 1) & (ls->nslots - 1);
    ls->slots[j] = LSET_TOMB;
    for (uint32_t i = 0; i < 2 * e->n; i++)
        pz_name_unref(&a->nm, e->kv[i]);
    free(e->kv);
    e->kv = NULL;
    if (ls->nfree == ls->capfree) {
        ls->capfree = ls->capfree ? ls->capfree * 2 : 64;
        ls->freeids = pc_xrealloc(ls->freeids, ls->capfree * sizeof *ls->freeids);
    }
    ls->freeids[ls->nfree++] = id;
    ls->live--;
    a->st.label_sets = ls->live;
}

/* The id of the set kv (n pairs, sorted) with one more reference, PZ_LSET_OVER when a new one
 * finds no room. */
static uint32_t lset_ref(pz_agg *a, const uint32_t *kv, size_t n)
{
    lsets *ls = &a->ls;
    if (!n) return 0;
    uint64_t h = kv_hash(kv, n);
    for (size_t j = (size_t)h & (ls->nslots - 1); ls->slots[j]; j = (j + 1) & (ls->nslots - 1)) {
        if (ls->slots[j] == LSET_TOMB) continue;
        lset *e = &ls->v[ls->slots[j] - 1];
        if (e->hash == h && e->n == n && !memcmp(e->kv, kv, 2 * n * sizeof *kv)) {
            e->refs++;
            return ls->slots[j] - 1;
        }
    }
    if (ls->live >= a->l.max_label_sets) return PZ_LSET_OVER;
    if ((ls->used + 1) * 10 > ls->nslots * 7) lsets_rebuild(ls);
    uint32_t id;
    if (ls->nfree) {
        id = ls->freeids[--ls->nfree];
    } else {
        if (ls->n == ls->cap) {
            ls->cap *= 2;
            ls->v = pc_xrealloc(ls->v, ls->cap * sizeof *ls->v);
        }
        id = (uint32_t)ls->n++;
    }
    lset *e = &ls->v[id];
    *e = (lset){.kv = pc_xmalloc(2 * n * sizeof *kv), .n = (uint32_t)n, .refs = 1, .hash = h};
    memcpy(e->kv, kv, 2 * n * sizeof *kv);
    for (size_t i = 0; i < 2 * n; i++)
        a->nm.v[kv[i]].refs++;
    slot_put(ls, id);
    ls->live++;
    a->st.label_sets = ls->live;
    return id;
}

/* A value as text (buf holds 64 bytes): strings as they are, numbers and bools printed, bytes in
 * hex (their first 31); NULL for other kinds. */
static const char *value_text(const pc_dictionary *d, const pc_anyvalue *v, char *buf)
{
    if (!v) return NULL;
    const char *s = pc_anyvalue_str(d, v);
    if (s) return s;
    switch (v->value_case) {
    case PC_AV_INT: snprintf(buf, 64, "%" PRId64, v->int_value); return buf;
    case PC_AV_BOOL: return v->bool_value ? "true" : "false";
    case PC_AV_DOUBLE: snprintf(buf, 64, "%.17g", v->double_value); return buf;
    case PC_AV_BYTES:
        pc_hex_encode(buf, v->bytes_value.data, v->bytes_value.len < 31 ? v->bytes_value.len : 31);
        return buf;
    default: return NULL;
    }
}

/* A sample's labels as name ids. With the label-set table full (find) no set can be added, so
 * the names are only looked up: a name never seen means a set never seen, [over budget] at once,
 * without interning (and then freeing) the high-cardinality values that fill the table (span and
 * trace ids; bench/README.md, "The live view's APIs"). */
typedef struct pairs {
    uint32_t kv[2 * PZ_MAX_LABELS];
    size_t n;
    uint64_t dropped;
    bool find;    /* look names up, take no reference */
    bool unknown; /* find: a name that is none yet */
} pairs;

static uint32_t pair_name(pz_agg *a, pairs *p, const char *s)
{
    if (!p->find) return pz_name_ref(&a->nm, s);
    uint32_t id = pz_name_find(&a->nm, s);
    p->unknown |= id == PZ_NAME_NONE;
    return id;
}

static void pair_add(pz_agg *a, pairs *p, const char *key, const char *value)
{
    if (!key || !*key || !value) return;
    if (p->n == PZ_MAX_LABELS) {
        p->dropped++;
        return;
    }
    p->kv[2 * p->n] = pair_name(a, p, key);
    p->kv[2 * p->n + 1] = pair_name(a, p, value);
    p->n++;
}

/* The name id of the key at strindex ks (one reference held by m), PZ_NAME_NONE for "". */
static uint32_t memo_key(pz_agg *a, pz_lset_memo *m, const pc_dictionary *d, int32_t ks)
{
    pz_key_memo_entry *k = &m->k[(uint32_t)ks % PZ_KEY_MEMO];
    if (k->id && k->strindex == ks) return k->id - 1;
    const char *key = pc_dict_str(d, ks);
    if (!*key) return PZ_NAME_NONE;
    if (k->id) pz_name_unref(&a->nm, k->id - 1);
    *k = (pz_key_memo_entry){ks, pz_name_ref(&a->nm, key) + 1};
    return k->id - 1;
}

/* pair_add for a sample attribute: its key through the memo. */
static void pair_add_key(pz_agg *a, pairs *p, pz_lset_memo *m, const pc_dictionary *d, int32_t ks,
                         const char *value)
{
    if (!value) return;
    uint32_t key = memo_key(a, m, d, ks);
    if (key == PZ_NAME_NONE) return;
    if (p->n == PZ_MAX_LABELS) {
        p->dropped++;
        return;
    }
    if (!p->find) a->nm.v[key].refs++; /* pair_add's reference */
    p->kv[2 * p->n] = key;
    p->kv[2 * p->n + 1] = pair_name(a, p, value);
    p->n++;
}

/* The references pair_add took (none when it only looked names up). */
static void pair_unref(pz_agg *a, const pairs *p, uint32_t id)
{
    if (!p->find) pz_name_unref(&a->nm, id);
}

static void link_pairs(pz_agg *a, pairs *p, const pc_dictionary *d, int32_t li)
{
    if (!d || li <= 0 || (size_t)li >= ARR_N(d->link_table, d->n_link_table) || !d->link_table[li])
        return;
    const pc_link *l = d->link_table[li];
    char hex[2 * 16 + 1];
    static const uint8_t zero[16];
    if (l->trace_id.len == 16 && memcmp(l->trace_id.data, zero, 16)) {
        pc_hex_encode(hex, l->trace_id.data, 16);
        pair_add(a, p, "trace_id", hex);
    }
    if (l->span_id.len == 8 && memcmp(l->span_id.data, zero, 8)) {
        pc_hex_encode(hex, l->span_id.data, 8);
        pair_add(a, p, "span_id", hex);
    }
}

static uint32_t sample_lset(pz_agg *a, pz_lset_memo *mm, const pc_dictionary *d,
                            const pc_resource *r, const pc_sample *s, uint64_t *dropped)
{
    pairs p = {.find = a->ls.live >= a->l.max_label_sets};
    char buf[64];
    for (size_t i = 0; r && i < ARR_N(r->attributes, r->n_attributes); i++) {
        const pc_keyvalue *kv = r->attributes[i];
        const char *key = pc_keyvalue_key(d, kv);
        if (kv && strcmp(key, "service.name")) pair_add(a, &p, key, value_text(d, kv->value, buf));
    }
    for (size_t i = 0; i < ARR_N(s->attribute_indices, s->n_attribute_indices); i++) {
        const pc_kvu *kv = pc_dict_attr_at(d, s->attribute_indices[i]);
        if (kv) pair_add_key(a, &p, mm, d, kv->key_strindex, value_text(d, kv->value, buf));
    }
    link_pairs(a, &p, d, s->link_index);
    *dropped = p.dropped;
    /* one value per key (the first given), sorted by key id: the same labels, the same set */
    size_t m = 0;
    for (size_t i = 0; i < p.n; i++) {
        bool dup = false;
        for (size_t k = 0; k < m && !dup; k++)
            dup = p.kv[2 * k] == p.kv[2 * i];
        if (dup) {
            pair_unref(a, &p, p.kv[2 * i]);
            pair_unref(a, &p, p.kv[2 * i + 1]);
            continue;
        }
        p.kv[2 * m] = p.kv[2 * i];
        p.kv[2 * m + 1] = p.kv[2 * i + 1];
        m++;
    }
    if (p.unknown) return PZ_LSET_OVER;
    for (size_t i = 1; i < m; i++) /* a few pairs: insertion sort by key id */
        for (size_t k = i; k > 0 && p.kv[2 * k - 2] > p.kv[2 * k]; k--) {
            uint32_t t0 = p.kv[2 * k - 2], t1 = p.kv[2 * k - 1];
            p.kv[2 * k - 2] = p.kv[2 * k];
            p.kv[2 * k - 1] = p.kv[2 * k + 1];
            p.kv[2 * k] = t0;
            p.kv[2 * k + 1] = t1;
        }
    uint32_t id = lset_ref(a, p.kv, m);
    for (size_t i = 0; i < 2 * m; i++)
        pair_unref(a, &p, p.kv[i]);
    return id;
}

static size_t memo_slot(const pc_sample *s)
{
    uint64_t h = (uint64_t)(uint32_t)s->link_index * 0x9e3779b97f4a7c15u;
    for (size_t i = 0; i < ARR_N(s->attribute_indices, s->n_attribute_indices); i++)
        h = (h ^ (uint32_t)s->attribute_indices[i]) * 0x100000001b3u;
    return (size_t)(h >> 32) % PZ_LSET_MEMO;
}

uint32_t pz_sample_lset(pz_agg *a, pz_lset_memo *m, const pc_dictionary *d, const pc_resource *r,
                        const pc_sample *s)
{
    if (!a->l.max_label_sets) return 0;
    size_t n = ARR_N(s->attribute_indices, s->n_attribute_indices);
    pz_lset_memo_entry *e = &m->e[memo_slot(s)];
    if (!(e->used && e->n == n && e->link == s->link_index &&
          (!n || !memcmp(e->attrs, s->attribute_indices, n * sizeof *e->attrs)))) {
        if (e->used) pz_lset_unref(a, e->id);
        *e = (pz_lset_memo_entry){
            .attrs = s->attribute_indices, .n = n, .link = s->link_index, .used = true};
        e->id = sample_lset(a, m, d, r, s, &e->dropped); /* the memo's reference */
    }
    /* counted per sample, as without the memo */
    a->st.dropped_labels += e->dropped;
    if (e->id == PZ_LSET_OVER) a->st.over_budget_label_samples++;
    pz_lset_retain(a, e->id);
    return e->id;
}

void pz_lset_memo_clear(pz_agg *a, pz_lset_memo *m)
{
    for (size_t i = 0; i < PZ_LSET_MEMO; i++)
        if (m->e[i].used) pz_lset_unref(a, m->e[i].id);
    for (size_t i = 0; i < PZ_KEY_MEMO; i++)
        if (m->k[i].id) pz_name_unref(&a->nm, m->k[i].id - 1);
    memset(m, 0, sizeof *m);
}

/* The value of key in set id, or NULL. */
static const char *lset_get(const pz_agg *a, uint32_t id, const char *key)
{
    const lset *e = &a->ls.v[id];
    for (uint32_t i = 0; i < e->n; i++)
        if (!strcmp(a->nm.v[e->kv[2 * i]].s, key)) return a->nm.v[e->kv[2 * i + 1]].s;
    return NULL;
}

bool pz_lset_match(const pz_agg *a, uint32_t id, const pz_query *q)
{
    for (size_t i = 0; i < q->n_labels; i++) {
        const char *v = lset_get(a, id, q->labels[2 * i]);
        if (!v || strcmp(v, q->labels[2 * i + 1])) return false;
    }
    return true;
}
