/* The symbolizer's ELF/DWARF side (docs/symbolization.md): one opened object (a split debug file
 * or an ELF with symbols, reported to libdwfl at its own addresses) answers "which functions,
 * files and lines are at this ELF address", inline chain included, innermost first; the
 * executable's PT_LOAD headers turn a mapping's address into that ELF address. libdw is not
 * thread-safe: callers serialize every call on one object. */
#ifndef PC_SYMBOLIZER_RESOLVER_H
#define PC_SYMBOLIZER_RESOLVER_H

#include <stddef.h>
#include <stdint.h>

/* Why a location stays unsymbolized (the index of its counter). */
typedef enum {
    SYM_OK = 0,
    SYM_NO_FILE,     /* no debug file or ELF for the build id or file name */
    SYM_BAD_FILE,    /* found, but not an ELF libdwfl can read */
    SYM_NO_SEGMENT,  /* the address is in no PT_LOAD of the ELF */
    SYM_NO_SYMBOL,   /* neither DWARF nor the symbol table covers the address */
    SYM_BAD_ID,      /* a build id that is not lower-case hex of even length */
    SYM_FETCH_WAIT,  /* debuginfod still fetching when the wait ran out */
    SYM_FETCH_ERROR, /* debuginfod failed (down, 404, timeout, breaker open) */
    SYM_TOO_LARGE,   /* a server announced a file above debuginfod.max_size */
    SYM_N_REASONS
} sym_reason;

/* One frame: name demangled, system_name as in the binary (mangled), file and line of the
 * frame's own position (for an outer frame: the call site of the frame inside it). */
typedef struct sym_frame {
    char *name, *system_name, *file;
    int64_t line, column, start_line;
} sym_frame;

typedef struct sym_frames {
    size_t n;
    sym_frame *f; /* innermost first; the last is the function not inlined */
} sym_frames;

void sym_frames_free(sym_frames *fr);
sym_frames *sym_frames_dup(const sym_frames *fr);

typedef struct sym_elf sym_elf;

/* Open the object whose DWARF and symbols to read (path) and, when known, the executable whose
 * program headers place its segments in the file (exec_path; a split debug file's own PT_LOADs
 * have no file offsets). NULL with *why set on failure. */
sym_elf *sym_elf_open(const char *path, const char *exec_path, sym_reason *why);
void sym_elf_close(void *e);

/* A mapping's address -> the ELF virtual address (docs/symbolization.md §2.3). */
typedef struct sym_mapping {
    uint64_t start, limit, file_offset;
} sym_mapping;
sym_reason sym_elf_normalize(const sym_elf *e, const sym_mapping *m, uint64_t addr,
                             uint64_t *vaddr);

/* Resolve an ELF virtual address: DWARF lines and inline chain, else the symbol table. */
sym_reason sym_elf_resolve(sym_elf *e, uint64_t vaddr, sym_frames *out);

/* The GNU build id of an ELF file as lower-case hex (0), or -1. */
int sym_read_build_id(const char *path, char *hex, size_t cap);

/* A C++ or Rust symbol demangled (malloc'd), or NULL when it is not mangled. */
char *sym_demangle(const char *name);

#endif
