#!/usr/bin/python3
"""End to end: client -> profcol (otlp or pyroscope receiver) -> pyroscope exporter -> a
recording Pyroscope endpoint that checks the protocol as spec/pyroscope.md states it.

ingest (§1.2, §1.3): POST /ingest, required query params, `name` parsed with the exact grammar
(no escaping, pairs committed on ',' or '}') and validated (app name [A-Za-z0-9_.\\-/], label
names [A-Za-z0-9_.]), from/until digits, format=pprof, gzip pprof body.
push (§2): POST /push.v1.PusherService/Push, Connect headers, PushRequest decoded by hand
(3 nested messages), labels as the distributor validates them (§1.7), RawSample ID a UUID,
raw_profile a gzip pprof.

Every captured pprof is also decoded here (sample types, function names, totals against what
was sent) and fed to Go's own reader: `go tool pprof -top` (skipped only if `go` is missing)."""

import gzip
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402  (re-execs under /usr/bin/python3 if needed)

PUSH_PATH = "/push.v1.PusherService/Push"
DATA = os.path.join(h.SRC, "tests", "data")
UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
LABEL_NAME_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
METRIC_NAME_RE = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")


# ---------------------------------------------------------------------------------------------
# protobuf by hand (harness.pb_fields)

def decode_push_request(body):
    """PushRequest{1: RawProfileSeries{1: LabelPair{1 name, 2 value}, 2: RawSample{1 raw, 2 ID}}}
    -> [{'labels': [(name, value)...], 'samples': [(raw bytes, id)]}]"""
    series = []
    for f, wt, v in h.pb_fields(body):
        if f != 1 or wt != 2:
            raise ValueError("PushRequest: unexpected field %d/%d" % (f, wt))
        s = {"labels": [], "samples": []}
        for sf, swt, sv in h.pb_fields(v):
            if sf == 1 and swt == 2:
                d = {lf: lv for lf, lwt, lv in h.pb_fields(sv) if lwt == 2}
                s["labels"].append((d.get(1, b"").decode("utf-8"), d.get(2, b"").decode("utf-8")))
            elif sf == 2 and swt == 2:
                d = {rf: rv for rf, rwt, rv in h.pb_fields(sv) if rwt == 2}
                s["samples"].append((d.get(1, b""), d.get(2, b"").decode("utf-8")))
            else:
                raise ValueError("RawProfileSeries: unexpected field %d/%d" % (sf, swt))
        series.append(s)
    return series


def _packed_or_single(wt, v):
    if wt == 0:
        return [v]
    out, pos = [], 0
    while pos < len(v):
        x, pos = h._read_varint(v, pos)
        out.append(x)
    return out


def _signed(x):
    return x - (1 << 64) if x >= 1 << 63 else x


def decode_pprof(data):
    """The parts of a perftools.profiles.Profile the tests look at."""
    raw = gzip.decompress(data)
    strings, sample_types, samples, locations, functions = [], [], [], {}, {}
    period_type, time_nanos = None, 0
    for f, wt, v in h.pb_fields(raw):
        if f == 1:
            d = {a: b for a, _, b in h.pb_fields(v)}
            sample_types.append((d.get(1, 0), d.get(2, 0)))
        elif f == 2:
            loc_ids, values = [], []
            for sf, swt, sv in h.pb_fields(v):
                if sf == 1:
                    loc_ids += _packed_or_single(swt, sv)
                elif sf == 2:
                    values += [_signed(x) for x in _packed_or_single(swt, sv)]
            samples.append((loc_ids, values))
        elif f == 4:
            lid, fids = 0, []
            for sf, swt, sv in h.pb_fields(v):
                if sf == 1:
                    lid = sv
                elif sf == 4:
                    fids.append({a: b for a, _, b in h.pb_fields(sv)}.get(1, 0))
            locations[lid] = fids
        elif f == 5:
            d = {a: b for a, _, b in h.pb_fields(v)}
            functions[d.get(1, 0)] = d.get(2, 0)
        elif f == 6:
            strings.append(v.decode("utf-8"))
        elif f == 9:
            time_nanos = v
        elif f == 11:
            d = {a: b for a, _, b in h.pb_fields(v)}
            period_type = (d.get(1, 0), d.get(2, 0))
    if not strings or strings[0] != "":
        raise ValueError("pprof string table must start with \"\"")

    def s(i):
        return strings[i]

    fnames = set()
    for fids in locations.values():
        for fid in fids:
            fnames.add(s(functions[fid]))
    return {
        "sample_types": [(s(t), s(u)) for t, u in sample_types],
        "period_type": (s(period_type[0]), s(period_type[1])) if period_type else None,
        "totals": [sum(vals[i] for _, vals in samples) for i in range(len(sample_types))],
        "n_samples": len(samples),
        "functions": fnames,
        "time_nanos": time_nanos,
    }


# ---------------------------------------------------------------------------------------------
# the ingest name grammar (spec §1.3), written from the spec, not from profcol

APP_CHARS = re.compile(r"^[A-Za-z0-9_.\-/]+$")
LABEL_CHARS = re.compile(r"^[A-Za-z0-9_.]+$")


def parse_ingest_name(name):
    """-> (app, {label: value}); raises ValueError where Pyroscope answers 400."""
    s = name + "{"          # the parser appends '{' so a bare app works
    i = s.index("{")
    app = s[:i].strip()
    labels, key, buf, in_value, closed = {}, None, "", False, False
    for ch in s[i + 1:]:
        if closed:
            break           # anything after '}' is ignored
        if not in_value:
            if ch == "=":
                key, buf, in_value = buf.strip(), "", True
            elif ch == "}":
                closed = True
            else:
                buf += ch
        else:
            if ch in ",}":
                labels[key] = buf.strip()   # committed only on ',' or '}'
                key, buf, in_value = None, "", False
                closed = ch == "}"
            else:
                buf += ch
    if not closed:
        raise ValueError("name %r: no closing '}' (the last pair would be lost)" % name)
    if not app:
        raise ValueError("service name is required")
    if not APP_CHARS.match(app):
        raise ValueError("invalid app name %r" % app)
    for k in labels:
        if not k or not LABEL_CHARS.match(k):
            raise ValueError("invalid label name %r" % k)
        if k == "__name__":
            raise ValueError("__name__ inside braces would override the app name")
    return app, labels


# ---------------------------------------------------------------------------------------------
# the recording Pyroscope endpoint

class Captured:
    def __init__(self, kind, headers, query, series, violations):
        self.kind = kind            # "ingest" or "push"
        self.headers = headers      # lower-cased names
        self.query = query          # ingest: {param: value}
        self.series = series        # [{'labels': {..}, 'pprofs': [bytes], 'ids': [..]}]
        self.violations = violations


class PyroscopeSink(h.LocalServer):
    """Records what the pyroscope exporter sends (checked against the protocol as it arrives) and
    answers 200, or `status` with a Connect error."""

    def __init__(self):
        self.captured = []
        self.cond = threading.Condition()
        self.status = 200
        sink = self

        class Handler(h.QuietHandler):
            def do_GET(self):
                self.reply(405, "text/plain", b"method not allowed\n")

            def do_POST(self):
                c = sink._check(self.path, self.lower_headers(), self.read_body())
                with sink.cond:
                    sink.captured.append(c)
                    status = sink.status
                    sink.cond.notify_all()
                if status != 200:
                    self.reply(status, "application/json",
                               b'{"code":"unavailable","message":"test"}')
                elif c.kind == "push":
                    self.reply(200, "application/proto", b"")
                else:
                    self.reply(200, None, b"")

        super().__init__(Handler)

    def wait(self, n, timeout=15.0):
        return h.cond_wait(self.cond, lambda: list(self.captured), lambda c: len(c) >= n, timeout)

    def _check(self, path, headers, raw):
        v = []
        url = urllib.parse.urlsplit(path)
        if url.path == "/ingest":
            return self._check_ingest(url, headers, raw, v)
        if url.path == PUSH_PATH:
            return self._check_push(headers, raw, v)
        v.append("unexpected path %r" % url.path)
        return Captured("?", headers, {}, [], v)

    def _check_ingest(self, url, headers, raw, v):
        q = {}
        for k, val in urllib.parse.parse_qsl(url.query, keep_blank_values=True,
                                             strict_parsing=True):
            if k in q:
                v.append("query param %s repeated" % k)
            q[k] = val
        for k in ("name", "from", "until", "format"):
            if k not in q:
                v.append("query param %s missing" % k)
        if q.get("format") != "pprof":
            v.append("format=%r, want pprof" % q.get("format"))
        for k in ("from", "until"):
            if not re.fullmatch(r"[0-9]{1,19}", q.get(k, "")):
                v.append("%s=%r is not a unix time" % (k, q.get(k)))
        labels = {}
        try:
            app, labels = parse_ingest_name(q.get("name", ""))
            labels = dict(labels, service_name=app)
        except ValueError as e:
            v.append("name: %s" % e)
        if not raw.startswith(b"\x1f\x8b"):
            v.append("ingest body is not gzip")
        series = [{"labels": labels, "pprofs": [raw], "ids": []}]
        return Captured("ingest", headers, q, series, v)

    def _check_push(self, headers, raw, v):
        ctype = headers.get("content-type", "")
        if ctype != "application/proto":
            v.append("Content-Type %r, want application/proto" % ctype)
        if headers.get("connect-protocol-version") != "1":
            v.append("Connect-Protocol-Version %r" % headers.get("connect-protocol-version"))
        if headers.get("content-encoding", "identity") != "identity":
            raw = gzip.decompress(raw)
        series = []
        try:
            decoded = decode_push_request(raw)
        except (ValueError, UnicodeDecodeError) as e:
            v.append("PushRequest does not decode: %s" % e)
            decoded = []
        if not decoded:
            v.append("empty PushRequest (Pyroscope: 'no profiles received')")
        for s in decoded:
            names = [n for n, _ in s["labels"]]
            if names != sorted(names):
                v.append("labels not sorted: %s" % names)
            if len(set(names)) != len(names):
                v.append("duplicate label names: %s" % names)
            labels = dict(s["labels"])
            for n in names:
                if n != "__name__" and (not LABEL_NAME_RE.match(n) or n.startswith("__")):
                    v.append("label name %r fails distributor validation" % n)
            if not METRIC_NAME_RE.match(labels.get("__name__", "")):
                v.append("__name__ %r is not a valid metric name" % labels.get("__name__"))
            if not labels.get("service_name"):
                v.append("service_name missing or empty")
            if len(names) > 30:
                v.append("%d labels > 30" % len(names))
            for raw_profile, sid in s["samples"]:
                if not raw_profile.startswith(b"\x1f\x8b"):
                    v.append("raw_profile is not gzip")
                if not UUID_RE.match(sid):
                    v.append("RawSample.ID %r is not a UUIDv4" % sid)
            series.append({"labels": labels, "pprofs": [r for r, _ in s["samples"]],
                           "ids": [i for _, i in s["samples"]]})
        return Captured("push", headers, {}, series, v)


# ---------------------------------------------------------------------------------------------

def exporter_config(recv_yaml, sink_url, protocol, extra=""):
    return (recv_yaml +
            "exporters:\n  pyroscope:\n    endpoint: %s\n    protocol: %s\n%s" % (
                sink_url, protocol, extra) +
            "service:\n  pipelines:\n    profiles:\n      receivers: [%s]\n"
            "      exporters: [pyroscope]\n" % recv_yaml.split("\n")[1].strip().rstrip(":"))


def pyroscope_receiver_yaml(port):
    return "receivers:\n  pyroscope:\n    endpoint: 127.0.0.1:%d\n" % port


def go_top(test, data, sample_index=None):
    """Run `go tool pprof -top` on a captured pprof; returns its output (or skips)."""
    go = shutil.which("go")
    if not go:
        test.skipTest("go is not installed")
    d = tempfile.mkdtemp(prefix="pyro-pprof-", dir=h.TMP)
    path = os.path.join(d, "captured.pb.gz")
    with open(path, "wb") as f:
        f.write(data)
    args = [go, "tool", "pprof", "-top"]
    if sample_index:
        args.append("-sample_index=" + sample_index)
    env = dict(os.environ, HOME=d, GOCACHE=h.GO_CACHE, GOPROXY="off")
    r = subprocess.run(args + [path], capture_output=True, text=True, timeout=60, env=env)
    test.assertEqual(r.returncode, 0, "go tool pprof failed:\n%s%s" % (r.stdout, r.stderr))
    return r.stdout


class PyroscopeExporterTest(unittest.TestCase):
    def setUp(self):
        self.sink = PyroscopeSink().start()
        self.procs = []

    def tearDown(self):
        errors = []
        for p in self.procs:
            try:
                p.stop()
            except AssertionError as e:
                errors.append(str(e))
        self.sink.stop()
        if errors:
            self.fail("\n".join(errors))

    def start(self, config, port):
        p = h.Profcol(config, wait_ports=[port], name="pyro").start()
        self.procs.append(p)
        return p

    def assert_no_violations(self, caps):
        bad = [v for c in caps for v in c.violations]
        self.assertEqual(bad, [], "protocol violations")

    def otlp_roundtrip(self, protocol):
        port = h.free_port()
        extra = ("    tenant_id: acme\n    basic_auth:\n      username: u\n      password: p\n"
                 "    external_labels:\n      cluster: eu-1\n")
        self.start(exporter_config(h.otlp_receiver_yaml(port), self.sink.url, protocol, extra),
                   port)
        req = h.make_request(services=("checkout", "cart"), seed=3)
        r = h.post(port, req.SerializeToString())
        self.assertEqual(r.status, 200, r)
        want = h.totals(h.summarize(req))
        n = 1 if protocol == "push" else 4   # one pprof per (resource, profile): 2 x 2
        caps = self.sink.wait(n)
        time.sleep(0.2)
        caps = list(self.sink.captured)
        self.assertEqual(len(caps), n)
        self.assert_no_violations(caps)
        for c in caps:
            self.assertEqual(c.kind, protocol)
            self.assertEqual(c.headers.get("x-scope-orgid"), "acme")
            self.assertEqual(c.headers.get("authorization"), "Basic dTpw")
        series = [s for c in caps for s in c.series]
        self.assertEqual(len(series), 4)
        got = {}
        for s in series:
            lab = s["labels"]
            svc = lab["service_name"]
            self.assertIn(svc, ("checkout", "cart"))
            self.assertEqual(lab["cluster"], "eu-1")
            self.assertEqual(lab["host_name"], "node-3")
            self.assertEqual(lab["telemetry_sdk_language"], "go")   # strindex form
            self.assertRegex(lab["process_pid"], r"^\d+$")
            self.assertRegex(lab["service_version"], r"^1\.3\.\d$")
            self.assertNotIn("service.name", lab)
            self.assertEqual(len(s["pprofs"]), 1)
            p = decode_pprof(s["pprofs"][0])
            self.assertEqual(len(p["sample_types"]), 1)
            st = p["sample_types"][0]
            if protocol == "push":
                self.assertEqual(lab["__name__"],
                                 {"cpu": "process_cpu", "alloc_space": "memory"}[st[0]])
            else:
                self.assertNotIn("__name__", lab)
                self.assertEqual(int(caps[series.index(s)].query["from"]), h.BASE_TIME // 10**9 + 3)
            got[(svc, st[0], st[1])] = p["totals"][0]
            self.assertTrue(p["functions"] & {f[0] for f in h.FUNCTIONS})
        self.assertEqual(got, want)
        return series

    def test_push_from_otlp(self):
        series = self.otlp_roundtrip("push")
        ids = [i for s in series for i in s["ids"]]
        self.assertEqual(len(set(ids)), len(ids))
        cpu = next(s for s in series if s["labels"]["__name__"] == "process_cpu")
        out = go_top(self, cpu["pprofs"][0])
        for fn in ("runtime.main", "net/http.(*conn).serve"):
            self.assertIn(fn, out)

    def test_ingest_from_otlp(self):
        series = self.otlp_roundtrip("ingest")
        mem = next(s for s in series if decode_pprof(s["pprofs"][0])["sample_types"][0][0] ==
                   "alloc_space")
        out = go_top(self, mem["pprofs"][0])
        self.assertIn("runtime.main", out)

    def test_go_fixtures_through_pyroscope_receiver(self):
        """Real Go pprof via the pyroscope receiver (tenant header kept as metadata) out through
        the exporter with tenant_from_request; Go's reader accepts what arrives."""
        port = h.free_port()
        extra = "    tenant_from_request: true\n    tenant_id: fallback\n"
        for protocol in ("push", "ingest"):
            self.sink.captured.clear()
            cfg = exporter_config(pyroscope_receiver_yaml(port), self.sink.url, protocol, extra)
            p = self.start(cfg, port)
            for fixture, svc in (("go-cpu.pb.gz", "gocpu"), ("go-heap.pb.gz", "goheap")):
                with open(os.path.join(DATA, fixture), "rb") as f:
                    body = f.read()
                name = urllib.parse.quote("%s{env=staging,k8s.ns=shop}" % svc, safe="")
                r = h.post(port, body, content_type="application/octet-stream",
                           path="/ingest?name=%s&format=pprof&from=1&until=2" % name,
                           headers={"X-Scope-OrgID": "team-x"})
                self.assertEqual(r.status, 200, r)
            caps = self.sink.wait(2)
            self.assertEqual(len(caps), 2)
            self.assert_no_violations(caps)
            for c in caps:
                self.assertEqual(c.headers.get("x-scope-orgid"), "team-x")
                s = c.series[0]
                pp = decode_pprof(s["pprofs"][0])
                types = [t for t, _ in pp["sample_types"]]
                lab = s["labels"]
                self.assertEqual(lab["env"], "staging")
                self.assertEqual(lab["k8s_ns"], "shop")
                if lab["service_name"] == "gocpu":
                    self.assertEqual(types, ["samples", "cpu"])
                    if protocol == "push":
                        self.assertEqual(lab["__name__"], "process_cpu")
                    self.assertIn("main.busy", go_top(self, s["pprofs"][0]))
                else:
                    self.assertEqual(lab["service_name"], "goheap")
                    self.assertEqual(types, ["alloc_objects", "alloc_space", "inuse_objects",
                                             "inuse_space"])
                    if protocol == "push":
                        self.assertEqual(lab["__name__"], "memory")
                    out = go_top(self, s["pprofs"][0], "inuse_space")
                    self.assertIn("main.allocate", out)
            p.stop()
            self.procs.remove(p)

    def test_backend_errors_reach_the_client(self):
        """Without the sending queue, the backend's answer reaches the client (with the queue,
        retryable failures are retried; see test_reliability.py)."""
        port = h.free_port()
        no_queue = ("    sending_queue:\n      enabled: false\n"
                    "    retry_on_failure:\n      enabled: false\n")
        self.start(exporter_config(h.otlp_receiver_yaml(port), self.sink.url, "push", no_queue),
                   port)
        body = h.make_request(seed=5).SerializeToString()
        # retryable (429 as overload, the others as unavailable), as the OTLP exporters do
        for backend, client in ((503, 503), (502, 503), (504, 503), (429, 429)):
            self.sink.status = backend
            r = h.post(port, body)
            self.assertEqual(r.status, client, "backend %d: %r" % (backend, r))
        self.sink.status = 400
        r = h.post(port, body)
        self.assertEqual(r.status, 400, r)
        self.sink.status = 200
        r = h.post(port, body)
        self.assertEqual(r.status, 200, r)
        self.assert_no_violations(self.sink.captured)


class GrammarSelfTest(unittest.TestCase):
    """The checker's own name parser follows §1.3."""

    def test_grammar(self):
        self.assertEqual(parse_ingest_name("app{a=b,c=d}"), ("app", {"a": "b", "c": "d"}))
        self.assertEqual(parse_ingest_name(" app { a = x=y{/ }"), ("app", {"a": "x=y{/"}))
        self.assertEqual(parse_ingest_name("app{}"), ("app", {}))
        self.assertEqual(parse_ingest_name("app{a=}"), ("app", {"a": ""}))
        for bad in ("{a=b}", "my app{}", "app{a-b=c}", "app{a=b", "app{__name__=x}"):
            with self.assertRaises(ValueError, msg=bad):
                parse_ingest_name(bad)


if __name__ == "__main__":
    unittest.main()
