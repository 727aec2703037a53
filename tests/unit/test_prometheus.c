/* Prometheus names and label sets (formats/prom.h): names as the Collector's
 * translator documents them (spec metrics.md §3: samples.kernel.count with unit 1 as a monotonic
 * sum is samples_kernel_count_total; By bytes, s seconds, ms milliseconds, {x} dropped, / per,
 * gauges of unit 1 _ratio), label names, values as the formats require (§2). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "formats/prom.h"

typedef struct names_cfg {
    const char *namespace_;
    bool suffixes;
} names_cfg;

static void name_is(const names_cfg *cfg, const char *name, const char *unit, pc_prom_type type,
                    bool gauge, const char *want)
{
    char *got = pc_prom_metric_name(cfg->namespace_, cfg->suffixes, name, unit, type, gauge);
    CHECK_STR(got, want);
    free(got);
}

static void test_names(void)
{
    names_cfg cfg = {.suffixes = true};
    name_is(&cfg, "samples.kernel.count", "1", PC_PROM_COUNTER, false,
            "samples_kernel_count_total");
    name_is(&cfg, "http.server.duration", "ms", PC_PROM_HISTOGRAM, false,
            "http_server_duration_milliseconds");
    name_is(&cfg, "process.memory", "By", PC_PROM_GAUGE, true, "process_memory_bytes");
    name_is(&cfg, "cpu.utilization", "1", PC_PROM_GAUGE, true, "cpu_utilization_ratio");
    name_is(&cfg, "cpu.utilization", "1", PC_PROM_GAUGE, false, "cpu_utilization"); /* a sum */
    name_is(&cfg, "requests", "{request}", PC_PROM_COUNTER, false, "requests_total");
    name_is(&cfg, "throughput", "By/s", PC_PROM_GAUGE, true, "throughput_bytes_per_second");
    name_is(&cfg, "disk.usage", "%", PC_PROM_GAUGE, true, "disk_usage_percent");
    name_is(&cfg, "bytes.sent", "By", PC_PROM_COUNTER, false,
            "bytes_sent_total"); /* has its unit */
    name_is(&cfg, "total.requests", "", PC_PROM_COUNTER, false, "requests_total");
    name_is(&cfg, "9lives", "", PC_PROM_GAUGE, true, "_9lives");
    name_is(&cfg, "...", "s", PC_PROM_GAUGE, true, "");
    cfg.namespace_ = "app";
    name_is(&cfg, "up.time", "s", PC_PROM_GAUGE, true, "app_up_time_seconds");
    cfg.suffixes = false;
    name_is(&cfg, "up.time", "s", PC_PROM_COUNTER, false, "app_up_time");
}

static void test_labels(void)
{
    pc_prom_labels l = {0};
    pc_prom_labels_add(&l, "z.key", "1");
    pc_prom_labels_add(&l, "a-b", "x\"y\\z\nw");
    pc_prom_labels_add(&l, "z_key", "2"); /* the same name once sanitised: joined */
    pc_prom_labels_add(&l, "empty", "");  /* absent */
    pc_prom_labels_add(&l, "2nd", "v");
    pc_prom_labels_add(&l, "__name__", "evil");
    char *s = pc_prom_labels_join(&l);
    CHECK_STR(s, "a_b=\"x\\\"y\\\\z\\nw\",key_2nd=\"v\",key___name__=\"evil\",z_key=\"1;2\"");
    free(s);
    pc_prom_labels_free(&l);
}

static void test_values(void)
{
    char b[64];
    pc_prom_fmt_double(b, sizeof b, 0.1);
    CHECK_STR(b, "0.1");
    pc_prom_fmt_double(b, sizeof b, 150);
    CHECK_STR(b, "150"); /* OpenMetrics: no decimal point in an integer */
    pc_prom_fmt_double(b, sizeof b, 1.0 / 3);
    CHECK(strtod(b, NULL) == 1.0 / 3);
    pc_prom_fmt_double(b, sizeof b, INFINITY);
    CHECK_STR(b, "+Inf");
    pc_prom_fmt_double(b, sizeof b, -INFINITY);
    CHECK_STR(b, "-Inf");
    pc_prom_fmt_double(b, sizeof b, NAN);
    CHECK_STR(b, "NaN");
}

int main(void)
{
    RUN(test_names);
    RUN(test_labels);
    RUN(test_values);
    return check_report();
}
