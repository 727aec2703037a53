#!/usr/bin/python3
"""End to end: a decoder's work is bounded by a constant times its input, and its memory by the
request's budget (issue 28, points 1 to 3).

CostTest posts pairs of requests of the same size and shape to one profcol (pyroscope receiver ->
otlphttp -> sink) and compares the CPU time profcol spent on each (utime + stime from
/proc/PID/stat, read once profcol is idle again), as a ratio, never as a time:
  - pprof: 60k locations whose ids all fell in one slot of the old fixed id hash (murmur3's
    finalizer, inverted here) against ids 2^63 + 1..60k;
  - pprof: 20k samples whose label value is one 64 KiB string (hashed and compared again for
    every sample) against the same samples naming a short string of the same table, and the
    same with the label given twice per sample (an array attribute);
  - JFR: 60k Symbol constant-pool keys that all fell in one slot of the old pool hash (k * golden
    ratio, xorshift 29, inverted) against keys 2^63 + 1..60k;
  - JFR: 25k events whose correlation ids (traceIdHi, traceIdLo) shared one FNV-1 hash, so every
    new correlation walked the chain of all the earlier ones, against distinct plain ids;
  - JFR: 20k methods of one class whose name is a 64 KiB symbol (the name "class.method" was
    built, hashed and compared again per method) against a short class name, same pools;
  - JFR: 20k ActiveSetting events whose value is a String pool reference to a 512 KiB string
    (read and copied again per event) against a reference to a short one, same pool;
  - JFR labels part: one context of 20k labels with distinct keys named by 4 span ids (the old
    per-correlation linear de-duplication was quadratic) against the same labels all with one key
    text.
PushCostTest: a Pyroscope Push of 4000 series of one pprof each against one of 1000: CPU at most
8 times (linear: about 4; main refused the 4000 with 413 after 4 to 6 s, quadratic).

MergeCostTest does the same through the batch processor, which merges what it is sent: an OTLP
request of 60k resources with distinct service.name against 60k with one (resources were found
by a scan of those before them).
Before the fixes (main, release build) the ratios were 9 (merge) to 132; with them all stay under
2.

JfrBudgetTest: a JFR recording whose events fit max_request_decoded_size (32 MiB) but whose
output does not is refused with 413 before the output is built: profcol's peak RSS (VmHWM) grows
by less than the budget plus a margin (before the fix it grew by about three budgets).

    /usr/bin/python3 tests/e2e/test_decode_cost.py --write-seeds DIR   # fuzz_pprof, fuzz_jfr seeds
"""

import gzip
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
import test_decode_budget as tdb  # noqa: E402
import pyro_support as ps  # noqa: E402
import test_jfr as tj  # noqa: E402

MASK64 = (1 << 64) - 1
MiB = 1 << 20
# the most a hostile request may cost per sequential one; before the fix every pair was over 30
RATIO_BOUND = 5.0
# a request's CPU below this is the floor of the ratio: /proc counts in 10 ms ticks
CPU_FLOOR = 0.05
REPEAT = 3

# ---- the old hashes, inverted ----------------------------------------------------------------


def _inv(c):
    return pow(c, -1, 1 << 64)


def unfmix64(y):
    """x with murmur3's fmix64(x) == y (the old pprof id hash, src/formats/pprof.c idhash)."""
    y ^= y >> 33
    y = y * _inv(0xc4ceb9fe1a85ec53) & MASK64
    y ^= y >> 33
    y = y * _inv(0xff51afd7ed558ccd) & MASK64
    return y ^ (y >> 33)


def un_umap_hash(y):
    """k with (k * C) ^ ((k * C) >> 29) == y (the old JFR pool hash, jfr_util.c umap_hash)."""
    x = y ^ (y >> 29) ^ (y >> 58)
    return x * _inv(0x9E3779B97F4A7C15) & MASK64


def one_slot(invert, n):
    """n distinct non-zero keys whose old hash has 32 low zero bits: one slot of any table up to
    2^32 slots."""
    return [invert(i << 32) for i in range(1, n + 1)]


FNV_OFF, FNV_PRIME = 0xcbf29ce484222325, 0x100000001b3


def fnv_colliding_corrs(n, ctx=7, span=0, name=0):
    """n (traceIdHi, traceIdLo) pairs with equal FNV-1 over (ctx, span, name, hi, lo) (the old
    JFR corr_hash): for each hi, the lo that brings the hash to one target."""
    h = FNV_OFF
    for v in (ctx, span, name):
        h = (h ^ v) * FNV_PRIME & MASK64
    target = 0x1234567890abcdef
    out = []
    for hi in range(1, n + 1):
        h3 = (h ^ hi) * FNV_PRIME & MASK64
        out.append((hi, target ^ h3))  # (h3 ^ lo) * P == target * P for every hi
    return out


# ---- inputs ----------------------------------------------------------------------------------

field, varint = h.pb_field, h.varint


def pprof_with_location_ids(ids):
    """A pprof whose locations have these ids (distinct addresses), one sample on the first."""
    locs = b"".join(field(4, b"\x08" + varint(lid) + b"\x18" + varint(0x1000 + i))
                    for i, lid in enumerate(ids))
    sample = field(2, b"\x08" + varint(ids[0]) + b"\x10\x01")
    strings = field(6, b"") + field(6, b"cpu") + field(6, b"nanoseconds")
    return field(1, b"\x08\x01\x10\x02") + sample + locs + strings


def pprof_labelled(n, long_value, size=65536, times=1):
    """A pprof of n samples, each with label k = a string: the long one (size bytes) when long_value, else
    "v" (the long one is in the string table either way, so the two are the same size); the
    label given `times` times per sample (an array attribute when more than once)."""
    strings = [b"", b"cpu", b"nanoseconds", b"k", b"v", b"x" * size]
    value = 5 if long_value else 4
    label = field(3, b"\x08\x03\x10" + varint(value)) * times
    samples = b"".join(field(2, b"\x08\x01\x10" + varint(1 + i % 100) + label)
                       for i in range(n))
    loc = field(4, b"\x08\x01\x18\x80\x20")
    return (field(1, b"\x08\x01\x10\x02") + samples + loc +
            b"".join(field(6, x) for x in strings))


def jfr_recording(extra_symbols=(), events=None, tlab=False, methods_of_class=0, raw_events=(),
                  strings=None, named_symbols=None):
    """A one-chunk recording (test_jfr's writer): test_jfr's stacks, plus Symbol entries under
    the keys extra_symbols, and events [(stack, ctx, span, name, hi, lo)] as ExecutionSamples
    (or TLAB allocations when tlab). methods_of_class: that many more methods of class 20, each
    the one frame of its own stack 100 + i named by an event; raw_events: more event records;
    strings: the java.lang.String pool; named_symbols: more Symbols {key: text}."""
    m = tj.std_meta()
    tlab_id = 103
    m.cls("jdk.ObjectAllocationInNewTLAB",
          [("startTime", "long", ""), ("eventThread", "java.lang.Thread", "*"),
           ("stackTrace", "jdk.types.StackTrace", "*"), ("allocationSize", "long", ""),
           ("tlabSize", "long", ""), ("contextId", "long", ""), ("spanId", "long", ""),
           ("spanName", "long", ""), ("traceIdHi", "long", ""), ("traceIdLo", "long", "")],
          "jdk.jfr.Event", cid=tlab_id)
    syms = {1: "com/example/Shop", 3: "java/lang/Thread", 5: "checkout", 8: "run", 9: "()V",
            10: "jdk/internal/loader/ClassLoaders$AppClassLoader", 11: "app"}
    symbols = {k: tj.jstr(v) for k, v in syms.items()}
    for i, k in enumerate(extra_symbols):
        symbols[k] = tj.jstr("s%d" % i)
    symbols.update({k: tj.jstr(v) for k, v in (named_symbols or {}).items()})
    classes = {k: tj.jv(1) + tj.jv(k) + tj.jv(0) + tj.jv(1) + b"\x00" for k in (1, 3, 10)}
    methods = {k: tj.jv(c) + tj.jv(n) + tj.jv(9) + tj.jv(1) + b"\x00"
               for k, (c, n) in {1: (1, 5), 4: (3, 8)}.items()}
    stacks = {1: b"\x00" + tj.jv(2) + b"".join(tj.jv(mk) + tj.jv(10 + i) + tj.jv(i) + tj.jv(1)
                                               for i, mk in enumerate([1, 4]))}
    for i in range(methods_of_class):
        methods[100 + i] = tj.jv(20) + tj.jv(5) + tj.jv(9) + tj.jv(1) + b"\x00"
        stacks[100 + i] = b"\x00" + tj.jv(1) + tj.jv(100 + i) + tj.jv(10) + tj.jv(0) + tj.jv(1)
    if methods_of_class:
        classes[20] = tj.jv(1) + tj.jv(12) + tj.jv(0) + tj.jv(1) + b"\x00"
    pools_a = [("jdk.types.Symbol", symbols), ("java.lang.Class", classes),
               ("jdk.types.ClassLoader", {1: tj.jv(10) + tj.jv(11)}),
               ("jdk.types.FrameType", {1: tj.jstr("JIT compiled")}),
               ("jdk.types.ThreadState", {1: tj.jstr("STATE_RUNNABLE")})]
    if strings:
        pools_a.append(("java.lang.String", strings))
    pools_b = [("jdk.types.Method", methods), ("jdk.types.StackTrace", stacks),
               ("java.lang.Thread", {1: tj.jstr("main") + tj.jv(101) + tj.jstr("main") +
                                     tj.jv(1)})]
    evs, t = list(raw_events), 1_000_200
    events = (events or [(1, 0, 0, 0, 0, 0)]) + [(100 + i, 0, 0, 0, 0, 0)
                                                 for i in range(methods_of_class)]
    for stack, *corr in events:
        t += 1000
        c = b"".join(tj.jv(x) for x in corr)
        if tlab:
            evs.append(tj.record(tlab_id, tj.jv(t) + tj.jv(1) + tj.jv(stack) + tj.jv(64) +
                                 tj.jv(4096) + c))
        else:
            evs.append(tj.record(101, tj.jv(t) + tj.jv(1) + tj.jv(stack) + tj.jv(1) + c))
    return tj.chunk(m, evs, pools_a, pools_b, START_NS or time.time_ns())


LONG = "L" * 65536
START_NS = None  # the chunks' start time: now, or fixed for the fuzz seeds


def methods_case(n, long_class, size=len(LONG)):
    """n methods of one class whose name is the 64 KiB symbol when long_class, else a short one
    (the long symbol is in the pool either way), each the frame of an event's stack."""
    long = "L" * size
    syms = {12: long if long_class else "Short", 13: "Short" if long_class else long}
    return jfr_recording(methods_of_class=n, named_symbols=syms)


def settings_case(n, long_value, size=8 * len(LONG)):
    """n ActiveSetting events event = a String pool reference: to a 512 KiB string when
    long_value, else to a short one (both strings in the pool)."""
    long = "L" * size  # a copy and a UTF-8 check per event are fast: make them long
    strings = {1: tj.jstr(long if long_value else "itimer"),
               2: tj.jstr("itimer" if long_value else long)}
    ev = tj.record(102, tj.jv(1_000_100) + tj.jv(0) + tj.jv(1) + tj.jv(0) + tj.jv(101) +
                   tj.jstr("event") + b"\x02" + tj.jv(1))
    return jfr_recording(raw_events=[ev] * n, strings=strings)


def labels_case(nkeys, nspans, distinct):
    """(recording, snapshot): context 1 with nkeys labels (keys "k<i>", or all "k00000" when not
    distinct, each under its own string id) named by nspans events of distinct span ids."""
    strings = {1: "v"}
    for i in range(nkeys):
        strings[100 + i] = "k%05d" % (i if distinct else 0)  # the same size either way
    snap = {"strings": strings, "contexts": {1: {100 + i: 1 for i in range(nkeys)}}}
    events = [(1, 1, 0x1000 + s, 0, 0, 0) for s in range(nspans)]
    return jfr_recording(events=events), snap


# ---- the server ------------------------------------------------------------------------------


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Base(unittest.TestCase):
    budget = 320 * MiB
    processors = None  # names, each configured with its defaults

    def setUp(self):
        self.sink = h.started_sink(self)
        self.port, self.pport, self.mport = h.free_port(), h.free_port(), h.free_port()
        cfg = tdb.config(self.port, self.pport, self.sink.url, self.mport, self.budget,
                         self.processors)
        if self.processors:
            cfg = "processors:\n" + "".join("  %s:\n" % p for p in self.processors) + cfg
        self.pc = h.Profcol(cfg, wait_ports=[self.port, self.pport, self.mport], env=tdb.ENV,
                            name="profcol-cost")
        self.addCleanup(self.pc.kill)
        self.pc.start()
        self.pid = self.pc.proc.pid

    def idle_cpu(self):
        """profcol's CPU seconds once it has been idle for 0.2 s (the export after a response
        counts for the request that caused it)."""
        last, still = cpu_seconds(self.pid), 0
        deadline = time.monotonic() + 20
        while still < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
            now = cpu_seconds(self.pid)
            still = still + 1 if now == last else 0
            last = now
        return last


class RatioBase(Base):
    def cost(self, path, body, ctype, want, port=None):
        t = self.idle_cpu()
        r = h.post(port or self.pport, body, ctype, path=path, timeout=300)
        self.assertIn(r.status, want, r.body[:300])
        return self.idle_cpu() - t

    def check_ratio(self, what, plain, hostile, path, ctype="application/octet-stream",
                    want=(200,), port=None, bound=RATIO_BOUND):
        """CPU of hostile over CPU of plain (REPEAT of each, interleaved) below bound; the two
        the same size unless the bound allows for their sizes."""
        if bound == RATIO_BOUND:
            self.assertLess(abs(len(hostile) - len(plain)),
                            max(len(plain), len(hostile)) // 4 + 1,
                            "%s: the two inputs should be about the same size" % what)
        a = b = 0.0
        for _ in range(REPEAT):
            a += self.cost(path, plain, ctype, want, port)
            b += self.cost(path, hostile, ctype, want, port)
        ratio = b / max(a, CPU_FLOOR * REPEAT)
        sys.stderr.write("%s: plain %.3fs, hostile %.3fs (%d each, %d/%d bytes): ratio %.1f\n"
                         % (what, a, b, REPEAT, len(plain), len(hostile), ratio))
        self.assertLess(ratio, bound, "%s: hostile input costs %.1f x the CPU of plain input"
                        " (%.2fs vs %.2fs)" % (what, ratio, b, a))
        self.pc.stop()  # exit 0, no sanitizer report


class CostTest(RatioBase):
    def test_pprof_location_ids(self):
        n = 60000
        plain = pprof_with_location_ids([(1 << 63) + i for i in range(1, n + 1)])  # as long
        hostile = pprof_with_location_ids(one_slot(unfmix64, n))
        self.check_ratio("pprof location ids", plain, hostile, tdb.ingest_path("c", "pprof"))

    def test_pprof_long_label_value(self):
        n = 20000
        self.check_ratio("pprof long label value", pprof_labelled(n, False),
                         pprof_labelled(n, True), tdb.ingest_path("c", "pprof"))

    def test_pprof_long_label_array(self):
        n = 20000
        self.check_ratio("pprof long label array", pprof_labelled(n, False, times=2),
                         pprof_labelled(n, True, times=2), tdb.ingest_path("c", "pprof"))

    def test_jfr_pool_keys(self):
        n = 60000
        plain = jfr_recording(extra_symbols=[(1 << 63) + i for i in range(n)])
        hostile = jfr_recording(extra_symbols=one_slot(un_umap_hash, n))
        self.check_ratio("JFR pool keys", plain, hostile, tj.ingest_path("c", {}, 1, 11))

    def test_jfr_correlation_ids(self):
        n = 25000
        hostile_ids = fnv_colliding_corrs(n)
        hi_max = max(hi for hi, _ in hostile_ids)
        plain = jfr_recording(events=[(1, 7, 0, 0, hi_max - i, MASK64 - i) for i in range(n)])
        hostile = jfr_recording(events=[(1, 7, 0, 0, hi, lo) for hi, lo in hostile_ids])
        self.check_ratio("JFR correlation ids", plain, hostile, tj.ingest_path("c", {}, 1, 11))

    def test_jfr_methods_of_one_long_class(self):
        n = 20000
        self.check_ratio("JFR methods of one long class", methods_case(n, False),
                         methods_case(n, True), tj.ingest_path("c", {}, 1, 11))

    def test_jfr_pooled_setting_value(self):
        n = 20000
        self.check_ratio("JFR pooled setting value", settings_case(n, False),
                         settings_case(n, True), tj.ingest_path("c", {}, 1, 11))

    def test_jfr_labels_keys(self):
        bodies = []
        for distinct in (False, True):
            rec, snap = labels_case(20000, 4, distinct)
            # the labels part raw (accepted as well as gzip): the two are then the same size
            body, ctype = tj.agent_multipart(gzip.compress(rec, 1), tj.labels_snapshot(snap))
            bodies.append(body)
        self.check_ratio("JFR labels of one context", bodies[0], bodies[1],
                         tj.ingest_path("c", {}, 1, 11), ctype)


def push_series(n, funcs=10):
    """A Pyroscope PushRequest of n series of one pprof sample each (funcs distinct functions)."""
    req = ps.ppb.PushRequest()
    for i in range(n):
        s = req.series.add()
        s.labels.add(name="__name__", value="process_cpu")
        s.labels.add(name="service_name", value="svc%d" % i)
        p = ps.ppb.Profile()
        p.string_table.extend(["", "cpu", "nanoseconds"] + ["f%d_%d" % (i, k) for k in range(funcs)])
        p.sample_type.add(type=1, unit=2)
        for k in range(funcs):
            p.function.add(id=k + 1, name=3 + k)
            p.location.add(id=k + 1).line.add(function_id=k + 1)
        p.sample.add(location_id=range(1, funcs + 1), value=[1])
        s.samples.add(raw_profile=p.SerializeToString())
    return req.SerializeToString()


def otlp_resources(n, distinct):
    """An OTLP request of n ResourceProfiles of one small profile each, whose service.name is
    "s<i>" (distinct) or "s000000" for all: the same size either way."""
    base = h.make_request(("s",), samples=1, alloc=False, links=False, strindex_attrs=False)
    rp0 = base.resource_profiles[0]
    del rp0.resource.attributes[1:]
    del rp0.scope_profiles[0].profiles[0].samples[1:]
    rp0.schema_url = ""
    rp0.scope_profiles[0].scope.Clear()
    r = h.pb.Request()
    r.dictionary.CopyFrom(base.dictionary)
    for i in range(n):
        rp = r.resource_profiles.add()
        rp.CopyFrom(rp0)
        rp.resource.attributes[0].value.string_value = "s%06d" % (i if distinct else 0)
    return r.SerializeToString()


class PushCostTest(RatioBase):
    """A Push of many series: each sample was decoded into the one batch, whose dictionary was
    rebuilt and resource list copied per sample (quadratic; 2,000 series of 10 functions were
    refused with 413 after 4 to 6 s of CPU)."""

    def test_many_series(self):
        # 4 times the series: about 4 times the CPU when linear (16 when quadratic)
        self.check_ratio("Push of 4000 series vs 1000", push_series(1000), push_series(4000),
                         ps.PUSH_PATH, "application/proto", bound=8.0)


class MergeCostTest(RatioBase):
    """The batch processor merges what it is sent: each resource was found by a scan of the
    groups before it, so n distinct resources cost n^2 / 2 key comparisons."""
    processors = ["batch"]

    def test_distinct_resources(self):
        n = 60000
        self.check_ratio("OTLP resources merged by batch", otlp_resources(n, False),
                         otlp_resources(n, True), h.PROFILES_PATH, h.CT_PROTO, port=self.port)


class JfrBudgetTest(Base):
    budget = 32 * MiB
    MARGIN = 24 * MiB  # the body, its inflated copy, the allocator's own

    def test_refused_before_the_output_is_built(self):
        n = 150000
        rec = jfr_recording(events=[(1, 0, 1 + i, 0, 0, 0) for i in range(n)], tlab=True)
        body = gzip.compress(rec, 6)
        before = tdb.vm_rss(self.pid)
        r = h.post(self.pport, body, "application/octet-stream",
                   path=tj.ingest_path("c", {}, 1, 11), timeout=300)
        grown = h.peak_rss(self.pid) - before
        sys.stderr.write("JFR of %d TLAB events (%d bytes gzip): %d, peak RSS grew %.1f MiB "
                         "(budget %d MiB)\n" % (n, len(body), r.status, grown / MiB,
                                                self.budget // MiB))
        self.assertEqual(r.status, 413, r.body[:300])
        self.assertIn(b"max_request_decoded_size", r.body)
        self.assertLess(grown, self.budget + self.MARGIN,
                        "the refused request took %.0f MiB" % (grown / MiB))
        self.pc.stop()


def write_seeds(d):
    """Small versions of the hostile inputs as fuzz seeds: DIR/fuzz_pprof/*, DIR/fuzz_jfr/* (an
    options byte first: bit 0, a 2-byte little-endian length and a LabelsSnapshot follow)."""
    global START_NS
    START_NS = 1_700_000_000_000_000_000  # the same seeds each time
    for t in ("fuzz_pprof", "fuzz_jfr"):
        os.makedirs(os.path.join(d, t), exist_ok=True)
    rec, snap = labels_case(400, 4, True)
    labels = tj.labels_snapshot(snap)
    seeds = {
        "fuzz_pprof/colliding-location-ids": pprof_with_location_ids(one_slot(unfmix64, 300)),
        "fuzz_pprof/long-label-value": pprof_labelled(100, True, 4096),
        "fuzz_jfr/colliding-pool-keys":
            b"\x00" + jfr_recording(extra_symbols=one_slot(un_umap_hash, 300)),
        "fuzz_jfr/colliding-correlations":
            b"\x00" + jfr_recording(events=[(1, 7, 0, 0, hi, lo)
                                            for hi, lo in fnv_colliding_corrs(200)]),
        "fuzz_pprof/long-label-array": pprof_labelled(100, True, 4096, times=2),
        "fuzz_jfr/methods-of-one-long-class": b"\x00" + methods_case(50, True, 2048),
        "fuzz_jfr/pooled-setting-value": b"\x00" + settings_case(50, True, 2048),
        "fuzz_jfr/labels-one-context":
            b"\x01" + len(labels).to_bytes(2, "little") + labels + rec,
    }
    for name, data in seeds.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    h.main(write_seeds)
