/* Tests for the debug exporter's text summaries (src/pdata/summary.c). */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "pdata/pdata.h"
#include "pdata/summary.h"
#include "base/alloc.h"

/* ---- hand-built batches ---- */

static pc_batch *batch_new(void)
{
    pc_batch *b = pc_xcalloc(1, sizeof *b);
    b->arena = pc_arena_new(4096);
    atomic_init(&b->refs, 1);
    b->req = pc_arena_calloc(b->arena, 1, sizeof *b->req);
    opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__init(
        b->req);
    return b;
}

static void batch_free(pc_batch *b)
{
    pc_arena_free(b->arena);
    free(b);
}

static void *anew(pc_batch *b, size_t size)
{
    return pc_arena_calloc(b->arena, 1, size);
}

static void *ptrs(pc_batch *b, size_t n)
{
    return pc_arena_calloc(b->arena, n ? n : 1, sizeof(void *));
}

static void *dup_arr(pc_batch *b, const void *p, size_t n, size_t size)
{
    return n ? pc_arena_memdup(b->arena, p, n * size) : NULL;
}

static char *str(pc_batch *b, const char *s)
{
    return pc_arena_strndup(b->arena, s, strlen(s));
}

static pc_function *mk_fn(pc_batch *b, int32_t name, int32_t sys)
{
    pc_function *f = anew(b, sizeof *f);
    opentelemetry__proto__profiles__v1development__function__init(f);
    f->name_strindex = name;
    f->system_name_strindex = sys;
    return f;
}

/* funcs: function index per line, innermost first. */
static pc_location *mk_loc(pc_batch *b, uint64_t addr, size_t nlines, const int32_t *funcs)
{
    pc_location *l = anew(b, sizeof *l);
    opentelemetry__proto__profiles__v1development__location__init(l);
    l->address = addr;
    l->n_lines = nlines;
    l->lines = ptrs(b, nlines);
    for (size_t i = 0; i < nlines; i++) {
        pc_line *ln = anew(b, sizeof *ln);
        opentelemetry__proto__profiles__v1development__line__init(ln);
        ln->function_index = funcs[i];
        l->lines[i] = ln;
    }
    return l;
}

/* locs: location indices, leaf first. */
static pc_stack *mk_stack(pc_batch *b, size_t n, const int32_t *locs)
{
    pc_stack *s = anew(b, sizeof *s);
    opentelemetry__proto__profiles__v1development__stack__init(s);
    s->n_location_indices = n;
    s->location_indices = dup_arr(b, locs, n, sizeof *locs);
    return s;
}

static pc_sample *mk_sample(pc_batch *b, int32_t stack, size_t nv, const int64_t *vals, size_t nt,
                            const uint64_t *ts, int32_t link)
{
    pc_sample *s = anew(b, sizeof *s);
    opentelemetry__proto__profiles__v1development__sample__init(s);
    s->stack_index = stack;
    s->n_values = nv;
    s->values = dup_arr(b, vals, nv, sizeof *vals);
    s->n_timestamps_unix_nano = nt;
    s->timestamps_unix_nano = dup_arr(b, ts, nt, sizeof *ts);
    s->link_index = link;
    return s;
}

static pc_value_type *mk_vt(pc_batch *b, int32_t type, int32_t unit)
{
    pc_value_type *vt = anew(b, sizeof *vt);
    opentelemetry__proto__profiles__v1development__value_type__init(vt);
    vt->type_strindex = type;
    vt->unit_strindex = unit;
    return vt;
}

static pc_profile *mk_profile(pc_batch *b, pc_value_type *st, size_t n, pc_sample **samples)
{
    pc_profile *p = anew(b, sizeof *p);
    opentelemetry__proto__profiles__v1development__profile__init(p);
    p->sample_type = st;
    p->n_samples = n;
    p->samples = ptrs(b, n);
    for (size_t i = 0; i < n; i++)
        p->samples[i] = samples[i];
    return p;
}

static pc_anyvalue *mk_str_value(pc_batch *b, const char *s, int32_t strindex)
{
    pc_anyvalue *v = anew(b, sizeof *v);
    opentelemetry__proto__common__v1__any_value__init(v);
    if (s) {
        v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
        v->string_value = str(b, s);
    } else {
        v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE_STRINDEX;
        v->string_value_strindex = strindex;
    }
    return v;
}

/* key != NULL: plain form; otherwise key_strindex form. Same for the value. */
static pc_keyvalue *mk_kv(pc_batch *b, const char *key, int32_t key_idx, pc_anyvalue *v)
{
    pc_keyvalue *kv = anew(b, sizeof *kv);
    opentelemetry__proto__common__v1__key_value__init(kv);
    if (key)
        kv->key = str(b, key);
    else
        kv->key_strindex = key_idx;
    kv->value = v;
    return kv;
}

static pc_resource *mk_resource(pc_batch *b, size_t n, pc_keyvalue **attrs)
{
    pc_resource *r = anew(b, sizeof *r);
    opentelemetry__proto__resource__v1__resource__init(r);
    r->n_attributes = n;
    r->attributes = ptrs(b, n);
    for (size_t i = 0; i < n; i++)
        r->attributes[i] = attrs[i];
    return r;
}

/* Append one ResourceProfiles holding one ScopeProfiles holding the given profiles. */
static pc_scope_profiles *add_resource(pc_batch *b, pc_resource *r, size_t n, pc_profile **profiles)
{
    pc_request *req = b->req;
    pc_resource_profiles **old = req->resource_profiles;
    req->resource_profiles = ptrs(b, req->n_resource_profiles + 1);
    for (size_t i = 0; i < req->n_resource_profiles; i++)
        req->resource_profiles[i] = old[i];
    pc_resource_profiles *rp = anew(b, sizeof *rp);
    opentelemetry__proto__profiles__v1development__resource_profiles__init(rp);
    rp->resource = r;
    pc_scope_profiles *sp = anew(b, sizeof *sp);
    opentelemetry__proto__profiles__v1development__scope_profiles__init(sp);
    sp->n_profiles = n;
    sp->profiles = ptrs(b, n);
    for (size_t i = 0; i < n; i++)
        sp->profiles[i] = profiles[i];
    rp->n_scope_profiles = 1;
    rp->scope_profiles = ptrs(b, 1);
    rp->scope_profiles[0] = sp;
    req->resource_profiles[req->n_resource_profiles++] = rp;
    return sp;
}

static pc_dictionary *mk_dict(pc_batch *b, size_t nstr, const char *const *strs)
{
    pc_dictionary *d = anew(b, sizeof *d);
    opentelemetry__proto__profiles__v1development__profiles_dictionary__init(d);
    d->n_string_table = nstr;
    d->string_table = ptrs(b, nstr);
    for (size_t i = 0; i < nstr; i++)
        d->string_table[i] = str(b, strs[i]);
    b->req->dictionary = d;
    return d;
}

#define NS_PER_MS 1000000LL

enum {
    S_EMPTY,
    S_MAIN,
    S_FOO,
    S_BAR,
    S_BAZ,
    S_CPU,
    S_NS,
    S_SVC,
    S_CART,
    S_SAMPLES,
    S_COUNT,
    S_QUX_SYS,
    S_HOST,
    S_NSTR
};
static const char *const strings[S_NSTR] = {
    "",     "main",    "foo",   "bar",     "baz",      "cpu", "nanoseconds", "service.name",
    "cart", "samples", "count", "_Z3quxv", "host.name"};

/* The fixture:
 *  resource 0 (plain service.name=checkout, host.name=web-1), scope ebpf-profiler/0.1,
 *    profile 0: cpu/nanoseconds, samples
 *      main->foo->bar (bar inlined into foo)  30ms, linked
 *      main->foo                              20ms
 *      main->baz                              50ms
 *      main->foo->foo (recursion)             10ms
 *      main->baz->0xdeadbeef (no lines)        5ms
 *      main->foo, per-timestamp values 3+2     5ms
 *  resource 1 (key_strindex/string_value_strindex service.name=cart),
 *    profile 0: samples/count, timestamps only
 *      main->_Z3quxv (system name only) 2 timestamps, main->baz 2 timestamps */
static pc_batch *fixture(void)
{
    pc_batch *b = batch_new();
    pc_dictionary *d = mk_dict(b, S_NSTR, strings);

    d->n_function_table = 6;
    d->function_table = ptrs(b, 6);
    d->function_table[0] = mk_fn(b, 0, 0);
    d->function_table[1] = mk_fn(b, S_MAIN, 0);
    d->function_table[2] = mk_fn(b, S_FOO, 0);
    d->function_table[3] = mk_fn(b, S_BAR, 0);
    d->function_table[4] = mk_fn(b, S_BAZ, 0);
    d->function_table[5] = mk_fn(b, 0, S_QUX_SYS);

    d->n_location_table = 7;
    d->location_table = ptrs(b, 7);
    d->location_table[0] = mk_loc(b, 0, 0, NULL);
    d->location_table[1] = mk_loc(b, 0x1000, 1, (int32_t[]){1});    /* main */
    d->location_table[2] = mk_loc(b, 0x2000, 1, (int32_t[]){2});    /* foo */
    d->location_table[3] = mk_loc(b, 0x3000, 2, (int32_t[]){3, 2}); /* bar inlined into foo */
    d->location_table[4] = mk_loc(b, 0x4000, 1, (int32_t[]){4});    /* baz */
    d->location_table[5] = mk_loc(b, 0xdeadbeef, 0, NULL);          /* unsymbolized */
    d->location_table[6] = mk_loc(b, 0x6000, 1, (int32_t[]){5});    /* _Z3quxv */

    d->n_stack_table = 7;
    d->stack_table = ptrs(b, 7);
    d->stack_table[0] = mk_stack(b, 0, NULL);
    d->stack_table[1] = mk_stack(b, 2, (int32_t[]){3, 1});
    d->stack_table[2] = mk_stack(b, 2, (int32_t[]){2, 1});
    d->stack_table[3] = mk_stack(b, 2, (int32_t[]){4, 1});
    d->stack_table[4] = mk_stack(b, 3, (int32_t[]){2, 2, 1});
    d->stack_table[5] = mk_stack(b, 3, (int32_t[]){5, 4, 1});
    d->stack_table[6] = mk_stack(b, 2, (int32_t[]){6, 1});

    uint64_t t0 = 1704164645500000000ull; /* 2024-01-02T03:04:05.5Z */
    pc_sample *cpu[] = {
        mk_sample(b, 1, 1, (int64_t[]){30 * NS_PER_MS}, 0, NULL, 1),
        mk_sample(b, 2, 1, (int64_t[]){20 * NS_PER_MS}, 0, NULL, 0),
        mk_sample(b, 3, 1, (int64_t[]){50 * NS_PER_MS}, 0, NULL, 0),
        mk_sample(b, 4, 1, (int64_t[]){10 * NS_PER_MS}, 0, NULL, 0),
        mk_sample(b, 5, 1, (int64_t[]){5 * NS_PER_MS}, 0, NULL, 0),
        mk_sample(b, 2, 2, (int64_t[]){3 * NS_PER_MS, 2 * NS_PER_MS}, 2,
                  (uint64_t[]){t0 + 1, t0 + 2}, 0),
    };
    pc_profile *p0 = mk_profile(b, mk_vt(b, S_CPU, S_NS), 6, cpu);
    p0->period_type = mk_vt(b, S_CPU, S_NS);
    p0->period = 10 * NS_PER_MS;
    p0->time_unix_nano = t0;
    p0->duration_nano = 10000000000ull;
    pc_resource *r0 =
        mk_resource(b, 2,
                    (pc_keyvalue *[]){mk_kv(b, "service.name", 0, mk_str_value(b, "checkout", 0)),
                                      mk_kv(b, "host.name", 0, mk_str_value(b, "web-1", 0))});
    pc_scope_profiles *sp = add_resource(b, r0, 1, &p0);
    sp->scope = anew(b, sizeof *sp->scope);
    opentelemetry__proto__common__v1__instrumentation_scope__init(sp->scope);
    sp->scope->name = str(b, "ebpf-profiler");
    sp->scope->version = str(b, "0.1");

    pc_sample *ts[] = {
        mk_sample(b, 6, 0, NULL, 2, (uint64_t[]){t0, t0 + 1}, 0),
        mk_sample(b, 3, 0, NULL, 2, (uint64_t[]){t0 + 2, t0 + 3}, 0),
    };
    pc_profile *p1 = mk_profile(b, mk_vt(b, S_SAMPLES, S_COUNT), 2, ts);
    pc_resource *r1 =
        mk_resource(b, 1, (pc_keyvalue *[]){mk_kv(b, NULL, S_SVC, mk_str_value(b, NULL, S_CART))});
    add_resource(b, r1, 1, &p1);
    return b;
}

static char *format(const pc_batch *b, pc_verbosity v, int top)
{
    pc_buf out = {0};
    pc_summary_format(b, v, top, "debug", &out);
    pc_buf_append(&out, "", 0); /* NUL-terminate even when empty */
    return (char *)out.data;
}

/* Every needle occurs in hay, in this order. */
static void check_order(const char *hay, const char *const *needles, size_t n)
{
    const char *at = hay;
    for (size_t i = 0; i < n; i++) {
        const char *p = strstr(at, needles[i]);
        CHECK_CONTAINS(at, needles[i]);
        if (!p) return;
        at = p + strlen(needles[i]);
    }
}

/* ---- tests ---- */

static void test_lookups(void)
{
    pc_batch *b = fixture();
    const pc_dictionary *d = b->req->dictionary;
    CHECK_STR(pc_dict_str(d, S_MAIN), "main");
    CHECK_STR(pc_dict_str(d, 0), "");
    CHECK_STR(pc_dict_str(d, -1), "");
    CHECK_STR(pc_dict_str(d, S_NSTR), "");
    CHECK_STR(pc_dict_str(NULL, 1), "");
    const pc_resource *r0 = b->req->resource_profiles[0]->resource;
    const pc_resource *r1 = b->req->resource_profiles[1]->resource;
    CHECK_STR(pc_resource_attr_str(d, r0, "service.name"), "checkout");
    CHECK_STR(pc_resource_attr_str(d, r0, "host.name"), "web-1");
    CHECK_STR(pc_resource_attr_str(d, r1, "service.name"), "cart");
    CHECK(pc_resource_attr_str(d, r1, "host.name") == NULL);
    CHECK(pc_resource_attr_str(d, NULL, "service.name") == NULL);
    CHECK(pc_resource_attr_str(NULL, r1, "service.name") == NULL); /* needs the dictionary */
    batch_free(b);
}

static void test_basic(void)
{
    pc_batch *b = fixture();
    char *s = format(b, PC_VERBOSITY_BASIC, 0);
    CHECK_STR(s, "debug: resources=2 profiles=2 samples=8\n");
    free(s);
    batch_free(b);
}

static void test_normal(void)
{
    pc_batch *b = fixture();
    char *s = format(b, PC_VERBOSITY_NORMAL, 0);
    const char *want[] = {
        "debug: resources=2 profiles=2 samples=8\n",
        ("debug:   profile 0/0/0 service=checkout type=cpu/nanoseconds "
         "period_type=cpu/nanoseconds period=10000000 (10ms) samples=6 total=120000000 (120ms) "
         "duration=10s start=2024-01-02T03:04:05.5Z linked=1\n"),
        ("debug:   profile 1/0/0 service=cart type=samples/count period_type=-/- period=0 "
         "samples=2 total=4 duration=0 start=- linked=0\n"),
    };
    check_order(s, want, 3);
    CHECK(strstr(s, "flat%") == NULL);
    CHECK(strstr(s, "resource 0:") == NULL);
    free(s);
    batch_free(b);
}

static void test_detailed(void)
{
    pc_batch *b = fixture();
    char *s = format(b, PC_VERBOSITY_DETAILED, 0);
    const char *want[] = {
        "debug: resources=2 profiles=2 samples=8\n",
        "debug:   resource 0: service.name=checkout host.name=web-1\n",
        "debug:   scope 0/0: name=ebpf-profiler version=0.1\n",
        "debug:   profile 0/0/0 service=checkout type=cpu/nanoseconds",
        "debug:     top 5 of 5 functions by flat, total 120ms\n",
        "debug:           flat  flat%   sum%        cum   cum%  function\n",
        "debug:           50ms 41.67% 41.67%       55ms 45.83%  baz\n",
        "debug:           35ms 29.17% 70.83%       65ms 54.17%  foo\n",
        "debug:           30ms 25.00% 95.83%       30ms 25.00%  bar\n",
        "debug:            5ms  4.17%   100%        5ms  4.17%  0xdeadbeef\n",
        "debug:              0     0%   100%      120ms   100%  main\n",
        "debug:   resource 1: service.name=cart\n",
        "debug:   scope 1/0: name=- version=-\n",
        "debug:   profile 1/0/0 service=cart type=samples/count",
        "debug:     top 3 of 3 functions by flat, total 4\n",
        "debug:           flat  flat%   sum%        cum   cum%  function\n",
        /* tie on flat: ordered by name */
        "debug:              2 50.00% 50.00%          2 50.00%  _Z3quxv\n",
        "debug:              2 50.00%   100%          2 50.00%  baz\n",
        "debug:              0     0%   100%          4   100%  main\n",
    };
    check_order(s, want, sizeof want / sizeof want[0]);
    free(s);
    batch_free(b);
}

static void test_top_truncation(void)
{
    pc_batch *b = fixture();
    char *s = format(b, PC_VERBOSITY_DETAILED, 2);
    CHECK_CONTAINS(s, "top 2 of 5 functions by flat, total 120ms\n");
    CHECK_CONTAINS(s, "  baz\n");
    CHECK_CONTAINS(s, "  foo\n");
    CHECK(strstr(s, "  bar\n") == NULL);
    CHECK(strstr(s, "0xdeadbeef") == NULL);
    CHECK_CONTAINS(s, "top 2 of 3 functions by flat, total 4\n");
    CHECK_CONTAINS(s, "  _Z3quxv\n");
    CHECK(strstr(s, "  main\n") == NULL);
    free(s);
    s = format(b, PC_VERBOSITY_DETAILED, 1);
    CHECK_CONTAINS(s, "top 1 of 5 functions");
    CHECK(strstr(s, "  foo\n") == NULL);
    free(s);
    batch_free(b);
}

static void test_units(void)
{
    pc_batch *b = batch_new();
    const char *strs[] = {"", "alloc_space", "bytes", "f", "cpu", "nanoseconds", "g"};
    pc_dictionary *d = mk_dict(b, 7, strs);
    d->n_function_table = 3;
    d->function_table = ptrs(b, 3);
    d->function_table[0] = mk_fn(b, 0, 0);
    d->function_table[1] = mk_fn(b, 3, 0);
    d->function_table[2] = mk_fn(b, 6, 0);
    d->n_location_table = 3;
    d->location_table = ptrs(b, 3);
    d->location_table[0] = mk_loc(b, 0, 0, NULL);
    d->location_table[1] = mk_loc(b, 1, 1, (int32_t[]){1});
    d->location_table[2] = mk_loc(b, 2, 1, (int32_t[]){2});
    d->n_stack_table = 3;
    d->stack_table = ptrs(b, 3);
    d->stack_table[0] = mk_stack(b, 0, NULL);
    d->stack_table[1] = mk_stack(b, 1, (int32_t[]){1});
    d->stack_table[2] = mk_stack(b, 1, (int32_t[]){2});
    pc_sample *s0 = mk_sample(b, 1, 1, (int64_t[]){3355443}, 0, NULL, 0);
    pc_profile *mem = mk_profile(b, mk_vt(b, 1, 2), 1, &s0);
    mem->duration_nano = 1500000;                /* 1.5ms */
    mem->time_unix_nano = 951782400000000000ull; /* 2000-02-29T00:00:00Z */
    pc_sample *s1[] = {mk_sample(b, 2, 1, (int64_t[]){12500000}, 0, NULL, 0),
                       mk_sample(b, 1, 1, (int64_t[]){1250000000}, 0, NULL, 0),
                       mk_sample(b, 0, 1, (int64_t[]){750}, 0, NULL, 0)}; /* no stack */
    pc_profile *cpu = mk_profile(b, mk_vt(b, 4, 5), 3, s1);
    cpu->duration_nano = 65000000000ull;
    cpu->time_unix_nano = 1ull;
    add_resource(b, NULL, 2, (pc_profile *[]){mem, cpu});

    char *s = format(b, PC_VERBOSITY_DETAILED, 0);
    CHECK_CONTAINS(s, "debug:   resource 0: (no attributes)\n");
    CHECK_CONTAINS(s, "service=unknown_service type=alloc_space/bytes");
    CHECK_CONTAINS(s, "total=3355443 (3.2MB) duration=1.5ms start=2000-02-29T00:00:00Z");
    CHECK_CONTAINS(s, "         3.2MB   100%   100%      3.2MB   100%  f\n");
    CHECK_CONTAINS(s, "total=1262500750 (1.26s) duration=65s start=1970-01-01T00:00:00.000000001Z");
    CHECK_CONTAINS(s, "top 2 of 2 functions by flat, total 1.26s\n");
    CHECK_CONTAINS(s, "      1.25s 99.01% 99.01%      1.25s 99.01%  f\n");
    /* rounds to 100.00% without being exactly 100% (750ns are in a sample without a stack) */
    CHECK_CONTAINS(s, "     12.5ms  0.99% 100.00%     12.5ms  0.99%  g\n");
    free(s);
    batch_free(b);
}

/* Out-of-range indices everywhere, NULL elements, a missing dictionary: no crash, sane text. */
static void test_hostile(void)
{
    pc_batch *b = batch_new();
    const char *strs[] = {"", "evil\nname\x7f", "service.name"};
    pc_dictionary *d = mk_dict(b, 3, strs);
    d->n_function_table = 4;
    d->function_table = ptrs(b, 4);
    d->function_table[0] = mk_fn(b, 0, 0);
    d->function_table[1] = mk_fn(b, 999, -3); /* bad name and system name */
    d->function_table[2] = mk_fn(b, 1, 0);    /* control characters */
    d->function_table[3] = NULL;              /* NULL element */
    d->n_location_table = 3;
    d->location_table = ptrs(b, 3);
    d->location_table[0] = mk_loc(b, 0, 0, NULL);
    d->location_table[1] = mk_loc(b, 0x10, 5, (int32_t[]){1, 2, 3, 999, -7});
    d->location_table[2] = NULL;
    d->location_table[1]->lines[4] = NULL;
    d->n_stack_table = 4;
    d->stack_table = ptrs(b, 4);
    d->stack_table[0] = mk_stack(b, 0, NULL);
    d->stack_table[1] = mk_stack(b, 5, (int32_t[]){1, 2, 999, -5, 0});
    d->stack_table[2] = NULL;
    d->stack_table[3] = mk_stack(b, 1, (int32_t[]){1});
    d->stack_table[3]->location_indices = NULL; /* count without array */

    pc_sample *ss[] = {
        mk_sample(b, 1, 2, (int64_t[]){INT64_MAX, INT64_MAX}, 0, NULL, 5),
        mk_sample(b, 1, 1, (int64_t[]){INT64_MAX}, 0, NULL, -1),
        mk_sample(b, 999, 1, (int64_t[]){1}, 0, NULL, 0),
        mk_sample(b, -4, 1, (int64_t[]){1}, 0, NULL, 0),
        mk_sample(b, 2, 1, (int64_t[]){1}, 0, NULL, 0),
        mk_sample(b, 3, 1, (int64_t[]){1}, 0, NULL, 0),
        mk_sample(b, 1, 0, NULL, 0, NULL, 0), /* neither values nor timestamps */
        NULL,
    };
    ss[6]->n_values = 3; /* count without array */
    pc_profile *p = mk_profile(b, mk_vt(b, 999, -2), 8, ss);
    p->period_type = mk_vt(b, 1, 2);
    p->time_unix_nano = UINT64_MAX;
    p->duration_nano = UINT64_MAX;
    pc_resource *r =
        mk_resource(b, 3,
                    (pc_keyvalue *[]){NULL, mk_kv(b, NULL, 999, mk_str_value(b, NULL, 2)),
                                      mk_kv(b, NULL, 2, mk_str_value(b, NULL, 12345))});
    add_resource(b, r, 2, (pc_profile *[]){p, NULL});

    char *s = format(b, PC_VERBOSITY_DETAILED, 100);
    CHECK_CONTAINS(s, "debug: resources=1 profiles=1 samples=7\n");
    CHECK_CONTAINS(s, "service=unknown_service"); /* the service.name value index is bad */
    CHECK_CONTAINS(s, "type=-/-");
    CHECK_CONTAINS(s, "period_type=evil\\x0aname\\x7f/service.name");
    CHECK_CONTAINS(s, "linked=2");
    CHECK_CONTAINS(s, "total=9223372036854775807");
    CHECK_CONTAINS(s, "  evil\\x0aname\\x7f\n");
    CHECK_CONTAINS(s, "  <unknown>\n");
    CHECK_CONTAINS(s, "start=2554-07-21T23:34:33.709551615Z");
    /* every line is well-formed: prefixed, no raw control characters */
    for (const char *line = s; *line;) {
        const char *nl = strchr(line, '\n');
        CHECK(nl != NULL);
        if (!nl) break;
        CHECK(strncmp(line, "debug: ", 7) == 0);
        for (const char *c = line; c < nl; c++)
            CHECK((unsigned char)*c >= 0x20 && *c != 0x7f);
        line = nl + 1;
    }
    free(s);

    /* no dictionary at all */
    b->req->dictionary = NULL;
    s = format(b, PC_VERBOSITY_DETAILED, 0);
    CHECK_CONTAINS(s, "debug: resources=1 profiles=1 samples=7\n");
    CHECK_CONTAINS(s, "top 0 of 0 functions");
    free(s);
    batch_free(b);

    /* NULL batch, empty request, NULL who */
    s = format(NULL, PC_VERBOSITY_DETAILED, 0);
    CHECK_STR(s, "debug: resources=0 profiles=0 samples=0\n");
    free(s);
    b = batch_new();
    pc_buf out = {0};
    pc_summary_format(b, PC_VERBOSITY_DETAILED, 0, NULL, &out);
    CHECK_STR((const char *)out.data, ": resources=0 profiles=0 samples=0\n");
    pc_buf_free(&out);
    pc_summary_format(b, PC_VERBOSITY_DETAILED, 0, "x", NULL);
    batch_free(b);
}

/* 100k samples over 20k distinct functions: must not be quadratic. */
static void test_large(void)
{
    enum { NF = 20000, NS = 100000 };
    pc_batch *b = batch_new();
    pc_dictionary *d = anew(b, sizeof *d);
    opentelemetry__proto__profiles__v1development__profiles_dictionary__init(d);
    b->req->dictionary = d;
    d->n_string_table = NF + 2;
    d->string_table = ptrs(b, NF + 2);
    d->string_table[0] = str(b, "");
    d->string_table[1] = str(b, "main");
    d->n_function_table = d->n_location_table = d->n_stack_table = NF + 2;
    d->function_table = ptrs(b, NF + 2);
    d->location_table = ptrs(b, NF + 2);
    d->stack_table = ptrs(b, NF + 2);
    d->function_table[0] = mk_fn(b, 0, 0);
    d->location_table[0] = mk_loc(b, 0, 0, NULL);
    d->stack_table[0] = mk_stack(b, 0, NULL);
    d->function_table[1] = mk_fn(b, 1, 0);
    d->location_table[1] = mk_loc(b, 1, 1, (int32_t[]){1});
    d->stack_table[1] = mk_stack(b, 1, (int32_t[]){1});
    for (int32_t i = 2; i < NF + 2; i++) {
        char name[32];
        snprintf(name, sizeof name, "fn_%05d", (int)i);
        d->string_table[i] = str(b, name);
        d->function_table[i] = mk_fn(b, i, 0);
        d->location_table[i] = mk_loc(b, (uint64_t)i, 1, (int32_t[]){i});
        d->stack_table[i] = mk_stack(b, 2, (int32_t[]){i, 1});
    }
    pc_sample **ss = pc_xmalloc(NS * sizeof *ss);
    for (int i = 0; i < NS; i++) {
        int64_t v = i % NF == 7 ? 1000 : 1; /* fn_00009 is the hottest */
        ss[i] = mk_sample(b, 2 + i % NF, 1, &v, 0, NULL, 0);
    }
    pc_profile *p = mk_profile(b, NULL, NS, ss);
    free(ss);
    add_resource(b, NULL, 1, &p);
    char *s = format(b, PC_VERBOSITY_DETAILED, 3);
    /* 5 samples per function: 19999 * 5 * 1 + 5 * 1000 = 104995 */
    CHECK_CONTAINS(s, "top 3 of 20001 functions by flat, total 104995\n");
    const char *want[] = {
        "      5000  4.76%  4.76%       5000  4.76%  fn_00009\n",
        "         5  0.00%  4.77%          5  0.00%  fn_00002\n", /* ties by name */
        "         5  0.00%  4.77%          5  0.00%  fn_00003\n",
    };
    check_order(s, want, 3);
    CHECK(strstr(s, "fn_00004") == NULL);
    CHECK(strstr(s, "  main\n") == NULL); /* flat 0 */
    free(s);
    batch_free(b);
}

int main(void)
{
    RUN(test_lookups);
    RUN(test_basic);
    RUN(test_normal);
    RUN(test_detailed);
    RUN(test_top_truncation);
    RUN(test_units);
    RUN(test_hostile);
    RUN(test_large);
    return check_report();
}
