/* Shared helpers for the libFuzzer targets (tests/fuzz/README.md). */
#ifndef PC_FUZZ_COMMON_H
#define PC_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* The LLVMFuzzerInitialize of a target that needs nothing but quiet logs. */
#define FUZZ_INIT_QUIET_LOGS()                                                                     \
    int LLVMFuzzerInitialize(int *argc, char ***argv)                                              \
    {                                                                                              \
        (void)argc;                                                                                \
        (void)argv;                                                                                \
        fuzz_quiet_logs();                                                                         \
        return 0;                                                                                  \
    }

/* n input bytes as a NUL-terminated string (malloc'd). */
static inline char *fuzz_cstr(const uint8_t *p, size_t n)
{
    char *s = malloc(n + 1);
    FUZZ_ASSERT(s, "malloc");
    memcpy(s, p, n);
    s[n] = 0;
    return s;
}

#endif
