/* Reading the config's own sections (service, pipelines, service::telemetry): key paths, unknown
 * keys with a "did you mean", settings profcol refuses, and where a component id is defined. */
#include <stdio.h>
#include <string.h>

#include "service/internal.h"

void svc_path_join(char *out, size_t n, const char *path, const char *key)
{
    if (snprintf(out, n, "%s%s%s", path, *path ? "::" : "", key) >= (int)n)
        out[n - 1] = 0; /* a truncated path still locates the key */
}

/* Every key of map must be in allowed; each one that is not is an error (with a "did you mean").
 * PC_EINVAL if map is not a mapping or has unknown keys. */
int svc_check_keys(const pc_node *map, const char *const *allowed, size_t n, const char *path,
                   pc_error *err)
{
    if (!map) return 0;
    if (map->kind == PC_NODE_NULL) return 0;
    if (map->kind != PC_NODE_MAP) {
        pc_cfg_errorf(err, map, path, "must be a mapping");
        return PC_EINVAL;
    }
    int rc = 0;
    for (size_t i = 0; i < map->n; i++) {
        size_t j = 0;
        while (j < n && strcmp(map->keys[i], allowed[j]) != 0)
            j++;
        if (j < n) continue;
        const char *close = pc_closest(map->keys[i], allowed, n);
        char sub[256];
        svc_path_join(sub, sizeof sub, path, map->keys[i]);
        pc_cfg_errorf(err, map->vals[i], sub, "unknown key \"%s\"%s%s%s", map->keys[i],
                      close ? " (did you mean \"" : "", close ? close : "", close ? "\"?)" : "");
        rc = PC_EINVAL;
    }
    return rc;
}

bool svc_is_empty(const pc_node *n)
{
    return !n || n->kind == PC_NODE_NULL ||
           ((n->kind == PC_NODE_MAP || n->kind == PC_NODE_SEQ) && n->n == 0);
}

/* A Collector setting profcol does not implement: refused, never ignored. */
int svc_unsupported(const pc_node *n, const char *path, const char *why, pc_error *err)
{
    if (svc_is_empty(n)) return 0;
    pc_cfg_errorf(err, n, path, "not supported by profcol: %s", why);
    return PC_EINVAL;
}

const pc_node *svc_find_definition(pc_service *s, const char *section, const char *id,
                                   const pc_node *at, const char *path, pc_error *err)
{
    const pc_node *sec = pc_node_get(s->root, section);
    if (sec && sec->kind == PC_NODE_MAP)
        for (size_t i = 0; i < sec->n; i++)
            if (strcmp(sec->keys[i], id) == 0) return sec->vals[i];
    if (err)
        pc_cfg_errorf(err, at, path, "%s \"%s\" is not defined in the top-level \"%s\" section",
                      section, id, section);
    return NULL;
}
