/* Splitting a batch by a per-item choice (see split.h). */
#include "pdata/split.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "pdata/merge.h"

static size_t n_samples(const pc_profile *p)
{
    return p && p->samples ? p->n_samples : 0;
}

static void copy_meta(const pc_batch *from, pc_batch *to)
{
    for (size_t i = 0; i < from->meta.n; i++)
        pc_batch_set_meta(to, from->meta.keys[i], from->meta.vals[i]);
}

/* ---- profiles ---- */

/* One part's slices; a pick slice's pick pointer is set once its part's picks stop moving. */
typedef struct part {
    pc_merge_slice *sl;
    size_t *off; /* per slice: offset of its picks in pick, or (size_t)-1 for a range */
    size_t n, cap;
    uint32_t *pick;
    size_t npick, cappick;
    size_t in_profile; /* samples of the current profile */
    size_t start;      /* where the current profile's picks start */
} part;

static void push_slice(part *pt, pc_merge_slice sl, size_t off)
{
    if (pt->n == pt->cap) {
        pt->cap = pt->cap ? pt->cap * 2 : 16;
        pt->sl = pc_xrealloc(pt->sl, pt->cap * sizeof *pt->sl);
        pt->off = pc_xrealloc(pt->off, pt->cap * sizeof *pt->off);
    }
    pt->sl[pt->n] = sl;
    pt->off[pt->n++] = off;
}

static void push_pick(part *pt, uint32_t i)
{
    if (pt->npick == pt->cappick) {
        pt->cappick = pt->cappick ? pt->cappick * 2 : 256;
        pt->pick = pc_xrealloc(pt->pick, pt->cappick * sizeof *pt->pick);
    }
    pt->pick[pt->npick++] = i;
}

/* Walk every item: the part of each, in dst (one per sample, one per empty profile). */
static size_t assign_profiles(const pc_batch *b, uint32_t nparts, pc_split_fn part_of, void *arg,
                              uint32_t **dst_out)
{
    const pc_request *req = b->req;
    size_t n = 0, cap = 0;
    uint32_t *dst = NULL;
    for (size_t r = 0; r < req->n_resource_profiles; r++) {
        const pc_resource_profiles *rp = req->resource_profiles[r];
        size_t ns = rp && rp->scope_profiles ? rp->n_scope_profiles : 0;
        for (size_t s = 0; s < ns; s++) {
            const pc_scope_profiles *sp = rp->scope_profiles[s];
            size_t np = sp && sp->profiles ? sp->n_profiles : 0;
            for (size_t p = 0; p < np; p++) {
                size_t k = n_samples(sp->profiles[p]);
                size_t slots = k ? k : 1;
                if (n + slots > cap) {
                    cap = (n + slots) * 2;
                    dst = pc_xrealloc(dst, cap * sizeof *dst);
                }
                for (size_t i = 0; i < slots; i++) {
                    uint32_t d = part_of(arg, b, r, s, p, k ? i : PC_SPLIT_WHOLE);
                    dst[n++] = d < nparts ? d : 0;
                }
            }
        }
    }
    *dst_out = dst;
    return n;
}

static void split_profiles(const pc_batch *b, uint32_t nparts, const uint32_t *dst, pc_batch **out)
{
    const pc_request *req = b->req;
    part *pt = pc_xcalloc(nparts, sizeof *pt);
    uint32_t *touched = pc_xmalloc(nparts * sizeof *touched);
    size_t at = 0;
    for (size_t r = 0; r < req->n_resource_profiles; r++) {
        const pc_resource_profiles *rp = req->resource_profiles[r];
        size_t ns = rp && rp->scope_profiles ? rp->n_scope_profiles : 0;
        for (size_t s = 0; s < ns; s++) {
            const pc_scope_profiles *sp = rp->scope_profiles[s];
            size_t np = sp && sp->profiles ? sp->n_profiles : 0;
            for (size_t p = 0; p < np; p++) {
                size_t k = n_samples(sp->profiles[p]);
                if (!k) { /* a profile without samples goes whole */
                    push_slice(&pt[dst[at++]], (pc_merge_slice){.r = r, .s = s, .p = p},
                               (size_t)-1);
                    continue;
                }
                size_t nt = 0;
                for (size_t i = 0; i < k; i++) {
                    part *q = &pt[dst[at + i]];
                    if (!q->in_profile++) {
                        touched[nt++] = dst[at + i];
                        q->start = q->npick;
                    }
                    push_pick(q, (uint32_t)i);
                }
                at += k;
                for (size_t t = 0; t < nt; t++) {
                    part *q = &pt[touched[t]];
                    pc_merge_slice sl = {.r = r, .s = s, .p = p, .from = 0, .to = k};
                    if (q->in_profile == k) { /* all of it: a range, no picks */
                        q->npick = q->start;
                        push_slice(q, sl, (size_t)-1);
                    } else {
                        sl.n_pick = q->in_profile;
                        push_slice(q, sl, q->start);
                    }
                    q->in_profile = 0;
                }
            }
        }
    }
    for (uint32_t d = 0; d < nparts; d++) {
        part *q = &pt[d];
        if (q->n) {
            for (size_t i = 0; i < q->n; i++)
                if (q->off[i] != (size_t)-1) q->sl[i].pick = q->pick + q->off[i];
            pc_merger *m = pc_merger_new();
            pc_merger_add(m, b, q->sl, q->n);
            out[d] = pc_merger_finish(m);
            copy_meta(b, out[d]);
        }
        free(q->sl);
        free(q->off);
        free(q->pick);
    }
    free(touched);
    free(pt);
}

/* ---- traces ---- */

typedef Opentelemetry__Proto__Trace__V1__ResourceSpans rspans;
typedef Opentelemetry__Proto__Trace__V1__ScopeSpans sspans;

static size_t assign_spans(const pc_batch *b, uint32_t nparts, pc_split_fn part_of, void *arg,
                           uint32_t **dst_out)
{
    const pc_traces_request *req = (const pc_traces_request *)b->msg;
    size_t n = 0, cap = 0;
    uint32_t *dst = NULL;
    for (size_t r = 0; r < req->n_resource_spans; r++) {
        const rspans *rs = req->resource_spans[r];
        size_t ns = rs && rs->scope_spans ? rs->n_scope_spans : 0;
        for (size_t s = 0; s < ns; s++) {
            const sspans *ss = rs->scope_spans[s];
            size_t k = ss && ss->spans ? ss->n_spans : 0;
            if (n + k > cap) {
                cap = (n + k) * 2;
                dst = pc_xrealloc(dst, cap * sizeof *dst);
            }
            for (size_t i = 0; i < k; i++) {
                uint32_t d = part_of(arg, b, r, s, 0, i);
                dst[n++] = d < nparts ? d : 0;
            }
        }
    }
    *dst_out = dst;
    return n;
}

/* One part: shallow copies of the resources and scopes around the chosen spans (pointers into
 * b), packed, then decoded into the part's own arena. */
static pc_batch *spans_part(const pc_batch *b, uint32_t d, const uint32_t *dst)
{
    const pc_traces_request *req = (const pc_traces_request *)b->msg;
    pc_traces_request out;
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__init(&out);
    out.resource_spans = pc_xcalloc(req->n_resource_spans, sizeof *out.resource_spans);
    size_t at = 0;
    for (size_t r = 0; r < req->n_resource_spans; r++) {
        const rspans *rs = req->resource_spans[r];
        size_t ns = rs && rs->scope_spans ? rs->n_scope_spans : 0;
        rspans *ors = NULL;
        for (size_t s = 0; s < ns; s++) {
            const sspans *ss = rs->scope_spans[s];
            size_t k = ss && ss->spans ? ss->n_spans : 0;
            sspans *oss = NULL;
            for (size_t i = 0; i < k; i++, at++) {
                if (dst[at] != d) continue;
                if (!ors) {
                    ors = pc_xmalloc(sizeof *ors);
                    *ors = *rs;
                    ors->scope_spans = pc_xcalloc(ns, sizeof *ors->scope_spans);
                    ors->n_scope_spans = 0;
                    out.resource_spans[out.n_resource_spans++] = ors;
                }
                if (!oss) {
                    oss = pc_xmalloc(sizeof *oss);
                    *oss = *ss;
                    oss->spans = pc_xcalloc(k, sizeof *oss->spans);
                    oss->n_spans = 0;
                    ors->scope_spans[ors->n_scope_spans++] = oss;
                }
                oss->spans[oss->n_spans++] = ss->spans[i];
            }
        }
    }
    pc_buf buf = {0};
    size_t sz = protobuf_c_message_get_packed_size(&out.base);
    pc_buf_reserve(&buf, sz + 1);
    buf.len = protobuf_c_message_pack(&out.base, buf.data);
    for (size_t r = 0; r < out.n_resource_spans; r++) {
        rspans *ors = out.resource_spans[r];
        for (size_t s = 0; s < ors->n_scope_spans; s++) {
            free(ors->scope_spans[s]->spans);
            free(ors->scope_spans[s]);
        }
        free(ors->scope_spans);
        free(ors);
    }
    free(out.resource_spans);
    pc_batch *part = NULL;
    pc_error e = {0};
    if (pc_batch_decode(PC_SIGNAL_TRACES, buf.data, buf.len, false, NULL, &part, &e) < 0) {
        /* cannot happen: the spans came from a decoded request; never crash on it anyway */
        PC_ERROR(NULL, "splitting a traces request failed (%s)", e.msg);
        part = NULL;
    }
    pc_buf_free(&buf);
    if (part) copy_meta(b, part);
    return part;
}

void pc_batch_split(const pc_batch *b, uint32_t nparts, pc_split_fn part_of, void *arg,
                    pc_batch **out)
{
    for (uint32_t d = 0; d < nparts; d++)
        out[d] = NULL;
    if (!nparts) return;
    uint32_t *dst = NULL;
    size_t n;
    if (b->signal == PC_SIGNAL_PROFILES)
        n = assign_profiles(b, nparts, part_of, arg, &dst);
    else if (b->signal == PC_SIGNAL_TRACES)
        n = assign_spans(b, nparts, part_of, arg, &dst);
    else
        n = 0;
    bool one = true;
    for (size_t i = 1; i < n && one; i++)
        one = dst[i] == dst[0];
    if (n && one) {
        out[dst[0]] = pc_batch_ref((pc_batch *)b);
    } else if (n && b->signal == PC_SIGNAL_PROFILES) {
        split_profiles(b, nparts, dst, out);
    } else if (n) {
        bool *used = pc_xcalloc(nparts, sizeof *used);
        for (size_t i = 0; i < n; i++)
            used[dst[i]] = true;
        for (uint32_t d = 0; d < nparts; d++)
            if (used[d]) out[d] = spans_part(b, d, dst);
        free(used);
    }
    free(dst);
}
