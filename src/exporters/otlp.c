/* Exporter "otlp": OTLP over gRPC (ProfilesService/Export, TraceService/Export, ... for each
 * signal's pipelines, on HTTP/2, cleartext or TLS).
 * TLS by default, as the Collector's: host:port and https://host:port are TLS unless
 * `tls: {insecure: true}`; only http://host:port (or insecure) is plain text (h2c).
 * On the exporter core (sdk/exporter.h: queue, retries, counting, lifecycle) and the shared
 * OTLP/gRPC client (sdk/otlp_client.h: settings, encode and compress on the thread pool,
 * calls with the HTTP/2 client, the gRPC status classified as the OTLP spec says), which the
 * loadbalancing exporter uses for each of its backends. */
#include "sdk/component.h"
#include "sdk/exporter.h"
#include "sdk/otlp_client.h"

typedef struct otlp_exp_cfg {
    pc_otlp_grpc_cfg grpc;
} otlp_exp_cfg;

/* clang-format off */
static const pc_cfg_key otlp_exp_keys[] = {
    {"", PC_CFG_GROUP, "", offsetof(otlp_exp_cfg, grpc), "the OTLP/gRPC client", pc_otlp_grpc_keys},
    {0},
};
/* clang-format on */

static int otlp_exp_validate(void *cfgp, const pc_node *node, const char *path, pc_error *err)
{
    otlp_exp_cfg *cfg = cfgp;
    return pc_otlp_grpc_validate(&cfg->grpc, node, path, "", true, err);
}

static int otlp_exp_start(pc_exporter *e, pc_error *err)
{
    otlp_exp_cfg *cfg = e->c->cfg;
    pc_otlp_grpc *g = pc_otlp_grpc_open(e->c, &cfg->grpc, cfg->grpc.endpoint, err);
    if (!g) return err && err->code ? err->code : PC_EINVAL;
    e->priv = g;
    return 0;
}

static void otlp_exp_encode(pc_export_req *r)
{
    otlp_exp_cfg *cfg = r->e->c->cfg;
    pc_otlp_grpc_encode(&cfg->grpc, r);
}

static void otlp_exp_send(pc_export_req *r)
{
    pc_otlp_grpc_send(r->e->priv, r);
}

static void otlp_exp_close(pc_exporter *e)
{
    pc_otlp_grpc *g = e->priv;
    e->priv = NULL;
    pc_otlp_grpc_close(g, pc_exporter_closed, e);
}

/* Pass-through sends the bytes as received, compressed again at most (sdk/otlp_client.c). */
static bool otlp_exp_wire_ok(const pc_component *c)
{
    return ((const otlp_exp_cfg *)c->cfg)->grpc.passthrough;
}

static const pc_exporter_def otlp_exp_def = {
    .sender_cfg = offsetof(otlp_exp_cfg, grpc.sender),
    .start = otlp_exp_start,
    .encode = otlp_exp_encode,
    .send = otlp_exp_send,
    .close = otlp_exp_close,
};

const pc_component_type pc_exporter_otlp = {
    .name = "otlp",
    .kind = PC_KIND_EXPORTER,
    .stability = "alpha",
    .cfg_size = sizeof(otlp_exp_cfg),
    .cfg = otlp_exp_keys,
    .validate = otlp_exp_validate,
    PC_EXPORTER_CORE(&otlp_exp_def),
    .wire_ok = otlp_exp_wire_ok,
    .signals = PC_SIGNALS_ALL,
    .doc = "OTLP/gRPC exporter for every signal (ProfilesService/Export, TraceService/Export, ... "
           "over h2c or TLS, gzip or zstd)",
};
