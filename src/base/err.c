/* Error codes and the error object (err.h). */
#include "base/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *pc_err_name(int code)
{
    switch (code) {
    case PC_OK: return "PC_OK";
#define NAME(name, value, msg)                                                                     \
    case PC_##name: return "PC_" #name;
        PC_ERRNO_MAP(NAME)
#undef NAME
    }
    return "PC_E?";
}

const char *pc_strerror(int code)
{
    switch (code) {
    case PC_OK: return "ok";
#define MSG(name, value, msg)                                                                      \
    case PC_##name: return msg;
        PC_ERRNO_MAP(MSG)
#undef MSG
    }
    return "unknown error";
}

static int rank(int code)
{
    if (code == PC_OK) return 0;
    if (code == PC_EAGAIN) return 3;
    if (code == PC_EBUSY) return 2;
    return 1; /* permanent: PC_EINVAL, PC_E2BIG, ... */
}

int pc_err_worse(int a, int b)
{
    return rank(b) > rank(a) ? b : a;
}

/* Put `with` in place of s[at, at + len), cutting the tail at cap; -> the index after `with`. */
static size_t splice(char *s, size_t cap, size_t at, size_t len, const char *with)
{
    size_t have = strlen(s), wl = strlen(with);
    size_t tail = have - at - len;
    if (at + wl >= cap) wl = cap - 1 - at;
    if (at + wl + tail >= cap) tail = cap - 1 - at - wl;
    memmove(s + at + wl, s + at + len, tail);
    memcpy(s + at, with, wl);
    s[at + wl + tail] = 0;
    return at + wl;
}

void pc_redact(char *s, size_t cap, const char *secret)
{
    size_t sl = strlen(secret);
    if (!sl || !cap) return;
    for (char *p = strstr(s, secret); p; p = strstr(p, secret))
        p = s + splice(s, cap, (size_t)(p - s), sl, "[REDACTED]");
}

void pc_redact_userinfo(char *s, size_t cap)
{
    for (char *p = strstr(s, "://"); p; p = strstr(p, "://")) {
        p += 3;
        size_t auth = strcspn(p, "/?#\"' \t\r\n");
        char *at = memchr(p, '@', auth);
        if (at && !(at - p == 10 && !strncmp(p, "[REDACTED]", 10)))
            p = s + splice(s, cap, (size_t)(p - s), (size_t)(at - p), "[REDACTED]");
    }
}

static void vset(pc_error *e, int code, const char *fmt, va_list ap)
{
    e->code = code;
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    pc_redact_userinfo(e->msg, sizeof e->msg);
}

int pc_error_set(pc_error *e, int code, const char *fmt, ...)
{
    if (!e) return code;
    va_list ap;
    va_start(ap, fmt);
    vset(e, code, fmt, ap);
    va_end(ap);
    return code;
}

void pc_error_issue_format(const pc_error_issue *is, char *out, size_t outlen)
{
    int n = 0;
    if (is->file && is->line > 0)
        n = snprintf(out, outlen, "%s:%d: ", is->file, is->line);
    else if (is->file)
        n = snprintf(out, outlen, "%s: ", is->file);
    if (n < 0 || (size_t)n >= outlen) n = 0;
    /* a long message is cut at outlen (the return value says so; nothing to do about it) */
    if (snprintf(out + n, outlen - (size_t)n, "%s%s%s", is->path, is->path[0] ? ": " : "",
                 is->msg) < 0)
        out[n] = 0;
}

int pc_error_issue_add(pc_error *e, int code, const char *file, int line, const char *path,
                       const char *fmt, ...)
{
    if (!e) return code;
    pc_error_issue is = {.file = file, .line = line};
    snprintf(is.path, sizeof is.path, "%s", path ? path : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(is.msg, sizeof is.msg, fmt, ap);
    va_end(ap);
    pc_redact_userinfo(is.msg, sizeof is.msg);
    e->code = code;
    pc_error_issue_format(&is, e->msg, sizeof e->msg);
    if (e->issues) {
        pc_error_issues *l = e->issues;
        /* a garbage count (an uninitialised list) must never index out of bounds */
        if (l->n < PC_ERROR_MAX_ISSUES) l->v[l->n] = is;
        l->n++;
    }
    return code;
}

void pc_error_prefix(pc_error *e, const char *fmt, ...)
{
    if (!e) return;
    char head[256];
    va_list ap;
    va_start(ap, fmt);
    int h = vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    size_t hl = h < 0 ? 0 : (size_t)h < sizeof head ? (size_t)h : sizeof head - 1;
    size_t ml = strnlen(e->msg, sizeof e->msg - 1);
    if (hl > sizeof e->msg - 1) hl = sizeof e->msg - 1;
    if (hl + ml > sizeof e->msg - 1) ml = sizeof e->msg - 1 - hl; /* the tail is cut */
    memmove(e->msg + hl, e->msg, ml);
    memcpy(e->msg, head, hl);
    e->msg[hl + ml] = 0;
}

size_t pc_error_count(const pc_error *e)
{
    if (e->issues) return e->issues->n;
    return e->code != PC_OK;
}

void pc_error_clear(pc_error *e)
{
    e->code = PC_OK;
    e->msg[0] = 0;
    if (e->issues) e->issues->n = 0;
}

void pc_error_print(const pc_error *e, FILE *f, const char *prefix)
{
    if (!e->issues) {
        if (e->code != PC_OK) fprintf(f, "%s%s\n", prefix, e->msg);
        return;
    }
    const pc_error_issues *l = e->issues;
    size_t kept = l->n < PC_ERROR_MAX_ISSUES ? l->n : PC_ERROR_MAX_ISSUES;
    /* in file order: files as they first appear, then by line (insertion sort, stable) */
    size_t order[PC_ERROR_MAX_ISSUES], rank[PC_ERROR_MAX_ISSUES];
    for (size_t i = 0; i < kept; i++) {
        rank[i] = i;
        for (size_t j = 0; j < i; j++)
            if (l->v[j].file == l->v[i].file) {
                rank[i] = rank[j];
                break;
            }
        size_t k = i;
        while (k > 0 &&
               (rank[order[k - 1]] > rank[i] ||
                (rank[order[k - 1]] == rank[i] && l->v[order[k - 1]].line > l->v[i].line))) {
            order[k] = order[k - 1];
            k--;
        }
        order[k] = i;
    }
    for (size_t i = 0; i < kept; i++) {
        char line[1100];
        pc_error_issue_format(&l->v[order[i]], line, sizeof line);
        fprintf(f, "%s%s\n", prefix, line);
    }
    if (l->n > kept) fprintf(f, "%s... and %zu more error(s)\n", prefix, l->n - kept);
}
