/* Endpoint parsing for configuration values: strict, with messages that name the bad value. */
#include "net/url.h"

#include <stdio.h>
#include <string.h>

/* A port is 1..5 decimal digits in 0..65535; signs, spaces and hex are config mistakes. */
static int parse_port(const char *p, size_t n, int *port)
{
    if (n == 0 || n > 5) return PC_EINVAL;
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') return PC_EINVAL;
        v = v * 10 + (p[i] - '0');
    }
    if (v > 65535) return PC_EINVAL;
    *port = v;
    return PC_OK;
}

/* Split "host", "host:port", "[v6]" or "[v6]:port" (authority without path). port_out is left
 * untouched when no port is given. Returns NULL on success or a static reason. */
static const char *split_authority(const char *s, size_t n, char *host, size_t hostlen,
                                   int *port_out, int *has_port)
{
    const char *hs = s, *rest;
    size_t hn;
    *has_port = 0;
    if (n > 0 && s[0] == '[') {
        const char *close = memchr(s, ']', n);
        if (!close) return "missing ']' after IPv6 address";
        hs = s + 1;
        hn = (size_t)(close - hs);
        rest = close + 1;
        if (rest < s + n && *rest != ':') return "unexpected characters after ']'";
    } else {
        const char *colon = memchr(s, ':', n);
        hn = colon ? (size_t)(colon - s) : n;
        rest = s + hn;
        /* a second colon means an unbracketed IPv6 address, which is ambiguous with the port */
        if (colon && memchr(colon + 1, ':', n - hn - 1))
            return "IPv6 addresses must be in brackets, like [::1]:4318";
    }
    if (hn + 1 > hostlen) return "host name too long";
    memcpy(host, hs, hn);
    host[hn] = 0;
    if (rest < s + n) { /* ":port" */
        *has_port = 1;
        if (parse_port(rest + 1, (size_t)(s + n - rest - 1), port_out) != 0)
            return "port must be a number in 0..65535";
    }
    return NULL;
}

int pc_url_parse(const char *s, pc_url *out, pc_error *e)
{
    memset(out, 0, sizeof *out);
    const char *sep = strstr(s, "://");
    if (!sep)
        return pc_error_set(e, PC_EINVAL, "endpoint \"%s\": missing scheme (want http://host:port)",
                            s);
    size_t sl = (size_t)(sep - s);
    if (sl == 4 && strncmp(s, "http", 4) == 0) {
        out->port = 80;
    } else if (sl == 5 && strncmp(s, "https", 5) == 0) {
        out->port = 443;
    } else {
        return pc_error_set(e, PC_EINVAL,
                            "endpoint \"%s\": unsupported scheme \"%.*s\" (want http or https)", s,
                            (int)sl, s);
    }
    memcpy(out->scheme, s, sl);
    out->scheme[sl] = 0;

    const char *auth = sep + 3;
    size_t an = strcspn(auth, "/?#");
    if (memchr(auth, '@', an))
        return pc_error_set(e, PC_EINVAL, "endpoint \"%s\": user info in URLs is not supported", s);
    int has_port;
    const char *why = split_authority(auth, an, out->host, sizeof out->host, &out->port, &has_port);
    if (!why && !out->host[0]) why = "missing host";
    if (why) return pc_error_set(e, PC_EINVAL, "endpoint \"%s\": %s", s, why);

    const char *path = auth + an;
    if (*path == '?' || *path == '#')
        return pc_error_set(e, PC_EINVAL,
                            "endpoint \"%s\": query strings and fragments are not supported", s);
    size_t pn = strlen(path);
    while (pn > 0 && path[pn - 1] == '/')
        pn--; /* callers append "/v1/..." themselves */
    if (pn + 1 > sizeof out->path)
        return pc_error_set(e, PC_EINVAL, "endpoint \"%s\": path too long", s);
    memcpy(out->path, path, pn);
    out->path[pn] = 0;
    return PC_OK;
}

int pc_hostport_parse(const char *s, char *host, size_t hostlen, int *port, pc_error *e)
{
    int has_port, p = -1;
    const char *why = split_authority(s, strlen(s), host, hostlen, &p, &has_port);
    if (!why && !has_port) why = "missing port (want host:port)";
    if (!why && strpbrk(host, "/?#@ ")) why = "invalid host (want host:port)";
    if (why) return pc_error_set(e, PC_EINVAL, "endpoint \"%s\": %s", s, why);
    if (!host[0]) {
        if (hostlen < sizeof "localhost")
            return pc_error_set(e, PC_EINVAL, "endpoint \"%s\": host name too long", s);
        strcpy(host, "localhost"); /* ":port" binds to loopback by default (ARCHITECTURE.md §6) */
    }
    *port = p;
    return PC_OK;
}
