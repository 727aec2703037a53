#!/usr/bin/python3
"""profcol in real cgroups: what the kernel lets the process use sizes it (docs/sizing.md, "CPUs
and memory in a container").

CgroupTest: profcol started inside a cgroup made for the test, one level below a parent made for
it too (both below this test's own cgroup), on cgroup v1 (each controller's mount) or v2 (the
unified mount, its controllers enabled for the two levels). The parent carries a CPU quota of
half a core and the child nothing, as a systemd slice above a service does; the child carries a
memory limit of 400 MiB. profcol must name the CPU limit of the parent and size its pool to the
CPUs that quota keeps busy (its affinity mask narrowed to one CPU in a second run); a
memory_limiter with limit_percentage: 50 must take half of the child's limit, follow it when
the test raises and lowers it while profcol runs, and data must flow.
The oracle is what the kernel reads back from the files the test wrote. Without root or a
writable cgroup file system the test says it was skipped and why.
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

MEM_LIMIT = 100 << 22  # 400 MiB: half of it is a whole number of MiB


def mounts():
    """{'v2': (mountpoint, root)} and {'cpu': ..., 'memory': ...} for v1, from mountinfo."""
    out = {}
    with open("/proc/self/mountinfo") as f:
        for line in f:
            head, _, tail = line.partition(" - ")
            fields, sup = head.split(), tail.split()
            if len(fields) < 5 or len(sup) < 3:
                continue
            if sup[0] == "cgroup2":
                out.setdefault("v2", (fields[4], fields[3]))
            elif sup[0] == "cgroup":
                for ctl in ("cpu", "memory"):
                    if ctl in sup[2].split(","):
                        out.setdefault(ctl, (fields[4], fields[3]))
    return out


def own_cgroup(key):
    """This process's cgroup path in the hierarchy of key ('v2', 'cpu' or 'memory')."""
    with open("/proc/self/cgroup") as f:
        for line in f:
            hid, ctls, path = line.rstrip("\n").split(":", 2)
            if (key == "v2" and hid == "0" and not ctls) or key in ctls.split(","):
                return path
    return None


def folder(key, m):
    """Where this process's cgroup of key is in the file system."""
    mnt, root = m[key]
    path = own_cgroup(key)
    if path is None:
        raise unittest.SkipTest("no %s line in /proc/self/cgroup" % key)
    rel = path[len(root):] if root != "/" and path.startswith(root) else path
    return mnt + (rel if rel != "/" else "")


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def read(path):
    with open(path) as f:
        return f.read().strip()


class Tree:
    """A parent cgroup with a CPU quota of half a core and a child with a memory limit, in v1's
    cpu and memory hierarchies or in v2's; removed at cleanup."""

    def __init__(self, test):
        if os.geteuid() != 0:
            raise unittest.SkipTest("not root: cannot make cgroups")
        m = mounts()
        name = "profcol-test-%d" % os.getpid()
        self.dirs = []  # made, in order: removed in reverse
        try:
            if "cpu" in m and "memory" in m:
                cpu_parent = os.path.join(folder("cpu", m), name)
                mem_parent = os.path.join(folder("memory", m), name)
                self._mkdir(cpu_parent)
                self._mkdir(cpu_parent + "/inner")
                self._mkdir(mem_parent)
                self._mkdir(mem_parent + "/inner")
                write(cpu_parent + "/cpu.cfs_period_us", "100000")
                write(cpu_parent + "/cpu.cfs_quota_us", "50000")
                self.memory_file = mem_parent + "/inner/memory.limit_in_bytes"
                write(self.memory_file, str(MEM_LIMIT))
                self.procs = [cpu_parent + "/inner/cgroup.procs",
                              mem_parent + "/inner/cgroup.procs"]
                self.quota = (int(read(cpu_parent + "/cpu.cfs_quota_us")),
                              int(read(cpu_parent + "/cpu.cfs_period_us")))
                self.memory = int(read(self.memory_file))
                self.kind = "v1"
            elif "v2" in m:
                own = folder("v2", m)
                parent = os.path.join(own, name)
                write(own + "/cgroup.subtree_control", "+cpu +memory")
                self._mkdir(parent)
                write(parent + "/cgroup.subtree_control", "+cpu +memory")
                self._mkdir(parent + "/inner")
                write(parent + "/cpu.max", "50000 100000")
                self.memory_file = parent + "/inner/memory.max"
                write(self.memory_file, str(MEM_LIMIT))
                self.procs = [parent + "/inner/cgroup.procs"]
                q, p = read(parent + "/cpu.max").split()
                self.quota = (int(q), int(p))
                self.memory = int(read(self.memory_file))
                self.kind = "v2"
            else:
                raise unittest.SkipTest("no cgroup cpu and memory hierarchies mounted")
        except OSError as e:
            self.remove()
            raise unittest.SkipTest("cannot make cgroups here: %s" % e)
        test.addCleanup(self.remove)

    def _mkdir(self, path):
        os.mkdir(path)
        self.dirs.append(path)

    def enter(self):
        """For preexec_fn: move the starting child into the inner cgroup(s)."""
        for p in self.procs:
            write(p, str(os.getpid()))

    def remove(self):
        for d in reversed(self.dirs):
            try:
                os.rmdir(d)
            except OSError:
                pass
        self.dirs = []


def config(port, sink_url):
    return (h.otlp_receiver_yaml(port)
            + "processors:\n  memory_limiter:\n    check_interval: 100ms\n"
              "    limit_percentage: 50\n"
            + "exporters:\n  otlphttp:\n    endpoint: %s\n" % sink_url
            + "service:\n  pipelines:\n    profiles:\n      receivers: [otlp]\n"
              "      processors: [memory_limiter]\n      exporters: [otlphttp]\n")


class CgroupTest(h.Started, unittest.TestCase):
    def start_in(self, tree, cpus=None):
        """profcol in tree's inner cgroup (and on the given CPUs), once one request went through."""
        sink = h.started_sink(self)
        port = h.free_port()

        def enter():
            tree.enter()
            if cpus is not None:
                os.sched_setaffinity(0, cpus)

        p = h.Profcol(config(port, sink.url), wait_ports=[port], preexec_fn=enter,
                      name="profcol-cgroup")
        self.procs.append(p)
        p.start()
        self.assertEqual(h.post(port, h.make_request().SerializeToString()).status, 200)
        sink.wait_requests(1)
        self.assertEqual(len(sink.requests), 1)
        return p, port, sink

    def run_in(self, tree, cpus=None):
        """start_in, stopped: its log."""
        p = self.start_in(tree, cpus)[0]
        log = p.wait_stderr(lambda t: "payload threads" in t)
        p.stop()
        return log

    def expect(self, tree, log, affinity):
        quota, period = tree.quota
        self.assertEqual((quota, period), (50000, 100000))
        usable = min(affinity, -(-quota // period))  # the quota rounded up to whole CPUs
        self.assertIn("payload threads: %d (CPUs usable: %d of affinity %d, cgroup CPU limit %.2f)"
                      % (max(2, usable), usable, affinity, quota / period), log)
        self.assertEqual(tree.memory, MEM_LIMIT)
        half_mib = tree.memory // 2 >> 20
        # limit_percentage: 50 of the child's limit; refusing starts a fifth below it (the
        # default spike_limit, docs/components.md): 400 MiB keeps both whole
        self.assertIn("memory_limiter in profiles: limit %d MiB, refusing above %d MiB"
                      % (half_mib, half_mib * 4 // 5), log)

    def test_limits_of_cgroup_and_parent(self):
        tree = Tree(self)
        log = self.run_in(tree)
        self.expect(tree, log, len(os.sched_getaffinity(0)))
        print("cgroup %s: %s" % (tree.kind, [ln for ln in log.splitlines()
                                             if "payload threads" in ln or "limit " in ln]))

    def test_memory_limit_changes(self):
        """The child's limit raised, then lowered, while profcol runs (as Kubernetes' in-place
        resize does): the memory_limiter takes its percentages of the new limit."""
        tree = Tree(self)
        p, port, sink = self.start_in(tree)
        for mib in (800, 200):
            write(tree.memory_file, str(mib << 20))
            now = int(read(tree.memory_file)) >> 20
            self.assertEqual(now, mib)
            want = ("the memory this process may use is now %d MiB: limit %d MiB, refusing above "
                    "%d MiB" % (now, now // 2, now // 2 * 4 // 5))
            log = p.wait_stderr(lambda t: want in t)
            self.assertIn(want, log)
        self.assertEqual(h.post(port, h.make_request(seed=2).SerializeToString()).status, 200)
        sink.wait_requests(2)
        self.assertEqual(len(sink.requests), 2)
        p.stop()

    def test_affinity(self):
        tree = Tree(self)
        one = {sorted(os.sched_getaffinity(0))[-1]}
        log = self.run_in(tree, cpus=one)
        self.expect(tree, log, 1)


if __name__ == "__main__":
    h.main()
