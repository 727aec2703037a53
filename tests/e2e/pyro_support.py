"""Helpers for the Pyroscope end-to-end tests (real @pyroscope/nodejs and Go clients).

Builds on harness.py (profcol process, free ports, the recording OTLP sink, summaries) and adds:
  * ppb.Profile / ppb.PushRequest -- pprof and push.v1 Python modules generated with protoc from
    <repo>/proto at import time (like harness.pb);
  * pprof_profile(), pprof_view() -- decode a (gzip or plain) pprof into a comparable view:
    per sample type the total, and per (stack of function names leaf first, labels) the values;
  * otlp_views() -- the same view of what reached the OTLP sink, per resource and sample type;
  * parse_ingest_name() -- the `name=app{k=v}` grammar of spec/pyroscope.md §1.3, from the spec;
  * Recorder -- a forwarding HTTP proxy that records what a client sent and what profcol answered;
  * PyroscopeServer -- a recording Pyroscope endpoint (ingest and Connect push) that checks the
    protocol as the spec states it;
  * pyroscope_to_sink() -- a Pyroscope receiver forwarding to a recording OTLP sink;
  * ensure_node_modules(), run_node_app() -- the real Node client app in tests/e2e/node;
  * build_go_uploader(), go_pprof_raw() -- the stdlib-only Go uploader and `go tool pprof -raw`.

Debian's /usr/bin/python3, stdlib and python3-protobuf only.
"""

import collections
import gzip
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import urllib.parse
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402  (re-execs under /usr/bin/python3 if needed)

HERE = os.path.dirname(os.path.abspath(__file__))
NODE_DIR = os.path.join(HERE, "node")
GO_UPLOADER_DIR = os.path.join(HERE, "go", "uploader")
PUSH_PATH = "/push.v1.PusherService/Push"


# ---------------------------------------------------------------------------------------------
# generated modules: pprof and push.v1

class _PPB:
    pass


def _gen_protos():
    h.gen_python_protos("pb-pyro", ["pprof.proto", "pyroscope_push.proto"])
    import pprof_pb2
    import pyroscope_push_pb2
    m = _PPB()
    m.pprof = pprof_pb2
    m.push = pyroscope_push_pb2
    m.Profile = pprof_pb2.Profile
    m.PushRequest = pyroscope_push_pb2.PushRequest
    return m


ppb = _gen_protos()


# ---------------------------------------------------------------------------------------------
# pprof views

def pprof_profile(data):
    """A ppb.Profile from pprof bytes, gzip-compressed or not."""
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    p = ppb.Profile()
    p.ParseFromString(data)
    return p


def pprof_view(p):
    """{'types': [(type, unit)], 'totals': {(type, unit): total},
        'samples': {(type, unit): Counter{(names leaf first, labels): value}},
        'functions': set of function names, 'period_type': (type, unit), 'period': int}

    labels: sorted tuple of (key, ('s', str)) / (key, ('i', int)) like harness' summaries."""
    if not isinstance(p, ppb.Profile):
        p = pprof_profile(p)
    st = p.string_table
    if not len(st) or st[0] != "":
        raise AssertionError("pprof string table must start with \"\"")
    funcs = {f.id: st[f.name] or st[f.system_name] for f in p.function}
    locs = {}
    for loc in p.location:
        locs[loc.id] = [funcs[ln.function_id] for ln in loc.line]
    types = [(st[t.type], st[t.unit]) for t in p.sample_type]
    samples = {t: collections.Counter() for t in types}
    for s in p.sample:
        names = tuple(n for lid in s.location_id for n in locs[lid])
        labels = []
        for lb in s.label:
            if lb.str:
                labels.append((st[lb.key], ("s", st[lb.str])))
            else:
                labels.append((st[lb.key], ("i", lb.num)))
        key = (names, tuple(sorted(labels)))
        for t, v in zip(types, s.value):
            samples[t][key] += v
    return {
        "types": types,
        "totals": {t: sum(c.values()) for t, c in samples.items()},
        "samples": samples,
        "functions": set(funcs.values()),
        "period_type": (st[p.period_type.type], st[p.period_type.unit]),
        "period": p.period,
        "time_nanos": p.time_nanos,
    }


def merge_views(views):
    out = {"totals": collections.Counter(), "samples": collections.defaultdict(collections.Counter),
           "functions": set()}
    for v in views:
        out["totals"].update(v["totals"])
        for t, c in v["samples"].items():
            out["samples"][t].update(c)
        out["functions"] |= v["functions"]
    return out


# ---------------------------------------------------------------------------------------------
# OTLP views (what reached the harness' Sink)

def otlp_views(messages):
    """[{'resource': {key: value}, 'scope': (name, version), 'type': (type, unit),
         'period_type': (t, u), 'period': int, 'time': ns, 'duration': ns, 'total': int,
         'samples': Counter{(names leaf first, attrs): value}, 'functions': set}], one per
    Profile. attrs are (key, ('s', str) | ('i', int) ...) from harness' AnyValue decoding;
    trace/span links (if any) appear as ('link.trace_id', ...)/('link.span_id', ...)."""
    out = []
    for m in messages:
        d = m.dictionary
        st = d.string_table
        for rp in m.resource_profiles:
            res = {}
            for kv in rp.resource.attributes:
                k, v = h._keyvalue(kv, st)
                res[k] = v[1] if v[0] in ("s", "i", "b", "d") else v
            for sp in rp.scope_profiles:
                for p in sp.profiles:
                    c = collections.Counter()
                    fnames = set()
                    for s in p.samples:
                        names = tuple(h._stack_names(d, s.stack_index))
                        fnames.update(names)
                        attrs = []
                        for i in s.attribute_indices:
                            a = h._at(d.attribute_table, i, "attribute")
                            attrs.append((h._at(st, a.key_strindex, "string"),
                                          h._anyvalue(a.value, st)))
                        if s.link_index:
                            ln = h._at(d.link_table, s.link_index, "link")
                            attrs.append(("link.trace_id", ("s", ln.trace_id.hex())))
                            attrs.append(("link.span_id", ("s", ln.span_id.hex())))
                        c[(names, tuple(sorted(attrs)))] += h._sample_value(s)
                    out.append({
                        "resource": res,
                        "scope": (sp.scope.name, sp.scope.version),
                        "type": (h._at(st, p.sample_type.type_strindex, "string"),
                                 h._at(st, p.sample_type.unit_strindex, "string")),
                        "period_type": (h._at(st, p.period_type.type_strindex, "string"),
                                        h._at(st, p.period_type.unit_strindex, "string")),
                        "period": p.period,
                        "time": p.time_unix_nano,
                        "duration": p.duration_nano,
                        "total": sum(c.values()),
                        "samples": c,
                        "functions": fnames,
                    })
    return out


def select(views, **resource):
    """The views whose resource attributes include every key=value given."""
    return [v for v in views if all(v["resource"].get(k) == val for k, val in resource.items())]


def by_type(views):
    """{(type, unit): {'total', 'samples': Counter, 'functions'}} summed over views."""
    out = {}
    for v in views:
        e = out.setdefault(v["type"], {"total": 0, "samples": collections.Counter(),
                                       "functions": set()})
        e["total"] += v["total"]
        e["samples"].update(v["samples"])
        e["functions"] |= v["functions"]
    return out


# ---------------------------------------------------------------------------------------------
# the ingest name grammar (spec §1.3), written from the spec

APP_RE = re.compile(r"^[A-Za-z0-9_.\-/]+$")
LABEL_RE = re.compile(r"^[A-Za-z0-9_.]+$")


def parse_ingest_name(name):
    """-> (app, {label: value}). Raises ValueError where Pyroscope would answer 400, and also
    when a pair would be silently lost (no closing '}')."""
    i = name.find("{")
    app = (name if i < 0 else name[:i]).strip()
    labels = {}
    if i >= 0:
        rest = name[i + 1:]
        closed = False
        while True:
            m = re.search(r"[,}]", rest)
            if not m:
                if rest.strip():
                    raise ValueError("name %r: pair %r not committed (no ',' or '}')" % (name, rest))
                break
            pair, term, rest = rest[:m.start()], m.group(0), rest[m.end():]
            if pair.strip():
                if "=" not in pair:
                    raise ValueError("name %r: label %r without '='" % (name, pair))
                k, v = pair.split("=", 1)
                k = k.strip()
                if not k or not LABEL_RE.match(k):
                    raise ValueError("name %r: invalid label name %r" % (name, k))
                labels[k] = v.strip()
            if term == "}":
                closed = True
                break
        if not closed:
            raise ValueError("name %r: no closing '}'" % name)
    if not app:
        raise ValueError("service name is required")
    if not APP_RE.match(app):
        raise ValueError("invalid application name %r" % app)
    return app, labels


TIME_DIGITS = re.compile(r"^[0-9]+$")


# ---------------------------------------------------------------------------------------------
# a recording proxy: what the client sent, what profcol answered

class Recorded:
    def __init__(self, method, path, headers, body, status, answer):
        self.method, self.path, self.headers, self.body = method, path, headers, body
        self.status, self.answer = status, answer

    @property
    def query(self):
        return urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query, keep_blank_values=True)


class Recorder(h.LocalServer):
    """HTTP proxy on 127.0.0.1 that forwards every request to 127.0.0.1:target_port unchanged
    and records request and answer. Lets a test compare what a real client sent with what came
    out of profcol."""

    def __init__(self, target_port):
        self.target = target_port
        self.records = []
        self.lock = threading.Lock()
        rec = self

        class Handler(h.QuietHandler):
            def _any(self):
                body = self.read_body()
                hdrs = {k: v for k, v in self.headers.items()
                        if k.lower() not in ("host", "content-length", "connection")}
                try:
                    c = http.client.HTTPConnection("127.0.0.1", rec.target, timeout=30)
                    c.request(self.command, self.path, body=body, headers=hdrs)
                    r = c.getresponse()
                    answer, status = r.read(), r.status
                    ctype = r.getheader("Content-Type")
                    c.close()
                except OSError as e:
                    status, answer, ctype = 599, ("proxy: %s" % e).encode(), "text/plain"
                with rec.lock:
                    rec.records.append(Recorded(self.command, self.path, self.lower_headers(),
                                                body, status, answer))
                self.reply(min(status, 502) if status == 599 else status, ctype, answer)

            do_POST = do_GET = do_PUT = _any

        super().__init__(Handler)

    def snapshot(self):
        with self.lock:
            return list(self.records)


# ---------------------------------------------------------------------------------------------
# a recording Pyroscope server that checks the protocol (spec §1, §2)

class Upload:
    """One profile group as a Pyroscope server would store it."""

    def __init__(self, kind, app, labels, profiles, headers, query=None, raws=None):
        self.kind = kind            # 'ingest-raw', 'ingest-multipart' or 'push'
        self.app = app              # service name (ingest: name's app; push: service_name)
        self.labels = labels        # ingest: the name labels; push: every series label
        self.profiles = profiles    # [ppb.Profile]
        self.raws = raws or []      # [the pprof bytes as sent (gzip)]
        self.headers = headers      # lower-cased
        self.query = query or {}


def parse_multipart(body, ctype):
    """-> {part name: (filename or None, bytes)}. Strict: CRLF delimiters, closing delimiter."""
    m = re.search(r'boundary="?([^";]+)"?', ctype)
    if not m:
        raise ValueError("multipart Content-Type without boundary")
    delim = b"--" + m.group(1).encode()
    if not body.startswith(delim):
        raise ValueError("multipart body does not start with the boundary")
    chunks = body.split(b"\r\n" + delim)
    first = chunks[0][len(delim):]
    parts = {}
    for i, chunk in enumerate([first] + chunks[1:]):
        if chunk.startswith(b"--"):
            return parts
        if not chunk.startswith(b"\r\n"):
            raise ValueError("multipart part %d: no CRLF after the boundary" % i)
        head, sep, data = chunk[2:].partition(b"\r\n\r\n")
        if not sep:
            raise ValueError("multipart part %d: headers not terminated" % i)
        disp = ""
        for line in head.decode("utf-8").split("\r\n"):
            k, _, v = line.partition(":")
            if k.strip().lower() == "content-disposition":
                disp = v
        nm = re.search(r'\bname="([^"]*)"', disp)
        fn = re.search(r'\bfilename="([^"]*)"', disp)
        if not nm:
            raise ValueError("multipart part %d without a name" % i)
        parts[nm.group(1)] = (fn.group(1) if fn else None, data)
    raise ValueError("multipart body without closing delimiter")


class PyroscopeServer(h.LocalServer):
    """Recording Pyroscope endpoint on 127.0.0.1. Every protocol violation (per
    spec/pyroscope.md) is recorded in .violations and answered 400 (ingest) or invalid_argument
    (push); valid requests are answered 200 as Pyroscope does."""

    def __init__(self):
        self.uploads = []
        self.violations = []
        self.requests = 0
        self.cond = threading.Condition()
        srv = self

        class Handler(h.QuietHandler):
            def do_GET(self):
                srv._violation("GET %s" % self.path)
                self.reply(405, "text/plain", b"method not allowed\n")

            def do_POST(self):
                body = self.read_body()
                headers = self.lower_headers()
                path = urllib.parse.urlsplit(self.path).path
                try:
                    if path == "/ingest":
                        ups = srv._ingest(self.path, headers, body)
                    elif path == PUSH_PATH:
                        ups = srv._push(headers, body)
                    else:
                        raise ValueError("unknown path %s" % path)
                except Exception as e:
                    srv._violation("%s %s: %s: %s" % (self.command, self.path,
                                                      type(e).__name__, e))
                    if path == PUSH_PATH:
                        self.reply(400, "application/json", json.dumps(
                            {"code": "invalid_argument", "message": str(e)}).encode())
                    else:
                        self.reply(400, "text/plain", str(e).encode())
                    return
                with srv.cond:
                    srv.uploads.extend(ups)
                    srv.requests += 1
                    srv.cond.notify_all()
                if path == PUSH_PATH:
                    ct = headers.get("content-type", "")
                    self.reply(200, ct, b"{}" if ct == "application/json" else b"")
                else:
                    self.reply(200)

        super().__init__(Handler)

    def _violation(self, text):
        with self.cond:
            self.violations.append(text)
            self.cond.notify_all()

    def snapshot(self):
        with self.cond:
            return list(self.uploads)

    def wait_until(self, predicate, timeout=15.0):
        return h.cond_wait(self.cond, lambda: list(self.uploads), predicate, timeout)

    @staticmethod
    def _gzip_pprof(data, what):
        if data[:2] != b"\x1f\x8b":
            raise ValueError("%s is not gzip-compressed (got %r)" % (what, data[:4]))
        p = pprof_profile(data)
        if not len(p.sample_type):
            raise ValueError("%s: pprof without sample types" % what)
        for t in p.sample_type:
            if "-" in p.string_table[t.type]:
                raise ValueError("%s: sample type name with '-'" % what)
        locs = {loc.id for loc in p.location}
        fids = {f.id for f in p.function}
        for s in p.sample:
            if len(s.value) != len(p.sample_type):
                raise ValueError("%s: sample with %d values for %d types"
                                 % (what, len(s.value), len(p.sample_type)))
            if any(lid not in locs for lid in s.location_id):
                raise ValueError("%s: sample refers to a missing location" % what)
        for loc in p.location:
            if loc.id == 0 or any(ln.function_id not in fids for ln in loc.line):
                raise ValueError("%s: bad location %d" % (what, loc.id))
        return p

    def _ingest(self, target, headers, body):
        q = urllib.parse.parse_qs(urllib.parse.urlsplit(target).query, keep_blank_values=True)
        for k, v in q.items():
            if len(v) != 1:
                raise ValueError("query parameter %s given %d times" % (k, len(v)))
        q = {k: v[0] for k, v in q.items()}
        if "name" not in q:
            raise ValueError("no name parameter")
        app, labels = parse_ingest_name(q["name"])
        for k in ("from", "until"):
            if k in q and not TIME_DIGITS.match(q[k]):
                raise ValueError("%s=%r is not a Unix time in digits" % (k, q[k]))
        if "from" in q and "until" in q and int(q["from"]) > int(q["until"]):
            raise ValueError("from > until")
        ctype = headers.get("content-type", "")
        if q.get("format") == "pprof":
            p = self._gzip_pprof(body, "raw pprof body")
            return [Upload("ingest-raw", app, labels, [p], headers, q, [body])]
        if "multipart/form-data" in ctype:
            if "format" in q:
                raise ValueError("multipart with format=%s: Pyroscope would not parse the form"
                                 % q["format"])
            parts = parse_multipart(body, ctype)
            if "profile" not in parts:
                raise ValueError("multipart without a profile part")
            for name, (fn, _) in parts.items():
                if fn is None:
                    raise ValueError("multipart part %r without filename: Pyroscope ignores it"
                                     % name)
            if parts.get("prev_profile", (None, b""))[1]:
                raise ValueError("non-empty prev_profile")
            p = self._gzip_pprof(parts["profile"][1], "multipart profile part")
            if "sample_type_config" in parts:
                cfg = json.loads(parts["sample_type_config"][1])
                if not isinstance(cfg, dict):
                    raise ValueError("sample_type_config is not a JSON object")
                types = {p.string_table[t.type] for t in p.sample_type}
                for k in cfg:
                    if k not in types:
                        raise ValueError("sample_type_config key %r is no sample type" % k)
            return [Upload("ingest-multipart", app, labels, [p], headers, q,
                           [parts["profile"][1]])]
        raise ValueError("neither format=pprof nor multipart (format=%r, Content-Type %r)"
                         % (q.get("format"), ctype))

    def _push(self, headers, body):
        ct = headers.get("content-type", "")
        if ct not in ("application/proto", "application/json"):
            raise ValueError("push Content-Type %r" % ct)
        enc = headers.get("content-encoding", "").lower()
        if enc == "gzip":
            body = gzip.decompress(body)
        elif enc not in ("", "identity"):
            raise ValueError("push Content-Encoding %r" % enc)
        req = ppb.PushRequest()
        if ct == "application/json":
            from google.protobuf import json_format
            json_format.Parse(body.decode("utf-8"), req)
        else:
            req.ParseFromString(body)
        if not req.series:
            raise ValueError("no profiles received")
        ups = []
        for s in req.series:
            labels = {}
            for lp in s.labels:
                if lp.name in labels:
                    raise ValueError("duplicate label %r" % lp.name)
                if not re.match(r"^[a-zA-Z_][a-zA-Z0-9_]*$", lp.name):
                    raise ValueError("invalid label name %r (after sanitization)" % lp.name)
                labels[lp.name] = lp.value
            if not re.match(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$", labels.get("__name__", "")):
                raise ValueError("series without a valid __name__: %r" % labels)
            if not labels.get("service_name"):
                raise ValueError("series without service_name: %r" % labels)
            if len(labels) > 30:
                raise ValueError("%d labels per series (max 30)" % len(labels))
            profiles, raws = [], []
            for rs in s.samples:
                if rs.ID:
                    uuid.UUID(rs.ID)
                profiles.append(self._gzip_pprof(rs.raw_profile, "raw_profile"))
                raws.append(rs.raw_profile)
            if not profiles:
                raise ValueError("series without samples")
            ups.append(Upload("push", labels["service_name"], labels, profiles, headers,
                              raws=raws))
        return ups


# ---------------------------------------------------------------------------------------------
# YAML

def pyroscope_receiver_yaml(port, max_body=None):
    s = "receivers:\n  pyroscope:\n    endpoint: 127.0.0.1:%d\n" % port
    if max_body:
        s += "    max_request_body_size: %s\n" % max_body
    return s


def pyroscope_to_otlp_config(in_port, sink_url, max_body=None):
    return (pyroscope_receiver_yaml(in_port, max_body) +
            "exporters:\n  otlphttp:\n    endpoint: %s\n"
            "service:\n  pipelines:\n    profiles:\n      receivers: [pyroscope]\n"
            "      exporters: [otlphttp]\n" % sink_url)


def exporter_available(key="protocol"):
    """True if `profcol components` lists the pyroscope exporter with its config keys (it is
    not a placeholder)."""
    try:
        r = h.run_profcol(["components"])
    except Exception:
        return False
    m = re.search(r"^exporter pyroscope\b.*?(?=^\S|\Z)", r.stdout, re.S | re.M)
    return bool(m) and re.search(r"^\s+%s\s" % re.escape(key), m.group(0), re.M) is not None


# ---------------------------------------------------------------------------------------------
# the real Node client

NODE_INSTALL_TIMEOUT = 300


def ensure_node_modules():
    """npm ci (from package-lock.json) if tests/e2e/node/node_modules lacks the client."""
    marker = os.path.join(NODE_DIR, "node_modules", "@pyroscope", "nodejs", "package.json")
    if os.path.exists(marker):
        return
    npm = shutil.which("npm")
    if not npm:
        raise RuntimeError("npm not found")
    r = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=NODE_DIR,
                       capture_output=True, text=True, timeout=NODE_INSTALL_TIMEOUT,
                       stdin=subprocess.DEVNULL)
    if r.returncode != 0 or not os.path.exists(marker):
        raise RuntimeError("npm ci failed (exit %d):\n%s\n%s" % (r.returncode, r.stdout[-2000:],
                                                               r.stderr[-4000:]))


def run_node_app(server_url, app="nodeapp", tags=None, labels=None, run_ms=2500, flush_ms=1000,
                 tenant=None, timeout=60):
    """Run tests/e2e/node/app.js to completion; returns its final JSON line (dict)."""
    env = dict(os.environ)
    env.update({"PYRO_SERVER": server_url, "PYRO_APP": app,
                "PYRO_TAGS": json.dumps(tags or {}), "PYRO_LABELS": json.dumps(labels or {}),
                "PYRO_RUN_MS": str(run_ms), "PYRO_FLUSH_MS": str(flush_ms),
                "DEBUG": "pyroscope"})
    if tenant:
        env["PYRO_TENANT"] = tenant
    r = subprocess.run([shutil.which("node") or "node", "app.js"], cwd=NODE_DIR, env=env,
                       capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise AssertionError("node app.js exited %d\n--- stdout ---\n%s\n--- stderr ---\n%s"
                             % (r.returncode, r.stdout[-3000:], r.stderr[-3000:]))
    last = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if not last:
        raise AssertionError("node app.js printed no result\n%s\n%s" % (r.stdout, r.stderr))
    out = json.loads(last[-1])
    out["stderr"] = r.stderr
    return out


# ---------------------------------------------------------------------------------------------
# Go

def go_env(tmp):
    env = dict(os.environ)
    env.update({"GOCACHE": h.GO_CACHE, "GOPATH": os.path.join(tmp, "gopath"),
                "GOFLAGS": "-mod=mod", "GOPROXY": "off", "GO111MODULE": "on",
                "GOTOOLCHAIN": "local", "HOME": tmp})
    return env


def build_go_uploader(tmp):
    """go build tests/e2e/go/uploader into tmp (offline, caches in tmp). Returns the binary."""
    go = shutil.which("go")
    if not go:
        raise RuntimeError("go not found (Debian golang-go)")
    out = os.path.join(tmp, "uploader")
    r = subprocess.run([go, "build", "-o", out, "."], cwd=GO_UPLOADER_DIR, env=go_env(tmp),
                       capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise RuntimeError("go build failed:\n%s\n%s" % (r.stdout, r.stderr))
    return out


_FUNC_RE = re.compile(r"^(.*?)\s*(\S*:-?\d+:-?\d+) s=\d+")


def _raw_func(text):
    """The function name of one `pprof -raw` location line ("NAME FILE:LINE:COL s=START"): names
    may hold spaces (C++ templates, Rust's `<T as Trait>::f`); a nameless one is ""."""
    m = _FUNC_RE.match(text)
    return m.group(1) if m else text.split(" ")[0]


_LOC_RE = re.compile(r"^\s*(\d+): 0x[0-9a-fA-F]+ (?:M=\d+ )?(?:\[F\] )?(.*)$")
_SAMPLE_RE = re.compile(r"^\s+(-?[0-9][-0-9 ]*): ([0-9 ]*)$")  # -base: values may be negative
_LABEL_RE = re.compile(r"(\S+?):\[([^\]]*)\]")


def go_pprof_raw(path, tmp, pprof=None, base=None):
    """Read a pprof file with Go's own reader (`go tool pprof -raw`).

    -> {'types': [(type, unit)], 'totals': {(type, unit): total},
        'samples': {(type, unit): Counter{(names leaf first, string labels): value}},
        'functions': set}. Only labels whose values are not numbers are kept (-raw prints string
    and numeric labels alike). base: a profile subtracted first (`pprof -base`)."""
    cmd = [pprof] if pprof else [shutil.which("go") or "go", "tool", "pprof"]
    # -symbolize=none: the names as the file holds them. pprof's default symbolization
    # "simplifies" names, dropping a parameter list even inside a Go generic's shape, e.g.
    # typeEncoder.OnceValue[go.shape.func(*encoding/json.encodeState, ...)].func3 printed as
    # OnceValue[go.shape.func].func3 (the real one follows in parentheses after s=).
    r = subprocess.run(cmd + ["-raw", "-symbolize=none"] + (["-base", base] if base else []) + [path],
                       env=go_env(tmp), capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise RuntimeError("go tool pprof -raw %s failed:\n%s" % (path, r.stderr))
    lines = r.stdout.splitlines()
    section, types, raw_samples, locs, cur = None, [], [], {}, None
    for ln in lines:
        if ln == "Samples:":
            section = "header"
            continue
        if ln == "Locations":
            section = "locations"
            continue
        if ln == "Mappings":
            section = "mappings"
            continue
        if section == "header":
            types = [tuple(x.split("/", 1)) for x in ln.split()]
            section = "samples"
        elif section == "samples":
            m = _SAMPLE_RE.match(ln)
            if m:
                vals = [int(x) for x in m.group(1).split()]
                ids = [int(x) for x in m.group(2).split()]
                raw_samples.append([vals, ids, []])
            elif ln.strip() and raw_samples:
                for k, v in _LABEL_RE.findall(ln):
                    if not re.match(r"^-?\d+( \S+)?$", v):
                        raw_samples[-1][2].append((k, ("s", v)))
        elif section == "locations":
            m = _LOC_RE.match(ln)
            if m:
                cur = int(m.group(1))
                rest = m.group(2).strip()
                locs[cur] = [_raw_func(rest)] if rest else []
            elif ln.strip() and cur is not None:
                locs[cur].append(_raw_func(ln.strip()))
    samples = {t: collections.Counter() for t in types}
    for vals, ids, labels in raw_samples:
        if len(vals) != len(types):
            raise AssertionError("pprof -raw: sample with %d values for %d types" % (len(vals),
                                                                                    len(types)))
        names = tuple(n for i in ids for n in locs[i])
        key = (names, tuple(sorted(labels)))
        for t, v in zip(types, vals):
            samples[t][key] += v
    return {"types": types, "totals": {t: sum(c.values()) for t, c in samples.items()},
            "samples": samples, "functions": {n for v in locs.values() for n in v}}


def string_attrs_only(counter, keys=None):
    """Counter keyed by (names, attrs) -> same with only string attributes (optionally only the
    given keys) kept, so it compares with go_pprof_raw's string labels."""
    out = collections.Counter()
    for (names, attrs), v in counter.items():
        kept = tuple(sorted((k, val) for k, val in attrs
                            if val[0] == "s" and (keys is None or k in keys)))
        out[(names, kept)] += v
    return out


def mktemp(prefix):
    return tempfile.mkdtemp(prefix=prefix, dir=h.TMP)


def pyroscope_to_sink(test, name, max_body=None):
    """A Pyroscope receiver on a free port forwarding to a started OTLP Sink, both stopped or
    killed at the test's cleanup. Returns (port, sink, profcol)."""
    sink = h.started_sink(test)
    port = h.free_port()
    pc = h.started_profcol(test, pyroscope_to_otlp_config(port, sink.url, max_body), port, name)
    return port, sink, pc
