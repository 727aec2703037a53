/* Extension "bearertokenauth" (as the Collector's): a static token, given inline or read from a
 * file (re-read on SIGHUP), that exporters send as "<header>: <scheme> <token>" and receivers
 * require, compared in constant time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "extensions/auth_common.h"
#include "net/http_client.h"
#include "net/tls.h"
#include "sdk/component.h"

#define MAX_TOKEN_FILE 16384

typedef struct bta_cfg {
    char *scheme;
    char *token;
    char *filename;
    char *header;
} bta_cfg;

/* clang-format off */
static const pc_cfg_key bta_keys[] = {
    {"scheme", PC_CFG_STRING, "Bearer", offsetof(bta_cfg, scheme), "scheme before the token in the header value (empty: the token alone)", NULL},
    {"token", PC_CFG_STRING, "", offsetof(bta_cfg, token), "the token (or use filename)", NULL},
    {"filename", PC_CFG_STRING, "", offsetof(bta_cfg, filename), "file holding the token (trailing whitespace ignored); re-read on SIGHUP", NULL},
    {"header", PC_CFG_STRING, "Authorization", offsetof(bta_cfg, header), "header carrying the token", NULL},
    {0},
};
/* clang-format on */

typedef struct bta {
    pc_auth base; /* first: what receivers and exporters use */
    pc_component *c;
    char *value; /* the expected / sent header value: "Bearer <token>" */
    bool hooked;
} bta;

static int bta_validate(void *cfgp, const pc_node *node, const char *path, pc_error *err)
{
    bta_cfg *cfg = cfgp;
    pc_error e = {0};
    if (!cfg->token == !cfg->filename)
        return pc_cfg_key_errorf(err, node, path, cfg->token ? "filename" : "token",
                                 "set exactly one of token and filename");
    if (cfg->token && (!*cfg->token || !pc_http_header_safe(cfg->token)))
        return pc_cfg_key_errorf(err, node, path, "token",
                                 "must be non-empty, without line breaks");
    if (cfg->filename) {
        char *t = pc_auth_read_file(cfg->filename, MAX_TOKEN_FILE, &e);
        const char *why = !t ? e.msg : !*t ? "the file is empty" : NULL;
        if (t && *t && !pc_http_header_safe(t)) why = "the token must be a single line";
        free(t);
        if (why) return pc_cfg_key_errorf(err, node, path, "filename", "%s", why);
    }
    if (!cfg->header || !*cfg->header || strpbrk(cfg->header, "\r\n: "))
        return pc_cfg_key_errorf(err, node, path, "header", "must be a header name");
    if (cfg->scheme && (!pc_http_header_safe(cfg->scheme) || strchr(cfg->scheme, ' ')))
        return pc_cfg_key_errorf(err, node, path, "scheme", "must be a single word");
    return 0;
}

static char *make_value(const bta_cfg *cfg, const char *token)
{
    pc_buf b = {0};
    if (cfg->scheme && *cfg->scheme)
        pc_buf_printf(&b, "%s %s", cfg->scheme, token);
    else
        pc_buf_printf(&b, "%s", token);
    return (char *)b.data;
}

/* Load the token; on failure keep the previous one. 0, or PC_EIO / PC_E2BIG (the file) or
 * PC_EINVAL (the token) with e. */
static int load(bta *x, pc_error *e)
{
    bta_cfg *cfg = x->c->cfg;
    char *t =
        cfg->token ? pc_xstrdup(cfg->token) : pc_auth_read_file(cfg->filename, MAX_TOKEN_FILE, e);
    if (!t) return e ? e->code : PC_EIO;
    if (!*t || !pc_http_header_safe(t)) {
        pc_error_set(e, PC_EINVAL, "\"%s\": %s", cfg->filename ? cfg->filename : "token",
                     *t ? "the token must be a single line" : "the file is empty");
        free(t);
        return PC_EINVAL;
    }
    free(x->value);
    x->value = make_value(cfg, t);
    free(t);
    return 0;
}

static void on_reload(void *arg)
{
    bta *x = arg;
    bta_cfg *cfg = x->c->cfg;
    pc_error e = {0};
    if (load(x, &e) < 0)
        PC_ERROR(x->c->id, "token reload failed, keeping the previous token: %s", e.msg);
    else
        PC_INFO(x->c->id, "token reloaded from %s", cfg->filename);
}

static int bta_check(pc_auth *a, pc_auth_header_fn header, const void *req)
{
    bta *x = (bta *)a;
    bta_cfg *cfg = x->c->cfg;
    const char *got = header(req, cfg->header);
    if (!got) return PC_EAUTH;
    return pc_auth_equal(got, strlen(got), x->value, strlen(x->value)) ? 0 : PC_EAUTH;
}

static void bta_headers(pc_auth *a, pc_buf *out)
{
    bta *x = (bta *)a;
    bta_cfg *cfg = x->c->cfg;
    pc_buf_printf(out, "%s: %s\r\n", cfg->header, x->value);
}

static int bta_create(pc_component *c, pc_error *err)
{
    bta_cfg *cfg = c->cfg;
    bta *x = pc_xcalloc(1, sizeof *x);
    pc_error e = {0};
    x->c = c;
    c->priv = x;
    x->base.check = bta_check;
    x->base.headers = bta_headers;
    snprintf(x->base.challenge, sizeof x->base.challenge,
             "WWW-Authenticate: %s realm=\"profcol\"\r\n",
             cfg->scheme && *cfg->scheme ? cfg->scheme : "Bearer");
    if (load(x, &e) < 0) { /* the file changed since validation */
        char path[300];
        snprintf(path, sizeof path, "extensions::%s", c->id);
        return pc_cfg_key_errorf(err, NULL, path, "filename", "%s", e.msg);
    }
    return 0;
}

static int bta_start(pc_component *c, pc_error *e)
{
    bta *x = c->priv;
    bta_cfg *cfg = c->cfg;
    (void)e;
    if (cfg->filename && !x->hooked) {
        pc_tls_reload_hook_add(on_reload, x);
        x->hooked = true;
    }
    return 0;
}

static void bta_destroy(pc_component *c)
{
    bta *x = c->priv;
    if (!x) return;
    if (x->hooked) pc_tls_reload_hook_remove(x);
    free(x->value);
    free(x);
}

const pc_component_type pc_extension_bearertokenauth = {
    .name = "bearertokenauth",
    .kind = PC_KIND_EXTENSION,
    .authenticator = true,
    .stability = "alpha",
    .cfg_size = sizeof(bta_cfg),
    .cfg = bta_keys,
    .validate = bta_validate,
    .create = bta_create,
    .start = bta_start,
    .destroy = bta_destroy,
    .doc = "Bearer token authenticator for `auth: authenticator:` (receivers check it in constant "
           "time and answer 401 otherwise; exporters send it)",
};
