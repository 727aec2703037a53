/* The wire walk (src/pdata/wire_check.h) against the decoded path (wire_oracle.h) on hand-made
 * requests: one rule broken at a time (each table's indices, zero elements, UTF-8, wire types,
 * nesting, field 0, protobuf-c's merges), every prefix of a valid request, and every byte of it
 * changed. Each case also states the verdict it must reach, so a rule both paths lost would show.
 * The decode estimate (cost) must be the scan's. And the batch of checked bytes
 * (pc_batch_new_wire) decodes once, lazily, to the decoded path's model. */
#include <pthread.h>
#include <stdbool.h>

#include "check.h"
#include "wire_oracle.h"

typedef struct pb {
    uint8_t b[4096];
    size_t n;
} pb;

static void p_raw(pb *p, const void *d, size_t n)
{
    if (p->n + n > sizeof p->b) abort();
    memcpy(p->b + p->n, d, n);
    p->n += n;
}

static void p_var(pb *p, uint64_t v)
{
    do {
        uint8_t c = (uint8_t)(v & 0x7f) | (v > 0x7f ? 0x80 : 0);
        p_raw(p, &c, 1);
        v >>= 7;
    } while (v);
}

static void p_key(pb *p, unsigned num, unsigned wt)
{
    p_var(p, (uint64_t)num << 3 | wt);
}

static void p_int(pb *p, unsigned num, int64_t v)
{
    p_key(p, num, 0);
    p_var(p, (uint64_t)v);
}

static void p_bytes(pb *p, unsigned num, const void *d, size_t n)
{
    p_key(p, num, 2);
    p_var(p, n);
    p_raw(p, d, n);
}

static void p_msg(pb *p, unsigned num, const pb *m)
{
    p_bytes(p, num, m->b, m->n);
}

static void p_str(pb *p, unsigned num, const char *s)
{
    p_bytes(p, num, s, strlen(s));
}

/* What the request holds; the defaults (spec_ok) make a valid one. Tables: 7 strings, then 2
 * mappings, locations, functions, links, stacks, and 3 attributes (element 0 each the zero). */
typedef struct spec {
    int32_t stack, link, sample_attr, profile_attr, type_str, n_values, n_ts;
    size_t profile_id_len;
    int32_t stack_loc, loc_mapping, line_func, loc_attr, map_file, map_attr, func_name;
    size_t link_trace_len;
    int32_t attr_key, attr_unit, attr_val, kvlist_key, res_key, scope_val;
    const char *string0, *string6;
    int32_t map0_file, stack0_loc;
    bool dict_after, one_profile;
} spec;

static spec spec_ok(void)
{
    return (spec){.stack = 1,
                  .link = 1,
                  .sample_attr = 1,
                  .profile_attr = 2,
                  .type_str = 1,
                  .n_values = 2,
                  .n_ts = 2,
                  .profile_id_len = 16,
                  .stack_loc = 1,
                  .loc_mapping = 1,
                  .line_func = 1,
                  .loc_attr = 1,
                  .map_file = 4,
                  .map_attr = 2,
                  .func_name = 3,
                  .link_trace_len = 16,
                  .attr_key = 5,
                  .attr_unit = 2,
                  .attr_val = 6,
                  .kvlist_key = 5,
                  .res_key = 5,
                  .scope_val = 6,
                  .string0 = "",
                  .string6 = "v"};
}

/* AnyValue{string_value_strindex = idx} */
static void av_strindex(pb *out, int32_t idx)
{
    *out = (pb){0};
    p_int(out, 8, idx);
}

static void kv_strindex(pb *out, int32_t key, int32_t val)
{
    pb v;
    av_strindex(&v, val);
    *out = (pb){0};
    p_int(out, 3, key);
    p_msg(out, 2, &v);
}

static void build_tables(pb *d, const spec *s)
{
    pb m = {0}, l = {0}, line = {0}, f = {0}, k = {0}, st = {0}, v = {0}, kv = {0}, kl = {0};
    const char *strs[] = {s->string0, "cpu", "ns", "main", "file.c", "k", s->string6};
    for (size_t i = 0; i < 7; i++)
        p_str(d, 5, strs[i]);
    if (s->map0_file) p_int(&m, 4, s->map0_file);
    p_msg(d, 1, &m);
    m = (pb){0};
    p_int(&m, 1, 0x1000);
    p_int(&m, 4, s->map_file);
    p_int(&m, 5, s->map_attr);
    p_msg(d, 1, &m);
    p_msg(d, 2, &(pb){0});
    p_int(&l, 1, s->loc_mapping);
    p_int(&line, 1, s->line_func);
    p_msg(&l, 3, &line);
    p_int(&l, 4, s->loc_attr);
    p_msg(d, 2, &l);
    p_msg(d, 3, &(pb){0});
    p_int(&f, 1, s->func_name);
    p_int(&f, 3, 4);
    p_msg(d, 3, &f);
    static const uint8_t zero[16], id[16] = {1, 2, 3};
    p_bytes(&k, 1, zero, 16);
    p_bytes(&k, 2, zero, 8);
    p_msg(d, 4, &k);
    k = (pb){0};
    p_bytes(&k, 1, id, s->link_trace_len);
    p_bytes(&k, 2, id, 8);
    p_msg(d, 4, &k);
    p_msg(d, 6, &(pb){0});
    p_int(&kv, 1, s->attr_key); /* a KeyValueAndUnit: key 1, value 2, unit 3 */
    av_strindex(&v, s->attr_val);
    p_msg(&kv, 2, &v);
    p_int(&kv, 3, s->attr_unit);
    p_msg(d, 6, &kv);
    kv_strindex(&kl, s->kvlist_key, 6); /* attribute 2: a kvlist value holding one KeyValue */
    v = (pb){0};
    pb list = {0};
    p_msg(&list, 1, &kl);
    p_msg(&v, 6, &list);
    kv = (pb){0};
    p_int(&kv, 1, 5);
    p_msg(&kv, 2, &v);
    p_msg(d, 6, &kv);
    if (s->stack0_loc) p_int(&st, 1, s->stack0_loc);
    p_msg(d, 7, &st);
    st = (pb){0};
    p_int(&st, 1, s->stack_loc);
    p_msg(d, 7, &st);
}

/* A profile; ok: the fixed valid one, else as s says. */
static void build_profile(pb *p, const spec *s, bool ok)
{
    pb vt = {0}, sm = {0}, packed = {0};
    p_int(&vt, 1, ok ? 1 : s->type_str);
    p_int(&vt, 2, 2);
    p_msg(p, 1, &vt);
    p_int(&sm, 1, ok ? 1 : s->stack);
    p_int(&sm, 2, ok ? 1 : s->sample_attr);
    p_int(&sm, 3, ok ? 1 : s->link);
    for (int i = 0; i < (ok ? 2 : s->n_values); i++)
        p_var(&packed, 300 + (uint64_t)i);
    if (packed.n) p_msg(&sm, 4, &packed);
    packed = (pb){0};
    for (int i = 0; i < (ok ? 2 : s->n_ts); i++)
        p_raw(&packed, "\x01\x02\x03\x04\x05\x06\x07\x08", 8);
    if (packed.n) p_msg(&sm, 5, &packed);
    p_msg(p, 2, &sm);
    p_msg(p, 2, &sm);
    static const uint8_t id[32] = {9};
    p_bytes(p, 7, id, ok ? 16 : s->profile_id_len);
    p_int(p, 11, ok ? 2 : s->profile_attr);
}

static void build(pb *out, const spec *s)
{
    pb d = {0}, rp = {0}, res = {0}, kv = {0}, sp = {0}, scope = {0}, prof = {0}, v = {0};
    build_tables(&d, s);
    *out = (pb){0};
    if (!s->dict_after) p_msg(out, 2, &d);
    p_str(&v, 1, "svc");
    p_str(&kv, 1, "service.name");
    p_msg(&kv, 2, &v);
    p_msg(&res, 1, &kv);
    kv_strindex(&kv, s->res_key, 6);
    p_msg(&res, 1, &kv);
    p_msg(&rp, 1, &res);
    p_str(&scope, 1, "scope");
    kv_strindex(&kv, 5, s->scope_val);
    p_msg(&scope, 3, &kv);
    p_msg(&sp, 1, &scope);
    build_profile(&prof, s, false);
    p_msg(&sp, 2, &prof);
    if (!s->one_profile) {
        prof = (pb){0};
        build_profile(&prof, s, true);
        p_msg(&sp, 2, &prof);
    }
    p_msg(&rp, 2, &sp);
    p_msg(out, 1, &rp);
    if (s->dict_after) p_msg(out, 2, &d);
}

/* Both paths agree on p, and the walk's verdict is want (rejected: profiles taken out). */
static void expect(const pb *p, int want, int64_t rejected, int line)
{
    char why[600] = "";
    int verdict = 0;
    int diff = wire_compare(p->b, p->n, &verdict, why, sizeof why);
    pc_wire_counts w;
    pc_error e = {0};
    pc_wire_check_profiles(p->b, p->n, PC_PROTO_MAX_DEPTH, &w, &e);
    if (diff || verdict != want || (want == 0 && w.rejected != rejected)) {
        pc_batch *b = NULL;
        pc_error de = {0};
        int64_t rej = 0;
        if (pc_batch_decode_proto(p->b, p->n, &b, &de) == 0) pc_batch_validate(b, &rej, &de);
        pc_batch_unref(b);
        fprintf(stderr, "line %d: %s; verdict %s (%s), want %s; rejected %lld; decoded: %s\n", line,
                why, pc_err_name(verdict), e.msg, pc_err_name(want), (long long)w.rejected, de.msg);
    }
    CHECK(diff == 0);
    CHECK_EQ_INT(verdict, want);
    if (want == 0) CHECK_EQ_INT(w.rejected, rejected);
}

#define EXPECT(s, want, rej)                                                                       \
    do {                                                                                           \
        pb p_;                                                                                     \
        build(&p_, &(s));                                                                          \
        expect(&p_, want, rej, __LINE__);                                                          \
    } while (0)

/* One field of the spec changed: the request must reach want. */
#define CASE(field, value, want, rej)                                                              \
    do {                                                                                           \
        spec s_ = spec_ok();                                                                       \
        s_.field = value;                                                                          \
        EXPECT(s_, want, rej);                                                                     \
    } while (0)

static void test_valid(void)
{
    spec s = spec_ok();
    EXPECT(s, 0, 0);
    s.dict_after = true; /* the tables' sizes are known only at the end */
    EXPECT(s, 0, 0);
    pb p;
    build(&p, &s);
    pc_wire_counts w;
    pc_error e = {0};
    CHECK_EQ_INT(pc_wire_check_profiles(p.b, p.n, PC_PROTO_MAX_DEPTH, &w, &e), 0);
    CHECK_EQ_INT(w.profiles, 2);
    CHECK_EQ_INT(w.samples, 4);
    CHECK_EQ_INT(w.kept_samples, 4);
    pb empty = {0};
    expect(&empty, 0, 0, __LINE__);
}

static void test_profile_rules(void)
{
    CASE(stack, 2, 0, 1); /* stack_table has 2 entries */
    CASE(stack, -1, 0, 1);
    CASE(link, 2, 0, 1);
    CASE(sample_attr, 3, 0, 1);
    CASE(profile_attr, 3, 0, 1);
    CASE(type_str, 7, 0, 1);
    CASE(profile_id_len, 5, 0, 1);
    CASE(n_values, 3, 0, 1);
    CASE(n_values, 0, 0, 0); /* timestamps only */
    CASE(n_ts, 0, 0, 0);
    CASE(dict_after, true, 0, 0);
    spec s = spec_ok();
    s.one_profile = true;
    s.stack = 2; /* every profile invalid: the request is */
    EXPECT(s, PC_EINVAL, 0);
}

static void test_dictionary_rules(void)
{
    CASE(stack_loc, 2, PC_EINVAL, 0);
    CASE(loc_mapping, 2, PC_EINVAL, 0);
    CASE(line_func, 2, PC_EINVAL, 0);
    CASE(loc_attr, 3, PC_EINVAL, 0);
    CASE(map_file, 7, PC_EINVAL, 0);
    CASE(map_attr, -5, PC_EINVAL, 0);
    CASE(func_name, 7, PC_EINVAL, 0);
    CASE(link_trace_len, 15, PC_EINVAL, 0);
    CASE(attr_key, 7, PC_EINVAL, 0);
    CASE(attr_unit, 7, PC_EINVAL, 0);
    CASE(attr_val, 7, PC_EINVAL, 0);
    CASE(kvlist_key, 7, PC_EINVAL, 0);
    CASE(res_key, 7, PC_EINVAL, 0);
    CASE(scope_val, 7, PC_EINVAL, 0);
    CASE(string0, "x", PC_EINVAL, 0);
    CASE(map0_file, 1, PC_EINVAL, 0);
    CASE(stack0_loc, 1, PC_EINVAL, 0);
    CASE(string6, "\xc3\x28", PC_EINVAL, 0); /* bad UTF-8 */
    CASE(string6, "\xed\xa0\x80", PC_EINVAL, 0);
}

static void test_wire_rules(void)
{
    pb p = {0};
    p_int(&p, 3, 1); /* an unknown field is kept */
    expect(&p, 0, 0, __LINE__);
    p = (pb){0};
    p_raw(&p, "\x00\x01", 2); /* field 0 */
    expect(&p, PC_EPROTO, 0, __LINE__);
    p = (pb){0};
    p_raw(&p, "\x88\x80\x80\x80\x80\x00\x01", 7); /* field 1 in a 6-byte tag */
    expect(&p, PC_EPROTO, 0, __LINE__);
    p = (pb){0};
    p_raw(&p, "\x12\x80\x80\x80\x80\x80\x00", 7); /* an empty dictionary, 6-byte length */
    expect(&p, PC_EPROTO, 0, __LINE__);
    p = (pb){0};
    p_int(&p, 2, 1); /* the dictionary as a varint */
    expect(&p, PC_EPROTO, 0, __LINE__);
    p = (pb){0};
    p_raw(&p, "\x0b\x0c", 2); /* a group */
    expect(&p, PC_EPROTO, 0, __LINE__);
    pb d = {0}, st = {0};
    p_raw(&st, "\x0a\x02\x81\x81", 4); /* a packed run cut short */
    p_msg(&d, 7, &st);
    p = (pb){0};
    p_msg(&p, 2, &d);
    expect(&p, PC_EPROTO, 0, __LINE__);
}

/* AnyValue nested n deep in a resource attribute. */
static void deep(pb *out, int n)
{
    pb v = {0};
    p_str(&v, 1, "leaf");
    for (int i = 0; i < n; i++) {
        pb arr = {0}, nv = {0};
        p_msg(&arr, 1, &v);
        p_msg(&nv, 5, &arr);
        v = nv;
    }
    pb kv = {0}, res = {0}, rp = {0};
    p_str(&kv, 1, "k");
    p_msg(&kv, 2, &v);
    p_msg(&res, 1, &kv);
    p_msg(&rp, 1, &res);
    *out = (pb){0};
    p_msg(out, 1, &rp);
}

static void test_nesting_and_merges(void)
{
    pb p;
    deep(&p, 20);
    expect(&p, 0, 0, __LINE__);
    deep(&p, 40);
    expect(&p, PC_EPROTO, 0, __LINE__);
    /* a KeyValue's value twice, unset both times: protobuf-c cannot merge them */
    pb kv = {0}, res = {0}, rp = {0};
    p_str(&kv, 1, "k");
    p_msg(&kv, 2, &(pb){0});
    p_msg(&kv, 2, &(pb){0});
    p_msg(&res, 1, &kv);
    p_msg(&rp, 1, &res);
    p = (pb){0};
    p_msg(&p, 1, &rp);
    expect(&p, PC_EPROTO, 0, __LINE__);
    /* attribute_table[0]: empty bytes then unset merge to unset, which is the zero element */
    pb d = {0}, a = {0}, v = {0};
    p_bytes(&v, 7, "", 0);
    p_msg(&a, 2, &v);
    p_msg(&a, 2, &(pb){0});
    p_msg(&d, 6, &a);
    p = (pb){0};
    p_msg(&p, 2, &d);
    expect(&p, 0, 0, __LINE__);
    /* and so do a string, but not a string index */
    for (int k = 0; k < 2; k++) {
        d = a = v = (pb){0};
        if (k)
            p_int(&v, 8, 0);
        else
            p_str(&v, 1, "x");
        p_msg(&a, 2, &v);
        p_msg(&a, 2, &(pb){0});
        p_msg(&d, 6, &a);
        p = (pb){0};
        p_msg(&p, 2, &d);
        expect(&p, k ? PC_EINVAL : 0, 0, __LINE__);
    }
    /* two dictionaries: their tables concatenate, so index 1 exists */
    pb d1 = {0}, d2 = {0};
    p_str(&d1, 5, "");
    p_str(&d2, 5, "x");
    p_msg(&d1, 7, &(pb){0});
    pb st = {0};
    p_int(&st, 1, 0);
    p_msg(&d2, 7, &st);
    p = (pb){0};
    p_msg(&p, 2, &d1);
    p_msg(&p, 2, &d2);
    expect(&p, 0, 0, __LINE__);
}

/* The valid request with one more ResourceProfiles holding prof (a Profile), then, if d is
 * not NULL, one more dictionary occurrence. */
static void with_extra(pb *out, const pb *prof, const pb *d, bool dict_after)
{
    spec s = spec_ok();
    s.dict_after = dict_after;
    build(out, &s);
    pb sp = {0}, rp = {0};
    p_msg(&sp, 2, prof);
    p_msg(&rp, 2, &sp);
    p_msg(out, 1, &rp);
    if (d) p_msg(out, 2, d);
}

/* A profile of one sample whose stack_index occurs as a then b; n_values and n_ts elements
 * (values in two packed runs). */
static void sample_profile(pb *prof, int32_t a, int32_t b, int n_values, int n_ts)
{
    pb sm = {0}, run = {0};
    p_int(&sm, 1, a);
    p_int(&sm, 1, b);
    for (int i = 0; i < n_values; i++) {
        run = (pb){0};
        p_var(&run, 7);
        p_msg(&sm, 4, &run);
    }
    run = (pb){0};
    for (int i = 0; i < n_ts; i++)
        p_raw(&run, "\x01\x02\x03\x04\x05\x06\x07\x08", 8);
    if (run.n) p_msg(&sm, 5, &run);
    *prof = (pb){0};
    p_msg(prof, 2, &sm);
}

/* wire_check.c's one pass (pass 2 skipped when the notes prove validate.c finds nothing): an
 * index equal to a table's size, the table grown by a later dictionary, broken rules an
 * occurrence later overwrites (last occurrence wins) and the other way round. */
static void test_one_pass(void)
{
    for (int after = 0; after < 2; after++) {
        CASE(dict_after, after, 0, 0);
        spec s = spec_ok();
        s.dict_after = after;
        s.stack = 2; /* == the stack table's size */
        EXPECT(s, 0, 1);
        s = spec_ok();
        s.dict_after = after;
        s.stack_loc = 2; /* == the location table's size, in the dictionary */
        EXPECT(s, PC_EINVAL, 0);
        /* a second dictionary makes index 2 exist: tables split across occurrences */
        pb d = {0}, st = {0}, prof, p;
        p_int(&st, 1, 1);
        p_msg(&d, 7, &st);
        p_str(&d, 5, "more"); /* not element 0 of the string table: need not be empty */
        sample_profile(&prof, 1, 2, 1, 1);
        with_extra(&p, &prof, &d, after);
        expect(&p, 0, 0, __LINE__);
        with_extra(&p, &prof, NULL, after); /* without it: 2 is out of range */
        expect(&p, 0, 1, __LINE__);
        sample_profile(&prof, 1, 3, 1, 1); /* 3 == the grown table's size */
        with_extra(&p, &prof, &d, after);
        expect(&p, 0, 1, __LINE__);
    }
    pb prof, p;
    sample_profile(&prof, -1, 1, 2, 2); /* the last stack_index counts */
    with_extra(&p, &prof, NULL, false);
    expect(&p, 0, 0, __LINE__);
    sample_profile(&prof, 9, 1, 2, 2);
    with_extra(&p, &prof, NULL, true);
    expect(&p, 0, 0, __LINE__);
    sample_profile(&prof, 1, -1, 2, 2);
    with_extra(&p, &prof, NULL, false);
    expect(&p, 0, 1, __LINE__);
    sample_profile(&prof, 1, 1, 3, 2); /* values in three runs, two timestamps */
    with_extra(&p, &prof, NULL, false);
    expect(&p, 0, 1, __LINE__);
    sample_profile(&prof, 1, 1, 0, 2);
    with_extra(&p, &prof, NULL, false);
    expect(&p, 0, 0, __LINE__);
    static const uint8_t id[32] = {7}; /* up to 17 bytes are read */
    for (int k = 0; k < 2; k++) {      /* profile_id: 5 then 16 bytes (valid), 16 then 5 */
        sample_profile(&prof, 1, 1, 1, 1);
        p_bytes(&prof, 7, id, k ? 16 : 5);
        p_bytes(&prof, 7, id, k ? 5 : 16);
        with_extra(&p, &prof, NULL, false);
        expect(&p, 0, k, __LINE__);
    }
    for (int k = 0; k < 4; k++) { /* a link's trace_id (k < 2) or span_id: the last counts */
        pb d = {0}, l = {0};
        unsigned num = k < 2 ? 1 : 2;
        size_t good = k < 2 ? 16 : 8;
        bool ok = k % 2 == 0;
        p_bytes(&l, 1, id, 16);
        p_bytes(&l, 2, id, 8);
        p_bytes(&l, num, id, ok ? good : good - 1);
        p_bytes(&l, num, id, ok ? good : good - 1);
        p_bytes(&l, num, id, ok ? good : good + 1);
        if (ok) p_bytes(&l, num, id, good);
        p_msg(&d, 4, &l);
        sample_profile(&prof, 1, 1, 1, 1);
        with_extra(&p, &prof, &d, false);
        expect(&p, ok ? 0 : PC_EINVAL, 0, __LINE__);
    }
    for (int k = 0; k < 2; k++) { /* an AnyValue's oneof: the last member counts */
        pb v = {0}, kv = {0}, res = {0}, rp = {0};
        if (k) p_int(&v, 3, 5);
        p_int(&v, 8, 9); /* string 9: out of range */
        if (!k) p_int(&v, 3, 5);
        p_int(&kv, 3, 9); /* key_strindex 9, then 5 */
        p_int(&kv, 3, 5);
        p_msg(&kv, 2, &v);
        p_msg(&res, 1, &kv);
        p_msg(&rp, 1, &res);
        spec s = spec_ok();
        build(&p, &s);
        p_msg(&p, 1, &rp);
        expect(&p, k ? PC_EINVAL : 0, 0, __LINE__);
    }
}

/* Every prefix of a valid request, and every byte of it changed three ways. */
static void test_prefixes_and_mutations(void)
{
    spec s = spec_ok();
    pb p, q;
    build(&p, &s);
    char why[600];
    int bad = 0;
    for (size_t n = 0; n <= p.n; n++)
        bad += wire_compare(p.b, n, NULL, why, sizeof why);
    static const uint8_t flips[] = {0x01, 0x80, 0xff};
    for (size_t i = 0; i < p.n; i++)
        for (size_t k = 0; k < sizeof flips; k++) {
            q = p;
            q.b[i] ^= flips[k];
            if (wire_compare(q.b, q.n, NULL, why, sizeof why)) {
                if (!bad++) fprintf(stderr, "byte %zu ^ 0x%02x: %s\n", i, flips[k], why);
            }
        }
    CHECK_EQ_INT(bad, 0);
}

/* What wire_check.c assumes of the schema (protobuf-c's descriptors, so a new .proto shows): a
 * message has at most 16 fields (MERGE_MAX) and one oneof; a singular message field's type
 * holds no singular message field outside a oneof (merges then go one level deep); AnyValue's
 * fields are its oneof's, numbered 1 to 8. */
static void check_schema(const ProtobufCMessageDescriptor *d,
                         const ProtobufCMessageDescriptor **seen, size_t *n)
{
    for (size_t i = 0; i < *n; i++)
        if (seen[i] == d) return;
    if (*n == 64) abort();
    seen[(*n)++] = d;
    CHECK(d->n_fields <= 16);
    unsigned oneofs = 0, last_q = 0;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        bool oneof = (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) != 0;
        if (oneof && f->quantifier_offset != last_q) {
            oneofs++;
            last_q = f->quantifier_offset;
        }
        if (f->type != PROTOBUF_C_TYPE_MESSAGE) continue;
        if (f->label != PROTOBUF_C_LABEL_REPEATED && !oneof) {
            const ProtobufCMessageDescriptor *m = f->descriptor;
            for (unsigned j = 0; j < m->n_fields; j++)
                CHECK(m->fields[j].type != PROTOBUF_C_TYPE_MESSAGE ||
                      m->fields[j].label == PROTOBUF_C_LABEL_REPEATED ||
                      (m->fields[j].flags & PROTOBUF_C_FIELD_FLAG_ONEOF));
        }
        check_schema(f->descriptor, seen, n);
    }
    CHECK(oneofs <= 1);
}

static void test_schema_assumptions(void)
{
    const ProtobufCMessageDescriptor *seen[64];
    size_t n = 0;
    check_schema(PC_REQUEST_DESC, seen, &n);
    CHECK(n >= 15);
    const ProtobufCMessageDescriptor *av = &opentelemetry__proto__common__v1__any_value__descriptor;
    CHECK_EQ_INT(av->n_fields, 8);
    for (unsigned i = 0; i < av->n_fields; i++) {
        CHECK_EQ_INT(av->fields[i].id, i + 1);
        CHECK(av->fields[i].flags & PROTOBUF_C_FIELD_FLAG_ONEOF);
    }
    /* wire_check.c's note_end: Sample's values and timestamps are its fields 4 and 5 at 3, 4 */
    const ProtobufCMessageDescriptor *sd =
        &opentelemetry__proto__profiles__v1development__sample__descriptor;
    CHECK(sd->n_fields >= 5 && sd->fields[3].id == 4 && sd->fields[4].id == 5);
    /* wire_check.c's av_one: a merge drops string_value (a default) and empty bytes_value */
    CHECK(av->fields[0].default_value != NULL);
    CHECK(av->fields[6].default_value == NULL);
}

/* A batch of checked bytes (pc_batch_new_wire): counted without a decode, decoded once however
 * many threads ask at once, into the model the decoded path makes of the same bytes. */
static void *ask_model(void *b)
{
    return pc_batch_req(b);
}

static void test_lazy_batch(void)
{
    spec s = spec_ok();
    pb p;
    build(&p, &s);
    pc_batch *b = pc_batch_new_wire(p.b, p.n, 4, 2, 1 << 20);
    CHECK(pc_batch_is_wire(b));
    CHECK_EQ_INT(pc_batch_items(b), 4);
    CHECK(pc_batch_is_wire(b)); /* counting decoded nothing */
    pthread_t t[4];
    void *got[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, ask_model, b);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], &got[i]);
    CHECK(!pc_batch_is_wire(b));
    for (int i = 0; i < 4; i++)
        CHECK(got[i] == got[0] && got[i] != NULL);
    pc_batch *d = NULL;
    pc_error e = {0};
    CHECK_EQ_INT(pc_batch_decode_proto(p.b, p.n, &d, &e), 0);
    pc_buf x = {0}, y = {0};
    pc_batch_encode_proto(b, &x);
    pc_batch_encode_proto(d, &y);
    CHECK(x.len == y.len && x.len > 0 && !memcmp(x.data, y.data, x.len));
    CHECK_EQ_INT(pc_batch_counts(b).samples, 4);
    pc_buf_free(&x);
    pc_batch_unref(b);
    /* the bytes taken, not copied (a receiver's inflated buffer, with room to spare): the same
     * model, the block freed with the batch */
    uint8_t *own = malloc(p.n + 100000);
    memcpy(own, p.b, p.n);
    b = pc_batch_take_wire(own, p.n, p.n + 100000, 4, 2, 1 << 20);
    CHECK_EQ_INT(pc_batch_items(b), 4);
    size_t wl = 0;
    const uint8_t *wb = pc_batch_wire_bytes(b, &wl);
    CHECK(wl == p.n && !memcmp(wb, p.b, p.n));
    CHECK(pc_arena_size(b->arena) >= p.n); /* the block counts as the batch's memory */
    pc_batch_encode_proto(b, &x);
    CHECK(x.len == y.len && !memcmp(x.data, y.data, x.len));
    pc_buf_free(&x);
    pc_buf_free(&y);
    pc_batch_unref(d);
    pc_batch_unref(b);
    /* bytes the decode refuses (never handed over by a receiver): an empty request, no crash */
    b = pc_batch_new_wire((const uint8_t *)"\x0a\x05", 2, 0, 0, 1 << 20);
    CHECK(pc_batch_req(b) != NULL);
    CHECK_EQ_INT(pc_batch_counts(b).profiles, 0);
    pc_batch_unref(b);
}

/* A sample (fields as the bytes of sm) in a profile of its own, after a valid request. */
static void expect_sample(const pb *sm, int want, int64_t rej, int line)
{
    pb prof = {0}, out;
    p_msg(&prof, 2, sm);
    with_extra(&out, &prof, NULL, false);
    expect(&out, want, rej, line);
}

/* A later dictionary with one element (el) of table num, after a valid request. */
static void expect_elem(unsigned num, const pb *el, int want, int line)
{
    pb d = {0}, out, prof = {0};
    p_msg(&d, num, el);
    with_extra(&out, &prof, &d, false);
    expect(&out, want, 0, line);
}

/* The check's verdict, and its cost when it takes the request, equal the scan's at every depth
 * limit below max. */
static void same_at_depths(const pb *req, int max)
{
    for (int depth = 0; depth < max; depth++) {
        pc_proto_scan scan = {0};
        pc_wire_counts w;
        pc_error e = {0}, se = {0};
        int want = pc_proto_scan_message(PC_REQUEST_DESC, req->b, req->n, depth, &scan, &se);
        int got = pc_wire_check_profiles(req->b, req->n, depth, &w, &e);
        CHECK_EQ_INT(got, want);
        if (want == 0) CHECK(w.cost == scan.cost);
    }
}

/* The fast path's Location and Line at each depth limit: the scan's verdict and cost. */
static void test_fast_depths(void)
{
    pb line = {0}, loc = {0}, d = {0}, req = {0};
    p_int(&line, 1, 0);
    p_msg(&d, 2, &loc); /* element 0: the zero location */
    p_msg(&loc, 3, &line);
    p_msg(&d, 2, &loc);
    p_msg(&req, 2, &d);
    same_at_depths(&req, 6);
}

/* fast1's cost model from its static table (element sizes, message sizes): runs of 3 and more
 * elements, where an element of 4 bytes and one of 8 give different costs. */
static void test_fast_costs(void)
{
    pb sm = {0}, run = {0}, ts = {0}, el = {0}, line = {0};
    for (int i = 0; i < 5; i++) {
        p_var(&run, 0);
        p_raw(&ts, "\x01\x02\x03\x04\x05\x06\x07\x08", 8);
    }
    p_int(&sm, 1, 1);
    p_msg(&sm, 2, &run); /* attribute indices, int32 */
    p_msg(&sm, 4, &run); /* values, int64 */
    p_msg(&sm, 5, &ts);  /* timestamps, fixed64 */
    p_int(&sm, 3, 0);
    expect_sample(&sm, 0, 0, __LINE__);
    p_msg(&el, 1, &run); /* a stack's location indices, int32 */
    expect_elem(7, &el, 0, __LINE__);
    el = (pb){0};
    p_int(&line, 1, 0);
    p_int(&line, 2, 7);
    for (int i = 0; i < 3; i++) /* three lines: an array of pointers */
        p_msg(&el, 3, &line);
    p_msg(&el, 4, &run); /* attribute indices */
    p_int(&el, 2, 0x1000);
    expect_elem(2, &el, 0, __LINE__);
    el = (pb){0};
    for (unsigned f = 1; f <= 4; f++)
        p_int(&el, f, 0);
    expect_elem(3, &el, 0, __LINE__); /* a function */
}

/* The parents' fast path (Profile's samples, the dictionary's locations, functions, stacks and
 * strings) and what it leaves to the generic walk. */
static void test_parent_fast_path(void)
{
    pb el = {0}, prof = {0}, p, sm = {0};
    p_raw(&el, "hello", 5);
    expect_elem(5, &el, 0, __LINE__); /* a string */
    expect_elem(5, &(pb){0}, 0, __LINE__);
    p_raw(&el, "\xff", 1);
    expect_elem(5, &el, PC_EINVAL, __LINE__); /* not UTF-8: the generic path's refusal */
    p_int(&sm, 1, 1);
    p_msg(&prof, 2, &sm);
    p_msg(&prof, 2, &sm);
    p_raw(&prof, "\x92\x00\x02\x08\x01", 5); /* a third sample behind a two-byte tag */
    with_extra(&p, &prof, NULL, false);
    expect(&p, 0, 0, __LINE__);
    p_raw(&prof, "\x12\x80\x80\x80\x80\x80\x00", 7); /* an empty sample, 6-byte length */
    with_extra(&p, &prof, NULL, false);
    expect(&p, PC_EPROTO, 0, __LINE__);
    prof = (pb){0};
    p_int(&prof, 2, 1); /* samples as a varint: protobuf-c refuses it */
    with_extra(&p, &prof, NULL, false);
    expect(&p, PC_EPROTO, 0, __LINE__);
    el = (pb){0};
    pb d = {0};
    p_int(&d, 2, 1); /* a location as a varint */
    with_extra(&p, &(pb){0}, &d, false);
    expect(&p, PC_EPROTO, 0, __LINE__);
    el = (pb){0};
    p_int(&el, 9, 1); /* a stack with an unknown field: fast1 bails out */
    expect_elem(7, &el, 0, __LINE__);
    el = (pb){0};
    p_raw(&el, "\x0a\x02\x01\x80", 4); /* a run cut short: fast1 bails out, the walk refuses */
    expect_elem(7, &el, PC_EPROTO, __LINE__);
}

/* A request with one sample in a profile and a dictionary with a string, a stack and a function
 * at each depth limit: the scan's verdict and cost (the parents' fast path needs depth for the
 * child). */
static void test_parent_fast_depths(void)
{
    pb sm = {0}, prof = {0}, sp = {0}, rp = {0}, d = {0}, st = {0}, fn = {0}, req = {0};
    p_int(&sm, 1, 0);
    p_msg(&prof, 2, &sm);
    p_msg(&sp, 2, &prof);
    p_msg(&rp, 2, &sp);
    p_msg(&req, 1, &rp);
    p_str(&d, 5, "");
    p_str(&d, 5, "x");
    p_msg(&d, 7, &st);
    p_raw(&st, "\x0a\x01\x00", 3);
    p_msg(&d, 7, &st);
    p_msg(&d, 3, &fn);
    p_int(&fn, 4, 12);
    p_msg(&d, 3, &fn);
    p_msg(&req, 2, &d);
    same_at_depths(&req, 8);
    expect(&req, 0, 0, __LINE__);
}

/* wire_check.c's leaf fast path (Sample, Stack, Line, Function) and each of its bail-outs to
 * the generic walk: both must agree with the decoded path, cost included (wire_compare). */
static void test_fast_path(void)
{
    pb sm = {0}, run = {0}, el = {0}, line = {0};
    for (int i = 0; i < 3; i++)
        p_var(&run, 200 + (uint64_t)i * 50);
    p_int(&sm, 1, 1);
    p_msg(&sm, 2, &run); /* attribute indices 200.. : out of range */
    expect_sample(&sm, 0, 1, __LINE__);
    sm = (pb){0};
    p_int(&sm, 1, 1);
    p_msg(&sm, 4, &run);
    p_msg(&sm, 4, &run); /* two packed runs of values, 6 in all */
    p_int(&sm, 99, 5);   /* an unknown field: kept, and costed */
    expect_sample(&sm, 0, 0, __LINE__);
    sm = (pb){0};
    p_int(&sm, 4, 7); /* values not packed */
    p_int(&sm, 4, 8);
    p_raw(&sm,
          "\x2a\x08"
          "12345678",
          10); /* one timestamp: 2 values, so invalid */
    expect_sample(&sm, 0, 1, __LINE__);
    sm = (pb){0};
    p_bytes(&sm, 1, "\x01", 1); /* stack_index of wire type 2: protobuf-c refuses it */
    expect_sample(&sm, PC_EPROTO, 0, __LINE__);
    sm = (pb){0};
    p_bytes(&sm, 4, "\x05\x80", 2); /* a packed run cut short */
    expect_sample(&sm, PC_EPROTO, 0, __LINE__);
    sm = (pb){0};
    p_bytes(&sm, 5, "1234567", 7); /* fixed64 timestamps of 7 bytes: the scan refuses them */
    expect_sample(&sm, PC_EPROTO, 0, __LINE__);
    sm = (pb){0};
    p_raw(&sm, "\x88\x00\x01", 3); /* stack_index 1 behind a two-byte tag */
    expect_sample(&sm, 0, 0, __LINE__);
    p_raw(&sm, "\x0a\x80\x80\x80\x80\x80\x00", 7); /* an empty run with a 6-byte length */
    expect_sample(&sm, PC_EPROTO, 0, __LINE__);
    p_raw(&el, "\x0a\x02\x01\x01", 4); /* location indices 1, 1 */
    expect_elem(7, &el, 0, __LINE__);  /* a stack */
    p_int(&el, 1, 1);                  /* and a location index not packed */
    expect_elem(7, &el, 0, __LINE__);
    p_int(&line, 1, 1);
    p_int(&line, 2, 42);
    p_int(&line, 3, 3);
    el = (pb){0};
    p_msg(&el, 3, &line);
    expect_elem(2, &el, 0, __LINE__); /* a location with a line */
    p_int(&el, 1, 1);
    p_raw(&el, "\x22\x02\x01\x02", 4); /* packed attribute indices 1, 2 */
    p_int(&el, 2, 0x401000);
    expect_elem(2, &el, 0, __LINE__);
    p_int(&el, 4, 1); /* an attribute index not packed */
    expect_elem(2, &el, 0, __LINE__);
    p_raw(&el, "\x1a\x02\x08\x80", 4); /* a line whose function index is cut short */
    expect_elem(2, &el, PC_EPROTO, __LINE__);
    p_int(&line, 7, 1); /* an unknown field in the line */
    el = (pb){0};
    p_msg(&el, 3, &line);
    expect_elem(2, &el, 0, __LINE__);
    el = (pb){0};
    p_int(&el, 1, 6);
    p_int(&el, 3, 5);
    p_int(&el, 4, 10);
    expect_elem(3, &el, 0, __LINE__); /* a function */
    p_bytes(&el, 4, "", 0);           /* start_line of wire type 2 */
    expect_elem(3, &el, PC_EPROTO, __LINE__);
}

/* An attribute table entry (KeyValueAndUnit: key 1, unit 2) whose value is av. */
static void kvu_of(pb *el, const pb *av)
{
    *el = (pb){0};
    p_int(el, 1, 1);
    p_msg(el, 2, av);
    p_int(el, 3, 2);
}

/* An attribute table entry whose AnyValue is the n bytes at raw: both paths agree. */
static void expect_av(const char *raw, size_t n, int want, int line)
{
    pb av = {0}, el;
    p_raw(&av, raw, n);
    kvu_of(&el, &av);
    expect_elem(6, &el, want, line);
}
#define AV(lit, want) expect_av(lit, sizeof lit - 1, want, __LINE__)

/* wire_fast.c's attribute table entries with a scalar AnyValue and each bail-out to the generic
 * walk: both must agree with the decoded path, cost included (wire_compare). */
static void test_attr_fast_path(void)
{
    AV("\x0a\x01v", 0); /* a string */
    /* bool, a 10-byte int and a double: the oneof's last member */
    AV("\x10\x01\x18\xfb\xff\xff\xff\xff\xff\xff\xff\xff\x01\x21\0\0\0\0\0\0\xf0\x3f", 0);
    AV("\x40\x01", 0);             /* string_value_strindex */
    AV("\x40\xe8\x07", PC_EINVAL); /* 1000: out of range */
    AV("\x0a\x01\xff", PC_EINVAL); /* not UTF-8: the generic path's refusal */
    AV("\x21\x00\x00", PC_EPROTO); /* a double cut short */
    AV("\x1a\x01\x01", PC_EPROTO); /* int_value of wire type 2 */
    AV("\x3a\x02"
       "ab\x48\x01",
       0); /* bytes_value and an unknown field: the generic walk's */
    pb av = {0}, el;
    p_str(&av, 1, "first");
    kvu_of(&el, &av);
    p_msg(&el, 2, &(pb){0}); /* a second value, empty: merged, the string lost */
    expect_elem(6, &el, 0, __LINE__);
    p_raw(&el, "\x18\x80\x01", 3); /* a unit of two bytes: 128, out of range */
    expect_elem(6, &el, PC_EINVAL, __LINE__);
}

/* wire_fast.c's mapping table entries and their bail-outs, as test_attr_fast_path. */
static void test_mapping_fast_path(void)
{
    pb el = {0};
    p_int(&el, 1, 0x400000);
    p_int(&el, 2, 0x500000);
    p_int(&el, 3, 0);
    p_int(&el, 4, 1);
    p_raw(&el, "\x2a\x02\x01\x01", 4); /* packed attribute indices 1, 1 */
    expect_elem(1, &el, 0, __LINE__);
    p_int(&el, 5, 1); /* an attribute index not packed */
    expect_elem(1, &el, 0, __LINE__);
    el = (pb){0};
    p_raw(&el, "\x2a\x05\x01\x01\x01\x01\x01", 7); /* 5 indices: int32's array cost */
    expect_elem(1, &el, 0, __LINE__);
    p_int(&el, 4, 5000); /* a file name out of range */
    expect_elem(1, &el, PC_EINVAL, __LINE__);
    el = (pb){0};
    p_raw(&el, "\x2a\x01\x80", 3); /* a run cut short */
    expect_elem(1, &el, PC_EPROTO, __LINE__);
    el = (pb){0};
    p_raw(&el, "\x09\x00\x00\x00\x00\x00\x00\x00\x00", 9); /* memory_start, wire type 1 */
    expect_elem(1, &el, PC_EPROTO, __LINE__);
}

/* A dictionary with mappings and attributes (element 0 and one more) at each depth limit: the
 * scan's verdict and cost (an attribute's value is one level below it). */
static void test_attr_fast_depths(void)
{
    pb av = {0}, el, mp = {0}, d = {0}, req = {0};
    p_msg(&d, 6, &(pb){0});
    p_str(&av, 1, "x");
    kvu_of(&el, &av);
    p_str(&d, 5, "");
    p_str(&d, 5, "k");
    p_str(&d, 5, "u");
    p_msg(&d, 6, &el);
    p_msg(&d, 1, &mp);
    p_int(&mp, 1, 4096);
    p_int(&mp, 5, 1);
    p_msg(&d, 1, &mp);
    p_msg(&req, 2, &d);
    same_at_depths(&req, 8);
    expect(&req, 0, 0, __LINE__);
}

int main(void)
{
    RUN(test_schema_assumptions);
    RUN(test_valid);
    RUN(test_profile_rules);
    RUN(test_dictionary_rules);
    RUN(test_wire_rules);
    RUN(test_nesting_and_merges);
    RUN(test_one_pass);
    RUN(test_fast_path);
    RUN(test_fast_depths);
    RUN(test_fast_costs);
    RUN(test_parent_fast_path);
    RUN(test_parent_fast_depths);
    RUN(test_attr_fast_path);
    RUN(test_mapping_fast_path);
    RUN(test_attr_fast_depths);
    RUN(test_prefixes_and_mutations);
    RUN(test_lazy_batch);
    return check_report();
}
