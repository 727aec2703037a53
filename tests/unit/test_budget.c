/* Decode budgets (src/base/budget.c) and the pre-unpack scan (src/pdata/proto_scan.c): the scan's
 * estimate is never below what protobuf-c really allocates (measured by the arena's charges) for
 * real Go profiles and hostile shapes (empty-sample bombs, repeated singular submessages that
 * protobuf-c merges, unknown fields); a request over its limit is refused before allocating;
 * the process-wide cap refuses as busy; UTF-8 is checked in every string field; the JSON
 * decoder's estimate covers jansson's tree, big integers are accepted and duplicates refused. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/budget.h"
#include "base/utf8.h"
#include "check.h"
#include "payload.h"
#include "pdata/json.h"
#include "pdata/pdata.h"
#include "formats/pprof.h"
#include "pdata/proto_scan.h"
#include "testdata.h"

/* Decode with an unlimited budget; the scan's estimate must cover the real peak. */
static void check_estimate(const char *what, pc_signal sig, const uint8_t *data, size_t len)
{
    pc_proto_scan scan;
    CHECK_EQ_INT(pc_proto_scan_message(pc_signal_infos[sig].request, data, len, PC_PROTO_MAX_DEPTH,
                                       &scan, NULL),
                 0);
    pc_budget b;
    pc_budget_init(&b, 0);
    pc_batch *out = NULL;
    pc_error err = {0};
    CHECK_EQ_INT(pc_batch_decode(sig, data, len, false, &b, &out, &err), 0);
    fprintf(stderr, "  %-36s wire %9zu  estimate %10zu  peak %10zu\n", what, len, scan.cost,
            b.peak);
    CHECK(b.peak > 0);
    CHECK(b.peak <= scan.cost);
    CHECK_EQ_INT(b.misses, 0);
    pc_batch_end_budget(out);
    CHECK_EQ_INT(b.used, 0);
    pc_budget_release(&b);
    pc_batch_unref(out);
    CHECK_EQ_INT(pc_budget_in_flight(), 0);
}

static pc_batch *go_profile_batch(const char *file)
{
    pc_batch *b = NULL;
    CHECK_EQ_INT(read_pprof_batch(file, NULL, &b), 0);
    return b;
}

static void test_estimate_real_profiles(void)
{
    const char *files[] = {"go-cpu.pb.gz", "go-heap.pb.gz"};
    for (size_t i = 0; i < 2; i++) {
        pc_batch *b = go_profile_batch(files[i]);
        if (!b) continue;
        pc_buf wire = {0};
        pc_batch_encode_proto(b, &wire);
        check_estimate(files[i], PC_SIGNAL_PROFILES, wire.data, wire.len);
        pc_buf_free(&wire);
        pc_batch_unref(b);
    }
}

/* ExportProfilesServiceRequest{resource_profiles{scope_profiles{profiles{samples: n x {}}}}} */
static void empty_sample_bomb(pc_buf *out, size_t n)
{
    pc_buf prof = {0}, sp = {0}, rp = {0};
    for (size_t i = 0; i < n; i++)
        pb_put_len(&prof, 2, "", 0);         /* Profile.samples (2): an empty Sample */
    pb_put_len(&sp, 2, prof.data, prof.len); /* ScopeProfiles.profiles (2) */
    pb_put_len(&rp, 2, sp.data, sp.len);     /* ResourceProfiles.scope_profiles (2) */
    pb_put_len(out, 1, rp.data, rp.len);     /* request.resource_profiles (1) */
    pc_buf_free(&prof), pc_buf_free(&sp), pc_buf_free(&rp);
}

static void test_estimate_hostile_shapes(void)
{
    pc_buf bomb = {0};
    empty_sample_bomb(&bomb, 200000);
    check_estimate("200k empty samples", PC_SIGNAL_PROFILES, bomb.data, bomb.len);

    /* the singular `dictionary` (2) sent 300 times, each with 50 strings: protobuf-c merges each
     * occurrence into new arrays holding all of them so far (quadratic) */
    pc_buf dict = {0}, req = {0};
    for (int i = 0; i < 50; i++)
        pb_put_len(&dict, 5, "symbol", 6); /* ProfilesDictionary.string_table (5) */
    for (int k = 0; k < 300; k++)
        pb_put_len(&req, 2, dict.data, dict.len);
    check_estimate("dictionary x300 (merged)", PC_SIGNAL_PROFILES, req.data, req.len);

    /* unknown fields of every wire type */
    pc_buf unk = {0};
    for (int i = 0; i < 5000; i++) {
        pb_put_varint(&unk, (uint64_t)(100 + i % 7) << 3 | 0);
        pb_put_varint(&unk, 300);
        pb_put_len(&unk, 200, "abcdefgh", 8);
        pb_put_varint(&unk, (uint64_t)201 << 3 | 5);
        pc_buf_append(&unk, "1234", 4);
    }
    check_estimate("15k unknown fields", PC_SIGNAL_PROFILES, unk.data, unk.len);

    /* a traces request: spans with packed-less repeated fields and nested attributes */
    pc_buf spans = {0}, ss = {0}, rs = {0}, treq = {0};
    for (int i = 0; i < 2000; i++) {
        pc_buf span = {0}, kv = {0}, av = {0};
        pb_put_len(&span, 1, "0123456789abcdef", 16); /* trace_id */
        pb_put_len(&span, 2, "01234567", 8);          /* span_id */
        pb_put_len(&span, 5, "GET /", 5);             /* name */
        pb_put_len(&av, 1, "value", 5);               /* AnyValue.string_value */
        pb_put_len(&kv, 1, "http.method", 11);        /* KeyValue.key */
        pb_put_len(&kv, 2, av.data, av.len);          /* KeyValue.value */
        pb_put_len(&span, 9, kv.data, kv.len);        /* Span.attributes */
        pb_put_len(&spans, 2, span.data, span.len);   /* ScopeSpans.spans */
        pc_buf_free(&span), pc_buf_free(&kv), pc_buf_free(&av);
    }
    pb_put_len(&ss, 2, spans.data, spans.len); /* ResourceSpans.scope_spans */
    pb_put_len(&treq, 1, ss.data, ss.len);     /* request.resource_spans */
    check_estimate("2000 spans", PC_SIGNAL_TRACES, treq.data, treq.len);
    pc_buf_free(&bomb), pc_buf_free(&dict), pc_buf_free(&req), pc_buf_free(&unk);
    pc_buf_free(&spans), pc_buf_free(&ss), pc_buf_free(&rs), pc_buf_free(&treq);
}

/* pprof: counted before unpacking and before translating; neither count may be low */
static void test_pprof_estimates(void)
{
    const char *files[] = {"go-cpu.pb.gz", "go-heap.pb.gz"};
    for (size_t i = 0; i < 2; i++) {
        pc_buf gz = {0};
        if (read_file(files[i], &gz)) continue;
        pc_budget b;
        pc_budget_init(&b, 0);
        pc_format_opts o = {.budget = &b};
        pc_batch *out = NULL;
        pc_error err = {0};
        CHECK_EQ_INT(pc_pprof_decode(gz.data, gz.len, &o, &out, &err), 0);
        fprintf(stderr, "  pprof %-14s reserved %8zu  peak %8zu\n", files[i], b.reserved, b.peak);
        CHECK_EQ_INT(b.misses, 0);
        CHECK(b.peak > 0);
        pc_batch_end_budget(out);
        CHECK_EQ_INT(b.used, 0);
        pc_budget_release(&b);
        pc_batch_unref(out);
        /* a limit under what it needs: refused, and the state says why */
        pc_budget_init(&b, 8192);
        o.budget = &b;
        out = NULL;
        CHECK_EQ_INT(pc_pprof_decode(gz.data, gz.len, &o, &out, &err), PC_E2BIG);
        CHECK_EQ_INT(b.state, PC_E2BIG);
        CHECK_CONTAINS(err.msg, "over the decode budget");
        CHECK(out == NULL);
        pc_budget_release(&b);
        pc_buf_free(&gz);
    }
    CHECK_EQ_INT(pc_budget_in_flight(), 0);
}

static void test_over_limit_refused_before_allocating(void)
{
    pc_buf bomb = {0};
    empty_sample_bomb(&bomb, 100000);
    pc_budget b;
    pc_budget_init(&b, 1 << 20);
    pc_batch *out = NULL;
    pc_error err = {0};
    CHECK_EQ_INT(pc_batch_decode(PC_SIGNAL_PROFILES, bomb.data, bomb.len, false, &b, &out, &err),
                 PC_E2BIG);
    CHECK(out == NULL);
    CHECK_EQ_INT(b.state, PC_E2BIG);
    CHECK_EQ_INT(b.peak, 0); /* refused from the count alone */
    char msg[400];
    pc_budget_message(&b, "max_request_decoded_size", msg, sizeof msg);
    CHECK_CONTAINS(msg, "max_request_decoded_size (1048576 bytes)");
    pc_budget_release(&b);
    CHECK_EQ_INT(pc_budget_in_flight(), 0);
    pc_buf_free(&bomb);
}

static void test_process_cap_busy(void)
{
    pc_buf bomb = {0};
    empty_sample_bomb(&bomb, 1000);
    pc_proto_scan scan;
    pc_proto_scan_message(PC_REQUEST_DESC, bomb.data, bomb.len, PC_PROTO_MAX_DEPTH, &scan, NULL);
    pc_budget held, b;
    pc_budget_init(&held, 0);
    CHECK(pc_budget_reserve(&held, 2000, "other decodes") == 0);
    CHECK_EQ_INT(pc_budget_in_flight(), 2000);
    pc_budget_init(&b, 0);
    b.room = scan.cost + 1000; /* room for this decode, but not beside held */
    pc_batch *out = NULL;
    pc_error err = {0};
    CHECK_EQ_INT(pc_batch_decode(PC_SIGNAL_PROFILES, bomb.data, bomb.len, false, &b, &out, &err),
                 PC_EAGAIN);
    CHECK_EQ_INT(b.state, PC_EAGAIN);
    pc_budget_release(&b);
    pc_budget_release(&held); /* room again */
    pc_budget_init(&b, 0);
    b.room = scan.cost + 1000;
    CHECK_EQ_INT(pc_batch_decode(PC_SIGNAL_PROFILES, bomb.data, bomb.len, false, &b, &out, &err),
                 0);
    pc_batch_end_budget(out);
    pc_budget_release(&b);
    pc_batch_unref(out);
    CHECK_EQ_INT(pc_budget_in_flight(), 0);
    pc_buf_free(&bomb);
}

static void test_charges_past_a_low_estimate(void)
{
    pc_budget b;
    pc_budget_init(&b, 10000);
    CHECK(pc_budget_reserve(&b, 100, "x") == 0);
    CHECK(pc_budget_charge(&b, 5000) == 0);
    CHECK(pc_budget_in_flight() >= 5000);  /* the reservation grew with the charges */
    CHECK(pc_budget_charge(&b, 6000) < 0); /* 11000 > 10000 */
    CHECK_EQ_INT(b.state, PC_E2BIG);
    pc_budget_uncharge(&b, 11000);
    pc_budget_release(&b);
    CHECK_EQ_INT(pc_budget_in_flight(), 0);
}

static void test_utf8(void)
{
    struct {
        const char *s;
        int valid;
    } cases[] = {
        {"", 1},
        {"plain ascii, longer than eight bytes", 1},
        {"caf\xc3\xa9", 1},
        {"\xe2\x82\xac euro", 1},
        {"\xf0\x9f\x94\xa5 fire", 1},
        {"\xf4\x8f\xbf\xbf", 1}, /* U+10FFFF */
        {"\xed\x9f\xbf", 1},     /* U+D7FF */
        {"\xc3", 0},             /* truncated */
        {"\xc0\xaf", 0},         /* overlong '/' */
        {"\xe0\x80\xaf", 0},     /* overlong */
        {"\xed\xa0\x80", 0},     /* surrogate U+D800 */
        {"\xf4\x90\x80\x80", 0}, /* above U+10FFFF */
        {"\xff", 0},
        {"abcdefgh\x80", 0}, /* continuation byte after the fast path */
        {"\xe2\x82", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int v = pc_utf8_valid(cases[i].s, strlen(cases[i].s));
        if (v != cases[i].valid) fprintf(stderr, "  utf8 case %zu\n", i);
        CHECK_EQ_INT(v, cases[i].valid);
    }
    CHECK_EQ_INT(pc_utf8_invalid_at("ab\xff", 3), 2);
}

static void test_invalid_utf8_in_proto_names_the_field(void)
{
    /* a resource attribute value with a Latin-1 byte */
    pc_buf av = {0}, kv = {0}, res = {0}, rp = {0}, req = {0};
    pb_put_len(&av, 1, "caf\xe9", 4);
    pb_put_len(&kv, 1, "host.name", 9);
    pb_put_len(&kv, 2, av.data, av.len);
    pb_put_len(&res, 1, kv.data, kv.len);  /* Resource.attributes */
    pb_put_len(&rp, 1, res.data, res.len); /* ResourceProfiles.resource */
    pb_put_len(&req, 1, "", 0);            /* an empty first resource_profiles */
    pb_put_len(&req, 1, rp.data, rp.len);
    pc_batch *out = NULL;
    pc_error err = {0};
    CHECK_EQ_INT(pc_batch_decode(PC_SIGNAL_PROFILES, req.data, req.len, false, NULL, &out, &err),
                 PC_EINVAL);
    CHECK_CONTAINS(err.msg, "invalid UTF-8 in string field "
                            "resource_profiles[1].resource.attributes[0].value.string_value");
    pc_buf_free(&av), pc_buf_free(&kv), pc_buf_free(&res), pc_buf_free(&rp), pc_buf_free(&req);
}

/* ---- JSON ---- */

static void test_json_estimate_covers_jansson(void)
{
    pc_batch *b = go_profile_batch("go-heap.pb.gz");
    if (!b) return;
    pc_buf js = {0};
    pc_batch_encode_json(b, &js);
    pc_budget bud;
    pc_budget_init(&bud, 0);
    pc_batch *out = NULL;
    pc_error err = {0};
    CHECK_EQ_INT(pc_batch_decode(PC_SIGNAL_PROFILES, js.data, js.len, true, &bud, &out, &err), 0);
    size_t est = pc_json_decode_estimate((const char *)js.data, js.len);
    fprintf(stderr, "  go-heap as JSON: text %zu  estimate %zu  peak %zu\n", js.len, est, bud.peak);
    CHECK(bud.peak <= est);
    CHECK_EQ_INT(bud.misses, 0);
    pc_batch_end_budget(out);
    pc_budget_release(&bud);
    pc_batch_unref(out);

    /* 100k empty objects in an array: jansson's tree alone would be tens of MB */
    pc_buf bomb = {0};
    pc_buf_printf(&bomb,
                  "{\"resourceProfiles\":[{\"scopeProfiles\":[{\"profiles\":[{\"samples\":[");
    for (int i = 0; i < 100000; i++)
        pc_buf_printf(&bomb, "%s{}", i ? "," : "");
    pc_buf_printf(&bomb, "]}]}]}]}");
    est = pc_json_decode_estimate((const char *)bomb.data, bomb.len);
    pc_budget_init(&bud, 0);
    CHECK_EQ_INT(pc_batch_decode(PC_SIGNAL_PROFILES, bomb.data, bomb.len, true, &bud, &out, &err),
                 0);
    fprintf(stderr, "  100k empty samples as JSON: text %zu  estimate %zu  peak %zu\n", bomb.len,
            est, bud.peak);
    CHECK(bud.peak <= est);
    pc_batch_end_budget(out);
    pc_budget_release(&bud);
    pc_batch_unref(out);
    /* with a limit below that: refused, and jansson stopped at the limit */
    pc_budget_init(&bud, 2 << 20);
    CHECK_EQ_INT(pc_batch_decode(PC_SIGNAL_PROFILES, bomb.data, bomb.len, true, &bud, &out, &err),
                 PC_E2BIG);
    CHECK_EQ_INT(bud.state, PC_E2BIG);
    CHECK(bud.peak <= 2 << 20);
    pc_budget_release(&bud);
    CHECK_EQ_INT(pc_budget_in_flight(), 0);
    pc_buf_free(&js), pc_buf_free(&bomb);
    pc_batch_unref(b);
}

static void test_json_big_unsigned_numbers(void)
{
    /* as Go's and Python's OTLP JSON encoders write a mapping's memoryStart */
    const char *js =
        "{\"resourceProfiles\":[],\"dictionary\":{\"mappingTable\":[{},"
        "{\"memoryStart\":18446744073699065856,\"memoryLimit\":\"18446744073709551615\","
        "\"fileOffset\":9223372036854775808}]}}";
    pc_batch *b = NULL;
    pc_error err = {0};
    int rc = pc_batch_decode_json(js, strlen(js), &b, &err);
    CHECK_EQ_INT(rc, 0);
    if (rc) {
        fprintf(stderr, "  %s\n", err.msg);
        return;
    }
    const pc_mapping *m = b->req->dictionary->mapping_table[1];
    CHECK(m->memory_start == 18446744073699065856ull);
    CHECK(m->memory_limit == 18446744073709551615ull);
    CHECK(m->file_offset == 9223372036854775808ull);
    pc_batch_unref(b);
    /* out of range stays refused, with the field named */
    const char *bad[] = {
        "{\"dictionary\":{\"mappingTable\":[{\"memoryStart\":18446744073709551616}]}}",
        "{\"dictionary\":{\"mappingTable\":[{\"memoryStart\":-1}]}}",
        "{\"dictionary\":{\"locationTable\":[{\"lines\":[{\"line\":9223372036854775808}]}]}}",
    };
    for (size_t i = 0; i < 3; i++) {
        CHECK_EQ_INT(pc_batch_decode_json(bad[i], strlen(bad[i]), &b, &err), PC_EINVAL);
        CHECK_CONTAINS(err.msg, "dictionary.");
    }
    /* a big integer inside a string stays a string */
    const char *str = "{\"resourceProfiles\":[{\"resource\":{\"attributes\":[{\"key\":\"k\","
                      "\"value\":{\"stringValue\":\"18446744073709551616\"}}]}}]}";
    CHECK_EQ_INT(pc_batch_decode_json(str, strlen(str), &b, &err), 0);
    if (b) {
        CHECK_STR(b->req->resource_profiles[0]->resource->attributes[0]->value->string_value,
                  "18446744073709551616");
        pc_batch_unref(b);
    }
}

static void test_json_duplicates_refused(void)
{
    const char *dups[] = {
        /* the same key twice: one value would be silently lost */
        "{\"resourceProfiles\":[],\"resourceProfiles\":[]}",
        /* one field under its two names */
        "{\"dictionary\":{\"mappingTable\":[{\"memoryStart\":\"1\",\"memory_start\":\"2\"}]}}",
        /* two members of one oneof (AnyValue.value) */
        ("{\"resourceProfiles\":[{\"resource\":{\"attributes\":[{\"key\":\"k\",\"value\":"
         "{\"stringValue\":\"a\",\"intValue\":\"1\"}}]}}]}"),
    };
    const char *want[] = {"duplicate", "duplicate field", "oneof"};
    for (size_t i = 0; i < 3; i++) {
        pc_batch *b = NULL;
        pc_error err = {0};
        CHECK_EQ_INT(pc_batch_decode_json(dups[i], strlen(dups[i]), &b, &err), PC_EINVAL);
        CHECK_CONTAINS(err.msg, want[i]);
    }
}

int main(void)
{
    RUN(test_estimate_real_profiles);
    RUN(test_estimate_hostile_shapes);
    RUN(test_pprof_estimates);
    RUN(test_over_limit_refused_before_allocating);
    RUN(test_process_cap_busy);
    RUN(test_charges_past_a_low_estimate);
    RUN(test_utf8);
    RUN(test_invalid_utf8_in_proto_names_the_field);
    RUN(test_json_estimate_covers_jansson);
    RUN(test_json_big_unsigned_numbers);
    RUN(test_json_duplicates_refused);
    fprintf(stderr, "%d checks, %d failed\n", check_count, check_failures);
    return check_failures ? 1 : 0;
}
