/* The sample attributes of a JFR event's correlation ids (spec/jfr.md §3.4): the labels of its
 * context in the agent's LabelsSnapshot, span_id, span_name, trace_id (jfr.c's mapping uses it).
 *
 * Linear in the snapshot: each context's attributes are worked out once (its keys de-duplicated
 * through a hash set, each label string interned once, each (key, value) pair's attribute
 * interned once), then copied for every correlation that names the context. Tables are charged
 * to the reader's budget. */
#ifndef PC_FORMATS_JFR_ATTRS_H
#define PC_FORMATS_JFR_ATTRS_H

#include "formats/jfr_reader.h"
#include "jfr_labels.pb-c.h"
#include "pdata/dict.h"

typedef struct jfr_ctx_run jfr_ctx_run;

typedef struct jfr_attrs {
    Io__Pyroscope__Labels__Pb__LabelsSnapshot *snap; /* NULL: no labels part */
    pc_arena *la;                                    /* the snapshot's */
    umap ctx_map, str_map; /* context id -> index; string id -> index (a later entry wins) */
    umap pair_map;         /* key string index << 32 | value string index + 1 -> attribute */
    umap sname_map;        /* spanName id -> attribute (0: empty name) */
    int32_t *skey;         /* per string index: its dictionary index + 1, 0: not interned yet */
    size_t skey_cap;
    jfr_ctx_run *runs; /* per context index */
    size_t runs_cap;
    int32_t *run; /* the attributes of every context worked out, one run each */
    size_t nrun, run_cap;
    int32_t *kset; /* scratch: the keys of the context being worked out */
    size_t kset_cap;
} jfr_attrs;

/* Unpack the LabelsSnapshot data[0..len) (none when len is 0) under the reader's budget. */
int jfr_attrs_load(jfr_reader *r, jfr_attrs *a, const uint8_t *data, size_t len);
/* Append the attributes of ids (contextId, spanId, spanName, traceIdHi, traceIdLo) to the vector
 * *v (*n used, *cap allocated); one per key, the first wins. */
void jfr_attrs_of(jfr_reader *r, jfr_attrs *a, pc_dict_builder *db, const uint64_t *ids,
                  int32_t **v, size_t *n, size_t *cap);
void jfr_attrs_free(jfr_reader *r, jfr_attrs *a);

#endif
