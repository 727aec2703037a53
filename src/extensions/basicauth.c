/* Extension "basicauth" (as the Collector's): HTTP Basic credentials.
 *   client_auth: {username, password}  exporters send "Authorization: Basic ..."
 *   htpasswd: {file, inline}           receivers accept users listed there (inline first)
 * htpasswd entries are "user:{SHA}<base64 SHA-1>" (htpasswd -s) or "user:<plain password>".
 * crypt(3)-style hashes ($apr1$ MD5, $2y$ bcrypt, $5$/$6$ SHA-crypt, ...) are refused when the
 * config is validated: profcol does not implement them. (A 13-character DES crypt hash cannot
 * be told from a plain password; it is taken as one and so never matches.) The file is re-read
 * on SIGHUP. Passwords are compared in constant time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "base/base64.h"
#include "extensions/auth_common.h"
#include "net/http_client.h"
#include "net/tls.h"
#include "sdk/component.h"

#define MAX_HTPASSWD (4u << 20)

typedef struct basic_cfg {
    char *username, *password;
    char *file, *inline_text;
} basic_cfg;

/* clang-format off */
static const pc_cfg_key basic_keys[] = {
    {"client_auth.username", PC_CFG_STRING, "", offsetof(basic_cfg, username), "user an exporter sends", NULL},
    {"client_auth.password", PC_CFG_STRING, "", offsetof(basic_cfg, password), "password an exporter sends", NULL},
    {"htpasswd.file", PC_CFG_STRING, "", offsetof(basic_cfg, file), "htpasswd file of users a receiver accepts: {SHA} (htpasswd -s) or plain entries; re-read on SIGHUP", NULL},
    {"htpasswd.inline", PC_CFG_STRING, "", offsetof(basic_cfg, inline_text), "htpasswd entries in the config (checked before the file)", NULL},
    {0},
};
/* clang-format on */

typedef struct entry {
    char *user;
    bool sha; /* secret is the 20-byte SHA-1 digest, else the plain password */
    unsigned char *secret;
    size_t secret_len;
} entry;

typedef struct users {
    entry *v;
    size_t n;
} users;

typedef struct basic {
    pc_auth base; /* first: what receivers and exporters use */
    pc_component *c;
    users inl, file;
    char *client_header; /* "Authorization: Basic ...\r\n" */
    bool hooked;
} basic;

static void users_free(users *u)
{
    for (size_t i = 0; i < u->n; i++) {
        free(u->v[i].user);
        free(u->v[i].secret);
    }
    free(u->v);
    u->v = NULL;
    u->n = 0;
}

static const char *crypt_name(const char *h)
{
    if (!strncmp(h, "$apr1$", 6)) return "$apr1$ (Apache MD5)";
    if (!strncmp(h, "$2y$", 4) || !strncmp(h, "$2a$", 4) || !strncmp(h, "$2b$", 4))
        return "bcrypt ($2y$)";
    if (!strncmp(h, "$1$", 3)) return "$1$ (MD5-crypt)";
    if (!strncmp(h, "$5$", 3) || !strncmp(h, "$6$", 3)) return "SHA-crypt ($5$/$6$)";
    return "crypt(3)";
}

/* Parse htpasswd text into u. PC_EINVAL with a reason naming the line. */
static int parse_htpasswd(const char *text, users *u, pc_error *err)
{
    int lineno = 0;
    for (const char *p = text; *p;) {
        size_t n = strcspn(p, "\n");
        char line[1024];
        lineno++;
        if (n >= sizeof line) return pc_error_set(err, PC_EINVAL, "line %d: too long", lineno);
        memcpy(line, p, n);
        line[n] = 0;
        p += n + (p[n] == '\n');
        size_t l = strlen(line);
        while (l && (line[l - 1] == '\r' || line[l - 1] == ' ' || line[l - 1] == '\t'))
            line[--l] = 0;
        if (!l || line[0] == '#') continue;
        char *colon = strchr(line, ':');
        if (!colon || colon == line)
            return pc_error_set(err, PC_EINVAL, "line %d: want user:password or user:{SHA}hash",
                                lineno);
        *colon = 0;
        const char *hash = colon + 1;
        entry e = {.user = NULL};
        if (hash[0] == '$')
            return pc_error_set(err, PC_EINVAL,
                                "line %d (user \"%s\"): %s hashes are not supported; use {SHA} "
                                "entries (htpasswd -s) or plain passwords",
                                lineno, line, crypt_name(hash));
        if (!strncmp(hash, "{SHA}", 5)) {
            e.secret = pc_auth_unbase64(hash + 5, &e.secret_len);
            if (!e.secret || e.secret_len != SHA_DIGEST_LENGTH) {
                free(e.secret);
                return pc_error_set(err, PC_EINVAL,
                                    "line %d (user \"%s\"): {SHA} must be followed by the "
                                    "base64 of a 20-byte SHA-1 digest",
                                    lineno, line);
            }
            e.sha = true;
        } else {
            e.secret = (unsigned char *)pc_xstrdup(hash);
            e.secret_len = strlen(hash);
        }
        e.user = pc_xstrdup(line);
        u->v = pc_xrealloc(u->v, (u->n + 1) * sizeof *u->v);
        u->v[u->n++] = e;
    }
    return 0;
}

/* 0, or PC_EIO (unreadable) or PC_EINVAL (malformed) with e. */
static int load_file(const char *path, users *u, pc_error *e)
{
    char *text = pc_auth_read_file(path, MAX_HTPASSWD, e);
    if (!text) return e ? e->code : PC_EIO;
    int rc = parse_htpasswd(text, u, e);
    free(text);
    if (rc < 0) {
        pc_error_prefix(e, "\"%s\": ", path);
        users_free(u);
    }
    return rc;
}

static int basic_validate(void *cfgp, const pc_node *node, const char *path, pc_error *err)
{
    basic_cfg *cfg = cfgp;
    pc_error e = {0};
    if (!cfg->username && !cfg->file && !cfg->inline_text)
        return pc_cfg_key_errorf(err, node, path, "client_auth",
                                 "set client_auth (for exporters) or htpasswd (for receivers)");
    if (cfg->password && !cfg->username)
        return pc_cfg_key_errorf(err, node, path, "client_auth.username",
                                 "required with a password");
    if (cfg->username && (strchr(cfg->username, ':') || !pc_http_header_safe(cfg->username)))
        return pc_cfg_key_errorf(err, node, path, "client_auth.username",
                                 "must not contain ':' or line breaks");
    if (cfg->password && !pc_http_header_safe(cfg->password))
        return pc_cfg_key_errorf(err, node, path, "client_auth.password",
                                 "must not contain line breaks");
    users u = {0};
    if (cfg->inline_text && parse_htpasswd(cfg->inline_text, &u, &e) < 0) {
        users_free(&u);
        return pc_cfg_key_errorf(err, node, path, "htpasswd.inline", "%s", e.msg);
    }
    users_free(&u);
    if (cfg->file && load_file(cfg->file, &u, &e) < 0)
        return pc_cfg_key_errorf(err, node, path, "htpasswd.file", "%s", e.msg);
    users_free(&u);
    return 0;
}

static bool entry_matches(const entry *e, const char *pass)
{
    if (!e->sha) return pc_auth_equal(pass, strlen(pass), e->secret, e->secret_len);
    unsigned char d[SHA_DIGEST_LENGTH];
    SHA1((const unsigned char *)pass, strlen(pass), d);
    return CRYPTO_memcmp(d, e->secret, sizeof d) == 0;
}

/* The first entry for user, inline entries before the file's. */
static const entry *find_user(const basic *x, const char *user)
{
    const users *lists[] = {&x->inl, &x->file};
    for (size_t l = 0; l < 2; l++)
        for (size_t i = 0; i < lists[l]->n; i++)
            if (!strcmp(lists[l]->v[i].user, user)) return &lists[l]->v[i];
    return NULL;
}

static int basic_check(pc_auth *a, pc_auth_header_fn header, const void *req)
{
    basic *x = (basic *)a;
    const char *h = header(req, "authorization");
    if (!h || strncasecmp(h, "Basic ", 6) != 0) return PC_EAUTH;
    h += 6;
    while (*h == ' ')
        h++;
    size_t n;
    char *cred = (char *)pc_auth_unbase64(h, &n);
    if (!cred) return PC_EAUTH;
    char *colon = strlen(cred) == n ? strchr(cred, ':') : NULL; /* no NUL inside */
    int rc = PC_EAUTH;
    if (colon) {
        *colon = 0;
        const entry *e = find_user(x, cred);
        /* an unknown user costs the same as a wrong password */
        static const entry none = {
            .user = "", .sha = false, .secret = (unsigned char *)"\1", .secret_len = 1};
        bool ok = entry_matches(e ? e : &none, colon + 1);
        rc = e && ok ? 0 : PC_EAUTH;
    }
    OPENSSL_cleanse(cred, n);
    free(cred);
    return rc;
}

static void basic_headers(pc_auth *a, pc_buf *out)
{
    basic *x = (basic *)a;
    pc_buf_printf(out, "%s", x->client_header);
}

static void on_reload(void *arg)
{
    basic *x = arg;
    basic_cfg *cfg = x->c->cfg;
    users u = {0};
    pc_error e = {0};
    if (load_file(cfg->file, &u, &e) < 0) {
        PC_ERROR(x->c->id, "htpasswd reload failed, keeping the previous users: %s", e.msg);
        return;
    }
    users_free(&x->file);
    x->file = u;
    PC_INFO(x->c->id, "htpasswd reloaded from %s (%zu users)", cfg->file, u.n);
}

static int basic_create(pc_component *c, pc_error *err)
{
    basic_cfg *cfg = c->cfg;
    basic *x = pc_xcalloc(1, sizeof *x);
    char path[300];
    pc_error e = {0};
    x->c = c;
    c->priv = x;
    snprintf(path, sizeof path, "extensions::%s", c->id);
    snprintf(x->base.challenge, sizeof x->base.challenge,
             "WWW-Authenticate: Basic realm=\"profcol\", charset=\"UTF-8\"\r\n");
    if (cfg->username) {
        pc_buf up = {0};
        pc_buf_printf(&up, "%s:%s", cfg->username, cfg->password ? cfg->password : "");
        char *b64 = pc_base64_encode(up.data, up.len, true);
        pc_buf h = {0};
        pc_buf_printf(&h, "Authorization: Basic %s\r\n", b64);
        x->client_header = (char *)h.data;
        free(b64);
        OPENSSL_cleanse(up.data, up.len);
        pc_buf_free(&up);
        x->base.headers = basic_headers;
    }
    if (cfg->file || cfg->inline_text) {
        x->base.check = basic_check;
        if (cfg->inline_text) parse_htpasswd(cfg->inline_text, &x->inl, NULL); /* validated */
        if (cfg->file && load_file(cfg->file, &x->file, &e) < 0)
            return pc_cfg_key_errorf(err, NULL, path, "htpasswd.file", "%s", e.msg);
    }
    return 0;
}

static int basic_start(pc_component *c, pc_error *e)
{
    basic *x = c->priv;
    basic_cfg *cfg = c->cfg;
    (void)e;
    if (cfg->file && !x->hooked) {
        pc_tls_reload_hook_add(on_reload, x);
        x->hooked = true;
    }
    return 0;
}

static void basic_destroy(pc_component *c)
{
    basic *x = c->priv;
    if (!x) return;
    if (x->hooked) pc_tls_reload_hook_remove(x);
    users_free(&x->inl);
    users_free(&x->file);
    if (x->client_header) OPENSSL_cleanse(x->client_header, strlen(x->client_header));
    free(x->client_header);
    free(x);
}

const pc_component_type pc_extension_basicauth = {
    .name = "basicauth",
    .kind = PC_KIND_EXTENSION,
    .authenticator = true,
    .stability = "alpha",
    .cfg_size = sizeof(basic_cfg),
    .cfg = basic_keys,
    .validate = basic_validate,
    .create = basic_create,
    .start = basic_start,
    .destroy = basic_destroy,
    .doc = "HTTP Basic authenticator for `auth: authenticator:` (client_auth for exporters; "
           "htpasswd with {SHA} or plain entries for receivers, 401 otherwise)",
};
