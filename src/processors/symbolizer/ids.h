/* The build ids a mapping may carry (../shared/spec/symbolization.md §1.5) and reading them from
 * a local ELF file: the GNU build id note, the Go build id note and the htlhash of the file's
 * bytes. Ids from the wire are checked here before they are compared or reach a path. */
#ifndef PC_SYMBOLIZER_IDS_H
#define PC_SYMBOLIZER_IDS_H

#include <stdbool.h>
#include <stddef.h>

enum { SYM_GNU_MAX = 520, SYM_GO_MAX = 256, SYM_HTL_LEN = 32 };

/* "" for an id the file does not have. */
typedef struct sym_ids {
    char gnu[SYM_GNU_MAX], go[SYM_GO_MAX], htl[SYM_HTL_LEN + 1];
} sym_ids;

/* Every id of an ELF file; -1 when it is no readable ELF. */
int sym_read_ids(const char *path, sym_ids *out);

/* The htlhash of a file as 32 lower-case hex digits (0), or -1. */
int sym_htlhash(const char *path, char hex[SYM_HTL_LEN + 1]);

/* A GNU build id or htlhash from the wire as lower-case hex of even length, 2 to cap-1 digits
 * (an htlhash: exactly 32); false for anything else. */
bool sym_clean_hex(const char *in, char *out, size_t cap);

/* A Go build id from the wire (`go tool buildid`'s output: base64-like parts joined by '/'),
 * copied when it has only those characters and fits; false for anything else. */
bool sym_clean_go_id(const char *in, char *out, size_t cap);

#endif
