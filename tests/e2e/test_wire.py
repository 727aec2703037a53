#!/usr/bin/python3
"""zstd on the wire and pass-through, against independent peers.

zstd: bodies are made and checked by the `zstd` command (Debian package zstd; Debian 12's
python3 has no zstd module), gRPC calls by `curl --http2-prior-knowledge` (the h2 framing) around
a zstd message. A zstd bomb gets 413 / RESOURCE_EXHAUSTED without profcol inflating it (peak RSS),
a frame asking for a window over 8 MiB 400.

Pass-through: a request nothing in the pipeline changes reaches the sink as the very bytes the
client sent (a gzip body with a file name and mtime in its header, which no re-encoding keeps),
and is still validated and counted (python-protobuf's count of what was sent); a mutating
processor, a partially invalid request, `passthrough: false` and a JSON body are re-encoded."""

import gzip
import os
import shutil
import struct
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
import signal_support as ss  # noqa: E402

MiB = 1 << 20


def config(port, sink_url, mport, exporter_extra="", processors="", grpc_port=None):
    s = "receivers:\n  otlp:\n    protocols:\n      http:\n        endpoint: 127.0.0.1:%d\n" % port
    if grpc_port:
        s += "      grpc:\n        endpoint: 127.0.0.1:%d\n" % grpc_port
    if processors:
        s += "processors:\n" + processors
    s += "exporters:\n  otlphttp:\n    endpoint: %s\n" % sink_url
    s += "".join("    %s\n" % line for line in exporter_extra.splitlines())
    names = [line.strip().rstrip(":") for line in processors.splitlines()
             if line.startswith("  ") and not line.startswith("    ")]
    s += ("service:\n  telemetry:\n    metrics:\n      address: 127.0.0.1:%d\n"
          "  pipelines:\n    profiles:\n      receivers: [otlp]\n      processors: [%s]\n"
          "      exporters: [otlphttp]\n" % (mport, ", ".join(names)))
    return s


def named_gzip(data):
    """gzip with a file name and an mtime in the header: profcol's encoder writes neither."""
    import io
    buf = io.BytesIO()
    with gzip.GzipFile(filename="client-made.pb", mode="wb", fileobj=buf, mtime=1234567) as f:
        f.write(data)
    return buf.getvalue()


@unittest.skipUnless(shutil.which("zstd"), "needs the zstd command (Debian package zstd)")
class WireTest(unittest.TestCase):
    def start(self, **kw):
        self.sink = h.Sink().start()
        self.port, self.mport = h.free_port(), h.free_port()
        gport = kw.pop("grpc", False) and h.free_port()
        self.gport = gport
        self.p = h.Profcol(config(self.port, self.sink.url, self.mport, grpc_port=gport, **kw),
                           wait_ports=[self.port, self.mport] + ([gport] if gport else []),
                           name="profcol-wire").start()

    def tearDown(self):
        if hasattr(self, "p"):
            self.p.kill()
            self.sink.stop()

    def counters(self):
        return (ss.self_metric(self.mport, "otelcol_receiver_accepted_profile_samples"),
                ss.self_metric(self.mport, "otelcol_exporter_sent_profile_samples"))

    def wait_sent(self, n):
        import time
        deadline = time.time() + 15
        while self.counters()[1] != n and time.time() < deadline:
            time.sleep(0.1)
        self.assertEqual(self.counters()[1], n)

    # ---- zstd ----

    def test_zstd_in_and_out(self):
        """A zstd body (the zstd command's) in; zstd out, read back by the zstd command."""
        self.start(exporter_extra="compression: zstd")
        req = h.make_request(("zstd-svc",), seed=3, samples=40)
        raw = req.SerializeToString()
        body = h.zstd_compress(raw, "-9")
        r = h.post(self.port, body, h.CT_PROTO, headers={"Content-Encoding": "zstd"})
        self.assertEqual(r.status, 200, r)
        got = self.sink.wait_requests(1)[0]
        self.assertEqual(got.headers.get("content-encoding"), "zstd")
        self.assertIsNone(got.error)
        self.assertEqual(h.summarize([got.message]), h.summarize([req]))
        # nothing changed it, same encoding: the client's own zstd bytes (pass-through)
        self.assertEqual(got.raw, body)
        n = h.count_samples([req])
        self.wait_sent(n)
        self.assertEqual(self.counters()[0], n)

    def test_zstd_encoded_by_profcol(self):
        """An identity body in, zstd out: profcol's zstd, read by the zstd command."""
        self.start(exporter_extra="compression: zstd\ncompression_params:\n  level: 19")
        req = h.make_request(("zstd-out",), seed=5, samples=30)
        r = h.post(self.port, req.SerializeToString(), h.CT_PROTO)
        self.assertEqual(r.status, 200, r)
        got = self.sink.wait_requests(1)[0]
        self.assertEqual(got.headers.get("content-encoding"), "zstd")
        self.assertEqual(h.zstd_decompress(got.raw), req.SerializeToString())

    def test_zstd_bomb_and_window(self):
        self.start()
        bomb = h.zstd_compress(bytes(200_000_000), "-3")  # 200 MB of zeros, a few KB
        self.assertLess(len(bomb), MiB)
        r = h.post(self.port, bomb, h.CT_PROTO, headers={"Content-Encoding": "zstd"}, timeout=30)
        self.assertEqual(r.status, 413, r)
        peak = h.peak_rss(self.p.proc.pid)
        if peak is not None:
            self.assertLess(peak, 150 * MiB, "peak RSS suggests profcol inflated the bomb")
        # a frame whose window is 128 MiB: more than a decoder must hold (RFC 8878), refused
        wide = h.zstd_compress(bytes(1000) + os.urandom(1000), "--long=27", "--zstd=wlog=27")
        r = h.post(self.port, wide, h.CT_PROTO, headers={"Content-Encoding": "zstd"})
        self.assertEqual(r.status, 400, r)
        # corrupt and unsupported
        req = h.make_request(("ok",), seed=1, samples=5).SerializeToString()
        z = bytearray(h.zstd_compress(req))
        z[len(z) // 2] ^= 0x40
        r = h.post(self.port, bytes(z), h.CT_PROTO, headers={"Content-Encoding": "zstd"})
        self.assertEqual(r.status, 400, r)
        r = h.post(self.port, req, h.CT_PROTO, headers={"Content-Encoding": "br"})
        self.assertEqual(r.status, 415, r)
        # and a good one still goes through
        r = h.post(self.port, h.zstd_compress(req), h.CT_PROTO, headers={"Content-Encoding": "zstd"})
        self.assertEqual(r.status, 200, r)

    def grpc_call(self, message, encoding):
        """One unary call through curl's HTTP/2 (h2c): (grpc-status, grpc-message)."""
        frame = struct.pack(">BI", 1 if encoding else 0, len(message)) + message
        hdrs = ["-H", "content-type: application/grpc", "-H", "te: trailers"]
        if encoding:
            hdrs += ["-H", "grpc-encoding: " + encoding]
        out = subprocess.run(
            ["curl", "-s", "--http2-prior-knowledge", "-o", "/dev/null", "-D", "-", "-m", "30",
             "--data-binary", "@-"] + hdrs +
            ["http://127.0.0.1:%d%s" % (self.gport, ss.PROFILES.method)],
            input=frame, stdout=subprocess.PIPE, check=True).stdout.decode()
        fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
        fields = {k.strip().lower(): v.strip() for k, v in fields.items()}
        return int(fields.get("grpc-status", "-1")), fields.get("grpc-message", "")

    @unittest.skipUnless(shutil.which("curl"), "needs curl")
    def test_grpc_zstd(self):
        self.start(grpc=True)
        req = h.make_request(("grpc-zstd",), seed=7, samples=20)
        st, msg = self.grpc_call(h.zstd_compress(req.SerializeToString()), "zstd")
        self.assertEqual(st, 0, msg)
        got = self.sink.wait_requests(1)[0]
        self.assertEqual(h.summarize([got.message]), h.summarize([req]))
        bomb = h.zstd_compress(bytes(100_000_000), "-3")
        st, msg = self.grpc_call(bomb, "zstd")
        self.assertEqual(st, 8, msg)  # RESOURCE_EXHAUSTED
        peak = h.peak_rss(self.p.proc.pid)
        if peak is not None:
            self.assertLess(peak, 150 * MiB)

    # ---- pass-through ----

    def test_passthrough_bytes_as_received(self):
        self.start()
        req = h.make_request(("pt-a", "pt-b"), seed=11, samples=50)
        body = named_gzip(req.SerializeToString())
        r = h.post(self.port, body, h.CT_PROTO, headers={"Content-Encoding": "gzip"})
        self.assertEqual(r.status, 200, r)
        got = self.sink.wait_requests(1)[0]
        self.assertEqual(got.headers.get("content-encoding"), "gzip")
        self.assertEqual(got.raw, body, "not the client's bytes")
        n = h.count_samples([req])
        self.wait_sent(n)
        self.assertEqual(self.counters(), (n, n))
        # uncompressed in, gzip out: the same protobuf bytes, compressed by profcol
        raw = req.SerializeToString()
        r = h.post(self.port, raw, h.CT_PROTO)
        self.assertEqual(r.status, 200, r)
        got = self.sink.wait_requests(2)[1]
        self.assertEqual(gzip.decompress(got.raw), raw)
        # padding after the gzip member: accepted, but not forwarded as it is
        r = h.post(self.port, body + bytes(8), h.CT_PROTO, headers={"Content-Encoding": "gzip"})
        self.assertEqual(r.status, 200, r)
        got = self.sink.wait_requests(3)[2]
        self.assertNotEqual(got.raw, body + bytes(8))
        self.assertEqual(gzip.decompress(got.raw), raw)

    def test_reencoded_when_changed(self):
        """A mutating processor, a partially invalid request, JSON, passthrough: false."""
        self.start(processors="  resource:\n    attributes:\n"
                              "      - {key: env, value: e2e, action: upsert}\n")
        req = h.make_request(("changed",), seed=13, samples=20)
        body = named_gzip(req.SerializeToString())
        r = h.post(self.port, body, h.CT_PROTO, headers={"Content-Encoding": "gzip"})
        self.assertEqual(r.status, 200, r)
        got = self.sink.wait_requests(1)[0]
        self.assertNotEqual(got.raw, body)
        attrs = {a.key for a in got.message.resource_profiles[0].resource.attributes}
        self.assertIn("env", attrs)

    def test_partial_and_json_and_off(self):
        self.start()
        req = h.make_request(("partial",), seed=17, samples=20)
        kept = len(req.resource_profiles[0].scope_profiles[0].profiles)
        bad = req.resource_profiles[0].scope_profiles[0].profiles.add()
        bad.CopyFrom(req.resource_profiles[0].scope_profiles[0].profiles[0])
        bad.samples[0].stack_index = len(req.dictionary.stack_table)  # out of range
        body = named_gzip(req.SerializeToString())
        r = h.post(self.port, body, h.CT_PROTO, headers={"Content-Encoding": "gzip"})
        self.assertEqual(r.status, 200, r)
        resp = h.pb.Response()
        resp.ParseFromString(r.body)
        self.assertEqual(resp.partial_success.rejected_profiles, 1)
        got = self.sink.wait_requests(1)[0]
        self.assertNotEqual(got.raw, body)
        self.assertEqual(len(got.message.resource_profiles[0].scope_profiles[0].profiles), kept)
        # JSON in: re-encoded to protobuf as configured
        good = h.make_request(("json",), seed=19, samples=10)
        r = h.post(self.port, h.to_otlp_json(good), h.CT_JSON)
        self.assertEqual(r.status, 200, r)
        got = self.sink.wait_requests(2)[1]
        self.assertEqual(got.content_type, h.CT_PROTO)
        self.assertEqual(h.summarize([got.message]), h.summarize([good]))

    def test_passthrough_off(self):
        self.start(exporter_extra="passthrough: false")
        req = h.make_request(("off",), seed=23, samples=20)
        body = named_gzip(req.SerializeToString())
        r = h.post(self.port, body, h.CT_PROTO, headers={"Content-Encoding": "gzip"})
        self.assertEqual(r.status, 200, r)
        got = self.sink.wait_requests(1)[0]
        self.assertNotEqual(got.raw, body)
        self.assertEqual(h.summarize([got.message]), h.summarize([req]))


if __name__ == "__main__":
    unittest.main()
