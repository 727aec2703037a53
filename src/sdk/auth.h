/* Authenticators, as receivers and exporters use them through `auth: authenticator:
 * <extension id>` (like the Collector's configauth); the extensions bearertokenauth and basicauth
 * implement them (src/extensions/).
 *
 * A receiver gets its authenticator at start (pc_host_authenticator, sdk/component.h) and checks
 * each request with pc_auth_check; a request without valid credentials is answered 401 with the
 * authenticator's WWW-Authenticate challenge. An exporter adds pc_auth_headers to every request.
 * The service checks every `auth::authenticator` reference when it builds the graph
 * (pc_auth_usable), so a missing or wrong-kind authenticator is a config error with its key path.
 * Loop thread only. */
#ifndef PC_AUTH_H
#define PC_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#include "base/buf.h"
#include "net/h2_server.h"
#include "net/http_server.h"
#include "sdk/component.h"

/* A request's header by (case-insensitive) name, NULL if absent: one check serves HTTP/1.1
 * requests and HTTP/2 (gRPC) calls alike. */
typedef const char *(*pc_auth_header_fn)(const void *req, const char *name);

/* The first member of an authenticator extension's priv. */
typedef struct pc_auth {
    /* receivers: 0 when the request carries valid credentials, else PC_EAUTH; NULL if the
     * extension has no server-side configuration */
    int (*check)(struct pc_auth *a, pc_auth_header_fn header, const void *req);
    /* exporters: append "Name: value\r\n" lines; NULL if it has no client-side configuration */
    void (*headers)(struct pc_auth *a, pc_buf *out);
    char challenge[128]; /* "WWW-Authenticate: Bearer realm=\"profcol\"\r\n" */
} pc_auth;

/* Whether the extension ext can authenticate a receiver's requests (server) or an exporter's
 * (client): an authenticator (its type says so) with that side configured; PC_EINVAL with a
 * reason otherwise. The service finds an enabled one by id: pc_host_authenticator
 * (sdk/component.h). */
int pc_auth_usable(const pc_component *ext, bool server, pc_error *e);

/* 0, or PC_EAUTH for missing or invalid credentials. */
int pc_auth_check(pc_auth *a, const pc_http_req *req);
/* The same check on a gRPC call's metadata. */
int pc_auth_check_call(pc_auth *a, const pc_h2_call *call);
void pc_auth_headers(pc_auth *a, pc_buf *out);
/* The challenge header line(s) for a 401. */
const char *pc_auth_challenge(const pc_auth *a);

#endif
