/* Batch lifetime, reference counting, copy-on-write and protobuf encode/decode. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pdata/pdata.h"
#include "pdata/proto_pack.h"
#include "base/alloc.h"
#include "base/log.h"

static pc_batch *batch_alloc(pc_arena *a)
{
    pc_batch *b = pc_xcalloc(1, sizeof(*b));
    b->arena = a;
    atomic_init(&b->refs, 1);
    return b;
}

pc_batch *pc_batch_wrap(pc_arena *a, pc_signal sig)
{
    pc_batch *b = batch_alloc(a);
    b->signal = sig;
    return b;
}

/* Each dictionary table starts with its zero element (index 0 means "unset"). */
static pc_dictionary *empty_dictionary(pc_arena *a)
{
    pc_dictionary *d = pc_arena_calloc(a, 1, sizeof(*d));
    opentelemetry__proto__profiles__v1development__profiles_dictionary__init(d);
#define ZERO_TABLE(field, type, init)                                                              \
    do {                                                                                           \
        d->n_##field = 1;                                                                          \
        d->field = pc_arena_alloc(a, sizeof(*d->field));                                           \
        d->field[0] = pc_arena_calloc(a, 1, sizeof(type));                                         \
        init(d->field[0]);                                                                         \
    } while (0)
    ZERO_TABLE(mapping_table, pc_mapping,
               opentelemetry__proto__profiles__v1development__mapping__init);
    ZERO_TABLE(location_table, pc_location,
               opentelemetry__proto__profiles__v1development__location__init);
    ZERO_TABLE(function_table, pc_function,
               opentelemetry__proto__profiles__v1development__function__init);
    ZERO_TABLE(link_table, pc_link, opentelemetry__proto__profiles__v1development__link__init);
    ZERO_TABLE(attribute_table, pc_kvu,
               opentelemetry__proto__profiles__v1development__key_value_and_unit__init);
    ZERO_TABLE(stack_table, pc_stack, opentelemetry__proto__profiles__v1development__stack__init);
#undef ZERO_TABLE
    /* strict codecs prefer a zero link of full-length zero ids over empty bytes */
    d->link_table[0]->trace_id.len = 16;
    d->link_table[0]->trace_id.data = pc_arena_calloc(a, 1, 16);
    d->link_table[0]->span_id.len = 8;
    d->link_table[0]->span_id.data = pc_arena_calloc(a, 1, 8);
    d->n_string_table = 1;
    d->string_table = pc_arena_alloc(a, sizeof(char *));
    d->string_table[0] = pc_arena_strndup(a, "", 0);
    return d;
}

pc_batch *pc_batch_new(void)
{
    pc_arena *a = pc_arena_new(4096);
    pc_batch *b = batch_alloc(a);
    b->req = pc_arena_calloc(a, 1, sizeof(pc_request));
    opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__init(
        pc_batch_req(b));
    pc_batch_req(b)->dictionary = empty_dictionary(a);
    return b;
}

pc_batch *pc_batch_ref(pc_batch *b)
{
    atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
    return b;
}

/* A bytes-only batch's part (pc_batch_new_wire, signal.c): its decoded model and lock. */
static void wire_free(pc_batch *b)
{
    struct pc_batch_wire *w = b->wire;
    if (!w) return;
    pc_batch_unref(w->model);
    pthread_mutex_destroy(&w->lock);
    free(w->owned);
    free(w);
    b->wire = NULL;
}

void pc_batch_unref(pc_batch *b)
{
    if (!b) return;
    if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) != 1) return;
    wire_free(b);
    pc_arena_free(b->arena);
    free(b);
}

void pc_batch_set_meta(pc_batch *b, const char *key, const char *val)
{
    for (size_t i = 0; i < b->meta.n; i++) {
        if (strcmp(b->meta.keys[i], key) == 0) {
            b->meta.vals[i] = pc_arena_strndup(b->arena, val, strlen(val));
            return;
        }
    }
    if (b->meta.n == PC_META_MAX) return;
    b->meta.keys[b->meta.n] = pc_arena_strndup(b->arena, key, strlen(key));
    b->meta.vals[b->meta.n] = pc_arena_strndup(b->arena, val, strlen(val));
    b->meta.n++;
}

const char *pc_batch_get_meta(const pc_batch *b, const char *key)
{
    for (size_t i = 0; i < b->meta.n; i++)
        if (strcmp(b->meta.keys[i], key) == 0) return b->meta.vals[i];
    return NULL;
}

void pc_batch_set_tenant(pc_batch *b, const char *tenant)
{
    if (tenant && *tenant) pc_batch_set_meta(b, PC_META_TENANT, tenant);
}

const char *pc_batch_tenant(const pc_batch *b)
{
    return pc_batch_get_meta(b, PC_META_TENANT);
}

void pc_batch_copy_meta(const pc_batch *from, pc_batch *to)
{
    for (size_t i = 0; i < from->meta.n; i++)
        pc_batch_set_meta(to, from->meta.keys[i], from->meta.vals[i]);
}

void pc_batch_encode_proto(const pc_batch *b, pc_buf *out)
{
    /* protobuf-c's bytes, sized once (pdata/proto_pack.h) */
    out->len = 0;
    pc_proto_pack(pc_batch_message(b), out);
}

pc_counts pc_batch_counts(const pc_batch *b)
{
    pc_counts c = {0};
    const pc_request *r = pc_batch_req(b);
    if (!r) return c;
    c.resources = r->n_resource_profiles;
    for (size_t i = 0; i < r->n_resource_profiles; i++) {
        const pc_resource_profiles *rp = r->resource_profiles[i];
        c.scopes += rp->n_scope_profiles;
        for (size_t j = 0; j < rp->n_scope_profiles; j++) {
            const pc_scope_profiles *sp = rp->scope_profiles[j];
            c.profiles += sp->n_profiles;
            for (size_t k = 0; k < sp->n_profiles; k++)
                c.samples += sp->profiles[k]->n_samples;
        }
    }
    return c;
}

static void *grow_ptr_array(pc_arena *a, void *old, size_t n, size_t extra)
{
    void **arr = pc_arena_alloc(a, (n + extra) * sizeof(void *));
    if (n) memcpy(arr, old, n * sizeof(void *));
    return arr;
}

pc_scope_profiles *pc_batch_add_resource(pc_batch *b, const char *const *keys,
                                         const char *const *vals, size_t n, const char *scope_name,
                                         const char *scope_version)
{
    pc_arena *a = b->arena;
    pc_resource_profiles *rp = pc_arena_calloc(a, 1, sizeof(*rp));
    opentelemetry__proto__profiles__v1development__resource_profiles__init(rp);
    rp->resource = pc_arena_calloc(a, 1, sizeof(pc_resource));
    opentelemetry__proto__resource__v1__resource__init(rp->resource);
    rp->resource->attributes = pc_arena_alloc(a, (n ? n : 1) * sizeof(pc_keyvalue *));
    for (size_t i = 0; i < n; i++) {
        pc_keyvalue *kv = pc_arena_calloc(a, 1, sizeof(*kv));
        opentelemetry__proto__common__v1__key_value__init(kv);
        kv->key = pc_arena_strndup(a, keys[i], strlen(keys[i]));
        kv->value = pc_arena_calloc(a, 1, sizeof(pc_anyvalue));
        opentelemetry__proto__common__v1__any_value__init(kv->value);
        kv->value->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
        kv->value->string_value = pc_arena_strndup(a, vals[i], strlen(vals[i]));
        rp->resource->attributes[rp->resource->n_attributes++] = kv;
    }
    pc_scope_profiles *sp = pc_arena_calloc(a, 1, sizeof(*sp));
    opentelemetry__proto__profiles__v1development__scope_profiles__init(sp);
    sp->scope = pc_arena_calloc(a, 1, sizeof(pc_scope));
    opentelemetry__proto__common__v1__instrumentation_scope__init(sp->scope);
    if (scope_name) sp->scope->name = pc_arena_strndup(a, scope_name, strlen(scope_name));
    if (scope_version)
        sp->scope->version = pc_arena_strndup(a, scope_version, strlen(scope_version));
    rp->scope_profiles = pc_arena_alloc(a, sizeof(pc_scope_profiles *));
    rp->scope_profiles[0] = sp;
    rp->n_scope_profiles = 1;
    pc_request *r = pc_batch_req(b);
    r->resource_profiles = grow_ptr_array(a, r->resource_profiles, r->n_resource_profiles, 1);
    r->resource_profiles[r->n_resource_profiles++] = rp;
    return sp;
}

pc_profile *pc_scope_add_profile(pc_batch *b, pc_scope_profiles *sp)
{
    pc_profile *p = pc_arena_calloc(b->arena, 1, sizeof(*p));
    opentelemetry__proto__profiles__v1development__profile__init(p);
    sp->profiles = grow_ptr_array(b->arena, sp->profiles, sp->n_profiles, 1);
    sp->profiles[sp->n_profiles++] = p;
    return p;
}

bool pc_profile_next(const pc_request *req, pc_profile_iter *it)
{
    if (it->started) {
        it->p++;
    } else {
        it->started = true;
        it->r = it->s = it->p = 0;
    }
    for (; it->r < req->n_resource_profiles; it->r++, it->s = 0, it->p = 0) {
        const pc_resource_profiles *rp = req->resource_profiles[it->r];
        size_t ns = rp && rp->scope_profiles ? rp->n_scope_profiles : 0;
        for (; it->s < ns; it->s++, it->p = 0) {
            const pc_scope_profiles *sp = rp->scope_profiles[it->s];
            if (sp && sp->profiles && it->p < sp->n_profiles) {
                it->prof = sp->profiles[it->p];
                return true;
            }
        }
    }
    it->prof = NULL;
    return false;
}

size_t pc_profile_n_samples(const pc_profile *p)
{
    return p && p->samples ? p->n_samples : 0;
}

const uint8_t *pc_batch_wire_bytes(const pc_batch *b, size_t *len)
{
    if (!b->wire) return NULL;
    *len = b->wire->len;
    return b->wire->data;
}

bool pc_batch_wire_counts(const pc_batch *b, size_t *samples, size_t *profiles)
{
    if (!b->wire) return false;
    *samples = b->wire->samples;
    *profiles = b->wire->profiles;
    return true;
}
