/* Validation on the way in (ARCHITECTURE.md §3): every index inside its table, element 0 of every
 * table the zero value, values and timestamps of equal length. Invalid data is refused, never
 * passed on.
 */
#include <stdio.h>
#include <string.h>

#include "pdata/pdata.h"

typedef struct sizes {
    size_t strings, mappings, locations, functions, links, attrs, stacks;
} sizes;

#define FAIL(...) return pc_error_set(e, PC_EINVAL, __VA_ARGS__)

static int idx_ok(int32_t idx, size_t n)
{
    /* index 0 means "unset" and is valid even for an absent table */
    return idx == 0 || (idx > 0 && (size_t)idx < n);
}

static int check_indices(const int32_t *v, size_t n, size_t table, const char *what, pc_error *e)
{
    for (size_t i = 0; i < n; i++)
        if (!idx_ok(v[i], table))
            FAIL("%s[%zu] = %d out of range (table size %zu)", what, i, v[i], table);
    return 0;
}

static int all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i]) return 0;
    return 1;
}

static int check_anyvalue(const pc_anyvalue *v, const sizes *s, int depth, const char *what,
                          pc_error *e)
{
    if (!v) return 0;
    if (depth > 32) FAIL("%s: attribute value nested too deeply", what);
    switch (v->value_case) {
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE_STRINDEX:
        if (!idx_ok(v->string_value_strindex, s->strings))
            FAIL("%s: string_value_strindex %d out of range", what, v->string_value_strindex);
        break;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_ARRAY_VALUE:
        if (v->array_value)
            for (size_t i = 0; i < v->array_value->n_values; i++)
                if (check_anyvalue(v->array_value->values[i], s, depth + 1, what, e))
                    return PC_EINVAL;
        break;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_KVLIST_VALUE:
        if (v->kvlist_value)
            for (size_t i = 0; i < v->kvlist_value->n_values; i++) {
                const pc_keyvalue *kv = v->kvlist_value->values[i];
                if (!idx_ok(kv->key_strindex, s->strings))
                    FAIL("%s: key_strindex %d out of range", what, kv->key_strindex);
                if (check_anyvalue(kv->value, s, depth + 1, what, e)) return PC_EINVAL;
            }
        break;
    default: break;
    }
    return 0;
}

static int check_keyvalues(pc_keyvalue **kvs, size_t n, const sizes *s, const char *what,
                           pc_error *e)
{
    for (size_t i = 0; i < n; i++) {
        if (!idx_ok(kvs[i]->key_strindex, s->strings))
            FAIL("%s attribute %zu: key_strindex %d out of range", what, i, kvs[i]->key_strindex);
        if (check_anyvalue(kvs[i]->value, s, 0, what, e)) return PC_EINVAL;
    }
    return 0;
}

static int check_zero_elements(const pc_dictionary *d, pc_error *e)
{
    if (d->n_string_table && d->string_table[0][0])
        FAIL("dictionary: string_table[0] must be \"\"");
    if (d->n_mapping_table) {
        const pc_mapping *m = d->mapping_table[0];
        if (m->memory_start || m->memory_limit || m->file_offset || m->filename_strindex ||
            m->n_attribute_indices)
            FAIL("dictionary: mapping_table[0] must be the zero Mapping");
    }
    if (d->n_location_table) {
        const pc_location *l = d->location_table[0];
        if (l->mapping_index || l->address || l->n_lines || l->n_attribute_indices)
            FAIL("dictionary: location_table[0] must be the zero Location");
    }
    if (d->n_function_table) {
        const pc_function *f = d->function_table[0];
        if (f->name_strindex || f->system_name_strindex || f->filename_strindex || f->start_line)
            FAIL("dictionary: function_table[0] must be the zero Function");
    }
    if (d->n_link_table) {
        const pc_link *l = d->link_table[0];
        if (!all_zero(l->trace_id.data, l->trace_id.len) ||
            !all_zero(l->span_id.data, l->span_id.len) ||
            (l->trace_id.len != 0 && l->trace_id.len != 16) ||
            (l->span_id.len != 0 && l->span_id.len != 8))
            FAIL("dictionary: link_table[0] must be the zero Link (ids of 16 and 8 bytes, or "
                 "empty)");
    }
    if (d->n_attribute_table) {
        const pc_kvu *a = d->attribute_table[0];
        if (a->key_strindex || a->unit_strindex ||
            (a->value &&
             a->value->value_case != OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE__NOT_SET))
            FAIL("dictionary: attribute_table[0] must be the zero KeyValueAndUnit");
    }
    if (d->n_stack_table && d->stack_table[0]->n_location_indices)
        FAIL("dictionary: stack_table[0] must be the empty Stack");
    return 0;
}

static int check_dictionary(const pc_dictionary *d, const sizes *s, pc_error *e)
{
    if (check_zero_elements(d, e)) return PC_EINVAL;
    for (size_t i = 0; i < d->n_mapping_table; i++) {
        const pc_mapping *m = d->mapping_table[i];
        if (!idx_ok(m->filename_strindex, s->strings))
            FAIL("mapping_table[%zu].filename_strindex %d out of range", i, m->filename_strindex);
        if (check_indices(m->attribute_indices, m->n_attribute_indices, s->attrs,
                          "mapping attribute_indices", e))
            return PC_EINVAL;
    }
    for (size_t i = 0; i < d->n_location_table; i++) {
        const pc_location *l = d->location_table[i];
        if (!idx_ok(l->mapping_index, s->mappings))
            FAIL("location_table[%zu].mapping_index %d out of range", i, l->mapping_index);
        for (size_t j = 0; j < l->n_lines; j++)
            if (!idx_ok(l->lines[j]->function_index, s->functions))
                FAIL("location_table[%zu].lines[%zu].function_index %d out of range", i, j,
                     l->lines[j]->function_index);
        if (check_indices(l->attribute_indices, l->n_attribute_indices, s->attrs,
                          "location attribute_indices", e))
            return PC_EINVAL;
    }
    for (size_t i = 0; i < d->n_function_table; i++) {
        const pc_function *f = d->function_table[i];
        if (!idx_ok(f->name_strindex, s->strings) || !idx_ok(f->system_name_strindex, s->strings) ||
            !idx_ok(f->filename_strindex, s->strings))
            FAIL("function_table[%zu]: string index out of range", i);
    }
    for (size_t i = 1; i < d->n_link_table; i++) {
        const pc_link *l = d->link_table[i];
        if (l->trace_id.len != 16 || l->span_id.len != 8)
            FAIL("link_table[%zu]: trace_id must be 16 bytes and span_id 8 bytes", i);
    }
    for (size_t i = 0; i < d->n_attribute_table; i++) {
        const pc_kvu *a = d->attribute_table[i];
        if (!idx_ok(a->key_strindex, s->strings) || !idx_ok(a->unit_strindex, s->strings))
            FAIL("attribute_table[%zu]: string index out of range", i);
        if (check_anyvalue(a->value, s, 0, "attribute_table", e)) return PC_EINVAL;
    }
    for (size_t i = 0; i < d->n_stack_table; i++) {
        const pc_stack *st = d->stack_table[i];
        if (check_indices(st->location_indices, st->n_location_indices, s->locations,
                          "stack location_indices", e))
            return PC_EINVAL;
    }
    return 0;
}

static int check_value_type(const pc_value_type *vt, const sizes *s, const char *what, pc_error *e)
{
    if (vt && (!idx_ok(vt->type_strindex, s->strings) || !idx_ok(vt->unit_strindex, s->strings)))
        FAIL("%s: string index out of range", what);
    return 0;
}

static int check_profile(const pc_profile *p, const sizes *s, pc_error *e)
{
    if (check_value_type(p->sample_type, s, "sample_type", e) ||
        check_value_type(p->period_type, s, "period_type", e) ||
        check_indices(p->attribute_indices, p->n_attribute_indices, s->attrs,
                      "profile attribute_indices", e))
        return PC_EINVAL;
    if (p->profile_id.len != 0 && p->profile_id.len != 16) FAIL("profile_id must be 16 bytes");
    for (size_t i = 0; i < p->n_samples; i++) {
        const pc_sample *sm = p->samples[i];
        if (!idx_ok(sm->stack_index, s->stacks))
            FAIL("samples[%zu].stack_index %d out of range (stack_table size %zu)", i,
                 sm->stack_index, s->stacks);
        if (!idx_ok(sm->link_index, s->links))
            FAIL("samples[%zu].link_index %d out of range", i, sm->link_index);
        if (check_indices(sm->attribute_indices, sm->n_attribute_indices, s->attrs,
                          "sample attribute_indices", e))
            return PC_EINVAL;
        if (sm->n_values && sm->n_timestamps_unix_nano &&
            sm->n_values != sm->n_timestamps_unix_nano)
            FAIL("samples[%zu]: %zu values but %zu timestamps", i, sm->n_values,
                 sm->n_timestamps_unix_nano);
    }
    return 0;
}

int pc_batch_validate(pc_batch *b, int64_t *rejected, pc_error *e)
{
    pc_request *r = pc_batch_req(b);
    const pc_dictionary *d = r->dictionary;
    sizes s = {0};
    *rejected = 0;
    if (d) {
        s = (sizes){d->n_string_table,   d->n_mapping_table, d->n_location_table,
                    d->n_function_table, d->n_link_table,    d->n_attribute_table,
                    d->n_stack_table};
        if (check_dictionary(d, &s, e)) return PC_EINVAL;
    }
    size_t total = 0;
    char first[sizeof e->msg] = "";
    for (size_t i = 0; i < r->n_resource_profiles; i++) {
        pc_resource_profiles *rp = r->resource_profiles[i];
        if (rp->resource && check_keyvalues(rp->resource->attributes, rp->resource->n_attributes,
                                            &s, "resource", e))
            return PC_EINVAL;
        for (size_t j = 0; j < rp->n_scope_profiles; j++) {
            pc_scope_profiles *sp = rp->scope_profiles[j];
            if (sp->scope &&
                check_keyvalues(sp->scope->attributes, sp->scope->n_attributes, &s, "scope", e))
                return PC_EINVAL;
            size_t keep = 0;
            for (size_t k = 0; k < sp->n_profiles; k++) {
                total++;
                pc_error perr = {0};
                if (check_profile(sp->profiles[k], &s, &perr) == 0) {
                    sp->profiles[keep++] = sp->profiles[k];
                } else {
                    if (!*rejected)
                        snprintf(first, sizeof first, "profile %zu: %.480s", total - 1, perr.msg);
                    (*rejected)++;
                }
            }
            sp->n_profiles = keep;
        }
    }
    if (*rejected) {
        pc_error_set(e, PC_EINVAL, "%s", first);
        if ((size_t)*rejected == total) return PC_EINVAL;
    }
    return 0;
}
