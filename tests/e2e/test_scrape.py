#!/usr/bin/python3
"""The pyroscope_scrape receiver against real Go targets (tests/e2e/scrape_target: net/http/pprof,
CPU burnt in burnAlpha and burnBeta 3:1, allocations, a contended mutex, blocking channels; built
offline with the e2e Go cache).

The oracle is Go's own pprof reader (`go tool pprof -raw`) on the very responses profcol got: a
recording TCP tee (peer_support.Tee) sits between profcol and the target, so each profile that
reached the OTLP sink is matched (by its time) with the scrape it came from, and
  * a cumulative type (alloc_*, mutex and block contentions/delay) equals, per stack and string
    labels, `go tool pprof -raw -base <previous scrape> <this scrape>`, exactly;
  * a CPU profile equals Go's reading of that scrape per stack, and burnAlpha ~ 3 x burnBeta;
  * the first scrape of a cumulative series sends nothing, and no value is ever negative.
Bad targets (404, garbage, HTML, too big, a gzip bomb, one that never answers) are counted by reason in
profcol_scrape_errors_total and logged at most once per interval while a good target is scraped
on time."""

import collections
import gzip
import itertools
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
import peer_support as peers  # noqa: E402
import pyro_support as ps  # noqa: E402

TARGET_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scrape_target")
CUMULATIVE = {("alloc_objects", "count"), ("alloc_space", "bytes"), ("contentions", "count"),
              ("delay", "nanoseconds")}


def build_target(tmp):
    """go build tests/e2e/scrape_target into tmp (offline: standard library only)."""
    go = shutil.which("go")
    if not go:
        raise RuntimeError("go not found")
    out = os.path.join(tmp, "scrape_target")
    r = subprocess.run([go, "build", "-o", out, "."], cwd=TARGET_DIR, env=ps.go_env(tmp),
                       capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise RuntimeError("go build failed:\n%s\n%s" % (r.stdout, r.stderr))
    return out


class Target:
    """The Go target on 127.0.0.1:port (a free one unless given)."""

    def __init__(self, binary, port=None, restarted=False):
        self.port = port or h.free_port()
        self.proc = subprocess.Popen([binary, "-addr", "127.0.0.1:%d" % self.port] +
                                     (["-restarted"] if restarted else []),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     stdin=subprocess.DEVNULL)
        if not h.wait_port(self.port, 10, self.proc):
            self.stop()
            raise AssertionError("the Go target did not listen")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)


def scrape_config(metrics_port, sink_url, static, interval="2s", types=None, extra=""):
    """pyroscope_scrape (static_configs YAML lines given) -> otlphttp to the sink."""
    s = ("receivers:\n  pyroscope_scrape:\n    job_name: go-test\n"
         "    scrape_interval: %s\n    scrape_timeout: 2s\n%s" % (interval, extra))
    if types is not None:
        s += "    profiling_config:\n"
        for t in ("process_cpu", "memory", "goroutine", "mutex", "block"):
            s += "      %s: {enabled: %s}\n" % (t, "true" if t in types else "false")
    s += "    static_configs:\n" + "".join("      %s\n" % ln for ln in static.splitlines())
    s += ("exporters:\n  otlphttp:\n    endpoint: %s\n" % sink_url +
          "service:\n  telemetry:\n    metrics:\n      address: 127.0.0.1:%d\n" % metrics_port +
          "  pipelines:\n    profiles:\n      receivers: [pyroscope_scrape]\n"
          "      exporters: [otlphttp]\n")
    return s


def metrics(port):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as r:
        return r.read().decode()


def metric(text, name, **labels):
    """The sum of name's samples whose labels include every label given."""
    total = 0.0
    for ln in text.splitlines():
        if not ln.startswith(name + "{"):
            continue
        lab = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', ln[:ln.rindex("}")]))
        if all(lab.get(k) == v for k, v in labels.items()):
            total += float(ln.rsplit(" ", 1)[1])
    return total


def nonzero(counter):
    return collections.Counter({k: v for k, v in counter.items() if v})


def sink_views(sink):
    with sink.lock:
        msgs = [r.message for r in sink.requests if r.message is not None]
    return ps.otlp_views(msgs)


class WithTarget(unittest.TestCase):
    """A class of tests that runs the Go target binary, built once into its own directory."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="scrape-", dir=h.TMP)
        cls.binary = build_target(cls.tmp)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)


class ScrapeGoTest(WithTarget):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.files = itertools.count()

    def setUp(self):
        self.target = Target(self.binary)
        self.addCleanup(self.target.stop)
        self.tee = peers.Tee(self.target.port)
        self.addCleanup(self.tee.stop)
        self.sink = h.started_sink(self)

    def count(self, path):
        return sum(1 for r, _, _ in self.tee.exchanges()
                   if r.path.startswith(path) and r.status == 200)

    def scraped(self, path):
        """The tee's 200 answers to GET path..., as (time_nanos, file) in the order taken."""
        out = []
        for req, _, body in self.tee.exchanges():
            if not req.path.startswith(path) or req.status != 200:
                continue
            f = os.path.join(self.tmp, "scrape-%d.pb.gz" % next(self.files))
            with open(f, "wb") as fh:
                fh.write(body)
            out.append((ps.pprof_view(gzip.decompress(body))["time_nanos"], f))
        return sorted(out)  # the tee lists by connection: the profile's time orders them

    def test_cumulative_deltas_equal_go_pprof_base(self):
        mport = h.free_port()
        static = ("- targets: [127.0.0.1:%d]\n  labels: {service_name: go-target, team: a}"
                  % self.tee.port)
        pc = h.started_profcol(self, scrape_config(mport, self.sink.url, static,
                                                   types={"memory", "mutex", "block"}),
                               mport, "scrape-delta")
        paths = ("/debug/pprof/heap", "/debug/pprof/mutex", "/debug/pprof/block")
        # 4 scrapes of each: 3 deltas each (a scrape with no change sends nothing)
        self.assertTrue(h.wait_for(lambda: all(self.count(p) >= 4 for p in paths), 30),
                        pc.stderr()[-3000:])
        pc.stop()
        views = sink_views(self.sink)
        self.assertTrue(views, "nothing reached the sink")
        checked = collections.Counter()
        for path in paths:
            taken = self.scraped(path)
            times = [t for t, _ in taken]
            for v in views:
                if v["type"] not in CUMULATIVE or v["time"] not in times:
                    continue
                i = times.index(v["time"])
                self.assertGreater(i, 0, "the first scrape of %s was sent" % path)
                go = ps.go_pprof_raw(taken[i][1], self.tmp, base=taken[i - 1][1])
                want = nonzero(go["samples"][v["type"]])
                got = nonzero(ps.string_attrs_only(v["samples"]))
                if got != want and os.environ.get("SCRAPE_DEBUG"):
                    a = ps.go_pprof_raw(taken[i - 1][1], self.tmp)["samples"][v["type"]]
                    b = ps.go_pprof_raw(taken[i][1], self.tmp)["samples"][v["type"]]
                    for k in set(got) | set(want):
                        if got.get(k) != want.get(k):
                            print("DEBUG", k[0][:3], got.get(k), want.get(k), a.get(k), b.get(k),
                                  taken[i - 1][1], taken[i][1])
                self.assertEqual(got, want, "%s %s: scrape %d minus %d; differing: %s" % (
                    path, v["type"], i, i - 1,
                    {k: (got.get(k), want.get(k)) for k in set(got) | set(want)
                     if got.get(k) != want.get(k)}))
                self.assertTrue(all(x > 0 for x in got.values()), "negative delta")
                self.assertEqual(v["resource"].get("service.name"), "go-target")
                self.assertEqual(v["resource"].get("team"), "a")
                self.assertEqual(v["resource"].get("job"), "go-test")
                self.assertEqual(v["resource"].get("instance"), "127.0.0.1:%d" % self.tee.port)
                self.assertFalse([k for k in v["resource"] if k.startswith("__")])
                self.assertEqual(v["duration"], v["time"] - times[i - 1])
                checked[v["type"]] += 1
        for t in CUMULATIVE:
            self.assertGreaterEqual(checked[t], 2, "deltas checked per type: %s" % checked)
        self.assertIn("contend", {f.split(".")[-1] for v in views for f in v["functions"]})

    def test_cpu_equals_go_reader_of_the_same_scrape(self):
        mport = h.free_port()
        static = "- targets: [127.0.0.1:%d]" % self.tee.port
        pc = h.started_profcol(self, scrape_config(mport, self.sink.url, static, interval="3s",
                                                   types={"process_cpu", "goroutine"}),
                               mport, "scrape-cpu")
        self.assertTrue(h.wait_for(lambda: self.count("/debug/pprof/profile") >= 2, 30),
                        pc.stderr()[-3000:])
        # a CPU scrape is in flight (2 s of every 3): shutdown does not wait for it
        self.assertTrue(h.wait_for(lambda: any(r is None for _, r, _ in self.tee.exchanges()), 5))
        t0 = time.monotonic()
        pc.stop()
        self.assertLess(time.monotonic() - t0, 1.5, "shutdown waited for the CPU profile")
        reqs = [r for r, _, _ in self.tee.exchanges() if r.path.startswith("/debug/pprof/profile")]
        self.assertTrue(all(r.query.get("seconds") == ["2"] for r in reqs), [r.path for r in reqs])
        views = sink_views(self.sink)
        taken = dict(self.scraped("/debug/pprof/profile"))
        cpu = [v for v in views if v["type"] == ("cpu", "nanoseconds")]
        self.assertGreaterEqual(len(cpu), 2)
        alpha = beta = 0
        for v in cpu:
            go = ps.go_pprof_raw(taken[v["time"]], self.tmp)
            self.assertEqual(nonzero(ps.string_attrs_only(v["samples"])),
                             nonzero(go["samples"][("cpu", "nanoseconds")]))
            self.assertEqual(v["resource"].get("service.name"), "unspecified")
            for (names, _), val in v["samples"].items():
                alpha += val if names and names[0] == "main.burnAlpha" else 0
                beta += val if names and names[0] == "main.burnBeta" else 0
        # 3 calls to 1 of the same work: 3:1 within sampling noise (40+ samples at 100 Hz on a
        # busy machine: beta's share 0.25 +- 0.07, two standard deviations)
        self.assertGreater(alpha + beta, 40 * 10 ** 7, "too few samples to compare")
        self.assertTrue(1.5 < alpha / max(beta, 1) < 6, "burnAlpha/burnBeta = %.2f (3 expected)"
                        % (alpha / max(beta, 1)))
        self.assertTrue([v for v in views if v["type"] == ("goroutine", "count")])

    def test_restarted_target_starts_a_new_series(self):
        mport = h.free_port()
        static = "- targets: [127.0.0.1:%d]" % self.tee.port
        cfg = scrape_config(mport, self.sink.url, static, interval="1s", types={"memory"})
        cfg = cfg.replace("service:\n", "service:\n  telemetry:\n    logs:\n      level: debug\n"
                          , 1).replace("  telemetry:\n    metrics:", "    metrics:", 1)
        pc = h.started_profcol(self, cfg, mport, "scrape-restart")
        heap = "/debug/pprof/heap"
        # a delta was sent: the old process' counters are above 0 (a young Go process' heap
        # profile is empty until a GC cycle completed)
        self.assertTrue(h.wait_for(lambda: any(v["type"] in CUMULATIVE
                                               for v in sink_views(self.sink)), 20))
        port = self.target.port
        self.target.stop()
        # the new process allocates from another function: the old stacks' counters go down
        # (without it, a young old process and GC timing could leave every value higher)
        self.target = Target(self.binary, port, restarted=True)
        self.addCleanup(self.target.stop)
        before = self.count(heap)
        self.assertTrue(h.wait_for(lambda: self.count(heap) >= before + 4, 20))
        text = pc.wait_stderr(lambda t: "a new delta series" in t, 5)
        pc.stop()
        self.assertIn("a new delta series", text)
        views = [v for v in sink_views(self.sink) if v["type"] in CUMULATIVE]
        taken = self.scraped(heap)
        times = [t for t, _ in taken]
        after = [v for v in views if v["time"] in times[before:]]
        self.assertTrue(after, "no delta after the restart")
        for v in views:
            self.assertTrue(all(x > 0 for x in v["samples"].values()), "negative delta")
            i = times.index(v["time"])
            self.assertNotEqual(i, before, "the restarted process' first scrape was sent")
            go = ps.go_pprof_raw(taken[i][1], self.tmp, base=taken[i - 1][1])
            self.assertEqual(nonzero(ps.string_attrs_only(v["samples"])),
                             nonzero(go["samples"][v["type"]]))


class BadServer(h.LocalServer):
    """Answers by path prefix: /404, /garbage, /html, /big (2 MiB), /bomb (a gzip bomb), /slow
    (late), /hang (never)."""

    def __init__(self):
        bomb = gzip.compress(b"\0" * (8 << 20), 9)
        garbage = bytes(range(256)) * 64
        stop = self.stopping = threading.Event()
        self.delta_heap = None  # bytes served at /debug/pprof/delta_heap and /auth/...
        self.seen = []  # the headers of /auth requests
        self.slow = []  # (arrived, answered) of /slow requests
        self.arrivals = []  # (time, path) of every request
        self.lock = threading.Lock()
        srv = self

        class Handler(h.QuietHandler):
            def do_GET(self):
                p = self.path
                with srv.lock:
                    srv.arrivals.append((time.monotonic(), p))
                if p == "/debug/pprof/delta_heap":
                    self.reply(200, "application/octet-stream", srv.delta_heap)
                    return
                if p.startswith("/404"):
                    self.reply(404, "text/plain", b"404 page not found\n")
                elif p.startswith("/garbage"):
                    self.reply(200, "application/octet-stream", b"\x08\x01" + garbage)
                elif p.startswith("/html"):
                    self.reply(200, "text/html", b"<html><body>pprof index</body></html>")
                elif p.startswith("/auth"):  # the client settings: token and headers
                    hd = self.lower_headers()
                    srv.seen.append(hd)
                    ok = hd.get("authorization") == "Bearer s3cret" and hd.get("x-team") == "a"
                    self.reply(200 if ok else 401, "application/octet-stream" if ok else
                               "text/plain", srv.delta_heap if ok else b"unauthorized\n")
                elif p.startswith("/slow"):  # answers, late
                    t0 = time.monotonic()
                    stop.wait(0.8)
                    with srv.lock:  # before the answer: profcol cannot start another earlier
                        srv.slow.append((t0, time.monotonic()))
                    self.reply(404, "text/plain", b"slow 404\n")
                elif p.startswith("/big"):  # over max_body_size as received
                    self.reply(200, "application/octet-stream", b"\x1f\x8b" + b"\0" * (2 << 20))
                elif p.startswith("/bomb"):
                    self.reply(200, "application/octet-stream", bomb)
                else:
                    stop.wait(30)

        super().__init__(Handler)

    def stop(self):
        self.stopping.set()
        super().stop()


class BadTargetsTest(WithTarget):

    def test_bad_targets_counted_while_a_good_one_goes_on(self):
        good = Target(self.binary)
        self.addCleanup(good.stop)
        bad = BadServer().start()
        self.addCleanup(bad.stop)
        sink = h.started_sink(self)
        mport = h.free_port()
        static = "- targets: [127.0.0.1:%d]\n  labels: {instance: good}\n" % good.port
        kinds = {"404": "http_status", "garbage": "decode", "html": "not_pprof",
                 "bomb": "too_large", "big": "too_large", "hang": "timeout"}
        for k in kinds:
            static += ("- targets: [127.0.0.1:%d]\n  labels: {instance: %s, "
                       "__profile_path_prefix__: /%s}\n" % (bad.port, k, k))
        cfg = scrape_config(mport, sink.url, static, interval="1s", types={"goroutine"},
                            extra="    max_body_size: 1MiB\n")
        cfg = cfg.replace("scrape_timeout: 2s", "scrape_timeout: 500ms")
        pc = h.started_profcol(self, cfg, mport, "scrape-bad")
        start = time.monotonic()
        time.sleep(6.5)
        text = metrics(mport)
        elapsed = time.monotonic() - start
        for k, reason in kinds.items():
            self.assertGreaterEqual(metric(text, "profcol_scrape_errors_total", instance=k,
                                           reason=reason), 3, "%s: %s\n%s" % (k, reason, text))
            self.assertEqual(metric(text, "profcol_scrape_up", instance=k), 0)
            others = sum(metric(text, "profcol_scrape_errors_total", instance=k, reason=r)
                         for r in set(kinds.values()) - {reason})
            self.assertEqual(others, 0, "%s failed for another reason" % k)
        self.assertEqual(metric(text, "profcol_scrape_up", instance="good"), 1)
        self.assertEqual(metric(text, "profcol_scrape_errors_total", instance="good"), 0)
        # on time: one scrape a second
        self.assertGreaterEqual(metric(text, "profcol_scrapes_total", instance="good"),
                                int(elapsed) - 1)
        good_views = ps.select(sink_views(sink), instance="good")
        self.assertGreaterEqual(len(good_views), int(elapsed) - 2)
        pc.stop()
        log = pc.stderr()
        for k in kinds:
            lines = [ln for ln in log.splitlines() if "failed" in ln and "/%s/" % k in ln]
            self.assertTrue(lines, "%s not logged" % k)
            self.assertLessEqual(len(lines), int(elapsed) + 2, "%s logged too often" % k)
        self.assertIn("response body larger than 1048576 bytes", log)  # cut while read


    def test_concurrent_scrapes_bounded(self):
        bad = BadServer().start()
        self.addCleanup(bad.stop)
        sink = h.started_sink(self)
        mport = h.free_port()
        static = "".join("- targets: [127.0.0.1:%d]\n  labels: {instance: h%d, "
                         "__profile_path_prefix__: /slow}\n" % (bad.port, i) for i in range(6))
        cfg = scrape_config(mport, sink.url, static, interval="1s", types={"goroutine"},
                            extra="    max_concurrent_scrapes: 2\n")
        pc = h.started_profcol(self, cfg, mport, "scrape-bound")
        time.sleep(4)
        with bad.lock:
            spans = list(bad.slow)
        at_once = max(sum(1 for a, b in spans if a <= t < b) for t, _ in spans)
        self.assertEqual(at_once, 2, "scrapes at once")
        pc.stop()

    def test_targets_spread_over_the_interval(self):
        bad = BadServer().start()
        self.addCleanup(bad.stop)
        sink = h.started_sink(self)
        mport = h.free_port()
        static = "".join("- targets: [127.0.0.1:%d]\n  labels: {__profile_path_prefix__: /404/%d}\n"
                         % (bad.port, i) for i in range(20))
        cfg = scrape_config(mport, sink.url, static, interval="2s", types={"goroutine"})
        pc = h.started_profcol(self, cfg, mport, "scrape-spread")
        time.sleep(4.5)
        pc.stop()
        with bad.lock:
            by_path = collections.defaultdict(list)
            for t, p in bad.arrivals:
                by_path[p].append(t)
        self.assertEqual(len(by_path), 20)
        # the second scrape of each target: its phase from the address and path, uniform over the
        # 2 s; the first ones may come together after a slow start (under ASan), the next ones
        # are back on their phases (each fire re-arms from the phase, not from when it ran)
        self.assertTrue(all(len(v) >= 2 for v in by_path.values()), by_path)
        times = sorted(v[1] for v in by_path.values())
        self.assertGreater(times[-1] - times[0], 0.8, times)
        self.assertLess(max(sum(1 for u in times if t <= u < t + 0.1) for t in times), 8, times)

    def test_godeltaprof_is_not_subtracted(self):
        good = Target(self.binary)
        self.addCleanup(good.stop)
        with urllib.request.urlopen("http://127.0.0.1:%d/debug/pprof/heap" % good.port) as r:
            heap = r.read()
        bad = BadServer()
        bad.delta_heap = heap  # the same answer every time: a cumulative type would send nothing
        bad.start()
        self.addCleanup(bad.stop)
        sink = h.started_sink(self)
        mport = h.free_port()
        static = "- targets: [127.0.0.1:%d]" % bad.port
        cfg = scrape_config(mport, sink.url, static, interval="1s", types=set(),
                            extra="    profiling_config:\n      godeltaprof_memory: "
                                  "{enabled: true}\n")
        cfg = cfg.replace("    profiling_config:\n      process_cpu", "      process_cpu")
        pc = h.started_profcol(self, cfg, mport, "scrape-godeltaprof")
        self.assertTrue(h.wait_for(lambda: len(sink_views(sink)) >= 8, 10))
        pc.stop()
        views = sink_views(sink)
        path = os.path.join(self.tmp, "delta_heap.pb.gz")
        with open(path, "wb") as f:
            f.write(heap)
        go = ps.go_pprof_raw(path, self.tmp)
        by_time = collections.defaultdict(list)
        for v in views:
            by_time[v["time"]].append(v)
            self.assertEqual(nonzero(ps.string_attrs_only(v["samples"])),
                             nonzero(go["samples"][v["type"]]), v["type"])
        self.assertGreaterEqual(len(views), 8)  # every scrape, the first too, as answered
        with sink.lock:
            msgs = [r.message for r in sink.requests if r.message is not None]
        names = set()
        for m in msgs:
            st = m.dictionary.string_table
            for rp in m.resource_profiles:
                for sp in rp.scope_profiles:
                    for p in sp.profiles:
                        for i in p.attribute_indices:
                            a = m.dictionary.attribute_table[i]
                            if st[a.key_strindex] == "pyroscope.profile.name":
                                names.add(h._anyvalue(a.value, st)[1])
        self.assertEqual(names, {"memory"})

    def test_client_settings(self):
        good = Target(self.binary)
        self.addCleanup(good.stop)
        with urllib.request.urlopen("http://127.0.0.1:%d/debug/pprof/goroutine" % good.port) as r:
            body = r.read()
        bad = BadServer()
        bad.delta_heap = body
        bad.start()
        self.addCleanup(bad.stop)
        sink = h.started_sink(self)
        mport = h.free_port()
        static = ("- targets: [127.0.0.1:%d]\n  labels: {__profile_path_prefix__: /auth}"
                  % bad.port)
        cfg = scrape_config(mport, sink.url, static, interval="1s", types={"goroutine"},
                            extra="    headers: {X-Team: a}\n"
                                  "    auth: {authenticator: bearertokenauth}\n")
        cfg = cfg.replace("service:\n", "extensions:\n  bearertokenauth:\n    token: s3cret\n"
                          "service:\n  extensions: [bearertokenauth]\n", 1)
        pc = h.started_profcol(self, cfg, mport, "scrape-client")
        self.assertTrue(h.wait_for(lambda: len(sink_views(sink)) >= 2, 10), pc.stderr()[-2000:])
        pc.stop()
        self.assertTrue(bad.seen)
        for hd in bad.seen:
            self.assertEqual(hd.get("authorization"), "Bearer s3cret")
            self.assertEqual(hd.get("x-team"), "a")
            self.assertTrue(hd.get("user-agent", "").startswith("profcol/"))

    def test_one_cpu_profile_per_address(self):
        good = Target(self.binary)
        self.addCleanup(good.stop)
        tee = peers.Tee(good.port)
        self.addCleanup(tee.stop)
        sink = h.started_sink(self)
        mport = h.free_port()
        # two targets at one address: windows of 2 s every 3 s cannot both run
        static = ("- targets: [127.0.0.1:%d]\n  labels: {service_name: one}\n"
                  "- targets: [127.0.0.1:%d]\n  labels: {service_name: two}\n"
                  % (tee.port, tee.port))
        cfg = scrape_config(mport, sink.url, static, interval="3s", types={"process_cpu"},
                            extra="    delta_profiling_duration: 2s\n")
        pc = h.started_profcol(self, cfg, mport, "scrape-cpu-one")
        time.sleep(10)
        text = metrics(mport)
        pc.stop()
        statuses = [r.status for r, _, _ in tee.exchanges() if r.status is not None]
        self.assertTrue(statuses and all(st == 200 for st in statuses), statuses)
        self.assertGreaterEqual(metric(text, "profcol_scrape_errors_total", reason="overlap"), 1)


def up_instances(port):
    """{instance: up} of the goroutine series in profcol's metrics."""
    out = {}
    for ln in metrics(port).splitlines():
        if ln.startswith("profcol_scrape_up{"):
            lab = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', ln[:ln.rindex("}")]))
            out[lab["instance"]] = float(ln.rsplit(" ", 1)[1])
    return out


def discovery_config(mport, sink_url, sd_yaml):
    return ("receivers:\n  pyroscope_scrape:\n    scrape_interval: 1s\n"
            "    profiling_config:\n" +
            "".join("      %s: {enabled: %s}\n" % (t, "true" if t == "goroutine" else "false")
                    for t in ("process_cpu", "memory", "goroutine", "mutex", "block")) +
            sd_yaml +
            "exporters:\n  otlphttp:\n    endpoint: %s\n" % sink_url +
            "service:\n  telemetry:\n    metrics:\n      address: 127.0.0.1:%d\n" % mport +
            "  pipelines:\n    profiles:\n      receivers: [pyroscope_scrape]\n"
            "      exporters: [otlphttp]\n")


class FileSdTest(WithTarget):

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path + ".new", "w") as f:
            f.write(text)
        os.replace(path + ".new", path)  # as Prometheus asks writers to
        return path

    def test_targets_follow_the_files(self):
        a, b = Target(self.binary), Target(self.binary)
        self.addCleanup(a.stop)
        self.addCleanup(b.stop)
        ia, ib = "127.0.0.1:%d" % a.port, "127.0.0.1:%d" % b.port
        self.write("one.json", '[{"targets": ["%s"], "labels": {"service_name": "svc-a"}}]' % ia)
        sink = h.started_sink(self)
        mport = h.free_port()
        sd = ("    file_sd_configs:\n      - files: [%s/*.json, %s/two.yml]\n"
              % (self.tmp, self.tmp))
        pc = h.started_profcol(self, discovery_config(mport, sink.url, sd), mport, "scrape-file")
        self.assertTrue(h.wait_for(lambda: up_instances(mport) == {ia: 1.0}, 10),
                        up_instances(mport))
        # a second file (YAML) adds b; a is still there
        self.write("two.yml", "- targets: [%s]\n  labels: {service_name: svc-b, zone: z1}\n" % ib)
        self.assertTrue(h.wait_for(lambda: up_instances(mport) == {ia: 1.0, ib: 1.0}, 10),
                        up_instances(mport))
        # a file that cannot be read keeps its targets
        self.write("one.json", '[{"targets": ["%s"' % ia)
        time.sleep(2.5)
        self.assertEqual(up_instances(mport), {ia: 1.0, ib: 1.0})
        # a removed from its file, then the YAML file deleted: nothing left
        self.write("one.json", "[]")
        self.assertTrue(h.wait_for(lambda: up_instances(mport) == {ib: 1.0}, 10),
                        up_instances(mport))
        os.unlink(os.path.join(self.tmp, "two.yml"))
        self.assertTrue(h.wait_for(lambda: up_instances(mport) == {}, 10), up_instances(mport))
        self.assertEqual(metric(metrics(mport), "profcol_scrape_targets"), 0)
        pc.stop()
        log = pc.stderr()
        self.assertIn("its targets are kept", log)
        views = sink_views(sink)
        b_views = ps.select(views, **{"service.name": "svc-b"})
        self.assertTrue(b_views and all(v["resource"].get("zone") == "z1" for v in b_views))
        self.assertTrue(all(v["resource"].get("__meta_filepath") is None for v in views))
        self.assertTrue(ps.select(views, **{"service.name": "svc-a"}))


INNER = "PROFCOL_SCRAPE_DNS_INNER"


class DnsSdTest(unittest.TestCase):
    def test_targets_from_dns(self):
        h.run_in_netns(self, INNER, __file__, "DnsInner")


class DnsInner(unittest.TestCase):
    """Runs only inside `unshare --net --mount` (DnsSdTest starts it): dnsmasq on 127.0.0.1:53
    answers A records from a hosts file the test rewrites and SRV records from its config."""

    NAME, SRV = "targets.scrape.test", "_pprof._tcp.scrape.test"

    def setUp(self):
        if not os.environ.get(INNER):
            self.skipTest("runs inside the namespaces DnsSdTest makes")
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
        self.tmp = tempfile.mkdtemp(prefix="scrape-dns-", dir=h.TMP)
        resolv = os.path.join(self.tmp, "resolv.conf")
        with open(resolv, "w") as f:
            f.write("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")
        subprocess.run(["mount", "--bind", resolv, "/etc/resolv.conf"], check=True)
        self.hosts = os.path.join(self.tmp, "hosts")
        self.binary = build_target(self.tmp)
        self.port = h.free_port()
        self.dns = None

    def start_dns(self, a_addrs, srv_port):
        if self.dns:
            self.dns.terminate()
            self.dns.wait(10)
        with open(self.hosts, "w") as f:
            for a in a_addrs:
                f.write("%s %s\n" % (a, self.NAME))
            f.write("127.0.0.4 srv-target.scrape.test\n::1 v6.scrape.test\n")
        self.dns = subprocess.Popen(
            ["dnsmasq", "--keep-in-foreground", "--no-resolv", "--no-hosts",
             "--conf-file=/dev/null", "--addn-hosts=" + self.hosts, "--listen-address=127.0.0.1",
             "--bind-interfaces", "--port=53", "--local-ttl=0", "--user=root",
             "--local=/scrape.test/",  # ours: a name it does not hold is NXDOMAIN
             "--pid-file=" + os.path.join(self.tmp, "dnsmasq.pid")] +
            (["--srv-host=%s,srv-target.scrape.test,%d" % (self.SRV, srv_port)] if srv_port
             else []),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.assertTrue(h.wait_port(53, 10), "dnsmasq did not start")

    def tearDown(self):
        if getattr(self, "dns", None):
            self.dns.terminate()
            self.dns.wait(10)

    def test_dns_targets_come_and_go(self):
        targets = []
        for ip in ("127.0.0.2", "127.0.0.3", "127.0.0.4", "[::1]"):
            t = Target.__new__(Target)
            t.port = self.port
            t.proc = subprocess.Popen([self.binary, "-addr", "%s:%d" % (ip, self.port)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.addCleanup(t.stop)
            targets.append(t)
        self.start_dns(["127.0.0.2"], self.port)
        sink = h.started_sink(self)
        mport = h.free_port()
        sd = ("    dns_sd_configs:\n"
              "      - {names: [%s], type: A, port: %d, refresh_interval: 1s}\n"
              "      - {names: [%s], refresh_interval: 1s}\n"
              "      - {names: [v6.scrape.test], type: AAAA, port: %d, refresh_interval: 1s}\n"
              % (self.NAME, self.port, self.SRV, self.port))
        pc = h.started_profcol(self, discovery_config(mport, sink.url, sd), mport, "scrape-dns")
        a2, a3 = "127.0.0.2:%d" % self.port, "127.0.0.3:%d" % self.port
        srv = "srv-target.scrape.test:%d" % self.port
        v6 = "[::1]:%d" % self.port
        self.assertTrue(h.wait_for(lambda: up_instances(mport) == {a2: 1.0, srv: 1.0, v6: 1.0},
                                   15),
                        "%s\n%s" % (up_instances(mport), pc.stderr()[-3000:]))
        # the name moves to another address, the SRV record goes away
        self.start_dns(["127.0.0.3"], None)
        self.assertTrue(h.wait_for(lambda: up_instances(mport) == {a3: 1.0, v6: 1.0}, 15),
                        "%s\n%s" % (up_instances(mport), pc.stderr()[-3000:]))
        pc.stop()
        views = sink_views(sink)
        self.assertTrue(ps.select(views, instance=srv))
        self.assertTrue(ps.select(views, instance=a3))


class ExampleTest(unittest.TestCase):
    """config/scrape.yaml as written (its ports from the environment): two Go targets every 15s
    to the pyroscope exporter (a recording Pyroscope server checking the protocol) and debug."""

    def test_example_config(self):
        tmp = tempfile.mkdtemp(prefix="scrape-example-", dir=h.TMP)
        self.addCleanup(shutil.rmtree, tmp, True)
        binary = build_target(tmp)
        a, b = Target(binary), Target(binary)
        self.addCleanup(a.stop)
        self.addCleanup(b.stop)
        pyro = ps.PyroscopeServer().start()
        self.addCleanup(pyro.stop)
        mport = h.free_port()
        with open(os.path.join(h.SRC, "config", "scrape.yaml")) as f:
            text = f.read()
        env = {"SCRAPE_CHECKOUT": "127.0.0.1:%d" % a.port,
               "SCRAPE_PAYMENTS": "127.0.0.1:%d" % b.port,
               "PYROSCOPE_ENDPOINT": pyro.url, "SCRAPE_METRICS": "127.0.0.1:%d" % mport}
        pc = h.Profcol(text, wait_ports=[mport], env=env, name="scrape-example")
        self.addCleanup(pc.kill)
        pc.start()

        def names(ups):
            return {(u.app, u.labels.get("__name__")) for u in ups}
        want = {(svc, n) for svc in ("checkout", "payments")
                for n in ("process_cpu", "goroutine", "memory")}
        # the first scrape within 15s, CPU 14s later, memory's first delta a scrape later
        ups = pyro.wait_until(lambda u: want <= names(u), timeout=60)
        self.assertLessEqual(want, names(ups), pc.stderr()[-3000:])
        self.assertEqual(pyro.violations, [])
        for u in ups:
            self.assertEqual(u.labels.get("job"), "go-services")
            self.assertEqual(u.labels.get("env"), "demo")
        pc.stop()
        with open(pc.stdout_path) as f:
            self.assertIn("debug: resources=1", f.read() + pc.stderr())


if __name__ == "__main__":
    unittest.main(verbosity=2)
