/* One line per event, prefixed with the component id (DESIGN §7). */
#ifndef PC_LOG_H
#define PC_LOG_H

typedef enum { PC_LOG_DEBUG = 0, PC_LOG_INFO, PC_LOG_WARN, PC_LOG_ERROR } pc_log_level;

void pc_log_set_level(pc_log_level lvl);
/* service::telemetry::logs::encoding: json writes each line as one JSON object (level, ts,
 * component, msg) instead of the console line. */
void pc_log_set_json(int json);
int pc_log_parse_level(const char *s, pc_log_level *out);
void pc_log(pc_log_level lvl, const char *who, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define PC_DEBUG(who, ...) pc_log(PC_LOG_DEBUG, who, __VA_ARGS__)
#define PC_INFO(who, ...)  pc_log(PC_LOG_INFO, who, __VA_ARGS__)
#define PC_WARN(who, ...)  pc_log(PC_LOG_WARN, who, __VA_ARGS__)
#define PC_ERROR(who, ...) pc_log(PC_LOG_ERROR, who, __VA_ARGS__)

/* malloc family that aborts on exhaustion: callers never see NULL. */
#include <stddef.h>
void *pc_xmalloc(size_t n);
void *pc_xcalloc(size_t n, size_t size);
void *pc_xrealloc(void *p, size_t n);
char *pc_xstrdup(const char *s);

#endif
