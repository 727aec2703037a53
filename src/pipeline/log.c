/* Logging and the aborting allocators. */
#include "pipeline/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static pc_log_level g_level = PC_LOG_INFO;
static int g_json;
static const char *const level_names[] = {"debug", "info", "warn", "error"};

void pc_log_set_level(pc_log_level lvl)
{
    g_level = lvl;
}

void pc_log_set_json(int json)
{
    g_json = json;
}

/* s as the inside of a JSON string, within room bytes (control characters escaped). */
static size_t json_escape(char *out, size_t room, const char *s)
{
    size_t n = 0;
    for (; *s && n + 7 < room; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') {
            out[n++] = '\\';
            out[n++] = (char)ch;
        } else if (ch < 0x20) {
            n += (size_t)snprintf(out + n, room - n, "\\u%04x", ch);
        } else {
            out[n++] = (char)ch;
        }
    }
    out[n] = 0;
    return n;
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
    if (g_json) {
        char msg[1600], who_e[200];
        vsnprintf(msg, sizeof msg, fmt, ap);
        json_escape(who_e, sizeof who_e, who ? who : "profcol");
        n = snprintf(line, sizeof line,
                     "{\"level\":\"%s\",\"ts\":\"%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ\","
                     "\"component\":\"%s\",\"msg\":\"",
                     level_names[lvl], tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                     tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, who_e);
        if (n > 0 && n < (int)sizeof line - 4) {
            n += (int)json_escape(line + n, sizeof line - 4 - (size_t)n, msg);
            memcpy(line + n, "\"}", 3);
        }
    } else if (n < (int)sizeof line) {
        vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    }
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
