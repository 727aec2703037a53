#!/usr/bin/python3
"""The profilez page in a real browser, after real profiles went through.

Real Go profiles (tests/data/go-cpu.pb.gz, posted to the pyroscope receiver's /ingest) and real
Node profiles (the @pyroscope/nodejs client running tests/e2e/node/app.js, through a recording
proxy so the test has what it sent) pass profcol (pyroscope receiver -> otlphttp -> a recording
sink) with the profilez extension listening. What each series must show is computed here from
the profiles themselves with independent decoders (`go tool pprof -raw` for the Go file, Python
protobuf for what the Node client sent): totals, and the flame tree (stacks merged root first).

Then Debian's chromium (headless, started by playwright-core from tests/e2e/browser, installed
with `npm ci` from its lockfile; never a downloaded browser) loads the page and, per series:
  * the frames drawn include every node of the independent tree worth at least 1% of the total;
  * a click on a frame zooms: it becomes the view's root (data-zoom, at the depth of its
    ancestors, full width), its children stay drawn; back returns to the whole graph;
  * hovering shows the frame's name and its share of the view;
  * a search highlights exactly the drawn frames whose names match and reports the matched share
    (the independent tree's matching frames below no matching frame, over the total);
  * while the page stays open, a second Go upload shows up (the page polls the JSON).
  * defaults: opened without a view in the URL it shows goapp's cpu series (not aaheap's heap
    series, first by name), and a samples:count series beside a cpu or wall one of the same
    service is not listed on its own (folded into it);
  * the top table follows zoom and search: its rows are the functions of the zoomed subtree
    (stacks under the zoom path, from the zoomed frame down) whose names match, with flat and
    cum computed here from `go tool pprof -raw`;
  * the view lives in the URL: the URL of a zoomed and searched page, opened in a fresh page,
    draws the same frames, zoom, search and top table;
  * with no data, the page shows the two lines to send some (OTLP on 4318, Pyroscope on 4040).
A screenshot is saved as build/test-artifacts/profilez.png (next to PROFCOL_BIN).

TimelineTest (1 s slices): uploads 2.5 s apart land in different slices; /api/timeline's points
add up to the uploads, the first non-empty one is one upload; /api/flamegraph and /api/top with
from/to of that slice answer one upload's totals and flat values (`go tool pprof -raw`); in the
browser a click on that bar restricts the flame graph and the top table to it, and the page's URL
opened in a fresh page shows the same; a drag from the first bar with a value to the last shows
all three uploads.

LabelsTest: go-cpu.pb.gz (samples labelled handler, trace_id, span_id) goes through the
tracelink processor (trace and span ids become a Link) with a name label env holding markup.
/api/labels lists the keys, and grouped by span_id, handler or trace_id gives each value's total
as `go tool pprof -raw` does (the stacks without the key in a null row); a label filter restricts
/api/flamegraph, /api/top and /api/timeline. In the browser, a view grouped by span_id (the
spans table) lists the spans by total; following a span's link shows that span's flame graph and
top table (pprof's numbers for those samples), as its URL does in a fresh page; the markup of the
env value is drawn as text and never runs.

Without a browser (ReloadTest): the tap on SIGHUP reloads (profilez's config changed, removed,
added back) while a client posts throughout: every post answered 200, everything acknowledged
reaches the exporter unchanged, each new profilez instance counts what it saw since it started,
profcol exits 0.

GuardsTest (no browser; issue 28): a Host or Origin that is not an allowed host gets 403 (DNS
rebinding), with allowed_hosts the list decides; with auth::authenticator (bearertokenauth) the
page and the API need the token (401 with the challenge otherwise); a 200 KB service name is
kept cut to 1 KiB as frames are; at most max_concurrent_requests API requests are pending, the
rest get 503 with Retry-After. The APIs of the view (timeline, labels, top with focus, search,
labels and a baseline) are guarded the same way, and malformed arguments get 400.

Without chromium or npm's playwright-core the test prints "skipped: <reason>"."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
import pyro_support as ps  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
BROWSER_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "browser")
GO_CPU = os.path.join(h.SRC, "tests", "data", "go-cpu.pb.gz")
GO_HEAP = os.path.join(h.SRC, "tests", "data", "go-heap.pb.gz")
SEP = "\x1f"  # between the frames of a zoom path (the page's URL, /api/top's focus)
ARTIFACTS = os.path.join(os.path.dirname(os.path.abspath(h.BIN)), "test-artifacts")
SCREENSHOT = os.path.join(ARTIFACTS, "profilez.png")


def ensure_browser_modules():
    """npm ci (from package-lock.json) unless node_modules holds the locked playwright-core.
    None, or why the browser cannot be driven."""
    if not os.access(CHROMIUM, os.X_OK):
        return "Debian's chromium is not installed (%s; apt-get install chromium)" % CHROMIUM
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        return "node and npm are needed to run playwright-core"
    with open(os.path.join(BROWSER_DIR, "package-lock.json")) as f:
        want = json.load(f)["packages"]["node_modules/playwright-core"]["version"]
    marker = os.path.join(BROWSER_DIR, "node_modules", "playwright-core", "package.json")
    try:
        with open(marker) as f:
            if json.load(f)["version"] == want:
                return None
    except (OSError, ValueError, KeyError):
        pass
    env = dict(os.environ, PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD="1")
    r = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=BROWSER_DIR,
                       capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
                       env=env)
    if r.returncode != 0 or not os.path.exists(marker):
        return "npm ci in tests/e2e/browser failed (exit %d): %s" % (r.returncode,
                                                                     r.stderr.strip()[-500:])
    return None


class Tree:
    """Stacks merged root first (the flame graph, computed here): node = [total, self, kids]."""

    def __init__(self, counter):
        self.root = [0, 0, {}]
        for (names, _labels), v in counter.items():
            node = self.root
            node[0] += v
            for name in reversed(names):  # names are leaf first
                node = node[2].setdefault(name, [0, 0, {}])
                node[0] += v
            node[1] += v

    def nodes(self):
        """(path root first, total, self, kids) of every node below the root."""
        out, todo = [], [((), self.root)]
        while todo:
            path, n = todo.pop()
            for name, k in n[2].items():
                out.append((path + (name,), k[0], k[1], k[2]))
                todo.append((path + (name,), k))
        return out

    def matched(self, term):
        """Total of the frames whose names contain term (case-insensitive) below none that do."""
        term = term.lower()

        def walk(n):
            return sum(k[0] if term in name.lower() else walk(k) for name, k in n[2].items())
        return walk(self.root)


def top_oracle(counter, path=(), term=""):
    """{function: [flat, cum]} of the stacks under path (root first), from its last frame down,
    of the functions whose names contain term (case-insensitive): as /api/top should."""
    rows, k = {}, len(path)
    for (names, _labels), v in counter.items():
        root_first = tuple(reversed(names))
        if root_first[:k] != tuple(path) or len(names) < k:
            continue
        part = names[:len(names) - k + 1] if k else names
        for i, name in enumerate(part):
            r = rows.setdefault(name, [0, 0, set()])
            if i == 0:
                r[0] += v
        for name in set(part):
            rows[name][1] += v
    return {n: (r[0], r[1]) for n, r in rows.items() if term.lower() in n.lower()}


def check_top(test, got_rows, oracle, limit=30):
    """The rows shown are the first `limit` of the oracle by flat value, with its values."""
    test.assertTrue(got_rows, "the top table is empty")
    for r in got_rows:
        test.assertIn(r["name"], oracle, "a row not in the view")
        test.assertEqual((r["flat"], r["cum"]), oracle[r["name"]], r["name"])
    flats = sorted((v[0] for v in oracle.values()), reverse=True)[:limit]
    test.assertEqual([r["flat"] for r in got_rows], flats)


class ProfilezPageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        why = ensure_browser_modules()
        if why:
            print("skipped: %s" % why, file=sys.stderr)
            raise unittest.SkipTest(why)
        ps.ensure_node_modules()

    ZCFG = ""  # more of profilez's config

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="profilez-", dir=h.TMP)
        self.sink = h.started_sink(self)
        self.port, self.zport = h.free_port(), h.free_port()
        cfg = (ps.pyroscope_receiver_yaml(self.port) +
               "exporters:\n  otlphttp:\n    endpoint: %s\n"
               "extensions:\n  profilez:\n    endpoint: 127.0.0.1:%d\n%s"
               "service:\n  extensions: [profilez]\n"
               "  pipelines:\n    profiles:\n      receivers: [pyroscope]\n"
               "      exporters: [otlphttp]\n" % (self.sink.url, self.zport, self.ZCFG))
        self.pc = h.started_profcol(self, cfg, [self.port, self.zport], "profilez")

    def api(self, path, **query):
        url = "http://127.0.0.1:%d%s" % (self.zport, path)
        if query:
            url += "?" + urllib.parse.urlencode(query)
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.load(r)

    def series(self):
        return {(s["service"], s["type"]): s for s in self.api("/api/series")["series"]}

    def ingest_url(self, app):
        return "http://127.0.0.1:%d/ingest?%s" % (self.port, urllib.parse.urlencode(
            {"name": app, "format": "pprof", "spyName": "gospy"}))

    def post_go(self, app, path=GO_CPU):
        with open(path, "rb") as f:
            body = f.read()
        req = urllib.request.Request(self.ingest_url(app), data=body, method="POST",
                                     headers={"Content-Type": "application/octet-stream"})
        with urllib.request.urlopen(req, timeout=10) as r:
            self.assertEqual(r.status, 200)

    def wait_totals(self, want):
        """Until /api/series has every (service, type) of want with that total."""
        last = {}

        def ok():
            nonlocal last
            last = {k: s["total"] for k, s in self.series().items()}
            return all(last.get(k) == v for k, v in want.items())
        end = time.time() + 30
        while time.time() < end and not ok():
            time.sleep(0.2)
        self.assertEqual({k: last.get(k) for k in want}, want,
                         "profilez /api/series totals against the profiles' own")

    def drive(self, plan):
        plan_path = os.path.join(self.tmp, "plan.json")
        plan["userDataDir"] = os.path.join(self.tmp, "chromium-profile")
        with open(plan_path, "w") as f:
            json.dump(plan, f)
        r = subprocess.run([shutil.which("node"), "drive.js", plan_path], cwd=BROWSER_DIR,
                           capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
        out = json.loads(lines[-1]) if lines else {}
        if "fatal" in out and ("Failed to launch" in out["fatal"] or
                               "Executable doesn't exist" in out["fatal"]):
            self.skipTest("chromium cannot be started here: %s" % out["fatal"][:500])
        self.assertEqual(r.returncode, 0, "drive.js failed:\n%s\n%s" % (r.stdout[-3000:],
                                                                     r.stderr[-3000:]))
        return out

    def test_page(self):
        # ---- data through, and what it must look like, from the profiles themselves ----
        self.post_go("goapp")
        self.post_go("aaheap", GO_HEAP)  # first by name: the page must still open on a cpu series
        go = ps.go_pprof_raw(GO_CPU, self.tmp)
        heap = ps.go_pprof_raw(GO_HEAP, self.tmp)
        rec = ps.Recorder(self.port).start()
        self.addCleanup(rec.stop)
        out = ps.run_node_app(rec.url, "nodeapp", run_ms=2500, flush_ms=1000)
        self.assertTrue(out["done"], out)
        records = [r for r in rec.snapshot() if r.status == 200 and r.path.startswith("/ingest")]
        self.assertTrue(records, "the Node client sent nothing")
        node = ps.merge_views([ps.pprof_view(r.body) for r in records])
        want = {}
        trees = {}
        for t, c in go["samples"].items():
            want[("goapp", "%s:%s" % t)] = sum(c.values())
            trees[("goapp", "%s:%s" % t)] = Tree(c)
        for t, c in node["samples"].items():
            want[("nodeapp", "%s:%s" % t)] = sum(c.values())
            trees[("nodeapp", "%s:%s" % t)] = Tree(c)
        self.wait_totals(want)
        heap_types = set(k for k in self.series() if k[0] == "aaheap")
        self.assertTrue(heap_types, "the heap profile made no series")
        for t, v in heap["totals"].items():  # as the pyroscope receiver names them
            self.assertIn(v, [self.series()[k]["total"] for k in heap_types], t)

        # ---- the page ----
        plan_series = []
        for key in (("goapp", "cpu:nanoseconds"), ("nodeapp", "wall:nanoseconds")):
            tree = trees[key]
            total = tree.root[0]
            # click: the widest frame with children at depth >= 2 (not the root's own child)
            cands = [n for n in tree.nodes() if len(n[0]) >= 2 and n[3]]
            click = max(cands, key=lambda n: (n[1], n[0]))
            # search: the leaf function of the largest self value
            leaf = max(tree.nodes(), key=lambda n: (n[2], n[0]))
            plan_series.append({"service": key[0], "type": key[1], "click": click[0][-1],
                                "hover": click[0][-1], "search": leaf[0][-1],
                                "_click": click, "_total": total})
        go_key = ("goapp", "cpu:nanoseconds")
        # the view: zoom into the go click frame, search the largest leaf below it
        gs = plan_series[0]
        gpath = gs["_click"][0]
        below = [n for n in trees[go_key].nodes() if n[0][:len(gpath)] == gpath]
        term = max(below, key=lambda n: (n[2], n[0]))[0][-1]
        empty = self.empty_profcol()
        plan = {"url": "http://127.0.0.1:%d/" % self.zport, "screenshot": SCREENSHOT,
                "defaults": {}, "empty": "http://127.0.0.1:%d/" % empty,
                # a slow server: the first series is the one the page opened on, so its
                # frames are clicked while the page reloads it (a click then zoomed with no
                # way back, and the back button stayed disabled)
                "apiDelayMs": 400,
                "view": {"service": go_key[0], "type": go_key[1], "click": gs["click"],
                         "search": term},
                "series": [{k: v for k, v in s.items() if not k.startswith("_")}
                           for s in plan_series],
                "update": {"service": go_key[0], "type": go_key[1], "url": self.ingest_url("goapp"),
                           "file": GO_CPU, "total": 2 * want[go_key]}}
        os.makedirs(ARTIFACTS, exist_ok=True)
        if os.path.exists(SCREENSHOT):
            os.unlink(SCREENSHOT)
        res = self.drive(plan)
        self.assertEqual(res.get("errors"), [], "errors in the page")
        self.assertEqual(len(res["series"]), len(plan_series))
        self.check_defaults(res["defaults"], want, go)
        self.check_view(res["view"], go["samples"][("cpu", "nanoseconds")], gpath, term)
        self.check_empty(res["empty"])

        for s, got in zip(plan_series, res["series"]):
            key = (s["service"], s["type"])
            tree, total = trees[key], s["_total"]
            with self.subTest(series=key):
                drawn = {f["name"] for f in got["frames"]}
                wide = {n[0][-1] for n in tree.nodes() if n[1] * 100 >= total}
                self.assertTrue(wide, "nothing of 1%% or more in %s?" % (key,))
                self.assertEqual(wide - drawn, set(),
                                 "frames of 1%% or more of %s missing from the flame graph" % (key,))
                roots = [f for f in got["frames"] if f["depth"] == 0]
                self.assertEqual([(f["name"], f["total"]) for f in roots], [("total", total)])
                self.assertEqual(got["initial"]["zoom"], "total")
                # the top table: the function with the largest self value first
                self.assertEqual(got["top"][0], s["search"])

                # click: the clicked frame is the view's root, at full width, below its ancestors
                path, ctotal = s["_click"][0], s["_click"][1]
                z = got["zoomed"]
                self.assertEqual(z["zoom"], path[-1])
                self.assertEqual(int(z["zoomDepth"]), len(path))
                self.assertEqual(int(z["zoomTotal"]), ctotal)
                at = [f for f in got["zoomedFrames"] if f["depth"] == len(path)]
                self.assertEqual([(f["name"], f["anc"]) for f in at], [(path[-1], False)])
                self.assertGreaterEqual(at[0]["width"], z["width"] - 2)
                ancestors = [f["name"] for f in got["zoomedFrames"] if f["anc"]]
                self.assertEqual(ancestors, ["total"] + list(path[:-1]))
                kids = {name for name, k in s["_click"][3].items() if k[0] * 100 >= ctotal}
                zdrawn = {f["name"] for f in got["zoomedFrames"] if f["depth"] == len(path) + 1}
                self.assertEqual(kids - zdrawn, set(), "children of the zoomed frame")
                self.assertEqual(got["back"]["zoom"], "total")

                # hover: name and share of the view
                self.assertIn(path[-1], got["tip"])
                self.assertIn("%.2f%% of the view" % (100.0 * ctotal / total), got["tip"])

                # search: highlighted frames and the matched share
                term = s["search"]
                self.assertTrue(got["searchedFrames"])
                self.assertTrue(all(term.lower() in n.lower() for n in got["searchedFrames"]))
                hits_drawn = {f["name"] for f in got["frames"] if term.lower() in f["name"].lower()}
                self.assertEqual(set(got["searchedFrames"]), hits_drawn)
                share = 100.0 * tree.matched(term) / total
                self.assertAlmostEqual(float(got["searched"]["matchShare"]), share, places=3)
                self.assertIn("matched %.2f%%" % share, got["matchText"])

        # live: a second upload shows up while the page stays open
        self.assertEqual(res["update"]["status"], 200)
        self.assertEqual(res["update"]["before"], want[go_key])
        self.assertEqual(res["update"]["after"], 2 * want[go_key])
        # the screenshot, a test artifact
        with open(SCREENSHOT, "rb") as f:
            png = f.read()
        self.assertEqual(png[:8], b"\x89PNG\r\n\x1a\n")
        self.assertGreater(len(png), 10000)
        print("screenshot: %s (%s)" % (SCREENSHOT, res.get("browser")), file=sys.stderr)
        self.pc.stop()

    def empty_profcol(self):
        """A second profcol with profilez and no data: its port."""
        port, zport = h.free_port(), h.free_port()
        cfg = ("receivers:\n  otlp:\n    protocols:\n      http:\n        endpoint: 127.0.0.1:%d\n"
               "exporters:\n  debug:\n"
               "extensions:\n  profilez:\n    endpoint: 127.0.0.1:%d\n"
               "service:\n  extensions: [profilez]\n  pipelines:\n    profiles:\n"
               "      receivers: [otlp]\n      exporters: [debug]\n" % (port, zport))
        h.started_profcol(self, cfg, [port, zport], "profilez-empty")
        return zport

    def check_defaults(self, d, want, go):
        # a cpu series first, though aaheap's series come first by name
        self.assertEqual(d["title"], "goapp · cpu:nanoseconds")
        frag = urllib.parse.parse_qs(urllib.parse.urlsplit(d["url"]).fragment)
        self.assertEqual((frag["service"], frag["type"]), (["goapp"], ["cpu:nanoseconds"]))
        self.assertEqual(int(d["flame"]["zoomTotal"]), want[("goapp", "cpu:nanoseconds")])
        # the table of the whole cpu series: flat and cum as pprof's
        check_top(self, d["top"], top_oracle(go["samples"][("cpu", "nanoseconds")]))
        listed = {(b["service"], b["type"]): b["companion"] for b in d["listed"]}
        self.assertNotIn(("goapp", "samples:count"), listed)
        self.assertEqual(listed[("goapp", "cpu:nanoseconds")], "samples:count")
        for svc, typ in want:
            timed = any(s == svc and t.split(":")[0] in ("cpu", "wall") for s, t in want)
            if typ != "samples:count" or not timed:
                self.assertIn((svc, typ), listed)
            else:
                self.assertNotIn((svc, typ), listed, "a companion series listed on its own")

    def check_view(self, v, counter, path, term):
        a, b = v["first"], v["second"]
        frag = urllib.parse.parse_qs(urllib.parse.urlsplit(a["url"]).fragment)
        self.assertEqual(frag["zoom"], [SEP.join(path)])
        self.assertEqual(frag["search"], [term])
        self.assertEqual(a["flame"]["zoom"], path[-1])
        # the top table follows zoom and search: pprof's numbers of that subtree, matching rows
        oracle = top_oracle(counter, path, term)
        check_top(self, a["top"], oracle)
        self.assertTrue(all(term.lower() in r["name"].lower() for r in a["top"]))
        self.assertEqual(int(a["topState"]["total"]), int(a["flame"]["zoomTotal"]))
        # the same URL in a fresh page draws the same view
        self.assertEqual(b["url"], a["url"])
        self.assertEqual(b["title"], a["title"])
        for k in ("zoom", "zoomDepth", "zoomTotal", "search", "matches", "matchShare"):
            self.assertEqual(b["flame"].get(k), a["flame"].get(k), k)
        self.assertEqual(b["frames"], a["frames"])
        self.assertEqual(b["top"], a["top"])

    def check_empty(self, lines):
        got = dict(lines)
        self.assertEqual(set(got), {"otlp", "pyroscope"})
        self.assertIn(":4318/v1development/profiles", got["otlp"])
        self.assertIn(":4040/ingest?", got["pyroscope"])
        self.assertTrue(all(t.startswith("curl -X POST ") for t in got.values()))


class TimelineTest(ProfilezPageTest):
    ZCFG = "    window: 2m\n    slices: 120\n"

    def test_page(self):
        pass  # ProfilezPageTest's, not again with 1 s slices

    def test_timeline(self):
        go = ps.go_pprof_raw(GO_CPU, self.tmp)
        key, gk = ("tl", "cpu:nanoseconds"), ("cpu", "nanoseconds")
        one = go["totals"][gk]
        self.post_go("tl")
        time.sleep(2.5)  # the next uploads land in a later 1 s slice
        self.post_go("tl")
        self.post_go("tl")
        self.wait_totals({key: 3 * one})
        tl = self.api("/api/timeline", service=key[0], type=key[1])
        pts = [p for p in tl["points"] if p[1]]
        self.assertEqual(len(tl["points"]), 120)
        self.assertEqual(sum(p[1] for p in pts), 3 * one)
        self.assertEqual(pts[0][1], one, "the first upload alone in its slice")
        self.assertGreaterEqual(len(pts), 2)
        self.assertTrue(all(p[1] % one == 0 for p in pts))
        self.assertLess(abs(tl["now_ms"] - time.time() * 1000), 60000, "wall-clock milliseconds")
        rng = {"from": pts[0][0], "to": pts[0][0] + tl["slice_ms"]}
        fg = self.api("/api/flamegraph", service=key[0], type=key[1], **rng)
        self.assertEqual(fg["total"], one)
        rest = self.api("/api/flamegraph", service=key[0], type=key[1], **{"from": rng["to"]})
        self.assertEqual(rest["total"], 2 * one)
        top = self.api("/api/top", service=key[0], type=key[1], limit=30, **rng)
        oracle = top_oracle(go["samples"][gk])
        check_top(self, top["rows"], oracle)
        # a diff by time range: the first upload against the two later ones (twice as much of the
        # same stacks): every node's baseline is twice its value, every change of share is 0
        base = {"base_from": rng["to"], "base_to": 0}
        fd = self.api("/api/flamegraph", service=key[0], type=key[1], **dict(rng, **base))
        self.assertEqual((fd["total"], fd["base_total"]), (one, 2 * one))
        self.assertTrue(all(n[4] == 2 * n[1] for n in fd["nodes"]), fd["nodes"][:5])
        td = self.api("/api/top", service=key[0], type=key[1], limit=30, **dict(rng, **base))
        self.assertEqual(td["base_total"], 2 * one)
        self.assertEqual({r["name"]: (r["flat"], r["base_flat"]) for r in td["rows"]},
                         {n: (v[0], 2 * v[0]) for n, v in oracle.items()} if len(oracle) <= 30 else
                         {r["name"]: (oracle[r["name"]][0], 2 * oracle[r["name"]][0]) for r in td["rows"]})
        self.assertTrue(all(r["change"] == 0 for r in td["rows"]))

        res = self.drive({"url": "http://127.0.0.1:%d/#%s" % (self.zport, urllib.parse.urlencode(
            {"service": key[0], "type": key[1]})), "series": [],
            "timeline": {"service": key[0], "type": key[1]}})
        self.assertEqual(res.get("errors"), [], "errors in the page")
        t = res["timeline"]
        self.assertEqual(t["whole"], 3 * one)
        self.assertEqual(t["clicked"], [pts[0][0], one])
        self.assertEqual(t["first"]["inRange"], [pts[0][0]])
        self.assertEqual(t["first"]["total"], one)
        check_top(self, t["first"]["top"], oracle)
        frag = urllib.parse.parse_qs(urllib.parse.urlsplit(t["first"]["url"]).fragment)
        self.assertEqual((int(frag["from"][0]), int(frag["to"][0])), (rng["from"], rng["to"]))
        self.assertEqual(t["second"]["total"], one)
        self.assertEqual(t["second"]["top"], t["first"]["top"])
        # a drag over the bars from the first upload's slice to the last's: all three uploads
        dr = t["dragged"]
        self.assertEqual(sum(b[1] for b in dr["bars"]), 3 * one)
        self.assertEqual(dr["total"], 3 * one)
        self.assertEqual((dr["inRange"][0], dr["inRange"][-1]), (dr["bars"][0][0], dr["bars"][-1][0]))


def read_all(s):
    """Everything the peer sends until it closes."""
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            return data
        data += chunk


def raw_get(port, path, headers):
    """A GET with exactly these headers (Host included): (status, headers dict, body)."""
    import socket
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        s.sendall(("GET %s HTTP/1.1\r\n%sConnection: close\r\n\r\n" % (path, "".join(
            "%s: %s\r\n" % kv for kv in headers.items()))).encode())
        data = read_all(s)
    finally:
        s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    hdrs = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    return int(lines[0].split()[1]), hdrs, body


# the APIs the view added (issue 26): guarded as the others
NEW_APIS = ("/api/timeline?service=a&type=b", "/api/labels?service=a&type=b&group_by=k",
            "/api/top?service=a&type=b&focus=x&search=y&labels=k%3Dv&base_from=0")


class GuardsTest(unittest.TestCase):
    def start(self, extra="", ext_extra="", extensions="profilez"):
        self.port, self.zport, self.oport = h.free_port(), h.free_port(), h.free_port()
        sink = h.started_sink(self)
        cfg = (ps.pyroscope_receiver_yaml(self.port) +
               "  otlp:\n    protocols:\n      http:\n        endpoint: 127.0.0.1:%d\n" % self.oport +
               "exporters:\n  otlphttp:\n    endpoint: %s\n" % sink.url +
               "extensions:\n  profilez:\n    endpoint: 127.0.0.1:%d\n%s%s"
               "service:\n  extensions: [%s]\n"
               "  pipelines:\n    profiles:\n      receivers: [pyroscope, otlp]\n"
               "      exporters: [otlphttp]\n" % (self.zport, extra, ext_extra, extensions))
        return h.started_profcol(self, cfg, [self.port, self.zport], "profilez-guards")

    def get(self, path="/api/series", **headers):
        headers.setdefault("Host", "127.0.0.1:%d" % self.zport)
        return raw_get(self.zport, path, headers)

    def test_hosts(self):
        self.start()
        for host in ("127.0.0.1:%d" % self.zport, "localhost:%d" % self.zport, "[::1]:1", "LOCALHOST"):
            self.assertEqual(self.get(Host=host)[0], 200, host)
        for host in ("evil.example:%d" % self.zport, "127.0.0.1.evil.example", ""):
            self.assertEqual(self.get(Host=host)[0], 403, host)
            self.assertEqual(self.get("/", Host=host)[0], 403, host)
            for path in NEW_APIS:
                self.assertEqual(self.get(path, Host=host)[0], 403, (host, path))
        # malformed view arguments are refused before anything is looked at
        for path in ("/api/top?service=a&type=b&from=x", "/api/labels?service=a&type=b&labels=novalue",
                     "/api/flamegraph?service=a&type=b&base_to=-1",
                     "/api/top?service=a&type=b&labels=" + "%1F".join(["k=v"] * 17)):
            self.assertEqual(self.get(path)[0], 400, path)
        self.assertEqual(self.get(Origin="http://127.0.0.1:%d" % self.zport)[0], 200)
        self.assertEqual(self.get(Origin="http://evil.example")[0], 403)
        self.assertEqual(self.get(Origin="null")[0], 403)

    def test_allowed_hosts(self):
        self.start("    allowed_hosts: [profcol.internal]\n")
        self.assertEqual(self.get(Host="profcol.internal:80")[0], 200)
        self.assertEqual(self.get(Host="localhost:%d" % self.zport)[0], 403)

    def test_authenticator(self):
        self.start("    auth:\n      authenticator: bearertokenauth\n",
                   "  bearertokenauth:\n    token: z-token\n", "bearertokenauth, profilez")
        for path in ("/", "/api/series") + NEW_APIS:
            status, hdrs, _ = self.get(path)
            self.assertEqual(status, 401, path)
            self.assertIn("Bearer", hdrs.get("www-authenticate", ""))
            self.assertEqual(self.get(path, Authorization="Bearer nope")[0], 401, path)
            # past the guard: the page and series, or 404 for a series not in the window
            self.assertEqual(self.get(path, Authorization="Bearer z-token")[0],
                             200 if path in ("/", "/api/series") else 404, path)
        r = h.run_profcol(["validate", "--config", h.write_config(
            "receivers:\n  otlp:\n    protocols:\n      http:\n"
            "exporters:\n  debug:\n"
            "extensions:\n  profilez:\n    auth:\n      authenticator: nope\n"
            "service:\n  extensions: [profilez]\n  pipelines:\n    profiles:\n"
            "      receivers: [otlp]\n      exporters: [debug]\n", "pz-auth")])
        self.assertIn("extensions::profilez::auth::authenticator: extension \"nope\" is not "
                      "defined", r.stderr)

    def test_names_bounded_and_requests_capped(self):
        self.start("    max_concurrent_requests: 1\n")
        long_name = "svc-" + "x" * 200_000
        req = h.make_request(services=(long_name,))
        self.assertEqual(h.post(self.oport, req.SerializeToString()).status, 200)
        with open(GO_CPU, "rb") as f:
            r = h.post(self.port, f.read(), "application/octet-stream",
                       path="/ingest?name=go-app&format=pprof")
        self.assertEqual(r.status, 200)

        def series():
            _, _, body = self.get()
            return body, json.loads(body)["series"]
        end = time.time() + 20
        while time.time() < end and len({s["service"] for s in series()[1]}) < 2:
            time.sleep(0.1)
        body, got = series()
        names = {s["service"] for s in got}
        self.assertIn("go-app", names)
        cut = [n for n in names if n.startswith("svc-")]
        self.assertEqual([len(n) for n in cut], [1024], "cut as frame names are")
        self.assertLess(len(body), 64 * 1024)
        # 20 requests sent at once on 20 connections: one is pending, the others are refused
        import socket
        socks = [socket.create_connection(("127.0.0.1", self.zport), timeout=20)
                 for _ in range(20)]
        req = ("GET /api/flamegraph?service=go-app&type=cpu%%3Ananoseconds HTTP/1.1\r\n"
               "Host: 127.0.0.1:%d\r\nConnection: close\r\n\r\n" % self.zport).encode()
        for s in socks:
            s.sendall(req)
        statuses = []
        for s in socks:
            data = read_all(s)
            s.close()
            statuses.append(int(data.split(b" ", 2)[1]))
            if statuses[-1] == 503:
                self.assertIn(b"Retry-After: 1", data)
        self.assertIn(200, statuses)
        self.assertIn(503, statuses)
        self.assertEqual(set(statuses), {200, 503}, statuses)
        self.assertEqual(self.get()[0], 200, "answered again once the others are done")


class ReloadTest(unittest.TestCase):
    def test_reloads(self):
        sink = h.started_sink(self)
        port, zport = h.free_port(), h.free_port()
        base = (ps.pyroscope_receiver_yaml(port) +
                "exporters:\n  otlphttp:\n    endpoint: %s\n" % sink.url)
        pipe = "  pipelines:\n    profiles:\n      receivers: [pyroscope]\n      exporters: [otlphttp]\n"

        def cfg(window=None):
            if window is None:
                return base + "service:\n" + pipe
            return (base + "extensions:\n  profilez:\n    endpoint: 127.0.0.1:%d\n"
                    "    window: %s\nservice:\n  extensions: [profilez]\n" % (zport, window) + pipe)

        pc = h.started_profcol(self, cfg("5m"), [port, zport], "profilez-reload")
        with open(GO_CPU, "rb") as f:
            body = f.read()
        go = ps.go_pprof_raw(GO_CPU, tempfile.mkdtemp(dir=h.TMP))["totals"]
        url = "http://127.0.0.1:%d/ingest?name=reload&format=pprof" % port
        statuses, stop = [], [False]

        def post():
            req = urllib.request.Request(url, data=body, method="POST")
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status

        def client():
            while not stop[0]:
                try:
                    statuses.append(post())
                except Exception as e:  # noqa: BLE001 -- recorded, asserted below
                    statuses.append(repr(e))
                time.sleep(0.02)
        t = threading.Thread(target=client)
        t.start()
        self.addCleanup(lambda: (stop.__setitem__(0, True), t.join()))

        def api():
            with urllib.request.urlopen("http://127.0.0.1:%d/api/series" % zport,
                                        timeout=10) as r:
                return json.load(r)

        def reload(text, n):
            with open(pc.config_paths[0], "w") as f:
                f.write(text)
            pc.proc.send_signal(signal.SIGHUP)
            pc.wait_stderr(lambda e: e.count("reload: complete") >= n, 20)
            self.assertEqual(pc.stderr().count("reload: complete"), n, pc.stderr()[-3000:])

        def wait_some():
            end = time.time() + 20
            last = None
            while time.time() < end:
                try:
                    j = last = api()
                    if j["stats"]["profiles"] >= 4:
                        return j
                except OSError as e:
                    last = e
                time.sleep(0.1)
            self.fail("profilez saw nothing: %r, posts %r\n%s" % (
                last, statuses[-5:], pc.stderr()[-2000:]))

        j = wait_some()
        self.assertEqual(j["window_ms"], 300000)
        reload(cfg("2m"), 1)  # changed: a new instance with its own window, empty at first
        j = wait_some()
        self.assertEqual(j["window_ms"], 120000)
        reload(cfg(None), 2)  # removed: the page is gone, data flows on
        with self.assertRaises(OSError):
            api()
        reload(cfg("1m"), 3)  # back
        j = wait_some()
        self.assertEqual(j["window_ms"], 60000)
        # what one instance shows is whole uploads (2 profiles each) since it started
        got = {x["type"]: x["total"] for x in j["series"] if x["service"] == "reload"}
        uploads = j["stats"]["profiles"] // 2
        self.assertEqual(got, {"%s:%s" % t: uploads * v for t, v in go.items()})
        stop[0] = True
        t.join()
        self.assertTrue(statuses)
        self.assertEqual([x for x in statuses if x != 200], [], "a post was not answered 200")
        pc.stop()
        # what was acknowledged reached the exporter, unchanged in amount
        got = {t: e["total"] for t, e in ps.by_type(ps.otlp_views(sink.messages())).items()}
        self.assertEqual(got, {t: len(statuses) * v for t, v in go.items()})



def label_of(labels, key):
    """A label's string value in go_pprof_raw's (key, ('s', value)) tuples, or None."""
    for k, v in labels:
        if k == key:
            return v[1]
    return None


def tracelink_profilez_config(port, zport, sink_url, profilez_extra=""):
    """pyroscope receiver on port -> tracelink -> otlphttp to sink_url, profilez on zport."""
    return (ps.pyroscope_receiver_yaml(port) +
            "processors:\n  tracelink:\n"
            "exporters:\n  otlphttp:\n    endpoint: %s\n"
            "extensions:\n  profilez:\n    endpoint: 127.0.0.1:%d\n%s"
            "service:\n  extensions: [profilez]\n"
            "  pipelines:\n    profiles:\n      receivers: [pyroscope]\n"
            "      processors: [tracelink]\n      exporters: [otlphttp]\n"
            % (sink_url, zport, profilez_extra))


class LabelsTest(ProfilezPageTest):
    MARKUP = "<img src=x onerror=window.__pz_pwned=1>"

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="profilez-", dir=h.TMP)
        sink = h.started_sink(self)
        self.port, self.zport = h.free_port(), h.free_port()
        cfg = tracelink_profilez_config(self.port, self.zport, sink.url)
        self.pc = h.started_profcol(self, cfg, [self.port, self.zport], "profilez-labels")

    def test_page(self):
        pass  # ProfilezPageTest's

    def test_labels(self):
        go = ps.go_pprof_raw(GO_CPU, self.tmp)
        counter = go["samples"][("cpu", "nanoseconds")]
        total = sum(counter.values())
        self.post_go("lbl{env=%s}" % self.MARKUP)
        key = ("lbl", "cpu:nanoseconds")
        self.wait_totals({key: total})

        def groups(k):
            g = {}
            for (_names, labels), v in counter.items():
                val = label_of(labels, k)
                g[val] = g.get(val, 0) + v
            return g
        spans = groups("span_id")
        self.assertGreaterEqual(len([s for s in spans if s]), 2, "go-cpu.pb.gz has spans")
        for k in ("span_id", "handler", "trace_id"):
            j = self.api("/api/labels", service=key[0], type=key[1], group_by=k)
            self.assertEqual(j["total"], total)
            self.assertEqual({r["value"]: r["total"] for r in j["rows"]}, groups(k), k)
        keys = {x["key"]: x["values"] for x in j["keys"]}
        for k in ("span_id", "handler", "trace_id"):
            self.assertEqual(keys[k], len([v for v in groups(k) if v]), k)
        self.assertEqual(keys["env"], 1)
        # a filter: the flame graph, top table and timeline of one span's samples
        span, stotal = max(((s, v) for s, v in spans.items() if s), key=lambda x: (x[1], x[0]))
        sub = {k: v for k, v in counter.items() if label_of(k[1], "span_id") == span}
        flt = {"labels": "span_id=" + span}
        self.assertEqual(self.api("/api/flamegraph", service=key[0], type=key[1], **flt)["total"],
                         stotal)
        check_top(self, self.api("/api/top", service=key[0], type=key[1], limit=30, **flt)["rows"],
                  top_oracle(sub))
        pts = self.api("/api/timeline", service=key[0], type=key[1], **flt)["points"]
        self.assertEqual(sum(p[1] for p in pts), stotal)
        none = self.api("/api/flamegraph", service=key[0], type=key[1], labels="span_id=nope")
        self.assertEqual(none["total"], 0)

        view = "http://127.0.0.1:%d/#%s" % (self.zport, urllib.parse.urlencode(
            {"service": key[0], "type": key[1], "group": "span_id"}))
        base_view = "http://127.0.0.1:%d/#%s" % (self.zport, urllib.parse.urlencode(
            {"service": key[0], "type": key[1], "label": "handler=checkout"}))
        res = self.drive({"url": view, "series": [],
                          "labels": {"url": view, "markupKey": "env"},
                          "diff": {"url": base_view, "key": "handler", "value": "search"}})
        self.assertEqual(res.get("errors"), [], "errors in the page")
        lb = res["labels"]
        self.assertEqual(lb["whole"], total)
        # the spans table: by total, each a link; the samples without a span in their own row
        got = [(g["value"] if not g["none"] else None, g["total"]) for g in lb["groups"]]
        want = sorted(((s, v) for s, v in spans.items() if s), key=lambda x: (-x[1], x[0]))
        self.assertEqual([g for g in got if g[0]], want)
        self.assertEqual([g[1] for g in got if g[0] is None], [spans.get(None)] if spans.get(None) else [])
        # its link: that span's flame graph and top table, the same from its URL in a fresh page
        f = lb["filtered"]
        self.assertEqual(f["filters"], [["span_id", span]])
        self.assertEqual(f["total"], stotal)
        check_top(self, f["top"], top_oracle(sub))
        frag = urllib.parse.parse_qs(urllib.parse.urlsplit(f["url"]).fragment)
        self.assertEqual(frag["label"], ["span_id=" + span])
        self.assertEqual((lb["fresh"]["total"], lb["fresh"]["top"], lb["fresh"]["filters"]),
                         (f["total"], f["top"], f["filters"]))
        # markup in a label value is text
        m = lb["markup"]
        self.assertEqual([g["text"] for g in m["groups"]], [self.MARKUP])
        self.assertEqual(m["imgs"], 0)
        self.assertFalse(m["pwned"])
        self.check_diff(res["diff"], counter)

    def check_diff(self, d, counter):
        """handler=search against the baseline handler=checkout: each frame's and function's share
        of its own side's total, compared (pprof's numbers)."""
        cmp_ = {k: v for k, v in counter.items() if label_of(k[1], "handler") == "search"}
        base = {k: v for k, v in counter.items() if label_of(k[1], "handler") == "checkout"}
        ct, bt = sum(cmp_.values()), sum(base.values())
        a = d["first"]
        frag = urllib.parse.parse_qs(urllib.parse.urlsplit(a["url"]).fragment)
        self.assertEqual((frag["label"], frag["base_label"], frag["base"]),
                         (["handler=search"], ["handler=checkout"], ["1"]))
        # frames: share of the comparison minus share of the baseline, by path
        tc, tb = Tree(cmp_), Tree(base)
        paths = {}
        for tree, side in ((tc, 0), (tb, 1)):
            for path, total, _s, _k in tree.nodes():
                paths.setdefault(path, [0, 0])[side] = total
        by_pos = {}
        for path, (c, b) in paths.items():
            by_pos.setdefault((path[-1], len(path)), []).append(c / ct - b / bt)
        checked = 0
        for name, depth, _total, change in a["frames"]:
            if depth == 0:
                self.assertAlmostEqual(change, 0, places=5)
                continue
            want = by_pos.get((name, depth), [])
            if len(want) == 1:  # a frame name met once at that depth: its path is known
                self.assertAlmostEqual(change, want[0], places=5, msg=name)
                checked += 1
        self.assertGreater(checked, 3)
        # the top table: by |change| (shares of flat values), then name
        oc, ob = top_oracle(cmp_), top_oracle(base)
        rows = []
        for name in set(oc) | set(ob):
            f, bf = oc.get(name, (0, 0))[0], ob.get(name, (0, 0))[0]
            rows.append((-abs(f / ct - bf / bt), name, f, bf, f / ct - bf / bt))
        rows.sort()
        got = [(r["name"], r["flat"], r["baseFlat"]) for r in a["top"]]
        self.assertEqual(got, [(r[1], r[2], r[3]) for r in rows[:30]])
        for r, w in zip(a["top"], rows):
            self.assertAlmostEqual(r["change"], w[4], places=7)
        # the same URL in a fresh page draws the same diff
        self.assertEqual(d["second"], a)


if __name__ == "__main__":
    unittest.main()
