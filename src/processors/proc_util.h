/* Shared by the resource, redaction and tracelink processors (header only):
 * - running the payload-sized part of consume on the thread pool (ARCHITECTURE.md §4) while the
 * loop thread alone touches component state (counters, the in-flight count shutdown waits for);
 * - reading attribute keys and string values in both the plain and the profiles-only
 *   key_strindex / string_value_strindex forms. */
#ifndef PC_PROC_UTIL_H
#define PC_PROC_UTIL_H

#include <regex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sdk/component.h"
#include "sdk/telemetry.h"

/* ---- thread-pool jobs ------------------------------------------------------------------- */

typedef struct pc_proc_async {
    size_t inflight;          /* jobs queued and not yet forwarded */
    pc_shutdown_done on_down; /* shutdown waiting for inflight to reach 0 */
} pc_proc_async;

typedef struct pc_proc_job pc_proc_job;
struct pc_proc_job {
    uv_work_t work;
    pc_component *c;
    pc_proc_async *as;
    pc_batch *b; /* the job's reference; run may replace it (copy-on-write) */
    pc_done_fn done;
    void *arg;
    void (*run)(pc_proc_job *j);   /* thread pool: the payload-sized work */
    void (*after)(pc_proc_job *j); /* loop thread: fold the job's stats into the counters */
};

static inline void pc_proc_job_work_(uv_work_t *w)
{
    pc_proc_job *j = w->data;
    j->run(j);
}

static inline void pc_proc_job_after_(uv_work_t *w, int status)
{
    pc_proc_job *j = w->data;
    (void)status; /* a cancelled job (loop closing) still forwards its batch */
    pc_component *c = j->c;
    pc_proc_async *as = j->as;
    if (j->after) j->after(j);
    pc_consume(c->next, j->b, j->done, j->arg);
    free(j); /* j is the first member of the processor's job struct */
    if (--as->inflight == 0 && as->on_down) {
        pc_shutdown_done down = as->on_down;
        as->on_down = NULL;
        down(c);
    }
}

/* Queue j (malloc'd, with pc_proc_job as its first member) and count it in flight. */
static inline void pc_proc_job_submit(pc_proc_job *j)
{
    j->as->inflight++;
    j->work.data = j;
    uv_queue_work(j->c->loop, &j->work, pc_proc_job_work_, pc_proc_job_after_);
}

/* Shutdown: done once every queued job has passed its batch on. */
static inline void pc_proc_async_shutdown(pc_proc_async *as, pc_component *c, pc_shutdown_done done)
{
    if (as->inflight == 0)
        done(c);
    else
        as->on_down = done;
}

/* ---- counters ----------------------------------------------------------------------------- */

/* What a processor counted so far, for self-metrics and tests; read on the loop thread. */
typedef struct pc_proc_counter {
    const char *name;
    uint64_t value;
} pc_proc_counter;

size_t pc_resource_counters(const pc_component *c, pc_proc_counter *out, size_t max);
size_t pc_redaction_counters(const pc_component *c, pc_proc_counter *out, size_t max);
size_t pc_tracelink_counters(const pc_component *c, pc_proc_counter *out, size_t max);

static inline size_t pc_proc_counters_copy(const pc_proc_counter *all, size_t n,
                                           pc_proc_counter *out, size_t max)
{
    for (size_t i = 0; i < n && i < max; i++)
        out[i] = all[i];
    return n;
}

/* Register one of c's counters as a self-metric (unregister with pc_metric_unregister(c) in
 * destroy). Processor ids read "type[/name] in pipeline"; the labels split them. */
static inline void pc_proc_metric(pc_component *c, const char *name, const char *help,
                                  const uint64_t *value)
{
    char labels[300];
    const char *in = strstr(c->id, " in ");
    if (in)
        snprintf(labels, sizeof labels, "processor=\"%.*s\",pipeline=\"%s\"", (int)(in - c->id),
                 c->id, in + 4);
    else
        snprintf(labels, sizeof labels, "processor=\"%s\"", c->id);
    pc_metric_u64(c, name, help, PC_METRIC_COUNTER, labels, value);
}

/* The value of one named counter (0 if absent). */
static inline uint64_t pc_proc_counter_get(const pc_proc_counter *v, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i].name, name) == 0) return v[i].value;
    return 0;
}

/* ---- attribute forms -------------------------------------------------------------------- */

#define PC_AV_STRING   OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE
#define PC_AV_BOOL     OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE
#define PC_AV_INT      OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE
#define PC_AV_DOUBLE   OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_DOUBLE_VALUE
#define PC_AV_BYTES    OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BYTES_VALUE
#define PC_AV_STRINDEX OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE_STRINDEX

/* A dictionary attribute by index; NULL for 0 or out of range. */
static inline const pc_kvu *pc_dict_attr_at(const pc_dictionary *d, int32_t idx)
{
    if (!d || idx <= 0 || (size_t)idx >= d->n_attribute_table) return NULL;
    return d->attribute_table[idx];
}

/* ---- regular expressions ---------------------------------------------------------------- */

/* Compile a Collector-style (Go RE2 flavoured) pattern as a POSIX extended regex. POSIX has no
 * named groups, so "(?P<name>...)" and "(?<name>...)" are rewritten to plain "(...)" and the names
 * remembered by group number: (*names)[i] names group i + 1 (NULL when unnamed). A leading "(?i)"
 * adds REG_ICASE. Other "(?" forms are refused. names may be NULL when the caller needs none.
 * Returns 0, or PC_EINVAL with a message in e (nothing to free then). */
static inline int pc_regex_compile(regex_t *re, const char *pat, int flags, char ***names,
                                   size_t *n_names, pc_error *e)
{
    size_t len = strlen(pat), o = 0, group = 0, cap = 0;
    char *out = malloc(len + 1);
    char **nm = NULL;
    int in_bracket = 0;
    if (!out) abort();
    if (strncmp(pat, "(?i)", 4) == 0) {
        flags |= REG_ICASE;
        pat += 4;
    }
    for (const char *p = pat; *p; p++) {
        if (in_bracket) {
            /* "[:alpha:]" inside a bracket expression is copied whole */
            if (p[0] == '[' && (p[1] == ':' || p[1] == '.' || p[1] == '=')) {
                const char *end = strchr(p + 2, p[1]);
                if (end && end[1] == ']') {
                    size_t n = (size_t)(end + 2 - p);
                    memcpy(out + o, p, n);
                    o += n;
                    p = end + 1;
                    continue;
                }
            }
            if (*p == ']') in_bracket = 0;
            out[o++] = *p;
            continue;
        }
        if (*p == '\\' && p[1]) {
            out[o++] = *p++;
            out[o++] = *p;
            continue;
        }
        if (*p == '[') {
            in_bracket = 1;
            out[o++] = *p;
            if (p[1] == '^') out[o++] = *++p;
            if (p[1] == ']') out[o++] = *++p; /* a leading ']' is literal */
            continue;
        }
        if (*p != '(') {
            out[o++] = *p;
            continue;
        }
        group++;
        out[o++] = '(';
        if (p[1] != '?') continue;
        const char *name = NULL, *end = NULL;
        if (p[2] == 'P' && p[3] == '<')
            name = p + 4;
        else if (p[2] == '<')
            name = p + 3;
        if (name) end = strchr(name, '>');
        if (!name || !end || end == name) {
            pc_error_set(e, PC_EINVAL,
                         "unsupported group syntax \"%.8s\" (POSIX extended regex: use (...) or "
                         "(?P<name>...))",
                         p);
            goto fail;
        }
        if (group > cap) {
            size_t ncap = cap ? cap * 2 : 8;
            while (ncap < group)
                ncap *= 2;
            nm = realloc(nm, ncap * sizeof *nm);
            if (!nm) abort();
            memset(nm + cap, 0, (ncap - cap) * sizeof *nm);
            cap = ncap;
        }
        nm[group - 1] = strndup(name, (size_t)(end - name));
        p = end;
    }
    out[o] = 0;
    int rc = regcomp(re, out, flags | REG_EXTENDED);
    if (rc) {
        char msg[160];
        regerror(rc, re, msg, sizeof msg);
        pc_error_set(e, PC_EINVAL, "invalid regular expression \"%s\": %s", pat, msg);
        goto fail;
    }
    free(out);
    if (names) {
        /* one slot per group (regcomp counted them the same way) */
        size_t n = re->re_nsub;
        char **all = calloc(n ? n : 1, sizeof *all);
        if (!all) abort();
        for (size_t i = 0; i < n && i < cap; i++)
            all[i] = nm[i], nm[i] = NULL;
        *names = all;
        *n_names = n;
    }
    for (size_t i = 0; i < cap; i++)
        free(nm[i]);
    free(nm);
    return 0;
fail:
    free(out);
    for (size_t i = 0; i < cap; i++)
        free(nm[i]);
    free(nm);
    return PC_EINVAL;
}

static inline void pc_regex_names_free(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

#endif
