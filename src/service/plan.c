/* What a reload keeps of the running service: extensions, receivers and exporters whose
 * definition, pipeline membership and authenticators are unchanged (or changed only in what
 * they apply in place), and the processors of unchanged pipelines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "sdk/exporter.h"
#include "sdk/sender.h"
#include "service/internal.h"

static const pc_node *pipelines_of(const pc_node *root)
{
    const pc_node *p = pc_node_get(pc_node_get(root, "service"), "pipelines");
    return p && p->kind == PC_NODE_MAP ? p : NULL;
}

bool svc_lists(const pc_node *pipeline, const char *list, const char *id)
{
    const pc_node *l = pc_node_get(pipeline, list);
    for (size_t i = 0; l && l->kind == PC_NODE_SEQ && i < l->n; i++)
        if (l->vals[i]->kind == PC_NODE_SCALAR && !strcmp(l->vals[i]->scalar, id)) return true;
    return false;
}

/* The same pipelines (by name) list id under `list` in both configs. */
static bool same_membership(const pc_node *ra, const pc_node *rb, const char *list, const char *id)
{
    const pc_node *pa = pipelines_of(ra), *pb = pipelines_of(rb);
    for (int pass = 0; pass < 2; pass++) {
        const pc_node *x = pass ? pb : pa, *y = pass ? pa : pb;
        for (size_t i = 0; x && i < x->n; i++)
            if (svc_lists(x->vals[i], list, id) && !svc_lists(pc_node_get(y, x->keys[i]), list, id))
                return false;
    }
    return true;
}

static bool enabled_extension(const pc_node *root, const char *id)
{
    const pc_node *l = pc_node_get(pc_node_get(root, "service"), "extensions");
    for (size_t i = 0; l && l->kind == PC_NODE_SEQ && i < l->n; i++)
        if (l->vals[i]->kind == PC_NODE_SCALAR && !strcmp(l->vals[i]->scalar, id)) return true;
    return false;
}

pc_component *svc_find_in(pc_component *const *list, size_t n, const char *id)
{
    for (size_t i = 0; i < n; i++)
        if (list[i] && !strcmp(list[i]->id, id)) return list[i];
    return NULL;
}

static bool same_definition(const pc_service *s, const char *section, const char *id)
{
    const pc_node *a = pc_node_get(pc_node_get(s->from->root, section), id);
    const pc_node *b = pc_node_get(pc_node_get(s->root, section), id);
    return a && b && pc_node_equal(a, b);
}

/* An exporter on the core whose sending queue is on disk (wherever its config keeps the
 * setting: the loadbalancing exporter's is under protocol::otlp). */
bool svc_persistent_queue(const pc_component *c)
{
    const pc_exporter_def *d = c->type->exporter;
    if (!d || d->sink || !c->cfg) return false;
    const pc_sender_cfg *sc = (const pc_sender_cfg *)((const char *)c->cfg + d->sender_cfg);
    return sc->storage != NULL;
}

/* The running instance c may take its new definition in place (its type's reconfigurable). */
static bool reconfigurable(const pc_service *s, const char *section, const pc_component *c)
{
    const pc_node *a = pc_node_get(pc_node_get(s->from->root, section), c->id);
    const pc_node *b = pc_node_get(pc_node_get(s->root, section), c->id);
    return a && b && c->type->reconfigurable && c->type->reconfigure &&
           c->type->reconfigurable(a, b);
}

pc_component *svc_kept_extension(pc_service *s, const char *id)
{
    if (!s->from || !enabled_extension(s->from->root, id) || !enabled_extension(s->root, id) ||
        !same_definition(s, "extensions", id))
        return NULL;
    return svc_find_in(s->from->extensions, s->from->n_extensions, id);
}

/* Every `auth: authenticator: <id>` below n names an extension the reload keeps. */
static bool auth_refs_kept(pc_service *s, const pc_node *n)
{
    if (!n || n->kind != PC_NODE_MAP) return true;
    for (size_t i = 0; i < n->n; i++) {
        const pc_node *id = pc_node_get(n->vals[i], "authenticator");
        if (!strcmp(n->keys[i], "auth") && id && id->kind == PC_NODE_SCALAR) {
            if (!svc_kept_extension(s, id->scalar)) return false;
        } else if (!auth_refs_kept(s, n->vals[i])) {
            return false;
        }
    }
    return true;
}

/* The running instance of a receiver or exporter a reload keeps, or NULL: its definition is
 * unchanged, or changed only in what it can apply in place (see reconfigure in shared_instance). */
pc_component *svc_kept_instance(pc_service *s, pc_kind kind, const char *id)
{
    const char *section = kind == PC_KIND_RECEIVER ? "receivers" : "exporters";
    if (!s->from || !same_membership(s->from->root, s->root, section, id) ||
        !auth_refs_kept(s, pc_node_get(pc_node_get(s->root, section), id)))
        return NULL;
    pc_component *c = kind == PC_KIND_RECEIVER
                          ? svc_find_in(s->from->receivers, s->from->n_receivers, id)
                          : svc_find_in(s->from->exporters, s->from->n_exporters, id);
    if (!c || same_definition(s, section, id) || reconfigurable(s, section, c)) return c;
    return NULL;
}

/* c (kept) changed in what it applies in place: parse its new definition now (the whole config
 * was validated: this cannot fail), apply it at the switch. */
void svc_plan_reconfigure(pc_service *s, pc_component *c, const char *section, const pc_node *def,
                          const char *path)
{
    if (same_definition(s, section, c->id) || s->n_reconf == MAX_COMPONENTS) return;
    const pc_component_type *t = c->type;
    void *cfg = pc_xcalloc(1, t->cfg_size ? t->cfg_size : 1);
    pc_error e = {0};
    if (pc_cfgtable_apply(t->cfg, cfg, def, path, &e) ||
        (t->validate && t->validate(cfg, def, path, &e))) {
        PC_ERROR(NULL, "reload: %s: %s", path, e.msg); /* validated before: not reached */
        pc_cfgtable_free(t->cfg, cfg);
        free(cfg);
        return;
    }
    s->reconf[s->n_reconf] = c;
    s->reconf_cfg[s->n_reconf++] = cfg;
}

static bool seq_equal(const pc_node *a, const pc_node *b)
{
    if (svc_is_empty(a) || svc_is_empty(b)) return svc_is_empty(a) && svc_is_empty(b);
    return pc_node_equal(a, b);
}

pipeline *svc_old_pipeline(const pc_service *old, const char *name)
{
    for (size_t i = 0; i < old->n_pipelines; i++)
        if (old->pipelines[i].built && !strcmp(old->pipelines[i].name, name))
            return &old->pipelines[i];
    return NULL;
}

/* A pipeline is kept when its processors (ids, order and configs) and exporters are unchanged
 * and every exporter is kept. Processors of one id share state (tracelink's span index), so
 * they are kept or restarted together: one restarted instance restarts them all. */
/* NULL, null, or a list of scalars (anything else is an error reported by the build). */
static bool scalar_items(const pc_node *l)
{
    if (!l || l->kind == PC_NODE_NULL) return true;
    if (l->kind != PC_NODE_SEQ) return false;
    for (size_t i = 0; i < l->n; i++)
        if (l->vals[i]->kind != PC_NODE_SCALAR) return false;
    return true;
}

/* The running service's taps are this one's: every tap extension enabled in either config is
 * enabled in both and kept (a kept profiles pipeline keeps its fan-out, taps included). */
static bool same_taps(pc_service *s)
{
    for (size_t i = 0; i < s->n_extensions; i++)
        if (s->extensions[i]->type->tap && s->extensions[i]->host != (pc_host *)s->from)
            return false;
    for (size_t i = 0; i < s->from->n_extensions; i++) {
        pc_component *c = s->from->extensions[i];
        if (c && c->type->tap && svc_find_in(s->extensions, s->n_extensions, c->id) != c)
            return false;
    }
    return true;
}

void svc_plan_pipelines(pc_service *s, const pc_node *pls, bool *keep)
{
    const pc_node *opls = pipelines_of(s->from->root);
    bool taps = same_taps(s);
    for (size_t i = 0; i < pls->n; i++) {
        const pc_node *p = pls->vals[i], *op = pc_node_get(opls, pls->keys[i]);
        pc_signal sig;
        bool profiles = !pc_signal_parse(pls->keys[i], strcspn(pls->keys[i], "/"), &sig) &&
                        sig == PC_SIGNAL_PROFILES;
        keep[i] = op && svc_old_pipeline(s->from, pls->keys[i]) && (taps || !profiles) &&
                  scalar_items(pc_node_get(p, "processors")) &&
                  scalar_items(pc_node_get(p, "exporters")) &&
                  scalar_items(pc_node_get(p, "receivers")) &&
                  seq_equal(pc_node_get(p, "processors"), pc_node_get(op, "processors")) &&
                  seq_equal(pc_node_get(p, "exporters"), pc_node_get(op, "exporters"));
        const pc_node *procs = pc_node_get(p, "processors"), *exps = pc_node_get(p, "exporters");
        for (size_t k = 0; keep[i] && procs && k < procs->n; k++)
            keep[i] = same_definition(s, "processors", procs->vals[k]->scalar);
        for (size_t k = 0; keep[i] && exps && k < exps->n; k++)
            keep[i] = svc_kept_instance(s, PC_KIND_EXPORTER, exps->vals[k]->scalar) != NULL;
    }
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t i = 0; i < pls->n; i++) {
            const pc_node *procs = pc_node_get(pls->vals[i], "processors");
            for (size_t k = 0; keep[i] && procs && procs->kind == PC_NODE_SEQ && k < procs->n;
                 k++) {
                const char *id = procs->vals[k]->scalar;
                for (int pass = 0; keep[i] && pass < 2; pass++) {
                    const pc_node *x = pass ? opls : pls;
                    for (size_t j = 0; keep[i] && x && j < x->n; j++) {
                        if (!svc_lists(x->vals[j], "processors", id)) continue;
                        size_t q = 0;
                        while (q < pls->n && strcmp(pls->keys[q], x->keys[j]) != 0)
                            q++;
                        if (q == pls->n || !keep[q]) keep[i] = false, changed = true;
                    }
                }
            }
        }
    }
}
