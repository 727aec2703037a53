/* The persistent queue's files (sending_queue::storage), apart from the sender's queue, retry and
 * merge logic: one record per request in a directory, named by its sequence number. A record is
 * written as <seq>.tmp, then renamed <seq>.pcq; one that cannot be read back is set aside as
 * <seq>.corrupt. Layout: a 24-byte header (magic naming the signal, item count, metadata and
 * payload lengths, CRC-32 of both), the metadata as "key\tvalue\n" lines, the request as
 * protobuf. The calls block on the disk: the sender makes them on the thread pool, or at start. */
#ifndef PC_SDK_QUEUE_FILE_H
#define PC_SDK_QUEUE_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "pdata/pdata.h"

/* Create dir and its parents (0700). 0, or PC_EIO with errno set. */
int pc_qfile_mkdirs(const char *dir);
/* Write b (sig, items of the signal, metadata lines or NULL) as record seq of dir durably: a
 * temporary file, fsync, rename, fsync of the directory. 0, or PC_EIO with why in err. */
int pc_qfile_write(const char *dir, uint64_t seq, const pc_batch *b, pc_signal sig, size_t items,
                   const char *meta, pc_error *err);
/* Read record seq back into a new batch with its metadata. 0, or PC_EIO (unreadable) or PC_EINVAL
 * (torn or corrupt) with why in err. */
int pc_qfile_read(const char *dir, uint64_t seq, pc_signal *sig, pc_batch **out, pc_error *err);

/* The records of dir, oldest first (*seqs malloc'd); the temporary file of a write that never
 * completed (never acknowledged) is removed. 0, or PC_EIO with errno set. */
int pc_qfile_list(const char *dir, uint64_t **seqs, size_t *n);
/* What record seq's header says, read without its payload (a record too short for a header:
 * profiles, 0 items); meta malloc'd or NULL. */
typedef struct pc_qfile_head {
    pc_signal sig;
    size_t items, bytes; /* bytes: the file's size */
    char *meta;
} pc_qfile_head;
void pc_qfile_peek(const char *dir, uint64_t seq, pc_qfile_head *out);

/* Delete record seq (delivered or given up); a failure is logged for who. */
void pc_qfile_remove(const char *dir, uint64_t seq, const char *who);
/* Keep record seq, unreadable, out of the queue for a person to look at. */
void pc_qfile_set_aside(const char *dir, uint64_t seq);

#endif
