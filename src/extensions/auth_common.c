/* The helpers bearertokenauth and basicauth share (auth_common.h). */
#include "extensions/auth_common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "base/base64.h"

bool pc_auth_equal(const void *a, size_t an, const void *b, size_t bn)
{
    unsigned char ha[SHA256_DIGEST_LENGTH], hb[SHA256_DIGEST_LENGTH];
    SHA256(a, an, ha);
    SHA256(b, bn, hb);
    return CRYPTO_memcmp(ha, hb, sizeof ha) == 0;
}

unsigned char *pc_auth_unbase64(const char *s, size_t *out_len)
{
    size_t n = strlen(s), pad = 0;
    if (n == 0 || n % 4 || n > (1u << 20)) return NULL;
    while (pad < n && s[n - 1 - pad] == '=')
        pad++;
    /* credentials come padded, in the standard alphabet only */
    if (pad > 2 || strcspn(s, "-_") < n) return NULL;
    unsigned char *out = pc_xmalloc(n / 4 * 3 + 1);
    ssize_t m = pc_base64_decode(s, n - pad, out);
    if (m < 0) {
        free(out);
        return NULL;
    }
    out[m] = 0;
    *out_len = (size_t)m;
    return out;
}

char *pc_auth_read_file(const char *path, size_t max, pc_error *e)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        pc_error_set(e, PC_EIO, "\"%s\": %s", path, strerror(errno));
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
        pc_error_set(e, bad ? PC_EIO : PC_E2BIG, "\"%s\": %s", path,
                     bad ? "read error" : "file too large");
        pc_buf_free(&b);
        return NULL;
    }
    pc_buf_append(&b, "", 0);
    while (b.len > 0 && strchr(" \t\r\n", b.data[b.len - 1]))
        b.data[--b.len] = 0;
    return (char *)b.data;
}
