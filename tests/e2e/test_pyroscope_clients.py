#!/usr/bin/python3
"""Real Pyroscope clients against profcol's pyroscope receiver.

Node: the real @pyroscope/nodejs client (tests/e2e/node, installed with `npm ci` from the
lockfile if node_modules is missing) profiles app.js (wall + heap, wrapWithLabels with trace_id
/ span_id) and uploads to profcol through a recording proxy, so the test knows exactly what the
client sent:
  * pyroscope receiver -> otlphttp -> harness' recording sink: service.name, tags as resource
    attributes, the client's scope, per sample type totals and every (stack, labels) -> value
    equal to what the client sent, the client's functions, trace_id/span_id sample attributes;
  * pyroscope receiver -> pyroscope exporter (protocol ingest and push) -> a recording
    Pyroscope server that checks the protocol (spec/pyroscope.md §1-2): same checks on the
    pprofs it receives, the client's tenant passed on.
Go: a stdlib-only program (tests/e2e/go/uploader, built offline in a temp dir) profiles itself
and uploads raw /ingest, multipart /ingest and Connect Push; what reaches the OTLP sink per
upload and sample type equals what `go tool pprof -raw` reads from the same files."""

import base64
import collections
import gzip
import json
import os
import re
import secrets
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
import pyro_support as ps  # noqa: E402

NODE_APP = "nodeapp"
# @pyroscope/nodejs 0.6.4: wall from the time profiler, in-use heap from the heap profiler
NODE_TYPES = {("samples", "count"), ("wall", "nanoseconds"), ("inuse_objects", "count"),
              ("inuse_space", "bytes")}
NODE_FUNCS = ("busyWork", "busyWorkInner", "busyWorkTraced", "allocateObjects")
GO_CPU_TYPES = {("samples", "count"), ("cpu", "nanoseconds")}
GO_HEAP_TYPES = {("alloc_objects", "count"), ("alloc_space", "bytes"), ("inuse_objects", "count"),
                 ("inuse_space", "bytes")}


def node_client_version():
    with open(os.path.join(ps.NODE_DIR, "node_modules", "@pyroscope", "nodejs",
                           "package.json")) as f:
        return json.load(f)["version"]


def has_func(names, fn):
    """Node function names look like './app.js:busyWork:34'; Go ones like 'main.busyLoop'."""
    pat = re.compile(r"(^|[:/. ])%s(:|$)" % re.escape(fn))
    return any(pat.search(n) for n in names)


class NodeClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        ps.ensure_node_modules()
        cls.version = node_client_version()

    def setUp(self):
        self.trace_id = secrets.token_hex(16)
        self.span_id = secrets.token_hex(8)
        self.tags = {"env": "e2e", "region": "eu-%d" % secrets.randbelow(100)}
        self.tenant = "tenant-%s" % secrets.token_hex(3)
        self.cleanups = []

    def tearDown(self):
        for fn in reversed(self.cleanups):
            fn()

    def start(self, config, port):
        pc = h.Profcol(config, wait_ports=[port], name="pyro-node")
        self.cleanups.append(pc.kill)
        return pc.start()

    def run_client(self, profcol_port):
        """Run the Node app through a recording proxy; return the pprof views it sent (each
        answered 200) and the records."""
        rec = ps.Recorder(profcol_port).start()
        self.cleanups.append(rec.stop)
        out = ps.run_node_app(rec.url, NODE_APP, self.tags,
                              {"trace_id": self.trace_id, "span_id": self.span_id},
                              run_ms=2500, flush_ms=1000, tenant=self.tenant)
        self.assertTrue(out["done"], out)
        self.assertGreater(out["labelled"], 0, out)
        records = rec.snapshot()
        self.assertTrue(records, "the Node client sent nothing\n%s" % out["stderr"][-2000:])
        for r in records:
            self.assertEqual((r.method, r.path.split("?")[0], r.status), ("POST", "/ingest", 200),
                             "%s %s -> %d %r" % (r.method, r.path, r.status, r.answer[:300]))
            self.assertEqual(r.answer, b"", "Pyroscope answers 200 with an empty body")
        views = [ps.pprof_view(r.body) for r in records]
        sent_types = {t for v in views for t in v["types"]}
        self.assertEqual(sent_types, NODE_TYPES,
                         "the client sent other sample types (a new client version, or no heap "
                         "flush round during the run?)")
        return views, records

    def check_sent_vs_received(self, sent, got_by_type, where):
        """Per sample type: total and every (stack, labels) -> value equal what was sent."""
        want = ps.merge_views(sent)
        self.assertEqual(set(got_by_type), set(want["totals"]), where)
        for t in want["totals"]:
            self.assertEqual(got_by_type[t]["total"], want["totals"][t], "%s %s total" % (where, t))
            self.assertEqual(got_by_type[t]["samples"], want["samples"][t],
                             "%s %s: samples differ from what the client sent" % (where, t))
        for fn in NODE_FUNCS:
            self.assertTrue(has_func(want["functions"], fn), "client did not report %s" % fn)
        wall = got_by_type[("wall", "nanoseconds")]["samples"]
        traced = [(names, attrs) for (names, attrs), v in wall.items()
                  if ("trace_id", ("s", self.trace_id)) in attrs and
                  ("span_id", ("s", self.span_id)) in attrs and v > 0]
        self.assertTrue(traced, "%s: no wall sample carries trace_id/span_id" % where)
        self.assertTrue(any(has_func(names, "busyWorkTraced") for names, _ in traced),
                        "%s: no labelled sample inside busyWorkTraced" % where)
        heap = got_by_type[("inuse_space", "bytes")]
        self.assertTrue(has_func(heap["functions"], "allocateObjects"), where)
        self.assertTrue(has_func(got_by_type[("wall", "nanoseconds")]["functions"], "busyWork"),
                        where)

    def test_node_client_to_otlp(self):
        sink = h.Sink().start()
        self.cleanups.append(sink.stop)
        port = h.free_port()
        pc = self.start(ps.pyroscope_to_otlp_config(port, sink.url), port)
        sent, records = self.run_client(port)
        want = ps.merge_views(sent)["totals"]

        def arrived(reqs):
            msgs = [r.message for r in reqs if r.message is not None]
            got = {t: e["total"] for t, e in ps.by_type(ps.otlp_views(msgs)).items()}
            return all(got.get(t, 0) >= v for t, v in want.items())

        sink.wait_until(arrived, 15)
        pc.stop()
        views = ps.otlp_views(sink.messages())
        self.assertTrue(views, "nothing reached the OTLP sink")
        for v in views:
            res = v["resource"]
            self.assertEqual(res.get("service.name"), NODE_APP)
            for k, val in self.tags.items():
                self.assertEqual(res.get(k), val, "tag %s as a resource attribute" % k)
            self.assertEqual(res.get("pyroscope.spy"), "nodespy")
            self.assertEqual(res.get("process.runtime.name"), "nodejs")
            self.assertNotIn("otel.scope.name", res)
            self.assertEqual(v["scope"], ("com.grafana.pyroscope/nodejs", self.version))
            self.assertGreater(v["time"], 0)
        self.check_sent_vs_received(sent, ps.by_type(views), "OTLP sink")
        # the tenant header travelled as metadata only: not as an attribute
        self.assertFalse(any(self.tenant in repr(v["resource"]) for v in views))

    def test_node_client_through_pyroscope_exporter(self):
        ingest_srv = ps.PyroscopeServer().start()
        push_srv = ps.PyroscopeServer().start()
        self.cleanups += [ingest_srv.stop, push_srv.stop]
        port = h.free_port()
        cfg = (ps.pyroscope_receiver_yaml(port) +
               "exporters:\n"
               "  pyroscope/ingest:\n    endpoint: %s\n    protocol: ingest\n"
               "    tenant_from_request: true\n"
               "  pyroscope/push:\n    endpoint: %s\n    protocol: push\n"
               "    tenant_from_request: true\n"
               "service:\n  pipelines:\n    profiles:\n      receivers: [pyroscope]\n"
               "      exporters: [pyroscope/ingest, pyroscope/push]\n"
               % (ingest_srv.url, push_srv.url))
        pc = self.start(cfg, port)
        sent, _ = self.run_client(port)
        want = ps.merge_views(sent)["totals"]

        def complete(uploads):
            got = collections.Counter()
            for u in uploads:
                for p in u.profiles:
                    got.update(ps.pprof_view(p)["totals"])
            return all(got.get(t, 0) >= v for t, v in want.items())

        for name, srv in (("ingest", ingest_srv), ("push", push_srv)):
            srv.wait_until(complete, 20)
        pc.stop()
        for name, srv in (("ingest", ingest_srv), ("push", push_srv)):
            with self.subTest(name):
                self.assertEqual(srv.violations, [], "%s: protocol violations" % name)
                uploads = srv.snapshot()
                self.assertTrue(uploads, "%s: nothing arrived" % name)
                got = {}
                for u in uploads:
                    self.assertEqual(u.app, NODE_APP, name)
                    self.assertEqual(u.headers.get("x-scope-orgid"), self.tenant,
                                     "%s: tenant_from_request" % name)
                    for k, val in self.tags.items():
                        self.assertEqual(u.labels.get(k), val, "%s: tag %s" % (name, k))
                    # resource attribute pyroscope.spy: the ingest spyName (which Pyroscope turns
                    # into the pyroscope_spy label), a pyroscope_spy label with push
                    if name == "ingest":
                        self.assertTrue(u.kind.startswith("ingest"), u.kind)
                        self.assertEqual(u.query.get("spyName"), "nodespy", name)
                        self.assertNotIn("pyroscope_spy", u.labels, "spy sent twice")
                    else:
                        self.assertEqual(u.labels.get("pyroscope_spy"), "nodespy", name)
                        self.assertEqual(u.kind, "push")
                        self.assertEqual(u.labels.get("service_name"), NODE_APP)
                        self.assertIn(u.labels.get("__name__"), ("wall", "memory"), u.labels)
                    for p in u.profiles:
                        v = ps.pprof_view(p)
                        for t in v["types"]:
                            e = got.setdefault(t, {"total": 0, "samples": collections.Counter(),
                                                   "functions": set()})
                            e["total"] += v["totals"][t]
                            e["samples"].update(v["samples"][t])
                            e["functions"] |= v["functions"]
                # labels the exporter adds to pprof samples from the resource are not the
                # client's: compare only the client's own sample labels
                client_keys = {k for v in sent for c in v["samples"].values()
                               for (_, attrs) in c for k, _ in attrs}
                for e in got.values():
                    e["samples"] = collections.Counter(
                        {(n, tuple(a for a in attrs if a[0] in client_keys)): val
                         for (n, attrs), val in e["samples"].items()})
                self.check_sent_vs_received(sent, got, "pyroscope exporter (%s)" % name)


def uploaded_totals(uploads, files):
    """Expected totals per (upload kind, sample type), as Go's own reader sees the files."""
    want = {}
    for u in uploads:
        for f in u["files"]:
            for t, v in files[f]["totals"].items():
                want[(u["kind"], t)] = want.get((u["kind"], t), 0) + v
    return want


class GoClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = ps.mktemp("go-")
        cls.uploader = ps.build_go_uploader(cls.tmp)

    def run_uploader(self, port):
        """Run the Go uploader against profcol; returns (uploads, {file: go_pprof_raw view},
        {file: time_nanos}, trace_id, span_id)."""
        trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
        out = ps.mktemp("go-out-")
        r = subprocess.run([self.uploader, "-addr", "http://127.0.0.1:%d" % port, "-out", out,
                            "-trace-id", trace_id, "-span-id", span_id, "-cpu-ms", "300"],
                           capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        self.assertEqual(r.returncode, 0, r.stderr)
        uploads = [json.loads(ln) for ln in r.stdout.splitlines() if ln.strip()]
        self.assertEqual([u["kind"] for u in uploads], ["raw", "multipart", "push"])
        for u in uploads:
            self.assertEqual(u["status"], 200, u)
            self.assertEqual(u["body"], "", u)
        files = {f: ps.go_pprof_raw(os.path.join(out, f), self.tmp)
                 for f in ("cpu.pb.gz", "heap.pb.gz")}
        times = {}
        for f in files:
            with open(os.path.join(out, f), "rb") as fh:
                times[f] = ps.pprof_view(fh.read())["time_nanos"]
        self.assertEqual(set(files["cpu.pb.gz"]["types"]), GO_CPU_TYPES)
        self.assertEqual(set(files["heap.pb.gz"]["types"]), GO_HEAP_TYPES)
        for fn in ("main.busyLoop", "main.tracedWork"):
            self.assertIn(fn, files["cpu.pb.gz"]["functions"])
        return uploads, files, times, trace_id, span_id

    def test_go_uploads_raw_multipart_push_to_otlp(self):
        port, sink, pc = ps.pyroscope_to_sink(self, "pyro-go")
        uploads, files, times, trace_id, span_id = self.run_uploader(port)
        want = uploaded_totals(uploads, files)

        def arrived(reqs):
            msgs = [x.message for x in reqs if x.message is not None]
            got = collections.Counter()
            for v in ps.otlp_views(msgs):
                got[(v["resource"].get("upload"), v["type"])] += v["total"]
            return all(got.get(k, 0) >= v for k, v in want.items())

        sink.wait_until(arrived, 15)
        pc.stop()
        views = ps.otlp_views(sink.messages())
        self.assertEqual({v["resource"].get("upload") for v in views},
                         {"raw", "multipart", "push"})
        for u in uploads:
            kind = u["kind"]
            with self.subTest(kind):
                sel = ps.select(views, upload=kind)
                for v in sel:
                    res = v["resource"]
                    self.assertEqual(res.get("service.name"), "goapp")
                    self.assertEqual(res.get("env"), "test")
                    if kind != "push":
                        self.assertEqual(res.get("pyroscope.spy"), "gospy")
                    self.assertIn(v["time"], [times[f] for f in u["files"]],
                                  "profile time = the pprof's time_nanos")
                got = ps.by_type(sel)
                expect_types = set()
                for f in u["files"]:
                    expect_types |= set(files[f]["types"])
                self.assertEqual(set(got), expect_types)
                for t in expect_types:
                    wt = sum(files[f]["totals"].get(t, 0) for f in u["files"])
                    self.assertEqual(got[t]["total"], wt, "%s %s total vs go tool pprof" % (kind, t))
                    ws = collections.Counter()
                    for f in u["files"]:
                        ws.update(files[f]["samples"].get(t, {}))
                    self.assertEqual(ps.string_attrs_only(got[t]["samples"]), ws,
                                     "%s %s: (stack, labels) -> value vs go tool pprof" % (kind, t))
                if "cpu.pb.gz" in u["files"]:
                    cpu = got[("cpu", "nanoseconds")]
                    for fn in ("main.busyLoop", "main.hashLoop", "main.tracedWork",
                               "main.spinLoop", "runtime/pprof.Do"):
                        self.assertIn(fn, cpu["functions"], kind)
                    traced = [names for (names, attrs), val in cpu["samples"].items()
                              if ("trace_id", ("s", trace_id)) in attrs and
                              ("span_id", ("s", span_id)) in attrs]
                    self.assertTrue(traced, "%s: no CPU sample with the pprof.Do labels" % kind)
                    # Go's sigprof tags a sample whose stack it could not walk (a signal in the
                    # VDSO, a prologue, a stack switch) with the goroutine's labels under
                    # placeholder frames (runtime._System, _VDSO, _ExternalCode, _GC): such a
                    # stack is the runtime's, not a lost frame
                    placeholder = {"runtime._System", "runtime._VDSO", "runtime._ExternalCode",
                                   "runtime._GC"}
                    odd = [n for n in traced if "main.tracedWork" not in n and
                           "runtime/pprof.Do" not in n and not placeholder & set(n)]
                    self.assertEqual(odd, [], kind)
                    self.assertTrue(any("main.tracedWork" in n for n in traced), kind)
                if "heap.pb.gz" in u["files"]:
                    self.assertIn("main.allocLoop", got[("inuse_space", "bytes")]["functions"])

    def test_go_uploads_through_pyroscope_exporter(self):
        """What the pyroscope exporter sends is read by Go's own pprof reader and equals, per
        upload and sample type, what the Go program uploaded."""
        servers = {"ingest": ps.PyroscopeServer().start(), "push": ps.PyroscopeServer().start()}
        for srv in servers.values():
            self.addCleanup(srv.stop)
        port = h.free_port()
        cfg = (ps.pyroscope_receiver_yaml(port) + "exporters:\n" +
               "".join("  pyroscope/%s:\n    endpoint: %s\n    protocol: %s\n"
                       % (p, srv.url, p) for p, srv in servers.items()) +
               "service:\n  pipelines:\n    profiles:\n      receivers: [pyroscope]\n"
               "      exporters: [pyroscope/ingest, pyroscope/push]\n")
        pc = h.started_profcol(self, cfg, port, "pyro-go-exp")
        uploads, files, _, trace_id, span_id = self.run_uploader(port)
        want = uploaded_totals(uploads, files)

        def complete(ups):
            got = collections.Counter()
            for up in ups:
                for p in up.profiles:
                    for t, v in ps.pprof_view(p)["totals"].items():
                        got[(up.labels.get("upload"), t)] += v
            return all(got.get(k, 0) >= v for k, v in want.items())

        for srv in servers.values():
            srv.wait_until(complete, 20)
        pc.stop()
        for proto, srv in servers.items():
            with self.subTest(proto):
                self.assertEqual(srv.violations, [], "%s: protocol violations" % proto)
                got, cpu_files = {}, []
                for i, up in enumerate(srv.snapshot()):
                    self.assertEqual(up.app, "goapp")
                    self.assertEqual(up.labels.get("env"), "test")
                    for j, raw in enumerate(up.raws):
                        path = os.path.join(ps.mktemp("sent-"), "p%d-%d.pb.gz" % (i, j))
                        with open(path, "wb") as fh:
                            fh.write(raw)
                        v = ps.go_pprof_raw(path, self.tmp)   # Go's reader, on the bytes sent
                        if ("cpu", "nanoseconds") in v["types"]:
                            cpu_files.append(path)
                        for t in v["types"]:
                            e = got.setdefault((up.labels.get("upload"), t),
                                               {"total": 0, "samples": collections.Counter()})
                            e["total"] += v["totals"][t]
                            e["samples"].update(v["samples"][t])
                self.assertEqual({k: e["total"] for k, e in got.items()}, want, proto)
                for u in uploads:
                    for f in u["files"]:
                        for t in files[f]["types"]:
                            self.assertEqual(
                                ps.string_attrs_only(got[(u["kind"], t)]["samples"],
                                                     ("span_id", "trace_id")),
                                ps.string_attrs_only(files[f]["samples"][t]),
                                "%s %s %s: (stack, labels) -> value" % (proto, u["kind"], t))
                traced = [k for (kind, t), e in got.items() if t == ("cpu", "nanoseconds")
                          for k in e["samples"] if ("trace_id", ("s", trace_id)) in k[1] and
                          ("span_id", ("s", span_id)) in k[1]]
                self.assertTrue(traced, "%s: span_id/trace_id labels lost" % proto)
                self.assertTrue(cpu_files, proto)
                top = subprocess.run(["go", "tool", "pprof", "-top", "-cum", "-nodecount=200",
                                      cpu_files[0]], env=ps.go_env(self.tmp),
                                     capture_output=True, text=True, timeout=60)
                self.assertEqual(top.returncode, 0, top.stderr)
                for fn in ("main.busyLoop", "main.tracedWork"):
                    self.assertIn(fn, top.stdout, "%s: go tool pprof -top" % proto)


class GoReaderTest(unittest.TestCase):
    """The oracle itself: Go's reader (go_pprof_raw) gives the names a file holds, also names
    with spaces and parameter lists (a Go generic's shape, a C++ signature), and profcol's OTLP
    carries the same. pprof's default symbolization printed typeEncoder.OnceValue[go.shape.func
    (*encoding/json.encodeState, ...)].func3 as OnceValue[go.shape.func].func3, which failed
    test_peer_sdks whenever a real block profile held that frame."""

    NAMES = ("encoding/json.typeEncoder.OnceValue[go.shape.func(*encoding/json.encodeState, "
             "reflect.Value, encoding/json.encOpts)].func3",
             "std::vector<int, std::allocator<int> >::push_back(int const&)",
             "main.work")

    def test_names_as_the_file_holds_them(self):
        tmp = ps.mktemp("go-reader-")
        p = ps.ppb.Profile()
        st = [""]

        def s(x):
            st.append(x)
            return len(st) - 1

        p.sample_type.add(type=s("contentions"), unit=s("count"))
        for i, name in enumerate(self.NAMES, 1):
            p.function.add(id=i, name=s(name), system_name=s(name), filename=s("/src/x.go"),
                           start_line=i)
            p.location.add(id=i, address=0x1000 * i).line.add(function_id=i, line=10 * i)
        p.sample.add(location_id=[1, 2, 3], value=[7])
        p.sample.add(location_id=[2, 3], value=[5])
        p.string_table.extend(st)
        raw = p.SerializeToString()
        path = os.path.join(tmp, "names.pb")
        with open(path, "wb") as f:
            f.write(raw)
        go = ps.go_pprof_raw(path, tmp)
        mine = ps.pprof_view(p)
        self.assertEqual(go["functions"], set(self.NAMES))
        self.assertEqual(go["samples"], mine["samples"])

        port, sink, pc = ps.pyroscope_to_sink(self, "pyro-names")
        r = h.post(port, raw, "application/octet-stream",
                   path="/ingest?name=names.contentions&format=pprof")
        self.assertEqual(r.status, 200, r)
        reqs = sink.wait_until(lambda rs: any(x.message is not None for x in rs), 15)
        got = ps.by_type(ps.otlp_views([x.message for x in reqs if x.message is not None]))
        t = ("contentions", "count")
        self.assertEqual(ps.string_attrs_only(got[t]["samples"]),
                         ps.string_attrs_only(go["samples"][t]))
        pc.stop()


class ShapesTest(unittest.TestCase):
    """The other shapes and paths the receiver serves, with real Go profiles (tests/data):
    /pyroscope/ingest, /v1/pprof (204), Push as JSON and gzip-compressed proto, Content-Encoding
    gzip on /ingest, collapsed stacks (folded with sampleRate, lines)."""

    def test_paths_and_encodings(self):
        data = os.path.join(h.SRC, "tests", "data")
        with open(os.path.join(data, "go-cpu.pb.gz"), "rb") as f:
            cpu = f.read()
        with open(os.path.join(data, "go-heap.pb.gz"), "rb") as f:
            heap = f.read()
        port, sink, pc = ps.pyroscope_to_sink(self, "pyro-shapes")

        def push_req(app, raw):
            req = ps.ppb.PushRequest()
            srs = req.series.add()
            srs.labels.add(name="__name__", value="process_cpu")
            srs.labels.add(name="service_name", value=app)
            srs.labels.add(name="shape", value=app)
            srs.samples.add(raw_profile=raw, ID="0b1e2d3c-4f5a-4b6c-8d7e-9f0a1b2c3d4e")
            return req

        push_json = json.dumps({"series": [{
            "labels": [{"name": "__name__", "value": "memory"},
                       {"name": "service_name", "value": "pushjson"}],
            "samples": [{"rawProfile": base64.b64encode(heap).decode(), "ID": "x"}]}]}).encode()
        folded = b"main;handler;work 12\nmain;handler;idle 3\nmain;gc 5\n"
        # (label, path, body, content type, headers, want status, service, {type: total})
        cpu_t = ps.pprof_view(cpu)["totals"]
        heap_t = ps.pprof_view(heap)["totals"]
        cases = [
            ("pyroscope/ingest", "/pyroscope/ingest?name=prefixed%7Bshape%3Dp%7D&format=pprof",
             cpu, "application/octet-stream", {}, 200, "prefixed", cpu_t),
            ("v1/pprof", "/v1/pprof", heap, "application/octet-stream", {}, 204, None, heap_t),
            ("ingest, Content-Encoding gzip over plain pprof",
             "/ingest?name=gzipped&format=pprof", gzip.compress(gzip.decompress(cpu)),
             "application/octet-stream", {"Content-Encoding": "gzip"}, 200, "gzipped", cpu_t),
            ("push json", ps.PUSH_PATH, push_json, "application/json", {}, 200, "pushjson",
             heap_t),
            ("push proto gzip", ps.PUSH_PATH,
             gzip.compress(push_req("pushgz", gzip.decompress(cpu)).SerializeToString()),
             "application/proto", {"Content-Encoding": "gzip"}, 200, "pushgz", cpu_t),
            ("folded cpu, sampleRate 100", "/ingest?name=folded.cpu%7Bshape%3Df%7D&format=folded"
             "&sampleRate=100", folded, "text/plain", {}, 200, "folded",
             {("cpu", "nanoseconds"): 20 * 10_000_000}),
            ("lines", "/ingest?name=lined.alloc_objects&format=lines",
             b"main;a\nmain;a\nmain;b\n", "text/plain", {}, 200, "lined",
             {("alloc_objects", "count"): 3}),
        ]
        for label, path, body, ctype, hdrs, status, _, _ in cases:
            r = h.post(port, body, ctype, path=path, headers=hdrs)
            self.assertEqual(r.status, status, "%s: %r" % (label, r))
            if status == 204:
                self.assertEqual(r.body, b"", label)
        want = collections.Counter()
        for _, _, _, _, _, _, svc, totals in cases:
            for t, v in totals.items():
                want[(svc, t)] += v

        def key(v):
            svc = v["resource"].get("service.name")
            return (svc if svc in {c[6] for c in cases} else None, v["type"])

        def arrived(reqs):
            got = collections.Counter()
            for v in ps.otlp_views([x.message for x in reqs if x.message is not None]):
                got[key(v)] += v["total"]
            return all(got.get(k, 0) >= n for k, n in want.items())

        sink.wait_until(arrived, 15)
        pc.stop()
        views = ps.otlp_views(sink.messages())
        got = collections.Counter()
        for v in views:
            got[key(v)] += v["total"]
        self.assertEqual(dict(got), dict(want))
        folded_v = ps.by_type(ps.select(views, **{"service.name": "folded"}))
        self.assertEqual(folded_v[("cpu", "nanoseconds")]["samples"], collections.Counter({
            (("work", "handler", "main"), ()): 120_000_000,
            (("idle", "handler", "main"), ()): 30_000_000,
            (("gc", "main"), ()): 50_000_000}))
        for v in ps.select(views, **{"service.name": "folded"}):
            self.assertEqual(v["resource"].get("shape"), "f")
            self.assertEqual(v["period"], 10_000_000)
        for v in ps.select(views, **{"service.name": "pushgz"}):
            self.assertEqual(v["resource"].get("shape"), "pushgz")
            self.assertNotIn("__name__", v["resource"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
