/* What the kernel lets this process use: the CPUs of its affinity mask, and the CPU and memory
 * limits of its cgroup (v1 or v2) and of every ancestor of it that is mounted where the process
 * can see it. The tightest limit holds: the kernel enforces each level. docs/sizing.md, "CPUs and
 * memory in a container", says who reads these and when.
 *
 * proc_self is the folder holding this process's `cgroup` and `mountinfo` files: NULL for
 * /proc/self (tests point it at a made-up tree). */
#ifndef PC_BASE_CGROUP_H
#define PC_BASE_CGROUP_H

#include <stdint.h>

/* The memory limit in bytes (v2 memory.max, v1 memory.limit_in_bytes), 0 when there is none. */
uint64_t pc_cgroup_memory_limit(const char *proc_self);

/* The CPU bandwidth limit in cores (v2 cpu.max, v1 cpu.cfs_quota_us / cpu.cfs_period_us): 0.5
 * for half a core, 0 when there is none. */
double pc_cgroup_cpu_limit(const char *proc_self);

/* The CPUs this process can keep busy at once: its affinity mask's CPU count (the online CPUs if
 * that cannot be read), lowered to the CPU limit rounded up; at least 1. *affinity gets the
 * mask's count and *limit the CPU limit (0: none), either may be NULL. */
unsigned pc_cpus_usable(const char *proc_self, unsigned *affinity, double *limit);

#endif
