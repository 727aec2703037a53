/* The Collector-style `tls:` block of a component's config: the config-table entries (one set
 * for servers, one for clients) and their validation, with errors naming the key path. The
 * structs they fill, and the contexts built from them, are net/tls.h's. */
#ifndef PC_TLS_CONFIG_H
#define PC_TLS_CONFIG_H

#include "net/tls.h"
#include "sdk/cfgtable.h"

/* The config-table groups (sdk/cfgtable.h) of a server's and a client's `tls:` block, keys
 * "tls.*" relative to a pc_tls_server_cfg / pc_tls_client_cfg:
 *   {"protocols.grpc.", PC_CFG_GROUP, "", offsetof(T, grpc_tls), "TLS", pc_tls_server_keys} */
extern const pc_cfg_key pc_tls_server_keys[];
extern const pc_cfg_key pc_tls_client_keys[];

/* Validate a server block: key pairs complete, files readable, certificates and keys load and
 * match. Errors name the key ("receivers::pyroscope::tls::cert_file: ..."); PC_EINVAL with err. */
int pc_tls_server_validate(const pc_tls_server_cfg *cfg, const pc_node *node, const char *path,
                           const char *prefix, pc_error *err);
/* Validate a client block the same way (whatever the endpoint's scheme). */
int pc_tls_client_validate(const pc_tls_client_cfg *cfg, const pc_node *node, const char *path,
                           const char *prefix, pc_error *err);

#endif
