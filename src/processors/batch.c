/* placeholder: processor "batch" is being written; until then configuring it is an error. */
#include "pipeline/component.h"

static int create_batch(pc_component *c, pc_cfg_err *err)
{
    pc_cfg_errorf(err, NULL, c->id, "processor \"batch\" is not implemented yet");
    return -1;
}

const pc_component_type pc_processor_batch = {
    .name = "batch",
    .kind = PC_KIND_PROCESSOR,
    .stability = "development",
    .doc = "not implemented yet",
    .create = create_batch,
};
