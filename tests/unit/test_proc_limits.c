/* processor "limits": stack depth cap with "[truncated]", sample cap with "[other]" keeping
 * totals (values, timestamps-only, negative values), profile size cap, copy-on-write. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "pdata/pdata.h"
#include "pipeline/component.h"

extern const pc_component_type pc_processor_limits;

typedef struct rec {
    pc_consumer base;
    pc_batch *b;
    int n;
} rec;

static void rec_consume(pc_consumer *self, pc_batch *b, pc_done_fn done, void *arg)
{
    rec *r = (rec *)self;
    pc_batch_unref(r->b);
    r->b = b;
    r->n++;
    done(arg, PC_OK, NULL);
}

static int g_calls;
static pc_status g_st;
static void up_done(void *arg, pc_status st, const char *msg)
{
    (void)arg;
    (void)msg;
    g_calls++;
    g_st = st;
}

/* Run b through a limits instance configured by yaml; the output (or NULL) is returned. */
static pc_batch *run(const char *yaml, pc_batch *b)
{
    const pc_component_type *t = &pc_processor_limits;
    uv_loop_t loop;
    uv_loop_init(&loop);
    rec r = {.base = {rec_consume, false}};
    pc_cfg_err err = {{0}};
    pc_node *root = pc_config_parse(yaml, strlen(yaml), "test.yaml", &err);
    pc_component c = {.type = t, .id = "limits", .loop = &loop, .next = &r.base};
    c.cfg = calloc(1, t->cfg_size);
    if (!root || pc_cfgtable_apply(t->cfg, c.cfg, root, "processors::limits", &err) ||
        t->validate(c.cfg, root, "processors::limits", &err) || t->create(&c, &err)) {
        fprintf(stderr, "config: %s\n", err.msg);
        exit(1);
    }
    pc_node_free(root);
    g_calls = 0;
    t->consume(&c, b, up_done, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(g_calls, 1);
    CHECK_EQ_INT(g_st, PC_OK);
    t->destroy(&c);
    pc_cfgtable_free(t->cfg, c.cfg);
    free(c.cfg);
    uv_loop_close(&loop);
    if (r.b) {
        int64_t rejected = 0;
        char e[256] = "";
        CHECK_EQ_INT(pc_batch_validate(r.b, &rejected, e, sizeof e), 0);
        CHECK_EQ_INT(rejected, 0);
    }
    return r.b;
}

static char *config_error(const char *yaml)
{
    static pc_cfg_err err;
    const pc_component_type *t = &pc_processor_limits;
    memset(&err, 0, sizeof err);
    pc_node *root = pc_config_parse(yaml, strlen(yaml), "test.yaml", &err);
    void *cfg = calloc(1, t->cfg_size);
    int rc = pc_cfgtable_apply(t->cfg, cfg, root, "processors::limits", &err);
    if (!rc) rc = t->validate(cfg, root, "processors::limits", &err);
    pc_node_free(root);
    pc_cfgtable_free(t->cfg, cfg);
    free(cfg);
    return rc ? err.msg : NULL;
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
    pc_batch *b = NULL;
    char err[256];
    if (pc_batch_decode_json((char *)j.data, j.len, &b, err, sizeof err)) {
        fprintf(stderr, "decode: %s\n", err);
        exit(1);
    }
    pc_buf_free(&j);
    return b;
}

static pc_profile *profile(pc_batch *b, size_t i)
{
    return b->req->resource_profiles[0]->scope_profiles[0]->profiles[i];
}

/* The function names of a stack, leaf first, joined by spaces. */
static const char *stack_names(const pc_batch *b, int32_t stack)
{
    static char out[512];
    const pc_dictionary *d = b->req->dictionary;
    out[0] = 0;
    const pc_stack *s = d->stack_table[stack];
    for (size_t i = 0; i < s->n_location_indices; i++) {
        const pc_location *l = d->location_table[s->location_indices[i]];
        const pc_function *f = d->function_table[l->lines[0]->function_index];
        if (i) strcat(out, " ");
        strcat(out, pc_dict_str(d, f->name_strindex));
    }
    return out;
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
    CHECK_STR(stack_names(in, profile(in, 0)->samples[0]->stack_index), "f0 f1 f2 f3 f4 f5");
    if (out) {
        pc_profile *p = profile(out, 0);
        CHECK_EQ_INT(p->n_samples, 4);
        CHECK_STR(stack_names(out, p->samples[0]->stack_index), "f0 f1 [truncated]");
        CHECK_STR(stack_names(out, p->samples[1]->stack_index), "f1 f2");     /* short: untouched */
        CHECK_EQ_INT(p->samples[2]->stack_index, p->samples[0]->stack_index); /* one new stack */
        CHECK_STR(stack_names(out, p->samples[3]->stack_index), "f3");
        CHECK_EQ_INT(total(p), 16);
    }
    pc_batch_unref(out);
    pc_batch_unref(in);

    /* depth 1: the whole stack becomes the marker */
    out = run("max_stack_depth: 1\n", request("{\"stackIndex\":2,\"values\":[5]}", NULL));
    if (out) CHECK_STR(stack_names(out, profile(out, 0)->samples[0]->stack_index), "[truncated]");
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
        pc_profile *p = profile(out, 0);
        CHECK_EQ_INT(p->n_samples, 4);
        CHECK_EQ_INT(total(p), 55 - 20);
        /* kept in their original order, then [other] */
        CHECK_EQ_INT(p->samples[0]->values[0], 9);
        CHECK_EQ_INT(p->samples[1]->values[0], 10);
        CHECK_EQ_INT(p->samples[2]->values[0], -20);
        CHECK_EQ_INT(p->samples[3]->n_values, 1);
        CHECK_EQ_INT(p->samples[3]->values[0], 36); /* 1 + ... + 8 */
        CHECK_STR(stack_names(out, p->samples[3]->stack_index), "[other]");
        CHECK_EQ_INT(p->samples[3]->n_attribute_indices, 0);

        pc_profile *q = profile(out, 1);
        CHECK_EQ_INT(q->n_samples, 4);
        CHECK_EQ_INT(total(q), 21);
        CHECK_EQ_INT(q->samples[0]->n_timestamps_unix_nano, 4);
        CHECK_EQ_INT(q->samples[2]->n_timestamps_unix_nano, 6);
        /* shape kept: the folded sample has the 1 + 2 + 3 timestamps, no values */
        CHECK_EQ_INT(q->samples[3]->n_timestamps_unix_nano, 6);
        CHECK_EQ_INT(q->samples[3]->n_values, 0);
        CHECK_STR(stack_names(out, q->samples[3]->stack_index), "[other]");
    }
    pc_batch_unref(out);
    pc_buf_free(&s);
    pc_buf_free(&t);

    /* a profile under the cap is left alone */
    out = run("max_samples_per_profile: 4\n",
              request("{\"stackIndex\":1,\"values\":[1]},{\"stackIndex\":2,\"values\":[2]}", NULL));
    if (out) CHECK_EQ_INT(profile(out, 0)->n_samples, 2);
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
        CHECK_EQ_INT(profile(out, 0)->n_samples, 1);
        CHECK_STR(pc_dict_str(out->req->dictionary, profile(out, 0)->sample_type->type_strindex),
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
    if (out) CHECK_EQ_INT(total(profile(out, 0)), 199 * 200 / 2);
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
