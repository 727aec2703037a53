/* One error convention for the whole code base (docs/ARCHITECTURE.md §7), in the libuv style:
 * a function returns 0 or a negative PC_E* code from this one enum, each with a name and a
 * message; where a person needs the detail, one error object (pc_error) carries the code and a
 * message, and config errors also every issue found with its file, line and key path.
 *
 * The codes say what a caller should do, which is what receivers and exporters map to statuses:
 * PC_EINVAL is refused for good (400), PC_E2BIG is over a limit (413), PC_EAGAIN is worth trying
 * again later (503 + Retry-After), PC_EBUSY asks to slow down (429 + Retry-After). PC_EBADMSG is
 * a well-formed request whose profile body cannot be decoded (permanent as PC_EINVAL; Pyroscope
 * answers 422 for it). */
#ifndef PC_BASE_ERR_H
#define PC_BASE_ERR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* X(name, value, message) */
#define PC_ERRNO_MAP(X)                                                                            \
    X(EINVAL, -1, "invalid data or argument")                                                      \
    X(E2BIG, -2, "over a size or memory limit")                                                    \
    X(EAGAIN, -3, "temporarily unavailable, try again later")                                      \
    X(EBUSY, -4, "overloaded, retry later")                                                        \
    X(ENOTSUP, -5, "not supported")                                                                \
    X(EIO, -6, "input/output error")                                                               \
    X(ENOENT, -7, "not found")                                                                     \
    X(EPROTO, -8, "protocol error")                                                                \
    X(EAUTH, -9, "missing or invalid credentials")                                                 \
    X(ETIMEDOUT, -10, "timed out")                                                                 \
    X(ECANCELED, -11, "canceled")                                                                  \
    X(ECLOSED, -12, "closed by the peer")                                                          \
    X(EBADMSG, -13, "undecodable data")

typedef enum pc_errno {
    PC_OK = 0,
#define PC_ERRNO_ENUM(name, value, msg) PC_##name = value,
    PC_ERRNO_MAP(PC_ERRNO_ENUM)
#undef PC_ERRNO_ENUM
} pc_errno;

/* "PC_EINVAL"; "PC_OK" for 0; "PC_E?" for anything else. */
const char *pc_err_name(int code);
/* "invalid data or argument"; "ok" for 0; "unknown error" for anything else. */
const char *pc_strerror(int code);
/* Worth trying again: PC_EAGAIN, PC_EBUSY, PC_ETIMEDOUT. */
static inline bool pc_err_retryable(int code)
{
    return code == PC_EAGAIN || code == PC_EBUSY || code == PC_ETIMEDOUT;
}

/* The worse of two outcomes, for a request answered once for several parts (a fan-out, a batch
 * of clients, an export in parts): retryable beats permanent, because the client should send
 * again rather than give up; PC_EAGAIN beats PC_EBUSY; any error beats PC_OK. */
int pc_err_worse(int a, int b);

/* One issue of a config: where (file, line), which key (path, "exporters::otlp::endpoint"),
 * what. */
typedef struct pc_error_issue {
    const char *file; /* interned; NULL when no file applies */
    int line;         /* 0 when unknown */
    char path[192];
    char msg[640]; /* a Collector cycle message through several pipelines is long */
} pc_error_issue;

#define PC_ERROR_MAX_ISSUES 24

/* Where every issue of a config is kept: the caller's, usually on its stack, attached to an
 * error object with PC_ERROR_WITH_ISSUES. Only config validation needs one. */
typedef struct pc_error_issues {
    size_t n; /* issues found; only the first PC_ERROR_MAX_ISSUES are kept */
    pc_error_issue v[PC_ERROR_MAX_ISSUES];
} pc_error_issues;

/* The error object. Zero-initialised (`pc_error e = {0};`) it is ready and holds no error;
 * nothing to free. msg is the latest error as one line for people. */
typedef struct pc_error {
    int code; /* PC_OK or a PC_E* code */
    char msg[512];
    pc_error_issues *issues; /* NULL: only the latest error is kept */
} pc_error;

#define PC_ERROR_WITH_ISSUES(list) ((pc_error){.issues = (list)})

/* Set code and message (printf-style); returns code, so `return pc_error_set(e, PC_EINVAL,
 * "...")` reads as what it does. e may be NULL (the code is still returned). */
int pc_error_set(pc_error *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The same as an issue with a place: msg becomes "file:line: path: message" and the issue is
 * kept when e has a list. */
int pc_error_issue_add(pc_error *e, int code, const char *file, int line, const char *path,
                       const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* Prefix the message: "context: <message>" (e.g. "pprof: " + a decoder's message). */
void pc_error_prefix(pc_error *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Issues found (1 when there is an error but no list, 0 when none). */
size_t pc_error_count(const pc_error *e);
void pc_error_clear(pc_error *e);
/* One issue as "file:line: path: message" (what pc_error_issue_add puts in msg). */
void pc_error_issue_format(const pc_error_issue *is, char *out, size_t outlen);

/* Replace every `secret` in the string s (room cap bytes) by "[REDACTED]", cutting what no longer
 * fits. */
void pc_redact(char *s, size_t cap, const char *secret);
/* Replace the user and password of every URL in s ("scheme://user:pass@host") by "[REDACTED]".
 * Every error and log line goes through it (issue 28: URL userinfo redacted everywhere). */
void pc_redact_userinfo(char *s, size_t cap);
/* Every issue kept, one line each in file order, each prefixed by prefix ("profcol: invalid
 * config: "), then a line saying how many were left out, if any; without a list, msg. */
void pc_error_print(const pc_error *e, FILE *f, const char *prefix);

#endif
