/* Base64 (RFC 4648), written once for gRPC's -bin metadata, OTLP/JSON bytes fields and HTTP Basic
 * credentials (the basicauth extension, the pyroscope exporter). */
#ifndef PC_BASE_BASE64_H
#define PC_BASE_BASE64_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* How many characters pc_base64_write writes for n bytes. */
size_t pc_base64_len(size_t n, bool pad);
/* n bytes in the standard alphabet, '=' padded when pad (gRPC's -bin metadata goes unpadded),
 * at out (pc_base64_len(n, pad) characters, no NUL). Returns that count. */
size_t pc_base64_write(char *out, const void *data, size_t n, bool pad);
/* The same, malloc'd and NUL-terminated. */
char *pc_base64_encode(const void *data, size_t n, bool pad);
/* n characters without their '=' padding, in the standard or the URL-safe alphabet, into out
 * (room for n / 4 * 3 + 2 bytes). The byte count, or -1 for a character outside both alphabets
 * or a length no encoding has (n % 4 == 1). */
ssize_t pc_base64_decode(const char *s, size_t n, uint8_t *out);

#endif
