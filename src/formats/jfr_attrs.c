/* Correlation ids -> sample attributes (jfr_attrs.h; spec/jfr.md §3.4). */
#include "formats/jfr_attrs.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "pdata/proto_scan.h"

struct jfr_ctx_run {
    uint32_t off, n; /* in a->run */
    uint8_t done;
    uint8_t has; /* keys the context sets itself: H_SPAN_ID, H_SPAN_NAME, H_TRACE_ID */
};

enum { H_SPAN_ID = 1, H_SPAN_NAME = 2, H_TRACE_ID = 4 };

int jfr_attrs_load(jfr_reader *r, jfr_attrs *a, const uint8_t *data, size_t len)
{
    if (!data || !len) return 0;
    const ProtobufCMessageDescriptor *desc =
        &io__pyroscope__labels__pb__labels_snapshot__descriptor;
    pc_proto_scan scan;
    pc_error pe = {0};
    if (pc_proto_scan_message(desc, data, len, PC_PROTO_MAX_DEPTH, &scan, &pe) < 0)
        return pc_error_set(r->e, PC_EBADMSG, "labels: invalid LabelsSnapshot: %s", pe.msg);
    if (r->budget && pc_budget_reserve(r->budget, scan.cost, "decoded labels snapshot") < 0)
        return jfr_budget_error(r);
    a->la = pc_arena_new(4096);
    pc_arena_set_budget(a->la, r->budget);
    a->snap = (Io__Pyroscope__Labels__Pb__LabelsSnapshot *)protobuf_c_message_unpack(
        desc, pc_arena_allocator(a->la), len, data);
    if (!a->snap) {
        if (!pc_budget_ok(r->budget)) return jfr_budget_error(r);
        return pc_error_set(r->e, PC_EBADMSG, "labels: invalid LabelsSnapshot: malformed protobuf");
    }
    for (size_t i = 0; i < a->snap->n_contexts; i++) /* a later entry of a key wins */
        jfr_umap_put(r, &a->ctx_map, (uint64_t)a->snap->contexts[i]->key, (uint32_t)i, true);
    for (size_t i = 0; i < a->snap->n_strings; i++)
        jfr_umap_put(r, &a->str_map, (uint64_t)a->snap->strings[i]->key, (uint32_t)i, true);
    return pc_budget_ok(r->budget) ? 0 : jfr_budget_error(r);
}

/* The index of string id in the snapshot, or UINT32_MAX. */
static uint32_t str_index(const jfr_attrs *a, int64_t id)
{
    return a->snap ? jfr_umap_get(&a->str_map, (uint64_t)id) : UINT32_MAX;
}

static const char *str_text(const jfr_attrs *a, uint32_t si)
{
    const char *s = si == UINT32_MAX ? NULL : a->snap->strings[si]->value;
    return s ? s : "";
}

/* The dictionary index of string si, interned once however many labels name it. */
static int32_t key_index(jfr_reader *r, jfr_attrs *a, pc_dict_builder *db, uint32_t si)
{
    if (!a->skey) {
        a->skey = jfr_vgrow(r, NULL, &a->skey_cap, a->snap->n_strings, sizeof(int32_t));
        memset(a->skey, 0, a->skey_cap * sizeof(int32_t));
    }
    if (!a->skey[si]) a->skey[si] = pc_dict_cstring(db, str_text(a, si)) + 1;
    return a->skey[si] - 1;
}

static int32_t str_attr(pc_dict_builder *db, int32_t key, const char *val)
{
    pc_anyvalue v;
    opentelemetry__proto__common__v1__any_value__init(&v);
    v.value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
    v.string_value = (char *)val; /* copied by the dictionary */
    return pc_dict_attribute(db, key, &v, 0);
}

/* The attribute key=value (string indices in the snapshot), interned once per pair: a long value
 * shared by many contexts is hashed once, not once per context. */
static int32_t pair_attr(jfr_reader *r, jfr_attrs *a, pc_dict_builder *db, uint32_t ksi,
                         uint32_t vsi)
{
    uint64_t k = (uint64_t)ksi << 32 | (vsi == UINT32_MAX ? 0 : (uint64_t)vsi + 1);
    uint32_t at = jfr_umap_get(&a->pair_map, k);
    if (at != UINT32_MAX) return (int32_t)at;
    int32_t attr = str_attr(db, key_index(r, a, db, ksi), str_text(a, vsi));
    jfr_umap_put(r, &a->pair_map, k, (uint32_t)attr, false);
    return attr;
}

/* Add key (a dictionary index, not 0) to the set of cap slots (a power of two, never full):
 * false when it is there already. Seeded, like every table keyed by input. */
static bool kset_add(int32_t *set, size_t cap, int32_t key)
{
    for (size_t i = (size_t)pc_hash_u64((uint64_t)key) & (cap - 1);; i = (i + 1) & (cap - 1)) {
        if (set[i] == key) return false;
        if (!set[i]) {
            set[i] = key;
            return true;
        }
    }
}

static uint8_t key_flag(const char *k)
{
    if (!strcmp(k, "span_id")) return H_SPAN_ID;
    if (!strcmp(k, "span_name")) return H_SPAN_NAME;
    return strcmp(k, "trace_id") ? 0 : H_TRACE_ID;
}

/* Work out context ci's attributes once: its labels in order, one per key (the first wins). */
static jfr_ctx_run *ctx_run(jfr_reader *r, jfr_attrs *a, pc_dict_builder *db, uint32_t ci)
{
    if (!a->runs) {
        a->runs = jfr_vgrow(r, NULL, &a->runs_cap, a->snap->n_contexts, sizeof(jfr_ctx_run));
        memset(a->runs, 0, a->runs_cap * sizeof(jfr_ctx_run));
    }
    jfr_ctx_run *cr = &a->runs[ci];
    if (cr->done) return cr;
    const Io__Pyroscope__Labels__Pb__Context *ctx = a->snap->contexts[ci]->value;
    size_t nl = ctx ? ctx->n_labels : 0, cap = 16;
    while (cap < 2 * nl + 2)
        cap *= 2;
    a->kset = jfr_vgrow(r, a->kset, &a->kset_cap, cap, sizeof(int32_t));
    memset(a->kset, 0, cap * sizeof(int32_t));
    cr->off = (uint32_t)a->nrun;
    for (size_t i = 0; i < nl; i++) {
        uint32_t ksi = str_index(a, ctx->labels[i]->key);
        int32_t key = ksi == UINT32_MAX ? 0 : key_index(r, a, db, ksi);
        if (!key || !kset_add(a->kset, cap, key)) continue; /* no key, or a later duplicate */
        cr->has |= key_flag(str_text(a, ksi));
        a->run = jfr_vgrow(r, a->run, &a->run_cap, a->nrun + 1, sizeof(int32_t));
        a->run[a->nrun++] = pair_attr(r, a, db, ksi, str_index(a, ctx->labels[i]->value));
    }
    cr->n = (uint32_t)(a->nrun - cr->off);
    cr->done = 1;
    return cr;
}

static void push(jfr_reader *r, int32_t attr, int32_t **v, size_t *n, size_t *cap)
{
    *v = jfr_vgrow(r, *v, cap, *n + 1, sizeof(int32_t));
    (*v)[(*n)++] = attr;
}

/* span_name's attribute, once per spanName id (the name may be long and named by every event). */
static int32_t span_name_attr(jfr_reader *r, jfr_attrs *a, pc_dict_builder *db, uint64_t id)
{
    uint32_t at = jfr_umap_get(&a->sname_map, id);
    if (at != UINT32_MAX) return (int32_t)at;
    const char *name = str_text(a, str_index(a, (int64_t)id));
    int32_t attr = *name ? pc_dict_attr_str(db, "span_name", name, strlen(name)) : 0;
    jfr_umap_put(r, &a->sname_map, id, (uint32_t)attr, false);
    return attr;
}

void jfr_attrs_of(jfr_reader *r, jfr_attrs *a, pc_dict_builder *db, const uint64_t *ids,
                  int32_t **v, size_t *n, size_t *cap)
{
    char hex[33];
    uint8_t has = 0;
    uint32_t ci = ids[0] && a->snap ? jfr_umap_get(&a->ctx_map, ids[0]) : UINT32_MAX;
    if (ci != UINT32_MAX) {
        const jfr_ctx_run *cr = ctx_run(r, a, db, ci);
        *v = jfr_vgrow(r, *v, cap, *n + cr->n, sizeof(int32_t));
        if (cr->n) memcpy(*v + *n, a->run + cr->off, cr->n * sizeof(int32_t));
        *n += cr->n;
        has = cr->has;
    }
    if (ids[1] && !(has & H_SPAN_ID)) {
        snprintf(hex, sizeof hex, "%016" PRIx64, ids[1]);
        push(r, pc_dict_attr_str(db, "span_id", hex, 16), v, n, cap);
    }
    if (ids[2] && !(has & H_SPAN_NAME)) {
        int32_t attr = span_name_attr(r, a, db, ids[2]);
        if (attr) push(r, attr, v, n, cap);
    }
    if ((ids[3] || ids[4]) && !(has & H_TRACE_ID)) {
        snprintf(hex, sizeof hex, "%016" PRIx64 "%016" PRIx64, ids[3], ids[4]);
        push(r, pc_dict_attr_str(db, "trace_id", hex, 32), v, n, cap);
    }
}

void jfr_attrs_free(jfr_reader *r, jfr_attrs *a)
{
    jfr_umap_free(r, &a->ctx_map);
    jfr_umap_free(r, &a->str_map);
    jfr_umap_free(r, &a->pair_map);
    jfr_umap_free(r, &a->sname_map);
    jfr_vfree(r, a->skey, a->skey_cap, sizeof(int32_t));
    jfr_vfree(r, a->runs, a->runs_cap, sizeof(jfr_ctx_run));
    jfr_vfree(r, a->run, a->run_cap, sizeof(int32_t));
    jfr_vfree(r, a->kset, a->kset_cap, sizeof(int32_t));
    if (a->la) pc_arena_free(a->la);
    memset(a, 0, sizeof *a);
}
