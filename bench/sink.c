/* sink: the fastest possible backend for relay benchmarks. It accepts any POST on the project's
 * own HTTP server (keep-alive, llhttp), counts requests and body bytes per path, and answers 200
 * at once with an empty body (a valid empty ExportProfilesServiceResponse, or an empty Connect
 * PushResponse). It never decodes anything, so it is never the bottleneck.
 *
 *   sink --port P [--delay-ms D] [--max-seconds S]
 *
 * --delay-ms answers each request D ms late (a slow backend, for the overload scenario).
 * GET /stats answers the counters as JSON; SIGINT/SIGTERM (or --max-seconds, default 3600)
 * print the same JSON line on stdout and exit. */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "net/http_server.h"

enum { MAX_PATHS = 16 };

typedef struct path_count {
    char path[128];
    uint64_t requests, bytes;
} path_count;

typedef struct sink {
    uv_loop_t *loop;
    pc_http_server *srv;
    uv_signal_t sigint, sigterm;
    uv_timer_t deadline;
    unsigned delay_ms;
    uint64_t requests, bytes;
    path_count paths[MAX_PATHS];
    size_t n_paths;
} sink;

typedef struct delayed {
    uv_timer_t t;
    pc_http_req *req;
} delayed;

static sink S;

static void stats_json(const sink *s, char *out, size_t n)
{
    int w = snprintf(
        out, n, "{\"tool\":\"sink\",\"requests\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"paths\":{",
        s->requests, s->bytes);
    for (size_t i = 0; i < s->n_paths && w > 0 && (size_t)w < n; i++)
        w += snprintf(out + w, n - (size_t)w,
                      "%s\"%s\":{\"requests\":%" PRIu64 ",\"bytes\":%" PRIu64 "}", i ? "," : "",
                      s->paths[i].path, s->paths[i].requests, s->paths[i].bytes);
    if (w > 0 && (size_t)w < n) snprintf(out + w, n - (size_t)w, "}}");
}

static void answer(pc_http_req *req)
{
    const char *ct = pc_http_req_header(req, "content-type");
    if (!ct || (!strstr(ct, "proto") && !strstr(ct, "json")))
        ct = "application/x-protobuf";
    else if (strstr(ct, "json"))
        ct = "application/json";
    pc_http_respond(req, 200, ct, strstr(ct, "json") ? "{}" : "", strstr(ct, "json") ? 2 : 0, NULL);
}

static void on_delay_closed(uv_handle_t *h)
{
    free(h->data);
}

static void on_delay(uv_timer_t *t)
{
    delayed *d = t->data;
    answer(d->req);
    t->data = d;
    uv_close((uv_handle_t *)t, on_delay_closed);
}

static void count(sink *s, const char *path, size_t len)
{
    s->requests++;
    s->bytes += len;
    for (size_t i = 0; i < s->n_paths; i++)
        if (!strcmp(s->paths[i].path, path)) {
            s->paths[i].requests++;
            s->paths[i].bytes += len;
            return;
        }
    if (s->n_paths < MAX_PATHS) {
        path_count *p = &s->paths[s->n_paths++];
        snprintf(p->path, sizeof p->path, "%s", path);
        p->requests = 1;
        p->bytes = len;
    }
}

static void handler(pc_http_req *req, void *arg)
{
    sink *s = arg;
    if (!strcmp(req->method, "GET")) {
        char js[4096];
        stats_json(s, js, sizeof js);
        pc_http_respond(req, 200, "application/json", js, strlen(js), NULL);
        return;
    }
    count(s, req->path, req->body_len);
    if (!s->delay_ms) {
        answer(req);
        return;
    }
    delayed *d = malloc(sizeof *d);
    if (!d) abort();
    d->req = req;
    uv_timer_init(s->loop, &d->t);
    d->t.data = d;
    uv_timer_start(&d->t, on_delay, s->delay_ms, 0);
}

static void finish(sink *s)
{
    char js[4096];
    stats_json(s, js, sizeof js);
    printf("%s\n", js);
    fflush(stdout);
    exit(0);
}

static void on_signal(uv_signal_t *h, int sig)
{
    (void)sig;
    finish(h->data);
}

static void on_deadline(uv_timer_t *t)
{
    finish(t->data);
}

int main(int argc, char **argv)
{
    sink *s = &S;
    int port = 0;
    double max_s = 3600;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--port"))
            port = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--delay-ms"))
            s->delay_ms = (unsigned)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--max-seconds"))
            max_s = atof(argv[i + 1]);
        else {
            fprintf(stderr, "usage: sink --port P [--delay-ms D] [--max-seconds S]\n");
            return 2;
        }
    }
    if (port <= 0 || max_s <= 0 || max_s > 86400) {
        fprintf(stderr, "usage: sink --port P [--delay-ms D] [--max-seconds S]\n");
        return 2;
    }
    s->loop = uv_default_loop();
    pc_http_server_opts o = {.host = "127.0.0.1",
                             .port = port,
                             .max_body_bytes = 256u << 20,
                             .max_connections = 4096,
                             .log_id = "sink"};
    s->srv = pc_http_server_new(s->loop, &o, handler, s);
    pc_error err = {0};
    if (pc_http_server_start(s->srv, &err) < 0) {
        fprintf(stderr, "sink: %s\n", err.msg);
        return 1;
    }
    uv_signal_init(s->loop, &s->sigint);
    uv_signal_init(s->loop, &s->sigterm);
    s->sigint.data = s->sigterm.data = s;
    uv_signal_start(&s->sigint, on_signal, SIGINT);
    uv_signal_start(&s->sigterm, on_signal, SIGTERM);
    uv_timer_init(s->loop, &s->deadline);
    s->deadline.data = s;
    uv_timer_start(&s->deadline, on_deadline, (uint64_t)(max_s * 1000), 0);
    fprintf(stderr, "sink: listening on 127.0.0.1:%d\n", pc_http_server_port(s->srv));
    uv_run(s->loop, UV_RUN_DEFAULT);
    return 0;
}
