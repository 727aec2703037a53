#!/usr/bin/env python3
"""Every outcome of an exporter's send, end to end (real binary, recording sink), counted where
the Collector counts it:

  * retry_on_failure.max_elapsed_time against a backend that always answers 503: the batches are
    retried, then given up, and otelcol_exporter_send_failed_profile_samples equals the samples
    the client had been told were accepted (counted here with python-protobuf), in /metrics and
    in the exporter's stop line;
  * a permanent status (400) drops the batch at once, without a retry, and counts it;
  * 429, 502, 503 and 504 are retried until delivered, and nothing is counted as failed.
"""
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
from signal_support import self_metric  # noqa: E402

h.ensure_debian_python()

FAILED = "otelcol_exporter_send_failed_profile_samples"
SENT = "otelcol_exporter_sent_profile_samples"


def stop_line(stderr, exporter="otlphttp"):
    """(sent, send failed) profile samples from the exporter's stop line."""
    m = re.search(r"%s: stopped \(sent (\d+) samples, send failed (\d+)" % re.escape(exporter),
                  stderr)
    if not m:
        raise AssertionError("no stop line for %s in:\n%s" % (exporter, stderr[-3000:]))
    return int(m.group(1)), int(m.group(2))


class ExporterOutcomesTest(unittest.TestCase):
    def start(self, sink, retry, name):
        port, mport = h.free_port(), h.free_port()
        cfg = h.relay_config(port, sink.url, timeout="2s", exporter_extra=retry)
        cfg += "  telemetry:\n    metrics:\n      address: 127.0.0.1:%d\n" % mport
        pc = h.Profcol(cfg, wait_ports=[port, mport], name=name)
        self.addCleanup(pc.kill)
        pc.start()
        return port, mport, pc

    def post_all(self, port, n, seed):
        reqs = [h.make_request(("svc%d" % (i % 2),), seed=seed + i, samples=6 + i)
                for i in range(n)]
        for req in reqs:
            r = h.post(port, req.SerializeToString())
            self.assertEqual(r.status, 200, "the queue acknowledges: %r" % r)
        return reqs

    def wait_metric(self, mport, name, want, timeout=30):
        h.wait_for(lambda: self_metric(mport, name) == want, timeout=timeout, interval=0.1)
        return self_metric(mport, name)

    def test_max_elapsed_time_gives_up_and_counts(self):
        sink = h.Sink().start()
        self.addCleanup(sink.stop)
        sink.fail_next(10 ** 4, 503, retry_after=None)  # always 503, no Retry-After: backoff
        port, mport, pc = self.start(
            sink, "retry_on_failure:\n  initial_interval: 50ms\n  max_interval: 200ms\n"
                  "  max_elapsed_time: 1s\n", "outcomes-give-up")
        reqs = self.post_all(port, 4, 500)
        acked = h.count_samples(reqs)
        self.assertEqual(self.wait_metric(mport, FAILED, acked), acked,
                         "send_failed must count every acknowledged sample given up")
        self.assertEqual(self_metric(mport, SENT), 0)
        self.assertEqual(self_metric(mport, "otelcol_exporter_queue_size"), 0)
        got = sink.snapshot()
        self.assertFalse([r.error for r in got if r.error])
        # each batch was tried more than once before it was given up
        per_batch = {}
        for r in got:
            key = repr(sorted(h.totals(h.summarize(r.message)).items()))
            per_batch[key] = per_batch.get(key, 0) + 1
        self.assertEqual(len(per_batch), len(reqs), "every batch reached the backend")
        self.assertTrue(all(n >= 2 for n in per_batch.values()), per_batch)
        log = pc.stderr()
        self.assertIn("retries exhausted", log)
        pc.stop()
        self.assertEqual(stop_line(pc.stderr()), (0, acked))

    def test_permanent_status_drops_at_once(self):
        sink = h.Sink().start()
        self.addCleanup(sink.stop)
        sink.fail_next(3, 400, retry_after=None)
        port, mport, pc = self.start(
            sink, "retry_on_failure:\n  initial_interval: 50ms\n  max_elapsed_time: 0\n",
            "outcomes-permanent")
        reqs = self.post_all(port, 3, 600)
        acked = h.count_samples(reqs)
        self.assertEqual(self.wait_metric(mport, FAILED, acked), acked)
        self.assertEqual(len(sink.snapshot()), 3, "a permanent error is not retried")
        # the next batch goes through (the backend answers 200 again)
        more = self.post_all(port, 1, 700)
        want = h.count_samples(more)
        self.assertEqual(self.wait_metric(mport, SENT, want), want)
        pc.stop()
        self.assertEqual(stop_line(pc.stderr()), (want, acked))

    def test_retryable_statuses_are_retried(self):
        sink = h.Sink().start()
        self.addCleanup(sink.stop)
        port, mport, pc = self.start(
            sink, "retry_on_failure:\n  initial_interval: 50ms\n  max_interval: 100ms\n"
                  "  max_elapsed_time: 0\n", "outcomes-retryable")
        sent = []
        for i, status in enumerate((429, 502, 503, 504)):
            n = len(sink.snapshot())
            sink.fail_next(1, status, retry_after="0" if status == 429 else None)
            sent += self.post_all(port, 1, 800 + i)
            got = sink.wait_requests(n + 2, 15)[n:]
            self.assertEqual(len(got), 2, "HTTP %d: one refused attempt, then the retry" % status)
            self.assertEqual(h.summarize(got[1].message), h.summarize(sent[-1]), status)
        want = h.count_samples(sent)
        self.assertEqual(self.wait_metric(mport, SENT, want), want)
        self.assertEqual(self_metric(mport, FAILED), 0)
        pc.stop()
        self.assertEqual(stop_line(pc.stderr()), (want, 0))


if __name__ == "__main__":
    unittest.main(verbosity=2)
