/* Logging (log.h). */
#include "base/log.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/buf.h"
#include "base/err.h"

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

int pc_log_json(void)
{
    return g_json;
}

/* "YYYY-MM-DDTHH:MM:SS.mmmZ" of now. */
static void timestamp(char *out, size_t n)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    int k =
        snprintf(out, n, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ts.tv_nsec / 1000000) % 1000);
    if (k < 0 || (size_t)k >= n) snprintf(out, n, "?"); /* a year of more than 4 digits */
}

static void buf_json_escaped(pc_buf *out, const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\')
            pc_buf_printf(out, "\\%c", ch);
        else if (ch == '\n')
            pc_buf_append(out, "\\n", 2);
        else if (ch < 0x20)
            pc_buf_printf(out, "\\u%04x", ch);
        else
            pc_buf_append(out, (const char *)&s[i], 1);
    }
}

void pc_log_record(pc_buf *out, pc_log_level lvl, const char *who, const char *msg, size_t len)
{
    if (!g_json) {
        pc_buf_append(out, msg, len);
        return;
    }
    char ts[40];
    timestamp(ts, sizeof ts);
    pc_buf_printf(out, "{\"level\":\"%s\",\"ts\":\"%s\",\"component\":\"", level_names[lvl], ts);
    buf_json_escaped(out, who ? who : "profcol", strlen(who ? who : "profcol"));
    pc_buf_append(out, "\",\"msg\":\"", 9);
    while (len && msg[len - 1] == '\n') /* the record is the line */
        len--;
    buf_json_escaped(out, msg, len);
    pc_buf_append(out, "\"}\n", 3);
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
    return PC_EINVAL;
}

/* One line: timestamp, level, who, the message, then suffix (may be ""); as text, or as one
 * JSON object with service::telemetry::logs::encoding json. */
static void vlog(pc_log_level lvl, const char *who, const char *suffix, const char *fmt, va_list ap)
{
    char line[2048], ts[40];
    timestamp(ts, sizeof ts);
    size_t len;
    if (g_json) {
        char msg[1600], who_e[200];
        int m = vsnprintf(msg, sizeof msg, fmt, ap);
        if (m >= 0 && (size_t)m < sizeof msg && *suffix)
            snprintf(msg + m, sizeof msg - (size_t)m, "%s", suffix);
        pc_redact_userinfo(msg, sizeof msg);
        json_escape(who_e, sizeof who_e, who ? who : "profcol");
        int n = snprintf(line, sizeof line,
                         "{\"level\":\"%s\",\"ts\":\"%s\",\"component\":\"%s\",\"msg\":\"",
                         level_names[lvl], ts, who_e);
        if (n > 0 && n < (int)sizeof line - 4) {
            n += (int)json_escape(line + n, sizeof line - 4 - (size_t)n, msg);
            memcpy(line + n, "\"}", 3);
        }
        len = strnlen(line, sizeof line - 2);
    } else {
        int n = snprintf(line, sizeof line, "%s %-5s %s: ", ts, level_names[lvl],
                         who ? who : "profcol");
        if (n < (int)sizeof line) vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
        len = strnlen(line, sizeof line - 2);
        if (*suffix) {
            snprintf(line + len, sizeof line - 1 - len, "%s", suffix);
            len = strnlen(line, sizeof line - 2);
        }
        pc_redact_userinfo(line, sizeof line - 1);
        len = strnlen(line, sizeof line - 2);
    }
    /* one write per line so concurrent lines never interleave */
    line[len++] = '\n';
    fwrite(line, 1, len, stderr);
}

void pc_log(pc_log_level lvl, const char *who, const char *fmt, ...)
{
    if (lvl < g_level) return;
    va_list ap;
    va_start(ap, fmt);
    vlog(lvl, who, "", fmt, ap);
    va_end(ap);
}

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* " (N more in the last 10s)", or "" when nothing was suppressed. */
static void suppressed_note(char *out, size_t n, uint64_t count, uint64_t ms)
{
    if (!count)
        out[0] = 0;
    else if (ms < 10000)
        snprintf(out, n, " (%llu more in the last %.1fs)", (unsigned long long)count, ms / 1e3);
    else
        snprintf(out, n, " (%llu more in the last %llus)", (unsigned long long)count,
                 (unsigned long long)(ms / 1000));
}

void pc_log_limited(pc_log_limiter *l, pc_log_level lvl, const char *who, const char *fmt, ...)
{
    if (lvl < g_level) return;
    uint64_t now = mono_ms(), every = l->interval_ms ? l->interval_ms : 10000;
    if (l->last_ms && now - l->last_ms < every) {
        l->suppressed++;
        return;
    }
    char note[96];
    suppressed_note(note, sizeof note, l->suppressed, now - l->last_ms);
    va_list ap;
    va_start(ap, fmt);
    vlog(lvl, who, note, fmt, ap);
    va_end(ap);
    l->suppressed = 0;
    l->last_ms = now ? now : 1;
}

__attribute__((format(printf, 3, 4))) static void log_plain(pc_log_level lvl, const char *who,
                                                            const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(lvl, who, "", fmt, ap);
    va_end(ap);
}

void pc_log_limiter_flush(pc_log_limiter *l, pc_log_level lvl, const char *who, const char *what)
{
    if (lvl < g_level || !l->suppressed) return;
    uint64_t now = mono_ms();
    char note[96];
    suppressed_note(note, sizeof note, l->suppressed, now - l->last_ms);
    /* "what: N more in the last Ts": the note without its parentheses */
    size_t len = strlen(note);
    note[len - 1] = 0;
    log_plain(lvl, who, "%s: %s", what, note + 2);
    l->suppressed = 0;
    l->last_ms = now ? now : 1;
}
