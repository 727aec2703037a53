/* The Collector-style `tls:` block of a component's config: the config-table entries (one set
 * for servers, one for clients) and their validation, with errors naming the key path. The
 * structs they fill, and the contexts built from them, are net/tls.h's. */
#ifndef PC_TLS_CONFIG_H
#define PC_TLS_CONFIG_H

#include "net/tls.h"
#include "sdk/cfgtable.h"

/* clang-format off */
/* Config-table entries for a server `tls:` block at "<prefix>tls." (prefix "" or e.g.
 * "protocols.http."), landing in the pc_tls_server_cfg member f of config struct T. */
#define PC_TLS_SERVER_KEYS(T, f, prefix) \
    {prefix "tls.cert_file", PC_CFG_STRING, "", offsetof(T, f.cert_file), "server certificate chain (PEM); setting it turns TLS on", NULL}, \
    {prefix "tls.key_file", PC_CFG_STRING, "", offsetof(T, f.key_file), "private key of cert_file (PEM)", NULL}, \
    {prefix "tls.client_ca_file", PC_CFG_STRING, "", offsetof(T, f.client_ca_file), "CA certificates (PEM) client certificates must chain to: mutual TLS, a client without a valid certificate is refused", NULL}, \
    {prefix "tls.min_version", PC_CFG_ENUM, "1.2", offsetof(T, f.min_version), "lowest TLS version accepted", pc_tls_versions}

/* Config-table entries for a client `tls:` block at "<prefix>tls.". */
#define PC_TLS_CLIENT_KEYS(T, f, prefix) \
    {prefix "tls.insecure", PC_CFG_BOOL, "false", offsetof(T, f.insecure), "plain text, no TLS (even for an https:// endpoint, or a kafka tls block)", NULL}, \
    {prefix "tls.insecure_skip_verify", PC_CFG_BOOL, "false", offsetof(T, f.insecure_skip_verify), "encrypt but do not verify the server's certificate or name (testing only)", NULL}, \
    {prefix "tls.ca_file", PC_CFG_STRING, "", offsetof(T, f.ca_file), "CA certificates (PEM) to verify the server with (default: the system trust store)", NULL}, \
    {prefix "tls.cert_file", PC_CFG_STRING, "", offsetof(T, f.cert_file), "client certificate chain (PEM) for mutual TLS", NULL}, \
    {prefix "tls.key_file", PC_CFG_STRING, "", offsetof(T, f.key_file), "private key of cert_file (PEM)", NULL}, \
    {prefix "tls.server_name_override", PC_CFG_STRING, "", offsetof(T, f.server_name_override), "name sent as SNI and verified in the certificate instead of the endpoint's host", NULL}, \
    {prefix "tls.min_version", PC_CFG_ENUM, "1.2", offsetof(T, f.min_version), "lowest TLS version accepted", pc_tls_versions}
/* clang-format on */

/* Validate a server block: key pairs complete, files readable, certificates and keys load and
 * match. Errors name the key ("receivers::pyroscope::tls::cert_file: ..."); PC_EINVAL with err. */
int pc_tls_server_validate(const pc_tls_server_cfg *cfg, const pc_node *node, const char *path,
                           const char *prefix, pc_error *err);
/* Validate a client block the same way (whatever the endpoint's scheme). */
int pc_tls_client_validate(const pc_tls_client_cfg *cfg, const pc_node *node, const char *path,
                           const char *prefix, pc_error *err);

#endif
