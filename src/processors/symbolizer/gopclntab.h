/* Go's own symbol table, `.gopclntab` (../shared/spec/symbolization.md §5): present even in a Go
 * binary stripped of its symbols and DWARF (`go build -ldflags='-s -w'`). Read from the
 * section's bytes alone, every offset and count bounds-checked: the bytes may come from a
 * debuginfod server. Go 1.18 and later (magic 0xfffffff0, 0xfffffff1), little-endian. */
#ifndef PC_SYMBOLIZER_GOPCLNTAB_H
#define PC_SYMBOLIZER_GOPCLNTAB_H

#include <stddef.h>
#include <stdint.h>

#include "resolver.h"

typedef struct sym_gopcln sym_gopcln;

/* The table over data[0..len) (kept by the caller while the table lives); text: the address of
 * the .text section, for a header whose textStart the linker left 0 (a PIE's, relocated at run
 * time). NULL when the bytes are no table of a supported version. */
sym_gopcln *sym_gopcln_open(const uint8_t *data, size_t len, uint64_t text);
void sym_gopcln_free(sym_gopcln *g);

/* The frames at an ELF address, innermost first, as Go's runtime unwinds inlined calls: with the
 * inline trees (sym_gopcln_set_gofunc) one frame per inlined call, each at its position, and the
 * function itself last; without, that function at the innermost position (what
 * `go tool addr2line` prints). SYM_NO_SYMBOL when no function holds pc. */
sym_reason sym_gopcln_resolve(const sym_gopcln *g, uint64_t pc, sym_frames *out);

/* Go 1.20+'s inline trees (FUNCDATA_InlTree) sit at offsets from the module's gofunc address
 * (runtime.moduledata.gofunc), outside the table: the resolver finds moduledata (the word
 * pointing at the table, ptr_vaddr + 8 pointing at its funcnametab), passes the word at
 * SYM_GOPCLN_GOFUNC_120 bytes from it, and the bytes of the section holding gofunc at vaddr.
 * Without it every location has one frame. */
enum { SYM_GOPCLN_GOFUNC_120 = 320 };
void sym_gopcln_set_gofunc(sym_gopcln *g, uint64_t gofunc, const uint8_t *sec, size_t len,
                           uint64_t vaddr);
/* Offset of funcnametab from the table's start; 0 for a table of Go before 1.20 (no inlines). */
uint64_t sym_gopcln_funcname_offset(const sym_gopcln *g);

/* Number of functions, and the entry address of function i (for tests and the fuzz target). */
size_t sym_gopcln_count(const sym_gopcln *g);
uint64_t sym_gopcln_entry(const sym_gopcln *g, size_t i);

#endif
