/* The prometheus exporter's text: exposition format 0.0.4 or OpenMetrics 1.0
 * (/work/shared/spec/metrics.md §2). Series come sorted by family, so each family is one
 * uninterrupted group, HELP and TYPE first. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exporters/prometheus/model.h"

static const char *type_name(pc_prom_type t)
{
    switch (t) {
    case PC_PROM_COUNTER: return "counter";
    case PC_PROM_HISTOGRAM: return "histogram";
    case PC_PROM_SUMMARY: return "summary";
    default: return "gauge";
    }
}

static void help_text(pc_buf *out, const char *h, bool om)
{
    for (; *h; h++) {
        if (*h == '\\')
            pc_buf_append(out, "\\\\", 2);
        else if (*h == '\n')
            pc_buf_append(out, "\\n", 2);
        else if (*h == '"' && om)
            pc_buf_append(out, "\\\"", 2);
        else
            pc_buf_append(out, h, 1);
    }
}

typedef struct line_ctx {
    pc_buf *out;
    bool om, ts;
} line_ctx;

/* name{labels[,extra]} value [timestamp] */
static void sample(const line_ctx *lc, const prom_series *s, const char *name, const char *suffix,
                   const char *extra, double v)
{
    char num[64];
    pc_prom_fmt_double(num, sizeof num, v);
    pc_buf_printf(lc->out, "%s%s", name, suffix);
    if (*s->labels || extra)
        pc_buf_printf(lc->out, "{%s%s%s}", s->labels, *s->labels && extra ? "," : "",
                      extra ? extra : "");
    pc_buf_printf(lc->out, " %s", num);
    if (lc->ts && s->time_ns) {
        if (lc->om) /* seconds */
            pc_buf_printf(lc->out, " %" PRIu64 ".%03" PRIu64, s->time_ns / 1000000000,
                          s->time_ns / 1000000 % 1000);
        else /* milliseconds */
            pc_buf_printf(lc->out, " %" PRIu64, s->time_ns / 1000000);
    }
    pc_buf_append(lc->out, "\n", 1);
}

static void histogram(const line_ctx *lc, const prom_series *s, const char *name)
{
    char le[80], num[64];
    uint64_t cum = 0;
    for (size_t i = 0; i < s->n; i++) {
        cum += s->counts[i];
        pc_prom_fmt_double(num, sizeof num, s->bounds[i]);
        snprintf(le, sizeof le, "le=\"%s\"", num);
        sample(lc, s, name, "_bucket", le, (double)cum);
    }
    /* +Inf is the count, whatever the buckets held */
    sample(lc, s, name, "_bucket", "le=\"+Inf\"", (double)s->count);
    sample(lc, s, name, "_sum", NULL, s->sum);
    sample(lc, s, name, "_count", NULL, (double)s->count);
}

static void summary(const line_ctx *lc, const prom_series *s, const char *name)
{
    char q[80], num[64];
    for (size_t i = 0; i < s->n; i++) {
        pc_prom_fmt_double(num, sizeof num, s->bounds[i]);
        snprintf(q, sizeof q, "quantile=\"%s\"", num);
        sample(lc, s, name, "", q, s->qvals[i]);
    }
    sample(lc, s, name, "_sum", NULL, s->sum);
    sample(lc, s, name, "_count", NULL, (double)s->count);
}

/* The family's name in the TYPE line: OpenMetrics names a counter without its _total. */
static void family_name(const prom_family *f, bool om, char *buf, size_t n)
{
    size_t len = strlen(f->name);
    if (om && f->type == PC_PROM_COUNTER && len > 6 && strcmp(f->name + len - 6, "_total") == 0)
        len -= 6;
    snprintf(buf, n, "%.*s", (int)len, f->name);
}

static void header(const line_ctx *lc, const prom_family *f, const char *fam)
{
    if (lc->om) pc_buf_printf(lc->out, "# TYPE %s %s\n", fam, type_name(f->type));
    if (*f->help) {
        pc_buf_printf(lc->out, "# HELP %s ", fam);
        help_text(lc->out, f->help, lc->om);
        pc_buf_append(lc->out, "\n", 1);
    }
    if (!lc->om) pc_buf_printf(lc->out, "# TYPE %s %s\n", fam, type_name(f->type));
}

void prom_render_series(pc_buf *out, prom_series *const *v, size_t n, bool om, bool timestamps)
{
    line_ctx lc = {out, om, timestamps};
    const prom_family *cur = NULL;
    char fam[1024];
    for (size_t i = 0; i < n; i++) {
        const prom_series *s = v[i];
        if (s->fam != cur) {
            cur = s->fam;
            family_name(cur, om, fam, sizeof fam);
            header(&lc, cur, fam);
        }
        switch (cur->type) {
        case PC_PROM_HISTOGRAM: histogram(&lc, s, fam); break;
        case PC_PROM_SUMMARY: summary(&lc, s, fam); break;
        case PC_PROM_COUNTER: sample(&lc, s, fam, om ? "_total" : "", NULL, s->value); break;
        default: sample(&lc, s, fam, "", NULL, s->value);
        }
    }
    if (om) pc_buf_printf(out, "# EOF\n");
}
