/* zlibfloor: how fast zlib alone inflates and re-deflates (PC_GZIP_DEFAULT_LEVEL, as the exporters
 * do) the very payloads a scenario replays, on T threads for S seconds. The relay cannot beat this;
 * the scenarios report their input rate as a ratio of it.
 *
 *   zlibfloor --payload FILE|DIR [--threads T] [--seconds S]
 *
 * T defaults to UV_THREADPOOL_SIZE when set, else the number of online CPUs. Throughput is in
 * MB/s (10^6 bytes) of compressed input. Uses the project's own pc_gzip_inflate/deflate. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/gzip.h"
#include "payloads.h"

typedef struct worker {
    pthread_t th;
    const payload_set *ps;
    size_t start;
    double seconds;
    uint64_t bytes_in, bytes_raw, rounds;
    int failed;
} worker;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *run(void *arg)
{
    worker *w = arg;
    pc_buf raw = {0}, gz = {0};
    double t0 = now_s();
    size_t i = w->start;
    /* bounded: by time, and by a round count no realistic machine reaches in the time */
    for (uint64_t k = 0; k < 100000000ull && now_s() - t0 < w->seconds; k++) {
        const payload *p = &w->ps->p[i];
        i = (i + 1) % w->ps->n;
        if (pc_gzip_inflate(p->data, p->len, 256u << 20, &raw) < 0) {
            w->failed = 1;
            break;
        }
        pc_gzip_deflate(raw.data, raw.len, PC_GZIP_DEFAULT_LEVEL, &gz);
        w->bytes_in += p->len;
        w->bytes_raw += raw.len;
        w->rounds++;
    }
    pc_buf_free(&raw);
    pc_buf_free(&gz);
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = NULL;
    double seconds = 3;
    int threads = 0;
    const char *env = getenv("UV_THREADPOOL_SIZE");
    if (env && atoi(env) > 0)
        threads = atoi(env);
    else
        threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--payload"))
            path = argv[i + 1];
        else if (!strcmp(argv[i], "--threads"))
            threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--seconds"))
            seconds = atof(argv[i + 1]);
        else
            path = NULL, i = argc;
    }
    if (!path || threads < 1 || threads > 256 || seconds <= 0 || seconds > 600) {
        fprintf(stderr, "usage: zlibfloor --payload FILE|DIR [--threads T] [--seconds S]\n");
        return 2;
    }
    payload_set ps;
    if (payload_load(path, &ps)) return 2;
    for (size_t i = 0; i < ps.n; i++)
        if (!pc_is_gzip(ps.p[i].data, ps.p[i].len)) {
            fprintf(stderr, "zlibfloor: %s is not gzip\n", ps.p[i].name);
            return 2;
        }
    worker *w = calloc((size_t)threads, sizeof *w);
    double t0 = now_s();
    for (int t = 0; t < threads; t++) {
        w[t].ps = &ps;
        w[t].start = (size_t)t % ps.n;
        w[t].seconds = seconds;
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
    double el = now_s() - t0;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
                 (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
    double cpu_per_gb = in ? cpu / ((double)in / 1e9) : 0;
    if (failed) fprintf(stderr, "zlibfloor: a payload failed to inflate\n");
    printf("zlibfloor: %zu payload(s) from %s, %d thread(s), %.2f s\n", ps.n, path, threads, el);
    printf("  %-28s %10.2f\n", "payloads/s", (double)rounds / el);
    printf("  %-28s %10.2f\n", "MB/s compressed in", (double)in / el / 1e6);
    printf("  %-28s %10.2f\n", "MB/s inflated", (double)raw / el / 1e6);
    printf("  %-28s %10.1f\n", "CPU s per GB compressed in", cpu_per_gb);
    printf("{\"tool\":\"zlibfloor\",\"threads\":%d,\"seconds\":%.3f,\"payloads_per_s\":%.2f,"
           "\"mb_per_s_in\":%.4f,\"mb_per_s_raw\":%.4f,\"cpu_s\":%.3f,\"cpu_s_per_gb\":%.2f}\n",
           threads, el, (double)rounds / el, (double)in / el / 1e6, (double)raw / el / 1e6, cpu,
           cpu_per_gb);
    for (size_t i = 0; i < ps.n; i++)
        free(ps.p[i].data);
    free(ps.p);
    free(w);
    return failed ? 1 : 0;
}
