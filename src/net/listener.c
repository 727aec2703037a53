/* Shared listening and accepting for the servers (see listener.h). */
#include "net/listener.h"

#include <stdio.h>
#include <string.h>

#include "pipeline/log.h"

#define ACCEPT_LOG_EVERY_MS 5000

void pc_sockaddr_format(const struct sockaddr *sa, char *out, size_t n)
{
    char ip[64] = "?";
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)sa;
        uv_ip4_name(a, ip, sizeof ip);
        snprintf(out, n, "%s:%d", ip, ntohs(a->sin_port));
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)sa;
        uv_ip6_name(a, ip, sizeof ip);
        snprintf(out, n, "[%s]:%d", ip, ntohs(a->sin6_port));
    } else {
        snprintf(out, n, "?");
    }
}

void pc_tcp_peer_name(uv_tcp_t *tcp, char *out, size_t n)
{
    struct sockaddr_storage ss;
    int len = sizeof ss;
    if (uv_tcp_getpeername(tcp, (struct sockaddr *)&ss, &len) == 0)
        pc_sockaddr_format((struct sockaddr *)&ss, out, n);
    else
        snprintf(out, n, "?");
}

static int resolve_bind(uv_loop_t *loop, const char *host, int port, struct sockaddr_storage *ss)
{
    char h[256];
    snprintf(h, sizeof h, "%s", host);
    size_t n = strlen(h);
    if (n >= 2 && h[0] == '[' && h[n - 1] == ']') {
        memmove(h, h + 1, n - 2);
        h[n - 2] = 0;
    }
    if (strcmp(h, "localhost") == 0) snprintf(h, sizeof h, "127.0.0.1");
    if (uv_ip4_addr(h, port, (struct sockaddr_in *)ss) == 0) return 0;
    if (uv_ip6_addr(h, port, (struct sockaddr_in6 *)ss) == 0) return 0;
    uv_getaddrinfo_t gr; /* a host name: resolved once at startup, synchronously */
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    int rc = uv_getaddrinfo(loop, &gr, NULL, h, NULL, &hints);
    if (rc < 0) return rc;
    memcpy(ss, gr.addrinfo->ai_addr, gr.addrinfo->ai_addrlen);
    uv_freeaddrinfo(gr.addrinfo);
    if (ss->ss_family == AF_INET)
        ((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
    else
        ((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)port);
    return 0;
}

int pc_tcp_listen(uv_loop_t *loop, uv_tcp_t *listener, const char *host, int port,
                  uv_connection_cb cb, int *bound_port, char *bound, size_t boundlen, char *err,
                  size_t errlen)
{
    int v6 = strchr(host, ':') && host[0] != '[';
    char where[300];
    snprintf(where, sizeof where, "%s%s%s:%d", v6 ? "[" : "", host, v6 ? "]" : "", port);
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    int rc = resolve_bind(loop, host, port, &ss);
    if (rc < 0) {
        snprintf(err, errlen, "listen %s: cannot resolve host: %s", where, uv_strerror(rc));
        return -1;
    }
    /* libuv sets SO_REUSEADDR on bind, so a restart does not wait for TIME_WAIT */
    rc = uv_tcp_bind(listener, (struct sockaddr *)&ss, 0);
    if (rc == 0) rc = uv_listen((uv_stream_t *)listener, 511, cb);
    if (rc < 0) {
        snprintf(err, errlen, "listen %s: %s", where, uv_strerror(rc));
        return -1;
    }
    int len = sizeof ss;
    if (uv_tcp_getsockname(listener, (struct sockaddr *)&ss, &len) == 0) {
        *bound_port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                                    : ((struct sockaddr_in6 *)&ss)->sin6_port);
        pc_sockaddr_format((struct sockaddr *)&ss, bound, boundlen);
    } else {
        *bound_port = port;
        snprintf(bound, boundlen, "%s", where);
    }
    return 0;
}

void pc_accept_error(pc_accept_log *l, uv_loop_t *loop, const char *log_id, int status)
{
    l->errs++;
    uint64_t now = uv_now(loop);
    if (l->last_ms && now - l->last_ms < ACCEPT_LOG_EVERY_MS) return;
    PC_ERROR(log_id, "accept: %s (%u errors since last report)", uv_strerror(status), l->errs);
    l->errs = 0;
    l->last_ms = now ? now : 1;
}
