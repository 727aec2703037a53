/* The oracle of the wire merge (src/pdata/wire_merge.h), for test_wire_merge and
 * fuzz_wire_merge: the merged bytes, decoded by the normal decoder, must hold the same resolved
 * content as the model merge of the decoded inputs (pc_merger, the pc_dict_import path): every
 * sample resolved as text (resolved.h), compared as sorted multisets (the model merge groups
 * equal resources, the wire merge does not). Its
 * dictionary must have no duplicate entry, and pc_wire_check_profiles must accept it with the
 * summed counts. */
#ifndef PC_WMERGE_ORACLE_H
#define PC_WMERGE_ORACLE_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "pdata/merge.h"
#include "pdata/pdata.h"
#include "pdata/proto_scan.h"
#include "pdata/wire_check.h"
#include "pdata/wire_merge.h"

#include "resolved.h"

/* Duplicate entries in one table of packed messages (or strings): 1 with its name in why. */
static int wm_dup_table(ProtobufCMessage *const *m, const char *const *s, size_t n,
                        const char *name, char *why, size_t wn)
{
    rs_lines l = {0};
    pc_buf b = {0};
    for (size_t i = 0; i < n; i++) {
        b.len = 0;
        if (s) {
            pc_buf_printf(&b, "%s", pc_nz(s[i]));
        } else {
            size_t len = protobuf_c_message_get_packed_size(m[i]);
            uint8_t *p = malloc(len ? len : 1);
            protobuf_c_message_pack(m[i], p);
            rs_hex(&b, p, len);
            free(p);
        }
        rs_push(&l, &b);
    }
    int dup = 0;
    rs_sort(&l);
    for (size_t i = 1; i < l.n && !dup; i++)
        if (!strcmp(l.v[i - 1], l.v[i])) dup = 1;
    if (dup) snprintf(why, wn, "duplicate entries in the merged %s table", name);
    rs_lines_free(&l);
    pc_buf_free(&b);
    return dup;
}

static int wm_dups(const pc_dictionary *d, char *why, size_t wn)
{
    if (!d) return 0;
#define WM_T(f, name) wm_dup_table((ProtobufCMessage *const *)d->f, NULL, d->n_##f, name, why, wn)
    return wm_dup_table(NULL, (const char *const *)d->string_table, d->n_string_table, "string",
                        why, wn) ||
           WM_T(mapping_table, "mapping") || WM_T(location_table, "location") ||
           WM_T(function_table, "function") || WM_T(link_table, "link") ||
           WM_T(attribute_table, "attribute") || WM_T(stack_table, "stack");
#undef WM_T
}

/* The model merge's resolved lines, sorted. */
static void wm_model_lines(const uint8_t *const *data, const size_t *len, size_t n, rs_lines *out)
{
    pc_merger *m = pc_merger_new();
    for (size_t i = 0; i < n; i++) {
        pc_batch *b = NULL;
        pc_error e = {0};
        if (pc_batch_decode_proto(data[i], len[i], &b, &e) < 0) {
            fprintf(stderr, "oracle: input %zu does not decode: %s\n", i, e.msg);
            abort();
        }
        pc_merger_add(m, b, NULL, 0);
        pc_batch_unref(b);
    }
    pc_batch *mb = pc_merger_finish(m);
    rs_resolve(mb, out);
    pc_batch_unref(mb);
    rs_sort(out);
}

/* The merged bytes against the oracle: 0 the same; 1 not (why says how). dups: also no two
 * entries of a table equal (for inputs written as encoders write them: the merger compares
 * bytes, so two encodings of one entry, e.g. its fields in another order, stay apart). */
static int wm_check_merged(const uint8_t *const *data, const size_t *len, size_t n,
                           const pc_buf *merged, bool dups, char *why, size_t wn)
{
    pc_wire_counts wc, in;
    pc_error e = {0};
    size_t samples = 0;
    for (size_t i = 0; i < n; i++) {
        if (pc_wire_check_profiles(data[i], len[i], PC_PROTO_MAX_DEPTH, &in, &e) < 0) abort();
        samples += in.samples;
    }
    if (pc_wire_check_profiles(merged->data, merged->len, PC_PROTO_MAX_DEPTH, &wc, &e) < 0 ||
        wc.rejected)
        return snprintf(why, wn, "wire_check refuses the merge: %s", e.msg), 1;
    if (wc.samples != samples)
        return snprintf(why, wn, "%zu samples merged, %zu sent", wc.samples, samples), 1;
    pc_batch *b = NULL;
    if (pc_batch_decode_proto(merged->len ? merged->data : (const uint8_t *)"", merged->len, &b,
                              &e) < 0)
        return snprintf(why, wn, "the merge does not decode: %s", e.msg), 1;
    rs_lines got = {0}, want = {0};
    rs_resolve(b, &got);
    rs_sort(&got);
    wm_model_lines(data, len, n, &want);
    int rc = dups ? wm_dups(pc_batch_req(b)->dictionary, why, wn) : 0;
    for (size_t i = 0; !rc && i < got.n && i < want.n; i++) {
        if (!strcmp(got.v[i], want.v[i])) continue;
        size_t at = 0; /* shown from a little before the first difference */
        while (got.v[i][at] && got.v[i][at] == want.v[i][at])
            at++;
        at = at > 200 ? at - 200 : 0;
        rc = snprintf(why, wn, "line %zu, from byte %zu:\n got  %.900s\n want %.900s", i, at,
                      got.v[i] + at, want.v[i] + at) > 0;
    }
    if (!rc && got.n != want.n)
        rc = snprintf(why, wn, "%zu lines merged, %zu in the model merge", got.n, want.n) > 0;
    rs_lines_free(&got);
    rs_lines_free(&want);
    pc_batch_unref(b);
    return rc;
}

/* Wire-merge data[0..n) and check it: 0 the same content, 1 not (why), 2 "cannot". */
static int wm_check(const uint8_t *const *data, const size_t *len, size_t n, bool dups, char *why,
                    size_t wn)
{
    pc_buf out = {0};
    int rc = pc_wire_merge(data, len, n, &out);
    if (rc == PC_ENOTSUP) {
        pc_buf_free(&out);
        return 2;
    }
    rc = rc ? (snprintf(why, wn, "pc_wire_merge: %d", rc), 1)
            : wm_check_merged(data, len, n, &out, dups, why, wn);
    pc_buf_free(&out);
    return rc;
}

#endif
