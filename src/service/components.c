/* Looking up component types in the one table (like the Collector's factories). */
#include <string.h>

#include "sdk/component.h"

/* pc_component_types[] is generated from meson.build's components list
 * (tools/gen_components.py): one line there per type. */

/* The names the Collector gives these types since it renamed them (otelcol 0.161.0's otlp_grpc and
 * otlp_http exporters): a Collector config runs as it is written. */
static const struct {
    pc_kind kind;
    const char *alias, *name;
} aliases[] = {
    {PC_KIND_EXPORTER, "otlp_grpc", "otlp"},
    {PC_KIND_EXPORTER, "otlp_http", "otlphttp"},
};

const pc_component_type *pc_component_type_find(pc_kind kind, const char *name)
{
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (aliases[i].kind == kind && !strcmp(aliases[i].alias, name)) name = aliases[i].name;
    for (size_t i = 0; pc_component_types[i]; i++) {
        const pc_component_type *t = pc_component_types[i];
        if (t->kind == kind && strcmp(t->name, name) == 0) return t;
    }
    return NULL;
}

const char *pc_kind_name(pc_kind kind)
{
    static const char *const names[] = {"receiver", "processor", "exporter", "connector",
                                        "extension"};
    return names[kind];
}
