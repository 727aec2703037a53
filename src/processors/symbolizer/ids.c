/* Build ids of local ELF files (ids.h). */
#include "ids.h"

#include <fcntl.h>
#include <gelf.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "resolver.h"

enum { HTL_CHUNK = 4096, NT_GO_BUILDID = 4 };

static void to_hex(const unsigned char *b, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 15];
    }
    out[2 * n] = 0;
}

static int read_full(int fd, unsigned char *buf, size_t n, off_t at)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, buf + got, n - got, at + (off_t)got);
        if (r <= 0) return -1;
        got += (size_t)r;
    }
    return 0;
}

/* SHA-256 over first 4096 bytes ‖ last 4096 bytes ‖ length as a big-endian u64, first 16 bytes
 * (§1.5; a file under 4096 bytes is hashed whole, twice). */
int sym_htlhash(const char *path, char hex[SYM_HTL_LEN + 1])
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat sb;
    unsigned char head[HTL_CHUNK], tail[HTL_CHUNK], len[8], md[EVP_MAX_MD_SIZE];
    int rc = -1;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) goto out;
    uint64_t size = (uint64_t)sb.st_size;
    size_t n = size < HTL_CHUNK ? (size_t)size : HTL_CHUNK;
    if (read_full(fd, head, n, 0) || read_full(fd, tail, n, (off_t)(size - n))) goto out;
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)(size >> (56 - 8 * i));
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned int mdlen = 0;
    if (ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) && EVP_DigestUpdate(ctx, head, n) &&
        EVP_DigestUpdate(ctx, tail, n) && EVP_DigestUpdate(ctx, len, 8) &&
        EVP_DigestFinal_ex(ctx, md, &mdlen) && mdlen >= SYM_HTL_LEN / 2) {
        to_hex(md, SYM_HTL_LEN / 2, hex);
        rc = 0;
    }
    EVP_MD_CTX_free(ctx);
out:
    close(fd);
    return rc;
}

/* The Go build id: the note named "Go" of type 4 (the linker's .note.go.buildid section). */
static void go_note(Elf *elf, char *out, size_t cap)
{
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(elf, scn)) != NULL) {
        GElf_Shdr sh;
        Elf_Data *data;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE) continue;
        if ((data = elf_getdata(scn, NULL)) == NULL) continue;
        GElf_Nhdr nh;
        size_t off = 0, name_off, desc_off, next;
        while ((next = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
            off = next;
            /* Go's linker writes the name padded: "Go\0\0", n_namesz 4 */
            if (nh.n_type != NT_GO_BUILDID || nh.n_namesz < 3 || nh.n_namesz > 4 ||
                memcmp((const char *)data->d_buf + name_off, "Go", 3) != 0)
                continue;
            char tmp[SYM_GO_MAX];
            size_t n = nh.n_descsz < sizeof tmp - 1 ? nh.n_descsz : 0;
            memcpy(tmp, (const char *)data->d_buf + desc_off, n);
            tmp[n] = 0;
            if (!sym_clean_go_id(tmp, out, cap)) out[0] = 0;
            return;
        }
    }
}

int sym_read_ids(const char *path, sym_ids *out)
{
    memset(out, 0, sizeof *out);
    elf_version(EV_CURRENT);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    int rc = elf && elf_kind(elf) == ELF_K_ELF ? 0 : -1;
    if (rc == 0) go_note(elf, out->go, sizeof out->go);
    if (elf) elf_end(elf);
    close(fd);
    if (rc) return rc;
    if (sym_read_build_id(path, out->gnu, sizeof out->gnu) < 0) out->gnu[0] = 0;
    if (sym_htlhash(path, out->htl) < 0) out->htl[0] = 0;
    return 0;
}

bool sym_clean_hex(const char *in, char *out, size_t cap)
{
    size_t n = strnlen(in, cap);
    if (n < 2 || n % 2 || n >= cap) return false;
    for (size_t i = 0; i < n; i++) {
        char ch = in[i];
        if (ch >= 'A' && ch <= 'F') ch = (char)(ch - 'A' + 'a');
        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) return false;
    }
    /* out is written only for a clean id: a rejected one leaves it as it was */
    for (size_t i = 0; i < n; i++)
        out[i] = in[i] >= 'A' && in[i] <= 'F' ? (char)(in[i] - 'A' + 'a') : in[i];
    out[n] = 0;
    return true;
}

bool sym_clean_go_id(const char *in, char *out, size_t cap)
{
    size_t n = strnlen(in, cap);
    if (n < 1 || n >= cap) return false;
    for (size_t i = 0; i < n; i++) {
        char ch = in[i];
        bool ok = (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') ||
                  (ch >= 'A' && ch <= 'Z') || ch == '-' || ch == '_' || ch == '/' || ch == '+' ||
                  ch == '=';
        if (!ok || (ch == '/' && (i == 0 || in[i - 1] == '/'))) return false;
    }
    memcpy(out, in, n);
    out[n] = 0;
    return true;
}
