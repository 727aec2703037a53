/* What the authenticator extensions (bearertokenauth, basicauth) share: a constant-time
 * comparison, base64, reading a secret from a file. The contract they implement
 * is sdk/auth.h. */
#ifndef PC_AUTH_COMMON_H
#define PC_AUTH_COMMON_H

#include <stdbool.h>
#include <stddef.h>

#include "sdk/auth.h"

/* ---- helpers for the authenticators ---- */

/* Equal in time independent of the contents (both sides hashed with SHA-256, then
 * CRYPTO_memcmp), so neither the position of the first difference nor the length leaks. */
bool pc_auth_equal(const void *a, size_t an, const void *b, size_t bn);
/* Decode base64 (padding required); malloc'd and NUL-terminated, NULL if invalid. */
unsigned char *pc_auth_unbase64(const char *s, size_t *out_len);
/* A file's text with trailing whitespace removed; NULL with the reason in e (PC_EIO, or PC_E2BIG
 * over max bytes). */
char *pc_auth_read_file(const char *path, size_t max, pc_error *e);

#endif
