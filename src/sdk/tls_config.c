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

/* Config-table groups (sdk/cfgtable.h): keys and offsets relative to their struct. */
/* clang-format off */
const pc_cfg_key pc_tls_server_keys[] = {
    {"tls.cert_file", PC_CFG_STRING, "", offsetof(pc_tls_server_cfg, cert_file), "server certificate chain (PEM); setting it turns TLS on", NULL},
    {"tls.key_file", PC_CFG_STRING, "", offsetof(pc_tls_server_cfg, key_file), "private key of cert_file (PEM)", NULL},
    {"tls.client_ca_file", PC_CFG_STRING, "", offsetof(pc_tls_server_cfg, client_ca_file), "CA certificates (PEM) client certificates must chain to: mutual TLS, a client without a valid certificate is refused", NULL},
    {"tls.min_version", PC_CFG_ENUM, "1.2", offsetof(pc_tls_server_cfg, min_version), "lowest TLS version accepted", pc_tls_versions},
    {0},
};
/* clang-format on */

/* clang-format off */
const pc_cfg_key pc_tls_client_keys[] = {
    {"tls.insecure", PC_CFG_BOOL, "false", offsetof(pc_tls_client_cfg, insecure), "plain text, no TLS (even for an https:// endpoint, or a kafka tls block)", NULL},
    {"tls.insecure_skip_verify", PC_CFG_BOOL, "false", offsetof(pc_tls_client_cfg, insecure_skip_verify), "encrypt but do not verify the server's certificate or name (testing only)", NULL},
    {"tls.ca_file", PC_CFG_STRING, "", offsetof(pc_tls_client_cfg, ca_file), "CA certificates (PEM) to verify the server with (default: the system trust store)", NULL},
    {"tls.cert_file", PC_CFG_STRING, "", offsetof(pc_tls_client_cfg, cert_file), "client certificate chain (PEM) for mutual TLS", NULL},
    {"tls.key_file", PC_CFG_STRING, "", offsetof(pc_tls_client_cfg, key_file), "private key of cert_file (PEM)", NULL},
    {"tls.server_name_override", PC_CFG_STRING, "", offsetof(pc_tls_client_cfg, server_name_override), "name sent as SNI and verified in the certificate instead of the endpoint's host", NULL},
    {"tls.min_version", PC_CFG_ENUM, "1.2", offsetof(pc_tls_client_cfg, min_version), "lowest TLS version accepted", pc_tls_versions},
    {0},
};
/* clang-format on */
