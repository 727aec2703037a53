/* The receiver recipe (sdk/receiver.h); its decode gate is sdk/pool.c. */
#include "sdk/receiver.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "pdata/wire_check.h"
#include "sdk/pool.h"

void pc_receiver_stats_register(pc_component *c, pc_receiver_stats *s, const char *transport)
{
    for (int sig = 0; sig < PC_SIGNAL_COUNT; sig++)
        if (c->route[sig] || (sig == PC_SIGNAL_PROFILES && c->next))
            pc_receiver_register_metrics(c, (pc_signal)sig, transport, &s->accepted[sig],
                                         &s->refused[sig]);
    pc_receiver_register_refused_requests(c, transport, &s->refused_requests);
    if (c->route[PC_SIGNAL_PROFILES] || c->next)
        pc_receiver_register_wire_checked(c, transport, &s->wire_checked);
}

void pc_receiver_core_init(pc_receiver_core *rc, pc_component *c)
{
    memset(rc, 0, sizeof *rc);
    rc->c = c;
}

void pc_receiver_core_flush(pc_receiver_core *rc)
{
    pc_log_limiter_flush(&rc->refused_log, PC_LOG_INFO, rc->c->id, "refused requests");
    pc_log_limiter_flush(&rc->pipeline_log, PC_LOG_WARN, rc->c->id, "pipeline refusals");
}

void pc_receive_set_tenant(pc_receive *rq, const char *tenant)
{
    rq->tenant[0] = 0;
    if (!tenant || !*tenant || strlen(tenant) >= sizeof rq->tenant) return;
    for (const char *p = tenant; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) return; /* it goes into headers again */
    strcpy(rq->tenant, tenant);
}

static void finish(pc_receive *rq, int st, const char *msg)
{
    pc_receiver_core *core = rq->core;
    pc_batch_unref(rq->batch);
    rq->batch = NULL;
    core->in_flight--;
    rq->ops->answer(rq, st, msg); /* may free rq */
}

/* ---- decode and validate (thread pool) ---- */

static int refusal_code(int rc)
{
    switch (rc) {
    case PC_EAGAIN:
    case PC_E2BIG:
    case PC_ENOTSUP:
    case PC_EBADMSG: return rc;
    default: return PC_EINVAL;
    }
}

static void validate(pc_receive *rq)
{
    size_t decoded = pc_batch_items(rq->batch);
    pc_error e = {0};
    int rc = rq->sig == PC_SIGNAL_PROFILES ? pc_batch_validate(rq->batch, &rq->rejected, &e)
                                           : pc_signal_validate(rq->batch, &e);
    if (e.code || rc < 0) snprintf(rq->msg, sizeof rq->msg, "%s", e.msg);
    if (rc < 0) {
        rq->code = rq->invalid_code ? rq->invalid_code : PC_EINVAL;
        rq->invalid = decoded;
        return;
    }
    rq->items = pc_batch_items(rq->batch);
    rq->invalid = decoded - rq->items; /* what validation took out is refused data */
}

/* own: data's malloc'd block, for the batch to take, else NULL */
static bool wire_check(pc_receive *rq, const uint8_t *data, size_t len, pc_buf *own,
                       pc_budget *budget)
{
    pc_wire_counts wc;
    pc_error e = {0};
    if (!rq->wire || pc_wire_check_profiles(data, len, PC_PROTO_MAX_DEPTH, &wc, &e) < 0 ||
        wc.rejected)
        return false;
    /* the decode would reserve this much before allocating (docs/limits.md): the same refusal */
    if (pc_budget_reserve(budget, wc.cost, "decoded protobuf request") < 0) {
        pc_budget_release(budget);
        pc_budget_init(budget, rq->max_decoded); /* as decode_work set it up */
        budget->room = rq->decode_room;
        return false;
    }
    if (own) {
        rq->batch = pc_batch_take_wire(own->data, len, own->cap, wc.kept_samples, wc.profiles,
                                       rq->max_decoded);
        *own = (pc_buf){0};
    } else {
        rq->batch = pc_batch_new_wire(data, len, wc.kept_samples, wc.profiles, rq->max_decoded);
    }
    return true;
}

bool pc_receive_wire_check(pc_receive *rq, const uint8_t *data, size_t len, pc_budget *budget)
{
    return wire_check(rq, data, len, NULL, budget);
}

bool pc_receive_wire_check_buf(pc_receive *rq, pc_buf *buf, pc_budget *budget)
{
    return wire_check(rq, buf->data, buf->len, buf, budget);
}

static void decode_work(uv_work_t *w)
{
    pc_receive *rq = w->data;
    pc_budget budget;
    pc_budget_init(&budget, rq->max_decoded);
    budget.room = rq->decode_room;
    pc_error e = {0};
    int rc = rq->ops->decode(rq, &budget, &e);
    if (rc < 0 || !rq->batch) {
        rq->code = refusal_code(rc < 0 ? rc : PC_EINVAL);
        snprintf(rq->msg, sizeof rq->msg, "%s", e.msg);
        if (budget.state) { /* the budget refused: over this request's limit, or no room now */
            rq->code = budget.state == PC_EAGAIN ? PC_EAGAIN : PC_E2BIG;
            pc_budget_message(&budget, rq->decoded_key, rq->msg, sizeof rq->msg);
        }
        if (rq->batch) rq->invalid = pc_batch_items(rq->batch);
    } else if (pc_batch_is_wire(rq->batch)) { /* checked on the wire: validation's verdict */
        rq->items = pc_batch_items(rq->batch);
        rq->wire_checked = true;
    } else {
        validate(rq);
    }
    pc_batch_end_budget(rq->batch);
    if (!rq->code && rq->ops->decoded) rq->ops->decoded(rq);
    pc_budget_release(&budget);
}

/* ---- the loop side ---- */

static pc_refused_reason reason_of(int code)
{
    switch (code) {
    case PC_E2BIG: return PC_REFUSED_TOO_LARGE;
    case PC_ENOTSUP: return PC_REFUSED_UNSUPPORTED;
    case PC_EAGAIN: return PC_REFUSED_MEMORY;
    default: return PC_REFUSED_INVALID;
    }
}

static const char *reason_text(int code)
{
    switch (code) {
    case PC_E2BIG: return "too large";
    case PC_ENOTSUP: return "unsupported";
    case PC_EAGAIN: return "no memory now, client told to retry";
    default: return "invalid";
    }
}

static void pipeline_done(void *arg, int st, const char *msg)
{
    pc_receive *rq = arg;
    pc_receiver_core *core = rq->core;
    const char *items = pc_signal_infos[rq->sig].items;
    rq->stage = PC_RECEIVE_PIPELINE;
    if (st == PC_OK) {
        rq->stats->accepted[rq->sig] += rq->items;
        finish(rq, PC_OK, rq->rejected ? rq->msg : NULL);
        return;
    }
    rq->stats->refused[rq->sig] += rq->items;
    rq->stats->refused_requests.n[PC_REFUSED_PIPELINE]++;
    if (pc_err_retryable(st))
        PC_WARN_RATELIMITED(&core->pipeline_log, core->c->id,
                            "pipeline refused %zu %s (retryable, client told to retry): %s",
                            rq->items, items, msg ? msg : "");
    else
        PC_WARN_RATELIMITED(&core->pipeline_log, core->c->id,
                            "pipeline refused %zu %s permanently: %s", rq->items, items,
                            msg ? msg : "");
    finish(rq, st,
           msg                    ? msg
           : pc_err_retryable(st) ? "pipeline unavailable, retry later"
                                  : "refused by the pipeline");
}

static void decode_done(uv_work_t *w, int status)
{
    pc_receive *rq = w->data;
    pc_receiver_core *core = rq->core;
    (void)status;
    if (rq->ops->wanted && !rq->ops->wanted(rq)) {
        finish(rq, PC_ECANCELED, "no longer wanted");
        return;
    }
    rq->stats->refused[rq->sig] += rq->invalid;
    rq->stats->wire_checked += rq->wire_checked;
    if (rq->code) {
        rq->stats->refused_requests.n[reason_of(rq->code)]++;
        PC_INFO_RATELIMITED(&core->refused_log, core->c->id, "%s: refused (%s): %s", rq->who,
                            reason_text(rq->code), rq->msg);
        finish(rq, rq->code, rq->msg);
        return;
    }
    if (rq->rejected)
        PC_WARN_RATELIMITED(&core->refused_log, core->c->id,
                            "%s: rejected %lld invalid profile(s): %s", rq->who,
                            (long long)rq->rejected, rq->msg);
    if (rq->tenant[0]) pc_batch_set_tenant(rq->batch, rq->tenant);
    pc_batch *b = rq->batch;
    rq->batch = NULL;
    rq->stage = PC_RECEIVE_PIPELINE;
    pc_consume(*rq->route, b, pipeline_done, rq);
}

void pc_receive_start(pc_receive *rq)
{
    pc_receiver_core *core = rq->core;
    core->in_flight++;
    rq->stage = PC_RECEIVE_ADMISSION;
    rq->decode_room = SIZE_MAX;
    pc_admit a = pc_consumer_admit(*rq->route, &rq->decode_room);
    if (pc_admit_refused(a)) { /* refused before decoding, one log line per interval */
        bool memory = a == PC_ADMIT_MEMORY;
        rq->stats->refused_requests.n[memory ? PC_REFUSED_MEMORY : PC_REFUSED_PIPELINE]++;
        PC_WARN_RATELIMITED(&core->pipeline_log, core->c->id,
                            "%s: refused before decoding (retryable): %s", rq->who,
                            memory ? "memory limit reached" : "sending queue is full");
        finish(rq, PC_EAGAIN,
               memory ? "memory limit reached, retry later" : "sending queue is full, retry later");
        return;
    }
    rq->stage = PC_RECEIVE_DECODE;
    rq->wire = rq->sig == PC_SIGNAL_PROFILES && (*rq->route)->wire_ok;
    rq->work.data = rq;
    /* admitted, maybe behind: what the decodes of this signal waiting for the pool then read */
    atomic_store_explicit(&core->behind[rq->sig], a == PC_ADMIT_BEHIND, memory_order_relaxed);
    pc_decode_queue_work(core->c->loop, &rq->work, decode_work, decode_done,
                         &core->behind[rq->sig]);
}
