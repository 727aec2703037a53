/* Prometheus metric and label names (formats/prom.h): the Collector's normalisation
 * (pkg/translator/prometheus, /work/shared/spec/metrics.md §3): the name's letters and digits
 * joined by '_', the UCUM unit spelled out and appended, "_total" on monotonic sums, "_ratio" on
 * gauges of unit "1". */
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "formats/prom.h"

typedef struct unit_name {
    const char *ucum, *prom;
} unit_name;

static const unit_name units[] = {
    {"d", "days"},
    {"h", "hours"},
    {"min", "minutes"},
    {"s", "seconds"},
    {"ms", "milliseconds"},
    {"us", "microseconds"},
    {"ns", "nanoseconds"},
    {"By", "bytes"},
    {"KiBy", "kibibytes"},
    {"MiBy", "mebibytes"},
    {"GiBy", "gibibytes"},
    {"TiBy", "tebibytes"},
    {"KBy", "kilobytes"},
    {"MBy", "megabytes"},
    {"GBy", "gigabytes"},
    {"TBy", "terabytes"},
    {"m", "meters"},
    {"V", "volts"},
    {"A", "amperes"},
    {"J", "joules"},
    {"W", "watts"},
    {"g", "grams"},
    {"Cel", "celsius"},
    {"Hz", "hertz"},
    {"1", ""},
    {"%", "percent"},
    {NULL, NULL},
};

static const unit_name per_units[] = {
    {"s", "second"}, {"m", "minute"}, {"h", "hour"}, {"d", "day"},
    {"w", "week"},   {"mo", "month"}, {"y", "year"}, {NULL, NULL},
};

static const char *unit_lookup(const unit_name *t, const char *u)
{
    for (; t->ucum; t++)
        if (strcmp(t->ucum, u) == 0) return t->prom;
    return u;
}

static char *dupn(const char *s, size_t n)
{
    char *p = pc_xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

#define MAX_TOKENS 64

typedef struct tokens {
    size_t n;
    char *v[MAX_TOKENS];
} tokens;

/* The runs of ASCII letters and digits of s[0..len), each malloc'd. */
static void split(tokens *t, const char *s, size_t len)
{
    size_t i = 0;
    while (i < len && t->n < MAX_TOKENS) {
        while (i < len && !isalnum((unsigned char)s[i]))
            i++;
        size_t j = i;
        while (j < len && isalnum((unsigned char)s[j]))
            j++;
        if (j > i) t->v[t->n++] = dupn(s + i, j - i);
        i = j;
    }
}

static bool has(const tokens *t, const char *w)
{
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->v[i], w) == 0) return true;
    return false;
}

/* Append the tokens of w (a unit spelled out) unless the name already has it. */
static void add_unit(tokens *t, const char *prefix, const char *w)
{
    tokens u = {0};
    split(&u, w, strlen(w));
    if (u.n) {
        pc_buf b = {0};
        if (prefix) pc_buf_printf(&b, "%s_", prefix);
        for (size_t i = 0; i < u.n; i++)
            pc_buf_printf(&b, "%s%s", i ? "_" : "", u.v[i]);
        pc_buf_append(&b, "", 1);
        if (!has(t, (char *)b.data) && t->n < MAX_TOKENS)
            t->v[t->n++] = (char *)b.data;
        else
            pc_buf_free(&b);
    }
    for (size_t i = 0; i < u.n; i++)
        free(u.v[i]);
}

static void add_units(tokens *t, const char *unit)
{
    const char *slash = strchr(unit, '/');
    size_t mlen = slash ? (size_t)(slash - unit) : strlen(unit);
    char *main_u = dupn(unit, mlen);
    if (*main_u && !strpbrk(main_u, "{}")) add_unit(t, NULL, unit_lookup(units, main_u));
    free(main_u);
    if (slash && slash[1] && !strpbrk(slash + 1, "{}"))
        add_unit(t, "per", unit_lookup(per_units, slash + 1));
}

char *pc_prom_metric_name(const char *ns, bool suffixes, const char *name, const char *unit,
                          pc_prom_type type, bool gauge_from_metric)
{
    tokens t = {0};
    split(&t, name, strlen(name));
    if (!t.n) return pc_xstrdup(""); /* not a name a unit alone could make */
    if (suffixes) {
        add_units(&t, unit ? unit : "");
        if (type == PC_PROM_COUNTER) {
            size_t k = 0;
            for (size_t i = 0; i < t.n; i++) {
                if (strcmp(t.v[i], "total") == 0)
                    free(t.v[i]);
                else
                    t.v[k++] = t.v[i];
            }
            t.n = k;
            if (t.n < MAX_TOKENS) t.v[t.n++] = pc_xstrdup("total");
        }
        if (gauge_from_metric && unit && strcmp(unit, "1") == 0 && !has(&t, "ratio") &&
            t.n < MAX_TOKENS)
            t.v[t.n++] = pc_xstrdup("ratio");
    }
    pc_buf b = {0};
    if (ns && *ns) pc_buf_printf(&b, "%s_", ns);
    for (size_t i = 0; i < t.n; i++) {
        pc_buf_printf(&b, "%s%s", i ? "_" : "", t.v[i]);
        free(t.v[i]);
    }
    pc_buf_append(&b, "", 1);
    char *s = (char *)b.data;
    if (isdigit((unsigned char)s[0])) {
        char *p = pc_xmalloc(b.len + 1);
        p[0] = '_';
        memcpy(p + 1, s, b.len);
        free(s);
        s = p;
    }
    return s;
}

char *pc_prom_label_name(const char *key)
{
    size_t n = strlen(key);
    /* "__" names are Prometheus' own (__name__ would rename the series) */
    bool digit = n && (isdigit((unsigned char)key[0]) || (key[0] == '_' && n > 1 && key[1] == '_'));
    char *s = pc_xmalloc(n + 5);
    size_t o = 0;
    if (digit) memcpy(s, "key_", 4), o = 4;
    for (size_t i = 0; i < n; i++)
        s[o++] = isalnum((unsigned char)key[i]) ? key[i] : '_';
    s[o] = 0;
    return s;
}

bool pc_prom_value_text(const pc_anyvalue *v, char *buf, size_t n, const char **out)
{
    if (!v) return false;
    switch (v->value_case) {
    case PC_AV_STRING: *out = pc_nz(v->string_value); return true;
    case PC_AV_BOOL: *out = v->bool_value ? "true" : "false"; return true;
    case PC_AV_INT: snprintf(buf, n, "%" PRId64, v->int_value); break;
    case PC_AV_DOUBLE: pc_prom_fmt_double(buf, n, v->double_value); break;
    default: return false;
    }
    *out = buf;
    return true;
}

void pc_prom_labels_add(pc_prom_labels *l, const char *name, const char *val)
{
    if (!val || !*val || !name || !*name) return; /* an empty value is an absent label */
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 8;
        l->names = pc_xrealloc(l->names, l->cap * sizeof *l->names);
        l->vals = pc_xrealloc(l->vals, l->cap * sizeof *l->vals);
    }
    l->names[l->n] = pc_prom_label_name(name);
    l->vals[l->n++] = pc_xstrdup(val);
}

void pc_prom_labels_add_attrs(pc_prom_labels *l, pc_keyvalue *const *kv, size_t n)
{
    char buf[64];
    for (size_t i = 0; i < n; i++) {
        const char *v;
        if (kv[i] && kv[i]->key && pc_prom_value_text(kv[i]->value, buf, sizeof buf, &v))
            pc_prom_labels_add(l, kv[i]->key, v);
    }
}

static void escape_value(pc_buf *b, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\')
            pc_buf_append(b, "\\\\", 2);
        else if (*v == '"')
            pc_buf_append(b, "\\\"", 2);
        else if (*v == '\n')
            pc_buf_append(b, "\\n", 2);
        else
            pc_buf_append(b, v, 1);
    }
}

/* Insertion sort by name, stable so that duplicates join in the order they came. */
void pc_prom_labels_sort(pc_prom_labels *l)
{
    for (size_t i = 1; i < l->n; i++) {
        char *n = l->names[i], *v = l->vals[i];
        size_t j = i;
        for (; j > 0 && strcmp(l->names[j - 1], n) > 0; j--) {
            l->names[j] = l->names[j - 1];
            l->vals[j] = l->vals[j - 1];
        }
        l->names[j] = n;
        l->vals[j] = v;
    }
}

char *pc_prom_labels_join(pc_prom_labels *l)
{
    pc_prom_labels_sort(l);
    pc_buf b = {0};
    for (size_t i = 0; i < l->n; i++) {
        bool dup = i > 0 && strcmp(l->names[i - 1], l->names[i]) == 0;
        if (dup) {
            pc_buf_append(&b, ";", 1);
        } else {
            if (i) pc_buf_append(&b, "\"", 1);
            pc_buf_printf(&b, "%s%s=\"", i ? "," : "", l->names[i]);
        }
        escape_value(&b, l->vals[i]);
    }
    if (l->n) pc_buf_append(&b, "\"", 1);
    pc_buf_append(&b, "", 1);
    return (char *)b.data;
}

void pc_prom_labels_free(pc_prom_labels *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->names[i]);
        free(l->vals[i]);
    }
    free(l->names);
    free(l->vals);
    *l = (pc_prom_labels){0};
}

/* The shortest of %.15g..%.17g that reads back as v (a whole number has no decimal point). */
void pc_prom_fmt_double(char *buf, size_t n, double v)
{
    if (isnan(v)) {
        snprintf(buf, n, "NaN");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, n, "%s", v > 0 ? "+Inf" : "-Inf");
        return;
    }
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) return;
    }
}

bool pc_prom_is_service_key(const char *k)
{
    return strcmp(k, "service.name") == 0 || strcmp(k, "service.namespace") == 0 ||
           strcmp(k, "service.instance.id") == 0;
}

/* job (service.namespace/service.name) and instance (service.instance.id). */
void pc_prom_job_instance(const pc_resource *r, pc_prom_labels *l)
{
    const char *name = r ? pc_resource_attr_str(NULL, r, "service.name") : NULL;
    const char *ns = r ? pc_resource_attr_str(NULL, r, "service.namespace") : NULL;
    const char *inst = r ? pc_resource_attr_str(NULL, r, "service.instance.id") : NULL;
    if (name && ns && *ns) {
        pc_buf b = {0};
        pc_buf_printf(&b, "%s/%s", ns, name);
        pc_buf_append(&b, "", 1);
        pc_prom_labels_add(l, "job", (char *)b.data);
        pc_buf_free(&b);
    } else {
        pc_prom_labels_add(l, "job", name);
    }
    pc_prom_labels_add(l, "instance", inst);
}

void pc_prom_labels_copy(pc_prom_labels *to, const pc_prom_labels *from, size_t extra)
{
    to->n = from->n;
    to->cap = from->n + extra + 1;
    to->names = pc_xmalloc(to->cap * sizeof(char *));
    to->vals = pc_xmalloc(to->cap * sizeof(char *));
    for (size_t i = 0; i < from->n; i++) {
        to->names[i] = pc_xstrdup(from->names[i]);
        to->vals[i] = pc_xstrdup(from->vals[i]);
    }
}

void pc_prom_scope_labels(const pc_scope *scope, const char *schema_url, pc_prom_labels *l)
{
    pc_prom_labels_add(l, "otel_scope_schema_url", schema_url);
    if (!scope) return;
    pc_prom_labels_add(l, "otel_scope_name", scope->name);
    pc_prom_labels_add(l, "otel_scope_version", scope->version);
    char buf[64];
    for (size_t i = 0; i < scope->n_attributes; i++) {
        const pc_keyvalue *kv = scope->attributes[i];
        const char *v;
        if (!kv || !kv->key || !pc_prom_value_text(kv->value, buf, sizeof buf, &v)) continue;
        size_t n = strlen(kv->key);
        char *k = pc_xmalloc(n + 12);
        memcpy(k, "otel_scope_", 11);
        memcpy(k + 11, kv->key, n + 1);
        pc_prom_labels_add(l, k, v);
        free(k);
    }
}

void pc_prom_resource_labels(const pc_resource *r, char *const *keys, char *const *vals, size_t n,
                             bool attrs, pc_prom_labels *l)
{
    for (size_t i = 0; i < n; i++)
        pc_prom_labels_add(l, keys[i], vals[i]);
    pc_prom_job_instance(r, l);
    for (size_t i = 0; attrs && r && i < r->n_attributes; i++)
        if (r->attributes[i] && r->attributes[i]->key &&
            !pc_prom_is_service_key(r->attributes[i]->key))
            pc_prom_labels_add_attrs(l, &r->attributes[i], 1);
}

bool pc_prom_label_name_ok(const char *s)
{
    if (!*s || (s[0] >= '0' && s[0] <= '9') || (s[0] == '_' && s[1] == '_')) return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_'))
            return false;
    return true;
}

void pc_prom_each_metric(const Opentelemetry__Proto__Metrics__V1__ResourceMetrics *rm,
                         char *const *keys, char *const *vals, size_t n, bool attrs,
                         pc_prom_metric_fn fn, void *arg)
{
    pc_prom_labels res = {0};
    pc_prom_resource_labels(rm->resource, keys, vals, n, attrs, &res);
    for (size_t s = 0; s < rm->n_scope_metrics; s++) {
        const Opentelemetry__Proto__Metrics__V1__ScopeMetrics *sm = rm->scope_metrics[s];
        if (!sm) continue;
        pc_prom_labels l;
        pc_prom_labels_copy(&l, &res, 2);
        pc_prom_scope_labels(sm->scope, sm->schema_url, &l);
        for (size_t m = 0; m < sm->n_metrics; m++)
            if (sm->metrics[m]) fn(sm->metrics[m], &l, arg);
        pc_prom_labels_free(&l);
    }
    pc_prom_labels_free(&res);
}
