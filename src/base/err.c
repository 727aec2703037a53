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

static void vset(pc_error *e, int code, const char *fmt, va_list ap)
{
    e->code = code;
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
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

int pc_error_issue_add(pc_error *e, int code, const char *file, int line, const char *path,
                       const char *fmt, ...)
{
    if (!e) return code;
    char what[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    e->code = code;
    char where[64] = "";
    if (file && line > 0)
        snprintf(where, sizeof where, "%.50s:%d: ", file, line);
    else if (file)
        snprintf(where, sizeof where, "%.60s: ", file);
    snprintf(e->msg, sizeof e->msg, "%s%s%s%s", where, path && *path ? path : "",
             path && *path ? ": " : "", what);
    if (e->issues) {
        pc_error_issues *l = e->issues;
        if (l->n < PC_ERROR_MAX_ISSUES) {
            pc_error_issue *is = &l->v[l->n];
            is->file = file;
            is->line = line;
            snprintf(is->path, sizeof is->path, "%s", path ? path : "");
            memcpy(is->msg, what, sizeof is->msg);
        }
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
