/* The oracle of the wire merge (src/pdata/wire_merge.h), for test_wire_merge and
 * fuzz_wire_merge: the merged bytes, decoded by the normal decoder, must hold the same resolved
 * content as the model merge of the decoded inputs (pc_merger, the pc_dict_import path): every
 * sample as its stack's frames (function names, files, lines, mappings), values, timestamps,
 * attributes as key=value and link, under its resource, scope and profile, all as text, compared
 * as sorted multisets (the model merge groups equal resources, the wire merge does not). Its
 * dictionary must have no duplicate entry, and pc_wire_check_profiles must accept it with the
 * summed counts. */
#ifndef PC_WMERGE_ORACLE_H
#define PC_WMERGE_ORACLE_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "pdata/merge.h"
#include "pdata/pdata.h"
#include "pdata/proto_scan.h"
#include "pdata/wire_check.h"
#include "pdata/wire_merge.h"

typedef struct wm_lines {
    char **v;
    size_t n, cap;
} wm_lines;

static void wm_push(wm_lines *l, pc_buf *b)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
    }
    pc_buf_append(b, "", 1);
    l->v[l->n++] = strdup((const char *)b->data);
}

static void wm_lines_free(wm_lines *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static void wm_hex(pc_buf *o, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        pc_buf_printf(o, "%02x", p[i]);
}

static void wm_kvs(pc_buf *o, const pc_dictionary *d, pc_keyvalue *const *kv, size_t n, int depth);

static void wm_value(pc_buf *o, const pc_dictionary *d, const pc_anyvalue *v, int depth)
{
    const char *s = pc_anyvalue_str(d, v);
    if (!v || depth > 40) {
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
        wm_hex(o, v->bytes_value.data, v->bytes_value.len);
    } else if (v->value_case == PC_AV(ARRAY_VALUE) && v->array_value) {
        pc_buf_printf(o, "[");
        for (size_t i = 0; i < v->array_value->n_values; i++) {
            wm_value(o, d, v->array_value->values[i], depth + 1);
            pc_buf_printf(o, ",");
        }
        pc_buf_printf(o, "]");
    } else if (v->value_case == PC_AV(KVLIST_VALUE) && v->kvlist_value) {
        pc_buf_printf(o, "{");
        wm_kvs(o, d, v->kvlist_value->values, v->kvlist_value->n_values, depth + 1);
        pc_buf_printf(o, "}");
    } else {
        pc_buf_printf(o, "?%d", (int)v->value_case);
    }
}

static void wm_kvs(pc_buf *o, const pc_dictionary *d, pc_keyvalue *const *kv, size_t n, int depth)
{
    for (size_t i = 0; i < n; i++) {
        pc_buf_printf(o, "%s=", pc_keyvalue_key(d, kv[i]));
        wm_value(o, d, kv[i]->value, depth);
        pc_buf_printf(o, ";");
    }
}

/* attribute_indices through the dictionary's attribute table */
static void wm_attrs(pc_buf *o, const pc_dictionary *d, const int32_t *idx, size_t n)
{
    pc_buf_printf(o, "{");
    for (size_t i = 0; i < n; i++) {
        const pc_kvu *a = pc_dict_attr_at(d, idx[i]);
        if (!a) continue;
        pc_buf_printf(o, "%s=", pc_dict_str(d, a->key_strindex));
        wm_value(o, d, a->value, 0);
        pc_buf_printf(o, "(%s);", pc_dict_str(d, a->unit_strindex));
    }
    pc_buf_printf(o, "}");
}

static void wm_location(pc_buf *o, const pc_dictionary *d, int32_t li)
{
    if (li <= 0 || (size_t)li >= d->n_location_table) {
        pc_buf_printf(o, "<0>");
        return;
    }
    const pc_location *l = d->location_table[li];
    if (l->mapping_index > 0 && (size_t)l->mapping_index < d->n_mapping_table) {
        const pc_mapping *m = d->mapping_table[l->mapping_index];
        pc_buf_printf(o, "map(%s,%llx,%llx,%llx", pc_dict_str(d, m->filename_strindex),
                      (unsigned long long)m->memory_start, (unsigned long long)m->memory_limit,
                      (unsigned long long)m->file_offset);
        wm_attrs(o, d, m->attribute_indices, m->n_attribute_indices);
        pc_buf_printf(o, ")");
    }
    pc_buf_printf(o, "@%llx[", (unsigned long long)l->address);
    for (size_t i = 0; i < l->n_lines; i++) {
        const pc_line *ln = l->lines[i];
        int32_t fi = ln->function_index;
        if (fi > 0 && (size_t)fi < d->n_function_table) {
            const pc_function *f = d->function_table[fi];
            pc_buf_printf(o, "%s/%s/%s/%lld", pc_dict_str(d, f->name_strindex),
                          pc_dict_str(d, f->system_name_strindex),
                          pc_dict_str(d, f->filename_strindex), (long long)f->start_line);
        }
        pc_buf_printf(o, ":%lld:%lld;", (long long)ln->line, (long long)ln->column);
    }
    pc_buf_printf(o, "]");
    wm_attrs(o, d, l->attribute_indices, l->n_attribute_indices);
}

static void wm_sample(pc_buf *o, const pc_dictionary *d, const pc_sample *s)
{
    pc_buf_printf(o, "|stack:");
    if (s->stack_index > 0 && (size_t)s->stack_index < d->n_stack_table) {
        const pc_stack *st = d->stack_table[s->stack_index];
        for (size_t i = 0; i < st->n_location_indices; i++)
            wm_location(o, d, st->location_indices[i]);
    }
    pc_buf_printf(o, "|v:");
    for (size_t i = 0; i < s->n_values; i++)
        pc_buf_printf(o, "%lld,", (long long)s->values[i]);
    pc_buf_printf(o, "|t:");
    for (size_t i = 0; i < s->n_timestamps_unix_nano; i++)
        pc_buf_printf(o, "%llu,", (unsigned long long)s->timestamps_unix_nano[i]);
    pc_buf_printf(o, "|a:");
    wm_attrs(o, d, s->attribute_indices, s->n_attribute_indices);
    if (s->link_index > 0 && (size_t)s->link_index < d->n_link_table) {
        const pc_link *k = d->link_table[s->link_index];
        pc_buf_printf(o, "|link:");
        wm_hex(o, k->trace_id.data, k->trace_id.len);
        pc_buf_printf(o, "/");
        wm_hex(o, k->span_id.data, k->span_id.len);
    }
}

static void wm_profile_head(pc_buf *o, const pc_dictionary *d, const pc_profile *p)
{
    const pc_value_type *st = p->sample_type, *pt = p->period_type;
    pc_buf_printf(o, "|P:%s/%s,%s/%s,%lld,%llu,%llu,", pc_dict_str(d, st ? st->type_strindex : 0),
                  pc_dict_str(d, st ? st->unit_strindex : 0),
                  pc_dict_str(d, pt ? pt->type_strindex : 0),
                  pc_dict_str(d, pt ? pt->unit_strindex : 0), (long long)p->period,
                  (unsigned long long)p->time_unix_nano, (unsigned long long)p->duration_nano);
    wm_hex(o, p->profile_id.data, p->profile_id.len);
    pc_buf_printf(o, ",%u,%s,", p->dropped_attributes_count, pc_nz(p->original_payload_format));
    wm_hex(o, p->original_payload.data, p->original_payload.len);
    wm_attrs(o, d, p->attribute_indices, p->n_attribute_indices);
}

/* One line per sample (and one per profile), each with its resource, scope and profile. */
static void wm_resolve(const pc_batch *b, wm_lines *out)
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
                        wm_kvs(&o, d, rp->resource->attributes, rp->resource->n_attributes, 0);
                    pc_buf_printf(&o, "|S:%s:", pc_nz(sp->schema_url));
                    if (sp->scope)
                        pc_buf_printf(&o, "%s/%s/", pc_nz(sp->scope->name),
                                      pc_nz(sp->scope->version));
                    if (sp->scope) wm_kvs(&o, d, sp->scope->attributes, sp->scope->n_attributes, 0);
                    wm_profile_head(&o, d, pf);
                    if (k < pf->n_samples) wm_sample(&o, d, pf->samples[k]);
                    wm_push(out, &o);
                }
            }
        }
    }
    pc_buf_free(&o);
}

static int wm_cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void wm_sort(wm_lines *l)
{
    if (l->n) qsort(l->v, l->n, sizeof *l->v, wm_cmp_str);
}

/* Duplicate entries in one table of packed messages (or strings): 1 with its name in why. */
static int wm_dup_table(ProtobufCMessage *const *m, const char *const *s, size_t n,
                        const char *name, char *why, size_t wn)
{
    wm_lines l = {0};
    pc_buf b = {0};
    for (size_t i = 0; i < n; i++) {
        b.len = 0;
        if (s) {
            pc_buf_printf(&b, "%s", pc_nz(s[i]));
        } else {
            size_t len = protobuf_c_message_get_packed_size(m[i]);
            uint8_t *p = malloc(len ? len : 1);
            protobuf_c_message_pack(m[i], p);
            wm_hex(&b, p, len);
            free(p);
        }
        wm_push(&l, &b);
    }
    int dup = 0;
    wm_sort(&l);
    for (size_t i = 1; i < l.n && !dup; i++)
        if (!strcmp(l.v[i - 1], l.v[i])) dup = 1;
    if (dup) snprintf(why, wn, "duplicate entries in the merged %s table", name);
    wm_lines_free(&l);
    pc_buf_free(&b);
    return dup;
}

static int wm_dups(const pc_dictionary *d, char *why, size_t wn)
{
    if (!d) return 0;
#define WM_T(f, name) wm_dup_table((ProtobufCMessage *const *)d->f, NULL, d->n_##f, name, why, wn)
    return wm_dup_table(NULL, (const char *const *)d->string_table, d->n_string_table, "string",
                        why, wn) ||
           WM_T(mapping_table, "mapping") || WM_T(location_table, "location") ||
           WM_T(function_table, "function") || WM_T(link_table, "link") ||
           WM_T(attribute_table, "attribute") || WM_T(stack_table, "stack");
#undef WM_T
}

/* The model merge's resolved lines, sorted. */
static void wm_model_lines(const uint8_t *const *data, const size_t *len, size_t n, wm_lines *out)
{
    pc_merger *m = pc_merger_new();
    for (size_t i = 0; i < n; i++) {
        pc_batch *b = NULL;
        pc_error e = {0};
        if (pc_batch_decode_proto(data[i], len[i], &b, &e) < 0) {
            fprintf(stderr, "oracle: input %zu does not decode: %s\n", i, e.msg);
            abort();
        }
        pc_merger_add(m, b, NULL, 0);
        pc_batch_unref(b);
    }
    pc_batch *mb = pc_merger_finish(m);
    wm_resolve(mb, out);
    pc_batch_unref(mb);
    wm_sort(out);
}

/* The merged bytes against the oracle: 0 the same; 1 not (why says how). dups: also no two
 * entries of a table equal (for inputs written as encoders write them: the merger compares
 * bytes, so two encodings of one entry, e.g. a zero written out or not, stay apart). */
static int wm_check_merged(const uint8_t *const *data, const size_t *len, size_t n,
                           const pc_buf *merged, bool dups, char *why, size_t wn)
{
    pc_wire_counts wc, in;
    pc_error e = {0};
    size_t samples = 0;
    for (size_t i = 0; i < n; i++) {
        if (pc_wire_check_profiles(data[i], len[i], PC_PROTO_MAX_DEPTH, &in, &e) < 0) abort();
        samples += in.samples;
    }
    if (pc_wire_check_profiles(merged->data, merged->len, PC_PROTO_MAX_DEPTH, &wc, &e) < 0 ||
        wc.rejected)
        return snprintf(why, wn, "wire_check refuses the merge: %s", e.msg), 1;
    if (wc.samples != samples)
        return snprintf(why, wn, "%zu samples merged, %zu sent", wc.samples, samples), 1;
    pc_batch *b = NULL;
    if (pc_batch_decode_proto(merged->len ? merged->data : (const uint8_t *)"", merged->len, &b,
                              &e) < 0)
        return snprintf(why, wn, "the merge does not decode: %s", e.msg), 1;
    wm_lines got = {0}, want = {0};
    wm_resolve(b, &got);
    wm_sort(&got);
    wm_model_lines(data, len, n, &want);
    int rc = dups ? wm_dups(pc_batch_req(b)->dictionary, why, wn) : 0;
    for (size_t i = 0; !rc && i < got.n && i < want.n; i++)
        if (strcmp(got.v[i], want.v[i]))
            rc = snprintf(why, wn, "line %zu:\n got  %.900s\n want %.900s", i, got.v[i],
                          want.v[i]) > 0;
    if (!rc && got.n != want.n)
        rc = snprintf(why, wn, "%zu lines merged, %zu in the model merge", got.n, want.n) > 0;
    wm_lines_free(&got);
    wm_lines_free(&want);
    pc_batch_unref(b);
    return rc;
}

/* Wire-merge data[0..n) and check it: 0 the same content, 1 not (why), 2 "cannot". */
static int wm_check(const uint8_t *const *data, const size_t *len, size_t n, bool dups, char *why,
                    size_t wn)
{
    pc_buf out = {0};
    int rc = pc_wire_merge(data, len, n, &out);
    if (rc == PC_ENOTSUP) {
        pc_buf_free(&out);
        return 2;
    }
    rc = rc ? (snprintf(why, wn, "pc_wire_merge: %d", rc), 1)
            : wm_check_merged(data, len, n, &out, dups, why, wn);
    pc_buf_free(&out);
    return rc;
}

#endif
