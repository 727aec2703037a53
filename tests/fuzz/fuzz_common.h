/* Shared helpers for the libFuzzer targets (tests/fuzz/README.md). */
#ifndef PC_FUZZ_COMMON_H
#define PC_FUZZ_COMMON_H

#include <stdio.h>
#include <stdlib.h>

#include "base/log.h"

/* An invariant the code under test must keep: report and abort, so libFuzzer saves the input. */
#define FUZZ_ASSERT(cond, ...)                                                                     \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: fuzz invariant failed: %s: ", __FILE__, __LINE__, #cond);      \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* Quiet logs: a fuzzer prints millions of expected "bad input" warnings otherwise. Set
 * PC_FUZZ_VERBOSE=1 to see them when reproducing a crash. */
static inline void fuzz_quiet_logs(void)
{
    const char *v = getenv("PC_FUZZ_VERBOSE");
    pc_log_set_level(v && *v && *v != '0' ? PC_LOG_DEBUG : PC_LOG_ERROR);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
