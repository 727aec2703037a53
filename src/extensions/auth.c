/* Authenticator lookup and the helpers bearertokenauth and basicauth share (see auth.h). */
#include "extensions/auth.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include "pipeline/service.h"

extern const pc_component_type pc_extension_bearertokenauth;
extern const pc_component_type pc_extension_basicauth;

int pc_auth_usable(const pc_component *ext, bool server, char *err, size_t errlen)
{
    if (ext->type != &pc_extension_bearertokenauth && ext->type != &pc_extension_basicauth) {
        snprintf(err, errlen,
                 "extension \"%s\" is a %s, not an authenticator (want bearertokenauth or "
                 "basicauth)",
                 ext->id, ext->type->name);
        return -1;
    }
    const pc_auth *a = ext->priv;
    if (server && !a->check) {
        snprintf(err, errlen,
                 "extension \"%s\" has no htpasswd: it can add credentials to an exporter's "
                 "requests but not check a receiver's",
                 ext->id);
        return -1;
    }
    if (!server && !a->headers) {
        snprintf(err, errlen,
                 "extension \"%s\" has no client_auth: it can check a receiver's requests but not "
                 "authenticate an exporter",
                 ext->id);
        return -1;
    }
    return 0;
}

pc_auth *pc_auth_find(pc_component *c, const char *id, bool server, char *err, size_t errlen)
{
    pc_component *ext = c->host ? pc_service_extension(c->host, id) : NULL;
    if (!ext) {
        snprintf(err, errlen,
                 "auth::authenticator: extension \"%s\" is not enabled (list it in "
                 "service::extensions)",
                 id);
        return NULL;
    }
    char e[400];
    if (pc_auth_usable(ext, server, e, sizeof e)) {
        snprintf(err, errlen, "auth::authenticator: %s", e);
        return NULL;
    }
    return ext->priv;
}

static const char *http_header(const void *req, const char *name)
{
    return pc_http_req_header(req, name);
}

static const char *call_header(const void *call, const char *name)
{
    return pc_h2_call_header(call, name);
}

int pc_auth_check(pc_auth *a, const pc_http_req *req)
{
    return a->check(a, http_header, req);
}

int pc_auth_check_call(pc_auth *a, const pc_h2_call *call)
{
    return a->check(a, call_header, call);
}

void pc_auth_headers(pc_auth *a, pc_buf *out)
{
    a->headers(a, out);
}

const char *pc_auth_challenge(const pc_auth *a)
{
    return a->challenge;
}

bool pc_auth_equal(const void *a, size_t an, const void *b, size_t bn)
{
    unsigned char ha[SHA256_DIGEST_LENGTH], hb[SHA256_DIGEST_LENGTH];
    SHA256(a, an, ha);
    SHA256(b, bn, hb);
    return CRYPTO_memcmp(ha, hb, sizeof ha) == 0;
}

char *pc_auth_base64(const void *data, size_t n)
{
    char *out = pc_xmalloc(4 * ((n + 2) / 3) + 1);
    EVP_EncodeBlock((unsigned char *)out, data, (int)n);
    return out;
}

unsigned char *pc_auth_unbase64(const char *s, size_t *out_len)
{
    size_t n = strlen(s);
    if (n == 0 || n % 4 || n > (1u << 20)) return NULL;
    unsigned char *out = pc_xmalloc(n / 4 * 3 + 1);
    int m = EVP_DecodeBlock(out, (const unsigned char *)s, (int)n);
    if (m < 0) {
        free(out);
        return NULL;
    }
    /* EVP_DecodeBlock counts the padding as zero bytes */
    if (s[n - 1] == '=') m--;
    if (s[n - 2] == '=') m--;
    out[m] = 0;
    *out_len = (size_t)m;
    return out;
}

char *pc_auth_read_file(const char *path, size_t max, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "\"%s\": %s", path, strerror(errno));
        return NULL;
    }
    pc_buf b = {0};
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        pc_buf_append(&b, chunk, n);
        if (b.len > max) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad || b.len > max) {
        snprintf(err, errlen, "\"%s\": %s", path, bad ? "read error" : "file too large");
        pc_buf_free(&b);
        return NULL;
    }
    pc_buf_append(&b, "", 0);
    while (b.len > 0 && strchr(" \t\r\n", b.data[b.len - 1]))
        b.data[--b.len] = 0;
    return (char *)b.data;
}

bool pc_auth_header_safe(const char *s)
{
    return s && !strpbrk(s, "\r\n");
}
