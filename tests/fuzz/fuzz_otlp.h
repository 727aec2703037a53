/* The OTLP batch invariants every decoder target checks (fuzz_otlp_proto, fuzz_otlp_json,
 * fuzz_gzip, fuzz_pprof). */
#ifndef PC_FUZZ_OTLP_H
#define PC_FUZZ_OTLP_H

#include <stdbool.h>
#include <string.h>

#include "fuzz_common.h"
#include "pdata/pdata.h"

/* Given a freshly decoded batch (not consumed):
 * - encoding to protobuf and JSON never fails, and the protobuf decodes again;
 * - validation either refuses the batch or leaves data that
 *   - can be copied for writing (pc_batch_make_writable, used when pipelines share a batch);
 *   - survives JSON: the JSON decodes, validates with nothing rejected, and re-encodes to the very
 *     same JSON (the JSON form is a fixed point);
 *   - survives protobuf: the protobuf decodes, validates with nothing rejected, and re-encodes to
 *     the same bytes.
 * must_be_valid: the batch comes from a translator, so validation must accept all of it. */
static inline void fuzz_check_batch(pc_batch *b, bool must_be_valid)
{
    pc_error err = {0};
    pc_batch *b2 = NULL;

    pc_buf p0 = {0};
    pc_batch_encode_proto(b, &p0);
    FUZZ_ASSERT(pc_batch_decode_proto(p0.data, p0.len, &b2, &err) == 0,
                "re-encoded protobuf (%zu bytes) does not decode: %s", p0.len, err.msg);
    pc_batch_unref(b2);
    pc_buf_free(&p0);

    int64_t rejected = -1;
    int rc = pc_batch_validate(b, &rejected, &err);
    if (must_be_valid)
        FUZZ_ASSERT(rc == 0 && rejected == 0,
                    "translated batch is invalid (rc %d, %lld rejected): %s", rc,
                    (long long)rejected, err.msg);
    if (rc != 0) {
        /* refused data is still encodable (debug output, error reports) */
        pc_buf j = {0};
        pc_batch_encode_json(b, &j);
        pc_buf_free(&j);
        return;
    }

    /* copy-on-write, as a processor of one of two pipelines sharing the batch does */
    pc_batch *shared = pc_batch_ref(b);
    pc_batch_make_writable(&shared);
    FUZZ_ASSERT(shared != b && atomic_load(&b->refs) == 1, "make_writable did not copy");
    pc_batch_unref(shared);

    /* JSON: decode, validate, fixed point */
    pc_buf j1 = {0}, j2 = {0};
    pc_batch_encode_json(b, &j1);
    b2 = NULL;
    FUZZ_ASSERT(pc_batch_decode_json((const char *)j1.data, j1.len, &b2, &err) == 0,
                "JSON of validated data does not decode: %s\nJSON: %.*s", err.msg,
                (int)(j1.len > 4000 ? 4000 : j1.len), (const char *)j1.data);
    rejected = -1;
    rc = pc_batch_validate(b2, &rejected, &err);
    FUZZ_ASSERT(rc == 0 && rejected == 0,
                "validated data no longer valid after JSON round trip (rc %d, %lld rejected): %s",
                rc, (long long)rejected, err.msg);
    pc_batch_encode_json(b2, &j2);
    FUZZ_ASSERT(j1.len == j2.len && memcmp(j1.data, j2.data, j1.len) == 0,
                "JSON is not a fixed point:\nfirst:  %.*s\nsecond: %.*s",
                (int)(j1.len > 4000 ? 4000 : j1.len), (const char *)j1.data,
                (int)(j2.len > 4000 ? 4000 : j2.len), (const char *)j2.data);
    pc_batch_unref(b2);
    pc_buf_free(&j1);
    pc_buf_free(&j2);

    /* protobuf: decode, validate, same bytes */
    pc_buf p1 = {0}, p2 = {0};
    pc_batch_encode_proto(b, &p1);
    b2 = NULL;
    FUZZ_ASSERT(pc_batch_decode_proto(p1.data, p1.len, &b2, &err) == 0,
                "protobuf of validated data does not decode: %s", err.msg);
    rejected = -1;
    rc = pc_batch_validate(b2, &rejected, &err);
    FUZZ_ASSERT(rc == 0 && rejected == 0,
                "validated data no longer valid after protobuf round trip (rc %d): %s", rc,
                err.msg);
    pc_batch_encode_proto(b2, &p2);
    FUZZ_ASSERT(p1.len == p2.len && memcmp(p1.data, p2.data, p1.len) == 0,
                "protobuf re-encoding differs (%zu vs %zu bytes)", p1.len, p2.len);
    pc_batch_unref(b2);
    pc_buf_free(&p1);
    pc_buf_free(&p2);
    (void)pc_batch_counts(b);
}

#endif
