/* The profilez aggregate's interned frame names (agg_impl.h), apart from agg.c so that it and
 * labels.c, which names labels in the same table, both stand on them. The table hashes with the
 * process's seeded hash (base/hash.h): names are the clients'. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/hash.h"
#include "extensions/profilez/agg_impl.h"

/* ---- interned frame names, reference counted ---- */

static void names_rebuild(names *nm, size_t nslots)
{
    free(nm->slots);
    nm->slots = pc_xcalloc(nslots, sizeof *nm->slots);
    nm->nslots = nslots;
    nm->used_slots = 0;
    for (size_t id = 0; id < nm->n; id++) {
        name_ent *e = &nm->v[id];
        if (!e->s) {
            if (!e->free_listed) {
                if (nm->nfree == nm->capfree) {
                    nm->capfree = nm->capfree ? nm->capfree * 2 : 64;
                    nm->freeids = pc_xrealloc(nm->freeids, nm->capfree * sizeof *nm->freeids);
                }
                nm->freeids[nm->nfree++] = (uint32_t)id;
                e->free_listed = true;
            }
            continue;
        }
        size_t j = (size_t)e->hash & (nslots - 1);
        while (nm->slots[j])
            j = (j + 1) & (nslots - 1);
        nm->slots[j] = (uint32_t)id + 1;
        nm->used_slots++;
    }
    nm->dead = 0;
}

/* How much of s a name keeps: PZ_MAX_NAME bytes at most, cut on a UTF-8 boundary. */
static size_t name_len(const char *s)
{
    size_t len = strlen(s);
    if (len > PZ_MAX_NAME) {
        len = PZ_MAX_NAME;
        while (len > 0 && ((unsigned char)s[len] & 0xC0) == 0x80)
            len--;
    }
    return len;
}

/* s as a name keeps it, in out (PZ_MAX_NAME + 1 bytes). */
const char *pz_name_cut(const char *s, char *out)
{
    size_t len = name_len(s);
    memcpy(out, s, len);
    out[len] = 0;
    return out;
}

/* The id of s (cut as name_len says) with one more reference. */
uint32_t pz_name_ref(names *nm, const char *s)
{
    size_t len = name_len(s);
    uint64_t h = pc_hash_mem(s, len);
    if ((nm->used_slots + 1) * 10 > nm->nslots * 7) {
        size_t ns = nm->nslots ? nm->nslots : 256;
        while ((nm->live + 1) * 10 > ns * 5)
            ns *= 2;
        names_rebuild(nm, ns);
    }
    size_t j = (size_t)h & (nm->nslots - 1);
    while (nm->slots[j]) {
        name_ent *e = &nm->v[nm->slots[j] - 1];
        if (e->s && e->hash == h && strncmp(e->s, s, len) == 0 && e->s[len] == 0) {
            e->refs++;
            return nm->slots[j] - 1;
        }
        j = (j + 1) & (nm->nslots - 1);
    }
    uint32_t id;
    if (nm->nfree) {
        id = nm->freeids[--nm->nfree];
    } else {
        if (nm->n == nm->cap) {
            nm->cap = nm->cap ? nm->cap * 2 : 256;
            nm->v = pc_xrealloc(nm->v, nm->cap * sizeof *nm->v);
        }
        id = (uint32_t)nm->n++;
    }
    name_ent *e = &nm->v[id];
    e->s = pc_xmalloc(len + 1);
    memcpy(e->s, s, len);
    e->s[len] = 0;
    e->hash = h;
    e->refs = 1;
    e->free_listed = false;
    nm->slots[j] = id + 1;
    nm->used_slots++;
    nm->live++;
    return id;
}

uint32_t pz_name_find(const names *nm, const char *s)
{
    if (!nm->nslots) return PZ_NAME_NONE;
    size_t len = name_len(s);
    uint64_t h = pc_hash_mem(s, len);
    for (size_t j = (size_t)h & (nm->nslots - 1); nm->slots[j]; j = (j + 1) & (nm->nslots - 1)) {
        const name_ent *e = &nm->v[nm->slots[j] - 1];
        if (e->s && e->hash == h && strncmp(e->s, s, len) == 0 && e->s[len] == 0)
            return nm->slots[j] - 1;
    }
    return PZ_NAME_NONE;
}

void pz_name_unref(names *nm, uint32_t id)
{
    name_ent *e = &nm->v[id];
    if (--e->refs) return;
    free(e->s);
    e->s = NULL;
    nm->live--;
    nm->dead++;
    if (nm->dead > 64 && nm->dead > nm->live) {
        size_t ns = 256;
        while ((nm->live + 1) * 10 > ns * 5)
            ns *= 2;
        names_rebuild(nm, ns);
    }
}

void pz_names_free(names *nm)
{
    for (size_t i = 0; i < nm->n; i++)
        free(nm->v[i].s);
    free(nm->v);
    free(nm->slots);
    free(nm->freeids);
}

/* ---- stacks, slices, series ---- */
