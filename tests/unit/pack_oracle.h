/* pc_proto_pack (src/pdata/proto_pack.h) against its oracle, protobuf-c's own
 * get_packed_size + pack, for test_proto_pack and fuzz_proto_pack: the same bytes, to the byte.
 * pc_proto_pack appends, so it is run after a prefix that must stay untouched. */
#ifndef PC_PACK_ORACLE_H
#define PC_PACK_ORACLE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <protobuf-c/protobuf-c.h>

#include "base/buf.h"
#include "pdata/proto_pack.h"
#include "pdata/pdata.h"
#include "pdata/proto_scan.h"

/* 0 when both encoders write the same bytes; else -1 with why set. */
static int pack_compare(const ProtobufCMessage *m, char *why, size_t whylen)
{
    size_t want = protobuf_c_message_get_packed_size(m);
    uint8_t *ref = malloc(want + 1);
    if (!ref) abort();
    size_t got_ref = protobuf_c_message_pack(m, ref);
    static const char prefix[] = "pre";
    pc_buf out = {0};
    pc_buf_append(&out, prefix, 3);
    size_t n = pc_proto_pack(m, &out);
    int rc = 0;
    if (got_ref != want) {
        snprintf(why, whylen, "protobuf-c sized %zu, packed %zu", want, got_ref);
        rc = -1;
    } else if (n != want || out.len != 3 + n || memcmp(out.data, prefix, 3) != 0) {
        snprintf(why, whylen, "%s: pc_proto_pack wrote %zu bytes (buffer %zu), protobuf-c %zu",
                 m->descriptor->name, n, out.len, want);
        rc = -1;
    } else if (memcmp(out.data + 3, ref, n) != 0) {
        size_t i = 0;
        while (out.data[3 + i] == ref[i])
            i++;
        snprintf(why, whylen, "%s: byte %zu of %zu differs: 0x%02x, protobuf-c 0x%02x",
                 m->descriptor->name, i, n, out.data[3 + i], ref[i]);
        rc = -1;
    }
    free(ref);
    pc_buf_free(&out);
    return rc;
}

/* Decodes data as desc with protobuf-c (when the pre-unpack scan takes it, which bounds the
 * nesting unpack would recurse into) and compares the two encoders on it: 1 when it did not
 * decode, 0 when the bytes agree, -1 (why set) when they differ. */
static int pack_compare_input(const ProtobufCMessageDescriptor *desc, const uint8_t *data,
                              size_t len, char *why, size_t whylen)
{
    pc_proto_scan scan;
    if (pc_proto_scan_message(desc, data, len, PC_PROTO_MAX_DEPTH, &scan, NULL) < 0) return 1;
    ProtobufCMessage *m = protobuf_c_message_unpack(desc, NULL, len, data);
    if (!m) return 1;
    int rc = pack_compare(m, why, whylen);
    protobuf_c_message_free_unpacked(m, NULL);
    return rc;
}

#endif
