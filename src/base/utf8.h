/* UTF-8 validation as Go's utf8.Valid and proto3 define it (RFC 3629): no overlong forms, no
 * surrogates, nothing above U+10FFFF. Strings enter the model only when valid. */
#ifndef PC_BASE_UTF8_H
#define PC_BASE_UTF8_H

#include <stdbool.h>
#include <stddef.h>

bool pc_utf8_valid(const void *s, size_t len);
/* Offset of the first invalid byte, or len when s is valid. */
size_t pc_utf8_invalid_at(const void *s, size_t len);

#endif
