/* Processor "memory_limiter" (like the Collector's): measures the process's real memory (RSS)
 * every check_interval. Above the soft limit (limit - spike_limit) it refuses data with a
 * retryable error (the receiver answers 503 with Retry-After, the sender keeps the data). Above
 * the hard limit it also asks every HTTP server to stop reading sockets (TCP back-pressure: not
 * even a 503 is worth the memory) until memory falls back under the hard limit. The memory that
 * decodes in flight have reserved counts as used, and those decodes may reserve only what the
 * soft limit leaves above the resident set (docs/limits.md).
 *
 * Its refusal is its own pipeline's: receivers ask the pipelines they feed before decoding
 * (pc_consumer_admit), so two limiters with different limits each refuse for their pipelines.
 * The room it leaves for decodes travels the same way (pc_budget.room). Socket reads are the
 * process's: paused while any limiter is above its hard limit. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cgroup.h"
#include "net/http_pause.h"
#include "sdk/component.h"
#include "sdk/telemetry.h"

#define MIN_RECHECK_MS 20
/* How often a limiter with percentages reads the memory it may use again: a container's limit can
 * change while it runs (Kubernetes' in-place pod resize rewrites the cgroup's memory limit). */
#define TOTAL_RECHECK_MS 1000

typedef struct ml_cfg {
    uint64_t check_interval_ms;
    int64_t limit_mib, spike_limit_mib;
    int64_t limit_percentage, spike_limit_percentage;
} ml_cfg;

/* clang-format off */
static const pc_cfg_key ml_keys[] = {
    {"check_interval", PC_CFG_DURATION, "1s", offsetof(ml_cfg, check_interval_ms), "how often memory is measured", NULL},
    {"limit_mib", PC_CFG_INT, "0", offsetof(ml_cfg, limit_mib), "hard limit on RSS in MiB (or use limit_percentage)", NULL},
    {"spike_limit_mib", PC_CFG_INT, "0", offsetof(ml_cfg, spike_limit_mib), "headroom below the hard limit; data is refused above limit - spike (default 20% of limit)", NULL},
    {"limit_percentage", PC_CFG_INT, "0", offsetof(ml_cfg, limit_percentage), "hard limit as a percentage of total (or cgroup) memory", NULL},
    {"spike_limit_percentage", PC_CFG_INT, "0", offsetof(ml_cfg, spike_limit_percentage), "headroom as a percentage of total (or cgroup) memory", NULL},
    {0},
};
/* clang-format on */

typedef struct limiter {
    pc_component *c;
    uv_timer_t timer;
    int timer_open;
    uint64_t hard, soft; /* bytes */
    uint64_t total;      /* what limit_percentage is of, in bytes (0: limit_mib) */
    uint64_t total_read_ms;
    int refusing, paused;
    uint64_t last_check_ms;
    uint64_t refused_samples, refusals;
    uint64_t decode_cap; /* what the soft limit leaves above the resident set, for decodes */
    pc_shutdown_done done;
    struct limiter *next_live;
} limiter;

/* Every started limiter (one per pipeline that lists one), for the one thing they share: the
 * process's socket reads. Loop thread only. */
static limiter *g_live;

/* Socket reads are the process's: paused while any live limiter (not the last one measured) is
 * above its hard limit. */
static void sync_process_state(void)
{
    int paused = 0;
    for (limiter *l = g_live; l; l = l->next_live)
        paused |= l->paused;
    if (paused != pc_http_servers_paused()) pc_http_servers_pause(paused);
}

/* The memory this process may use: its cgroup's limit (or an ancestor's) when there is one, else
 * physical memory. */
static uint64_t total_memory(void)
{
    uint64_t cg = pc_cgroup_memory_limit(NULL);
    FILE *f = fopen("/proc/meminfo", "r");
    unsigned long long kb = 0;
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemTotal: %llu kB", &kb) == 1) break;
        fclose(f);
    }
    uint64_t phys = (uint64_t)kb * 1024;
    return cg && cg < phys ? cg : phys;
}

static int ml_validate(void *cfgp, const pc_node *node, const char *path, pc_error *err)
{
    ml_cfg *cfg = cfgp;
    if (cfg->check_interval_ms == 0)
        return pc_cfg_key_errorf(err, node, path, "check_interval", "must be > 0");
    if (cfg->limit_mib <= 0 && (cfg->limit_percentage <= 0 || cfg->limit_percentage > 100))
        return pc_cfg_key_errorf(err, node, path, "limit_mib",
                                 "set limit_mib > 0 or limit_percentage in 1..100");
    if (cfg->limit_mib > 0 && cfg->spike_limit_mib >= cfg->limit_mib)
        return pc_cfg_key_errorf(err, node, path, "spike_limit_mib", "must be below limit_mib");
    if (cfg->spike_limit_mib < 0 || cfg->spike_limit_percentage < 0 ||
        (cfg->limit_percentage > 0 && cfg->spike_limit_percentage >= cfg->limit_percentage))
        return pc_cfg_key_errorf(err, node, path, "spike_limit_percentage",
                                 "must be >= 0 and below limit_percentage");
    return 0;
}

/* Refuse above hard - spike; spike 0: a fifth of hard (the Collector's default). */
static void set_limits(limiter *l, uint64_t hard, uint64_t spike)
{
    l->hard = hard;
    l->soft = hard - (spike ? spike : hard / 5);
}

/* The limits as percentages of total bytes. */
static void set_total(limiter *l, const ml_cfg *cfg, uint64_t total)
{
    l->total = total;
    set_limits(l, total / 100 * (uint64_t)cfg->limit_percentage,
               cfg->spike_limit_percentage > 0 ? total / 100 * (uint64_t)cfg->spike_limit_percentage
                                               : 0);
}

/* With percentages, follow a memory limit that changed (at most once per TOTAL_RECHECK_MS). */
static void follow_total(limiter *l)
{
    const ml_cfg *cfg = l->c->cfg;
    uint64_t now = uv_now(l->c->loop);
    if (!l->total || now - l->total_read_ms < TOTAL_RECHECK_MS) return;
    l->total_read_ms = now;
    uint64_t total = total_memory();
    if (!total || total == l->total) return;
    set_total(l, cfg, total);
    PC_INFO(l->c->id,
            "the memory this process may use is now %llu MiB: limit %llu MiB, refusing "
            "above %llu MiB",
            (unsigned long long)(total >> 20), (unsigned long long)(l->hard >> 20),
            (unsigned long long)(l->soft >> 20));
}

static int ml_create(pc_component *c, pc_error *err)
{
    ml_cfg *cfg = c->cfg;
    limiter *l = pc_xcalloc(1, sizeof(*l));
    (void)err;
    l->c = c;
    c->priv = l;
    if (cfg->limit_mib > 0)
        set_limits(l, (uint64_t)cfg->limit_mib << 20,
                   cfg->spike_limit_mib > 0 ? (uint64_t)cfg->spike_limit_mib << 20 : 0);
    else
        set_total(l, cfg, total_memory());
    return 0;
}

static void measure(limiter *l)
{
    l->last_check_ms = uv_now(l->c->loop);
    uint64_t rss = pc_process_rss();
    if (rss > l->hard) malloc_trim(0); /* hand freed arenas back before refusing for long */
    l->decode_cap = rss < l->soft ? l->soft - rss : 0;
    /* what the decodes in flight have reserved is about to be used: it counts as used now */
    rss += pc_budget_in_flight();
    int over = rss > l->soft, hard = rss > l->hard;
    if (over && !l->refusing)
        PC_WARN(l->c->id, "memory usage %llu MiB above the soft limit %llu MiB: refusing data",
                (unsigned long long)(rss >> 20), (unsigned long long)(l->soft >> 20));
    else if (!over && l->refusing)
        PC_INFO(l->c->id, "memory usage %llu MiB back under the soft limit: accepting data",
                (unsigned long long)(rss >> 20));
    if (hard != l->paused)
        PC_WARN(l->c->id, "memory usage %llu MiB %s the hard limit %llu MiB: %s socket reads",
                (unsigned long long)(rss >> 20), hard ? "above" : "back under",
                (unsigned long long)(l->hard >> 20), hard ? "pausing" : "resuming");
    l->refusing = over;
    l->paused = hard;
    sync_process_state();
}

static void check(uv_timer_t *t)
{
    follow_total(t->data);
    measure(t->data);
}

static int ml_start(pc_component *c, pc_error *e)
{
    limiter *l = c->priv;
    ml_cfg *cfg = c->cfg;
    (void)e;
    uv_timer_init(c->loop, &l->timer);
    l->timer.data = l;
    l->timer_open = 1;
    l->decode_cap = SIZE_MAX;
    l->next_live = g_live;
    g_live = l;
    uv_timer_start(&l->timer, check, 0, cfg->check_interval_ms);
    char labels[300];
    snprintf(labels, sizeof labels, "processor=\"%s\"", c->id);
    /* the Collector's memory_limiter names its counters so (otelcol 0.161.0 exports
     * otelcol_processor_memory_limiter_accepted_spans) */
    pc_metric_u64(c, "otelcol_processor_memory_limiter_refused_profile_samples",
                  "Profile samples refused by the memory limiter", PC_METRIC_COUNTER, labels,
                  &l->refused_samples);
    PC_INFO(c->id, "limit %llu MiB, refusing above %llu MiB", (unsigned long long)(l->hard >> 20),
            (unsigned long long)(l->soft >> 20));
    return 0;
}

/* Under load a whole check_interval of accepted data can overshoot the limit: measure again
 * when the last reading is older than MIN_RECHECK_MS (reading RSS costs microseconds). */
static void measure_if_stale(limiter *l)
{
    if (l->timer_open && uv_now(l->c->loop) - l->last_check_ms >= MIN_RECHECK_MS) measure(l);
}

/* Receivers ask before decoding: refused for this pipeline while above the soft limit, and
 * otherwise the decodes in flight may hold what the soft limit leaves above the resident set. */
static pc_admit ml_admit(pc_component *c, size_t *room)
{
    limiter *l = c->priv;
    if (!l || !l->timer_open) return PC_ADMIT_OK;
    measure_if_stale(l);
    if (l->decode_cap < *room) *room = (size_t)l->decode_cap;
    return l->refusing ? PC_ADMIT_MEMORY : PC_ADMIT_OK;
}

static void ml_consume(pc_component *c, pc_batch *b, pc_done_fn done, void *arg)
{
    limiter *l = c->priv;
    measure_if_stale(l);
    if (l->refusing) {
        l->refused_samples += pc_batch_counts(b).samples;
        pc_batch_unref(b);
        done(arg, PC_EAGAIN, "memory limit reached, retry later");
        return;
    }
    pc_consume(c->next, b, done, arg);
}

static void timer_closed(uv_handle_t *h)
{
    limiter *l = h->data;
    l->done(l->c);
}

static void ml_shutdown(pc_component *c, pc_shutdown_done done)
{
    limiter *l = c->priv;
    for (limiter **p = &g_live; *p; p = &(*p)->next_live)
        if (*p == l) {
            *p = l->next_live;
            break;
        }
    l->refusing = l->paused = 0;
    sync_process_state();
    if (!l->timer_open) {
        done(c);
        return;
    }
    l->timer_open = 0;
    l->done = done;
    uv_close((uv_handle_t *)&l->timer, timer_closed);
}

static void ml_destroy(pc_component *c)
{
    free(c->priv);
}

const pc_component_type pc_processor_memory_limiter = {
    .name = "memory_limiter",
    .kind = PC_KIND_PROCESSOR,
    .stability = "alpha",
    .cfg_size = sizeof(ml_cfg),
    .cfg = ml_keys,
    .validate = ml_validate,
    .create = ml_create,
    .start = ml_start,
    .consume = ml_consume,
    .admit = ml_admit,
    .shutdown = ml_shutdown,
    .destroy = ml_destroy,
    .signals = PC_SIGNALS_ALL,
    .doc = "refuses data (503, retryable) and pauses socket reads while RSS is above the limit",
};
