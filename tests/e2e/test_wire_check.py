#!/usr/bin/python3
"""The wire-level pass-through path (ARCHITECTURE.md §2, profcol issue 27).

When every consumer of a profiles pipeline passes bytes through (otlphttp/otlp exporters with
`passthrough`, no processor, connector or tap), the OTLP receiver checks a protobuf request on
the wire (src/pdata/wire_check.c) instead of decoding it, and counts it in
profcol_receiver_wire_checked_requests. Oracles: the sink's bytes compared with the
client's, python-protobuf's decoding and sample count of what was sent, and a second profcol
with `passthrough: false` (the decoded path) answering the same invalid requests: status, body
and self-metrics must be the same."""

import concurrent.futures
import gzip
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
import signal_support as ss  # noqa: E402
import test_wire as tw  # noqa: E402  (its config() and named_gzip())

WIRE = "profcol_receiver_wire_checked_requests"
ACCEPTED = "otelcol_receiver_accepted_profile_samples"
REFUSED = "otelcol_receiver_refused_profile_samples"
REFUSED_REQUESTS = "profcol_receiver_refused_requests"


class Instance:
    """One profcol: otlp receiver (HTTP and gRPC) -> otlphttp exporter -> its own sink."""

    def __init__(self, test, exporter_extra="", processors="", http_extra=""):
        self.sink = h.started_sink(test)
        self.port, self.gport, self.mport = h.free_port(), h.free_port(), h.free_port()
        cfg = tw.config(self.port, self.sink.url, self.mport, exporter_extra=exporter_extra,
                        processors=processors, grpc_port=self.gport)
        if http_extra:  # keys under protocols.http
            cfg = cfg.replace("        endpoint: 127.0.0.1:%d\n" % self.port,
                              "        endpoint: 127.0.0.1:%d\n%s" % (self.port, http_extra), 1)
        self.p = h.started_profcol(test, cfg, [self.port, self.gport, self.mport], "profcol-wc")

    def metric(self, name, **labels):
        return ss.self_metric(self.mport, name, **labels) or 0

    def metrics(self):
        """The counts both paths must agree on."""
        return {n: self.metric(n) for n in (ACCEPTED, REFUSED, REFUSED_REQUESTS)}


def bad_index(req, every=False):
    """req with its first profile (or every one) referring past the stack table."""
    bad = type(req)()
    bad.CopyFrom(req)
    profiles = [p for rp in bad.resource_profiles for sp in rp.scope_profiles for p in sp.profiles]
    for p in profiles if every else profiles[:1]:
        p.samples[0].stack_index = len(bad.dictionary.stack_table)
    return bad


def invalid_utf8(req):
    """req with a dictionary string whose bytes are not UTF-8 (python-protobuf refuses to make
    one: the field is patched in the serialized bytes, same length)."""
    raw = bytearray(req.SerializeToString())
    name = b"wire-utf8-marker"
    i = raw.find(name)
    assert i >= 0
    raw[i] = 0xff
    return bytes(raw)


class WireCheckTest(unittest.TestCase):
    def merged_as_sent(self, a, reqs):
        """Waits for every sample of reqs to be sent; what the sink got reads (python-protobuf)
        as what was sent, in fewer requests. The samples and the requests got."""
        n = h.count_samples(reqs)
        h.wait_for(lambda: a.metric("otelcol_exporter_sent_profile_samples") == n, 30)
        got = [x for x in a.sink.snapshot() if not x.refused]
        self.assertTrue(all(x.error is None for x in got))
        self.assertEqual(h.summarize([x.message for x in got]), h.summarize(reqs))
        self.assertLess(len(got), len(reqs), "nothing was merged")
        return n, got

    def test_valid_request_is_not_decoded_and_passes_as_received(self):
        a = Instance(self)
        req = h.make_request(("wc-a", "wc-b"), seed=31, samples=60)
        raw = req.SerializeToString()
        body = tw.named_gzip(raw)
        r = h.post(a.port, body, h.CT_PROTO, headers={"Content-Encoding": "gzip"})
        self.assertEqual(r.status, 200, r)
        got = a.sink.wait_requests(1)[0]
        self.assertEqual(got.raw, body, "not the client's bytes")
        self.assertIsNone(got.error)
        self.assertEqual(got.message.SerializeToString(), raw)  # python-protobuf's reading
        # over gRPC, uncompressed: gzip of the very same protobuf bytes
        out = h.curl_grpc_export(a.gport, raw)
        self.assertIn(b"grpc-status: 0", out)
        got = a.sink.wait_requests(2)[1]
        self.assertEqual(gzip.decompress(got.raw), raw)
        n = h.count_samples([req])
        h.wait_for(lambda: a.metric("otelcol_exporter_sent_profile_samples") == 2 * n, 15)
        self.assertEqual(a.metric(ACCEPTED), 2 * n)
        self.assertEqual(a.metric(WIRE, transport="http"), 1)
        self.assertEqual(a.metric(WIRE, transport="grpc"), 1)

    def test_merged_by_the_queue_from_checked_bytes(self):
        """Requests waiting in the sending queue are merged into one send: their models are
        decoded then, from the checked bytes (pc_batch_req), and nothing is lost."""
        a = Instance(self, exporter_extra="sending_queue:\n  num_consumers: 1\n  batch:\n"
                                          "    max_size: 1000000\nretry_on_failure:\n"
                                          "  initial_interval: 2s\n  randomization_factor: 0")
        a.sink.fail_next(1, 503)  # the first send waits 2 s for its retry; the rest queue up
        reqs = [h.make_request(("wq-%d" % i,), seed=50 + i, samples=10) for i in range(4)]
        for req in reqs:
            r = h.post(a.port, req.SerializeToString(), h.CT_PROTO)
            self.assertEqual(r.status, 200, r)
        n, got = self.merged_as_sent(a, reqs)
        self.assertEqual(a.metric(WIRE), len(reqs))
        self.assertEqual(a.metric(ACCEPTED), n)

    def test_batch_merges_checked_requests_on_the_wire(self):
        """otlp -> batch -> otlphttp: batch passes bytes through, so the receiver only checks
        requests on the wire, and a flush holding several merges them on the wire
        (src/pdata/wire_merge.c), none decoded. Oracle: python-protobuf's reading of what the
        clients sent against its reading of what the sink got (fewer requests, one dictionary
        each without repeated entries)."""
        a = Instance(self, processors="  batch:\n    timeout: 5s\n"
                                      "    send_batch_size: 1000000\n")
        reqs = [h.make_request(("wb-%d" % (i % 2),), seed=70 + i, samples=15) for i in range(4)]
        with concurrent.futures.ThreadPoolExecutor(len(reqs)) as pool:  # batch answers at flush
            rs = list(pool.map(lambda q: h.post(a.port, q.SerializeToString(), h.CT_PROTO), reqs))
        self.assertEqual([r.status for r in rs], [200] * len(reqs), rs)
        n, got = self.merged_as_sent(a, reqs)
        for x in got:
            d = x.message.dictionary
            for table in (d.string_table, d.function_table, d.location_table, d.stack_table,
                          d.attribute_table, d.mapping_table, d.link_table):
                keys = [e if isinstance(e, str) else e.SerializeToString() for e in table]
                self.assertEqual(len(keys), len(set(keys)), "a repeated dictionary entry")
        self.assertEqual(a.metric(WIRE), len(reqs))
        self.assertEqual(a.metric(ACCEPTED), n)
        self.assertGreaterEqual(a.metric("profcol_processor_batch_wire_merges"), 1)

    def test_decoded_when_the_graph_needs_the_model(self):
        """passthrough: false, or a processor: every request is decoded as before."""
        req = h.make_request(("wc-off",), seed=37, samples=20)
        for kw in ({"exporter_extra": "passthrough: false"},
                   {"processors": "  resource:\n    attributes:\n"
                                  "      - {key: env, value: e2e, action: upsert}\n"}):
            a = Instance(self, **kw)
            r = h.post(a.port, req.SerializeToString(), h.CT_PROTO)
            self.assertEqual(r.status, 200, r)
            a.sink.wait_requests(1)
            self.assertEqual(a.metric(ACCEPTED), h.count_samples([req]))
            self.assertEqual(a.metric(WIRE), 0, kw)

    def test_refusals_answer_as_the_decoded_path(self):
        """Each bad request gets the same status, body and counts from the wire path as from
        `passthrough: false` (the decoded path), and none is counted as wire-checked."""
        req = h.make_request(("wc-bad", "wc-bad2"), seed=41, samples=30)
        req.dictionary.string_table.append("wire-utf8-marker")
        big = h.make_request(("wc-big",), seed=43, samples=5000)
        # HTTP's decode limit between the two: big's wire size, less than its decoded size (every
        # message a struct, every string a copy); req decodes within 16 x its size (the default
        # ratio, docs/limits.md)
        limit = len(big.SerializeToString())
        self.assertGreater(limit, 16 * len(req.SerializeToString()))
        budget = "        max_request_decoded_size: %d\n" % limit
        wire = Instance(self, http_extra=budget)
        decoded = Instance(self, exporter_extra="passthrough: false", http_extra=budget)
        cases = [  # (what, body, expected HTTP status, over gRPC too)
            ("every profile refers past the stack table",
             bad_index(req, every=True).SerializeToString(), 400, True),
            ("one profile invalid (partial success)", bad_index(req).SerializeToString(), 200,
             True),
            ("truncated protobuf", req.SerializeToString()[:-7], 400, True),
            ("invalid UTF-8", invalid_utf8(req), 400, True),
            ("over max_request_decoded_size", big.SerializeToString(), 413, False),
        ]
        for what, body, status, grpc in cases:
            answers = []
            for inst in (wire, decoded):
                r = h.post(inst.port, body, h.CT_PROTO)
                g = h.curl_grpc_export(inst.gport, body) if grpc else b""
                g = sorted(x for x in g.splitlines() if x.startswith((b"grpc-status",
                                                                        b"grpc-message")))
                answers.append((r.status, r.body, g))
            self.assertEqual(answers[0], answers[1], what)
            self.assertEqual(answers[0][0], status, what)
        h.wait_for(lambda: wire.metrics() == decoded.metrics(), 10)
        self.assertEqual(wire.metrics(), decoded.metrics())
        self.assertGreater(wire.metrics()[REFUSED], 0)
        self.assertEqual(wire.metric(WIRE), 0)
        # the partial successes reached the sink re-encoded, the same data on both
        self.assertEqual(h.summarize(wire.sink.messages()), h.summarize(decoded.sink.messages()))


if __name__ == "__main__":
    unittest.main()
