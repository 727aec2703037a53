/* Dictionary builder (dedup, zero elements, import/remap) and the pprof <-> OTLP translator:
 * round trips of real Go profiles (tests/data/go-*.pb.gz, made by tests/data/gen/main.go),
 * synthetic pprofs covering every mapped field, links, and hostile input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "payload.h"
#include "testdata.h"
#include "base/gzip.h"
#include "pdata/dict.h"
#include "pdata/pdata.h"
#include "formats/pprof.h"
#include "pprof.pb-c.h"

#define AV(x) OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_##x

/* ---- helpers ------------------------------------------------------------------------------ */

static void pack_pprof(const pp_profile *p, pc_buf *out)
{
    out->len = 0;
    size_t n = perftools__profiles__profile__get_packed_size(p);
    pc_buf_reserve(out, n + 1);
    out->len = perftools__profiles__profile__pack(p, out->data);
}

static const Perftools__Profiles__Location *find_loc(const pp_profile *p, uint64_t id)
{
    for (size_t i = 0; i < p->n_location; i++)
        if (p->location[i]->id == id) return p->location[i];
    return NULL;
}

static const Perftools__Profiles__Function *find_fun(const pp_profile *p, uint64_t id)
{
    for (size_t i = 0; i < p->n_function; i++)
        if (p->function[i]->id == id) return p->function[i];
    return NULL;
}

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "fn;fn;...|k=v,k=#n unit|v1,v2" per sample, sorted: a pprof's samples as a comparable list. */
static char **canon_samples(const pp_profile *p)
{
    char **out = calloc(p->n_sample + 1, sizeof(char *));
    for (size_t j = 0; j < p->n_sample; j++) {
        const Perftools__Profiles__Sample *s = p->sample[j];
        pc_buf b = {0};
        for (size_t k = 0; k < s->n_location_id; k++) {
            const Perftools__Profiles__Location *l = find_loc(p, s->location_id[k]);
            if (!l) {
                pc_buf_printf(&b, "?;");
                continue;
            }
            if (l->n_line == 0) pc_buf_printf(&b, "0x%llx;", (unsigned long long)l->address);
            for (size_t m = 0; m < l->n_line; m++) {
                const Perftools__Profiles__Function *f = find_fun(p, l->line[m]->function_id);
                pc_buf_printf(&b, "%s:%lld;", f ? pstr(p, f->name) : "?",
                              (long long)l->line[m]->line);
            }
        }
        pc_buf_printf(&b, "|");
        char **labels = calloc(s->n_label + 1, sizeof(char *));
        size_t nl = 0;
        for (size_t k = 0; k < s->n_label; k++) {
            const Perftools__Profiles__Label *l = s->label[k];
            if (!l->str && !l->num && !l->num_unit) continue;
            char buf[1024];
            if (l->str)
                snprintf(buf, sizeof buf, "%s=%s", pstr(p, l->key), pstr(p, l->str));
            else
                snprintf(buf, sizeof buf, "%s=#%lld %s", pstr(p, l->key), (long long)l->num,
                         pstr(p, l->num_unit));
            labels[nl++] = strdup(buf);
        }
        qsort(labels, nl, sizeof(char *), str_cmp);
        for (size_t k = 0; k < nl; k++) {
            pc_buf_printf(&b, "%s,", labels[k]);
            free(labels[k]);
        }
        free(labels);
        pc_buf_printf(&b, "|");
        for (size_t k = 0; k < s->n_value; k++)
            pc_buf_printf(&b, "%lld,", (long long)s->value[k]);
        pc_buf_append(&b, "", 1);
        out[j] = (char *)b.data;
    }
    qsort(out, p->n_sample, sizeof(char *), str_cmp);
    return out;
}

static void free_canon(char **c)
{
    for (size_t i = 0; c && c[i]; i++)
        free(c[i]);
    free(c);
}

/* Same samples (multiset), sample types, period, time and mappings. */
static void check_same_pprof(const pp_profile *a, const pp_profile *b)
{
    CHECK_EQ_INT(a->n_sample_type, b->n_sample_type);
    for (size_t i = 0; i < a->n_sample_type && i < b->n_sample_type; i++) {
        CHECK_STR(pstr(a, a->sample_type[i]->type), pstr(b, b->sample_type[i]->type));
        CHECK_STR(pstr(a, a->sample_type[i]->unit), pstr(b, b->sample_type[i]->unit));
    }
    CHECK(a->period_type && b->period_type);
    if (a->period_type && b->period_type) {
        CHECK_STR(pstr(a, a->period_type->type), pstr(b, b->period_type->type));
        CHECK_STR(pstr(a, a->period_type->unit), pstr(b, b->period_type->unit));
    }
    CHECK_EQ_INT(a->period, b->period);
    CHECK_EQ_INT(a->time_nanos, b->time_nanos);
    CHECK_EQ_INT(a->duration_nanos, b->duration_nanos);
    CHECK_STR(pstr(a, a->default_sample_type), pstr(b, b->default_sample_type));
    /* Mappings no location uses are not kept (OTLP has no per-profile mapping list); the
     * others come back in their original order. */
    const Perftools__Profiles__Mapping *used[64];
    size_t nu = 0;
    for (size_t i = 0; i < a->n_mapping && nu < 64; i++) {
        int referenced = 0;
        for (size_t k = 0; k < a->n_location; k++)
            referenced |= a->location[k]->mapping_id == a->mapping[i]->id;
        if (referenced) used[nu++] = a->mapping[i];
    }
    CHECK_EQ_INT(nu, b->n_mapping);
    for (size_t i = 0; i < nu && i < b->n_mapping; i++) {
        const Perftools__Profiles__Mapping *x = used[i], *y = b->mapping[i];
        CHECK_EQ_INT(x->memory_start, y->memory_start);
        CHECK_EQ_INT(x->memory_limit, y->memory_limit);
        CHECK_EQ_INT(x->file_offset, y->file_offset);
        CHECK_STR(pstr(a, x->filename), pstr(b, y->filename));
        CHECK_STR(pstr(a, x->build_id), pstr(b, y->build_id));
        CHECK_EQ_INT(x->has_functions, y->has_functions);
        CHECK_EQ_INT(x->has_filenames, y->has_filenames);
        CHECK_EQ_INT(x->has_line_numbers, y->has_line_numbers);
        CHECK_EQ_INT(x->has_inline_frames, y->has_inline_frames);
    }
    CHECK_EQ_INT(a->n_sample, b->n_sample);
    char **ca = canon_samples(a), **cb = canon_samples(b);
    int diffs = 0;
    for (size_t i = 0; i < a->n_sample && i < b->n_sample; i++)
        if (strcmp(ca[i], cb[i]) != 0 && diffs++ < 3)
            fprintf(stderr, "  sample differs:\n    %s\n    %s\n", ca[i], cb[i]);
    CHECK_EQ_INT(diffs, 0);
    free_canon(ca);
    free_canon(cb);
}

/* Collects every produced pprof. */
typedef struct outs {
    size_t n;
    pc_buf data[16];
    size_t n_profiles[16];
} outs;

static int collect(const pc_pprof_out *o, void *ud)
{
    outs *c = ud;
    if (c->n == 16) return 1;
    c->data[c->n] = (pc_buf){0};
    pc_buf_append(&c->data[c->n], o->data, o->len);
    c->n_profiles[c->n] = o->n_profiles;
    c->n++;
    return 0;
}

static void outs_free(outs *c)
{
    for (size_t i = 0; i < c->n; i++)
        pc_buf_free(&c->data[i]);
    c->n = 0;
}

static size_t count_profiles(const pc_batch *b)
{
    return pc_batch_counts(b).profiles;
}

/* Through the wire: pack and unpack the OTLP request, so the round trip proves the batch is
 * encodable and nothing depends on arena pointers. */
static pc_batch *reencode(pc_batch *b)
{
    pc_buf wire = {0};
    pc_batch_encode_proto(b, &wire);
    pc_batch *b2 = NULL;
    pc_error err = {0};
    if (pc_batch_decode_proto(wire.data, wire.len, &b2, &err) != 0) {
        fprintf(stderr, "reencode: %s\n", err.msg);
        abort();
    }
    pc_buf_free(&wire);
    return b2;
}

/* ---- dictionary builder ------------------------------------------------------------------- */

static void test_dict_dedup(void)
{
    pc_arena *a = pc_arena_new(1024);
    pc_dict_builder *db = pc_dict_builder_new(a);
    CHECK_EQ_INT(pc_dict_string(db, "", 0), 0);
    CHECK_EQ_INT(pc_dict_cstring(db, NULL), 0);
    int32_t foo = pc_dict_cstring(db, "foo");
    CHECK(foo > 0);
    CHECK_EQ_INT(pc_dict_string(db, "foobar", 3), foo);
    CHECK_EQ_INT(pc_dict_string(db, "foo\0zz", 6), foo); /* protobuf strings stop at NUL */
    int32_t bar = pc_dict_cstring(db, "bar");
    CHECK(bar > 0 && bar != foo);
    /* many strings: table growth keeps every index stable */
    int32_t idx[3000];
    char buf[32];
    for (int i = 0; i < 3000; i++) {
        snprintf(buf, sizeof buf, "s%d", i);
        idx[i] = pc_dict_cstring(db, buf);
    }
    int stable = 1;
    for (int i = 0; i < 3000; i++) {
        snprintf(buf, sizeof buf, "s%d", i);
        if (pc_dict_cstring(db, buf) != idx[i]) stable = 0;
        if (strcmp(pc_dict_builder_str(db, idx[i]), buf) != 0) stable = 0;
    }
    CHECK(stable);
    CHECK_EQ_INT(pc_dict_n_strings(db), 3003);

    CHECK_EQ_INT(pc_dict_function(db, 0, 0, 0, 0), 0);
    int32_t f1 = pc_dict_function(db, foo, 0, bar, 10);
    CHECK(f1 > 0);
    CHECK_EQ_INT(pc_dict_function(db, foo, 0, bar, 10), f1);
    CHECK(pc_dict_function(db, foo, 0, bar, 11) != f1);

    pc_mapping m = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__MAPPING__INIT;
    CHECK_EQ_INT(pc_dict_mapping(db, &m), 0);
    m.memory_start = 0x1000;
    m.filename_strindex = bar;
    int32_t bid = pc_dict_attr_str(db, "process.executable.build_id.gnu", "abc", 3);
    CHECK(bid > 0);
    CHECK_EQ_INT(pc_dict_attr_str(db, "process.executable.build_id.gnu", "abc", 3), bid);
    m.n_attribute_indices = 1;
    m.attribute_indices = &bid;
    int32_t m1 = pc_dict_mapping(db, &m);
    CHECK(m1 > 0);
    CHECK_EQ_INT(pc_dict_mapping(db, &m), m1);
    m.n_attribute_indices = 0;
    CHECK(pc_dict_mapping(db, &m) != m1);

    pc_line ln = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__LINE__INIT;
    ln.function_index = f1;
    ln.line = 42;
    pc_line *lines[] = {&ln};
    pc_location l = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__LOCATION__INIT;
    CHECK_EQ_INT(pc_dict_location(db, &l), 0);
    l.mapping_index = m1;
    l.address = 0x1234;
    l.n_lines = 1;
    l.lines = lines;
    int32_t l1 = pc_dict_location(db, &l);
    CHECK(l1 > 0);
    ln.line = 43; /* the stored copy is deep: changing the source changes the key, not the entry */
    int32_t l2 = pc_dict_location(db, &l);
    CHECK(l2 != l1);
    ln.line = 42;
    CHECK_EQ_INT(pc_dict_location(db, &l), l1);

    int32_t st[] = {l1, l2};
    int32_t rs[] = {l2, l1};
    CHECK_EQ_INT(pc_dict_stack(db, NULL, 0), 0);
    int32_t s1 = pc_dict_stack(db, st, 2);
    CHECK(s1 > 0);
    CHECK_EQ_INT(pc_dict_stack(db, st, 2), s1);
    CHECK(pc_dict_stack(db, rs, 2) != s1);
    CHECK(pc_dict_stack(db, st, 1) != s1);

    uint8_t zt[16] = {0}, zs[8] = {0}, t[16] = {1, 2, 3}, s[8] = {9};
    CHECK_EQ_INT(pc_dict_link(db, zt, zs), 0);
    int32_t k1 = pc_dict_link(db, t, s);
    CHECK(k1 > 0);
    CHECK_EQ_INT(pc_dict_link(db, t, s), k1);
    CHECK(pc_dict_link(db, t, zs) != k1);

    CHECK_EQ_INT(pc_dict_attribute(db, 0, NULL, 0), 0);
    pc_anyvalue empty = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
    CHECK_EQ_INT(pc_dict_attribute(db, 0, &empty, 0), 0);
    int32_t a1 = pc_dict_attr_int(db, "bytes", 10, 0);
    CHECK_EQ_INT(pc_dict_attr_int(db, "bytes", 10, 0), a1);
    CHECK(pc_dict_attr_int(db, "bytes", 10, bar) != a1);
    CHECK(pc_dict_attr_int(db, "bytes", 11, 0) != a1);
    CHECK(pc_dict_attr_bool(db, "bytes", 1) != a1);
    /* arrays compare deeply */
    pc_anyvalue e1 = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT, e2 = e1;
    e1.value_case = AV(STRING_VALUE);
    e1.string_value = "x";
    e2.value_case = AV(INT_VALUE);
    e2.int_value = 7;
    pc_anyvalue *ev[] = {&e1, &e2};
    Opentelemetry__Proto__Common__V1__ArrayValue arr =
        OPENTELEMETRY__PROTO__COMMON__V1__ARRAY_VALUE__INIT;
    arr.n_values = 2;
    arr.values = ev;
    pc_anyvalue av = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
    av.value_case = AV(ARRAY_VALUE);
    av.array_value = &arr;
    int32_t a2 = pc_dict_attribute(db, foo, &av, 0);
    char x2[] = "x";
    e1.string_value = x2; /* another pointer, same content */
    CHECK_EQ_INT(pc_dict_attribute(db, foo, &av, 0), a2);
    e2.int_value = 8;
    CHECK(pc_dict_attribute(db, foo, &av, 0) != a2);

    pc_dictionary *d = pc_dict_builder_finish(db);
    CHECK_EQ_INT(d->n_string_table, pc_dict_n_strings(db));
    CHECK_STR(d->string_table[0], "");
    CHECK_STR(d->string_table[foo], "foo");
    CHECK_EQ_INT(d->function_table[0]->name_strindex, 0);
    CHECK_EQ_INT(d->function_table[f1]->start_line, 10);
    CHECK_EQ_INT(d->location_table[l1]->lines[0]->line, 42);
    CHECK_EQ_INT(d->location_table[l2]->lines[0]->line, 43);
    CHECK_EQ_INT(d->mapping_table[0]->n_attribute_indices, 0);
    CHECK_EQ_INT(d->stack_table[0]->n_location_indices, 0);
    CHECK_EQ_INT(d->stack_table[s1]->location_indices[1], l2);
    CHECK(d->attribute_table[0]->value == NULL);
    CHECK_EQ_INT(d->link_table[0]->trace_id.len, 16);
    CHECK_EQ_INT(d->link_table[0]->span_id.len, 8);
    CHECK(d->link_table[0]->trace_id.data[15] == 0 && d->link_table[0]->span_id.data[7] == 0);
    CHECK_EQ_INT(d->link_table[k1]->trace_id.data[2], 3);
    CHECK_STR(d->attribute_table[a2]->value->array_value->values[0]->string_value, "x");

    /* the finished dictionary packs */
    size_t sz = protobuf_c_message_get_packed_size(&d->base);
    CHECK(sz > 0);
    pc_dict_builder_free(db);
    pc_arena_free(a);
}

/* Build a small dictionary with its own arena: functions main/work, a stack, a link. */
static pc_dictionary *small_dict(pc_arena *a, const char *leaf, int with_link)
{
    pc_dict_builder *db = pc_dict_builder_new(a);
    pc_dict_cstring(db, leaf); /* order differs between the two dictionaries */
    int32_t fmain =
        pc_dict_function(db, pc_dict_cstring(db, "main"), 0, pc_dict_cstring(db, "m.go"), 1);
    int32_t fleaf =
        pc_dict_function(db, pc_dict_cstring(db, leaf), 0, pc_dict_cstring(db, "m.go"), 9);
    pc_mapping m = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__MAPPING__INIT;
    m.filename_strindex = pc_dict_cstring(db, "/bin/app");
    int32_t hasf = pc_dict_attr_bool(db, "pprof.mapping.has_functions", 1);
    m.n_attribute_indices = 1;
    m.attribute_indices = &hasf;
    int32_t mi = pc_dict_mapping(db, &m);
    pc_line l1 = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__LINE__INIT, l2 = l1;
    l1.function_index = fmain;
    l2.function_index = fleaf;
    pc_line *p1[] = {&l1}, *p2[] = {&l2};
    pc_location loc = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__LOCATION__INIT;
    loc.mapping_index = mi;
    loc.n_lines = 1;
    loc.lines = p1;
    int32_t lmain = pc_dict_location(db, &loc);
    loc.lines = p2;
    int32_t lleaf = pc_dict_location(db, &loc);
    int32_t stack[] = {lleaf, lmain};
    pc_dict_stack(db, stack, 2);
    pc_anyvalue sv = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
    sv.value_case = AV(STRING_VALUE_STRINDEX);
    sv.string_value_strindex = pc_dict_cstring(db, "eu-west");
    pc_dict_attribute(db, pc_dict_cstring(db, "region"), &sv, 0);
    if (with_link) {
        uint8_t t[16] = {0xaa}, s[8] = {0xbb};
        pc_dict_link(db, t, s);
    }
    pc_dictionary *d = pc_dict_builder_finish(db);
    pc_dict_builder_free(db);
    return d;
}

static const char *fname(const pc_dictionary *d, int32_t fi)
{
    return d->string_table[d->function_table[fi]->name_strindex];
}

static void test_dict_import(void)
{
    pc_arena *a1 = pc_arena_new(256), *a2 = pc_arena_new(256), *a3 = pc_arena_new(256);
    pc_dictionary *d1 = small_dict(a1, "work", 1), *d2 = small_dict(a2, "idle", 0);
    pc_dict_builder *db = pc_dict_builder_new(a3);
    pc_dict_remap m1, m2;
    pc_dict_import(db, d1, &m1);
    pc_dict_import(db, d2, &m2);
    pc_arena_free(a1); /* the merged dictionary must not point into the sources */
    pc_dictionary *d = pc_dict_builder_finish(db);
    /* shared content deduped: main, m.go, /bin/app, region, eu-west; "work" and "idle" each */
    CHECK_EQ_INT(d->n_string_table, 9);
    CHECK_EQ_INT(d->n_function_table, 4);
    CHECK_EQ_INT(d->n_mapping_table, 2);
    CHECK_EQ_INT(d->n_location_table, 4);
    CHECK_EQ_INT(d->n_stack_table, 3);
    CHECK_EQ_INT(d->n_link_table, 2);
    CHECK_EQ_INT(d->n_attribute_table, 3); /* zero, has_functions, region */
    CHECK_EQ_INT(m1.strings[0], 0);
    CHECK_EQ_INT(m2.functions[0], 0);
    /* the same function in both sources lands on the same index */
    CHECK_EQ_INT(m1.functions[1], m2.functions[1]);
    CHECK_STR(fname(d, m1.functions[1]), "main");
    CHECK_STR(fname(d, m1.functions[2]), "work");
    CHECK_STR(fname(d, m2.functions[2]), "idle");
    CHECK_EQ_INT(m1.attributes[2], m2.attributes[2]);
    const pc_kvu *region = d->attribute_table[m2.attributes[2]];
    CHECK_STR(d->string_table[region->key_strindex], "region");
    CHECK_STR(d->string_table[region->value->string_value_strindex], "eu-west");
    const pc_stack *st = d->stack_table[m2.stacks[1]];
    CHECK_EQ_INT(st->n_location_indices, 2);
    CHECK_STR(fname(d, d->location_table[st->location_indices[0]]->lines[0]->function_index),
              "idle");
    CHECK_EQ_INT(d->link_table[m1.links[1]]->trace_id.data[0], 0xaa);

    /* a profile from d2 re-indexed into d */
    pc_sample s = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__SAMPLE__INIT;
    int32_t sattr[] = {2, 99};
    s.stack_index = 1;
    s.n_attribute_indices = 2;
    s.attribute_indices = sattr;
    s.link_index = 5; /* out of range in d2 */
    pc_sample *ss[] = {&s};
    pc_value_type vt = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__VALUE_TYPE__INIT;
    vt.type_strindex = 1; /* "idle" in d2 */
    pc_profile prof = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__PROFILE__INIT;
    prof.sample_type = &vt;
    prof.n_samples = 1;
    prof.samples = ss;
    pc_dict_remap_profile(&m2, &prof);
    CHECK_EQ_INT(s.stack_index, m2.stacks[1]);
    CHECK_EQ_INT(sattr[0], m2.attributes[2]);
    CHECK_EQ_INT(sattr[1], 0);
    CHECK_EQ_INT(s.link_index, 0);
    CHECK_STR(d->string_table[vt.type_strindex], "idle");
    pc_keyvalue kv = OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT;
    pc_anyvalue kvv = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
    kvv.value_case = AV(STRING_VALUE_STRINDEX);
    kvv.string_value_strindex = 1;
    kv.key_strindex = 1;
    kv.value = &kvv;
    pc_dict_remap_keyvalue(&m2, &kv);
    CHECK_STR(d->string_table[kv.key_strindex], "idle");
    CHECK_STR(d->string_table[kvv.string_value_strindex], "idle");
    pc_dict_remap_free(&m1);
    pc_dict_remap_free(&m2);

    /* builder_from keeps indices; importing a dictionary into itself maps each entry to itself */
    pc_dict_builder *db2 = pc_dict_builder_from(a3, d);
    pc_dict_remap same;
    pc_dict_import(db2, d, &same);
    int identity = 1;
    for (size_t i = 0; i < same.n_strings; i++)
        identity &= same.strings[i] == (int32_t)i;
    for (size_t i = 0; i < same.n_locations; i++)
        identity &= same.locations[i] == (int32_t)i;
    for (size_t i = 0; i < same.n_attributes; i++)
        identity &= same.attributes[i] == (int32_t)i;
    for (size_t i = 0; i < same.n_links; i++)
        identity &= same.links[i] == (int32_t)i;
    CHECK(identity);
    CHECK_EQ_INT(pc_dict_n_strings(db2), d->n_string_table);
    pc_dict_remap_free(&same);
    pc_dict_builder_free(db2);

    /* hostile source: out-of-range and negative indices become 0, nothing crashes */
    pc_dictionary bad = *d;
    pc_function bf = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__FUNCTION__INIT;
    bf.name_strindex = 999;
    bf.filename_strindex = -5;
    pc_function *bfs[] = {d->function_table[0], &bf};
    bad.function_table = bfs;
    bad.n_function_table = 2;
    int32_t badlocs[] = {77, -1, 1};
    pc_stack bs = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__STACK__INIT;
    bs.n_location_indices = 3;
    bs.location_indices = badlocs;
    pc_stack *bss[] = {d->stack_table[0], &bs};
    bad.stack_table = bss;
    bad.n_stack_table = 2;
    pc_link bl = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__LINK__INIT; /* empty bytes */
    pc_link *bls[] = {&bl, &bl};
    bad.link_table = bls;
    bad.n_link_table = 2;
    pc_dict_builder *db3 = pc_dict_builder_new(a3);
    pc_dict_remap mb;
    pc_dict_import(db3, &bad, &mb);
    CHECK_EQ_INT(mb.functions[1], 0); /* all fields mapped to 0 -> the zero function */
    CHECK_EQ_INT(mb.links[1], 0);     /* empty-bytes link == the zero link */
    pc_dictionary *bd = pc_dict_builder_finish(db3);
    const pc_stack *bst = bd->stack_table[mb.stacks[1]];
    CHECK_EQ_INT(bst->n_location_indices, 3);
    CHECK_EQ_INT(bst->location_indices[0], 0);
    CHECK_EQ_INT(bst->location_indices[1], 0);
    CHECK(bst->location_indices[2] > 0);
    pc_dict_remap_free(&mb);
    pc_dict_builder_free(db3);
    db3 = pc_dict_builder_new(a3);
    pc_dict_import(db3, NULL, &mb); /* NULL source: empty maps */
    CHECK_EQ_INT(mb.n_strings, 0);
    CHECK_EQ_INT(pc_remap_index(mb.strings, mb.n_strings, 5), 0);
    pc_dict_builder_free(db3);

    pc_dict_builder_free(db);
    pc_arena_free(a2);
    pc_arena_free(a3);
}

/* ---- synthetic pprof: every mapped field; variants inject one defect each ----------------- */

enum {
    SYN_OK,
    SYN_UNKNOWN_LOCATION,
    SYN_BAD_STRING,
    SYN_VALUE_COUNT,
    SYN_DUP_LOCATION,
    SYN_UNKNOWN_MAPPING,
    SYN_UNKNOWN_FUNCTION,
    SYN_ZERO_ID,
    SYN_BAD_LABEL,
    SYN_STRING0,
    SYN_MIXED_LABEL,
};

static const char *syn_strings[] = {"",
                                    "samples",
                                    "count",
                                    "cpu",
                                    "nanoseconds",
                                    "main.main",
                                    "main.go",
                                    "/bin/app",
                                    "abc123",
                                    "k",
                                    "v1",
                                    "v2",
                                    "bytes",
                                    "n",
                                    "drop.*",
                                    "keep.*",
                                    "https://doc",
                                    "comment one",
                                    "comment two",
                                    "main.leaf",
                                    "main.inl",
                                    "trace_id",
                                    "4bf92f3577b34da6a3ce929d0e0e4736",
                                    "span_id",
                                    "00f067aa0ba902b7",
                                    "libc.so",
                                    "_ZN4leafEv"};
enum {
    S_SAMPLES = 1,
    S_COUNT,
    S_CPU,
    S_NS,
    S_MAIN,
    S_MAINGO,
    S_APP,
    S_BID,
    S_K,
    S_V1,
    S_V2,
    S_BYTES,
    S_N,
    S_DROP,
    S_KEEP,
    S_DOC,
    S_C1,
    S_C2,
    S_LEAF,
    S_INL,
    S_TRACE,
    S_TRACEV,
    S_SPAN,
    S_SPANV,
    S_LIBC,
    S_MANGLED,
    S_COUNT_
};

static void build_synth(int variant, pc_buf *out)
{
    typedef Perftools__Profiles__ValueType VT;
    typedef Perftools__Profiles__Mapping MP;
    typedef Perftools__Profiles__Function FN;
    typedef Perftools__Profiles__Location LC;
    typedef Perftools__Profiles__Line LN;
    typedef Perftools__Profiles__Sample SM;
    typedef Perftools__Profiles__Label LB;
    pp_profile p = PERFTOOLS__PROFILES__PROFILE__INIT;
    char *strs[S_COUNT_ + 1];
    for (int i = 0; i < S_COUNT_; i++)
        strs[i] = (char *)syn_strings[i];
    if (variant == SYN_STRING0) strs[0] = "x";
    p.n_string_table = S_COUNT_;
    p.string_table = strs;

    VT st0 = PERFTOOLS__PROFILES__VALUE_TYPE__INIT, st1 = st0, pt = st0;
    st0.type = S_SAMPLES, st0.unit = S_COUNT;
    st1.type = S_CPU, st1.unit = S_NS;
    pt.type = S_CPU, pt.unit = S_NS;
    VT *sts[] = {&st0, &st1};
    p.n_sample_type = 2;
    p.sample_type = sts;
    p.period_type = &pt;
    p.period = 10000000;
    p.time_nanos = 1700000000123456789;
    p.duration_nanos = 10000000000;
    p.drop_frames = S_DROP;
    p.keep_frames = S_KEEP;
    p.doc_url = S_DOC;
    int64_t comments[] = {S_C1, S_C2};
    p.n_comment = 2;
    p.comment = comments;
    p.default_sample_type = S_CPU;

    MP m1 = PERFTOOLS__PROFILES__MAPPING__INIT, m2 = m1;
    m1.id = 10, m1.memory_start = 0x400000, m1.memory_limit = 0x800000, m1.file_offset = 0x1000;
    m1.filename = S_APP, m1.build_id = S_BID;
    m1.has_functions = m1.has_filenames = m1.has_line_numbers = m1.has_inline_frames = 1;
    m2.id = 20, m2.memory_start = 0x7f0000000000, m2.memory_limit = 0x7f0000100000;
    m2.filename = S_LIBC;
    MP *mps[] = {&m1, &m2};
    p.n_mapping = 2;
    p.mapping = mps;

    FN f1 = PERFTOOLS__PROFILES__FUNCTION__INIT, f2 = f1, f3 = f1;
    f1.id = 1ull << 40, f1.name = S_MAIN, f1.filename = S_MAINGO, f1.start_line = 3;
    f2.id = 7, f2.name = S_LEAF, f2.system_name = S_MANGLED, f2.filename = S_MAINGO;
    f3.id = UINT64_MAX, f3.name = S_INL, f3.filename = S_MAINGO;
    if (variant == SYN_BAD_STRING) f2.name = 99;
    FN *fns[] = {&f1, &f2, &f3};
    p.n_function = 3;
    p.function = fns;

    LN l1 = PERFTOOLS__PROFILES__LINE__INIT, l2 = l1, l3 = l1;
    l1.function_id = 1ull << 40, l1.line = 12;
    l2.function_id = UINT64_MAX, l2.line = 30, l2.column = 4; /* inlined into main.leaf */
    l3.function_id = 7, l3.line = 21;
    if (variant == SYN_UNKNOWN_FUNCTION) l3.function_id = 8;
    LN *ln1[] = {&l1}, *ln2[] = {&l2, &l3};
    LC c1 = PERFTOOLS__PROFILES__LOCATION__INIT, c2 = c1, c3 = c1;
    c1.id = 5, c1.mapping_id = 10, c1.address = 0x401000, c1.n_line = 1, c1.line = ln1;
    c2.id = UINT64_MAX - 1, c2.mapping_id = 10, c2.address = 0x402000, c2.n_line = 2, c2.line = ln2;
    c3.id = 9, c3.mapping_id = 20, c3.address = 0x7f0000000123, c3.is_folded = 1; /* no lines */
    if (variant == SYN_DUP_LOCATION) c3.id = 5;
    if (variant == SYN_UNKNOWN_MAPPING) c3.mapping_id = 30;
    if (variant == SYN_ZERO_ID) c3.id = 0;
    LC *lcs[] = {&c1, &c2, &c3};
    p.n_location = 3;
    p.location = lcs;

    LB kv1 = PERFTOOLS__PROFILES__LABEL__INIT, kv2 = kv1, nb = kv1, nn1 = kv1, nn2 = kv1,
       empty = kv1, tr = kv1, sp = kv1;
    kv1.key = S_K, kv1.str = S_V1;
    kv2.key = S_K, kv2.str = S_V2;
    nb.key = S_BYTES, nb.num = 4096, nb.num_unit = S_BYTES;
    nn1.key = S_N, nn1.num = 1;
    nn2.key = S_N, nn2.num = -2;
    empty.key = S_K; /* no value: dropped, like Go's decoder does */
    tr.key = S_TRACE, tr.str = S_TRACEV;
    sp.key = S_SPAN, sp.str = S_SPANV;
    if (variant == SYN_BAD_LABEL) kv2.str = 1000;
    if (variant == SYN_MIXED_LABEL) kv2.str = 0, kv2.num = 5;
    LB *lb0[] = {&kv1, &kv2, &nb, &empty}, *lb1[] = {&nn1, &nn2}, *lb2[] = {&tr, &sp};
    uint64_t st_a[] = {UINT64_MAX - 1, 5}, st_b[] = {9, 5}, st_c[] = {5},
             st_d[] = {UINT64_MAX - 1, 77};
    int64_t v0[] = {3, 30000000}, v1[] = {1, 10000000}, v2[] = {2, 20000000}, v3[] = {4, 40000000};
    SM s0 = PERFTOOLS__PROFILES__SAMPLE__INIT, s1 = s0, s2 = s0, s3 = s0, s4 = s0;
    s0.n_location_id = 2, s0.location_id = st_a, s0.n_value = 2, s0.value = v0;
    s0.n_label = 4, s0.label = lb0;
    s1.n_location_id = 2, s1.location_id = st_b, s1.n_value = 2, s1.value = v1;
    s1.n_label = 2, s1.label = lb1;
    s2.n_location_id = 1, s2.location_id = st_c, s2.n_value = 2, s2.value = v2;
    s2.n_label = 2, s2.label = lb2;
    s3.n_location_id = 2, s3.location_id = st_a, s3.n_value = 2,
    s3.value = v3;                 /* dup of s0's stack */
    s4.n_value = 2, s4.value = v1; /* no stack */
    if (variant == SYN_UNKNOWN_LOCATION) s3.location_id = st_d;
    if (variant == SYN_VALUE_COUNT) s2.n_value = 1;
    SM *sms[] = {&s0, &s1, &s2, &s3, &s4};
    p.n_sample = 5;
    p.sample = sms;
    pack_pprof(&p, out);
}

static int to_batch(const pc_buf *in, pc_batch **b, pc_error *err)
{
    return pc_pprof_decode(in->data, in->len, NULL, b, err);
}

static const pc_kvu *find_attr(const pc_dictionary *d, const int32_t *idx, size_t n,
                               const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(d->string_table[d->attribute_table[idx[i]]->key_strindex], key) == 0)
            return d->attribute_table[idx[i]];
    return NULL;
}

static void test_synthetic_round_trip(void)
{
    pc_buf in = {0};
    build_synth(SYN_OK, &in);
    pc_batch *b = NULL;
    pc_error err = {0};
    CHECK_EQ_INT(to_batch(&in, &b, &err), 0);
    if (!b) {
        fprintf(stderr, "%s\n", err.msg);
        pc_buf_free(&in);
        return;
    }
    int64_t rejected = 0;
    CHECK_EQ_INT(pc_batch_validate(b, &rejected, &err), 0);
    CHECK_EQ_INT(rejected, 0);
    const pc_dictionary *d = b->req->dictionary;
    const pc_scope_profiles *sp = b->req->resource_profiles[0]->scope_profiles[0];
    CHECK_EQ_INT(sp->n_profiles, 2);
    CHECK_EQ_INT(sp->scope->n_attributes, 1);
    CHECK_STR(sp->scope->attributes[0]->key, "pprof.scope.default_sample_type");
    CHECK_STR(sp->scope->attributes[0]->value->string_value, "cpu");
    const pc_profile *p1 = sp->profiles[1];
    CHECK_STR(d->string_table[p1->sample_type->type_strindex], "cpu");
    CHECK_EQ_INT(p1->n_samples, 5);
    CHECK_EQ_INT(p1->samples[3]->values[0], 40000000);
    CHECK_EQ_INT(p1->samples[0]->stack_index, p1->samples[3]->stack_index); /* stack deduped */
    CHECK_EQ_INT(p1->samples[4]->stack_index, 0);
    CHECK_EQ_INT(p1->time_unix_nano, 1700000000123456789ull);
    const pc_kvu *c =
        find_attr(d, p1->attribute_indices, p1->n_attribute_indices, "pprof.profile.comment");
    CHECK(c && c->value->value_case == AV(ARRAY_VALUE) && c->value->array_value->n_values == 2);
    const pc_kvu *df =
        find_attr(d, p1->attribute_indices, p1->n_attribute_indices, "pprof.profile.drop_frames");
    CHECK(df && strcmp(df->value->string_value, "drop.*") == 0);
    /* labels: multi-valued key -> array; numeric -> int with unit */
    const pc_sample *s0 = p1->samples[0];
    const pc_kvu *k = find_attr(d, s0->attribute_indices, s0->n_attribute_indices, "k");
    CHECK(k && k->value->value_case == AV(ARRAY_VALUE) && k->value->array_value->n_values == 2);
    const pc_kvu *by = find_attr(d, s0->attribute_indices, s0->n_attribute_indices, "bytes");
    CHECK(by && by->value->int_value == 4096);
    CHECK(by && strcmp(d->string_table[by->unit_strindex], "bytes") == 0);
    /* mapping: build id + has_* flags; folded location */
    const pc_mapping *m = d->mapping_table[1];
    CHECK_STR(d->string_table[m->filename_strindex], "/bin/app");
    const pc_kvu *bid = find_attr(d, m->attribute_indices, m->n_attribute_indices,
                                  "process.executable.build_id.gnu");
    CHECK(bid && strcmp(bid->value->string_value, "abc123") == 0);
    CHECK(find_attr(d, m->attribute_indices, m->n_attribute_indices,
                    "pprof.mapping.has_inline_frames") != NULL);
    CHECK_EQ_INT(d->mapping_table[2]->n_attribute_indices, 0);
    int folded = 0;
    for (size_t i = 1; i < d->n_location_table; i++)
        if (find_attr(d, d->location_table[i]->attribute_indices,
                      d->location_table[i]->n_attribute_indices, "pprof.location.is_folded"))
            folded++;
    CHECK_EQ_INT(folded, 1);

    outs o = {0};
    pc_batch *b2 = reencode(b);
    CHECK_EQ_INT(pc_batch_to_pprof(b2, collect, &o), 0);
    CHECK_EQ_INT(o.n, 1);
    if (o.n == 1) {
        CHECK_EQ_INT(o.n_profiles[0], 2);
        pp_profile *orig = decode_pprof(in.data, in.len);
        pp_profile *back = decode_pprof(o.data[0].data, o.data[0].len);
        CHECK(orig && back);
        if (orig && back) {
            check_same_pprof(orig, back);
            CHECK_STR(pstr(back, back->drop_frames), "drop.*");
            CHECK_STR(pstr(back, back->keep_frames), "keep.*");
            CHECK_STR(pstr(back, back->doc_url), "https://doc");
            CHECK_EQ_INT(back->n_comment, 2);
            if (back->n_comment == 2) {
                CHECK_STR(pstr(back, back->comment[0]), "comment one");
                CHECK_STR(pstr(back, back->comment[1]), "comment two");
            }
            CHECK_STR(pstr(back, back->default_sample_type), "cpu");
            CHECK_STR(pstr(back, back->string_table[0] ? 0 : 0), "");
            int bf = 0;
            for (size_t i = 0; i < back->n_location; i++)
                bf += back->location[i]->is_folded;
            CHECK_EQ_INT(bf, 1);
            int sys = 0;
            for (size_t i = 0; i < back->n_function; i++)
                sys += strcmp(pstr(back, back->function[i]->system_name), "_ZN4leafEv") == 0;
            CHECK_EQ_INT(sys, 1);
            /* ids are 1..n */
            for (size_t i = 0; i < back->n_location; i++)
                CHECK_EQ_INT(back->location[i]->id, i + 1);
        }
        perftools__profiles__profile__free_unpacked(orig, NULL);
        perftools__profiles__profile__free_unpacked(back, NULL);
    }
    outs_free(&o);
    pc_batch_unref(b2);
    pc_batch_unref(b);
    pc_buf_free(&in);
}

/* Links become trace_id / span_id labels, replacing same-named sample attributes. */
static void test_links_to_labels(void)
{
    pc_buf in = {0};
    build_synth(SYN_OK, &in);
    pc_batch *b = NULL;
    pc_error err = {0};
    CHECK_EQ_INT(to_batch(&in, &b, &err), 0);
    if (!b) return;
    pc_dict_builder *db = pc_dict_builder_from(b->arena, b->req->dictionary);
    uint8_t t[16] = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
                     0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10};
    uint8_t s[8] = {0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8}, zt[16] = {0};
    int32_t l1 = pc_dict_link(db, t, s), l2 = pc_dict_link(db, zt, s);
    b->req->dictionary = pc_dict_builder_finish(db);
    pc_dict_builder_free(db);
    pc_scope_profiles *sp = b->req->resource_profiles[0]->scope_profiles[0];
    for (size_t i = 0; i < sp->n_profiles; i++) {
        sp->profiles[i]->samples[2]->link_index = l1; /* has trace_id/span_id attributes too */
        sp->profiles[i]->samples[1]->link_index = l2;
    }
    outs o = {0};
    CHECK_EQ_INT(pc_batch_to_pprof(b, collect, &o), 0);
    CHECK_EQ_INT(o.n, 1);
    if (o.n == 1) {
        pp_profile *back = decode_pprof(o.data[0].data, o.data[0].len);
        CHECK(back != NULL);
        if (back) {
            char **cs = canon_samples(back);
            int linked = 0, span_only = 0;
            for (size_t i = 0; cs[i]; i++) {
                if (strstr(cs[i],
                           "|span_id=a1a2a3a4a5a6a7a8,trace_id=0102030405060708090a0b0c0d0e0f10,|"))
                    linked++;
                if (strstr(cs[i], "n=#-2 ,n=#1 ,span_id=a1a2a3a4a5a6a7a8,|")) span_only++;
            }
            CHECK_EQ_INT(linked, 1);
            CHECK_EQ_INT(span_only, 1);
            free_canon(cs);
        }
        perftools__profiles__profile__free_unpacked(back, NULL);
    }
    outs_free(&o);

    /* profiles that do not line up become one pprof each */
    sp->profiles[1]->samples[0]->stack_index = 0;
    CHECK_EQ_INT(pc_batch_to_pprof(b, collect, &o), 0);
    CHECK_EQ_INT(o.n, 2);
    CHECK_EQ_INT(o.n_profiles[0], 1);
    outs_free(&o);
    /* a callback's non-zero result stops the walk and is returned */
    CHECK_EQ_INT(pc_batch_to_pprof(b, collect, &(outs){.n = 16}), 1);
    pc_batch_unref(b);
    pc_buf_free(&in);
}

/* ---- real Go profiles --------------------------------------------------------------------- */

static int have_go(void)
{
    return system("command -v go >/dev/null 2>&1") == 0;
}

/* The Go build cache the e2e tests share (tests/e2e/harness.py GO_CACHE, the same rule), which
 * tools/dev.sh fills with `go tool pprof` before the suite (e2e_go_cache_warm): a Go of 1.24 or
 * later builds pprof on its first use, and on a fresh machine that build alone (a minute quiet,
 * more under load) took this test past its timeout. */
static void go_cache(char *out, size_t n)
{
    const char *e = getenv("PROFCOL_E2E_GOCACHE"), *x = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    if (e && *e)
        snprintf(out, n, "%s", e);
    else if (x && *x)
        snprintf(out, n, "%s/profcol-e2e/go-build", x);
    else
        snprintf(out, n, "%s/.cache/profcol-e2e/go-build", home && *home ? home : "/tmp");
}

/* `go tool pprof -top` must read what we produce. */
static void check_go_reads(const pc_buf *gz, const char *expect)
{
    if (!have_go()) {
        fprintf(stderr, "     (go not in PATH: skipping go tool pprof check)\n");
        return;
    }
    char path[] = "/tmp/test_pprof_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    CHECK_EQ_INT(write(fd, gz->data, gz->len), (long long)gz->len);
    close(fd);
    char cmd[1536], outpath[64], cache[1024];
    go_cache(cache, sizeof cache);
    snprintf(outpath, sizeof outpath, "%s.out", path);
    snprintf(cmd, sizeof cmd, "GOCACHE='%s' GOTOOLCHAIN=local go tool pprof -top %s >%s 2>&1",
             cache, path, outpath);
    int rc = system(cmd);
    CHECK_EQ_INT(rc, 0);
    pc_buf text = {0};
    FILE *f = fopen(outpath, "rb");
    if (f) {
        char buf[4096];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, f)) > 0)
            pc_buf_append(&text, buf, n);
        fclose(f);
    }
    pc_buf_append(&text, "", 1);
    CHECK_CONTAINS((const char *)text.data, expect);
    if (rc != 0 || getenv("PC_TEST_VERBOSE")) fprintf(stderr, "%s\n", (const char *)text.data);
    pc_buf_free(&text);
    unlink(path);
    unlink(outpath);
}

static void go_round_trip(const char *file, size_t ntypes, int labelled)
{
    pc_buf in = {0};
    CHECK_EQ_INT(read_file(file, &in), 0);
    if (!in.len) return;
    pc_format_attr ra[] = {{"service.name", "gen"}, {"host.name", "box"}};
    pc_format_opts opts = {
        .attrs = ra, .n_attrs = 2, .scope_name = "profcol/pprof", .scope_version = "1"};
    pc_batch *b = NULL;
    pc_error err = {0};
    int rc = pc_pprof_decode(in.data, in.len, &opts, &b, &err);
    CHECK_EQ_INT(rc, 0);
    if (rc) {
        fprintf(stderr, "%s: %s\n", file, err.msg);
        pc_buf_free(&in);
        return;
    }
    CHECK_EQ_INT(count_profiles(b), ntypes);
    int64_t rejected = 0;
    CHECK_EQ_INT(pc_batch_validate(b, &rejected, &err), 0);
    CHECK_EQ_INT(rejected, 0);
    const pc_resource_profiles *rp = b->req->resource_profiles[0];
    CHECK_STR(pc_resource_attr_str(b->req->dictionary, rp->resource, "service.name"), "gen");
    CHECK_STR(rp->scope_profiles[0]->scope->name, "profcol/pprof");

    if (labelled) { /* trace_id stays a plain string attribute */
        const pc_dictionary *d = b->req->dictionary;
        int found = 0;
        for (size_t i = 1; i < d->n_attribute_table; i++) {
            const pc_kvu *kv = d->attribute_table[i];
            if (strcmp(d->string_table[kv->key_strindex], "trace_id") == 0 && kv->value &&
                kv->value->value_case == AV(STRING_VALUE) &&
                strcmp(kv->value->string_value, "4bf92f3577b34da6a3ce929d0e0e4736") == 0)
                found++;
        }
        CHECK_EQ_INT(found, 1);
    }

    pc_batch *b2 = reencode(b);
    outs o = {0};
    CHECK_EQ_INT(pc_batch_to_pprof(b2, collect, &o), 0);
    CHECK_EQ_INT(o.n, 1);
    if (o.n == 1) {
        CHECK_EQ_INT(o.n_profiles[0], ntypes);
        pp_profile *orig = decode_pprof(in.data, in.len);
        pp_profile *back = decode_pprof(o.data[0].data, o.data[0].len);
        CHECK(orig && back);
        if (orig && back) {
            CHECK(orig->n_sample > 0);
            check_same_pprof(orig, back);
            if (labelled) {
                char **cs = canon_samples(back);
                int both = 0, unlabelled = 0;
                for (size_t i = 0; cs[i]; i++) {
                    if (strstr(cs[i], "|handler=checkout,span_id=00f067aa0ba902b7,"
                                      "trace_id=4bf92f3577b34da6a3ce929d0e0e4736,|"))
                        both++;
                    if (strstr(cs[i], "||")) unlabelled++;
                }
                CHECK(both > 0);
                CHECK(unlabelled > 0);
                free_canon(cs);
            }
        }
        perftools__profiles__profile__free_unpacked(orig, NULL);
        perftools__profiles__profile__free_unpacked(back, NULL);
        check_go_reads(&o.data[0], labelled ? "main.busy" : "main.allocate");
    }
    outs_free(&o);
    pc_batch_unref(b2);
    pc_batch_unref(b);
    pc_buf_free(&in);
}

static void test_go_cpu(void)
{
    go_round_trip("go-cpu.pb.gz", 2, 1);
}

static void test_go_heap(void)
{
    go_round_trip("go-heap.pb.gz", 4, 0);
}

/* Two pprofs appended into one batch share its dictionary; each comes back on its own. */
static void test_append_two(void)
{
    pc_buf cpu = {0}, heap = {0};
    if (read_file("go-cpu.pb.gz", &cpu) || read_file("go-heap.pb.gz", &heap)) {
        CHECK(0);
        return;
    }
    pc_batch *b = NULL;
    pc_error err = {0};
    CHECK_EQ_INT(to_batch(&cpu, &b, &err), 0);
    size_t strings_cpu = b ? b->req->dictionary->n_string_table : 0;
    CHECK_EQ_INT(to_batch(&heap, &b, &err), 0);
    if (!b) return;
    CHECK_EQ_INT(b->req->n_resource_profiles, 2);
    CHECK_EQ_INT(count_profiles(b), 6);
    CHECK(b->req->dictionary->n_string_table > strings_cpu);
    int64_t rejected = 0;
    CHECK_EQ_INT(pc_batch_validate(b, &rejected, &err), 0);

    /* a failing append leaves the batch as it was */
    pc_buf bad = {0};
    build_synth(SYN_UNKNOWN_LOCATION, &bad);
    const pc_dictionary *before = b->req->dictionary;
    CHECK_EQ_INT(to_batch(&bad, &b, &err), PC_EBADMSG);
    CHECK(b->req->dictionary == before);
    CHECK_EQ_INT(b->req->n_resource_profiles, 2);
    pc_buf_free(&bad);

    outs o = {0};
    CHECK_EQ_INT(pc_batch_to_pprof(b, collect, &o), 0);
    CHECK_EQ_INT(o.n, 2);
    if (o.n == 2) {
        const pc_buf *orig_in[2] = {&cpu, &heap};
        for (int i = 0; i < 2; i++) {
            pp_profile *orig = decode_pprof(orig_in[i]->data, orig_in[i]->len);
            pp_profile *back = decode_pprof(o.data[i].data, o.data[i].len);
            CHECK(orig && back);
            if (orig && back) check_same_pprof(orig, back);
            perftools__profiles__profile__free_unpacked(orig, NULL);
            perftools__profiles__profile__free_unpacked(back, NULL);
        }
    }
    outs_free(&o);

    /* merging via import: heap's dictionary into cpu's, the way batch merging will do it */
    pc_batch *bc = NULL, *bh = NULL;
    to_batch(&cpu, &bc, &err);
    to_batch(&heap, &bh, &err);
    if (bc && bh) {
        pc_dict_builder *db = pc_dict_builder_from(bc->arena, bc->req->dictionary);
        pc_dict_remap m;
        pc_dict_import(db, bh->req->dictionary, &m);
        pc_dictionary *merged = pc_dict_builder_finish(db);
        const pc_dictionary *hd = bh->req->dictionary;
        int same = 1;
        for (size_t i = 1; i < hd->n_function_table; i++)
            same &= strcmp(fname(hd, (int32_t)i), fname(merged, m.functions[i])) == 0;
        CHECK(same);
        /* runtime functions are in both profiles: the merge has fewer than the sum */
        CHECK(merged->n_function_table <
              bc->req->dictionary->n_function_table + hd->n_function_table - 1);
        pc_dict_remap_free(&m);
        pc_dict_builder_free(db);
    }
    pc_batch_unref(bc);
    pc_batch_unref(bh);
    pc_batch_unref(b);
    pc_buf_free(&cpu);
    pc_buf_free(&heap);
}

/* ---- hostile input ------------------------------------------------------------------------ */

static void expect_error(int variant, const char *msg)
{
    pc_buf in = {0};
    build_synth(variant, &in);
    pc_batch *b = NULL;
    pc_error err = {0};
    CHECK_EQ_INT(to_batch(&in, &b, &err), PC_EBADMSG);
    CHECK(b == NULL);
    CHECK_CONTAINS(err.msg, msg);
    pc_buf_free(&in);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)rng;
}

static int discard(const pc_pprof_out *o, void *ud)
{
    (void)o;
    (void)ud;
    return 0;
}

static void test_bad_input(void)
{
    expect_error(SYN_UNKNOWN_LOCATION, "pprof: sample 3 references unknown location id 77");
    expect_error(SYN_BAD_STRING, "string index 99 out of range");
    expect_error(SYN_VALUE_COUNT, "sample 2 has 1 values, expected 2");
    expect_error(SYN_DUP_LOCATION, "duplicate location id 5");
    expect_error(SYN_UNKNOWN_MAPPING, "unknown mapping id 30");
    expect_error(SYN_UNKNOWN_FUNCTION, "unknown function id 8");
    expect_error(SYN_ZERO_ID, "has id 0");
    expect_error(SYN_BAD_LABEL, "out of range");
    expect_error(SYN_STRING0, "string_table[0]");
    expect_error(SYN_MIXED_LABEL, "mixes");

    pc_buf gz = {0}, raw = {0};
    if (read_file("go-cpu.pb.gz", &gz)) return;
    CHECK_EQ_INT(pc_gzip_inflate(gz.data, gz.len, 1u << 26, &raw), PC_OK);
    pc_error err = {0};
    pc_batch *b = NULL;

    /* too large: inflated or raw */
    pc_format_opts small = {.max_bytes = 100};
    CHECK_EQ_INT(pc_pprof_decode(gz.data, gz.len, &small, &b, &err), PC_E2BIG);
    CHECK(!b);
    CHECK_EQ_INT(pc_pprof_decode(raw.data, raw.len, &small, &b, &err), PC_E2BIG);
    CHECK(!b);

    /* gzip garbage and truncated gzip */
    uint8_t garbage[64] = {0x1f, 0x8b, 0x08, 0x00};
    for (size_t i = 4; i < sizeof garbage; i++)
        garbage[i] = (uint8_t)next_rand();
    CHECK_EQ_INT(pc_pprof_decode(garbage, sizeof garbage, NULL, &b, &err), PC_EBADMSG);
    CHECK(!b);
    CHECK_CONTAINS(err.msg, "gzip");
    CHECK_EQ_INT(pc_pprof_decode(gz.data, gz.len - 9, NULL, &b, &err), PC_EBADMSG);
    CHECK(!b);
    CHECK_EQ_INT(pc_pprof_decode(gz.data, 0, NULL, &b, &err), PC_EBADMSG);
    CHECK_EQ_INT(pc_pprof_decode(NULL, 0, NULL, &b, &err), PC_EBADMSG);

    /* truncated protobuf: the middle cut fails; no prefix crashes */
    CHECK_EQ_INT(pc_pprof_decode(raw.data, raw.len / 2, NULL, &b, &err), PC_EBADMSG);
    CHECK_CONTAINS(err.msg, "pprof:");
    CHECK(!b);
    size_t ok = 0;
    for (size_t n = 1; n < raw.len; n++) {
        pc_batch *t = NULL;
        if (pc_pprof_decode(raw.data, n, NULL, &t, &err) == 0) {
            ok++;
            pc_batch_to_pprof(t, discard, NULL);
            pc_batch_unref(t);
        }
    }
    CHECK(ok < raw.len / 2);

    /* random mutations: never crash; whatever decodes also translates back */
    pc_buf mut = {0};
    size_t decoded = 0;
    for (int iter = 0; iter < 3000; iter++) {
        mut.len = 0;
        pc_buf_append(&mut, raw.data, raw.len);
        int flips = 1 + (int)(next_rand() % 4);
        for (int f = 0; f < flips; f++) {
            size_t pos = next_rand() % mut.len;
            uint32_t r = next_rand();
            mut.data[pos] = (r & 0x100) ? (uint8_t)r : (uint8_t)(mut.data[pos] ^ (1u << (r % 8)));
        }
        pc_batch *t = NULL;
        if (pc_pprof_decode(mut.data, mut.len, NULL, &t, &err) == 0) {
            decoded++;
            pc_batch_to_pprof(t, discard, NULL);
            pc_batch_unref(t);
        }
    }
    fprintf(stderr, "     %zu of 3000 mutated pprofs still decoded\n", decoded);
    pc_buf_free(&mut);
    pc_buf_free(&gz);
    pc_buf_free(&raw);
}

/* Hostile OTLP into the pprof encoder: indices out of range everywhere. */
static void test_bad_otlp(void)
{
    pc_buf in = {0};
    build_synth(SYN_OK, &in);
    pc_batch *b = NULL;
    pc_error err = {0};
    CHECK_EQ_INT(to_batch(&in, &b, &err), 0);
    if (!b) return;
    pc_dictionary *d = b->req->dictionary;
    pc_profile *p = b->req->resource_profiles[0]->scope_profiles[0]->profiles[0];
    p->samples[0]->stack_index = 1000;
    p->samples[1]->attribute_indices[0] = -4;
    p->samples[2]->link_index = 77;
    p->sample_type->type_strindex = 12345;
    d->stack_table[1]->location_indices[0] = 999;
    d->location_table[1]->mapping_index = -1;
    d->location_table[2]->lines[0]->function_index = 4242;
    d->function_table[1]->name_strindex = -7;
    d->attribute_table[1]->key_strindex = 1 << 30;
    outs o = {0};
    CHECK_EQ_INT(pc_batch_to_pprof(b, collect, &o), 0);
    CHECK(o.n >= 1);
    for (size_t i = 0; i < o.n; i++) {
        pp_profile *back = decode_pprof(o.data[i].data, o.data[i].len);
        CHECK(back != NULL);
        perftools__profiles__profile__free_unpacked(back, NULL);
    }
    outs_free(&o);
    b->req->dictionary = NULL;
    CHECK_EQ_INT(pc_batch_to_pprof(b, collect, &o), 0);
    outs_free(&o);
    pc_batch_unref(b);
    pc_buf_free(&in);
}

/* A pprof function with no name, system name or file (the Go runtime writes one in block and
 * mutex profiles, address 0xfffffffffffffffe) interns to OTLP's null function, index 0. Back in
 * pprof every line must name a function that is in the table (Go's reader and Pyroscope refuse
 * a dangling function id 0): the null function becomes one function with empty strings. */
static void test_null_function_line(void)
{
    pc_buf in = {0};
    build_synth(SYN_OK, &in);
    pc_batch *b = NULL;
    pc_error err = {0};
    CHECK_EQ_INT(to_batch(&in, &b, &err), 0);
    if (!b) return;
    pc_dictionary *d = b->req->dictionary;
    d->location_table[2]->lines[0]->function_index = 0;
    outs o = {0};
    CHECK_EQ_INT(pc_batch_to_pprof(b, collect, &o), 0);
    CHECK(o.n >= 1);
    size_t empty_funs = 0;
    for (size_t i = 0; i < o.n; i++) {
        pp_profile *back = decode_pprof(o.data[i].data, o.data[i].len);
        CHECK(back != NULL);
        if (!back) continue;
        for (size_t l = 0; l < back->n_location; l++)
            for (size_t k = 0; k < back->location[l]->n_line; k++) {
                const Perftools__Profiles__Function *f =
                    find_fun(back, back->location[l]->line[k]->function_id);
                CHECK(f != NULL);
                if (f && !f->name && !f->system_name && !f->filename) empty_funs++;
            }
        perftools__profiles__profile__free_unpacked(back, NULL);
    }
    CHECK(empty_funs >= 1);
    outs_free(&o);
    pc_batch_unref(b);
    pc_buf_free(&in);
}

int main(void)
{
    RUN(test_dict_dedup);
    RUN(test_dict_import);
    RUN(test_synthetic_round_trip);
    RUN(test_links_to_labels);
    RUN(test_go_cpu);
    RUN(test_go_heap);
    RUN(test_append_two);
    RUN(test_bad_input);
    RUN(test_bad_otlp);
    RUN(test_null_function_line);
    return check_report();
}
