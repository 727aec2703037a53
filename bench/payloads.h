/* Payload sets for the bench tools: one file, or every regular file of a directory (sorted by
 * name; dot files and "manifest" skipped). A directory may hold a "manifest" with lines
 * "FILE PROFILES SAMPLES" (written by mkpayloads) so that throughput can be counted in profiles
 * and samples. Header-only (static functions) so each tool stays one .c file. */
#ifndef BENCH_PAYLOADS_H
#define BENCH_PAYLOADS_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct payload {
    char name[256];
    uint8_t *data;
    size_t len;
    long profiles, samples; /* -1 when unknown */
} payload;

typedef struct payload_set {
    payload *p;
    size_t n;
} payload_set;

static inline uint8_t *bench_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            uint8_t *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    *len = n;
    return buf;
}

static inline int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static inline int payload_add(payload_set *s, const char *path, const char *name)
{
    size_t len = 0;
    uint8_t *d = bench_read_file(path, &len);
    if (!d) {
        fprintf(stderr, "cannot read %s\n", path);
        return -1;
    }
    payload *np = realloc(s->p, (s->n + 1) * sizeof *np);
    if (!np) return -1;
    s->p = np;
    payload *p = &s->p[s->n++];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->data = d;
    p->len = len;
    p->profiles = p->samples = -1;
    return 0;
}

static inline void payload_read_manifest(payload_set *s, const char *dir)
{
    char path[4096], line[512], name[256];
    long prof, samp;
    snprintf(path, sizeof path, "%s/manifest", dir);
    FILE *f = fopen(path, "r");
    if (!f) return;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "%255s %ld %ld", name, &prof, &samp) == 3)
            for (size_t i = 0; i < s->n; i++)
                if (!strcmp(s->p[i].name, name)) {
                    s->p[i].profiles = prof;
                    s->p[i].samples = samp;
                }
    fclose(f);
}

/* Load a file or a directory; -1 (with a message) when nothing usable was found. */
static inline int payload_load(const char *path, payload_set *s)
{
    struct stat st;
    memset(s, 0, sizeof *s);
    if (stat(path, &st)) {
        fprintf(stderr, "cannot stat %s\n", path);
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        const char *base = strrchr(path, '/');
        return payload_add(s, path, base ? base + 1 : path);
    }
    DIR *d = opendir(path);
    if (!d) return -1;
    char *names[4096];
    size_t nn = 0;
    struct dirent *e;
    while ((e = readdir(d)) && nn < 4096) {
        if (e->d_name[0] == '.' || !strcmp(e->d_name, "manifest")) continue;
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", path, e->d_name);
        if (stat(full, &st) || !S_ISREG(st.st_mode)) continue;
        names[nn++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, nn, sizeof names[0], name_cmp);
    int rc = 0;
    for (size_t i = 0; i < nn; i++) {
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", path, names[i]);
        if (!rc && payload_add(s, full, names[i])) rc = -1;
        free(names[i]);
    }
    if (!rc && s->n == 0) {
        fprintf(stderr, "no payload files in %s\n", path);
        return -1;
    }
    if (!rc) payload_read_manifest(s, path);
    return rc;
}

#endif
