/* Processor "resource": every action on both attribute forms, the seed's from_attribute upsert,
 * config errors with key path and line, copy-on-write. */
#include "proc_driver.h"
#include "sdk/processor.h"

extern const pc_component_type pc_processor_resource;

/* Resource 0: service.name (plain), host.name (key_strindex + string_value_strindex), user.id,
 * count (int). Resource 1: none at all. */
static const char *const input_json =
    "{\"resourceProfiles\":["
    "{\"resource\":{\"attributes\":["
    "{\"key\":\"service.name\",\"value\":{\"stringValue\":\"checkout\"}},"
    "{\"keyStrindex\":3,\"value\":{\"stringValueStrindex\":4}},"
    "{\"key\":\"user.id\",\"value\":{\"stringValue\":\"alice\"}},"
    "{\"key\":\"count\",\"value\":{\"intValue\":\"3\"}}]},"
    "\"scopeProfiles\":[{\"profiles\":[{\"sampleType\":{\"typeStrindex\":1,\"unitStrindex\":2},"
    "\"samples\":[{\"stackIndex\":1,\"values\":[\"5\"]}]}]}]},"
    "{\"scopeProfiles\":[{\"profiles\":[{\"sampleType\":{\"typeStrindex\":1,\"unitStrindex\":2},"
    "\"samples\":[{\"stackIndex\":1,\"values\":[\"7\"]}]}]}]}],"
    "\"dictionary\":{\"locationTable\":[{},{\"address\":\"4096\"}],"
    "\"stackTable\":[{},{\"locationIndices\":[1]}],"
    "\"stringTable\":[\"\",\"cpu\",\"nanoseconds\",\"host.name\",\"box1.eu.example\"]}}";

static pc_resource *res_of(pc_batch *b, size_t i)
{
    return b->req->resource_profiles[i]->resource;
}

static size_t count_key(pc_batch *b, size_t ri, const char *key)
{
    pc_resource *r = res_of(b, ri);
    size_t n = 0;
    for (size_t i = 0; r && i < r->n_attributes; i++)
        if (strcmp(pc_keyvalue_key(b->req->dictionary, r->attributes[i]), key) == 0) n++;
    return n;
}

static const pc_keyvalue *attr(pc_batch *b, size_t ri, const char *key)
{
    pc_resource *r = res_of(b, ri);
    for (size_t i = 0; r && i < r->n_attributes; i++)
        if (strcmp(pc_keyvalue_key(b->req->dictionary, r->attributes[i]), key) == 0)
            return r->attributes[i];
    return NULL;
}

static const char *str_attr(pc_batch *b, size_t ri, const char *key)
{
    const pc_keyvalue *kv = attr(b, ri, key);
    return kv ? pc_anyvalue_str(b->req->dictionary, kv->value) : NULL;
}

static pc_batch *run_yaml(const char *yaml)
{
    driver *d = driver_make(&pc_processor_resource, yaml);
    pc_batch *out = driver_run(d, batch_from_json(input_json));
    pc_batch_ref(out);
    driver_free(d);
    return out;
}

static void test_upsert_typed_values(void)
{
    pc_batch *b = run_yaml("attributes:\n"
                           "  - {key: deployment.environment, value: staging, action: upsert}\n"
                           "  - {key: replicas, value: 42, action: upsert}\n"
                           "  - {key: canary, value: true, action: upsert}\n"
                           "  - {key: ratio, value: 0.25, action: upsert}\n"
                           "  - {key: zip, value: 12345, action: upsert, converted_type: string}\n"
                           "  - {key: count, value: 4, action: upsert}\n");
    for (size_t ri = 0; ri < 2; ri++) {
        CHECK_STR(str_attr(b, ri, "deployment.environment"), "staging");
        const pc_keyvalue *kv = attr(b, ri, "replicas");
        CHECK(kv && kv->value->value_case == PC_AV_INT && kv->value->int_value == 42);
        kv = attr(b, ri, "canary");
        CHECK(kv && kv->value->value_case == PC_AV_BOOL && kv->value->bool_value);
        kv = attr(b, ri, "ratio");
        CHECK(kv && kv->value->value_case == PC_AV_DOUBLE && kv->value->double_value == 0.25);
        CHECK_STR(str_attr(b, ri, "zip"), "12345");
        kv = attr(b, ri, "count");
        CHECK(kv && kv->value->value_case == PC_AV_INT && kv->value->int_value == 4);
        CHECK_EQ_INT(count_key(b, ri, "count"), 1);
    }
    /* the Resource was created where there was none */
    CHECK(res_of(b, 1) != NULL);
    CHECK_EQ_INT(res_of(b, 1)->n_attributes, 6);
    CHECK_EQ_INT(res_of(b, 0)->n_attributes, 9);
    /* untouched attributes stay */
    CHECK_STR(str_attr(b, 0, "service.name"), "checkout");
    CHECK_STR(str_attr(b, 0, "host.name"), "box1.eu.example");
    pc_batch_unref(b);
}

static void test_insert_update(void)
{
    pc_batch *b = run_yaml("attributes:\n"
                           "  - {key: service.name, value: other, action: insert}\n"
                           "  - {key: region, value: eu, action: insert}\n"
                           "  - {key: user.id, value: bob, action: update}\n"
                           "  - {key: missing, value: x, action: update}\n");
    CHECK_STR(str_attr(b, 0, "service.name"), "checkout"); /* present: insert does nothing */
    CHECK_STR(str_attr(b, 0, "region"), "eu");
    CHECK_STR(str_attr(b, 0, "user.id"), "bob");
    CHECK(attr(b, 0, "missing") == NULL);
    CHECK(attr(b, 1, "missing") == NULL);
    CHECK(attr(b, 1, "user.id") == NULL); /* update never adds */
    CHECK_STR(str_attr(b, 1, "region"), "eu");
    CHECK_EQ_INT(res_of(b, 0)->n_attributes, 5);
    pc_batch_unref(b);
}

static void test_strindex_form(void)
{
    /* host.name is stored as key_strindex/string_value_strindex: update writes the plain form
     * and leaves exactly one entry */
    pc_batch *b = run_yaml("attributes:\n"
                           "  - {key: host.name, value: box2, action: update}\n");
    CHECK_EQ_INT(count_key(b, 0, "host.name"), 1);
    const pc_keyvalue *kv = attr(b, 0, "host.name");
    CHECK(kv && kv->key && strcmp(kv->key, "host.name") == 0 && kv->key_strindex == 0);
    CHECK(kv && kv->value->value_case == PC_AV_STRING);
    CHECK_STR(str_attr(b, 0, "host.name"), "box2");
    /* the string table is not touched */
    CHECK_STR(pc_dict_str(b->req->dictionary, 4), "box1.eu.example");
    pc_batch_unref(b);

    /* duplicates in both forms collapse to one plain entry on upsert */
    pc_batch *in = batch_from_json(input_json);
    pc_resource *r = res_of(in, 0);
    pc_keyvalue **v = pc_arena_alloc(in->arena, (r->n_attributes + 1) * sizeof *v);
    memcpy(v, r->attributes, r->n_attributes * sizeof *v);
    pc_keyvalue *dup = pc_arena_alloc(in->arena, sizeof *dup);
    opentelemetry__proto__common__v1__key_value__init(dup);
    dup->key = "host.name";
    dup->value = r->attributes[0]->value;
    v[r->n_attributes] = dup;
    r->attributes = v;
    r->n_attributes++;
    CHECK_EQ_INT(count_key(in, 0, "host.name"), 2);
    pc_error err = {0};
    driver *d = driver_new(&pc_processor_resource,
                           "attributes: [{key: host.name, value: box3, action: upsert}]", &err);
    CHECK(d != NULL);
    pc_batch *out = driver_run(d, in);
    CHECK_EQ_INT(count_key(out, 0, "host.name"), 1);
    CHECK_STR(str_attr(out, 0, "host.name"), "box3");
    driver_free(d);
}

static void test_from_attribute(void)
{
    /* the seed config: same key, a no-op copy; the strindex form is read as a source */
    pc_batch *b = run_yaml("attributes:\n"
                           "  - key: service.name\n"
                           "    from_attribute: service.name\n"
                           "    action: upsert\n"
                           "  - {key: host, from_attribute: host.name, action: upsert}\n"
                           "  - {key: nothing, from_attribute: absent.key, action: upsert}\n"
                           "  - {key: count.str, from_attribute: count, action: insert, "
                           "converted_type: string}\n");
    CHECK_STR(str_attr(b, 0, "service.name"), "checkout");
    CHECK_EQ_INT(count_key(b, 0, "service.name"), 1);
    CHECK_STR(str_attr(b, 0, "host"), "box1.eu.example");
    CHECK(attr(b, 0, "host")->value->value_case == PC_AV_STRING);
    CHECK_STR(str_attr(b, 0, "host.name"), "box1.eu.example"); /* source unchanged */
    CHECK(attr(b, 0, "nothing") == NULL);
    CHECK(attr(b, 1, "nothing") == NULL);
    CHECK(attr(b, 1, "host") == NULL); /* no source in resource 1 */
    CHECK_STR(str_attr(b, 0, "count.str"), "3");
    CHECK_EQ_INT(res_of(b, 0)->n_attributes, 6);
    CHECK_EQ_INT(res_of(b, 1)->n_attributes, 0);
    pc_batch_unref(b);
}

static void test_delete(void)
{
    pc_batch *b = run_yaml("attributes:\n"
                           "  - {key: host.name, action: delete}\n"
                           "  - {pattern: ^user\\., action: delete}\n");
    CHECK(attr(b, 0, "host.name") == NULL);
    CHECK(attr(b, 0, "user.id") == NULL);
    CHECK_STR(str_attr(b, 0, "service.name"), "checkout");
    CHECK_EQ_INT(res_of(b, 0)->n_attributes, 2);
    pc_batch_unref(b);
}

static void test_hash(void)
{
    pc_batch *b = run_yaml("attributes:\n"
                           "  - {key: user.id, action: hash}\n"
                           "  - {key: count, action: hash, algorithm: sha1}\n"
                           "  - {key: host.name, action: hash, algorithm: sha1}\n"
                           "  - {key: absent, action: hash}\n");
    /* sha256("alice"); sha1 of int 3 as 8 little-endian bytes (the Collector's encoding) */
    CHECK_STR(str_attr(b, 0, "user.id"),
              "2bd806c97f0e00af1a1fc3328fa763a9269723c8db8fac4f93af71db186d6e90");
    CHECK_STR(str_attr(b, 0, "count"), "ef4862c8fb031cd58eba3b882589e445c7e1f0e2");
    CHECK(attr(b, 0, "absent") == NULL);
    CHECK_EQ_INT(count_key(b, 0, "host.name"), 1);
    pc_batch_unref(b);

    /* longer than one block, and the strindex value form */
    pc_batch *in = batch_from_json(input_json);
    char *hundred = pc_arena_alloc(in->arena, 101);
    memset(hundred, 'a', 100);
    hundred[100] = 0;
    res_of(in, 0)->attributes[2]->value->string_value = hundred;
    pc_error err = {0};
    driver *d = driver_new(&pc_processor_resource,
                           "attributes:\n"
                           "  - {key: user.id, action: hash, algorithm: sha1}\n"
                           "  - {key: host.name, action: hash}\n",
                           &err);
    pc_batch *out = driver_run(d, in);
    CHECK_STR(str_attr(out, 0, "user.id"), "7f9000257a4918d7072655ea468540cdcbd42e0c");
    /* string_value_strindex read through the string table */
    CHECK_STR(str_attr(out, 0, "host.name"),
              "3936350ca4cbf093c57b63a943ab0cdd23b73e3692ae4afd360634eba4c8321b");
    driver_free(d);
}

static void test_extract(void)
{
    pc_batch *b = run_yaml("attributes:\n"
                           "  - key: host.name\n"
                           "    pattern: ^(?P<host>[^.]+)\\.(?P<domain>.*)$\n"
                           "    action: extract\n"
                           "  - key: service.name\n"
                           "    pattern: ^(nomatch)(?P<never>x)$\n"
                           "    action: extract\n");
    CHECK_STR(str_attr(b, 0, "host"), "box1");
    CHECK_STR(str_attr(b, 0, "domain"), "eu.example");
    CHECK_STR(str_attr(b, 0, "host.name"), "box1.eu.example");
    CHECK(attr(b, 0, "never") == NULL);
    CHECK(attr(b, 1, "host") == NULL);
    pc_batch_unref(b);
}

static void test_config_errors(void)
{
    static const struct {
        const char *yaml, *want;
    } cases[] = {
        {"attributes:\n  - key: a\n    value: b\n    action: ups\n",
         "test.yaml:4: processors::resource::attributes[0]::action: \"ups\" is not one of insert, "
         "update, upsert, delete, hash, extract"},
        {"attributes:\n  - {key: a, value: b}\n", "attributes[0]::action: missing"},
        {"attributes:\n  - {key: a, action: upsert}\n", "exactly one of value and from_attribute"},
        {"attributes:\n  - {key: a, value: b, from_attribute: c, action: insert}\n",
         "exactly one of value and from_attribute"},
        {"attributes:\n  - {value: b, action: insert}\n", "key: required"},
        {"attributes:\n  - {key: a, pattern: (x), action: extract}\n", "named group"},
        {"attributes:\n  - {key: a, action: extract}\n", "pattern: required"},
        {"attributes:\n  - {key: a, pattern: \"(?P<x>[\", action: extract}\n",
         "invalid regular expression"},
        {"attributes:\n  - {key: a, pattern: \"(?:x)\", action: extract}\n",
         "unsupported group syntax"},
        {"attributes:\n  - {key: a, valeu: b, action: insert}\n",
         "unknown key \"valeu\" (did you mean \"value\"?)"},
        {"attributes:\n  - {key: a, value: x1, converted_type: int, action: insert}\n",
         "is not an integer"},
        {"attributes:\n  - {key: a, value: b, action: insert, converted_type: float}\n",
         "converted_type"},
        {"attributes: {key: a}\n", "must be a list"},
        {"atributes: []\n", "did you mean \"attributes\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pc_error err = {0};
        driver *d = driver_new(&pc_processor_resource, cases[i].yaml, &err);
        CHECK(d == NULL);
        CHECK_CONTAINS(err.msg, cases[i].want);
        driver_free(d);
    }
    /* no attributes: a pass-through */
    pc_error err = {0};
    driver *d = driver_new(&pc_processor_resource, "", &err);
    CHECK(d != NULL);
    pc_batch *in = batch_from_json(input_json);
    CHECK(driver_run(d, in) == in);
    driver_free(d);
}

static void test_copy_on_write(void)
{
    pc_error err = {0};
    driver *d = driver_new(&pc_processor_resource,
                           "attributes:\n"
                           "  - {key: service.name, value: changed, action: upsert}\n"
                           "  - {key: host.name, action: delete}\n",
                           &err);
    pc_batch *in = batch_from_json(input_json);
    pc_batch_ref(in); /* another pipeline holds it too */
    pc_batch *out = driver_run(d, in);
    CHECK(out != in);
    CHECK_STR(str_attr(out, 0, "service.name"), "changed");
    CHECK(attr(out, 0, "host.name") == NULL);
    CHECK_STR(str_attr(in, 0, "service.name"), "checkout");
    CHECK_STR(str_attr(in, 0, "host.name"), "box1.eu.example");
    CHECK_EQ_INT(res_of(in, 0)->n_attributes, 4);
    CHECK(res_of(in, 1) == NULL);
    pc_batch_unref(in);
    driver_free(d);
}

int main(void)
{
    RUN(test_upsert_typed_values);
    RUN(test_insert_update);
    RUN(test_strindex_form);
    RUN(test_from_attribute);
    RUN(test_delete);
    RUN(test_hash);
    RUN(test_extract);
    RUN(test_config_errors);
    RUN(test_copy_on_write);
    return check_report();
}
