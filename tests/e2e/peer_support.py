"""The real peers of the peer tests (tests/peers/README.md), built by `tools/peers.sh build` into
~/.cache/profcol-peers/NAME-VERSION (PROFCOL_PEERS_CACHE moves it).

  * peer_dir(name)  -- the peer's folder; AssertionError naming the command when it is missing
                       or stale (a peer test fails, it never skips);
  * Collector       -- the Collector distribution (tests/peers/otelcol) on a YAML config, with
                       --feature-gates=service.profilesSupport; started once its ports listen,
                       stopped with SIGTERM (exit 0 asserted);
  * otlpcheck()     -- the upstream-generated Go decoder and the profiles proto's rules
                       (tests/peers/otelcol/otlpcheck): messages decoded by it, MUST/SHOULD lines;
  * collector_file_messages() -- the Collector file exporter's JSON lines, read by otlpcheck;
  * Tee             -- a TCP tee in front of profcol: the bytes pass unchanged both ways (chunked
                       bodies, Expect: 100-continue and all), and requests() parses what each
                       client sent (and the status profcol answered) afterwards;
  * pprof_raw()     -- pyro_support.go_pprof_raw with the peers' prebuilt Go pprof.

Debian's /usr/bin/python3, stdlib and python3-protobuf only.
"""

import functools
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402  (re-execs under /usr/bin/python3 if needed)

from google.protobuf import json_format  # noqa: E402

PEERS_SH = os.path.join(h.SRC, "tools", "peers.sh")


@functools.lru_cache(maxsize=None)
def peer_dir(name):
    """The built peer's folder. Fails loudly (AssertionError) when it is not built or stale."""
    r = subprocess.run([PEERS_SH, "list"], capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise AssertionError("tools/peers.sh list failed: %s" % r.stderr)
    for line in r.stdout.splitlines():
        n, v, state, d = line.split(" ", 3)
        if n == name:
            if state != "built":
                raise AssertionError("peer %s-%s is %s (%s): run `tools/peers.sh build %s` "
                                     "(tools/dev.sh test does)" % (n, v, state, d, n))
            return d
    raise AssertionError("no peer named %s in tests/peers/versions.txt" % name)


class Collector(h.Profcol):
    """The Collector distribution of tests/peers/otelcol on one YAML config: harness.Profcol's
    start, stop (exit 0 after SIGTERM) and logs around another command."""

    start_timeout = 60
    stop_timeout = 20

    def __init__(self, config, wait_ports=(), name="otelcol"):
        super().__init__(config, wait_ports=wait_ports, name=name)
        self.bin = os.path.join(peer_dir("otelcol"), "otelcol")

    def command(self):
        return [self.bin, "--config", self.config_paths[0],
                "--feature-gates=service.profilesSupport"]


def started_collector(test, config, ports, name="otelcol"):
    c = Collector(config, ports if isinstance(ports, (list, tuple)) else [ports], name)
    test.addCleanup(c.kill)
    return c.start()


class Checked:
    """What otlpcheck said about some messages: .messages (harness pb.Request, decoded by the
    upstream Go types and handed over as proto3 JSON), .musts and .shoulds (its lines)."""

    def __init__(self, messages, musts, shoulds, output):
        self.messages, self.musts, self.shoulds, self.output = messages, musts, shoulds, output


def otlpcheck(paths, fmt="proto"):
    """Run otlpcheck on files (fmt: proto, json, jsonl). Decoding errors raise."""
    tool = os.path.join(peer_dir("otelcol"), "otlpcheck")
    r = subprocess.run([tool, "-in", fmt] + list(paths), capture_output=True, text=True,
                       timeout=120, stdin=subprocess.DEVNULL)
    if r.returncode not in (0, 1):
        raise AssertionError("otlpcheck failed (%d): %s" % (r.returncode, r.stderr[-4000:]))
    msgs = []
    for line in r.stdout.splitlines():
        m = h.pb.Request()
        json_format.Parse(line, m)
        msgs.append(m)
    musts = [ln for ln in r.stderr.splitlines() if ln.startswith("MUST ")]
    shoulds = [ln for ln in r.stderr.splitlines() if ln.startswith("SHOULD ")]
    return Checked(msgs, musts, shoulds, r.stderr)


def otlpcheck_bodies(bodies, fmt="proto"):
    """otlpcheck on request bodies (bytes, uncompressed), each written to a temp file."""
    paths = []
    for b in bodies:
        paths.append(h._tmpfile("otlp-body", "." + fmt))
        with open(paths[-1], "wb") as f:
            f.write(b)
    return otlpcheck(paths, fmt)


def pprof_raw(path, tmp):
    """pyro_support.go_pprof_raw with the peers' prebuilt Go pprof (tools/peers.sh)."""
    import pyro_support as ps
    return ps.go_pprof_raw(path, tmp, pprof=os.path.join(peer_dir("otelcol"), "pprof"))


NO_SELF_METRICS = "  telemetry:\n    metrics:\n      level: none\n"


def collector_file_messages(path, want_profiles=None, timeout=30.0):
    """The file exporter's JSON lines at path, decoded by otlpcheck; with want_profiles, wait
    (bounded) until that many profiles are there."""
    deadline = time.monotonic() + timeout
    while True:
        checked = None
        if os.path.exists(path) and os.path.getsize(path) > 0:
            with open(path, "rb") as f:
                data = f.read()
            if data.endswith(b"\n"):
                checked = otlpcheck([path], "jsonl")
                n = sum(len(sp.profiles) for m in checked.messages for rp in m.resource_profiles
                        for sp in rp.scope_profiles)
                if want_profiles is None or n >= want_profiles:
                    return checked
        if time.monotonic() > deadline:
            raise AssertionError("the Collector's file %s has not got %r profiles within %.0fs"
                                 " (%s)" % (path, want_profiles, timeout,
                                            "%d messages" % len(checked.messages) if checked
                                            else "nothing"))
        time.sleep(0.3)


# ---------------------------------------------------------------------------------------------
# a TCP tee: what a real client sent, byte for byte


class TeeRequest:
    def __init__(self, method, target, headers, body, status):
        self.method, self.path, self.headers, self.body = method, target, headers, body
        self.status = status                # profcol's answer (None if none was read)

    @property
    def query(self):
        return urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query,
                                     keep_blank_values=True)


def _parse_messages(data, requests):
    """HTTP/1.1 messages in one direction of a connection: [(start line, headers, body)]."""
    out, pos = [], 0
    while pos < len(data):
        end = data.find(b"\r\n\r\n", pos)
        if end < 0:
            break
        lines = data[pos:end].decode("latin-1").split("\r\n")
        start, hdrs = lines[0], {}
        for ln in lines[1:]:
            k, _, v = ln.partition(":")
            hdrs[k.strip().lower()] = v.strip()
        pos = end + 4
        body = b""
        if hdrs.get("transfer-encoding", "").lower() == "chunked":
            while True:
                eol = data.find(b"\r\n", pos)
                size = int(data[pos:eol].split(b";")[0], 16)
                pos = eol + 2
                if size == 0:
                    pos = data.find(b"\r\n", pos) + 2    # no trailers expected
                    break
                body += data[pos:pos + size]
                pos += size + 2
        elif "content-length" in hdrs:
            n = int(hdrs["content-length"])
            body = data[pos:pos + n]
            pos += n
        elif not requests and not start.split(" ")[1:2] == ["100"]:
            body = data[pos:]
            pos = len(data)
        out.append((start, hdrs, body))
    return out


class Tee:
    """127.0.0.1:port -> 127.0.0.1:target, recording both directions of every connection."""

    def __init__(self, target_port):
        self.target = target_port
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(64)
        self.port = self.lsock.getsockname()[1]
        self.url = "http://127.0.0.1:%d" % self.port
        self.conns = []                     # [[client bytes, server bytes]]
        self.lock = threading.Lock()
        self.stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _pump(self, src, dst, rec, idx):
        try:
            while True:
                b = src.recv(65536)
                if not b:
                    break
                with self.lock:
                    rec[idx] += b
                dst.sendall(b)
        except OSError:
            pass
        finally:
            try:
                dst.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def _accept(self):
        while not self.stopped:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            try:
                s = socket.create_connection(("127.0.0.1", self.target), timeout=10)
                s.settimeout(None)
            except OSError:
                c.close()
                continue
            rec = [b"", b""]
            with self.lock:
                self.conns.append(rec)
            threading.Thread(target=self._pump, args=(c, s, rec, 0), daemon=True).start()
            threading.Thread(target=self._pump, args=(s, c, rec, 1), daemon=True).start()

    def requests(self):
        """Every request of every connection, with profcol's status for it."""
        return [req for req, _, _ in self.exchanges()]

    def exchanges(self):
        """Every (request, response) of every connection, in order per connection: (TeeRequest,
        response headers, response body), the response None when none was read."""
        with self.lock:
            conns = [list(r) for r in self.conns]
        out = []
        for cdata, sdata in conns:
            reqs = _parse_messages(cdata, True)
            resps = [r for r in _parse_messages(sdata, False)
                     if r[0].split(" ")[1:2] != ["100"]]
            for i, (start, hdrs, body) in enumerate(reqs):
                method, target = start.split(" ")[:2]
                if i < len(resps):
                    rs, rh, rb = resps[i]
                    out.append((TeeRequest(method, target, hdrs, body, int(rs.split(" ")[1])),
                                rh, rb))
                else:
                    out.append((TeeRequest(method, target, hdrs, body, None), None, None))
        return out

    def stop(self):
        self.stopped = True
        self.lsock.close()
