/* processor "batch": merging with one de-duplicated dictionary, grouping by resource content,
 * splitting, timer, size trigger, metadata shards, status propagation, shutdown flush. */
#include <stdlib.h>
#include <string.h>

#include "base/compress.h"
#include "check.h"
#include "payload.h"
#include "testcomp.h"
#include "pdata/json.h"
#include "pdata/pdata.h"
#include "sdk/component.h"

extern const pc_component_type pc_processor_batch;

/* ---- harness -------------------------------------------------------------------------------- */

/* Downstream: a tc_rec (answers at once, or keeps the done callbacks with defer). Upstream: a
 * tc_up per request, its order among the answers in .order. */

static pc_component *make(const char *yaml, uv_loop_t *loop, pc_consumer *next, char *errbuf)
{
    pc_error err = {0};
    pc_component *c = tc_new(&pc_processor_batch, "processors", yaml, loop, next, &err);
    if (!c) {
        if (errbuf)
            snprintf(errbuf, 512, "%s", err.msg);
        else
            fprintf(stderr, "config: %s\n", err.msg);
        return NULL;
    }
    pc_error e = {0};
    if (c->type->start(c, &e) < 0) {
        fprintf(stderr, "start: %s\n", e.msg);
        exit(1);
    }
    return c;
}

/* ---- inputs --------------------------------------------------------------------------------- */

static const char *const services[] = {"checkout", "cart", "auth", "search"};

/* Request i: one resource (service.name, host.name; in plain or string-table form depending on
 * i), one scope, a cpu and an alloc_space profile. Functions, stacks and strings overlap heavily
 * between requests. `extra` more cpu samples can be appended (for splitting). */
static pc_batch *request(int i, int extra)
{
    const char *svc = services[i % 4];
    bool strindex_form = (i / 4) % 2;
    pc_buf j = {0};
    pc_buf_printf(&j, "{\"resourceProfiles\":[{\"resource\":{\"attributes\":[");
    if (strindex_form)
        pc_buf_printf(&j,
                      "{\"keyStrindex\":8,\"value\":{\"stringValueStrindex\":9}},"
                      "{\"key\":\"host.name\",\"value\":{\"stringValue\":\"h-%s\"}}",
                      svc);
    else /* same content, other order and form */
        pc_buf_printf(&j,
                      "{\"key\":\"host.name\",\"value\":{\"stringValue\":\"h-%s\"}},"
                      "{\"key\":\"service.name\",\"value\":{\"stringValue\":\"%s\"}}",
                      svc, svc);
    pc_buf_printf(&j,
                  "]},\"scopeProfiles\":[{\"scope\":{\"name\":\"profcol-test\",\"version\":\"1\"},"
                  "\"profiles\":[");
    /* cpu */
    pc_buf_printf(&j,
                  "{\"sampleType\":{\"typeStrindex\":1,\"unitStrindex\":2},"
                  "\"timeUnixNano\":\"%d\",\"samples\":["
                  "{\"stackIndex\":1,\"values\":[%d]},"
                  "{\"stackIndex\":2,\"values\":[%d],\"attributeIndices\":[1]},"
                  "{\"stackIndex\":3,\"timestampsUnixNano\":[\"1\",\"2\"]}",
                  1000 + i, 10 + i, i % 7 + 1);
    for (int k = 0; k < extra; k++)
        pc_buf_printf(&j, ",{\"stackIndex\":%d,\"values\":[%d]}", 1 + k % 3, k + 1);
    pc_buf_printf(&j, "]},");
    /* alloc_space */
    pc_buf_printf(&j,
                  "{\"sampleType\":{\"typeStrindex\":3,\"unitStrindex\":4},\"samples\":["
                  "{\"stackIndex\":2,\"values\":[%d]},{\"stackIndex\":3,\"values\":[3]}]}",
                  1000 * i);
    pc_buf_printf(&j,
                  "]}]}],\"dictionary\":{"
                  "\"mappingTable\":[{},{\"memoryStart\":\"4096\",\"memoryLimit\":\"65536\","
                  "\"filenameStrindex\":10}],"
                  "\"locationTable\":[{},"
                  "{\"mappingIndex\":1,\"address\":\"4097\",\"lines\":[{\"functionIndex\":1}]},"
                  "{\"mappingIndex\":1,\"address\":\"4098\",\"lines\":[{\"functionIndex\":2}]},"
                  "{\"mappingIndex\":1,\"address\":\"%d\",\"lines\":[{\"functionIndex\":3}]}],"
                  "\"functionTable\":[{},{\"nameStrindex\":5,\"filenameStrindex\":10},"
                  "{\"nameStrindex\":6,\"filenameStrindex\":10},"
                  "{\"nameStrindex\":7,\"filenameStrindex\":10}],",
                  5000 + i % 5);
    pc_buf_printf(
        &j,
        "\"stringTable\":[\"\",\"cpu\",\"nanoseconds\",\"alloc_space\",\"bytes\","
        "\"main\",\"work\",\"helper_%d\",\"service.name\",\"%s\",\"/app/main.go\","
        "\"thread\",\"t%d\"],"
        "\"attributeTable\":[{},{\"keyStrindex\":11,\"value\":{\"stringValue\":\"t%d\"}}],"
        "\"stackTable\":[{},{\"locationIndices\":[2,1]},{\"locationIndices\":[3,2,1]},"
        "{\"locationIndices\":[3,1]}]}}",
        i % 5, svc, i % 3, i % 3);
    pc_batch *b = validate_or_die(decode_json_n_or_die((const char *)j.data, j.len));
    pc_buf_free(&j);
    return b;
}

/* ---- independent checks on outputs ---------------------------------------------------------- */

/* Value totals per (service.name, sample type); a timestamps-only sample counts its timestamps. */
typedef struct totals {
    int64_t v[4][2];
    size_t samples;
} totals;

static void add_totals(const pc_batch *b, totals *t)
{
    const pc_dictionary *d = b->req->dictionary;
    for (size_t i = 0; i < b->req->n_resource_profiles; i++) {
        const pc_resource_profiles *rp = b->req->resource_profiles[i];
        const char *svc = pc_resource_attr_str(d, rp->resource, "service.name");
        int si = -1;
        for (int k = 0; k < 4; k++)
            if (svc && strcmp(svc, services[k]) == 0) si = k;
        CHECK(si >= 0);
        if (si < 0) continue;
        for (size_t j = 0; j < rp->n_scope_profiles; j++) {
            const pc_scope_profiles *sp = rp->scope_profiles[j];
            for (size_t k = 0; k < sp->n_profiles; k++) {
                const pc_profile *p = sp->profiles[k];
                const char *type = pc_dict_str(d, p->sample_type->type_strindex);
                int ti = strcmp(type, "cpu") == 0 ? 0 : 1;
                CHECK(ti == 0 || strcmp(type, "alloc_space") == 0);
                for (size_t s = 0; s < p->n_samples; s++) {
                    const pc_sample *x = p->samples[s];
                    t->samples++;
                    if (x->n_values)
                        for (size_t v = 0; v < x->n_values; v++)
                            t->v[si][ti] += x->values[v];
                    else
                        t->v[si][ti] += (int64_t)x->n_timestamps_unix_nano;
                }
            }
        }
    }
}

static bool same_totals(const totals *a, const totals *b)
{
    return a->samples == b->samples && memcmp(a->v, b->v, sizeof a->v) == 0;
}

static bool i32s_eq(const int32_t *a, size_t na, const int32_t *b, size_t nb)
{
    return na == nb && (na == 0 || memcmp(a, b, na * sizeof *a) == 0);
}

/* No two entries of a table with the same content (and every index in range: validate). */
static int dict_duplicates(const pc_batch *b)
{
    const pc_dictionary *d = b->req->dictionary;
    int dups = 0;
    for (size_t i = 0; i < d->n_string_table; i++)
        for (size_t k = i + 1; k < d->n_string_table; k++)
            dups += strcmp(d->string_table[i], d->string_table[k]) == 0;
    for (size_t i = 0; i < d->n_function_table; i++)
        for (size_t k = i + 1; k < d->n_function_table; k++) {
            const pc_function *x = d->function_table[i], *y = d->function_table[k];
            dups += x->name_strindex == y->name_strindex &&
                    x->filename_strindex == y->filename_strindex &&
                    x->system_name_strindex == y->system_name_strindex &&
                    x->start_line == y->start_line;
        }
    for (size_t i = 0; i < d->n_location_table; i++)
        for (size_t k = i + 1; k < d->n_location_table; k++) {
            const pc_location *x = d->location_table[i], *y = d->location_table[k];
            bool same = x->address == y->address && x->mapping_index == y->mapping_index &&
                        x->n_lines == y->n_lines;
            for (size_t l = 0; same && l < x->n_lines; l++)
                same = x->lines[l]->function_index == y->lines[l]->function_index &&
                       x->lines[l]->line == y->lines[l]->line;
            dups += same;
        }
    for (size_t i = 0; i < d->n_stack_table; i++)
        for (size_t k = i + 1; k < d->n_stack_table; k++)
            dups +=
                i32s_eq(d->stack_table[i]->location_indices, d->stack_table[i]->n_location_indices,
                        d->stack_table[k]->location_indices, d->stack_table[k]->n_location_indices);
    for (size_t i = 0; i < d->n_mapping_table; i++)
        for (size_t k = i + 1; k < d->n_mapping_table; k++)
            dups +=
                d->mapping_table[i]->memory_start == d->mapping_table[k]->memory_start &&
                d->mapping_table[i]->filename_strindex == d->mapping_table[k]->filename_strindex;
    for (size_t i = 1; i < d->n_attribute_table; i++)
        for (size_t k = i + 1; k < d->n_attribute_table; k++) {
            const pc_kvu *x = d->attribute_table[i], *y = d->attribute_table[k];
            dups += x->key_strindex == y->key_strindex &&
                    strcmp(x->value->string_value, y->value->string_value) == 0;
        }
    return dups;
}

/* Stacks nothing references (orphans a split must not carry). */
static int orphan_stacks(const pc_batch *b)
{
    const pc_dictionary *d = b->req->dictionary;
    int orphans = 0;
    for (size_t st = 1; st < d->n_stack_table; st++) {
        bool used = false;
        for (size_t i = 0; i < b->req->n_resource_profiles && !used; i++) {
            const pc_resource_profiles *rp = b->req->resource_profiles[i];
            for (size_t j = 0; j < rp->n_scope_profiles && !used; j++)
                for (size_t k = 0; k < rp->scope_profiles[j]->n_profiles && !used; k++) {
                    const pc_profile *p = rp->scope_profiles[j]->profiles[k];
                    for (size_t s = 0; s < p->n_samples && !used; s++)
                        used = p->samples[s]->stack_index == (int32_t)st;
                }
        }
        orphans += !used;
    }
    return orphans;
}

static bool valid(pc_batch *b)
{
    int64_t rejected = 0;
    pc_error err = {0};
    int rc = pc_batch_validate(b, &rejected, &err);
    if (rc || rejected) fprintf(stderr, "invalid output: %s\n", err.msg);
    return rc == 0 && rejected == 0;
}

/* ---- tests ---------------------------------------------------------------------------------- */

static void test_merge_100(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    tc_rec r;
    tc_rec_init(&r);
    pc_component *c = make("timeout: 50ms\nsend_batch_size: 100000\n", &loop, &r.base, NULL);
    totals in = {0};
    tc_up ups[100] = {{0}};
    size_t in_strings = 0;
    for (int i = 0; i < 100; i++) {
        pc_batch *b = request(i, 0);
        add_totals(b, &in);
        in_strings += b->req->dictionary->n_string_table;
        c->type->consume(c, b, tc_up_done, &ups[i]);
    }
    int answered = 0;
    for (int i = 0; i < 100; i++)
        answered += ups[i].calls;
    CHECK_EQ_INT(answered, 0); /* buffered data is not acknowledged */
    CHECK_EQ_INT(r.n, 0);
    uint64_t t0 = uv_now(&loop);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK(uv_now(&loop) - t0 >= 45); /* the timer sent it */
    CHECK_EQ_INT(r.n, 1);
    if (r.n == 1) {
        pc_batch *o = r.got[0];
        CHECK(valid(o));
        totals out = {0};
        add_totals(o, &out);
        CHECK(same_totals(&in, &out));
        CHECK_EQ_INT(out.samples, 500);
        /* one ResourceProfiles per distinct resource, whatever the attribute form and order */
        CHECK_EQ_INT(o->req->n_resource_profiles, 4);
        for (size_t i = 0; i < o->req->n_resource_profiles; i++) {
            CHECK_EQ_INT(o->req->resource_profiles[i]->n_scope_profiles, 1);
            CHECK_EQ_INT(o->req->resource_profiles[i]->scope_profiles[0]->n_profiles, 50);
        }
        CHECK_EQ_INT(dict_duplicates(o), 0);
        const pc_dictionary *d = o->req->dictionary;
        /* "" cpu nanoseconds alloc_space bytes main work helper_0..4 service.name 4 services
         * /app/main.go thread t0..t2, plus host.name values inline in resources */
        CHECK_EQ_INT(d->n_string_table, 1 + 4 + 2 + 5 + 1 + 4 + 1 + 1 + 3);
        CHECK(d->n_string_table < in_strings / 10);
        CHECK_EQ_INT(d->n_function_table, 1 + 2 + 5);
        CHECK_EQ_INT(d->n_location_table, 1 + 2 + 5);
        CHECK_EQ_INT(d->n_mapping_table, 2);
        CHECK_EQ_INT(d->n_attribute_table, 4);
        CHECK_EQ_INT(d->n_stack_table, 1 + 1 + 5 + 5);
    }
    answered = 0;
    for (int i = 0; i < 100; i++) {
        answered += ups[i].calls;
        CHECK_EQ_INT(ups[i].st, PC_OK);
    }
    CHECK_EQ_INT(answered, 100);
    tc_rec_clear(&r);
    tc_shutdown(c);
    tc_free(c);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);
}

static void test_size_trigger_and_split(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    tc_rec r;
    tc_rec_init(&r);
    pc_component *c =
        make("timeout: 10s\nsend_batch_size: 40\nsend_batch_max_size: 45\n", &loop, &r.base, NULL);
    totals in = {0};
    tc_up ups[3] = {{0}};
    /* 5 + 5 samples, then one with a 100-sample cpu profile: 115 samples reach the size */
    for (int i = 0; i < 3; i++) {
        pc_batch *b = request(i, i == 2 ? 100 : 0);
        add_totals(b, &in);
        c->type->consume(c, b, tc_up_done, &ups[i]);
    }
    uv_run(&loop, UV_RUN_DEFAULT); /* returns: the size trigger flushed, no timer pending */
    CHECK_EQ_INT(r.n, 3);          /* 115 samples in 45 + 45 + 25 */
    totals out = {0};
    for (size_t i = 0; i < r.n; i++) {
        pc_counts n = pc_batch_counts(r.got[i]);
        CHECK(n.samples <= 45);
        CHECK(valid(r.got[i]));
        CHECK_EQ_INT(dict_duplicates(r.got[i]), 0);
        CHECK_EQ_INT(orphan_stacks(r.got[i]), 0);
        add_totals(r.got[i], &out);
    }
    CHECK(same_totals(&in, &out));
    if (r.n == 3) {
        CHECK_EQ_INT(pc_batch_counts(r.got[0]).samples, 45);
        CHECK_EQ_INT(pc_batch_counts(r.got[1]).samples, 45);
        CHECK_EQ_INT(pc_batch_counts(r.got[2]).samples, 25);
        /* the big profile was split: its time stamp appears in all three requests */
        int parts = 0;
        for (size_t i = 0; i < r.n; i++) {
            const pc_request *q = r.got[i]->req;
            for (size_t a = 0; a < q->n_resource_profiles; a++)
                for (size_t p = 0; p < q->resource_profiles[a]->scope_profiles[0]->n_profiles; p++)
                    parts +=
                        q->resource_profiles[a]->scope_profiles[0]->profiles[p]->time_unix_nano ==
                        1002;
        }
        CHECK_EQ_INT(parts, 3);
    }
    for (int i = 0; i < 3; i++)
        CHECK_EQ_INT(ups[i].calls, 1);
    tc_rec_clear(&r);
    tc_shutdown(c);
    tc_free(c);
    uv_loop_close(&loop);
}

/* send_batch_size reached exactly flushes at once, without waiting for the (hour-long) timer. */
static void guard_fire(uv_timer_t *t)
{
    uv_stop(t->loop);
}

static void test_size_trigger_exact(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    tc_rec r;
    tc_rec_init(&r);
    pc_component *c = make("timeout: 1h\nsend_batch_size: 10\n", &loop, &r.base, NULL);
    tc_up ups[2] = {{0}};
    for (int i = 0; i < 2; i++) { /* 5 + 5 samples */
        pc_batch *b = request(i, 0);
        CHECK_EQ_INT(pc_batch_counts(b).samples, 5);
        c->type->consume(c, b, tc_up_done, &ups[i]);
    }
    /* the guard does not keep the loop alive; it only ends a wait for the batch timer */
    uv_timer_t guard;
    uv_timer_init(&loop, &guard);
    uv_timer_start(&guard, guard_fire, 10000, 0);
    uv_unref((uv_handle_t *)&guard);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(r.n, 1);
    if (r.n == 1) CHECK_EQ_INT(pc_batch_counts(r.got[0]).samples, 10);
    CHECK_EQ_INT(ups[0].calls + ups[1].calls, 2);
    uv_close((uv_handle_t *)&guard, NULL);
    tc_rec_clear(&r);
    tc_shutdown(c);
    tc_free(c);
    uv_loop_close(&loop);
}

/* Upstream answers wait for the downstream answer and carry the worst status of the requests
 * that carried their data. */
static void test_status_propagation(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    tc_rec r;
    tc_rec_init(&r);
    r.defer = true;
    pc_component *c =
        make("timeout: 10ms\nsend_batch_size: 0\nsend_batch_max_size: 5\n", &loop, &r.base, NULL);
    tc_up ups[2] = {{0}};
    c->type->consume(c, request(0, 0), tc_up_done, &ups[0]); /* 5 samples: output 1 */
    c->type->consume(c, request(1, 0), tc_up_done, &ups[1]); /* 5 samples: output 2 */
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(r.n_deferred, 2);
    CHECK_EQ_INT(ups[0].calls + ups[1].calls, 0); /* downstream has not answered yet */
    if (r.n_deferred == 2) {
        r.dones[1](r.args[1], PC_OK, NULL);
        CHECK_EQ_INT(ups[0].calls + ups[1].calls, 0); /* the job waits for both */
        r.dones[0](r.args[0], PC_EAGAIN, "backend down");
    }
    CHECK_EQ_INT(ups[0].calls, 1);
    CHECK_EQ_INT(ups[1].calls, 1);
    CHECK_EQ_INT(ups[0].st, PC_EAGAIN);
    CHECK_EQ_INT(ups[1].st, PC_OK);
    tc_rec_clear(&r);

    /* one failing merged request fails every request merged into it */
    r.defer = false;
    r.n_deferred = 0;
    r.answer = PC_EAGAIN;
    tc_up more[3] = {{0}};
    pc_component *c2 = make("timeout: 10ms\n", &loop, &r.base, NULL);
    for (int i = 0; i < 3; i++)
        c2->type->consume(c2, request(i, 0), tc_up_done, &more[i]);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(r.n, 1);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(more[i].calls, 1);
        CHECK_EQ_INT(more[i].st, PC_EAGAIN);
    }
    /* the failure was once: the next flush succeeds */
    tc_up last = {0};
    c2->type->consume(c2, request(5, 0), tc_up_done, &last);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(last.calls, 1);
    CHECK_EQ_INT(last.st, PC_OK);
    tc_rec_clear(&r);
    tc_shutdown(c);
    tc_free(c);
    tc_shutdown(c2);
    tc_free(c2);
    uv_loop_close(&loop);
}

static void test_metadata_keys(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    tc_rec r;
    tc_rec_init(&r);
    pc_component *c = make("timeout: 20ms\nmetadata_keys: [X-Scope-OrgID]\n"
                           "metadata_cardinality_limit: 2\n",
                           &loop, &r.base, NULL);
    tc_up ups[7] = {{0}};
    totals in[2];
    memset(in, 0, sizeof in);
    for (int i = 0; i < 6; i++) {
        pc_batch *b = request(i, 0);
        pc_batch_set_meta(b, "x-scope-orgid", i % 2 ? "tenant-b" : "tenant-a");
        pc_batch_set_meta(b, "x-request", "same");
        add_totals(b, &in[i % 2]);
        c->type->consume(c, b, tc_up_done, &ups[i]);
    }
    /* a third tenant is over the cardinality limit: refused, retryable later */
    pc_batch *b = request(7, 0);
    pc_batch_set_meta(b, "x-scope-orgid", "tenant-c");
    c->type->consume(c, b, tc_up_done, &ups[6]);
    CHECK_EQ_INT(ups[6].calls, 1);
    CHECK_EQ_INT(ups[6].st, PC_EBUSY);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(r.n, 2);
    for (size_t i = 0; i < r.n; i++) {
        const char *t = pc_batch_get_meta(r.got[i], "x-scope-orgid");
        CHECK(t != NULL);
        if (!t) continue;
        int k = strcmp(t, "tenant-b") == 0;
        totals out = {0};
        add_totals(r.got[i], &out);
        CHECK(same_totals(&in[k], &out));
        CHECK_STR(pc_batch_get_meta(r.got[i], "x-request"), "same"); /* agreed by all inputs */
    }
    for (int i = 0; i < 6; i++)
        CHECK_EQ_INT(ups[i].st, PC_OK);
    tc_rec_clear(&r);
    tc_shutdown(c);
    tc_free(c);
    uv_loop_close(&loop);
}

/* Without metadata_keys, tenants are still batched apart (and data without one apart from
 * theirs): each flushed batch holds one tenant's requests, under that tenant. */
static void test_tenants_apart(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    tc_rec r;
    tc_rec_init(&r);
    pc_component *c = make("timeout: 20ms\n", &loop, &r.base, NULL);
    static const char *const tenants[3] = {"tenant-a", "tenant-b", NULL};
    tc_up ups[9] = {{0}};
    totals in[3];
    memset(in, 0, sizeof in);
    for (int i = 0; i < 9; i++) {
        pc_batch *b = request(i, 0);
        pc_batch_set_tenant(b, tenants[i % 3]);
        add_totals(b, &in[i % 3]);
        c->type->consume(c, b, tc_up_done, &ups[i]);
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(r.n, 3);
    bool seen[3] = {false};
    for (size_t i = 0; i < r.n; i++) {
        const char *t = pc_batch_tenant(r.got[i]);
        int k = !t ? 2 : strcmp(t, "tenant-b") == 0 ? 1 : 0;
        CHECK(!seen[k]);
        seen[k] = true;
        totals out = {0};
        add_totals(r.got[i], &out);
        CHECK(same_totals(&in[k], &out));
    }
    for (int i = 0; i < 9; i++)
        CHECK_EQ_INT(ups[i].st, PC_OK);
    tc_rec_clear(&r);
    tc_shutdown(c);
    tc_free(c);
    uv_loop_close(&loop);
}

static void test_shutdown_flushes(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    tc_rec r;
    tc_rec_init(&r);
    pc_component *c = make("timeout: 1h\n", &loop, &r.base, NULL);
    tc_up ups[3] = {{0}};
    totals in = {0};
    for (int i = 0; i < 3; i++) {
        pc_batch *b = request(i, 0);
        add_totals(b, &in);
        c->type->consume(c, b, tc_up_done, &ups[i]);
    }
    uv_run(&loop, UV_RUN_NOWAIT);
    CHECK_EQ_INT(r.n, 0);
    tc_up_order = 0;
    /* tc_shutdown runs the loop: the timer is closed, so this returns without an hour */
    uint64_t t0 = uv_now(&loop);
    tc_shutdown(c);
    CHECK(uv_now(&loop) - t0 < 5000);
    CHECK_EQ_INT(r.n, 1);
    if (r.n == 1) {
        totals out = {0};
        add_totals(r.got[0], &out);
        CHECK(same_totals(&in, &out));
    }
    for (int i = 0; i < 3; i++)
        CHECK_EQ_INT(ups[i].calls, 1);
    tc_rec_clear(&r);
    tc_free(c);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);

    /* shutdown without start, and without data */
    uv_loop_init(&loop);
    pc_component *c2 = make(NULL, &loop, &r.base, NULL);
    tc_shutdown(c2);
    tc_free(c2);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);
}

static void test_config_errors(void)
{
    char err[512] = "";
    CHECK(make("send_batch_size: 100\nsend_batch_max_size: 10\n", NULL, NULL, err) == NULL);
    CHECK_CONTAINS(err, "processors::batch");
    CHECK_CONTAINS(err, "send_batch_max_size: must be >= send_batch_size");
    CHECK(make("timeout: soon\n", NULL, NULL, err) == NULL);
    CHECK_CONTAINS(err, "timeout");
    CHECK(make("send_batch_sise: 3\n", NULL, NULL, err) == NULL);
    CHECK_CONTAINS(err, "send_batch_size");
    CHECK(make("metadata_cardinality_limit: 0\n", NULL, NULL, err) == NULL);
    CHECK_CONTAINS(err, "metadata_cardinality_limit");
}

/* A flush of one request that needs no split forwards that request as it came (its pass-through
 * bytes too, ARCHITECTURE.md §2), as the Collector's batch does; two are merged into a new one. */
static void test_one_request_forwarded(void)
{
    for (int n = 1; n <= 2; n++) {
        uv_loop_t loop;
        uv_loop_init(&loop);
        tc_rec r;
        tc_rec_init(&r);
        pc_component *c = make("timeout: 10ms\n", &loop, &r.base, NULL);
        tc_up ups[2] = {{0}};
        pc_batch *in[2];
        for (int i = 0; i < n; i++) {
            in[i] = request(i, 0);
            pc_buf raw = {0};
            pc_batch_encode_proto(in[i], &raw);
            pc_batch_set_raw(in[i], raw.data, raw.len, PC_ENC_NONE, false);
            pc_buf_free(&raw);
            c->type->consume(c, in[i], tc_up_done, &ups[i]);
        }
        uv_run(&loop, UV_RUN_DEFAULT);
        CHECK_EQ_INT(r.n, 1);
        if (r.n == 1 && n == 1) {
            CHECK(r.got[0] == in[0]);
            CHECK(r.got[0]->raw != NULL);
        } else if (r.n == 1) {
            CHECK(r.got[0] != in[0] && r.got[0] != in[1]);
            CHECK(r.got[0]->raw == NULL);
            CHECK_EQ_INT(r.got[0]->req->n_resource_profiles, 2);
        }
        for (int i = 0; i < n; i++)
            CHECK_EQ_INT(ups[i].st, PC_OK);
        tc_rec_clear(&r);
        tc_shutdown(c);
        tc_free(c);
        CHECK_EQ_INT(uv_loop_close(&loop), 0);
    }
}

int main(void)
{
    RUN(test_merge_100);
    RUN(test_one_request_forwarded);
    RUN(test_size_trigger_and_split);
    RUN(test_size_trigger_exact);
    RUN(test_status_propagation);
    RUN(test_metadata_keys);
    RUN(test_tenants_apart);
    RUN(test_shutdown_flushes);
    RUN(test_config_errors);
    return check_report();
}
