/* Optional libraries loaded on demand (src/base/dynlib.h): a library that is there gives its
 * functions (libz's crc32 of "123456789" is 0xcbf43926, CRC-32's published check value); one
 * that is missing, or a symbol it lacks, is a clear error naming the Debian package. */
#include <string.h>

#include "base/dynlib.h"
#include "check.h"

static void test_loads_and_resolves(void)
{
    static const char *const names[] = {"crc32"};
    void *fn = NULL;
    pc_error e = {0};
    CHECK_EQ_INT(pc_dynlib_load("libz.so.1", "zlib1g", names, &fn, 1, &e), 0);
    CHECK(fn != NULL);
    if (!fn) return;
    unsigned long (*crc)(unsigned long, const unsigned char *, unsigned) = NULL;
    memcpy(&crc, &fn, sizeof fn);
    CHECK(crc(0, (const unsigned char *)"123456789", 9) == 0xcbf43926UL);
}

static void test_missing_library(void)
{
    static const char *const names[] = {"f"};
    void *fn = NULL;
    pc_error e = {0};
    CHECK_EQ_INT(pc_dynlib_load("libprofcol-no-such.so.9", "no-such-package", names, &fn, 1, &e),
                 PC_ENOTSUP);
    CHECK_CONTAINS(e.msg, "cannot load libprofcol-no-such.so.9 (Debian package no-such-package)");
}

static void test_missing_symbol(void)
{
    static const char *const names[] = {"crc32", "profcol_no_such_symbol"};
    void *fns[2] = {0};
    pc_error e = {0};
    CHECK_EQ_INT(pc_dynlib_load("libz.so.1", "zlib1g", names, fns, 2, &e), PC_ENOTSUP);
    CHECK_CONTAINS(e.msg, "libz.so.1 has no profcol_no_such_symbol (Debian package zlib1g)");
}

int main(void)
{
    RUN(test_loads_and_resolves);
    RUN(test_missing_library);
    RUN(test_missing_symbol);
    return check_report();
}
