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

/* ---- collapsed stacks (§1.4, §1.6) ---- */

typedef struct pc_ingest_type {
    const char *suffix, *type, *unit;
    int scaled; /* cpu/wall counts scale to nanoseconds with sampleRate */
} type_info;

static const type_info known_types[] = {
    {"cpu", "cpu", "nanoseconds", 1},
    {"itimer", "cpu", "nanoseconds", 1},
    {"wall", "wall", "nanoseconds", 1},
    {"seconds", "wall", "nanoseconds", 1},
    {"nanoseconds", "wall", "nanoseconds", 1},
    {"microseconds", "wall", "nanoseconds", 1},
    {"milliseconds", "wall", "nanoseconds", 1},
    {"inuse_objects", "inuse_objects", "count", 0},
    {"alloc_objects", "alloc_objects", "count", 0},
    {"inuse_space", "inuse_space", "bytes", 0},
    {"alloc_space", "alloc_space", "bytes", 0},
    {"bytes", "alloc_space", "bytes", 0},
    {"live", "inuse_objects", "count", 0},
    {"alloc_in_new_tlab_objects", "alloc_in_new_tlab_objects", "count", 0},
    {"alloc_in_new_tlab_bytes", "alloc_in_new_tlab_bytes", "bytes", 0},
    {"alloc_outside_tlab_objects", "alloc_outside_tlab_objects", "count", 0},
    {"alloc_outside_tlab_bytes", "alloc_outside_tlab_bytes", "bytes", 0},
    {"goroutines", "goroutine", "count", 0},
    {"mutex_count", "contentions", "count", 0},
    {"mutex_duration", "delay", "nanoseconds", 0},
    {"block_count", "contentions", "count", 0},
    {"block_duration", "delay", "nanoseconds", 0},
    {"lock_count", "contentions", "count", 0},
    {"lock_duration", "delay", "nanoseconds", 0},
    {"exceptions", "exceptions", "count", 0},
    {NULL, NULL, NULL, 0},
};

/* The type an app name's last '.' component names (none: cpu); NULL when unknown. *app_len gets
 * the length of the name without the suffix. */
static const type_info *type_of(const char *app, size_t *app_len)
{
    const char *dot = strrchr(app, '.');
    *app_len = strlen(app);
    if (!dot) return &known_types[0];
    *app_len = (size_t)(dot - app);
    for (const type_info *t = known_types; t->suffix; t++)
        if (strcmp(dot + 1, t->suffix) == 0) return t;
    return NULL;
}

typedef struct pc_ingest_sample {
    int32_t stack;
    int64_t value;
} folded_sample;

#define R16(n)     (((size_t)(n) + 15) & ~(size_t)15)
#define DICT_ENTRY (16 * 2 + sizeof(void *) * 2) /* hash slots at 3/4 load, table pointers */

size_t pc_ingest_estimate(size_t samples, size_t stack_frames, size_t frames, size_t frame_bytes)
{
    /* per sample: the sample, its value, its pointer, the builder's entry and a stack; per frame
     * of a stack its index (twice: the caller's array and the stack's); per new frame a string,
     * a function and a location with one line, each with its dictionary slots. Saturates. */
    const size_t per_sample = R16(sizeof(pc_sample)) + 16 + sizeof(void *) +
                              2 * sizeof(folded_sample) + R16(sizeof(pc_stack)) + DICT_ENTRY + 16;
    const size_t per_frame = R16(sizeof(pc_function)) + R16(sizeof(pc_location)) + 16 +
                             R16(sizeof(pc_line)) + 3 * DICT_ENTRY + sizeof(int32_t) + 16;
    size_t t[4], sum = 16384; /* the batch, its first arena block, the empty dictionary */
    if (__builtin_mul_overflow(frame_bytes, 2, &t[0]) ||
        __builtin_mul_overflow(samples, per_sample, &t[1]) ||
        __builtin_mul_overflow(stack_frames, 2 * sizeof(int32_t), &t[2]) ||
        __builtin_mul_overflow(frames, per_frame, &t[3]))
        return SIZE_MAX;
    for (int i = 0; i < 4; i++)
        if (__builtin_add_overflow(sum, t[i], &sum)) return SIZE_MAX;
    return sum;
}

/* The decode budget refused: PC_EAGAIN when the decodes in flight leave no room now, else
 * PC_E2BIG. */
static int over_budget(const pc_budget *b, pc_error *e)
{
    return pc_error_set(e, b->state == PC_EAGAIN ? PC_EAGAIN : PC_E2BIG,
                        "%s: over the decode budget", b->what);
}

int pc_ingest_begin(pc_ingest_builder *ib, const pc_folded_opts *o, size_t estimate,
                    const char *what, pc_error *e)
{
    ib->o = o;
    if (o->budget && pc_budget_reserve(o->budget, estimate, what) < 0)
        return over_budget(o->budget, e);
    ib->b = pc_batch_new();
    pc_arena_set_budget(ib->b->arena, o->budget); /* until the receiver's pc_batch_end_budget */
    ib->db = pc_dict_builder_from(ib->b->arena, ib->b->req->dictionary);
    return 0;
}

int pc_ingest_profile_begin(pc_ingest_builder *ib, const char *app, int64_t sample_rate,
                            const char *units, pc_error *e)
{
    const type_info *ti = type_of(app, &ib->app_len);
    if (!ti) return pc_error_set(e, PC_EINVAL, "unknown profile type: %s", strrchr(app, '.') + 1);
    ib->type = ti;
    ib->app = app;
    ib->units = units;
    ib->period = ti->scaled && sample_rate > 0 ? 1000000000LL / sample_rate : 0;
    ib->n = 0;
    return 0;
}

int32_t pc_ingest_frame(pc_ingest_builder *ib, const char *name, size_t len)
{
    int32_t fn = pc_dict_function(ib->db, pc_dict_string(ib->db, name, len), 0, 0, 0);
    pc_line ln = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__LINE__INIT;
    pc_line *lines[1] = {&ln};
    ln.function_index = fn;
    pc_location loc = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__LOCATION__INIT;
    loc.n_lines = 1;
    loc.lines = lines;
    return pc_dict_location(ib->db, &loc);
}

void pc_ingest_sample(pc_ingest_builder *ib, int32_t stack, int64_t value)
{
    if (ib->n == ib->cap) {
        size_t old = ib->cap;
        ib->cap = ib->cap ? ib->cap * 2 : 64;
        ib->samples = pc_xrealloc(ib->samples, ib->cap * sizeof(folded_sample));
        pc_arena_charge(ib->b->arena, (ib->cap - old) * sizeof(folded_sample));
    }
    ib->samples[ib->n++] = (folded_sample){stack, value};
}

void pc_ingest_profile_end(pc_ingest_builder *ib, const char *const *xkeys,
                           const char *const *xvals, size_t nx)
{
    const pc_folded_opts *o = ib->o;
    pc_batch *b = ib->b;
    const type_info *ti = ib->type;
    const char *type = ti->type, *unit = ti->unit, *units = ib->units;
    if (ti->scaled && ib->period == 0) {
        type = "samples"; /* no sampleRate: plain sample counts */
        unit = "count";
    } else if (!ti->scaled && units && *units && strcmp(unit, "count") == 0 &&
               strcmp(units, "objects") != 0 && strcmp(units, "samples") != 0 &&
               strcmp(units, "goroutines") != 0 && strcmp(units, "lock_samples") != 0) {
        unit = strcmp(units, "lock_nanoseconds") == 0 ? "nanoseconds" : units;
    }
    enum { MAX_ATTRS = PC_INGEST_MAX_LABELS + 8 };
    const char *keys[MAX_ATTRS], *vals[MAX_ATTRS];
    size_t na = 0;
    keys[na] = "service.name";
    vals[na++] =
        o->service && *o->service ? o->service : pc_arena_strndup(b->arena, ib->app, ib->app_len);
    for (size_t i = 0; i < o->n_attrs && na < MAX_ATTRS; i++) {
        size_t x = 0;
        while (x < nx && strcmp(xkeys[x], o->attr_keys[i]) != 0)
            x++;
        if (x == nx) { /* an extra attribute of the same key replaces it */
            keys[na] = o->attr_keys[i];
            vals[na++] = o->attr_vals[i];
        }
    }
    for (size_t x = 0; x < nx && na < MAX_ATTRS; x++) {
        if (!xvals[x]) continue; /* only removes the opts' attribute */
        keys[na] = xkeys[x];
        vals[na++] = xvals[x];
    }
    pc_scope_profiles *sp =
        pc_batch_add_resource(b, keys, vals, na, o->scope_name, o->scope_version);
    pc_profile *prof = pc_scope_add_profile(b, sp);
    prof->sample_type = pc_arena_calloc(b->arena, 1, sizeof(pc_value_type));
    opentelemetry__proto__profiles__v1development__value_type__init(prof->sample_type);
    prof->sample_type->type_strindex = pc_dict_cstring(ib->db, type);
    prof->sample_type->unit_strindex = pc_dict_cstring(ib->db, unit);
    if (ib->period) {
        prof->period_type = pc_arena_calloc(b->arena, 1, sizeof(pc_value_type));
        opentelemetry__proto__profiles__v1development__value_type__init(prof->period_type);
        prof->period_type->type_strindex = prof->sample_type->type_strindex;
        prof->period_type->unit_strindex = prof->sample_type->unit_strindex;
        prof->period = ib->period;
    }
    prof->time_unix_nano = (uint64_t)o->time_ns;
    prof->duration_nano = o->duration_ns > 0 ? (uint64_t)o->duration_ns : 0;
    prof->samples = pc_arena_alloc(b->arena, (ib->n ? ib->n : 1) * sizeof(pc_sample *));
    for (size_t i = 0; i < ib->n; i++) {
        pc_sample *s = pc_arena_calloc(b->arena, 1, sizeof(*s));
        opentelemetry__proto__profiles__v1development__sample__init(s);
        s->stack_index = ib->samples[i].stack;
        s->n_values = 1;
        s->values = pc_arena_alloc(b->arena, sizeof(int64_t));
        s->values[0] = ib->samples[i].value; /* already scaled by the period */
        prof->samples[prof->n_samples++] = s;
    }
    ib->n = 0;
}

static void builder_release(pc_ingest_builder *ib)
{
    if (ib->b) pc_arena_uncharge(ib->b->arena, ib->cap * sizeof(folded_sample));
    free(ib->samples);
    ib->samples = NULL;
    ib->cap = ib->n = 0;
    pc_dict_builder_free(ib->db);
    ib->db = NULL;
}

pc_batch *pc_ingest_finish(pc_ingest_builder *ib)
{
    pc_batch *b = ib->b;
    b->req->dictionary = pc_dict_builder_finish(ib->db);
    builder_release(ib);
    ib->b = NULL;
    return b;
}

void pc_ingest_abort(pc_ingest_builder *ib)
{
    builder_release(ib);
    if (ib->b) pc_batch_unref(ib->b);
    ib->b = NULL;
}

static void add_stack_line(pc_ingest_builder *ib, const char *line, size_t len, int64_t value)
{
    /* frames are root first; OTLP stacks are leaf first */
    int32_t locs_local[256] = {0}, *locs = locs_local;
    size_t nl = 0, capl = 256;
    const char *f = line, *end = line + len;
    while (f <= end) {
        const char *semi = memchr(f, ';', (size_t)(end - f));
        const char *fe = semi ? semi : end;
        if (fe > f) {
            if (nl == capl) {
                capl *= 2;
                int32_t *g = pc_xmalloc(capl * sizeof(int32_t));
                memcpy(g, locs, nl * sizeof(int32_t));
                if (locs != locs_local) free(locs);
                locs = g;
            }
            locs[nl++] = pc_ingest_frame(ib, f, (size_t)(fe - f));
        }
        if (!semi) break;
        f = semi + 1;
    }
    for (size_t i = 0; i < nl / 2; i++) {
        int32_t t = locs[i];
        locs[i] = locs[nl - 1 - i];
        locs[nl - 1 - i] = t;
    }
    pc_ingest_sample(ib, pc_dict_stack(ib->db, locs, nl), value);
    if (locs != locs_local) free(locs);
}

/* What a collapsed-stacks body becomes, counted before parsing: per line a sample, its value and
 * a stack; per frame (every ';' and line) a string, a function and a location with one line, all
 * distinct at worst, each with its dictionary slots. */
static size_t folded_estimate(const char *text, size_t len)
{
    size_t lines = 1, frames = 0;
    for (size_t i = 0; i < len; i++) {
        lines += text[i] == '\n';
        frames += text[i] == ';';
    }
    frames += lines;
    return 4096 + 2 * len +
           lines * (R16(sizeof(pc_sample)) + 16 + sizeof(void *) + 2 * sizeof(folded_sample) +
                    R16(sizeof(pc_stack)) + DICT_ENTRY) +
           frames * (R16(sizeof(pc_function)) + R16(sizeof(pc_location)) + 16 +
                     R16(sizeof(pc_line)) + 3 * DICT_ENTRY + sizeof(int32_t) + 16);
}

int pc_folded_to_batch(const char *text, size_t len, const pc_folded_opts *o, pc_batch **out,
                       char **service, pc_error *err)
{
    size_t app_len;
    if (!type_of(o->app, &app_len))
        return pc_error_set(err, PC_EINVAL, "unknown profile type: %s", strrchr(o->app, '.') + 1);
    pc_ingest_builder ib = {0};
    int brc = pc_ingest_begin(&ib, o, folded_estimate(text, len), "collapsed stacks", err);
    if (brc == 0) brc = pc_ingest_profile_begin(&ib, o->app, o->sample_rate, o->units, err);
    if (brc < 0) {
        pc_ingest_abort(&ib);
        return brc;
    }
    int64_t period = ib.period;
    const char *p = text, *end = text + len;
    size_t lineno = 0;
    int rc = 0;
    while (p < end) {
        if (!pc_budget_ok(o->budget)) {
            rc = over_budget(o->budget, err);
            goto fail;
        }
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        lineno++;
        size_t ll = (size_t)(le - p);
        if (ll && p[ll - 1] == '\r') ll--;
        if (ll) {
            if (o->lines) {
                add_stack_line(&ib, p, ll, period ? period : 1);
            } else {
                const char *sp = NULL;
                for (size_t i = ll; i-- > 0;)
                    if (p[i] == ' ') {
                        sp = p + i;
                        break;
                    }
                if (sp) { /* lines without a space are skipped, as Pyroscope does */
                    char num[24];
                    size_t dl = (size_t)(p + ll - sp - 1);
                    char *e = NULL;
                    long long v = -1;
                    errno = 0;
                    if (dl > 0 && dl < sizeof num) {
                        memcpy(num, sp + 1, dl);
                        num[dl] = 0;
                        v = strtoll(num, &e, 10);
                    }
                    if (v < 0 || !e || *e || errno == ERANGE) {
                        rc = pc_error_set(err, PC_EINVAL, "line %zu: invalid sample count", lineno);
                        goto fail;
                    }
                    /* cpu/wall counts become nanoseconds: refuse what int64 cannot hold */
                    int64_t value = v;
                    if (period && __builtin_mul_overflow(value, period, &value)) {
                        rc = pc_error_set(err, PC_EINVAL,
                                          "line %zu: sample count %lld x %lld ns (sampleRate) "
                                          "overflows a 64-bit value",
                                          lineno, v, (long long)period);
                        goto fail;
                    }
                    add_stack_line(&ib, p, (size_t)(sp - p), value);
                }
            }
        }
        p = nl ? nl + 1 : end;
    }
    pc_ingest_profile_end(&ib, NULL, NULL, 0);
    char *svc = pc_xmalloc(app_len + 1);
    memcpy(svc, o->app, app_len);
    svc[app_len] = 0;
    *out = pc_ingest_finish(&ib);
    *service = svc;
    return 0;
fail:
    pc_ingest_abort(&ib);
    return rc;
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
    pc_dict_builder *db = pc_dict_builder_from(b->arena, b->req->dictionary);
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val)
    {
        if (!json_is_object(val)) continue;
        const char *display = json_string_value(json_object_get(val, "display-name"));
        const char *units = json_string_value(json_object_get(val, "units"));
        for (size_t r = first_rp; r < b->req->n_resource_profiles; r++) {
            pc_resource_profiles *rp = b->req->resource_profiles[r];
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
    b->req->dictionary = pc_dict_builder_finish(db);
    pc_dict_builder_free(db);
    json_decref(root);
    return 0;
}
