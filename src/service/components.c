/* Looking up component types in the one table (like the Collector's factories). */
#include <string.h>

#include "sdk/component.h"

/* pc_component_types[] is generated from meson.build's components list
 * (tools/gen_components.py): one line there per type. */

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
