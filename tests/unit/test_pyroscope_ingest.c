/* Pyroscope /ingest parsing: name grammar, from/until, multipart, collapsed stacks,
 * sample_type_config. */
#include "check.h"
#include "payload.h"
#include "pdata/pdata.h"
#include "formats/folded.h"
#include "receivers/pyroscope/ingest.h"

static void test_name(void)
{
    pc_ingest_name n;
    pc_error e = {0};
    CHECK_EQ_INT(pc_ingest_parse_name("  myapp.cpu ", &n, &e), 0);
    CHECK_STR(n.app, "myapp.cpu");
    CHECK_EQ_INT(n.n, 0);
    pc_ingest_name_free(&n);

    CHECK_EQ_INT(pc_ingest_parse_name("app{ env = prod , region=eu-1,x=a=b{c/d, e=}", &n, &e), 0);
    CHECK_STR(n.app, "app");
    CHECK_EQ_INT(n.n, 4);
    CHECK_STR(n.keys[0], "env");
    CHECK_STR(n.vals[0], "prod");
    CHECK_STR(n.vals[1], "eu-1");
    CHECK_STR(n.vals[2], "a=b{c/d");
    CHECK_STR(n.keys[3], "e");
    CHECK_STR(n.vals[3], "");
    pc_ingest_name_free(&n);

    /* duplicate keys: last wins; missing '}' drops the last pair; after '}' ignored */
    CHECK_EQ_INT(pc_ingest_parse_name("app{a=1,a=2,b=3", &n, &e), 0);
    CHECK_EQ_INT(n.n, 1);
    CHECK_STR(n.vals[0], "2");
    pc_ingest_name_free(&n);
    CHECK_EQ_INT(pc_ingest_parse_name("app{a=1}junk{b=2}", &n, &e), 0);
    CHECK_EQ_INT(n.n, 1);
    pc_ingest_name_free(&n);
    /* explicit __name__ overrides the app */
    CHECK_EQ_INT(pc_ingest_parse_name("app{__name__=other}", &n, &e), 0);
    CHECK_STR(n.app, "other");
    pc_ingest_name_free(&n);
    CHECK_EQ_INT(pc_ingest_parse_name("app{otel.scope.name=x}", &n, &e), 0);
    CHECK_STR(n.keys[0], "otel.scope.name");
    pc_ingest_name_free(&n);

    CHECK_EQ_INT(pc_ingest_parse_name("app{a-b=1}", &n, &e), PC_EINVAL);
    CHECK_CONTAINS(e.msg, "invalid label name: a-b: character is not allowed: '-'");
    CHECK_EQ_INT(pc_ingest_parse_name("{a=1}", &n, &e), PC_EINVAL);
    CHECK_CONTAINS(e.msg, "service name is required");
    CHECK_EQ_INT(pc_ingest_parse_name("my app{}", &n, &e), PC_EINVAL);
    CHECK_CONTAINS(e.msg, "character is not allowed: ' '");
    CHECK_EQ_INT(pc_ingest_parse_name("app{novalue}", &n, &e), PC_EINVAL);
    CHECK_EQ_INT(pc_ingest_parse_name("app{=v}", &n, &e), PC_EINVAL);
}

static void test_time(void)
{
    const int64_t now = 1700000000123456789LL;
    CHECK_EQ_INT(pc_ingest_parse_time("", now), now);
    CHECK_EQ_INT(pc_ingest_parse_time("1700000000", now), 1700000000000000000LL);
    CHECK_EQ_INT(pc_ingest_parse_time("1700000000123", now), 1700000000123000000LL);
    CHECK_EQ_INT(pc_ingest_parse_time("1700000000123456", now), 1700000000123456000LL);
    CHECK_EQ_INT(pc_ingest_parse_time("1700000000123456789", now), 1700000000123456789LL);
    CHECK_EQ_INT(pc_ingest_parse_time("20231114", now), 1699920000000000000LL);
    CHECK_EQ_INT(pc_ingest_parse_time("1_700_000_000", now), 1700000000000000000LL);
    CHECK_EQ_INT(pc_ingest_parse_time("now", now), now);
    CHECK_EQ_INT(pc_ingest_parse_time("now-1h", now), now - 3600000000000LL);
    CHECK_EQ_INT(pc_ingest_parse_time("now+10s", now), now + 10000000000LL);
    CHECK_EQ_INT(pc_ingest_parse_time("yesterday", now), PC_EINVAL);
    CHECK_EQ_INT(pc_ingest_parse_time("00000101", now), PC_EINVAL); /* before 1970: no overflow */
    CHECK_EQ_INT(pc_ingest_parse_time("now-999999999y", now), PC_EINVAL);
    CHECK_EQ_INT(pc_ingest_parse_time("99999999999999999999", now), PC_EINVAL);
}

static void test_multipart(void)
{
    char b[80];
    CHECK_EQ_INT(pc_multipart_boundary("multipart/form-data; boundary=XyZ", b, sizeof b), 0);
    CHECK_STR(b, "XyZ");
    CHECK_EQ_INT(pc_multipart_boundary("multipart/form-data; boundary=\"a b\"; x=y", b, sizeof b),
                 0);
    CHECK_STR(b, "a b");
    CHECK_EQ_INT(pc_multipart_boundary("multipart/form-data", b, sizeof b), PC_EINVAL);

    static const char body[] =
        "--XyZ\r\n"
        "Content-Disposition: form-data; name=\"profile\"; filename=\"profile.pprof\"\r\n"
        "Content-Type: application/octet-stream\r\n\r\n"
        "PPROF\r\nBYTES\r\n"
        "--XyZ\r\n"
        "Content-Disposition: form-data; name=\"sample_type_config\"\r\n\r\n"
        "{}\r\n"
        "--XyZ--\r\n";
    pc_form_part parts[4];
    pc_error e = {0};
    int n = pc_multipart_parse((const uint8_t *)body, sizeof body - 1, "XyZ", parts, 4, &e);
    CHECK_EQ_INT(n, 2);
    CHECK_STR(parts[0].name, "profile");
    CHECK_STR(parts[0].filename, "profile.pprof");
    CHECK_EQ_INT(parts[0].len, 12);
    CHECK(memcmp(parts[0].data, "PPROF\r\nBYTES", 12) == 0);
    CHECK_STR(parts[1].name, "sample_type_config");
    CHECK_STR(parts[1].filename, "");
    CHECK_EQ_INT(parts[1].len, 2);

    static const char trunc[] =
        "--XyZ\r\nContent-Disposition: form-data; name=\"profile\"\r\n\r\nabc";
    CHECK_EQ_INT(pc_multipart_parse((const uint8_t *)trunc, sizeof trunc - 1, "XyZ", parts, 4, &e),
                 PC_EINVAL);
    CHECK_EQ_INT(pc_multipart_parse((const uint8_t *)"nothing", 7, "XyZ", parts, 4, &e), PC_EINVAL);
}

static void test_folded(void)
{
    static const char text[] = "main;foo;bar 30\nmain;foo 20\r\nmain;baz 50\n\nno-count-line\n";
    const pc_format_attr attrs[] = {{"env", "prod"}};
    pc_format_opts o = {.app = "myapp.cpu",
                        .sample_rate = 100,
                        .time_ns = 5,
                        .duration_ns = 10,
                        .attrs = attrs,
                        .n_attrs = 1};
    pc_batch *b = NULL;
    pc_error e = {0};
    CHECK_EQ_INT(pc_folded_decode((const uint8_t *)text, sizeof text - 1, &o, &b, &e), 0);
    if (!b) return;
    const pc_dictionary *d = b->req->dictionary;
    const pc_resource *r = b->req->resource_profiles[0]->resource;
    CHECK_STR(pc_resource_attr_str(d, r, "service.name"), "myapp");
    CHECK_STR(pc_resource_attr_str(d, r, "env"), "prod");
    const pc_profile *p = first_profile(b);
    CHECK_STR(pc_dict_str(d, p->sample_type->type_strindex), "cpu");
    CHECK_STR(pc_dict_str(d, p->sample_type->unit_strindex), "nanoseconds");
    CHECK_EQ_INT(p->period, 10000000);
    CHECK_EQ_INT(p->n_samples, 3);
    char names[256];
    stack_names(b, p->samples[0]->stack_index, ";", names, sizeof names);
    CHECK_STR(names, "bar;foo;main");
    CHECK_EQ_INT(p->samples[0]->values[0], 30 * 10000000LL);
    CHECK_EQ_INT(p->samples[2]->values[0], 50 * 10000000LL);
    /* main, foo, bar, baz: four functions (plus the zero element), deduplicated */
    CHECK_EQ_INT(d->n_function_table, 5);
    int64_t rejected;
    CHECK_EQ_INT(pc_batch_validate(b, &rejected, NULL), 0);
    pc_batch_unref(b);

    /* lines format: identical lines are separate samples of 1; memory type from the suffix */
    pc_format_opts ol = {.app = "svc.alloc_space"};
    CHECK_EQ_INT(pc_lines_decode((const uint8_t *)"a;b\na;b\n", 8, &ol, &b, &e), 0);
    p = first_profile(b);
    CHECK_EQ_INT(p->n_samples, 2);
    CHECK_EQ_INT(p->samples[0]->stack_index, p->samples[1]->stack_index);
    CHECK_STR(pc_dict_str(b->req->dictionary, p->sample_type->unit_strindex), "bytes");
    pc_batch_unref(b);

    pc_format_opts bad = {.app = "my.app"};
    CHECK_EQ_INT(pc_folded_decode((const uint8_t *)"a 1\n", 4, &bad, &b, &e), PC_EINVAL);
    CHECK_CONTAINS(e.msg, "unknown profile type: app");
    pc_format_opts badc = {.app = "app"};
    CHECK_EQ_INT(pc_folded_decode((const uint8_t *)"a;b x1\n", 7, &badc, &b, &e), PC_EBADMSG);
    CHECK_CONTAINS(e.msg, "line 1");
}

static void test_sample_type_config(void)
{
    static const char text[] = "a;b 3\n";
    pc_format_opts o = {.app = "app.mutex_count"};
    pc_batch *b = NULL;
    pc_error e = {0};
    CHECK_EQ_INT(pc_folded_decode((const uint8_t *)text, sizeof text - 1, &o, &b, &e), 0);
    static const char cfg[] =
        "{\"contentions\":{\"units\":\"lock_samples\",\"display-name\":\"block_count\"}}";
    CHECK_EQ_INT(pc_ingest_apply_sample_type_config(b, 0, cfg, sizeof cfg - 1, &e), 0);
    const pc_profile *p = first_profile(b);
    CHECK_STR(pc_dict_str(b->req->dictionary, p->sample_type->type_strindex), "block_count");
    CHECK_EQ_INT(pc_ingest_apply_sample_type_config(b, 0, "[1]", 3, &e), PC_EINVAL);
    pc_batch_unref(b);
}

int main(void)
{
    RUN(test_name);
    RUN(test_time);
    RUN(test_multipart);
    RUN(test_folded);
    RUN(test_sample_type_config);
    return check_report();
}
