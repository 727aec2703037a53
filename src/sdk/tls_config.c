/* Validation of `tls:` blocks (tls_config.h): net/tls.c checks the files, this names the key. */
#include "sdk/tls_config.h"

#include <stdio.h>

static int key_error(pc_error *err, const pc_node *node, const char *path, const char *prefix,
                     const char *key, const char *msg)
{
    char full[160];
    snprintf(full, sizeof full, "%stls.%s", prefix ? prefix : "", key);
    return pc_cfg_key_errorf(err, node, path, full, "%s", msg);
}

int pc_tls_server_validate(const pc_tls_server_cfg *cfg, const pc_node *node, const char *path,
                           const char *prefix, pc_error *err)
{
    const char *key = "cert_file";
    pc_error e = {0};
    return pc_tls_server_check(cfg, &key, &e) < 0 ? key_error(err, node, path, prefix, key, e.msg)
                                                  : 0;
}

int pc_tls_client_validate(const pc_tls_client_cfg *cfg, const pc_node *node, const char *path,
                           const char *prefix, pc_error *err)
{
    const char *key = "cert_file";
    pc_error e = {0};
    return pc_tls_client_check(cfg, &key, &e) < 0 ? key_error(err, node, path, prefix, key, e.msg)
                                                  : 0;
}
