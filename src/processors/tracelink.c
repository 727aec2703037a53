/* placeholder: processor "tracelink" is being written; until then configuring it is an error. */
#include "pipeline/component.h"

static int create_tracelink(pc_component *c, pc_cfg_err *err)
{
    pc_cfg_errorf(err, NULL, c->id, "processor \"tracelink\" is not implemented yet");
    return -1;
}

const pc_component_type pc_processor_tracelink = {
    .name = "tracelink",
    .kind = PC_KIND_PROCESSOR,
    .stability = "development",
    .doc = "not implemented yet",
    .create = create_tracelink,
};
