#!/usr/bin/env python3
"""The Pyroscope Java agent (io.pyroscope:agent 2.9.2 from Maven Central, async-profiler inside;
tests/peers/pyroscope-java, built by `tools/peers.sh build`; the test fails when it is missing)
as -javaagent on App.java: CPU in named methods (itimer), allocations (alloc=64k), a contended
monitor (lock=1ms), work in Pyroscope.LabelsWrapper with a span_id label, a tenant.

Every upload is captured on its way in by a TCP tee (peer_support.Tee: the agent sends chunked
multipart bodies). The oracle is the JDK's `jfr print --json` of each upload's `jfr` part, chunk
by chunk, with the `labels` part (LabelsSnapshot) decoded here, folded with Pyroscope's mapping
(test_jfr.fold, written from spec §3, plus the native-library rewrites of §3.5 that
async-profiler's frames need) and the `tracelink` rule (a span_id label becomes a span-only
link). profcol (pyroscope receiver -> tracelink -> otlphttp to a Sink + pyroscope exporter to a
PyroscopeServer): per event type, the totals, per method (self and inclusive) and per stack equal
the oracle at both outputs; the span id arrives as a link and back as a span_id label; the
tenant reaches the Pyroscope side. A third exporter sends the same over OTLP/gRPC to the
OpenTelemetry Collector, whose file exporter output equals what the OTLP sink got.
"""

import collections
import gzip
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
import peer_support as peers  # noqa: E402
import pyro_support as ps  # noqa: E402
import test_jfr as tj  # noqa: E402  (Pyroscope's JFR mapping and the folds)

APP = "peer.javaapp"
TENANT = "tenant-java"
SPAN = "5ca1ab1e0ddba11c"

# spec §3.5: the native-library rewrites (async-profiler writes native frames; the JDK does not)
tj.REWRITES.extend([
    (re.compile(r"^(?:\./tmp/)?libzstd-jni-\d+\.\d+\.\d+-\d+\.so(?: \(deleted\))?$"),
     "libzstd-jni-_.so"),
    (re.compile(r"^(?:\./tmp/)?(?:lib)?amazonCorrettoCryptoProvider(?:NativeLibraries\.)?"
                r"[0-9a-fA-F]{16}(?:/libcrypto|/libamazonCorrettoCryptoProvider)?\.so"
                r"(?: \(deleted\))?$"), "libamazonCorrettoCryptoProvider_.so"),
    (re.compile(r"^(?:\./tmp/)?libasyncProfiler-(?:linux-arm64|linux-musl-x64|linux-x64|macos)-"
                r"17b9a1d8156277a98ccc871afa9a8f69215f92\.so(?: \(deleted\))?$"),
     "libasyncProfiler-_.so"),
])

h.gen_python_protos("pb-jfrlabels", ["jfr_labels.proto"])
import jfr_labels_pb2  # noqa: E402


def gunzip(b):
    return gzip.decompress(b) if b[:2] == b"\x1f\x8b" else b


def snapshot_of(part):
    """The agent's LabelsSnapshot in test_jfr's dict form."""
    m = jfr_labels_pb2.LabelsSnapshot()
    m.ParseFromString(gunzip(part))
    return {"contexts": {cid: dict(ctx.labels) for cid, ctx in m.contexts.items()},
            "strings": dict(m.strings)}


def span_label_to_link(fold):
    """tracelink: a span_id label (16 hex digits) becomes a link with a zero trace id."""
    out = {}
    for k, c in fold.items():
        n = collections.Counter()
        for (names, labels, link), v in c.items():
            d = dict(labels)
            if link is None and re.fullmatch(r"[0-9a-f]{16}", d.get("span_id", "")):
                link = ("0" * 32, d.pop("span_id"))
            n[(names, tuple(sorted(d.items())), link)] += v
        out[k] = n
    return out


def oracle(requests, tmp):
    """Fold every captured JFR upload; -> (fold, [(query, headers)])."""
    folds, meta = [], []
    for i, rq in enumerate(requests):
        if not rq.path.startswith("/ingest") or rq.method != "POST":
            continue
        parts = ps.parse_multipart(rq.body, rq.headers["content-type"])
        data = gunzip(parts["jfr"][1])
        snap = snapshot_of(parts["labels"][1]) if "labels" in parts else None
        events = []
        for j, chunk in enumerate(tj.split_chunks(data)):
            path = os.path.join(tmp, "upload%d-chunk%d.jfr" % (i, j))
            with open(path, "wb") as f:
                f.write(chunk)
            events += tj.jfr_print(path)
        rate = int(rq.query.get("sampleRate", ["100"])[0])
        folds.append(tj.fold(events, rate, snap)[0])
        meta.append((rq.query, rq.headers))
    return span_label_to_link(tj.add_folds(*folds)), meta


class JavaAgentTest(unittest.TestCase):
    def check_equal(self, want, got, where):
        self.assertEqual(sorted(got), sorted(want), "%s: the profiles present" % where)
        for k in sorted(want):
            w, g = tj.clean(want[k]), tj.clean(got[k])
            self.assertEqual(sum(g.values()), sum(w.values()), "%s %s: total" % (where, k))
            for leaf in (True, False):
                gm, wm = dict(tj.per_method(g, leaf)), dict(tj.per_method(w, leaf))
                self.assertEqual(gm, wm, "%s %s: per method (%s); differ: %s"
                                 % (where, k, "self" if leaf else "incl",
                                    sorted(set(gm.items()) ^ set(wm.items()))[:10]))
            self.assertEqual(g, w, "%s %s: per stack; only in profcol's: %s; only in jfr's: %s"
                             % (where, k, list((g - w).items())[:3], list((w - g).items())[:3]))

    def test_agent_to_otlp_and_pyroscope(self):
        d = peers.peer_dir("pyroscope-java")
        tmp = ps.mktemp("peer-java-")
        sink = h.started_sink(self)
        pyro = ps.PyroscopeServer().start()
        self.addCleanup(pyro.stop)
        # the OpenTelemetry Collector as a third backend: what profcol made of the JFR must be
        # accepted and kept by the reference implementation
        cport = h.free_port()
        cfile = os.path.join(tmp, "otelcol-java.jsonl")
        peers.started_collector(self, (
            "receivers:\n  otlp:\n    protocols:\n      grpc:\n        endpoint: 127.0.0.1:%d\n"
            "exporters:\n  file:\n    path: %s\n    format: json\n    flush_interval: 200ms\n"
            "service:\n  telemetry:\n    metrics:\n      level: none\n"
            "  pipelines:\n    profiles:\n      receivers: [otlp]\n      exporters: [file]\n")
            % (cport, cfile), cport, "otelcol-java")
        port = h.free_port()
        pc = h.started_profcol(self, (
            ps.pyroscope_receiver_yaml(port) +
            "processors:\n  tracelink: {}\n"
            "exporters:\n  otlphttp:\n    endpoint: %s\n"
            "  pyroscope:\n    endpoint: %s\n    tenant_from_request: true\n"
            "  otlp:\n    endpoint: 127.0.0.1:%d\n    tls:\n      insecure: true\n"
            "service:\n%s  pipelines:\n    profiles:\n      receivers: [pyroscope]\n"
            "      processors: [tracelink]\n      exporters: [otlphttp, pyroscope, otlp]\n")
            % (sink.url, pyro.url, cport, peers.NO_SELF_METRICS), port, "profcol-java")
        tee = peers.Tee(port)
        self.addCleanup(tee.stop)
        env = dict(os.environ, PYROSCOPE_APPLICATION_NAME=APP, PYROSCOPE_SERVER_ADDRESS=tee.url,
                   PYROSCOPE_FORMAT="jfr", PYROSCOPE_PROFILER_EVENT="itimer",
                   PYROSCOPE_PROFILER_ALLOC="64k", PYROSCOPE_PROFILER_LOCK="1ms",
                   PYROSCOPE_UPLOAD_INTERVAL="2s", PYROSCOPE_TENANT_ID=TENANT,
                   PYROSCOPE_LABELS="env=peer", PYROSCOPE_LOG_LEVEL="debug")
        jar = os.path.join(d, "agent.jar")
        r = subprocess.run(["java", "-javaagent:" + jar, "-cp", os.path.join(d, "classes") +
                            ":" + jar, "App", "9", SPAN], env=env, capture_output=True,
                           text=True, timeout=180, stdin=subprocess.DEVNULL)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        reqs = [q for q in tee.requests() if q.path.startswith("/ingest")]
        self.assertTrue(reqs, "the agent uploaded nothing:\n" + r.stderr[-3000:])
        self.assertEqual([(q.status, q.path) for q in reqs if q.status != 200], [],
                         "profcol refused uploads of the real agent")
        want, meta = oracle(reqs, tmp)
        for q, hdrs in meta:
            self.assertEqual(hdrs.get("x-scope-orgid"), TENANT)
            self.assertEqual(q.get("format"), ["jfr"])
        metrics = {m for m, _, _ in want}
        self.assertTrue({"process_cpu", "memory", "mutex"} <= metrics, metrics)
        cpu = want[("process_cpu", ("cpu", "nanoseconds"), ("cpu", "nanoseconds"))]
        for m in ("App.burnAlpha", "App.burnBeta", "App.traced"):
            self.assertIn(m, tj.per_method(cpu, False), "the agent recorded %s" % m)

        def otlp_ok(rs):
            views = ps.select(ps.otlp_views([x.message for x in rs if x.message is not None]),
                              **{"service.name": APP})
            got = tj.otlp_fold(views)
            return all(sum(got.get(k, {}).values()) >= sum(c.values())
                       for k, c in tj.by_otlp_key(want).items())

        sink.wait_until(otlp_ok, 30)
        views = ps.select(ps.otlp_views(sink.messages()), **{"service.name": APP})
        got = tj.otlp_fold(views)
        self.check_equal(tj.by_otlp_key(want), got, "OTLP")
        linked = {lk for c in got.values() for _, _, lk in c if lk}
        self.assertEqual(linked, {("0" * 32, SPAN)}, "the span id became a link (tracelink)")
        for v in views:
            self.assertEqual(v["resource"].get("env"), "peer")
            self.assertEqual(v["resource"].get("pyroscope.spy"), "javaspy")
        checked = peers.otlpcheck_bodies([x.body for x in sink.snapshot()])
        self.assertEqual(checked.musts, [], "profcol's OTLP breaks the proto's rules")
        sent = sink.messages()
        n_prof = sum(len(sp.profiles) for m in sent for rp in m.resource_profiles
                     for sp in rp.scope_profiles)
        from_file = peers.collector_file_messages(cfile, n_prof)
        # profcol's span-only links (tracelink without a span index) carry a trace id of 16 zero
        # bytes; the Collector's pdata holds an all-zero TraceID as empty and its JSON writes ""
        for m in from_file.messages:
            for ln in m.dictionary.link_table[1:]:
                if not ln.trace_id:
                    ln.trace_id = bytes(16)
        musts = [x for x in from_file.musts
                 if not re.search(r"link_table\[\d+\]\.trace_id: 0 bytes", x)]
        self.assertEqual(musts, [], from_file.output[-3000:])
        self.assertEqual(h.summarize(from_file.messages), h.summarize(sent),
                         "the Collector got (over OTLP/gRPC) what the OTLP sink got")

        def pyro_ok(ups):
            n = collections.Counter()
            for u in ups:
                if u.app == APP:
                    for p in u.profiles:
                        for t, v in ps.pprof_view(p)["totals"].items():
                            n[(u.labels.get("__name__"), t)] += v
            return all(n[k] >= sum(c.values()) for k, c in tj.by_pyro_key(want).items())

        pyro.wait_until(pyro_ok, 30)
        self.assertEqual(pyro.violations, [])
        ups = [u for u in pyro.snapshot() if u.app == APP]
        orig = tj.ps.go_pprof_raw
        pprof = os.path.join(peers.peer_dir("otelcol"), "pprof")
        tj.ps.go_pprof_raw = lambda path, t: orig(path, t, pprof=pprof)
        try:
            pgot, series = tj.pyro_fold(ups, set(), tmp)
        finally:
            tj.ps.go_pprof_raw = orig
        # samples without any location do not show in pprof -raw
        located = {k: collections.Counter({x: v for x, v in c.items() if x[0]})
                   for k, c in tj.by_pyro_key(want).items()}
        self.check_equal(located, pgot, "pyroscope exporter (pprof -raw)")
        for metric, labels in series.items():
            for lb in labels:
                self.assertEqual(lb.get("service_name"), APP)
                self.assertEqual(lb.get("jfr_event"), "itimer", metric)
        self.assertEqual({u.headers.get("x-scope-orgid") for u in ups}, {TENANT})
        h.stop_all(pc)


if __name__ == "__main__":
    unittest.main()
