/* The profilez diff's top table (agg.h): a comparison's functions against a baseline's, each as
 * its share of its own total, so a baseline of another length or load compares. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "extensions/profilez/agg_impl.h"
#include "pdata/summary.h"

typedef struct drow {
    const char *name;
    int64_t flat, cum, bflat, bcum;
    double change, cum_change;
} drow;

static int cmp_name(const void *x, const void *y)
{
    return strcmp(((const pc_top_row *)x)->name, ((const pc_top_row *)y)->name);
}

static int cmp_change(const void *x, const void *y)
{
    const drow *a = x, *b = y;
    double ca = fabs(a->change), cb = fabs(b->change);
    if (ca != cb) return ca < cb ? 1 : -1;
    return strcmp(a->name, b->name);
}

static double share(int64_t v, int64_t total)
{
    return total > 0 ? (double)v / (double)total : 0;
}

/* Both tables merged by name: a function missing on one side has 0 there. */
static drow *merge(const pc_top_row *r, size_t n, const pc_top_row *b, size_t bn, size_t *out_n)
{
    drow *d = pc_xmalloc((n + bn + 1) * sizeof *d);
    size_t i = 0, j = 0, m = 0;
    while (i < n || j < bn) {
        int c = i == n ? 1 : j == bn ? -1 : strcmp(r[i].name, b[j].name);
        drow x = {.name = c <= 0 ? r[i].name : b[j].name};
        if (c <= 0) {
            x.flat = r[i].flat;
            x.cum = r[i++].cum;
        }
        if (c >= 0) {
            x.bflat = b[j].flat;
            x.bcum = b[j++].cum;
        }
        d[m++] = x;
    }
    *out_n = m;
    return d;
}

void pz_top_diff_json(const pz_query *q, pc_top *t, int64_t total, pc_top *bt, int64_t btotal,
                      pc_buf *out)
{
    size_t n, bn, m;
    pc_top_row *r = pc_top_rows(t, &n), *b = pc_top_rows(bt, &bn);
    if (n > 1) qsort(r, n, sizeof *r, cmp_name);
    if (bn > 1) qsort(b, bn, sizeof *b, cmp_name);
    drow *d = merge(r, n, b, bn, &m);
    size_t hits = 0;
    for (size_t i = 0; i < m; i++) {
        d[i].change = share(d[i].flat, total) - share(d[i].bflat, btotal);
        d[i].cum_change = share(d[i].cum, total) - share(d[i].bcum, btotal);
        if (pz_search_hit(d[i].name, q->search)) d[hits++] = d[i];
    }
    if (hits > 1) qsort(d, hits, sizeof *d, cmp_change);
    pc_buf_printf(out, ",\"base_total\":%" PRId64 ",\"functions\":%zu,\"rows\":[", btotal, hits);
    for (size_t i = 0; i < hits && i < q->limit; i++) {
        pc_buf_printf(out, "%s{\"name\":", i ? "," : "");
        pz_json_str(out, d[i].name);
        pc_buf_printf(out,
                      ",\"flat\":%" PRId64 ",\"cum\":%" PRId64 ",\"base_flat\":%" PRId64
                      ",\"base_cum\":%" PRId64 ",\"change\":%.9f,\"cum_change\":%.9f}",
                      d[i].flat, d[i].cum, d[i].bflat, d[i].bcum, d[i].change, d[i].cum_change);
    }
    pc_buf_printf(out, "]}");
    free(d);
    free(r);
    free(b);
}
