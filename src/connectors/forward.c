/* Connector "forward": passes data unchanged from the pipelines that export to it to every
 * pipeline that receives from it, as the Collector's forward connector (profiles included, as
 * its profiles->profiles pair). Joins pipelines into one or forks one into several whose
 * processors differ. */
#include "sdk/component.h"

/* clang-format off */
static const pc_cfg_key forward_keys[] = {
    {0},
};
/* clang-format on */

static void forward_consume(pc_component *c, pc_batch *b, pc_done_fn done, void *arg)
{
    pc_consume(c->router->all, b, done, arg);
}

const pc_component_type pc_connector_forward = {
    .name = "forward",
    .kind = PC_KIND_CONNECTOR,
    .stability = "alpha",
    .cfg_size = 0,
    .cfg = forward_keys,
    .consume = forward_consume,
    .signals = PC_SIGNALS_ALL,
    .connects = {[PC_SIGNAL_PROFILES] = PC_SIGNAL_BIT(PC_SIGNAL_PROFILES),
                 [PC_SIGNAL_TRACES] = PC_SIGNAL_BIT(PC_SIGNAL_TRACES),
                 [PC_SIGNAL_METRICS] = PC_SIGNAL_BIT(PC_SIGNAL_METRICS),
                 [PC_SIGNAL_LOGS] = PC_SIGNAL_BIT(PC_SIGNAL_LOGS)},
    .doc = "passes data unchanged to every pipeline that lists it as a receiver (same signal: "
           "profiles, traces, metrics, logs); no settings",
};
