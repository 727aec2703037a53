/* The prometheus exporter's accumulator and text (exporters/prometheus/: accum.c, render.c, and
 * formats/prom_names.c) on whatever OTLP metrics a client sends. The first input byte picks the
 * settings (bit 0 suffixes, bit 1 timestamps, bit 2 a namespace, bit 3 resource attributes as
 * labels, bits 4-5 max_series 1, 3, 50 or 10000); the rest is an ExportMetricsServiceRequest
 * (protobuf), folded in twice. Invariants of both renderings:
 * - every line ends with '\n' and no line is empty;
 * - every sample line starts with a valid metric name ([a-zA-Z_:][a-zA-Z0-9_:]*), then '{' or ' ';
 * - every comment line is "# HELP ", "# TYPE " or (OpenMetrics, last) "# EOF";
 * - OpenMetrics ends with "# EOF\n"; the series held never exceed max_series. */
#include <stdint.h>
#include <string.h>

#include "exporters/prometheus/model.h"
#include "fuzz_common.h"
#include "pdata/pdata.h"

FUZZ_INIT_QUIET_LOGS()

static bool name_char(char c, bool first)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
           (!first && c >= '0' && c <= '9');
}

static void check_text(const pc_buf *out, bool om)
{
    const char *s = out->data ? (const char *)out->data : "";
    size_t n = out->len;
    FUZZ_ASSERT(n == 0 || s[n - 1] == '\n', "the exposition does not end with a newline");
    if (om) FUZZ_ASSERT(n >= 6 && memcmp(s + n - 6, "# EOF\n", 6) == 0, "no # EOF at the end");
    for (size_t i = 0; i < n;) {
        const char *nl = memchr(s + i, '\n', n - i);
        size_t len = (size_t)(nl - (s + i));
        FUZZ_ASSERT(len > 0, "an empty line at %zu", i);
        const char *l = s + i;
        if (l[0] == '#') {
            bool ok = (len > 7 && (!memcmp(l, "# HELP ", 7) || !memcmp(l, "# TYPE ", 7))) ||
                      (om && len == 5 && !memcmp(l, "# EOF", 5) && i + 6 == n);
            FUZZ_ASSERT(ok, "a comment line that is not HELP, TYPE or EOF: %.*s", (int)len, l);
        } else {
            FUZZ_ASSERT(name_char(l[0], true), "a sample without a name: %.*s", (int)len, l);
            size_t k = 1;
            while (k < len && name_char(l[k], false))
                k++;
            FUZZ_ASSERT(k < len && (l[k] == '{' || l[k] == ' '), "a bad name: %.*s", (int)len, l);
        }
        i += len + 1;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    static const int64_t limits[] = {1, 3, 50, 10000};
    prom_cfg cfg = {
        .suffixes = data[0] & 1,
        .send_timestamps = data[0] & 2,
        .namespace_ = (data[0] & 4) ? "ns" : NULL,
        .resource_to_labels = data[0] & 8,
        .expiration_ms = 3600 * 1000,
        .max_series = limits[(data[0] >> 4) & 3],
    };
    pc_batch *b = NULL;
    pc_error err = {0};
    if (pc_batch_decode(PC_SIGNAL_METRICS, data + 1, size - 1, false, NULL, &b, &err) != 0)
        return 0;
    prom_accum a;
    prom_accum_init(&a, &cfg);
    for (int round = 0; round < 2; round++) {
        prom_tally t = {0};
        prom_accum_add(&a, b, &t);
        FUZZ_ASSERT((int64_t)t.series <= cfg.max_series, "%llu series over max_series %lld",
                    (unsigned long long)t.series, (long long)cfg.max_series);
        for (int om = 0; om < 2; om++) {
            pc_buf out = {0};
            prom_accum_render(&a, om, &out, &t);
            check_text(&out, om);
            pc_buf_free(&out);
        }
    }
    prom_accum_free(&a);
    pc_batch_unref(b);
    return 0;
}
