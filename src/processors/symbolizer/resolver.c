/* ELF and DWARF lookups through elfutils' libdwfl/libdw (docs/symbolization.md §3), names
 * demangled by libiberty (§7: the one Debian library that does both C++ and Rust, legacy and v0,
 * as binutils' addr2line -C does). */
#include "resolver.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gelf.h>
#include <libiberty/demangle.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "gopclntab.h"

enum { MAX_SEGS = 16, MAX_FRAMES = 64, PAGE = 4096, MAX_SPANS = 1 << 22 };

typedef struct seg {
    uint64_t offset, vaddr, filesz, memsz;
    bool exec;
} seg;

/* A unit's outermost scopes with code, by address: what scope_chain's walk over the unit's
 * DIEs would test, found once per unit instead of once per lookup (a C++ unit holds thousands
 * of DIEs from its headers; the linear walk was three quarters of a cold lookup). */
typedef struct die_span {
    uint64_t lo, hi; /* [lo, hi): one of the DIE's address ranges */
    uint32_t order;  /* the DIE's place in the walk: of two that hold a pc, the first wins */
    Dwarf_Die die;
} die_span;

typedef struct unit_index {
    Dwarf_Off unit;  /* the unit DIE's offset */
    die_span *v;     /* by lo */
    uint64_t *reach; /* reach[i]: the highest hi of v[0..i], where a search backwards stops */
    size_t n;
    bool linear; /* more than MAX_SPANS (a hostile file): walk the unit as before */
} unit_index;

struct sym_elf {
    Dwfl *dwfl;
    Dwfl_Module *mod;
    unit_index *units; /* by unit offset */
    size_t n_units, cap_units;
    seg segs[MAX_SEGS];
    size_t n_segs;
    sym_gopcln *go; /* the .gopclntab of a Go binary, read at the first lookup DWARF misses */
    bool go_tried;
    bool file_offsets; /* segs come from a file whose code segment has file contents (a split
                        * debug file keeps the headers with no file offsets) */
};

void sym_frames_free(sym_frames *fr)
{
    if (!fr) return;
    for (size_t i = 0; i < fr->n; i++) {
        free(fr->f[i].name);
        free(fr->f[i].system_name);
        free(fr->f[i].file);
    }
    free(fr->f);
    fr->f = NULL;
    fr->n = 0;
}

static char *dup_or_null(const char *s)
{
    return s ? pc_xstrdup(s) : NULL;
}

sym_frames *sym_frames_dup(const sym_frames *fr)
{
    sym_frames *out = pc_xcalloc(1, sizeof *out);
    out->n = fr->n;
    out->f = pc_xcalloc(fr->n ? fr->n : 1, sizeof *out->f);
    for (size_t i = 0; i < fr->n; i++) {
        out->f[i] = fr->f[i];
        out->f[i].name = dup_or_null(fr->f[i].name);
        out->f[i].system_name = dup_or_null(fr->f[i].system_name);
        out->f[i].file = dup_or_null(fr->f[i].file);
    }
    return out;
}

char *sym_demangle(const char *name)
{
    if (!name || !name[0]) return NULL;
    /* DMGL_PARAMS | DMGL_ANSI: what addr2line -C asks of the same library */
    return cplus_demangle(name, DMGL_PARAMS | DMGL_ANSI);
}

/* ---- ELF headers ---------------------------------------------------------------------- */

static void read_segs(sym_elf *e, Elf *elf)
{
    size_t n;
    if (elf_getphdrnum(elf, &n) != 0) return;
    bool any_file = false;
    for (size_t i = 0; i < n && e->n_segs < MAX_SEGS; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD) continue;
        e->segs[e->n_segs++] = (seg){.offset = ph.p_offset,
                                     .vaddr = ph.p_vaddr,
                                     .filesz = ph.p_filesz,
                                     .memsz = ph.p_memsz,
                                     .exec = (ph.p_flags & PF_X) != 0};
        if (ph.p_filesz && (ph.p_flags & PF_X)) any_file = true;
    }
    e->file_offsets = any_file;
}

static int segs_from_file(sym_elf *e, const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    int rc = elf && elf_kind(elf) == ELF_K_ELF ? 0 : -1;
    if (rc == 0) read_segs(e, elf);
    if (elf) elf_end(elf);
    close(fd);
    return rc;
}

int sym_read_build_id(const char *path, char *hex, size_t cap)
{
    elf_version(EV_CURRENT);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    const void *id = NULL;
    ssize_t n = elf ? dwelf_elf_gnu_build_id(elf, &id) : -1;
    int rc = -1;
    if (n > 0 && (size_t)n * 2 < cap) {
        for (ssize_t i = 0; i < n; i++) {
            static const char digits[] = "0123456789abcdef";
            hex[2 * i] = digits[((const unsigned char *)id)[i] >> 4];
            hex[2 * i + 1] = digits[((const unsigned char *)id)[i] & 15];
        }
        hex[2 * n] = 0;
        rc = 0;
    }
    if (elf) elf_end(elf);
    close(fd);
    return rc;
}

/* ---- opening --------------------------------------------------------------------------- */

/* Never search: the symbolizer found the file itself (no debuglink, no debuginfod behind our
 * back through $DEBUGINFOD_URLS). */
static int no_debuginfo(Dwfl_Module *m, void **u, const char *mn, Dwarf_Addr a, const char *f,
                        const char *dl, GElf_Word crc, char **name)
{
    (void)m, (void)u, (void)mn, (void)a, (void)f, (void)dl, (void)crc, (void)name;
    return -1;
}

static const Dwfl_Callbacks callbacks = {
    .find_debuginfo = no_debuginfo,
    .section_address = dwfl_offline_section_address,
};

sym_elf *sym_elf_open(const char *path, const char *exec_path, sym_reason *why)
{
    elf_version(EV_CURRENT);
    sym_elf *e = pc_xcalloc(1, sizeof *e);
    *why = SYM_BAD_FILE;
    if (segs_from_file(e, path) < 0) goto fail;
    if (exec_path && !e->file_offsets) {
        sym_elf probe = {0};
        if (segs_from_file(&probe, exec_path) == 0 && probe.file_offsets) {
            memcpy(e->segs, probe.segs, sizeof e->segs);
            e->n_segs = probe.n_segs;
            e->file_offsets = true;
        }
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) goto fail;
    e->dwfl = dwfl_begin(&callbacks);
    if (!e->dwfl) {
        close(fd);
        goto fail;
    }
    dwfl_report_begin(e->dwfl);
    /* base 0, add_p_vaddr: the module sits at its own ELF addresses (bias 0 for ET_DYN) */
    e->mod = dwfl_report_elf(e->dwfl, "sym", path, fd, 0, true); /* takes fd */
    dwfl_report_end(e->dwfl, NULL, NULL);
    if (!e->mod) goto fail;
    return e;
fail:
    sym_elf_close(e);
    return NULL;
}

void sym_elf_close(void *p)
{
    sym_elf *e = p;
    if (!e) return;
    sym_gopcln_free(e->go);
    if (e->dwfl) dwfl_end(e->dwfl); /* after go: its bytes are the Elf's */
    for (size_t i = 0; i < e->n_units; i++) {
        free(e->units[i].v);
        free(e->units[i].reach);
    }
    free(e->units);
    free(e);
}

/* ---- addresses ------------------------------------------------------------------------- */

sym_reason sym_elf_normalize(const sym_elf *e, const sym_mapping *m, uint64_t addr, uint64_t *vaddr)
{
    /* a mapping of zeros says the address is already the ELF's own */
    if (m->start == 0 && m->file_offset == 0 && (m->limit == 0 || m->limit == UINT64_MAX)) {
        *vaddr = addr;
        return SYM_OK;
    }
    if (e->file_offsets) {
        const seg *hit = NULL;
        for (int pass = 0; pass < 2 && !hit; pass++)
            for (size_t i = 0; i < e->n_segs && !hit; i++) {
                const seg *s = &e->segs[i];
                uint64_t lo = s->offset & ~(uint64_t)(PAGE - 1);
                if ((pass || s->exec) && lo <= m->file_offset &&
                    m->file_offset < s->offset + s->filesz)
                    hit = s;
            }
        if (!hit) return SYM_NO_SEGMENT;
        uint64_t base = m->start - m->file_offset + hit->offset - hit->vaddr;
        *vaddr = addr - base;
        return SYM_OK;
    }
    /* Only a split debug file's headers (no file offsets): the address is taken as an ELF
     * address (the eBPF profiler's) when an executable segment holds it. */
    for (size_t i = 0; i < e->n_segs; i++) {
        const seg *s = &e->segs[i];
        if (s->exec && addr >= s->vaddr && addr - s->vaddr < s->memsz) {
            *vaddr = addr;
            return SYM_OK;
        }
    }
    return SYM_NO_SEGMENT;
}

/* ---- DWARF ----------------------------------------------------------------------------- */

static const char *die_string(Dwarf_Die *die, int at)
{
    Dwarf_Attribute a;
    return dwarf_attr_integrate(die, at, &a) ? dwarf_formstring(&a) : NULL;
}

static sym_frame *push_frame(sym_frames *out, const char *sysname)
{
    if (out->n == 0) out->f = pc_xcalloc(MAX_FRAMES, sizeof *out->f);
    sym_frame *f = &out->f[out->n++];
    memset(f, 0, sizeof *f);
    f->system_name = sysname ? pc_xstrdup(sysname) : NULL;
    char *dm = sym_demangle(sysname);
    f->name = dm ? dm : (sysname ? pc_xstrdup(sysname) : NULL);
    return f;
}

/* The function a scope DIE names: its linkage name (mangled) when it has one, as addr2line. */
static sym_frame *die_frame(sym_frames *out, Dwarf_Die *die)
{
    const char *n = die_string(die, DW_AT_linkage_name);
    if (!n) n = die_string(die, DW_AT_MIPS_linkage_name);
    if (!n) n = die_string(die, DW_AT_name);
    sym_frame *f = push_frame(out, n ? n : "??");
    int line;
    if (dwarf_decl_line(die, &line) == 0) f->start_line = line;
    return f;
}

static const char *call_file(Dwarf_Die *die)
{
    Dwarf_Attribute a;
    Dwarf_Word idx;
    Dwarf_Die cu;
    Dwarf_Files *files;
    size_t nfiles;
    if (!dwarf_attr(die, DW_AT_call_file, &a) || dwarf_formudata(&a, &idx) != 0) return NULL;
    if (!dwarf_diecu(die, &cu, NULL, NULL) || dwarf_getsrcfiles(&cu, &files, &nfiles) != 0)
        return NULL;
    return idx < nfiles ? dwarf_filesrc(files, idx, NULL, NULL) : NULL;
}

static int64_t die_int(Dwarf_Die *die, int at)
{
    Dwarf_Attribute a;
    Dwarf_Word v;
    return dwarf_attr(die, at, &a) && dwarf_formudata(&a, &v) == 0 ? (int64_t)v : 0;
}

/* Walk the scopes out from the innermost: each inlined subroutine is a frame whose position is
 * the line table's (innermost) or the call site recorded in the frame inside it. */
/* A source path as addr2line shows it: a relative one joined to the unit's DW_AT_comp_dir. */
static char *full_path(const char *comp_dir, const char *file)
{
    if (!file) return NULL;
    if (file[0] == '/' || !comp_dir || !comp_dir[0]) return pc_xstrdup(file);
    size_t a = strlen(comp_dir), b = strlen(file);
    char *out = pc_xmalloc(a + b + 2);
    memcpy(out, comp_dir, a);
    out[a] = '/';
    memcpy(out + a + 1, file, b + 1);
    return out;
}

static void walk_scopes(Dwarf_Die *scopes, int n, const char *comp_dir, const char *file, int line,
                        int col, sym_frames *out)
{
    const char *cur_file = file;
    int64_t cur_line = line, cur_col = col;
    for (int i = 0; i < n && out->n < MAX_FRAMES; i++) {
        int tag = dwarf_tag(&scopes[i]);
        if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram) continue;
        sym_frame *f = die_frame(out, &scopes[i]);
        f->file = full_path(comp_dir, cur_file);
        f->line = cur_line;
        f->column = cur_col;
        if (tag == DW_TAG_subprogram) break;
        cur_file = call_file(&scopes[i]);
        cur_line = die_int(&scopes[i], DW_AT_call_line);
        cur_col = die_int(&scopes[i], DW_AT_call_column);
    }
}

/* The chain of scopes holding pc below die, outermost first, into chain[depth..]; returns the new
 * depth. Our own walk rather than dwarf_getscopes, which finds nothing for some of rustc's
 * monomorphized functions (a subprogram under namespaces whose inlined callees come from other
 * units) where binutils' addr2line does. Types and namespaces have no pc: they are searched. */
static int scope_chain(Dwarf_Die *die, Dwarf_Addr pc, Dwarf_Die *chain, int depth, int level)
{
    Dwarf_Die child;
    /* level: nesting of any kind, bounded against a hostile file's DIE tree */
    if (depth >= MAX_FRAMES || level > 256 || dwarf_child(die, &child) != 0) return depth;
    do {
        switch (dwarf_tag(&child)) {
        case DW_TAG_subprogram:
        case DW_TAG_inlined_subroutine:
        case DW_TAG_lexical_block:
            if (dwarf_haspc(&child, pc) == 1) {
                chain[depth] = child;
                return scope_chain(&chain[depth], pc, chain, depth + 1, level + 1);
            }
            break;
        case DW_TAG_namespace:
        case DW_TAG_module:
        case DW_TAG_structure_type:
        case DW_TAG_class_type:
        case DW_TAG_union_type: {
            int d = scope_chain(&child, pc, chain, depth, level + 1);
            if (d > depth) return d;
            break;
        }
        default: break;
        }
    } while (dwarf_siblingof(&child, &child) == 0);
    return depth;
}

/* The unit holding vaddr. libdw 0.188 finds it through .debug_aranges only, which clang does not
 * emit by default; without a hit every unit's ranges are asked (linear, and cached above). */
static Dwarf_Die *unit_at(sym_elf *e, uint64_t vaddr, Dwarf_Addr *bias)
{
    Dwarf_Die *cu = dwfl_module_addrdie(e->mod, vaddr, bias);
    if (cu) return cu;
    Dwarf_Addr b = 0;
    while ((cu = dwfl_module_nextcu(e->mod, cu, &b)) != NULL)
        if (dwarf_haspc(cu, vaddr - b) == 1) {
            *bias = b;
            return cu;
        }
    return NULL;
}

typedef struct span_list {
    die_span *v;
    size_t n, cap;
    uint32_t order;
    bool full;
} span_list;

/* Every range of every DIE scope_chain would test at its first level, in its order. */
static void collect_spans(Dwarf_Die *die, span_list *l, int level)
{
    Dwarf_Die child;
    if (l->full || level > 256 || dwarf_child(die, &child) != 0) return;
    do {
        switch (dwarf_tag(&child)) {
        case DW_TAG_subprogram:
        case DW_TAG_inlined_subroutine:
        case DW_TAG_lexical_block: {
            uint32_t order = l->order++;
            Dwarf_Addr base, lo, hi;
            ptrdiff_t off = 0;
            while ((off = dwarf_ranges(&child, off, &base, &lo, &hi)) > 0) {
                if (l->n == MAX_SPANS) {
                    l->full = true;
                    return;
                }
                if (l->n == l->cap) {
                    l->cap = l->cap ? 2 * l->cap : 256;
                    l->v = pc_xrealloc(l->v, l->cap * sizeof *l->v);
                }
                l->v[l->n++] = (die_span){.lo = lo, .hi = hi, .order = order, .die = child};
            }
            break;
        }
        case DW_TAG_namespace:
        case DW_TAG_module:
        case DW_TAG_structure_type:
        case DW_TAG_class_type:
        case DW_TAG_union_type: collect_spans(&child, l, level + 1); break;
        default: break;
        }
    } while (dwarf_siblingof(&child, &child) == 0);
}

static int span_cmp(const void *a, const void *b)
{
    const die_span *x = a, *y = b;
    if (x->lo != y->lo) return x->lo < y->lo ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* The index of cu, built at its first lookup. */
static unit_index *unit_index_of(sym_elf *e, Dwarf_Die *cu)
{
    Dwarf_Off off = dwarf_dieoffset(cu);
    size_t lo = 0, hi = e->n_units;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (e->units[mid].unit < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < e->n_units && e->units[lo].unit == off) return &e->units[lo];
    if (e->n_units == e->cap_units) {
        e->cap_units = e->cap_units ? 2 * e->cap_units : 16;
        e->units = pc_xrealloc(e->units, e->cap_units * sizeof *e->units);
    }
    memmove(&e->units[lo + 1], &e->units[lo], (e->n_units - lo) * sizeof *e->units);
    e->n_units++;
    unit_index *u = &e->units[lo];
    span_list l = {0};
    collect_spans(cu, &l, 0);
    *u = (unit_index){.unit = off, .linear = l.full};
    if (l.full) {
        free(l.v);
        return u;
    }
    qsort(l.v, l.n, sizeof *l.v, span_cmp);
    u->v = l.v;
    u->n = l.n;
    u->reach = pc_xmalloc((l.n ? l.n : 1) * sizeof *u->reach);
    for (size_t i = 0; i < l.n; i++)
        u->reach[i] = i && u->reach[i - 1] > l.v[i].hi ? u->reach[i - 1] : l.v[i].hi;
    return u;
}

/* What scope_chain(cu, pc) gives, through the unit's index: of the spans holding pc, the DIE
 * first in the walk, then the scopes inside it. */
static int indexed_chain(sym_elf *e, Dwarf_Die *cu, Dwarf_Addr pc, Dwarf_Die *chain)
{
    unit_index *u = unit_index_of(e, cu);
    if (u->linear) return scope_chain(cu, pc, chain, 0, 0);
    size_t lo = 0, hi = u->n; /* the first span starting after pc */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (u->v[mid].lo <= pc)
            lo = mid + 1;
        else
            hi = mid;
    }
    const die_span *best = NULL;
    for (size_t i = lo; i-- > 0 && u->reach[i] > pc;)
        if (pc < u->v[i].hi && (!best || u->v[i].order < best->order)) best = &u->v[i];
    if (!best) return 0;
    chain[0] = best->die;
    return scope_chain(&chain[0], pc, chain, 1, 1);
}

static void dwarf_frames(sym_elf *e, uint64_t vaddr, sym_frames *out)
{
    Dwarf_Addr bias = 0;
    Dwarf_Die *cu = unit_at(e, vaddr, &bias);
    if (!cu) return;
    const char *file = NULL;
    int line = 0, col = 0;
    Dwarf_Line *l = dwarf_getsrc_die(cu, vaddr - bias);
    if (l) {
        file = dwarf_linesrc(l, NULL, NULL);
        dwarf_lineno(l, &line);
        dwarf_linecol(l, &col);
    }
    Dwarf_Die chain[MAX_FRAMES], inner_first[MAX_FRAMES];
    int n = indexed_chain(e, cu, vaddr - bias, chain);
    for (int i = 0; i < n; i++)
        inner_first[i] = chain[n - 1 - i];
    const char *comp_dir = die_string(cu, DW_AT_comp_dir);
    if (n > 0) walk_scopes(inner_first, n, comp_dir, file, line, col, out);
}

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* The section holding vaddr (allocated, with file contents): its bytes, or NULL. */
static Elf_Data *section_at(Elf *elf, uint64_t vaddr, uint64_t *start)
{
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(elf, scn)) != NULL) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS || !(sh.sh_flags & SHF_ALLOC) ||
            vaddr < sh.sh_addr || vaddr - sh.sh_addr >= sh.sh_size)
            continue;
        Elf_Data *d = elf_rawdata(scn, NULL);
        *start = sh.sh_addr;
        return d && d->d_buf && d->d_size == sh.sh_size ? d : NULL;
    }
    return NULL;
}

/* The addend of the relocation that fills the word at vaddr, in section rela, or 0. */
static uint64_t rela_addend(Elf_Data *rela, size_t n, uint64_t vaddr)
{
    GElf_Rela r;
    for (size_t i = 0; i < n; i++)
        if (gelf_getrela(rela, (int)i, &r) && r.r_offset == vaddr) return (uint64_t)r.r_addend;
    return 0;
}

/* gofunc of a PIE: its moduledata words are relative relocations (r_offset, addend) in the
 * file, so moduledata is the word whose addend is the table and the next one's its funcnametab. */
static uint64_t gofunc_from_rela(Elf *elf, uint64_t pcln_addr, uint64_t names)
{
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(elf, scn)) != NULL) {
        GElf_Shdr sh;
        Elf_Data *d;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA || !sh.sh_entsize ||
            !(d = elf_getdata(scn, NULL)))
            continue;
        size_t n = sh.sh_size / sh.sh_entsize;
        GElf_Rela r;
        int tries = 0; /* candidates checked (each a scan): bounded against a hostile file */
        for (size_t i = 0; i < n && tries < 4; i++) {
            if (!gelf_getrela(d, (int)i, &r) || (uint64_t)r.r_addend != pcln_addr) continue;
            tries++;
            if (rela_addend(d, n, r.r_offset + 8) != pcln_addr + names) continue;
            return rela_addend(d, n, r.r_offset + SYM_GOPCLN_GOFUNC_120);
        }
    }
    return 0;
}

/* Go 1.20+'s inline trees hang off runtime.moduledata.gofunc: moduledata is the writable word
 * pointing at the table followed by the one pointing at its funcnametab (runtime/symtab.go);
 * a PIE's words are zero in the file, filled by relocations (gofunc_from_rela). */
static void go_inline(sym_gopcln *go, Elf *elf, uint64_t pcln_addr)
{
    uint64_t names = sym_gopcln_funcname_offset(go), start = 0;
    Elf_Scn *scn = NULL;
    while (names && (scn = elf_nextscn(elf, scn)) != NULL) {
        GElf_Shdr sh;
        Elf_Data *d;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
            (sh.sh_flags & (SHF_ALLOC | SHF_WRITE)) != (SHF_ALLOC | SHF_WRITE) ||
            !(d = elf_rawdata(scn, NULL)) || !d->d_buf)
            continue;
        const uint8_t *b = d->d_buf;
        for (size_t i = 0; i + SYM_GOPCLN_GOFUNC_120 + 8 <= d->d_size; i += 8) {
            if (le64(b + i) != pcln_addr || le64(b + i + 8) != pcln_addr + names) continue;
            uint64_t gofunc = le64(b + i + SYM_GOPCLN_GOFUNC_120);
            Elf_Data *sec = section_at(elf, gofunc, &start);
            if (sec) sym_gopcln_set_gofunc(go, gofunc, sec->d_buf, sec->d_size, start);
            return;
        }
    }
    uint64_t gofunc = names ? gofunc_from_rela(elf, pcln_addr, names) : 0;
    Elf_Data *sec = gofunc ? section_at(elf, gofunc, &start) : NULL;
    if (sec) sym_gopcln_set_gofunc(go, gofunc, sec->d_buf, sec->d_size, start);
}

/* The module's .gopclntab (by section name, as Go's internal linker writes it), once. */
static sym_gopcln *go_table(sym_elf *e)
{
    if (e->go_tried) return e->go;
    e->go_tried = true;
    GElf_Addr bias;
    Elf *elf = dwfl_module_getelf(e->mod, &bias);
    size_t shstrndx;
    if (!elf || elf_getshdrstrndx(elf, &shstrndx) != 0) return NULL;
    Elf_Scn *scn = NULL;
    Elf_Data *data = NULL;
    uint64_t text = 0, pcln_addr = 0;
    while ((scn = elf_nextscn(elf, scn)) != NULL) {
        GElf_Shdr sh;
        const char *name;
        if (!gelf_getshdr(scn, &sh) || !(name = elf_strptr(elf, shstrndx, sh.sh_name))) continue;
        if (strcmp(name, ".text") == 0) text = sh.sh_addr;
        if (strcmp(name, ".gopclntab") == 0 && sh.sh_type != SHT_NOBITS) {
            data = elf_rawdata(scn, NULL);
            pcln_addr = sh.sh_addr;
        }
    }
    if (data && data->d_buf) e->go = sym_gopcln_open(data->d_buf, data->d_size, text);
    if (e->go) go_inline(e->go, elf, pcln_addr);
    return e->go;
}

sym_reason sym_elf_resolve(sym_elf *e, uint64_t vaddr, sym_frames *out)
{
    out->n = 0;
    out->f = NULL;
    dwarf_frames(e, vaddr, out);
    if (out->n) return SYM_OK;
    /* a Go binary without DWARF (-ldflags=-s -w) keeps .gopclntab: functions, files, lines */
    sym_gopcln *go = go_table(e);
    if (go && sym_gopcln_resolve(go, vaddr, out) == SYM_OK) return SYM_OK;
    GElf_Off off;
    GElf_Sym sym;
    const char *name = dwfl_module_addrinfo(e->mod, vaddr, &off, &sym, NULL, NULL, NULL);
    if (!name || !name[0]) return SYM_NO_SYMBOL;
    push_frame(out, name);
    return SYM_OK;
}
