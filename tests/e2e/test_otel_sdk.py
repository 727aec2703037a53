#!/usr/bin/python3
"""The real OpenTelemetry JavaScript SDK as the producer of traces, metrics and logs.

tests/e2e/otel/app.js (packages pinned in tests/e2e/otel/package-lock.json, installed with
`npm ci` into tests/e2e/otel/node_modules when that is missing or differs from the lockfile)
makes three spans (a parent/child pair, an event on each, a link to a span of another trace,
attributes of every type, OK and ERROR statuses), a counter, a histogram with explicit buckets and
a gauge, and four log records (string, map and int bodies; one inside a span; one with an event
name), exports them with the SDK's OTLP exporters and exits 0 only if every export succeeded.
It runs once per protocol: http/protobuf, http/json, grpc, each plain and gzip-compressed:

  app.js -> profcol (otlp receiver, http + grpc; resource upserts collector=profcol; batch)
         -> otlp exporter (gRPC, tls insecure) -> grpcio backend (TraceService, MetricsService,
            LogsService; python3-grpcio)

For each run (its own service.name):
  * exactly: what the backend received, as a multiset of (resource, scope, [metric,] item), equals
    the requests the SDK put on the wire (app.js reports each export call's request as the SDK's
    own serializer made it; JSON decoded like OTLP JSON) with collector=profcol added to every
    resource: every field profcol does not own passes through untouched;
  * the known values: span names, trace/span/parent ids, kinds, times, attributes (typed), events,
    links, statuses; the counter's sums, the histogram's count/sum/min/max/bounds/buckets, the
    gauge's last values, temporality and monotonicity; log bodies, severities, attributes, times,
    event name, trace context; the resource (the SDK's telemetry.sdk.* and service.name, plus
    collector=profcol) and the instrumentation scope.
Then profcol's /metrics: otelcol_receiver_accepted_{spans,metric_points,log_records} per
transport and otelcol_exporter_sent_* equal what the SDK exported.

Only 127.0.0.1; npm's registry is the only network use (and only when installing)."""

import base64
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402  (re-execs under /usr/bin/python3 if needed)
from signal_support import (  # noqa: E402
    ARRIVE_TIMEOUT, TRACES, METRICS, LOGS, SIGNALS, GrpcBackend, from_json, http_get,
    metric_value, multiset, wait_multiset, walk, with_resource_attr)

HERE = os.path.dirname(os.path.abspath(__file__))
OTEL_DIR = os.path.join(HERE, "otel")
APP_TIMEOUT = 30           # one app.js run (it bounds each flush/shutdown step itself)
TIME_BUDGET = 70.0         # every run together, after the install: later runs fail fast
# the pinned packages need node ^18.19.0 || >=20.6.0 (their "engines")
NODE_MIN = ((18, 19), (20, 6))


# ---------------------------------------------------------------------------------------------
# the node app

def check_node():
    v = h.node_version()
    if not (NODE_MIN[0] <= v < (19, 0) or v >= NODE_MIN[1]):
        raise RuntimeError("node %d.%d is too old for the pinned OpenTelemetry packages "
                           "(^18.19.0 || >=20.6.0)" % v)
    return shutil.which("node")


def ensure_otel_modules():
    """`npm ci` (exactly package-lock.json) into tests/e2e/otel unless node_modules already holds
    every locked package at its locked version."""
    check_node()
    h.ensure_npm_lockfile(OTEL_DIR)


def node_env():
    """The inherited environment without what the SDK or grpc-js would read on their own
    (OTEL_* settings, proxies): the app configures everything itself."""
    env = {k: v for k, v in os.environ.items()
           if not k.upper().startswith("OTEL_")
           and k.lower() not in ("http_proxy", "https_proxy", "grpc_proxy", "all_proxy",
                                 "no_proxy", "no_grpc_proxy", "node_options")}
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    return env


def run_app(protocol, endpoint, compression, service, timeout=APP_TIMEOUT):
    """Run app.js to completion; returns its JSON report (plus 'stderr' and 'rc')."""
    try:
        r = subprocess.run([shutil.which("node") or "node", "app.js", protocol, endpoint,
                            compression, service], cwd=OTEL_DIR, env=node_env(),
                           capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        err = e.stderr.decode("utf-8", "replace") if isinstance(e.stderr, bytes) else e.stderr
        raise AssertionError("app.js (%s) did not finish within %.0fs\n--- stderr ---\n%s"
                             % (protocol, timeout, (err or "")[-3000:]))
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise AssertionError("app.js (%s) exited %d without a report\n--- stdout ---\n%s\n"
                             "--- stderr ---\n%s" % (protocol, r.returncode, r.stdout[-3000:],
                                                     r.stderr[-3000:]))
    out = json.loads(lines[-1])
    out["stderr"], out["rc"] = r.stderr, r.returncode
    return out


# ---------------------------------------------------------------------------------------------
# what the SDK sent, what arrived (multisets etc.: signal_support.py)

def items_of(sig, msgs, service):
    """[(resource, scope, [metric,] item message)] for one service."""
    return [(e[0].resource, e[1].scope) + tuple(e[2:]) for e in walk(sig, msgs, service)]


def sdk_requests(sig, report):
    """The requests app.js's SDK put on the wire for `sig`, decoded (OTLP JSON strictly)."""
    out = []
    for e in report["exports"][sig.name]:
        if report["protocol"] == "http/json":
            out.append(from_json(sig, e["request"], strict=True))
        else:
            out.append(sig.Req.FromString(base64.b64decode(e["request"])))
    return out


# ---------------------------------------------------------------------------------------------
# typed values: app.js's JSON (JS numbers: integral -> int, else double, as the SDK sends them)
# and AnyValue, both as harness._anyvalue's tagged tuples

def tagged(v):
    if isinstance(v, bool):
        return ("b", v)
    if isinstance(v, int):
        return ("i", v)
    if isinstance(v, float):
        return ("d", v)
    if isinstance(v, str):
        return ("s", v)
    if isinstance(v, list):
        return ("a", tuple(tagged(x) for x in v))
    if isinstance(v, dict):
        return ("kv", tuple(sorted((k, tagged(x)) for k, x in v.items())))
    raise TypeError(v)


def tagged_attrs(d):
    return {k: tagged(v) for k, v in d.items()}


def attrs(repeated):
    out = {}
    for kv in repeated:
        if kv.key in out:
            raise AssertionError("attribute %r twice" % kv.key)
        out[kv.key] = h._anyvalue(kv.value, [])
    return out


def value_of(dp):
    which = dp.WhichOneof("value")
    return getattr(dp, which) if which else None


SPAN_KIND = {"INTERNAL": 1, "SERVER": 2, "CLIENT": 3, "PRODUCER": 4, "CONSUMER": 5}
STATUS = {"UNSET": 0, "OK": 1, "ERROR": 2}
CUMULATIVE = 2


# ---------------------------------------------------------------------------------------------
# profcol

CONFIG = """\
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{grpc}
      http:
        endpoint: 127.0.0.1:{http}
processors:
  resource:
    attributes:
    - key: collector
      value: profcol
      action: upsert
  batch:
    timeout: 200ms
exporters:
  otlp:
    endpoint: 127.0.0.1:{backend}
    tls:
      insecure: true
service:
  shutdown_timeout: 5s
  telemetry:
    metrics:
      address: 127.0.0.1:{metrics}
  pipelines:
    traces:
      receivers: [otlp]
      processors: [resource, batch]
      exporters: [otlp]
    metrics:
      receivers: [otlp]
      processors: [resource, batch]
      exporters: [otlp]
    logs:
      receivers: [otlp]
      processors: [resource, batch]
      exporters: [otlp]
"""

class OtelSdk(unittest.TestCase):
    maxDiff = None
    sent = {"http": collections.Counter(), "grpc": collections.Counter()}  # transport -> signal

    @classmethod
    def setUpClass(cls):
        ensure_otel_modules()
        cls.backend = GrpcBackend()
        cls.ports = {"grpc": h.free_port(), "http": h.free_port(), "metrics": h.free_port(),
                     "backend": cls.backend.port}
        cls.p = h.Profcol(CONFIG.format(**cls.ports),
                          wait_ports=[cls.ports["grpc"], cls.ports["http"]], name="otel-sdk")
        try:
            cls.p.start()
        except Exception:
            cls.backend.stop()
            raise
        cls.budget_end = time.monotonic() + TIME_BUDGET

    def time_left(self):
        left = self.budget_end - time.monotonic()
        if left < 3:
            self.fail("the time budget (%.0fs for every run) is used up" % TIME_BUDGET)
        return left

    @classmethod
    def tearDownClass(cls):
        h.stop_all(cls.p, cls.backend)

    def diag(self):
        return "\n--- profcol stderr ---\n%s" % self.p.stderr()[-3000:]

    # one run of app.js and every check on what arrived
    def roundtrip(self, protocol, compression):
        service = "otel-e2e-%s-%s" % (protocol.replace("/", "-"), compression)
        transport = "grpc" if protocol == "grpc" else "http"
        endpoint = "http://127.0.0.1:%d" % self.ports[transport]
        t0 = time.monotonic()
        rep = run_app(protocol, endpoint, compression, service,
                      timeout=min(APP_TIMEOUT, self.time_left()))
        took = time.monotonic() - t0
        for sig in SIGNALS:  # acknowledged by profcol: counted whatever else fails
            self.sent[transport][sig] += sum(e["items"] for e in rep["exports"][sig.name]
                                             if e["ok"])
        self.assertEqual(rep["problems"], [], "app.js (%s, %s): exports failed\n%s%s"
                         % (protocol, compression, rep["stderr"][-2000:], self.diag()))
        self.assertEqual(rep["rc"], 0, rep["stderr"][-2000:])
        self.assertNotIn("otel warn", rep["stderr"],
                         "the SDK warned (e.g. a partial success): %s" % rep["stderr"][-2000:])
        self.assertLess(took, 20, "app.js took %.1fs" % took)
        self.assertEqual(rep["service"], service)
        self.assertEqual(len(rep["exports"]["traces"]), 1, "one batch of spans expected")

        got = {}
        for sig in SIGNALS:
            want = multiset(sig, [with_resource_attr(sig, r, "collector", "profcol")
                                  for r in sdk_requests(sig, rep)])
            n_want = sum(e["items"] for e in rep["exports"][sig.name])
            self.assertEqual(sum(want.values()), n_want, "%s: app.js's own count" % sig.name)
            timeout = min(ARRIVE_TIMEOUT, self.time_left())
            with self.subTest(signal=sig.name, check="exactly what the SDK sent"):
                wait_multiset(self, sig, lambda: self.backend.requests(sig), want,
                              "%s (%s, %s) at the backend, against what the SDK sent (+ "
                              "collector=profcol)" % (sig.name, protocol, compression),
                              timeout=timeout, service=service, diag=self.diag)
            got[sig] = items_of(sig, self.backend.requests(sig), service)
        with self.subTest(check="resource and scope"):
            self.check_resource_scope(rep, got)
        with self.subTest(check="spans"):
            self.check_spans(rep, got[TRACES])
        with self.subTest(check="metrics"):
            self.check_metrics(rep, got[METRICS])
        with self.subTest(check="logs"):
            self.check_logs(rep, got[LOGS])

    def check_resource_scope(self, rep, got):
        want = tagged_attrs(rep["resource"])
        want["collector"] = ("s", "profcol")
        for k, v in (("service.name", rep["service"]), ("telemetry.sdk.language", "nodejs"),
                     ("telemetry.sdk.name", "opentelemetry"), ("e2e.protocol", rep["protocol"])):
            self.assertEqual(want.get(k), ("s", v), "app.js's resource: %s" % k)
        self.assertIn("telemetry.sdk.version", want)
        for sig in SIGNALS:
            self.assertTrue(got[sig], "%s: nothing arrived" % sig.name)
            for item in got[sig]:
                resource, scope = item[0], item[1]
                self.assertEqual(attrs(resource.attributes), want, sig.name)
                self.assertEqual((scope.name, scope.version),
                                 (rep["scope"]["name"], rep["scope"]["version"]), sig.name)

    def check_spans(self, rep, items):
        by_id = {}
        for _, _, sp in items:
            self.assertNotIn(sp.span_id.hex(), by_id, "span arrived twice")
            by_id[sp.span_id.hex()] = sp
        self.assertEqual(set(by_id), {s["spanId"] for s in rep["spans"]})
        traces = set()
        for s in rep["spans"]:
            sp = by_id[s["spanId"]]
            traces.add(s["traceId"])
            self.assertEqual(sp.name, s["name"])
            self.assertEqual(sp.trace_id.hex(), s["traceId"], s["name"])
            self.assertEqual(sp.parent_span_id.hex(), s["parentSpanId"], s["name"])
            self.assertEqual(sp.kind, SPAN_KIND[s["kind"]], s["name"])
            self.assertEqual((sp.start_time_unix_nano, sp.end_time_unix_nano),
                             (int(s["start"]), int(s["end"])), s["name"])
            self.assertEqual(attrs(sp.attributes), tagged_attrs(s["attributes"]), s["name"])
            self.assertEqual([(e.name, e.time_unix_nano, attrs(e.attributes)) for e in sp.events],
                             [(e["name"], int(e["time"]), tagged_attrs(e["attributes"]))
                              for e in s["events"]], s["name"])
            self.assertEqual([(ln.trace_id.hex(), ln.span_id.hex(), attrs(ln.attributes))
                              for ln in sp.links],
                             [(ln["traceId"], ln["spanId"], tagged_attrs(ln["attributes"]))
                              for ln in s["links"]], s["name"])
            self.assertEqual((sp.status.code, sp.status.message),
                             (STATUS[s["status"]["code"]], s["status"]["message"]), s["name"])
            self.assertEqual((sp.dropped_attributes_count, sp.dropped_events_count,
                              sp.dropped_links_count), (0, 0, 0))
        # the parent/child pair shares a trace; the linked span has its own
        self.assertEqual(len(traces), 2)
        child = [s for s in rep["spans"] if s["parentSpanId"]]
        self.assertEqual(len(child), 1)
        parent = [s for s in rep["spans"] if s["spanId"] == child[0]["parentSpanId"]]
        self.assertEqual(parent[0]["traceId"], child[0]["traceId"])
        self.assertNotEqual(child[0]["links"][0]["traceId"], child[0]["traceId"])

    def check_metrics(self, rep, items):
        got = collections.defaultdict(list)
        for _, _, m, dp in items:
            got[m.name].append((m, dp))
        self.assertEqual(set(got), {m["name"] for m in rep["metrics"]})
        for want in rep["metrics"]:
            pts = got[want["name"]]
            m = pts[0][0]
            self.assertEqual((m.unit, m.description), (want["unit"], want["description"]),
                             want["name"])
            self.assertEqual(m.WhichOneof("data"), want["type"], want["name"])
            data = getattr(m, want["type"])
            if "temporality" in want:
                self.assertEqual(data.aggregation_temporality, CUMULATIVE, want["name"])
            if want["type"] == "sum":
                self.assertEqual(data.is_monotonic, want["monotonic"])
            self.assertEqual(len(pts), len(want["points"]), want["name"])
            by_attrs = {tuple(sorted(attrs(dp.attributes).items())): dp for _, dp in pts}
            for wp in want["points"]:
                key = tuple(sorted(tagged_attrs(wp["attributes"]).items()))
                self.assertIn(key, by_attrs, "%s: no point for %s" % (want["name"], key))
                dp = by_attrs[key]
                self.assertGreater(dp.time_unix_nano, 0)
                if want["type"] == "histogram":
                    self.assertEqual(
                        (dp.count, dp.sum, dp.min, dp.max, list(dp.explicit_bounds),
                         list(dp.bucket_counts)),
                        (wp["count"], wp["sum"], wp["min"], wp["max"],
                         [float(b) for b in wp["bounds"]], wp["buckets"]), want["name"])
                    self.assertGreater(dp.start_time_unix_nano, 0)
                else:
                    self.assertEqual(value_of(dp), wp["value"], want["name"])

    def check_logs(self, rep, items):
        self.assertEqual(len(items), len(rep["logs"]))
        by_time = {}
        for _, _, lr in items:
            self.assertNotIn(lr.time_unix_nano, by_time, "log record arrived twice")
            by_time[lr.time_unix_nano] = lr
        for want in rep["logs"]:
            lr = by_time.get(int(want["time"]))
            self.assertIsNotNone(lr, "no log record at %s" % want["time"])
            self.assertEqual(
                (lr.observed_time_unix_nano, lr.severity_number, lr.severity_text,
                 h._anyvalue(lr.body, []), attrs(lr.attributes), lr.event_name,
                 lr.trace_id.hex(), lr.span_id.hex()),
                (int(want["observedTime"]), want["severityNumber"], want["severityText"],
                 tagged(want["body"]), tagged_attrs(want["attributes"]), want["eventName"],
                 want["traceId"], want["spanId"]), want["body"])
            self.assertEqual(lr.flags & 0xff, 1 if want["traceId"] else 0,
                             "sampled flag of %r" % want["body"])

    def test_http_protobuf(self):
        self.roundtrip("http/protobuf", "none")

    def test_http_protobuf_gzip(self):
        self.roundtrip("http/protobuf", "gzip")

    def test_http_json(self):
        self.roundtrip("http/json", "none")

    def test_http_json_gzip(self):
        self.roundtrip("http/json", "gzip")

    def test_grpc(self):
        self.roundtrip("grpc", "none")

    def test_grpc_gzip(self):
        self.roundtrip("grpc", "gzip")

    def test_zz_self_metrics(self):
        """After the runs: profcol's counters equal what the SDK got acknowledged."""
        if not any(sum(c.values()) for c in self.sent.values()):
            self.skipTest("nothing was sent")

        def counters():
            _, text = http_get(self.ports["metrics"], "/metrics")
            out = {}
            for sig in SIGNALS:
                for tr in ("http", "grpc"):
                    out[(sig.accepted, tr)] = (
                        metric_value(text, sig.accepted, receiver="otlp", transport=tr) or 0,
                        self.sent[tr][sig])
                out[(sig.sent, "otlp")] = (metric_value(text, sig.sent, exporter="otlp"),
                                           self.sent["http"][sig] + self.sent["grpc"][sig])
            return out

        h.wait_for(lambda: all(g == w for g, w in counters().values()),
                   timeout=min(10, self.time_left()), interval=0.1)
        for (name, label), (got, want) in sorted(counters().items()):
            with self.subTest(counter=name, label=label):
                self.assertEqual(got, want, "%s{%s}: got %r, want %r" % (name, label, got, want))


if __name__ == "__main__":
    unittest.main(verbosity=2)
