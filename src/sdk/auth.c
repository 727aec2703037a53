/* The authenticator contract (auth.h). */
#include "sdk/auth.h"

int pc_auth_usable(const pc_component *ext, bool server, pc_error *e)
{
    if (!ext->type->authenticator)
        return pc_error_set(e, PC_EINVAL,
                            "extension \"%s\" is a %s, not an authenticator (want bearertokenauth "
                            "or basicauth)",
                            ext->id, ext->type->name);
    const pc_auth *a = ext->priv;
    if (server && !a->check)
        return pc_error_set(e, PC_EINVAL,
                            "extension \"%s\" has no htpasswd: it can add credentials to an "
                            "exporter's requests but not check a receiver's",
                            ext->id);
    if (!server && !a->headers)
        return pc_error_set(e, PC_EINVAL,
                            "extension \"%s\" has no client_auth: it can check a receiver's "
                            "requests but not authenticate an exporter",
                            ext->id);
    return 0;
}

static const char *http_header(const void *req, const char *name)
{
    return pc_http_req_header(req, name);
}

static const char *call_header(const void *call, const char *name)
{
    return pc_h2_call_header(call, name);
}

int pc_auth_check(pc_auth *a, const pc_http_req *req)
{
    return a->check(a, http_header, req);
}

int pc_auth_check_call(pc_auth *a, const pc_h2_call *call)
{
    return a->check(a, call_header, call);
}

void pc_auth_headers(pc_auth *a, pc_buf *out)
{
    a->headers(a, out);
}

const char *pc_auth_challenge(const pc_auth *a)
{
    return a->challenge;
}
