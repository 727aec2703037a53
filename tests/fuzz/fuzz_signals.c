/* Traces, metrics and logs decoders (pc_batch_decode, src/pdata/signal.c and json.c). The first
 * input byte picks the decoder: bit 0 protobuf (0) or OTLP JSON (1), (byte >> 1) % 3 the signal
 * (traces, metrics, logs); the rest is the request body. Invariants for a decoded batch:
 * - its protobuf encoding decodes again and re-encodes to the same bytes, with the same counts;
 * - its JSON encoding decodes again (refused only for a hex id of the wrong length, which
 *   protobuf carries but OTLP JSON cannot), and that decodes to the same JSON (a fixed point);
 * - every resource slot is reachable;
 * - pc_batch_concat of the batch with itself holds twice the items and resources;
 * - pc_batch_make_writable of a shared batch is an independent copy of the same message. */
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"
#include "pdata/pdata.h"

#define SHOW(buf) (int)((buf).len > 2000 ? 2000 : (buf).len), (const char *)(buf).data

FUZZ_INIT_QUIET_LOGS()

static void check_proto(pc_signal sig, const pc_batch *b, const pc_buf *p1)
{
    pc_error err = {0};
    pc_batch *b2 = NULL;
    FUZZ_ASSERT(pc_batch_decode(sig, p1->data ? p1->data : (const uint8_t *)"", p1->len, false,
                                NULL, &b2, &err) == 0,
                "re-encoded %s protobuf (%zu bytes) does not decode: %s", pc_signal_infos[sig].name,
                p1->len, err.msg);
    FUZZ_ASSERT(b2 && b2->signal == sig && b2->msg, "decode succeeded without a message");
    FUZZ_ASSERT(pc_batch_items(b2) == pc_batch_items(b) &&
                    pc_batch_n_resources(b2) == pc_batch_n_resources(b),
                "protobuf round trip changed the counts (%zu/%zu items, %zu/%zu resources)",
                pc_batch_items(b), pc_batch_items(b2), pc_batch_n_resources(b),
                pc_batch_n_resources(b2));
    pc_buf p2 = {0};
    pc_batch_encode_proto(b2, &p2);
    FUZZ_ASSERT(p1->len == p2.len && memcmp(p1->data, p2.data, p1->len) == 0,
                "protobuf re-encoding differs (%zu vs %zu bytes)", p1->len, p2.len);
    pc_buf_free(&p2);
    pc_batch_unref(b2);
}

static void check_json(pc_signal sig, const pc_batch *b)
{
    pc_error err = {0};
    pc_buf j1 = {0};
    pc_batch_encode_json(b, &j1);
    FUZZ_ASSERT(j1.len >= 2 && j1.data[0] == '{' && j1.data[j1.len - 1] == '}' &&
                    j1.data[j1.len] == 0,
                "JSON encoding is not a NUL-terminated object: %.*s", SHOW(j1));
    pc_batch *b2 = NULL;
    if (pc_batch_decode(sig, j1.data, j1.len, true, NULL, &b2, &err) != 0) {
        /* protobuf carries ids of any length; OTLP JSON only the exact hex length */
        FUZZ_ASSERT(b2 == NULL && strstr(err.msg, "Id: invalid length:"),
                    "JSON of decoded %s does not decode: %s\nJSON: %.*s", pc_signal_infos[sig].name,
                    err.msg, SHOW(j1));
        pc_buf_free(&j1);
        return;
    }
    FUZZ_ASSERT(pc_batch_items(b2) == pc_batch_items(b) &&
                    pc_batch_n_resources(b2) == pc_batch_n_resources(b),
                "JSON round trip changed the counts (%zu/%zu items)", pc_batch_items(b),
                pc_batch_items(b2));
    pc_buf j2 = {0};
    pc_batch_encode_json(b2, &j2);
    FUZZ_ASSERT(j1.len == j2.len && memcmp(j1.data, j2.data, j1.len) == 0,
                "JSON is not a fixed point:\nfirst:  %.*s\nsecond: %.*s", SHOW(j1), SHOW(j2));
    pc_buf_free(&j2);
    pc_batch_unref(b2);
    pc_buf_free(&j1);
}

static void check_concat(pc_signal sig, pc_batch *b, const pc_buf *p1)
{
    pc_batch *bs[2] = {b, b};
    pc_batch *c = pc_batch_concat(sig, bs, 2);
    FUZZ_ASSERT(c && c != b && c->signal == sig && c->msg && atomic_load(&c->refs) == 1,
                "concat did not return a new batch of the signal");
    FUZZ_ASSERT(pc_batch_items(c) == 2 * pc_batch_items(b) &&
                    pc_batch_n_resources(c) == 2 * pc_batch_n_resources(b),
                "concat of a batch with itself: %zu items, %zu resources (one: %zu, %zu)",
                pc_batch_items(c), pc_batch_n_resources(c), pc_batch_items(b),
                pc_batch_n_resources(b));
    pc_buf pc = {0};
    pc_batch_encode_proto(c, &pc);
    FUZZ_ASSERT(pc.len == 2 * p1->len, "concat encodes to %zu bytes, not twice %zu", pc.len,
                p1->len);
    pc_buf_free(&pc);
    pc_batch_unref(c);
    FUZZ_ASSERT(atomic_load(&b->refs) == 1, "concat kept a reference to its input");
}

static void check_writable(pc_signal sig, pc_batch *b, const pc_buf *p1)
{
    pc_batch_set_meta(b, "x-scope-orgid", "fuzz");
    pc_batch *shared = pc_batch_ref(b);
    pc_batch_make_writable(&shared);
    FUZZ_ASSERT(shared != b && atomic_load(&b->refs) == 1 && atomic_load(&shared->refs) == 1,
                "make_writable did not copy a shared batch");
    FUZZ_ASSERT(shared->signal == sig && shared->msg && shared->msg != b->msg && !shared->req,
                "make_writable changed the signal or shares the message");
    const char *m = pc_batch_get_meta(shared, "x-scope-orgid");
    FUZZ_ASSERT(m && strcmp(m, "fuzz") == 0, "make_writable lost the metadata");
    pc_buf pw = {0};
    pc_batch_encode_proto(shared, &pw);
    FUZZ_ASSERT(pw.len == p1->len && memcmp(pw.data, p1->data, p1->len) == 0,
                "the writable copy differs (%zu vs %zu bytes)", pw.len, p1->len);
    pc_buf_free(&pw);
    /* an edit of the copy stays in the copy */
    size_t n = pc_batch_n_resources(shared);
    if (n) {
        pc_resource **slot = pc_batch_resource_slot(shared, 0);
        pc_resource *orig = *pc_batch_resource_slot(b, 0);
        *slot = NULL;
        FUZZ_ASSERT(*pc_batch_resource_slot(b, 0) == orig, "the copy shares its resources");
    }
    pc_batch_unref(shared);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    bool json = data[0] & 1;
    pc_signal sig = (pc_signal)(PC_SIGNAL_TRACES + (data[0] >> 1) % 3);
    data++;
    size--;

    pc_batch *b = NULL;
    pc_error err = {0};
    if (pc_batch_decode(sig, data, size, json, NULL, &b, &err) != 0) {
        FUZZ_ASSERT(b == NULL, "failed decode returned a batch");
        FUZZ_ASSERT(err.msg[0], "failed decode without a message");
        return 0;
    }
    FUZZ_ASSERT(b && b->signal == sig && b->msg && !b->req && atomic_load(&b->refs) == 1,
                "decode succeeded without a %s message", pc_signal_infos[sig].name);
    FUZZ_ASSERT(b->msg->descriptor == pc_signal_infos[sig].request, "wrong message type");

    /* every resource slot can be read */
    size_t nres = pc_batch_n_resources(b), attrs = 0;
    for (size_t i = 0; i < nres; i++) {
        pc_resource **slot = pc_batch_resource_slot(b, i);
        FUZZ_ASSERT(slot != NULL, "no slot for resource %zu of %zu", i, nres);
        if (*slot) attrs += (*slot)->n_attributes;
    }
    (void)attrs;

    pc_buf p1 = {0};
    pc_batch_encode_proto(b, &p1);
    check_proto(sig, b, &p1);
    check_json(sig, b);
    check_concat(sig, b, &p1);
    check_writable(sig, b, &p1);
    pc_buf_free(&p1);
    pc_batch_unref(b);
    return 0;
}
