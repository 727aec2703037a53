/* decode: what decoding an OTLP ExportProfilesServiceRequest costs, decoder by decoder, on the
 * payload sets the scenarios replay (bench/README.md, "Decode cost").
 *
 *   decode --payload DIR [--payload DIR ...] [--seconds S] [--rounds N] [--only NAME]
 *   decode --payload DIR [--payload DIR ...] --iterations N [--only NAME]
 *
 * Every payload is inflated first when it is gzip (not timed); then, on one thread, each decoder
 * decodes every file of a set over and over for S CPU seconds (CLOCK_PROCESS_CPUTIME_ID, default
 * 1), the decoders taking turns, N rounds (default 3): a table with the best (min) and median
 * round in MB/s of protobuf bytes and ns per sample, then one JSON line. --iterations N instead
 * decodes each set exactly N times per decoder (one round): for valgrind --tool=callgrind, whose
 * inclusive count of each pass_* function is that decoder's cost.
 *
 * Decoders (--only NAME runs one):
 *   walk            a floor, not a decoder: reads every tag, length and varint (packed varints
 *                   included) and descends into every submessage, building nothing
 *   scan            pc_proto_scan_message, profcol's pre-unpack scan (depth, UTF-8, field 0, the
 *                   arena size unpack will need)
 *   pbc_unpack      protobuf_c_message_unpack as pc_batch_decode calls it: into a pc_arena whose
 *                   one block is the scan's estimate (the estimate itself is not timed), then
 *                   the arena freed
 *   pc_unpack       pc_proto_unpack, the one pass that checks and unpacks (pdata/proto_unpack.h),
 *                   into an arena sized as pc_batch_decode sizes it without a budget, then freed
 *   pc_batch_decode profcol's decode entry point (the one pass, arena, the batch; no budget),
 *                   then unref
 *   pc_decode_budget the same with an unlimited budget, as receivers call it: the scan counts
 *                   first for the reservation, then the one pass
 *   pc_decode_validate pc_batch_decode + pc_batch_validate, what the receivers do per request
 *   wire_check      pc_wire_check_profiles: the same verdict and counts as pc_decode_validate,
 *                   on the bytes, building nothing (pdata/wire_check.h)
 *   upb             upb_decode (Debian libupb-dev 0.0.0~git200730) into a upb arena, then
 *                   upb_arena_free; only when meson found libupb (PC_BENCH_UPB). Its message
 *                   layouts are built at start-up by upb's own reflection library from the .proto
 *                   files' descriptor set (protoc --descriptor_set_out): Debian ships no upb code
 *                   generator, and its upb headers do not compile (below).
 *   upb_block       the same with profcol's arena strategy: upb's arena gets a first block of
 *                   the scan's estimate (computed before timing), malloc'd and freed per request
 *
 * And two encoders of the request decoded once before timing (protobuf-c's structs;
 * bench/README.md, "Encoder"), each writing into one reused buffer: pbc_pack
 * protobuf_c_message_get_packed_size + protobuf_c_message_pack, as pc_batch_encode_proto did before
 * pc_proto_pack pc_proto_pack   profcol's two-pass encoder (pdata/proto_pack.h)
 *
 * Every decoder is checked once per file before timing: it must accept the file, and the decoders
 * that build messages must find the manifest's profiles and samples; both encoders must write the
 * file's bytes back. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/gzip.h"
#include "pdata/pdata.h"
#include "pdata/proto_pack.h"
#include "pdata/proto_scan.h"
#include "pdata/proto_unpack.h"
#include "pdata/wire_check.h"
#include "payloads.h"

#ifdef PC_BENCH_UPB
/* Debian's libupb-dev 0.0.0~git200730 installs only decode.h, encode.h, msg.h and port_def.inc,
 * and msg.h includes upb/upb.h and upb/table.int.h, which it does not install: no upb header
 * compiles. So the few functions used here are declared from the library's exported symbols,
 * and the two layout structs copied from that version's /usr/include/upb/msg.h. upb_status is
 * { bool ok; char msg[127]; } there; a larger buffer is passed. */
typedef struct upb_arena upb_arena;
typedef struct upb_alloc upb_alloc;
typedef struct upb_symtab upb_symtab;
typedef struct upb_msgdef upb_msgdef;
typedef struct upb_filedef upb_filedef;
typedef void upb_msg;
typedef struct {
    uint32_t number;
    uint16_t offset;
    int16_t presence;
    uint16_t submsg_index;
    uint8_t descriptortype;
    uint8_t label;
} upb_msglayout_field;
typedef struct upb_msglayout {
    const struct upb_msglayout *const *submsgs;
    const upb_msglayout_field *fields;
    uint16_t size;
    uint16_t field_count;
    bool extendable;
} upb_msglayout;
typedef struct {
    uintptr_t data; /* tagged: the low 3 bits are lg2(element size) */
    size_t len, size;
} upb_array;
typedef struct {
    bool ok;
    char msg[1023];
} upb_status;
extern upb_alloc upb_alloc_global;
upb_arena *upb_arena_init(void *mem, size_t n, upb_alloc *alloc);
void upb_arena_free(upb_arena *a);
upb_msg *_upb_msg_new(const upb_msglayout *l, upb_arena *a);
bool upb_decode(const char *buf, size_t size, upb_msg *msg, const upb_msglayout *l,
                upb_arena *arena);
const char *upb_msg_getunknown(const upb_msg *msg, size_t *len);
char *upb_encode(const void *msg, const upb_msglayout *l, upb_arena *arena, size_t *size);
upb_symtab *upb_symtab_new(void);
void upb_symtab_free(upb_symtab *s);
const upb_filedef *upb_symtab_addfile(upb_symtab *s, const upb_msg *file, upb_status *status);
const upb_msgdef *upb_symtab_lookupmsg(const upb_symtab *s, const char *sym);
const upb_msglayout *upb_msgdef_layout(const upb_msgdef *m);
void upb_status_clear(upb_status *s);
const char *upb_status_errmsg(const upb_status *s);
extern const upb_msglayout google_protobuf_FileDescriptorSet_msginit;

/* generated at build time: protoc --descriptor_set_out --include_imports of
 * proto/otlp_profiles_service.proto, embedded by tools/embed.py (pc_bench_descset) */
#include "otlp_descset.h"
#endif

enum {
    D_WALK,
    D_SCAN,
    D_PBC,
    D_PC_UNPACK,
    D_BATCH,
    D_BUDGET,
    D_VALIDATE,
    D_WIRE,
    D_UPB,
    D_UPB_BLOCK,
    D_PBC_PACK,
    D_PC_PACK,
    D_N
};
static const char *const dec_names[D_N] = {"walk",
                                           "scan",
                                           "pbc_unpack",
                                           "pc_unpack",
                                           "pc_batch_decode",
                                           "pc_decode_budget",
                                           "pc_decode_validate",
                                           "wire_check",
                                           "upb",
                                           "upb_block",
                                           "pbc_pack",
                                           "pc_proto_pack"};

typedef struct file {
    uint8_t *data; /* inflated protobuf */
    size_t len;
    size_t cost; /* the scan's arena estimate */
    pc_batch *b; /* decoded once, for the encoders */
} file;

typedef struct set {
    char name[256];
    file *f;
    size_t n;
    size_t bytes;    /* protobuf bytes of one pass over the set */
    long samples;    /* samples of one pass (manifest) */
    long profiles;   /* profiles of one pass (manifest) */
    double *ns[D_N]; /* per round: CPU ns per pass */
    long passes[D_N];
} set;

static double cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* ---- walk: the wire format only ---- */

#define WALK_MAX_FIELD 32
enum { K_SKIP, K_MSG, K_PACKED_VARINT };
typedef struct wnode {
    const ProtobufCMessageDescriptor *d;
    uint8_t kind[WALK_MAX_FIELD + 1];
    struct wnode *child[WALK_MAX_FIELD + 1];
} wnode;
static wnode wnodes[64];
static size_t n_wnodes;

static wnode *walk_node(const ProtobufCMessageDescriptor *d)
{
    for (size_t i = 0; i < n_wnodes; i++)
        if (wnodes[i].d == d) return &wnodes[i];
    if (n_wnodes == sizeof wnodes / sizeof wnodes[0]) {
        fprintf(stderr, "decode: more than 64 message types\n");
        exit(1);
    }
    wnode *n = &wnodes[n_wnodes++];
    n->d = d;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->id > WALK_MAX_FIELD) continue;
        if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
            n->kind[f->id] = K_MSG;
            n->child[f->id] = walk_node(f->descriptor);
        } else if (f->label == PROTOBUF_C_LABEL_REPEATED &&
                   (f->type == PROTOBUF_C_TYPE_INT32 || f->type == PROTOBUF_C_TYPE_INT64 ||
                    f->type == PROTOBUF_C_TYPE_UINT32 || f->type == PROTOBUF_C_TYPE_UINT64 ||
                    f->type == PROTOBUF_C_TYPE_SINT32 || f->type == PROTOBUF_C_TYPE_SINT64 ||
                    f->type == PROTOBUF_C_TYPE_BOOL || f->type == PROTOBUF_C_TYPE_ENUM)) {
            n->kind[f->id] = K_PACKED_VARINT;
        }
    }
    return n;
}

static inline const uint8_t *varint(const uint8_t *p, const uint8_t *end, uint64_t *v)
{
    uint64_t r = 0;
    for (int shift = 0; shift < 70 && p < end; shift += 7) {
        uint8_t b = *p++;
        r |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = r;
            return p;
        }
    }
    return NULL;
}

/* 0, or -1 for input that is not protobuf; *acc sums every varint (so nothing is optimised out) */
static int walk(const wnode *n, const uint8_t *p, const uint8_t *end, int depth, uint64_t *acc)
{
    while (p < end) {
        uint64_t tag, v;
        if (!(p = varint(p, end, &tag))) return -1;
        uint64_t num = tag >> 3;
        switch (tag & 7) {
        case 0:
            if (!(p = varint(p, end, &v))) return -1;
            *acc += v;
            break;
        case 1:
            if (end - p < 8) return -1;
            p += 8;
            break;
        case 5:
            if (end - p < 4) return -1;
            p += 4;
            break;
        case 2: {
            if (!(p = varint(p, end, &v)) || v > (uint64_t)(end - p)) return -1;
            const uint8_t *e = p + v;
            int k = num <= WALK_MAX_FIELD ? n->kind[num] : K_SKIP;
            if (k == K_MSG) {
                if (depth >= PC_PROTO_MAX_DEPTH || walk(n->child[num], p, e, depth + 1, acc) < 0)
                    return -1;
            } else if (k == K_PACKED_VARINT) {
                for (const uint8_t *q = p; q < e;) {
                    if (!(q = varint(q, e, &v))) return -1;
                    *acc += v;
                }
            }
            p = e;
            break;
        }
        default: return -1;
        }
    }
    return 0;
}

/* ---- upb ---- */

#ifdef PC_BENCH_UPB
static const upb_msglayout *upb_req_layout;
static upb_symtab *upb_syms;
static upb_arena *upb_defs_arena;

static const upb_msglayout_field *upb_field(const upb_msglayout *l, uint32_t number)
{
    for (unsigned i = 0; i < l->field_count; i++)
        if (l->fields[i].number == number) return &l->fields[i];
    return NULL;
}

/* the repeated field `number` of m (NULL when absent), and its element layout in *sub */
static const upb_array *upb_repeated(const upb_msg *m, const upb_msglayout *l, uint32_t number,
                                     const upb_msglayout **sub)
{
    const upb_msglayout_field *f = upb_field(l, number);
    if (!f) return NULL;
    if (sub) *sub = l->submsgs[f->submsg_index];
    const upb_array *a;
    memcpy(&a, (const char *)m + f->offset, sizeof a);
    return a;
}

static upb_msg *const *upb_elems(const upb_array *a)
{
    return (upb_msg *const *)(a->data & ~(uintptr_t)7);
}

static int upb_setup(void)
{
    upb_defs_arena = upb_arena_init(NULL, 0, &upb_alloc_global);
    const upb_msglayout *fds_l = &google_protobuf_FileDescriptorSet_msginit;
    upb_msg *fds = _upb_msg_new(fds_l, upb_defs_arena);
    if (!fds ||
        !upb_decode(pc_bench_descset, sizeof pc_bench_descset - 1, fds, fds_l, upb_defs_arena)) {
        fprintf(stderr, "decode: upb cannot decode the embedded descriptor set\n");
        return -1;
    }
    const upb_array *files = upb_repeated(fds, fds_l, 1, NULL);
    upb_syms = upb_symtab_new();
    upb_status st;
    for (size_t i = 0; files && i < files->len; i++) {
        upb_status_clear(&st);
        if (!upb_symtab_addfile(upb_syms, upb_elems(files)[i], &st)) {
            fprintf(stderr, "decode: upb_symtab_addfile: %s\n", upb_status_errmsg(&st));
            return -1;
        }
    }
    const upb_msgdef *md = upb_symtab_lookupmsg(
        upb_syms,
        "opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest");
    if (!md || !(upb_req_layout = upb_msgdef_layout(md))) {
        fprintf(stderr, "decode: upb has no layout for ExportProfilesServiceRequest\n");
        return -1;
    }
    return 0;
}

/* decode once and count profiles and samples (-1 when upb refuses the input); *reenc gets the
 * size upb encodes the message back to, *unknown the bytes it kept as unknown fields */
static int upb_check(const file *f, long *profiles, long *samples, size_t *reenc, size_t *unknown)
{
    upb_arena *a = upb_arena_init(NULL, 0, &upb_alloc_global);
    upb_msg *m = _upb_msg_new(upb_req_layout, a);
    if (!upb_decode((const char *)f->data, f->len, m, upb_req_layout, a)) {
        upb_arena_free(a);
        return -1;
    }
    *profiles = *samples = 0;
    const upb_msglayout *rl, *sl, *pl, *xl;
    const upb_array *rps = upb_repeated(m, upb_req_layout, 1, &rl);
    for (size_t i = 0; rps && i < rps->len; i++) {
        const upb_array *sps = upb_repeated(upb_elems(rps)[i], rl, 2, &sl);
        for (size_t j = 0; sps && j < sps->len; j++) {
            const upb_array *ps = upb_repeated(upb_elems(sps)[j], sl, 2, &pl);
            for (size_t k = 0; ps && k < ps->len; k++) {
                const upb_array *ss = upb_repeated(upb_elems(ps)[k], pl, 2, &xl);
                (*profiles)++;
                *samples += ss ? (long)ss->len : 0;
            }
        }
    }
    upb_msg_getunknown(m, unknown);
    *reenc = 0;
    if (!upb_encode(m, upb_req_layout, a, reenc)) *reenc = 0;
    upb_arena_free(a);
    return 0;
}
#endif

/* ---- one pass over a set, per decoder (noinline: callgrind counts each pass_* apart) ---- */

static volatile uint64_t sink_acc;

__attribute__((noinline)) static int pass_walk(const set *s)
{
    const wnode *root = walk_node(PC_REQUEST_DESC);
    uint64_t acc = 0;
    for (size_t i = 0; i < s->n; i++)
        if (walk(root, s->f[i].data, s->f[i].data + s->f[i].len, 0, &acc) < 0) return -1;
    sink_acc += acc;
    return 0;
}

__attribute__((noinline)) static int pass_scan(const set *s)
{
    for (size_t i = 0; i < s->n; i++) {
        pc_proto_scan scan;
        pc_error e = {0};
        if (pc_proto_scan_message(PC_REQUEST_DESC, s->f[i].data, s->f[i].len, PC_PROTO_MAX_DEPTH,
                                  &scan, &e) < 0)
            return -1;
        sink_acc += scan.cost;
    }
    return 0;
}

__attribute__((noinline)) static int pass_pbc(const set *s)
{
    for (size_t i = 0; i < s->n; i++) {
        pc_arena *a = pc_arena_new(s->f[i].cost + 64); /* as pc_batch_decode sizes it */
        ProtobufCMessage *m = protobuf_c_message_unpack(PC_REQUEST_DESC, pc_arena_allocator(a),
                                                        s->f[i].len, s->f[i].data);
        pc_arena_free(a);
        if (!m) return -1;
    }
    return 0;
}

/* the one pass (pdata/proto_unpack.h) into an arena sized as pc_batch_decode sizes it without a
 * budget, then the arena freed: the scan's and pbc_unpack's work together */
__attribute__((noinline)) static int pass_pc_unpack(const set *s)
{
    for (size_t i = 0; i < s->n; i++) {
        pc_arena *a = pc_arena_new(s->f[i].len * 2 + 1024);
        ProtobufCMessage *m = NULL;
        pc_error e = {0};
        int rc = pc_proto_unpack(PC_REQUEST_DESC, s->f[i].data, s->f[i].len, PC_PROTO_MAX_DEPTH, a,
                                 &m, &e);
        pc_arena_free(a);
        if (rc < 0) return -1;
    }
    return 0;
}

/* pc_batch_decode with an unlimited budget, as a receiver calls it: the scan counts first (the
 * reservation), then the one pass */
__attribute__((noinline)) static int pass_budget(const set *s)
{
    for (size_t i = 0; i < s->n; i++) {
        pc_batch *b;
        pc_error e = {0};
        pc_budget bud;
        pc_budget_init(&bud, 0);
        if (pc_batch_decode(PC_SIGNAL_PROFILES, s->f[i].data, s->f[i].len, false, &bud, &b, &e) < 0)
            return -1;
        pc_batch_end_budget(b);
        pc_budget_release(&bud);
        pc_batch_unref(b);
    }
    return 0;
}

__attribute__((noinline)) static int pass_batch(const set *s)
{
    for (size_t i = 0; i < s->n; i++) {
        pc_batch *b;
        pc_error e = {0};
        if (pc_batch_decode(PC_SIGNAL_PROFILES, s->f[i].data, s->f[i].len, false, NULL, &b, &e) < 0)
            return -1;
        pc_batch_unref(b);
    }
    return 0;
}

__attribute__((noinline)) static int pass_validate(const set *s)
{
    for (size_t i = 0; i < s->n; i++) {
        pc_batch *b;
        pc_error e = {0};
        int64_t rejected = 0;
        if (pc_batch_decode(PC_SIGNAL_PROFILES, s->f[i].data, s->f[i].len, false, NULL, &b, &e) < 0)
            return -1;
        int rc = pc_batch_validate(b, &rejected, &e);
        pc_batch_unref(b);
        if (rc < 0 || rejected) return -1;
    }
    return 0;
}

/* the same verdict and counts as pc_decode_validate, on the bytes (pdata/wire_check.h) */
__attribute__((noinline)) static int pass_wire(const set *s)
{
    for (size_t i = 0; i < s->n; i++) {
        pc_wire_counts c;
        pc_error e = {0};
        if (pc_wire_check_profiles(s->f[i].data, s->f[i].len, PC_PROTO_MAX_DEPTH, &c, &e) < 0 ||
            c.rejected)
            return -1;
        sink_acc += c.samples;
    }
    return 0;
}

static pc_buf enc_buf; /* the encoders' output, reused */

__attribute__((noinline)) static int pass_pbc_pack(const set *s)
{
    for (size_t i = 0; i < s->n; i++) {
        const ProtobufCMessage *m = pc_batch_message(s->f[i].b);
        enc_buf.len = 0;
        pc_buf_reserve(&enc_buf, protobuf_c_message_get_packed_size(m) + 1);
        enc_buf.len = protobuf_c_message_pack(m, enc_buf.data);
        sink_acc += enc_buf.len;
    }
    return 0;
}

__attribute__((noinline)) static int pass_pc_pack(const set *s)
{
    for (size_t i = 0; i < s->n; i++) {
        enc_buf.len = 0;
        sink_acc += pc_proto_pack(pc_batch_message(s->f[i].b), &enc_buf);
    }
    return 0;
}

#ifdef PC_BENCH_UPB
__attribute__((noinline)) static int pass_upb(const set *s)
{
    for (size_t i = 0; i < s->n; i++) {
        upb_arena *a = upb_arena_init(NULL, 0, &upb_alloc_global);
        upb_msg *m = _upb_msg_new(upb_req_layout, a);
        bool ok = m && upb_decode((const char *)s->f[i].data, s->f[i].len, m, upb_req_layout, a);
        upb_arena_free(a);
        if (!ok) return -1;
    }
    return 0;
}

/* upb with profcol's arena strategy: the first block (malloc'd per request, as pc_arena_new does)
 * is the scan's estimate of protobuf-c's arena use, not timed (upb allocates more blocks when its
 * own messages need more) */
__attribute__((noinline)) static int pass_upb_block(const set *s)
{
    for (size_t i = 0; i < s->n; i++) {
        void *block = malloc(s->f[i].cost + 64);
        upb_arena *a = upb_arena_init(block, s->f[i].cost + 64, &upb_alloc_global);
        upb_msg *m = _upb_msg_new(upb_req_layout, a);
        bool ok = m && upb_decode((const char *)s->f[i].data, s->f[i].len, m, upb_req_layout, a);
        upb_arena_free(a);
        free(block);
        if (!ok) return -1;
    }
    return 0;
}
#endif

static int run_pass(int d, const set *s)
{
    switch (d) {
    case D_WALK: return pass_walk(s);
    case D_SCAN: return pass_scan(s);
    case D_PBC: return pass_pbc(s);
    case D_PC_UNPACK: return pass_pc_unpack(s);
    case D_BATCH: return pass_batch(s);
    case D_BUDGET: return pass_budget(s);
    case D_VALIDATE: return pass_validate(s);
    case D_WIRE: return pass_wire(s);
    case D_PBC_PACK: return pass_pbc_pack(s);
    case D_PC_PACK: return pass_pc_pack(s);
#ifdef PC_BENCH_UPB
    case D_UPB: return pass_upb(s);
    case D_UPB_BLOCK: return pass_upb_block(s);
#endif
    default: return -1;
    }
}

static bool dec_available(int d)
{
#ifdef PC_BENCH_UPB
    (void)d;
    return true;
#else
    return d != D_UPB && d != D_UPB_BLOCK;
#endif
}

/* ---- loading and checking ---- */

static int load_set(const char *dir, set *out)
{
    payload_set ps;
    if (payload_load(dir, &ps) < 0) return -1;
    memset(out, 0, sizeof *out);
    char name[sizeof out->name];
    snprintf(name, sizeof name, "%s", dir);
    size_t nl = strlen(name);
    while (nl > 1 && name[nl - 1] == '/')
        name[--nl] = '\0';
    const char *base = strrchr(name, '/');
    snprintf(out->name, sizeof out->name, "%s", base ? base + 1 : name);
    out->f = calloc(ps.n, sizeof *out->f);
    out->n = ps.n;
    out->profiles = out->samples = 0;
    for (size_t i = 0; i < ps.n; i++) {
        payload *p = &ps.p[i];
        file *f = &out->f[i];
        if (p->len >= 2 && p->data[0] == 0x1f && p->data[1] == 0x8b) {
            pc_buf b = {0};
            if (pc_gzip_inflate(p->data, p->len, (size_t)1 << 30, &b) < 0) {
                fprintf(stderr, "decode: cannot inflate %s/%s\n", dir, p->name);
                return -1;
            }
            f->data = b.data;
            f->len = b.len;
            free(p->data);
        } else {
            f->data = p->data;
            f->len = p->len;
        }
        pc_proto_scan scan;
        pc_error e = {0};
        if (pc_proto_scan_message(PC_REQUEST_DESC, f->data, f->len, PC_PROTO_MAX_DEPTH, &scan, &e) <
            0) {
            fprintf(stderr, "decode: %s/%s: %s\n", dir, p->name, e.msg);
            return -1;
        }
        f->cost = scan.cost;
        if (pc_batch_decode(PC_SIGNAL_PROFILES, f->data, f->len, false, NULL, &f->b, &e) < 0)
            return -1;
        out->bytes += f->len;
        if (p->samples < 0 || out->samples < 0) {
            out->samples = out->profiles = -1;
        } else {
            out->samples += p->samples;
            out->profiles += p->profiles;
        }
    }
    free(ps.p);
    return 0;
}

/* both encoders write every file's bytes back */
static int check_encoders(const set *s)
{
    for (size_t i = 0; i < s->n; i++)
        for (int d = D_PBC_PACK; d <= D_PC_PACK; d++) {
            set one = *s;
            one.f = &s->f[i];
            one.n = 1;
            run_pass(d, &one);
            if (enc_buf.len != s->f[i].len || memcmp(enc_buf.data, s->f[i].data, enc_buf.len)) {
                fprintf(stderr, "decode: %s does not write file %zu of %s back\n", dec_names[d], i,
                        s->name);
                return -1;
            }
        }
    return 0;
}

/* every decoder accepts every file; those that build messages find the manifest's counts */
static int check_set(const set *s)
{
    if (check_encoders(s) < 0) return -1;
    for (int d = 0; d < D_N; d++)
        if (dec_available(d) && run_pass(d, s) < 0) {
            fprintf(stderr, "decode: %s refuses a file of %s\n", dec_names[d], s->name);
            return -1;
        }
    long prof = 0, samp = 0, wprof = 0, wsamp = 0;
    for (size_t i = 0; i < s->n; i++) {
        pc_batch *b;
        pc_error e = {0};
        if (pc_batch_decode(PC_SIGNAL_PROFILES, s->f[i].data, s->f[i].len, false, NULL, &b, &e) < 0)
            return -1;
        pc_profile_iter it = {0};
        while (pc_profile_next(b->req, &it)) {
            prof++;
            samp += (long)pc_profile_n_samples(it.prof);
        }
        pc_batch_unref(b);
        pc_wire_counts c;
        pc_wire_check_profiles(s->f[i].data, s->f[i].len, PC_PROTO_MAX_DEPTH, &c, &e);
        wprof += (long)c.profiles;
        wsamp += (long)c.samples;
    }
    if (wprof != prof || wsamp != samp) {
        fprintf(stderr,
                "decode: %s: wire_check counts %ld profiles, %ld samples; protobuf-c %ld, %ld\n",
                s->name, wprof, wsamp, prof, samp);
        return -1;
    }
    if (s->samples >= 0 && (prof != s->profiles || samp != s->samples)) {
        fprintf(stderr,
                "decode: %s: protobuf-c finds %ld profiles, %ld samples; manifest %ld, %ld\n",
                s->name, prof, samp, s->profiles, s->samples);
        return -1;
    }
#ifdef PC_BENCH_UPB
    long uprof = 0, usamp = 0;
    for (size_t i = 0; i < s->n; i++) {
        long p, n;
        size_t reenc, unknown;
        if (upb_check(&s->f[i], &p, &n, &reenc, &unknown) < 0) return -1;
        if (unknown || reenc != s->f[i].len) {
            fprintf(stderr,
                    "decode: %s file %zu: upb kept %zu bytes as unknown fields and encodes %zu "
                    "bytes back of %zu\n",
                    s->name, i, unknown, reenc, s->f[i].len);
            return -1;
        }
        uprof += p;
        usamp += n;
    }
    if (uprof != prof || usamp != samp) {
        fprintf(stderr, "decode: %s: upb finds %ld profiles, %ld samples; protobuf-c %ld, %ld\n",
                s->name, uprof, usamp, prof, samp);
        return -1;
    }
#endif
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void min_median(const double *v, int n, double *mn, double *med)
{
    double t[64];
    memcpy(t, v, (size_t)n * sizeof *t);
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    *mn = t[0];
    *med = n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

static void usage(void)
{
    fprintf(stderr, "usage: decode --payload DIR [--payload DIR ...] [--seconds S] [--rounds N] "
                    "[--iterations N] [--only walk|scan|pbc_unpack|pc_batch_decode|"
                    "pc_decode_validate|wire_check|upb|upb_block|pbc_pack|pc_proto_pack]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *dirs[16];
    int n_dirs = 0, rounds = 3, only = -1;
    long iterations = 0;
    double seconds = 1.0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--payload") && i + 1 < argc && n_dirs < 16)
            dirs[n_dirs++] = argv[++i];
        else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
            seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--iterations") && i + 1 < argc)
            iterations = atol(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
            const char *name = argv[++i];
            for (int d = 0; d < D_N; d++)
                if (!strcmp(name, dec_names[d])) only = d;
            if (only < 0) usage();
        } else
            usage();
    }
    if (!n_dirs || rounds < 1 || rounds > 64 || seconds <= 0 || iterations < 0) usage();
    if (iterations) rounds = 1;
    if (only >= 0 && !dec_available(only)) {
        fprintf(stderr, "decode: built without upb (Debian libupb-dev, protobuf-compiler)\n");
        return 1;
    }
#ifdef PC_BENCH_UPB
    if (upb_setup() < 0) return 1;
#endif
    set *sets = calloc((size_t)n_dirs, sizeof *sets);
    for (int i = 0; i < n_dirs; i++) {
        if (load_set(dirs[i], &sets[i]) < 0 || check_set(&sets[i]) < 0) return 1;
        for (int d = 0; d < D_N; d++)
            sets[i].ns[d] = calloc((size_t)rounds, sizeof(double));
    }

    /* the decoders take turns within a round, so a noisy minute hits them alike */
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < n_dirs; i++)
            for (int d = 0; d < D_N; d++) {
                if (!dec_available(d) || (only >= 0 && d != only)) continue;
                set *s = &sets[i];
                long passes = 0;
                double t0 = cpu_ns(), t1 = t0;
                if (iterations) {
                    for (; passes < iterations; passes++)
                        run_pass(d, s);
                    t1 = cpu_ns();
                } else {
                    run_pass(d, s); /* warm-up */
                    t0 = cpu_ns();
                    do {
                        run_pass(d, s);
                        passes++;
                        if (passes % 8 == 0 || s->bytes > 100000) t1 = cpu_ns();
                    } while (t1 - t0 < seconds * 1e9);
                }
                s->ns[d][r] = (t1 - t0) / (double)passes;
                s->passes[d] += passes;
            }

    printf("| set | decoder | MB/s (best) | MB/s (median) | ns/sample (best) | ns/sample "
           "(median) | of pc_batch_decode (median) |\n|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n_dirs; i++) {
        set *s = &sets[i];
        double bmn = 0, bmed = 0;
        if (only < 0 || only == D_BATCH) min_median(s->ns[D_BATCH], rounds, &bmn, &bmed);
        for (int d = 0; d < D_N; d++) {
            if (!dec_available(d) || (only >= 0 && d != only)) continue;
            double mn, med;
            min_median(s->ns[d], rounds, &mn, &med);
            printf("| %s | %s | %.1f | %.1f | ", s->name, dec_names[d], (double)s->bytes / mn * 1e3,
                   (double)s->bytes / med * 1e3);
            if (s->samples > 0)
                printf("%.1f | %.1f | ", mn / (double)s->samples, med / (double)s->samples);
            else
                printf("- | - | ");
            if (bmed > 0)
                printf("%.3f |\n", med / bmed);
            else
                printf("- |\n");
        }
    }
    printf("{\"tool\":\"decode\",\"rounds\":%d,\"seconds\":%.3f,\"iterations\":%ld,\"upb\":%s,"
           "\"results\":[",
           rounds, seconds, iterations, dec_available(D_UPB) ? "true" : "false");
    bool first = true;
    for (int i = 0; i < n_dirs; i++) {
        set *s = &sets[i];
        for (int d = 0; d < D_N; d++) {
            if (!dec_available(d) || (only >= 0 && d != only)) continue;
            double mn, med;
            min_median(s->ns[d], rounds, &mn, &med);
            printf(
                "%s{\"set\":\"%s\",\"decoder\":\"%s\",\"files\":%zu,\"bytes\":%zu,\"samples\":%ld,"
                "\"passes\":%ld,\"mb_per_s\":%.2f,\"mb_per_s_median\":%.2f,"
                "\"ns_per_sample\":%.2f,\"ns_per_sample_median\":%.2f}",
                first ? "" : ",", s->name, dec_names[d], s->n, s->bytes, s->samples, s->passes[d],
                (double)s->bytes / mn * 1e3, (double)s->bytes / med * 1e3,
                s->samples > 0 ? mn / (double)s->samples : 0,
                s->samples > 0 ? med / (double)s->samples : 0);
            first = false;
        }
    }
    printf("]}\n");
#ifdef PC_BENCH_UPB
    upb_symtab_free(upb_syms);
    upb_arena_free(upb_defs_arena);
#endif
    return 0;
}
