/* A small assertion header: each unit test is its own process (meson test runs them). */
#ifndef PC_CHECK_H
#define PC_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_failures, check_count;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        check_count++;                                                                             \
        if (!(cond)) {                                                                             \
            check_failures++;                                                                      \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);               \
        }                                                                                          \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                         \
    do {                                                                                           \
        long long va_ = (long long)(a), vb_ = (long long)(b);                                      \
        check_count++;                                                                             \
        if (va_ != vb_) {                                                                          \
            check_failures++;                                                                      \
            fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld\n", __FILE__, __LINE__, #a, #b,  \
                    va_, vb_);                                                                     \
        }                                                                                          \
    } while (0)

#define CHECK_STR(a, b)                                                                            \
    do {                                                                                           \
        const char *sa_ = (a), *sb_ = (b);                                                         \
        check_count++;                                                                             \
        if (!sa_ || !sb_ || strcmp(sa_, sb_) != 0) {                                               \
            check_failures++;                                                                      \
            fprintf(stderr, "%s:%d: %s == %s failed: \"%s\" != \"%s\"\n", __FILE__, __LINE__, #a,  \
                    #b, sa_ ? sa_ : "(null)", sb_ ? sb_ : "(null)");                               \
        }                                                                                          \
    } while (0)

#define CHECK_CONTAINS(hay, needle)                                                                \
    do {                                                                                           \
        const char *h_ = (hay), *n_ = (needle);                                                    \
        check_count++;                                                                             \
        if (!h_ || !strstr(h_, n_)) {                                                              \
            check_failures++;                                                                      \
            fprintf(stderr, "%s:%d: \"%s\" does not contain \"%s\"\n", __FILE__, __LINE__,         \
                    h_ ? h_ : "(null)", n_);                                                       \
        }                                                                                          \
    } while (0)

/* Run a test function, printing its name. */
#define RUN(fn)                                                                                    \
    do {                                                                                           \
        int before_ = check_failures;                                                              \
        fn();                                                                                      \
        fprintf(stderr, "%s %s\n", check_failures == before_ ? "ok  " : "FAIL", #fn);              \
    } while (0)

static inline int check_report(void)
{
    fprintf(stderr, "%d checks, %d failed\n", check_count, check_failures);
    return check_failures ? 1 : 0;
}

#endif
