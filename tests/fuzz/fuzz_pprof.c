/* pprof -> OTLP translation (raw or gzip input), then back: every produced pprof is imported
 * again. Invariants: a translated batch always validates (nothing rejected) and survives the
 * protobuf/JSON round trips of fuzz_otlp.h; appending the same payload to a batch works whenever
 * translating it alone did; every pprof the exporter side produces is importable. */
#include <stdint.h>
#include <string.h>

#include "fuzz_otlp.h"
#include "formats/pprof.h"

static const pc_format_attr res_attrs[] = {{"service.name", "fuzz"}, {"host.name", "h"}};
static const pc_format_opts in_opts = {
    .max_bytes = 1u << 20,
    .attrs = res_attrs,
    .n_attrs = 2,
    .scope_name = "fuzz",
    .scope_version = "1",
};

FUZZ_INIT_QUIET_LOGS()

typedef struct back_ctx {
    size_t calls;
    int depth;
} back_ctx;

static int on_pprof(const pc_pprof_out *o, void *ud)
{
    back_ctx *bc = ud;
    bc->calls++;
    FUZZ_ASSERT(o->n_profiles >= 1 && o->profiles && o->rp && o->sp, "empty pprof output");
    FUZZ_ASSERT(o->data && o->len > 0, "no pprof bytes");
    pc_batch *b = NULL;
    pc_error err = {0};
    pc_format_opts big = {0}; /* default cap: our own output may exceed the fuzz 1 MiB */
    FUZZ_ASSERT(pc_pprof_decode(o->data, o->len, &big, &b, &err) == 0,
                "exported pprof (%zu gzip bytes) does not import again: %s", o->len, err.msg);
    int64_t rejected = -1;
    FUZZ_ASSERT(pc_batch_validate(b, &rejected, &err) == 0 && rejected == 0,
                "re-imported pprof is invalid: %s", err.msg);
    if (bc->depth == 0) { /* and once more around */
        back_ctx inner = {.depth = 1};
        pc_batch_to_pprof(b, on_pprof, &inner);
    }
    pc_batch_unref(b);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pc_batch *b = NULL;
    pc_error err = {0};
    if (pc_pprof_decode(data, size, &in_opts, &b, &err) != 0) {
        FUZZ_ASSERT(b == NULL, "failed translation returned a batch");
        FUZZ_ASSERT(err.msg[0], "failed translation without a message");
        return 0;
    }
    FUZZ_ASSERT(b, "success without a batch");

    /* append the same payload to the batch: extends the dictionary */
    FUZZ_ASSERT(pc_pprof_decode(data, size, &in_opts, &b, &err) == 0,
                "second translation into an existing batch failed: %s", err.msg);
    pc_counts c = pc_batch_counts(b);
    FUZZ_ASSERT(c.resources == 2, "%zu resources after two translations", c.resources);

    back_ctx bc = {0};
    FUZZ_ASSERT(pc_batch_to_pprof(b, on_pprof, &bc) == 0, "pc_batch_to_pprof failed");
    fuzz_check_batch(b, true);
    pc_batch_unref(b);
    return 0;
}
