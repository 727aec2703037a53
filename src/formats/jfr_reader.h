/* The JFR (Java Flight Recorder) container decoder (spec/jfr.md §2): a recording's chunks, their
 * metadata, constant pools and events, read from hostile input. It knows nothing of what the
 * events mean: the caller (jfr.c, Pyroscope's mapping) names the event types it wants and the
 * fields to bind, gets each such event's bound fields through a callback, and resolves what they
 * refer to with the pool lookups here. Private to src/formats/jfr*.c; what the rest of the code
 * sees is jfr.h.
 *
 * Memory: tables are malloc'd and charged to the budget as they grow (jfr_vgrow, jfr_umap_put);
 * values are positions in the input, read when needed. Errors set e: PC_EBADMSG for a recording
 * that cannot be decoded (the message names the offset), PC_E2BIG over a limit or the budget. */
#ifndef PC_FORMATS_JFR_READER_H
#define PC_FORMATS_JFR_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/budget.h"
#include "base/err.h"

/* Fixed caps on nesting (real recordings: values 3 deep, the metadata tree 5). */
#define PC_JFR_MAX_VALUE_DEPTH    32
#define PC_JFR_MAX_METADATA_DEPTH 16

#define JFR_MAX_EVENTS 16 /* event types a caller may ask for */
#define JFR_MAX_SLOTS  32 /* fields an event may bind (a bit each in a uint32_t) */

/* ---- types of the metadata ---- */

enum { K_STRUCT, K_BOOL, K_BYTE, K_VARINT, K_FLOAT, K_DOUBLE, K_STRING };

typedef struct jtype {
    uint64_t id;
    const char *name;
    uint32_t first_field, n_fields;
    uint8_t kind;
    uint8_t zero_width; /* learned: a value of it reads no bytes (only fields that read none) */
    int8_t pool;        /* P_* when its constant pool is indexed, else -1 */
} jtype;

typedef struct jfield {
    const char *name;
    uint64_t type_id;
    int32_t type; /* index in the types; -1: the metadata does not define it */
    uint8_t cpool, array;
} jfield;

/* Constant pools that are indexed (every other pool is read and skipped). */
enum { P_STACK, P_METHOD, P_CLASS, P_SYMBOL, P_STATE, P_FTYPE, P_STRING, P_COUNT };

/* ---- field bindings: which fields of a type are read, into which slot ---- */

enum { B_U64, B_REF, B_STR, B_ARRAY };

typedef struct bind_spec {
    const char *field;
    uint8_t slot, kind;
    const char *type; /* B_REF: the referenced pool type; B_ARRAY: the element type */
} bind_spec;

typedef struct plan {
    int32_t type; /* -1: the type is not in this chunk's metadata (nothing is read) */
    uint32_t bound;
    int8_t *slot; /* per field: the slot, or -1 (skipped) */
    uint8_t *kind;
} plan;

/* ---- small containers, charged to the budget ---- */

typedef struct umap { /* u64 key -> u32 value, open addressing */
    uint64_t *keys;
    uint32_t *vals; /* value + 1; 0: empty slot */
    size_t cap, n;
} umap;

typedef struct sbuf {
    char *p;
    size_t len, cap;
} sbuf;

typedef struct pentry {
    uint64_t pos; /* where the entry's value starts in the input */
    int32_t cache;
    int32_t done; /* cache is set */
} pentry;

typedef struct pool {
    umap map;
    pentry *v;
    size_t n, cap;
} pool;

/* What a chunk's values are read with. */
typedef struct chunk {
    size_t cstart, cend;
    uint64_t ticks_per_sec;
    pc_arena *ca;
    jtype *types;
    size_t ntypes, types_cap;
    jfield *fields;
    size_t nfields, fields_cap;
    umap tmap; /* type id -> index */
    pool pools[P_COUNT];
    plan pplan[P_COUNT];
    plan frame_plan;
    bool ev_have[JFR_MAX_EVENTS];
    uint64_t ev_id[JFR_MAX_EVENTS];
    plan ev_plan[JFR_MAX_EVENTS];
    size_t entries;
} chunk;

/* The event types a caller reads: names[k] binds the fields of spec whose slot bits are in
 * slots[k]; on_event gets each event of type k with slots (positions of strings, values of
 * numbers and references) and bound (the bits of the slots the type has). Non-zero stops the
 * read with that code. */
typedef struct jfr_events {
    size_t n; /* <= JFR_MAX_EVENTS */
    const char *const *names;
    const bind_spec *spec;
    const uint32_t *slots;
    int (*on_event)(void *ud, int type, const uint64_t *slots, uint32_t bound);
    void *ud;
} jfr_events;

typedef struct jfr_reader {
    /* set by the caller, zeroed otherwise */
    pc_budget *budget; /* or NULL */
    pc_error *e;
    size_t max_chunks, max_depth, max_mstrings, max_elements, max_entries;
    /* counts */
    uint64_t chunks, skipped_events; /* records of event types not asked for */
    /* state */
    const uint8_t *buf;
    size_t len;
    const jfr_events *ev;
    uint64_t work, max_work;
    size_t charged; /* bytes of malloc'd tables charged to the budget */
    sbuf s1, fix;   /* scratch */
    chunk *c;       /* the chunk being decoded: its pools stay readable during on_event */
} jfr_reader;

/* Read the recording data[0..len) (a concatenation of chunks), calling ev->on_event per event of
 * the types asked for. 0, or the first error (e set). */
int jfr_read(jfr_reader *d, const uint8_t *data, size_t len, const jfr_events *ev);
/* Free the reader's scratch (its chunk is freed by jfr_read). */
void jfr_reader_free(jfr_reader *d);

/* Errors: "offset off: ..." with code; the budget's refusal. */
int jfr_at(jfr_reader *d, int code, size_t off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int jfr_budget_error(jfr_reader *d);

/* Memory charged to the budget (jfr_util.c): n bytes more or fewer held; grow *p to hold need
 * elements of elem bytes; free it. */
void jfr_charge(jfr_reader *d, size_t n);
void jfr_uncharge(jfr_reader *d, size_t n);
void *jfr_vgrow(jfr_reader *d, void *p, size_t *cap, size_t need, size_t elem);
void jfr_vfree(jfr_reader *d, void *p, size_t cap, size_t elem);
/* u64 -> u32 hash map: the value, or UINT32_MAX; insert (replacing only if replace); free. */
uint32_t jfr_umap_get(const umap *m, uint64_t k);
void jfr_umap_put(jfr_reader *d, umap *m, uint64_t k, uint32_t v, bool replace);
void jfr_umap_free(jfr_reader *d, umap *m);
/* Room for extra more bytes (and a NUL) after b->len; append s[0..n). */
char *jfr_sb_room(jfr_reader *d, sbuf *b, size_t extra);
void jfr_sb_put(jfr_reader *d, sbuf *b, const char *s, size_t n);

/* Reading the chunk being decoded (d->c), between *pos and end. */
int jfr_rd_varint(jfr_reader *d, size_t *pos, size_t end, uint64_t *out);
/* The string at *pos: skipped when s is NULL; else *s, *n = its text (into the input, or into sb
 * for the converted encodings); *s = NULL for the null string and a key missing from the string
 * pool. pooled: read through a pool reference (may not refer to the pool again). */
int jfr_rd_string(jfr_reader *d, size_t *pos, size_t end, sbuf *sb, const char **s, size_t *n,
                  bool pooled);
/* s[0..n) as valid UTF-8 (invalid sequences replaced by U+FFFD), in d->fix when changed. */
const char *jfr_utf8_fixed(jfr_reader *d, const char *s, size_t n, size_t *outn);
/* The fields of a value planned by pl, read into slots. */
int jfr_read_fields(jfr_reader *d, const plan *pl, size_t *pos, size_t end, uint64_t *slots);
/* Pool p's entry of key in the chunk, or NULL. */
pentry *jfr_pool_get(jfr_reader *d, int p, uint64_t key);

#endif
