/* Processor "redaction": symbol hits and misses, allowed_symbols, shared strings left intact where
 * they are not symbols, strip_path_prefixes, blocked keys and values on sample, profile, resource
 * and scope attributes, case_insensitive, copy-on-write. */
#include "pdata/dict.h"
#include "proc_driver.h"
#include "sdk/processor.h"

extern const pc_component_type pc_processor_redaction;

/* "read_password" (string 3) is both function 1's name and the value of sample attribute "fn". */
static const char *const input_json =
    "{\"resourceProfiles\":[{\"resource\":{\"attributes\":["
    "{\"key\":\"db.password\",\"value\":{\"stringValue\":\"x\"}},"
    "{\"key\":\"note\",\"value\":{\"stringValueStrindex\":11}},"
    "{\"key\":\"service.name\",\"value\":{\"stringValue\":\"auth\"}}]},"
    "\"scopeProfiles\":[{\"scope\":{\"name\":\"s\",\"attributes\":["
    "{\"key\":\"scope.token\",\"value\":{\"stringValue\":\"hunter7\"}}]},"
    "\"profiles\":[{\"sampleType\":{\"typeStrindex\":1,\"unitStrindex\":2},"
    "\"attributeIndices\":[3],"
    "\"samples\":[{\"stackIndex\":1,\"values\":[\"10\"],\"attributeIndices\":[1,2,3]},"
    "{\"stackIndex\":2,\"values\":[\"20\"],\"attributeIndices\":[1]}]}]}]}],"
    "\"dictionary\":{"
    "\"mappingTable\":[{},{\"memoryStart\":\"4096\",\"memoryLimit\":\"8192\",\"filenameStrindex\":"
    "6}],"
    "\"locationTable\":[{},{\"mappingIndex\":1,\"lines\":[{\"functionIndex\":1}]},"
    "{\"mappingIndex\":1,\"lines\":[{\"functionIndex\":2}]},{\"lines\":[{\"functionIndex\":3}]},"
    "{\"lines\":[{\"functionIndex\":4}]}],"
    "\"functionTable\":[{},{\"nameStrindex\":3,\"systemNameStrindex\":13,\"filenameStrindex\":5},"
    "{\"nameStrindex\":4,\"filenameStrindex\":5},{\"nameStrindex\":7},{\"nameStrindex\":12}],"
    "\"stackTable\":[{},{\"locationIndices\":[1,2]},{\"locationIndices\":[3,4]}],"
    "\"attributeTable\":[{},{\"keyStrindex\":8,\"value\":{\"stringValueStrindex\":3}},"
    "{\"keyStrindex\":9,\"value\":{\"stringValue\":\"abc\"}},"
    "{\"keyStrindex\":10,\"value\":{\"stringValue\":\"password=hunter2 ok\"}}],"
    "\"stringTable\":[\"\",\"cpu\",\"nanoseconds\",\"read_password\",\"main\","
    "\"/home/ci/src/app/auth.go\",\"/usr/lib/libsecret.so\",\"token_refresh\",\"fn\","
    "\"api.token\",\"user\",\"password=hunter2 ok\",\"SecretSanta\",\"_Z13read_passwordv\"]}}";

static driver *make(const char *yaml)
{
    return driver_make(&pc_processor_redaction, yaml);
}

static const char *fn_name(pc_batch *b, size_t i)
{
    return pc_dict_str(b->req->dictionary, b->req->dictionary->function_table[i]->name_strindex);
}

static const char *fn_sys(pc_batch *b, size_t i)
{
    const pc_dictionary *d = b->req->dictionary;
    return pc_dict_str(d, d->function_table[i]->system_name_strindex);
}

static const char *fn_file(pc_batch *b, size_t i)
{
    const pc_dictionary *d = b->req->dictionary;
    return pc_dict_str(d, d->function_table[i]->filename_strindex);
}

static const char *map_file(pc_batch *b, size_t i)
{
    const pc_dictionary *d = b->req->dictionary;
    return pc_dict_str(d, d->mapping_table[i]->filename_strindex);
}

static const pc_kvu *attr_at(pc_batch *b, int32_t idx)
{
    return pc_dict_attr_at(b->req->dictionary, idx);
}

static const char *attr_key(pc_batch *b, int32_t idx)
{
    const pc_kvu *a = attr_at(b, idx);
    return a ? pc_dict_str(b->req->dictionary, a->key_strindex) : NULL;
}

static const char *attr_val(pc_batch *b, int32_t idx)
{
    const pc_kvu *a = attr_at(b, idx);
    return a ? pc_anyvalue_str(b->req->dictionary, a->value) : NULL;
}

static const char *kv_val(pc_batch *b, pc_keyvalue **kvs, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(pc_keyvalue_key(b->req->dictionary, kvs[i]), key) == 0)
            return pc_anyvalue_str(b->req->dictionary, kvs[i]->value);
    return NULL;
}

static void test_symbols(void)
{
    driver *d = make("blocked_symbols: [\"password|secret|credential|token\"]\n"
                     "allowed_symbols: [\"^token_refresh$\"]\n"
                     "strip_path_prefixes: [/home/ci/src/, /nothing/]\n");
    pc_batch *b = driver_run(d, batch_from_json(input_json));
    const pc_dictionary *dict = b->req->dictionary;
    CHECK_STR(fn_name(b, 1), "[REDACTED]");
    CHECK_STR(fn_sys(b, 1), "[REDACTED]");
    CHECK_STR(fn_file(b, 1), "app/auth.go");
    CHECK_STR(fn_name(b, 2), "main"); /* miss */
    CHECK_EQ_INT(dict->function_table[2]->name_strindex, 4);
    CHECK_STR(fn_file(b, 2), "app/auth.go");
    CHECK_STR(fn_name(b, 3), "token_refresh"); /* allowed */
    CHECK_EQ_INT(dict->function_table[3]->name_strindex, 7);
    CHECK_STR(fn_name(b, 4), "SecretSanta"); /* case-sensitive miss */
    CHECK_STR(map_file(b, 1), "[REDACTED]");
    /* the shared string: still the attribute's value, and the string table is not rewritten */
    CHECK_STR(pc_dict_str(dict, 3), "read_password");
    CHECK_STR(pc_dict_str(dict, 5), "/home/ci/src/app/auth.go");
    CHECK_STR(pc_dict_str(dict, 6), "/usr/lib/libsecret.so");
    CHECK_STR(attr_val(b, 1), "read_password");
    CHECK_EQ_INT(first_profile(b)->samples[0]->attribute_indices[0], 1);
    /* new strings were appended once each */
    CHECK_EQ_INT(dict->n_string_table, 16);
    int64_t rejected = 0;
    pc_error err = {0};
    CHECK_EQ_INT(pc_batch_validate(b, &rejected, &err), 0);
    CHECK_EQ_INT(rejected, 0);
    driver_free(d);
}

static void test_misses_change_nothing(void)
{
    driver *d = make("blocked_symbols: [\"^nomatch$\", \"credential\"]\n"
                     "blocked_keys: [\"^nokey$\"]\n"
                     "blocked_values: [\"zzz\"]\n"
                     "strip_path_prefixes: [/opt/]\n");
    pc_batch *in = batch_from_json(input_json);
    pc_buf before = {0}, after = {0};
    pc_batch_encode_proto(in, &before);
    pc_batch *out = driver_run(d, in);
    pc_batch_encode_proto(out, &after);
    CHECK(before.len == after.len && memcmp(before.data, after.data, before.len) == 0);
    pc_buf_free(&before);
    pc_buf_free(&after);
    driver_free(d);
}

static void test_case_insensitive(void)
{
    driver *d = make("blocked_symbols: [secret]\n"
                     "case_insensitive: true\n"
                     "replacement: \"***\"\n"
                     "strip_path_prefixes: [/HOME/CI/]\n");
    pc_batch *b = driver_run(d, batch_from_json(input_json));
    CHECK_STR(fn_name(b, 4), "***");
    CHECK_STR(map_file(b, 1), "***");
    CHECK_STR(fn_name(b, 1), "read_password");
    CHECK_STR(fn_file(b, 1), "src/app/auth.go");
    driver_free(d);

    /* the same pattern without case_insensitive, but with an inline (?i) */
    d = make("blocked_symbols: [\"(?i)SECRET\"]\n");
    b = driver_run(d, batch_from_json(input_json));
    CHECK_STR(fn_name(b, 4), "[REDACTED]");
    driver_free(d);
}

static void test_attributes(void)
{
    driver *d = make("blocked_keys: [\"token|password\"]\n"
                     "blocked_values: [\"hunter[0-9]+\"]\n");
    pc_batch *b = driver_run(d, batch_from_json(input_json));
    pc_profile *p = first_profile(b);
    /* sample 0: [fn, api.token, user] -> api.token removed, user masked (a new attribute) */
    pc_sample *s0 = p->samples[0];
    CHECK_EQ_INT(s0->n_attribute_indices, 2);
    CHECK_STR(attr_key(b, s0->attribute_indices[0]), "fn");
    CHECK_STR(attr_val(b, s0->attribute_indices[0]), "read_password");
    CHECK_STR(attr_key(b, s0->attribute_indices[1]), "user");
    CHECK_STR(attr_val(b, s0->attribute_indices[1]), "password=[REDACTED] ok");
    CHECK(s0->attribute_indices[1] != 3);
    CHECK_EQ_INT(p->samples[1]->n_attribute_indices, 1);
    CHECK_EQ_INT(p->samples[1]->attribute_indices[0], 1);
    /* profile attribute: the same masked attribute */
    CHECK_EQ_INT(p->n_attribute_indices, 1);
    CHECK_EQ_INT(p->attribute_indices[0], s0->attribute_indices[1]);
    /* the old attribute entry and its string are untouched */
    CHECK_STR(attr_val(b, 3), "password=hunter2 ok");
    CHECK_STR(pc_dict_str(b->req->dictionary, 11), "password=hunter2 ok");
    /* resource: db.password removed, note (string_value_strindex) masked in the plain form */
    pc_resource *r = b->req->resource_profiles[0]->resource;
    CHECK_EQ_INT(r->n_attributes, 2);
    CHECK(kv_val(b, r->attributes, r->n_attributes, "db.password") == NULL);
    CHECK_STR(kv_val(b, r->attributes, r->n_attributes, "note"), "password=[REDACTED] ok");
    CHECK_STR(kv_val(b, r->attributes, r->n_attributes, "service.name"), "auth");
    /* scope: key blocked */
    pc_scope *sc = b->req->resource_profiles[0]->scope_profiles[0]->scope;
    CHECK_EQ_INT(sc->n_attributes, 0);
    /* symbols untouched */
    CHECK_STR(fn_name(b, 1), "read_password");
    int64_t rejected = 0;
    pc_error err = {0};
    CHECK_EQ_INT(pc_batch_validate(b, &rejected, &err), 0);
    driver_free(d);
}

static void test_value_shared_with_symbol(void)
{
    /* the other direction: masking the attribute value leaves the function name alone */
    driver *d = make("blocked_values: [\"^read_password$\"]\n");
    pc_batch *b = driver_run(d, batch_from_json(input_json));
    pc_sample *s1 = first_profile(b)->samples[1];
    CHECK_STR(attr_val(b, s1->attribute_indices[0]), "[REDACTED]");
    CHECK_STR(fn_name(b, 1), "read_password");
    CHECK_EQ_INT(b->req->dictionary->function_table[1]->name_strindex, 3);
    driver_free(d);
}

static void test_mask_every_match(void)
{
    driver *d = make("blocked_values: [\"[0-9]\", \"x*\"]\nreplacement: \"#\"\n");
    pc_batch *in = batch_from_json(input_json);
    /* "a1b22" -> "a#b##" by [0-9]; then x* matches empty everywhere: "#a###b#####"... keep the
     * second pattern honest: it only adds replacements between characters */
    in->req->resource_profiles[0]->resource->attributes[2]->value->string_value = "a1b22";
    pc_batch *b = driver_run(d, in);
    pc_resource *r = b->req->resource_profiles[0]->resource;
    CHECK_STR(kv_val(b, r->attributes, r->n_attributes, "service.name"), "#a###b#####");
    driver_free(d);

    d = make("blocked_values: [\"[0-9]+\"]\n");
    in = batch_from_json(input_json);
    in->req->resource_profiles[0]->resource->attributes[2]->value->string_value = "a1b22c";
    b = driver_run(d, in);
    r = b->req->resource_profiles[0]->resource;
    CHECK_STR(kv_val(b, r->attributes, r->n_attributes, "service.name"), "a[REDACTED]b[REDACTED]c");
    driver_free(d);
}

static void test_copy_on_write(void)
{
    driver *d = make("blocked_symbols: [password]\nblocked_keys: [token]\n"
                     "strip_path_prefixes: [/home/]\n");
    pc_batch *in = batch_from_json(input_json);
    pc_batch_ref(in);
    pc_batch *out = driver_run(d, in);
    CHECK(out != in);
    CHECK_STR(fn_name(out, 1), "[REDACTED]");
    CHECK_STR(fn_name(in, 1), "read_password");
    CHECK_STR(fn_file(in, 1), "/home/ci/src/app/auth.go");
    CHECK_STR(fn_file(out, 1), "ci/src/app/auth.go");
    CHECK_EQ_INT(in->req->dictionary->n_string_table, 14);
    CHECK_EQ_INT(first_profile(in)->samples[0]->n_attribute_indices, 3);
    CHECK_EQ_INT(first_profile(out)->samples[0]->n_attribute_indices, 2);
    CHECK_EQ_INT(in->req->resource_profiles[0]->scope_profiles[0]->scope->n_attributes, 1);
    pc_batch_unref(in);
    driver_free(d);
}

static void test_config(void)
{
    pc_error err = {0};
    driver *d = driver_new(&pc_processor_redaction, "blocked_symbols: [ok, \"(unclosed\"]\n", &err);
    CHECK(d == NULL);
    CHECK_CONTAINS(err.msg, "test.yaml:1: processors::redaction::blocked_symbols[1]: invalid");
    d = driver_new(&pc_processor_redaction, "blocked_symbol: [x]\n", &err);
    CHECK(d == NULL);
    CHECK_CONTAINS(err.msg, "did you mean \"blocked_symbols\"");
    /* nothing configured: a pass-through without copying */
    d = driver_new(&pc_processor_redaction, "", &err);
    CHECK(d != NULL);
    pc_batch *in = batch_from_json(input_json);
    CHECK(driver_run(d, in) == in);
    driver_free(d);
}

int main(void)
{
    RUN(test_symbols);
    RUN(test_misses_change_nothing);
    RUN(test_case_insensitive);
    RUN(test_attributes);
    RUN(test_value_shared_with_symbol);
    RUN(test_mask_every_match);
    RUN(test_copy_on_write);
    RUN(test_config);
    return check_report();
}
