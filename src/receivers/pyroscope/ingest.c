/* Pyroscope /ingest parsing (spec/pyroscope.md §1.2-§1.6). Hostile input: every function here is
 * bounded and fuzzed. */
#include "receivers/pyroscope/ingest.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/utf8.h"
#include "pdata/dict.h"
#include "base/alloc.h"

/* ---- name grammar (§1.3) ---- */

static char *trimmed(const char *s, size_t len)
{
    while (len && isspace((unsigned char)*s))
        s++, len--;
    while (len && isspace((unsigned char)s[len - 1]))
        len--;
    char *r = pc_xmalloc(len + 1);
    memcpy(r, s, len);
    r[len] = 0;
    return r;
}

static int app_char_ok(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == '.' || c == '-' || c == '/';
}

static int label_char_ok(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == '.';
}

static void name_set(pc_ingest_name *n, char *key, char *val)
{
    for (size_t i = 0; i < n->n; i++) {
        if (strcmp(n->keys[i], key) == 0) { /* duplicate keys: last one wins */
            free(n->vals[i]);
            n->vals[i] = val;
            free(key);
            return;
        }
    }
    n->keys[n->n] = key;
    n->vals[n->n++] = val;
}

int pc_ingest_parse_name(const char *s, pc_ingest_name *out, pc_error *e)
{
    memset(out, 0, sizeof *out);
    const char *brace = strchr(s, '{');
    out->app = trimmed(s, brace ? (size_t)(brace - s) : strlen(s));
    const char *p = brace ? brace + 1 : NULL;
    while (p) {
        size_t span = strcspn(p, ",}");
        if (!p[span]) break; /* a pair is committed only by ',' or '}' (as Pyroscope does) */
        char term = p[span];
        const char *eq = memchr(p, '=', span);
        char *key = trimmed(p, eq ? (size_t)(eq - p) : span);
        if (!eq && !*key) {
            free(key);
            if (term == '}') break;
            p += span + 1;
            continue;
        }
        if (!eq) {
            pc_error_set(e, PC_EINVAL, "name: invalid label \"%s\": missing '='", key);
            free(key);
            goto fail;
        }
        if (!*key) {
            pc_error_set(e, PC_EINVAL, "name: invalid label name: empty");
            free(key);
            goto fail;
        }
        for (const char *c = key; *c; c++) {
            if (!label_char_ok(*c)) {
                pc_error_set(e, PC_EINVAL,
                             "name: invalid label name: %s: character is not allowed: '%c'", key,
                             *c);
                free(key);
                goto fail;
            }
        }
        if (out->n == PC_INGEST_MAX_LABELS) {
            pc_error_set(e, PC_EINVAL, "name: too many labels (max %d)", PC_INGEST_MAX_LABELS);
            free(key);
            goto fail;
        }
        char *val = trimmed(eq + 1, (size_t)(p + span - (eq + 1)));
        if (!pc_utf8_valid(val, strlen(val))) { /* Pyroscope's distributor refuses it too */
            pc_error_set(e, PC_EINVAL, "name: invalid label value for %s: not valid UTF-8", key);
            free(key);
            free(val);
            goto fail;
        }
        if (strcmp(key, "__name__") == 0) { /* explicit __name__ overrides the app name */
            free(out->app);
            out->app = val;
            free(key);
        } else {
            name_set(out, key, val);
        }
        if (term == '}') break;
        p += span + 1;
    }
    if (!*out->app) {
        pc_error_set(e, PC_EINVAL, "name: service name is required");
        goto fail;
    }
    for (const char *c = out->app; *c; c++) {
        if (!app_char_ok(*c)) {
            pc_error_set(e, PC_EINVAL,
                         "name: invalid application name: %s: character is not allowed: '%c'",
                         out->app, *c);
            goto fail;
        }
    }
    return 0;
fail:
    pc_ingest_name_free(out);
    return PC_EINVAL;
}

void pc_ingest_name_free(pc_ingest_name *n)
{
    free(n->app);
    for (size_t i = 0; i < n->n; i++) {
        free(n->keys[i]);
        free(n->vals[i]);
    }
    memset(n, 0, sizeof *n);
}

/* ---- from / until (§1.2) ---- */

static int64_t days_from_civil(int64_t y, int64_t m, int64_t d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

int64_t pc_ingest_parse_time(const char *s, int64_t now_ns)
{
    char buf[64];
    size_t n = 0;
    for (; *s && n < sizeof buf - 1; s++)
        if (*s != ' ' && *s != '_' && *s != ',') buf[n++] = *s;
    if (*s) return PC_EINVAL;
    buf[n] = 0;
    if (n == 0) return now_ns;
    size_t digits = strspn(buf, "0123456789");
    if (digits == n) {
        if (n > 19) return PC_EINVAL;
        unsigned long long v = strtoull(buf, NULL, 10);
        if (n == 8) {
            int64_t y = (int64_t)(v / 10000), m = (int64_t)(v / 100 % 100), d = (int64_t)(v % 100);
            /* nanoseconds since 1970 in int64 reach 2262; outside that the date is invalid */
            if (m >= 1 && m <= 12 && d >= 1 && d <= 31) {
                int64_t days = days_from_civil(y, m, d);
                return days >= 0 && days < 106000 ? days * 86400LL * 1000000000LL : PC_EINVAL;
            }
        }
        /* 13 digits of ms or 16 of µs can pass 2262-04-11, the end of int64 nanoseconds */
        int64_t scale = n == 13 ? 1000000LL : n == 16 ? 1000LL : n == 19 ? 1 : 1000000000LL, ns;
        if (v > INT64_MAX || __builtin_mul_overflow((int64_t)v, scale, &ns)) return PC_EINVAL;
        return ns;
    }
    if (strncmp(buf, "now", 3) != 0) return PC_EINVAL;
    const char *r = buf + 3;
    if (!*r) return now_ns;
    int sign = *r == '-' ? -1 : *r == '+' ? 1 : 0;
    if (!sign) return PC_EINVAL;
    char *end;
    long long amount = strtoll(r + 1, &end, 10);
    if (end == r + 1 || amount < 0 || amount > 1000000000LL) return PC_EINVAL;
    static const struct {
        const char *u;
        int64_t s;
    } units[] = {{"s", 1},      {"m", 60},        {"min", 60},     {"h", 3600}, {"d", 86400},
                 {"w", 604800}, {"mon", 2592000}, {"y", 31536000}, {NULL, 0}};
    for (int i = 0; units[i].u; i++) {
        if (strcmp(end, units[i].u) != 0) continue;
        int64_t off, t;
        if (__builtin_mul_overflow((int64_t)amount, units[i].s * 1000000000LL, &off) ||
            __builtin_add_overflow(now_ns, sign * off, &t) || t < 0)
            return PC_EINVAL;
        return t;
    }
    return PC_EINVAL;
}

int64_t pc_ingest_sample_rate(const char *s)
{
    char *end = NULL;
    errno = 0;
    long long rate = s && *s ? strtoll(s, &end, 10) : 100;
    if ((end && *end) || errno == ERANGE)
        rate = 100; /* as strconv.Atoi fails: Pyroscope logs and uses the default */
    return rate;
}

/* ---- multipart/form-data (§1.5) ---- */

int pc_multipart_boundary(const char *ct, char *out, size_t outlen)
{
    const char *b = ct ? strstr(ct, "boundary=") : NULL;
    if (!b) return PC_EINVAL;
    b += 9;
    size_t len;
    if (*b == '"') {
        b++;
        const char *e = strchr(b, '"');
        if (!e) return PC_EINVAL;
        len = (size_t)(e - b);
    } else {
        len = strcspn(b, "; \t");
    }
    if (len == 0 || len >= outlen || len > 70) return PC_EINVAL;
    memcpy(out, b, len);
    out[len] = 0;
    return 0;
}

/* Value of a parameter like name="x" in a Content-Disposition header. */
static void disposition_param(const char *h, size_t hl, const char *param, char *out, size_t outlen)
{
    size_t pl = strlen(param);
    out[0] = 0;
    for (size_t i = 0; i + pl + 2 <= hl; i++) {
        if ((i == 0 || h[i - 1] == ' ' || h[i - 1] == ';') && strncasecmp(h + i, param, pl) == 0 &&
            h[i + pl] == '=') {
            const char *v = h + i + pl + 1;
            size_t rem = hl - (i + pl + 1), len;
            if (rem && *v == '"') {
                v++, rem--;
                const char *e = memchr(v, '"', rem);
                len = e ? (size_t)(e - v) : rem;
            } else {
                len = 0;
                while (len < rem && v[len] != ';' && v[len] != '\r')
                    len++;
            }
            if (len >= outlen) len = outlen - 1;
            memcpy(out, v, len);
            out[len] = 0;
            return;
        }
    }
}

int pc_multipart_parse(const uint8_t *body, size_t len, const char *boundary, pc_form_part *parts,
                       int max, pc_error *e)
{
    char delim[80];
    int dl = snprintf(delim, sizeof delim, "--%s", boundary);
    const uint8_t *end = body + len;
    const uint8_t *p = memmem(body, len, delim, (size_t)dl);
    int n = 0;
    if (!p) return pc_error_set(e, PC_EINVAL, "multipart body has no boundary \"%s\"", boundary);
    for (;;) {
        p += dl;
        if (end - p >= 2 && p[0] == '-' && p[1] == '-') return n; /* closing delimiter */
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        if (end - p >= 2 && p[0] == '\r' && p[1] == '\n')
            p += 2;
        else if (p < end && *p == '\n')
            p++;
        const uint8_t *hdr_end = memmem(p, (size_t)(end - p), "\r\n\r\n", 4);
        size_t sep = 4;
        if (!hdr_end) {
            hdr_end = memmem(p, (size_t)(end - p), "\n\n", 2);
            sep = 2;
        }
        if (!hdr_end)
            return pc_error_set(e, PC_EINVAL, "multipart part %d: headers not terminated", n);
        const uint8_t *data = hdr_end + sep;
        char next[84];
        int nl = snprintf(next, sizeof next, "\r\n%s", delim);
        const uint8_t *q = memmem(data, (size_t)(end - data), next, (size_t)nl);
        if (!q) {
            nl = snprintf(next, sizeof next, "\n%s", delim);
            q = memmem(data, (size_t)(end - data), next, (size_t)nl);
        }
        if (!q) return pc_error_set(e, PC_EINVAL, "multipart part %d: no closing boundary", n);
        if (n == max)
            return pc_error_set(e, PC_EINVAL, "multipart body has more than %d parts", max);
        pc_form_part *part = &parts[n++];
        memset(part, 0, sizeof *part);
        /* find the Content-Disposition line among the part headers */
        const char *h = (const char *)p;
        size_t hl = (size_t)(hdr_end - p);
        for (size_t i = 0; i < hl;) {
            size_t ll = 0;
            while (i + ll < hl && h[i + ll] != '\n')
                ll++;
            if (ll > 20 && strncasecmp(h + i, "content-disposition:", 20) == 0) {
                disposition_param(h + i + 20, ll - 20, "name", part->name, sizeof part->name);
                disposition_param(h + i + 20, ll - 20, "filename", part->filename,
                                  sizeof part->filename);
            }
            i += ll + 1;
        }
        part->data = data;
        part->len = (size_t)(q - data);
        p = q + (nl - dl);
    }
}

/* ---- sample_type_config (§1.5) ---- */

int pc_ingest_apply_sample_type_config(pc_batch *b, size_t first_rp, const char *json, size_t len,
                                       pc_error *e)
{
    json_error_t je;
    json_t *root = json_loadb(json, len, 0, &je);
    if (!root || !json_is_object(root)) {
        pc_error_set(e, PC_EINVAL, "sample_type_config: not a JSON object%s%s", root ? "" : ": ",
                     root ? "" : je.text);
        json_decref(root);
        return PC_EINVAL;
    }
    pc_dict_builder *db = pc_dict_builder_from(b->arena, pc_batch_req(b)->dictionary);
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val)
    {
        if (!json_is_object(val)) continue;
        const char *display = json_string_value(json_object_get(val, "display-name"));
        const char *units = json_string_value(json_object_get(val, "units"));
        for (size_t r = first_rp; r < pc_batch_req(b)->n_resource_profiles; r++) {
            pc_resource_profiles *rp = pc_batch_req(b)->resource_profiles[r];
            for (size_t s = 0; s < rp->n_scope_profiles; s++) {
                pc_scope_profiles *sp = rp->scope_profiles[s];
                for (size_t k = 0; k < sp->n_profiles; k++) {
                    pc_value_type *st = sp->profiles[k]->sample_type;
                    if (!st || strcmp(pc_dict_builder_str(db, st->type_strindex), key) != 0)
                        continue;
                    if (display && *display) st->type_strindex = pc_dict_cstring(db, display);
                    if (units && *units && !*pc_dict_builder_str(db, st->unit_strindex))
                        st->unit_strindex = pc_dict_cstring(db, units);
                }
            }
        }
    }
    pc_batch_req(b)->dictionary = pc_dict_builder_finish(db);
    pc_dict_builder_free(db);
    json_decref(root);
    return 0;
}
