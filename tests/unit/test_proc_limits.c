/* processor "limits": stack depth cap with "[truncated]", sample cap with "[other]" keeping
 * totals (values, timestamps-only, negative values), profile size cap, copy-on-write. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "payload.h"
#include "testcomp.h"
#include "pdata/pdata.h"
#include "sdk/component.h"

extern const pc_component_type pc_processor_limits;

/* Run b through a limits instance configured by yaml; the output (or NULL) is returned. */
static pc_batch *run(const char *yaml, pc_batch *b)
{
    pc_batch *out = tc_pass(&pc_processor_limits, "processors", yaml, b);
    if (out) {
        int64_t rejected = 0;
        pc_error e = {0};
        CHECK_EQ_INT(pc_batch_validate(out, &rejected, &e), 0);
        CHECK_EQ_INT(rejected, 0);
    }
    return out;
}

static const char *config_error(const char *yaml)
{
    return tc_config_error(&pc_processor_limits, "processors", yaml);
}

/* Functions f0..f5; stack 1 = f0 f1 f2 f3 f4 f5 (leaf first, depth 6), stack 2 = f1 f2 (depth 2),
 * stack 3 = f3 (depth 1). Profile "cpu" gets the samples given as JSON. */
static pc_batch *request(const char *samples, const char *samples2)
{
    pc_buf j = {0};
    pc_buf_printf(&j,
                  "{\"resourceProfiles\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\","
                  "\"value\":{\"stringValue\":\"svc\"}}]},\"scopeProfiles\":[{\"profiles\":["
                  "{\"sampleType\":{\"typeStrindex\":1,\"unitStrindex\":2},\"samples\":[%s]}",
                  samples);
    if (samples2)
        pc_buf_printf(&j,
                      ",{\"sampleType\":{\"typeStrindex\":9,\"unitStrindex\":2},"
                      "\"samples\":[%s]}",
                      samples2);
    pc_buf_printf(&j, "]}]}],\"dictionary\":{\"stringTable\":[\"\",\"cpu\",\"nanoseconds\","
                      "\"f0\",\"f1\",\"f2\",\"f3\",\"f4\",\"f5\",\"wall\"],"
                      "\"functionTable\":[{},{\"nameStrindex\":3},{\"nameStrindex\":4},"
                      "{\"nameStrindex\":5},{\"nameStrindex\":6},{\"nameStrindex\":7},"
                      "{\"nameStrindex\":8}],"
                      "\"locationTable\":[{}");
    for (int i = 1; i <= 6; i++)
        pc_buf_printf(&j, ",{\"address\":\"%d\",\"lines\":[{\"functionIndex\":%d}]}", 100 + i, i);
    pc_buf_printf(&j, "],\"stackTable\":[{},{\"locationIndices\":[1,2,3,4,5,6]},"
                      "{\"locationIndices\":[2,3]},{\"locationIndices\":[4]}]}}");
    pc_batch *b = decode_json_n_or_die((const char *)j.data, j.len);
    pc_buf_free(&j);
    return b;
}

/* The function names of a stack, leaf first, joined by spaces. */
static const char *names_of(const pc_batch *b, int32_t stack)
{
    static char out[512];
    return stack_names(b, stack, " ", out, sizeof out);
}

static int64_t total(const pc_profile *p)
{
    int64_t t = 0;
    for (size_t i = 0; i < p->n_samples; i++) {
        const pc_sample *s = p->samples[i];
        if (s->n_values)
            for (size_t k = 0; k < s->n_values; k++)
                t += s->values[k];
        else
            t += (int64_t)s->n_timestamps_unix_nano;
    }
    return t;
}

static void test_stack_depth(void)
{
    pc_batch *in = request("{\"stackIndex\":1,\"values\":[7]},{\"stackIndex\":2,\"values\":[5]},"
                           "{\"stackIndex\":1,\"values\":[3]},{\"stackIndex\":3,\"values\":[1]}",
                           NULL);
    pc_batch_ref(in); /* shared: limits must work on a copy */
    pc_batch *out = run("max_stack_depth: 3\n", in);
    CHECK(out && out != in);
    CHECK_STR(names_of(in, nth_profile(in, 0)->samples[0]->stack_index), "f0 f1 f2 f3 f4 f5");
    if (out) {
        pc_profile *p = nth_profile(out, 0);
        CHECK_EQ_INT(p->n_samples, 4);
        CHECK_STR(names_of(out, p->samples[0]->stack_index), "f0 f1 [truncated]");
        CHECK_STR(names_of(out, p->samples[1]->stack_index), "f1 f2");        /* short: untouched */
        CHECK_EQ_INT(p->samples[2]->stack_index, p->samples[0]->stack_index); /* one new stack */
        CHECK_STR(names_of(out, p->samples[3]->stack_index), "f3");
        CHECK_EQ_INT(total(p), 16);
    }
    pc_batch_unref(out);
    pc_batch_unref(in);

    /* depth 1: the whole stack becomes the marker */
    out = run("max_stack_depth: 1\n", request("{\"stackIndex\":2,\"values\":[5]}", NULL));
    if (out) CHECK_STR(names_of(out, nth_profile(out, 0)->samples[0]->stack_index), "[truncated]");
    pc_batch_unref(out);
}

static void test_sample_cap(void)
{
    /* values 1..10 and one -20: the heaviest by |sum| are -20, 10, 9 */
    pc_buf s = {0};
    for (int i = 1; i <= 10; i++)
        pc_buf_printf(&s, "%s{\"stackIndex\":%d,\"values\":[%d]}", i > 1 ? "," : "", 1 + i % 3, i);
    pc_buf_printf(&s, ",{\"stackIndex\":2,\"values\":[-20]}");
    pc_buf_append(&s, "", 1);
    /* timestamps only: sample i has i timestamps */
    pc_buf t = {0};
    for (int i = 1; i <= 6; i++) {
        pc_buf_printf(&t, "%s{\"stackIndex\":%d,\"timestampsUnixNano\":[", i > 1 ? "," : "",
                      1 + i % 3);
        for (int k = 0; k < i; k++)
            pc_buf_printf(&t, "%s\"%d\"", k ? "," : "", 1000 * i + k);
        pc_buf_printf(&t, "]}");
    }
    pc_buf_append(&t, "", 1);
    pc_batch *out = run("max_samples_per_profile: 4\n", request((char *)s.data, (char *)t.data));
    CHECK(out != NULL);
    if (out) {
        pc_profile *p = nth_profile(out, 0);
        CHECK_EQ_INT(p->n_samples, 4);
        CHECK_EQ_INT(total(p), 55 - 20);
        /* kept in their original order, then [other] */
        CHECK_EQ_INT(p->samples[0]->values[0], 9);
        CHECK_EQ_INT(p->samples[1]->values[0], 10);
        CHECK_EQ_INT(p->samples[2]->values[0], -20);
        CHECK_EQ_INT(p->samples[3]->n_values, 1);
        CHECK_EQ_INT(p->samples[3]->values[0], 36); /* 1 + ... + 8 */
        CHECK_STR(names_of(out, p->samples[3]->stack_index), "[other]");
        CHECK_EQ_INT(p->samples[3]->n_attribute_indices, 0);

        pc_profile *q = nth_profile(out, 1);
        CHECK_EQ_INT(q->n_samples, 4);
        CHECK_EQ_INT(total(q), 21);
        CHECK_EQ_INT(q->samples[0]->n_timestamps_unix_nano, 4);
        CHECK_EQ_INT(q->samples[2]->n_timestamps_unix_nano, 6);
        /* shape kept: the folded sample has the 1 + 2 + 3 timestamps, no values */
        CHECK_EQ_INT(q->samples[3]->n_timestamps_unix_nano, 6);
        CHECK_EQ_INT(q->samples[3]->n_values, 0);
        CHECK_STR(names_of(out, q->samples[3]->stack_index), "[other]");
    }
    pc_batch_unref(out);
    pc_buf_free(&s);
    pc_buf_free(&t);

    /* a profile under the cap is left alone */
    out = run("max_samples_per_profile: 4\n",
              request("{\"stackIndex\":1,\"values\":[1]},{\"stackIndex\":2,\"values\":[2]}", NULL));
    if (out) CHECK_EQ_INT(nth_profile(out, 0)->n_samples, 2);
    pc_batch_unref(out);
}

static void test_profile_bytes(void)
{
    pc_buf big = {0};
    for (int i = 0; i < 200; i++)
        pc_buf_printf(&big, "%s{\"stackIndex\":1,\"values\":[%d]}", i ? "," : "", 1000000 + i);
    pc_buf_append(&big, "", 1);
    const char *small = "{\"stackIndex\":2,\"values\":[1]}";
    /* the big profile (~2 KB) goes, the small one stays */
    pc_batch *out = run("max_profile_bytes: 1KiB\n", request((char *)big.data, small));
    CHECK(out != NULL);
    if (out) {
        CHECK_EQ_INT(pc_batch_counts(out).profiles, 1);
        CHECK_EQ_INT(nth_profile(out, 0)->n_samples, 1);
        CHECK_STR(
            pc_dict_str(out->req->dictionary, nth_profile(out, 0)->sample_type->type_strindex),
            "wall");
    }
    pc_batch_unref(out);
    /* the size counts the dictionary entries a profile uses: a tiny profile on a deep stack of
     * long names weighs more than its own message */
    out = run("max_profile_bytes: 60\n", request("{\"stackIndex\":1,\"values\":[1]}", NULL));
    CHECK(out == NULL);
    /* everything dropped: acknowledged, nothing passed on */
    out = run("max_profile_bytes: 100\n", request((char *)big.data, NULL));
    CHECK(out == NULL);
    pc_buf_free(&big);
    /* combined with the sample cap, the capped profile fits */
    pc_buf many = {0};
    for (int i = 0; i < 200; i++)
        pc_buf_printf(&many, "%s{\"stackIndex\":%d,\"values\":[%d]}", i ? "," : "", 1 + i % 3, i);
    pc_buf_append(&many, "", 1);
    out = run("max_samples_per_profile: 10\nmax_profile_bytes: 1KiB\n",
              request((char *)many.data, NULL));
    CHECK(out != NULL);
    if (out) CHECK_EQ_INT(total(nth_profile(out, 0)), 199 * 200 / 2);
    pc_batch_unref(out);
    pc_buf_free(&many);
}

static void test_config(void)
{
    CHECK_CONTAINS(config_error("max_stack_depth: -1\n"), "max_stack_depth: must be >= 0");
    CHECK_CONTAINS(config_error("max_stack_depth: -1\n"), "processors::limits");
    CHECK_CONTAINS(config_error("max_samples_per_profile: -3\n"), "max_samples_per_profile");
    CHECK_CONTAINS(config_error("max_profile_bytes: lots\n"), "max_profile_bytes");
    CHECK(config_error("max_profile_bytes: 4MiB\nmax_stack_depth: 64\n") == NULL);
}

int main(void)
{
    RUN(test_stack_depth);
    RUN(test_sample_cap);
    RUN(test_profile_bytes);
    RUN(test_config);
    return check_report();
}
