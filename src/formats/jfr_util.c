/* What the JFR reader and the mapping on it share (jfr_reader.h): errors naming the offset, and
 * tables and buffers charged to the request's budget as they grow. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/hash.h"
#include "formats/jfr_reader.h"

/* ---- errors ---- */

int jfr_at(jfr_reader *d, int code, size_t off, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return pc_error_set(d->e, code, "offset %zu: %s", off, msg);
}

int jfr_budget_error(jfr_reader *d)
{
    return pc_error_set(d->e, PC_E2BIG, "%s: over the decode budget",
                        d->budget && d->budget->what[0] ? d->budget->what : "JFR recording");
}

/* ---- memory ---- */

void jfr_charge(jfr_reader *d, size_t n)
{
    d->charged += n;
    pc_budget_charge(d->budget, n);
}

void jfr_uncharge(jfr_reader *d, size_t n)
{
    d->charged -= n;
    pc_budget_uncharge(d->budget, n);
}

/* Grow *p (elements of size elem, capacity *cap) to hold need elements. */
void *jfr_vgrow(jfr_reader *d, void *p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return p;
    size_t nc = *cap ? *cap : 16;
    while (nc < need)
        nc *= 2;
    p = pc_xrealloc(p, nc * elem);
    jfr_charge(d, (nc - *cap) * elem);
    *cap = nc;
    return p;
}

void jfr_vfree(jfr_reader *d, void *p, size_t cap, size_t elem)
{
    free(p);
    jfr_uncharge(d, cap * elem);
}

/* Seeded (base/hash.h): pool keys are the client's, and a fixed hash lets it pick keys that share
 * one probe run (issue 28: 80k such keys took 7.85 s). */
static inline size_t umap_hash(uint64_t k)
{
    return (size_t)pc_hash_u64(k);
}

uint32_t jfr_umap_get(const umap *m, uint64_t k)
{
    if (!m->cap) return UINT32_MAX;
    size_t mask = m->cap - 1;
    for (size_t i = umap_hash(k) & mask;; i = (i + 1) & mask) {
        if (!m->vals[i]) return UINT32_MAX;
        if (m->keys[i] == k) return m->vals[i] - 1;
    }
}

static void umap_insert_raw(umap *m, uint64_t k, uint32_t vplus1)
{
    size_t mask = m->cap - 1;
    size_t i = umap_hash(k) & mask;
    while (m->vals[i])
        i = (i + 1) & mask;
    m->keys[i] = k;
    m->vals[i] = vplus1;
}

/* Insert k -> v; when k is present, replace its value only if replace. */
void jfr_umap_put(jfr_reader *d, umap *m, uint64_t k, uint32_t v, bool replace)
{
    if (m->cap) {
        size_t mask = m->cap - 1;
        for (size_t i = umap_hash(k) & mask; m->vals[i]; i = (i + 1) & mask)
            if (m->keys[i] == k) {
                if (replace) m->vals[i] = v + 1;
                return;
            }
    }
    if ((m->n + 1) * 4 > m->cap * 3) {
        umap old = *m;
        m->cap = old.cap ? old.cap * 2 : 64;
        m->keys = pc_xmalloc(m->cap * sizeof(uint64_t));
        m->vals = pc_xcalloc(m->cap, sizeof(uint32_t));
        jfr_charge(d, m->cap * (sizeof(uint64_t) + sizeof(uint32_t)));
        for (size_t i = 0; i < old.cap; i++)
            if (old.vals[i]) umap_insert_raw(m, old.keys[i], old.vals[i]);
        free(old.keys);
        free(old.vals);
        jfr_uncharge(d, old.cap * (sizeof(uint64_t) + sizeof(uint32_t)));
    }
    umap_insert_raw(m, k, v + 1);
    m->n++;
}

void jfr_umap_free(jfr_reader *d, umap *m)
{
    free(m->keys);
    free(m->vals);
    jfr_uncharge(d, m->cap * (sizeof(uint64_t) + sizeof(uint32_t)));
    memset(m, 0, sizeof *m);
}

/* Room for extra more bytes (and a NUL) after b->len. */
char *jfr_sb_room(jfr_reader *d, sbuf *b, size_t extra)
{
    b->p = jfr_vgrow(d, b->p, &b->cap, b->len + extra + 1, 1);
    return b->p + b->len;
}

void jfr_sb_put(jfr_reader *d, sbuf *b, const char *s, size_t n)
{
    char *w = jfr_sb_room(d, b, n);
    if (n) memcpy(w, s, n);
    b->len += n;
    b->p[b->len] = 0;
}
