/* pyroscope_scrape: file_sd_configs and dns_sd_configs (spec/scrape.md §4). */
#include "receivers/pyroscope_scrape/scrape.h"

int discovery_validate(const scrape_cfg *cfg, const pc_node *node, const char *path, pc_error *e)
{
    if (cfg->file_sd && cfg->file_sd->kind != PC_NODE_NULL)
        return pc_cfg_key_errorf(e, node, path, "file_sd_configs", "not supported yet");
    if (cfg->dns_sd && cfg->dns_sd->kind != PC_NODE_NULL)
        return pc_cfg_key_errorf(e, node, path, "dns_sd_configs", "not supported yet");
    return 0;
}

int discovery_start(scrape_recv *x, pc_error *e)
{
    (void)x, (void)e;
    return 0;
}

void discovery_stop(scrape_recv *x)
{
    (void)x;
}
