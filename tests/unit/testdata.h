/* The shared fixtures of tests/data (real Go profiles made by tests/data/gen) for unit tests:
 * found through PC_TEST_DATA, or next to this file, or from the usual working directories. */
#ifndef PC_TESTDATA_H
#define PC_TESTDATA_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pdata/pdata.h"
#include "formats/pprof.h"

static inline const char *test_data_dir(void)
{
    static char dir[4096];
    if (dir[0]) return dir;
    const char *env = getenv("PC_TEST_DATA");
    if (env && *env) {
        snprintf(dir, sizeof dir, "%s/", env);
        return dir;
    }
    /* __FILE__ is ".../tests/unit/testdata.h", relative to the compiler's working directory */
    char from_file[4096];
    snprintf(from_file, sizeof from_file, "%s", __FILE__);
    char *p = strstr(from_file, "unit/testdata.h");
    if (p) strcpy(p, "data/");
    const char *candidates[] = {from_file, "tests/data/", "../tests/data/", "../../tests/data/"};
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
        char probe[4200];
        snprintf(probe, sizeof probe, "%sgo-cpu.pb.gz", candidates[i]);
        if (access(probe, R_OK) == 0) {
            snprintf(dir, sizeof dir, "%s", candidates[i]);
            return dir;
        }
    }
    snprintf(dir, sizeof dir, "%s", from_file);
    return dir;
}

/* Append tests/data/<name> to out; -1 (with a message) when it cannot be read. */
static inline int read_file(const char *name, pc_buf *out)
{
    char path[4200];
    snprintf(path, sizeof path, "%s%s", test_data_dir(), name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s (set PC_TEST_DATA to tests/data)\n", path);
        return -1;
    }
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        pc_buf_append(out, buf, n);
    fclose(f);
    return 0;
}

/* Import the pprof tests/data/<name> into *b (a new batch, or appended to *b) with opts (NULL:
 * none); pc_pprof_decode's result, -1 when the file cannot be read. */
static inline int read_pprof_batch(const char *name, const pc_format_opts *opts, pc_batch **b)
{
    pc_buf data = {0};
    if (read_file(name, &data)) return -1;
    pc_error err = {0};
    int rc = pc_pprof_decode(data.data, data.len, opts, b, &err);
    if (rc) fprintf(stderr, "pprof %s: %s\n", name, err.msg);
    pc_buf_free(&data);
    return rc;
}

#endif
