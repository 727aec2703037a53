/* loadgen: replay payload files as HTTP POSTs over N keep-alive connections (the project's own
 * HTTP client), flat out or at a fixed rate, and report throughput, latency percentiles and
 * errors as a table and one JSON line.
 *
 * Flat out: each connection keeps one request in flight (closed loop). --rate R: request k is due
 * at start + k/R whatever happened before (open loop); its latency is measured from that intended
 * time, so queueing behind a slow server is counted (no coordinated omission). In rate mode at
 * most --max-inflight requests wait or fly at once; requests due beyond that are counted as
 * "skipped", not sent. Every run is bounded: it stops issuing after --seconds or --requests,
 * then waits at most --timeout-ms for what is in flight. */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "hist.h"
#include "net/http_client.h"
#include "net/url.h"
#include "payloads.h"

typedef struct opts {
    const char *url, *payload, *label;
    char headers[8192];
    unsigned conns;
    double rate, seconds;
    uint64_t requests;
    unsigned timeout_ms;
    uint64_t max_inflight;
    int quiet;
} opts;

typedef struct lg {
    uv_loop_t *loop;
    opts o;
    pc_url url;
    char target[1040]; /* request target: the URL's path and query as given */
    payload_set ps;
    pc_http_client *client;
    uv_timer_t tick, stop_timer, hard_timer;
    uint64_t t0, t_end; /* ns */
    uint64_t issued, inflight, done, ok, non2xx, transport, skipped;
    uint64_t bytes_sent, bytes_ok, profiles_ok, samples_ok;
    uint64_t status[600];
    char first_error[256];
    int stopping, closing;
    size_t next_payload;
    hist lat; /* microseconds, 2xx answers only */
    hist lat_err;
} lg;

typedef struct inflight {
    lg *g;
    const payload *p;
    uint64_t intended; /* ns */
} inflight;

static lg G;

static void maybe_finish(lg *g);
static void issue(lg *g, uint64_t intended);

static void on_closed(void *arg)
{
    lg *g = arg;
    uv_close((uv_handle_t *)&g->tick, NULL);
    uv_close((uv_handle_t *)&g->stop_timer, NULL);
    uv_close((uv_handle_t *)&g->hard_timer, NULL);
}

static void on_response(const pc_http_response *r, void *arg)
{
    inflight *f = arg;
    lg *g = f->g;
    uint64_t now = uv_hrtime();
    uint64_t us = now > f->intended ? (now - f->intended) / 1000 : 0;
    if (g->inflight) g->inflight--;
    g->done++;
    g->t_end = now;
    if (r->error || r->status == 0) {
        g->transport++;
        if (!g->first_error[0])
            snprintf(g->first_error, sizeof g->first_error, "transport: %s",
                     r->error_msg ? r->error_msg : uv_strerror(r->error));
    } else {
        if (r->status < 600) g->status[r->status]++;
        if (r->status >= 200 && r->status < 300) {
            g->ok++;
            g->bytes_ok += f->p->len;
            if (f->p->profiles > 0) g->profiles_ok += (uint64_t)f->p->profiles;
            if (f->p->samples > 0) g->samples_ok += (uint64_t)f->p->samples;
            hist_record(&g->lat, us);
        } else {
            g->non2xx++;
            hist_record(&g->lat_err, us);
            if (!g->first_error[0])
                snprintf(g->first_error, sizeof g->first_error, "HTTP %d: %.*s", r->status,
                         (int)(r->body_len > 160 ? 160 : r->body_len),
                         r->body ? (const char *)r->body : "");
        }
    }
    free(f);
    if (!g->stopping && g->o.rate <= 0) issue(g, uv_hrtime());
    maybe_finish(g);
}

static void issue(lg *g, uint64_t intended)
{
    if (g->o.requests && g->issued >= g->o.requests) {
        g->stopping = 1;
        return;
    }
    inflight *f = malloc(sizeof *f);
    if (!f) abort();
    f->g = g;
    f->p = &g->ps.p[g->next_payload];
    f->intended = intended;
    g->next_payload = (g->next_payload + 1) % g->ps.n;
    g->issued++;
    g->inflight++;
    g->bytes_sent += f->p->len;
    pc_http_client_request(g->client, "POST", g->target, g->o.headers, f->p->data, f->p->len,
                           g->o.timeout_ms, on_response, f);
}

/* Rate mode: issue every request that is due (bounded per tick). */
static void on_tick(uv_timer_t *t)
{
    lg *g = t->data;
    if (g->stopping) return;
    uint64_t now = uv_hrtime();
    double el = (double)(now - g->t0) / 1e9;
    uint64_t due = (uint64_t)(el * g->o.rate) + 1;
    uint64_t sent_or_skipped = g->issued + g->skipped;
    for (int n = 0; sent_or_skipped < due && n < 100000 && !g->stopping; n++, sent_or_skipped++) {
        uint64_t intended = g->t0 + (uint64_t)((double)sent_or_skipped * 1e9 / g->o.rate);
        if (g->inflight >= g->o.max_inflight)
            g->skipped++;
        else
            issue(g, intended);
    }
    maybe_finish(g);
}

static void on_stop(uv_timer_t *t)
{
    lg *g = t->data;
    g->stopping = 1;
    maybe_finish(g);
}

static void on_hard(uv_timer_t *t)
{
    lg *g = t->data;
    fprintf(stderr, "loadgen: %" PRIu64 " request(s) still in flight at the hard deadline\n",
            g->inflight);
    g->inflight = 0;
    maybe_finish(g);
}

static void maybe_finish(lg *g)
{
    if (!g->stopping || g->inflight || g->closing) return;
    g->closing = 1;
    uv_timer_stop(&g->tick);
    uv_timer_stop(&g->stop_timer);
    uv_timer_stop(&g->hard_timer);
    pc_http_client_close(g->client, on_closed, g);
}

static double ms(uint64_t us)
{
    return (double)us / 1000.0;
}

static void report(lg *g)
{
    uint64_t end = g->t_end > g->t0 ? g->t_end : uv_hrtime();
    double secs = (double)(end - g->t0) / 1e9;
    if (secs <= 0) secs = 1e-9;
    int have_counts = g->ps.n && g->ps.p[0].samples >= 0;
    double p50 = ms(hist_quantile(&g->lat, 0.50)), p90 = ms(hist_quantile(&g->lat, 0.90));
    double p99 = ms(hist_quantile(&g->lat, 0.99)), mx = ms(g->lat.max);
    double mean = g->lat.count ? ms(g->lat.sum / g->lat.count) : 0;
    if (!g->o.quiet) {
        printf("loadgen %s: %s, %zu payload(s), %u connection(s), %s\n",
               g->o.label ? g->o.label : "", g->o.url, g->ps.n, g->o.conns,
               g->o.rate > 0 ? "fixed rate" : "flat out");
        printf("  %-22s %12.2f\n", "seconds", secs);
        printf("  %-22s %12" PRIu64 "  (2xx %" PRIu64 ", non-2xx %" PRIu64
               ", transport errors %" PRIu64 ", skipped %" PRIu64 ")\n",
               "requests", g->done, g->ok, g->non2xx, g->transport, g->skipped);
        printf("  %-22s %12.1f\n", "2xx requests/s", (double)g->ok / secs);
        printf("  %-22s %12.3f\n", "2xx MB/s (body)", (double)g->bytes_ok / secs / 1e6);
        printf("  %-22s %12.3f\n", "offered MB/s (body)", (double)g->bytes_sent / secs / 1e6);
        if (have_counts) {
            printf("  %-22s %12.1f\n", "profiles/s", (double)g->profiles_ok / secs);
            printf("  %-22s %12.0f\n", "samples/s", (double)g->samples_ok / secs);
        }
        printf("  %-22s p50 %.2f  p90 %.2f  p99 %.2f  max %.2f  mean %.2f\n", "latency 2xx (ms)",
               p50, p90, p99, mx, mean);
        if (g->lat_err.count)
            printf("  %-22s p50 %.2f  p99 %.2f  max %.2f\n", "latency non-2xx (ms)",
                   ms(hist_quantile(&g->lat_err, 0.5)), ms(hist_quantile(&g->lat_err, 0.99)),
                   ms(g->lat_err.max));
        for (int s = 0; s < 600; s++)
            if (g->status[s]) printf("  HTTP %d: %" PRIu64 "\n", s, g->status[s]);
        if (g->first_error[0]) printf("  first error: %s\n", g->first_error);
    }
    printf("{\"tool\":\"loadgen\",\"label\":\"%s\",\"connections\":%u,\"rate\":%.1f,"
           "\"seconds\":%.3f,\"requests\":%" PRIu64 ",\"ok\":%" PRIu64 ",\"non_2xx\":%" PRIu64
           ",\"transport_errors\":%" PRIu64 ",\"skipped\":%" PRIu64 ",\"ok_per_s\":%.2f,"
           "\"bytes_ok\":%" PRIu64 ",\"bytes_sent\":%" PRIu64 ",\"mb_per_s_ok\":%.4f,"
           "\"profiles_ok\":%" PRIu64 ",\"samples_ok\":%" PRIu64 ",\"profiles_per_s\":%.2f,"
           "\"samples_per_s\":%.1f,\"p50_ms\":%.3f,\"p90_ms\":%.3f,\"p99_ms\":%.3f,"
           "\"max_ms\":%.3f,\"statuses\":{",
           g->o.label ? g->o.label : "", g->o.conns, g->o.rate, secs, g->done, g->ok, g->non2xx,
           g->transport, g->skipped, (double)g->ok / secs, g->bytes_ok, g->bytes_sent,
           (double)g->bytes_ok / secs / 1e6, g->profiles_ok, g->samples_ok,
           (double)g->profiles_ok / secs, (double)g->samples_ok / secs, p50, p90, p99, mx);
    int first = 1;
    for (int s = 0; s < 600; s++)
        if (g->status[s]) {
            printf("%s\"%d\":%" PRIu64, first ? "" : ",", s, g->status[s]);
            first = 0;
        }
    printf("}}\n");
    fflush(stdout);
}

static void usage(void)
{
    fprintf(stderr,
            "usage: loadgen --url http://127.0.0.1:PORT/PATH[?QUERY] --payload FILE|DIR\n"
            "               [--header 'Name: value']... [--connections N] [--rate R]\n"
            "               [--seconds S | --requests N] [--timeout-ms T] [--max-inflight M]\n"
            "               [--label NAME] [--quiet]\n");
}

static int parse(int argc, char **argv, opts *o)
{
    static const struct option lo[] = {
        {"url", required_argument, 0, 'u'},
        {"payload", required_argument, 0, 'p'},
        {"header", required_argument, 0, 'H'},
        {"connections", required_argument, 0, 'c'},
        {"rate", required_argument, 0, 'r'},
        {"seconds", required_argument, 0, 's'},
        {"requests", required_argument, 0, 'n'},
        {"timeout-ms", required_argument, 0, 't'},
        {"max-inflight", required_argument, 0, 'm'},
        {"label", required_argument, 0, 'l'},
        {"quiet", no_argument, 0, 'q'},
        {0, 0, 0, 0},
    };
    memset(o, 0, sizeof *o);
    o->conns = 8;
    o->timeout_ms = 30000;
    o->max_inflight = 10000;
    int ch;
    while ((ch = getopt_long(argc, argv, "u:p:H:c:r:s:n:t:m:l:q", lo, NULL)) != -1) {
        switch (ch) {
        case 'u': o->url = optarg; break;
        case 'p': o->payload = optarg; break;
        case 'H': {
            size_t n = strlen(o->headers);
            if (strchr(optarg, '\r') || strchr(optarg, '\n') || !strchr(optarg, ':') ||
                n + strlen(optarg) + 3 > sizeof o->headers) {
                fprintf(stderr, "bad or too long --header %s\n", optarg);
                return -1;
            }
            snprintf(o->headers + n, sizeof o->headers - n, "%s\r\n", optarg);
            break;
        }
        case 'c': o->conns = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'r': o->rate = strtod(optarg, NULL); break;
        case 's': o->seconds = strtod(optarg, NULL); break;
        case 'n': o->requests = strtoull(optarg, NULL, 10); break;
        case 't': o->timeout_ms = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'm': o->max_inflight = strtoull(optarg, NULL, 10); break;
        case 'l': o->label = optarg; break;
        case 'q': o->quiet = 1; break;
        default: return -1;
        }
    }
    if (!o->url || !o->payload || o->conns == 0 || o->conns > 4096 || o->timeout_ms == 0 ||
        (o->seconds <= 0 && o->requests == 0) || o->max_inflight == 0)
        return -1;
    if (o->seconds <= 0 || o->seconds > 3600) o->seconds = 3600; /* always bounded */
    return 0;
}

int main(int argc, char **argv)
{
    lg *g = &G;
    pc_error err = {0};
    if (parse(argc, argv, &g->o)) {
        usage();
        return 2;
    }
    if (pc_url_parse(g->o.url, &g->url, &err) < 0 || strcmp(g->url.scheme, "http")) {
        fprintf(stderr, "bad --url %s: %s\n", g->o.url, err.msg);
        return 2;
    }
    /* The target is taken verbatim from the URL: pc_url_parse already keeps the query in
     * url.path (appending it again sent "?a=b?a=b") and trims trailing slashes for exporters. */
    const char *t = strstr(g->o.url, "://") + 3;
    t += strcspn(t, "/?#");
    int slash = *t == '/', tn = (int)strcspn(t, "#") - slash;
    if ((size_t)snprintf(g->target, sizeof g->target, "/%.*s", tn, t + slash) >= sizeof g->target) {
        fprintf(stderr, "bad --url %s: path too long\n", g->o.url);
        return 2;
    }
    if (payload_load(g->o.payload, &g->ps)) return 2;

    g->loop = uv_default_loop();
    pc_http_client_opts co = {.host = g->url.host,
                              .port = g->url.port,
                              .max_connections = g->o.conns,
                              .log_id = "loadgen"};
    g->client = pc_http_client_new(g->loop, &co);
    uv_timer_init(g->loop, &g->tick);
    uv_timer_init(g->loop, &g->stop_timer);
    uv_timer_init(g->loop, &g->hard_timer);
    g->tick.data = g->stop_timer.data = g->hard_timer.data = g;
    g->t0 = uv_hrtime();
    uint64_t stop_ms = (uint64_t)(g->o.seconds * 1000.0);
    uv_timer_start(&g->stop_timer, on_stop, stop_ms, 0);
    uv_timer_start(&g->hard_timer, on_hard, stop_ms + g->o.timeout_ms + 2000, 0);
    if (g->o.rate > 0) {
        uv_timer_start(&g->tick, on_tick, 0, 1);
    } else {
        for (unsigned i = 0; i < g->o.conns && !g->stopping; i++)
            issue(g, uv_hrtime());
    }
    maybe_finish(g);
    uv_run(g->loop, UV_RUN_DEFAULT);
    report(g);
    for (size_t i = 0; i < g->ps.n; i++)
        free(g->ps.p[i].data);
    free(g->ps.p);
    return 0;
}
