/* Pyroscope's legacy formats (formats/legacy.h). The first byte picks the decoder
 * (% 3: trie, tree, speedscope) and the options ((/ 3) % 4: app.cpu at 100 Hz, app at 0 Hz,
 * app.alloc_objects with units=bytes, app.wall at 7 Hz); the rest is the body. Decoded under a 64
 * MiB budget:
 *   - success: the batch validates with nothing rejected, every string is UTF-8, every value is
 *     positive, the decode's count covered what it took (no budget miss), and every byte charged
 *     is given back once the batch leaves the budget;
 *   - failure: PC_EBADMSG (or PC_EINVAL: an unknown type suffix) with a message, or the budget's
 * refusal (its state); nothing left charged and no batch. */
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"
#include "base/budget.h"
#include "base/utf8.h"
#include "pdata/pdata.h"
#include "formats/legacy.h"

FUZZ_INIT_QUIET_LOGS()

static void check_batch(pc_batch *b)
{
    int64_t rejected = 0;
    pc_error e = {0};
    FUZZ_ASSERT(pc_batch_validate(b, &rejected, &e) == 0 && rejected == 0,
                "decoded batch does not validate: %s", e.msg);
    const pc_dictionary *d = b->req->dictionary;
    for (size_t i = 0; i < d->n_string_table; i++)
        FUZZ_ASSERT(pc_utf8_valid(d->string_table[i], strlen(d->string_table[i])),
                    "string %zu is not UTF-8", i);
    for (size_t r = 0; r < b->req->n_resource_profiles; r++) {
        const pc_resource_profiles *rp = b->req->resource_profiles[r];
        for (size_t s = 0; s < rp->n_scope_profiles; s++)
            for (size_t k = 0; k < rp->scope_profiles[s]->n_profiles; k++) {
                const pc_profile *p = rp->scope_profiles[s]->profiles[k];
                for (size_t i = 0; i < p->n_samples; i++)
                    FUZZ_ASSERT(p->samples[i]->n_values == 1 && p->samples[i]->values[0] > 0,
                                "sample %zu: not one positive value", i);
            }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    static const char *const formats[] = {"trie", "tree", "speedscope"};
    static const struct {
        const char *app;
        int64_t rate;
    } variants[] = {{"app.cpu", 100}, {"app", 0}, {"app.alloc_objects", 100}, {"app.wall", 7}};
    const pc_format *f = pc_format_find(formats[data[0] % 3]);
    static const pc_format_attr attrs[] = {{"env", "fuzz"}};
    pc_budget budget;
    pc_budget_init(&budget, 64u << 20);
    pc_format_opts o = {.app = variants[(data[0] / 3) % 4].app,
                        .sample_rate = variants[(data[0] / 3) % 4].rate,
                        .units = "bytes",
                        .time_ns = 1,
                        .duration_ns = 10,
                        .attrs = attrs,
                        .n_attrs = 1,
                        .budget = &budget};
    pc_batch *b = NULL;
    pc_error e = {0};
    int rc = f->decode(data + 1, size - 1, &o, &b, &e);
    if (rc == 0) {
        FUZZ_ASSERT(b, "success without a batch");
        FUZZ_ASSERT(budget.misses == 0, "%s: the count was low (peak %zu, reserved %zu)", f->name,
                    budget.peak, budget.reserved);
        check_batch(b);
        pc_batch_end_budget(b);
        pc_batch_unref(b);
    } else {
        FUZZ_ASSERT(!b, "failure with a batch");
        FUZZ_ASSERT(rc == e.code && e.msg[0], "code %d, message \"%s\"", rc, e.msg);
        FUZZ_ASSERT(rc == PC_EBADMSG || rc == PC_EINVAL ||
                        ((rc == PC_E2BIG || rc == PC_EAGAIN) && rc == budget.state),
                    "unexpected code %d (%s)", rc, e.msg);
    }
    FUZZ_ASSERT(budget.used == 0, "%zu bytes left charged", budget.used);
    pc_budget_release(&budget);
    return 0;
}
