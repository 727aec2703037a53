/* Endpoint parsing: "host:port" for servers, "http://host:port/path" for clients. */
#ifndef PC_URL_H
#define PC_URL_H

#include <stddef.h>

#include "base/err.h"

typedef struct pc_url {
    char scheme[8]; /* "http" or "https" */
    char host[256]; /* without brackets for IPv6 */
    int port;
    char path[1024]; /* "" or starting with '/', without trailing '/' */
} pc_url;

/* "http://h:p/path" (default port 80/443 by scheme). 0, or PC_EINVAL with a reason in e. */
int pc_url_parse(const char *s, pc_url *out, pc_error *e);
/* "host:port", "[v6]:port" or ":port" (host defaults to localhost). 0, or PC_EINVAL with a
 * reason in e. */
int pc_hostport_parse(const char *s, char *host, size_t hostlen, int *port, pc_error *e);

#endif
