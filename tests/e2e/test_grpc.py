#!/usr/bin/python3
"""End to end over OTLP/gRPC with a real gRPC peer (Debian's python3-grpcio).

Receiver: a grpcio client calls profcol's ProfilesService/Export (plain and gzip; invalid data
-> INVALID_ARGUMENT; over max_recv_msg_size_mib, also after inflating -> RESOURCE_EXHAUSTED;
unknown method -> UNIMPLEMENTED; a refusing pipeline -> RESOURCE_EXHAUSTED with RetryInfo or
UNAVAILABLE) and what profcol forwards (otlphttp -> harness Sink) equals what was sent.
protocols::grpc::auth with bearertokenauth (token file re-read on SIGHUP) and basicauth:
UNAUTHENTICATED without valid credentials. Keepalive: a hand-made HTTP/2 client that never
answers PINGs is PINGed after `time`, then sent GOAWAY and disconnected after `timeout`; one that
pings too often gets GOAWAY ENHANCE_YOUR_CALM; a grpcio client answers and keeps its connection.

Exporter: profcol (otlp HTTP receiver -> otlp gRPC exporter) calls a grpcio server; what arrives
equals what was sent (h2c: http:// or tls::insecure, since a bare host:port means TLS);
metadata and grpc-timeout are sent; UNAVAILABLE, RESOURCE_EXHAUSTED with
RetryInfo and a server that is not up yet are retried until delivered; INVALID_ARGUMENT and
RESOURCE_EXHAUSTED without RetryInfo are not retried.

Stubs: grpc_tools.protoc generates the service stub at test time from tests/e2e/
profiles_grpc_service.proto; its messages are the harness's modules generated from proto/."""

import base64
import hashlib
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import unittest
from concurrent import futures

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402  (re-execs under /usr/bin/python3 if needed)
from signal_support import self_metric  # noqa: E402

import grpc  # noqa: E402  (Debian's python3-grpcio)

EXPORT = "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"
RPC_TIMEOUT = 15.0


def _gen_stub():
    out = os.path.join(h.TMP, "grpcstub")
    os.makedirs(out, exist_ok=True)
    here = os.path.dirname(os.path.abspath(__file__))
    cmd = [sys.executable, "-m", "grpc_tools.protoc", "--grpc_python_out=" + out,
           "--proto_path=" + os.path.join(h.SRC, "proto"), "--proto_path=" + here,
           "profiles_grpc_service.proto"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError("grpc_tools.protoc failed: %s\n%s" % (" ".join(cmd), r.stderr))
    sys.path.insert(0, out)
    import profiles_grpc_service_pb2_grpc  # uses the harness's otlp_profiles_service_pb2
    return profiles_grpc_service_pb2_grpc


svc = _gen_stub()


# ---------------------------------------------------------------------------------------------
# google.rpc.Status / RetryInfo by hand (python's own google.protobuf.Any clashes with
# proto/pb_wellknown.proto, so those are not generated)

def _field(num, wt, payload):
    if wt == 0:
        return h.varint(num << 3) + h.varint(payload)
    return h.varint(num << 3 | 2) + h.varint(len(payload)) + payload


def _fields(buf):
    """(field number, value) of every field; only varints and length-delimited fields."""
    return [(num, v) for num, _, v in h.pb_fields(buf, wire_types=(0, 2))]


RETRY_INFO_URL = b"type.googleapis.com/google.rpc.RetryInfo"


def status_with_retry_info(code, message, seconds):
    """Serialized google.rpc.Status{code, message, details: [Any{RetryInfo{retry_delay}}]}."""
    duration = _field(1, 0, seconds)
    retry_info = _field(1, 2, duration)
    any_ = _field(1, 2, RETRY_INFO_URL) + _field(2, 2, retry_info)
    return _field(1, 0, code) + _field(2, 2, message.encode()) + _field(3, 2, any_)


def retry_delay_of(details_bin):
    """(code, retry delay in seconds or None) from a grpc-status-details-bin value."""
    code, delay = None, None
    for num, v in _fields(details_bin):
        if num == 1:
            code = v
        elif num == 3:
            any_ = dict(_fields(v))
            if any_.get(1) == RETRY_INFO_URL:
                ri = dict(_fields(any_.get(2, b"")))
                d = dict(_fields(ri.get(1, b"")))
                delay = d.get(1, 0) + d.get(2, 0) / 1e9
    return code, delay


def trailing(err, key):
    for k, v in err.trailing_metadata() or ():
        if k == key:
            return v
    return None


# ---------------------------------------------------------------------------------------------
# profcol's gRPC receiver, called by a grpcio client

def export_and_check(test, stub, sink, req, **kw):
    """Export req through stub: a full success, and what reaches sink summarizes as req."""
    n = len(sink.snapshot())
    resp = stub.Export(req, timeout=RPC_TIMEOUT, **kw)
    test.assertFalse(resp.HasField("partial_success"), resp)
    got = sink.wait_requests(n + 1)
    test.assertEqual(len(got), n + 1, "nothing forwarded")
    test.assertIsNone(got[-1].error, got[-1].error)
    test.assertEqual(h.summarize(got[-1].message), h.summarize(req))


def export_concurrently(test, stub, sink, reqs):
    """Export reqs at once through stub (one connection); what reaches sink sums up to them."""
    n = len(sink.snapshot())
    calls = [stub.Export.future(r, timeout=RPC_TIMEOUT) for r in reqs]
    for c in calls:
        c.result()
    got = sink.wait_requests(n + len(reqs))[n:]
    test.assertEqual(h.merge_summaries([h.summarize(r.message) for r in got]),
                     h.merge_summaries([h.summarize(r) for r in reqs]))


class GrpcReceiver(unittest.TestCase):
    """otlp receiver (grpc + http) -> otlphttp exporter -> Sink."""

    @classmethod
    def setUpClass(cls):
        cls.sink = h.Sink().start()
        cls.gport, cls.hport, cls.mport = h.free_port(), h.free_port(), h.free_port()
        cfg = ("receivers:\n  otlp:\n    protocols:\n"
               "      grpc:\n        endpoint: 127.0.0.1:%d\n        max_recv_msg_size_mib: 1\n"
               "      http:\n        endpoint: 127.0.0.1:%d\n"
               "exporters:\n  otlphttp:\n    endpoint: %s\n    timeout: 5s\n"
               "service:\n  telemetry:\n    metrics:\n      address: 127.0.0.1:%d\n"
               "  pipelines:\n    profiles:\n      receivers: [otlp]\n      exporters: [otlphttp]\n"
               % (cls.gport, cls.hport, cls.sink.url, cls.mport))
        cls.p = h.Profcol(cfg, wait_ports=[cls.gport, cls.hport], name="grpc-recv").start()
        cls.channel = grpc.insecure_channel("127.0.0.1:%d" % cls.gport)
        cls.stub = svc.ProfilesServiceStub(cls.channel)
        cls.raw = cls.channel.unary_unary(EXPORT)  # bytes in, bytes out

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        h.stop_all(cls.p, cls.sink)

    def export_and_check(self, req, **kw):
        export_and_check(self, self.stub, self.sink, req, **kw)

    def test_plain(self):
        self.export_and_check(h.make_request(("checkout", "cart"), seed=3))

    def test_gzip(self):
        self.export_and_check(h.make_request(("gz",), seed=4, samples=200),
                              compression=grpc.Compression.Gzip)

    def test_concurrent_calls_share_a_connection(self):
        reqs = [h.make_request(("c%d" % i,), seed=10 + i) for i in range(12)]
        export_concurrently(self, self.stub, self.sink, reqs)

    def test_http_still_served(self):
        req = h.make_request(("over-http",), seed=5)
        r = h.post(self.hport, req.SerializeToString())
        self.assertEqual(r.status, 200, r)

    def test_invalid_argument(self):
        bad = h.pb.Request()
        bad.CopyFrom(h.make_request(("bad",), seed=6))
        bad.dictionary.string_table[0] = "not empty"  # element 0 of every table must be zero
        with self.assertRaises(grpc.RpcError) as cm:
            self.stub.Export(bad, timeout=RPC_TIMEOUT)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("string_table[0]", cm.exception.details())
        with self.assertRaises(grpc.RpcError) as cm:
            self.raw(b"\xff\xff\xff\xff not protobuf", timeout=RPC_TIMEOUT)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)

    def test_partial_success(self):
        req = h.make_request(("partial",), seed=7)
        prof = req.resource_profiles[0].scope_profiles[0].profiles[0]
        prof.samples[0].stack_index = 10_000  # out of range: this profile is rejected
        n = len(self.sink.snapshot())
        resp = self.stub.Export(req, timeout=RPC_TIMEOUT)
        self.assertEqual(resp.partial_success.rejected_profiles, 1, resp)
        self.assertTrue(resp.partial_success.error_message)
        got = self.sink.wait_requests(n + 1)
        self.assertEqual(h.count_samples([got[-1].message]), h.count_samples([req]) - len(prof.samples))

    def test_too_large(self):
        big = h.make_request(tuple("svc%d" % i for i in range(120)), samples=200, seed=8)
        self.assertGreater(big.ByteSize(), 1 << 20)
        with self.assertRaises(grpc.RpcError) as cm:
            self.stub.Export(big, timeout=RPC_TIMEOUT)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
        # small on the wire, over the limit once inflated
        with self.assertRaises(grpc.RpcError) as cm:
            self.raw(bytes(3 << 20), timeout=RPC_TIMEOUT, compression=grpc.Compression.Gzip)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertIn("decompressed", cm.exception.details())
        # the connection is still good
        self.export_and_check(h.make_request(("after-big",), seed=9))

    def test_unimplemented(self):
        other = self.channel.unary_unary(
            "/opentelemetry.proto.collector.trace.v1.TraceService/Export")
        with self.assertRaises(grpc.RpcError) as cm:
            other(b"", timeout=RPC_TIMEOUT)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNIMPLEMENTED)

    def test_zz_metrics(self):  # after the others: counts what they sent over gRPC
        n = self_metric(self.mport, "otelcol_receiver_accepted_profile_samples", transport="grpc")
        self.assertIsNotNone(n, "no otelcol_receiver_accepted_profile_samples{transport=\"grpc\"}")
        self.assertGreater(n, 0)


class GrpcReceiverRefusals(unittest.TestCase):
    """The pipeline's refusals reach the gRPC client: overload -> RESOURCE_EXHAUSTED with
    RetryInfo, backend down -> UNAVAILABLE (exporter without queue and retries)."""

    def test_refusals(self):
        sink = h.Sink().start()
        gport, mport = h.free_port(), h.free_port()
        cfg = ("receivers:\n  otlp:\n    protocols:\n      grpc:\n        endpoint: 127.0.0.1:%d\n"
               "exporters:\n  otlphttp:\n    endpoint: %s\n    timeout: 5s\n"
               "    sending_queue:\n      enabled: false\n"
               "    retry_on_failure:\n      enabled: false\n"
               "service:\n  telemetry:\n    metrics:\n      address: 127.0.0.1:%d\n"
               "  pipelines:\n    profiles:\n      receivers: [otlp]\n      exporters: [otlphttp]\n"
               % (gport, sink.url, mport))
        p = h.Profcol(cfg, wait_ports=[gport], name="grpc-refuse")
        try:
            p.start()
            # only grpc configured: no HTTP server was started
            self.assertNotIn("OTLP/HTTP", p.stderr())
            with grpc.insecure_channel("127.0.0.1:%d" % gport) as ch:
                stub = svc.ProfilesServiceStub(ch)
                req = h.make_request(("refused",), seed=21)
                sink.fail_next(1, 429)
                with self.assertRaises(grpc.RpcError) as cm:
                    stub.Export(req, timeout=RPC_TIMEOUT)
                self.assertEqual(cm.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
                details = trailing(cm.exception, "grpc-status-details-bin")
                self.assertIsNotNone(details, cm.exception.trailing_metadata())
                self.assertEqual(retry_delay_of(details), (8, 1.0))
                sink.fail_next(1, 503)
                with self.assertRaises(grpc.RpcError) as cm:
                    stub.Export(req, timeout=RPC_TIMEOUT)
                self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAVAILABLE)
                stub.Export(req, timeout=RPC_TIMEOUT)  # and fine again
            p.stop()
        finally:
            p.kill()
            sink.stop()


# ---------------------------------------------------------------------------------------------
# profcol's otlp (gRPC) exporter, calling a grpcio server

class Recorder(svc.ProfilesServiceServicer):
    """Records every call; `plan` holds the answers for the next calls: None (OK) or
    (StatusCode, message, RetryInfo seconds or None)."""

    def __init__(self):
        self.lock = threading.Condition()
        self.calls = []  # (request, metadata dict, time remaining, outcome)
        self.plan = []

    def Export(self, request, context):
        with self.lock:
            step = self.plan.pop(0) if self.plan else None
            self.calls.append((request, dict(context.invocation_metadata()),
                               context.time_remaining(), step))
            self.lock.notify_all()
        if step is None:
            return h.pb.Response()
        code, msg, retry_s = step
        if retry_s is not None:
            context.set_trailing_metadata((
                ("grpc-status-details-bin",
                 status_with_retry_info(code.value[0], msg, retry_s)),))
        context.abort(code, msg)

    def wait_calls(self, n, timeout=15.0):
        deadline = time.monotonic() + timeout
        with self.lock:
            while len(self.calls) < n and time.monotonic() < deadline:
                self.lock.wait(0.1)
            return list(self.calls)

    def delivered(self):
        with self.lock:
            return [c[0] for c in self.calls if c[3] is None]


def start_recorder(test, port=None, creds=None):
    """A grpcio server with a Recorder on 127.0.0.1 (a free port unless given; TLS with creds),
    stopped at the test's cleanup. Returns (recorder, server, port)."""
    rec = Recorder()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    svc.add_ProfilesServiceServicer_to_server(rec, server)
    addr = "127.0.0.1:%d" % (port or h.free_port())
    port = server.add_secure_port(addr, creds) if creds else server.add_insecure_port(addr)
    server.start()
    test.addCleanup(server.stop, 0)
    return rec, server, port


def start_exporting_profcol(test, exporter_yaml, name):
    """profcol: OTLP/HTTP receiver -> otlp exporter configured by exporter_yaml, killed at the
    test's cleanup. Returns (profcol, the receiver's port)."""
    hport, mport = h.free_port(), h.free_port()
    cfg = (h.otlp_receiver_yaml(hport) +
           "exporters:\n  otlp:\n" +
           "".join("    %s\n" % ln for ln in exporter_yaml.strip("\n").splitlines()) +
           "service:\n  telemetry:\n    metrics:\n      address: 127.0.0.1:%d\n"
           "  pipelines:\n    profiles:\n      receivers: [otlp]\n      exporters: [otlp]\n"
           % mport)
    return h.started_profcol(test, cfg, hport, name), hport


class GrpcExporter(unittest.TestCase):

    def start_server(self, port=None):
        return start_recorder(self, port)

    def start_profcol(self, exporter_yaml, name):
        return start_exporting_profcol(self, exporter_yaml, name)

    def post_ok(self, hport, req):
        r = h.post(hport, req.SerializeToString())
        self.assertEqual(r.status, 200, r)

    def test_delivers_equal_data_with_metadata(self):
        rec, _, port = self.start_server()
        p, hport = self.start_profcol(
            "endpoint: 127.0.0.1:%d\ntls:\n  insecure: true\ntimeout: 7s\n"
            "headers:\n  Authorization: Bearer t0k3n\n  x-scope-orgid: tenant-a\n" % port,
            "grpc-exp")
        reqs = [h.make_request(("svc-a", "svc-b"), seed=31), h.make_request(("svc-c",), seed=32)]
        for req in reqs:
            self.post_ok(hport, req)
        calls = rec.wait_calls(2)
        self.assertEqual(len(calls), 2)
        self.assertEqual(h.merge_summaries([h.summarize(c[0]) for c in calls]),
                         h.merge_summaries([h.summarize(r) for r in reqs]))
        md = calls[0][1]
        self.assertEqual(md.get("authorization"), "Bearer t0k3n")
        self.assertEqual(md.get("x-scope-orgid"), "tenant-a")
        self.assertTrue(md.get("user-agent", "").startswith("profcol/"), md)
        remaining = calls[0][2]
        self.assertTrue(remaining is not None and 5.0 < remaining <= 7.0, remaining)
        p.stop()

    def test_no_compression_and_http_scheme(self):
        rec, _, port = self.start_server()
        p, hport = self.start_profcol(
            "endpoint: http://127.0.0.1:%d\ncompression: none\n" % port, "grpc-exp-plain")
        req = h.make_request(("plain",), seed=33, samples=100)
        self.post_ok(hport, req)
        calls = rec.wait_calls(1)
        self.assertEqual(len(calls), 1)
        self.assertEqual(h.summarize(calls[0][0]), h.summarize(req))
        p.stop()

    RETRY = "retry_on_failure:\n  initial_interval: 100ms\n  max_interval: 200ms\n"
    H2C = "tls:\n  insecure: true\n"  # a bare host:port is TLS unless this (as in the Collector)

    def test_unavailable_then_ok(self):
        rec, _, port = self.start_server()
        rec.plan = [(grpc.StatusCode.UNAVAILABLE, "warming up", None)] * 2
        p, hport = self.start_profcol("endpoint: 127.0.0.1:%d\n" % port + self.H2C + self.RETRY,
                                      "grpc-exp-retry")
        req = h.make_request(("retry",), seed=34)
        self.post_ok(hport, req)
        calls = rec.wait_calls(3)
        self.assertEqual(len(calls), 3, "want 2 refused attempts then a delivery")
        self.assertEqual([h.summarize(r) for r in rec.delivered()], [h.summarize(req)])
        self.assertIn("UNAVAILABLE", p.stderr())
        p.stop()

    def test_resource_exhausted_honours_retry_info(self):
        rec, _, port = self.start_server()
        rec.plan = [(grpc.StatusCode.RESOURCE_EXHAUSTED, "slow down", 1)]
        p, hport = self.start_profcol("endpoint: 127.0.0.1:%d\n" % port + self.H2C + self.RETRY,
                                      "grpc-exp-ri")
        req = h.make_request(("throttled",), seed=35)
        t0 = time.monotonic()
        self.post_ok(hport, req)
        calls = rec.wait_calls(2)
        self.assertEqual(len(calls), 2)
        self.assertEqual([h.summarize(r) for r in rec.delivered()], [h.summarize(req)])
        # the server's RetryInfo (1s), not the 100ms backoff, set the pause
        self.assertGreaterEqual(time.monotonic() - t0, 0.9)
        self.assertIn("retrying in 1000ms", p.stderr())
        p.stop()

    def test_permanent_errors_not_retried(self):
        rec, _, port = self.start_server()
        rec.plan = [(grpc.StatusCode.INVALID_ARGUMENT, "bad data", None),
                    (grpc.StatusCode.RESOURCE_EXHAUSTED, "too big, no RetryInfo", None)]
        p, hport = self.start_profcol("endpoint: 127.0.0.1:%d\n" % port + self.H2C + self.RETRY,
                                      "grpc-exp-perm")
        self.post_ok(hport, h.make_request(("perm1",), seed=36))
        self.post_ok(hport, h.make_request(("perm2",), seed=37))
        err = p.wait_stderr(lambda t: t.count("not retryable") >= 2)
        self.assertEqual(err.count("not retryable"), 2, err[-2000:])
        time.sleep(0.5)  # a retry would come after 100-200ms
        self.assertEqual(len(rec.wait_calls(2)), 2)
        self.assertIn("INVALID_ARGUMENT: bad data", err)
        p.stop()

    def test_server_down_then_up(self):
        port = h.free_port()
        p, hport = self.start_profcol("endpoint: 127.0.0.1:%d\n" % port + self.H2C + self.RETRY,
                                      "grpc-exp-down")
        req = h.make_request(("late-server",), seed=38)
        self.post_ok(hport, req)  # queued: acknowledged before delivery
        p.wait_stderr(lambda t: "retrying" in t)
        rec, _, _ = self.start_server(port)
        calls = rec.wait_calls(1)
        self.assertEqual(len(calls), 1)
        self.assertEqual(h.summarize(calls[0][0]), h.summarize(req))
        p.stop()


# ---------------------------------------------------------------------------------------------
# protocols::grpc::auth

def auth_md(value):
    return (("authorization", value),)


def basic(user, pw):
    return "Basic " + base64.b64encode(("%s:%s" % (user, pw)).encode()).decode()


class GrpcAuth(unittest.TestCase):
    """otlp/bearer (bearertokenauth, token file re-read on SIGHUP) and otlp/basic (basicauth
    htpasswd file and inline) -> otlphttp -> Sink: calls without valid credentials get
    UNAUTHENTICATED and forward nothing."""

    @classmethod
    def setUpClass(cls):
        cls.sink = h.Sink().start()
        cls.bport, cls.aport = h.free_port(), h.free_port()
        cls.token_file = os.path.join(h.TMP, "grpc-token")
        with open(cls.token_file, "w") as f:
            f.write("tok-1\n")
        htpasswd = os.path.join(h.TMP, "grpc-htpasswd")
        with open(htpasswd, "w") as f:
            f.write("alice:{SHA}%s\n" % base64.b64encode(hashlib.sha1(b"alice-pw").digest())
                    .decode())
        cfg = ("extensions:\n  bearertokenauth:\n    filename: %s\n"
               "  basicauth:\n    htpasswd:\n      file: %s\n      inline: |\n"
               "        bob:bob-plain\n"
               "receivers:\n"
               "  otlp/bearer:\n    protocols:\n      grpc:\n        endpoint: 127.0.0.1:%d\n"
               "        auth:\n          authenticator: bearertokenauth\n"
               "  otlp/basic:\n    protocols:\n      grpc:\n        endpoint: 127.0.0.1:%d\n"
               "        auth:\n          authenticator: basicauth\n"
               "exporters:\n  otlphttp:\n    endpoint: %s\n    timeout: 5s\n"
               "service:\n  extensions: [bearertokenauth, basicauth]\n"
               "  telemetry:\n    metrics:\n      level: none\n"
               "  pipelines:\n    profiles:\n      receivers: [otlp/bearer, otlp/basic]\n"
               "      exporters: [otlphttp]\n"
               % (cls.token_file, htpasswd, cls.bport, cls.aport, cls.sink.url))
        cls.p = h.Profcol(cfg, wait_ports=[cls.bport, cls.aport], name="grpc-auth").start()
        cls.bearer = grpc.insecure_channel("127.0.0.1:%d" % cls.bport)
        cls.basic = grpc.insecure_channel("127.0.0.1:%d" % cls.aport)

    @classmethod
    def tearDownClass(cls):
        cls.bearer.close()
        cls.basic.close()
        h.stop_all(cls.p, cls.sink)

    def refused(self, channel, md, seed):
        n = len(self.sink.snapshot())
        with self.assertRaises(grpc.RpcError) as cm:
            svc.ProfilesServiceStub(channel).Export(h.make_request(("no",), seed=seed),
                                                    metadata=md, timeout=RPC_TIMEOUT)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAUTHENTICATED, md)
        self.assertIn("missing or invalid credentials", cm.exception.details())
        self.assertEqual(len(self.sink.snapshot()), n, "a refused call was forwarded")

    def accepted(self, channel, md, seed):
        n = len(self.sink.snapshot())
        req = h.make_request(("yes",), seed=seed)
        svc.ProfilesServiceStub(channel).Export(req, metadata=md, timeout=RPC_TIMEOUT)
        got = self.sink.wait_requests(n + 1)
        self.assertEqual(h.summarize(got[-1].message), h.summarize(req))

    def test_bearer_token_and_reload(self):
        self.assertRegex(self.p.stderr(), r"otlp/bearer: OTLP/gRPC on .*, auth: bearertokenauth\)")
        for md in ((), auth_md("Bearer wrong"), auth_md("tok-1"), auth_md("Bearer tok-12"),
                   auth_md("Basic dG9rLTE=")):
            self.refused(self.bearer, md, 81)
        self.accepted(self.bearer, auth_md("Bearer tok-1"), 82)
        # the token file is re-read on SIGHUP, and the gRPC receiver uses the new token
        with open(self.token_file, "w") as f:
            f.write("tok-2\n")
        self.p.proc.send_signal(signal.SIGHUP)
        self.p.wait_stderr(lambda t: "token reloaded" in t)
        self.refused(self.bearer, auth_md("Bearer tok-1"), 83)
        self.accepted(self.bearer, auth_md("Bearer tok-2"), 84)

    def test_basicauth_htpasswd(self):
        for md in ((), auth_md(basic("alice", "wrong")), auth_md(basic("nobody", "alice-pw")),
                   auth_md("Basic !!!"), auth_md("Bearer alice-pw")):
            self.refused(self.basic, md, 85)
        self.accepted(self.basic, auth_md(basic("alice", "alice-pw")), 86)
        self.accepted(self.basic, auth_md(basic("bob", "bob-plain")), 87)

    def test_exporter_sends_credentials(self):
        """The otlp (gRPC) exporter's auth::authenticator: its credentials travel as metadata;
        wrong ones get UNAUTHENTICATED, which is not retried and is logged as dropped."""
        port = h.free_port()
        cfg = ("extensions:\n  basicauth/client:\n    client_auth:\n      username: alice\n"
               "      password: alice-pw\n  bearertokenauth/wrong:\n    token: nope\n"
               "receivers:\n  otlp:\n    protocols:\n      http:\n"
               "        endpoint: 127.0.0.1:%d\n"
               "exporters:\n  otlp/good:\n    endpoint: 127.0.0.1:%d\n"
               "    tls:\n      insecure: true\n    auth:\n      authenticator: basicauth/client\n"
               "  otlp/bad:\n    endpoint: 127.0.0.1:%d\n    tls:\n      insecure: true\n"
               "    auth:\n      authenticator: bearertokenauth/wrong\n"
               "service:\n  extensions: [basicauth/client, bearertokenauth/wrong]\n"
               "  telemetry:\n    metrics:\n      level: none\n"
               "  pipelines:\n    profiles:\n      receivers: [otlp]\n"
               "      exporters: [otlp/good, otlp/bad]\n" % (port, self.aport, self.bport))
        n = len(self.sink.snapshot())
        client = h.Profcol(cfg, wait_ports=[port], name="grpc-auth-client").start()
        try:
            req = h.make_request(("creds",), seed=88)
            self.assertEqual(h.post(port, req.SerializeToString()).status, 200)
            got = self.sink.wait_requests(n + 1)
            self.assertEqual(h.summarize(got[-1].message), h.summarize(req))
            client.wait_stderr(lambda t: "otlp/bad" in t and "dropping" in t)
            time.sleep(0.3)  # nothing else may arrive: the bad exporter's call was refused
            self.assertEqual(len(self.sink.snapshot()), n + 1)
        finally:
            client.stop()
        self.assertRegex(client.stderr(), r"otlp/bad.*dropping \d+ samples.*(UNAUTHENTICATED|16)")


# ---------------------------------------------------------------------------------------------
# keepalive: profcol PINGs quiet connections and drops those that do not answer; clients that
# ping too often are told to calm down

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SETTINGS, PING, GOAWAY, ACK = 4, 6, 7, 1
ENHANCE_YOUR_CALM = 11


def h2_frame(ftype, flags, payload=b"", stream=0):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", stream) + payload


class RawH2:
    """A hand-made HTTP/2 client that acks SETTINGS and nothing else (no PING acks)."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.sendall(PREFACE + h2_frame(SETTINGS, 0))
        self.buf = b""
        self.t0 = time.monotonic()

    def frames(self, deadline):
        """(type, flags, payload, seconds since connect) until the server closes (then
        (None, ...)) or the deadline passes."""
        while time.monotonic() < deadline:
            while len(self.buf) >= 9:
                n = int.from_bytes(self.buf[:3], "big")
                if len(self.buf) < 9 + n:
                    break
                ftype, flags = self.buf[3], self.buf[4]
                payload, self.buf = self.buf[9:9 + n], self.buf[9 + n:]
                if ftype == SETTINGS and not flags & ACK:
                    self.sock.sendall(h2_frame(SETTINGS, ACK))
                yield ftype, flags, payload, time.monotonic() - self.t0
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                return
            except ConnectionResetError:
                data = b""
            if not data:
                yield None, 0, b"", time.monotonic() - self.t0
                return
            self.buf += data

    def close(self):
        self.sock.close()


class GrpcKeepalive(unittest.TestCase):
    """keepalive::server_parameters time 200ms / timeout 500ms, enforcement_policy defaults."""

    @classmethod
    def setUpClass(cls):
        cls.sink = h.Sink().start()
        cls.gport = h.free_port()
        cfg = ("receivers:\n  otlp:\n    protocols:\n      grpc:\n        endpoint: 127.0.0.1:%d\n"
               "        keepalive:\n          server_parameters:\n            time: 200ms\n"
               "            timeout: 500ms\n"
               "exporters:\n  otlphttp:\n    endpoint: %s\n    timeout: 5s\n"
               "service:\n  telemetry:\n    logs:\n      level: debug\n"
               "    metrics:\n      level: none\n"
               "  pipelines:\n    profiles:\n      receivers: [otlp]\n      exporters: [otlphttp]\n"
               % (cls.gport, cls.sink.url))
        cls.p = h.Profcol(cfg, wait_ports=[cls.gport], name="grpc-keepalive").start()

    @classmethod
    def tearDownClass(cls):
        h.stop_all(cls.p, cls.sink)

    def test_unanswered_ping_closes(self):
        c = RawH2(self.gport)
        self.addCleanup(c.close)
        ping_at = goaway = closed_at = None
        for ftype, flags, payload, t in c.frames(time.monotonic() + 10):
            if ftype == PING and not flags & ACK and ping_at is None:
                ping_at = t  # not answered
            elif ftype == GOAWAY:
                goaway = (int.from_bytes(payload[4:8], "big"), t)
            elif ftype is None:
                closed_at = t
        self.assertIsNotNone(ping_at, "no PING after 200ms of quiet")
        self.assertGreaterEqual(ping_at, 0.15)
        self.assertIsNotNone(goaway, "no GOAWAY before the close")
        self.assertEqual(goaway[0], 0)
        self.assertIsNotNone(closed_at, "connection not closed")
        self.assertGreaterEqual(closed_at - ping_at, 0.45)  # the 500ms timeout
        self.assertLess(closed_at - ping_at, 5)
        self.p.wait_stderr(lambda t: "keepalive ping not answered within 500 ms" in t)

    def test_too_many_pings(self):
        c = RawH2(self.gport)
        self.addCleanup(c.close)
        for i in range(4):  # no call open: more than one PING per 2h is a strike
            c.sock.sendall(h2_frame(PING, 0, struct.pack(">Q", i)))
        acks, goaway, closed = 0, None, False
        for ftype, flags, payload, _ in c.frames(time.monotonic() + 10):
            if ftype == PING and flags & ACK:
                acks += 1
            elif ftype == GOAWAY:
                goaway = (int.from_bytes(payload[4:8], "big"), payload[8:])
            elif ftype is None:
                closed = True
        self.assertEqual(goaway, (ENHANCE_YOUR_CALM, b"too_many_pings"))
        self.assertTrue(closed)
        self.assertGreaterEqual(acks, 3)
        self.assertIn("ENHANCE_YOUR_CALM", self.p.stderr())

    def test_grpcio_client_answers_and_stays(self):
        unanswered = self.p.stderr().count("keepalive ping not answered")
        pings = self.p.stderr().count("keepalive ping")
        states = []
        with grpc.insecure_channel("127.0.0.1:%d" % self.gport) as ch:
            ch.subscribe(states.append, try_to_connect=True)
            stub = svc.ProfilesServiceStub(ch)
            stub.Export(h.make_request(("ka-1",), seed=91), timeout=RPC_TIMEOUT)
            time.sleep(1.5)  # several keepalive periods without a call
            stub.Export(h.make_request(("ka-2",), seed=92), timeout=RPC_TIMEOUT)
            ch.unsubscribe(states.append)
        text = self.p.stderr()
        self.assertGreaterEqual(text.count("keepalive ping") - pings, 3, text[-3000:])
        self.assertEqual(text.count("keepalive ping not answered"), unanswered, text[-3000:])
        ready = states.index(grpc.ChannelConnectivity.READY)
        self.assertEqual(set(states[ready:]), {grpc.ChannelConnectivity.READY}, states)


def hpack_literal(headers):
    """Header fields as HPACK literals without indexing, no Huffman (RFC 7541 6.2.2); names and
    values under 127 bytes."""
    out = b""
    for k, v in headers:
        out += b"\x00" + bytes([len(k)]) + k.encode() + bytes([len(v)]) + v.encode()
    return out


class GrpcClosedWindow(unittest.TestCase):
    """Issue 28: a client whose flow-control window stays shut (SETTINGS_INITIAL_WINDOW_SIZE 0,
    never a WINDOW_UPDATE) cannot take its answer. As an HTTP/1.1 response nobody reads, the
    answer is given up after the idle timeout (RST_STREAM CANCEL) and the connection, with no
    call left, is then closed as an idle one (GOAWAY, close) instead of living until the 2 h
    keepalive."""

    def test_shut_window_is_reaped(self):
        sink = h.started_sink(self)
        gport = h.free_port()
        cfg = ("receivers:\n  otlp:\n    protocols:\n      grpc:\n        endpoint: 127.0.0.1:%d\n"
               "        keepalive:\n          server_parameters:\n"
               "            max_connection_idle: 1s\n"
               "exporters:\n  otlphttp:\n    endpoint: %s\n"
               "service:\n  telemetry:\n    logs:\n      level: debug\n"
               "  pipelines:\n    profiles:\n      receivers: [otlp]\n      exporters: [otlphttp]\n"
               % (gport, sink.url))
        p = h.started_profcol(self, cfg, gport, "grpc-shut-window")
        c = RawH2(gport)
        self.addCleanup(c.close)
        c.sock.sendall(h2_frame(SETTINGS, 0, struct.pack(">HI", 4, 0)))  # INITIAL_WINDOW_SIZE 0
        body = h.make_request(("shut-window",)).SerializeToString()
        hdrs = hpack_literal([(":method", "POST"), (":scheme", "http"),
                              (":path", "/opentelemetry.proto.collector.profiles.v1development."
                                        "ProfilesService/Export"),
                              (":authority", "127.0.0.1"), ("content-type", "application/grpc"),
                              ("te", "trailers")])
        c.sock.sendall(h2_frame(1, 0x4, hdrs, stream=1) +  # HEADERS, END_HEADERS
                       h2_frame(0, 0x1, b"\x00" + struct.pack(">I", len(body)) + body, stream=1))
        rst = goaway = closed = None
        headers_seen = False
        for ftype, flags, payload, t in c.frames(time.monotonic() + 15):
            if ftype == 1:
                headers_seen = True
            elif ftype == 0 and payload:
                self.fail("DATA sent through a shut window")
            elif ftype == 3 and rst is None:  # RST_STREAM
                rst = (int.from_bytes(payload[:4], "big"), t)
            elif ftype == GOAWAY:
                goaway = t
            elif ftype is None:
                closed = t
        self.assertTrue(headers_seen, "the answer's headers (not flow-controlled) were sent")
        self.assertIsNotNone(rst, "the stuck answer was never given up")
        self.assertEqual(rst[0], 8, "RST_STREAM CANCEL")
        self.assertGreaterEqual(rst[1], 0.9)
        self.assertIsNotNone(goaway, "no GOAWAY")
        self.assertIsNotNone(closed, "the connection was not closed")
        self.assertGreaterEqual(closed - rst[1], 0.9, "then closed as idle after max_connection_idle")
        self.assertIn("response not taken for 1000 ms, reset", p.stderr())
        # the request itself was taken: it reached the exporter
        sink.wait_requests(1)


# `profcol validate` of an otlp exporter: EXPORTER_CONFIG % the exporter's lines
EXPORTER_CONFIG = ("exporters:\n  otlp:\n%s"
                   "receivers:\n  otlp:\n    protocols:\n      http:\n"
                   "service:\n  pipelines:\n    profiles:\n      receivers: [otlp]\n"
                   "      exporters: [otlp]\n")


def validate(yaml, name="grpc-validate"):
    return h.run_profcol(["validate", "--config", h.write_config(yaml, name)])


class GrpcConfig(unittest.TestCase):

    def validate(self, yaml):
        return validate(yaml)

    def test_errors(self):
        base = EXPORTER_CONFIG
        r = self.validate(base % "    endpoint: https://otlp.example.com:4317\n")
        self.assertEqual(r.returncode, 0, r.stderr)  # TLS (see test_grpc_tls.py)
        r = self.validate(base % "    endpoint: 127.0.0.1:4317\n    tls:\n      ca_file: x.pem\n")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("exporters::otlp::tls::ca_file", r.stderr)
        r = self.validate(base % "    endpoint: 127.0.0.1:4317\n    headers:\n      grpc-x: 1\n")
        self.assertNotEqual(r.returncode, 0)
        r = self.validate(base % "    endpoint: 127.0.0.1:4317\n    tls:\n      insecure: true\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.validate("receivers:\n  otlp:\n    protocols:\n"
                          "exporters:\n  debug:\n"
                          "service:\n  pipelines:\n    profiles:\n      receivers: [otlp]\n"
                          "      exporters: [debug]\n")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("at least one protocol", r.stderr)
        r = self.validate("receivers:\n  otlp:\n    protocols:\n      grpc:\n"
                          "        max_recv_msg_size_mib: 0\n"
                          "exporters:\n  debug:\n"
                          "service:\n  pipelines:\n    profiles:\n      receivers: [otlp]\n"
                          "      exporters: [debug]\n")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("max_recv_msg_size_mib", r.stderr)
        recv = ("receivers:\n  otlp:\n    protocols:\n      grpc:\n%s"
                "exporters:\n  debug:\n"
                "service:\n  pipelines:\n    profiles:\n      receivers: [otlp]\n"
                "      exporters: [debug]\n")
        r = self.validate(recv % "        auth:\n          authenticator: bearertokenauth\n")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("receivers::otlp::protocols::grpc::auth::authenticator", r.stderr)
        r = self.validate(recv % "        keepalive:\n          server_parameters:\n"
                          "            time: 48h\n")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("keepalive::server_parameters::time", r.stderr)
        r = self.validate(recv % "        keepalive:\n          server_parameters:\n"
                          "            time: 1m\n            timeout: 0s\n"
                          "          enforcement_policy:\n            min_time: 10s\n"
                          "            permit_without_stream: true\n")
        self.assertEqual(r.returncode, 0, r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
