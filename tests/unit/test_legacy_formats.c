/* Pyroscope's legacy /ingest formats (formats/legacy.h, docs/formats.md): trie, tree
 * and speedscope bodies made here by small encoders written from the documented layouts (a radix
 * trie and a frame tree serialized in pre-order; speedscope JSON built with jansson), decoded, and
 * compared with what the test put in: stacks, values scaled by the documented rules, types,
 * attributes. Every malformed shape is refused with PC_EBADMSG and a message; over the budget with
 * PC_E2BIG. */
#include <jansson.h>
#include <math.h>

#include "check.h"
#include "payload.h"
#include "base/budget.h"
#include "pdata/pdata.h"
#include "formats/legacy.h"

/* ---- the encoders ---- */

static void put_uvarint(pc_buf *b, uint64_t v)
{
    pb_put_varint(b, v); /* the same base-128 encoding as Go's binary.PutUvarint */
}

static void put_node(pc_buf *b, const char *name, size_t len, uint64_t value, uint64_t children)
{
    put_uvarint(b, len);
    pc_buf_append(b, name, len);
    put_uvarint(b, value);
    put_uvarint(b, children);
}

typedef struct kv {
    const char *k;
    uint64_t v;
} kv;

static int kv_cmp(const void *a, const void *b)
{
    return strcmp(((const kv *)a)->k, ((const kv *)b)->k);
}

/* A radix (compressed prefix) trie of items (sorted, distinct keys, every key starting with the
 * first off bytes): this node is named name[0..nlen), the children split at the first byte after
 * the shared prefix. */
static void trie_build(pc_buf *b, const char *name, size_t nlen, const kv *items, size_t n,
                       size_t off)
{
    uint64_t value = 0;
    if (n && strlen(items[0].k) == off) value = items[0].v, items++, n--;
    size_t starts[256], ends[256], groups = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && items[j].k[off] == items[i].k[off])
            j++;
        starts[groups] = i, ends[groups++] = j;
        i = j;
    }
    put_node(b, name, nlen, value, groups);
    for (size_t g = 0; g < groups; g++) {
        const kv *first = &items[starts[g]], *last = &items[ends[g] - 1];
        size_t l = off + 1; /* sorted: the group's common prefix is that of its first and last */
        while (first->k[l] && first->k[l] == last->k[l])
            l++;
        trie_build(b, first->k + off, l - off, first, ends[g] - starts[g], l);
    }
}

static void trie_encode(pc_buf *b, kv *items, size_t n)
{
    qsort(items, n, sizeof *items, kv_cmp);
    trie_build(b, "", 0, items, n, 0);
}

/* A tree of frames: items' keys are stacks "a;b;c" (root first, no empty frames), sorted and
 * distinct; the node at depth d (frames) is named by frame d-1. */
static size_t frame_end(const char *k, size_t at)
{
    while (k[at] && k[at] != ';')
        at++;
    return at;
}

static void tree_build(pc_buf *b, const char *name, size_t nlen, const kv *items, size_t n,
                       size_t off)
{
    uint64_t value = 0;
    if (n && strlen(items[0].k) <= off) value = items[0].v, items++, n--;
    size_t starts[256], ends[256], groups = 0;
    size_t begin = off ? off + 1 : 0; /* after the ';' */
    for (size_t i = 0; i < n;) {
        size_t fe = frame_end(items[i].k, begin), j = i + 1;
        while (j < n && frame_end(items[j].k, begin) == fe &&
               !memcmp(items[j].k + begin, items[i].k + begin, fe - begin))
            j++;
        starts[groups] = i, ends[groups++] = j;
        i = j;
    }
    put_node(b, name, nlen, value, groups);
    for (size_t g = 0; g < groups; g++) {
        const kv *first = &items[starts[g]];
        size_t fe = frame_end(first->k, begin);
        tree_build(b, first->k + begin, fe - begin, first, ends[g] - starts[g], fe);
    }
}

static int frames_cmp(const void *a, const void *b)
{
    /* frame by frame, a stack before its extensions ("a" < "a;b" < "ab") */
    const char *x = ((const kv *)a)->k, *y = ((const kv *)b)->k;
    for (;;) {
        size_t lx = frame_end(x, 0), ly = frame_end(y, 0);
        int c = memcmp(x, y, lx < ly ? lx : ly);
        if (c || lx != ly) return c ? c : (lx > ly) - (lx < ly);
        if (!x[lx] || !y[ly]) return (x[lx] != 0) - (y[ly] != 0);
        x += lx + 1, y += ly + 1;
    }
}

static void tree_encode(pc_buf *b, kv *items, size_t n)
{
    qsort(items, n, sizeof *items, frames_cmp);
    tree_build(b, "", 0, items, n, 0);
}

/* ---- what came out: root-first stacks and summed values ---- */

typedef struct view {
    size_t n;
    char k[512][256];
    int64_t v[512];
} view;

static void view_add(view *w, const char *k, int64_t v)
{
    for (size_t i = 0; i < w->n; i++)
        if (!strcmp(w->k[i], k)) {
            w->v[i] += v;
            return;
        }
    snprintf(w->k[w->n], sizeof w->k[0], "%s", k);
    w->v[w->n++] = v;
}

static int64_t view_get(const view *w, const char *k)
{
    for (size_t i = 0; i < w->n; i++)
        if (!strcmp(w->k[i], k)) return w->v[i];
    return -1;
}

/* Profile p of batch b as root-first "a;b;c" -> summed value. */
static void view_of(const pc_batch *b, const pc_profile *p, view *w)
{
    const pc_dictionary *d = b->req->dictionary;
    memset(w, 0, sizeof *w);
    for (size_t s = 0; s < p->n_samples; s++) {
        const pc_stack *st = d->stack_table[p->samples[s]->stack_index];
        char key[256] = "";
        for (size_t i = st->n_location_indices; i-- > 0;) {
            const pc_location *l = d->location_table[st->location_indices[i]];
            const pc_function *f = d->function_table[l->lines[0]->function_index];
            if (key[0]) strncat(key, ";", sizeof key - strlen(key) - 1);
            strncat(key, pc_dict_str(d, f->name_strindex), sizeof key - strlen(key) - 1);
        }
        CHECK_EQ_INT(p->samples[s]->n_values, 1);
        view_add(w, key, p->samples[s]->values[0]);
    }
}

/* The same from the test's input: keys with empty frames dropped, values times scale. */
static void view_expected(const kv *items, size_t n, int64_t scale, view *w)
{
    memset(w, 0, sizeof *w);
    for (size_t i = 0; i < n; i++) {
        char key[256] = "";
        const char *k = items[i].k;
        for (size_t at = 0;;) {
            size_t fe = frame_end(k, at);
            if (fe > at) {
                if (key[0]) strncat(key, ";", sizeof key - strlen(key) - 1);
                strncat(key, k + at, fe - at);
            }
            if (!k[fe]) break;
            at = fe + 1;
        }
        if (items[i].v) view_add(w, key, (int64_t)items[i].v * scale);
    }
}

static void check_views(const view *got, const view *want)
{
    CHECK_EQ_INT(got->n, want->n);
    for (size_t i = 0; i < want->n; i++) {
        int64_t g = view_get(got, want->k[i]);
        if (g != want->v[i]) fprintf(stderr, "  stack %s: got %lld\n", want->k[i], (long long)g);
        CHECK_EQ_INT(g, want->v[i]);
    }
}

static const char *type_of(const pc_batch *b, const pc_profile *p)
{
    return pc_dict_str(b->req->dictionary, p->sample_type->type_strindex);
}

static const char *unit_of(const pc_batch *b, const pc_profile *p)
{
    return pc_dict_str(b->req->dictionary, p->sample_type->unit_strindex);
}

static const char *attr(const pc_batch *b, size_t rp, const char *key)
{
    return pc_resource_attr_str(b->req->dictionary, b->req->resource_profiles[rp]->resource, key);
}

static void valid(pc_batch *b)
{
    int64_t rejected = 0;
    pc_error e = {0};
    CHECK_EQ_INT(pc_batch_validate(b, &rejected, &e), 0);
    CHECK_EQ_INT(rejected, 0);
}

static const pc_format_attr attrs1[] = {{"env", "prod"}};

static pc_format_opts opts(const char *app, int64_t rate)
{
    return (pc_format_opts){.app = app,
                            .sample_rate = rate,
                            .time_ns = 1700000000000000000LL,
                            .duration_ns = 10000000000LL,
                            .attrs = attrs1,
                            .n_attrs = 1,
                            .scope_name = "profcol/pyroscope"};
}

/* Decode, expecting success, and return the batch (NULL after a failed check). */
static pc_batch *decode_ok(pc_format_decode_fn f, const pc_buf *body, const pc_format_opts *o)
{
    pc_batch *b = NULL;
    pc_error e = {0};
    int rc = f(body->data, body->len, o, &b, &e);
    if (rc < 0) fprintf(stderr, "  unexpected: %s\n", e.msg);
    CHECK_EQ_INT(rc, 0);
    if (b) valid(b);
    return b;
}

/* Decode, expecting code with a message containing what. */
static void decode_bad(pc_format_decode_fn f, const void *p, size_t n, const pc_format_opts *o,
                       int code, const char *what)
{
    pc_batch *b = (pc_batch *)1;
    pc_error e = {0};
    CHECK_EQ_INT(f(p, n, o, &b, &e), code);
    CHECK(b == NULL);
    CHECK_EQ_INT(e.code, code);
    CHECK_CONTAINS(e.msg, what);
}

/* ---- tests ---- */

static void test_format_of(void)
{
    CHECK_STR(pc_format_select("trie", NULL)->name, "trie");
    CHECK_STR(pc_format_select("tree", "text/plain")->name, "tree");
    CHECK_STR(pc_format_select("speedscope", NULL)->name, "speedscope");
    CHECK_STR(pc_format_select(NULL, "binary/octet-stream+trie")->name, "trie");
    CHECK_STR(pc_format_select("pprof", "binary/octet-stream+tree")->name, "tree");
    /* the Content-Type picks trie before format=tree picks tree (spec §1.4's order) */
    CHECK_STR(pc_format_select("tree", "binary/octet-stream+trie")->name, "trie");
    CHECK_STR(pc_format_select("speedscope", "binary/octet-stream+tree")->name, "tree");
    CHECK_STR(pc_format_select("folded", "binary/octet-stream+trie; x=1")->name, "folded");
    CHECK_STR(pc_format_select("", NULL)->name, "folded");
    CHECK(pc_format_find("speedscope")->decode == pc_speedscope_decode);
}

static void test_trie(void)
{
    /* frames split across nodes ("main;foo;ba" + "r"/"z"), an inner node with a value, an empty
     * frame, a zero value (no sample) */
    kv items[] = {{"main;foo;bar", 3}, {"main;foo;baz", 5}, {"main;gc", 2},
                  {"main;foo", 7},     {"main;;idle", 1},   {"other", 0}};
    size_t n = sizeof items / sizeof items[0];
    pc_buf body = {0};
    trie_encode(&body, items, n);
    pc_format_opts o = opts("myapp.cpu", 100);
    pc_batch *b = decode_ok(pc_trie_decode, &body, &o);
    if (b) {
        const pc_profile *p = first_profile(b);
        view got, want;
        view_of(b, p, &got);
        view_expected(items, n, 10000000, &want); /* 1e9 / 100 Hz */
        check_views(&got, &want);
        CHECK_STR(type_of(b, p), "cpu");
        CHECK_STR(unit_of(b, p), "nanoseconds");
        CHECK_EQ_INT(p->period, 10000000);
        CHECK_EQ_INT(p->time_unix_nano, 1700000000000000000LL);
        CHECK_EQ_INT(p->duration_nano, 10000000000LL);
        CHECK_STR(attr(b, 0, "service.name"), "myapp");
        CHECK_STR(attr(b, 0, "env"), "prod");
        pc_batch_unref(b);
    }
    /* two tries one after the other: both read (the transport reads nodes until the end) */
    pc_buf two = {0};
    kv more[] = {{"main;foo;bar", 4}, {"x;y", 9}};
    pc_buf_append(&two, body.data, body.len);
    trie_encode(&two, more, 2);
    pc_format_opts om = opts("app.alloc_objects", 100);
    b = decode_ok(pc_trie_decode, &two, &om);
    if (b) {
        view got, want;
        view_of(b, first_profile(b), &got);
        kv all[8];
        memcpy(all, items, sizeof items);
        all[n] = more[0], all[n + 1] = more[1];
        view_expected(all, n + 2, 1, &want); /* not a time type: counts as they are */
        check_views(&got, &want);
        CHECK_STR(type_of(b, first_profile(b)), "alloc_objects");
        CHECK_STR(unit_of(b, first_profile(b)), "count");
        pc_batch_unref(b);
    }
    /* an empty body is an empty trie */
    pc_buf empty = {0};
    b = decode_ok(pc_trie_decode, &empty, &o);
    if (b) {
        CHECK_EQ_INT(first_profile(b)->n_samples, 0);
        pc_batch_unref(b);
    }
    pc_buf_free(&body);
    pc_buf_free(&two);
}

static void test_tree(void)
{
    kv items[] = {{"main;work;spin", 30}, {"main;work", 4}, {"main;gc", 6},
                  {"main;a;b;c;d", 1},    {"ümlaut;ß", 2},  {"main;zero", 0}};
    size_t n = sizeof items / sizeof items[0];
    pc_buf body = {0};
    tree_encode(&body, items, n);
    pc_format_opts o = opts("svc.wall", 50);
    pc_batch *b = decode_ok(pc_tree_decode, &body, &o);
    if (b) {
        const pc_profile *p = first_profile(b);
        view got, want;
        view_of(b, p, &got);
        view_expected(items, n, 20000000, &want); /* 1e9 / 50 Hz */
        check_views(&got, &want);
        CHECK_STR(type_of(b, p), "wall");
        CHECK_EQ_INT(p->period, 20000000);
        CHECK_STR(attr(b, 0, "service.name"), "svc");
        pc_batch_unref(b);
    }
    /* a name holding ';' is several frames, as Pyroscope re-splits the joined key; the root's
     * name and value stand for nothing; sampleRate 0: plain sample counts */
    pc_buf t = {0};
    put_node(&t, "ignored", 7, 99, 1);
    put_node(&t, "a;b", 3, 5, 0);
    pc_format_opts o0 = opts("svc", 0);
    o0.service = "explicit";
    b = decode_ok(pc_tree_decode, &t, &o0);
    if (b) {
        view got;
        view_of(b, first_profile(b), &got);
        CHECK_EQ_INT(got.n, 1);
        CHECK_EQ_INT(view_get(&got, "a;b"), 5);
        CHECK_STR(type_of(b, first_profile(b)), "samples");
        CHECK_STR(unit_of(b, first_profile(b)), "count");
        CHECK_STR(attr(b, 0, "service.name"), "explicit");
        pc_batch_unref(b);
    }
    pc_buf_free(&t);
    pc_buf_free(&body);
}

/* Random stacks through both encoders and back. */
static uint64_t rng = 0x9E3779B97F4A7C15ULL;
static uint64_t rnd(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

static void test_random_round_trips(void)
{
    static const char *names[] = {
        "main", "a", "ab", "abc", "b", "run", "runtime.gcBgMarkWorker", "ß", "x.y", "do_work"};
    for (int round = 0; round < 40; round++) {
        kv items[200];
        char keys[200][128];
        size_t n = 0;
        for (size_t i = 0; i < 1 + rnd() % 150; i++) {
            size_t depth = 1 + rnd() % 6;
            keys[n][0] = 0;
            for (size_t d = 0; d < depth; d++) {
                if (d) strcat(keys[n], ";");
                strcat(keys[n], names[rnd() % 10]);
            }
            bool dup = false;
            for (size_t j = 0; j < n; j++)
                dup |= !strcmp(keys[j], keys[n]);
            if (dup) continue;
            items[n] = (kv){keys[n], 1 + rnd() % 1000};
            n++;
        }
        for (int tree = 0; tree < 2; tree++) {
            pc_buf body = {0};
            if (tree)
                tree_encode(&body, items, n);
            else
                trie_encode(&body, items, n);
            pc_format_opts o = opts("r.cpu", 97);
            pc_batch *b = decode_ok(tree ? pc_tree_decode : pc_trie_decode, &body, &o);
            if (b) {
                view got, want;
                view_of(b, first_profile(b), &got);
                view_expected(items, n, 1000000000 / 97, &want);
                check_views(&got, &want);
                pc_batch_unref(b);
            }
            pc_buf_free(&body);
        }
    }
}

static void test_trie_tree_malformed(void)
{
    pc_format_opts o = opts("app.cpu", 100);
    pc_buf ok = {0};
    kv items[] = {{"a;b", 1}, {"a;c", 2}};
    trie_encode(&ok, items, 2);
    /* every proper prefix of a trie is refused (the last node cut, a child missing) */
    for (size_t cut = 1; cut < ok.len; cut++) {
        pc_batch *b = NULL;
        pc_error e = {0};
        CHECK_EQ_INT(pc_trie_decode(ok.data, cut, &o, &b, &e), PC_EBADMSG);
        CHECK(b == NULL);
        CHECK_CONTAINS(e.msg, "trie: node at offset");
    }
    pc_buf_free(&ok);
    pc_buf t = {0};
    tree_encode(&t, items, 2);
    for (size_t cut = 0; cut < t.len; cut++) {
        pc_batch *b = NULL;
        pc_error e = {0};
        CHECK_EQ_INT(pc_tree_decode(t.data, cut, &o, &b, &e), PC_EBADMSG);
        CHECK_CONTAINS(e.msg, "tree: ");
    }
    /* bytes after the tree */
    pc_buf_append(&t, "\0\0\0", 3);
    decode_bad(pc_tree_decode, t.data, t.len, &o, PC_EBADMSG, "3 bytes after the end of the tree");
    pc_buf_free(&t);

    decode_bad(pc_tree_decode, "", 0, &o, PC_EBADMSG, "tree: empty body");
    /* a name length past the end */
    decode_bad(pc_trie_decode,
               "\x05"
               "ab",
               3, &o, PC_EBADMSG,
               "node at offset 0: name of 5 bytes runs past the end of the body (2 bytes left)");
    /* a varint of 11 bytes, and one whose 10th byte holds more than 64 bits */
    decode_bad(pc_trie_decode, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11, &o, PC_EBADMSG,
               "name length: varint overflows 64 bits");
    decode_bad(pc_trie_decode, "\x00\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02\x00", 12, &o,
               PC_EBADMSG, "value: varint overflows 64 bits");
    /* 2^64 - 1 name bytes claimed */
    decode_bad(pc_trie_decode, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 10, &o, PC_EBADMSG,
               "name of 18446744073709551615 bytes runs past the end");
    /* more children than the bytes left could hold */
    decode_bad(pc_trie_decode, "\x00\x00\x03\x00\x00\x00\x00\x00\x00\x00\x00", 11, &o, PC_EBADMSG,
               "3 children cannot fit in the 8 bytes left");
    decode_bad(pc_tree_decode, "\x00\x00\xff\xff\xff\xff\x0f", 7, &o, PC_EBADMSG,
               "children cannot fit");
    /* a value above int64, and one that overflows once scaled by the period */
    pc_buf v = {0};
    put_node(&v, "a", 1, (uint64_t)INT64_MAX + 1, 0);
    decode_bad(pc_trie_decode, v.data, v.len, &o, PC_EBADMSG,
               "value 9223372036854775808 overflows a 64-bit value");
    pc_buf_free(&v);
    put_node(&v, "a", 1, (uint64_t)INT64_MAX / 1000, 0);
    decode_bad(pc_trie_decode, v.data, v.len, &o, PC_EBADMSG,
               "x 10000000 ns (sampleRate) overflows a 64-bit value");
    pc_format_opts mem = opts("app.inuse_space", 100); /* not scaled: fits */
    pc_batch *b = decode_ok(pc_trie_decode, &v, &mem);
    if (b) pc_batch_unref(b);
    pc_buf_free(&v);
    /* invalid UTF-8 in a frame: refused (the model holds only UTF-8) */
    put_node(&v, "", 0, 0, 1);
    put_node(&v, "ok;\xc3", 5, 1, 0);
    decode_bad(pc_trie_decode, v.data, v.len, &o, PC_EBADMSG, "frame name is not valid UTF-8");
    pc_buf_free(&v);
    put_node(&v, "", 0, 0, 1);
    put_node(&v, "\xed\xa0\x80", 3, 1, 0); /* a surrogate */
    decode_bad(pc_tree_decode, v.data, v.len, &o, PC_EBADMSG, "frame name is not valid UTF-8");
    pc_buf_free(&v);
    put_node(&v, "a\0b", 3, 1, 0);
    decode_bad(pc_trie_decode, v.data, v.len, &o, PC_EBADMSG, "frame name holds a NUL byte");
    pc_buf_free(&v);
    /* an unknown type suffix, as for collapsed stacks */
    pc_format_opts bad = opts("my.app", 100);
    put_node(&v, "a", 1, 1, 0);
    decode_bad(pc_trie_decode, v.data, v.len, &bad, PC_EINVAL, "unknown profile type: app");
    decode_bad(pc_tree_decode, v.data, v.len, &bad, PC_EINVAL, "unknown profile type: app");
    pc_buf_free(&v);
}

/* Deep and wide shapes: no recursion, and what they would cost is counted before building. */
static void test_deep_and_budget(void)
{
    enum { DEPTH = 200000 };
    pc_buf chain = {0};
    put_node(&chain, "", 0, 0, 1);
    for (int i = 0; i < DEPTH; i++)
        put_node(&chain, "f", 1, i == DEPTH - 1 ? 7 : 0, i == DEPTH - 1 ? 0 : 1);
    pc_format_opts o = opts("app.alloc_space", 100);
    pc_batch *b = decode_ok(pc_tree_decode, &chain, &o);
    if (b) {
        const pc_profile *p = first_profile(b);
        CHECK_EQ_INT(p->n_samples, 1);
        CHECK_EQ_INT(
            b->req->dictionary->stack_table[p->samples[0]->stack_index]->n_location_indices, DEPTH);
        CHECK_EQ_INT(p->samples[0]->values[0], 7);
        pc_batch_unref(b);
    }
    pc_buf_free(&chain);
    /* every node of a deep chain with a value: stacks of 1..N frames, N^2/2 in all; refused by
     * the count before anything is built */
    put_node(&chain, "", 0, 0, 1);
    for (int i = 0; i < DEPTH; i++)
        put_node(&chain, "f", 1, 1, i == DEPTH - 1 ? 0 : 1);
    pc_budget budget;
    pc_budget_init(&budget, 64 << 20);
    o.budget = &budget;
    pc_batch *bb = (pc_batch *)1;
    pc_error e = {0};
    CHECK_EQ_INT(pc_tree_decode(chain.data, chain.len, &o, &bb, &e), PC_E2BIG);
    CHECK(bb == NULL);
    CHECK_EQ_INT(budget.state, PC_E2BIG);
    CHECK_CONTAINS(e.msg, "over the decode budget");
    CHECK_CONTAINS(budget.what, "decoded tree");
    CHECK(budget.peak < (64u << 20));
    pc_budget_release(&budget);
    pc_buf_free(&chain);
    /* the same trie fits a budget that holds it, and the batch stays charged until the end */
    kv items[] = {{"a;b", 1}, {"a;c", 2}};
    pc_buf small = {0};
    trie_encode(&small, items, 2);
    pc_budget_init(&budget, 1 << 20);
    b = decode_ok(pc_trie_decode, &small, &o);
    CHECK_EQ_INT(budget.state, PC_OK);
    CHECK(budget.used > 0);
    if (b) {
        pc_batch_end_budget(b);
        pc_batch_unref(b);
    }
    pc_budget_release(&budget);
    /* a budget of a few bytes */
    pc_budget_init(&budget, 100);
    e = (pc_error){0};
    CHECK_EQ_INT(pc_trie_decode(small.data, small.len, &o, &bb, &e), PC_E2BIG);
    pc_budget_release(&budget);
    pc_buf_free(&small);
}

/* ---- speedscope ---- */

static const char *SCHEMA = "https://www.speedscope.app/file-format-schema.json";

static json_t *frames_json(const char *const *names, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(
            a, json_pack("{s:s,s:s,s:i}", "name", names[i], "file", "x.c", "line", (int)i));
    return a;
}

static pc_buf dump(json_t *root)
{
    char *text = json_dumps(root, JSON_COMPACT);
    pc_buf b = {0};
    pc_buf_append(&b, text, strlen(text));
    free(text);
    json_decref(root);
    return b;
}

static const char *const F[] = {"main", "work", "spin", "gc", "", "ß"};

/* A sampled profile: stacks as frame indices (root first), weights. */
static json_t *sampled_json(const char *name, const char *unit, double start, const int *stacks,
                            const size_t *lens, const double *weights, size_t n)
{
    json_t *samples = json_array(), *w = json_array();
    for (size_t i = 0, at = 0; i < n; i++) {
        json_t *s = json_array();
        for (size_t k = 0; k < lens[i]; k++)
            json_array_append_new(s, json_integer(stacks[at++]));
        json_array_append_new(samples, s);
        json_array_append_new(w, json_real(weights[i]));
    }
    return json_pack("{s:s,s:s,s:s,s:f,s:f,s:o,s:o}", "type", "sampled", "name", name, "unit", unit,
                     "startValue", start, "endValue", start + 100, "samples", samples, "weights",
                     w);
}

/* Expected sampled view: frames joined root first (empty names dropped), value trunc(w) x mult
 * x period. */
static void sampled_expected(const int *stacks, const size_t *lens, const double *weights, size_t n,
                             int64_t mult, int64_t period, view *w)
{
    memset(w, 0, sizeof *w);
    for (size_t i = 0, at = 0; i < n; i++) {
        char key[256] = "";
        for (size_t k = 0; k < lens[i]; k++) {
            const char *f = F[stacks[at++]];
            if (!*f) continue;
            if (key[0]) strcat(key, ";");
            strcat(key, f);
        }
        int64_t v = (int64_t)trunc(weights[i]) * mult * (period ? period : 1);
        if (v) view_add(w, key, v);
    }
}

static void test_speedscope_sampled(void)
{
    static const int stacks[] = {0, 1, 2, 0, 1, 2, 0, 3, 0, 4, 1, 5};
    static const size_t lens[] = {3, 3, 2, 3, 1, 0};
    static const double weights[] = {12.75, 3, 4.5, 2, 0.5, 6};
    size_t n = 6;
    json_t *root = json_pack("{s:s,s:{s:o},s:[o],s:s,s:s,s:i}", "$schema", SCHEMA, "shared",
                             "frames", frames_json(F, 6), "profiles",
                             sampled_json("one", "milliseconds", 0, stacks, lens, weights, n),
                             "name", "file", "exporter", "test@1", "activeProfileIndex", 0);
    pc_buf body = dump(root);
    /* one profile: the name's type (cpu), ms at the default rate: x 100 at 100000 Hz = 1e6 ns */
    pc_format_opts o = opts("svc", 100);
    pc_batch *b = decode_ok(pc_speedscope_decode, &body, &o);
    if (b) {
        CHECK_EQ_INT(b->req->n_resource_profiles, 1);
        const pc_profile *p = first_profile(b);
        view got, want;
        view_of(b, p, &got);
        sampled_expected(stacks, lens, weights, n, 100, 10000, &want);
        check_views(&got, &want);
        CHECK_EQ_INT(view_get(&got, "main;work;spin"), 15000000); /* 12 ms + 3 ms */
        CHECK_STR(type_of(b, p), "cpu");
        CHECK_STR(unit_of(b, p), "nanoseconds");
        CHECK_EQ_INT(p->period, 10000);
        CHECK_STR(attr(b, 0, "service.name"), "svc");
        CHECK_STR(attr(b, 0, "profile_name"), "one");
        CHECK_STR(attr(b, 0, "env"), "prod");
        pc_batch_unref(b);
    }
    /* an explicit sampleRate other than 100 is kept: x 100 (the unit's precision) x 1e9/250 */
    pc_format_opts o250 = opts("svc.wall", 250);
    b = decode_ok(pc_speedscope_decode, &body, &o250);
    if (b) {
        view got, want;
        view_of(b, first_profile(b), &got);
        sampled_expected(stacks, lens, weights, n, 100, 4000000, &want);
        check_views(&got, &want);
        CHECK_STR(type_of(b, first_profile(b)), "wall");
        pc_batch_unref(b);
    }
    pc_buf_free(&body);

    /* every unit at the default rate: (precision, period) */
    static const struct {
        const char *unit;
        int64_t mult, period;
        const char *type, *u;
    } units[] = {
        {"seconds", 100, 10000000, "cpu", "nanoseconds"},
        {"milliseconds", 100, 10000, "cpu", "nanoseconds"},
        {"microseconds", 100, 10, "cpu", "nanoseconds"},
        {"nanoseconds", 1, 1, "cpu", "nanoseconds"},
        {"none", 100, 100000, "cpu", "nanoseconds"},
        {"bytes", 1, 0, "samples", "count"},
    };
    for (size_t u = 0; u < sizeof units / sizeof units[0]; u++) {
        root = json_pack("{s:s,s:{s:o},s:[o]}", "$schema", SCHEMA, "shared", "frames",
                         frames_json(F, 6), "profiles",
                         sampled_json("p", units[u].unit, 0, stacks, lens, weights, n));
        body = dump(root);
        b = decode_ok(pc_speedscope_decode, &body, &o);
        if (b) {
            const pc_profile *p = first_profile(b);
            view got, want;
            view_of(b, p, &got);
            sampled_expected(stacks, lens, weights, n, units[u].mult, units[u].period, &want);
            check_views(&got, &want);
            CHECK_STR(type_of(b, p), units[u].type);
            CHECK_STR(unit_of(b, p), units[u].u);
            CHECK_EQ_INT(p->period, units[u].period);
            pc_batch_unref(b);
        }
        pc_buf_free(&body);
    }
}

static void test_speedscope_several(void)
{
    /* two sampled profiles of one name/unit/start merge (weights pair across them), a third of
     * another unit: several profiles, so each is named app.<unit> */
    static const int s1[] = {0, 1, 0, 3}, s2[] = {0, 1};
    static const size_t l1[] = {2, 2}, l2[] = {2};
    static const double w1[] = {5, 1}, w2[] = {7};
    static const int s3[] = {5};
    static const size_t l3[] = {1};
    static const double w3[] = {4096};
    json_t *root =
        json_pack("{s:s,s:{s:o},s:[o,o,o]}", "$schema", SCHEMA, "shared", "frames",
                  frames_json(F, 6), "profiles", sampled_json("heap", "bytes", 10, s3, l3, w3, 1),
                  sampled_json("cpu", "seconds", 0, s1, l1, w1, 2),
                  sampled_json("cpu", "seconds", 0, s2, l2, w2, 1));
    pc_buf body = dump(root);
    pc_format_opts o = opts("app", 100);
    pc_batch *b = decode_ok(pc_speedscope_decode, &body, &o);
    if (b) {
        CHECK_EQ_INT(b->req->n_resource_profiles, 2);
        /* ordered by startValue: the seconds profile (0) first */
        const pc_profile *p = b->req->resource_profiles[0]->scope_profiles[0]->profiles[0];
        view got;
        view_of(b, p, &got);
        CHECK_EQ_INT(got.n, 2);
        CHECK_EQ_INT(view_get(&got, "main;work"), 12 * 1000000000LL); /* x 100 x 1e7 */
        CHECK_EQ_INT(view_get(&got, "main;gc"), 1 * 1000000000LL);
        CHECK_STR(type_of(b, p), "wall"); /* app.seconds */
        CHECK_STR(attr(b, 0, "service.name"), "app");
        CHECK_STR(attr(b, 0, "profile_name"), "cpu");
        p = b->req->resource_profiles[1]->scope_profiles[0]->profiles[0];
        view_of(b, p, &got);
        CHECK_EQ_INT(got.n, 1);
        CHECK_EQ_INT(view_get(&got, "ß"), 4096);
        CHECK_STR(type_of(b, p), "alloc_space"); /* app.bytes */
        CHECK_STR(unit_of(b, p), "bytes");
        CHECK_STR(attr(b, 1, "profile_name"), "heap");
        pc_batch_unref(b);
    }
    pc_buf_free(&body);
    /* several profiles, one in unit none: app.none has no type */
    root = json_pack("{s:s,s:{s:o},s:[o,o]}", "$schema", SCHEMA, "shared", "frames",
                     frames_json(F, 6), "profiles", sampled_json("a", "none", 0, s3, l3, w3, 1),
                     sampled_json("b", "bytes", 1, s3, l3, w3, 1));
    body = dump(root);
    decode_bad(pc_speedscope_decode, body.data, body.len, &o, PC_EBADMSG,
               "unknown profile type: none");
    pc_buf_free(&body);
}

static json_t *event(const char *type, double at, int frame)
{
    return json_pack("{s:s,s:f,s:i}", "type", type, "at", at, "frame", frame);
}

static void test_speedscope_evented(void)
{
    /* main [0, 10): work [1, 4) with spin [2, 3.5); gc [6, 9.25); close main at 10 */
    json_t *events = json_pack("[o,o,o,o,o,o,o,o]", event("O", 0, 0), event("O", 1, 1),
                               event("O", 2, 2), event("C", 3.5, 2), event("C", 4, 1),
                               event("O", 6, 3), event("C", 9.25, 3), event("C", 10, 0));
    json_t *prof = json_pack("{s:s,s:s,s:s,s:i,s:i,s:o}", "type", "evented", "name", "ev", "unit",
                             "milliseconds", "startValue", 0, "endValue", 10, "events", events);
    json_t *root = json_pack("{s:s,s:{s:o},s:[o]}", "$schema", SCHEMA, "shared", "frames",
                             frames_json(F, 6), "profiles", prof);
    pc_buf body = dump(root);
    pc_format_opts o = opts("ev.cpu", 100);
    pc_batch *b = decode_ok(pc_speedscope_decode, &body, &o);
    if (b) {
        view got;
        view_of(b, first_profile(b), &got);
        /* each interval's truncated length x 100 x 10000 ns: main self 1 + 2 + 0 (0.75
         * truncated), work self 1 + 0 (0.5), spin 1 (1.5), gc 3 (3.25) */
        CHECK_EQ_INT(got.n, 4);
        CHECK_EQ_INT(view_get(&got, "main"), 3 * 1000000LL);
        CHECK_EQ_INT(view_get(&got, "main;work"), 1 * 1000000LL);
        CHECK_EQ_INT(view_get(&got, "main;work;spin"), 1 * 1000000LL);
        CHECK_EQ_INT(view_get(&got, "main;gc"), 3 * 1000000LL);
        pc_batch_unref(b);
    }
    pc_buf_free(&body);
}

/* A speedscope file around one profile (JSON text), for the bad cases. */
static void ss_bad(const char *profile, const char *frames, int code, const char *what)
{
    char text[2048];
    snprintf(text, sizeof text, "{\"$schema\":\"%s\",\"shared\":{\"frames\":%s},\"profiles\":[%s]}",
             SCHEMA, frames ? frames : "[{\"name\":\"a\"},{\"name\":\"b\"}]", profile);
    pc_format_opts o = opts("app", 100);
    decode_bad(pc_speedscope_decode, text, strlen(text), &o, code, what);
}

static void test_speedscope_malformed(void)
{
    pc_format_opts o = opts("app", 100);
    decode_bad(pc_speedscope_decode, "{", 1, &o, PC_EBADMSG, "invalid JSON");
    decode_bad(pc_speedscope_decode, "[1]", 3, &o, PC_EBADMSG, "an array where an object belongs");
    decode_bad(pc_speedscope_decode, "{}", 2, &o, PC_EBADMSG, "unknown $schema \"\"");
    decode_bad(pc_speedscope_decode, "null", 4, &o, PC_EBADMSG, "unknown $schema");
    static const char other[] = "{\"$schema\":\"https://example.com/x.json\",\"profiles\":[]}";
    decode_bad(pc_speedscope_decode, other, sizeof other - 1, &o, PC_EBADMSG, "unknown $schema");
    /* a NUL in a string: the model's strings are C strings */
    static const char nul[] = "{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\","
                              "\"shared\":{\"frames\":[{\"name\":\"a\\u0000b\"}]}}";
    decode_bad(pc_speedscope_decode, nul, sizeof nul - 1, &o, PC_EBADMSG, "invalid JSON");
    /* trailing garbage after the document */
    static const char trail[] =
        "{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\"} x";
    decode_bad(pc_speedscope_decode, trail, sizeof trail - 1, &o, PC_EBADMSG, "invalid JSON");
    /* type mismatches, as Go's decoder refuses them */
    ss_bad("{\"type\":\"sampled\",\"unit\":\"none\",\"name\":5}", NULL, PC_EBADMSG,
           "$.profiles[0].name: a number where a string belongs");
    ss_bad("{\"type\":\"sampled\",\"unit\":\"none\",\"samples\":{}}", NULL, PC_EBADMSG,
           "samples: an object where an array belongs");
    ss_bad("{\"type\":\"sampled\",\"unit\":\"none\",\"samples\":[[\"0\"]],\"weights\":[1]}", NULL,
           PC_EBADMSG, "samples[0][0]: a string where a number belongs");
    ss_bad("{\"type\":\"sampled\",\"unit\":\"none\",\"samples\":[[0]],\"weights\":[true]}", NULL,
           PC_EBADMSG, "weights[0]: a boolean where a number belongs");
    ss_bad("{}", "[{\"name\":[1]}]", PC_EBADMSG, "frames[0].name: an array where a string belongs");
    ss_bad("{}", "[7]", PC_EBADMSG, "frames[0]: a number where an object belongs");
    ss_bad("{\"type\":\"evented\",\"unit\":\"none\",\"events\":[{\"at\":\"1\"}]}", NULL, PC_EBADMSG,
           "events[0].at: a string where a number belongs");
    /* the content */
    ss_bad("{\"type\":\"sampled\",\"unit\":\"furlongs\",\"samples\":[],\"weights\":[]}", NULL,
           PC_EBADMSG, "unknown unit \"furlongs\"");
    ss_bad("{\"type\":\"sampled\",\"samples\":[],\"weights\":[]}", NULL, PC_EBADMSG,
           "unknown unit \"\"");
    ss_bad("{\"type\":\"flame\",\"unit\":\"none\"}", NULL, PC_EBADMSG,
           "profile type \"flame\" is not supported");
    ss_bad("{\"type\":\"sampled\",\"unit\":\"none\",\"samples\":[[0],[1]],\"weights\":[1]}", NULL,
           PC_EBADMSG, "2 samples but 1 weights");
    ss_bad("{\"type\":\"sampled\",\"unit\":\"none\",\"samples\":[[0,2]],\"weights\":[1]}", NULL,
           PC_EBADMSG, "samples[0][1]: invalid frame 2 (2 frames)");
    ss_bad("{\"type\":\"sampled\",\"unit\":\"none\",\"samples\":[[-1]],\"weights\":[1]}", NULL,
           PC_EBADMSG, "invalid frame -1");
    ss_bad("{\"type\":\"sampled\",\"unit\":\"none\",\"samples\":[[0]],\"weights\":[-0.5]}", NULL,
           PC_EBADMSG, "negative weight");
    ss_bad("{\"type\":\"sampled\",\"unit\":\"none\",\"samples\":[[0]],\"weights\":[1e300]}", NULL,
           PC_EBADMSG, "does not fit 64 bits");
    ss_bad("{\"type\":\"sampled\",\"unit\":\"bytes\",\"samples\":[[0],[0]],"
           "\"weights\":[9e18,9e18]}",
           NULL, PC_EBADMSG, "overflows a 64-bit value once summed");
    ss_bad("{\"type\":\"sampled\",\"unit\":\"none\",\"samples\":[[0]],"
           "\"weights\":[99999999999999]}",
           NULL, PC_EBADMSG, "overflows a 64-bit value");
    static const char *ev_pre = "{\"type\":\"evented\",\"unit\":\"none\",\"events\":[";
    char p[512];
    snprintf(p, sizeof p, "%s%s]}", ev_pre,
             "{\"type\":\"O\",\"at\":5,\"frame\":0},{\"type\":\"C\",\"at\":4,\"frame\":0}");
    ss_bad(p, NULL, PC_EBADMSG, "events[1]: events out of order, 4 < 5");
    snprintf(p, sizeof p, "%s%s]}", ev_pre, "{\"type\":\"C\",\"at\":1,\"frame\":0}");
    ss_bad(p, NULL, PC_EBADMSG, "events[0]: no open frame to close");
    snprintf(p, sizeof p, "%s%s]}", ev_pre,
             "{\"type\":\"O\",\"at\":1,\"frame\":0},{\"type\":\"C\",\"at\":2,\"frame\":1}");
    ss_bad(p, NULL, PC_EBADMSG, "closes frame 1 but frame 0 is open");
    snprintf(p, sizeof p, "%s%s]}", ev_pre, "{\"type\":\"X\",\"at\":1,\"frame\":0}");
    ss_bad(p, NULL, PC_EBADMSG, "unknown event type \"X\"");
    snprintf(p, sizeof p, "%s%s]}", ev_pre, "{\"type\":\"O\",\"at\":1,\"frame\":2}");
    ss_bad(p, NULL, PC_EBADMSG, "invalid frame 2");
    snprintf(p, sizeof p, "%s%s]}", ev_pre, "null");
    ss_bad(p, NULL, PC_EBADMSG, "unknown event type \"\"");
    snprintf(
        p, sizeof p, "%s%s]}",
        "{\"type\":\"evented\",\"unit\":\"none\",\"startValue\":-1e308,"
        "\"events\":[",
        "{\"type\":\"O\",\"at\":-1e308,\"frame\":0},{\"type\":\"C\",\"at\":1e308,\"frame\":0}");
    ss_bad(p, NULL, PC_EBADMSG, "does not fit 64 bits");
    /* unclosed frames at the end are fine (their open time is not counted), as in Pyroscope */
    char text[1024];
    snprintf(text, sizeof text,
             "{\"$schema\":\"%s\",\"shared\":{\"frames\":[{\"name\":\"a\"}]},\"profiles\":[%s"
             "{\"type\":\"O\",\"at\":0,\"frame\":0},{\"type\":\"O\",\"at\":1,\"frame\":0}]}]}",
             SCHEMA, ev_pre);
    pc_buf body = {0};
    pc_buf_append(&body, text, strlen(text));
    pc_batch *b = decode_ok(pc_speedscope_decode, &body, &o);
    if (b) {
        view got;
        view_of(b, first_profile(b), &got);
        CHECK_EQ_INT(got.n, 1);
        CHECK_EQ_INT(view_get(&got, "a"), 100 * 100000LL); /* 1 x 100 at 10000 Hz */
        pc_batch_unref(b);
    }
    pc_buf_free(&body);
    /* member names match case-insensitively, nulls are zero values, unknown members ignored */
    snprintf(text, sizeof text,
             "{\"$SCHEMA\":\"%s\",\"Shared\":{\"FRAMES\":[{\"NAME\":\"a\",\"line\":null}]},"
             "\"extra\":[1,2],\"Profiles\":[null,{\"Type\":\"sampled\",\"UNIT\":\"bytes\","
             "\"samples\":[[0],null],\"Weights\":[3,4.9],\"startValue\":null}]}",
             SCHEMA);
    body = (pc_buf){0};
    pc_buf_append(&body, text, strlen(text));
    /* the null profile is a profile of no type: refused as Pyroscope refuses it */
    decode_bad(pc_speedscope_decode, body.data, body.len, &o, PC_EBADMSG, "unknown unit");
    pc_buf_free(&body);
    snprintf(text, sizeof text,
             "{\"$SCHEMA\":\"%s\",\"Shared\":{\"FRAMES\":[{\"NAME\":\"a\",\"line\":null}]},"
             "\"extra\":[1,2],\"Profiles\":[{\"Type\":\"sampled\",\"UNIT\":\"bytes\","
             "\"samples\":[[0],null],\"Weights\":[3,4.9],\"startValue\":null}]}",
             SCHEMA);
    pc_buf_append(&body, text, strlen(text));
    b = decode_ok(pc_speedscope_decode, &body, &o);
    if (b) {
        view got;
        view_of(b, first_profile(b), &got);
        CHECK_EQ_INT(got.n, 2);
        CHECK_EQ_INT(view_get(&got, "a"), 3);
        CHECK_EQ_INT(view_get(&got, ""), 4); /* the empty stack */
        pc_batch_unref(b);
    }
    pc_buf_free(&body);
    /* no profiles: an empty batch */
    snprintf(text, sizeof text, "{\"$schema\":\"%s\"}", SCHEMA);
    pc_buf_append(&body, text, strlen(text));
    b = decode_ok(pc_speedscope_decode, &body, &o);
    if (b) {
        CHECK_EQ_INT(b->req->n_resource_profiles, 0);
        pc_batch_unref(b);
    }
    pc_buf_free(&body);
}

static void test_speedscope_budget(void)
{
    /* deeply nested opens, each a millisecond after the last: stacks of 1..N frames */
    enum { N = 3000 };
    pc_buf body = {0};
    pc_buf_printf(&body,
                  "{\"$schema\":\"%s\",\"shared\":{\"frames\":[{\"name\":\"f\"}]},\"profiles\":"
                  "[{\"type\":\"evented\",\"unit\":\"milliseconds\",\"events\":[",
                  SCHEMA);
    for (int i = 0; i < N; i++)
        pc_buf_printf(&body, "%s{\"type\":\"O\",\"at\":%d,\"frame\":0}", i ? "," : "", i);
    pc_buf_printf(&body, "]}]}");
    pc_budget budget;
    pc_budget_init(&budget, 8 << 20);
    pc_format_opts o = opts("app", 100);
    o.budget = &budget;
    pc_batch *b = (pc_batch *)1;
    pc_error e = {0};
    CHECK_EQ_INT(pc_speedscope_decode(body.data, body.len, &o, &b, &e), PC_E2BIG);
    CHECK(b == NULL);
    CHECK_CONTAINS(budget.what, "decoded speedscope");
    CHECK(budget.peak < (8u << 20));
    pc_budget_release(&budget);
    /* the JSON alone over a tiny budget */
    pc_budget_init(&budget, 4096);
    e = (pc_error){0};
    CHECK_EQ_INT(pc_speedscope_decode(body.data, body.len, &o, &b, &e), PC_E2BIG);
    CHECK_CONTAINS(budget.what, "speedscope JSON");
    pc_budget_release(&budget);
    /* without a budget it decodes: N-1 samples, the deepest N-1 frames */
    o.budget = NULL;
    b = decode_ok(pc_speedscope_decode, &body, &o);
    if (b) {
        CHECK_EQ_INT(first_profile(b)->n_samples, N - 1);
        pc_batch_unref(b);
    }
    pc_buf_free(&body);
}

/* With a budget: what each decode counts covers what it takes (no charge passes the reservation),
 * and every byte is given back once the batch leaves the budget. */
static void check_budgeted_with(pc_format_decode_fn f, const pc_buf *body, const char *what,
                                size_t n_attrs)
{
    static pc_format_attr as[64];
    static char kbuf[64][16];
    for (size_t i = 0; i < 64; i++) {
        snprintf(kbuf[i], sizeof kbuf[i], "label%zu", i);
        as[i] = (pc_format_attr){kbuf[i], "a value of some length"};
    }
    pc_budget budget;
    pc_budget_init(&budget, 0);
    pc_format_opts o = opts("app.cpu", 100);
    if (n_attrs) o.attrs = as, o.n_attrs = n_attrs;
    o.budget = &budget;
    pc_batch *b = decode_ok(f, body, &o);
    fprintf(stderr, "  %-28s %7zu bytes: reserved %8zu  peak %8zu\n", what, body->len,
            budget.reserved, budget.peak);
    CHECK_EQ_INT(budget.misses, 0);
    CHECK(budget.peak > 0 && budget.peak <= budget.reserved);
    pc_batch_end_budget(b);
    CHECK_EQ_INT(budget.used, 0);
    pc_budget_release(&budget);
    if (b) pc_batch_unref(b);
}

static void check_budgeted(pc_format_decode_fn f, const pc_buf *body, const char *what)
{
    check_budgeted_with(f, body, what, 0);
}

static void test_estimates_cover(void)
{
    static const char *names[] = {"main", "net/http.(*conn).serve", "runtime.mallocgc", "ß", "a"};
    kv items[400];
    char keys[400][160];
    for (size_t i = 0; i < 400; i++) {
        snprintf(keys[i], sizeof keys[i], "%s;%s;%zu;%s", names[i % 5], names[(i / 5) % 5], i,
                 names[(i / 25) % 5]);
        items[i] = (kv){keys[i], 1 + i};
    }
    pc_buf t = {0};
    trie_encode(&t, items, 400);
    check_budgeted(pc_trie_decode, &t, "trie, 400 stacks");
    pc_buf_free(&t);
    tree_encode(&t, items, 400);
    check_budgeted(pc_tree_decode, &t, "tree, 400 stacks");
    pc_buf_free(&t);
    put_node(&t, "", 0, 0, 0);
    check_budgeted(pc_tree_decode, &t, "tree, root alone");
    pc_buf_free(&t);
    /* speedscope: a sampled and an evented profile */
    pc_buf_printf(&t,
                  "{\"$schema\":\"%s\",\"shared\":{\"frames\":[{\"name\":\"a\"},{\"name\":"
                  "\"b\"},{\"name\":\"c\"}]},\"profiles\":[{\"type\":\"sampled\",\"unit\":"
                  "\"milliseconds\",\"name\":\"s\",\"samples\":[",
                  SCHEMA);
    for (int i = 0; i < 500; i++)
        pc_buf_printf(&t, "%s[0,%d,%d]", i ? "," : "", i % 3, (i / 3) % 3);
    pc_buf_printf(&t, "],\"weights\":[");
    for (int i = 0; i < 500; i++)
        pc_buf_printf(&t, "%s%d.5", i ? "," : "", i);
    pc_buf_printf(&t, "]},{\"type\":\"evented\",\"unit\":\"seconds\",\"name\":\"e\","
                      "\"events\":[");
    for (int i = 0; i < 300; i++)
        pc_buf_printf(&t,
                      "%s{\"type\":\"O\",\"frame\":%d,\"at\":%d},{\"type\":\"C\","
                      "\"frame\":%d,\"at\":%d}",
                      i ? "," : "", i % 3, 2 * i, i % 3, 2 * i + 1);
    pc_buf_printf(&t, "]}]}");
    check_budgeted(pc_speedscope_decode, &t, "speedscope, two profiles");
    pc_buf_free(&t);
    /* many profiles (one resource each) with 64 name labels */
    pc_buf_printf(&t,
                  "{\"$schema\":\"%s\",\"shared\":{\"frames\":[{\"name\":\"a\"}]},"
                  "\"profiles\":[",
                  SCHEMA);
    for (int i = 0; i < 300; i++)
        pc_buf_printf(&t,
                      "%s{\"type\":\"sampled\",\"unit\":\"bytes\",\"name\":\"p%d\","
                      "\"samples\":[[0]],\"weights\":[%d]}",
                      i ? "," : "", i, i + 1);
    pc_buf_printf(&t, "]}");
    check_budgeted_with(pc_speedscope_decode, &t, "speedscope, 300 profiles", 64);
    pc_buf_free(&t);
}

int main(void)
{
    RUN(test_format_of);
    RUN(test_trie);
    RUN(test_tree);
    RUN(test_random_round_trips);
    RUN(test_trie_tree_malformed);
    RUN(test_deep_and_budget);
    RUN(test_speedscope_sampled);
    RUN(test_speedscope_several);
    RUN(test_speedscope_evented);
    RUN(test_speedscope_malformed);
    RUN(test_speedscope_budget);
    RUN(test_estimates_cover);
    return check_report();
}
