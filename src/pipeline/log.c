/* Logging and the aborting allocators. */
#include "pipeline/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static pc_log_level g_level = PC_LOG_INFO;
static const char *const level_names[] = {"debug", "info", "warn", "error"};

void pc_log_set_level(pc_log_level lvl)
{
    g_level = lvl;
}

int pc_log_parse_level(const char *s, pc_log_level *out)
{
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(s, level_names[i]) == 0) {
            *out = (pc_log_level)i;
            return 0;
        }
    }
    if (strcasecmp(s, "warning") == 0) {
        *out = PC_LOG_WARN;
        return 0;
    }
    return -1;
}

void pc_log(pc_log_level lvl, const char *who, const char *fmt, ...)
{
    if (lvl < g_level) return;
    char line[2048];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof line,
                     "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s %s: ", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     ts.tv_nsec / 1000000, level_names[lvl], who ? who : "profcol");
    va_list ap;
    va_start(ap, fmt);
    if (n < (int)sizeof line) vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    /* one write per line so concurrent lines never interleave */
    size_t len = strnlen(line, sizeof line - 2);
    line[len++] = '\n';
    fwrite(line, 1, len, stderr);
}

static void oom(size_t n)
{
    fprintf(stderr, "profcol: out of memory allocating %zu bytes\n", n);
    abort();
}

void *pc_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) oom(n);
    return p;
}

void *pc_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) oom(n * size);
    return p;
}

void *pc_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) oom(n);
    return q;
}

char *pc_xstrdup(const char *s)
{
    char *d = strdup(s ? s : "");
    if (!d) oom(strlen(s));
    return d;
}
