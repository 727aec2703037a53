/* Reading through a finished dictionary: an import's remap applied to a request's items, and
 * strings looked up by index (see dict.h). Apart from the builder (dict.c): neither needs its
 * hash tables. */
#include <stdlib.h>
#include <string.h>

#include "pdata/dict.h"

void pc_dict_remap_free(pc_dict_remap *m)
{
    if (!m) return;
    free(m->strings);
    free(m->mappings);
    free(m->locations);
    free(m->functions);
    free(m->links);
    free(m->attributes);
    free(m->stacks);
    memset(m, 0, sizeof *m);
}

static void remap_vt(const pc_dict_remap *m, pc_value_type *vt)
{
    if (!vt) return;
    vt->type_strindex = pc_remap_index(m->strings, m->n_strings, vt->type_strindex);
    vt->unit_strindex = pc_remap_index(m->strings, m->n_strings, vt->unit_strindex);
}

static void remap_i32s(int32_t *v, size_t n, const int32_t *map, size_t mn)
{
    if (!v) return;
    for (size_t i = 0; i < n; i++)
        v[i] = pc_remap_index(map, mn, v[i]);
}

void pc_dict_remap_profile(const pc_dict_remap *m, pc_profile *p)
{
    remap_vt(m, p->sample_type);
    remap_vt(m, p->period_type);
    remap_i32s(p->attribute_indices, p->n_attribute_indices, m->attributes, m->n_attributes);
    for (size_t i = 0; i < p->n_samples; i++) {
        pc_sample *s = p->samples[i];
        if (!s) continue;
        s->stack_index = pc_remap_index(m->stacks, m->n_stacks, s->stack_index);
        s->link_index = pc_remap_index(m->links, m->n_links, s->link_index);
        remap_i32s(s->attribute_indices, s->n_attribute_indices, m->attributes, m->n_attributes);
    }
}

static void remap_any(const pc_dict_remap *m, pc_anyvalue *v)
{
    if (!v) return;
    switch (v->value_case) {
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE_STRINDEX:
        v->string_value_strindex =
            pc_remap_index(m->strings, m->n_strings, v->string_value_strindex);
        break;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_ARRAY_VALUE:
        if (v->array_value)
            for (size_t i = 0; i < v->array_value->n_values; i++)
                remap_any(m, v->array_value->values[i]);
        break;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_KVLIST_VALUE:
        if (v->kvlist_value)
            for (size_t i = 0; i < v->kvlist_value->n_values; i++)
                pc_dict_remap_keyvalue(m, v->kvlist_value->values[i]);
        break;
    default: break;
    }
}

void pc_dict_remap_keyvalue(const pc_dict_remap *m, pc_keyvalue *kv)
{
    if (!kv) return;
    kv->key_strindex = pc_remap_index(m->strings, m->n_strings, kv->key_strindex);
    remap_any(m, kv->value);
}

/* ---- dictionary lookups ---- */

const char *pc_dict_str(const pc_dictionary *d, int32_t idx)
{
    if (!d || idx <= 0 || !d->string_table || (size_t)idx >= d->n_string_table) return "";
    const char *s = d->string_table[idx];
    return s ? s : "";
}

const char *pc_keyvalue_key(const pc_dictionary *d, const pc_keyvalue *kv)
{
    if (!kv) return "";
    if (kv->key && kv->key[0]) return kv->key;
    return pc_dict_str(d, kv->key_strindex);
}

const char *pc_anyvalue_str(const pc_dictionary *d, const pc_anyvalue *v)
{
    if (!v) return NULL;
    switch (v->value_case) {
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE:
        return v->string_value ? v->string_value : "";
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE_STRINDEX: {
        int32_t idx = v->string_value_strindex;
        if (idx == 0) return "";
        if (idx < 0 || !d || !d->string_table || (size_t)idx >= d->n_string_table) return NULL;
        return pc_dict_str(d, idx);
    }
    default: return NULL;
    }
}

const char *pc_resource_attr_str(const pc_dictionary *d, const pc_resource *r, const char *key)
{
    if (!r || !key) return NULL;
    size_t n = r->attributes ? r->n_attributes : 0;
    for (size_t i = 0; i < n; i++) {
        const pc_keyvalue *kv = r->attributes[i];
        if (!kv || strcmp(pc_keyvalue_key(d, kv), key) != 0) continue;
        return pc_anyvalue_str(d, kv->value); /* first match decides */
    }
    return NULL;
}
