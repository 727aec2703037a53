#!/usr/bin/python3
"""End to end: bad input gets its status while a concurrent good client keeps being served.

BadInputTest: each test starts a sink, one profcol (otlp, max_request_body_size 1 MiB ->
otlphttp -> sink) and a good client thread posting a valid request every 20 ms; it then sends
its bad input and finally asserts that every good request got 200, that exactly the good data
(and nothing of the bad) reached the sink, and that profcol exits 0 on SIGTERM.

NextHopTest: the exporter's endpoint is down -> the client gets a retryable status.
CommandLineTest: `profcol validate` on bad configs (exit 1, file:line and key path), usage (2)."""

import http.client
import json
import os
import re
import socket
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402  (re-execs under /usr/bin/python3 if needed)
import signal_support as ss  # noqa: E402

MAX_BODY = 1 << 20
MAX_BODY_YAML = "1MiB"


def padded(body, total):
    """body + an unknown length-delimited field (number 15) so that the result is `total`
    bytes of valid protobuf (decoders skip unknown fields)."""
    n = total - len(body) - 1 - 1
    while len(body) + 1 + len(h.varint(n)) + n > total:
        n -= 1
    out = body + b"\x7a" + h.varint(n) + bytes(n)
    assert len(out) == total, (len(out), total)
    return out


class BadInputTest(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        self.sink = h.Sink().start()
        self.port = h.free_port()
        cfg = h.relay_config(self.port, self.sink.url, max_body=MAX_BODY_YAML)
        self.mport = h.free_port()
        cfg = cfg.replace("service:\n", "service:\n  telemetry:\n    metrics:\n"
                          "      address: 127.0.0.1:%d\n" % self.mport, 1)
        self.profcol = h.Profcol(cfg, wait_ports=[self.port, self.mport],
                                 name="profcol-bad").start()
        self.good_req = h.make_request(("good-client",), seed=7, samples=12)
        self.good = h.GoodClient(self.port, self.good_req.SerializeToString())
        self.good.start()
        # let the good client get going before the bad input starts
        h.wait_for(lambda: self.good.count() >= 3, timeout=10)

    def tearDown(self):
        self.good.finish()
        self.profcol.kill()
        self.sink.stop()

    # -- helpers ---------------------------------------------------------------------------

    def finish(self, min_ok=5, extra_good=0):
        """The good client was served throughout; only its data (and `extra_good` more copies
        of it sent by the test) reached the sink; profcol exits 0 on SIGTERM."""
        # still served after the bad input: a few more good requests must succeed
        after = self.good.count()
        h.wait_for(lambda: self.good.count() >= after + 3, timeout=10)
        ok, failures = self.good.finish()
        self.assertGreaterEqual(ok, after + 3, "the good client stalled after the bad input")
        self.assertEqual(failures, [], "the concurrent good client was not served")
        self.assertGreaterEqual(ok, min_ok, "the good client made too little progress")
        one = h.summarize(self.good_req)
        want = h.merge_summaries([one] * (ok + extra_good))

        def arrived(reqs):
            try:
                return h.summarize([r.message for r in reqs if r.message]) == want
            except AssertionError:
                return False
        reqs = self.sink.wait_until(arrived, timeout=15)
        self.assertEqual([r.error for r in reqs if r.error], [])
        got = h.summarize([r.message for r in reqs])   # raises on forwarded invalid indices
        self.assertEqual(h.totals(got), h.totals(want),
                         "the sink must get exactly the good client's data")
        self.assertEqual(got, want)
        self.profcol.stop()

    def assert_alive(self):
        self.assertTrue(self.profcol.running(), "profcol died:\n" + self.profcol.stderr()[-3000:])

    def assert_status(self, r, status, what):
        self.assertEqual(r.status, status, "%s: want %d, got %r" % (what, status, r))
        self.assert_alive()

    def assert_400(self, r, what):
        h.assert_400(self, r, what)
        self.assert_alive()

    # -- tests -----------------------------------------------------------------------------

    def test_malformed_protobuf(self):
        good = h.make_request(("bad",), seed=8).SerializeToString()
        cases = {
            "garbage": b"\xff\xff\xff\xff\xff",
            "truncated": good[:len(good) // 2],
            "length past end": b"\x0a\x7f\x0a\x03abc",
            "garbage inside a submessage": b"\x0a\x03\xff\xff\xff",
            "bad wire type": b"\x0f\x01",
        }
        for name, body in cases.items():
            with self.subTest(name):
                probe = h.pb.Request()
                with self.assertRaises(h.DecodeError, msg="test bug: %s decodes" % name):
                    probe.ParseFromString(body)
                self.assert_400(h.post(self.port, body, h.CT_PROTO), name)
                self.assert_400(h.post(self.port, body, h.CT_PROTO, gzip_body=True), name + " gzip")
        self.finish()

    def test_malformed_json(self):
        cases = {
            "truncated": b'{"resourceProfiles": [{"resource": ',
            "not json": b"profiles, please",
            "wrong type": b'{"resourceProfiles": "everything"}',
            "top level array": b"[1, 2, 3]",
            "bad hex trace id": b'{"dictionary": {"linkTable": [{}, {"traceId": "zz", "spanId": "00"}]}}',
            "string where int": b'{"resourceProfiles": [{"scopeProfiles": [{"profiles": '
                                b'[{"samples": [{"stackIndex": "one"}]}]}]}]}',
        }
        for name, body in cases.items():
            with self.subTest(name):
                self.assert_400(h.post(self.port, body, h.CT_JSON), name)
        self.finish()

    def test_wrong_content_type(self):
        body = self.good_req.SerializeToString()
        for ct in ("text/plain", "application/grpc", "application/octet-stream"):
            with self.subTest(ct):
                self.assert_status(h.post(self.port, body, ct), 415, ct)
        self.finish()

    def test_wrong_method(self):
        for method in ("GET", "PUT", "DELETE"):
            with self.subTest(method):
                body = None if method in ("GET", "DELETE") else self.good_req.SerializeToString()
                self.assert_status(h.post(self.port, body, h.CT_PROTO, method=method), 405, method)
        self.finish()

    def test_unknown_path(self):
        body = self.good_req.SerializeToString()
        for path in ("/", "/v1development/profile", "/v1/profiles", "/v1development/profiles/x"):
            with self.subTest(path):
                self.assert_status(h.post(self.port, body, h.CT_PROTO, path=path), 404, path)
        self.finish()

    def test_oversize_body(self):
        good = self.good_req.SerializeToString()
        body = padded(good, 2_000_000)   # valid protobuf, 2 MB
        head = ("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: %s\r\n"
                "Content-Length: %d\r\n\r\n" % (h.PROFILES_PATH, h.CT_PROTO, len(body))).encode()
        chunks = [body[i:i + 65536] for i in range(0, len(body), 65536)]
        self.assert_status(h.raw_request(self.port, head, chunks), 413, "2 MB body")
        # refused on its Content-Length, before any handler: still counted
        self.assertEqual(ss.self_metric(self.mport, "profcol_receiver_refused_requests",
                                        reason="too_large"), 1)
        # the same with chunked transfer encoding (no Content-Length up front)
        head = ("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: %s\r\n"
                "Transfer-Encoding: chunked\r\n\r\n" % (h.PROFILES_PATH, h.CT_PROTO)).encode()
        cchunks = [b"%x\r\n%s\r\n" % (len(c), c) for c in chunks] + [b"0\r\n\r\n"]
        self.assert_status(h.raw_request(self.port, head, cchunks), 413, "2 MB chunked body")
        self.assertEqual(ss.self_metric(self.mport, "profcol_receiver_refused_requests",
                                        reason="too_large"), 2)
        # just under the limit is fine
        ok = padded(good, MAX_BODY - 1024)
        r = h.post(self.port, ok, h.CT_PROTO)
        self.assertEqual(r.status, 200, "a body under max_request_body_size: %r" % r)
        self.finish(extra_good=1)

    def test_gzip_bomb(self):
        bomb = h.gzip_bomb(200_000_000)      # 200 MB of zeros, ~200 KB on the wire
        self.assertLess(len(bomb), MAX_BODY, "test bug: the bomb must pass the raw size check")
        r = h.post(self.port, bomb, h.CT_PROTO, headers={"Content-Encoding": "gzip"}, timeout=30)
        self.assert_status(r, 413, "gzip bomb")
        # a valid body that is small compressed but over the limit once inflated
        big = padded(self.good_req.SerializeToString(), 3 * MAX_BODY)
        r = h.post(self.port, big, h.CT_PROTO, gzip_body=True)
        self.assert_status(r, 413, "valid body, 3 MiB after gunzip")
        r = h.post(self.port, h.to_otlp_json(self.good_req) + b" " * (2 * MAX_BODY), h.CT_JSON,
                   gzip_body=True)
        self.assert_status(r, 413, "valid JSON, 2 MiB after gunzip")
        peak = h.peak_rss(self.profcol.proc.pid)
        if peak is not None:
            self.assertLess(peak, 150 << 20, "profcol's peak RSS suggests it inflated the bomb")
        self.finish()

    def test_invalid_indices(self):
        def base():
            return h.make_request(("bad",), seed=9, samples=6, alloc=False)

        def first_sample(m):
            return m.resource_profiles[0].scope_profiles[0].profiles[0].samples[0]

        def first_profile(m):
            return m.resource_profiles[0].scope_profiles[0].profiles[0]

        mutations = {
            "stack_index out of range":
                lambda m: setattr(first_sample(m), "stack_index", len(m.dictionary.stack_table)),
            "negative stack_index":
                lambda m: setattr(first_sample(m), "stack_index", -1),
            "function name string index out of range":
                lambda m: setattr(m.dictionary.function_table[1], "name_strindex",
                                  len(m.dictionary.string_table) + 5),
            "sample_type string index out of range":
                lambda m: setattr(first_profile(m).sample_type, "type_strindex",
                                  len(m.dictionary.string_table)),
            "location index out of range in a stack":
                lambda m: m.dictionary.stack_table[1].location_indices.append(
                    len(m.dictionary.location_table) + 1),
            "function index out of range in a line":
                lambda m: setattr(m.dictionary.location_table[1].lines[0], "function_index",
                                  len(m.dictionary.function_table)),
            "mapping index out of range":
                lambda m: setattr(m.dictionary.location_table[1], "mapping_index",
                                  len(m.dictionary.mapping_table)),
            "attribute index out of range":
                lambda m: first_sample(m).attribute_indices.append(len(m.dictionary.attribute_table)),
            "link index out of range":
                lambda m: setattr(first_sample(m), "link_index", len(m.dictionary.link_table)),
            "non-zero function_table[0]":
                lambda m: setattr(m.dictionary.function_table[0], "name_strindex", 1),
            "non-zero string_table[0]":
                lambda m: m.dictionary.string_table.__setitem__(0, "oops"),
            "non-zero stack_table[0]":
                lambda m: m.dictionary.stack_table[0].location_indices.append(1),
            "non-zero location_table[0]":
                lambda m: setattr(m.dictionary.location_table[0], "address", 0x1234),
            "non-zero attribute_table[0]":
                lambda m: setattr(m.dictionary.attribute_table[0], "key_strindex", 1),
            "values/timestamps length mismatch":
                lambda m: first_sample(m).timestamps_unix_nano.append(h.BASE_TIME + 1),
        }
        for name, mutate in mutations.items():
            with self.subTest(name):
                m = base()
                before = m.SerializeToString()
                mutate(m)
                self.assertNotEqual(m.SerializeToString(), before, "test bug: no mutation")
                for ctype, body in ((h.CT_PROTO, m.SerializeToString()),
                                    (h.CT_JSON, h.to_otlp_json(m))):
                    r = h.post(self.port, body, ctype)
                    self.assert_invalid_refused(r, name + " (%s)" % ctype)
        self.finish()

    def assert_invalid_refused(self, r, what):
        """400 + Status, or (spec-conformant alternative) 200 whose partial_success rejects
        the request's only profile. Either way nothing reaches the sink (checked in finish)."""
        if r.status == 200:
            if r.content_type == h.CT_JSON:
                ps = json.loads(r.body.decode()).get("partialSuccess") or {}
                rejected, msg = int(ps.get("rejectedProfiles", 0)), ps.get("errorMessage", "")
            else:
                resp = h.pb.Response()
                resp.ParseFromString(r.body)
                rejected = resp.partial_success.rejected_profiles
                msg = resp.partial_success.error_message
            self.assertEqual(rejected, 1, "%s: accepted invalid data: %r" % (what, r))
            self.assertTrue(msg, what)
            self.assert_alive()
        else:
            self.assert_400(r, what)

    def test_slow_clients(self):
        """One client drips its headers, one its body, a byte per second; the good client
        keeps being served meanwhile."""
        head = ("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: %s\r\nContent-Length: 1000"
                "\r\n\r\n" % (h.PROFILES_PATH, h.CT_PROTO)).encode()
        slow_head = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        slow_body = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        idle = [socket.create_connection(("127.0.0.1", self.port), timeout=5) for _ in range(5)]
        try:
            slow_body.sendall(head)
            start_ok = self.good.count()
            closed = set()
            for i in range(6):
                for name, s, byte in (("head", slow_head, head[i:i + 1]), ("body", slow_body, b"\0")):
                    if name in closed:
                        continue
                    try:
                        s.sendall(byte)
                    except OSError:
                        closed.add(name)   # the server may time a slow client out: fine
                time.sleep(1.0)
            during = self.good.count() - start_ok
            self.assertGreaterEqual(during, 10, "good client blocked by slow clients "
                                    "(%d requests in 6 s)" % during)
        finally:
            for s in [slow_head, slow_body] + idle:
                s.close()
        self.assert_alive()
        self.finish()

    def test_everything_at_once(self):
        """Bad requests from several threads at once, good client still served."""
        import threading
        bomb = h.gzip_bomb(50_000_000)
        bodies = [
            (b"\xff\xff\xff", h.CT_PROTO, {}, 400),
            (b"{", h.CT_JSON, {}, 400),
            (b"x", "text/plain", {}, 415),
            (bomb, h.CT_PROTO, {"Content-Encoding": "gzip"}, 413),
        ]
        errors = []

        def hammer(body, ct, hdrs, want):
            for _ in range(5):
                try:
                    r = h.post(self.port, body, ct, headers=hdrs, timeout=30)
                    if r.status != want:
                        errors.append("want %d got %r" % (want, r))
                except Exception as e:
                    errors.append("%s: %s" % (type(e).__name__, e))
        threads = [threading.Thread(target=hammer, args=b, daemon=True) for b in bodies]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        self.assertEqual(errors, [])
        self.assert_alive()
        self.finish()


class ServerLimitsTest(unittest.TestCase):
    """read_timeout, idle_timeout and max_connections of the receiver's HTTP server."""

    HEAD = ("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: %s\r\nContent-Length: 100\r\n"
            "\r\n" % (h.PROFILES_PATH, h.CT_PROTO)).encode()

    def start(self, **http_extra):
        self.sink = h.Sink().start()
        self.addCleanup(self.sink.stop)
        self.port = h.free_port()
        cfg = h.relay_config(self.port, self.sink.url, http_extra=http_extra)
        self.profcol = h.Profcol(cfg, wait_ports=[self.port], name="profcol-limits").start()
        self.addCleanup(self.profcol.kill)
        self.good = h.make_request(("limits",), seed=81).SerializeToString()

    def connect(self):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        self.addCleanup(s.close)
        return s

    @staticmethod
    def closed_within(s, seconds, drip=None):
        """Wait up to `seconds` for the server to close s (optionally sending drip bytes
        every 0.5 s meanwhile). Returns (closed, bytes received)."""
        deadline = time.monotonic() + seconds
        data = b""
        s.settimeout(0.5)
        drip = list(drip or b"")
        while time.monotonic() < deadline:
            if drip:
                try:
                    s.sendall(bytes([drip.pop(0)]))
                except OSError:
                    return True, data
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                return True, data
            if not chunk:
                return True, data
            data += chunk
        return False, data

    def assert_silent(self, socks, what, first=0):
        """Nothing comes on any of socks (numbered from first) within 0.2 s each; what: the
        failure message, with the number and what came."""
        for i, s in enumerate(socks, first):
            s.settimeout(0.2)
            try:
                got = s.recv(100)
                self.fail(what % (i, got))
            except socket.timeout:
                pass

    def assert_cut_off(self, closed, data, what):
        self.assertTrue(closed, "%s: the server must close the connection (read_timeout 2s)" % what)
        if data:
            self.assertRegex(data, rb"^HTTP/1\.[01] 408 ", "%s: only a 408 may be sent" % what)

    def test_read_timeout(self):
        self.start(read_timeout="2s", idle_timeout="60s")
        stalled = self.connect()
        stalled.sendall(self.HEAD + b"\x0a\x01")                # then nothing more
        drip_body = self.connect()
        drip_body.sendall(self.HEAD)
        drip_head = self.connect()
        t = time.monotonic()
        self.assert_cut_off(*self.closed_within(stalled, 10), "stalled body")
        self.assert_cut_off(*self.closed_within(drip_body, 10, drip=bytes(100)), "dripped body")
        self.assert_cut_off(*self.closed_within(drip_head, 10, drip=self.HEAD), "dripped headers")
        self.assertLess(time.monotonic() - t, 30)
        self.assertEqual(h.post(self.port, self.good).status, 200)
        self.profcol.stop()

    def test_idle_timeout(self):
        self.start(idle_timeout="2s")
        s = self.connect()
        s.sendall(("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: %s\r\nContent-Length: %d"
                   "\r\n\r\n" % (h.PROFILES_PATH, h.CT_PROTO, len(self.good))).encode() + self.good)
        r = http.client.HTTPResponse(s)
        r.begin()
        r.read()
        self.assertEqual(r.status, 200)
        self.assertNotEqual((r.getheader("Connection") or "").lower(), "close",
                            "HTTP/1.1 keep-alive expected")
        closed, data = self.closed_within(s, 10)
        self.assertTrue(closed, "an idle keep-alive connection must be closed (idle_timeout 2s)")
        self.assertEqual(data, b"")
        self.profcol.stop()

    def test_max_connections(self):
        """At the limit the connection incomplete longest makes room for a newcomer; a 503 only
        when every connection has a request being handled (test_fair_limits.py)."""
        self.start(max_connections=4)
        time.sleep(0.5)           # let the server see the start-up probe connection close
        held = [self.connect() for _ in range(4)]
        for s in held:            # an incomplete request (the body never comes) on each
            s.sendall(self.HEAD)
            time.sleep(0.1)       # in this order
        time.sleep(0.5)
        self.assert_silent(held, "held connection %d was answered/closed under the limit: %r")
        extra = self.connect()
        extra.sendall(("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: %s\r\n"
                       "Content-Length: %d\r\n\r\n" % (h.PROFILES_PATH, h.CT_PROTO,
                                                       len(self.good))).encode() + self.good)
        r = http.client.HTTPResponse(extra)
        r.begin()
        r.read()
        self.assertEqual(r.status, 200, "over max_connections: the newcomer takes a place")
        closed, data = self.closed_within(held[0], 10)
        self.assertTrue(closed, "the connection incomplete longest must make room")
        self.assertEqual(data, b"")
        self.assert_silent(held[1:], "held connection %d was closed, not the oldest: %r", 1)
        for s in held:
            s.close()
        ok = h.wait_for(lambda: h.post(self.port, self.good).status == 200, timeout=10,
                        interval=0.2)
        self.assertTrue(ok, "after the held connections closed, requests must be served")
        self.profcol.stop()


class NextHopTest(unittest.TestCase):
    def test_next_hop_down(self):
        """otlphttp (without a sending queue) to a closed port: the client gets a retryable
        503/429 with Retry-After, not 200 (nothing may be lost silently). With the queue, see
        test_reliability.py."""
        port, dead = h.free_port(), h.free_port()
        cfg = h.relay_config(port, "http://127.0.0.1:%d" % dead, timeout="2s",
                             exporter_extra="sending_queue:\n  enabled: false\n"
                                            "retry_on_failure:\n  enabled: false")
        p = h.Profcol(cfg, wait_ports=[port], name="profcol-nexthop").start()
        try:
            req = h.make_request(("checkout",), seed=61)
            for ctype, body in ((h.CT_PROTO, req.SerializeToString()), (h.CT_JSON, h.to_otlp_json(req))):
                with self.subTest(ctype):
                    t = time.monotonic()
                    r = h.post(port, body, ctype, timeout=30)
                    self.assertIn(r.status, (429, 503), "next hop down: want 503 (or 429), got %r" % r)
                    self.assertIn("retry-after", r.headers, "429/503 must carry Retry-After")
                    self.assertLess(time.monotonic() - t, 25)
                    h.decode_status_any(r.body, r.content_type)   # a Status body
            # the next hop comes up: data flows again
            sink = h.Sink(dead).start()
            try:
                ok = h.wait_for(lambda: h.post(port, req.SerializeToString()).status == 200,
                                timeout=15, interval=0.5)
                self.assertTrue(ok, "after the next hop came back requests must succeed")
                reqs = sink.wait_requests(1, 10)
                self.assertTrue(reqs and reqs[-1].message is not None)
                self.assertEqual(h.totals(h.summarize(reqs[-1].message)), h.totals(h.summarize(req)))
            finally:
                sink.stop()
            p.stop()
        finally:
            p.kill()


GOOD_CONFIG = """\
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:{port}
exporters:
  otlphttp:
    endpoint: http://127.0.0.1:{port2}
    timeout: 5s
  debug:
    verbosity: basic
service:
  pipelines:
    profiles:
      receivers: [otlp]
      exporters: [otlphttp, debug]
"""


def _line_of(text, needle):
    for i, line in enumerate(text.splitlines(), 1):
        if needle in line:
            return i
    raise AssertionError("test bug: %r not in config" % needle)


class CommandLineTest(unittest.TestCase):
    maxDiff = None

    def good_config(self):
        return GOOD_CONFIG.format(port=h.free_port(), port2=h.free_port())

    def assert_config_error(self, text, key_path, lines, also=()):
        """validate exits 1 naming the file, one of `lines` and `key_path` (and `also`)."""
        path = h.write_config(text, "bad")
        r = h.run_profcol(["validate", "--config", path])
        out = r.stderr + r.stdout
        self.assertEqual(r.returncode, 1, "validate on a bad config: want exit 1, got %d\n%s"
                         % (r.returncode, out))
        self.assertIn(os.path.basename(path), out, "the message must name the file")
        self.assertIn(key_path, out, "the message must name the key path")
        line_ok = any(re.search(r"(:%d\b|line %d\b)" % (n, n), out) for n in lines)
        self.assertTrue(line_ok, "the message must give the line (one of %s):\n%s" % (lines, out))
        for word in also:
            self.assertIn(word, out)
        return out

    def test_validate_good_config(self):
        path = h.write_config(self.good_config(), "good")
        r = h.run_profcol(["validate", "--config", path])
        self.assertEqual(r.returncode, 0, r.stderr + r.stdout)

    def test_validate_unknown_key_suggests(self):
        text = self.good_config().replace("    endpoint: http://", "    endpont: http://")
        n = _line_of(text, "endpont:")
        self.assert_config_error(text, "exporters::otlphttp::endpont", [n], also=["endpoint"])
        # starting (not just validating) fails the same way, with exit 1
        path = h.write_config(text, "bad-run")
        r = h.run_profcol(["--config", path])
        self.assertEqual(r.returncode, 1, r.stderr + r.stdout)
        self.assertIn("exporters::otlphttp::endpont", r.stderr + r.stdout)

    def test_validate_other_errors(self):
        g = self.good_config()
        cases = [
            ("unknown component type", g.replace("  debug:\n", "  debugg:\n").replace(
                "[otlphttp, debug]", "[otlphttp, debugg]"), "debugg", "debugg:"),
            ("undefined id in a pipeline", g.replace("[otlphttp, debug]", "[otlphttp, debug/nope]"),
             "service::pipelines::profiles", "exporters: [otlphttp"),
            ("bad duration", g.replace("timeout: 5s", "timeout: fivesecs"),
             "exporters::otlphttp::timeout", "timeout:"),
            ("bad endpoint", g.replace("endpoint: http://127.0.0.1", "endpoint: ftp://127.0.0.1"),
             "exporters::otlphttp::endpoint", "endpoint: ftp"),
            ("https endpoint with a missing CA file",
             g.replace("endpoint: http://127.0.0.1",
                       "tls:\n      ca_file: /nonexistent/ca.pem\n    endpoint: https://127.0.0.1"),
             "exporters::otlphttp::tls::ca_file", "ca_file:"),
            ("bad size", g.replace("        endpoint: 127.0.0.1:",
                                   "        max_request_body_size: lots\n        endpoint: 127.0.0.1:"),
             "receivers::otlp::protocols::http::max_request_body_size", "max_request_body_size:"),
            ("bad verbosity", g.replace("verbosity: basic", "verbosity: loud"),
             "exporters::debug::verbosity", "verbosity:"),
            ("unknown receiver key", g.replace("    protocols:", "    protocolz:"),
             "receivers::otlp::protocolz", "protocolz:"),
        ]
        for name, text, key_path, needle in cases:
            with self.subTest(name):
                self.assertNotEqual(text, g, "test bug")
                self.assert_config_error(text, key_path, [_line_of(text, needle)])

    def test_validate_traces_pipeline_with_profiles_only_processor_refused(self):
        # traces pass through; a processor that handles profiles only is a config error there
        text = self.good_config().replace("service:\n", "processors:\n  filter:\nservice:\n", 1)
        text += ("    traces:\n      receivers: [otlp]\n      processors: [filter]\n"
                 "      exporters: [debug]\n")
        n = _line_of(text, "traces:")
        out = self.assert_config_error(text, "service::pipelines::traces",
                                       [n, n + 1, n + 2, n + 3])
        self.assertIn('processor "filter" does not support traces pipelines', out)

    def test_validate_traces_pipeline_accepted(self):
        text = self.good_config() + "    traces:\n      receivers: [otlp]\n      exporters: [debug]\n"
        r = h.run_profcol(["validate", "--config", h.write_config(text, "traces")])
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_validate_pipeline_without_exporters(self):
        text = self.good_config().replace("      exporters: [otlphttp, debug]\n", "")
        n = _line_of(text, "profiles:")
        self.assert_config_error(text, "service::pipelines::profiles", [n, n + 1])

    def test_merge_then_validate_names_second_file(self):
        base = h.write_config(self.good_config(), "base")
        over = "exporters:\n  otlphttp:\n    timeoutt: 3s\n"
        over_path = h.write_config(over, "over")
        r = h.run_profcol(["validate", "--config", base, "--config", over_path])
        out = r.stderr + r.stdout
        self.assertEqual(r.returncode, 1, out)
        self.assertIn(os.path.basename(over_path), out)
        self.assertIn("exporters::otlphttp::timeoutt", out)
        self.assertTrue(re.search(r"(:3\b|line 3\b)", out), out)

    def test_usage_errors_exit_2(self):
        for args in (["--bogus"], ["--config"], ["frobnicate"], ["validate", "--nope"]):
            with self.subTest(args=args):
                r = h.run_profcol(args)
                self.assertEqual(r.returncode, 2, "profcol %s: want exit 2, got %d\n%s"
                                 % (" ".join(args), r.returncode, r.stderr + r.stdout))
                self.assertTrue((r.stderr + r.stdout).strip(), "say what was wrong")

    def test_version_components_help(self):
        r = h.run_profcol(["--version"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout + r.stderr, r"\d+\.\d+\.\d+")
        r = h.run_profcol(["--help"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("validate", r.stdout + r.stderr)
        r = h.run_profcol(["components"])
        self.assertEqual(r.returncode, 0, r.stderr)
        for word in ("otlp", "otlphttp", "debug", "max_request_body_size", "endpoint",
                     "compression", "encoding", "verbosity", "headers", "timeout"):
            self.assertIn(word, r.stdout, "profcol components should list %r" % word)


if __name__ == "__main__":
    unittest.main(verbosity=2)
