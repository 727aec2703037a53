/* The cgroup limits of src/base/cgroup.c on made-up trees: a /proc/self of its own (cgroup and
 * mountinfo files) and the cgroup file systems it names, for the layouts a process meets: a v2
 * container with its own cgroup namespace, a systemd service nested below a limited slice, a v1
 * container whose mounts are rooted at its own cgroup, a hybrid host, unlimited and foreign
 * mounts. tests/e2e/test_cgroup.py reads real cgroups the kernel enforces. */
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cgroup.h"
#include "check.h"

static char g_root[64];

/* Write text to root/rel, making its folders. */
static void put(const char *rel, const char *fmt, ...)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_root, rel);
    for (char *p = path + strlen(g_root) + 1; (p = strchr(p, '/')); p++) {
        *p = '\0';
        mkdir(path, 0755);
        *p = '/';
    }
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fclose(f);
}

/* A fresh tree: its /proc/self is root/self. */
static const char *fresh(const char *name)
{
    snprintf(g_root, sizeof g_root, "/tmp/profcol-cgroup-%d-%s", (int)getpid(), name);
    mkdir(g_root, 0755);
    static char self[96];
    snprintf(self, sizeof self, "%s/self", g_root);
    return self;
}

static void cleanup(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf /tmp/profcol-cgroup-%d-*", (int)getpid());
    CHECK_EQ_INT(system(cmd), 0);
}

/* Docker or Kubernetes on cgroup v2: the container's cgroup is the namespace's root. */
static void test_v2_namespace(void)
{
    const char *self = fresh("v2ns");
    put("self/cgroup", "0::/\n");
    put("self/mountinfo",
        "25 30 0:23 / /proc rw,nosuid - proc proc rw\n"
        "31 25 0:26 / %s/fs rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw,nsdelegate\n",
        g_root);
    put("fs/memory.max", "536870912\n");
    put("fs/cpu.max", "150000 100000\n");
    CHECK_EQ_INT(pc_cgroup_memory_limit(self), 536870912);
    CHECK(pc_cgroup_cpu_limit(self) == 1.5);
    unsigned aff = 0;
    double lim = 0;
    unsigned n = pc_cpus_usable(self, &aff, &lim);
    cpu_set_t set;
    CHECK_EQ_INT(sched_getaffinity(0, sizeof set, &set), 0);
    CHECK_EQ_INT(aff, CPU_COUNT(&set));
    CHECK(lim == 1.5);
    CHECK_EQ_INT(n, aff < 2 ? aff : 2); /* 1.5 cores keep two CPUs busy part of the time */
}

/* A systemd service on a v2 host: its own cgroup sets nothing, the slice above it does, and the
 * root above that is looser. */
static void test_v2_ancestor(void)
{
    const char *self = fresh("v2anc");
    put("self/cgroup", "0::/system.slice/profcol.service\n");
    put("self/mountinfo", "31 25 0:26 / %s/fs rw - cgroup2 cgroup2 rw\n", g_root);
    put("fs/memory.max", "4294967296\n");
    put("fs/system.slice/memory.max", "1073741824\n");
    put("fs/system.slice/cpu.max", "50000 100000\n");
    put("fs/system.slice/profcol.service/memory.max", "max\n");
    put("fs/system.slice/profcol.service/cpu.max", "max 100000\n");
    CHECK_EQ_INT(pc_cgroup_memory_limit(self), 1073741824);
    CHECK(pc_cgroup_cpu_limit(self) == 0.5);
    CHECK_EQ_INT(pc_cpus_usable(self, NULL, NULL), 1);
    /* the service's own limit, when tighter, holds */
    put("fs/system.slice/profcol.service/memory.max", "268435456\n");
    CHECK_EQ_INT(pc_cgroup_memory_limit(self), 268435456);
}

/* Docker on cgroup v1 without a cgroup namespace: each controller's mount is rooted at the
 * container's cgroup, which /proc/self/cgroup names in full; cpu shares its mount with cpuacct. */
static void test_v1_rooted(void)
{
    const char *self = fresh("v1");
    put("self/cgroup", "12:pids:/docker/abc\n4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n"
                       "1:name=systemd:/docker/abc\n");
    put("self/mountinfo",
        "33 31 0:30 /docker/abc %s/cpu,cpuacct ro,nosuid - cgroup cgroup rw,cpu,cpuacct\n"
        "35 31 0:32 /docker/abc %s/memory ro,nosuid - cgroup cgroup rw,memory\n",
        g_root, g_root);
    put("memory/memory.limit_in_bytes", "268435456\n");
    put("cpu,cpuacct/cpu.cfs_quota_us", "250000\n");
    put("cpu,cpuacct/cpu.cfs_period_us", "100000\n");
    CHECK_EQ_INT(pc_cgroup_memory_limit(self), 268435456);
    CHECK(pc_cgroup_cpu_limit(self) == 2.5);
    /* no limit: v1 writes -1 and LONG_MAX rounded down to a page */
    put("memory/memory.limit_in_bytes", "9223372036854771712\n");
    put("cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
    CHECK_EQ_INT(pc_cgroup_memory_limit(self), 0);
    CHECK(pc_cgroup_cpu_limit(self) == 0);
}

/* A host with both hierarchies (this machine's kind): the v1 controllers hold the limits, the
 * v2 mount has none; a cpuacct-only mount is not the cpu controller's. */
static void test_hybrid(void)
{
    const char *self = fresh("hybrid");
    put("self/cgroup", "4:memory:/process_api/x\n3:cpuacct:/\n1:cpu:/jobs/y\n0::/\n");
    put("self/mountinfo",
        "32 31 0:29 / %s/cpu rw - cgroup cgroup rw,cpu\n"
        "33 31 0:30 / %s/cpuacct rw - cgroup cgroup rw,cpuacct\n"
        "35 31 0:32 / %s/memory rw - cgroup cgroup rw,memory\n"
        "41 31 0:38 / %s/unified rw - cgroup2 cgroup2 rw\n",
        g_root, g_root, g_root, g_root);
    put("memory/process_api/x/memory.limit_in_bytes", "9223372036854771712\n");
    put("memory/process_api/memory.limit_in_bytes", "805306368\n");
    put("cpuacct/cpu.cfs_quota_us", "10000\n"); /* not a cpu mount: never read */
    put("cpuacct/cpu.cfs_period_us", "100000\n");
    put("cpu/jobs/y/cpu.cfs_quota_us", "300000\n");
    put("cpu/jobs/y/cpu.cfs_period_us", "100000\n");
    put("unified/cgroup.procs", "1\n");
    CHECK_EQ_INT(pc_cgroup_memory_limit(self), 805306368);
    CHECK(pc_cgroup_cpu_limit(self) == 3);
    /* a v2 limit too: the tighter of the two hierarchies holds */
    put("unified/memory.max", "402653184\n");
    CHECK_EQ_INT(pc_cgroup_memory_limit(self), 402653184);
}

/* Nothing to read: a mount of another subtree, a missing /proc, a garbled file. */
static void test_nothing(void)
{
    const char *self = fresh("none");
    put("self/cgroup", "0::/a/b\n");
    put("self/mountinfo", "31 25 0:26 /c %s/fs rw - cgroup2 cgroup2 rw\n", g_root);
    put("fs/memory.max", "1048576\n");
    CHECK_EQ_INT(pc_cgroup_memory_limit(self), 0);
    put("self/mountinfo", "31 25 0:26 /a/bc %s/fs rw - cgroup2 cgroup2 rw\n", g_root);
    CHECK_EQ_INT(pc_cgroup_memory_limit(self), 0); /* /a/bc is not an ancestor of /a/b */
    put("self/mountinfo", "31 25 0:26 /a %s/fs rw - cgroup2 cgroup2 rw\n", g_root);
    put("fs/b/memory.max", "garbage\n");
    CHECK_EQ_INT(pc_cgroup_memory_limit(self), 1048576); /* /a/b is fs/b; fs is /a */
    put("fs/b/memory.max", "0\n");
    CHECK_EQ_INT(pc_cgroup_memory_limit(self), 1048576);
    put("self/mountinfo", "truncated line without its separator\n");
    CHECK_EQ_INT(pc_cgroup_memory_limit(self), 0);
    CHECK_EQ_INT(pc_cgroup_memory_limit("/nonexistent/self"), 0);
    CHECK(pc_cgroup_cpu_limit("/nonexistent/self") == 0);
    CHECK(pc_cpus_usable("/nonexistent/self", NULL, NULL) >= 1);
}

int main(void)
{
    RUN(test_v2_namespace);
    RUN(test_v2_ancestor);
    RUN(test_v1_rooted);
    RUN(test_hybrid);
    RUN(test_nothing);
    cleanup();
    return check_report();
}
