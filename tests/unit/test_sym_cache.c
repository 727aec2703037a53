/* The symbolizer's bounded LRU (src/processors/symbolizer/cache.h) against a model written here
 * (an array in recency order): random gets, puts and replacements over a small key space, so the
 * index's tombstones and rebuilds are exercised; every evicted or replaced value is freed exactly
 * once, and what the cache holds is what the model holds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "processors/symbolizer/cache.h"

enum { CAP = 7, KEYS = 40, OPS = 200000 };

static int live[KEYS * 4 + 1]; /* values alive, by value id */

static void free_value(void *p)
{
    int id = (int)(intptr_t)p;
    CHECK(live[id] == 1);
    live[id] = 0;
}

typedef struct model {
    int key[CAP], val[CAP]; /* [0]: most recent */
    int n;
} model;

static int model_find(const model *m, int key)
{
    for (int i = 0; i < m->n; i++)
        if (m->key[i] == key) return i;
    return -1;
}

static void model_touch(model *m, int i)
{
    int k = m->key[i], v = m->val[i];
    memmove(&m->key[1], &m->key[0], (size_t)i * sizeof(int));
    memmove(&m->val[1], &m->val[0], (size_t)i * sizeof(int));
    m->key[0] = k, m->val[0] = v;
}

static void test_against_model(void)
{
    sym_lru *c = sym_lru_new(CAP, free_value);
    model m = {0};
    unsigned seed = 12345;
    int next_val = 1;
    for (int op = 0; op < OPS; op++) {
        seed = seed * 1103515245u + 12345u;
        int key = (int)((seed >> 8) % KEYS);
        char kb[16];
        size_t kl = (size_t)snprintf(kb, sizeof kb, "k%d", key);
        int i = model_find(&m, key);
        if ((seed >> 4) & 1) {
            void *got = sym_lru_get(c, kb, kl);
            CHECK((int)(intptr_t)got == (i >= 0 ? m.val[i] : 0));
            if (i >= 0) model_touch(&m, i);
            continue;
        }
        int v = next_val++ % (KEYS * 4) + 1;
        if (live[v]) continue; /* value ids are reused only once freed */
        live[v] = 1;
        sym_lru_put(c, kb, kl, (void *)(intptr_t)v);
        if (i >= 0) {
            m.val[i] = v;
            model_touch(&m, i);
        } else {
            if (m.n == CAP) m.n--; /* the least recent goes */
            memmove(&m.key[1], &m.key[0], (size_t)m.n * sizeof(int));
            memmove(&m.val[1], &m.val[0], (size_t)m.n * sizeof(int));
            m.key[0] = key, m.val[0] = v, m.n++;
        }
        CHECK_EQ_INT(sym_lru_size(c), m.n);
    }
    int alive = 0;
    for (int v = 0; v <= KEYS * 4; v++)
        alive += live[v];
    CHECK_EQ_INT(alive, m.n); /* everything else was freed */
    sym_lru_free(c);
    for (int v = 0; v <= KEYS * 4; v++)
        CHECK(live[v] == 0);
}

int main(void)
{
    RUN(test_against_model);
    return check_report();
}
