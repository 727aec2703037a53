/* mkpayloads: build the request bodies the benchmarks replay, from real profiles and from a
 * deterministic synthetic one.
 *
 *   mkpayloads DATA_DIR OUT_DIR [--large-count N]
 *
 * DATA_DIR holds go-cpu.pb.gz and go-heap.pb.gz (tests/data). Written:
 *   OUT/otlp/        each real pprof through pc_pprof_decode, encoded (proto) and gzipped (zlib
 * 6, as clients send): bodies for POST /v1development/profiles with Content-Encoding: gzip
 *   OUT/pprof/       the real gzip pprof files as they are: bodies for POST /ingest
 *   OUT/otlp-large/  N (default 4) synthetic CPU profiles of 2,000 samples each, many distinct
 *                    stacks of depth 10-40 over a few hundred functions, as gzip OTLP
 *   OUT/pprof-large/ the same synthetic profiles as gzip pprof
 * Each directory gets a "manifest": FILE PROFILES SAMPLES, counted on the OTLP translation (what
 * profcol's receivers count as accepted samples).
 *
 *   mkpayloads --jfr OUT_DIR FILE.jfr...
 *
 * JFR recordings (bench/run.sh jfr-relay records them with tests/data/gen/jfr/record.sh) gzipped
 * at level 1 as the Java agent does (BEST_SPEED), into OUT_DIR/NAME.gz: bodies for POST
 * /ingest?format=jfr with Content-Encoding: gzip; the manifest counts them through the receiver's
 * decoder (pc_jfr_decode, sampleRate 100). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/gzip.h"
#include "payloads.h"
#include "pdata/pdata.h"
#include "formats/pprof.h"
#include "pprof.pb-c.h"
#include "formats/jfr.h"

enum { N_SAMPLES = 2000, N_FUNCS = 400, SITES_PER_FUNC = 4, MIN_DEPTH = 10, MAX_DEPTH = 40 };

typedef Perftools__Profiles__Profile pp_profile;

/* splitmix64: deterministic across machines and libcs. */
static uint64_t rng_state;
static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static unsigned rnd_below(unsigned n)
{
    return (unsigned)(rnd() % n);
}

static int write_file(const char *dir, const char *name, const void *p, size_t n)
{
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n) {
        fprintf(stderr, "cannot write %s\n", path);
        if (f) fclose(f);
        return -1;
    }
    return fclose(f);
}

/* Translate a pprof (raw or gzip) to a gzip OTLP request; fills counts. */
static int to_otlp(const uint8_t *pprof, size_t len, const char *service, pc_buf *out,
                   pc_counts *counts)
{
    pc_format_attr attrs[] = {{"service.name", service}, {"host.name", "bench-host"}};
    pc_format_opts o = {.attrs = attrs, .n_attrs = 2, .scope_name = "bench", .scope_version = "1"};
    pc_batch *b = NULL;
    pc_error err = {0};
    if (pc_pprof_decode(pprof, len, &o, &b, &err) < 0) {
        fprintf(stderr, "pc_pprof_decode: %s\n", err.msg);
        return -1;
    }
    *counts = pc_batch_counts(b);
    pc_buf raw = {0};
    pc_batch_encode_proto(b, &raw);
    pc_gzip_deflate_zlib(raw.data, raw.len, 6, out);
    pc_buf_free(&raw);
    pc_batch_unref(b);
    return 0;
}

/* A synthetic Go-like CPU profile: a fixed call graph (each function calls a few others), stacks
 * are random walks down it, so stacks share prefixes as real ones do, yet most are distinct. */
static void synth_pprof(uint64_t seed, pc_buf *out_gz)
{
    rng_state = seed;
    enum { N_STR_EXTRA = 16 };
    size_t n_str = 0, cap_str = 1 + 3 * N_FUNCS + N_STR_EXTRA;
    char **str = calloc(cap_str, sizeof *str);
    str[n_str++] = strdup("");
#define ADD_STR(s) (str[n_str] = strdup(s), (int64_t)n_str++)
    int64_t s_cpu = ADD_STR("cpu"), s_ns = ADD_STR("nanoseconds");
    int64_t s_bin = ADD_STR("/usr/local/bin/shop-api");
    int64_t s_span = ADD_STR("span_id"), s_trace = ADD_STR("trace_id");
    static const char *const pkgs[] = {"runtime",
                                       "net/http",
                                       "encoding/json",
                                       "database/sql",
                                       "github.com/acme/shop/internal/cart",
                                       "github.com/acme/shop/internal/catalog",
                                       "github.com/acme/shop/internal/payments",
                                       "github.com/acme/shop/internal/storage",
                                       "google.golang.org/grpc",
                                       "github.com/lib/pq"};
    static Perftools__Profiles__Function fn[N_FUNCS];
    static Perftools__Profiles__Function *fnp[N_FUNCS];
    static Perftools__Profiles__Line line[N_FUNCS * SITES_PER_FUNC];
    static Perftools__Profiles__Line *linep[N_FUNCS * SITES_PER_FUNC];
    static Perftools__Profiles__Location loc[N_FUNCS * SITES_PER_FUNC];
    static Perftools__Profiles__Location *locp[N_FUNCS * SITES_PER_FUNC];
    static unsigned callees[N_FUNCS][6];
    for (unsigned i = 0; i < N_FUNCS; i++) {
        char name[256], file[256];
        const char *pkg = pkgs[i % 10];
        snprintf(name, sizeof name, "%s.(*%s%u).%s%u", pkg, i % 3 ? "Handler" : "store", i / 10,
                 i % 2 ? "Serve" : "process", i);
        snprintf(file, sizeof file, "/home/build/go/src/%s/file%u.go", pkg, i / 7);
        perftools__profiles__function__init(&fn[i]);
        fn[i].id = i + 1;
        fn[i].name = ADD_STR(name);
        fn[i].system_name = fn[i].name;
        fn[i].filename = ADD_STR(file);
        fn[i].start_line = 10 + rnd_below(800);
        fnp[i] = &fn[i];
        for (unsigned k = 0; k < 6; k++) /* call graph: mostly "deeper" functions */
            callees[i][k] = (i + 1 + rnd_below(N_FUNCS / 4)) % N_FUNCS;
        for (unsigned k = 0; k < SITES_PER_FUNC; k++) {
            unsigned l = i * SITES_PER_FUNC + k;
            perftools__profiles__line__init(&line[l]);
            line[l].function_id = i + 1;
            line[l].line = fn[i].start_line + 1 + rnd_below(120);
            linep[l] = &line[l];
            perftools__profiles__location__init(&loc[l]);
            loc[l].id = l + 1;
            loc[l].mapping_id = 1;
            loc[l].address = 0x401000 + (uint64_t)l * 0x40 + rnd_below(0x30);
            loc[l].n_line = 1;
            loc[l].line = &linep[l];
            locp[l] = &loc[l];
        }
    }
    Perftools__Profiles__Mapping map = PERFTOOLS__PROFILES__MAPPING__INIT, *mapp = &map;
    map.id = 1;
    map.memory_start = 0x400000;
    map.memory_limit = 0x2000000;
    map.filename = s_bin;
    map.has_functions = map.has_filenames = map.has_line_numbers = 1;

    static Perftools__Profiles__Sample smp[N_SAMPLES];
    static Perftools__Profiles__Sample *smpp[N_SAMPLES];
    static uint64_t stacks[N_SAMPLES][MAX_DEPTH];
    static int64_t values[N_SAMPLES][1];
    static Perftools__Profiles__Label labels[N_SAMPLES][2];
    static Perftools__Profiles__Label *labelp[N_SAMPLES][2];
    for (unsigned s = 0; s < N_SAMPLES; s++) {
        perftools__profiles__sample__init(&smp[s]);
        unsigned depth = MIN_DEPTH + rnd_below(MAX_DEPTH - MIN_DEPTH + 1);
        if (s > 0 && rnd_below(10) < 2) { /* some stacks repeat, as hot paths do */
            unsigned o = rnd_below(s);
            memcpy(stacks[s], stacks[o], sizeof stacks[s]);
            depth = (unsigned)smp[o].n_location_id;
        } else {
            unsigned f = rnd_below(8); /* a few roots: runtime.main, goroutine entries */
            for (unsigned d = 0; d < depth; d++) { /* root first, stored leaf first */
                stacks[s][depth - 1 - d] = f * SITES_PER_FUNC + rnd_below(SITES_PER_FUNC) + 1;
                f = callees[f][rnd_below(6)];
            }
        }
        smp[s].n_location_id = depth;
        smp[s].location_id = stacks[s];
        values[s][0] = (1 + rnd_below(3)) * 10000000;
        smp[s].n_value = 1;
        smp[s].value = values[s];
        if (rnd_below(8) == 0) { /* an eighth carry span labels (tracelink has work to do) */
            char hex[40];
            snprintf(hex, sizeof hex, "%016llx", (unsigned long long)rnd());
            for (unsigned k = 0; k < 2; k++) {
                perftools__profiles__label__init(&labels[s][k]);
                labelp[s][k] = &labels[s][k];
            }
            labels[s][0].key = s_span;
            if (n_str + 2 >= cap_str) {
                cap_str *= 2;
                str = realloc(str, cap_str * sizeof *str);
            }
            labels[s][0].str = ADD_STR(hex);
            snprintf(hex, sizeof hex, "%016llx%016llx", (unsigned long long)rnd(),
                     (unsigned long long)rnd());
            labels[s][1].key = s_trace;
            labels[s][1].str = ADD_STR(hex);
            smp[s].n_label = 2;
            smp[s].label = labelp[s];
        }
        smpp[s] = &smp[s];
    }
    /* one sample type, so one request carries one OTLP profile of N_SAMPLES samples */
    Perftools__Profiles__ValueType vt = PERFTOOLS__PROFILES__VALUE_TYPE__INIT, *vtp = &vt;
    vt.type = s_cpu;
    vt.unit = s_ns;
    Perftools__Profiles__ValueType period = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
    period.type = s_cpu;
    period.unit = s_ns;

    pp_profile p = PERFTOOLS__PROFILES__PROFILE__INIT;
    p.n_sample_type = 1;
    p.sample_type = &vtp;
    p.n_sample = N_SAMPLES;
    p.sample = smpp;
    p.n_mapping = 1;
    p.mapping = &mapp;
    p.n_location = N_FUNCS * SITES_PER_FUNC;
    p.location = locp;
    p.n_function = N_FUNCS;
    p.function = fnp;
    p.n_string_table = n_str;
    p.string_table = str;
    p.time_nanos = 1700000000000000000ll + (int64_t)(seed % 1000) * 10000000000ll;
    p.duration_nanos = 10000000000ll;
    p.period_type = &period;
    p.period = 10000000;
    p.default_sample_type = s_cpu;
    pc_buf raw = {0};
    pc_buf_reserve(&raw, protobuf_c_message_get_packed_size(&p.base) + 1);
    raw.len = protobuf_c_message_pack(&p.base, raw.data);
    pc_gzip_deflate_zlib(raw.data, raw.len, 6, out_gz);
    pc_buf_free(&raw);
    for (size_t i = 0; i < n_str; i++)
        free(str[i]);
    free(str);
#undef ADD_STR
}

static int emit(const char *dir, FILE *man, const char *name, const uint8_t *d, size_t n,
                const pc_counts *c)
{
    if (write_file(dir, name, d, n)) return -1;
    fprintf(man, "%s %zu %zu\n", name, c->profiles, c->samples);
    printf("  %s/%s: %zu bytes, %zu profile(s), %zu samples\n", dir, name, n, c->profiles,
           c->samples);
    return 0;
}

static FILE *open_manifest(const char *out, const char *sub, char *dir, size_t n)
{
    snprintf(dir, n, "%s/%s", out, sub);
    mkdir(out, 0755);
    mkdir(dir, 0755);
    char path[8192];
    snprintf(path, sizeof path, "%s/manifest", dir);
    FILE *f = fopen(path, "w");
    if (!f) fprintf(stderr, "cannot write %s\n", path);
    return f;
}

/* --jfr OUT FILE...: gzip each recording, count it through the JFR decoder. */
static int jfr_payloads(const char *out, char **files, int n)
{
    char dir[4096];
    FILE *man = open_manifest(out, ".", dir, sizeof dir);
    if (!man) return 1;
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        size_t len = 0;
        uint8_t *jfr = bench_read_file(files[i], &len);
        if (!jfr) {
            fprintf(stderr, "cannot read %s\n", files[i]);
            rc = 1;
            break;
        }
        static const pc_format_attr attrs[] = {{"service.name", "bench-java"}};
        pc_format_opts o = {.sample_rate = 100,
                            .time_ns = 1700000000000000000,
                            .duration_ns = 10000000000,
                            .attrs = attrs,
                            .n_attrs = 1,
                            .scope_name = "bench",
                            .scope_version = "1"};
        pc_batch *b = NULL;
        pc_error e = {0};
        if (pc_jfr_decode(jfr, len, &o, &b, &e)) {
            fprintf(stderr, "%s: pc_jfr_decode: %s\n", files[i], e.msg);
            free(jfr);
            rc = 1;
            break;
        }
        pc_counts c = pc_batch_counts(b);
        pc_batch_unref(b);
        pc_buf gz = {0};
        pc_gzip_deflate(jfr, len, 1, &gz);
        const char *base = strrchr(files[i], '/') ? strrchr(files[i], '/') + 1 : files[i];
        char name[256];
        snprintf(name, sizeof name, "%s.gz", base);
        rc = emit(dir, man, name, gz.data, gz.len, &c);
        pc_buf_free(&gz);
        free(jfr);
    }
    fclose(man);
    return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc >= 4 && !strcmp(argv[1], "--jfr")) return jfr_payloads(argv[2], argv + 3, argc - 3);
    if (argc < 3) {
        fprintf(stderr, "usage: mkpayloads DATA_DIR OUT_DIR [--large-count N]\n"
                        "       mkpayloads --jfr OUT_DIR FILE.jfr...\n");
        return 2;
    }
    const char *data = argv[1], *out = argv[2];
    unsigned large_n = 4;
    if (argc >= 5 && !strcmp(argv[3], "--large-count")) large_n = (unsigned)atoi(argv[4]);
    if (large_n == 0 || large_n > 64) large_n = 4;
    static const char *const real[] = {"go-cpu.pb.gz", "go-heap.pb.gz"};
    char d_otlp[4096], d_pprof[4096], d_large[4096], d_plarge[4096];
    FILE *m_otlp = open_manifest(out, "otlp", d_otlp, sizeof d_otlp);
    FILE *m_pprof = open_manifest(out, "pprof", d_pprof, sizeof d_pprof);
    FILE *m_large = open_manifest(out, "otlp-large", d_large, sizeof d_large);
    FILE *m_plarge = open_manifest(out, "pprof-large", d_plarge, sizeof d_plarge);
    if (!m_otlp || !m_pprof || !m_large || !m_plarge) return 1;
    int rc = 0;
    for (size_t i = 0; i < 2 && !rc; i++) {
        char path[8192], name[256];
        size_t len = 0;
        snprintf(path, sizeof path, "%s/%s", data, real[i]);
        uint8_t *pp = bench_read_file(path, &len);
        if (!pp) {
            fprintf(stderr, "cannot read %s\n", path);
            return 1;
        }
        pc_buf gz = {0};
        pc_counts c;
        rc = to_otlp(pp, len, "bench-go", &gz, &c);
        snprintf(name, sizeof name, "%.*s.otlp.gz", (int)(strlen(real[i]) - 6), real[i]);
        if (!rc) rc = emit(d_otlp, m_otlp, name, gz.data, gz.len, &c);
        if (!rc) rc = emit(d_pprof, m_pprof, real[i], pp, len, &c);
        pc_buf_free(&gz);
        free(pp);
    }
    for (unsigned i = 0; i < large_n && !rc; i++) {
        pc_buf pp = {0}, gz = {0};
        pc_counts c;
        char name[64];
        synth_pprof(0x5eed0000u + i, &pp);
        rc = to_otlp(pp.data, pp.len, "bench-large", &gz, &c);
        snprintf(name, sizeof name, "large-%02u.otlp.gz", i);
        if (!rc) rc = emit(d_large, m_large, name, gz.data, gz.len, &c);
        snprintf(name, sizeof name, "large-%02u.pb.gz", i);
        if (!rc) rc = emit(d_plarge, m_plarge, name, pp.data, pp.len, &c);
        pc_buf_free(&pp);
        pc_buf_free(&gz);
    }
    fclose(m_otlp);
    fclose(m_pprof);
    fclose(m_large);
    fclose(m_plarge);
    return rc ? 1 : 0;
}
