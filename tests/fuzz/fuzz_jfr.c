/* The JFR decoder (formats/jfr.c on formats/jfr_reader.c). Input: one options byte; when its bit 0
 * is set, a 2-byte little-endian length and that many bytes of LabelsSnapshot protobuf; then the
 * recording. Options bit 1: small limits (64 frames, 2 chunks, 512 metadata strings, 8192 elements,
 * 4096 pool entries); bit 2: a decode budget of 4 x the input (+64 KiB). Invariants: a refusal is
 * PC_EBADMSG or PC_E2BIG with a message and no batch (PC_E2BIG only from a limit or the budget); a
 * decoded batch validates with nothing rejected and survives the round trips of fuzz_otlp.h; every
 * pprof it gives imports again; the budget gets every byte back. */
#include <stdint.h>
#include <string.h>

#include "fuzz_otlp.h"
#include "formats/pprof.h"
#include "formats/jfr.h"

FUZZ_INIT_QUIET_LOGS()

static int on_pprof(const pc_pprof_out *o, void *ud)
{
    (void)ud;
    pc_batch *b = NULL;
    pc_error e = {0};
    pc_format_opts big = {0};
    FUZZ_ASSERT(pc_pprof_decode(o->data, o->len, &big, &b, &e) == 0,
                "a pprof made from a JFR recording does not import: %s", e.msg);
    pc_batch_unref(b);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    uint8_t opt = data[0];
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    static const pc_format_attr attrs[] = {{"service.name", "fuzz"}};
    pc_jfr_stats st;
    pc_format_opts o = {.sample_rate = 100,
                        .time_ns = 1700000000000000000LL,
                        .duration_ns = 10000000000LL,
                        .attrs = attrs,
                        .n_attrs = 1,
                        .scope_name = "fuzz",
                        .max_bytes = 1 << 20, /* a gzip recording inflates up to 1 MiB */
                        .jfr_stats = &st};
    if (opt & 1) {
        if (n < 2) return 0;
        size_t ll = (size_t)p[0] | (size_t)p[1] << 8;
        p += 2, n -= 2;
        if (ll > n) ll = n;
        o.extra = p;
        o.extra_len = ll;
        p += ll, n -= ll;
    }
    if (opt & 2) {
        o.jfr.max_stack_depth = 64;
        o.jfr.max_chunks = 2;
        o.jfr.max_metadata_strings = 512;
        o.jfr.max_metadata_elements = 8192;
        o.jfr.max_pool_entries = 4096;
    }
    pc_budget budget;
    if (opt & 4) {
        pc_budget_init(&budget, 65536 + 4 * size);
        o.budget = &budget;
    }
    pc_batch *b = NULL;
    pc_error e = {0};
    int rc = pc_jfr_decode(p, n, &o, &b, &e);
    if (rc) {
        FUZZ_ASSERT(rc == PC_EBADMSG || rc == PC_E2BIG, "unexpected code %d", rc);
        FUZZ_ASSERT(b == NULL, "a refusal returned a batch");
        FUZZ_ASSERT(e.msg[0], "a refusal without a message");
        FUZZ_ASSERT(rc == PC_EBADMSG || strstr(e.msg, "limit jfr.") || strstr(e.msg, "budget") ||
                        strstr(e.msg, "decompressed size"),
                    "PC_E2BIG neither from a limit nor from the budget: %s", e.msg);
    } else {
        FUZZ_ASSERT(b != NULL, "success without a batch");
        pc_batch_end_budget(b);
        FUZZ_ASSERT(pc_batch_to_pprof(b, on_pprof, NULL) == 0, "pc_batch_to_pprof failed");
        fuzz_check_batch(b, true);
        pc_batch_unref(b);
    }
    if (o.budget) {
        FUZZ_ASSERT(budget.used == 0, "%zu bytes still charged to the budget", budget.used);
        pc_budget_release(&budget);
    }
    return 0;
}
