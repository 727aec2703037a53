/* libFuzzer target: the symbolizer's .gopclntab reader (src/processors/symbolizer/gopclntab.h)
 * on hostile section bytes: truncated tables, offsets out of range, huge counts, looping pcvalue
 * streams. The input is the section (copied to a buffer of its exact size, so ASan sees any read
 * past it); the same bytes stand for the section holding gofunc, where the inline trees are.
 * Invariants: a resolved pc gives 1 to 64 frames (an inline chain), each with a non-empty name,
 * no negative line, no empty file name; nothing leaks. Seeds: tests/fuzz/gen_gopclntab_seed.py. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "processors/symbolizer/gopclntab.h"

FUZZ_INIT_QUIET_LOGS()

enum { TEXT = 0x401000, GOFUNC = 0x500000, MAX_FUNCS = 2048 };

static void probe(const sym_gopcln *g, uint64_t pc)
{
    sym_frames fr = {0};
    if (sym_gopcln_resolve(g, pc, &fr) == SYM_OK) {
        FUZZ_ASSERT(fr.n >= 1 && fr.n <= 64 && fr.f, "1 to 64 frames at 0x%llx",
                    (unsigned long long)pc);
        for (size_t i = 0; i < fr.n; i++) {
            FUZZ_ASSERT(fr.f[i].name && fr.f[i].name[0], "a name");
            FUZZ_ASSERT(fr.f[i].line >= 0 && fr.f[i].start_line >= 0, "lines not negative");
            FUZZ_ASSERT(!fr.f[i].file || fr.f[i].file[0], "no empty file name");
        }
    } else {
        FUZZ_ASSERT(fr.n == 0, "no frames when unresolved");
    }
    sym_frames_free(&fr);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *copy = malloc(size ? size : 1);
    if (size) memcpy(copy, data, size);
    sym_gopcln *g = sym_gopcln_open(copy, size, TEXT);
    if (g) {
        /* the inline trees: the input again, as the section holding gofunc */
        sym_gopcln_set_gofunc(g, GOFUNC + (size ? copy[size - 1] : 0), copy, size, GOFUNC);
        size_t n = sym_gopcln_count(g);
        FUZZ_ASSERT(n >= 1 && n <= size / 8, "%zu functions in %zu bytes", n, size);
        for (size_t i = 0; i < n && i < MAX_FUNCS; i++) {
            uint64_t e = sym_gopcln_entry(g, i);
            probe(g, e);
            probe(g, e + 1);
            probe(g, e - 1);
        }
        probe(g, sym_gopcln_entry(g, n));
        probe(g, 0);
        probe(g, UINT64_MAX);
        for (size_t i = 0; i + 8 <= size && i < 256; i += 8) {
            uint64_t pc;
            memcpy(&pc, copy + i, sizeof pc);
            probe(g, TEXT + (pc & 0xfffff));
        }
    }
    sym_gopcln_free(g);
    free(copy);
    return 0;
}
