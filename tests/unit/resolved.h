/* Profiles as resolved text, for tests whose oracle is "the same content" (test_split,
 * test_wire_merge, fuzz_wire_merge): every sample as one line of its stack's frames (function
 * names, files, lines, mappings), values, timestamps, attributes as key=value and link, under
 * its resource, scope and profile, compared as sorted multisets of lines. */
#ifndef PC_TEST_RESOLVED_H
#define PC_TEST_RESOLVED_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "pdata/pdata.h"

typedef struct rs_lines {
    char **v;
    size_t n, cap;
} rs_lines;

static void rs_push(rs_lines *l, pc_buf *b)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
    }
    pc_buf_append(b, "", 1);
    l->v[l->n++] = strdup((const char *)b->data);
}

static void rs_lines_free(rs_lines *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static void rs_hex(pc_buf *o, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        pc_buf_printf(o, "%02x", p[i]);
}

static void rs_kvs(pc_buf *o, const pc_dictionary *d, pc_keyvalue *const *kv, size_t n, int depth);

static void rs_value(pc_buf *o, const pc_dictionary *d, const pc_anyvalue *v, int depth)
{
    const char *s = pc_anyvalue_str(d, v);
    /* an AnyValue with no value set is the absent value: the model stores it so
     * (pdata/dict.c, attribute()), the wire merge keeps the bytes it was sent as */
    if (!v || v->value_case == 0 || depth > 40) {
        pc_buf_printf(o, "-");
    } else if (s) {
        pc_buf_printf(o, "s:%s", s);
    } else if (v->value_case == PC_AV_INT) {
        pc_buf_printf(o, "i:%lld", (long long)v->int_value);
    } else if (v->value_case == PC_AV_BOOL) {
        pc_buf_printf(o, "b:%d", (int)v->bool_value);
    } else if (v->value_case == PC_AV_DOUBLE) {
        pc_buf_printf(o, "d:%a", v->double_value);
    } else if (v->value_case == PC_AV_BYTES) {
        pc_buf_printf(o, "x:");
        rs_hex(o, v->bytes_value.data, v->bytes_value.len);
    } else if (v->value_case == PC_AV(ARRAY_VALUE) && v->array_value) {
        pc_buf_printf(o, "[");
        for (size_t i = 0; i < v->array_value->n_values; i++) {
            rs_value(o, d, v->array_value->values[i], depth + 1);
            pc_buf_printf(o, ",");
        }
        pc_buf_printf(o, "]");
    } else if (v->value_case == PC_AV(KVLIST_VALUE) && v->kvlist_value) {
        pc_buf_printf(o, "{");
        rs_kvs(o, d, v->kvlist_value->values, v->kvlist_value->n_values, depth + 1);
        pc_buf_printf(o, "}");
    } else {
        pc_buf_printf(o, "?%d", (int)v->value_case);
    }
}

static void rs_kvs(pc_buf *o, const pc_dictionary *d, pc_keyvalue *const *kv, size_t n, int depth)
{
    for (size_t i = 0; i < n; i++) {
        pc_buf_printf(o, "%s=", pc_keyvalue_key(d, kv[i]));
        rs_value(o, d, kv[i]->value, depth);
        pc_buf_printf(o, ";");
    }
}

/* Whether string idx reads as "": index 0, or a string the model holds as "" (it holds C
 * strings: one that starts with a NUL byte is "" to it, and interned as element 0, where the
 * wire merge keeps its bytes) */
static bool rs_nostr(const pc_dictionary *d, int32_t idx)
{
    return !*pc_dict_str(d, idx);
}

/* attribute_indices through the dictionary's attribute table */
static void rs_attrs(pc_buf *o, const pc_dictionary *d, const int32_t *idx, size_t n)
{
    pc_buf_printf(o, "{");
    for (size_t i = 0; i < n; i++) {
        const pc_kvu *a = pc_dict_attr_at(d, idx[i]);
        /* an entry equal to the zero value (no key, value or unit) reads as element 0, as a
         * function or mapping does below: the model interns it so, the wire merge keeps one
         * whose zero is a field written twice, 0 last, as its own entry (wire_merge.c
         * zero_entry) */
        if (!a || (rs_nostr(d, a->key_strindex) && (!a->value || !a->value->value_case) &&
                   rs_nostr(d, a->unit_strindex)))
            continue;
        pc_buf_printf(o, "%s=", pc_dict_str(d, a->key_strindex));
        rs_value(o, d, a->value, 0);
        pc_buf_printf(o, "(%s);", pc_dict_str(d, a->unit_strindex));
    }
    pc_buf_printf(o, "}");
}

static void rs_location(pc_buf *o, const pc_dictionary *d, int32_t li)
{
    if (li <= 0 || (size_t)li >= d->n_location_table) {
        pc_buf_printf(o, "<0>");
        return;
    }
    const pc_location *l = d->location_table[li];
    const pc_mapping *m = l->mapping_index > 0 && (size_t)l->mapping_index < d->n_mapping_table
                              ? d->mapping_table[l->mapping_index]
                              : NULL;
    /* a zero-valued entry reads as element 0, as above */
    if (m && (!rs_nostr(d, m->filename_strindex) || m->memory_start || m->memory_limit ||
              m->file_offset || m->n_attribute_indices)) {
        pc_buf_printf(o, "map(%s,%llx,%llx,%llx", pc_dict_str(d, m->filename_strindex),
                      (unsigned long long)m->memory_start, (unsigned long long)m->memory_limit,
                      (unsigned long long)m->file_offset);
        rs_attrs(o, d, m->attribute_indices, m->n_attribute_indices);
        pc_buf_printf(o, ")");
    }
    pc_buf_printf(o, "@%llx[", (unsigned long long)l->address);
    for (size_t i = 0; i < l->n_lines; i++) {
        const pc_line *ln = l->lines[i];
        int32_t fi = ln->function_index;
        const pc_function *f =
            fi > 0 && (size_t)fi < d->n_function_table ? d->function_table[fi] : NULL;
        /* an entry equal to the zero value reads as element 0 (the model interns it so; the
         * wire merge keeps one whose zero is a field written twice as its own entry) */
        if (f && (!rs_nostr(d, f->name_strindex) || !rs_nostr(d, f->system_name_strindex) ||
                  !rs_nostr(d, f->filename_strindex) || f->start_line)) {
            pc_buf_printf(o, "%s/%s/%s/%lld", pc_dict_str(d, f->name_strindex),
                          pc_dict_str(d, f->system_name_strindex),
                          pc_dict_str(d, f->filename_strindex), (long long)f->start_line);
        }
        pc_buf_printf(o, ":%lld:%lld;", (long long)ln->line, (long long)ln->column);
    }
    pc_buf_printf(o, "]");
    rs_attrs(o, d, l->attribute_indices, l->n_attribute_indices);
}

static void rs_sample(pc_buf *o, const pc_dictionary *d, const pc_sample *s)
{
    pc_buf_printf(o, "|stack:");
    if (s->stack_index > 0 && (size_t)s->stack_index < d->n_stack_table) {
        const pc_stack *st = d->stack_table[s->stack_index];
        for (size_t i = 0; i < st->n_location_indices; i++)
            rs_location(o, d, st->location_indices[i]);
    }
    pc_buf_printf(o, "|v:");
    for (size_t i = 0; i < s->n_values; i++)
        pc_buf_printf(o, "%lld,", (long long)s->values[i]);
    pc_buf_printf(o, "|t:");
    for (size_t i = 0; i < s->n_timestamps_unix_nano; i++)
        pc_buf_printf(o, "%llu,", (unsigned long long)s->timestamps_unix_nano[i]);
    pc_buf_printf(o, "|a:");
    rs_attrs(o, d, s->attribute_indices, s->n_attribute_indices);
    if (s->link_index > 0 && (size_t)s->link_index < d->n_link_table) {
        const pc_link *k = d->link_table[s->link_index];
        pc_buf_printf(o, "|link:");
        rs_hex(o, k->trace_id.data, k->trace_id.len);
        pc_buf_printf(o, "/");
        rs_hex(o, k->span_id.data, k->span_id.len);
    }
}

static void rs_profile_head(pc_buf *o, const pc_dictionary *d, const pc_profile *p)
{
    const pc_value_type *st = p->sample_type, *pt = p->period_type;
    pc_buf_printf(o, "|P:%s/%s,%s/%s,%lld,%llu,%llu,", pc_dict_str(d, st ? st->type_strindex : 0),
                  pc_dict_str(d, st ? st->unit_strindex : 0),
                  pc_dict_str(d, pt ? pt->type_strindex : 0),
                  pc_dict_str(d, pt ? pt->unit_strindex : 0), (long long)p->period,
                  (unsigned long long)p->time_unix_nano, (unsigned long long)p->duration_nano);
    rs_hex(o, p->profile_id.data, p->profile_id.len);
    pc_buf_printf(o, ",%u,%s,", p->dropped_attributes_count, pc_nz(p->original_payload_format));
    rs_hex(o, p->original_payload.data, p->original_payload.len);
    rs_attrs(o, d, p->attribute_indices, p->n_attribute_indices);
}

/* One line per sample (and one per profile), each with its resource, scope and profile. */
static void rs_resolve(const pc_batch *b, rs_lines *out)
{
    const pc_request *r = pc_batch_req(b);
    const pc_dictionary *d = r->dictionary;
    static const pc_dictionary empty = {0};
    if (!d) d = &empty;
    pc_buf o = {0};
    for (size_t i = 0; i < r->n_resource_profiles; i++) {
        const pc_resource_profiles *rp = r->resource_profiles[i];
        for (size_t s = 0; s < rp->n_scope_profiles; s++) {
            const pc_scope_profiles *sp = rp->scope_profiles[s];
            for (size_t p = 0; p < sp->n_profiles; p++) {
                const pc_profile *pf = sp->profiles[p];
                for (size_t k = 0; k <= pf->n_samples; k++) {
                    o.len = 0;
                    pc_buf_printf(&o, "R:%s:", pc_nz(rp->schema_url));
                    if (rp->resource)
                        rs_kvs(&o, d, rp->resource->attributes, rp->resource->n_attributes, 0);
                    pc_buf_printf(&o, "|S:%s:", pc_nz(sp->schema_url));
                    if (sp->scope)
                        pc_buf_printf(&o, "%s/%s/", pc_nz(sp->scope->name),
                                      pc_nz(sp->scope->version));
                    if (sp->scope) rs_kvs(&o, d, sp->scope->attributes, sp->scope->n_attributes, 0);
                    rs_profile_head(&o, d, pf);
                    if (k < pf->n_samples) rs_sample(&o, d, pf->samples[k]);
                    rs_push(out, &o);
                }
            }
        }
    }
    pc_buf_free(&o);
}

static int rs_cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void rs_sort(rs_lines *l)
{
    if (l->n) qsort(l->v, l->n, sizeof *l->v, rs_cmp_str);
}

#endif
