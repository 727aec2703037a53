/* Merging (pdata/merge.c, what the batch processor uses): resources and scopes that differ in
 * exactly one attribute stay apart, whichever position that attribute takes once the key sorts
 * the attributes (each attribute is varied in turn, so one variant is first, one last), and by
 * key as well as by value; the same content in another form (string table, other order) merges.
 * Each input carries a sample value that is a distinct power of two, so the total of an output
 * resource (or scope) tells exactly which inputs went into it. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "payload.h"
#include "pdata/merge.h"
#include "pdata/pdata.h"

typedef struct attr {
    const char *key;   /* NULL: keyStrindex 4 ("host.name") */
    const char *value; /* OTLP JSON AnyValue */
} attr;

#define NA 4 /* attributes per resource / scope in these inputs */

static void put_attrs(pc_buf *j, const attr *a, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (a[i].key)
            pc_buf_printf(j, "%s{\"key\":\"%s\",\"value\":%s}", i ? "," : "", a[i].key, a[i].value);
        else
            pc_buf_printf(j, "%s{\"keyStrindex\":4,\"value\":%s}", i ? "," : "", a[i].value);
    }
}

/* One resource with attributes ra, one scope (name, version, attributes sa), one cpu profile
 * with one sample of value v. */
static pc_batch *make_batch(const attr *ra, const char *scope, const char *version, const attr *sa,
                            int64_t v)
{
    pc_buf j = {0};
    pc_buf_printf(&j, "{\"resourceProfiles\":[{\"resource\":{\"attributes\":[");
    put_attrs(&j, ra, NA);
    pc_buf_printf(&j,
                  "]},\"scopeProfiles\":[{\"scope\":{\"name\":\"%s\",\"version\":\"%s\","
                  "\"attributes\":[",
                  scope, version);
    put_attrs(&j, sa, NA);
    pc_buf_printf(&j,
                  "]},\"profiles\":[{\"sampleType\":{\"typeStrindex\":1,\"unitStrindex\":2},"
                  "\"samples\":[{\"stackIndex\":1,\"values\":[\"%lld\"]}]}]}]}],"
                  "\"dictionary\":{\"locationTable\":[{},{\"lines\":[{\"functionIndex\":1}]}],"
                  "\"functionTable\":[{},{\"nameStrindex\":3}],"
                  "\"stackTable\":[{},{\"locationIndices\":[1]}],"
                  "\"stringTable\":[\"\",\"cpu\",\"nanoseconds\",\"main\",\"host.name\",\"h1\"]}}",
                  (long long)v);
    pc_batch *b = validate_or_die(decode_json_n_or_die((const char *)j.data, j.len));
    pc_buf_free(&j);
    return b;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The attributes as sorted "key=type:value" lines, resolved through the dictionary: an oracle
 * independent of the merge key's encoding. */
static void canon_attrs(pc_buf *out, const pc_dictionary *d, pc_keyvalue *const *kv, size_t n)
{
    char **lines = calloc(n + 1, sizeof *lines);
    for (size_t i = 0; i < n; i++) {
        pc_buf l = {0};
        const pc_anyvalue *v = kv[i]->value;
        const char *s = pc_anyvalue_str(d, v);
        if (s)
            pc_buf_printf(&l, "%s=s:%s", pc_keyvalue_key(d, kv[i]), s);
        else if (v && v->value_case == OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE)
            pc_buf_printf(&l, "%s=i:%lld", pc_keyvalue_key(d, kv[i]), (long long)v->int_value);
        else if (v &&
                 v->value_case == OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE)
            pc_buf_printf(&l, "%s=b:%d", pc_keyvalue_key(d, kv[i]), (int)v->bool_value);
        else
            pc_buf_printf(&l, "%s=?", pc_keyvalue_key(d, kv[i]));
        pc_buf_append(&l, "", 1);
        lines[i] = (char *)l.data;
    }
    qsort(lines, n, sizeof *lines, cmp_str);
    for (size_t i = 0; i < n; i++) {
        pc_buf_printf(out, "%s;", lines[i]);
        free(lines[i]);
    }
    free(lines);
}

static void canon_resource(pc_buf *out, const pc_dictionary *d, const pc_resource_profiles *rp)
{
    out->len = 0;
    pc_buf_printf(out, "R:");
    if (rp->resource) canon_attrs(out, d, rp->resource->attributes, rp->resource->n_attributes);
    pc_buf_append(out, "", 1);
}

static void canon_scope(pc_buf *out, const pc_dictionary *d, const pc_scope_profiles *sp)
{
    out->len = 0;
    pc_buf_printf(out, "S:%s|%s|", sp->scope ? sp->scope->name : "-",
                  sp->scope ? sp->scope->version : "-");
    if (sp->scope) canon_attrs(out, d, sp->scope->attributes, sp->scope->n_attributes);
    pc_buf_append(out, "", 1);
}

static int64_t total(const pc_scope_profiles *sp)
{
    int64_t t = 0;
    for (size_t k = 0; k < sp->n_profiles; k++)
        for (size_t s = 0; s < sp->profiles[k]->n_samples; s++)
            for (size_t v = 0; v < sp->profiles[k]->samples[s]->n_values; v++)
                t += sp->profiles[k]->samples[s]->values[v];
    return t;
}

/* Expected groups: canonical text -> sum of the values of the inputs that have it. */
typedef struct group {
    char *canon;
    int64_t want, got;
    int seen;
} group;

typedef struct groups {
    group g[32];
    size_t n;
} groups;

static void expect(groups *gs, const char *canon, int64_t v)
{
    for (size_t i = 0; i < gs->n; i++)
        if (!strcmp(gs->g[i].canon, canon)) {
            gs->g[i].want += v;
            return;
        }
    gs->g[gs->n++] = (group){strdup(canon), v, 0, 0};
}

static void found(groups *gs, const char *canon, int64_t v)
{
    for (size_t i = 0; i < gs->n; i++)
        if (!strcmp(gs->g[i].canon, canon)) {
            gs->g[i].seen++;
            gs->g[i].got += v;
            return;
        }
    fprintf(stderr, "output group matches no input: %s\n", canon);
    CHECK(0);
}

/* Every expected group came out exactly once, holding exactly its inputs' samples. */
static void check_groups(groups *gs, const char *what)
{
    for (size_t i = 0; i < gs->n; i++) {
        group *g = &gs->g[i];
        if (g->seen != 1 || g->got != g->want)
            fprintf(stderr, "%s %s: seen %d time(s), total %lld, want once with %lld\n", what,
                    g->canon, g->seen, (long long)g->got, (long long)g->want);
        CHECK_EQ_INT(g->seen, 1);
        CHECK_EQ_INT(g->got, g->want);
        free(g->canon);
    }
    gs->n = 0;
}

/* Merge the batches: whole (the batch processor without a size cap) or as slices (its split). */
static pc_batch *merge(pc_batch **in, size_t n, bool slices)
{
    pc_merger *m = pc_merger_new();
    for (size_t i = 0; i < n; i++) {
        if (!slices) {
            pc_merger_add(m, in[i], NULL, 0);
            continue;
        }
        pc_merge_slice sl = {
            .to = in[i]->req->resource_profiles[0]->scope_profiles[0]->profiles[0]->n_samples};
        pc_merger_add(m, in[i], &sl, 1);
    }
    pc_batch *out = pc_merger_finish(m);
    int64_t rejected = 0;
    pc_error err = {0};
    CHECK_EQ_INT(pc_batch_validate(out, &rejected, &err), 0);
    CHECK_EQ_INT(rejected, 0);
    return out;
}

static const attr BASE[NA] = {{"service.name", "{\"stringValue\":\"a\"}"},
                              {"host.name", "{\"stringValue\":\"h1\"}"},
                              {"deployment.environment", "{\"stringValue\":\"prod\"}"},
                              {"process.pid", "{\"intValue\":\"7\"}"}};
static const char *const OTHER[NA] = {"{\"stringValue\":\"b\"}", "{\"stringValue\":\"h2\"}",
                                      "{\"stringValue\":\"dev\"}", "{\"intValue\":\"8\"}"};

/* Inputs: the base, each attribute changed in turn (its value; then its key), a value of
 * another type, and the base again with host.name through the string table, in another order. */
static size_t variants(attr out[][NA])
{
    size_t n = 0;
    memcpy(out[n++], BASE, sizeof BASE);
    for (size_t i = 0; i < NA; i++) { /* one value differs */
        memcpy(out[n], BASE, sizeof BASE);
        out[n++][i].value = OTHER[i];
    }
    static const char *const keys[NA] = {"service.namespace", "host.id", "deployment.name",
                                         "process.parent_pid"};
    for (size_t i = 0; i < NA; i++) { /* one key differs, same value */
        memcpy(out[n], BASE, sizeof BASE);
        out[n++][i].key = keys[i];
    }
    memcpy(out[n], BASE, sizeof BASE); /* pid 7 as a string "7" */
    out[n++][3].value = "{\"stringValue\":\"7\"}";
    /* same content as the base: host.name by keyStrindex and string_value_strindex, reversed */
    out[n][0] = BASE[3];
    out[n][1] = BASE[2];
    out[n][2] = (attr){NULL, "{\"stringValueStrindex\":5}"};
    out[n++][3] = BASE[0];
    return n;
}

static void check_resources(bool slices)
{
    attr ra[16][NA];
    size_t n = variants(ra);
    pc_batch *in[16];
    groups gs = {0};
    pc_buf k = {0};
    for (size_t i = 0; i < n; i++) {
        in[i] = make_batch(ra[i], "scope", "1", BASE, (int64_t)1 << i);
        canon_resource(&k, in[i]->req->dictionary, in[i]->req->resource_profiles[0]);
        expect(&gs, (const char *)k.data, (int64_t)1 << i);
    }
    CHECK_EQ_INT(gs.n, n - 1); /* the last input is the base in another form */
    pc_batch *out = merge(in, n, slices);
    const pc_dictionary *d = out->req->dictionary;
    CHECK_EQ_INT(out->req->n_resource_profiles, n - 1);
    for (size_t r = 0; r < out->req->n_resource_profiles; r++) {
        const pc_resource_profiles *rp = out->req->resource_profiles[r];
        CHECK_EQ_INT(rp->n_scope_profiles, 1);
        int64_t t = 0;
        for (size_t s = 0; s < rp->n_scope_profiles; s++)
            t += total(rp->scope_profiles[s]);
        canon_resource(&k, d, rp);
        found(&gs, (const char *)k.data, t);
    }
    check_groups(&gs, slices ? "resource (slices)" : "resource");
    pc_buf_free(&k);
    pc_batch_unref(out);
    for (size_t i = 0; i < n; i++)
        pc_batch_unref(in[i]);
}

static void check_scopes(bool slices)
{
    attr sa[16][NA];
    size_t n = variants(sa);
    pc_batch *in[20];
    groups gs = {0};
    pc_buf k = {0};
    for (size_t i = 0; i < n; i++)
        in[i] = make_batch(BASE, "scope", "1", sa[i], (int64_t)1 << i);
    /* and scopes that differ only by name or only by version */
    in[n] = make_batch(BASE, "scope2", "1", BASE, (int64_t)1 << n);
    n++;
    in[n] = make_batch(BASE, "scope", "2", BASE, (int64_t)1 << n);
    n++;
    for (size_t i = 0; i < n; i++) {
        canon_scope(&k, in[i]->req->dictionary,
                    in[i]->req->resource_profiles[0]->scope_profiles[0]);
        expect(&gs, (const char *)k.data, (int64_t)1 << i);
    }
    CHECK_EQ_INT(gs.n, n - 1);
    pc_batch *out = merge(in, n, slices);
    const pc_dictionary *d = out->req->dictionary;
    CHECK_EQ_INT(out->req->n_resource_profiles, 1); /* one resource for all */
    if (out->req->n_resource_profiles == 1) {
        const pc_resource_profiles *rp = out->req->resource_profiles[0];
        CHECK_EQ_INT(rp->n_scope_profiles, n - 1);
        for (size_t s = 0; s < rp->n_scope_profiles; s++) {
            canon_scope(&k, d, rp->scope_profiles[s]);
            found(&gs, (const char *)k.data, total(rp->scope_profiles[s]));
        }
    }
    check_groups(&gs, slices ? "scope (slices)" : "scope");
    pc_buf_free(&k);
    pc_batch_unref(out);
    for (size_t i = 0; i < n; i++)
        pc_batch_unref(in[i]);
}

static void test_resources_one_attribute_apart(void)
{
    check_resources(false);
}

static void test_resources_one_attribute_apart_slices(void)
{
    check_resources(true);
}

static void test_scopes_one_attribute_apart(void)
{
    check_scopes(false);
}

static void test_scopes_one_attribute_apart_slices(void)
{
    check_scopes(true);
}

/* The issue's example: {service.name=a, host.name=h} and {service.name=b, host.name=h} are two
 * resources (and two-attribute resources have no middle: first and last only). */
static void test_issue_example(void)
{
    static const char *const svc[] = {"a", "b", "a", "b"};
    static const char *const host[] = {"h", "h", "g", "h"};
    pc_batch *in[4];
    for (int i = 0; i < 4; i++) {
        char j[1024];
        snprintf(j, sizeof j,
                 "{\"resourceProfiles\":[{\"resource\":{\"attributes\":["
                 "{\"key\":\"service.name\",\"value\":{\"stringValue\":\"%s\"}},"
                 "{\"key\":\"host.name\",\"value\":{\"stringValue\":\"%s\"}}]},"
                 "\"scopeProfiles\":[{\"profiles\":[{\"samples\":[{\"values\":[\"%d\"]}]}]}]}],"
                 "\"dictionary\":{\"stringTable\":[\"\"]}}",
                 svc[i], host[i], 1 << i);
        pc_error err = {0};
        in[i] = NULL;
        if (pc_batch_decode_json(j, strlen(j), &in[i], &err)) {
            fprintf(stderr, "decode: %s\n", err.msg);
            exit(1);
        }
    }
    pc_batch *out = merge(in, 4, false);
    const pc_dictionary *d = out->req->dictionary;
    CHECK_EQ_INT(out->req->n_resource_profiles, 3);
    for (size_t r = 0; r < out->req->n_resource_profiles; r++) {
        const pc_resource_profiles *rp = out->req->resource_profiles[r];
        const char *s = pc_resource_attr_str(d, rp->resource, "service.name");
        const char *h = pc_resource_attr_str(d, rp->resource, "host.name");
        int64_t t = total(rp->scope_profiles[0]);
        /* a/h: input 0; b/h: inputs 1 and 3; a/g: input 2 */
        int64_t want = !strcmp(s, "a") ? (!strcmp(h, "h") ? 1 : 4) : 2 + 8;
        CHECK_EQ_INT(t, want);
    }
    pc_batch_unref(out);
    for (int i = 0; i < 4; i++)
        pc_batch_unref(in[i]);
}

int main(void)
{
    RUN(test_resources_one_attribute_apart);
    RUN(test_resources_one_attribute_apart_slices);
    RUN(test_scopes_one_attribute_apart);
    RUN(test_scopes_one_attribute_apart_slices);
    RUN(test_issue_example);
    return check_report();
}
