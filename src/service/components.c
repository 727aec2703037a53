/* The one table of component types (like the Collector's factories). */
#include <string.h>

#include "sdk/component.h"

extern const pc_component_type pc_receiver_otlp;
extern const pc_component_type pc_receiver_pyroscope;
extern const pc_component_type pc_receiver_kafka;
extern const pc_component_type pc_processor_batch;
extern const pc_component_type pc_processor_resource;
extern const pc_component_type pc_processor_redaction;
extern const pc_component_type pc_processor_tracelink;
extern const pc_component_type pc_processor_limits;
extern const pc_component_type pc_processor_filter;
extern const pc_component_type pc_processor_memory_limiter;
extern const pc_component_type pc_exporter_otlphttp;
extern const pc_component_type pc_exporter_otlp;
extern const pc_component_type pc_exporter_loadbalancing;
extern const pc_component_type pc_exporter_pyroscope;
extern const pc_component_type pc_exporter_debug;
extern const pc_component_type pc_exporter_kafka;
extern const pc_component_type pc_extension_health_check;
extern const pc_component_type pc_extension_bearertokenauth;
extern const pc_component_type pc_extension_basicauth;
extern const pc_component_type pc_extension_profilez;

const pc_component_type *const pc_component_types[] = {
    &pc_receiver_otlp,
    &pc_receiver_pyroscope,
    &pc_receiver_kafka,
    &pc_processor_batch,
    &pc_processor_resource,
    &pc_processor_redaction,
    &pc_processor_tracelink,
    &pc_processor_limits,
    &pc_processor_filter,
    &pc_processor_memory_limiter,
    &pc_exporter_otlphttp,
    &pc_exporter_otlp,
    &pc_exporter_loadbalancing,
    &pc_exporter_pyroscope,
    &pc_exporter_debug,
    &pc_exporter_kafka,
    &pc_extension_health_check,
    &pc_extension_bearertokenauth,
    &pc_extension_basicauth,
    &pc_extension_profilez,
    NULL,
};

const pc_component_type *pc_component_type_find(pc_kind kind, const char *name)
{
    for (size_t i = 0; pc_component_types[i]; i++) {
        const pc_component_type *t = pc_component_types[i];
        if (t->kind == kind && strcmp(t->name, name) == 0) return t;
    }
    return NULL;
}

const char *pc_kind_name(pc_kind kind)
{
    static const char *const names[] = {"receiver", "processor", "exporter", "extension"};
    return names[kind];
}
