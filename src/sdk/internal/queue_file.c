/* The persistent queue's files (queue_file.h). */
#include "sdk/internal/queue_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "base/alloc.h"
#include "base/log.h"

#define REC_HEADER 24 /* magic 4, items 8, meta_len 4, payload_len 4, crc 4 */
/* The magic names the signal of the payload ("PCQ1", profiles, as before signals existed). */
static const char rec_magic[PC_SIGNAL_COUNT][5] = {"PCQ1", "PCQT", "PCQM", "PCQL"};

static int rec_signal(const uint8_t *h, pc_signal *sig)
{
    for (int i = 0; i < PC_SIGNAL_COUNT; i++)
        if (!memcmp(h, rec_magic[i], 4)) {
            *sig = (pc_signal)i;
            return 0;
        }
    return PC_EINVAL;
}

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get_u64(const uint8_t *p)
{
    return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
}

static void record_path(const char *dir, uint64_t seq, const char *ext, char *out, size_t n)
{
    snprintf(out, n, "%s/%020llu.%s", dir, (unsigned long long)seq, ext);
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return PC_EIO;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int pc_qfile_mkdirs(const char *path)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0700) && errno != EEXIST) return PC_EIO;
        *p = '/';
    }
    return mkdir(tmp, 0700) && errno != EEXIST ? PC_EIO : 0;
}

/* The file tmp holds the record: make it the record fin, the rename durable too. */
static int publish(const char *dir, const char *tmp, const char *fin, pc_error *err)
{
    if (rename(tmp, fin)) {
        pc_error_set(err, PC_EIO, "cannot rename %.180s: %s", tmp, strerror(errno));
        unlink(tmp);
        return PC_EIO;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd); /* the rename itself must survive a crash */
        close(dfd);
    }
    return 0;
}

int pc_qfile_write(const char *dir, uint64_t seq, const pc_batch *b, pc_signal sig, size_t items,
                   const char *meta_lines, pc_error *err)
{
    pc_buf payload = {0}, meta = {0};
    size_t wire_len = 0;
    const uint8_t *wire = pc_batch_is_wire(b) ? pc_batch_wire_bytes(b, &wire_len) : NULL;
    if (wire) /* a request only checked on the wire: its bytes are its encoding */
        pc_buf_append(&payload, wire, wire_len);
    else
        pc_batch_encode_proto(b, &payload);
    if (meta_lines) pc_buf_append(&meta, meta_lines, strlen(meta_lines));
    uint8_t h[REC_HEADER];
    memcpy(h, rec_magic[sig], 4);
    put_u64(h + 4, items);
    put_u32(h + 12, (uint32_t)meta.len);
    put_u32(h + 16, (uint32_t)payload.len);
    uLong crc = crc32(0, meta.data ? meta.data : (const Bytef *)"", (uInt)meta.len);
    crc = crc32(crc, payload.data ? payload.data : (const Bytef *)"", (uInt)payload.len);
    put_u32(h + 20, (uint32_t)crc);
    char tmp[4200], fin[4200];
    record_path(dir, seq, "tmp", tmp, sizeof tmp);
    record_path(dir, seq, "pcq", fin, sizeof fin);
    int rc, fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || write_all(fd, h, sizeof h) || write_all(fd, meta.data, meta.len) ||
        write_all(fd, payload.data, payload.len) || fsync(fd)) {
        rc = pc_error_set(err, PC_EIO, "cannot write %.180s: %s", tmp,
                          strerror(errno ? errno : EIO));
        if (fd >= 0) close(fd);
        unlink(tmp);
    } else {
        close(fd);
        rc = publish(dir, tmp, fin, err);
    }
    pc_buf_free(&payload);
    pc_buf_free(&meta);
    return rc;
}

/* "key\tvalue\n" lines onto b's metadata. */
static void set_meta(pc_batch *b, const uint8_t *p, const uint8_t *e)
{
    while (p < e) {
        const uint8_t *nl = memchr(p, '\n', (size_t)(e - p)), *tab;
        if (!nl) break;
        if ((tab = memchr(p, '\t', (size_t)(nl - p)))) {
            char k[128], v[512];
            snprintf(k, sizeof k, "%.*s", (int)(tab - p), (const char *)p);
            snprintf(v, sizeof v, "%.*s", (int)(nl - tab - 1), (const char *)tab + 1);
            pc_batch_set_meta(b, k, v);
        }
        p = nl + 1;
    }
}

/* A whole record in b: check it, decode it into *out. */
static int parse_record(const char *path, const pc_buf *b, pc_signal *sig, pc_batch **out,
                        pc_error *err)
{
    if (b->len < REC_HEADER || rec_signal(b->data, sig) < 0)
        return pc_error_set(err, PC_EINVAL, "%.180s: not a queue record (torn write?)", path);
    uint32_t ml = get_u32(b->data + 12), pl = get_u32(b->data + 16), crc = get_u32(b->data + 20);
    if ((uint64_t)REC_HEADER + ml + pl != b->len)
        return pc_error_set(err, PC_EINVAL, "%.180s: truncated record", path);
    const uint8_t *meta = b->data + REC_HEADER, *payload = meta + ml;
    uLong c = crc32(crc32(0, meta, ml), payload, pl);
    if ((uint32_t)c != crc) return pc_error_set(err, PC_EINVAL, "%.180s: checksum mismatch", path);
    pc_error derr = {0};
    if (pc_batch_decode(*sig, payload, pl, false, NULL, out, &derr) < 0)
        return pc_error_set(err, PC_EINVAL, "%.180s: %.60s", path, derr.msg);
    set_meta(*out, meta, payload);
    return 0;
}

int pc_qfile_read(const char *dir, uint64_t seq, pc_signal *sig, pc_batch **out, pc_error *err)
{
    char path[4200];
    record_path(dir, seq, "pcq", path, sizeof path);
    FILE *f = fopen(path, "rb");
    if (!f) return pc_error_set(err, PC_EIO, "cannot read %.180s: %s", path, strerror(errno));
    pc_buf b = {0};
    uint8_t chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        pc_buf_append(&b, chunk, n);
    fclose(f);
    int rc = parse_record(path, &b, sig, out, err);
    pc_buf_free(&b);
    return rc;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int pc_qfile_list(const char *dir, uint64_t **out, size_t *count)
{
    DIR *d = opendir(dir);
    if (!d) return PC_EIO;
    uint64_t *seqs = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        unsigned long long seq;
        char ext[16];
        if (sscanf(e->d_name, "%20llu.%15s", &seq, ext) != 2 || seq == 0) continue;
        if (!strcmp(ext, "tmp")) { /* a write that never completed was never acknowledged */
            char p[4200];
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
            continue;
        }
        if (strcmp(ext, "pcq") != 0) continue;
        if (n == cap) seqs = pc_xrealloc(seqs, (cap = cap ? cap * 2 : 64) * sizeof(uint64_t));
        seqs[n++] = seq;
    }
    closedir(d);
    if (n) qsort(seqs, n, sizeof(uint64_t), cmp_u64); /* qsort(NULL, 0) is UB */
    *out = seqs;
    *count = n;
    return 0;
}

void pc_qfile_peek(const char *dir, uint64_t seq, pc_qfile_head *out)
{
    char path[4200];
    uint8_t h[REC_HEADER];
    record_path(dir, seq, "pcq", path, sizeof path);
    *out = (pc_qfile_head){0};
    FILE *f = fopen(path, "rb");
    size_t got = f ? fread(h, 1, sizeof h, f) : 0;
    struct stat st;
    out->bytes = f && fstat(fileno(f), &st) == 0 ? (size_t)st.st_size : 0;
    if (f) fclose(f);
    out->items = got == sizeof h && rec_signal(h, &out->sig) == 0 ? (size_t)get_u64(h + 4) : 0;
    uint32_t ml = got == sizeof h ? get_u32(h + 12) : 0;
    if (f && ml && ml < (1u << 20)) { /* the metadata lines follow the header */
        FILE *mf = fopen(path, "rb");
        char *m = pc_xcalloc(1, ml + 1);
        if (mf && fseek(mf, REC_HEADER, SEEK_SET) == 0 && fread(m, 1, ml, mf) == ml)
            out->meta = m;
        else
            free(m);
        if (mf) fclose(mf);
    }
}

void pc_qfile_remove(const char *dir, uint64_t seq, const char *who)
{
    char path[4200];
    record_path(dir, seq, "pcq", path, sizeof path);
    if (unlink(path) && errno != ENOENT)
        PC_WARN(who, "cannot remove %s: %s", path, strerror(errno));
}

void pc_qfile_set_aside(const char *dir, uint64_t seq)
{
    char from[4200], to[4200];
    record_path(dir, seq, "pcq", from, sizeof from);
    record_path(dir, seq, "corrupt", to, sizeof to);
    rename(from, to);
}
