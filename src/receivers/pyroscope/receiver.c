/* Receiver "pyroscope": what Pyroscope SDKs and agents send.
 *   POST /ingest, /pyroscope/ingest      every input format of src/formats/ (pc_formats[]: pprof
 *                                        raw or multipart, collapsed stacks, lines, JFR raw or
 *                                        multipart with jfr and labels parts, trie, tree and
 *                                        speedscope)
 *   POST /push.v1.PusherService/Push     Connect push (application/proto or application/json)
 *   POST /v1/pprof                       raw pprof, as the Collector's pprofreceiver (204)
 * Everything is decoded into OTLP (the translators of src/formats/) so every processor works on
 * Pyroscope traffic. Parsing and translation run on the thread pool. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <jansson.h>

#include "sdk/auth.h"
#include "base/gzip.h"
#include "net/http_server.h"
#include "net/tls.h"
#include "net/url.h"
#include "pdata/json.h"
#include "pdata/merge.h"
#include "pdata/proto_scan.h"
#include "sdk/component.h"
#include "sdk/receiver_http.h"
#include "sdk/telemetry.h"
#include "pyroscope_push.pb-c.h"
#include "formats/format.h"
#include "formats/jfr.h"
#include "receivers/pyroscope/ingest.h"

#define RETRY_AFTER_S 1
#define MAX_PARTS     16

typedef struct pyro_cfg {
    pc_http_server_cfg http;
    int64_t jfr_max_chunks, jfr_max_stack_depth, jfr_max_metadata_strings,
        jfr_max_metadata_elements, jfr_max_pool_entries;
} pyro_cfg;

#define STR_(x) #x
#define STR(x)  STR_(x)
/* clang-format off */
static const pc_cfg_key pyro_keys[] = {
    {"endpoint", PC_CFG_STRING, "localhost:4040", offsetof(pyro_cfg, http.endpoint), "host:port to listen on (0.0.0.0 for all interfaces)", NULL},
    {"", PC_CFG_GROUP, "", offsetof(pyro_cfg, http), "the HTTP server", pc_http_server_keys},
    {"jfr.max_chunks", PC_CFG_INT, STR(PC_JFR_DEFAULT_MAX_CHUNKS), offsetof(pyro_cfg, jfr_max_chunks), "JFR: chunks in one recording (docs/limits.md)", NULL},
    {"jfr.max_stack_depth", PC_CFG_INT, STR(PC_JFR_DEFAULT_MAX_STACK_DEPTH), offsetof(pyro_cfg, jfr_max_stack_depth), "JFR: frames of one stack trace", NULL},
    {"jfr.max_metadata_strings", PC_CFG_INT, STR(PC_JFR_DEFAULT_MAX_METADATA_STRINGS), offsetof(pyro_cfg, jfr_max_metadata_strings), "JFR: strings of a chunk's metadata", NULL},
    {"jfr.max_metadata_elements", PC_CFG_INT, STR(PC_JFR_DEFAULT_MAX_METADATA_ELEMENTS), offsetof(pyro_cfg, jfr_max_metadata_elements), "JFR: elements (classes, fields, annotations) of a chunk's metadata", NULL},
    {"jfr.max_pool_entries", PC_CFG_INT, STR(PC_JFR_DEFAULT_MAX_POOL_ENTRIES), offsetof(pyro_cfg, jfr_max_pool_entries), "JFR: constant-pool entries of one chunk", NULL},
    {0},
};
/* clang-format on */

typedef enum { API_INGEST, API_PUSH, API_PPROF } api_kind;

typedef struct pyro_recv {
    pc_component *c;
    pc_receiver_http http;
    pc_receiver_core core;
    pc_receiver_stats stats;
    uint64_t jfr_events[PC_JFR_KIND_COUNT], jfr_skipped, jfr_stacks_not_found;
    pc_shutdown_done shutdown_done;
} pyro_recv;

typedef struct job {
    pc_receive rq; /* first: the recipe's part */
    pyro_recv *r;
    pc_http_req *req;
    api_kind api;
    int json;          /* push: JSON request */
    int code;          /* the decode's: PC_OK, else its outcome (decode_status: the status) */
    pc_budget *budget; /* what the request may take decoded (docs/limits.md) */
    pc_jfr_stats jfr;  /* a JFR upload's counts, added to the receiver's on the loop */
    char err[512];
} job;

static int pyro_validate(void *cfgp, const pc_node *node, const char *path, pc_error *err)
{
    pyro_cfg *cfg = cfgp;
    const struct {
        const char *key;
        int64_t v;
    } jfr[] = {{"jfr.max_chunks", cfg->jfr_max_chunks},
               {"jfr.max_stack_depth", cfg->jfr_max_stack_depth},
               {"jfr.max_metadata_strings", cfg->jfr_max_metadata_strings},
               {"jfr.max_metadata_elements", cfg->jfr_max_metadata_elements},
               {"jfr.max_pool_entries", cfg->jfr_max_pool_entries}};
    int rc = pc_http_server_cfg_validate(&cfg->http, node, path, "", err);
    for (size_t i = 0; i < sizeof jfr / sizeof jfr[0]; i++)
        if (jfr[i].v < 1) {
            pc_cfg_errorf(err, node, path, "%s must be at least 1 (got %lld)", jfr[i].key,
                          (long long)jfr[i].v);
            rc = -1;
        }
    return rc;
}

static int pyro_create(pc_component *c, pc_error *err)
{
    pyro_recv *r = pc_xcalloc(1, sizeof(*r));
    (void)err;
    r->c = c;
    pc_receiver_core_init(&r->core, c);
    c->priv = r;
    return 0;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

#define FAIL(j, rc, ...)                                                                           \
    do {                                                                                           \
        (j)->code = (rc);                                                                          \
        snprintf((j)->err, sizeof(j)->err, __VA_ARGS__);                                           \
        goto out;                                                                                  \
    } while (0)

/* Request body, inflated when Content-Encoding says gzip. 0 ok; else PC_ENOTSUP (415), PC_E2BIG
 * (413) or PC_EINVAL (400), with the job's code and message set. */
static int request_body(job *j, pc_buf *inflated, const uint8_t **data, size_t *len)
{
    pyro_cfg *cfg = j->r->c->cfg;
    const char *ce = pc_http_req_header(j->req, "content-encoding");
    *data = j->req->body;
    *len = j->req->body_len;
    if (!ce || !*ce || !strcasecmp(ce, "identity")) return 0;
    if (strcasecmp(ce, "gzip") && strcasecmp(ce, "x-gzip") && strcasecmp(ce, "deflate")) {
        j->code = PC_ENOTSUP;
        snprintf(j->err, sizeof j->err, "unsupported Content-Encoding \"%s\"", ce);
        return PC_ENOTSUP;
    }
    int rc = pc_gzip_inflate(*data, *len, cfg->http.max_body, inflated);
    if (rc == PC_E2BIG) {
        j->code = PC_E2BIG;
        snprintf(j->err, sizeof j->err, "decompressed body exceeds max_request_body_size");
        return PC_E2BIG;
    }
    if (rc < 0) {
        j->code = PC_EINVAL;
        snprintf(j->err, sizeof j->err, "invalid gzip body");
        return PC_EINVAL;
    }
    *data = inflated->data;
    *len = inflated->len;
    return 0;
}

/* A refusal by the decode budget: PC_E2BIG (413) over the request's limit, PC_EAGAIN (503) when
 * the decodes in flight leave no room now, with the job's code and message set; 0 when the
 * budget did not refuse. */
static int budget_refused(job *j)
{
    if (j->budget->state == PC_OK) return 0;
    int rc = j->budget->state == PC_EAGAIN ? PC_EAGAIN : PC_E2BIG;
    j->code = rc;
    pc_budget_message(j->budget, "max_request_decoded_size", j->err, sizeof j->err);
    return rc;
}

/* The HTTP status for a decode outcome, in one place (spec/pyroscope.md §1.8): PC_EBADMSG, a
 * well-formed request whose profile cannot be decoded, is Pyroscope's 422; the other codes as
 * every receiver answers them. */
static int decode_status(int code)
{
    return code == PC_EBADMSG ? 422 : pc_receiver_http_status(code);
}

/* Decode data in format f into the job's batch (pprof appends). 0, or the format's outcome (the
 * budget's, when it refused) with the job's code and message set. */
static int run_format(job *j, const pc_format *f, const uint8_t *data, size_t len,
                      const pc_format_opts *o)
{
    pc_error e = {0};
    int rc = f->decode(data, len, o, &j->rq.batch, &e);
    if (rc == 0) return 0;
    if (budget_refused(j)) return j->code;
    j->code = rc;
    snprintf(j->err, sizeof j->err, "%s", e.msg);
    return rc;
}

/* pprof time_nanos 0 (or in 1970) takes from; a missing duration takes until - from. */
static void fix_times(pc_batch *b, size_t first_rp, int64_t from, int64_t until)
{
    for (size_t r = first_rp; r < pc_batch_req(b)->n_resource_profiles; r++) {
        pc_resource_profiles *rp = pc_batch_req(b)->resource_profiles[r];
        for (size_t s = 0; s < rp->n_scope_profiles; s++)
            for (size_t k = 0; k < rp->scope_profiles[s]->n_profiles; k++) {
                pc_profile *p = rp->scope_profiles[s]->profiles[k];
                if (p->time_unix_nano < 365ULL * 86400 * 1000000000ULL)
                    p->time_unix_nano = (uint64_t)from;
                if (!p->duration_nano && until > from) p->duration_nano = (uint64_t)(until - from);
            }
    }
}

/* What every format is read with, from the query: the name's labels and the spy as resource
 * attributes, an explicit service name, the scope from otel.scope.*, times, rate, units. */
static void ingest_opts(job *j, const pc_ingest_name *name, const char *spy, pc_format_attr *attrs,
                        pc_format_opts *o)
{
    pyro_cfg *cfg = j->r->c->cfg;
    o->attrs = attrs;
    o->app = name->app;
    o->scope_name = "profcol/pyroscope";
    for (size_t i = 0; i < name->n; i++) {
        if (!strcmp(name->keys[i], "otel.scope.name"))
            o->scope_name = name->vals[i];
        else if (!strcmp(name->keys[i], "otel.scope.version"))
            o->scope_version = name->vals[i];
        else if (!strcmp(name->keys[i], "service_name") || !strcmp(name->keys[i], "service.name"))
            o->service = name->vals[i]; /* an explicit service name wins over the app name */
        else
            attrs[o->n_attrs++] = (pc_format_attr){name->keys[i], name->vals[i]};
    }
    attrs[o->n_attrs++] = (pc_format_attr){"pyroscope.spy", spy && *spy ? spy : "unknown"};
    o->max_bytes = cfg->http.max_body;
    o->jfr =
        (pc_jfr_limits){(size_t)cfg->jfr_max_chunks, (size_t)cfg->jfr_max_stack_depth,
                        (size_t)cfg->jfr_max_metadata_strings,
                        (size_t)cfg->jfr_max_metadata_elements, (size_t)cfg->jfr_max_pool_entries};
    o->budget = j->budget;
    o->jfr_stats = &j->jfr;
}

/* A multipart/form-data upload (spec §1.5, spec/jfr.md §1), parsed once: *data, *len become the
 * part holding format f, o->extra its second part; *config the pprof's sample_type_config part
 * (or NULL). Parts are found with or without filename=, the last non-empty one of a name wins.
 * 0, or f->form_code (a broken form: 422 for JFR, 400 for pprof) with the job's code set. */
static int read_form(job *j, const pc_format *f, const char *ct, const uint8_t **data, size_t *len,
                     pc_format_opts *o, const pc_form_part **config, pc_form_part *parts)
{
    char boundary[80];
    pc_error e = {0};
    const pc_form_part *part = NULL;
    bool pprof = !strcmp(f->name, "pprof");
    if (pc_multipart_boundary(ct, boundary, sizeof boundary))
        FAIL(j, f->form_code, "malformed multipart content type header: no boundary");
    int np = pc_multipart_parse(*data, *len, boundary, parts, MAX_PARTS, &e);
    if (np < 0) FAIL(j, f->form_code, "%s", e.msg);
    for (int i = 0; i < np; i++) {
        if (!parts[i].len) continue;
        if (!strcmp(parts[i].name, f->part))
            part = &parts[i];
        else if (f->extra_part && !strcmp(parts[i].name, f->extra_part))
            o->extra = parts[i].data, o->extra_len = parts[i].len;
        else if (pprof && !strcmp(parts[i].name, "sample_type_config"))
            *config = &parts[i];
        else if (pprof && !strcmp(parts[i].name, "prev_profile"))
            FAIL(j, PC_EBADMSG,
                 "unsupported client version: prev_profile (cumulative profiles) is not "
                 "supported, upgrade the Pyroscope client");
    }
    if (!part) FAIL(j, f->form_code, "multipart form has no (non-empty) \"%s\" part", f->part);
    *data = part->data;
    *len = part->len;
out:
    return j->code;
}

/* A pprof upload's sample_type_config part (gzip or not) applied to the batch. 0, or PC_EINVAL
 * (400) with the job's code set. */
static int apply_config(job *j, const pc_form_part *config)
{
    pc_buf text = {0};
    pc_error e = {0};
    const uint8_t *cd = config->data;
    size_t cl = config->len;
    if (pc_is_gzip(cd, cl)) {
        if (pc_gzip_inflate(cd, cl, 1 << 20, &text) < 0)
            FAIL(j, PC_EINVAL, "sample_type_config: invalid gzip");
        cd = text.data;
        cl = text.len;
    }
    if (pc_ingest_apply_sample_type_config(j->rq.batch, 0, (const char *)cd, cl, &e) < 0)
        FAIL(j, PC_EINVAL, "%s", e.msg);
out:
    pc_buf_free(&text);
    return j->code;
}

/* /ingest: the format from format= and the Content-Type (pc_format_select), then its decoder. */
static void ingest_work(job *j)
{
    pc_http_req *req = j->req;
    pc_ingest_name name = {0};
    char *qname = pc_http_req_query(req, "name"), *qfrom = pc_http_req_query(req, "from");
    char *quntil = pc_http_req_query(req, "until"), *qformat = pc_http_req_query(req, "format");
    char *qrate = pc_http_req_query(req, "sampleRate"), *qspy = pc_http_req_query(req, "spyName");
    char *qunits = pc_http_req_query(req, "units");
    pc_buf inflated = {0};
    int have_name = 0;
    pc_error e = {0};
    if (!qname || !*qname) FAIL(j, PC_EINVAL, "name: service name is required");
    if (pc_ingest_parse_name(qname, &name, &e) < 0) FAIL(j, PC_EINVAL, "%s", e.msg);
    have_name = 1;
    int64_t now = now_ns();
    int64_t from = pc_ingest_parse_time(qfrom ? qfrom : "", now);
    int64_t until = pc_ingest_parse_time(quntil ? quntil : "", now);
    if (from < 0) FAIL(j, PC_EINVAL, "from: invalid time \"%s\"", qfrom);
    if (until < 0) FAIL(j, PC_EINVAL, "until: invalid time \"%s\"", quntil);
    const char *ct = pc_http_req_header(req, "content-type");
    pc_format_attr attrs[PC_INGEST_MAX_LABELS + 1];
    pc_format_opts o = {.time_ns = from,
                        .duration_ns = until - from,
                        .sample_rate = pc_ingest_sample_rate(qrate),
                        .units = qunits};
    ingest_opts(j, &name, qspy, attrs, &o);

    const uint8_t *body;
    size_t len;
    if (request_body(j, &inflated, &body, &len)) goto out;
    const pc_format *f = pc_format_select(qformat, ct);
    pc_form_part parts[MAX_PARTS];
    const pc_form_part *config = NULL;
    if (f->part && ct && strstr(ct, "multipart/form-data") &&
        read_form(j, f, ct, &body, &len, &o, &config, parts))
        goto out;
    if (run_format(j, f, body, len, &o)) goto out;
    if (config && apply_config(j, config)) goto out;
    fix_times(j->rq.batch, 0, from, until);
out:
    if (j->code && j->rq.batch) {
        pc_batch_unref(j->rq.batch);
        j->rq.batch = NULL;
    }
    if (have_name) pc_ingest_name_free(&name);
    free(qname), free(qfrom), free(quntil), free(qformat), free(qrate), free(qspy), free(qunits);
    pc_buf_free(&inflated);
}

/* Each sample of each series is decoded into a batch of its own and added to mg (resources kept
 * apart), which is counted against the budget as it grows. Decoding them one after another into
 * one batch rebuilt its dictionary's tables and copied its resource list per sample: quadratic in
 * the series of a request (issue 28: 2,000 series of 10 functions, 650 KB, took 4 to 6 s of CPU
 * and 320 MiB, then 413). 0, or the code (j->code set). */
static int push_series(job *j, const Push__V1__PushRequest *pr, pc_merger *mg)
{
    pyro_cfg *cfg = j->r->c->cfg;
    const pc_format *pprof = pc_format_find("pprof");
    size_t held = 0;
    int rc = 0;
    for (size_t s = 0; s < pr->n_series && !rc; s++) {
        const Push__V1__RawProfileSeries *ser = pr->series[s];
        pc_format_attr attrs[PC_INGEST_MAX_LABELS];
        pc_format_opts o = {.attrs = attrs,
                            .scope_name = "profcol/pyroscope",
                            .max_bytes = cfg->http.max_body,
                            .budget = j->budget};
        const char *svc = NULL;
        for (size_t l = 0; l < ser->n_labels; l++) {
            const char *k = ser->labels[l]->name, *v = ser->labels[l]->value;
            if (!strcmp(k, "service_name"))
                svc = v;
            else if (!strcmp(k, "otel_scope_name") || !strcmp(k, "otel.scope.name"))
                o.scope_name = v;
            else if (!strcmp(k, "otel_scope_version") || !strcmp(k, "otel.scope.version"))
                o.scope_version = v;
            else if (!strncmp(k, "__", 2))
                continue; /* __name__, __delta__: series internals */
            else if (o.n_attrs < PC_INGEST_MAX_LABELS)
                attrs[o.n_attrs++] = (pc_format_attr){k, v};
        }
        o.service = svc && *svc ? svc : "unknown_service"; /* written after the labels */
        for (size_t k = 0; k < ser->n_samples && !rc; k++) {
            const ProtobufCBinaryData *raw = &ser->samples[k]->raw_profile;
            if (!raw->len) continue;
            j->rq.batch = NULL;
            if ((rc = run_format(j, pprof, raw->data, raw->len, &o))) {
                if (j->code == PC_EBADMSG) j->code = PC_EINVAL; /* Connect: invalid_argument */
                rc = j->code;
                break;
            }
            pc_merger_add(mg, j->rq.batch, NULL, 0);
            pc_batch_unref(j->rq.batch); /* gives its charges back */
            j->rq.batch = NULL;
            size_t now = pc_merger_bytes(mg);
            pc_budget_charge(j->budget, now - held);
            held = now;
            rc = budget_refused(j);
        }
    }
    pc_budget_uncharge(j->budget, held);
    return rc;
}

static void push_work(job *j)
{
    pc_buf inflated = {0};
    const uint8_t *body;
    size_t len;
    pc_arena *a = pc_arena_new(4096);
    pc_arena_set_budget(a, j->budget);
    if (request_body(j, &inflated, &body, &len)) goto out;
    ProtobufCMessage *m = NULL;
    pc_error e = {0};
    if (j->json) {
        if (pc_json_decode(&push__v1__push_request__descriptor, (const char *)body, len, a, &m,
                           &e) < 0) {
            if (budget_refused(j)) goto out;
            FAIL(j, PC_EINVAL, "invalid PushRequest JSON: %.399s", e.msg);
        }
    } else {
        /* counted first (label strings checked for UTF-8, as Pyroscope's distributor does) */
        pc_proto_scan scan;
        if (pc_proto_scan_message(&push__v1__push_request__descriptor, body, len,
                                  PC_PROTO_MAX_DEPTH, &scan, &e) < 0)
            FAIL(j, PC_EINVAL, "invalid PushRequest: %.399s", e.msg);
        if (pc_budget_reserve(j->budget, scan.cost, "decoded PushRequest") < 0 && budget_refused(j))
            goto out;
        m = protobuf_c_message_unpack(&push__v1__push_request__descriptor, pc_arena_allocator(a),
                                      len, body);
        if (!m && budget_refused(j)) goto out;
        if (!m) FAIL(j, PC_EINVAL, "invalid PushRequest: malformed protobuf");
    }
    pc_merger *mg = pc_merger_new();
    pc_merger_keep_resources_apart(mg);
    int rc = push_series(j, (const Push__V1__PushRequest *)m, mg);
    pc_batch *b = pc_merger_finish(mg); /* empty when nothing was sent: still acknowledged */
    if (rc) {
        pc_batch_unref(b);
        goto out;
    }
    /* held against the budget until the recipe ends it, as a decoder's batch is */
    pc_arena_set_budget(b->arena, j->budget);
    pc_arena_charge(b->arena, pc_arena_size(b->arena));
    j->rq.batch = b;
out:
    if (j->code && j->rq.batch) {
        pc_batch_unref(j->rq.batch);
        j->rq.batch = NULL;
    }
    pc_arena_free(a);
    pc_buf_free(&inflated);
}

static void pprof_work(job *j)
{
    pyro_cfg *cfg = j->r->c->cfg;
    pc_format_opts o = {.scope_name = "profcol/pyroscope/httpserver",
                        .max_bytes = cfg->http.max_body,
                        .budget = j->budget};
    pc_buf inflated = {0};
    const uint8_t *body;
    size_t len;
    if (request_body(j, &inflated, &body, &len) == 0)
        run_format(j, pc_format_find("pprof"), body, len, &o);
    pc_buf_free(&inflated);
}

static int decode(pc_receive *rq, pc_budget *budget, pc_error *e)
{
    job *j = (job *)rq;
    j->budget = budget;
    switch (j->api) {
    case API_INGEST: ingest_work(j); break;
    case API_PUSH: push_work(j); break;
    case API_PPROF: pprof_work(j); break;
    }
    return j->code ? pc_error_set(e, j->code, "%s", j->err) : 0;
}

/* Connect error codes for the push API. */
static const char *connect_code(int http)
{
    switch (http) {
    case 400:
    case 415:
    case 422: return "invalid_argument";
    case 413:
    case 429: return "resource_exhausted";
    case 503: return "unavailable";
    default: return "internal";
    }
}

static void respond_error(job *j, int status, const char *msg)
{
    char extra[64] = "";
    if (status == 429 || status == 503)
        snprintf(extra, sizeof extra, "Retry-After: %d\r\n", RETRY_AFTER_S);
    if (j->api == API_PUSH) {
        json_t *o = json_pack("{s:s,s:s}", "code", connect_code(status), "message", msg);
        char *text = json_dumps(o, JSON_COMPACT);
        pc_http_respond(j->req, status, "application/json", text, strlen(text), extra);
        free(text);
        json_decref(o);
        return;
    }
    pc_buf b = {0};
    pc_buf_printf(&b, "%s\n", msg);
    pc_http_respond(j->req, status, "text/plain; charset=utf-8", b.data, b.len, extra);
    pc_buf_free(&b);
}

static void respond_ok(job *j)
{
    if (j->api == API_PPROF)
        pc_http_respond(j->req, 204, NULL, NULL, 0, NULL);
    else if (j->api == API_PUSH && j->json)
        pc_http_respond(j->req, 200, "application/json", "{}", 2, NULL);
    else if (j->api == API_PUSH)
        pc_http_respond(j->req, 200, "application/proto", NULL, 0, NULL);
    else
        pc_http_respond(j->req, 200, NULL, NULL, 0, NULL);
}

static void answer(pc_receive *rq, int st, const char *msg)
{
    job *j = (job *)rq;
    pyro_recv *r = j->r;
    for (int k = 0; k < PC_JFR_KIND_COUNT; k++)
        r->jfr_events[k] += j->jfr.events[k];
    r->jfr_skipped += j->jfr.skipped_events;
    r->jfr_stacks_not_found += j->jfr.stacks_not_found;
    if (st == PC_OK)
        respond_ok(j);
    else
        respond_error(j, decode_status(st), msg);
    free(j);
}

static const pc_receive_ops pyro_ops = {.decode = decode, .answer = answer};

/* 401 with the authenticator's challenge, in the format of the API asked for. */
static void respond_unauthorized(pyro_recv *r, pc_http_req *req)
{
    PC_DEBUG(r->c->id, "%s %s: 401: missing or invalid credentials", req->peer, req->path);
    const char *ch = pc_auth_challenge(r->http.auth);
    if (!strcmp(req->path, "/push.v1.PusherService/Push")) {
        static const char m[] = "{\"code\":\"unauthenticated\",\"message\":\"missing or invalid "
                                "credentials\"}";
        pc_http_respond(req, 401, "application/json", m, sizeof m - 1, ch);
        return;
    }
    static const char m[] = "missing or invalid credentials\n";
    pc_http_respond(req, 401, "text/plain; charset=utf-8", m, sizeof m - 1, ch);
}

static void on_request(pc_http_req *req, void *arg)
{
    pyro_recv *r = arg;
    api_kind api;
    if (r->http.auth && pc_auth_check(r->http.auth, req)) {
        respond_unauthorized(r, req);
        return;
    }
    if (!strcmp(req->path, "/ingest") || !strcmp(req->path, "/pyroscope/ingest"))
        api = API_INGEST;
    else if (!strcmp(req->path, "/push.v1.PusherService/Push"))
        api = API_PUSH;
    else if (!strcmp(req->path, "/v1/pprof"))
        api = API_PPROF;
    else {
        pc_http_respond(req, 404, "text/plain", "404 page not found\n", 19, NULL);
        return;
    }
    if (strcmp(req->method, "POST") != 0) {
        static const char m[] = "405 method not allowed, supported: [POST]\n";
        pc_http_respond(req, 405, "text/plain", m, sizeof m - 1, "Allow: POST\r\n");
        return;
    }
    const char *ct = pc_http_req_header(req, "content-type");
    int json = ct && strstr(ct, "json") != NULL;
    if (api == API_PUSH && !json &&
        !(ct && (strstr(ct, "application/proto") || strstr(ct, "application/x-protobuf")))) {
        static const char m[] = "{\"code\":\"invalid_argument\",\"message\":\"unsupported content "
                                "type, want application/proto or application/json\"}";
        r->stats.refused_requests.n[PC_REFUSED_UNSUPPORTED]++;
        pc_http_respond(req, 415, "application/json", m, sizeof m - 1, NULL);
        return;
    }
    job *j = pc_xcalloc(1, sizeof(*j));
    pyro_cfg *cfg = r->c->cfg;
    j->r = r;
    j->req = req;
    j->api = api;
    j->json = json;
    j->rq.ops = &pyro_ops;
    j->rq.core = &r->core;
    j->rq.stats = &r->stats;
    j->rq.route = &r->c->next;
    j->rq.sig = PC_SIGNAL_PROFILES;
    j->rq.who = req->peer;
    j->rq.max_decoded = pc_decoded_limit(cfg->http.max_decoded, cfg->http.max_body);
    j->rq.decoded_key = "max_request_decoded_size";
    j->rq.invalid_code = PC_EBADMSG; /* decoded, but not valid data: as undecodable (422) */
    pc_receive_set_tenant(&j->rq, pc_http_req_header(req, PC_META_TENANT));
    pc_receive_start(&j->rq);
}

static int pyro_start(pc_component *c, pc_error *e)
{
    pyro_recv *r = c->priv;
    pyro_cfg *cfg = c->cfg;
    r->http.refused = &r->stats.refused_requests;
    int rc = pc_receiver_http_start(&r->http, c, &cfg->http, on_request, r, e);
    if (rc < 0) return rc;
    pc_receiver_register_in_flight(c, &r->core.in_flight);
    pc_receiver_stats_register(c, &r->stats, "http");
    char labels[400];
    for (int k = 0; k < PC_JFR_KIND_COUNT; k++) {
        snprintf(labels, sizeof labels, "receiver=\"%s\",event=\"%s\"", c->id,
                 pc_jfr_kind_names[k]);
        pc_metric_u64(c, "profcol_receiver_jfr_events", "JFR events decoded, per event type",
                      PC_METRIC_COUNTER, labels, &r->jfr_events[k]);
    }
    snprintf(labels, sizeof labels, "receiver=\"%s\"", c->id);
    pc_metric_u64(c, "profcol_receiver_jfr_skipped_events",
                  "JFR events of types that make no profile, skipped", PC_METRIC_COUNTER, labels,
                  &r->jfr_skipped);
    pc_metric_u64(c, "profcol_receiver_jfr_stacks_not_found",
                  "JFR events dropped: their stack trace is in no constant pool", PC_METRIC_COUNTER,
                  labels, &r->jfr_stacks_not_found);
    PC_INFO(c->id,
            "Pyroscope ingest on %s://%s:%d (/ingest, /push.v1.PusherService/Push, /v1/pprof)%s",
            r->http.tls ? "https" : "http", r->http.host, r->http.port,
            r->http.auth ? ", authenticated" : "");
    return 0;
}

static void server_closed(void *arg)
{
    pc_component *c = arg;
    pyro_recv *r = c->priv;
    pc_receiver_core_flush(&r->core);
    PC_INFO(c->id, "stopped (accepted %llu samples, refused %llu)",
            (unsigned long long)r->stats.accepted[PC_SIGNAL_PROFILES],
            (unsigned long long)r->stats.refused[PC_SIGNAL_PROFILES]);
    r->shutdown_done(c);
}

static void pyro_shutdown(pc_component *c, pc_shutdown_done done)
{
    pyro_recv *r = c->priv;
    if (!r->http.srv) {
        done(c);
        return;
    }
    r->shutdown_done = done;
    pc_receiver_http_shutdown(&r->http, server_closed, c);
}

static void pyro_destroy(pc_component *c)
{
    free(c->priv);
}

const pc_component_type pc_receiver_pyroscope = {
    .name = "pyroscope",
    .kind = PC_KIND_RECEIVER,
    .stability = "alpha",
    .cfg_size = sizeof(pyro_cfg),
    .cfg = pyro_keys,
    .validate = pyro_validate,
    .create = pyro_create,
    .start = pyro_start,
    .shutdown = pyro_shutdown,
    .destroy = pyro_destroy,
    .doc = "Pyroscope ingest: /ingest (pprof, multipart, collapsed, JFR, trie, tree, speedscope), "
           "Connect Push, /v1/pprof",
};
