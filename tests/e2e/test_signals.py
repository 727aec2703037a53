#!/usr/bin/python3
"""Traces, metrics and logs pipelines end to end (besides profiles), as the OpenTelemetry
Collector runs them, with real peers: Python's http.server (optionally behind ssl) as OTLP/HTTP
backends, grpcio servers and clients (Debian's python3-grpcio).

1. Acceptance: the issue's config, unchanged except for addresses on 127.0.0.1. `profcol
   validate` passes; profcol runs with API_TOKEN set and SSL_CERT_FILE = a throwaway CA
   (tls_support.Certs) so that its https:// exporters trust our TLS backends:
     traces (OTLP/HTTP protobuf and JSON, OTLP/gRPC) -> otlp -> batch, resource ->
       otlphttp/traces -> HTTPS sink (x-api-token header from ${API_TOKEN});
     profiles (grpcio client) -> otlp/profiles -> batch -> otlphttp/pyroscope (plain sink at
       /v1development/profiles) and otlp/profiles (TLS grpcio server, metadata authorization
       "Bearer ${API_TOKEN}").
   What arrives equals what was sent. A signal sent to a receiver that no pipeline of that
   signal lists: HTTP 404, gRPC UNIMPLEMENTED. With SSL_CERT_FILE naming another CA, both
   https:// exporters refuse our backends (certificate verify failed) and send nothing.
2. Pass-through of every signal (traces; metrics: gauge, sum, histogram, exponential histogram,
   summary; logs) over OTLP/HTTP (protobuf, JSON, gzip) and OTLP/gRPC (plain, gzip):
     client -> profcol A (resource upsert env=prod, batch; otlphttp with endpoint,
       metrics_endpoint + encoding json, logs_endpoint) -> profcol B (gateway) -> otlp gRPC
       exporter (tls insecure) -> grpcio server with TraceService, MetricsService, LogsService.
   Decoded equality except the added resource attribute; A's and B's self-metrics count what
   was sent (accepted spans / metric points / log records per transport, sent per exporter).
3. Config errors: processors filter/limits/redaction, exporter and receiver pyroscope in
   traces/metrics/logs pipelines, an unknown pipeline type: `profcol validate` exits 1 naming
   file, key path and problem.
4. Malformed traces (protobuf and JSON; and metrics, logs, gRPC) -> 400 with google.rpc.Status /
   INVALID_ARGUMENT, while a concurrent good client gets only 200s and only its data arrives.
   Likewise trace ids not 16 bytes long and span ids not 8 (when not empty), which the
   Collector's pdata refuses when it decodes them.

"Equal" compares multisets, so that the batch processor may regroup requests: one element per
span (per metric data point, per log record) with its resource (attributes as a set, dropped
count, schema url), its scope (and schema url) and, for metrics, the metric's own fields.

gRPC: grpcio's generic API (no generated stub), see signal_support.py, which holds the signal
table, the multisets, the gRPC backend and the self-metrics parsing shared with
test_otel_sdk.py."""

import collections
import gzip
import json
import os
import random
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402  (re-execs under /usr/bin/python3 if needed)
import tls_support as t  # noqa: E402
from signal_support import (  # noqa: E402
    GRPC_OPTIONS, ARRIVE_TIMEOUT, TRACES, METRICS, LOGS, PROFILES, SIGNALS, BY_PATH,
    GrpcBackend, from_json, grpc_export, grpc_raw, http_get, metric_value, multiset, to_json,
    wait_multiset, with_resource_attr)

import grpc  # noqa: E402  (Debian's python3-grpcio)

TOKEN = "s3cr3t-signals-token"


# ---------------------------------------------------------------------------------------------
# realistic requests

def _attrs(repeated, **kv):
    for k, v in kv.items():
        h.set_anyvalue(repeated.add(key=k.replace("__", ".")).value, v)


def _resource(top, svc, i, seed, schema=True):
    r = top.add()
    if schema:
        r.schema_url = "https://opentelemetry.io/schemas/1.37.0"
    _attrs(r.resource.attributes, service__name=svc, service__version="2.%d.%d" % (seed, i),
           host__name="node-%d" % (seed % 3), process__pid=4000 + seed * 10 + i)
    if i % 2:
        r.resource.dropped_attributes_count = 2
    return r


def _scope(scope_msg, tag, seed):
    scope_msg.scope.name = "io.opentelemetry.e2e.%s" % tag
    scope_msg.scope.version = "0.%d.0" % seed
    _attrs(scope_msg.scope.attributes, instrumentation__flag=True)
    scope_msg.schema_url = "https://opentelemetry.io/schemas/1.36.0"


def make_traces(tag, seed, services=("checkout", "cart"), spans=4):
    """One ResourceSpans per service; spans with every field: parent ids, kinds, flags, trace
    state, attributes of each type, events, links, status, dropped counts."""
    rnd = random.Random(seed)
    req = TRACES.Req()
    for i, svc in enumerate(services):
        rs = _resource(req.resource_spans, svc, i, seed)
        ss = rs.scope_spans.add()
        _scope(ss, tag, seed)
        trace_id, parent = rnd.randbytes(16), b""
        for k in range(spans):
            sp = ss.spans.add()
            sp.trace_id, sp.span_id = trace_id, rnd.randbytes(8)
            sp.parent_span_id = parent
            parent = sp.span_id
            sp.name = "%s %s op-%d" % (tag, svc, k)
            sp.kind = 1 + k % 5
            sp.flags = 0x301 if k % 2 else 0x1
            if k == 1:
                sp.trace_state = "vendor=e2e,rojo=00f067aa0ba902b7"
            t0 = h.BASE_TIME + seed * 1_000_000_000 + k * 1_000_000
            sp.start_time_unix_nano, sp.end_time_unix_nano = t0, t0 + rnd.randrange(1, 10**9)
            _attrs(sp.attributes, http__route="/api/%s/%d" % (tag, k), http__status_code=200 + k,
                   retry=bool(k % 2), ratio=0.25 * (k + 1), tags=["a", "b", k],
                   blob=bytes([k, 255, 0, 7]), nested={"x": 1, "y": "two"})
            if k % 2:
                sp.dropped_attributes_count = 1
            ev = sp.events.add(time_unix_nano=t0 + 500, name="exception")
            _attrs(ev.attributes, exception__type="ValueError", exception__message="bad %d" % k)
            if k == 2:
                ev.dropped_attributes_count = 3
                sp.dropped_events_count = 1
            ln = sp.links.add(trace_id=rnd.randbytes(16), span_id=rnd.randbytes(8),
                              trace_state="k=v", flags=0x100)
            _attrs(ln.attributes, link__kind="follows")
            if k == 3:
                ln.dropped_attributes_count = 1
                sp.dropped_links_count = 2
            if k % 3 == 0:
                sp.status.code = 2
                sp.status.message = "boom %d" % k
            elif k % 3 == 1:
                sp.status.code = 1
    return req


def make_metrics(tag, seed, services=("checkout",)):
    """Every metric type: gauge (double and int points), monotonic cumulative sum with an
    exemplar, non-monotonic delta sum, histogram (with and without sum/min/max), exponential
    histogram, summary; metric metadata; 11 data points per service."""
    req = METRICS.Req()
    t0 = h.BASE_TIME + seed * 1_000_000_000
    for i, svc in enumerate(services):
        rm = _resource(req.resource_metrics, svc, i, seed)
        sm = rm.scope_metrics.add()
        _scope(sm, tag, seed)

        def metric(name, unit, desc):
            m = sm.metrics.add(name="%s.%s" % (tag, name), unit=unit, description=desc)
            return m

        m = metric("cpu.utilization", "1", "CPU busy fraction")
        for cpu in range(2):
            dp = m.gauge.data_points.add(time_unix_nano=t0, start_time_unix_nano=t0 - 10**9,
                                         as_double=0.125 + cpu * 0.5)
            _attrs(dp.attributes, cpu=cpu, state="user")
        dp = m.gauge.data_points.add(time_unix_nano=t0, as_int=-42)
        _attrs(dp.attributes, cpu="total")
        _attrs(m.metadata, source="e2e")

        m = metric("requests", "{request}", "requests served")
        m.sum.aggregation_temporality = 2
        m.sum.is_monotonic = True
        dp = m.sum.data_points.add(start_time_unix_nano=t0 - 60 * 10**9, time_unix_nano=t0,
                                   as_int=1_234_567_890_123 + seed)
        _attrs(dp.attributes, http__route="/cart")
        ex = dp.exemplars.add(time_unix_nano=t0 - 5, as_double=0.0375,
                              trace_id=bytes(range(16)), span_id=bytes(range(8, 16)))
        _attrs(ex.filtered_attributes, user="u-%d" % seed)
        m.sum.data_points.add(start_time_unix_nano=t0 - 60 * 10**9, time_unix_nano=t0,
                              as_int=77, flags=0)

        m = metric("queue.delta", "{item}", "")
        m.sum.aggregation_temporality = 1
        m.sum.is_monotonic = False
        m.sum.data_points.add(time_unix_nano=t0, as_double=-3.5)

        m = metric("latency", "ms", "request latency")
        m.histogram.aggregation_temporality = 2
        dp = m.histogram.data_points.add(start_time_unix_nano=t0 - 10**9, time_unix_nano=t0,
                                         count=10, sum=123.5, min=0.5, max=80.25,
                                         bucket_counts=[1, 4, 3, 2],
                                         explicit_bounds=[1.0, 10.0, 50.0])
        _attrs(dp.attributes, http__route="/checkout")
        dp.exemplars.add(time_unix_nano=t0 - 7, as_int=33, span_id=bytes(range(8)),
                         trace_id=bytes(range(16, 32)))
        # no sum, min, max (their absence must survive: proto3 optional)
        m.histogram.data_points.add(time_unix_nano=t0, count=3, bucket_counts=[3],
                                    flags=0)

        m = metric("latency.exp", "ms", "")
        m.exponential_histogram.aggregation_temporality = 1
        dp = m.exponential_histogram.data_points.add(
            start_time_unix_nano=t0 - 10**9, time_unix_nano=t0, count=17, sum=402.75, scale=-2,
            zero_count=1, zero_threshold=0.001, min=0.0625, max=96.0)
        dp.positive.offset = -2
        dp.positive.bucket_counts.extend([1, 0, 5, 7])
        dp.negative.offset = 3
        dp.negative.bucket_counts.extend([2, 1])
        _attrs(dp.attributes, region="eu")

        m = metric("gc.pause", "s", "GC pauses")
        dp = m.summary.data_points.add(start_time_unix_nano=t0 - 10**9, time_unix_nano=t0,
                                       count=250, sum=1.75)
        for q, v in ((0.0, 0.001), (0.5, 0.004), (0.99, 0.03), (1.0, 0.05)):
            dp.quantile_values.add(quantile=q, value=v)
        _attrs(dp.attributes, gc="major")
        m.summary.data_points.add(time_unix_nano=t0, count=1, sum=0.5)
    return req


def make_logs(tag, seed, services=("checkout", "cart"), records=5):
    """Log records with each kind of body, severities, trace context, flags, event names."""
    rnd = random.Random(seed)
    req = LOGS.Req()
    bodies = ["plain text line", {"msg": "structured", "n": 3, "ok": True},
              ["array", 1, 2.5], b"\x00\x01binary\xff", 12345, 0.5, False]
    for i, svc in enumerate(services):
        rl = _resource(req.resource_logs, svc, i, seed, schema=bool(i % 2))
        sl = rl.scope_logs.add()
        _scope(sl, tag, seed)
        for k in range(records):
            lr = sl.log_records.add()
            lr.time_unix_nano = h.BASE_TIME + seed * 1_000_000_000 + k
            lr.observed_time_unix_nano = lr.time_unix_nano + 1000
            lr.severity_number = 1 + (k * 5 + seed) % 24
            lr.severity_text = ["TRACE", "DEBUG", "INFO", "WARN", "ERROR"][k % 5]
            h.set_anyvalue(lr.body, bodies[(k + i) % len(bodies)])
            _attrs(lr.attributes, log__tag="%s-%s-%d" % (tag, svc, k), thread__id=k)
            if k % 2:
                lr.trace_id, lr.span_id = rnd.randbytes(16), rnd.randbytes(8)
                lr.flags = 1
            if k == 3:
                lr.event_name = "device.app.lifecycle"
                lr.dropped_attributes_count = 4
    return req


def count_items(sig, req):
    return sum(multiset(sig, [req]).values())


# ---------------------------------------------------------------------------------------------
# backends

class _SignalRecording:
    """Mixin for harness.Sink: records and decodes requests of every signal by path."""

    def _handle(self, handler, raw):
        headers = {k.lower(): v for k, v in handler.headers.items()}
        ctype = headers.get("content-type", "").split(";")[0].strip().lower()
        sig = BY_PATH.get(handler.path)
        body, msg, err = raw, None, None
        try:
            if sig is None:
                raise ValueError("unexpected path %r" % handler.path)
            enc = headers.get("content-encoding", "").strip().lower()
            if enc == "gzip":
                body = gzip.decompress(raw)
            elif enc not in ("", "identity"):
                raise ValueError("unsupported content-encoding %r" % enc)
            if ctype == h.CT_PROTO:
                msg = sig.Req.FromString(body)
            elif ctype == h.CT_JSON:
                msg = from_json(sig, body)
            else:
                raise ValueError("unsupported content-type %r" % ctype)
        except Exception as e:  # recorded; the test decides
            err = "%s: %s" % (type(e).__name__, e)
            msg = None
        rec = h.Recorded(handler.path, headers, raw, body, msg, err)
        rec.signal = sig
        with self.cond:
            self.requests.append(rec)
            self.cond.notify_all()
        if sig is None:
            handler.reply(404, "text/plain", b"not found\n")
        elif err:
            handler.reply(400, "text/plain", err.encode())
        elif ctype == h.CT_JSON:
            handler.reply(200, h.CT_JSON, b"{}")
        else:
            handler.reply(200, h.CT_PROTO, sig.Resp().SerializeToString())

    def of(self, sig):
        return [r for r in self.snapshot() if r.signal is sig]


class SignalSink(_SignalRecording, h.Sink):
    pass


class TLSSignalSink(_SignalRecording, t.TLSSink):
    pass


def check_ok(test, r, sig, ctype):
    test.assertEqual(r.status, 200, "want 200, got %r" % r)
    test.assertEqual(r.content_type, ctype, "the response's content type must be the request's")
    if ctype == h.CT_PROTO:
        resp = sig.Resp.FromString(r.body)
        test.assertFalse(resp.HasField("partial_success"), resp)
    else:
        d = json.loads(r.body.decode("utf-8"))
        test.assertIsInstance(d, dict, r)
        test.assertFalse(d.get("partialSuccess"), d)


CERTS = t.Certs()
SRV_CRT, SRV_KEY = CERTS.issue("signals-server", 5101, cn="127.0.0.1")


def _read(path):
    with open(path, "rb") as f:
        return f.read()


# ---------------------------------------------------------------------------------------------
# 1. the issue's config

ISSUE_CONFIG = """\
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 0.0.0.0:4317
      http:
        endpoint: 0.0.0.0:4318
  otlp/profiles:
    protocols:
      grpc:
        endpoint: 0.0.0.0:4327
processors:
  batch:
    timeout: 1s
  resource:
    attributes:
    - key: service.name
      from_attribute: service.name
      action: upsert
exporters:
  otlphttp/traces:
    endpoint: https://otlp.example.com
    headers:
      x-api-token: ${API_TOKEN}
  otlphttp/pyroscope:
    endpoint: http://pyroscope:4040
  otlp/profiles:
    endpoint: https://otlp.example.com:4317
    headers:
      Authorization: "Bearer ${API_TOKEN}"
service:
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch, resource]
      exporters: [otlphttp/traces]
    profiles:
      receivers: [otlp/profiles]
      processors: [batch]
      exporters: [otlphttp/pyroscope, otlp/profiles]
"""


def issue_config(grpc_port, http_port, profiles_port, traces_url, pyroscope_url, grpc_tls_url):
    """The issue's config with its addresses, and only those, pointed at 127.0.0.1."""
    text = ISSUE_CONFIG
    for old, new in (("0.0.0.0:4317", "127.0.0.1:%d" % grpc_port),
                     ("0.0.0.0:4318", "127.0.0.1:%d" % http_port),
                     ("0.0.0.0:4327", "127.0.0.1:%d" % profiles_port),
                     ("https://otlp.example.com:4317", grpc_tls_url),
                     ("https://otlp.example.com\n", traces_url + "\n"),
                     ("http://pyroscope:4040", pyroscope_url)):
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


class IssueConfig(unittest.TestCase):
    maxDiff = None

    @classmethod
    def setUpClass(cls):
        cls.https_sink = TLSSignalSink(SRV_CRT, SRV_KEY).start()
        cls.pyro_sink = SignalSink().start()
        cls.grpc_backend = GrpcBackend(
            [PROFILES], grpc.ssl_server_credentials([(_read(SRV_KEY), _read(SRV_CRT))]))
        cls.gport, cls.hport, cls.pport = h.free_port(), h.free_port(), h.free_port()
        cls.config = issue_config(cls.gport, cls.hport, cls.pport, cls.https_sink.url,
                                  cls.pyro_sink.url, "https://127.0.0.1:%d" % cls.grpc_backend.port)
        cls.env = {"API_TOKEN": TOKEN, "SSL_CERT_FILE": CERTS.ca}
        cls.p = h.Profcol(cls.config, wait_ports=[cls.gport, cls.hport, cls.pport],
                          env=cls.env, unset=("SSL_CERT_DIR",), name="signals-issue")
        try:
            cls.p.start()
        except Exception:
            cls._stop_backends()
            raise
        cls.channel = grpc.insecure_channel("127.0.0.1:%d" % cls.gport, options=GRPC_OPTIONS)
        cls.pchannel = grpc.insecure_channel("127.0.0.1:%d" % cls.pport, options=GRPC_OPTIONS)

    @classmethod
    def _stop_backends(cls):
        cls.https_sink.stop()
        cls.pyro_sink.stop()
        cls.grpc_backend.stop()

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.pchannel.close()
        try:
            cls.p.stop()
        finally:
            cls.p.kill()
            cls._stop_backends()

    def test_a_validate(self):
        path = h.write_config(self.config, "signals-issue-validate")
        r = h.run_profcol(["validate", "--config", path], env=self.env)
        self.assertEqual(r.returncode, 0, "validate of the issue's config: %s" % r.stderr)

    def test_traces_to_https_backend(self):
        before = len(self.https_sink.snapshot())
        sent = [make_traces("accept-proto", 1), make_traces("accept-json", 2, ("search",)),
                make_traces("accept-gzip", 3, ("cart",)), make_traces("accept-grpc", 4)]
        check_ok(self, h.post(self.hport, sent[0].SerializeToString(), path=TRACES.path),
                 TRACES, h.CT_PROTO)
        check_ok(self, h.post(self.hport, to_json(sent[1]), h.CT_JSON, path=TRACES.path),
                 TRACES, h.CT_JSON)
        check_ok(self, h.post(self.hport, sent[2].SerializeToString(), gzip_body=True,
                              path=TRACES.path), TRACES, h.CT_PROTO)
        resp = grpc_export(self.channel, TRACES, sent[3])
        self.assertFalse(resp.HasField("partial_success"), resp)
        # the resource processor upserts service.name from service.name: unchanged
        want = multiset(TRACES, sent)

        def arrived():
            return [r.message for r in self.https_sink.snapshot()[before:] if r.message]
        wait_multiset(self, TRACES, arrived, want, "traces at the HTTPS backend")
        got = self.https_sink.snapshot()[before:]
        for r in got:
            self.assertIsNone(r.error, r.error)
            self.assertEqual(r.path, "/v1/traces")
            self.assertEqual(r.headers.get("x-api-token"), TOKEN, "${API_TOKEN} in a header")
            self.assertEqual(r.content_type, h.CT_PROTO)
            self.assertEqual(r.headers.get("content-encoding"), "gzip", "compression: gzip default")
        # batch (timeout: 1s) merged what arrived within its window
        self.assertLessEqual(len(got), len(sent))

    def test_profiles_to_both_exporters(self):
        before_http = len(self.pyro_sink.of(PROFILES))
        before_grpc = len(self.grpc_backend.of(PROFILES))
        sent = [h.make_request(("checkout", "cart"), seed=81), h.make_request(("search",), seed=82)]
        resp = grpc_export(self.pchannel, PROFILES, sent[0])
        self.assertFalse(resp.HasField("partial_success"), resp)
        resp = grpc_export(self.pchannel, PROFILES, sent[1], compression=grpc.Compression.Gzip)
        self.assertFalse(resp.HasField("partial_success"), resp)
        want = h.summarize(sent)
        n_samples = h.count_samples(sent)

        def http_msgs():
            return [r.message for r in self.pyro_sink.of(PROFILES)[before_http:] if r.message]

        def grpc_msgs():
            return self.grpc_backend.requests(PROFILES)[before_grpc:]

        for what, fetch in (("otlphttp/pyroscope", http_msgs), ("otlp/profiles (TLS)", grpc_msgs)):
            ok = h.wait_for(lambda: h.count_samples(fetch()) >= n_samples, ARRIVE_TIMEOUT)
            self.assertTrue(ok, "%s: %d of %d samples arrived\n%s" % (
                what, h.count_samples(fetch()), n_samples, self.p.stderr()[-3000:]))
            self.assertEqual(h.summarize(fetch()), want, "%s: what arrived differs" % what)
        for r in self.pyro_sink.of(PROFILES)[before_http:]:
            self.assertIsNone(r.error, r.error)
            self.assertEqual(r.path, "/v1development/profiles")
        for _, _, md in self.grpc_backend.of(PROFILES)[before_grpc:]:
            self.assertEqual(md.get("authorization"), "Bearer " + TOKEN)
        self.assertEqual([r for r in self.https_sink.snapshot() if r.signal is PROFILES], [])

    def test_untrusted_backends(self):
        """The same config, SSL_CERT_FILE = a CA that did not sign the backends' certificate:
        the https:// exporters verify the server and send nothing."""
        gport, hport, pport = h.free_port(), h.free_port(), h.free_port()
        cfg = issue_config(gport, hport, pport, self.https_sink.url, self.pyro_sink.url,
                           "https://127.0.0.1:%d" % self.grpc_backend.port)
        p = h.Profcol(cfg, wait_ports=[gport, hport, pport], unset=("SSL_CERT_DIR",),
                      env={"API_TOKEN": TOKEN, "SSL_CERT_FILE": CERTS.other_ca},
                      name="signals-issue-untrusted")
        self.addCleanup(p.kill)
        p.start()
        before_https = len(self.https_sink.snapshot())
        before_grpc = len(self.grpc_backend.of(PROFILES))
        check_ok(self, h.post(hport, make_traces("untrusted", 7).SerializeToString(),
                              path=TRACES.path), TRACES, h.CT_PROTO)
        with grpc.insecure_channel("127.0.0.1:%d" % pport, options=GRPC_OPTIONS) as ch:
            grpc_export(ch, PROFILES, h.make_request(("untrusted",), seed=7))
        want = [r"TLS handshake with (https://)?127\.0\.0\.1:%d failed: certificate verify failed"
                % port for port in (self.https_sink.port, self.grpc_backend.port)]
        text = p.wait_stderr(lambda t: all(re.search(w, t) for w in want), timeout=10)
        for w in want:
            self.assertRegex(text, w)
        self.assertEqual(len(self.https_sink.snapshot()), before_https)
        self.assertEqual(len(self.grpc_backend.of(PROFILES)), before_grpc)
        p.kill()

    def test_signal_without_pipeline(self):
        """otlp is in the traces pipeline only, otlp/profiles in the profiles pipeline only."""
        for sig, req in ((METRICS, make_metrics("unrouted", 5)), (LOGS, make_logs("unrouted", 5)),
                         (PROFILES, h.make_request(("unrouted",), seed=5))):
            with self.subTest(signal=sig.name, transport="http"):
                r = h.post(self.hport, req.SerializeToString(), path=sig.path)
                self.assertEqual(r.status, 404, r)
            with self.subTest(signal=sig.name, transport="grpc"):
                with self.assertRaises(grpc.RpcError) as cm:
                    grpc_export(self.channel, sig, req)
                self.assertEqual(cm.exception.code(), grpc.StatusCode.UNIMPLEMENTED)
        for sig, req in ((TRACES, make_traces("unrouted", 6)), (LOGS, make_logs("unrouted", 6))):
            with self.subTest(signal=sig.name, receiver="otlp/profiles"):
                with self.assertRaises(grpc.RpcError) as cm:
                    grpc_export(self.pchannel, sig, req)
                self.assertEqual(cm.exception.code(), grpc.StatusCode.UNIMPLEMENTED)
        self.assertTrue(self.p.running())


# ---------------------------------------------------------------------------------------------
# 2. every signal through two relays to a gRPC backend

A_CONFIG = """\
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{a_grpc}
      http:
        endpoint: 127.0.0.1:{a_http}
processors:
  resource:
    attributes:
    - key: env
      value: prod
      action: upsert
  batch:
    timeout: 200ms
  memory_limiter:
    check_interval: 1s
    limit_mib: 4000
exporters:
  otlphttp:
    endpoint: http://127.0.0.1:{b_http}
  otlphttp/json:
    metrics_endpoint: http://127.0.0.1:{b_http}/v1/metrics
    encoding: json
    compression: none
  otlphttp/logs:
    logs_endpoint: http://127.0.0.1:{b_http}/v1/logs
service:
  telemetry:
    metrics:
      address: 127.0.0.1:{a_metrics}
  pipelines:
    traces:
      receivers: [otlp]
      processors: [resource, batch]
      exporters: [otlphttp]
    metrics:
      receivers: [otlp]
      processors: [memory_limiter, resource, batch]
      exporters: [otlphttp/json]
    logs:
      receivers: [otlp]
      processors: [batch, resource]
      exporters: [otlphttp/logs]
"""

B_CONFIG = """\
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:{b_http}
exporters:
  otlp/backend:
    endpoint: 127.0.0.1:{backend}
    tls:
      insecure: true
    headers:
      x-hop: gateway
service:
  telemetry:
    metrics:
      address: 127.0.0.1:{b_metrics}
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [otlp/backend]
    metrics/all:
      receivers: [otlp]
      exporters: [otlp/backend]
    logs:
      receivers: [otlp]
      exporters: [otlp/backend]
"""

A_EXPORTER = {TRACES: "otlphttp", METRICS: "otlphttp/json", LOGS: "otlphttp/logs"}
MAKERS = {TRACES: make_traces, METRICS: make_metrics, LOGS: make_logs}


class PassThrough(unittest.TestCase):
    maxDiff = None
    sent_http = collections.Counter()   # signal -> items acknowledged over OTLP/HTTP
    sent_grpc = collections.Counter()   # signal -> items acknowledged over OTLP/gRPC

    @classmethod
    def setUpClass(cls):
        cls.backend = GrpcBackend(SIGNALS)
        ports = {k: h.free_port() for k in ("a_grpc", "a_http", "a_metrics", "b_http",
                                            "b_metrics")}
        ports["backend"] = cls.backend.port
        cls.ports = ports
        cls.b = h.Profcol(B_CONFIG.format(**ports), wait_ports=[ports["b_http"]],
                          name="signals-B")
        cls.a = h.Profcol(A_CONFIG.format(**ports), wait_ports=[ports["a_grpc"], ports["a_http"]],
                          name="signals-A")
        try:
            cls.b.start()
            cls.a.start()
        except Exception:
            cls.b.kill()
            cls.backend.stop()
            raise
        cls.channel = grpc.insecure_channel("127.0.0.1:%d" % ports["a_grpc"], options=GRPC_OPTIONS)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        try:
            cls.a.stop()
            cls.b.stop()
        finally:
            cls.a.kill()
            cls.b.kill()
            cls.backend.stop()

    def relay(self, sig):
        """Send 6 requests (HTTP: protobuf, JSON, gzip protobuf, gzip JSON; gRPC: plain, gzip)
        and check what the backend gets."""
        before = len(self.backend.of(sig))
        make = MAKERS[sig]
        port = self.ports["a_http"]
        sent = []
        for i, (ctype, gz) in enumerate(((h.CT_PROTO, False), (h.CT_JSON, False),
                                         (h.CT_PROTO, True), (h.CT_JSON, True))):
            req = make("%s-http-%s%s" % (sig.name, ctype.split("/")[1], "-gz" if gz else ""),
                       10 + i)
            body = req.SerializeToString() if ctype == h.CT_PROTO else to_json(req)
            r = h.post(port, body, ctype, gzip_body=gz, path=sig.path)
            if r.status == 200:  # accepted, whatever else is wrong with the answer
                sent.append(req)
                self.sent_http[sig] += count_items(sig, req)
            with self.subTest(transport="http", content_type=ctype, gzip=gz):
                check_ok(self, r, sig, ctype)
        for i, comp in enumerate((None, grpc.Compression.Gzip)):
            req = make("%s-grpc%s" % (sig.name, "-gz" if comp else ""), 20 + i)
            with self.subTest(transport="grpc", gzip=bool(comp)):
                kw = {"compression": comp} if comp else {}
                resp = grpc_export(self.channel, sig, req, **kw)
                self.assertFalse(resp.HasField("partial_success"), resp)
                sent.append(req)
                self.sent_grpc[sig] += count_items(sig, req)
        want = multiset(sig, [with_resource_attr(sig, r, "env", "prod") for r in sent])
        wait_multiset(self, sig, lambda: self.backend.requests(sig)[before:], want,
                      "%s at the gRPC backend" % sig.name,
                      diag=lambda: "\n--- A stderr ---\n%s\n--- B stderr ---\n%s"
                      % (self.a.stderr()[-1500:], self.b.stderr()[-1500:]))
        for _, _, md in self.backend.of(sig)[before:]:
            self.assertEqual(md.get("x-hop"), "gateway", "headers become gRPC metadata")

    def test_logs(self):
        self.relay(LOGS)

    def test_metrics(self):
        self.relay(METRICS)

    def test_traces(self):
        self.relay(TRACES)

    def test_zz_self_metrics(self):
        """After the others: A's and B's counters equal what was acknowledged."""
        sigs = [s for s in SIGNALS if self.sent_http[s] or self.sent_grpc[s]]
        if not sigs:
            self.skipTest("nothing was sent")
        a_port, b_port = self.ports["a_metrics"], self.ports["b_metrics"]

        def counters():
            _, a = http_get(a_port, "/metrics")
            _, b = http_get(b_port, "/metrics")
            out = {}
            for s in sigs:
                total = self.sent_http[s] + self.sent_grpc[s]
                out[s] = {
                    "A accepted http": (metric_value(a, s.accepted, receiver="otlp",
                                                     transport="http"), self.sent_http[s]),
                    "A accepted grpc": (metric_value(a, s.accepted, receiver="otlp",
                                                     transport="grpc"), self.sent_grpc[s]),
                    "A sent": (metric_value(a, s.sent, exporter=A_EXPORTER[s]), total),
                    "B accepted": (metric_value(b, s.accepted, receiver="otlp"), total),
                    "B sent": (metric_value(b, s.sent, exporter="otlp/backend"), total),
                }
            return out

        def settled():
            c = counters()
            return all(got == want for per in c.values() for got, want in per.values())

        h.wait_for(settled, timeout=10, interval=0.1)
        for s, per in counters().items():
            for what, (got, want) in per.items():
                with self.subTest(signal=s.name, counter=what):
                    self.assertEqual(got, want, "%s %s (%s): got %r, want %r"
                                     % (what, s.counted, s.accepted if "accepted" in what
                                        else s.sent, got, want))


# ---------------------------------------------------------------------------------------------
# 3. config errors

VALID_SIGNALS_CONFIG = """\
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:4317
      http:
        endpoint: 127.0.0.1:4318
processors:
  batch:
  memory_limiter:
    limit_mib: 512
  resource:
    attributes:
    - key: env
      value: prod
      action: upsert
exporters:
  otlphttp:
    endpoint: http://127.0.0.1:4319
  otlp:
    endpoint: 127.0.0.1:4320
    tls:
      insecure: true
service:
  pipelines:
    traces:
      receivers: [otlp]
      processors: [memory_limiter, resource, batch]
      exporters: [otlphttp, otlp]
    traces/second:
      receivers: [otlp]
      exporters: [otlp]
    metrics:
      receivers: [otlp]
      processors: [resource]
      exporters: [otlphttp]
    logs/app:
      receivers: [otlp]
      processors: [batch]
      exporters: [otlp]
    profiles:
      receivers: [otlp]
      exporters: [otlphttp]
"""


def bad_pipeline_config(signal, kind, comp, comp_yaml):
    """A config whose `signal` pipeline lists component `comp` (a processor, exporter or
    receiver of the given kind, configured by comp_yaml) besides otlp/otlphttp."""
    recv = "  otlp:\n    protocols:\n      http:\n        endpoint: 127.0.0.1:4318\n"
    exps = "  otlphttp:\n    endpoint: http://127.0.0.1:4319\n"
    procs = ""
    r, p, e = ["otlp"], [], ["otlphttp"]
    if kind == "processor":
        procs, p = comp_yaml, [comp]
    elif kind == "exporter":
        exps += comp_yaml
        e.append(comp)
    else:
        recv += comp_yaml
        r.append(comp)
    s = "receivers:\n" + recv + "exporters:\n" + exps
    if procs:
        s += "processors:\n" + procs
    s += ("service:\n  pipelines:\n    %s:\n      receivers: [%s]\n"
          % (signal, ", ".join(r)))
    if p:
        s += "      processors: [%s]\n" % ", ".join(p)
    s += "      exporters: [%s]\n" % ", ".join(e)
    return s


class ConfigErrors(unittest.TestCase):

    def validate(self, text, name="signals-validate"):
        path = h.write_config(text, name)
        return path, h.run_profcol(["validate", "--config", path])

    def test_valid_signal_pipelines(self):
        _, r = self.validate(VALID_SIGNALS_CONFIG)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_unsupported_components(self):
        cases = [
            ("traces", "processor", "filter",
             "  filter:\n    include:\n      services: [checkout]\n"),
            ("metrics", "processor", "limits", "  limits:\n    max_stack_depth: 64\n"),
            ("logs", "processor", "redaction",
             "  redaction:\n    blocked_keys: [password]\n"),
            ("traces/x", "processor", "filter",
             "  filter:\n    exclude:\n      services: [noisy]\n"),
            ("logs", "exporter", "pyroscope",
             "  pyroscope:\n    endpoint: http://127.0.0.1:4040\n"),
            ("traces", "receiver", "pyroscope", "  pyroscope:\n    endpoint: 127.0.0.1:4040\n"),
        ]
        for signal, kind, comp, yaml in cases:
            with self.subTest(pipeline=signal, component=comp):
                text = bad_pipeline_config(signal, kind, comp, yaml)
                # the component itself is fine in a profiles pipeline
                ok = text.replace("    %s:\n" % signal, "    profiles:\n")
                _, r = self.validate(ok)
                self.assertEqual(r.returncode, 0,
                                 "%s in a profiles pipeline: %s" % (comp, r.stderr))
                path, r = self.validate(text)
                self.assertEqual(r.returncode, 1, r.stderr)
                err = r.stderr
                self.assertIn(path, err, "the message names the file")
                self.assertIn("service::pipelines::%s" % signal, err, "the key path")
                self.assertIn(comp, err)
                self.assertIn("does not support", err)
                self.assertIn(signal.split("/")[0], err.split("does not support", 1)[1],
                              "the message names the signal: %s" % err)

    def test_unknown_pipeline_type(self):
        text = ("receivers:\n  otlp:\n    protocols:\n      http:\n"
                "exporters:\n  otlphttp:\n    endpoint: http://127.0.0.1:4319\n"
                "service:\n  pipelines:\n    events:\n      receivers: [otlp]\n"
                "      exporters: [otlphttp]\n")
        path, r = self.validate(text)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(path, r.stderr)
        self.assertIn("service::pipelines::events", r.stderr)
        self.assertRegex(r.stderr, r"(?i)unknown|not supported|invalid")
        path, r = self.validate(text.replace("    events:", "    traces/:"))
        self.assertEqual(r.returncode, 1, "an empty pipeline name: %s" % r.stderr)


# ---------------------------------------------------------------------------------------------
# 4. malformed input with a good client going on

BAD_CONFIG = """\
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{grpc}
      http:
        endpoint: 127.0.0.1:{http}
exporters:
  otlphttp:
    endpoint: {sink}
service:
  telemetry:
    metrics:
      address: 127.0.0.1:{metrics}
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [otlphttp]
    metrics:
      receivers: [otlp]
      exporters: [otlphttp]
    logs:
      receivers: [otlp]
      exporters: [otlphttp]
"""


class MalformedInput(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        self.sink = h.started_sink(self, SignalSink())
        self.gport, self.hport, self.mport = h.free_port(), h.free_port(), h.free_port()
        self.p = h.started_profcol(self, BAD_CONFIG.format(grpc=self.gport, http=self.hport,
                                                           sink=self.sink.url,
                                                           metrics=self.mport),
                                   [self.gport, self.hport], "signals-bad")
        self.good_req = make_traces("good", 90, ("good-svc",), spans=3)
        self.good = h.GoodClient(self.hport, self.good_req.SerializeToString(), path=TRACES.path,
                                 keepalive=False)
        self.good.start()
        self.addCleanup(self.good.finish)
        self.assertTrue(h.wait_for(lambda: self.good.count() >= 3, timeout=10),
                        "the good client gets no 200s: %s" % self.good.failures[:3])

    def check_400(self, what, r):
        h.assert_400(self, r, what)

    def test_malformed(self):
        good = make_traces("bad", 91).SerializeToString()
        proto_cases = {
            "garbage": b"\xff\xff\xff\xff\xff",
            "truncated": good[:len(good) // 2],
            "length past end": b"\x0a\x7f\x0a\x03abc",
            "garbage inside a submessage": b"\x0a\x03\xff\xff\xff",
        }
        json_cases = {
            "truncated": b'{"resourceSpans": [{"resource": ',
            "not json": b"spans, please",
            "wrong type": b'{"resourceSpans": "everything"}',
            "top level array": b"[1, 2, 3]",
            "bad hex trace id": (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz",'
                                 b' "spanId": "0102030405060708", "name": "x"}]}]}]}'),
        }
        for name, body in proto_cases.items():
            with self.subTest(traces="protobuf", case=name):
                self.check_400("protobuf " + name,
                               h.post(self.hport, body, h.CT_PROTO, path=TRACES.path))
            with self.subTest(traces="gzip protobuf", case=name):
                self.check_400("gzip protobuf " + name,
                               h.post(self.hport, body, h.CT_PROTO, gzip_body=True,
                                      path=TRACES.path))
        for name, body in json_cases.items():
            with self.subTest(traces="json", case=name):
                r = h.post(self.hport, body, h.CT_JSON, path=TRACES.path)
                self.check_400("json " + name, r)
                self.assertEqual(r.content_type, h.CT_JSON, "a JSON request gets a JSON Status")
        for sig in (METRICS, LOGS):
            with self.subTest(signal=sig.name):
                self.check_400(sig.name, h.post(self.hport, b"\xff\xff\xff", path=sig.path))
                self.check_400(sig.name + " json",
                               h.post(self.hport, b"{", h.CT_JSON, path=sig.path))
        with grpc.insecure_channel("127.0.0.1:%d" % self.gport, options=GRPC_OPTIONS) as ch:
            for sig in SIGNALS:
                with self.subTest(grpc=sig.name):
                    with self.assertRaises(grpc.RpcError) as cm:
                        grpc_raw(ch, sig, b"\xff\xff\xff\xff not protobuf")
                    self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.check_good_only()

    def test_wrong_id_lengths(self):
        """Trace ids are 16 bytes and span ids 8 (or empty): anything else is refused, as the
        Collector's pdata refuses it ("unmarshal: invalid TraceID length"), and not forwarded."""
        def span_with(**ids):
            req = make_traces("bad-id", 92, ("x",), spans=1)
            sp = req.resource_spans[0].scope_spans[0].spans[0]
            for k, v in ids.items():
                setattr(sp, k, v)
            return req
        log = make_logs("bad-id", 93, ("x",), records=2)
        log.resource_logs[0].scope_logs[0].log_records[1].trace_id = bytes(15)
        cases = [("traces", "trace_id of 5 bytes", TRACES, span_with(trace_id=b"\x01" * 5)),
                 ("traces", "span_id of 3 bytes", TRACES, span_with(span_id=b"\x02" * 3)),
                 ("traces", "parent_span_id of 9 bytes", TRACES,
                  span_with(parent_span_id=b"\x03" * 9)),
                 ("logs", "trace_id of 15 bytes", LOGS, log)]
        for _, name, sig, req in cases:
            with self.subTest(http="protobuf", case=name):
                self.check_400("protobuf " + name,
                               h.post(self.hport, req.SerializeToString(), path=sig.path))
            with self.subTest(http="json", case=name):
                self.check_400("json " + name,
                               h.post(self.hport, to_json(req), h.CT_JSON, path=sig.path))
        with grpc.insecure_channel("127.0.0.1:%d" % self.gport, options=GRPC_OPTIONS) as ch:
            for _, name, sig, req in cases:
                with self.subTest(grpc=name):
                    with self.assertRaises(grpc.RpcError) as cm:
                        grpc_export(ch, sig, req)
                    self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.check_good_only()

    def check_good_only(self):
        # a few more good requests after the bad ones
        n = self.good.count()
        self.assertTrue(h.wait_for(lambda: self.good.count() >= n + 3, timeout=10))
        ok, failures = self.good.finish()
        self.assertEqual(failures, [], "the good client must only get 200s")
        # exactly the good client's data arrives, nothing of the bad requests
        one = multiset(TRACES, [self.good_req])
        want = collections.Counter({k: v * ok for k, v in one.items()})
        wait_multiset(self, TRACES, lambda: [r.message for r in self.sink.of(TRACES) if r.message],
                      want, "traces at the sink")
        self.assertEqual([r.error for r in self.sink.snapshot() if r.error], [])
        self.assertEqual({r.path for r in self.sink.snapshot()}, {TRACES.path},
                         "only the good client's traces may reach the sink")
        self.assertTrue(self.p.running(), self.p.stderr()[-2000:])
        self.p.stop()


class UrlPaths(unittest.TestCase):
    """protocols::http::<signal>_url_path moves a signal, as in the Collector (cleaned: leading
    slash added, trailing one dropped); the default path then answers 404."""

    def test_custom_paths(self):
        port = h.free_port()
        cfg = ("receivers:\n  otlp:\n    protocols:\n      http:\n"
               "        endpoint: 127.0.0.1:%d\n        traces_url_path: /custom/traces/\n"
               "        metrics_url_path: otlp/metrics\nexporters:\n  debug:\n"
               "service:\n  telemetry:\n    metrics:\n      level: none\n  pipelines:\n"
               "    traces: {receivers: [otlp], exporters: [debug]}\n"
               "    metrics: {receivers: [otlp], exporters: [debug]}\n" % port)
        p = h.Profcol(cfg, wait_ports=[port], name="profcol-paths").start()
        try:
            for sig, path, want in ((TRACES, "/custom/traces", 200), (TRACES, "/v1/traces", 404),
                                    (METRICS, "/otlp/metrics", 200),
                                    (METRICS, "/v1/metrics", 404)):
                r = h.post(port, sig.Req().SerializeToString(), path=path)
                self.assertEqual(r.status, want, "%s %s: %r" % (sig.name, path, r))
        finally:
            p.stop()
        self.assertIn("/custom/traces, /otlp/metrics", p.stderr())


if __name__ == "__main__":
    unittest.main(verbosity=2)
