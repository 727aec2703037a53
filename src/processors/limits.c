/* placeholder: processor "limits" is being written; until then configuring it is an error. */
#include "pipeline/component.h"

static int create_limits(pc_component *c, pc_cfg_err *err)
{
    pc_cfg_errorf(err, NULL, c->id, "processor \"limits\" is not implemented yet");
    return -1;
}

const pc_component_type pc_processor_limits = {
    .name = "limits",
    .kind = PC_KIND_PROCESSOR,
    .stability = "development",
    .doc = "not implemented yet",
    .create = create_limits,
};
