#!/usr/bin/python3
"""OTLP/gRPC over TLS with real gRPC peers (Debian's python3-grpcio) and throwaway certificates
made by the `openssl` command (tls_support.Certs).

Receiver: protocols::grpc::tls on profcol's otlp receiver; a grpcio client with
grpc.ssl_channel_credentials(test CA) sends, what profcol forwards (otlphttp -> harness Sink)
equals what was sent; a plain-text (h2c) client gets nothing through.

Mutual TLS (protocols::grpc::tls::client_ca_file): a client without a certificate, or with one
from another CA, is refused; one with a certificate from that CA is served. SIGHUP: after the
certificate files are replaced, new connections get the new certificate (its serial number, seen
by a Python ssl client); a broken file keeps the old one.

Exporter: profcol's otlp exporter with tls::ca_file sends to a grpcio server with
grpc.ssl_server_credentials, both as https://host:port and as host:port with a tls block; a
server certificate from an untrusted CA is refused with a clear log line and nothing is sent; a
bare host:port without a tls block is TLS too (the Collector's default)."""

import os
import shutil
import signal
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402  (re-execs under /usr/bin/python3 if needed)
import tls_support as t  # noqa: E402
import test_grpc as g  # noqa: E402  (stubs, Recorder, the receiver and exporter set-ups)

import grpc  # noqa: E402

CERTS = t.Certs()
SRV_CRT, SRV_KEY = CERTS.issue("grpc-server", 4001, cn="localhost")
BAD_CRT, BAD_KEY = CERTS.issue("grpc-untrusted", 4002, ca="other-ca", cn="localhost")
SRV2_CRT, SRV2_KEY = CERTS.issue("grpc-server2", 4003, cn="localhost")
CLI_CRT, CLI_KEY = CERTS.issue("grpc-client", 4011, client=True)
BAD_CLI_CRT, BAD_CLI_KEY = CERTS.issue("grpc-client-untrusted", 4012, client=True, ca="other-ca")
RPC_TIMEOUT = 15.0


def read(path):
    with open(path, "rb") as f:
        return f.read()


class GrpcTlsReceiver(unittest.TestCase):
    """otlp receiver (grpc with TLS) -> otlphttp exporter -> Sink."""

    @classmethod
    def setUpClass(cls):
        cls.sink = h.Sink().start()
        cls.gport, cls.mport = h.free_port(), h.free_port()
        cfg = ("receivers:\n  otlp:\n    protocols:\n"
               "      grpc:\n        endpoint: 127.0.0.1:%d\n"
               "        tls:\n          cert_file: %s\n          key_file: %s\n"
               "exporters:\n  otlphttp:\n    endpoint: %s\n    timeout: 5s\n"
               "service:\n  telemetry:\n    metrics:\n      address: 127.0.0.1:%d\n"
               "  pipelines:\n    profiles:\n      receivers: [otlp]\n      exporters: [otlphttp]\n"
               % (cls.gport, SRV_CRT, SRV_KEY, cls.sink.url, cls.mport))
        cls.p = h.Profcol(cfg, wait_ports=[cls.gport], name="grpc-tls-recv").start()
        creds = grpc.ssl_channel_credentials(root_certificates=read(CERTS.ca))
        cls.channel = grpc.secure_channel("127.0.0.1:%d" % cls.gport, creds,
                                          options=[("grpc.ssl_target_name_override",
                                                    "localhost")])
        cls.stub = g.svc.ProfilesServiceStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        h.stop_all(cls.p, cls.sink)

    def export_and_check(self, req, **kw):
        g.export_and_check(self, self.stub, self.sink, req, **kw)

    def test_tls_export(self):
        self.assertIn("(TLS, ProfilesService/Export)", self.p.stderr())
        self.export_and_check(h.make_request(("tls-a", "tls-b"), seed=51))

    def test_tls_gzip_and_concurrent(self):
        self.export_and_check(h.make_request(("tls-gz",), seed=52, samples=200),
                              compression=grpc.Compression.Gzip)
        reqs = [h.make_request(("tc%d" % i,), seed=60 + i) for i in range(8)]
        g.export_concurrently(self, self.stub, self.sink, reqs)

    def test_plaintext_client_refused(self):
        n = len(self.sink.snapshot())
        with grpc.insecure_channel("127.0.0.1:%d" % self.gport) as ch:
            stub = g.svc.ProfilesServiceStub(ch)
            with self.assertRaises(grpc.RpcError) as cm:
                stub.Export(h.make_request(("plain",), seed=53), timeout=5)
            self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAVAILABLE)
        self.p.wait_stderr(lambda s: "TLS handshake with 127.0.0.1:" in s)
        self.assertEqual(len(self.sink.snapshot()), n)

    def test_untrusting_client_refused(self):
        creds = grpc.ssl_channel_credentials(root_certificates=read(CERTS.other_ca))
        with grpc.secure_channel("127.0.0.1:%d" % self.gport, creds,
                                 options=[("grpc.ssl_target_name_override", "localhost")]) as ch:
            stub = g.svc.ProfilesServiceStub(ch)
            with self.assertRaises(grpc.RpcError) as cm:
                stub.Export(h.make_request(("nope",), seed=54), timeout=5)
            self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAVAILABLE)


def grpc_receiver_config(gport, tls, sink_url, name=""):
    return ("receivers:\n  otlp:\n    protocols:\n"
            "      grpc:\n        endpoint: 127.0.0.1:%d\n        tls:\n" % gport +
            "".join("          %s: %s\n" % kv for kv in tls.items()) +
            "exporters:\n  otlphttp:\n    endpoint: %s\n    timeout: 5s\n" % sink_url +
            "service:\n  telemetry:\n    metrics:\n      level: none\n"
            "  pipelines:\n    profiles:\n      receivers: [otlp]\n      exporters: [otlphttp]\n")


class GrpcMutualTlsAndReload(unittest.TestCase):

    def setUp(self):
        self.sink = h.Sink().start()
        self.addCleanup(self.sink.stop)

    def start(self, tls, name):
        gport = h.free_port()
        p = h.Profcol(grpc_receiver_config(gport, tls, self.sink.url), wait_ports=[gport],
                      name=name)
        self.addCleanup(p.kill)
        p.start()
        return p, gport

    def export(self, gport, creds, seed):
        """Export over a new channel; the grpc.StatusCode (OK when it went through)."""
        with grpc.secure_channel("127.0.0.1:%d" % gport, creds,
                                 options=[("grpc.ssl_target_name_override", "localhost")]) as ch:
            try:
                g.svc.ProfilesServiceStub(ch).Export(h.make_request(("m",), seed=seed),
                                                     timeout=5)
                return grpc.StatusCode.OK
            except grpc.RpcError as e:
                return e.code()

    def test_client_certificate_required(self):
        p, gport = self.start({"cert_file": SRV_CRT, "key_file": SRV_KEY,
                               "client_ca_file": CERTS.ca}, "grpc-mtls")
        ca = read(CERTS.ca)
        without = grpc.ssl_channel_credentials(root_certificates=ca)
        self.assertEqual(self.export(gport, without, 101), grpc.StatusCode.UNAVAILABLE)
        self.wait_handshake_failure(p)
        other = grpc.ssl_channel_credentials(root_certificates=ca, private_key=read(BAD_CLI_KEY),
                                             certificate_chain=read(BAD_CLI_CRT))
        self.assertEqual(self.export(gport, other, 102), grpc.StatusCode.UNAVAILABLE)
        self.assertEqual(self.sink.snapshot(), [])
        good = grpc.ssl_channel_credentials(root_certificates=ca, private_key=read(CLI_KEY),
                                            certificate_chain=read(CLI_CRT))
        self.assertEqual(self.export(gport, good, 103), grpc.StatusCode.OK)
        self.assertEqual(len(self.sink.wait_requests(1)), 1)
        p.stop()

    def wait_handshake_failure(self, p):
        text = p.wait_stderr(lambda s: "TLS handshake with 127.0.0.1:" in s)
        self.assertIn("certificate", text[text.index("TLS handshake with 127.0.0.1:"):])

    def test_sighup_reloads_certificate(self):
        live_crt, live_key = CERTS.path("grpc-live.crt"), CERTS.path("grpc-live.key")
        shutil.copyfile(SRV_CRT, live_crt)
        shutil.copyfile(SRV_KEY, live_key)
        p, gport = self.start({"cert_file": live_crt, "key_file": live_key}, "grpc-reload")
        ctx = t.client_context(CERTS.ca)
        self.assertEqual(t.served_serial(gport, ctx), 4001)
        creds = grpc.ssl_channel_credentials(root_certificates=read(CERTS.ca))
        old = grpc.secure_channel("127.0.0.1:%d" % gport, creds,
                                  options=[("grpc.ssl_target_name_override", "localhost")])
        self.addCleanup(old.close)
        old_stub = g.svc.ProfilesServiceStub(old)
        old_stub.Export(h.make_request(("before",), seed=111), timeout=RPC_TIMEOUT)
        # a broken file: the reload fails, the old certificate stays
        t.reload_broken_keeps_old(self, p, live_crt)
        self.assertEqual(t.served_serial(gport, ctx), 4001)
        shutil.copyfile(SRV2_CRT, live_crt)
        shutil.copyfile(SRV2_KEY, live_key)
        p.proc.send_signal(signal.SIGHUP)
        p.wait_stderr(lambda s: "TLS certificates reloaded" in s)
        self.assertEqual(t.served_serial(gport, ctx), 4003)
        self.assertEqual(self.export(gport, creds, 112), grpc.StatusCode.OK)
        # a connection made before the reload keeps working
        old_stub.Export(h.make_request(("after",), seed=113), timeout=RPC_TIMEOUT)
        self.assertEqual(len(self.sink.wait_requests(3)), 3)
        p.stop()


class GrpcTlsExporter(unittest.TestCase):

    def start_server(self, crt, key):
        creds = grpc.ssl_server_credentials([(read(key), read(crt))])
        rec, _, port = g.start_recorder(self, creds=creds)
        return rec, port

    def start_profcol(self, exporter_yaml, name):
        return g.start_exporting_profcol(self, exporter_yaml, name)

    RETRY = "retry_on_failure:\n  initial_interval: 100ms\n  max_interval: 200ms\n"

    def deliver(self, exporter_yaml, name):
        rec, port = self.start_server(SRV_CRT, SRV_KEY)
        p, hport = self.start_profcol(exporter_yaml % port, name)
        self.assertIn("(TLS", p.stderr())
        reqs = [h.make_request(("e-a", "e-b"), seed=71), h.make_request(("e-c",), seed=72)]
        for req in reqs:
            r = h.post(hport, req.SerializeToString())
            self.assertEqual(r.status, 200, r)
        calls = rec.wait_calls(2)
        self.assertEqual(len(calls), 2, p.stderr()[-3000:])
        self.assertEqual(h.merge_summaries([h.summarize(c[0]) for c in calls]),
                         h.merge_summaries([h.summarize(r) for r in reqs]))
        p.stop()

    def test_https_endpoint_with_ca_file(self):
        self.deliver("endpoint: https://localhost:%%d\ntls:\n  ca_file: %s\n" % CERTS.ca,
                     "grpc-tls-exp")

    def test_hostport_with_tls_block(self):
        self.deliver("endpoint: 127.0.0.1:%%d\ntls:\n  ca_file: %s\n"
                     "  server_name_override: localhost\ncompression: none\n" % CERTS.ca,
                     "grpc-tls-exp-hp")

    def test_untrusted_server_refused(self):
        rec, port = self.start_server(BAD_CRT, BAD_KEY)
        p, hport = self.start_profcol(
            "endpoint: https://127.0.0.1:%d\ntls:\n  ca_file: %s\n" % (port, CERTS.ca) +
            self.RETRY, "grpc-tls-exp-bad")
        r = h.post(hport, h.make_request(("untrusted",), seed=73).SerializeToString())
        self.assertEqual(r.status, 200, r)  # queued
        want = ("TLS handshake with https://127.0.0.1:%d failed: certificate verify failed"
                % port)
        text = p.wait_stderr(lambda s: s.count(want) >= 2)
        self.assertGreaterEqual(text.count(want), 2, text[-3000:])  # retried
        self.assertEqual(rec.calls, [])
        p.kill()

    def test_bare_hostport_is_tls(self):
        """No tls block: TLS against the system trust store, which does not know the test CA."""
        rec, port = self.start_server(SRV_CRT, SRV_KEY)
        p, hport = self.start_profcol("endpoint: 127.0.0.1:%d\n" % port + self.RETRY,
                                      "grpc-tls-exp-default")
        self.assertIn("sending OTLP/gRPC to 127.0.0.1:%d (TLS" % port, p.stderr())
        r = h.post(hport, h.make_request(("default-tls",), seed=75).SerializeToString())
        self.assertEqual(r.status, 200, r)
        want = ("TLS handshake with https://127.0.0.1:%d failed: certificate verify failed"
                % port)
        text = p.wait_stderr(lambda s: want in s)
        self.assertIn(want, text[-3000:])
        self.assertEqual(rec.calls, [])
        p.kill()

    def test_insecure_is_plain_text(self):
        rec, _, port = g.start_recorder(self)
        p, hport = self.start_profcol("endpoint: 127.0.0.1:%d\ntls:\n  insecure: true\n" % port,
                                      "grpc-tls-exp-insecure")
        self.assertIn("(h2c", p.stderr())
        req = h.make_request(("insecure",), seed=74)
        self.assertEqual(h.post(hport, req.SerializeToString()).status, 200)
        self.assertEqual(len(rec.wait_calls(1)), 1)
        p.stop()


class GrpcTlsConfig(unittest.TestCase):

    def validate(self, yaml):
        return g.validate(yaml, "grpc-tls-validate")

    def test_errors(self):
        base = g.EXPORTER_CONFIG
        r = self.validate(base % "    endpoint: https://otlp.example.com:4317\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.validate(base % "    endpoint: 127.0.0.1:4317\n    tls:\n      ca_file: /nonexistent.pem\n")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("exporters::otlp::tls::ca_file", r.stderr)
        r = self.validate("receivers:\n  otlp:\n    protocols:\n      grpc:\n"
                          "        tls:\n          cert_file: %s\n"
                          "exporters:\n  debug:\n"
                          "service:\n  pipelines:\n    profiles:\n      receivers: [otlp]\n"
                          "      exporters: [debug]\n" % SRV_CRT)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("receivers::otlp::protocols::grpc::tls::key_file", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
