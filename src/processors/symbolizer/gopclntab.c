/* The `.gopclntab` reader of gopclntab.h. Layout from Go's runtime/symtab.go (pcHeader, _func)
 * and debug/gosym/pclntab.go, as ../shared/spec/symbolization.md §5 cites them:
 *
 *   header: magic u32, 2 zero bytes, instruction quantum u8, pointer size u8, then pointer-sized
 *   nfunc, nfiles, textStart, and the offsets (from the header) of funcnametab, cutab, filetab,
 *   pctab and the function table;
 *   function table: nfunc+1 pairs {entry offset from textStart u32, _func offset u32}, sorted,
 *   the last pair's entry the end of the text;
 *   _func: entryOff u32, nameOff i32, args, deferreturn, pcsp, pcfile, pcln, npcdata, cuOffset
 *   (u32 each), [1.20+: startLine i32], funcID, flag, pad, nfuncdata (u8 each);
 *   pcfile/pcln: offsets into pctab of "pcvalue" streams, pairs of uvarints (value delta
 *   zig-zag, pc delta in quanta) starting at value -1 at the entry, ended by a 0 value delta;
 *   file number -> cutab[cuOffset + n] -> NUL-terminated name at filetab + that offset;
 *   after the fixed part, pcdata[npcdata] (pctab offsets; [2] the inline tree index at a pc) and
 *   funcdata[nfuncdata] (offsets from moduledata.gofunc; [3] the inline tree, 16-byte
 *   inlinedCall entries: funcID, 3 pad, nameOff, parentPc, startLine; runtime/symtabinl.go). */
#include "gopclntab.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

enum {
    MAGIC_118 = 0xfffffff0, /* Go 1.18, 1.19 */
    MAGIC_120 = 0xfffffff1, /* Go 1.20 and later: _func gains startLine */
    MAX_STEPS = 1 << 22,    /* pcvalue pairs walked for one lookup, against a looping stream */
    MAX_DEPTH = 64,         /* frames of one inline chain */
    PCDATA_INLTREEINDEX = 2,
    FUNCDATA_INLTREE = 3,
    INLCALL_SIZE = 16, /* inlinedCall: funcID u8, 3 pad, nameOff i32, parentPc i32, startLine i32 */
};

struct sym_gopcln {
    const uint8_t *d;
    size_t n;
    bool v120;
    uint32_t quantum, ptr;
    uint64_t nfunc, text;
    uint64_t funcname, cu, filetab, pctab, ftab; /* offsets into d */
    const uint8_t *inl;                          /* the section holding gofunc, or NULL */
    size_t inl_len;
    uint64_t inl_vaddr, gofunc;
};

/* One function's _func record. */
typedef struct gofn {
    uint64_t base, entry, fixed; /* fixed: size of the record before pcdata[] */
    uint32_t f[10]; /* entryOff, nameOff, args, deferreturn, pcsp, pcfile, pcln, npcdata,
                     * cuOffset, startLine */
} gofn;

static bool rd32_in(const uint8_t *d, size_t n, uint64_t off, uint32_t *v)
{
    if (off > n || n - off < 4) return false;
    const uint8_t *p = d + off;
    *v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    return true;
}

static bool rd32(const sym_gopcln *g, uint64_t off, uint32_t *v)
{
    return rd32_in(g->d, g->n, off, v);
}

static bool rdword(const sym_gopcln *g, uint64_t off, uint64_t *v)
{
    uint32_t lo, hi = 0;
    if (!rd32(g, off, &lo) || (g->ptr == 8 && !rd32(g, off + 4, &hi))) return false;
    *v = (uint64_t)hi << 32 | lo;
    return true;
}

/* A NUL-terminated string at base + off inside the table, or NULL. */
static const char *cstr(const sym_gopcln *g, uint64_t base, uint64_t off)
{
    if (base > g->n || off >= g->n - base) return NULL;
    const char *s = (const char *)g->d + base + off;
    return memchr(s, 0, g->n - base - off) ? s : NULL;
}

sym_gopcln *sym_gopcln_open(const uint8_t *data, size_t len, uint64_t text)
{
    sym_gopcln g = {.d = data, .n = len};
    uint32_t magic;
    if (!data || !rd32(&g, 0, &magic) || len < 8 || (magic != MAGIC_118 && magic != MAGIC_120))
        return NULL;
    g.v120 = magic == MAGIC_120;
    g.quantum = data[6];
    g.ptr = data[7];
    if (data[4] || data[5] || (g.ptr != 4 && g.ptr != 8) || !g.quantum) return NULL;
    uint64_t w[8]; /* nfunc, nfiles, textStart, funcname, cu, filetab, pctab, ftab */
    for (int i = 0; i < 8; i++)
        if (!rdword(&g, 8 + (uint64_t)i * g.ptr, &w[i])) return NULL;
    g.nfunc = w[0];
    g.text = w[2] ? w[2] : text;
    g.funcname = w[3], g.cu = w[4], g.filetab = w[5], g.pctab = w[6], g.ftab = w[7];
    /* the function table: nfunc+1 pairs of 8 bytes inside the data */
    if (g.ftab > len || g.cu > len || (len - g.ftab) / 8 < 1 || g.nfunc == 0 ||
        g.nfunc > (len - g.ftab) / 8 - 1)
        return NULL;
    sym_gopcln *out = pc_xmalloc(sizeof *out);
    *out = g;
    return out;
}

void sym_gopcln_set_gofunc(sym_gopcln *g, uint64_t gofunc, const uint8_t *sec, size_t len,
                           uint64_t vaddr)
{
    if (!g || !g->v120) return;
    g->gofunc = gofunc;
    g->inl = sec;
    g->inl_len = len;
    g->inl_vaddr = vaddr;
}

uint64_t sym_gopcln_funcname_offset(const sym_gopcln *g)
{
    return g && g->v120 && g->ptr == 8 ? g->funcname : 0;
}

void sym_gopcln_free(sym_gopcln *g)
{
    free(g);
}

size_t sym_gopcln_count(const sym_gopcln *g)
{
    return g ? (size_t)g->nfunc : 0;
}

uint64_t sym_gopcln_entry(const sym_gopcln *g, size_t i)
{
    uint32_t e = 0;
    if (g && i <= g->nfunc) rd32(g, g->ftab + (uint64_t)i * 8, &e);
    return g ? g->text + e : 0;
}

static bool uvarint(const sym_gopcln *g, uint64_t *pos, uint32_t *out)
{
    uint32_t v = 0;
    for (int shift = 0; shift < 35; shift += 7) {
        if (*pos >= g->n) return false;
        uint8_t b = g->d[(*pos)++];
        v |= (uint32_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return true;
        }
    }
    return false;
}

/* The value of the pcvalue stream at pctab + off for target, the function starting at entry. */
static bool pcvalue(const sym_gopcln *g, uint32_t off, uint64_t entry, uint64_t target,
                    int32_t *val)
{
    if (off == 0 || g->pctab > g->n || off >= g->n - g->pctab) return false;
    uint64_t pos = g->pctab + off, pc = entry;
    uint32_t v = (uint32_t)-1;
    for (int i = 0; i < MAX_STEPS; i++) {
        uint32_t uv, pcd;
        if (!uvarint(g, &pos, &uv) || (uv == 0 && i > 0) || !uvarint(g, &pos, &pcd)) return false;
        v += uv & 1 ? ~(uv >> 1) : uv >> 1; /* zig-zag, wrapping as Go's int32 does */
        pc += (uint64_t)pcd * g->quantum;
        if (target < pc) {
            *val = (int32_t)v;
            return true;
        }
    }
    return false;
}

/* The index of the function holding pc - text, by binary search over the sorted entries. */
static bool find_func(const sym_gopcln *g, uint64_t rel, uint64_t *idx)
{
    uint32_t first, end;
    if (!rd32(g, g->ftab, &first) || !rd32(g, g->ftab + g->nfunc * 8, &end)) return false;
    if (rel < first || rel >= end) return false;
    uint64_t lo = 0, hi = g->nfunc; /* entry[lo] <= rel < entry[hi] */
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        uint32_t e;
        if (!rd32(g, g->ftab + mid * 8, &e)) return false;
        if (e <= rel)
            lo = mid;
        else
            hi = mid;
    }
    *idx = lo;
    return true;
}

static const char *file_of(const sym_gopcln *g, uint32_t cu_off, int32_t fileno)
{
    uint32_t foff;
    if (fileno < 0 || !rd32(g, g->cu + ((uint64_t)cu_off + (uint64_t)fileno) * 4, &foff) ||
        foff == UINT32_MAX)
        return NULL;
    return cstr(g, g->filetab, foff);
}

static bool read_fn(const sym_gopcln *g, uint64_t pc, gofn *fn)
{
    uint64_t i;
    uint32_t funcoff;
    if (!g || pc < g->text || !find_func(g, pc - g->text, &i) ||
        !rd32(g, g->ftab + i * 8 + 4, &funcoff))
        return false;
    fn->base = g->ftab + funcoff;
    fn->fixed = g->v120 ? 44 : 40;
    for (int k = 0; k < (g->v120 ? 10 : 9); k++)
        if (!rd32(g, fn->base + (uint64_t)k * 4, &fn->f[k])) return false;
    if (!g->v120) fn->f[9] = 0;
    fn->entry = g->text + fn->f[0];
    return true;
}

/* The inline tree index at pc (PCDATA_InlTreeIndex), -1 when pc is in no inlined call. */
static int32_t inl_index(const sym_gopcln *g, const gofn *fn, uint64_t pc)
{
    uint32_t off;
    int32_t v;
    if (fn->f[7] <= PCDATA_INLTREEINDEX ||
        !rd32(g, fn->base + fn->fixed + PCDATA_INLTREEINDEX * 4, &off) ||
        !pcvalue(g, off, fn->entry, pc, &v))
        return -1;
    return v;
}

/* Entry idx of the function's inline tree, in the section holding gofunc. */
static bool inl_call(const sym_gopcln *g, const gofn *fn, int32_t idx, uint32_t call[4])
{
    uint32_t off;
    if (!g->inl || idx < 0 || fn->base + fn->fixed > g->n) return false;
    uint8_t nfuncdata = g->d[fn->base + fn->fixed - 1];
    uint64_t at = fn->base + fn->fixed + (uint64_t)fn->f[7] * 4 + FUNCDATA_INLTREE * 4;
    if (nfuncdata <= FUNCDATA_INLTREE || !rd32(g, at, &off) || off == UINT32_MAX) return false;
    uint64_t addr = g->gofunc + off + (uint64_t)idx * INLCALL_SIZE;
    if (addr < g->inl_vaddr || addr - g->inl_vaddr > g->inl_len) return false;
    for (int k = 0; k < 4; k++)
        if (!rd32_in(g->inl, g->inl_len, addr - g->inl_vaddr + (uint64_t)k * 4, &call[k]))
            return false;
    return true;
}

static void push(const sym_gopcln *g, const gofn *fn, sym_frames *out, const char *name,
                 uint64_t pc, int32_t start_line)
{
    int32_t fileno, line;
    const char *file =
        pcvalue(g, fn->f[5], fn->entry, pc, &fileno) ? file_of(g, fn->f[8], fileno) : NULL;
    sym_frame *fr = &out->f[out->n++];
    fr->name = pc_xstrdup(name);
    fr->system_name = pc_xstrdup(name);
    fr->file = file && file[0] ? pc_xstrdup(file) : NULL;
    fr->line = pcvalue(g, fn->f[6], fn->entry, pc, &line) && line > 0 ? line : 0;
    fr->start_line = start_line > 0 ? start_line : 0;
}

/* As Go's runtime unwinds inlined calls (runtime/symtabinl.go): the frame at pc is the inline
 * tree entry PCDATA_InlTreeIndex names there, its caller's position the entry's parentPc, until
 * the index is -1: the function itself. */
sym_reason sym_gopcln_resolve(const sym_gopcln *g, uint64_t pc, sym_frames *out)
{
    gofn fn;
    if (!read_fn(g, pc, &fn)) return SYM_NO_SYMBOL;
    const char *name = cstr(g, g->funcname, fn.f[1]);
    if (!name || !name[0]) return SYM_NO_SYMBOL;
    out->f = pc_xcalloc(MAX_DEPTH, sizeof *out->f);
    out->n = 0;
    int32_t idx = inl_index(g, &fn, pc);
    uint32_t call[4]; /* funcID, nameOff, parentPc, startLine */
    while (out->n < MAX_DEPTH - 1 && inl_call(g, &fn, idx, call)) {
        const char *callee = cstr(g, g->funcname, call[1]);
        if (!callee || !callee[0] || (int32_t)call[2] < 0) break;
        push(g, &fn, out, callee, pc, (int32_t)call[3]);
        pc = fn.entry + call[2];
        idx = inl_index(g, &fn, pc);
    }
    push(g, &fn, out, name, pc, (int32_t)fn.f[9]);
    return SYM_OK;
}
