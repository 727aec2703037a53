/* pdata/wire_merge.h against the model merge (wmerge_oracle.h): pairs and triples of real
 * payloads (tests/data's Go profiles through pc_pprof_decode; the bench's otlp and otlp-large
 * payloads when bench/meson.build runs this with mkpayloads), randomized valid requests (tables
 * drawn from small pools, so entries repeat within and across requests; the dictionary before or
 * after the profiles; packed and plain indices), and the shapes it must refuse ("cannot"). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "testdata.h"
#include "wmerge_oracle.h"
#include "base/gzip.h"

/* ---- inputs ---- */

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(void) /* splitmix64 */
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static unsigned below(unsigned n)
{
    return n ? (unsigned)(rnd() % n) : 0;
}

static void w_var(pc_buf *b, uint64_t v)
{
    do {
        uint8_t c = (uint8_t)(v & 0x7f) | (v > 0x7f ? 0x80 : 0);
        pc_buf_append(b, &c, 1);
        v >>= 7;
    } while (v);
}
static void w_int(pc_buf *b, unsigned num, uint64_t v)
{
    w_var(b, (uint64_t)num << 3);
    w_var(b, v);
}
static void w_bytes(pc_buf *b, unsigned num, const void *d, size_t n)
{
    w_var(b, (uint64_t)num << 3 | 2);
    w_var(b, n);
    pc_buf_append(b, d, n);
}
/* sub as field num of b; sub is emptied */
static void w_msg(pc_buf *b, unsigned num, pc_buf *sub)
{
    w_bytes(b, num, sub->data, sub->len);
    sub->len = 0;
}
/* A singular scalar, left out when 0 (as encoders write proto3). */
static void w_opt(pc_buf *b, unsigned num, uint64_t v)
{
    if (v) w_int(b, num, v);
}
/* n indices below table, packed (always: canon) or, at random, one field each */
static void w_indices(pc_buf *b, unsigned num, size_t n, unsigned table, bool canon)
{
    pc_buf run = {0};
    bool packed = canon || below(2);
    for (size_t i = 0; i < n; i++)
        if (packed)
            w_var(&run, below(table));
        else
            w_int(b, num, below(table));
    if (packed && n) w_msg(b, num, &run);
    pc_buf_free(&run);
}

static const char *const pool[] = {"main", "foo",         "bar", "libc.so", "a.go", "b.go",
                                   "cpu",  "nanoseconds", "k1",  "k2",      "v1",   "samples"};

/* the sizes of a random request's tables (0: absent), element 0 included */
typedef struct sizes {
    unsigned str, attr, map, fn, link, loc, stack;
} sizes;

static unsigned tsize(void)
{
    unsigned k = below(6);
    return k ? k + 1 : below(2); /* absent, or only element 0, or entries */
}

static void gen_value(pc_buf *d, const sizes *z)
{
    pc_buf v = {0};
    switch (below(3)) {
    case 0: w_int(&v, 3, below(3)); break;
    case 1: w_int(&v, 8, below(z->str)); break;
    default: {
        const char *str = pool[below(3)];
        w_bytes(&v, 1, str, strlen(str));
        break;
    }
    }
    w_msg(d, 2, &v);
    pc_buf_free(&v);
}

/* Now and then an entry of table num written as the zero value with its fields out (element 0
 * in another form: the merge makes it element 0, and the oracle's duplicate check holds it). */
static bool gen_zero(pc_buf *e, unsigned num)
{
    static const uint8_t ids[16] = {0};
    if (below(8)) return false;
    switch (num) {
    case 4:
        w_bytes(e, 1, ids, 16);
        w_bytes(e, 2, ids, 8);
        break;
    case 6:
        w_bytes(e, 2, "", 0); /* an empty AnyValue */
        break;
    case 7:
        w_bytes(e, 1, "", 0); /* an empty packed run */
        break;
    case 1:
        w_int(e, 1, 0); /* memory_start */
        break;
    case 2:
        w_int(e, 2, 0); /* address */
        break;
    default: w_int(e, 4, 0); /* start_line */
    }
    return true;
}

/* The dictionary's tables (element 0 empty, then entries from small pools, some of them the
 * zero value written out). */
static void gen_tables(pc_buf *d, const sizes *z)
{
    pc_buf e = {0}, sub = {0};
    for (unsigned i = 0; i < z->str; i++) {
        const char *s = i ? pool[below(12)] : "";
        w_bytes(d, 5, s, strlen(s));
    }
    for (unsigned i = 0; i < z->attr; i++) {
        if (i && !gen_zero(&e, 6)) {
            w_opt(&e, 1, z->str > 1 ? 1 + below(z->str - 1) : 0);
            gen_value(&e, z);
            if (below(2)) w_opt(&e, 3, below(z->str));
        }
        w_msg(d, 6, &e);
    }
    for (unsigned i = 0; i < z->map; i++) {
        if (i && !gen_zero(&e, 1)) {
            w_int(&e, 1, (1 + below(2)) * 0x1000);
            w_opt(&e, 4, below(z->str));
            w_indices(&e, 5, below(2), z->attr, true);
        }
        w_msg(d, 1, &e);
    }
    for (unsigned i = 0; i < z->fn; i++) {
        if (i && !gen_zero(&e, 3)) {
            w_opt(&e, 1, below(z->str));
            w_opt(&e, 2, below(z->str));
            w_opt(&e, 3, below(z->str));
            w_int(&e, 4, 1 + below(3));
        }
        w_msg(d, 3, &e);
    }
    for (unsigned i = 0; i < z->link; i++) {
        if (i && !gen_zero(&e, 4)) {
            uint8_t t[16] = {(uint8_t)(1 + below(3))}, s[8] = {(uint8_t)(1 + below(2))};
            w_bytes(&e, 1, t, 16);
            w_bytes(&e, 2, s, 8);
        }
        w_msg(d, 4, &e);
    }
    for (unsigned i = 0; i < z->loc; i++) {
        if (i && !gen_zero(&e, 2)) {
            w_opt(&e, 1, below(z->map));
            w_int(&e, 2, (1 + below(4)) * 16);
            for (unsigned l = below(3); l > 0; l--) {
                w_opt(&sub, 1, below(z->fn));
                w_opt(&sub, 2, below(5));
                w_msg(&e, 3, &sub);
            }
            w_indices(&e, 4, below(2), z->attr, true);
        }
        w_msg(d, 2, &e);
    }
    for (unsigned i = 0; i < z->stack; i++) {
        if (i && !gen_zero(&e, 7)) w_indices(&e, 1, 1 + below(4), z->loc, true);
        w_msg(d, 7, &e);
    }
    pc_buf_free(&e);
    pc_buf_free(&sub);
}

static void gen_profile(pc_buf *p, const sizes *z)
{
    pc_buf vt = {0}, s = {0};
    w_int(&vt, 1, below(z->str));
    w_int(&vt, 2, below(z->str));
    w_msg(p, 1, &vt);
    for (unsigned k = below(6); k > 0; k--) {
        w_int(&s, 1, below(z->stack));
        w_indices(&s, 2, below(3), z->attr, false);
        w_int(&s, 3, below(z->link));
        w_int(&s, 4, below(100));
        if (below(2)) {
            uint8_t ts[8] = {(uint8_t)below(4)};
            w_bytes(&s, 5, ts, 8); /* one fixed64, packed */
        }
        w_msg(p, 2, &s);
    }
    w_int(&vt, 1, below(z->str));
    w_msg(p, 5, &vt);
    w_int(p, 6, 10 + below(2));
    w_indices(p, 11, below(2), z->attr, false);
    pc_buf_free(&vt);
    pc_buf_free(&s);
}

/* A random valid ExportProfilesServiceRequest. */
static void gen_request(pc_buf *out)
{
    sizes z = {tsize(), tsize(), tsize(), tsize(), tsize(), tsize(), tsize()};
    pc_buf d = {0}, rp = {0}, m = {0}, kv = {0}, sp = {0};
    gen_tables(&d, &z);
    bool dict_first = below(2);
    if (dict_first && d.len) w_bytes(out, 2, d.data, d.len);
    for (unsigned r = 1 + below(2); r > 0; r--) {
        if (below(2)) { /* a resource attribute in the dictionary's string form */
            w_int(&kv, 3, below(z.str));
            gen_value(&kv, &z);
        } else {
            w_bytes(&kv, 1, "service.name", 12);
            gen_value(&kv, &z);
        }
        w_msg(&m, 1, &kv);
        w_msg(&rp, 1, &m);
        for (unsigned s = 1 + below(2); s > 0; s--) {
            w_bytes(&m, 1, pool[below(2)], 3);
            w_msg(&sp, 1, &m);
            for (unsigned p = 1 + below(2); p > 0; p--) {
                gen_profile(&m, &z);
                w_msg(&sp, 2, &m);
            }
            w_msg(&rp, 2, &sp);
        }
        w_msg(out, 1, &rp);
    }
    if (!dict_first && d.len) w_bytes(out, 2, d.data, d.len);
    pc_buf_free(&d);
    pc_buf_free(&rp);
    pc_buf_free(&m);
    pc_buf_free(&kv);
    pc_buf_free(&sp);
}

/* ---- the cases ---- */

/* data[0..n) merged: the oracle's content, or cannot when want_cannot. */
static void check_merge(const uint8_t *const *data, const size_t *len, size_t n, bool want_cannot,
                        const char *what)
{
    char why[2048] = "";
    int rc = wm_check(data, len, n, true, why, sizeof why);
    CHECK(rc == (want_cannot ? 2 : 0));
    if (rc != (want_cannot ? 2 : 0)) fprintf(stderr, "  %s: rc %d %s\n", what, rc, why);
}

/* Every pair and triple (with repeats) of the n payloads. */
static void check_combinations(pc_buf *p, size_t n, const char *what)
{
    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < n; b++) {
            const uint8_t *d[3] = {p[a].data, p[b].data, p[(a + b + 1) % n].data};
            size_t l[3] = {p[a].len, p[b].len, p[(a + b + 1) % n].len};
            check_merge(d, l, 2, false, what);
            check_merge(d, l, 3, false, what);
        }
}

static void test_real_payloads(void)
{
    const char *names[] = {"go-cpu.pb.gz", "go-heap.pb.gz"};
    pc_buf p[2] = {{0}, {0}};
    for (size_t i = 0; i < 2; i++) {
        pc_batch *b = NULL;
        CHECK(read_pprof_batch(names[i], NULL, &b) == 0);
        if (!b) return;
        pc_batch_encode_proto(b, &p[i]);
        pc_batch_unref(b);
    }
    check_combinations(p, 2, "tests/data");
    pc_buf_free(&p[0]);
    pc_buf_free(&p[1]);
}

/* The bench's payload sets (bench/mkpayloads.c), made in a temporary directory, when this test
 * is given mkpayloads (bench/meson.build registers that run). */
static void test_bench_payloads(const char *mkpayloads)
{
    char dir[] = "/tmp/pc-wmerge-XXXXXX", cmd[8192];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' >/dev/null", mkpayloads, test_data_dir(), dir);
    CHECK(system(cmd) == 0);
    const char *sets[][4] = {
        {"otlp-large", "large-00.otlp.gz", "large-01.otlp.gz", "large-02.otlp.gz"},
        {"otlp", "go-cpu.otlp.gz", "go-heap.otlp.gz", NULL}};
    for (size_t s = 0; s < 2; s++) {
        pc_buf p[3] = {{0}, {0}, {0}};
        size_t n = 0;
        for (size_t k = 1; k < 4 && sets[s][k]; k++, n++) {
            pc_buf gz = {0};
            char path[4200];
            snprintf(path, sizeof path, "%s/%s/%s", dir, sets[s][0], sets[s][k]);
            FILE *f = fopen(path, "rb");
            CHECK(f != NULL);
            if (!f) return;
            char buf[65536];
            size_t r;
            while ((r = fread(buf, 1, sizeof buf, f)) > 0)
                pc_buf_append(&gz, buf, r);
            fclose(f);
            CHECK(pc_gzip_inflate(gz.data, gz.len, 1 << 30, &p[n]) == 0);
            pc_buf_free(&gz);
        }
        check_combinations(p, n, sets[s][0]);
        for (size_t k = 0; k < n; k++)
            pc_buf_free(&p[k]);
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

static void test_random(void)
{
    for (int it = 0; it < 600; it++) {
        pc_buf p[3] = {{0}, {0}, {0}};
        size_t n = 2 + below(2);
        const uint8_t *d[3];
        size_t l[3];
        for (size_t i = 0; i < n; i++) {
            gen_request(&p[i]);
            pc_wire_counts wc;
            pc_error e = {0};
            int ok = pc_wire_check_profiles(p[i].data, p[i].len, PC_PROTO_MAX_DEPTH, &wc, &e);
            CHECK(ok == 0 && wc.rejected == 0); /* the generator's own check */
            if (ok || wc.rejected) fprintf(stderr, "  generated request invalid: %s\n", e.msg);
            d[i] = p[i].len ? p[i].data : (const uint8_t *)"";
            l[i] = p[i].len;
        }
        check_merge(d, l, n, false, "random");
        for (size_t i = 0; i < n; i++)
            pc_buf_free(&p[i]);
    }
}

/* in with one more string, tag, in its dictionary's string table (which it must have): last, or
 * first after element 0 (every later string's index moves). The string table and the tables that
 * point into it then differ from in's, the others keep in's bytes. */
static void with_string(const pc_buf *in, const char *tag, bool first, pc_buf *out)
{
    size_t i = 0;
    uint64_t key, l;
    while (i < in->len) {
        size_t k0 = i;
        CHECK(pc_proto_read_varint(in->data, in->len, &i, &key) == 0);
        CHECK(pc_proto_skip_value(in->data, in->len, 2, &i, &l) == 0);
        if (key == (2 << 3 | 2)) {
            pc_buf d = {0};
            size_t j = i, cut = i + (size_t)l;
            uint64_t dk, dl;
            while (first && j < i + l && !pc_proto_read_varint(in->data, i + l, &j, &dk) &&
                   !pc_proto_skip_value(in->data, i + l, 2, &j, &dl)) {
                j += (size_t)dl;
                if (dk == (5 << 3 | 2)) {
                    cut = j;
                    break;
                }
            }
            pc_buf_append(&d, in->data + i, cut - i);
            w_bytes(&d, 5, tag, strlen(tag));
            pc_buf_append(&d, in->data + cut, i + (size_t)l - cut);
            w_msg(out, 2, &d);
            pc_buf_free(&d);
        } else {
            pc_buf_append(out, in->data + k0, i + (size_t)l - k0);
        }
        i += (size_t)l;
    }
}

/* Flushes where later requests repeat earlier ones, exactly (the same bytes: every table and
 * the resources taken from the earlier request), partly (one more string: the string table and
 * the tables that point into it differ, the rest repeat; the resources' bytes repeat, under
 * other remaps when the string comes first), in any order, 2 to 8 requests. */
static void test_repeats(void)
{
    for (int it = 0; it < 150; it++) {
        pc_buf p[9];
        memset(p, 0, sizeof p);
        size_t np = 0;
        for (size_t k = 0; k < 3; k++) {
            gen_request(&p[np]);
            if (p[np].len) np++;
        }
        for (size_t k = 0, base = np; k < base; k++) {
            size_t i = 0;
            uint64_t key, l;
            bool dict = false; /* a dictionary with a string table (else "zq" is element 0) */
            while (i < p[k].len && !pc_proto_read_varint(p[k].data, p[k].len, &i, &key) &&
                   !pc_proto_skip_value(p[k].data, p[k].len, 2, &i, &l)) {
                for (size_t j = i; key == (2 << 3 | 2) && j < i + l;) {
                    uint64_t dk, dl;
                    if (pc_proto_read_varint(p[k].data, i + l, &j, &dk) ||
                        pc_proto_skip_value(p[k].data, i + l, 2, &j, &dl))
                        break;
                    dict |= dk == (5 << 3 | 2);
                    j += (size_t)dl;
                }
                i += (size_t)l;
            }
            if (!dict) continue;
            with_string(&p[k], k ? "zq" : "zr", false, &p[np++]);
            with_string(&p[k], "zs", true, &p[np++]);
        }
        const uint8_t *d[8];
        size_t l[8], n = 2 + below(7);
        for (size_t i = 0; i < n; i++) {
            size_t k = below((unsigned)np);
            d[i] = p[k].data, l[i] = p[k].len;
        }
        check_merge(d, l, n, false, "repeats");
        for (size_t k = 0; k < 9; k++)
            pc_buf_free(&p[k]);
    }
}

/* A request of strings (element 0 first) and, with unknown set, a sample carrying field 15. */
static void small_request(pc_buf *out, const char *const *strs, size_t n, bool unknown)
{
    pc_buf d = {0}, e = {0};
    for (size_t i = 0; i < n; i++)
        w_bytes(&d, 5, strs[i], strlen(strs[i]));
    w_msg(out, 2, &d);
    w_int(&e, 4, 7);
    if (unknown) w_int(&e, 15, 1);
    w_msg(&d, 2, &e); /* Profile.samples */
    w_int(&e, 1, n - 1);
    w_int(&e, 2, n - 1);
    w_msg(&d, 1, &e); /* Profile.sample_type: the last string */
    w_msg(&e, 2, &d); /* ScopeProfiles.profiles */
    w_msg(&d, 2, &e); /* ResourceProfiles.scope_profiles */
    w_msg(out, 1, &d);
    pc_buf_free(&d);
    pc_buf_free(&e);
}

/* What the merger leaves to the model merge; and the same requests without it, merged. */
static void test_cannot(void)
{
    static const char *const first[] = {"", "main", "foo"}, *const later[] = {"", "foo"};
    pc_buf a = {0}, b = {0}, d = {0}, e = {0};
    small_request(&a, first, 3, false);
    const uint8_t *dv[2] = {a.data, NULL};
    size_t lv[2] = {a.len, 0};
    /* a field the merger does not know, in a sample it must rewrite (foo: 1 -> 2) */
    small_request(&b, later, 2, true);
    dv[1] = b.data, lv[1] = b.len;
    check_merge(dv, lv, 2, true, "unknown field in a sample");
    b.len = 0;
    small_request(&b, later, 2, false);
    dv[1] = b.data, lv[1] = b.len;
    check_merge(dv, lv, 2, false, "the same without it");
    /* ... unless nothing in it changes: then it is copied as it is, unknown field and all */
    b.len = 0;
    small_request(&b, first, 3, true);
    dv[0] = b.data, lv[0] = b.len;
    dv[1] = a.data, lv[1] = a.len;
    check_merge(dv, lv, 2, false, "an unknown field copied");
    /* a second dictionary occurrence */
    b.len = 0;
    pc_buf_append(&b, a.data, a.len);
    w_bytes(&e, 5, "", 0);
    w_bytes(&e, 5, "x", 1);
    w_msg(&b, 2, &e);
    dv[1] = b.data, lv[1] = b.len;
    check_merge(dv, lv, 2, true, "two dictionaries");
    /* a location table whose element 0 is the zero value written out (address 0) */
    b.len = 0;
    w_int(&e, 2, 0);
    w_msg(&d, 2, &e);
    w_msg(&b, 2, &d);
    dv[1] = b.data, lv[1] = b.len;
    check_merge(dv, lv, 2, true, "element 0 not empty");
    pc_buf_free(&a);
    pc_buf_free(&b);
    pc_buf_free(&d);
    pc_buf_free(&e);
}

/* A request whose tables hold, beside element 0, an entry of the zero value written out
 * (explicit zero fields, empty packed runs, an empty AnyValue, zero link ids; the strings: ""
 * again, which the real attribute's value points to), a real entry, and in the location table
 * one pointing at the zero entries, {mapping 1, address 32, line of function 1, attribute 1},
 * and one {address 48, line of function 2 then 1}. Two samples: stack 2 with attributes [1, 2]
 * and link 1; stack 1. */
static void zero_entries_request(pc_buf *out)
{
    pc_buf d = {0}, e = {0}, sub = {0}, p = {0};
    static const uint8_t zeros[16] = {0}, one[16] = {1};
    w_bytes(&d, 5, "", 0);
    w_bytes(&d, 5, "main", 4);
    w_bytes(&d, 5, "", 0); /* "" again: element 0 in the merge */
    w_msg(&d, 1, &e);      /* mappings */
    w_int(&e, 1, 0);
    w_bytes(&e, 5, "", 0);
    w_msg(&d, 1, &e);
    w_int(&e, 1, 0x1000);
    w_int(&e, 4, 1);
    w_msg(&d, 1, &e);
    w_msg(&d, 3, &e); /* functions */
    w_int(&e, 1, 0);
    w_int(&e, 4, 0);
    w_msg(&d, 3, &e);
    w_int(&e, 1, 1);
    w_int(&e, 4, 3);
    w_msg(&d, 3, &e);
    w_msg(&d, 6, &e); /* attributes */
    w_int(&e, 1, 0);
    w_msg(&e, 2, &sub);
    w_int(&e, 3, 0);
    w_msg(&d, 6, &e);
    w_int(&e, 1, 1);
    w_int(&sub, 8, 2); /* string_value_strindex: the second "", set (the oneof) to 0 */
    w_msg(&e, 2, &sub);
    w_msg(&d, 6, &e);
    w_msg(&d, 4, &e); /* links */
    w_bytes(&e, 1, zeros, 16);
    w_bytes(&e, 2, zeros, 8);
    w_msg(&d, 4, &e);
    w_bytes(&e, 1, one, 16);
    w_bytes(&e, 2, one, 8);
    w_msg(&d, 4, &e);
    w_msg(&d, 2, &e); /* locations */
    w_int(&e, 1, 0);
    w_int(&e, 2, 0);
    w_bytes(&e, 4, "", 0);
    w_msg(&d, 2, &e);
    w_int(&e, 1, 2);
    w_int(&e, 2, 16);
    w_int(&sub, 1, 2);
    w_msg(&e, 3, &sub);
    w_bytes(&e, 4, "\x02", 1);
    w_msg(&d, 2, &e);
    w_int(&e, 1, 1);
    w_int(&e, 2, 32);
    w_int(&sub, 1, 1);
    w_msg(&e, 3, &sub);
    w_bytes(&e, 4, "\x01", 1);
    w_msg(&d, 2, &e);
    w_int(&e, 2, 48); /* a line whose function_index is written twice, the zero entry last */
    w_int(&sub, 1, 2);
    w_int(&sub, 1, 1);
    w_msg(&e, 3, &sub);
    w_msg(&d, 2, &e);
    w_msg(&d, 7, &e); /* stacks */
    w_bytes(&e, 1, "", 0);
    w_msg(&d, 7, &e);
    w_bytes(&e, 1, "\x02\x03", 2);
    w_msg(&d, 7, &e);
    w_msg(out, 2, &d);
    w_int(&e, 1, 1); /* Profile.sample_type: main, main */
    w_int(&e, 2, 1);
    w_msg(&p, 1, &e);
    w_int(&e, 1, 2);
    w_bytes(&e, 2, "\x01\x02", 2);
    w_int(&e, 3, 1);
    w_int(&e, 4, 5);
    w_msg(&p, 2, &e);
    w_int(&e, 1, 1);
    w_int(&e, 4, 7);
    w_msg(&p, 2, &e);
    w_msg(&e, 2, &p); /* ScopeProfiles.profiles */
    w_msg(&d, 2, &e); /* ResourceProfiles.scope_profiles */
    w_msg(out, 1, &d);
    pc_buf_free(&d);
    pc_buf_free(&e);
    pc_buf_free(&sub);
    pc_buf_free(&p);
}

/* The merged request of test_zero_entries (the second request's data in resource_profiles[1]). */
static void check_zero_entries(const pc_request *r)
{
    const pc_dictionary *d = r->dictionary;
    /* element 0 and the real entry of each table; locations: also the one at the zero entries */
    CHECK(d->n_mapping_table == 2 && d->n_function_table == 2 && d->n_attribute_table == 2);
    CHECK(d->n_link_table == 2 && d->n_stack_table == 2 && d->n_location_table == 4);
    const pc_profile *p = r->resource_profiles[1]->scope_profiles[0]->profiles[0];
    CHECK(p->n_samples == 2);
    if (d->n_location_table == 4 && d->n_stack_table == 2 && p->n_samples == 2) {
        const pc_location *l = d->location_table[2];
        CHECK(l->address == 32 && l->mapping_index == 0 && l->n_lines == 1 &&
              l->lines[0]->function_index == 0 && l->n_attribute_indices == 1 &&
              l->attribute_indices[0] == 0);
        l = d->location_table[3]; /* the last function_index kept: it is what counts */
        CHECK(l->address == 48 && l->n_lines == 1 && l->lines[0]->function_index == 0);
        const pc_sample *s = p->samples[0];
        CHECK(s->stack_index == 1 && s->link_index == 0 && s->n_attribute_indices == 2 &&
              s->attribute_indices[0] == 0 && s->attribute_indices[1] == 1);
        CHECK(d->stack_table[1]->n_location_indices == 2 &&
              d->stack_table[1]->location_indices[0] == 1 &&
              d->stack_table[1]->location_indices[1] == 2);
        CHECK(p->samples[1]->stack_index == 0);
        const pc_anyvalue *v = d->attribute_table[1]->value;
        CHECK(v &&
              v->value_case ==
                  OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE_STRINDEX &&
              v->string_value_strindex == 0);
    }
}

/* An entry equal to the zero value becomes element 0, as the model interns it: no table keeps a
 * second zero value, and every index to one reads 0 (the oracle reads both forms alike, so this
 * looks at the merged request itself, through protobuf-c). */
static void test_zero_entries(void)
{
    pc_buf a = {0}, b = {0}, out = {0};
    zero_entries_request(&a);
    static const char *const strs[] = {"", "foo", "main"};
    small_request(&b, strs, 3, false);
    const uint8_t *dv[2] = {b.data, a.data};
    size_t lv[2] = {b.len, a.len};
    check_merge(dv, lv, 2, false, "zero entries");
    CHECK(pc_wire_merge(dv, lv, 2, &out) == 0);
    pc_request *r =
        (pc_request *)protobuf_c_message_unpack(PC_REQUEST_DESC, NULL, out.len, out.data);
    CHECK(r && r->dictionary && r->n_resource_profiles == 2);
    if (r && r->dictionary && r->n_resource_profiles == 2) check_zero_entries(r);
    if (r) protobuf_c_message_free_unpacked(&r->base, NULL);
    pc_buf_free(&a);
    pc_buf_free(&b);
    pc_buf_free(&out);
}

int main(int argc, char **argv)
{
    RUN(test_real_payloads);
    RUN(test_random);
    RUN(test_cannot);
    RUN(test_zero_entries);
    RUN(test_repeats);
    if (argc > 1) {
        const char *mk = argv[1];
        test_bench_payloads(mk);
        fprintf(stderr, "%s test_bench_payloads\n", check_failures ? "FAIL" : "ok  ");
    }
    return check_report();
}
