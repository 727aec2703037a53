#!/usr/bin/python3
"""Fair limits, end to end, on the real binary over loopback.

* Connection limit: silent connections that fill every slot of the OTLP/HTTP server (at a small
  max_connections and at the default 1024), then a flood of more: a real client's request is
  served (200, the data reaches the next hop), the oldest silent connections are the ones
  closed, the log holds a few lines rather than one per connection, and
  profcol_http_server_connections_evicted_total counts every one. Only when every connection has
  a request waiting on the pipeline is a newcomer refused (503, counted in
  profcol_http_server_connections_refused_total, again without a line each). The same for the
  OTLP/gRPC server with a grpcio client (profcol_grpc_server_*).
* read_header_timeout: a client sending a header byte per second is closed after it (with at
  most a 408), while a slow body is not (it has read_timeout).
* Out of file descriptors (RLIMIT_NOFILE lowered on the running process with prlimit(2)):
  accept errors are logged rate-limited and counted (profcol_http_server_accept_errors_total),
  the listener survives, a client is served meanwhile (an idle connection makes room) and once
  descriptors are free again.

Debian's /usr/bin/python3 with python3-protobuf and python3-grpcio."""

import os
import resource
import select
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402  (re-execs under /usr/bin/python3 if needed)
from signal_support import PROFILES, grpc_export, http_get, metric_value  # noqa: E402

import grpc  # noqa: E402  (Debian's python3-grpcio)

RECEIVER = "otlp"


def config(hport, mport, exporter_url, http_extra=None, grpc_port=None, grpc_extra=None,
           exporter_extra=None):
    """otlp receiver (HTTP, optionally gRPC) -> otlphttp exporter, self-metrics on mport."""
    s = "receivers:\n  otlp:\n    protocols:\n"
    s += "      http:\n        endpoint: 127.0.0.1:%d\n" % hport
    for k, v in (http_extra or {}).items():
        s += "        %s: %s\n" % (k, v)
    if grpc_port:
        s += "      grpc:\n        endpoint: 127.0.0.1:%d\n" % grpc_port
        for k, v in (grpc_extra or {}).items():
            s += "        %s: %s\n" % (k, v)
    s += "exporters:\n  otlphttp:\n    endpoint: %s\n    timeout: 20s\n" % exporter_url
    s += "".join("    %s\n" % line for line in (exporter_extra or "").splitlines())
    s += ("service:\n  telemetry:\n    metrics:\n      address: 127.0.0.1:%d\n"
          "  pipelines:\n    profiles:\n      receivers: [otlp]\n      exporters: [otlphttp]\n"
          % mport)
    return s


def silent(port, n):
    """n connections that never send a byte."""
    out = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        out.append(s)
    return out


def closed_by_server(s, timeout):
    """Whether the server closed s (EOF or reset) within timeout; bytes it sent are ignored."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            if not s.recv(4096):
                return True
        except socket.timeout:
            return False
        except OSError:
            return True
    return False


def closed_among(socks, timeout):
    """How many of socks the server closed within timeout (all watched at once)."""
    poller = select.poll()
    by_fd = {s.fileno(): s for s in socks}
    for fd in by_fd:
        poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    closed, deadline = set(), time.monotonic() + timeout
    while len(closed) < len(by_fd):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        for fd, _ in poller.poll(int(left * 1000) + 1):
            if fd not in closed and closed_by_server(by_fd[fd], 0.01):
                closed.add(fd)
                poller.unregister(fd)
    return len(closed)


def close_all(socks):
    for s in socks:
        s.close()


def lines_with(text, needle):
    return [line for line in text.splitlines() if needle in line]


class Base(unittest.TestCase):
    def start(self, **kw):
        self.sink = h.Sink().start()
        self.addCleanup(self.sink.stop)
        self.hport, self.mport = h.free_port(), h.free_port()
        self.gport = h.free_port() if kw.get("grpc_extra") is not None else None
        cfg = config(self.hport, self.mport, kw.pop("exporter_url", self.sink.url),
                     grpc_port=self.gport, **kw)
        ports = [self.hport, self.mport] + ([self.gport] if self.gport else [])
        self.p = h.Profcol(cfg, wait_ports=ports, name="fair-limits").start()
        self.addCleanup(self.p.kill)
        self.good = h.make_request(("fair",), seed=18).SerializeToString()
        # the start-up probes (wait_ports) have closed: they take no slot and make no room
        self.wait_metric("profcol_http_server_open_connections", lambda v: v == 0)
        if self.gport:
            self.wait_metric("profcol_grpc_server_open_connections", lambda v: v == 0)

    def metric(self, name, **labels):
        text = http_get(self.mport, "/metrics")[1]
        v = metric_value(text, name, receiver=RECEIVER, **labels)
        self.assertIsNotNone(v, "%s{receiver=%r} missing from /metrics" % (name, RECEIVER))
        return v

    def wait_metric(self, name, pred, timeout=10):
        ok = h.wait_for(lambda: pred(self.metric(name)), timeout=timeout, interval=0.1)
        self.assertTrue(ok, "%s never satisfied the condition (now %r)"
                        % (name, self.metric(name)))


class ConnectionLimitTest(Base):
    def flood_then_serve(self, max_connections, extra):
        http_extra = {"max_connections": max_connections} if max_connections else None
        self.start(http_extra=http_extra)
        limit = max_connections or 1024
        first = silent(self.hport, limit)
        self.addCleanup(close_all, first)
        self.wait_metric("profcol_http_server_open_connections", lambda v: v == limit)
        flood = silent(self.hport, extra)
        self.addCleanup(close_all, flood)
        t = time.monotonic()
        r = h.post(self.hport, self.good, timeout=20)
        took = time.monotonic() - t
        self.assertEqual(r.status, 200, "a real client behind %d silent connections: %r"
                         % (limit + extra, r))
        self.assertLess(took, 10, "served, but only after %.1fs" % took)
        got = self.sink.wait_requests(1, 15)
        self.assertEqual(len(got), 1, "the request did not reach the next hop")
        self.assertEqual(h.summarize(got[0].message), h.summarize(h.pb.Request.FromString(self.good)))
        # every newcomer took the place of the oldest silent connection
        self.wait_metric("profcol_http_server_connections_evicted_total",
                         lambda v: v >= extra + 1)
        self.assertEqual(self.metric("profcol_http_server_connections_refused_total"), 0)
        self.assertLessEqual(self.metric("profcol_http_server_open_connections"), limit)
        # (well within read_header_timeout, 10 s, which closes silent connections by itself)
        in_order = first + flood  # the client's connection came last and took one place more
        self.assertEqual(closed_among(in_order[:extra], 5), extra,
                         "the oldest silent connections must be the ones closed")
        newest = in_order[extra + 1:]
        self.assertEqual(closed_among(newest, 0.2), 0, "the newer connections must be left alone")
        evicted = self.metric("profcol_http_server_connections_evicted_total")
        log = self.p.stderr()
        made_room = lines_with(log, "to make room")
        self.assertGreaterEqual(len(made_room), 1, "an eviction must be logged")
        self.assertLessEqual(len(made_room), 3, "one line per evicted connection (%d for %d):\n%s"
                             % (len(made_room), evicted, "\n".join(made_room[:10])))
        self.assertLess(len(log.splitlines()), 40, "the log grew with the flood:\n" + log[-3000:])
        close_all(first + flood)
        self.assertEqual(h.post(self.hport, self.good).status, 200)
        self.p.stop()
        # the last summary at shutdown carries the count of the suppressed lines
        self.assertRegex(self.p.stderr(), r"connections closed to make room: \d+ more in the last ")

    def test_small_limit(self):
        self.flood_then_serve(64, 300)

    def test_default_limit(self):
        self.flood_then_serve(None, 200)

    def test_refused_only_when_every_connection_is_busy(self):
        """A next hop that accepts and never answers keeps every request waiting on the
        pipeline (no sending queue): then, and only then, newcomers get 503."""
        hole = socket.socket()
        hole.bind(("127.0.0.1", 0))
        hole.listen(64)
        self.addCleanup(hole.close)
        held = []

        def swallow():
            while True:
                try:
                    c, _ = hole.accept()
                except OSError:
                    return
                held.append(c)
        threading.Thread(target=swallow, daemon=True).start()
        self.start(http_extra={"max_connections": 4},
                   exporter_url="http://127.0.0.1:%d" % hole.getsockname()[1],
                   exporter_extra="sending_queue:\n  enabled: false\n"
                                  "retry_on_failure:\n  enabled: false")
        results = []

        def waiting_client():
            try:
                results.append(h.post(self.hport, self.good, timeout=40).status)
            except Exception as e:  # noqa: BLE001 (recorded, checked below)
                results.append(repr(e))
        clients = [threading.Thread(target=waiting_client, daemon=True) for _ in range(4)]
        for c in clients:
            c.start()
        self.wait_metric("profcol_receiver_requests_in_flight", lambda v: v == 4)
        refused = []
        for _ in range(30):
            r = h.post(self.hport, self.good, timeout=10)
            refused.append(r.status)
        self.assertEqual(refused, [503] * 30)
        self.assertEqual(self.metric("profcol_http_server_connections_refused_total"), 30)
        self.assertEqual(self.metric("profcol_http_server_connections_evicted_total"), 0)
        lines = lines_with(self.p.stderr(), "refusing")
        self.assertGreaterEqual(len(lines), 1)
        self.assertLessEqual(len(lines), 3, "one line per refused connection:\n" + "\n".join(lines))
        for c in held:  # the next hop gives up: the waiting requests are answered
            c.close()
        hole.close()
        for c in clients:
            c.join(40)
        self.assertEqual(len(results), 4, results)
        self.assertTrue(all(isinstance(s, int) for s in results), results)
        self.p.stop()

    def test_grpc_silent_flood(self):
        self.start(grpc_extra={"max_connections": 8})
        first = silent(self.gport, 8)
        self.addCleanup(close_all, first)
        self.wait_metric("profcol_grpc_server_open_connections", lambda v: v == 8)
        flood = silent(self.gport, 40)
        self.addCleanup(close_all, flood)
        with grpc.insecure_channel("127.0.0.1:%d" % self.gport,
                                   options=[("grpc.enable_http_proxy", 0)]) as ch:
            req = h.make_request(("fair-grpc",), seed=19)
            resp = grpc_export(ch, PROFILES, req)
            self.assertFalse(resp.HasField("partial_success"))
        got = self.sink.wait_requests(1, 15)
        self.assertEqual(len(got), 1)
        self.assertEqual(h.summarize(got[0].message), h.summarize(req))
        self.assertGreaterEqual(self.metric("profcol_grpc_server_connections_evicted_total"), 41)
        self.assertEqual(self.metric("profcol_grpc_server_connections_refused_total"), 0)
        self.assertEqual(closed_among(first, 5), len(first))
        made_room = lines_with(self.p.stderr(), "to make room")
        self.assertLessEqual(len(made_room), 3, "\n".join(made_room[:10]))
        close_all(first + flood)
        self.p.stop()


class HeaderTimeoutTest(Base):
    def test_slowloris_closed_after_read_header_timeout(self):
        self.start(http_extra={"read_header_timeout": "2s", "read_timeout": "30s"})
        loris = socket.create_connection(("127.0.0.1", self.hport), timeout=10)
        self.addCleanup(loris.close)
        head = ("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: %s\r\n"
                % (h.PROFILES_PATH, "a" * 40)).encode()
        body_head = ("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: %s\r\n"
                     "Content-Length: %d\r\nConnection: close\r\n\r\n"
                     % (h.PROFILES_PATH, h.CT_PROTO, len(self.good))).encode()
        slow_body = {}

        def send_body_slowly():  # the head at once, the body over about 4 s
            b = self.good
            parts = [b[k * len(b) // 5:(k + 1) * len(b) // 5] for k in range(5)]
            slow_body["r"] = h.raw_request(self.hport, body_head,
                                           body_chunks=self._paced(parts, 0.8), timeout=30)
        t_body = threading.Thread(target=send_body_slowly, daemon=True)
        t_body.start()
        t = time.monotonic()
        closed, data = False, b""
        for i, byte in enumerate(head):
            if time.monotonic() - t > 12:
                break
            try:
                loris.sendall(bytes([byte]))
            except OSError:
                closed = True
                break
            loris.settimeout(1.0)
            try:
                chunk = loris.recv(4096)
                if not chunk:
                    closed = True
                    break
                data += chunk
            except socket.timeout:
                pass
            except OSError:
                closed = True
                break
        took = time.monotonic() - t
        if not closed:
            closed = closed_by_server(loris, 3)
            took = time.monotonic() - t
        self.assertTrue(closed, "a header byte per second must be cut off by read_header_timeout")
        self.assertGreaterEqual(took, 1.5, "closed before read_header_timeout")
        self.assertLess(took, 12, "closed only after %.1fs (read_header_timeout 2s)" % took)
        if data:
            self.assertRegex(data, rb"^HTTP/1\.[01] 408 ", "only a 408 may be sent")
        t_body.join(30)
        self.assertIn("r", slow_body, "the slow body got no answer")
        self.assertEqual(slow_body["r"].status, 200,
                         "a body slower than read_header_timeout is within read_timeout")
        self.assertEqual(h.post(self.hport, self.good).status, 200)
        self.p.stop()

    @staticmethod
    def _paced(parts, delay):
        for p in parts:
            time.sleep(delay)
            yield p


class OutOfDescriptorsTest(Base):
    def test_emfile_logged_counted_and_survived(self):
        self.start()
        pid = self.p.proc.pid
        in_use = len(os.listdir("/proc/%d/fd" % pid))
        _, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (in_use + 16, hard))
        flood = silent(self.hport, 150)
        self.addCleanup(close_all, flood)
        # an idle connection makes room: a client is served even now
        r = h.post(self.hport, self.good, timeout=20)
        self.assertEqual(r.status, 200, r)
        log = self.p.wait_stderr(lambda text: "too many open files" in text, timeout=10)
        emfile = lines_with(log, "too many open files")
        self.assertGreaterEqual(len(emfile), 1, "EMFILE at accept must be logged:\n" + log[-3000:])
        self.assertIn("RLIMIT_NOFILE %d" % (in_use + 16), emfile[0])
        self.assertLessEqual(len(emfile), 3, "one line per failed accept:\n" + "\n".join(emfile))
        self.assertEqual(closed_among(flood[:100], 5), 100, "the oldest idle connections made room")
        close_all(flood)
        # descriptors are free again: the metrics endpoint and the receiver serve
        self.assertTrue(h.wait_for(lambda: h.post(self.hport, self.good).status == 200,
                                   timeout=10, interval=0.2))
        errors = self.metric("profcol_http_server_accept_errors_total")
        evicted = self.metric("profcol_http_server_connections_evicted_total")
        self.assertGreaterEqual(errors, 100, "every failed accept is counted")
        self.assertGreaterEqual(evicted, 100)
        self.assertEqual(self.metric("profcol_http_server_connections_refused_total"), 0)
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (hard, hard))
        self.p.stop()


if __name__ == "__main__":
    unittest.main()
