#!/usr/bin/python3
"""The profilemetrics connector (docs/profilemetrics.md) against a real Prometheus (Debian's
`prometheus` 2.42 on loopback, its own TSDB, scrape and rule evaluation every second).

ExampleConfigTest: config/profilemetrics.yaml as shipped (ports moved with --set, the flush
interval made 1s so the test is quick): Go CPU profiles (tests/data/go-cpu.pb.gz) posted to the
pyroscope receiver reach the Pyroscope endpoint (a recording server) and, through the connector,
the prometheus exporter. PromQL (/api/v1/query) gives per service the CPU seconds and samples, and
per function the self and total CPU seconds, that `go tool pprof -raw` computes from the very file
sent (summed over the uploads); sum of function.self (other included) equals the service's total.
A JFR recorded at run time (test_jfr.py's record.sh, JDK 17) gives per function what `jfr print
--json` of the same file folds to (Pyroscope's mapping, test_jfr.fold): the top 20 by self tracked,
the rest in function="other". An alerting rule file ("function F takes more than 40 % of service
S's CPU for 1m", with `for: 5s` here) is not firing while F has a small share and fires once
profiles shift toward F (profiles written here as pprof with Python protobuf).

RemoteWriteTest: the Go file through prometheusremotewrite into `prometheus
--web.enable-remote-write-receiver`, the same `go tool pprof -raw` oracle.

CardinalityTest: 10,000 distinct functions across 100 services: the series Prometheus holds for
the connector's metrics stay within max_series (and what top_n allows), the connector's series
gauge is at max_series with the rest counted as dropped, and profcol's VmRSS stays under a bound
(module docstring of the test, BOUND_RSS).

RuleFilesTest: the alerting rule file above and the one docs/profilemetrics.md shows pass
`promtool check rules`.

Without the prometheus binary: skipped with the reason."""

import gzip
import json
import os
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
import pyro_support as ps  # noqa: E402
from signal_support import http_get, metric_value  # noqa: E402
from test_prometheus import prom_query, prom_ready  # noqa: E402

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
GO_CPU = os.path.join(h.SRC, "tests", "data", "go-cpu.pb.gz")
EXAMPLE = os.path.join(h.SRC, "config", "profilemetrics.yaml")
SECOND = 10**9


def vm_rss(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return None


def make_pprof(stacks, period=10000000):
    """gzip pprof bytes of one cpu/nanoseconds sample type: stacks is [(names leaf first,
    value)]; each name one function and one location."""
    p = ps.ppb.Profile()
    strings = [""]

    def s(x):
        if x not in strings:
            strings.append(x)
        return strings.index(x)
    p.sample_type.add(type=s("cpu"), unit=s("nanoseconds"))
    p.period_type.type, p.period_type.unit = s("cpu"), s("nanoseconds")
    p.period = period
    ids = {}
    for names, _ in stacks:
        for n in names:
            if n not in ids:
                i = len(ids) + 1
                ids[n] = i
                p.function.add(id=i, name=s(n), system_name=s(n), filename=s("main.go"))
                loc = p.location.add(id=i, address=0x1000 + i)
                loc.line.add(function_id=i, line=1)
    for names, v in stacks:
        p.sample.add(location_id=[ids[n] for n in names], value=[v])
    p.string_table.extend(strings)
    return gzip.compress(p.SerializeToString())


class PromServer:
    """Debian's prometheus on loopback scraping targets every second, with rule files."""

    def __init__(self, tmp, targets, rules=None, args=()):
        self.port = h.free_port()
        cfg = os.path.join(tmp, "prometheus.yml")
        text = "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
        if rules:
            rpath = os.path.join(tmp, "rules.yml")
            with open(rpath, "w") as f:
                f.write(rules)
            text += "rule_files: ['%s']\n" % rpath
        if targets:
            text += "scrape_configs:\n  - job_name: profcol\n    honor_labels: true\n"
            text += "    static_configs: [{targets: [%s]}]\n" % ", ".join(
                "'127.0.0.1:%d'" % t for t in targets)
        with open(cfg, "w") as f:
            f.write(text)
        self.log = open(os.path.join(tmp, "prometheus.log"), "wb")
        self.proc = subprocess.Popen(
            [PROMETHEUS, "--config.file=" + cfg, "--storage.tsdb.path=" + os.path.join(tmp, "db"),
             "--web.listen-address=127.0.0.1:%d" % self.port] + list(args),
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        if not h.wait_port(self.port, 30, self.proc) or not prom_ready(self.port, self.proc):
            self.stop()
            raise AssertionError("prometheus did not start (listen, then /-/ready)")

    def query(self, q):
        return prom_query(self.port, q)

    def alerts(self):
        url = "http://127.0.0.1:%d/api/v1/alerts" % self.port
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.load(r)["data"]["alerts"]

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        finally:
            self.log.close()


def wait_for(what, fn, timeout=60, step=0.5):
    """fn() until it returns a true value; AssertionError with what and the last value."""
    deadline = time.time() + timeout
    got = None
    while time.time() < deadline:
        got = fn()
        if got:
            return got
        time.sleep(step)
    raise AssertionError("%s: not within %ss (last: %r)" % (what, timeout, got))


ALERT_RULES = """groups:
  - name: profiles
    rules:
      # function F takes more than 40 % of service S's CPU (self time) for 1m; for: 5s here
      - alert: FunctionTakesCPU
        expr: |
          sum by (job) (rate(
              profile_cpu_function_self_seconds_total{job="shifty",function="main.hot"}[10s]))
            / sum by (job) (rate(profile_cpu_seconds_total{job="shifty"}[10s])) > 0.4
        for: 5s
        labels: {severity: page}
        annotations:
          summary: 'main.hot takes {{ $value | humanizePercentage }} of shifty''s CPU'
"""


@unittest.skipUnless(PROMETHEUS, "skipped: prometheus not installed (Debian package prometheus)")
class ExampleConfigTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="profcol-e2e-pm-", dir=h.TMP)
        cls.pyro = ps.PyroscopeServer().start()
        cls.pport, cls.eport, cls.mport = h.free_port(), h.free_port(), h.free_port()
        sets = ["receivers::pyroscope::endpoint=127.0.0.1:%d" % cls.pport,
                "exporters::prometheus::endpoint=127.0.0.1:%d" % cls.eport,
                "exporters::pyroscope::endpoint=%s" % cls.pyro.url,
                "service::telemetry::metrics::address=127.0.0.1:%d" % cls.mport,
                "connectors::profilemetrics::metrics_flush_interval=1s"]
        with open(EXAMPLE) as f:
            example = f.read()
        cls.profcol = h.Profcol(example, wait_ports=[cls.pport, cls.eport],
                                args=[a for s in sets for a in ("--set", s)],
                                name="profcol-pm").start()
        cls.prom = PromServer(cls.tmp, [cls.eport], ALERT_RULES)

    @classmethod
    def tearDownClass(cls):
        cls.prom.stop()
        h.stop_all(cls.profcol, cls.pyro)

    def ingest(self, name, body):
        r = h.post(self.pport, body, "application/octet-stream",
                   path="/ingest?name=%s&format=pprof" % name)
        self.assertEqual(r.status, 200)

    def value(self, q):
        got = self.prom.query(q)
        return float(got[0]["value"][1]) if len(got) == 1 else None

    def wait_value(self, q, want, timeout=60):
        """PromQL q gives want (to a 1e-9 relative difference: seconds are doubles)."""
        return wait_for("%s == %r" % (q, want),
                        lambda: (lambda v: v is not None and abs(v - want) <= 1e-9 * max(1, want))(
                            self.value(q)), timeout)

    def test_go_cpu_matches_pprof(self):
        with open(GO_CPU, "rb") as f:
            body = f.read()
        uploads = 2
        for _ in range(uploads):
            self.ingest("goapp", body)
        total, self_ns, total_ns, samples = go_cpu_oracle(self.tmp, uploads)
        self.assertGreater(total, 0)
        self.wait_value('profile_cpu_seconds_total{job="goapp"}', total / 1e9)
        self.wait_value('profile_samples_total{job="goapp"}', samples)
        # top_n 20 of the example: the file's functions are fewer, so every one is tracked
        self.assertLessEqual(len(total_ns), 20)
        for fn, v in total_ns.items():
            sel = '{job="goapp",function="%s"}' % fn
            self.wait_value("profile_cpu_function_self_seconds_total" + sel,
                            self_ns.get(fn, 0) / 1e9)
            self.wait_value("profile_cpu_function_seconds_total" + sel, v / 1e9)
        self.wait_value('sum(profile_cpu_function_self_seconds_total{job="goapp"})', total / 1e9)
        self.wait_value('profile_cpu_function_self_seconds_total{job="goapp",function="other"}', 0)
        # Go's pprof has no profile.frame.type: every leaf is unknown
        self.wait_value('profile_cpu_frame_type_seconds_total{job="goapp",frame_type="unknown"}',
                        total / 1e9)
        # the profiles also reached Pyroscope (the example's other exporter)
        wait_for("uploads at the Pyroscope endpoint",
                 lambda: sum(1 for u in self.pyro.snapshot() if u.app == "goapp") >= uploads, 30)
        text = http_get(self.mport, "/metrics")[1]
        # the self-metric counts OTLP Sample records: the file's pprof samples, once per sample
        # type (each type is a profile of its own in OTLP); the alert test may have added more
        records = len(ps.pprof_profile(body).sample) * 2 * uploads
        self.assertGreaterEqual(
            metric_value(text, "profcol_connector_profilemetrics_samples_total"), records)

    def test_java_cpu_matches_jfr(self):
        """A JFR recorded here (tests/data/gen/jfr/record.sh, JDK 17) through the pyroscope
        receiver; the oracle is `jfr print --json` of the same file folded as Pyroscope maps it
        (test_jfr.py's fold: ExecutionSample x 1e9/sampleRate ns). One upload is one batch, so
        one window: the tracked functions are its top 20 by self, other the rest."""
        import test_jfr as tj
        recs = tj.recordings()  # skips without java, javac, jfr
        r, _, _ = tj.upload(self.pport, "javaapp", recs.files["A"], "raw")
        self.assertEqual(r.status, 200)
        folded = recs.oracle("A")
        cpu = folded[("process_cpu", ("cpu", "nanoseconds"), ("cpu", "nanoseconds"))]
        total = sum(cpu.values())
        self.assertGreater(total, 0)
        self.wait_value('profile_cpu_seconds_total{job="javaapp"}', total / 1e9)
        self_ns, incl_ns = tj.per_method(cpu, True), tj.per_method(cpu, False)
        got = wait_for("javaapp's functions", lambda: self.prom.query(
            'profile_cpu_function_self_seconds_total{job="javaapp"}'), 60)
        tracked = {x["metric"]["function"]: float(x["value"][1]) for x in got}
        other = tracked.pop("other")
        self.assertEqual(len(tracked), min(20, len(incl_ns)))
        for fn, v in tracked.items():
            self.assertAlmostEqual(v, self_ns.get(fn, 0) / 1e9, places=9, msg=fn)
            self.wait_value('profile_cpu_function_seconds_total{job="javaapp",function="%s"}'
                            % fn, incl_ns[fn] / 1e9)
        untracked = [v for fn, v in self_ns.items() if fn not in tracked]
        self.assertGreaterEqual(min(self_ns.get(fn, 0) for fn in tracked),
                                max(untracked, default=0))
        self.assertAlmostEqual(other, sum(untracked) / 1e9, places=9)

    def test_alert_fires_after_shift(self):
        stop = threading.Event()
        share = {"hot": 0.1}

        def send():
            while not stop.is_set():
                hot = int(100 * share["hot"])
                stacks = [(["main.hot", "main.main"], hot * 10000000),
                          (["main.cold", "main.main"], (100 - hot) * 10000000)]
                self.ingest("shifty", make_pprof(stacks))
                stop.wait(0.5)
        t = threading.Thread(target=send, daemon=True)
        t.start()
        self.addCleanup(t.join)
        self.addCleanup(stop.set)
        ratio = ('sum(rate(profile_cpu_function_self_seconds_total{job="shifty",function='
                 '"main.hot"}[10s])) / sum(rate(profile_cpu_seconds_total{job="shifty"}[10s]))')

        def firing():
            return [a for a in self.prom.alerts() if a["labels"]["alertname"] == "FunctionTakesCPU"
                    and a["state"] == "firing"]
        # before: the expression has been evaluated on data (the share is known, about 10 %) for
        # longer than `for:` and the alert is not firing
        wait_for("a share of main.hot below 40 %",
                 lambda: (lambda v: v is not None and 0.05 < v < 0.2)(self.value(ratio)), 60)
        time.sleep(8)  # more than for: 5s of evaluations on that data
        self.assertLess(self.value(ratio), 0.4)
        self.assertEqual(firing(), [])
        share["hot"] = 0.8
        alerts = wait_for("FunctionTakesCPU firing", firing, 90)
        self.assertEqual(alerts[0]["labels"]["severity"], "page")
        self.assertGreater(float(alerts[0]["value"]), 0.4)


def go_cpu_oracle(tmp, uploads):
    """From `go tool pprof -raw` of GO_CPU: (total ns, {function: self ns}, {function: total
    ns}, samples) for that many uploads of the file."""
    go = ps.go_pprof_raw(GO_CPU, tmp)
    cpu = go["samples"][("cpu", "nanoseconds")]
    self_ns, total_ns = {}, {}
    for (names, _), v in cpu.items():
        if names:
            self_ns[names[0]] = self_ns.get(names[0], 0) + v * uploads
        for n in set(names):
            total_ns[n] = total_ns.get(n, 0) + v * uploads
    samples = sum(go["samples"][("samples", "count")].values()) * uploads
    return sum(cpu.values()) * uploads, self_ns, total_ns, samples


@unittest.skipUnless(PROMETHEUS, "skipped: prometheus not installed (Debian package prometheus)")
class RemoteWriteTest(unittest.TestCase):
    """The same metrics through prometheusremotewrite into `prometheus
    --web.enable-remote-write-receiver` (spec metrics.md §5, §6)."""

    def test_go_cpu_remote_write(self):
        tmp = tempfile.mkdtemp(prefix="profcol-e2e-pmrw-", dir=h.TMP)
        prom = PromServer(tmp, [], args=["--web.enable-remote-write-receiver"])
        self.addCleanup(prom.stop)
        pport = h.free_port()
        profcol = h.Profcol("""
receivers:
  pyroscope:
    endpoint: 127.0.0.1:%d
exporters:
  prometheusremotewrite:
    endpoint: http://127.0.0.1:%d/api/v1/write
connectors:
  profilemetrics:
    metrics_flush_interval: 1s
service:
  pipelines:
    profiles:
      receivers: [pyroscope]
      exporters: [profilemetrics]
    metrics:
      receivers: [profilemetrics]
      exporters: [prometheusremotewrite]
""" % (pport, prom.port), wait_ports=[pport], name="profcol-pmrw").start()
        self.addCleanup(h.stop_all, profcol)
        with open(GO_CPU, "rb") as f:
            r = h.post(pport, f.read(), "application/octet-stream",
                       path="/ingest?name=rwapp&format=pprof")
        self.assertEqual(r.status, 200)
        total, self_ns, total_ns, _ = go_cpu_oracle(tmp, 1)

        def near(q, want):
            got = prom.query(q)
            return len(got) == 1 and abs(float(got[0]["value"][1]) - want) <= 1e-9 * max(1, want)
        checks = [('profile_cpu_seconds_total{job="rwapp"}', total / 1e9)]
        for fn, v in total_ns.items():
            sel = '{job="rwapp",function="%s"}' % fn
            checks.append(("profile_cpu_function_self_seconds_total" + sel,
                           self_ns.get(fn, 0) / 1e9))
            checks.append(("profile_cpu_function_seconds_total" + sel, v / 1e9))
        for q, want in checks:
            wait_for("%s == %r" % (q, want), lambda: near(q, want), 60)


@unittest.skipUnless(PROMTOOL, "skipped: promtool not installed (Debian package prometheus)")
class RuleFilesTest(unittest.TestCase):
    def test_rules_check(self):
        """The test's rule file and the one docs/profilemetrics.md shows pass `promtool check
        rules`."""
        with open(os.path.join(h.SRC, "docs", "profilemetrics.md")) as f:
            doc = f.read()
        block = doc.split("<!-- not a profcol config: a Prometheus rule file -->\n```yaml\n")[1]
        block = block.split("```")[0]
        tmp = tempfile.mkdtemp(prefix="profcol-e2e-pmrules-", dir=h.TMP)
        for name, text in (("test.yml", ALERT_RULES), ("doc.yml", block)):
            path = os.path.join(tmp, name)
            with open(path, "w") as f:
                f.write(text)
            r = subprocess.run([PROMTOOL, "check", "rules", path], capture_output=True, text=True,
                               timeout=60, stdin=subprocess.DEVNULL)
            self.assertEqual(r.returncode, 0, name + ": " + r.stdout + r.stderr)
            self.assertIn("SUCCESS: 1 rules found", r.stdout)


# 100 services x 100 functions of their own = 10,000 functions
SERVICES, FUNCS = 100, 100
TOP_N, MAX_SERIES = 5, 1000
# RSS bound: what profcol held before any profile plus 48 MiB. The connector holds at most
# MAX_SERIES series (under 256 bytes each with the name) and per group a window of at most
# 8 * top_n + 64 names (104 here: 100 groups x 104 x ~200 bytes = 2 MiB); one flush's metrics
# batch is ~MAX_SERIES points (~0.5 MiB) and the prometheus exporter keeps as many series. The rest
# of the margin is the receiver's decoding of the 100 uploads and allocator slack.
BOUND_EXTRA = 48 << 20
# Under AddressSanitizer freed memory waits in its quarantine (256 MiB by default on x86_64)
# before it is reused, so RSS there also holds what decoding the uploads freed.
if h.SANITIZED:
    BOUND_EXTRA += 256 << 20


@unittest.skipUnless(PROMETHEUS, "skipped: prometheus not installed (Debian package prometheus)")
class CardinalityTest(unittest.TestCase):
    def test_series_bounded(self):
        tmp = tempfile.mkdtemp(prefix="profcol-e2e-pmcard-", dir=h.TMP)
        pport, eport, mport = h.free_port(), h.free_port(), h.free_port()
        profcol = h.Profcol("""
receivers:
  pyroscope:
    endpoint: 127.0.0.1:%d
exporters:
  prometheus:
    endpoint: 127.0.0.1:%d
connectors:
  profilemetrics:
    metrics_flush_interval: 1s
    max_series: %d
    functions: {top_n: %d}
service:
  telemetry:
    metrics:
      address: 127.0.0.1:%d
  pipelines:
    profiles:
      receivers: [pyroscope]
      exporters: [profilemetrics]
    metrics:
      receivers: [profilemetrics]
      exporters: [prometheus]
""" % (pport, eport, MAX_SERIES, TOP_N, mport), wait_ports=[pport, eport],
            name="profcol-pmcard").start()
        self.addCleanup(h.stop_all, profcol)
        prom = PromServer(tmp, [eport])
        self.addCleanup(prom.stop)
        rss0 = vm_rss(profcol.proc.pid)
        for svc in range(SERVICES):
            stacks = [(["svc%d.fn%d" % (svc, f), "svc%d.main" % svc], (1 + f) * 10000000)
                      for f in range(FUNCS)]
            r = h.post(pport, make_pprof(stacks), "application/octet-stream",
                       path="/ingest?name=svc%d&format=pprof" % svc)
            self.assertEqual(r.status, 200)
        def self_metric():
            text = http_get(mport, "/metrics")[1]
            return (metric_value(text, "profcol_connector_profilemetrics_series"),
                    metric_value(text, "profcol_connector_profilemetrics_series_dropped_total"))
        # full: a new group costs 2 (value, other), a function 2, a frame type 1, so the last
        # refusal may leave one series free
        series, dropped = wait_for("the connector at max_series",
                                   lambda: (lambda v: v if v[0] and v[0] >= MAX_SERIES - 1
                                            else None)(self_metric()), 60)
        self.assertLessEqual(series, MAX_SERIES)
        self.assertGreater(dropped, 0)

        def prom_count():
            r = prom.query('count({__name__=~"profile_.*"})')
            return float(r[0]["value"][1]) if r else None
        # every series the connector holds is one series in Prometheus, no more
        wait_for("Prometheus holding the connector's %d series" % series,
                 lambda: prom_count() == series, 60)
        time.sleep(3)  # a few more scrapes: nothing beyond the bound appears later
        # what top_n allows: per service value, other, one frame type, 2 per function
        allowed = min(MAX_SERIES, SERVICES * (3 + 2 * TOP_N))
        self.assertLessEqual(prom_count(), allowed)
        self.assertEqual(prom_count(), self_metric()[0])
        # which services got a group depends on how the uploads fell into flush windows (the
        # first window's functions take room later services then lack); each one that did has
        # its exact total: the bound drops series, it never makes one wrong
        want = sum((1 + f) * 10000000 for f in range(FUNCS)) / 1e9
        totals = prom.query("profile_cpu_seconds_total")
        self.assertGreater(len(totals), 0)
        self.assertLessEqual(len(totals), SERVICES)
        for r in totals:
            self.assertAlmostEqual(float(r["value"][1]), want, places=9, msg=r["metric"])
            selfs = prom.query('sum(profile_cpu_function_self_seconds_total{job="%s"})'
                               % r["metric"]["job"])
            self.assertAlmostEqual(float(selfs[0]["value"][1]), want, places=9)
        rss = vm_rss(profcol.proc.pid)
        self.assertLess(rss, rss0 + BOUND_EXTRA, "VmRSS %d before, %d after" % (rss0, rss))


if __name__ == "__main__":
    unittest.main()
