/* A header field assembled from llhttp's pieces (net/http_field.h). */
#include "net/http_field.h"

#include <string.h>

size_t pc_http_field_name(pc_http_field *f, const char *at, size_t n)
{
    pc_buf_append(&f->name, at, n);
    return f->name.len;
}

size_t pc_http_field_value(pc_http_field *f, const char *at, size_t n)
{
    pc_buf_append(&f->value, at, n);
    return f->value.len;
}

static const char *part(const pc_buf *b, size_t *len)
{
    const char *s = b->len ? (const char *)b->data : "";
    if (len) *len = strlen(s);
    return s;
}

const char *pc_http_field_name_str(const pc_http_field *f, size_t *len)
{
    return part(&f->name, len);
}

const char *pc_http_field_value_str(const pc_http_field *f, size_t *len)
{
    return part(&f->value, len);
}

void pc_http_field_clear(pc_http_field *f)
{
    f->name.len = f->value.len = 0;
}

void pc_http_field_free(pc_http_field *f)
{
    pc_buf_free(&f->name);
    pc_buf_free(&f->value);
}
