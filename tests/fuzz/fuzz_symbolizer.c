/* The symbolizer processor's input path: an OTLP profiles request (protobuf) that validates is
 * run through the processor (tests/unit/proc_driver.h). Its mappings name binaries by GNU build id
 * or by file name; `elf_files` is this very executable (/proc/self/exe, matched by the file name
 * "exe" or by its build id), so addresses are looked up in real DWARF, and a debug directory that
 * holds nothing makes every other build id a miss. Invariants: the processor passes on exactly one
 * batch, it still validates with nothing rejected (every index it wrote is in range), survives the
 * round trips of fuzz_otlp.h, and every line's function index is in the function table or 0. */
#include <stdint.h>

#include "../unit/proc_driver.h"
#include "base/budget.h"
#include "fuzz_otlp.h"

extern const pc_component_type pc_processor_symbolizer;

FUZZ_INIT_QUIET_LOGS()

static driver *the_driver(void)
{
    static driver *d;
    if (!d)
        d = driver_make(&pc_processor_symbolizer, "debug_dirs: [/nonexistent-profcol-fuzz]\n"
                                                  "elf_files: [/proc/self/exe]\n"
                                                  "fallback_name: true\n"
                                                  "cache_size: 64\n"
                                                  "max_open_files: 2\n");
    return d;
}

static void check_lines(const pc_batch *b)
{
    const pc_dictionary *d = b->req->dictionary;
    for (size_t i = 1; d && i < d->n_location_table; i++) {
        const pc_location *l = d->location_table[i];
        for (size_t k = 0; l && k < l->n_lines; k++) {
            int32_t f = l->lines[k]->function_index;
            /* 0 is "unset", valid with no function table (pdata/validate.c idx_ok) */
            FUZZ_ASSERT(f == 0 || (f > 0 && (size_t)f < d->n_function_table),
                        "line %zu/%zu: function %d of %zu", i, k, f, d->n_function_table);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pc_batch *b = NULL;
    pc_error err = {0};
    pc_budget budget;
    pc_budget_init(&budget, 0);
    int rc = pc_batch_decode(PC_SIGNAL_PROFILES, data, size, false, &budget, &b, &err);
    pc_budget_release(&budget);
    if (rc != 0) return 0;
    pc_batch_end_budget(b);
    int64_t rejected = -1;
    if (pc_batch_validate(b, &rejected, &err) != 0 || rejected != 0) {
        pc_batch_unref(b);
        return 0;
    }
    driver *d = the_driver();
    pc_batch *out = driver_run(d, b);
    FUZZ_ASSERT(out && out->req, "nothing passed on");
    rejected = -1;
    FUZZ_ASSERT(pc_batch_validate(out, &rejected, &err) == 0 && rejected == 0,
                "symbolized batch is invalid: %s", err.msg);
    check_lines(out);
    fuzz_check_batch(out, true);
    tc_rec_clear(&d->rec);
    return 0;
}
