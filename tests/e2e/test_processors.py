#!/usr/bin/env python3
"""Processors end to end (issue: profile processors): the real @pyroscope/nodejs client's
wrapWithLabels({trace_id, span_id}) spans arrive at an OTLP sink as links, through the pipeline
[resource, redaction, tracelink, batch], with the resource attribute upserted, a blocked symbol
redacted, per-type totals kept, and the trace-context labels turned into links."""
import os
import secrets
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
import pyro_support as ps  # noqa: E402

h.ensure_debian_python()

CONFIG = """\
receivers:
  pyroscope:
    endpoint: 127.0.0.1:{port}
processors:
  resource:
    attributes:
      - key: deployment.environment
        value: staging
        action: upsert
  redaction:
    blocked_symbols: ["password|secret|credential|token|allocateObjects"]
  tracelink: {{}}
  batch:
    timeout: 1s
exporters:
  otlphttp:
    endpoint: {sink}
service:
  pipelines:
    profiles:
      receivers: [pyroscope]
      processors: [resource, redaction, tracelink, batch]
      exporters: [otlphttp]
"""


def has_func(names, fn):
    return any(fn in n for n in names)


class ProcessorsNodeTest(unittest.TestCase):
    def setUp(self):
        ps.ensure_node_modules()
        self.cleanups = []

    def tearDown(self):
        for fn in reversed(self.cleanups):
            fn()

    def test_node_spans_become_links(self):
        trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
        sink = h.Sink().start()
        self.cleanups.append(sink.stop)
        port = h.free_port()
        pc = h.Profcol(CONFIG.format(port=port, sink=sink.url), wait_ports=[port],
                       name="processors-node")
        self.cleanups.append(pc.kill)
        pc.start()
        rec = ps.Recorder(port).start()
        self.cleanups.append(rec.stop)
        out = ps.run_node_app(rec.url, "nodeapp", {"env": "e2e"},
                              {"trace_id": trace_id, "span_id": span_id}, run_ms=2500,
                              flush_ms=1000)
        self.assertGreater(out["labelled"], 0, out)
        records = rec.snapshot()
        self.assertTrue(records and all(r.status == 200 for r in records),
                        [(r.status, r.answer[:200]) for r in records])
        sent = ps.merge_views([ps.pprof_view(r.body) for r in records])

        def arrived(reqs):
            msgs = [r.message for r in reqs if r.message is not None]
            got = {t: e["total"] for t, e in ps.by_type(ps.otlp_views(msgs)).items()}
            return all(got.get(t, 0) >= v for t, v in sent["totals"].items())

        sink.wait_until(arrived, 15)
        pc.stop()
        views = ps.otlp_views(sink.messages())
        self.assertTrue(views, "nothing reached the OTLP sink")
        got = ps.by_type(views)
        # totals per sample type are preserved by every processor
        self.assertEqual({t: e["total"] for t, e in got.items()}, dict(sent["totals"]))
        for v in views:
            self.assertEqual(v["resource"].get("deployment.environment"), "staging")
            self.assertEqual(v["resource"].get("service.name"), "nodeapp")
        # redaction: the blocked function is gone, replaced where it was a symbol
        all_funcs = set().union(*(e["functions"] for e in got.values()))
        self.assertTrue(has_func(sent["functions"], "allocateObjects"), "client sent it")
        self.assertFalse(has_func(all_funcs, "allocateObjects"), "blocked symbol not redacted")
        self.assertIn("[REDACTED]", all_funcs)
        self.assertTrue(has_func(all_funcs, "busyWorkTraced"), "unblocked symbols stay")
        # tracelink: the labels became links with the client's ids, and the labels are removed
        wall = got[("wall", "nanoseconds")]["samples"]
        linked = [(names, attrs) for (names, attrs), val in wall.items()
                  if ("link.trace_id", ("s", trace_id)) in attrs and
                  ("link.span_id", ("s", span_id)) in attrs]
        self.assertTrue(linked, "no wall sample carries the link")
        self.assertTrue(any(has_func(names, "busyWorkTraced") for names, _ in linked))
        for (names, attrs) in wall:
            keys = {k for k, _ in attrs}
            self.assertNotIn("trace_id", keys, "remove_attributes (default true) keeps labels")
            self.assertNotIn("span_id", keys)
        # batch: fewer requests reached the sink than the client sent profiles
        self.assertLessEqual(len(sink.snapshot()), len(records))


if __name__ == "__main__":
    unittest.main(verbosity=2)
