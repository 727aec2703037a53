#!/usr/bin/env python3
"""Real Pyroscope SDKs -> profcol (tests/peers/README.md; apps built by `tools/peers.sh build`,
the test fails when they are not built):

  * pyroscope-go 1.5.0 (with godeltaprof) in tests/peers/pyroscope-go: CPU, the four heap types,
    goroutines, mutex and block, a TagWrapper span_id label, a tenant (X-Scope-OrgID);
  * pyroscope-io 1.4.0 (PyPI, py-spy inside) in tests/peers/pyroscope-io: CPU, a tag_wrapper
    span_id, a tenant;
  * the pyroscope crate 2.1.5 with its pprof-rs backend in tests/peers/pyroscope-rs: CPU, a
    tag_wrapper span_id thread tag, a tenant;
  * godeltaprof 0.1.12 (pyroscope-go's, its http/pprof handlers) scraped by the pyroscope_scrape
    receiver: the same Go app with -serve is the target, behind a tee; what profcol forwards for
    delta_heap, delta_mutex and delta_block equals, per type and (stack, labels), Go's reading of
    every answer it took (godeltaprof answers deltas: nothing is subtracted again).

Every upload is captured on its way in by a TCP tee (peer_support.Tee) in front of profcol's
pyroscope receiver. The oracle is Go's own pprof reader (`pprof -raw`, the peers' prebuilt
cmd/pprof) on each captured `profile` part, with the upload's sample_type_config display names
applied as profcol documents (a type with a display-name arrives under that name). profcol
forwards to a recording OTLP Sink and, through its pyroscope exporter, to a recording
PyroscopeServer; per sample type and per (stack, string labels) both equal the uploads, and the
tenant reaches the Pyroscope side.
"""

import collections
import gzip
import json
import os
import subprocess
import sys
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
import peer_support as peers  # noqa: E402
import pyro_support as ps  # noqa: E402


def unnamed_as_otlp(counter):
    """A frame whose function has no name (pprof -raw: "") is '?' in harness' OTLP stacks."""
    out = collections.Counter()
    for (names, labels), v in counter.items():
        out[(tuple(n or "?" for n in names), labels)] += v
    return out


def upload_views(records, tmp):
    """{(type, unit): {'total', 'samples': Counter}} over every captured /ingest upload, read
    with pprof -raw, display names applied; and the list of (query, headers) per upload."""
    want, meta = {}, []
    for i, rec in enumerate(records):
        if rec.status != 200:
            continue
        ctype = rec.headers.get("content-type", "")
        profiles = []           # (pprof bytes, sample_type_config)
        if rec.path.startswith("/ingest"):
            config = {}
            if "multipart/form-data" in ctype:
                parts = ps.parse_multipart(rec.body, ctype)
                data = parts["profile"][1]
                if "sample_type_config" in parts:
                    config = json.loads(parts["sample_type_config"][1])
            else:
                data = rec.body
            profiles.append((data, config))
        elif rec.path == ps.PUSH_PATH:
            # Connect, proto (the Rust and Python SDKs): series of raw pprof samples
            body = rec.body
            if rec.headers.get("content-encoding", "") == "gzip":
                body = gzip.decompress(body)
            push = ps.ppb.PushRequest()
            push.ParseFromString(body)
            for series in push.series:
                for smp in series.samples:
                    profiles.append((smp.raw_profile, {}))
        for j, (data, config) in enumerate(profiles):
            if not data:
                continue
            path = os.path.join(tmp, "upload-%d-%d.pb" % (i, j))
            with open(path, "wb") as f:
                f.write(data)
            v = peers.pprof_raw(path, tmp)
            for t in v["types"]:
                name = (config.get(t[0]) or {}).get("display-name") or t[0]
                e = want.setdefault((name, t[1]), {"total": 0, "samples": collections.Counter()})
                e["total"] += v["totals"][t]
                e["samples"].update(unnamed_as_otlp(v["samples"][t]))
        if profiles:
            meta.append((rec.query, rec.headers))
    return want, meta


def exported_views(uploads, tmp):
    """The same view of what profcol's pyroscope exporter sent (pprof -raw on each profile)."""
    got = {}
    for i, up in enumerate(uploads):
        for j, raw in enumerate(up.raws):
            path = os.path.join(tmp, "exported-%d-%d.pb.gz" % (i, j))
            with open(path, "wb") as f:
                f.write(raw)
            v = peers.pprof_raw(path, tmp)
            for t in v["types"]:
                e = got.setdefault(t, {"total": 0, "samples": collections.Counter()})
                e["total"] += v["totals"][t]
                e["samples"].update(unnamed_as_otlp(v["samples"][t]))
    return got


class SdkCase:
    """Runs one SDK app through a tee into profcol (OTLP Sink + pyroscope exporter)."""

    app = None          # service name the app uses
    tenant = "tenant-peer"
    span_id = "5eed5eed5eed5eed"
    types = set()       # (type, unit) that must arrive
    functions = ()      # function names (substrings) that must be in the CPU profile
    cpu_type = ("cpu", "nanoseconds")

    def run_app(self, url):
        raise NotImplementedError

    def label_keys(self):
        return None     # compare every string label

    def test_sdk_to_otlp_and_pyroscope(self):
        tmp = ps.mktemp("peer-sdk-")
        sink = h.started_sink(self)
        pyro = ps.PyroscopeServer().start()
        self.addCleanup(pyro.stop)
        port = h.free_port()
        pc = h.started_profcol(self, (
            ps.pyroscope_receiver_yaml(port) +
            "exporters:\n  otlphttp:\n    endpoint: %s\n"
            "  pyroscope:\n    endpoint: %s\n    tenant_from_request: true\n"
            "service:\n%s  pipelines:\n    profiles:\n      receivers: [pyroscope]\n"
            "      exporters: [otlphttp, pyroscope]\n") % (sink.url, pyro.url,
                                                           peers.NO_SELF_METRICS),
            port, "profcol-" + self.app)
        tee = peers.Tee(port)
        self.addCleanup(tee.stop)
        self.run_app(tee.url)
        records = tee.requests()
        if os.environ.get("PEER_DEBUG"):
            for r in records:
                print("REQ", r.method, r.path[:300], r.status, r.headers, len(r.body),
                      r.body[:120], file=sys.stderr)
        self.assertTrue(records, "the app uploaded nothing")
        bad = [(r.path, r.status) for r in records if r.status != 200]
        self.assertEqual(bad, [], "profcol refused uploads of the real SDK")
        want, meta = upload_views(records, tmp)
        self.assertTrue(self.types <= set(want), "the app uploaded %s" % sorted(want))
        for q, hdrs in meta:
            self.assertEqual(hdrs.get("x-scope-orgid"), self.tenant, "the SDK sent the tenant")

        def otlp_by_type(reqs):
            msgs = [r.message for r in reqs if r.message is not None]
            return ps.by_type(ps.select(ps.otlp_views(msgs), **{"service.name": self.app}))

        def complete(reqs):
            got = otlp_by_type(reqs)
            return all(got.get(t, {}).get("total", 0) >= e["total"] for t, e in want.items())

        reqs = sink.wait_until(complete, 30)
        got = otlp_by_type(reqs)
        self.assertEqual(set(got), set(want), "sample types at the OTLP sink")
        for t, e in want.items():
            self.assertEqual(got[t]["total"], e["total"], "OTLP %s total" % (t,))
            self.assertEqual(ps.string_attrs_only(got[t]["samples"], self.label_keys()),
                             ps.string_attrs_only(e["samples"], self.label_keys()),
                             "OTLP %s: (stack, labels) -> value" % (t,))
        checked = peers.otlpcheck_bodies([r.body for r in reqs])
        self.assertEqual(checked.musts, [], "profcol's OTLP breaks the proto's rules")
        cpu = got[self.cpu_type]
        for fn in self.functions:
            self.assertTrue(any(fn in n for n in cpu["functions"]), "%s in the CPU profile" % fn)
        spans = [names for (names, attrs) in cpu["samples"]
                 if ("span_id", ("s", self.span_id)) in attrs]
        self.assertTrue(spans, "the span_id label arrived")

        def exported_complete(ups):
            e = exported_views([u for u in ups if u.app == self.app], tmp)
            return all(e.get(t, {}).get("total", 0) >= w["total"] for t, w in want.items())

        ups = pyro.wait_until(exported_complete, 30)
        self.assertEqual(pyro.violations, [])
        mine = [u for u in ups if u.app == self.app]
        exported = exported_views(mine, tmp)
        self.assertEqual(set(exported), set(want), "sample types at the Pyroscope side")
        for t, e in want.items():
            self.assertEqual(exported[t]["total"], e["total"], "pyroscope exporter %s total" % (t,))
            self.assertEqual(ps.string_attrs_only(exported[t]["samples"], self.label_keys()),
                             ps.string_attrs_only(e["samples"], self.label_keys()),
                             "pyroscope exporter %s: (stack, labels) -> value" % (t,))
        self.assertEqual({u.headers.get("x-scope-orgid") for u in mine}, {self.tenant},
                         "the tenant travels to Pyroscope")
        h.stop_all(pc)


class PyroscopeGoTest(SdkCase, unittest.TestCase):
    app = "peer.goapp"
    types = {("cpu", "nanoseconds"), ("samples", "count"), ("alloc_objects", "count"),
             ("alloc_space", "bytes"), ("inuse_objects", "count"), ("inuse_space", "bytes"),
             ("goroutine", "count"), ("mutex_count", "count"), ("mutex_duration", "nanoseconds"),
             ("block_count", "count"), ("block_duration", "nanoseconds")}
    functions = ("main.burnSHA", "main.spinLoop", "main.tracedWork")

    def run_app(self, url):
        app = os.path.join(peers.peer_dir("pyroscope-go"), "goapp")
        r = subprocess.run([app, "-addr", url, "-app", self.app, "-tenant", self.tenant,
                            "-span-id", self.span_id, "-run", "5s"],
                           capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])


class PyroscopeIoTest(SdkCase, unittest.TestCase):
    """pyroscope-io 1.4.0 (PyPI; py-spy inside) in a venv of Debian's python3."""
    app = "peer.pyapp"
    types = {("cpu", "nanoseconds")}
    functions = ("burn_sha", "spin_loop", "traced_work")

    def run_app(self, url):
        d = peers.peer_dir("pyroscope-io")
        r = subprocess.run([os.path.join(d, "venv", "bin", "python"), os.path.join(d, "app.py"),
                            url, self.app, self.tenant, self.span_id, "6"],
                           capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])


class PyroscopeRsTest(SdkCase, unittest.TestCase):
    """The pyroscope crate 2.1.5 with its pprof-rs backend (Cargo.lock committed)."""
    app = "peer.rsapp"
    types = {("cpu", "nanoseconds")}
    functions = ("burn_sha", "spin_loop", "traced_work")

    def run_app(self, url):
        app = os.path.join(peers.peer_dir("pyroscope-rs"), "pyroscope-peer")
        r = subprocess.run([app, url, self.app, self.tenant, self.span_id, "6"],
                           capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])


def nonzero(counter):
    return collections.Counter({k: v for k, v in counter.items() if v})


class GodeltaprofScrapeTest(unittest.TestCase):
    DELTA = ("/debug/pprof/delta_heap", "/debug/pprof/delta_mutex", "/debug/pprof/delta_block")

    def test_scraped_as_answered(self):
        tmp = ps.mktemp("peer-godeltaprof-")
        port = h.free_port()
        app = subprocess.Popen([os.path.join(peers.peer_dir("pyroscope-go"), "goapp"), "-serve",
                                "127.0.0.1:%d" % port, "-run", "120s"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               stdin=subprocess.DEVNULL)
        self.addCleanup(lambda: (app.kill(), app.wait(5)))
        self.assertTrue(h.wait_port(port, 20, app), "the Go app did not listen")
        tee = peers.Tee(port)
        self.addCleanup(tee.stop)
        sink = h.started_sink(self)
        mport = h.free_port()
        types = "".join("      %s: {enabled: false}\n" % t
                        for t in ("process_cpu", "memory", "goroutine", "mutex", "block"))
        types += "".join("      godeltaprof_%s: {enabled: true}\n" % t
                         for t in ("memory", "mutex", "block"))
        pc = h.started_profcol(self, (
            "receivers:\n  pyroscope_scrape:\n    scrape_interval: 1s\n    scrape_timeout: 5s\n"
            "    profiling_config:\n" + types +
            "    static_configs:\n      - targets: [127.0.0.1:%d]\n" % tee.port +
            "exporters:\n  otlphttp:\n    endpoint: %s\n" % sink.url +
            "service:\n  telemetry:\n    metrics:\n      address: 127.0.0.1:%d\n" % mport +
            "  pipelines:\n    profiles:\n      receivers: [pyroscope_scrape]\n"
            "      exporters: [otlphttp]\n"), mport, "profcol-godeltaprof")

        def answered():
            return [x for x in tee.exchanges() if x[0].path in self.DELTA and x[0].status == 200]
        self.assertTrue(h.wait_for(lambda: all(sum(1 for x in answered() if x[0].path == p) >= 3
                                               for p in self.DELTA), 60), tee.exchanges()[-3:])
        pc.stop()  # what was scraped is flushed to the sink
        want = collections.defaultdict(collections.Counter)
        for i, (req, _, body) in enumerate(answered()):
            path = os.path.join(tmp, "answer-%d.pb.gz" % i)
            with open(path, "wb") as f:
                f.write(body)
            v = peers.pprof_raw(path, tmp)
            for t in v["types"]:  # mutex and block name their types alike: summed on both sides
                want[t].update(unnamed_as_otlp(v["samples"][t]))
        got = collections.defaultdict(collections.Counter)
        with sink.lock:
            msgs = [r.message for r in sink.requests if r.message is not None]
        for v in ps.otlp_views(msgs):
            got[v["type"]].update(v["samples"])
        self.assertEqual(set(got), set(want))
        for t in want:
            self.assertEqual(nonzero(ps.string_attrs_only(got[t])),
                             nonzero(ps.string_attrs_only(want[t])), t)
        self.assertTrue(any(sum(c.values()) for c in want.values()), "godeltaprof answered zeros")


if __name__ == "__main__":
    unittest.main()
