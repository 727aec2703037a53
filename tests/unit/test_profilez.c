/* Tests for the profilez aggregate (src/extensions/profilez/agg.c): the stack budget per series,
 * the time slices (the oldest dropped first), the window, the series cap, and what a batch
 * becomes. Every expected value is computed here from what the test put in; the JSON is read
 * back with jansson. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "check.h"
#include "extensions/profilez/agg.h"
#include "payload.h"

#define SLICE 1000u /* ms: every test uses window = slices * SLICE */

static pz_agg *agg(unsigned slices, size_t max_stacks, size_t max_series)
{
    pz_limits l = {.window_ms = (uint64_t)slices * SLICE,
                   .slices = slices,
                   .max_stacks = max_stacks,
                   .max_series = max_series};
    return pz_agg_new(&l);
}

/* One stack "f<a>;f<b>;..." given root first as a ';'-separated list, added leaf first. */
static int add(pz_agg *a, const char *service, const char *stack, int64_t v, uint64_t samples,
               uint64_t t)
{
    const char *frames[64];
    char buf[512], *save = NULL;
    size_t n = 0;
    snprintf(buf, sizeof buf, "%s", stack);
    for (char *p = strtok_r(buf, ";", &save); p && n < 64; p = strtok_r(NULL, ";", &save))
        frames[n++] = p;
    for (size_t i = 0; i < n / 2; i++) { /* leaf first */
        const char *x = frames[i];
        frames[i] = frames[n - 1 - i];
        frames[n - 1 - i] = x;
    }
    return pz_agg_add_stack(a, service, "cpu", "nanoseconds", frames, n, v, samples, t);
}

static json_t *parse(pc_buf *b)
{
    json_error_t e;
    json_t *j = json_loadb((const char *)b->data, b->len, 0, &e);
    if (!j)
        fprintf(stderr, "bad JSON (%s): %.*s\n", e.text, b->len > 300 ? 300 : (int)b->len,
                (const char *)b->data);
    pc_buf_free(b);
    return j;
}

static json_t *series_all(pz_agg *a, uint64_t t)
{
    pc_buf b = {0};
    pz_agg_series_json(a, t, &b);
    return parse(&b);
}

/* A field of the series (service, cpu:nanoseconds); -1 when there is no such series. */
static long long series_field(pz_agg *a, const char *service, const char *field, uint64_t t)
{
    json_t *j = series_all(a, t);
    long long v = -1;
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(j, "series"), i, s)
    {
        if (!strcmp(json_string_value(json_object_get(s, "service")), service) &&
            !strcmp(json_string_value(json_object_get(s, "type")), "cpu:nanoseconds"))
            v = json_integer_value(json_object_get(s, field));
    }
    json_decref(j);
    return v;
}

static long long stat(pz_agg *a, const char *field, uint64_t t)
{
    json_t *j = series_all(a, t);
    long long v = json_integer_value(json_object_get(json_object_get(j, "stats"), field));
    json_decref(j);
    return v;
}

static json_t *flame(pz_agg *a, const char *service, const char *type, uint64_t t)
{
    pc_buf b = {0};
    if (pz_agg_flamegraph_json(a, service, type, t, &b)) {
        pc_buf_free(&b);
        return NULL;
    }
    return parse(&b);
}

/* The flame graph's pre-order node list as a tree: node i's children are the nodes after it one
 * deeper, up to the next node at its depth or above. The child of node i named name, or -1. */
static long long child(json_t *f, long long i, const char *name)
{
    json_t *names = json_object_get(f, "names"), *nodes = json_object_get(f, "nodes");
    long long d = json_integer_value(json_array_get(json_array_get(nodes, (size_t)i), 3));
    for (size_t k = (size_t)i + 1; k < json_array_size(nodes); k++) {
        json_t *n = json_array_get(nodes, k);
        long long dk = json_integer_value(json_array_get(n, 3));
        if (dk <= d) break;
        const char *nm =
            json_string_value(json_array_get(names, json_integer_value(json_array_get(n, 0))));
        if (dk == d + 1 && nm && !strcmp(nm, name)) return (long long)k;
    }
    return -1;
}

/* The node at path (root first, ';'-separated; "" = the root) of a flame graph: its total, or
 * -1 when absent; *self gets its self value. */
static long long node(json_t *f, const char *path, long long *self)
{
    long long i = 0;
    char buf[512], *save = NULL;
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = strtok_r(buf, ";", &save); p && i >= 0; p = strtok_r(NULL, ";", &save))
        i = child(f, i, p);
    if (i < 0) return -1;
    json_t *n = json_array_get(json_object_get(f, "nodes"), (size_t)i);
    if (self) *self = json_integer_value(json_array_get(n, 2));
    return json_integer_value(json_array_get(n, 1));
}

static long long fnode(pz_agg *a, const char *service, const char *path, uint64_t t)
{
    json_t *f = flame(a, service, "cpu:nanoseconds", t);
    long long v = f ? node(f, path, NULL) : -2;
    json_decref(f);
    return v;
}

/* ---- the budget ---- */

static void test_same_stack_costs_one(void)
{
    pz_agg *a = agg(4, 3, 8);
    for (int i = 1; i <= 10; i++)
        add(a, "svc", "main;work", i, 1, 100);
    CHECK_EQ_INT(series_field(a, "svc", "stacks", 100), 1);
    CHECK_EQ_INT(series_field(a, "svc", "total", 100), 55);
    CHECK_EQ_INT(series_field(a, "svc", "samples", 100), 10);
    CHECK_EQ_INT(fnode(a, "svc", "main;work", 100), 55);
    CHECK_EQ_INT(stat(a, "evicted_stacks", 100), 0);
    pz_agg_free(a);
}

/* max_stacks distinct stacks fit; one more in a later slice drops the oldest slice. */
static void test_budget_drops_oldest_slice(void)
{
    const size_t max = 5;
    pz_agg *a = agg(4, max, 8);
    char st[64];
    for (size_t i = 0; i < max; i++) {
        snprintf(st, sizeof st, "main;old%zu", i);
        add(a, "svc", st, 10, 1, 100); /* slice 0 */
    }
    CHECK_EQ_INT(series_field(a, "svc", "stacks", 100), (long long)max);
    CHECK_EQ_INT(stat(a, "evicted_stacks", 100), 0);
    CHECK_EQ_INT(series_field(a, "svc", "total", 100), 10 * (long long)max);
    /* a stack the current slice holds already costs nothing */
    add(a, "svc", "main;old0", 5, 1, 150);
    CHECK_EQ_INT(series_field(a, "svc", "stacks", 150), (long long)max);
    /* a new stack one slice later: slice 0 (max stacks) goes */
    add(a, "svc", "main;new", 7, 1, 1100);
    CHECK_EQ_INT(series_field(a, "svc", "stacks", 1100), 1);
    CHECK_EQ_INT(stat(a, "evicted_stacks", 1100), (long long)max);
    CHECK_EQ_INT(series_field(a, "svc", "evicted_stacks", 1100), (long long)max);
    CHECK_EQ_INT(series_field(a, "svc", "total", 1100), 7);
    CHECK_EQ_INT(fnode(a, "svc", "main;old0", 1100), -1);
    CHECK_EQ_INT(fnode(a, "svc", "main;new", 1100), 7);
    CHECK_EQ_INT(stat(a, "over_budget_samples", 1100), 0);
    pz_agg_free(a);
}

/* Exactly max_stacks distinct stacks in one slice: all kept, nothing dropped, nothing over. */
static void test_budget_exact_fit(void)
{
    const size_t max = 4;
    pz_agg *a = agg(4, max, 8);
    char st[64];
    for (size_t i = 0; i < max; i++) {
        snprintf(st, sizeof st, "a;b%zu", i);
        add(a, "svc", st, (int64_t)i + 1, 1, 2500 + i);
    }
    CHECK_EQ_INT(series_field(a, "svc", "stacks", 2600), (long long)max);
    CHECK_EQ_INT(stat(a, "over_budget_samples", 2600), 0);
    CHECK_EQ_INT(stat(a, "evicted_stacks", 2600), 0);
    for (size_t i = 0; i < max; i++) {
        snprintf(st, sizeof st, "a;b%zu", i);
        CHECK_EQ_INT(fnode(a, "svc", st, 2600), (long long)i + 1);
    }
    pz_agg_free(a);
}

/* The slices between are dropped oldest first, one at a time, only as far as needed. */
static void test_budget_oldest_first(void)
{
    pz_agg *a = agg(5, 3, 8);
    add(a, "svc", "m;a", 1, 1, 0);    /* slice 0 */
    add(a, "svc", "m;b", 2, 1, 1000); /* slice 1 */
    add(a, "svc", "m;c", 4, 1, 2000); /* slice 2 */
    add(a, "svc", "m;d", 8, 1, 2500); /* slice 2, full: slice 0 goes */
    CHECK_EQ_INT(fnode(a, "svc", "m;a", 2500), -1);
    CHECK_EQ_INT(fnode(a, "svc", "m;b", 2500), 2);
    CHECK_EQ_INT(fnode(a, "svc", "m;c", 2500), 4);
    CHECK_EQ_INT(fnode(a, "svc", "m;d", 2500), 8);
    CHECK_EQ_INT(fnode(a, "svc", "m", 2500), 14);
    CHECK_EQ_INT(stat(a, "evicted_stacks", 2500), 1);
    add(a, "svc", "m;e", 16, 1, 2600); /* then slice 1 */
    CHECK_EQ_INT(fnode(a, "svc", "m;b", 2600), -1);
    CHECK_EQ_INT(fnode(a, "svc", "m", 2600), 28);
    CHECK_EQ_INT(stat(a, "evicted_stacks", 2600), 2);
    CHECK_EQ_INT(series_field(a, "svc", "stacks", 2600), 3);
    pz_agg_free(a);
}

/* When the current slice alone holds max_stacks, a new stack's value goes to "[over budget]". */
static void test_over_budget_in_one_slice(void)
{
    pz_agg *a = agg(4, 3, 8);
    add(a, "svc", "m;a", 1, 1, 100);
    add(a, "svc", "m;b", 2, 1, 100);
    add(a, "svc", "m;c", 4, 2, 100);
    add(a, "svc", "m;d", 8, 3, 100);  /* over */
    add(a, "svc", "m;e", 16, 5, 100); /* over */
    add(a, "svc", "m;a", 32, 1, 100); /* kept: adds */
    CHECK_EQ_INT(series_field(a, "svc", "stacks", 100), 3);
    CHECK_EQ_INT(series_field(a, "svc", "total", 100), 1 + 2 + 4 + 8 + 16 + 32);
    CHECK_EQ_INT(fnode(a, "svc", "[over budget]", 100), 8 + 16);
    CHECK_EQ_INT(fnode(a, "svc", "m;a", 100), 33);
    CHECK_EQ_INT(fnode(a, "svc", "m;d", 100), -1);
    CHECK_EQ_INT(stat(a, "over_budget_samples", 100), 3 + 5);
    CHECK_EQ_INT(series_field(a, "svc", "over_budget_samples", 100), 3 + 5);
    CHECK_EQ_INT(stat(a, "evicted_stacks", 100), 0);
    /* one slice later the old slice makes room again */
    add(a, "svc", "m;f", 64, 1, 1100);
    CHECK_EQ_INT(fnode(a, "svc", "m;f", 1100), 64);
    CHECK_EQ_INT(fnode(a, "svc", "[over budget]", 1100), -1);
    CHECK_EQ_INT(stat(a, "evicted_stacks", 1100), 3);
    pz_agg_free(a);
}

/* Budgets are per series: one busy service does not push another out. */
static void test_budget_per_series(void)
{
    pz_agg *a = agg(4, 2, 8);
    add(a, "quiet", "q;x", 3, 1, 0);
    char st[64];
    for (int i = 0; i < 50; i++) {
        snprintf(st, sizeof st, "busy;f%d", i);
        add(a, "busy", st, 1, 1, (uint64_t)i * 70); /* slices 0..3 */
    }
    CHECK_EQ_INT(fnode(a, "quiet", "q;x", 3500), 3);
    CHECK(series_field(a, "busy", "stacks", 3500) <= 2);
    CHECK_EQ_INT(series_field(a, "quiet", "evicted_stacks", 3500), 0);
    pz_agg_free(a);
}

/* ---- the window ---- */

static void test_window_expires_slices(void)
{
    pz_agg *a = agg(3, 100, 8);          /* window 3000 ms: slots now-2 .. now */
    add(a, "svc", "m;s0", 1, 1, 500);    /* slot 0 */
    add(a, "svc", "m;s1", 10, 1, 1500);  /* slot 1 */
    add(a, "svc", "m;s2", 100, 1, 2500); /* slot 2 */
    CHECK_EQ_INT(fnode(a, "svc", "m", 2999), 111);
    /* at 3000 (slot 3) slot 0 left the window: expired, not evicted */
    CHECK_EQ_INT(fnode(a, "svc", "m", 3000), 110);
    CHECK_EQ_INT(fnode(a, "svc", "m;s0", 3000), -1);
    CHECK_EQ_INT(series_field(a, "svc", "stacks", 3000), 2);
    CHECK_EQ_INT(stat(a, "evicted_stacks", 3000), 0);
    CHECK_EQ_INT(fnode(a, "svc", "m", 4000), 100);
    /* the whole window passed: the series is gone */
    CHECK_EQ_INT(series_field(a, "svc", "total", 5000), -1);
    CHECK(flame(a, "svc", "cpu:nanoseconds", 5000) == NULL);
    CHECK_EQ_INT(stat(a, "series", 5000), 0);
    CHECK_EQ_INT(stat(a, "stacks", 5000), 0);
    pz_agg_free(a);
}

/* A slice reused a full window later starts empty (the ring wraps). */
static void test_slice_ring_wraps(void)
{
    pz_agg *a = agg(2, 100, 8);
    add(a, "svc", "m;a", 5, 1, 100);  /* slot 0, ring 0 */
    add(a, "svc", "m;b", 7, 1, 2100); /* slot 2, ring 0 again */
    CHECK_EQ_INT(fnode(a, "svc", "m;a", 2100), -1);
    CHECK_EQ_INT(fnode(a, "svc", "m;b", 2100), 7);
    CHECK_EQ_INT(series_field(a, "svc", "stacks", 2100), 1);
    pz_agg_free(a);
}

/* ---- series ---- */

static void test_series_cap(void)
{
    pz_agg *a = agg(2, 10, 2);
    CHECK_EQ_INT(add(a, "a", "x", 1, 1, 0), 0);
    CHECK_EQ_INT(add(a, "b", "x", 1, 1, 0), 0);
    CHECK_EQ_INT(add(a, "c", "x", 1, 1, 0), PC_E2BIG);
    CHECK_EQ_INT(series_field(a, "c", "total", 0), -1);
    CHECK_EQ_INT(stat(a, "series", 0), 2);
    /* once a and b left the window, c has room */
    CHECK_EQ_INT(add(a, "c", "x", 4, 1, 2500), 0);
    CHECK_EQ_INT(series_field(a, "c", "total", 2500), 4);
    pz_agg_free(a);
}

/* ---- a batch ---- */

/* Service a with two profiles (one per sample type, as OTLP has it), a resource without a
 * service.name. Location 3 has two lines (an inlined frame: lines[0] is the innermost, the caller
 * named by its system name), location 4 only an address. */
static const char *const batch_json =
    "{\"resourceProfiles\":["
    "{\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":{\"stringValue\":\"a\"}}]},"
    "\"scopeProfiles\":[{\"profiles\":["
    "{\"sampleType\":{\"typeStrindex\":1,\"unitStrindex\":2},"
    "\"samples\":[{\"stackIndex\":1,\"values\":[\"10\"]},{\"stackIndex\":2,\"values\":[\"20\"]},"
    "{\"stackIndex\":1,\"values\":[\"5\"]},{\"stackIndex\":3,\"values\":[\"100\"]}]},"
    "{\"sampleType\":{\"typeStrindex\":3,\"unitStrindex\":4},"
    "\"samples\":[{\"stackIndex\":2,\"values\":[\"7\"]},"
    "{\"stackIndex\":2,\"timestampsUnixNano\":[\"1\",\"2\"]}]}]}]},"
    "{\"resource\":{\"attributes\":[]},"
    "\"scopeProfiles\":[{\"profiles\":["
    "{\"sampleType\":{\"typeStrindex\":1,\"unitStrindex\":2},"
    "\"samples\":[{\"stackIndex\":1,\"values\":[\"1\"]}]}]}]}],"
    "\"dictionary\":{"
    "\"locationTable\":[{},{\"lines\":[{\"functionIndex\":1}]},{\"lines\":[{\"functionIndex\":2}]},"
    "{\"lines\":[{\"functionIndex\":3},{\"functionIndex\":4}]},{\"address\":\"4096\"}],"
    "\"functionTable\":[{},{\"nameStrindex\":5},{\"nameStrindex\":6},{\"nameStrindex\":7},"
    "{\"systemNameStrindex\":8}],"
    "\"stackTable\":[{},{\"locationIndices\":[1,2]},{\"locationIndices\":[3,2]},"
    "{\"locationIndices\":[4,1,2]}],"
    "\"stringTable\":[\"\",\"cpu\",\"nanoseconds\",\"samples\",\"count\",\"leaf\",\"main\","
    "\"inlined\",\"caller_sys\"]}}";

static void test_batch(void)
{
    pz_agg *a = agg(4, 100, 8);
    pc_batch *b = batch_from_json(batch_json);
    pz_agg_add_batch(a, b, 100);
    pc_batch_unref(b);
    CHECK_EQ_INT(stat(a, "profiles", 100), 3);
    CHECK_EQ_INT(stat(a, "samples", 100), 7);
    CHECK_EQ_INT(stat(a, "series", 100), 3);
    json_t *f = flame(a, "a", "cpu:nanoseconds", 100);
    CHECK(f != NULL);
    long long self = -1;
    CHECK_EQ_INT(node(f, "", NULL), 135);
    CHECK_EQ_INT(node(f, "main", NULL), 135);
    CHECK_EQ_INT(node(f, "main;leaf", &self), 15 + 100);
    CHECK_EQ_INT(self, 15);
    /* stack 2 = location 3 (inlined inside caller_sys) under main */
    CHECK_EQ_INT(node(f, "main;caller_sys;inlined", &self), 20);
    CHECK_EQ_INT(self, 20);
    CHECK_EQ_INT(node(f, "main;leaf;0x1000", &self), 100);
    CHECK_EQ_INT(self, 100);
    json_decref(f);
    /* a sample without values counts its timestamps */
    CHECK_EQ_INT(fnode(a, "a", "main", 100), 135);
    f = flame(a, "a", "samples:count", 100);
    CHECK_EQ_INT(node(f, "main;caller_sys;inlined", NULL), 7 + 2);
    json_decref(f);
    CHECK_EQ_INT(fnode(a, "unknown_service", "main;leaf", 100), 1);
    /* the top table: the debug exporter's (flat by leaf, cum once per stack) */
    pc_buf out = {0};
    CHECK_EQ_INT(pz_agg_top_json(a, "a", "cpu:nanoseconds", 2, 100, &out), 0);
    json_t *t = parse(&out);
    CHECK_EQ_INT(json_integer_value(json_object_get(t, "total")), 135);
    CHECK_EQ_INT(json_integer_value(json_object_get(t, "functions")), 5);
    json_t *rows = json_object_get(t, "rows");
    CHECK_EQ_INT(json_array_size(rows), 2);
    CHECK_STR(json_string_value(json_object_get(json_array_get(rows, 0), "name")), "0x1000");
    CHECK_EQ_INT(json_integer_value(json_object_get(json_array_get(rows, 0), "flat")), 100);
    CHECK_STR(json_string_value(json_object_get(json_array_get(rows, 1), "name")), "inlined");
    CHECK_EQ_INT(json_integer_value(json_object_get(json_array_get(rows, 1), "cum")), 20);
    json_decref(t);
    out = (pc_buf){0};
    CHECK_EQ_INT(pz_agg_top_json(a, "a", "wall:nanoseconds", 2, 100, &out), PC_ENOENT);
    pc_buf_free(&out);
    pz_agg_free(a);
}

/* Deep stacks keep their leaf-most frames under "[truncated]"; long names are cut. */
static void test_truncation(void)
{
    pz_agg *a = agg(2, 10, 4);
    const size_t nf = PZ_MAX_DEPTH + 10;
    const char **frames = pc_xmalloc(nf * sizeof *frames);
    char(*names_)[16] = pc_xmalloc(nf * sizeof *names_);
    for (size_t i = 0; i < nf; i++) {
        snprintf(names_[i], sizeof names_[i], "f%zu", i); /* f0 is the leaf */
        frames[i] = names_[i];
    }
    pz_agg_add_stack(a, "deep", "cpu", "nanoseconds", frames, nf, 9, 1, 0);
    json_t *f = flame(a, "deep", "cpu:nanoseconds", 0);
    /* root -> [truncated] -> f(MAX-2) -> ... -> f0: MAX frames below the root, one a level */
    json_t *names = json_object_get(f, "names"), *nodes = json_object_get(f, "nodes");
#define NAME_AT(k)                                                                                 \
    json_string_value(                                                                             \
        json_array_get(names, json_integer_value(json_array_get(json_array_get(nodes, k), 0))))
    size_t depth = json_array_size(nodes) - 1;
    const char *first = NAME_AT(1), *second = NAME_AT(2), *leaf = NAME_AT(depth);
    json_t *n = json_array_get(nodes, depth);
    CHECK_EQ_INT(json_integer_value(json_array_get(n, 3)), PZ_MAX_DEPTH);
    CHECK_EQ_INT(depth, PZ_MAX_DEPTH);
    CHECK_STR(first, "[truncated]");
    char want[16];
    snprintf(want, sizeof want, "f%d", PZ_MAX_DEPTH - 2);
    CHECK_STR(second, want);
    CHECK_STR(leaf, "f0");
    CHECK_EQ_INT(json_integer_value(json_array_get(n, 2)), 9);
    json_decref(f);
    free(frames);
    free(names_);
    char longname[PZ_MAX_NAME + 100];
    memset(longname, 'x', sizeof longname);
    longname[sizeof longname - 1] = 0;
    const char *one[1] = {longname};
    pz_agg_add_stack(a, "long", "cpu", "nanoseconds", one, 1, 3, 1, 0);
    f = flame(a, "long", "cpu:nanoseconds", 0);
    const char *nm = json_string_value(json_array_get(json_object_get(f, "names"), 1));
    CHECK_EQ_INT(json_array_size(json_object_get(f, "nodes")), 2);
    CHECK(nm && strlen(nm) == PZ_MAX_NAME);
    json_decref(f);
    pz_agg_free(a);
}

/* A batch's deep stack: the same cut as pz_agg_add_stack (leaf-most frames under
 * "[truncated]"), each location named once however often stacks use it. */
static void test_batch_deep(void)
{
    const int n = PZ_MAX_DEPTH + 40;
    pc_buf j = {0};
    pc_buf_printf(&j, "{\"resourceProfiles\":[{\"resource\":{\"attributes\":[{\"key\":"
                      "\"service.name\",\"value\":{\"stringValue\":\"deep\"}}]},"
                      "\"scopeProfiles\":[{\"profiles\":[{\"sampleType\":{\"typeStrindex\":1,"
                      "\"unitStrindex\":2},\"samples\":[{\"stackIndex\":1,\"values\":[\"3\"]},"
                      "{\"stackIndex\":2,\"values\":[\"4\"]}]}]}]}],\"dictionary\":{"
                      "\"locationTable\":[{}");
    for (int i = 1; i <= n; i++)
        pc_buf_printf(&j, ",{\"lines\":[{\"functionIndex\":%d}]}", i);
    pc_buf_printf(&j, "],\"functionTable\":[{}");
    for (int i = 1; i <= n; i++)
        pc_buf_printf(&j, ",{\"nameStrindex\":%d}", i + 2);
    /* stack 1: locations 1 (leaf) .. n (root); stack 2: locations 1, 2 */
    pc_buf_printf(&j, "],\"stackTable\":[{},{\"locationIndices\":[");
    for (int i = 1; i <= n; i++)
        pc_buf_printf(&j, "%s%d", i > 1 ? "," : "", i);
    pc_buf_printf(&j, "]},{\"locationIndices\":[1,2]}],\"stringTable\":[\"\",\"cpu\",\"ns\"");
    for (int i = 1; i <= n; i++)
        pc_buf_printf(&j, ",\"f%d\"", i);
    pc_buf_printf(&j, "]}}");
    pc_buf_append(&j, "", 1);
    pc_batch *b = batch_from_json((const char *)j.data);
    pc_buf_free(&j);
    pz_agg *a = agg(2, 10, 4);
    pz_agg_add_batch(a, b, 0);
    pc_batch_unref(b);
    json_t *f = flame(a, "deep", "cpu:ns", 0);
    CHECK(f != NULL);
    CHECK_EQ_INT(node(f, "", NULL), 7);
    CHECK_EQ_INT(node(f, "[truncated]", NULL), 3);
    CHECK_EQ_INT(node(f, "f2;f1", NULL), 4);
    json_t *names = json_object_get(f, "names"), *nodes = json_object_get(f, "nodes");
    size_t last = 0; /* the deepest node */
    for (size_t k = 0; k < json_array_size(nodes); k++)
        if (json_integer_value(json_array_get(json_array_get(nodes, k), 3)) >
            json_integer_value(json_array_get(json_array_get(nodes, last), 3)))
            last = k;
    json_t *deepest = json_array_get(nodes, last);
    CHECK_EQ_INT(json_integer_value(json_array_get(deepest, 3)), PZ_MAX_DEPTH);
    CHECK_STR(
        json_string_value(json_array_get(names, json_integer_value(json_array_get(deepest, 0)))),
        "f1");
    CHECK_EQ_INT(json_integer_value(json_array_get(deepest, 2)), 3);
    char want[16];
    snprintf(want, sizeof want, "f%d", PZ_MAX_DEPTH - 1); /* the root-most frame kept */
    CHECK(child(f, child(f, 0, "[truncated]"), want) > 0);
    snprintf(want, sizeof want, "f%d", PZ_MAX_DEPTH);
    CHECK_EQ_INT(node(f, want, NULL), -1);
    json_decref(f);
    pz_agg_free(a);
}

static void test_empty(void)
{
    pz_agg *a = agg(4, 10, 4);
    CHECK_EQ_INT(stat(a, "series", 0), 0);
    json_t *j = series_all(a, 0);
    CHECK_EQ_INT(json_array_size(json_object_get(j, "series")), 0);
    json_decref(j);
    CHECK(flame(a, "x", "cpu:nanoseconds", 0) == NULL);
    pz_agg_free(a);
}

static void test_json_escaping(void)
{
    pc_buf b = {0};
    pz_json_str(&b, "a\"b\\c\n<\x01");
    pc_buf_append(&b, "", 1);
    CHECK_STR((const char *)b.data, "\"a\\\"b\\\\c\\u000a\\u003c\\u0001\"");
    pc_buf_free(&b);
}

/* ---- views: time range, focus, search, timeline ---- */

static json_t *top_q(pz_agg *a, const pz_query *q, uint64_t t)
{
    pc_buf b = {0};
    CHECK_EQ_INT(pz_agg_top_q(a, q, t, &b), 0);
    return parse(&b);
}

/* name's row of a top answer: flat and cum, or -1 when not listed */
static long long top_row(json_t *t, const char *name, long long *cum)
{
    json_t *rows = json_object_get(t, "rows");
    for (size_t i = 0; i < json_array_size(rows); i++) {
        json_t *r = json_array_get(rows, i);
        if (strcmp(json_string_value(json_object_get(r, "name")), name)) continue;
        if (cum) *cum = json_integer_value(json_object_get(r, "cum"));
        return json_integer_value(json_object_get(r, "flat"));
    }
    return -1;
}

static void test_views(void)
{
    pz_agg *a = agg(3, 100, 8);
    add(a, "svc", "m;a;x", 1, 1, 500);    /* slot 0 */
    add(a, "svc", "m;b;x", 10, 2, 1500);  /* slot 1 */
    add(a, "svc", "m;a;y", 100, 3, 2500); /* slot 2 */
    pz_query q = {.service = "svc", .type = "cpu:nanoseconds", .limit = 50, .clock_off_ms = 7};
    /* the timeline: every slice of the window, oldest first, in the caller's clock */
    pc_buf b = {0};
    CHECK_EQ_INT(pz_agg_timeline_q(a, &q, 2999, &b), 0);
    json_t *tl = parse(&b);
    json_t *pts = json_object_get(tl, "points");
    CHECK_EQ_INT(json_array_size(pts), 3);
    CHECK_EQ_INT(json_integer_value(json_array_get(json_array_get(pts, 1), 0)), 1007);
    CHECK_EQ_INT(json_integer_value(json_array_get(json_array_get(pts, 1), 1)), 10);
    CHECK_EQ_INT(json_integer_value(json_array_get(json_array_get(pts, 2), 2)), 3);
    CHECK_EQ_INT(json_integer_value(json_object_get(tl, "total")), 111);
    json_decref(tl);
    /* a time range: the slices overlapping [from, to) */
    q.from_ms = 1007;
    q.to_ms = 2007;
    b = (pc_buf){0};
    CHECK_EQ_INT(pz_agg_flamegraph_q(a, &q, 2999, &b), 0);
    json_t *f = parse(&b);
    CHECK_EQ_INT(json_integer_value(json_object_get(f, "total")), 10);
    json_decref(f);
    q.to_ms = 0; /* no end */
    json_t *t = top_q(a, &q, 2999);
    CHECK_EQ_INT(json_integer_value(json_object_get(t, "total")), 110);
    json_decref(t);
    /* focus m;a: the stacks under it, from a down (m is not in the table) */
    q.from_ms = 0;
    const char *path[] = {"m", "a"};
    q.focus = path;
    q.n_focus = 2;
    long long cum = 0;
    t = top_q(a, &q, 2999);
    CHECK_EQ_INT(json_integer_value(json_object_get(t, "total")), 101);
    CHECK_EQ_INT(json_integer_value(json_object_get(t, "functions")), 3);
    CHECK_EQ_INT(top_row(t, "y", NULL), 100);
    CHECK_EQ_INT(top_row(t, "a", &cum), 0);
    CHECK_EQ_INT(cum, 101);
    CHECK_EQ_INT(top_row(t, "m", NULL), -1);
    json_decref(t);
    /* search: only the matching functions, any case */
    q.n_focus = 0;
    q.search = "X";
    t = top_q(a, &q, 2999);
    CHECK_EQ_INT(json_integer_value(json_object_get(t, "functions")), 1);
    CHECK_EQ_INT(top_row(t, "x", &cum), 11);
    CHECK_EQ_INT(cum, 11);
    json_decref(t);
    /* a diff: slot 2 against the baseline slots 0 and 1 (shares of their own totals) */
    pz_query base = q;
    base.to_ms = 2007;
    q.from_ms = 2007;
    q.search = NULL;
    q.base = &base;
    t = top_q(a, &q, 2999);
    CHECK_EQ_INT(json_integer_value(json_object_get(t, "base_total")), 11);
    json_t *r0 = json_array_get(json_object_get(t, "rows"), 0);
    CHECK_STR(json_string_value(json_object_get(r0, "name")), "x"); /* 11/11 -> 0/100 */
    CHECK_EQ_INT(json_integer_value(json_object_get(r0, "base_flat")), 11);
    CHECK(json_real_value(json_object_get(r0, "change")) == -1.0);
    json_decref(t);
    b = (pc_buf){0};
    CHECK_EQ_INT(pz_agg_flamegraph_q(a, &q, 2999, &b), 0);
    f = parse(&b);
    CHECK_EQ_INT(json_integer_value(json_object_get(f, "base_total")), 11);
    json_t *root = json_array_get(json_object_get(f, "nodes"), 0);
    CHECK_EQ_INT(json_integer_value(json_array_get(root, 1)), 100);
    CHECK_EQ_INT(json_integer_value(json_array_get(root, 4)), 11);
    json_decref(f);
    q.base = NULL;
    q.from_ms = 0;
    /* a focus deeper than any stack matches nothing */
    q.search = NULL;
    q.focus = NULL;
    q.n_focus = PZ_MAX_DEPTH + 1;
    t = top_q(a, &q, 2999);
    CHECK_EQ_INT(json_integer_value(json_object_get(t, "total")), 0);
    json_decref(t);
    pz_agg_free(a);
}

/* Label sets: one per distinct set of attributes, max_label_sets of them (a new one beyond that
 * is [labels]=[over budget], counted), given back when their stacks leave the window. */
static const char *const labels_json =
    "{\"resourceProfiles\":[{\"resource\":{\"attributes\":["
    "{\"key\":\"service.name\",\"value\":{\"stringValue\":\"s\"}}]},"
    "\"scopeProfiles\":[{\"profiles\":[{\"sampleType\":{\"typeStrindex\":1,\"unitStrindex\":2},"
    "\"samples\":[{\"stackIndex\":1,\"attributeIndices\":[1],\"values\":[\"1\"]},"
    "{\"stackIndex\":1,\"attributeIndices\":[2],\"values\":[\"2\"]},"
    "{\"stackIndex\":1,\"attributeIndices\":[2],\"values\":[\"16\"]},"
    "{\"stackIndex\":1,\"attributeIndices\":[3],\"values\":[\"4\"]},"
    "{\"stackIndex\":1,\"values\":[\"8\"]}]}]}]}],"
    "\"dictionary\":{\"locationTable\":[{},{\"lines\":[{\"functionIndex\":1}]}],"
    "\"functionTable\":[{},{\"nameStrindex\":3}],\"stackTable\":[{},{\"locationIndices\":[1]}],"
    "\"attributeTable\":[{},{\"keyStrindex\":4,\"value\":{\"stringValue\":\"a\"}},"
    "{\"keyStrindex\":4,\"value\":{\"stringValue\":\"b\"}},"
    "{\"keyStrindex\":4,\"value\":{\"stringValue\":\"c\"}}],"
    "\"stringTable\":[\"\",\"cpu\",\"nanoseconds\",\"main\",\"k\"]}}";

static void test_label_sets(void)
{
    pz_limits l = {.window_ms = 2 * SLICE,
                   .slices = 2,
                   .max_stacks = 100,
                   .max_series = 4,
                   .max_label_sets = 2};
    pz_agg *a = pz_agg_new(&l);
    pc_batch *b = batch_from_json(labels_json);
    pz_agg_add_batch(a, b, 100);
    pc_batch_unref(b);
    CHECK_EQ_INT(stat(a, "label_sets", 100), 2);
    CHECK_EQ_INT(stat(a, "over_budget_label_samples", 100), 1);
    pz_query q = {.service = "s", .type = "cpu:nanoseconds", .limit = 50, .group_by = "k"};
    pc_buf out = {0};
    CHECK_EQ_INT(pz_agg_labels_q(a, &q, 100, &out), 0);
    json_t *j = parse(&out);
    CHECK_EQ_INT(json_integer_value(json_object_get(j, "total")), 31);
    json_t *rows = json_object_get(j, "rows");
    CHECK_EQ_INT(json_array_size(rows), 3);
    CHECK_STR(json_string_value(json_object_get(json_array_get(rows, 0), "value")), "b");
    CHECK_EQ_INT(json_integer_value(json_object_get(json_array_get(rows, 0), "total")), 18);
    CHECK_STR(json_string_value(json_object_get(json_array_get(rows, 1), "value")), "a");
    CHECK(json_is_null(json_object_get(json_array_get(rows, 2), "value")));
    CHECK_EQ_INT(json_integer_value(json_object_get(json_array_get(rows, 2), "total")), 12);
    json_decref(j);
    /* a filter: only the stacks with k=b */
    const char *kv[] = {"k", "b"};
    q.labels = kv;
    q.n_labels = 1;
    out = (pc_buf){0};
    CHECK_EQ_INT(pz_agg_flamegraph_q(a, &q, 100, &out), 0);
    j = parse(&out);
    CHECK_EQ_INT(json_integer_value(json_object_get(j, "total")), 18);
    json_decref(j);
    /* the window passed: stacks and label sets are given back */
    CHECK_EQ_INT(stat(a, "series", 5000), 0);
    CHECK_EQ_INT(stat(a, "label_sets", 5000), 0);
    pz_agg_free(a);
}

/* The memo of a profile's label sets (labels.c) keeps the per-sample counts: two samples with the
 * same attribute indices over budget count twice; the memo's references are given back. */
static void test_label_memo(void)
{
    pz_limits l = {.window_ms = 2 * SLICE,
                   .slices = 2,
                   .max_stacks = 100,
                   .max_series = 4,
                   .max_label_sets = 1};
    pz_agg *a = pz_agg_new(&l);
    pc_batch *b = batch_from_json(labels_json);
    pz_agg_add_batch(a, b, 100);
    pc_batch_unref(b);
    CHECK_EQ_INT(stat(a, "label_sets", 100), 1);
    CHECK_EQ_INT(stat(a, "over_budget_label_samples", 100), 3); /* k=b twice, k=c */
    pz_query q = {.service = "s", .type = "cpu:nanoseconds", .limit = 50, .group_by = "k"};
    pc_buf out = {0};
    CHECK_EQ_INT(pz_agg_labels_q(a, &q, 100, &out), 0);
    json_t *j = parse(&out);
    CHECK_EQ_INT(json_integer_value(json_object_get(j, "total")), 31);
    json_t *rows = json_object_get(j, "rows");
    CHECK_STR(json_string_value(json_object_get(json_array_get(rows, 0), "value")), "a");
    CHECK_EQ_INT(json_integer_value(json_object_get(json_array_get(rows, 0), "total")), 1);
    json_decref(j);
    CHECK_EQ_INT(stat(a, "label_sets", 5000), 0);
    pz_agg_free(a);
}

/* With the label-set table full, labels are only looked up (labels.c): a set already held is
 * still found, one with a name never seen is over budget at once. */
static void test_label_sets_full(void)
{
    pz_limits l = {.window_ms = 2 * SLICE,
                   .slices = 2,
                   .max_stacks = 100,
                   .max_series = 4,
                   .max_label_sets = 1};
    pz_agg *a = pz_agg_new(&l);
    for (int i = 0; i < 2; i++) { /* the second time, k=a arrives while the table is full */
        pc_batch *b = batch_from_json(labels_json);
        pz_agg_add_batch(a, b, 100);
        pc_batch_unref(b);
    }
    CHECK_EQ_INT(stat(a, "label_sets", 100), 1);
    CHECK_EQ_INT(stat(a, "over_budget_label_samples", 100), 6);
    pz_query q = {.service = "s", .type = "cpu:nanoseconds", .limit = 50, .group_by = "k"};
    pc_buf out = {0};
    CHECK_EQ_INT(pz_agg_labels_q(a, &q, 100, &out), 0);
    json_t *j = parse(&out);
    CHECK_EQ_INT(json_integer_value(json_object_get(j, "total")), 62);
    json_t *rows = json_object_get(j, "rows");
    bool seen = false;
    for (size_t i = 0; i < json_array_size(rows); i++) {
        const char *v = json_string_value(json_object_get(json_array_get(rows, i), "value"));
        if (!v || strcmp(v, "a")) continue;
        seen = true;
        CHECK_EQ_INT(json_integer_value(json_object_get(json_array_get(rows, i), "total")), 2);
    }
    CHECK(seen);
    json_decref(j);
    CHECK_EQ_INT(stat(a, "label_sets", 5000), 0);
    pz_agg_free(a);
}

/* Samples with the same (no) attributes but other links are other spans: 100 links, so some
 * share a slot of the 64-entry memo (a memo that ignored the link would merge them). */
static void test_label_memo_links(void)
{
    enum { N = 100 };
    pz_agg *a = pz_agg_new(&(pz_limits){.window_ms = 2 * SLICE,
                                        .slices = 2,
                                        .max_stacks = 1000,
                                        .max_series = 4,
                                        .max_label_sets = 1000});
    pc_buf j = {0};
    pc_buf_printf(&j, "{\"resourceProfiles\":[{\"resource\":{\"attributes\":[{\"key\":"
                      "\"service.name\",\"value\":{\"stringValue\":\"s\"}}]},\"scopeProfiles\":"
                      "[{\"profiles\":[{\"sampleType\":{\"typeStrindex\":1,\"unitStrindex\":2},"
                      "\"samples\":[");
    for (int i = 1; i <= N; i++)
        pc_buf_printf(&j, "%s{\"stackIndex\":1,\"linkIndex\":%d,\"values\":[\"%d\"]}",
                      i > 1 ? "," : "", i, i);
    pc_buf_printf(&j, "]}]}]}],\"dictionary\":{\"locationTable\":[{},{\"lines\":[{"
                      "\"functionIndex\":1}]}],\"functionTable\":[{},{\"nameStrindex\":3}],"
                      "\"stackTable\":[{},{\"locationIndices\":[1]}],\"linkTable\":[{}");
    for (int i = 1; i <= N; i++)
        pc_buf_printf(&j,
                      ",{\"traceId\":\"0102030405060708090a0b0c0d0e0f10\",\"spanId\":"
                      "\"%016x\"}",
                      i);
    pc_buf_printf(&j, "],\"stringTable\":[\"\",\"cpu\",\"nanoseconds\",\"main\"]}}");
    pc_buf_append(&j, "", 1);
    pc_batch *b = batch_from_json((const char *)j.data);
    pc_buf_free(&j);
    pz_agg_add_batch(a, b, 100);
    pc_batch_unref(b);
    CHECK_EQ_INT(stat(a, "label_sets", 100), N);
    pz_query q = {.service = "s", .type = "cpu:nanoseconds", .limit = 200, .group_by = "span_id"};
    pc_buf out = {0};
    CHECK_EQ_INT(pz_agg_labels_q(a, &q, 100, &out), 0);
    json_t *r = parse(&out);
    json_t *rows = json_object_get(r, "rows");
    CHECK_EQ_INT(json_array_size(rows), N);
    int ok = 0; /* each span's row holds its own sample: value i for span id i */
    for (size_t i = 0; i < json_array_size(rows); i++) {
        json_t *row = json_array_get(rows, i);
        const char *v = json_string_value(json_object_get(row, "value"));
        ok += v && strtol(v, NULL, 16) == json_integer_value(json_object_get(row, "total"));
    }
    CHECK_EQ_INT(ok, N);
    json_decref(r);
    pz_agg_free(a);
}

int main(void)
{
    RUN(test_same_stack_costs_one);
    RUN(test_budget_drops_oldest_slice);
    RUN(test_budget_exact_fit);
    RUN(test_budget_oldest_first);
    RUN(test_over_budget_in_one_slice);
    RUN(test_budget_per_series);
    RUN(test_window_expires_slices);
    RUN(test_slice_ring_wraps);
    RUN(test_series_cap);
    RUN(test_batch);
    RUN(test_truncation);
    RUN(test_batch_deep);
    RUN(test_empty);
    RUN(test_json_escaping);
    RUN(test_views);
    RUN(test_label_sets);
    RUN(test_label_memo);
    RUN(test_label_memo_links);
    RUN(test_label_sets_full);
    return check_report();
}
