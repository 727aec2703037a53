/* Prometheus names and label sets from OTLP metrics, as the Collector's translator makes them
 * (/work/shared/spec/metrics.md §2, §3): what the prometheus exporter (scraped) and the
 * prometheusremotewrite exporter (pushed) share. */
#ifndef PC_FORMATS_PROM_H
#define PC_FORMATS_PROM_H

#include <stdbool.h>
#include <stddef.h>

#include "pdata/pdata.h"

typedef enum { PC_PROM_GAUGE, PC_PROM_COUNTER, PC_PROM_HISTOGRAM, PC_PROM_SUMMARY } pc_prom_type;

/* The exposed name of a metric: "<ns>_" (ns NULL or "": none), the name's letters and digits
 * joined by '_', with suffixes the unit spelled out, "_total" on counters and "_ratio" on
 * gauges of unit "1" (gauge_from_metric: an OTLP Gauge, not an up-down sum); "" when the name
 * has no letter or digit. malloc'd. */
char *pc_prom_metric_name(const char *ns, bool suffixes, const char *name, const char *unit,
                          pc_prom_type type, bool gauge_from_metric);
/* A label name: invalid characters to '_', a leading digit or "__" gets "key_"; malloc'd. */
char *pc_prom_label_name(const char *key);
/* An attribute value as a label value (strings, bools, ints, doubles); false for other kinds. */
bool pc_prom_value_text(const pc_anyvalue *v, char *buf, size_t n, const char **out);
/* A sample value as the formats want it (shortest exact, NaN, +Inf, -Inf). */
void pc_prom_fmt_double(char *buf, size_t n, double v);

/* A label set under construction: pairs, then sorted and joined. */
typedef struct pc_prom_labels {
    size_t n, cap;
    char **names; /* malloc'd, sanitised */
    char **vals;  /* malloc'd */
} pc_prom_labels;
void pc_prom_labels_add(pc_prom_labels *l, const char *name, const char *val); /* name raw */
void pc_prom_labels_add_attrs(pc_prom_labels *l, pc_keyvalue *const *kv, size_t n);
/* A copy of from with room for extra more. */
void pc_prom_labels_copy(pc_prom_labels *to, const pc_prom_labels *from, size_t extra);
/* Sorted by name (stable: duplicates keep their order). */
void pc_prom_labels_sort(pc_prom_labels *l);
/* Sorted, duplicates joined with ';', empty values left out: a="x",b="y" (escaped). */
char *pc_prom_labels_join(pc_prom_labels *l);
void pc_prom_labels_free(pc_prom_labels *l);

/* job (service.namespace/service.name) and instance (service.instance.id) of a resource. */
void pc_prom_job_instance(const pc_resource *r, pc_prom_labels *l);
/* The labels every series of a resource carries: the n configured ones (const_labels,
 * external_labels), job and instance, and with attrs every other resource attribute
 * (resource_to_telemetry_conversion). r may be NULL. */
void pc_prom_resource_labels(const pc_resource *r, char *const *keys, char *const *vals, size_t n,
                             bool attrs, pc_prom_labels *l);
/* A label name Prometheus takes as it is and does not reserve ("__" names are its own). */
bool pc_prom_label_name_ok(const char *s);
/* otel_scope_name, otel_scope_version, otel_scope_schema_url and otel_scope_<key> for each
 * scope attribute (the Collector's prometheus exporter, spec §3); scope may be NULL. */
void pc_prom_scope_labels(const pc_scope *scope, const char *schema_url, pc_prom_labels *l);
/* Every metric of one ResourceMetrics with the labels its series carry: the resource's
 * (pc_prom_resource_labels with keys, vals, n and attrs) and its scope's. NULL scopes and metrics
 * are skipped. */
typedef void (*pc_prom_metric_fn)(const Opentelemetry__Proto__Metrics__V1__Metric *m,
                                  pc_prom_labels *labels, void *arg);
void pc_prom_each_metric(const Opentelemetry__Proto__Metrics__V1__ResourceMetrics *rm,
                         char *const *keys, char *const *vals, size_t n, bool attrs,
                         pc_prom_metric_fn fn, void *arg);
/* service.name, service.namespace, service.instance.id: job and instance, not target_info. */
bool pc_prom_is_service_key(const char *key);

#endif
