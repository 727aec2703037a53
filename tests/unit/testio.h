/* What a piece of a unit test writes to stderr (the log lines profcol writes), for tests that
 * check the logs. */
#ifndef PC_TESTIO_H
#define PC_TESTIO_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

/* What fn(arg) writes to stderr, NUL-terminated (malloc'd: the test frees it). */
static inline char *capture_stderr(void (*fn)(void *), void *arg)
{
    fflush(stderr);
    char path[] = "/tmp/profcol-test-logXXXXXX";
    int fd = mkstemp(path), saved = dup(2);
    unlink(path);
    dup2(fd, 2);
    fn(arg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    off_t n = lseek(fd, 0, SEEK_END);
    char *out = calloc(1, (size_t)n + 1);
    CHECK_EQ_INT(pread(fd, out, (size_t)n, 0), n);
    close(fd);
    return out;
}

static inline int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

#endif
