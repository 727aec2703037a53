#!/usr/bin/env python3
"""The persistent sending queue when its disk refuses a write, end to end with the real binary.

profcol runs with RLIMIT_FSIZE (what `prlimit --fsize=N` sets) and SIGXFSZ ignored, so a write
past N bytes fails with EFBIG instead of killing the process: a full disk without a special
filesystem. The queue writes one file per request (`<storage>/<exporter>/<seq>.pcq`, header +
metadata + the encoded request), so the limit bounds each record: N is chosen between the size
of a small request's record and a large one's. With the backend down:
  * small requests are acknowledged (200 / OK), each durable in its own record;
  * a large one (its record over N) is refused retryably: OTLP/HTTP 503 with Retry-After and a
    google.rpc.Status message, OTLP/gRPC UNAVAILABLE; no temporary file is left behind;
  * the queue keeps accepting small requests after the failures;
  * the failure is logged with the file, the reason (strerror(EFBIG)) and the samples refused,
    and `otelcol_exporter_enqueue_failed_profile_samples` counts them (compared with the
    samples the test's own protobuf messages hold);
then the backend comes up and what it receives, decoded by the harness's protobuf summary,
equals exactly what was acknowledged: nothing acknowledged is lost, nothing refused is sent."""
import errno
import os
import resource
import shutil
import signal
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
from signal_support import PROFILES, grpc, grpc_export, self_metric  # noqa: E402

# Each small request's record is ~2.5 KB, each large one's ~1 MB (checked below from the
# serialized sizes, which the record's payload re-encodes); profcol's stderr log (the same
# limit applies to it) stays far below.
FSIZE_LIMIT = 256 * 1024
SMALL_SAMPLES, LARGE_SAMPLES = 8, 20000


def disk_limited():
    """In the child before exec: writes past FSIZE_LIMIT fail with EFBIG (SIGXFSZ ignored, and an
    ignored signal stays ignored across exec)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (FSIZE_LIMIT, FSIZE_LIMIT))


class DiskFullTest(unittest.TestCase):
    def test_refused_retryably_and_nothing_acknowledged_lost(self):
        port, gport, mport, backend = (h.free_port() for _ in range(4))
        storage = tempfile.mkdtemp(prefix="profcol-diskfull-")
        cfg = ("receivers:\n  otlp:\n    protocols:\n"
               "      http:\n        endpoint: 127.0.0.1:%d\n"
               "      grpc:\n        endpoint: 127.0.0.1:%d\n"
               "exporters:\n  otlphttp:\n    endpoint: http://127.0.0.1:%d\n    timeout: 1s\n"
               "    sending_queue:\n      storage: %s\n"
               "    retry_on_failure:\n      initial_interval: 200ms\n      max_interval: 1s\n"
               "      max_elapsed_time: 0\n"
               "service:\n  telemetry:\n    metrics:\n      address: 127.0.0.1:%d\n"
               "  pipelines:\n    profiles:\n      receivers: [otlp]\n      exporters: [otlphttp]\n"
               % (port, gport, backend, storage, mport))
        qdir = os.path.join(storage, "otlphttp")
        p = h.Profcol(cfg, wait_ports=[port, gport, mport], name="diskfull",
                      preexec_fn=disk_limited)
        sink = None
        acked, refused, seed = [], [], 0

        def request(samples):
            nonlocal seed
            seed += 1
            req = h.make_request(("svc-%d" % seed,), seed=seed, samples=samples)
            size = len(req.SerializeToString())
            if samples == SMALL_SAMPLES:
                self.assertLess(size, FSIZE_LIMIT // 8)
            else:
                self.assertGreater(size, FSIZE_LIMIT * 2)
            return req

        def post_small(n):
            for _ in range(n):
                req = request(SMALL_SAMPLES)
                r = h.post(port, req.SerializeToString(), timeout=30)
                self.assertEqual(r.status, 200, r)
                acked.append(req)

        def records():
            return sorted(os.listdir(qdir))

        try:
            p.start()
            post_small(5)
            self.assertEqual(len([f for f in records() if f.endswith(".pcq")]), 5,
                             "each acknowledged request is a record on disk: %r" % records())

            # over OTLP/HTTP: 503 + Retry-After (gzip keeps the body small; the record is not)
            big = request(LARGE_SAMPLES)
            r = h.post(port, big.SerializeToString(), gzip_body=True, timeout=60)
            self.assertEqual(r.status, 503, r)
            self.assertIn("retry-after", r.headers, r.headers)
            self.assertGreater(int(r.headers["retry-after"]), 0)
            code, msg = h.decode_status(r.body)[:2]
            self.assertIn("persistent queue", msg)
            refused.append(big)

            post_small(2)

            # over OTLP/gRPC: UNAVAILABLE (retryable for every gRPC client)
            big = request(LARGE_SAMPLES)
            with grpc.insecure_channel("127.0.0.1:%d" % gport) as ch:
                with self.assertRaises(grpc.RpcError) as cm:
                    grpc_export(ch, PROFILES, big)
                self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAVAILABLE,
                                 cm.exception.details())
                refused.append(big)
                small = request(SMALL_SAMPLES)
                grpc_export(ch, PROFILES, small)  # and the queue still takes what fits
                acked.append(small)
            post_small(2)

            self.assertTrue(p.running(), "SIGXFSZ must not kill profcol:\n" + p.stderr())
            left = records()
            self.assertEqual([f for f in left if not f.endswith(".pcq")], [],
                             "a refused record leaves no temporary file behind")
            self.assertEqual(len(left), len(acked), left)

            log = p.wait_stderr(lambda t: t.count("persistent queue: cannot write") >= 2)
            lines = [ln for ln in log.splitlines() if "persistent queue: cannot write" in ln]
            self.assertEqual(len(lines), 2, log[-3000:])
            for line, req in zip(lines, refused):
                self.assertIn(qdir, line)
                self.assertIn(os.strerror(errno.EFBIG), line)
                self.assertIn("refusing %d samples (retryable)" % h.count_samples([req]), line)
            self.assertEqual(
                self_metric(mport, "otelcol_exporter_enqueue_failed_profile_samples",
                            exporter="otlphttp"), h.count_samples(refused))

            # the backend comes up: every acknowledged sample arrives, nothing refused does
            sink = h.Sink(backend).start()
            want = h.summarize(acked)

            def delivered(reqs):
                self.assertEqual([r.error for r in reqs if r.error], [])
                return h.summarize([r.message for r in reqs])

            sink.wait_until(lambda reqs: delivered(reqs) == want, timeout=30)
            self.assertEqual(delivered(sink.snapshot()), want,
                             "what arrived differs from what was acknowledged")
            self.assertTrue(h.wait_for(lambda: not records(), timeout=15),
                            "sent records are removed: %r" % records())
            self.assertEqual(h.count_samples([r.message for r in sink.snapshot()]),
                             h.count_samples(acked))
            p.stop()
        finally:
            p.kill()
            if sink:
                sink.stop()
            shutil.rmtree(storage, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
