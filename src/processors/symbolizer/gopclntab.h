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

/* The function at an ELF address, with the file and line of pc (the innermost inlined code's
 * position, as `go tool addr2line` prints it): one frame into out, or SYM_NO_SYMBOL. */
sym_reason sym_gopcln_resolve(const sym_gopcln *g, uint64_t pc, sym_frames *out);

/* Number of functions, and the entry address of function i (for tests and the fuzz target). */
size_t sym_gopcln_count(const sym_gopcln *g);
uint64_t sym_gopcln_entry(const sym_gopcln *g, size_t i);

#endif
