/* Test HTTP peers on the test's uv loop (testloop.h), written once for every unit test:
 *
 * - th_server: the real pc_http_server on 127.0.0.1:<ephemeral> that records every request
 *   (method, path, raw query, headers, body, peer) and answers a canned response (status,
 *   status_first for the first request, a body for 2xx and one for the rest), or hands the
 *   request to the test's answer function, which answers now or later with pc_http_respond.
 * - th_result: what a pc_http_client request got (on_resp callback), and opening and closing a
 *   client.
 * - th2_result: the same for pc_h2_client (status, error, grpc-status and grpc-message from the
 *   trailers or a trailers-only answer); closing an HTTP/2 client or server.
 *
 * Peers on helper threads with blocking sockets (hostile clients, scripted servers, a raw
 * nghttp2 peer) are in testpeer.h. */
#ifndef PC_TESTHTTP_H
#define PC_TESTHTTP_H

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <uv.h>

#include "check.h"
#include "net/h2_client.h"
#include "net/h2_server.h"
#include "net/http_client.h"
#include "net/http_server.h"
#include "testloop.h"

/* ---- the recording server ---- */

#define TH_MAX_RECS 16

typedef struct th_rec {
    char method[16];
    char *path, *query;
    pc_http_header *headers; /* names lower-cased, as the server gives them */
    size_t n_headers;
    uint8_t *body; /* NUL-terminated */
    size_t body_len;
    char peer[64];
} th_rec;

typedef struct th_server th_server;

/* Answers req, now or later (pc_http_respond); req is recorded already. */
typedef void (*th_answer_fn)(th_server *ts, pc_http_req *req);

struct th_server {
    uv_loop_t *loop;
    pc_http_server *s;
    int port;
    int n; /* requests seen since start or th_clear; the first TH_MAX_RECS are in recs */
    th_rec recs[TH_MAX_RECS];
    th_answer_fn answer; /* NULL: the canned answer below */
    /* canned: status (200 after th_start), or status_first for the first request when set; a
     * 2xx carries ok_body (NULL: none) as ok_ctype, anything else err_body as err_ctype */
    int status, status_first;
    const char *ok_ctype, *ok_body, *err_ctype, *err_body;
};

static inline char *th_dup(const void *p, size_t n)
{
    char *s = malloc(n + 1);
    memcpy(s, p, n);
    s[n] = 0;
    return s;
}

static inline void th_record(th_rec *r, const pc_http_req *req)
{
    snprintf(r->method, sizeof r->method, "%s", req->method);
    r->path = strdup(req->path);
    r->query = strdup(req->query);
    r->headers = calloc(req->n_headers ? req->n_headers : 1, sizeof *r->headers);
    for (size_t i = 0; i < req->n_headers; i++) {
        r->headers[i].name = strdup(req->headers[i].name);
        r->headers[i].value = strdup(req->headers[i].value);
    }
    r->n_headers = req->n_headers;
    r->body = (uint8_t *)th_dup(req->body, req->body_len);
    r->body_len = req->body_len;
    snprintf(r->peer, sizeof r->peer, "%s", req->peer);
}

/* A recorded header's value (case-insensitive name); NULL if it was not sent. */
static inline const char *th_header(const th_rec *r, const char *name)
{
    for (size_t i = 0; i < r->n_headers; i++)
        if (strcasecmp(r->headers[i].name, name) == 0) return r->headers[i].value;
    return NULL;
}

static inline void th_canned(th_server *ts, pc_http_req *req)
{
    int status = ts->n == 1 && ts->status_first ? ts->status_first : ts->status;
    const char *ctype = status >= 200 && status < 300 ? ts->ok_ctype : ts->err_ctype;
    const char *body = status >= 200 && status < 300 ? ts->ok_body : ts->err_body;
    pc_http_respond(req, status, ctype, body, body ? strlen(body) : 0, NULL);
}

/* The pc_http_handler behind every th_server (arg: the th_server). */
static inline void th_handler(pc_http_req *req, void *arg)
{
    th_server *ts = arg;
    if (ts->n < TH_MAX_RECS) th_record(&ts->recs[ts->n], req);
    ts->n++;
    if (ts->answer)
        ts->answer(ts, req);
    else
        th_canned(ts, req);
}

/* Forget what was recorded (the next request is the first again). */
static inline void th_clear(th_server *ts)
{
    for (int i = 0; i < ts->n && i < TH_MAX_RECS; i++) {
        th_rec *r = &ts->recs[i];
        for (size_t k = 0; k < r->n_headers; k++) {
            free(r->headers[k].name);
            free(r->headers[k].value);
        }
        free(r->headers);
        free(r->path);
        free(r->query);
        free(r->body);
        memset(r, 0, sizeof *r);
    }
    ts->n = 0;
}

/* Start ts (zeroed here) on loop with o (host default 127.0.0.1, port 0, log_id "test-srv") and
 * answer (NULL: canned 200 without a body). Returns pc_http_server_start's result. */
static inline int th_start(th_server *ts, uv_loop_t *loop, pc_http_server_opts o,
                           th_answer_fn answer)
{
    memset(ts, 0, sizeof *ts);
    ts->loop = loop;
    ts->answer = answer;
    ts->status = 200;
    o.host = o.host ? o.host : "127.0.0.1";
    o.log_id = o.log_id ? o.log_id : "test-srv";
    ts->s = pc_http_server_new(loop, &o, th_handler, ts);
    pc_error err = {0};
    int rc = pc_http_server_start(ts->s, &err);
    CHECK_EQ_INT(rc, 0);
    if (rc) fprintf(stderr, "start: %s\n", err.msg);
    ts->port = pc_http_server_port(ts->s);
    CHECK(ts->port > 0);
    return rc;
}

/* Shut the server down (in-flight requests are answered first), then forget the records. */
static inline void th_stop(th_server *ts)
{
    atomic_int done = 0;
    pc_http_server_shutdown(ts->s, set_flag, &done);
    CHECK(wait_until(ts->loop, flag_set, &done, 5000));
    th_clear(ts);
}

/* ---- an HTTP client's answers ---- */

typedef struct th_result {
    atomic_int done;
    int status, error, retry_after;
    char msg[512], ctype[64], body[4096]; /* body: NUL-terminated, cut to fit */
    size_t body_len;
    uint8_t *big; /* the whole body when it did not fit (malloc'd; the test frees it) */
    double t_ms;  /* when it came (now_ms) */
} th_result;

/* pc_http_client_request's callback; arg: a th_result. */
static inline void th_on_resp(const pc_http_response *resp, void *arg)
{
    th_result *r = arg;
    r->status = resp->status;
    r->error = resp->error;
    r->retry_after = resp->retry_after_s;
    snprintf(r->msg, sizeof r->msg, "%s", resp->error_msg ? resp->error_msg : "");
    snprintf(r->ctype, sizeof r->ctype, "%s", resp->content_type ? resp->content_type : "");
    r->body_len = resp->body_len;
    size_t n = resp->body_len < sizeof r->body - 1 ? resp->body_len : sizeof r->body - 1;
    memcpy(r->body, resp->body, n);
    r->body[n] = 0;
    if (resp->body_len > sizeof r->body) r->big = (uint8_t *)th_dup(resp->body, resp->body_len);
    r->t_ms = now_ms();
    atomic_store(&r->done, 1);
}

/* A plain-text client of 127.0.0.1:port. */
static inline pc_http_client *th_client_new(uv_loop_t *loop, int port, unsigned max_conns)
{
    pc_http_client_opts o = {
        .host = "127.0.0.1", .port = port, .max_connections = max_conns, .log_id = "test-cli"};
    return pc_http_client_new(loop, &o);
}

/* Close c (queued requests are cancelled, in-flight ones end first) and wait until it is. */
static inline void th_client_close(uv_loop_t *loop, pc_http_client *c)
{
    atomic_int done = 0;
    pc_http_client_close(c, set_flag, &done);
    CHECK(wait_until(loop, flag_set, &done, 5000));
}

/* ---- HTTP/2 ---- */

typedef struct th2_result {
    int done; /* answers so far (a result may collect several) */
    int status, error;
    int grpc_code; /* grpc-status of the last answer, -1 without one */
    char grpc_msg[256];
    size_t body_len;
} th2_result;

static inline const char *th2_hdr(const pc_h2_header *h, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(h[i].name, name)) return h[i].value;
    return NULL;
}

/* pc_h2_client_request's callback; arg: a th2_result. */
static inline void th2_on_resp(const pc_h2_response *r, void *arg)
{
    th2_result *o = arg;
    o->done++;
    o->status = r->status;
    o->error = r->error;
    const char *gs = th2_hdr(r->trailers, r->n_trailers, "grpc-status");
    if (!gs) gs = th2_hdr(r->headers, r->n_headers, "grpc-status");
    o->grpc_code = gs ? atoi(gs) : -1;
    const char *gm = th2_hdr(r->trailers, r->n_trailers, "grpc-message");
    if (!gm) gm = th2_hdr(r->headers, r->n_headers, "grpc-message");
    snprintf(o->grpc_msg, sizeof o->grpc_msg, "%s", gm ? gm : "");
    o->body_len = r->body_len;
}

static inline void th2_client_close(uv_loop_t *loop, pc_h2_client *c)
{
    atomic_int done = 0;
    pc_h2_client_close(c, set_flag, &done);
    CHECK(wait_until(loop, flag_set, &done, 5000));
}

/* An h2c server started on o (host default 127.0.0.1; port 0: ephemeral, pc_h2_server_port);
 * a failed start is a failed check. */
static inline pc_h2_server *th2_server_start(uv_loop_t *loop, pc_h2_server_opts o,
                                             pc_h2_handler handler, void *arg)
{
    o.host = o.host ? o.host : "127.0.0.1";
    pc_h2_server *s = pc_h2_server_new(loop, &o, handler, arg);
    pc_error err = {0};
    int rc = pc_h2_server_start(s, &err);
    CHECK_EQ_INT(rc, 0);
    if (rc) fprintf(stderr, "h2 start: %s\n", err.msg);
    return s;
}

static inline void th2_server_stop(uv_loop_t *loop, pc_h2_server *s)
{
    atomic_int done = 0;
    pc_h2_server_shutdown(s, set_flag, &done);
    CHECK(wait_until(loop, flag_set, &done, 10000));
}

#endif
