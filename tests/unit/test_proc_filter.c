/* processor "filter": include/exclude by profile type, service.name regex and resource attribute
 * regex; pruning of emptied scopes/resources; fully dropped batches acknowledged. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "payload.h"
#include "testcomp.h"
#include "pdata/pdata.h"
#include "sdk/component.h"

extern const pc_component_type pc_processor_filter;

/* Resources: checkout (cpu, alloc_space, alloc_objects; service.name in string-table form),
 * cart (cpu), auth-v2 with env=prod (cpu, alloc_space). */
static pc_batch *request(void)
{
    static const char *json =
        "{\"resourceProfiles\":["
        "{\"resource\":{\"attributes\":[{\"keyStrindex\":7,\"value\":{\"stringValueStrindex\":8}}]}"
        ","
        "\"scopeProfiles\":[{\"profiles\":["
        "{\"sampleType\":{\"typeStrindex\":1,\"unitStrindex\":2},\"samples\":[{\"stackIndex\":1,"
        "\"values\":[10]}]},"
        "{\"sampleType\":{\"typeStrindex\":3,\"unitStrindex\":4},\"samples\":[{\"stackIndex\":1,"
        "\"values\":[20]},{\"stackIndex\":1,\"values\":[5]}]}]},"
        "{\"scope\":{\"name\":\"other\"},\"profiles\":["
        "{\"sampleType\":{\"typeStrindex\":5,\"unitStrindex\":6},\"samples\":[{\"stackIndex\":1,"
        "\"values\":[30]}]}]}]},"
        "{\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":{\"stringValue\":"
        "\"cart\"}}]},"
        "\"scopeProfiles\":[{\"profiles\":["
        "{\"sampleType\":{\"typeStrindex\":1,\"unitStrindex\":2},\"samples\":[{\"stackIndex\":1,"
        "\"values\":[40]}]}]}]},"
        "{\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":{\"stringValue\":"
        "\"auth-v2\"}},{\"key\":\"env\",\"value\":{\"stringValue\":\"prod\"}}]},"
        "\"scopeProfiles\":[{\"profiles\":["
        "{\"sampleType\":{\"typeStrindex\":1,\"unitStrindex\":2},\"samples\":[{\"stackIndex\":1,"
        "\"values\":[50]}]},"
        "{\"sampleType\":{\"typeStrindex\":3,\"unitStrindex\":4},\"samples\":[{\"stackIndex\":1,"
        "\"values\":[60]}]}]}]}],"
        "\"dictionary\":{\"stringTable\":[\"\",\"cpu\",\"nanoseconds\",\"alloc_space\",\"bytes\","
        "\"alloc_objects\",\"count\",\"service.name\",\"checkout\",\"main\"],"
        "\"functionTable\":[{},{\"nameStrindex\":9}],"
        "\"locationTable\":[{},{\"lines\":[{\"functionIndex\":1}]}],"
        "\"stackTable\":[{},{\"locationIndices\":[1]}]}}";
    return decode_json_or_die(json);
}

static pc_component *make(const char *yaml, uv_loop_t *loop, pc_consumer *next, char *errmsg)
{
    pc_error err = {0};
    pc_component *c = tc_new(&pc_processor_filter, "processors", yaml, loop, next, &err);
    if (!c) {
        if (errmsg)
            snprintf(errmsg, 512, "%s", err.msg);
        else
            fprintf(stderr, "config: %s\n", err.msg);
    }
    return c;
}

/* Run the request through a filter; returns the output (NULL if nothing was passed on) and puts
 * "service/type,..." of what is left into desc. */
static pc_batch *run(const char *yaml, pc_batch *in, char *desc)
{
    pc_batch *out = tc_pass(&pc_processor_filter, "processors", yaml, in);
    desc[0] = 0;
    if (!out) return NULL;
    const pc_request *q = out->req;
    const pc_dictionary *d = q->dictionary;
    for (size_t i = 0; i < q->n_resource_profiles; i++) {
        const pc_resource_profiles *rp = q->resource_profiles[i];
        CHECK(rp->n_scope_profiles > 0); /* emptied ones are removed */
        for (size_t j = 0; j < rp->n_scope_profiles; j++) {
            CHECK(rp->scope_profiles[j]->n_profiles > 0);
            for (size_t k = 0; k < rp->scope_profiles[j]->n_profiles; k++) {
                const pc_profile *p = rp->scope_profiles[j]->profiles[k];
                if (*desc) strcat(desc, ",");
                strcat(desc, pc_resource_attr_str(d, rp->resource, "service.name"));
                strcat(desc, "/");
                strcat(desc, pc_dict_str(d, p->sample_type->type_strindex));
            }
        }
    }
    return out;
}

static void test_profile_types(void)
{
    char desc[512];
    pc_batch *out = run("include:\n  profile_types: [cpu]\n", request(), desc);
    CHECK_STR(desc, "checkout/cpu,cart/cpu,auth-v2/cpu");
    if (out) CHECK_EQ_INT(out->req->resource_profiles[0]->n_scope_profiles, 1);
    pc_batch_unref(out);

    out =
        run("include:\n  profile_types: [\"alloc_space:bytes\", alloc_objects]\n", request(), desc);
    CHECK_STR(desc, "checkout/alloc_space,checkout/alloc_objects,auth-v2/alloc_space");
    if (out) CHECK_EQ_INT(out->req->n_resource_profiles, 2); /* cart is gone */
    pc_batch_unref(out);

    out = run("exclude:\n  profile_types: [cpu]\n", request(), desc);
    CHECK_STR(desc, "checkout/alloc_space,checkout/alloc_objects,auth-v2/alloc_space");
    pc_batch_unref(out);

    /* a unit that does not match: nothing left, acknowledged and not passed on */
    out = run("include:\n  profile_types: [\"alloc_space:count\"]\n", request(), desc);
    CHECK(out == NULL);
}

static void test_services_and_attributes(void)
{
    char desc[512];
    pc_batch *out = run("exclude:\n  services: [\"check.*\"]\n", request(), desc);
    CHECK_STR(desc, "cart/cpu,auth-v2/cpu,auth-v2/alloc_space");
    pc_batch_unref(out);

    /* whole-value match: "auth" alone does not match "auth-v2" */
    out = run("include:\n  services: [cart, auth]\n", request(), desc);
    CHECK_STR(desc, "cart/cpu");
    pc_batch_unref(out);

    /* include and exclude together; criteria inside a block are ANDed */
    out = run("include:\n  services: [cart, \"auth-.*\"]\nexclude:\n  profile_types: [cpu]\n",
              request(), desc);
    CHECK_STR(desc, "auth-v2/alloc_space");
    pc_batch_unref(out);

    out = run("include:\n  resource_attributes:\n    env: \"prod|staging\"\n", request(), desc);
    CHECK_STR(desc, "auth-v2/cpu,auth-v2/alloc_space");
    pc_batch_unref(out);

    out = run("exclude:\n  services: [\"auth-.*\"]\n  profile_types: [alloc_space]\n", request(),
              desc);
    CHECK_STR(desc,
              "checkout/cpu,checkout/alloc_space,checkout/alloc_objects,cart/cpu,auth-v2/cpu");
    pc_batch_unref(out);
}

static void test_no_copy_and_cow(void)
{
    char desc[512];
    /* nothing dropped: the very same batch goes on */
    pc_batch *in = request();
    pc_batch_ref(in);
    pc_batch *out = run("include:\n  services: [\".*\"]\n", in, desc);
    CHECK(out == in);
    pc_batch_unref(out);
    /* something dropped from a shared batch: the other holder's copy stays whole */
    pc_batch_ref(in);
    out = run("include:\n  services: [cart]\n", in, desc);
    CHECK(out != in);
    CHECK_STR(desc, "cart/cpu");
    CHECK_EQ_INT(pc_batch_counts(in).profiles, 6);
    pc_batch_unref(out);
    pc_batch_unref(in);
}

static void test_config(void)
{
    char err[512] = "";
    CHECK(make("include:\n  services: [\"(unclosed\"]\n", NULL, NULL, err) == NULL);
    CHECK_CONTAINS(err, "processors::filter");
    CHECK_CONTAINS(err, "include::services[0]: invalid regular expression");
    CHECK(make("exclude:\n  resource_attributes:\n    env: \"[\"\n", NULL, NULL, err) == NULL);
    CHECK_CONTAINS(err, "exclude::resource_attributes::env");
    CHECK(make("include:\n  profile_types: [\"cpu:\"]\n", NULL, NULL, err) == NULL);
    CHECK_CONTAINS(err, "profile_types[0]");
    CHECK(make("include:\n  service: [a]\n", NULL, NULL, err) == NULL);
    CHECK_CONTAINS(err, "services");
}

/* Samples filtered by sample attribute: string (plain and string-table form) and int values. */
static void test_sample_attributes(void)
{
    static const char *json =
        "{\"resourceProfiles\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\","
        "\"value\":{\"stringValue\":\"api\"}}]},\"scopeProfiles\":[{\"profiles\":["
        "{\"sampleType\":{\"typeStrindex\":1,\"unitStrindex\":2},\"samples\":["
        "{\"stackIndex\":1,\"values\":[1],\"attributeIndices\":[1]},"
        "{\"stackIndex\":1,\"values\":[2],\"attributeIndices\":[2]},"
        "{\"stackIndex\":1,\"values\":[4],\"attributeIndices\":[3]},"
        "{\"stackIndex\":1,\"values\":[8]}]}]}]}],"
        "\"dictionary\":{\"stringTable\":[\"\",\"cpu\",\"nanoseconds\",\"endpoint\",\"/health\","
        "\"/api/orders\",\"main\",\"http.status\"],"
        "\"attributeTable\":[{},{\"keyStrindex\":3,\"value\":{\"stringValue\":\"/health\"}},"
        "{\"keyStrindex\":3,\"value\":{\"stringValueStrindex\":5}},"
        "{\"keyStrindex\":7,\"value\":{\"intValue\":\"503\"}}],"
        "\"functionTable\":[{},{\"nameStrindex\":6}],"
        "\"locationTable\":[{},{\"lines\":[{\"functionIndex\":1}]}],"
        "\"stackTable\":[{},{\"locationIndices\":[1]}]}}";
    char desc[512];
    pc_batch *in = decode_json_or_die(json);
    pc_batch *shared = pc_batch_ref(in);
    /* exclude: drop health checks and 5xx samples; the rest of the profile stays */
    pc_batch *out =
        run("exclude:\n  sample_attributes:\n    endpoint: /health\n", pc_batch_ref(in), desc);
    CHECK_STR(desc, "api/cpu");
    const pc_profile *p = out ? first_profile(out) : NULL;
    CHECK(p && p->n_samples == 3);
    if (p)
        CHECK_EQ_INT(p->samples[0]->values[0] + p->samples[1]->values[0] + p->samples[2]->values[0],
                     14);
    pc_batch_unref(out);
    out = run("exclude:\n  sample_attributes:\n    http.status: \"5[0-9][0-9]\"\n",
              pc_batch_ref(in), desc);
    p = out ? first_profile(out) : NULL;
    CHECK(p && p->n_samples == 3);
    pc_batch_unref(out);
    /* include: only /api/... samples (string-table form) are kept */
    out =
        run("include:\n  sample_attributes:\n    endpoint: \"/api/.*\"\n", pc_batch_ref(in), desc);
    p = out ? first_profile(out) : NULL;
    CHECK(p && p->n_samples == 1 && p->samples[0]->values[0] == 2);
    pc_batch_unref(out);
    /* copy-on-write: the shared input is untouched */
    CHECK_EQ_INT(first_profile(shared)->n_samples, 4);
    pc_batch_unref(shared);
    pc_batch_unref(in);
}

int main(void)
{
    RUN(test_sample_attributes);
    RUN(test_profile_types);
    RUN(test_services_and_attributes);
    RUN(test_no_copy_and_cow);
    RUN(test_config);
    return check_report();
}
