#!/usr/bin/env python3
"""Every size limit at its exact value and one past it, end to end with the real binary (an
off-by-one in a limit passes every test that stays far from it):

  * OTLP/HTTP max_request_body_size: a body of exactly the limit is accepted (Content-Length and
    chunked), one byte more is 413; a gzip body inflating to exactly the limit is accepted, one
    byte more is 413;
  * OTLP/gRPC max_recv_msg_size_mib: a message of exactly the limit is accepted (plain and gzip),
    one byte more is RESOURCE_EXHAUSTED;
  * sending_queue.queue_size: exactly queue_size requests wait in the queue (plus the one being
    sent), with the requests sizer and with the samples sizer (an exact fit), the next is 503.

Bodies are padded to an exact size with an unknown protobuf field, which decoders skip."""
import gzip
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
from signal_support import PROFILES, grpc_raw  # noqa: E402

import grpc  # noqa: E402  (Debian's python3-grpcio)

h.ensure_debian_python()

PAD_FIELD = 15000  # not a field of ExportProfilesServiceRequest


def _varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def padded(req, size):
    """req serialized, plus one unknown length-delimited field, exactly `size` bytes long."""
    body = req.SerializeToString()
    tag = _varint(PAD_FIELD << 3 | 2)
    for n in range(size - len(body) - len(tag), -1, -1):
        if len(body) + len(tag) + len(_varint(n)) + n == size:
            out = body + tag + _varint(n) + b"x" * n
            check = h.pb.Request()
            check.ParseFromString(out)
            assert check.resource_profiles == req.resource_profiles
            return out
    raise AssertionError("cannot pad %d bytes to %d" % (len(body), size))


class HttpBodyLimitTest(unittest.TestCase):
    LIMIT = 8192

    @classmethod
    def setUpClass(cls):
        cls.sink = h.Sink().start()
        cls.port = h.free_port()
        cls.pc = h.Profcol(h.relay_config(cls.port, cls.sink.url, max_body=cls.LIMIT),
                           wait_ports=[cls.port], name="bounds-http")
        cls.pc.start()

    @classmethod
    def tearDownClass(cls):
        h.stop_all(cls.pc, cls.sink)

    def accepted(self, req, send):
        n = len(self.sink.snapshot())
        r = send()
        self.assertEqual(r.status, 200, r)
        got = self.sink.wait_requests(n + 1, 15)
        self.assertEqual(len(got), n + 1)
        self.assertEqual(h.summarize(got[-1].message), h.summarize(req))

    def chunked(self, body):
        head = ("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\n"
                "Transfer-Encoding: chunked\r\n\r\n" % (h.PROFILES_PATH, h.CT_PROTO)).encode()
        half = len(body) // 2
        chunks = [b"%x\r\n%s\r\n" % (len(c), c) for c in (body[:half], body[half:])]
        return h.raw_request(self.port, head, chunks + [b"0\r\n\r\n"])

    def test_content_length(self):
        req = h.make_request(("bounds",), seed=31, samples=4)
        self.accepted(req, lambda: h.post(self.port, padded(req, self.LIMIT)))
        r = h.post(self.port, padded(req, self.LIMIT + 1))
        self.assertEqual(r.status, 413, r)

    def test_chunked(self):
        req = h.make_request(("bounds",), seed=32, samples=4)
        self.accepted(req, lambda: self.chunked(padded(req, self.LIMIT)))
        r = self.chunked(padded(req, self.LIMIT + 1))
        self.assertEqual(r.status, 413, r)

    def test_gzip_inflated(self):
        req = h.make_request(("bounds",), seed=33, samples=4)
        self.accepted(req, lambda: h.post(self.port, padded(req, self.LIMIT), gzip_body=True))
        r = h.post(self.port, padded(req, self.LIMIT + 1), gzip_body=True)
        self.assertEqual(r.status, 413, r)


class GrpcMessageLimitTest(unittest.TestCase):
    LIMIT = 1 << 20  # max_recv_msg_size_mib: 1

    def test_exact_limit(self):
        sink = h.Sink().start()
        self.addCleanup(sink.stop)
        gport = h.free_port()
        cfg = ("receivers:\n  otlp:\n    protocols:\n      grpc:\n"
               "        endpoint: 127.0.0.1:%d\n        max_recv_msg_size_mib: 1\n"
               "exporters:\n  otlphttp:\n    endpoint: %s\n"
               "service:\n  pipelines:\n    profiles:\n      receivers: [otlp]\n"
               "      exporters: [otlphttp]\n" % (gport, sink.url))
        pc = h.Profcol(cfg, wait_ports=[gport], name="bounds-grpc")
        self.addCleanup(pc.kill)
        pc.start()
        channel = grpc.insecure_channel("127.0.0.1:%d" % gport)
        self.addCleanup(channel.close)
        req = h.make_request(("bounds",), seed=34, samples=4)
        for i, compression in enumerate((None, grpc.Compression.Gzip)):
            kw = {"compression": compression} if compression else {}
            grpc_raw(channel, PROFILES, padded(req, self.LIMIT), **kw)
            got = sink.wait_requests(i + 1, 15)
            self.assertEqual(len(got), i + 1)
            self.assertEqual(h.summarize(got[-1].message), h.summarize(req))
            with self.assertRaises(grpc.RpcError) as cm:
                grpc_raw(channel, PROFILES, padded(req, self.LIMIT + 1), **kw)
            self.assertEqual(cm.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
        pc.stop()


class QueueSizeTest(unittest.TestCase):
    """A backend that never answers 200 keeps the first request in flight (retrying forever);
    the queue then holds exactly queue_size more."""

    def fill(self, queue, reqs, name):
        port, dead = h.free_port(), h.free_port()
        cfg = h.relay_config(port, "http://127.0.0.1:%d" % dead, timeout="1s",
                             exporter_extra="sending_queue:\n  num_consumers: 1\n" + queue +
                             "retry_on_failure:\n  initial_interval: 100ms\n"
                             "  max_elapsed_time: 0\n")
        cfg += "  shutdown_timeout: 1s\n"
        pc = h.Profcol(cfg, wait_ports=[port], name=name)
        self.addCleanup(pc.kill)
        pc.start()
        statuses = [h.post(port, q.SerializeToString()).status for q in reqs]
        pc.stop()
        return statuses

    def test_requests_sizer(self):
        reqs = [h.make_request(("q",), seed=40 + i, samples=3) for i in range(6)]
        self.assertEqual(self.fill("  queue_size: 3\n", reqs, "bounds-queue"),
                         [200, 200, 200, 200, 503, 503])

    def test_samples_sizer_exact_fit(self):
        reqs = [h.make_request(("q",), seed=50 + i, samples=6) for i in range(6)]
        per = h.count_samples(reqs[:1])
        self.assertTrue(all(h.count_samples([q]) == per for q in reqs))
        self.assertEqual(self.fill("  sizer: samples\n  queue_size: %d\n" % (3 * per), reqs,
                                   "bounds-queue-samples"),
                         [200, 200, 200, 200, 503, 503])


if __name__ == "__main__":
    unittest.main(verbosity=2)
