/* codecs: the compression floors and the codec comparison, on the very payloads a scenario
 * replays. Each codec is called directly (not through base/gzip.c), so a floor does not move when
 * profcol's gzip module changes.
 *
 *   codecs --payload FILE|DIR [--codec zlib|isal|libdeflate|profcol] [--level L]
 *          [--threads T] [--seconds S]
 *       the floor: inflate every payload and re-deflate it at level L (default
 *       PC_GZIP_DEFAULT_LEVEL, what the exporters use; for isal the igzip level profcol maps L to,
 *       for libdeflate L itself) on T threads for S seconds; MB/s of compressed input and CPU s
 *       per GB; the last line is JSON. `profcol` is base/gzip.c itself.
 *   codecs --payload FILE|DIR --table [--seconds S]
 *       one thread, every codec and level: inflate MB/s, deflate MB/s (of inflated bytes) and the
 *       compressed size, as a Markdown table.
 *
 * T defaults to UV_THREADPOOL_SIZE when set, else the CPUs this process can keep busy. */
#include <isa-l/igzip_lib.h>
#include <libdeflate.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "base/cgroup.h"
#include "base/gzip.h"
#include "payloads.h"

enum { C_ZLIB, C_ISAL, C_LIBDEFLATE, C_PROFCOL, C_N };
static const char *const codec_names[C_N] = {"zlib", "isal", "libdeflate", "profcol"};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* One codec's state per thread (libdeflate's (de)compressors and igzip's level buffer are
 * allocated once, as a real user would keep them). */
typedef struct codec {
    int kind, level;
    struct libdeflate_compressor *ldc;
    struct libdeflate_decompressor *ldd;
    uint8_t *isal_lvl;
    size_t isal_lvl_size;
} codec;

static size_t isal_level_buf_size(int level)
{
    switch (level) {
    case 1: return ISAL_DEF_LVL1_DEFAULT;
    case 2: return ISAL_DEF_LVL2_DEFAULT;
    case 3: return ISAL_DEF_LVL3_DEFAULT;
    default: return 0;
    }
}

static void codec_init(codec *c, int kind, int level)
{
    memset(c, 0, sizeof *c);
    c->kind = kind;
    c->level = level;
    if (kind == C_LIBDEFLATE) {
        c->ldc = libdeflate_alloc_compressor(level);
        c->ldd = libdeflate_alloc_decompressor();
    }
    if (kind == C_ISAL && (c->isal_lvl_size = isal_level_buf_size(level)))
        c->isal_lvl = malloc(c->isal_lvl_size);
}

static void codec_free(codec *c)
{
    if (c->ldc) libdeflate_free_compressor(c->ldc);
    if (c->ldd) libdeflate_free_decompressor(c->ldd);
    free(c->isal_lvl);
}

static void reserve(pc_buf *b, size_t n)
{
    if (b->cap < n) pc_buf_reserve(b, n - b->len);
}

/* gzip trailer ISIZE: the inflated size mod 2^32, a hint for one-shot decoders. */
static size_t isize(const uint8_t *p, size_t n)
{
    return n < 4 ? 0
                 : (size_t)p[n - 4] | (size_t)p[n - 3] << 8 | (size_t)p[n - 2] << 16 |
                       (size_t)p[n - 1] << 24;
}

static int inflate_with(codec *c, const uint8_t *in, size_t len, pc_buf *out)
{
    out->len = 0;
    switch (c->kind) {
    case C_ZLIB: {
        size_t want = isize(in, len) + 1;
        reserve(out, want);
        z_stream zs;
        memset(&zs, 0, sizeof zs);
        if (inflateInit2(&zs, 15 + 16) != Z_OK) return -1;
        zs.next_in = (Bytef *)in;
        zs.avail_in = (uInt)len;
        zs.next_out = out->data;
        zs.avail_out = (uInt)out->cap;
        int zr = inflate(&zs, Z_FINISH);
        out->len = zs.total_out;
        inflateEnd(&zs);
        return zr == Z_STREAM_END ? 0 : -1;
    }
    case C_ISAL: {
        reserve(out, isize(in, len) + 1);
        struct inflate_state st;
        isal_inflate_init(&st);
        st.crc_flag = ISAL_GZIP;
        st.next_in = (uint8_t *)in;
        st.avail_in = (uint32_t)len;
        st.next_out = out->data;
        st.avail_out = (uint32_t)out->cap;
        int r = isal_inflate(&st);
        out->len = st.total_out;
        return r == ISAL_DECOMP_OK && st.block_state == ISAL_BLOCK_FINISH ? 0 : -1;
    }
    case C_LIBDEFLATE: {
        reserve(out, isize(in, len) + 1);
        size_t got = 0;
        enum libdeflate_result r =
            libdeflate_gzip_decompress(c->ldd, in, len, out->data, out->cap, &got);
        out->len = got;
        return r == LIBDEFLATE_SUCCESS ? 0 : -1;
    }
    default: return pc_gzip_inflate(in, len, 256u << 20, out) < 0 ? -1 : 0;
    }
}

static void deflate_with(codec *c, const uint8_t *in, size_t len, pc_buf *out)
{
    out->len = 0;
    switch (c->kind) {
    case C_ZLIB: {
        z_stream zs;
        memset(&zs, 0, sizeof zs);
        deflateInit2(&zs, c->level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
        reserve(out, deflateBound(&zs, (uLong)len) + 1);
        zs.next_in = (Bytef *)in;
        zs.avail_in = (uInt)len;
        zs.next_out = out->data;
        zs.avail_out = (uInt)out->cap;
        deflate(&zs, Z_FINISH);
        out->len = zs.total_out;
        deflateEnd(&zs);
        return;
    }
    case C_ISAL: {
        struct isal_zstream zs;
        isal_deflate_init(&zs);
        reserve(out, len + len / 16 + 1024);
        zs.gzip_flag = IGZIP_GZIP;
        zs.level = (uint32_t)c->level;
        zs.level_buf = c->isal_lvl;
        zs.level_buf_size = (uint32_t)c->isal_lvl_size;
        zs.end_of_stream = 1;
        zs.flush = NO_FLUSH;
        zs.next_in = (uint8_t *)in;
        zs.avail_in = (uint32_t)len;
        zs.next_out = out->data;
        zs.avail_out = (uint32_t)out->cap;
        isal_deflate(&zs);
        out->len = zs.total_out;
        return;
    }
    case C_LIBDEFLATE:
        reserve(out, libdeflate_gzip_compress_bound(c->ldc, len) + 1);
        out->len = libdeflate_gzip_compress(c->ldc, in, len, out->data, out->cap);
        return;
    default: pc_gzip_deflate(in, len, c->level, out); return;
    }
}

typedef struct worker {
    pthread_t th;
    const payload_set *ps;
    int kind, level;
    size_t start;
    double seconds;
    uint64_t bytes_in, bytes_raw, rounds;
    int failed;
} worker;

static void *run(void *arg)
{
    worker *w = arg;
    pc_buf raw = {0}, gz = {0};
    codec c;
    codec_init(&c, w->kind, w->level);
    double t0 = now_s();
    size_t i = w->start;
    /* bounded: by time, and by a round count no realistic machine reaches in the time */
    for (uint64_t k = 0; k < 100000000ull && now_s() - t0 < w->seconds; k++) {
        const payload *p = &w->ps->p[i];
        i = (i + 1) % w->ps->n;
        if (inflate_with(&c, p->data, p->len, &raw) < 0) {
            w->failed = 1;
            break;
        }
        deflate_with(&c, raw.data, raw.len, &gz);
        w->bytes_in += p->len;
        w->bytes_raw += raw.len;
        w->rounds++;
    }
    codec_free(&c);
    pc_buf_free(&raw);
    pc_buf_free(&gz);
    return NULL;
}

static int floor_run(const payload_set *ps, const char *path, int kind, int level, int threads,
                     double seconds)
{
    worker *w = calloc((size_t)threads, sizeof *w);
    double t0 = now_s(), c0 = cpu_s();
    for (int t = 0; t < threads; t++) {
        w[t] = (worker){
            .ps = ps, .kind = kind, .level = level, .start = (size_t)t % ps->n, .seconds = seconds};
        pthread_create(&w[t].th, NULL, run, &w[t]);
    }
    uint64_t in = 0, raw = 0, rounds = 0;
    int failed = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(w[t].th, NULL);
        in += w[t].bytes_in;
        raw += w[t].bytes_raw;
        rounds += w[t].rounds;
        failed |= w[t].failed;
    }
    double el = now_s() - t0, cpu = cpu_s() - c0;
    double cpu_per_gb = in ? cpu / ((double)in / 1e9) : 0;
    if (failed) fprintf(stderr, "codecs: a payload failed to inflate with %s\n", codec_names[kind]);
    printf("%s floor (level %d): %zu payload(s) from %s, %d thread(s), %.2f s\n", codec_names[kind],
           level, ps->n, path, threads, el);
    printf("  %-28s %10.2f\n", "payloads/s", (double)rounds / el);
    printf("  %-28s %10.2f\n", "MB/s compressed in", (double)in / el / 1e6);
    printf("  %-28s %10.2f\n", "MB/s inflated", (double)raw / el / 1e6);
    printf("  %-28s %10.1f\n", "CPU s per GB compressed in", cpu_per_gb);
    printf("{\"tool\":\"codecs\",\"codec\":\"%s\",\"level\":%d,\"threads\":%d,\"seconds\":%.3f,"
           "\"payloads_per_s\":%.2f,\"mb_per_s_in\":%.4f,\"mb_per_s_raw\":%.4f,\"cpu_s\":%.3f,"
           "\"cpu_s_per_gb\":%.2f}\n",
           codec_names[kind], level, threads, el, (double)rounds / el, (double)in / el / 1e6,
           (double)raw / el / 1e6, cpu, cpu_per_gb);
    free(w);
    return failed;
}

/* Every codec and level on one thread, each measured for `seconds` of CPU. */
static int table(const payload_set *ps, double seconds)
{
    pc_buf raw[64] = {{0}}, gz = {0};
    size_t n = ps->n < 64 ? ps->n : 64, raw_total = 0, in_total = 0;
    codec z;
    codec_init(&z, C_ZLIB, 6);
    for (size_t i = 0; i < n; i++) {
        if (inflate_with(&z, ps->p[i].data, ps->p[i].len, &raw[i]) < 0) return 1;
        raw_total += raw[i].len;
        in_total += ps->p[i].len;
    }
    codec_free(&z);
    printf("%zu payload(s), %zu bytes inflated, %zu bytes as given; one thread, CPU time\n\n", n,
           raw_total, in_total);
    printf("| codec | level | deflate MB/s (inflated bytes) | compressed bytes | ratio to zlib 1 | "
           "inflate MB/s (inflated bytes) |\n|---|---|---|---|---|---|\n");
    static const struct {
        int kind, lo, hi;
    } rows[] = {{C_ZLIB, 1, 9}, {C_ISAL, 0, 3}, {C_LIBDEFLATE, 1, 12}};
    size_t zlib1 = 0;
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        for (int level = rows[r].lo; level <= rows[r].hi; level++) {
            codec c;
            codec_init(&c, rows[r].kind, level);
            size_t out_bytes = 0;
            for (size_t i = 0; i < n; i++) {
                deflate_with(&c, raw[i].data, raw[i].len, &gz);
                out_bytes += gz.len;
            }
            if (rows[r].kind == C_ZLIB && level == 1) zlib1 = out_bytes;
            double c0 = cpu_s(), done = 0;
            for (int k = 0; k < 100000 && cpu_s() - c0 < seconds; k++) {
                for (size_t i = 0; i < n; i++)
                    deflate_with(&c, raw[i].data, raw[i].len, &gz);
                done += (double)raw_total;
            }
            double dmb = done / (cpu_s() - c0) / 1e6;
            /* inflate what this codec and level produced, with the same codec */
            pc_buf *zs = calloc(n, sizeof *zs), back = {0};
            for (size_t i = 0; i < n; i++)
                deflate_with(&c, raw[i].data, raw[i].len, &zs[i]);
            c0 = cpu_s();
            done = 0;
            int bad = 0;
            for (int k = 0; k < 100000 && cpu_s() - c0 < seconds; k++)
                for (size_t i = 0; i < n; i++) {
                    bad |= inflate_with(&c, zs[i].data, zs[i].len, &back) < 0 ||
                           back.len != raw[i].len || memcmp(back.data, raw[i].data, back.len);
                    done += (double)raw[i].len;
                }
            double imb = done / (cpu_s() - c0) / 1e6;
            printf("| %s | %d | %.1f | %zu | %.3f | %.1f%s |\n", codec_names[rows[r].kind], level,
                   dmb, out_bytes, zlib1 ? (double)out_bytes / (double)zlib1 : 0, imb,
                   bad ? " (ROUND TRIP FAILED)" : "");
            fflush(stdout);
            for (size_t i = 0; i < n; i++)
                pc_buf_free(&zs[i]);
            free(zs);
            pc_buf_free(&back);
            codec_free(&c);
            if (bad) return 1;
        }
    }
    for (size_t i = 0; i < n; i++)
        pc_buf_free(&raw[i]);
    pc_buf_free(&gz);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = NULL;
    double seconds = 3;
    int threads = 0, kind = C_ZLIB, level = PC_GZIP_DEFAULT_LEVEL, want_table = 0;
    const char *env = getenv("UV_THREADPOOL_SIZE");
    /* by default a thread per CPU this process can keep busy (its affinity mask, its cgroup's
     * CPU limit): the CPUs profcol's pool would be sized to in the same place */
    threads = env && atoi(env) > 0 ? atoi(env) : (int)pc_cpus_usable(NULL, NULL, NULL);
    int bad = 0, level_set = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--table")) {
            want_table = 1;
            continue;
        }
        if (!v) {
            bad = 1;
            break;
        }
        i++;
        if (!strcmp(a, "--payload"))
            path = v;
        else if (!strcmp(a, "--threads"))
            threads = atoi(v);
        else if (!strcmp(a, "--seconds"))
            seconds = atof(v);
        else if (!strcmp(a, "--level"))
            level = atoi(v), level_set = 1;
        else if (!strcmp(a, "--codec")) {
            kind = -1;
            for (int k = 0; k < C_N; k++)
                if (!strcmp(v, codec_names[k])) kind = k;
            bad |= kind < 0;
        } else
            bad = 1;
    }
    if (bad || !path || threads < 1 || threads > 256 || seconds <= 0 || seconds > 600) {
        fprintf(stderr, "usage: codecs --payload FILE|DIR [--codec zlib|isal|libdeflate|profcol] "
                        "[--level L] [--threads T] [--seconds S] | --table\n");
        return 2;
    }
    /* isal: the level profcol's gzip module uses for level L (base/gzip.h) */
    if (kind == C_ISAL && !level_set)
        level = pc_gzip_isal_level(PC_GZIP_DEFAULT_LEVEL);
    else if (kind == C_ISAL && level > 3)
        level = pc_gzip_isal_level(level);
    payload_set ps;
    if (payload_load(path, &ps)) return 2;
    for (size_t i = 0; i < ps.n; i++)
        if (!pc_is_gzip(ps.p[i].data, ps.p[i].len)) {
            fprintf(stderr, "codecs: %s is not gzip\n", ps.p[i].name);
            return 2;
        }
    int rc =
        want_table ? table(&ps, seconds / 10) : floor_run(&ps, path, kind, level, threads, seconds);
    for (size_t i = 0; i < ps.n; i++)
        free(ps.p[i].data);
    free(ps.p);
    return rc;
}
