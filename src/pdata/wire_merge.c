/* The wire merge (wire_merge.h). Per request: its dictionary's tables as byte spans, interned
 * into the merged tables in dependency order (a table's entries are rewritten through the remaps
 * of the tables they point into before they are compared), giving one remap per table; then its
 * resource_profiles, copied as they are when every remap is the identity, else rewritten. A
 * rewritten message is sized first (every nested message's new length kept in pre-order slots),
 * then written: lengths change when an index's varint does. A client may send the same tables
 * again: a table, or a request's resource_profiles, whose bytes and remaps equal an
 * earlier request's of the flush is taken from it whole (merge_table, put_resources; bench/
 * README.md "Repeated runs taken whole"). The schema below is
 * proto/otlp_profiles.proto's, otlp_common.proto's and otlp_resource.proto's, every index field
 * wire_check.c's pass 2 checks. */
#include "pdata/wire_merge.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/arena.h"
#include "base/err.h"
#include "base/hash.h"
#include "pdata/proto_scan.h"

/* ProfilesDictionary's tables by field number (proto/otlp_profiles.proto) */
enum { T_MAPPING = 1, T_LOCATION, T_FUNCTION, T_LINK, T_STRING, T_ATTR, T_STACK, T_N };

/* what a field is to the merger: copied as it is, an index (singular, or repeated: plain or
 * packed) into table arg, or a message of type arg */
enum { K_NONE, K_COPY, K_IDX, K_IDXR, K_MSG };
enum {
    M_RP, /* ResourceProfiles */
    M_RES,
    M_KV,
    M_AV,
    M_ARR,
    M_KVL,
    M_SP,
    M_SCOPE,
    M_PROF,
    M_VT,
    M_SAMPLE,
    M_MAP,
    M_LOC,
    M_LINE,
    M_FUNC,
    M_KVU,
    M_STACK,
    M_N
};

typedef struct wf {
    uint8_t kind, arg;
} wf;

#define NF 12 /* field numbers 1..11 */
/* clang-format off */
#define C     {K_COPY, 0}
#define IX(t) {K_IDX, t}
#define IR(t) {K_IDXR, t}
#define MS(m) {K_MSG, m}
static const wf schema[M_N][NF] = {
    [M_RP] = {[1] = MS(M_RES), [2] = MS(M_SP), [3] = C},
    /* Resource: attributes, dropped count, entity refs (strings only) */
    [M_RES] = {[1] = MS(M_KV), [2] = C, [3] = C},
    [M_KV] = {[1] = C, [2] = MS(M_AV), [3] = IX(T_STRING)},
    [M_AV] = {[1] = C, [2] = C, [3] = C, [4] = C, [5] = MS(M_ARR), [6] = MS(M_KVL), [7] = C, [8] = IX(T_STRING)},
    [M_ARR] = {[1] = MS(M_AV)},
    [M_KVL] = {[1] = MS(M_KV)},
    [M_SP] = {[1] = MS(M_SCOPE), [2] = MS(M_PROF), [3] = C},
    [M_SCOPE] = {[1] = C, [2] = C, [3] = MS(M_KV), [4] = C},
    [M_PROF] = {[1] = MS(M_VT), [2] = MS(M_SAMPLE), [3] = C, [4] = C, [5] = MS(M_VT), [6] = C, [7] = C, [8] = C, [9] = C, [10] = C, [11] = IR(T_ATTR)},
    [M_VT] = {[1] = IX(T_STRING), [2] = IX(T_STRING)},
    [M_SAMPLE] = {[1] = IX(T_STACK), [2] = IR(T_ATTR), [3] = IX(T_LINK), [4] = C, [5] = C},
    [M_MAP] = {[1] = C, [2] = C, [3] = C, [4] = IX(T_STRING), [5] = IR(T_ATTR)},
    [M_LOC] = {[1] = IX(T_MAPPING), [2] = C, [3] = MS(M_LINE), [4] = IR(T_ATTR)},
    [M_LINE] = {[1] = IX(T_FUNCTION), [2] = C, [3] = C},
    [M_FUNC] = {[1] = IX(T_STRING), [2] = IX(T_STRING), [3] = IX(T_STRING), [4] = C},
    [M_KVU] = {[1] = IX(T_STRING), [2] = MS(M_AV), [3] = IX(T_STRING)},
    [M_STACK] = {[1] = IR(T_LOCATION)},
};
/* clang-format on */
#undef C
#undef IX
#undef IR
#undef MS

/* each table's entry type (strings and links carry no index: interned as they are) */
static const int table_msg[T_N] = {
    [T_MAPPING] = M_MAP, [T_LOCATION] = M_LOC, [T_FUNCTION] = M_FUNC, [T_LINK] = -1,
    [T_STRING] = -1,     [T_ATTR] = M_KVU,     [T_STACK] = M_STACK};
/* dependency order: a table after every table its entries point into */
static const int table_order[T_N - 1] = {T_STRING, T_ATTR,     T_MAPPING, T_FUNCTION,
                                         T_LINK,   T_LOCATION, T_STACK};
/* the tables each table's entries point into */
static const unsigned table_deps[T_N] = {
    [T_MAPPING] = 1u << T_STRING | 1u << T_ATTR,
    [T_LOCATION] = 1u << T_MAPPING | 1u << T_FUNCTION | 1u << T_ATTR,
    [T_FUNCTION] = 1u << T_STRING,
    [T_ATTR] = 1u << T_STRING,
    [T_STACK] = 1u << T_LOCATION,
};

typedef struct span {
    const uint8_t *p;
    size_t n;
} span;

/* One input request. */
typedef struct req {
    span *rps; /* each resource_profiles field, tag to end */
    size_t n_rps;
    span dict; /* the dictionary's value (n = 0: none) */
    span *tab[T_N];
    size_t n_tab[T_N];
    uint32_t *map[T_N]; /* old index -> merged index */
    unsigned changed;   /* tables whose remap is not the identity */
    /* the request whose merge computed each table's remap (ORG_NONE: the table is empty): two
     * requests with the same origin for a table have the same remap */
    uint32_t org[T_N];
    span trun[T_N];  /* each table's entries as one byte run, tags and all */
    bool tcont[T_N]; /* that run holds only this table's entries */
    span rrun;       /* the resource_profiles as one byte run */
    bool rcont;
} req;

#define ORG_NONE UINT32_MAX

/* A run already merged in this flush: a table's bytes (key[0] its number) or a request's
 * resource_profiles (key[0] 0), under the remaps of key[1..] (by origin), and what it gave: the
 * remap of request `from`, or the rewritten bytes at out + off. */
typedef struct run {
    uint64_t h;
    span s;
    uint32_t key[T_N];
    uint32_t from;
    size_t off, len;
    bool pending; /* in runs_seen, not yet hashed into runs_full */
} run;

typedef struct runs {
    run *e;
    size_t n, cap, mask;
    uint32_t *slot; /* entry index + 1; 0: empty */
} runs;

/* One merged table: its entries and a hash set over them. */
typedef struct table {
    span *e;
    uint64_t *h;
    size_t n, cap;
    uint32_t *slot; /* entry index + 1; 0: empty */
    size_t mask;
    bool present; /* some request had this table */
} table;

/* The rewriter: the remaps of the request being rewritten, and the pre-order size slots. */
typedef struct rw {
    uint32_t *const *map;
    const size_t *n_map;
    size_t *slots;
    size_t n_slots, cap_slots, cursor;
    bool bad;
} rw;

static size_t varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* v at o (NULL: only its length) */
static size_t put_varint(uint8_t *o, uint64_t v)
{
    if (!o) return varint_len(v);
    size_t n = 0;
    while (v >= 0x80) {
        o[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    o[n++] = (uint8_t)v;
    return n;
}

static size_t put(uint8_t *o, const uint8_t *p, size_t n)
{
    if (o) memcpy(o, p, n);
    return n;
}

/* an index through table t's remap; 0 stays 0 (element 0 is every table's zero value) */
static uint64_t remap(rw *w, unsigned t, uint64_t v)
{
    uint32_t k = (uint32_t)v; /* int32 on the wire: protobuf-c keeps the low 32 bits */
    if (k == 0) return 0;
    if (k >= w->n_map[t]) {
        w->bad = true;
        return 0;
    }
    return w->map[t][k];
}

/* A new pre-order slot for a length the write pass will need. */
static size_t slot_new(rw *w)
{
    if (w->n_slots == w->cap_slots) {
        w->cap_slots = w->cap_slots ? 2 * w->cap_slots : 64;
        w->slots = pc_xrealloc(w->slots, w->cap_slots * sizeof *w->slots);
    }
    return w->n_slots++;
}

/* A packed run of indices into table t, remapped, with its key and new length: sized (the
 * length kept in a slot, the stacks' runs being most of a dictionary) or written in one pass. */
static size_t put_packed(rw *w, uint64_t key, unsigned t, const uint8_t *p, size_t n, uint8_t *o)
{
    size_t len = 0, i = 0;
    uint64_t v;
    if (!o) {
        size_t s = slot_new(w);
        while (i < n) {
            if (pc_proto_read_varint(p, n, &i, &v)) return w->bad = true, 0;
            len += varint_len(remap(w, t, v));
        }
        w->slots[s] = len;
        return varint_len(key) + varint_len(len) + len;
    }
    len = w->slots[w->cursor++];
    size_t pos = put_varint(o, key);
    pos += put_varint(o + pos, len);
    while (i < n) {
        pc_proto_read_varint(p, n, &i, &v);
        pos += put_varint(o + pos, remap(w, t, v));
    }
    return pos;
}

static size_t rewrite(rw *w, unsigned m, const uint8_t *p, size_t n, uint8_t *o);

/* A nested message: sized (its slot reserved before its own nested ones: pre-order) or written
 * with the size its slot kept. */
static size_t put_msg(rw *w, uint64_t key, unsigned m, const uint8_t *p, size_t n, uint8_t *o)
{
    size_t len;
    if (!o) {
        size_t s = slot_new(w);
        len = rewrite(w, m, p, n, NULL);
        w->slots[s] = len;
        return varint_len(key) + varint_len(len) + len;
    }
    len = w->slots[w->cursor++];
    size_t pos = put_varint(o, key);
    pos += put_varint(o + pos, len);
    return pos + rewrite(w, m, p, n, o + pos);
}

/* The index fields of message type m at p (n bytes) that occur more than once. */
static unsigned multi_indices(unsigned m, const uint8_t *p, size_t n)
{
    unsigned seen = 0, multi = 0;
    uint64_t key, l;
    for (size_t i = 0; i < n; i += (key & 7) == 2 ? (size_t)l : 0) {
        if (pc_proto_read_varint(p, n, &i, &key) || pc_proto_skip_value(p, n, key & 7, &i, &l))
            break;
        unsigned num = (unsigned)(key >> 3);
        if (num >= NF || schema[m][num].kind != K_IDX) continue;
        multi |= seen & 1u << num;
        seen |= 1u << num;
    }
    return multi;
}

/* Message type m at p (n bytes) with every index remapped: its new length (o NULL), or written
 * at o. A singular index that a remap takes to 0 (an entry of the zero value, zero_entry) is left
 * out, as encoders write a default, so that the entry compares equal to one that never had it;
 * unless the field occurs again in the message (the last one wins) or is AnyValue's oneof
 * member (set to 0 is not unset). */
static size_t rewrite(rw *w, unsigned m, const uint8_t *p, size_t n, uint8_t *o)
{
    size_t i = 0, pos = 0;
    unsigned multi = 0;
    bool multi_known = false; /* multi found once a remap takes an index to 0 */
    while (i < n && !w->bad) {
        size_t k0 = i;
        uint64_t key, l = 0;
        if (pc_proto_read_varint(p, n, &i, &key)) break;
        unsigned wt = (unsigned)(key & 7);
        if (pc_proto_skip_value(p, n, wt, &i, &l)) break;
        const uint8_t *v = p + i;
        if (wt == 2) i += (size_t)l;
        wf f = key >> 3 < NF ? schema[m][key >> 3] : (wf){K_NONE, 0};
        uint8_t *at = o ? o + pos : NULL;
        if (f.kind == K_COPY) {
            pos += put(at, p + k0, i - k0);
        } else if (f.kind == K_MSG && wt == 2) {
            pos += put_msg(w, key, f.arg, v, (size_t)l, at);
        } else if ((f.kind == K_IDX || f.kind == K_IDXR) && wt == 0) {
            uint64_t to = remap(w, f.arg, l);
            if (!to && l && f.kind == K_IDX && m != M_AV) {
                if (!multi_known) multi = multi_indices(m, p, n), multi_known = true;
                if (!(multi & 1u << (key >> 3))) continue;
            }
            size_t kl = put_varint(at, key);
            pos += kl + put_varint(at ? at + kl : NULL, to);
        } else if (f.kind == K_IDXR && wt == 2) {
            pos += put_packed(w, key, f.arg, v, (size_t)l, at);
        } else {
            w->bad = true; /* a field this merger does not know, or of another wire type */
        }
    }
    if (i != n) w->bad = true;
    return pos;
}

/* ---- reading a request ---- */

/* The request's resource_profiles and its one dictionary's table spans. */
static int read_req(req *r, const uint8_t *p, size_t n, pc_arena *a)
{
    size_t i = 0, n_rp = 0, n_dict = 0;
    uint64_t key, l;
    for (int pass = 0; pass < 2; pass++) {
        for (i = 0, n_rp = 0; i < n;) {
            size_t k0 = i;
            if (pc_proto_read_varint(p, n, &i, &key) || (key & 7) != 2 ||
                pc_proto_skip_value(p, n, 2, &i, &l))
                return PC_ENOTSUP;
            i += (size_t)l;
            if (key >> 3 == 1) {
                if (pass) r->rps[n_rp] = (span){p + k0, i - k0};
                n_rp++;
            } else if (key >> 3 == 2) {
                if (!pass && n_dict++) return PC_ENOTSUP; /* merged by protobuf: not here */
                r->dict = (span){p + i - l, (size_t)l};
            } else {
                return PC_ENOTSUP;
            }
        }
        if (!pass) r->rps = pc_arena_alloc(a, (n_rp ? n_rp : 1) * sizeof *r->rps);
    }
    r->n_rps = n_rp;
    r->rcont = n_rp > 0;
    for (size_t k = 1; k < n_rp; k++)
        r->rcont &= r->rps[k].p == r->rps[k - 1].p + r->rps[k - 1].n;
    if (r->rcont)
        r->rrun =
            (span){r->rps[0].p, (size_t)(r->rps[n_rp - 1].p + r->rps[n_rp - 1].n - r->rps[0].p)};
    return 0;
}

/* The dictionary's tables as spans: counted, then filled; with each table's byte run. */
static int read_dict(req *r, pc_arena *a)
{
    const uint8_t *p = r->dict.p;
    size_t n = r->dict.n, fill[T_N] = {0};
    uint64_t key, l;
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < n;) {
            size_t k0 = i;
            if (pc_proto_read_varint(p, n, &i, &key) || (key & 7) != 2 || key >> 3 == 0 ||
                key >> 3 >= T_N || pc_proto_skip_value(p, n, 2, &i, &l))
                return PC_ENOTSUP;
            unsigned t = (unsigned)(key >> 3);
            if (pass) {
                span *run = &r->trun[t];
                if (!fill[t]) *run = (span){p + k0, 0};
                r->tcont[t] &= run->p + run->n == p + k0;
                run->n = (size_t)(p + i + l - run->p);
                r->tab[t][fill[t]++] = (span){p + i, (size_t)l};
            } else {
                r->n_tab[t]++;
            }
            i += (size_t)l;
        }
        for (unsigned t = 1; !pass && t < T_N; t++) {
            r->tab[t] = pc_arena_alloc(a, (r->n_tab[t] ? r->n_tab[t] : 1) * sizeof(span));
            r->tcont[t] = true;
            r->org[t] = ORG_NONE;
        }
    }
    return 0;
}

/* ---- the merged tables ---- */

static void table_grow(table *t)
{
    size_t cap = t->cap ? 2 * t->cap : 256;
    t->e = pc_xrealloc(t->e, cap * sizeof *t->e);
    t->h = pc_xrealloc(t->h, cap * sizeof *t->h);
    t->cap = cap;
    /* the set at most half full */
    free(t->slot);
    t->mask = 2 * cap - 1;
    t->slot = pc_xcalloc(2 * cap, sizeof *t->slot);
    for (size_t k = 0; k < t->n; k++) {
        size_t s = t->h[k] & t->mask;
        while (t->slot[s])
            s = (s + 1) & t->mask;
        t->slot[s] = (uint32_t)(k + 1);
    }
}

/* The merged index of an entry with these bytes; a new one is copied into a (when not stable:
 * bytes the rewriter made) or kept where it is (the request's own bytes, which outlive the
 * merge). */
static uint32_t intern(table *t, const uint8_t *p, size_t n, bool stable, pc_arena *a)
{
    if (t->n == t->cap) table_grow(t);
    uint64_t h = pc_hash_mem(p, n);
    size_t s = h & t->mask;
    for (; t->slot[s]; s = (s + 1) & t->mask) {
        size_t k = t->slot[s] - 1;
        if (t->h[k] == h && t->e[k].n == n && (n == 0 || !memcmp(t->e[k].p, p, n)))
            return (uint32_t)k;
    }
    t->slot[s] = (uint32_t)(t->n + 1);
    t->h[t->n] = h;
    t->e[t->n] = (span){stable || n == 0 ? p : pc_arena_memdup(a, p, n), n};
    return (uint32_t)t->n++;
}

/* ---- the runs already merged ---- */

/* SipHash (base/hash.h: keyed against hash flooding, issue 28) of a run's key and its bytes, or
 * with bytes false its key and length only (the first sieve, cache_find). The tests build this
 * file once more with WM_FORCE_COLLISIONS: every run then hashes alike, so every lookup meets
 * runs whose bytes or remaps differ and must pass them by. */
static uint64_t run_hash(const uint32_t *key, span s, bool bytes)
{
#ifdef WM_FORCE_COLLISIONS
    (void)key, (void)s, (void)bytes;
    return 0;
#else
    pc_hash h;
    pc_hash_begin(&h);
    for (unsigned t = 0; t < T_N; t += 2)
        pc_hash_word(&h, key[t] | (uint64_t)key[t + 1] << 32);
    if (bytes)
        pc_hash_bytes(&h, s.p, s.n);
    else
        pc_hash_word(&h, s.n);
    return pc_hash_end(&h);
#endif
}

/* The run with this key and these bytes (compared, not only hashed; only the length when not
 * bytes), or NULL. */
static run *runs_find(const runs *c, uint64_t h, const uint32_t *key, span s, bool bytes)
{
    for (size_t i = h & c->mask; c->slot && c->slot[i]; i = (i + 1) & c->mask) {
        run *e = &c->e[c->slot[i] - 1];
        if (e->h == h && !memcmp(e->key, key, sizeof e->key) && e->s.n == s.n &&
            (!bytes || !memcmp(e->s.p, s.p, s.n)))
            return e;
    }
    return NULL;
}

static run *runs_add(runs *c, uint64_t h, const uint32_t *key, span s, uint32_t from)
{
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 16;
        c->e = pc_xrealloc(c->e, c->cap * sizeof *c->e);
        free(c->slot);
        c->mask = 2 * c->cap - 1; /* at most half full */
        c->slot = pc_xcalloc(2 * c->cap, sizeof *c->slot);
        for (size_t k = 0; k < c->n; k++) {
            size_t i = c->e[k].h & c->mask;
            while (c->slot[i])
                i = (i + 1) & c->mask;
            c->slot[i] = (uint32_t)(k + 1);
        }
    }
    size_t i = h & c->mask;
    while (c->slot[i])
        i = (i + 1) & c->mask;
    c->slot[i] = (uint32_t)(c->n + 1);
    run *e = &c->e[c->n++];
    *e = (run){.h = h, .s = s, .from = from};
    memcpy(e->key, key, sizeof e->key);
    return e;
}

/* Whether element 0 of table ti is the zero value as this merger knows it: empty, or a link of
 * all-zero ids (pc_proto_pack writes the 16 and 8 zero bytes; wire_check.c's link_ok). */
static bool zero_elem(unsigned ti, span e)
{
    if (e.n == 0) return true;
    if (ti != T_LINK) return false;
    size_t i = 0;
    uint64_t key, l;
    while (i < e.n) {
        if (pc_proto_read_varint(e.p, e.n, &i, &key) ||
            (key != (1 << 3 | 2) && key != (2 << 3 | 2)) ||
            pc_proto_skip_value(e.p, e.n, 2, &i, &l))
            return false;
        for (; l > 0; l--)
            if (e.p[i++]) return false;
    }
    return true;
}

/* Whether entry e of table ti (rewritten) is the zero value, in element 0's form or another:
 * fields written out with their defaults (a scalar or index 0, an empty packed run, an empty
 * AnyValue, which pdata/dict.c stores as an absent one), a link of all-zero ids. The model
 * interns such an entry as element 0 (pdata/dict.c), and so does this merger: "Duplicates SHOULD
 * NOT occur" (../shared/spec/otlp-profiles.md). A scalar written twice, 0 last, is not seen
 * here: that entry stays one of its own, the same content in another form. */
static bool zero_entry(unsigned ti, span e)
{
    if (table_msg[ti] < 0) return zero_elem(ti, e); /* a string or a link */
    const wf *f = schema[table_msg[ti]];
    size_t i = 0;
    while (i < e.n) {
        uint64_t key, v;
        if (pc_proto_read_varint(e.p, e.n, &i, &key) || key >> 3 >= NF ||
            pc_proto_read_varint(e.p, e.n, &i, &v) || v)
            return false;
        wf k = f[key >> 3];
        if ((key & 7) == 0 ? k.kind != K_COPY && k.kind != K_IDX
                           : (key & 7) != 2 ||
                                 /* an attribute's value is the one singular message */
                                 (k.kind != K_IDXR && !(k.kind == K_MSG && ti == T_ATTR)))
            return false;
    }
    return true;
}

static int intern_table(req *r, unsigned ti, table *t, rw *w, pc_buf *scratch, pc_arena *a);

/* The state of one merge. */
typedef struct mctx {
    req *rs;
    table *tabs;
    rw w;
    pc_buf scratch;
    pc_arena *a;
    /* Runs in two sets so that a run no earlier one matches in length costs no hash of its
     * bytes (a flush of different clients' requests): seen by key and length, each distinct
     * one once; full by key and the bytes' SipHash, a run entering it once a later run of the
     * same key and length shows up. Both keyed by SipHash: no chain a client can lengthen. */
    runs seen, full;
    pc_buf *out;
} mctx;

typedef struct probe {
    uint64_t k, h;
    bool seen;
} probe;

/* The earlier run of this flush with this key and these bytes, or NULL; pr for cache_add. */
static run *cache_find(mctx *c, const uint32_t *key, span s, probe *pr)
{
    pr->k = run_hash(key, s, false);
    run *a = runs_find(&c->seen, pr->k, key, s, false);
    pr->seen = a != NULL;
    if (!a) return NULL;
    /* the usual repeat is of the first run of this key and length: its bytes compared, none
     * hashed (a holds what the full set's copy of it would) */
    if (!memcmp(a->s.p, s.p, s.n)) return a;
    if (a->pending) {
        a->pending = false;
        run *b = runs_add(&c->full, run_hash(a->key, a->s, true), a->key, a->s, a->from);
        b->off = a->off, b->len = a->len;
    }
    pr->h = run_hash(key, s, true);
    return runs_find(&c->full, pr->h, key, s, true);
}

/* The run cache_find did not find, merged by request from: its entry, for off and len. */
static run *cache_add(mctx *c, const uint32_t *key, span s, const probe *pr, uint32_t from)
{
    if (pr->seen) return runs_add(&c->full, pr->h, key, s, from);
    run *a = runs_add(&c->seen, pr->k, key, s, from);
    a->pending = true;
    return a;
}

/* Request ri's table ti into the merged one, its remap filled. Element 0 maps to 0, and so does
 * any other entry of the zero value (zero_entry); the merged element 0 is the first request's
 * (every request's element 0 is the zero value). A table whose bytes and whose dependencies'
 * remaps equal an earlier request's of this flush (a client sending the same dictionary again)
 * takes that request's remap: its entries, rewritten the same way, were interned then and would
 * intern to the same indices now. */
static int merge_table(mctx *c, uint32_t ri, unsigned ti)
{
    req *r = &c->rs[ri];
    size_t n = r->n_tab[ti];
    if (n == 0) return 0;
    uint32_t key[T_N] = {ti};
    for (unsigned d = 1; d < T_N; d++)
        key[d] = table_deps[ti] >> d & 1 ? r->org[d] : ORG_NONE;
    probe pr;
    run *e = r->tcont[ti] ? cache_find(c, key, r->trun[ti], &pr) : NULL;
    if (e) {
        r->map[ti] = c->rs[e->from].map[ti];
        r->changed |= c->rs[e->from].changed & 1u << ti;
        r->org[ti] = e->from;
        return 0;
    }
    int rc = intern_table(r, ti, &c->tabs[ti], &c->w, &c->scratch, c->a);
    if (rc) return rc;
    r->org[ti] = ri;
    if (r->tcont[ti]) cache_add(c, key, r->trun[ti], &pr, ri);
    return 0;
}

/* Request r's table ti, entry by entry (merge_table). */
static int intern_table(req *r, unsigned ti, table *t, rw *w, pc_buf *scratch, pc_arena *a)
{
    size_t n = r->n_tab[ti];
    if (!zero_elem(ti, r->tab[ti][0])) return PC_ENOTSUP;
    r->map[ti] = pc_arena_alloc(a, n * sizeof(uint32_t));
    if (!t->present) intern(t, r->tab[ti][0].p, r->tab[ti][0].n, true, a);
    t->present = true;
    r->map[ti][0] = 0;
    bool as_is = table_msg[ti] < 0 || !(r->changed & table_deps[ti]);
    for (size_t k = 1; k < n; k++) {
        span e = r->tab[ti][k];
        if (!as_is) {
            w->n_slots = w->cursor = 0;
            size_t len = rewrite(w, (unsigned)table_msg[ti], e.p, e.n, NULL);
            pc_buf_reserve(scratch, len);
            if (!w->bad) rewrite(w, (unsigned)table_msg[ti], e.p, e.n, scratch->data);
            if (w->bad) return PC_ENOTSUP;
            e = (span){scratch->data, len};
        }
        r->map[ti][k] = zero_entry(ti, e) ? 0 : intern(t, e.p, e.n, as_is, a);
        if (r->map[ti][k] != k) r->changed |= 1u << ti;
    }
    return 0;
}

/* ---- writing ---- */

static int rewrite_resources(const req *r, rw *w, pc_buf *out);

/* Request ri's resource_profiles: as received when no remap changed anything; else as an
 * earlier request's of this flush were rewritten when their bytes and every remap are the same;
 * else rewritten. */
static int put_resources(mctx *c, uint32_t ri)
{
    const req *r = &c->rs[ri];
    pc_buf *out = c->out;
    if (!r->changed || !r->rcont) return rewrite_resources(r, &c->w, out);
    uint32_t key[T_N] = {0};
    memcpy(key + 1, r->org + 1, sizeof key - sizeof key[0]);
    probe pr;
    run *e = cache_find(c, key, r->rrun, &pr);
    if (e) {
        size_t off = e->off, len = e->len;
        pc_buf_reserve(out, len);
        memcpy(out->data + out->len, out->data + off, len);
        out->len += len;
        return 0;
    }
    size_t start = out->len;
    int rc = rewrite_resources(r, &c->w, out);
    if (rc) return rc;
    e = cache_add(c, key, r->rrun, &pr, ri);
    e->off = start, e->len = out->len - start;
    return 0;
}

/* Request r's resource_profiles: as received when no remap changed anything, else rewritten. */
static int rewrite_resources(const req *r, rw *w, pc_buf *out)
{
    for (size_t k = 0; k < r->n_rps; k++) {
        span s = r->rps[k];
        if (!r->changed) {
            pc_buf_append(out, s.p, s.n);
            continue;
        }
        size_t i = 0;
        uint64_t key, l;
        pc_proto_read_varint(s.p, s.n, &i, &key);
        pc_proto_read_varint(s.p, s.n, &i, &l);
        w->n_slots = w->cursor = 0;
        size_t len = put_msg(w, key, M_RP, s.p + i, (size_t)l, NULL);
        if (w->bad) return PC_ENOTSUP;
        pc_buf_reserve(out, len);
        put_msg(w, key, M_RP, s.p + i, (size_t)l, out->data + out->len);
        out->len += len;
    }
    return 0;
}

static void put_dictionary(const table *tabs, pc_buf *out)
{
    size_t len = 0;
    for (unsigned t = 1; t < T_N; t++)
        for (size_t k = 0; k < tabs[t].n; k++)
            len += 1 + varint_len(tabs[t].e[k].n) + tabs[t].e[k].n;
    if (!len) return;
    pc_buf_reserve(out, 1 + varint_len(len) + len);
    out->data[out->len++] = 2 << 3 | 2;
    out->len += put_varint(out->data + out->len, len);
    for (unsigned t = 1; t < T_N; t++)
        for (size_t k = 0; k < tabs[t].n; k++) {
            out->data[out->len++] = (uint8_t)(t << 3 | 2);
            out->len += put_varint(out->data + out->len, tabs[t].e[k].n);
            memcpy(out->data + out->len, tabs[t].e[k].p, tabs[t].e[k].n);
            out->len += tabs[t].e[k].n;
        }
}

/* Every request's tables into the merged ones, then its resources out. */
static int merge_all(req *rs, const uint8_t *const *data, const size_t *len, size_t n, table *tabs,
                     pc_buf *out)
{
    mctx c = {.rs = rs, .tabs = tabs, .a = pc_arena_new(4096), .out = out};
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        req *r = &rs[i];
        rc = read_req(r, data[i], len[i], c.a);
        if (!rc) rc = read_dict(r, c.a);
        c.w.map = r->map;
        c.w.n_map = r->n_tab;
        for (size_t o = 0; o < T_N - 1 && !rc; o++)
            rc = merge_table(&c, (uint32_t)i, (unsigned)table_order[o]);
        if (!rc) rc = put_resources(&c, (uint32_t)i);
    }
    if (!rc) put_dictionary(tabs, out);
    free(c.w.slots);
    pc_buf_free(&c.scratch);
    free(c.seen.e);
    free(c.seen.slot);
    free(c.full.e);
    free(c.full.slot);
    pc_arena_free(c.a);
    return rc;
}

int pc_wire_merge(const uint8_t *const *data, const size_t *len, size_t n, pc_buf *out)
{
    out->len = 0;
    size_t total = 0; /* about what the merge holds: one growth at most */
    for (size_t i = 0; i < n; i++)
        total += len[i];
    pc_buf_reserve(out, total);
    req *rs = pc_xcalloc(n ? n : 1, sizeof *rs);
    table tabs[T_N];
    memset(tabs, 0, sizeof tabs);
    int rc = merge_all(rs, data, len, n, tabs, out);
    for (unsigned t = 1; t < T_N; t++) {
        free(tabs[t].e);
        free(tabs[t].h);
        free(tabs[t].slot);
    }
    free(rs);
    if (rc) out->len = 0;
    return rc ? PC_ENOTSUP : 0;
}
