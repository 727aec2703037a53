#!/usr/bin/python3
"""The `prometheus` exporter against real Prometheus (Debian's `prometheus` 2.42, which ships
`promtool`), spec metrics.md §2, §3, §6.

OTLP metrics (gauges, cumulative and delta sums, cumulative and delta histograms, a summary, with
resource attributes) are posted to profcol's otlp receiver; two prometheus exporters serve them:
`text` (0.0.4, const_labels) and `om` (OpenMetrics, namespace, resource attributes as labels,
timestamps). A Prometheus on loopback scrapes both every second (its own TSDB in a temp dir);
its HTTP API (/api/v1/query) must give the values the sent data implies by the exporter's rules
(cumulative kept, contiguous deltas added up, a non-contiguous delta replacing, delta up-down
sums dropped) under the normalised names. Both targets must be up with no scrape error (so
Prometheus parsed both formats). `promtool check metrics` must pass the text rendering; the
OpenMetrics rendering must parse with python3-prometheus-client's strict OpenMetrics parser.
A third exporter shows the bounds: max_series (new series counted and dropped) and
metric_expiration (series gone once not updated).

RemoteWriteTest: the prometheusremotewrite exporter into `prometheus
--web.enable-remote-write-receiver` (spec §4, §5): the cumulative series sent are what
/api/v1/query gives; deltas are dropped and counted; NoRecordedValue is the stale marker.

Without the prometheus binary: "skipped: <reason>"."""

import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
from signal_support import METRICS, http_get, metric_value  # noqa: E402

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
DELTA, CUMULATIVE = 1, 2


def _attrs(repeated, **kv):
    for k, v in kv.items():
        h.set_anyvalue(repeated.add(key=k.replace("__", ".")).value, v)


def _req(build):
    """A request of one resource (service shop in namespace prod, instance i-1, host h1) with
    one scope (name, version, schema URL, an attribute); build(scope_metrics) adds the
    metrics."""
    req = METRICS.Req()
    rm = req.resource_metrics.add()
    _attrs(rm.resource.attributes, service__name="shop", service__namespace="prod",
           service__instance__id="i-1", host__name="h1")
    sm = rm.scope_metrics.add()
    sm.scope.name, sm.scope.version = "e2e.scope", "1.2.3"
    sm.schema_url = "https://opentelemetry.io/schemas/1.37.0"
    _attrs(sm.scope.attributes, lib__kind="http")
    build(sm)
    return req


def _sum(sm, name, unit, temporality, monotonic, points, desc="a sum"):
    m = sm.metrics.add(name=name, unit=unit, description=desc)
    m.sum.aggregation_temporality, m.sum.is_monotonic = temporality, monotonic
    for start, t, v, attrs in points:
        dp = m.sum.data_points.add(start_time_unix_nano=start, time_unix_nano=t)
        if isinstance(v, int):
            dp.as_int = v
        else:
            dp.as_double = v
        _attrs(dp.attributes, **attrs)


def _gauge(sm, name, unit, t, v, desc="a gauge"):
    m = sm.metrics.add(name=name, unit=unit, description=desc)
    m.gauge.data_points.add(time_unix_nano=t, as_double=v)


def _histogram(sm, name, unit, temporality, points, desc="a histogram"):
    m = sm.metrics.add(name=name, unit=unit, description=desc)
    m.histogram.aggregation_temporality = temporality
    for start, t, bounds, counts, total in points:
        m.histogram.data_points.add(start_time_unix_nano=start, time_unix_nano=t,
                                    explicit_bounds=bounds, bucket_counts=counts,
                                    count=sum(counts), sum=total)


def now_ns():
    return time.time_ns()


def sent_requests(t0):
    """What is posted, in order, and what each series must read by the exporter's rules (the
    oracle: worked out here from the points sent)."""
    s = 10**9
    reqs = []
    # 1: cumulative counter 100 then 150 -> 150
    reqs.append(_req(lambda sm: _sum(sm, "app.requests", "{request}", CUMULATIVE, True,
                                     [(t0, t0 + s, 100, {"route": "/a"})])))
    reqs.append(_req(lambda sm: _sum(sm, "app.requests", "{request}", CUMULATIVE, True,
                                     [(t0, t0 + 2 * s, 150, {"route": "/a"})])))
    # 2: delta counter chained (start = previous time): 10 + 5 + 2.5 -> 17.5;
    #    /b not chained (a gap): the last delta replaces -> 4
    reqs.append(_req(lambda sm: _sum(sm, "app.egress", "By", DELTA, True,
                                     [(t0, t0 + s, 10, {"path": "/a"}),
                                      (t0, t0 + s, 3, {"path": "/b"})])))
    reqs.append(_req(lambda sm: _sum(sm, "app.egress", "By", DELTA, True,
                                     [(t0 + s, t0 + 2 * s, 5, {"path": "/a"}),
                                      (t0 + 3 * s, t0 + 4 * s, 4, {"path": "/b"})])))
    reqs.append(_req(lambda sm: _sum(sm, "app.egress", "By", DELTA, True,
                                     [(t0 + 2 * s, t0 + 3 * s, 2.5, {"path": "/a"})])))
    # 3: gauges, a cumulative up-down sum (a gauge), a delta up-down sum (dropped)

    def gauges(sm):
        _gauge(sm, "app.temperature", "Cel", t0 + s, 21.5)
        _gauge(sm, "app.cpu.utilization", "1", t0 + s, 0.25)
        _sum(sm, "app.queue.size", "{item}", CUMULATIVE, False, [(t0, t0 + s, 7, {})])
        _sum(sm, "app.queue.delta", "{item}", DELTA, False, [(t0, t0 + s, -3, {})])
    reqs.append(_req(gauges))
    # 4: cumulative histogram; delta histogram chained (buckets add up)
    reqs.append(_req(lambda sm: _histogram(sm, "app.latency", "s", CUMULATIVE,
                                           [(t0, t0 + s, [0.1, 1, 10], [1, 4, 3, 2], 23.5)])))
    reqs.append(_req(lambda sm: _histogram(sm, "app.size", "By", DELTA,
                                           [(t0, t0 + s, [100, 1000], [1, 2, 0], 1500)])))
    reqs.append(_req(lambda sm: _histogram(sm, "app.size", "By", DELTA,
                                           [(t0 + s, t0 + 2 * s, [100, 1000], [0, 1, 3], 9000)])))
    expected = {
        'app_requests_total{route="/a"}': 150,
        'app_egress_bytes_total{path="/a"}': 17.5,
        'app_egress_bytes_total{path="/b"}': 4,
        "app_temperature_celsius": 21.5,
        "app_cpu_utilization_ratio": 0.25,
        "app_queue_size": 7,
        'app_latency_seconds_bucket{le="0.1"}': 1,
        'app_latency_seconds_bucket{le="1"}': 5,
        'app_latency_seconds_bucket{le="10"}': 8,
        'app_latency_seconds_bucket{le="+Inf"}': 10,
        "app_latency_seconds_sum": 23.5,
        "app_latency_seconds_count": 10,
        'app_size_bytes_bucket{le="100"}': 1,
        'app_size_bytes_bucket{le="1000"}': 4,
        'app_size_bytes_bucket{le="+Inf"}': 7,
        "app_size_bytes_sum": 10500,
        "app_size_bytes_count": 7,
    }
    return reqs, expected


def prom_ready(port, proc, timeout=30):
    """Prometheus listens before its TSDB is open and answers 503 to queries and writes until
    then: wait for /-/ready to answer 200."""
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/-/ready" % port, timeout=5) as r:
                if r.status == 200:
                    return True
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.2)
    return False


def prom_query(port, query):
    url = "http://127.0.0.1:%d/api/v1/query?%s" % (port, urllib.parse.urlencode({"query": query}))
    with urllib.request.urlopen(url, timeout=10) as r:
        doc = json.load(r)
    assert doc["status"] == "success", doc
    return doc["data"]["result"]


def with_labels(selector, extra):
    """'name{a="x"}' + 'b="y"' -> 'name{a="x",b="y"}'."""
    if "{" in selector:
        return selector[:-1] + "," + extra + "}"
    return selector + "{" + extra + "}"


@unittest.skipUnless(PROMETHEUS and PROMTOOL, "skipped: prometheus/promtool not installed "
                     "(Debian package prometheus)")
class PrometheusExporterTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="profcol-e2e-prom-")
        p = cls.ports = {k: h.free_port() for k in ("otlp", "otlp2", "text", "om", "short",
                                                      "self", "prom")}
        cls.profcol = h.Profcol("""
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%(otlp)d
  otlp/short:
    protocols:
      http:
        endpoint: 127.0.0.1:%(otlp2)d
exporters:
  prometheus/text:
    endpoint: 127.0.0.1:%(text)d
    const_labels:
      env: e2e
  prometheus/om:
    endpoint: 127.0.0.1:%(om)d
    namespace: om
    enable_open_metrics: true
    send_timestamps: true
    resource_to_telemetry_conversion:
      enabled: true
  prometheus/short:
    endpoint: 127.0.0.1:%(short)d
    metric_expiration: 3s
    max_series: 3
service:
  telemetry:
    metrics:
      address: 127.0.0.1:%(self)d
  pipelines:
    metrics:
      receivers: [otlp]
      exporters: [prometheus/text, prometheus/om]
    metrics/short:
      receivers: [otlp/short]
      exporters: [prometheus/short]
""" % p, wait_ports=[p[k] for k in ("otlp", "otlp2", "text", "om", "short")],
                                name="profcol-prom").start()
        cfg = os.path.join(cls.tmp, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("""global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: text
    honor_labels: true
    static_configs: [{targets: ['127.0.0.1:%(text)d']}]
  - job_name: om
    honor_labels: true
    static_configs: [{targets: ['127.0.0.1:%(om)d']}]
""" % p)
        cls.prom_log = open(os.path.join(cls.tmp, "prometheus.log"), "wb")
        cls.prom = subprocess.Popen(
            [PROMETHEUS, "--config.file=" + cfg,
             "--storage.tsdb.path=" + os.path.join(cls.tmp, "db"),
             "--web.listen-address=127.0.0.1:%d" % p["prom"]],
            stdout=cls.prom_log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        if not h.wait_port(p["prom"], 30, cls.prom) or not prom_ready(p["prom"], cls.prom):
            cls.tearDownClass()
            raise AssertionError("prometheus did not start (listen, then /-/ready)")
        t0 = now_ns() - 60 * 10**9
        cls.reqs, cls.expected = sent_requests(t0)
        for req in cls.reqs:
            r = h.post(p["otlp"], req.SerializeToString(), path=METRICS.path)
            assert r.status == 200, r

    @classmethod
    def tearDownClass(cls):
        try:
            cls.prom.terminate()
            cls.prom.wait(10)
        finally:
            cls.prom_log.close()
            h.stop_all(cls.profcol)
            if not os.environ.get("E2E_KEEP"):
                shutil.rmtree(cls.tmp, ignore_errors=True)

    def wait_value(self, query, want, timeout=30):
        deadline = time.time() + timeout
        got = None
        while time.time() < deadline:
            got = prom_query(self.ports["prom"], query)
            if len(got) == 1 and float(got[0]["value"][1]) == want:
                return got[0]["metric"]
            time.sleep(0.5)
        self.fail("%s: want %r, Prometheus has %r" % (query, want, got))

    def test_text_values_in_prometheus(self):
        base = 'job="prod/shop",instance="i-1",env="e2e",otel_scope_name="e2e.scope"'
        for sel, want in self.expected.items():
            labels = self.wait_value(with_labels(sel, base), want)
            self.assertEqual(labels.get("otel_scope_version"), "1.2.3")
            self.assertEqual(labels.get("otel_scope_lib_kind"), "http")
            self.assertEqual(labels.get("otel_scope_schema_url"),
                             "https://opentelemetry.io/schemas/1.37.0")
            self.assertNotIn("host_name", labels)  # resource attributes only in target_info
        self.wait_value('target_info{job="prod/shop",instance="i-1",host_name="h1"}', 1)
        # the delta up-down sum is dropped, not exposed
        self.assertEqual(prom_query(self.ports["prom"], "app_queue_delta"), [])

    def test_openmetrics_values_in_prometheus(self):
        base = 'job="prod/shop",instance="i-1",host_name="h1"'
        for sel, want in self.expected.items():
            self.wait_value(with_labels("om_" + sel, base), want)

    def test_targets_up(self):
        deadline = time.time() + 30
        while True:
            url = "http://127.0.0.1:%d/api/v1/targets" % self.ports["prom"]
            with urllib.request.urlopen(url, timeout=10) as r:
                targets = json.load(r)["data"]["activeTargets"]
            health = {t["labels"]["job"]: (t["health"], t["lastError"]) for t in targets}
            if health == {"text": ("up", ""), "om": ("up", "")} or time.time() > deadline:
                break
            time.sleep(0.5)
        self.assertEqual(health, {"text": ("up", ""), "om": ("up", "")})

    def scrape(self, port, accept=None, gzipped=False):
        req = urllib.request.Request("http://127.0.0.1:%d/metrics" % port)
        if accept:
            req.add_header("Accept", accept)
        if gzipped:
            req.add_header("Accept-Encoding", "gzip")
        with urllib.request.urlopen(req, timeout=10) as r:
            body = r.read()
            if gzipped:
                self.assertEqual(r.headers.get("Content-Encoding"), "gzip")
                body = gzip.decompress(body)
            return r.headers.get("Content-Type"), body

    def test_gzip(self):
        self.wait_value('app_requests_total{route="/a"}', 150)
        for port, accept in ((self.ports["text"], None),
                             (self.ports["om"], "application/openmetrics-text")):
            self.assertEqual(self.scrape(port, accept, gzipped=True), self.scrape(port, accept))

    def test_promtool_checks_text(self):
        self.wait_value('app_requests_total{route="/a"}', 150)
        ctype, body = self.scrape(self.ports["text"])
        self.assertTrue(ctype.startswith("text/plain; version=0.0.4"), ctype)
        r = subprocess.run([PROMTOOL, "check", "metrics"], input=body, capture_output=True,
                           timeout=30)
        self.assertEqual(r.returncode, 0, (r.stdout + r.stderr).decode() + body.decode())
        # the om exporter answers text too when OpenMetrics is not asked for
        ctype, body = self.scrape(self.ports["om"], accept="text/plain")
        self.assertTrue(ctype.startswith("text/plain; version=0.0.4"), ctype)
        r = subprocess.run([PROMTOOL, "check", "metrics"], input=body, capture_output=True,
                           timeout=30)
        self.assertEqual(r.returncode, 0, (r.stdout + r.stderr).decode() + body.decode())

    def test_openmetrics_parses(self):
        try:
            from prometheus_client.openmetrics import parser
        except ImportError:
            self.skipTest("skipped: python3-prometheus-client not installed")
        self.wait_value('om_app_requests_total{route="/a"}', 150)
        ctype, body = self.scrape(self.ports["om"], accept="application/openmetrics-text")
        self.assertTrue(ctype.startswith("application/openmetrics-text; version=1.0.0"), ctype)
        self.assertTrue(body.endswith(b"# EOF\n"))
        fams = {f.name: f for f in parser.text_string_to_metric_families(body.decode())}
        self.assertEqual(fams["om_app_requests"].type, "counter")
        samples = {s.name: s for s in fams["om_app_requests"].samples}
        self.assertEqual(samples["om_app_requests_total"].value, 150)
        # send_timestamps: the point's time, in seconds
        ts = samples["om_app_requests_total"].timestamp
        self.assertIsNotNone(ts)
        self.assertEqual(fams["om_app_latency_seconds"].type, "histogram")
        self.assertEqual(fams["om_app_size_bytes"].type, "histogram")

    def test_series_bounds(self):
        """max_series 3: target_info, app_requests_total and the first app_egress_bytes_total
        series are kept (in the order sent), later series are refused and counted; after
        metric_expiration (3s) of silence they are gone."""
        for req in sent_requests(now_ns() - 60 * 10**9)[0]:
            r = h.post(self.ports["otlp2"], req.SerializeToString(), path=METRICS.path)
            self.assertEqual(r.status, 200)
        def body():
            return self.scrape(self.ports["short"])[1].decode()

        def samples(text):
            return [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
        deadline = time.time() + 10
        while len(samples(body())) != 3 and time.time() < deadline:
            time.sleep(0.2)
        self.assertEqual(len(samples(body())), 3, body())
        # 9 distinct series sent (target_info, requests, bytes x2, 3 gauges, 2 histograms)
        _, text = http_get(self.ports["self"], "/metrics")
        dropped = metric_value(text, "profcol_exporter_prometheus_dropped_series",
                               exporter="prometheus/short")
        self.assertGreater(dropped or 0, 0, text)
        # the scrape endpoint's connections are the exporter's, labelled as such
        self.assertIsNotNone(metric_value(text, "profcol_http_server_open_connections",
                                          exporter="prometheus/short"), text)
        self.assertIsNone(metric_value(text, "profcol_http_server_open_connections",
                                       receiver="prometheus/short"), text)
        deadline = time.time() + 15
        while samples(body()) and time.time() < deadline:
            time.sleep(0.5)
        self.assertEqual(samples(body()), [])


def remote_write_requests(t0):
    """Cumulative series (sent), deltas and a stale gauge; what Prometheus must then hold."""
    s = 10**9
    reqs = [
        _req(lambda sm: _sum(sm, "app.requests", "{request}", CUMULATIVE, True,
                             [(t0, t0 + s, 100, {"route": "/a"})])),
        _req(lambda sm: _sum(sm, "app.requests", "{request}", CUMULATIVE, True,
                             [(t0, t0 + 2 * s, 150, {"route": "/a"})])),
        _req(lambda sm: (_gauge(sm, "app.cpu.utilization", "1", t0 + s, 0.25),
                         _gauge(sm, "app.temperature", "Cel", t0 + s, 21.5),
                         _sum(sm, "app.queue.size", "{item}", CUMULATIVE, False,
                              [(t0, t0 + s, 7, {})]),
                         _sum(sm, "app.egress", "By", DELTA, True, [(t0, t0 + s, 10, {})]),
                         _histogram(sm, "app.latency", "s", CUMULATIVE,
                                    [(t0, t0 + s, [0.1, 1, 10], [1, 4, 3, 2], 23.5)]),
                         _histogram(sm, "app.size", "By", DELTA,
                                    [(t0, t0 + s, [100], [1, 2], 1500)]))),
    ]
    # the temperature series ends: NoRecordedValue -> the stale marker
    stale = _req(lambda sm: _gauge(sm, "app.temperature", "Cel", t0 + 2 * s, 0))
    stale.resource_metrics[0].scope_metrics[0].metrics[0].gauge.data_points[0].flags = 1
    reqs.append(stale)
    expected = {
        'app_requests_total{route="/a"}': 150,
        "app_cpu_utilization_ratio": 0.25,
        "app_queue_size": 7,
        'app_latency_seconds_bucket{le="0.1"}': 1,
        'app_latency_seconds_bucket{le="1"}': 5,
        'app_latency_seconds_bucket{le="10"}': 8,
        'app_latency_seconds_bucket{le="+Inf"}': 10,
        "app_latency_seconds_sum": 23.5,
        "app_latency_seconds_count": 10,
    }
    absent = ["app_egress_bytes_total", "app_size_bytes_bucket", "app_temperature_celsius"]
    return reqs, expected, absent


class FlakyProxy(h.QuietHandler):
    """In front of Prometheus' /api/v1/write: /flaky answers 500 to the first `fail` POSTs, then
    forwards each body and the remote-write headers to Prometheus and relays its status;
    /reject always answers 400. Records (path, status) of every POST."""
    target = None
    fail = 2
    seen = []

    def do_POST(self):
        body = self.read_body()
        if self.path == "/reject":
            status = 400
        elif FlakyProxy.fail > 0:
            FlakyProxy.fail -= 1
            status = 500
        else:
            req = urllib.request.Request(FlakyProxy.target, data=body, method="POST")
            for k in ("Content-Encoding", "Content-Type", "X-Prometheus-Remote-Write-Version",
                      "User-Agent"):
                req.add_header(k, self.headers.get(k, ""))
            try:
                with urllib.request.urlopen(req, timeout=10) as r:
                    status = r.status
            except urllib.error.HTTPError as e:
                status = e.code
        FlakyProxy.seen.append((self.path, status))
        self.reply(status, "text/plain", b"")


def n_points(req):
    n = 0
    for rm in req.resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                n += len(getattr(m, m.WhichOneof("data")).data_points)
    return n


@unittest.skipUnless(PROMETHEUS, "skipped: prometheus not installed (Debian package prometheus)")
class RemoteWriteTest(unittest.TestCase):
    """prometheusremotewrite into `prometheus --web.enable-remote-write-receiver` (spec §4-§6):
    what /api/v1/query then gives equals the cumulative data sent; deltas are not sent (counted);
    a NoRecordedValue point arrives as the stale marker (the series is gone at once)."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="profcol-e2e-prw-")
        p = cls.ports = {k: h.free_port() for k in ("otlp", "self", "prom")}
        cfg = os.path.join(cls.tmp, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: 15s\n")
        cls.prom_log = open(os.path.join(cls.tmp, "prometheus.log"), "wb")
        cls.prom = subprocess.Popen(
            [PROMETHEUS, "--config.file=" + cfg,
             "--storage.tsdb.path=" + os.path.join(cls.tmp, "db"),
             "--web.listen-address=127.0.0.1:%d" % p["prom"],
             "--web.enable-remote-write-receiver"],
            stdout=cls.prom_log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        cls.profcol = None
        if not h.wait_port(p["prom"], 30, cls.prom) or not prom_ready(p["prom"], cls.prom):
            cls.tearDownClass()
            raise AssertionError("prometheus did not start (listen, then /-/ready)")
        FlakyProxy.target = "http://127.0.0.1:%d/api/v1/write" % p["prom"]
        cls.proxy = h.LocalServer(FlakyProxy).start()
        p["proxy"] = cls.proxy.port
        cls.profcol = h.Profcol("""
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%(otlp)d
exporters:
  prometheusremotewrite/flaky:
    endpoint: http://127.0.0.1:%(proxy)d/flaky
    external_labels: {cluster: flaky}
    sending_queue: {num_consumers: 1}
    retry_on_failure: {initial_interval: 100ms}
  prometheusremotewrite/reject:
    endpoint: http://127.0.0.1:%(proxy)d/reject
    external_labels: {cluster: reject}
    sending_queue: {num_consumers: 1}
    retry_on_failure: {initial_interval: 100ms}
  prometheusremotewrite:
    endpoint: http://127.0.0.1:%(prom)d/api/v1/write
    external_labels:
      cluster: e2e
  prometheusremotewrite/split:
    endpoint: http://127.0.0.1:%(prom)d/api/v1/write
    external_labels:
      cluster: split
    max_batch_size_bytes: 300
    sending_queue:
      num_consumers: 1
service:
  telemetry:
    metrics:
      address: 127.0.0.1:%(self)d
  pipelines:
    metrics:
      receivers: [otlp]
      exporters: [prometheusremotewrite, prometheusremotewrite/split,
                  prometheusremotewrite/flaky, prometheusremotewrite/reject]
""" % p, wait_ports=[p["otlp"]], name="profcol-prw").start()
        t0 = now_ns() - 30 * 10**9
        cls.reqs, cls.expected, cls.absent = remote_write_requests(t0)
        for req in cls.reqs:
            r = h.post(p["otlp"], req.SerializeToString(), path=METRICS.path)
            assert r.status == 200, r
            time.sleep(0.3)  # one request after the other: timestamps rise per series

    @classmethod
    def tearDownClass(cls):
        try:
            cls.prom.terminate()
            cls.prom.wait(10)
        finally:
            cls.prom_log.close()
            if cls.profcol:
                h.stop_all(cls.profcol, cls.proxy)
            if not os.environ.get("E2E_KEEP"):
                shutil.rmtree(cls.tmp, ignore_errors=True)

    wait_value = PrometheusExporterTest.wait_value

    def why(self):
        """What both sides logged of a refused write: profcol's warnings and errors, Prometheus'
        errors (an out-of-order sample names its series and timestamp there)."""
        self.prom_log.flush()
        with open(os.path.join(self.tmp, "prometheus.log"), errors="replace") as f:
            prom = [ln for ln in f if "level=error" in ln or "level=warn" in ln]
        ours = [ln for ln in self.profcol.stderr().splitlines()
                if re.search(r" (warn|error) ", ln)]
        return "\n--- profcol ---\n%s\n--- prometheus ---\n%s" % (
            "\n".join(ours[-20:]), "".join(prom[-20:]))

    def test_values_in_prometheus(self):
        for cluster in ("e2e", "split"):
            base = ('job="prod/shop",instance="i-1",cluster="%s",otel_scope_name="e2e.scope"'
                    % cluster)
            for sel, want in self.expected.items():
                self.wait_value(with_labels(sel, base), want)
            self.wait_value('target_info{job="prod/shop",instance="i-1",host_name="h1",'
                            'cluster="%s"}' % cluster, 1)

    def test_retries(self):
        """500 is retried (spec §5: 5xx) until Prometheus has it all; 400 is permanent: one
        request per batch, counted as failed, nothing in Prometheus."""
        base = 'job="prod/shop",instance="i-1",cluster="flaky"'
        for sel, want in self.expected.items():
            self.wait_value(with_labels(sel, base), want)
        flaky = [st for path, st in FlakyProxy.seen if path == "/flaky"]
        self.assertEqual(flaky[:2], [500, 500])
        self.assertEqual(flaky[2:], [204] * len(self.reqs))
        deadline = time.time() + 10
        while time.time() < deadline:
            _, text = http_get(self.ports["self"], "/metrics")
            failed = metric_value(text, "otelcol_exporter_send_failed_metric_points",
                                  exporter="prometheusremotewrite/reject")
            if failed == sum(n_points(r) for r in self.reqs):
                break
            time.sleep(0.2)
        self.assertEqual(failed, sum(n_points(r) for r in self.reqs))
        rejected = [st for path, st in FlakyProxy.seen if path == "/reject"]
        self.assertEqual(rejected, [400] * len(self.reqs))  # never retried
        self.assertEqual(prom_query(self.ports["prom"], '{cluster="reject"}'), [])

    def test_split_requests(self):
        """max_batch_size_bytes 300: the split exporter's batches go as several requests (the
        other exporter sends one per batch), all of them taken (Prometheus' own counts)."""
        self.wait_value('app_requests_total{route="/a",cluster="split"}', 150)
        _, text = http_get(self.ports["prom"], "/metrics")
        writes = metric_value(text, "prometheus_http_requests_total", handler="/api/v1/write")
        ok = metric_value(text, "prometheus_http_requests_total", handler="/api/v1/write",
                          code="204")
        self.assertGreater(writes, 2 * len(self.reqs), text)
        self.assertEqual(ok, writes, self.why())

    def test_not_sent_and_stale(self):
        self.wait_value('app_requests_total{route="/a",cluster="e2e"}', 150)  # all arrived
        for name in self.absent:
            self.assertEqual(prom_query(self.ports["prom"], name), [], name)
        # the temperature did arrive before its stale marker
        got = prom_query(self.ports["prom"],
                         'last_over_time(app_temperature_celsius{cluster="e2e"}[5m])')
        self.assertEqual(len(got), 1, got)
        _, text = http_get(self.ports["self"], "/metrics")
        dropped = metric_value(text, "profcol_exporter_prometheusremotewrite_dropped_points",
                               exporter="prometheusremotewrite")
        self.assertEqual(dropped, 2)  # the delta sum's point and the delta histogram's
        dropped = metric_value(text, "profcol_exporter_prometheusremotewrite_dropped_points",
                               exporter="prometheusremotewrite/split")
        self.assertEqual(dropped, 2)
        for exp in ("prometheusremotewrite", "prometheusremotewrite/split"):
            failed = metric_value(text, "otelcol_exporter_send_failed_metric_points",
                                  exporter=exp)
            self.assertIn(failed, (None, 0.0), exp + self.why())


class ReloadTest(unittest.TestCase):
    """SIGHUP with the prometheus exporter's config changed (its namespace): the old instance's
    server is stopped before the new one binds the same port, so profcol keeps running and the
    endpoint serves the new names (it stopped with 'address already in use' before)."""

    def test_reload_changed_exporter(self):
        ports = {k: h.free_port() for k in ("otlp", "prom", "self")}

        def config(ns):
            return """
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%(otlp)d
exporters:
  prometheus:
    endpoint: 127.0.0.1:%(prom)d
    namespace: {ns}
service:
  telemetry:
    metrics:
      address: 127.0.0.1:%(self)d
  pipelines:
    metrics:
      receivers: [otlp]
      exporters: [prometheus]
""".replace("{ns}", ns) % ports
        p = h.started_profcol(self, config("one"), [ports["otlp"], ports["prom"]], "profcol-reload")
        req = _req(lambda sm: _gauge(sm, "app.temperature", "Cel", now_ns(), 21.5))
        self.assertEqual(h.post(ports["otlp"], req.SerializeToString(), path=METRICS.path).status,
                         200)
        _, text = http_get(ports["prom"], "/metrics")
        self.assertIn("one_app_temperature_celsius", text)
        tmp = p.config_paths[0] + ".new"
        with open(tmp, "w") as f:
            f.write(config("two"))
        os.replace(tmp, p.config_paths[0])
        p.proc.send_signal(signal.SIGHUP)
        p.wait_stderr(lambda t: "reload: complete" in t, timeout=30)
        self.assertIsNone(p.proc.poll(), p.stderr()[-3000:])
        self.assertNotIn("address already in use", p.stderr())
        req = _req(lambda sm: _gauge(sm, "app.temperature", "Cel", now_ns(), 22.5))
        self.assertEqual(h.post(ports["otlp"], req.SerializeToString(), path=METRICS.path).status,
                         200)
        _, text = http_get(ports["prom"], "/metrics")
        self.assertIn("two_app_temperature_celsius", text)
        self.assertNotIn("one_app_temperature_celsius", text)
        h.stop_all(p)


def write_seeds(d):
    """The fuzz_prometheus seed corpus: a settings byte, then a metrics request of this test."""
    os.makedirs(d, exist_ok=True)
    t0 = 1_700_000_000 * 10**9
    reqs, _ = sent_requests(t0)
    both = METRICS.Req()
    for r in reqs:
        both.MergeFrom(r)
    seeds = {"all_text": b"\x3d" + both.SerializeToString(),
             "all_om_limited": b"\x1e" + both.SerializeToString(),
             "remote_write": b"\x33" + METRICS.Req(resource_metrics=[
                 rm for r in remote_write_requests(t0)[0] for rm in r.resource_metrics])
             .SerializeToString()}
    for name, data in seeds.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    h.main(write_seeds)
