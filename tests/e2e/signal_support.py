"""Helpers for the traces, metrics and logs end-to-end tests (test_signals.py, test_otel_sdk.py).

Builds on harness.py (profcol process, free ports, OTLP JSON id conversion) and adds:
  * TRACES, METRICS, LOGS, PROFILES (Signal) -- per signal: the pipeline type, OTLP/HTTP path,
    gRPC service and Export method, request/response classes (generated with protoc from
    <repo>/proto at import time, like harness.pb), the request's repeated resource field and the
    self-metrics that count it (otelcol_receiver_accepted_*, otelcol_exporter_sent_*);
  * to_json(), from_json() -- OTLP JSON (enums as integers, hex trace/span ids) for any signal;
  * walk(), multiset(), describe_diff() -- what arrived compared with what was sent as multisets
    of one element per span, metric data point or log record with its resource (attributes as a
    set), scope and, for metrics, the metric's own fields; so that a batch processor may regroup
    requests; optionally only the resources of one service.name;
  * with_resource_attr() -- a request as a resource processor's upsert leaves it;
  * GrpcBackend -- a grpcio server (plain or TLS) implementing Export of the given signals; one
    .proto file cannot declare services of three packages, so no stub is generated: grpcio's
    generic API (what generated stubs call) with the OTLP service names does the same on the
    wire; grpc_export(), grpc_raw() -- the client side;
  * wait_multiset() -- poll until what arrived equals what was sent, or fail with a diff;
  * http_get(), metric_value(), self_metric() -- profcol's /metrics: a sample's value, summed
    over the series whose labels include the given ones.

Debian's /usr/bin/python3, stdlib, python3-protobuf and python3-grpcio only.
"""

import collections
import http.client
import json
import os
import re
import sys
import threading
import time
from concurrent import futures

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402  (re-execs under /usr/bin/python3 if needed)

import grpc  # noqa: E402  (Debian's python3-grpcio)
from google.protobuf import json_format, text_format  # noqa: E402

h.gen_python_protos("pbsig", ["otlp_trace.proto", "otlp_trace_service.proto",
                              "otlp_metrics.proto", "otlp_metrics_service.proto",
                              "otlp_logs.proto", "otlp_logs_service.proto"])
import otlp_metrics_pb2 as metrics_pb  # noqa: E402
import otlp_trace_service_pb2 as trace_svc  # noqa: E402
import otlp_metrics_service_pb2 as metrics_svc  # noqa: E402
import otlp_logs_service_pb2 as logs_svc  # noqa: E402

RPC_TIMEOUT = 15.0
ARRIVE_TIMEOUT = 15.0
GRPC_OPTIONS = [("grpc.enable_http_proxy", 0)]


# ---------------------------------------------------------------------------------------------
# the signals

class Signal:
    def __init__(self, name, path, service, req, resp, top, counted, accepted, sent):
        self.name = name                  # pipeline type
        self.path = path                  # OTLP/HTTP path
        self.service = service            # gRPC service full name
        self.method = "/%s/Export" % service
        self.Req, self.Resp = req, resp
        self.top = top                    # repeated resource field of the request
        self.counted = counted            # what the self-metrics count
        self.accepted = accepted          # otelcol_receiver_accepted_*
        self.sent = sent                  # otelcol_exporter_sent_*

    def __repr__(self):
        return self.name


TRACES = Signal("traces", "/v1/traces", "opentelemetry.proto.collector.trace.v1.TraceService",
                trace_svc.ExportTraceServiceRequest, trace_svc.ExportTraceServiceResponse,
                "resource_spans", "spans", "otelcol_receiver_accepted_spans",
                "otelcol_exporter_sent_spans")
METRICS = Signal("metrics", "/v1/metrics",
                 "opentelemetry.proto.collector.metrics.v1.MetricsService",
                 metrics_svc.ExportMetricsServiceRequest, metrics_svc.ExportMetricsServiceResponse,
                 "resource_metrics", "metric points", "otelcol_receiver_accepted_metric_points",
                 "otelcol_exporter_sent_metric_points")
LOGS = Signal("logs", "/v1/logs", "opentelemetry.proto.collector.logs.v1.LogsService",
              logs_svc.ExportLogsServiceRequest, logs_svc.ExportLogsServiceResponse,
              "resource_logs", "log records", "otelcol_receiver_accepted_log_records",
              "otelcol_exporter_sent_log_records")
PROFILES = Signal("profiles", h.PROFILES_PATH,
                  "opentelemetry.proto.collector.profiles.v1development.ProfilesService",
                  h.pb.Request, h.pb.Response, "resource_profiles", "samples",
                  "otelcol_receiver_accepted_profile_samples",
                  "otelcol_exporter_sent_profile_samples")
SIGNALS = (TRACES, METRICS, LOGS)
BY_PATH = {s.path: s for s in SIGNALS + (PROFILES,)}


# ---------------------------------------------------------------------------------------------
# OTLP JSON: lowerCamelCase, enums as integers, 64-bit integers as strings, trace and span ids
# as hex (json_format wants base64 for bytes; harness converts)

def to_json(msg):
    return h.to_otlp_json(msg, enums_as_ints=True)


def from_json(sig, body, strict=False):
    """A sig.Req from OTLP JSON (bytes as UTF-8, or text); unknown fields are ignored, as
    receivers do, unless strict."""
    if isinstance(body, bytes):
        body = body.decode("utf-8")
    msg = sig.Req()
    json_format.ParseDict(h._hex_ids_to_base64(json.loads(body)), msg,
                          ignore_unknown_fields=not strict)
    return msg


# ---------------------------------------------------------------------------------------------
# canonical multisets

def _txt(msg):
    return text_format.MessageToString(msg, as_one_line=True)


def _resource_key(top_item):
    attrs = tuple(sorted(_txt(kv) for kv in top_item.resource.attributes))
    return (attrs, top_item.resource.dropped_attributes_count,
            tuple(_txt(e) for e in top_item.resource.entity_refs), top_item.schema_url)


def _scope_key(scope_item):
    return (_txt(scope_item.scope), scope_item.schema_url)


def _service(top_item):
    for kv in top_item.resource.attributes:
        if kv.key == "service.name":
            return kv.value.string_value
    return None


def walk(sig, msgs, service=None):
    """For each span and log record of msgs (requests of sig) (resource entry, scope entry,
    item), for each metric data point (resource entry, scope entry, metric, point); only the
    resources whose service.name is `service` when given. The entries are e.g. ResourceSpans
    and ScopeSpans: .resource/.scope and their schema_url."""
    if sig not in SIGNALS:
        raise ValueError(sig)
    for msg in msgs:
        for top in getattr(msg, sig.top):
            if service is not None and _service(top) != service:
                continue
            if sig is TRACES:
                for ss in top.scope_spans:
                    for sp in ss.spans:
                        yield top, ss, sp
            elif sig is LOGS:
                for sl in top.scope_logs:
                    for lr in sl.log_records:
                        yield top, sl, lr
            else:
                for sm in top.scope_metrics:
                    for m in sm.metrics:
                        which = m.WhichOneof("data")
                        for dp in (getattr(m, which).data_points if which else []):
                            yield top, sm, m, dp


def _metric_head(m):
    """The metric without its data points, as text."""
    which = m.WhichOneof("data")
    head = metrics_pb.Metric()
    head.CopyFrom(m)
    if which:
        getattr(head, which).ClearField("data_points")
    return _txt(head)


def multiset(sig, msgs, service=None):
    """Counter of (resource, scope, [metric,] item) text tuples over msgs (requests of sig);
    only the resources whose service.name is `service` when given."""
    out = collections.Counter()
    for e in walk(sig, msgs, service):
        key = (_resource_key(e[0]), _scope_key(e[1]))
        if len(e) == 4:
            key += (_metric_head(e[2]),)
        out[key + (_txt(e[-1]),)] += 1
    return out


def with_resource_attr(sig, req, key, value):
    """A copy of req with resource attribute key=value upserted into every resource."""
    out = sig.Req()
    out.CopyFrom(req)
    for top in getattr(out, sig.top):
        attrs = top.resource.attributes
        for kv in attrs:
            if kv.key == key:
                kv.value.Clear()
                kv.value.string_value = value
                break
        else:
            attrs.add(key=key).value.string_value = value
    return out


def describe_diff(got, want, limit=3):
    missing, extra = want - got, got - want
    lines = ["%d expected item(s) missing, %d unexpected item(s) (of %d expected, %d got)"
             % (sum(missing.values()), sum(extra.values()), sum(want.values()),
                sum(got.values()))]
    for title, c in (("missing", missing), ("unexpected", extra)):
        for i, (k, n) in enumerate(sorted(c.items())):
            if i >= limit:
                lines.append("  ... %d more %s" % (len(c) - limit, title))
                break
            lines.append("  %s x%d:\n    %s" % (title, n, "\n    ".join(str(x) for x in k)))
    return "\n".join(lines)


def wait_multiset(test, sig, fetch, want, what, timeout=ARRIVE_TIMEOUT, service=None,
                  diag=None):
    """Poll fetch() -> list of messages until their multiset (of `service` when given) equals
    want (bounded); else fail the test with the difference and diag() when given."""
    deadline = time.monotonic() + timeout
    while True:
        got = multiset(sig, fetch(), service)
        if got == want or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    if got != want:
        test.fail("%s: what arrived differs from what was sent: %s%s"
                  % (what, describe_diff(got, want), diag() if diag else ""))
    return got


# ---------------------------------------------------------------------------------------------
# gRPC

class GrpcBackend:
    """A grpcio server implementing Export of the given signals; records (signal, request,
    metadata). creds: grpc.ssl_server_credentials for TLS, else plain text (h2c)."""

    def __init__(self, signals=SIGNALS, creds=None):
        self.cond = threading.Condition()
        self.calls = []
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        handlers = []
        for sig in signals:
            handlers.append(grpc.method_handlers_generic_handler(sig.service, {
                "Export": grpc.unary_unary_rpc_method_handler(
                    self._export(sig), request_deserializer=sig.Req.FromString,
                    response_serializer=sig.Resp.SerializeToString)}))
        self.server.add_generic_rpc_handlers(handlers)
        addr = "127.0.0.1:%d" % h.free_port()
        if creds is None:
            self.port = self.server.add_insecure_port(addr)
        else:
            self.port = self.server.add_secure_port(addr, creds)
        self.server.start()

    def _export(self, sig):
        def export(request, context):
            with self.cond:
                self.calls.append((sig, request, dict(context.invocation_metadata())))
                self.cond.notify_all()
            return sig.Resp()
        return export

    def of(self, sig):
        """[(signal, request, metadata)] of sig's calls so far."""
        with self.cond:
            return [c for c in self.calls if c[0] is sig]

    def requests(self, sig):
        return [c[1] for c in self.of(sig)]

    def stop(self):
        self.server.stop(0)


def grpc_export(channel, sig, req, **kw):
    call = channel.unary_unary(sig.method, request_serializer=sig.Req.SerializeToString,
                               response_deserializer=sig.Resp.FromString)
    return call(req, timeout=RPC_TIMEOUT, **kw)


def grpc_raw(channel, sig, body, **kw):
    return channel.unary_unary(sig.method)(body, timeout=RPC_TIMEOUT, **kw)


# ---------------------------------------------------------------------------------------------
# self-metrics

def http_get(port, path):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.read().decode("utf-8", "replace")
    finally:
        conn.close()


_SAMPLE = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)')
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def metric_value(text, name, **labels):
    """Sum of the samples of `name` whose labels include `labels`; None if there is none."""
    total, found = 0.0, False
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if not m or m.group(1) != name:
            continue
        have = dict(_LABEL.findall(m.group(2) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            total += float(m.group(3))
            found = True
    return total if found else None


def self_metric(port, name, **labels):
    """metric_value() of profcol's /metrics on port."""
    return metric_value(http_get(port, "/metrics")[1], name, **labels)
