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
 *   file number -> cutab[cuOffset + n] -> NUL-terminated name at filetab + that offset. */
#include "gopclntab.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

enum {
    MAGIC_118 = 0xfffffff0, /* Go 1.18, 1.19 */
    MAGIC_120 = 0xfffffff1, /* Go 1.20 and later: _func gains startLine */
    MAX_STEPS = 1 << 22,    /* pcvalue pairs walked for one lookup, against a looping stream */
};

struct sym_gopcln {
    const uint8_t *d;
    size_t n;
    bool v120;
    uint32_t quantum, ptr;
    uint64_t nfunc, text;
    uint64_t funcname, cu, filetab, pctab, ftab; /* offsets into d */
};

static bool rd32(const sym_gopcln *g, uint64_t off, uint32_t *v)
{
    if (off > g->n || g->n - off < 4) return false;
    const uint8_t *p = g->d + off;
    *v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    return true;
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

sym_reason sym_gopcln_resolve(const sym_gopcln *g, uint64_t pc, sym_frames *out)
{
    uint64_t i;
    uint32_t funcoff, f[10]; /* entryOff, nameOff, args, deferreturn, pcsp, pcfile, pcln,
                              * npcdata, cuOffset, startLine */
    if (!g || pc < g->text || !find_func(g, pc - g->text, &i) ||
        !rd32(g, g->ftab + i * 8 + 4, &funcoff))
        return SYM_NO_SYMBOL;
    uint64_t base = g->ftab + funcoff;
    for (int k = 0; k < (g->v120 ? 10 : 9); k++)
        if (!rd32(g, base + (uint64_t)k * 4, &f[k])) return SYM_NO_SYMBOL;
    const char *name = cstr(g, g->funcname, f[1]);
    if (!name || !name[0]) return SYM_NO_SYMBOL;
    uint64_t entry = g->text + f[0];
    int32_t fileno, line;
    const char *file = pcvalue(g, f[5], entry, pc, &fileno) ? file_of(g, f[8], fileno) : NULL;
    bool has_line = pcvalue(g, f[6], entry, pc, &line);
    out->f = pc_xcalloc(1, sizeof *out->f);
    out->n = 1;
    sym_frame *fr = &out->f[0];
    fr->name = pc_xstrdup(name);
    fr->system_name = pc_xstrdup(name);
    fr->file = file && file[0] ? pc_xstrdup(file) : NULL;
    fr->line = has_line && line > 0 ? line : 0;
    fr->start_line = g->v120 && (int32_t)f[9] > 0 ? (int32_t)f[9] : 0;
    return SYM_OK;
}
