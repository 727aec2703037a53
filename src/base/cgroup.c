/* The CPU count and the cgroup limits of this process (cgroup.h). Read when the pool is sized and
 * by a memory_limiter with percentages, at most once a second: never on a hot path. */
#include "base/cgroup.h"

#include "base/alloc.h"

#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PATH_CAP 4096

/* This process's cgroup in one hierarchy: path is the mount point followed by the cgroup's path
 * below the mount's root; top is the mount point's length, where the walk up the ancestors ends. */
typedef struct cg_dir {
    char path[PATH_CAP];
    size_t top;
    bool found;
} cg_dir;

/* A limit read from one level: false where that level has none. */
typedef bool (*limit_fn)(const char *dir, bool v2, double *out);

/* Whether the comma-separated list (len bytes) holds word. */
static bool list_has(const char *list, size_t len, const char *word)
{
    size_t wl = strlen(word);
    const char *p = list, *end = list + len;
    while (p < end) {
        const char *c = memchr(p, ',', (size_t)(end - p));
        size_t n = c ? (size_t)(c - p) : (size_t)(end - p);
        if (n == wl && !memcmp(p, word, wl)) return true;
        p += n + 1;
    }
    return false;
}

static FILE *open_proc(const char *proc_self, const char *name)
{
    char path[PATH_CAP];
    snprintf(path, sizeof path, "%s/%s", proc_self ? proc_self : "/proc/self", name);
    return fopen(path, "r");
}

/* The paths of /proc/self/cgroup: "0::/a/b" (v2) and "N:cpu,cpuacct:/a/b" (v1, ctl's line). */
static void read_self_cgroup(const char *proc_self, const char *ctl, char *v2, char *v1)
{
    char line[PATH_CAP];
    v2[0] = v1[0] = '\0';
    FILE *f = open_proc(proc_self, "cgroup");
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        if (c2 == c1 + 1 && c1 == line + 1 && line[0] == '0')
            snprintf(v2, PATH_CAP, "%s", c2 + 1);
        else if (list_has(c1 + 1, (size_t)(c2 - c1 - 1), ctl))
            snprintf(v1, PATH_CAP, "%s", c2 + 1);
    }
    fclose(f);
}

/* Where the cgroup at path is under a mount of its hierarchy whose root is root (a container
 * without a cgroup namespace mounts its own cgroup as the root); nothing when the mount shows
 * another subtree. */
static void place(cg_dir *d, const char *mnt, const char *root, const char *path)
{
    if (d->found) return;
    size_t rl = strlen(root);
    if (!strcmp(root, "/"))
        rl = 0;
    else if (strncmp(path, root, rl) || (path[rl] && path[rl] != '/'))
        return;
    const char *rel = strcmp(path + rl, "/") ? path + rl : "";
    int w = snprintf(d->path, sizeof d->path, "%s%s", mnt, rel);
    if (w < 0 || (size_t)w >= sizeof d->path) return;
    d->top = strlen(mnt);
    d->found = true;
}

/* One line of mountinfo (proc(5): id parent dev root mountpoint options ... - fstype source
 * superoptions): a cgroup2 mount, or a v1 mount whose controllers hold ctl. */
static void match_mount(char *line, const char *ctl, const char *v2, const char *v1, cg_dir *d2,
                        cg_dir *d1)
{
    char *sep = strstr(line, " - "), *save = NULL, *tok[5];
    if (!sep) return;
    *sep = '\0';
    int n = 0;
    for (char *t = strtok_r(line, " ", &save); t && n < 5; t = strtok_r(NULL, " ", &save))
        tok[n++] = t;
    char *fstype = strtok_r(sep + 3, " ", &save);
    char *source = fstype ? strtok_r(NULL, " ", &save) : NULL;
    char *opts = source ? strtok_r(NULL, " \n", &save) : NULL;
    if (n < 5 || !fstype) return;
    if (!strcmp(fstype, "cgroup2") && v2[0])
        place(d2, tok[4], tok[3], v2);
    else if (!strcmp(fstype, "cgroup") && v1[0] && opts && list_has(opts, strlen(opts), ctl))
        place(d1, tok[4], tok[3], v1);
}

/* The tightest limit over d's cgroup and its ancestors up to the mount point (0: none). */
static double walk(cg_dir *d, bool v2, limit_fn read)
{
    double best = 0, v;
    if (!d->found) return 0;
    for (;;) {
        if (read(d->path, v2, &v) && (best == 0 || v < best)) best = v;
        char *slash = strlen(d->path) > d->top ? strrchr(d->path + d->top, '/') : NULL;
        if (!slash) return best;
        *slash = '\0';
    }
}

static double limit_of(const char *proc_self, const char *ctl, limit_fn read)
{
    char v2[PATH_CAP], v1[PATH_CAP], line[PATH_CAP];
    cg_dir *d2 = pc_xcalloc(2, sizeof *d2), *d1 = d2 + 1; /* two paths: kept off the stack */
    read_self_cgroup(proc_self, ctl, v2, v1);
    FILE *f = (v2[0] || v1[0]) ? open_proc(proc_self, "mountinfo") : NULL;
    while (f && fgets(line, sizeof line, f))
        match_mount(line, ctl, v2, v1, d2, d1);
    if (f) fclose(f);
    double a = walk(d2, true, read), b = walk(d1, false, read);
    free(d2);
    return a == 0 ? b : (b == 0 || a < b ? a : b);
}

static bool read_text(const char *dir, const char *name, char *buf, size_t cap)
{
    char path[PATH_CAP];
    int w = snprintf(path, sizeof path, "%s/%s", dir, name);
    if (w < 0 || (size_t)w >= sizeof path) return false;
    FILE *f = fopen(path, "r");
    if (!f) return false;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    return n > 0;
}

static bool memory_at(const char *dir, bool v2, double *out)
{
    char t[64], *end;
    if (!read_text(dir, v2 ? "memory.max" : "memory.limit_in_bytes", t, sizeof t)) return false;
    errno = 0;
    unsigned long long v = strtoull(t, &end, 10);
    /* v2 writes "max" for none; v1 a number near 2^63 (LONG_MAX rounded down to a page) */
    if (end == t || errno || v == 0 || v >= (1ull << 62)) return false;
    *out = (double)v;
    return true;
}

static bool cpu_at(const char *dir, bool v2, double *out)
{
    char t[64], p[64];
    long long quota = 0, period = 0;
    if (v2) { /* "max 100000" for none: the quota does not scan */
        if (!read_text(dir, "cpu.max", t, sizeof t) || sscanf(t, "%lld %lld", &quota, &period) != 2)
            return false;
    } else if (!read_text(dir, "cpu.cfs_quota_us", t, sizeof t) ||
               !read_text(dir, "cpu.cfs_period_us", p, sizeof p) ||
               sscanf(t, "%lld", &quota) != 1 || sscanf(p, "%lld", &period) != 1)
        return false;
    if (quota <= 0 || period <= 0) return false; /* v1 writes -1 for none */
    *out = (double)quota / (double)period;
    return true;
}

uint64_t pc_cgroup_memory_limit(const char *proc_self)
{
    return (uint64_t)limit_of(proc_self, "memory", memory_at);
}

double pc_cgroup_cpu_limit(const char *proc_self)
{
    return limit_of(proc_self, "cpu", cpu_at);
}

unsigned pc_cpus_usable(const char *proc_self, unsigned *affinity, double *limit)
{
    cpu_set_t set;
    long n = 0;
    if (!sched_getaffinity(0, sizeof set, &set)) n = CPU_COUNT(&set);
    if (n <= 0) n = sysconf(_SC_NPROCESSORS_ONLN); /* more CPUs than a cpu_set_t holds */
    if (n <= 0) n = 1;
    double lim = pc_cgroup_cpu_limit(proc_self);
    if (affinity) *affinity = (unsigned)n;
    if (limit) *limit = lim;
    if (lim > 0 && lim < (double)n) {
        long whole = (long)lim;
        n = whole + ((double)whole < lim);
    }
    return n < 1 ? 1 : (unsigned)n;
}
