/* One line per event, prefixed with the component id (ARCHITECTURE.md §8). */
#ifndef PC_BASE_LOG_H
#define PC_BASE_LOG_H

#include <stddef.h>

typedef enum { PC_LOG_DEBUG = 0, PC_LOG_INFO, PC_LOG_WARN, PC_LOG_ERROR } pc_log_level;

void pc_log_set_level(pc_log_level lvl);
/* service::telemetry::logs::encoding: json writes each line as one JSON object (level, ts,
 * component, msg) instead of the console line. */
void pc_log_set_json(int json);
int pc_log_json(void);
/* One log record holding msg (len bytes, any size, newlines kept as \n) appended to out: a JSON
 * object line with logs encoding json, else msg as it is. For output that is written by its owner
 * in one piece (the debug exporter) and must follow the log encoding as the Collector's does. */
struct pc_buf;
void pc_log_record(struct pc_buf *out, pc_log_level lvl, const char *who, const char *msg,
                   size_t len);
/* "debug", "info", "warn" (or "warning"), "error", any case: 0, or PC_EINVAL for another name. */
int pc_log_parse_level(const char *s, pc_log_level *out);
void pc_log(pc_log_level lvl, const char *who, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define PC_DEBUG(who, ...) pc_log(PC_LOG_DEBUG, who, __VA_ARGS__)
#define PC_INFO(who, ...)  pc_log(PC_LOG_INFO, who, __VA_ARGS__)
#define PC_WARN(who, ...)  pc_log(PC_LOG_WARN, who, __VA_ARGS__)
#define PC_ERROR(who, ...) pc_log(PC_LOG_ERROR, who, __VA_ARGS__)

/* For lines a peer can trigger at will (one per connection: refused, evicted, failed handshakes,
 * accept errors), so a flood of them cannot flood the log: the first line is written, then at
 * most one per interval, carrying how many were suppressed since the previous one, e.g.
 * "... (1234 more in the last 10s)". Zero-initialised is ready (interval 10 s). One limiter per
 * kind of line; a limiter is used from one thread only. */
#include <stdint.h>
typedef struct pc_log_limiter {
    unsigned interval_ms; /* 0: 10000 */
    uint64_t last_ms;     /* monotonic time of the last line written (0: none yet) */
    uint64_t suppressed;  /* lines not written since then */
} pc_log_limiter;

void pc_log_limited(pc_log_limiter *l, pc_log_level lvl, const char *who, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Write what is still suppressed as "<what>: N more in the last Ts" (e.g. at shutdown, so the
 * last burst is not lost); nothing when nothing was suppressed. */
void pc_log_limiter_flush(pc_log_limiter *l, pc_log_level lvl, const char *who, const char *what);

#define PC_INFO_RATELIMITED(l, who, ...)  pc_log_limited(l, PC_LOG_INFO, who, __VA_ARGS__)
#define PC_WARN_RATELIMITED(l, who, ...)  pc_log_limited(l, PC_LOG_WARN, who, __VA_ARGS__)
#define PC_ERROR_RATELIMITED(l, who, ...) pc_log_limited(l, PC_LOG_ERROR, who, __VA_ARGS__)

#endif
