/* Receiver "pyroscope_scrape", inside: what its files share (scrape.c: the component, the
 * schedule, a scrape's way through the receiver recipe; targets.c: target groups, labels and the
 * live target set; discovery.c: file_sd_configs and dns_sd_configs). */
#ifndef PC_RECEIVERS_SCRAPE_H
#define PC_RECEIVERS_SCRAPE_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "net/http_client.h"
#include "net/tls.h"
#include "pdata/delta.h"
#include "sdk/auth.h"
#include "sdk/component.h"
#include "sdk/exporter_http.h"
#include "sdk/receiver.h"
#include "formats/format.h"

/* The built-in profile types (spec/scrape.md §2.2), in the order of the config table. */
enum { T_CPU, T_MEMORY, T_GOROUTINE, T_MUTEX, T_BLOCK, T_FGPROF, T_DMEMORY, T_DMUTEX, T_DBLOCK };
#define N_BUILTIN 9

typedef struct ptype_cfg {
    bool enabled;
    char *path;
    bool delta;      /* Alloy's meaning: ask for a window, ?seconds=N (CPU, fgprof) */
    bool cumulative; /* subtract the previous scrape (allocations, mutex, block) */
} ptype_cfg;

typedef struct scrape_cfg {
    char *job_name;
    uint64_t interval_ms, timeout_ms, cpu_ms;
    int64_t max_concurrent;
    uint64_t max_body, max_decoded;
    int scheme; /* 0 http, 1 https */
    char *path_prefix;
    ptype_cfg types[N_BUILTIN];
    const pc_node *custom, *static_configs, *file_sd, *dns_sd;
    pc_http_client_cfg client; /* headers, max_connections, tls, auth (timeout: scrape_timeout) */
} scrape_cfg;

/* A profile type as scraped: a built-in one or a custom one. */
typedef struct ptype {
    char *name;   /* the config's: "process_cpu", "godeltaprof_memory", "custom_x" */
    char *report; /* Pyroscope's __name__: godeltaprof_memory is "memory" */
    char *path;
    bool seconds;           /* ?seconds=N */
    const char *const *sub; /* the sample types subtracted; NULL: none (not cumulative) */
    bool sub_all;           /* a custom cumulative type: every sample type */
} ptype;

/* Why a scrape failed (profcol_scrape_errors_total{reason}). */
typedef enum {
    R_CONNECT,   /* could not connect or the connection broke */
    R_TIMEOUT,   /* no complete answer within the timeout */
    R_STATUS,    /* an answer other than 2xx */
    R_TOO_LARGE, /* body or inflated profile over max_body_size, or over the decode budget */
    R_NOT_PPROF, /* empty, HTML, JSON, text: not a profile */
    R_DECODE,    /* not a valid pprof */
    R_PIPELINE,  /* the pipelines refused it */
    R_OVERLAP,   /* still running when the next one was due (skipped) */
    R_COUNT
} scrape_reason;
extern const char *const scrape_reason_names[R_COUNT];

typedef struct scrape_recv scrape_recv;
typedef struct target target;

/* One (target, profile type): its schedule, its delta state, its self-metrics. */
typedef struct series {
    struct series *next;  /* in its target */
    struct series *qnext; /* waiting for a free scrape slot */
    target *t;
    const ptype *type;
    char *path; /* with the query */
    char *service;
    pc_format_attr *attrs; /* resource attributes: the public labels but service_name */
    size_t n_attrs;
    pc_delta *delta; /* cumulative types; touched by one scrape at a time */
    uv_timer_t timer;
    uint64_t offset_ms; /* its phase in the interval, from the address and path */
    bool timer_open, busy, queued;
    uint64_t started_ms;
    /* self-metrics */
    uint64_t up, samples, errors[R_COUNT], scrapes;
    double duration_s;
    char mlabels[1400];
} series;

/* A target: an address and its labels, from one source; one client for its series. */
struct target {
    target *next;
    scrape_recv *x;
    char *source; /* "static", "file:<path>", "dns:<name>" */
    char *key;    /* address and labels, canonical: the same target from the same source */
    char *address, *scheme;
    char host[256];
    int port;
    pc_http_client *client;
    series *series;
    bool removed; /* let go: freed once nothing runs */
    bool logged;  /* a failure was logged, at last_log_ms; held_back since */
    uint64_t last_log_ms, held_back;
};

/* What scrape.c does for targets.c and discovery.c, set when it creates the receiver: the two
 * call down into scrape.c through these, never by name (the folder's files stay a chain: scrape.c
 * on discovery.c on targets.c). */
typedef struct scrape_calls {
    void (*schedule)(series *s);        /* a series' first scrape is due */
    void (*release)(target *t);         /* a target and its series are done with: freed once idle */
    void (*try_finish)(scrape_recv *x); /* shutting down: done once nothing runs or closes */
} scrape_calls;

struct scrape_recv {
    pc_component *c;
    scrape_calls ops;
    uint64_t base_ms; /* uv_now when it started: the series' phases count from it */
    ptype *types;
    size_t n_types;
    target *targets;
    series *qhead, *qtail; /* waiting for a slot (max_concurrent_scrapes) */
    size_t active;         /* scrapes running */
    size_t closing;        /* handles and clients closing */
    bool stopping;
    pc_tls_ctx *tls;
    pc_auth *auth;
    char *headers; /* the configured ones, "Name: value\r\n" */
    pc_receiver_core core;
    pc_receiver_stats stats;
    uint64_t n_targets;
    pc_shutdown_done shutdown_done;
    struct discovery *disc;
};

/* A target as discovered: its address and labels (group labels and meta labels included). */
typedef struct sd_target {
    char *address;
    pc_strmap labels;
} sd_target;
void sd_targets_free(sd_target *ts, size_t n);

/* targets.c */
/* The groups of a static_configs-shaped list ([{targets: [...], labels: {...}}]) appended to
 * *ts; meta labels (k=v pairs) added to each. 0, or PC_EINVAL with err at path. */
int sd_parse_groups(const pc_node *list, const char *path, const char *const *meta, size_t n_meta,
                    sd_target **ts, size_t *n, pc_error *err);
/* Make source's targets these (taken over): new ones start, vanished ones stop. */
void scrape_sync(scrape_recv *x, const char *source, sd_target *ts, size_t n);
/* Stop and let go of every target (shutdown). */
void scrape_drop_all(scrape_recv *x);
void series_release(series *s);

/* discovery.c */
int discovery_validate(const scrape_cfg *cfg, const pc_node *node, const char *path, pc_error *e);
int discovery_start(scrape_recv *x, pc_error *e);
void discovery_stop(scrape_recv *x);
void discovery_free(scrape_recv *x);

#endif
