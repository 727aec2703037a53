/* Config: YAML text -> pc_config_parse -> pc_service_new (validates every component, opens no
 * sockets) -> pc_service_free. Also merges the tree into a copy of itself, as several --config
 * files do. */
#include <stdint.h>
#include <string.h>
#include <uv.h>

#include "fuzz_common.h"
#include "sdk/config.h"
#include "service/service.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_quiet_logs();
    /* environment substitution has something to find */
    setenv("PC_FUZZ_ENV", "127.0.0.1:4318", 1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static pc_error_issues issues; /* every issue, as profcol validate keeps them */
    pc_error err = PC_ERROR_WITH_ISSUES(&issues);
    issues.n = 0;
    pc_node *root = pc_config_parse((const char *)data, size, "fuzz.yaml", &err);
    if (!root) {
        FUZZ_ASSERT(memchr(err.msg, 0, sizeof err.msg) != NULL, "error message not terminated");
        return 0;
    }
    /* merge a second parse over the first (both consumed by the merge / service) */
    pc_error err2 = {0};
    pc_node *again = pc_config_parse((const char *)data, size, "fuzz2.yaml", &err2);
    FUZZ_ASSERT(again != NULL, "second parse of the same text failed: %s", err2.msg);
    pc_config_merge(root, again);

    pc_error_clear(&err);
    pc_service *s = pc_service_new(uv_default_loop(), root, &err);
    if (s)
        pc_service_free(s);
    else
        FUZZ_ASSERT(err.msg[0] != 0, "pc_service_new failed without a message");
    return 0;
}
