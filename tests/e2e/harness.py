"""End-to-end test harness for profcol.

Runs under Debian's /usr/bin/python3 with the stdlib and python3-protobuf only.

What it gives the tests:
  * pb       -- Python protobuf modules generated at import time from <repo>/proto with protoc;
  * free_port() -- a free 127.0.0.1 port;
  * Profcol  -- starts the real binary on a YAML config, waits for its ports, stops it with
                SIGTERM and checks that it exits 0;
  * LocalServer/QuietHandler/cond_wait -- the base of every recording test server (threaded
                http.server on 127.0.0.1);
  * Sink     -- a recording OTLP/HTTP endpoint that can be told to fail;
  * post()/raw_request() -- HTTP clients; GoodClient -- a client posting good data throughout;
  * make_request()/to_otlp_json() -- realistic ExportProfilesServiceRequest messages;
  * pb_fields()/decode_status() -- protobuf read by hand;
  * summarize() -- the canonical summary two batches are compared by;
  * assert_400(), stop_all(), started_sink(), started_profcol(), Started -- what a TestCase
                starts, checks and stops;
  * node_version(), npm_stale(), ensure_npm_lockfile() -- Node.js clients pinned by a
                package-lock.json (npm ci when node_modules is missing or stale).

Environment: PROFCOL_BIN (default <repo>/build/profcol), PROFCOL_SRC (default: two levels up
from this file), E2E_KEEP=1 keeps the temp dir (configs, logs, generated modules).
"""

import atexit
import base64
import collections
import gzip
import http.client
import http.server
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import zlib

DEBIAN_PYTHON = "/usr/bin/python3"


def ensure_debian_python():
    """Re-exec under Debian's python3 (the one python3-protobuf belongs to) if needed."""
    if os.path.realpath(sys.executable) != os.path.realpath(DEBIAN_PYTHON) and \
            not os.environ.get("PROFCOL_E2E_REEXEC"):
        os.environ["PROFCOL_E2E_REEXEC"] = "1"
        os.execv(DEBIAN_PYTHON, [DEBIAN_PYTHON] + sys.argv)


ensure_debian_python()

from google.protobuf import json_format  # noqa: E402  (after the interpreter check)
from google.protobuf.message import DecodeError  # noqa: E402,F401

SRC = os.environ.get("PROFCOL_SRC") or os.path.normpath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BIN = os.environ.get("PROFCOL_BIN") or os.path.join(SRC, "build", "profcol")


def _sanitized(path):
    """Whether the binary was built with AddressSanitizer (slower; memory figures larger)."""
    try:
        with open(path, "rb") as f:
            return b"__asan_init" in f.read()
    except OSError:
        return False


SANITIZED = _sanitized(BIN)
# Go's build cache for the tests' go commands, kept across runs: with a Go that builds `go tool
# pprof` on first use (1.24 and later, e.g. the machine's /usr/local/go, first on PATH) and the
# standard library into an empty cache, a fresh cache per test took minutes on two loaded cores
# and ran into the tests' timeouts.
GO_CACHE = os.environ.get("PROFCOL_E2E_GOCACHE") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "profcol-e2e", "go-build")
PROFILES_PATH = "/v1development/profiles"
CT_PROTO = "application/x-protobuf"
CT_JSON = "application/json"
RETRYABLE = (429, 502, 503, 504)

START_TIMEOUT = 10.0
# in stderr these mean a sanitizer build found a bug (UBSan only prints unless halt_on_error)
SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                     "WARNING: ThreadSanitizer")
STOP_TIMEOUT = 10.0

TMP = tempfile.mkdtemp(prefix="profcol-e2e-")
if not os.environ.get("E2E_KEEP"):
    atexit.register(shutil.rmtree, TMP, True)


# ---------------------------------------------------------------------------------------------
# (a) protobuf modules generated at test time

class _PB:
    pass


def gen_python_protos(subdir, names):
    """protoc --python_out for proto/<names> into TMP/<subdir>, importable afterwards."""
    out = os.path.join(TMP, subdir)
    os.makedirs(out, exist_ok=True)
    cmd = ["protoc", "--python_out=" + out, "--proto_path=" + os.path.join(SRC, "proto")] + names
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError("protoc failed: %s\n%s" % (" ".join(cmd), r.stderr))
    sys.path.insert(0, out)


def _gen_protos():
    # rpc_status.proto/pb_wellknown.proto are not generated: pb_wellknown declares
    # google.protobuf.Any/Duration, which clash with python-protobuf's built-ins.
    gen_python_protos("pb", ["otlp_common.proto", "otlp_resource.proto", "otlp_profiles.proto",
                             "otlp_profiles_service.proto"])
    import otlp_common_pb2
    import otlp_resource_pb2
    import otlp_profiles_pb2
    import otlp_profiles_service_pb2
    pb = _PB()
    pb.common = otlp_common_pb2
    pb.resource = otlp_resource_pb2
    pb.profiles = otlp_profiles_pb2
    pb.service = otlp_profiles_service_pb2
    pb.Request = otlp_profiles_service_pb2.ExportProfilesServiceRequest
    pb.Response = otlp_profiles_service_pb2.ExportProfilesServiceResponse
    return pb


pb = _gen_protos()


def varint(n):
    """Protobuf base-128 varint of a non-negative n (hand-made wire data in tests)."""
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def pb_field(num, payload):
    """A length-delimited protobuf field: key, length, payload."""
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def peak_rss(pid):
    """The process's peak resident set (VmHWM) in bytes, or None."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _read_varint(buf, pos):
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def pb_fields(buf, wire_types=(0, 1, 2, 5)):
    """Every field of one protobuf message, read by hand: [(field number, wire type, value)],
    varints as ints, fixed64/fixed32 and length-delimited values as bytes. Raises ValueError on
    malformed input or a wire type not in wire_types."""
    pos, out = 0, []
    while pos < len(buf):
        key, pos = _read_varint(buf, pos)
        field, wt = key >> 3, key & 7
        if field == 0:
            raise ValueError("field number 0")
        if wt not in wire_types or wt not in (0, 1, 2, 5):
            raise ValueError("bad wire type %d" % wt)
        if wt == 0:
            v, pos = _read_varint(buf, pos)
        elif wt == 2:
            n, pos = _read_varint(buf, pos)
            if pos + n > len(buf):
                raise ValueError("truncated length-delimited field")
            v = bytes(buf[pos:pos + n])
            pos += n
        else:
            size = 8 if wt == 1 else 4
            v, pos = bytes(buf[pos:pos + size]), pos + size
        if pos > len(buf):
            raise ValueError("truncated")
        out.append((field, wt, v))
    return out


def decode_status(body):
    """Decode a google.rpc.Status by hand: {1: code varint, 2: message string, 3: details}.

    Returns (code, message, n_details). Raises ValueError if the body is not a valid Status."""
    code, message, details = 0, "", 0
    for field, wt, v in pb_fields(body):
        if field == 1 and wt == 0:
            code = v - (1 << 64) if v >= 1 << 63 else v
        elif field == 2 and wt == 2:
            message = v.decode("utf-8")
        elif field == 3 and wt == 2:
            details += 1
    return code, message, details


def decode_status_any(body, content_type):
    """A Status in either encoding (the server answers in the request's content type)."""
    if content_type and content_type.split(";")[0].strip().lower() == CT_JSON:
        d = json.loads(body.decode("utf-8"))
        return int(d.get("code", 0)), d.get("message", ""), len(d.get("details", []))
    return decode_status(body)


# ---------------------------------------------------------------------------------------------
# (b) ports

_given_ports = set()
_port_lock = threading.Lock()


def free_port():
    """A 127.0.0.1 TCP port nothing listens on right now (never the same one twice per run)."""
    with _port_lock:
        for _ in range(100):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            s.close()
            if port not in _given_ports:
                _given_ports.add(port)
                return port
    raise RuntimeError("no free port")


def wait_port(port, timeout=START_TIMEOUT, proc=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


# ---------------------------------------------------------------------------------------------
# (c) the profcol process

_seq = 0


def _tmpfile(prefix, suffix, text=None):
    global _seq
    _seq += 1
    path = os.path.join(TMP, "%s-%03d%s" % (prefix, _seq, suffix))
    if text is not None:
        with open(path, "w") as f:
            f.write(text)
    return path


def run_profcol(args, env=None, timeout=20):
    """Run profcol to completion (validate, components, ...). Returns CompletedProcess (text)."""
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([BIN] + list(args), capture_output=True, text=True, timeout=timeout,
                          env=e, stdin=subprocess.DEVNULL)


def curl_grpc_export(port, body, timeout=30):
    """An OTLP/gRPC ProfilesService/Export call of the serialized request `body` made by curl
    (HTTP/2 without TLS, gRPC framing by hand): an independent client. -> curl's headers and
    trailers as bytes (b"grpc-status: 0" when answered OK)."""
    out = subprocess.run(
        ["curl", "-sS", "--http2-prior-knowledge", "-H", "content-type: application/grpc",
         "-H", "te: trailers", "--data-binary", "@-", "-D", "-", "-o", "/dev/null",
         "http://127.0.0.1:%d/opentelemetry.proto.collector.profiles.v1development."
         "ProfilesService/Export" % port],
        input=b"\x00" + len(body).to_bytes(4, "big") + body, capture_output=True, timeout=timeout)
    return out.stdout + out.stderr


def run_in_netns(test, inner_var, test_file, inner_class):
    """Run test_file's inner_class in private network and mount namespaces (`unshare --net
    --mount`: a dnsmasq of the test's own on 127.0.0.1:53, which glibc's resolver asks), with
    inner_var set so the outer test knows it is inside; skipped (saying why) where namespaces
    cannot be made. The inner run must pass and skip nothing."""
    if os.environ.get(inner_var):
        test.skipTest("inside the namespace: %s runs" % inner_class)
    if os.geteuid() != 0:
        test.skipTest("skipped: needs root for private network and mount namespaces "
                      "(unshare --net --mount), as glibc's resolver only asks port 53")
    for tool in ("unshare", "dnsmasq", "ip", "mount"):
        if not shutil.which(tool) and not os.path.exists("/usr/sbin/" + tool):
            test.skipTest("skipped: %s is not installed" % tool)
    probe = subprocess.run(["unshare", "--net", "--mount", "true"], capture_output=True,
                           text=True)
    if probe.returncode != 0:
        test.skipTest("skipped: unshare --net --mount refused: %s" % probe.stderr.strip())
    env = dict(os.environ, **{inner_var: "1"})
    r = subprocess.run(["unshare", "--net", "--mount", "--propagation", "private",
                        DEBIAN_PYTHON, os.path.abspath(test_file), "-v", inner_class],
                       capture_output=True, text=True, env=env, timeout=600)
    test.assertEqual(r.returncode, 0, "the namespaced scenario failed:\n%s" % r.stderr[-8000:])
    test.assertIn("Ran 1 test", r.stderr)
    test.assertNotIn("skipped", r.stderr)
    return r.stderr


def main(write_seeds=None):
    """A test file's entry: unittest.main(verbosity=2), or, given `--write-seeds DIR`, the file's
    fuzz seeds written into DIR by write_seeds(DIR) (tests/fuzz/README.md)."""
    if write_seeds and len(sys.argv) == 3 and sys.argv[1] == "--write-seeds":
        write_seeds(sys.argv[2])
        sys.exit(0)
    unittest.main(verbosity=2)


def write_config(text, name="config"):
    return _tmpfile(name, ".yaml", text)


class Profcol:
    """One running profcol. `configs` is a YAML text or a list of them (each a --config file).

    env: variables to set; unset: names to remove from the inherited environment.
    args: more command-line arguments (e.g. --set; with configs=[] the embedded default config).
    wait_ports: ports that must accept connections before start() returns.
    preexec_fn: run in the child before exec (e.g. resource limits, ignored signals)."""

    def __init__(self, configs, wait_ports=(), env=None, unset=(), name="profcol",
                 preexec_fn=None, args=()):
        if isinstance(configs, str):
            configs = [configs]
        self.name = name
        self.config_paths = [write_config(c, name + "-config") for c in configs]
        self.wait_ports = list(wait_ports)
        self.env = dict(os.environ)
        for k in unset:
            self.env.pop(k, None)
        self.env.update(env or {})
        self.stderr_path = _tmpfile(name, ".stderr")
        self.stdout_path = _tmpfile(name, ".stdout")
        self.preexec_fn = preexec_fn
        self.args = list(args)
        self.proc = None

    start_timeout = START_TIMEOUT
    stop_timeout = STOP_TIMEOUT

    def command(self):
        """The argv started (a peer's process, peer_support.Collector, has its own)."""
        if not os.access(BIN, os.X_OK):
            raise RuntimeError("profcol binary not found: %s (set PROFCOL_BIN)" % BIN)
        args = [BIN]
        texts = []
        for p in self.config_paths:
            args += ["--config", p]
            with open(p) as f:
                texts.append(f.read())
        # profcol serves self-metrics on localhost:8888 by default and, as otelcol, does not start
        # when that port is taken: a config that does not place them gets a free port, so
        # concurrent tests do not take each other's
        if not any("metrics:" in t for t in texts) and \
                not any("telemetry::metrics" in a for a in self.args):
            args += ["--set", "service::telemetry::metrics::address=127.0.0.1:%d" % free_port()]
        return args + self.args

    def start(self):
        args = self.command()
        self._err = open(self.stderr_path, "wb")
        self._out = open(self.stdout_path, "wb")
        self.proc = subprocess.Popen(args, stdout=self._out, stderr=self._err,
                                     stdin=subprocess.DEVNULL, env=self.env,
                                     preexec_fn=self.preexec_fn)
        for port in self.wait_ports:
            if not wait_port(port, self.start_timeout, self.proc):
                rc = self.proc.poll()
                self.kill()
                raise AssertionError("%s did not listen on 127.0.0.1:%d within %.0fs (exit %r)\n"
                                     "--- stderr ---\n%s" % (self.name, port, self.start_timeout,
                                                             rc, self.stderr()[-4000:]))
        return self

    def stderr(self):
        try:
            with open(self.stderr_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def wait_stderr(self, predicate, timeout=10.0):
        """Wait (bounded) until predicate(stderr text) is true; returns the final text."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.stderr()
            if predicate(text) or time.monotonic() > deadline:
                return text
            time.sleep(0.1)

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout=None):
        """SIGTERM; assert exit status 0 within `timeout` seconds (default stop_timeout)."""
        timeout = self.stop_timeout if timeout is None else timeout
        if self.proc is None:
            return
        if self.proc.poll() is not None:
            rc = self.proc.returncode
            self._close()
            raise AssertionError("%s exited early with status %r\n--- stderr ---\n%s"
                                 % (self.name, rc, self.stderr()[-4000:]))
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError("%s did not exit within %.0fs of SIGTERM\n--- stderr ---\n%s"
                                 % (self.name, timeout, self.stderr()[-4000:]))
        self._close()
        if rc != 0:
            raise AssertionError("%s exited with status %r after SIGTERM (want 0)\n"
                                 "--- stderr ---\n%s" % (self.name, rc, self.stderr()[-4000:]))
        err = self.stderr()
        for marker in SANITIZER_MARKERS:
            if marker in err:
                i = err.index(marker)
                raise AssertionError("%s: sanitizer report in stderr:\n%s"
                                     % (self.name, err[max(0, i - 200):i + 3000]))

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
        self._close()

    def _close(self):
        for f in (getattr(self, "_err", None), getattr(self, "_out", None)):
            if f and not f.closed:
                f.close()


def otlp_receiver_yaml(port, max_body=None, http_extra=None):
    s = "receivers:\n  otlp:\n    protocols:\n      http:\n        endpoint: 127.0.0.1:%d\n" % port
    if max_body is not None:
        s += "        max_request_body_size: %s\n" % max_body
    for k, v in (http_extra or {}).items():
        s += "        %s: %s\n" % (k, v)
    return s


def relay_config(in_port, out_url, encoding=None, compression=None, headers=None,
                 max_body=None, timeout=None, debug=None, http_extra=None, exporter_extra=None):
    """otlp receiver on in_port -> otlphttp exporter to out_url (and optionally debug)."""
    s = otlp_receiver_yaml(in_port, max_body, http_extra)
    s += "exporters:\n  otlphttp:\n    endpoint: %s\n" % out_url
    if encoding:
        s += "    encoding: %s\n" % encoding
    if compression:
        s += "    compression: %s\n" % compression
    if timeout:
        s += "    timeout: %s\n" % timeout
    if headers:
        s += "    headers:\n"
        for k, v in headers.items():
            s += "      %s: %s\n" % (k, v)
    if exporter_extra:  # raw YAML lines under the otlphttp exporter, e.g. sending_queue
        s += "".join("    %s\n" % line for line in exporter_extra.splitlines())
    exporters = ["otlphttp"]
    if debug:
        s += "  debug:\n    verbosity: %s\n" % debug
        exporters.append("debug")
    s += ("service:\n  pipelines:\n    profiles:\n      receivers: [otlp]\n"
          "      exporters: [%s]\n" % ", ".join(exporters))
    return s


# ---------------------------------------------------------------------------------------------
# HTTP clients

class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers          # lower-cased names
        self.body = body

    @property
    def content_type(self):
        return self.headers.get("content-type", "").split(";")[0].strip().lower()

    def __repr__(self):
        return "<HTTP %d %s %r>" % (self.status, self.content_type, self.body[:200])


def post(port, body, content_type=CT_PROTO, gzip_body=False, path=PROFILES_PATH, headers=None,
         method="POST", timeout=15.0, conn=None):
    """One request. Pass an http.client.HTTPConnection as conn to reuse it (keep-alive)."""
    h = {}
    if content_type is not None:
        h["Content-Type"] = content_type
    if gzip_body:
        body = gzip.compress(body)
        h["Content-Encoding"] = "gzip"
    h.update(headers or {})
    own = conn is None
    if own:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=h)
        r = conn.getresponse()
        data = r.read()
        return Response(r.status, {k.lower(): v for k, v in r.getheaders()}, data)
    finally:
        if own:
            conn.close()


def raw_request(port, head, body_chunks=(), timeout=15.0):
    """Send a hand-made request head then body chunks; tolerate the server closing early
    (a 413 may come before the body is sent). Returns Response, or raises if no answer."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(head)
        for chunk in body_chunks:
            try:
                s.sendall(chunk)
            except (BrokenPipeError, ConnectionResetError):
                break
        r = http.client.HTTPResponse(s)
        r.begin()
        try:
            data = r.read()
        except (ConnectionResetError, http.client.IncompleteRead):
            data = b""
        return Response(r.status, {k.lower(): v for k, v in r.getheaders()}, data)
    finally:
        s.close()


# ---------------------------------------------------------------------------------------------
# (d) the recording sink

HEX_ID_FIELDS = ("traceId", "spanId", "parentSpanId", "profileId")


def _map_ids(obj, convert):
    """obj with convert applied to every hex id field's string value (HEX_ID_FIELDS)."""
    if isinstance(obj, dict):
        return {k: convert(v) if k in HEX_ID_FIELDS and isinstance(v, str) else _map_ids(v, convert)
                for k, v in obj.items()}
    if isinstance(obj, list):
        return [_map_ids(x, convert) for x in obj]
    return obj


def _hex_ids_to_base64(obj):
    """OTLP JSON has hex traceId/spanId/parentSpanId (and, as the Collector's pdata writes it,
    profileId); proto3 JSON (json_format) wants base64."""
    return _map_ids(obj, lambda v: base64.b64encode(bytes.fromhex(v)).decode())


def parse_otlp_json(text):
    d = json.loads(text)
    msg = pb.Request()
    json_format.ParseDict(_hex_ids_to_base64(d), msg, ignore_unknown_fields=True)
    return msg


def _ids_to_hex(obj):
    return _map_ids(obj, lambda v: base64.b64decode(v).hex())


def to_otlp_json(msg, ints_as_numbers=False, enums_as_ints=False):
    """OTLP JSON text for a message: lowerCamelCase, hex trace/span/profile ids, int64 as strings
    (or as numbers when ints_as_numbers, which decoders must accept too), enums by name (or as
    integers, as the OTLP spec has them, when enums_as_ints)."""
    d = _ids_to_hex(json_format.MessageToDict(msg, use_integers_for_enums=enums_as_ints))
    if ints_as_numbers:
        d = _int_strings_to_numbers(d)
    return json.dumps(d).encode()


INT64_FIELDS = {"values", "timestampsUnixNano", "timeUnixNano", "durationNano", "period",
                "address", "memoryStart", "memoryLimit", "fileOffset", "line", "column",
                "startLine", "intValue", "rejectedProfiles"}


def _int_strings_to_numbers(obj, key=None):
    if isinstance(obj, dict):
        return {k: _int_strings_to_numbers(v, k) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_int_strings_to_numbers(x, key) for x in obj]
    if isinstance(obj, str) and key in INT64_FIELDS:
        return int(obj)
    return obj


class QuietHandler(http.server.BaseHTTPRequestHandler):
    """The base of every test server's handler: HTTP/1.1 keep-alive, no access log."""
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def lower_headers(self):
        return {k.lower(): v for k, v in self.headers.items()}

    def reply(self, status, ctype=None, body=b"", extra=None):
        self.send_response(status)
        if ctype:
            self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)


class _Server(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        """A peer gone in the middle of a request (a client killed with -9) is no test
        failure: not a traceback on stderr."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class LocalServer:
    """A threaded http.server on 127.0.0.1 (a free port unless given) serving `handler` (a
    QuietHandler subclass) from a daemon thread: the base of every recording test server."""
    scheme = "http"

    def __init__(self, handler, port=None):
        self.port = port or free_port()
        self.server = _Server(("127.0.0.1", self.port), handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.1}, daemon=True)

    @property
    def url(self):
        return "%s://127.0.0.1:%d" % (self.scheme, self.port)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


def cond_wait(cond, snapshot, predicate, timeout, step=0.2):
    """Under cond (notified when something is recorded): wait until predicate(snapshot()) holds
    or timeout seconds pass; returns the last snapshot."""
    deadline = time.monotonic() + timeout
    with cond:
        while not predicate(snapshot()):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            cond.wait(min(left, step))
        return snapshot()


class Recorded:
    def __init__(self, path, headers, raw, body, message, error):
        self.path = path
        self.headers = headers          # lower-cased names
        self.raw = raw                  # bytes as on the wire
        self.body = body                # after gzip decoding
        self.message = message          # ExportProfilesServiceRequest or None
        self.error = error              # decode error text or None
        self.refused = False            # answered with fail_next's status, not accepted

    @property
    def content_type(self):
        return self.headers.get("content-type", "").split(";")[0].strip().lower()


class Sink(LocalServer):
    """Recording OTLP/HTTP profiles endpoint on 127.0.0.1.

    fail_next(n, status, retry_after) makes the next n POSTs answer `status` instead of 200.
    hold() keeps the answers back until release(); `held` counts the POSTs waiting then (one a
    connection: HTTP/1.1 sends one request at a time), `most_held` the most at once."""

    def __init__(self, port=None):
        self.requests = []
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self._fail = []
        self._holding = False
        self.held = self.most_held = 0
        sink = self

        class Handler(QuietHandler):
            def do_GET(self):
                self.reply(405, "text/plain", b"method not allowed\n")

            def do_POST(self):
                sink._handle(self, self.read_body())

        super().__init__(Handler, port)

    def fail_next(self, n, status=503, retry_after="1"):
        with self.lock:
            self._fail = [(status, retry_after)] * n

    def hold(self):
        with self.cond:
            self._holding = True

    def release(self):
        with self.cond:
            self._holding = False
            self.cond.notify_all()

    def _wait_held(self):
        with self.cond:
            if not self._holding:
                return
            self.held += 1
            self.most_held = max(self.most_held, self.held)
            self.cond.notify_all()
            while self._holding:
                self.cond.wait()
            self.held -= 1

    def _handle(self, h, raw):
        headers = h.lower_headers()
        ctype = headers.get("content-type", "").split(";")[0].strip().lower()
        body, msg, err = raw, None, None
        try:
            enc = headers.get("content-encoding", "").strip().lower()
            if enc == "gzip":
                body = gzip.decompress(raw)
            elif enc == "zstd":  # Debian 12's python3 has no zstd: the zstd command (package zstd)
                body = zstd_decompress(raw)
            elif enc not in ("", "identity"):
                raise ValueError("unsupported content-encoding %r" % enc)
            if ctype == CT_PROTO:
                msg = pb.Request()
                msg.ParseFromString(body)
            elif ctype == CT_JSON:
                msg = parse_otlp_json(body.decode("utf-8"))
            else:
                raise ValueError("unsupported content-type %r" % ctype)
        except Exception as e:  # recorded; the test decides
            err = "%s: %s" % (type(e).__name__, e)
            msg = None
        with self.cond:
            rec = Recorded(h.path, headers, raw, body, msg, err)
            self.requests.append(rec)
            fail = self._fail.pop(0) if self._fail else None
            rec.refused = fail is not None
            self.cond.notify_all()
        self._wait_held()
        if h.path != PROFILES_PATH:
            h.reply(404, "text/plain", b"not found\n")
        elif fail:
            status, retry_after = fail
            extra = {"Retry-After": retry_after} if retry_after is not None else {}
            st = b"\x08\x0e\x12\x0bunavailable"  # Status{code: 14, message: "unavailable"}
            h.reply(status, CT_PROTO, st, extra)
        elif err:
            h.reply(400, "text/plain", err.encode())
        elif ctype == CT_JSON:
            h.reply(200, CT_JSON, b"{}")
        else:
            h.reply(200, CT_PROTO, pb.Response().SerializeToString())

    def snapshot(self):
        with self.lock:
            return list(self.requests)

    def wait_requests(self, n, timeout=10.0):
        """Wait until at least n requests were recorded; returns the list."""
        return cond_wait(self.cond, lambda: list(self.requests), lambda reqs: len(reqs) >= n,
                         timeout)

    def wait_until(self, predicate, timeout=10.0):
        """Wait until predicate(list of requests) is true; returns the list."""
        return cond_wait(self.cond, lambda: list(self.requests), predicate, timeout)

    def messages(self):
        reqs = self.snapshot()
        bad = [r.error for r in reqs if r.error]
        if bad:
            raise AssertionError("sink got undecodable requests: %s" % bad)
        return [r.message for r in reqs]


# ---------------------------------------------------------------------------------------------
# (e) realistic requests

FUNCTIONS = [
    # name, system name, file
    ("main", "main", "/src/cmd/app/main.go"),
    ("runtime.main", "runtime.main", "/usr/lib/go/src/runtime/proc.go"),
    ("net/http.(*conn).serve", "net/http.(*conn).serve", "/usr/lib/go/src/net/http/server.go"),
    ("shop.(*Handler).Checkout", "shop.(*Handler).Checkout", "/src/shop/handler.go"),
    ("shop.priceCart", "shop.priceCart", "/src/shop/price.go"),
    ("database/sql.(*DB).Query", "database/sql.(*DB).Query", "/usr/lib/go/src/database/sql/sql.go"),
    ("encoding/json.Marshal", "encoding/json.Marshal", "/usr/lib/go/src/encoding/json/encode.go"),
    ("crypto/sha256.block", "crypto/sha256.blockAMD64", "/usr/lib/go/src/crypto/sha256/sha256block_amd64.s"),
    ("runtime.mallocgc", "runtime.mallocgc", "/usr/lib/go/src/runtime/malloc.go"),
    ("bytes.growSlice", "bytes.growSlice", "/usr/lib/go/src/bytes/buffer.go"),
    ("compress/flate.(*compressor).deflate", "compress/flate.(*compressor).deflate",
     "/usr/lib/go/src/compress/flate/deflate.go"),
    ("runtime.gcBgMarkWorker", "runtime.gcBgMarkWorker", "/usr/lib/go/src/runtime/mgc.go"),
]

# call chains, root first; "a+b" means b inlined into a (one Location with two Lines)
CHAINS = [
    ["runtime.main", "main", "net/http.(*conn).serve", "shop.(*Handler).Checkout", "shop.priceCart"],
    ["runtime.main", "main", "net/http.(*conn).serve", "shop.(*Handler).Checkout",
     "database/sql.(*DB).Query"],
    ["runtime.main", "main", "net/http.(*conn).serve", "shop.(*Handler).Checkout",
     "encoding/json.Marshal", "bytes.growSlice", "runtime.mallocgc"],
    ["runtime.main", "main", "net/http.(*conn).serve", "compress/flate.(*compressor).deflate"],
    ["runtime.main", "main", "net/http.(*conn).serve", "shop.(*Handler).Checkout+shop.priceCart",
     "crypto/sha256.block"],
    ["runtime.gcBgMarkWorker"],
    ["runtime.main", "main", "encoding/json.Marshal", "runtime.mallocgc"],
]


class DictBuilder:
    """Interns strings, functions, locations, stacks, attributes and links into one
    ProfilesDictionary, with the zero element at index 0 of every table."""

    def __init__(self, d):
        self.d = d
        self.strings = {}
        self.funcs = {}
        self.locs = {}
        self.stacks = {}
        self.attrs = {}
        self.links = {}
        d.mapping_table.add()
        d.location_table.add()
        d.function_table.add()
        d.link_table.add(trace_id=b"\0" * 16, span_id=b"\0" * 8)
        d.string_table.append("")
        d.attribute_table.add()
        d.stack_table.add()
        self.mapping = len(d.mapping_table)
        d.mapping_table.add(memory_start=0x400000, memory_limit=0xA00000, file_offset=0,
                            filename_strindex=self.s("/usr/bin/shop"),
                            attribute_indices=[self.attr("process.executable.build_id.htlhash",
                                                         "600f3a7c0b1c1a2e3a6f50b2e1c8d9a1")])

    def s(self, text):
        if text not in self.strings:
            self.strings[text] = len(self.d.string_table)
            self.d.string_table.append(text)
        return self.strings[text]

    def func(self, name):
        if name not in self.funcs:
            _, sysname, fname = next(f for f in FUNCTIONS if f[0] == name)
            self.funcs[name] = len(self.d.function_table)
            self.d.function_table.add(name_strindex=self.s(name), system_name_strindex=self.s(sysname),
                                      filename_strindex=self.s(fname), start_line=10 + len(self.funcs))
        return self.funcs[name]

    def loc(self, frame):
        """frame: 'f' or 'caller+inlined' -> location index."""
        if frame not in self.locs:
            names = frame.split("+")
            idx = len(self.d.location_table)
            loc = self.d.location_table.add(mapping_index=self.mapping, address=0x401000 + 0x40 * idx)
            # lines: innermost (inlined) first, the caller it was inlined into last
            for n in reversed(names):
                loc.lines.add(function_index=self.func(n), line=20 + idx, column=idx % 7)
            self.locs[frame] = idx
        return self.locs[frame]

    def stack(self, chain):
        key = tuple(chain)
        if key not in self.stacks:
            self.stacks[key] = len(self.d.stack_table)
            self.d.stack_table.add(location_indices=[self.loc(f) for f in reversed(chain)])
        return self.stacks[key]

    def attr(self, key, value, unit=None, strindex=False):
        k = (key, repr(value), unit, strindex)
        if k not in self.attrs:
            self.attrs[k] = len(self.d.attribute_table)
            a = self.d.attribute_table.add(key_strindex=self.s(key))
            set_anyvalue(a.value, value, self if strindex else None)
            if unit:
                a.unit_strindex = self.s(unit)
        return self.attrs[k]

    def link(self, trace_id, span_id):
        k = (trace_id, span_id)
        if k not in self.links:
            self.links[k] = len(self.d.link_table)
            self.d.link_table.add(trace_id=trace_id, span_id=span_id)
        return self.links[k]


def set_anyvalue(av, value, strindex_builder=None):
    if isinstance(value, bool):
        av.bool_value = value
    elif isinstance(value, int):
        av.int_value = value
    elif isinstance(value, float):
        av.double_value = value
    elif isinstance(value, bytes):
        av.bytes_value = value
    elif isinstance(value, (list, tuple)):
        av.array_value.SetInParent()
        for v in value:
            set_anyvalue(av.array_value.values.add(), v)
    elif isinstance(value, dict):
        av.kvlist_value.SetInParent()
        for k, v in value.items():
            set_anyvalue(av.kvlist_value.values.add(key=k).value, v)
    elif strindex_builder is not None:
        av.string_value_strindex = strindex_builder.s(value)
    else:
        av.string_value = value


BASE_TIME = 1_760_000_000_000_000_000


def make_request(services=("checkout",), seed=1, samples=24, cpu=True, alloc=True, links=True,
                 strindex_attrs=True):
    """A realistic ExportProfilesServiceRequest: one ResourceProfiles per service, each with a
    CPU profile (cpu/nanoseconds, period cpu/nanoseconds, per-timestamp values) and an
    alloc_space/bytes profile (aggregated values), sample attributes, links to traces."""
    rnd = random.Random(seed)
    req = pb.Request()
    db = DictBuilder(req.dictionary)
    link_ids = [db.link(rnd.randbytes(16), rnd.randbytes(8)) for _ in range(3)] if links else []
    for si, svc in enumerate(services):
        rp = req.resource_profiles.add()
        rp.schema_url = "https://opentelemetry.io/schemas/1.37.0"
        attrs = rp.resource.attributes
        attrs.add(key="service.name").value.string_value = svc
        attrs.add(key="service.version").value.string_value = "1.%d.%d" % (seed, si)
        attrs.add(key="host.name").value.string_value = "node-%d" % (seed % 5)
        attrs.add(key="process.pid").value.int_value = 4000 + seed * 10 + si
        if strindex_attrs:
            kv = attrs.add(key_strindex=db.s("telemetry.sdk.language"))
            kv.value.string_value_strindex = db.s("go")
        else:
            attrs.add(key="telemetry.sdk.language").value.string_value = "go"
        sp = rp.scope_profiles.add()
        sp.scope.name = "go.opentelemetry.io/ebpf-profiler"
        sp.scope.version = "0.%d.0" % seed
        t0 = BASE_TIME + seed * 1_000_000_000 + si
        kinds = []
        if cpu:
            kinds.append(("cpu", "nanoseconds", "cpu", "nanoseconds", 10_000_000, True))
        if alloc:
            kinds.append(("alloc_space", "bytes", "space", "bytes", 524_288, False))
        for typ, unit, ptyp, punit, period, timed in kinds:
            p = sp.profiles.add()
            p.sample_type.type_strindex = db.s(typ)
            p.sample_type.unit_strindex = db.s(unit)
            p.period_type.type_strindex = db.s(ptyp)
            p.period_type.unit_strindex = db.s(punit)
            p.period = period
            p.time_unix_nano = t0
            p.duration_nano = 10_000_000_000
            p.profile_id = rnd.randbytes(16)
            p.attribute_indices.append(db.attr("profile.frame.type", "go"))
            for _ in range(samples):
                s = p.samples.add()
                s.stack_index = db.stack(rnd.choice(CHAINS))
                ai = [db.attr("thread.name", "worker-%d" % rnd.randrange(4))]
                if rnd.random() < 0.5:
                    ai.append(db.attr("http.route", rnd.choice(["/cart", "/checkout"]),
                                      strindex=strindex_attrs))
                if not timed and rnd.random() < 0.5:
                    ai.append(db.attr("alloc.size_class", rnd.choice([64, 512, 4096]), unit="By"))
                s.attribute_indices.extend(ai)
                if link_ids and rnd.random() < 0.4:
                    s.link_index = rnd.choice(link_ids)
                if timed:
                    n = rnd.randrange(1, 4)
                    s.values.extend(period * rnd.randrange(1, 5) for _ in range(n))
                    s.timestamps_unix_nano.extend(
                        sorted(t0 + rnd.randrange(10_000_000_000) for _ in range(n)))
                else:
                    s.values.append(rnd.randrange(1, 1000) * 64)
    return req


def top_functions(req, n=3):
    """The n functions with the highest self (flat) value over the whole request."""
    d = req.dictionary
    self_v = collections.Counter()
    for rp in req.resource_profiles:
        for sp in rp.scope_profiles:
            for p in sp.profiles:
                for s in p.samples:
                    names = _stack_names(d, s.stack_index)
                    if names:
                        self_v[names[0]] += _sample_value(s)
    return [name for name, _ in self_v.most_common(n)]


# ---------------------------------------------------------------------------------------------
# the canonical summary

def _at(table, i, what):
    if i < 0 or i >= len(table):
        raise AssertionError("%s index %d out of range (table has %d)" % (what, i, len(table)))
    return table[i]


def _anyvalue(av, strings):
    which = av.WhichOneof("value")
    if which is None:
        return ("empty",)
    if which == "string_value":
        return ("s", av.string_value)
    if which == "string_value_strindex":
        return ("s", _at(strings, av.string_value_strindex, "string"))
    if which == "bool_value":
        return ("b", av.bool_value)
    if which == "int_value":
        return ("i", av.int_value)
    if which == "double_value":
        return ("d", av.double_value)
    if which == "bytes_value":
        return ("y", av.bytes_value.hex())
    if which == "array_value":
        return ("a", tuple(_anyvalue(v, strings) for v in av.array_value.values))
    if which == "kvlist_value":
        return ("kv", tuple(sorted(_keyvalue(kv, strings) for kv in av.kvlist_value.values)))
    raise AssertionError("unknown AnyValue member %s" % which)


def _keyvalue(kv, strings):
    key = kv.key if kv.key else (_at(strings, kv.key_strindex, "string") if kv.key_strindex else "")
    return (key, _anyvalue(kv.value, strings))


def _stack_names(d, stack_index):
    names = []
    stack = _at(d.stack_table, stack_index, "stack")
    for li in stack.location_indices:
        loc = _at(d.location_table, li, "location")
        for line in loc.lines:
            f = _at(d.function_table, line.function_index, "function")
            name = (_at(d.string_table, f.name_strindex, "string")
                    or _at(d.string_table, f.system_name_strindex, "string")
                    or _at(d.string_table, f.filename_strindex, "string") or "?")
            names.append(name)
    return names


def _sample_value(s):
    if len(s.values):
        return sum(s.values)
    return len(s.timestamps_unix_nano)       # timestamps only: each counts as one


def summarize(messages):
    """Canonical, encoding- and index-independent summary of one or more requests.

    {'resources': sorted unique list of resource attribute tuples,
     'scopes': sorted unique list of (service.name, scope name, scope version),
     'profiles': {(service.name, sample type, unit): {
         'total': summed values,
         'meta': sorted unique list of (period type, period unit, period, time, duration,
                  profile id hex),
         'attrs': sorted unique list of profile attribute tuples,
         'samples': {(stack function names leaf first, sorted sample attributes,
                      (trace id hex, span id hex) or None): [summed values, n timestamps]}}}}"""
    if not isinstance(messages, (list, tuple)):
        messages = [messages]
    resources, scopes, profiles = set(), set(), {}
    for m in messages:
        d = m.dictionary
        st = d.string_table

        def attr(i):
            a = _at(d.attribute_table, i, "attribute")
            unit = _at(st, a.unit_strindex, "string")
            return (_at(st, a.key_strindex, "string"), _anyvalue(a.value, st), unit)

        for rp in m.resource_profiles:
            rattrs = tuple(sorted(_keyvalue(kv, st) for kv in rp.resource.attributes))
            resources.add(rattrs)
            svc = dict((k, v) for k, v in rattrs).get("service.name", ("s", ""))[1]
            for sp in rp.scope_profiles:
                scopes.add((svc, sp.scope.name, sp.scope.version))
                for p in sp.profiles:
                    key = (svc, _at(st, p.sample_type.type_strindex, "string"),
                           _at(st, p.sample_type.unit_strindex, "string"))
                    e = profiles.setdefault(key, {"total": 0, "meta": set(), "attrs": set(),
                                                  "samples": {}})
                    e["meta"].add((_at(st, p.period_type.type_strindex, "string"),
                                   _at(st, p.period_type.unit_strindex, "string"),
                                   p.period, p.time_unix_nano, p.duration_nano,
                                   p.profile_id.hex()))
                    e["attrs"].add(tuple(sorted(attr(i) for i in p.attribute_indices)))
                    for s in p.samples:
                        if len(s.values) and len(s.timestamps_unix_nano) and \
                                len(s.values) != len(s.timestamps_unix_nano):
                            raise AssertionError("sample with %d values and %d timestamps"
                                                 % (len(s.values), len(s.timestamps_unix_nano)))
                        names = tuple(_stack_names(d, s.stack_index))
                        sattrs = tuple(sorted(attr(i) for i in s.attribute_indices))
                        link = None
                        if s.link_index:
                            ln = _at(d.link_table, s.link_index, "link")
                            link = (ln.trace_id.hex(), ln.span_id.hex())
                        v = _sample_value(s)
                        e["total"] += v
                        acc = e["samples"].setdefault((names, sattrs, link), [0, 0])
                        acc[0] += v
                        acc[1] += len(s.timestamps_unix_nano)
    for e in profiles.values():
        e["meta"] = sorted(e["meta"])
        e["attrs"] = sorted(e["attrs"])
    return {"resources": sorted(resources), "scopes": sorted(scopes), "profiles": profiles}


def totals(summary):
    """{(service, type, unit): total} -- the short form for messages."""
    return {k: v["total"] for k, v in summary["profiles"].items()}


def merge_summaries(summaries):
    out = {"resources": set(), "scopes": set(), "profiles": {}}
    for s in summaries:
        out["resources"].update(s["resources"])
        out["scopes"].update(s["scopes"])
        for k, e in s["profiles"].items():
            o = out["profiles"].setdefault(k, {"total": 0, "meta": set(), "attrs": set(),
                                               "samples": {}})
            o["total"] += e["total"]
            o["meta"].update(e["meta"])
            o["attrs"].update(e["attrs"])
            for sk, (v, n) in e["samples"].items():
                acc = o["samples"].setdefault(sk, [0, 0])
                acc[0] += v
                acc[1] += n
    out["resources"] = sorted(out["resources"])
    out["scopes"] = sorted(out["scopes"])
    for e in out["profiles"].values():
        e["meta"] = sorted(e["meta"])
        e["attrs"] = sorted(e["attrs"])
    return out


def count_samples(messages):
    return sum(len(p.samples) for m in messages for rp in m.resource_profiles
               for sp in rp.scope_profiles for p in sp.profiles)


# ---------------------------------------------------------------------------------------------
# a concurrent good client

class GoodClient(threading.Thread):
    """Posts a valid request to path every `interval` seconds until stopped, on one keep-alive
    connection (keepalive=False: a new one each time); records every outcome."""

    def __init__(self, port, body, content_type=CT_PROTO, interval=0.02, timeout=5.0,
                 path=PROFILES_PATH, keepalive=True):
        super().__init__(daemon=True)
        self.port, self.body, self.ctype, self.path = port, body, content_type, path
        self.interval, self.timeout, self.keepalive = interval, timeout, keepalive
        self.stop_event = threading.Event()
        self.ok = 0
        self.failures = []
        self.latencies = []
        self.lock = threading.Lock()

    def run(self):
        conn = None
        while not self.stop_event.is_set():
            t = time.monotonic()
            try:
                if conn is None and self.keepalive:
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
                r = post(self.port, self.body, self.ctype, path=self.path, timeout=self.timeout,
                         conn=conn)
                dt = time.monotonic() - t
                with self.lock:
                    self.latencies.append(dt)
                    if r.status == 200:
                        self.ok += 1
                    else:
                        self.failures.append("HTTP %d %r" % (r.status, r.body[:200]))
            except Exception as e:
                with self.lock:
                    self.failures.append("%s: %s after %.2fs" % (type(e).__name__, e,
                                                                time.monotonic() - t))
                if conn is not None:
                    conn.close()
                conn = None
            self.stop_event.wait(self.interval)
        if conn is not None:
            conn.close()

    def count(self):
        with self.lock:
            return self.ok

    def finish(self):
        self.stop_event.set()
        self.join(self.timeout + 5)
        return self.ok, list(self.failures)


# ---------------------------------------------------------------------------------------------
# misc

def zstd_compress(data, *args):
    """data through the `zstd` command (Debian package zstd), with extra arguments."""
    return subprocess.run(["zstd", "-q", "-c", *args], input=data, stdout=subprocess.PIPE,
                          check=True).stdout


def zstd_decompress(data):
    return subprocess.run(["zstd", "-q", "-d", "-c"], input=data, stdout=subprocess.PIPE,
                          check=True).stdout


def gzip_bomb(uncompressed_bytes, chunk=1 << 20):
    """gzip of `uncompressed_bytes` zeros, built in chunks (~1000:1)."""
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    zero = bytes(chunk)
    out = []
    left = uncompressed_bytes
    while left > 0:
        n = min(chunk, left)
        out.append(c.compress(zero[:n]))
        left -= n
    out.append(c.flush())
    return b"".join(out)


def wait_for(predicate, timeout=10.0, interval=0.05):
    deadline = time.monotonic() + timeout
    while True:
        v = predicate()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(interval)


# ---------------------------------------------------------------------------------------------
# what a unittest.TestCase starts, checks and stops

def assert_400(test, r, what):
    """r is a 400 whose body is a google.rpc.Status (in the request's encoding) with a message
    that explains the error."""
    test.assertEqual(r.status, 400, "%s: want 400, got %r" % (what, r))
    try:
        code, msg, _ = decode_status_any(r.body, r.content_type)
    except ValueError as e:
        test.fail("%s: 400 body is not a google.rpc.Status (%s): %r" % (what, e, r.body[:200]))
    test.assertTrue(msg.strip(), "%s: Status.message must explain the error: %r" % (what, r))


def stop_all(profcol, *servers):
    """Stop profcol (asserting a clean exit); whatever happens, kill it and stop the servers."""
    try:
        profcol.stop()
    finally:
        profcol.kill()
        for s in servers:
            s.stop()


def started_sink(test, sink=None):
    """A started Sink (or the server given) that the test stops at cleanup."""
    sink = (sink or Sink()).start()
    test.addCleanup(sink.stop)
    return sink


def started_profcol(test, config, ports, name):
    """profcol on config, started once its port (or list of ports) listens; the test kills it at
    cleanup."""
    p = Profcol(config, wait_ports=ports if isinstance(ports, (list, tuple)) else [ports],
                name=name)
    test.addCleanup(p.kill)
    return p.start()


class Started:
    """TestCase mixin (before unittest.TestCase in the bases): start() profcols and sink()
    servers that tearDown kills and stops."""

    def setUp(self):
        self.procs, self.sinks = [], []

    def tearDown(self):
        for p in self.procs:
            p.kill()
        for s in self.sinks:
            s.stop()

    def start(self, cfg, port, **kw):
        """profcol on cfg (Profcol's keywords), started once port listens."""
        p = Profcol(cfg, wait_ports=[port], **kw)
        self.procs.append(p)
        return p.start()

    def sink(self, sink=None):
        """The server given (default: a new Sink), started."""
        self.sinks.append((sink or Sink()).start())
        return self.sinks[-1]


# ---------------------------------------------------------------------------------------------
# Node.js clients pinned by a lockfile (tests/e2e/otel, tests/e2e/kafka)

NPM_TIMEOUT = 300


def node_version():
    """(major, minor) of the `node` on PATH; RuntimeError when there is none."""
    node = shutil.which("node")
    if not node:
        raise RuntimeError("node not found (Debian: apt-get install nodejs npm; tools/dev.sh test "
                           "installs it)")
    r = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=20,
                       stdin=subprocess.DEVNULL)
    m = re.match(r"v(\d+)\.(\d+)", r.stdout.strip())
    if not m:
        raise RuntimeError("node --version said %r" % r.stdout)
    return int(m.group(1)), int(m.group(2))


def npm_stale(folder):
    """Packages of folder/package-lock.json missing from folder/node_modules or installed at
    another version, as "path (want x, have y)"."""
    with open(os.path.join(folder, "package-lock.json")) as f:
        lock = json.load(f)
    out = []
    for path, v in sorted(lock["packages"].items()):
        if not path:
            continue
        try:
            with open(os.path.join(folder, path, "package.json")) as f:
                have = json.load(f).get("version")
        except (OSError, ValueError):
            have = None
        if have != v.get("version"):
            out.append("%s (want %s, have %s)" % (path, v.get("version"), have))
    return out


def ensure_npm_lockfile(folder):
    """`npm ci` (exactly package-lock.json) into folder unless its node_modules already holds
    every locked package at its locked version. npm's registry is the only network use, and only
    when installing."""
    stale = npm_stale(folder)
    if not stale:
        return
    npm = shutil.which("npm")
    if not npm:
        raise RuntimeError("npm not found, and %s/node_modules is missing or stale (%s ...). "
                           "Debian: apt-get install npm" % (folder, ", ".join(stale[:3])))
    r = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=folder,
                       capture_output=True, text=True, timeout=NPM_TIMEOUT,
                       stdin=subprocess.DEVNULL)
    stale = npm_stale(folder)
    if r.returncode != 0 or stale:
        raise RuntimeError("npm ci in %s failed (exit %d; still missing: %s):\n%s\n%s"
                           % (folder, r.returncode, ", ".join(stale[:5]) or "none",
                              r.stdout[-2000:], r.stderr[-4000:]))
