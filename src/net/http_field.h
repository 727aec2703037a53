/* One header field of an HTTP/1.1 message as llhttp hands it over: its name and its value may
 * each arrive in pieces (a read can end inside either), so both the client and the server
 * assemble them here until llhttp says the value is complete. */
#ifndef PC_HTTP_FIELD_H
#define PC_HTTP_FIELD_H

#include <stddef.h>

#include "base/buf.h"

typedef struct {
    pc_buf name, value;
} pc_http_field;

/* A piece of the name or the value: the length so far, for the caller's limits. */
size_t pc_http_field_name(pc_http_field *f, const char *at, size_t n);
size_t pc_http_field_value(pc_http_field *f, const char *at, size_t n);
/* The complete field, each part up to its first NUL (as the C strings they are read as end
 * there; "" when empty); pc_http_field_clear readies the next one. */
const char *pc_http_field_name_str(const pc_http_field *f, size_t *len);
const char *pc_http_field_value_str(const pc_http_field *f, size_t *len);
void pc_http_field_clear(pc_http_field *f);
void pc_http_field_free(pc_http_field *f);

#endif
