/* The two paths to a verdict on an OTLP profiles request, for test_wire_check and
 * fuzz_wire_check: the wire walk (src/pdata/wire_check.h) and the decoded path it must agree
 * with, as pc_batch_decode runs it (the pre-unpack scan, protobuf-c's unpack) then
 * pc_batch_validate. The decoded path keeps its own error codes here: pc_batch_decode folds
 * them all into PC_EINVAL. */
#ifndef PC_WIRE_ORACLE_H
#define PC_WIRE_ORACLE_H

#include <stdio.h>
#include <string.h>

#include "pdata/pdata.h"
#include "pdata/proto_scan.h"
#include "pdata/wire_check.h"

static int wire_oracle(const uint8_t *data, size_t len, pc_wire_counts *out)
{
    memset(out, 0, sizeof *out);
    pc_proto_scan scan;
    pc_error e = {0};
    int rc = pc_proto_scan_message(PC_REQUEST_DESC, data, len, PC_PROTO_MAX_DEPTH, &scan, &e);
    if (rc < 0) return rc;
    out->cost = scan.cost;
    pc_arena *a = pc_arena_new(scan.cost + 64);
    ProtobufCMessage *m =
        protobuf_c_message_unpack(PC_REQUEST_DESC, pc_arena_allocator(a), len, data);
    if (!m) {
        pc_arena_free(a);
        return PC_EPROTO;
    }
    pc_batch *b = pc_batch_wrap(a, PC_SIGNAL_PROFILES);
    b->req = (pc_request *)m;
    pc_counts c = pc_batch_counts(b);
    out->profiles = c.profiles;
    out->samples = c.samples;
    rc = pc_batch_validate(b, &out->rejected, &e);
    out->kept_samples = pc_batch_counts(b).samples;
    pc_batch_unref(b);
    return rc;
}

/* 0 when both paths reach the same verdict (and, on acceptance, the same counts); else 1 with
 * the difference in why. The cost too: the decode budget's estimate, the scan's. *verdict gets the
 * walk's. */
static int wire_compare(const uint8_t *data, size_t len, int *verdict, char *why, size_t n)
{
    pc_wire_counts w, o;
    pc_error e = {0};
    int rw = pc_wire_check_profiles(data, len, PC_PROTO_MAX_DEPTH, &w, &e);
    int ro = wire_oracle(data, len, &o);
    if (verdict) *verdict = rw;
    if (rw != ro) {
        snprintf(why, n, "walk %s (%s), decoded path %s", pc_err_name(rw), e.msg, pc_err_name(ro));
        return 1;
    }
    if (rw == 0 &&
        (w.profiles != o.profiles || w.samples != o.samples || w.kept_samples != o.kept_samples ||
         w.rejected != o.rejected || w.cost != o.cost)) {
        snprintf(why, n,
                 "counts: walk %zu/%zu/%zu/%lld cost %zu, decoded %zu/%zu/%zu/%lld cost %zu",
                 w.profiles, w.samples, w.kept_samples, (long long)w.rejected, w.cost, o.profiles,
                 o.samples, o.kept_samples, (long long)o.rejected, o.cost);
        return 1;
    }
    return 0;
}

#endif
