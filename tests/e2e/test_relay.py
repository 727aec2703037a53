#!/usr/bin/python3
"""End to end: client -> profcol A (otlp -> otlphttp) -> profcol B (otlp -> otlphttp) -> sink.

What arrives at the sink must equal what the client sent (harness.summarize: sample totals per
service and type, stacks of function names, sample attributes, links, resource attributes,
scopes, periods and times), for protobuf, JSON and gzip bodies and for every exporter
encoding/compression on the wire. Also runs the issue's example config (env substitution in a
header, debug exporter)."""

import http.client
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402  (re-execs under /usr/bin/python3 if needed)

# Hand-written OTLP JSON: lowerCamelCase keys, hex (upper case: hex is case-insensitive) trace
# and span ids, 64-bit integers as strings and, once, as a number; profiles-only key_strindex /
# string_value_strindex; an unknown field that must be ignored.
HANDWRITTEN_JSON = b"""
{
  "resourceProfiles": [{
    "resource": {"attributes": [
      {"key": "service.name", "value": {"stringValue": "json-svc"}},
      {"key": "process.pid", "value": {"intValue": "4242"}},
      {"keyStrindex": 7, "value": {"stringValueStrindex": 8}}
    ]},
    "scopeProfiles": [{
      "scope": {"name": "handwritten", "version": "1.0"},
      "profiles": [{
        "sampleType": {"typeStrindex": 1, "unitStrindex": 2},
        "periodType": {"typeStrindex": 1, "unitStrindex": 2},
        "period": "10000000",
        "timeUnixNano": "1760000000000000000",
        "durationNano": "5000000000",
        "someFutureField": {"ignored": true},
        "samples": [
          {"stackIndex": 1, "attributeIndices": [1], "linkIndex": 1,
           "values": ["20000000", "10000000"],
           "timestampsUnixNano": ["1760000000100000000", "1760000000200000000"]},
          {"stackIndex": 2, "attributeIndices": [1], "values": [30000000]}
        ]
      }, {
        "sampleType": {"typeStrindex": 10, "unitStrindex": 11},
        "timeUnixNano": "1760000000000000000",
        "durationNano": "5000000000",
        "samples": [
          {"stackIndex": 2,
           "timestampsUnixNano": ["1760000001000000000", "1760000002000000000", "1760000003000000000"]}
        ]
      }]
    }]
  }],
  "dictionary": {
    "mappingTable": [{}],
    "locationTable": [{},
      {"address": "4198400", "lines": [{"functionIndex": 1, "line": "12"}]},
      {"lines": [{"functionIndex": 2, "line": "40"}]},
      {"lines": [{"functionIndex": 3}]}],
    "functionTable": [{}, {"nameStrindex": 3}, {"nameStrindex": 4}, {"nameStrindex": 5}],
    "linkTable": [{"traceId": "00000000000000000000000000000000", "spanId": "0000000000000000"},
                  {"traceId": "5B8EFFF798038103D269B633813FC60C", "spanId": "EEE19B7EC3C1B174"}],
    "stringTable": ["", "cpu", "nanoseconds", "leaf_fn", "middle_fn", "root_fn", "thread.name",
                    "telemetry.sdk.language", "python", "worker-1", "off_cpu_events", "count"],
    "attributeTable": [{}, {"keyStrindex": 6, "value": {"stringValue": "worker-1"}}],
    "stackTable": [{}, {"locationIndices": [1, 2, 3]}, {"locationIndices": [2, 3]}]
  }
}
"""

# Worked out by hand from the JSON above (not by decoding it).
_T0, _DUR = 1760000000000000000, 5000000000
_WORKER = (("thread.name", ("s", "worker-1"), ""),)
HANDWRITTEN_SUMMARY = {
    "resources": [(("process.pid", ("i", 4242)), ("service.name", ("s", "json-svc")),
                   ("telemetry.sdk.language", ("s", "python")))],
    "scopes": [("json-svc", "handwritten", "1.0")],
    "profiles": {
        ("json-svc", "cpu", "nanoseconds"): {
            "total": 60000000,
            "meta": [("cpu", "nanoseconds", 10000000, _T0, _DUR, "")],
            "attrs": [()],
            "samples": {
                (("leaf_fn", "middle_fn", "root_fn"), _WORKER,
                 ("5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174")): [30000000, 2],
                (("middle_fn", "root_fn"), _WORKER, None): [30000000, 0],
            },
        },
        ("json-svc", "off_cpu_events", "count"): {
            "total": 3,     # timestamps only: each counts as one
            "meta": [("", "", 0, _T0, _DUR, "")],
            "attrs": [()],
            "samples": {(("middle_fn", "root_fn"), (), None): [3, 3]},
        },
    },
}

EXAMPLE_CONFIG = """\
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:4318
exporters:
  otlphttp/gateway:
    endpoint: http://127.0.0.1:14318
    headers:
      x-api-token: ${env:API_TOKEN:-none}
  debug:
    verbosity: detailed
service:
  pipelines:
    profiles:
      receivers: [otlp]
      exporters: [otlphttp/gateway, debug]
"""


class RelayTest(h.Started, unittest.TestCase):
    maxDiff = None

    # -- helpers (h.Started: start() a profcol, sink() a Sink; tearDown ends them) ----------

    def chain(self, a_opts=None, b_opts=None):
        """client -> A -> B -> sink; returns (A's port, sink, A, B)."""
        sink = self.sink()
        b_port, a_port = h.free_port(), h.free_port()
        b = self.start(h.relay_config(b_port, sink.url, **(b_opts or {})), b_port, name="profcol-B")
        a = self.start(h.relay_config(a_port, "http://127.0.0.1:%d" % b_port, **(a_opts or {})),
                         a_port, name="profcol-A")
        return a_port, sink, a, b

    def stop_all(self):
        """Stop every profcol (front first) and assert each exits 0 after SIGTERM."""
        for p in reversed(self.procs):
            p.stop()

    def assert_ok(self, r, ctype):
        self.assertEqual(r.status, 200, "want 200, got %r" % r)
        self.assertEqual(r.content_type, ctype, "response content type must match the request's")
        if ctype == h.CT_PROTO:
            resp = h.pb.Response()
            resp.ParseFromString(r.body)
            self.assertEqual(resp.partial_success.rejected_profiles, 0, r)
        else:
            d = json.loads(r.body.decode("utf-8"))
            self.assertIsInstance(d, dict, r)
            ps = d.get("partialSuccess") or {}
            self.assertEqual(int(ps.get("rejectedProfiles", 0)), 0, r)

    def assert_arrives(self, sink, expected, timeout=10.0):
        """Wait (bounded) until the sink's summary equals `expected`, then assert equality."""
        def same(reqs):
            try:
                return h.summarize([r.message for r in reqs if r.message]) == expected
            except AssertionError:
                return False
        reqs = sink.wait_until(same, timeout)
        bad = [r.error for r in reqs if r.error]
        self.assertEqual(bad, [], "sink got undecodable requests")
        self.assertEqual(h.summarize([r.message for r in reqs]), expected,
                         "what arrived differs from what was sent")
        return reqs

    # -- tests -----------------------------------------------------------------------------

    def test_protobuf(self):
        """Three protobuf requests on one keep-alive connection arrive intact."""
        a_port, sink, a, b = self.chain()
        reqs = [h.make_request(("checkout",), seed=1),
                h.make_request(("cart", "payment"), seed=2),
                h.make_request(("checkout",), seed=3, links=False)]
        conn = http.client.HTTPConnection("127.0.0.1", a_port, timeout=15)
        try:
            for req in reqs:
                self.assert_ok(h.post(a_port, req.SerializeToString(), conn=conn), h.CT_PROTO)
        finally:
            conn.close()
        got = self.assert_arrives(sink, h.summarize(reqs))
        for r in got:   # B's exporter defaults: protobuf, gzip
            self.assertEqual(r.content_type, h.CT_PROTO)
            self.assertEqual(r.headers.get("content-encoding"), "gzip")
            self.assertEqual(r.path, h.PROFILES_PATH)
        self.stop_all()

    def test_json_handwritten(self):
        """Hand-written OTLP JSON is decoded as the OTLP spec says and arrives intact."""
        a_port, sink, a, b = self.chain()
        r = h.post(a_port, HANDWRITTEN_JSON, h.CT_JSON)
        self.assert_ok(r, h.CT_JSON)
        self.assert_arrives(sink, HANDWRITTEN_SUMMARY)
        self.stop_all()

    def test_json_generated(self):
        """Larger requests as OTLP JSON, 64-bit integers as strings and as numbers."""
        a_port, sink, a, b = self.chain()
        r1 = h.make_request(("checkout", "cart"), seed=11)
        r2 = h.make_request(("search",), seed=12)
        self.assert_ok(h.post(a_port, h.to_otlp_json(r1), h.CT_JSON), h.CT_JSON)
        self.assert_ok(h.post(a_port, h.to_otlp_json(r2, ints_as_numbers=True), h.CT_JSON), h.CT_JSON)
        self.assert_arrives(sink, h.summarize([r1, r2]))
        self.stop_all()

    def test_gzip(self):
        """gzip-compressed protobuf and JSON bodies."""
        a_port, sink, a, b = self.chain()
        r1 = h.make_request(("checkout",), seed=21, samples=200)
        r2 = h.make_request(("cart",), seed=22)
        self.assert_ok(h.post(a_port, r1.SerializeToString(), h.CT_PROTO, gzip_body=True), h.CT_PROTO)
        self.assert_ok(h.post(a_port, h.to_otlp_json(r2), h.CT_JSON, gzip_body=True), h.CT_JSON)
        self.assert_arrives(sink, h.summarize([r1, r2]))
        self.stop_all()

    def test_json_between_relays(self):
        """A exports JSON without compression to B; B exports protobuf+gzip to the sink."""
        a_port, sink, a, b = self.chain(a_opts={"encoding": "json", "compression": "none"})
        r1 = h.make_request(("checkout", "cart"), seed=31)
        r2 = h.make_request(("search",), seed=32)
        self.assert_ok(h.post(a_port, r1.SerializeToString(), h.CT_PROTO), h.CT_PROTO)
        self.assert_ok(h.post(a_port, h.to_otlp_json(r2), h.CT_JSON, gzip_body=True), h.CT_JSON)
        self.assert_arrives(sink, h.summarize([r1, r2]))
        self.stop_all()

    def test_exporter_wire_formats(self):
        """Each encoding x compression of otlphttp, as seen on the wire by the sink."""
        for encoding, compression in (("proto", "gzip"), ("proto", "none"),
                                      ("json", "gzip"), ("json", "none")):
            with self.subTest(encoding=encoding, compression=compression):
                sink = self.sink()
                port = h.free_port()
                p = self.start(h.relay_config(port, sink.url, encoding=encoding,
                                                compression=compression), port)
                req = h.make_request(("checkout",), seed=41)
                self.assert_ok(h.post(port, req.SerializeToString()), h.CT_PROTO)
                got = self.assert_arrives(sink, h.summarize(req))
                for r in got:
                    self.assertEqual(r.content_type,
                                     h.CT_JSON if encoding == "json" else h.CT_PROTO)
                    enc = r.headers.get("content-encoding", "identity")
                    self.assertEqual(enc, "gzip" if compression == "gzip" else "identity")
                    if encoding == "json":
                        doc = json.loads(r.body.decode("utf-8"))
                        self.assertIn("resourceProfiles", doc, "lowerCamelCase keys")
                        self.assertIn("dictionary", doc)
                        ids = {(ln.get("traceId", ""), ln.get("spanId", ""))
                               for ln in doc["dictionary"].get("linkTable", [])}
                        want = {(ln.trace_id.hex(), ln.span_id.hex())
                                for ln in req.dictionary.link_table[1:]}
                        self.assertTrue(want <= {(t.lower(), s.lower()) for t, s in ids},
                                        "trace/span ids must be hex in OTLP JSON: %r" % ids)
                p.stop()

    def run_example(self, env, unset, want_token):
        sink = self.sink()
        port = h.free_port()
        cfg = EXAMPLE_CONFIG.replace("127.0.0.1:4318", "127.0.0.1:%d" % port) \
                            .replace("127.0.0.1:14318", "127.0.0.1:%d" % sink.port)
        p = self.start(cfg, port, env=env, unset=unset, name="profcol-example")
        req = h.make_request(("checkout",), seed=51)
        self.assert_ok(h.post(port, req.SerializeToString()), h.CT_PROTO)
        got = self.assert_arrives(sink, h.summarize(req))
        for r in got:
            self.assertEqual(r.headers.get("x-api-token"), want_token)
        want = h.top_functions(req, 3) + ["checkout", "cpu", "alloc_space"]
        err = p.wait_stderr(lambda t: all(w in t for w in want), timeout=10)
        for w in want:
            self.assertIn(w, err, "debug exporter (detailed) should show the service, the "
                          "sample types and the top functions by self value")
        p.stop()

    def test_merged_configs_and_substitution(self):
        """Two --config files merge in order; ${env:X}, ${X} and ${env:X:-default} expand."""
        sink = self.sink()
        port, dead = h.free_port(), h.free_port()
        base = h.relay_config(port, "http://127.0.0.1:%d" % dead,
                              headers={"x-base": "from-base", "x-over": "base-loses"})
        over = ("exporters:\n  otlphttp:\n    endpoint: ${env:E2E_SINK_URL}\n"
                "    compression: ${E2E_COMPRESSION}\n"
                "    headers:\n"
                "      x-oneuptime-token: ${ONEUPTIME_TOKEN}\n"
                "      x-over: ${env:E2E_UNSET_VAR:-over-wins}\n")
        env = {"E2E_SINK_URL": sink.url, "E2E_COMPRESSION": "none", "ONEUPTIME_TOKEN": "tok-123"}
        self.start([base, over], port, env=env, unset=("E2E_UNSET_VAR",))
        req = h.make_request(("checkout",), seed=71)
        self.assert_ok(h.post(port, req.SerializeToString()), h.CT_PROTO)
        got = self.assert_arrives(sink, h.summarize(req))
        for r in got:
            self.assertEqual(r.headers.get("x-oneuptime-token"), "tok-123")
            self.assertEqual(r.headers.get("x-over"), "over-wins")
            self.assertEqual(r.headers.get("x-base"), "from-base", "maps merge key by key")
            self.assertEqual(r.headers.get("content-encoding", "identity"), "identity")
        self.stop_all()

    def test_example_config_with_token(self):
        self.run_example({"API_TOKEN": "s3cr3t-e2e-token"}, (), "s3cr3t-e2e-token")

    def test_example_config_default_token(self):
        self.run_example({}, ("API_TOKEN",), "none")


if __name__ == "__main__":
    unittest.main(verbosity=2)
