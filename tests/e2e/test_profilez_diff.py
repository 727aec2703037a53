#!/usr/bin/python3
"""The profilez diff against `go tool pprof -diff_base`, and screenshots of every view.

DiffTest: a small Go program (tests/e2e/diff_target, built offline here) records two real CPU
profiles of itself with runtime/pprof, "version a" doing 80% of its calls in main.alpha and 20% in
main.beta, "version b" the other way round. Both go to the pyroscope receiver twice: as
diffapp{version=a} and diffapp{version=b} at once (a diff by label value), and as difftime, a
then b 2.5 s later (1 s slices: a diff by time range).

The oracle is `go tool pprof -normalize -diff_base=a.pb.gz -unit=ns -top b.pb.gz`: -normalize
scales the comparison b to the baseline a's total and pprof prints that total, so a function's
flat (cum) there over that total is b_flat / b_total - a_flat / a_total, the change of share the
page documents (docs/profilez.md, Diff: each side over its own total, as Pyroscope's diff
normalises totals). Checked:
  * /api/top with labels=version=b and base_labels=version=a: every row's change and cum_change
    as pprof's, rows by abs(change) descending, main.alpha and main.beta first, their signs
    pprof's (alpha down, beta up; the recordings are checked to have moved by 20 points or more);
  * /api/flamegraph's main.alpha and main.beta nodes (one path each): total / total - base /
    base_total as pprof's cum;
  * in the browser (Debian's chromium through playwright-core, as test_profilez.py): the view
    version=a set as baseline, then version=b picked in the groups table: the top table (sorted by
    change, each row's flat and cum change as pprof's, the sign in its text), main.alpha's frame
    blue and main.beta's red with pprof's cum change; the URL reopened in a fresh page draws the
    same;
  * the same in the browser for a time range: the timeline's first bar (a) set as baseline, the
    last (b) clicked: pprof's numbers again, the range and baseline in the URL, the same view from
    it in a fresh page.

ScreenshotsTest: go-cpu.pb.gz (handlers, spans) through tracelink, posted three times 2.5 s
apart, and the two diff_target versions; the browser takes a PNG of each view at a fixed 1280x800
viewport: flame graph, top table following a zoom and a search, timeline with a selection,
labels grouped by handler, the spans table, a span's flame graph, a diff by version. They go to
build/test-artifacts/views/, or with PROFILEZ_SCREENSHOTS=DIR (e.g. docs/img) into DIR, as the
PNGs of docs/profilez.md and the README are made; each is checked to be a PNG under 200 KB.

Without chromium, npm's playwright-core or go the test prints "skipped: <reason>"."""

import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
import pyro_support as ps  # noqa: E402
import test_profilez as tp  # noqa: E402

DIFF_TARGET = os.path.join(os.path.dirname(os.path.abspath(__file__)), "diff_target")
CPU = ("cpu", "nanoseconds")
CHANGED = ("main.alpha", "main.beta")


def record_versions(tmp):
    """Builds diff_target and records version a (80% alpha) and b (20% alpha): their paths."""
    go = shutil.which("go")
    if not go:
        raise unittest.SkipTest("go not found (Debian golang-go)")
    exe = os.path.join(tmp, "difftarget")
    r = subprocess.run([go, "build", "-o", exe, "."], cwd=DIFF_TARGET, env=ps.go_env(tmp),
                       capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise RuntimeError("go build failed:\n%s\n%s" % (r.stdout, r.stderr))
    out = []
    for name, alpha in (("a", 80), ("b", 20)):
        path = os.path.join(tmp, name + ".pb.gz")
        subprocess.run([exe, "-alpha", str(alpha), "-o", path], check=True, timeout=300,
                       stdin=subprocess.DEVNULL)
        out.append(path)
    return out


# flat, flat%, sum%, cum, cum%, name; a share may print as "5.1e-08%"
_TOP_ROW = re.compile(r"^\s*(-?\d+)(?:ns)?\s+\S+%\s+\S+%\s+(-?\d+)(?:ns)?\s+\S+%\s+(.+)$")


def pprof_diff(base, path, tmp):
    """`go tool pprof -normalize -diff_base` -> (baseline total, {function: (flat, cum)}) in ns."""
    r = subprocess.run([shutil.which("go"), "tool", "pprof", "-normalize", "-diff_base", base,
                        "-unit=ns", "-symbolize=none", "-nodefraction=0", "-edgefraction=0",
                        "-nodecount=100000", "-top", path],
                       env=ps.go_env(tmp), capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise RuntimeError("go tool pprof -diff_base failed:\n%s" % r.stderr)
    total = int(re.search(r"of (\d+)ns total", r.stdout).group(1))
    rows = {}
    lines = r.stdout.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.split()[:2] == ["flat", "flat%"])
    for ln in lines[head + 1:]:
        m = _TOP_ROW.match(ln)
        if not m:  # every row is read, or the oracle would miss a function
            raise RuntimeError("unread pprof -top row %r in:\n%s" % (ln, r.stdout))
        name = m.group(3).strip()  # pprof marks a function inlined at its call site
        name = name[:-len(" (inline)")] if name.endswith(" (inline)") else name
        was = rows.get(name, (0, 0))  # a function both inlined and not: one row of the page
        rows[name] = (was[0] + int(m.group(1)), was[1] + int(m.group(2)))
    return total, rows


def rgb(css):
    return tuple(int(x) for x in re.findall(r"\d+", css)[:3])


class DiffTest(tp.ProfilezPageTest):
    ZCFG = "    window: 4m\n    slices: 240\n"

    def test_page(self):
        pass  # test_profilez.py's

    def expect(self, name):
        """pprof's (flat change, cum change) of a function as shares."""
        flat, cum = self.oracle.get(name, (0, 0))
        return flat / self.ptotal, cum / self.ptotal

    def check_row(self, name, change, cum_change):
        want = self.expect(name)
        self.assertAlmostEqual(change, want[0], delta=1e-6, msg=name)
        self.assertAlmostEqual(cum_change, want[1], delta=1e-6, msg=name)

    def check_order(self, rows):
        changes = [abs(r["change"]) for r in rows]
        self.assertEqual(changes, sorted(changes, reverse=True), "by the size of the change")
        self.assertEqual({r["name"] for r in rows[:2]}, set(CHANGED))

    def test_diff(self):
        a, b = record_versions(self.tmp)
        ta = ps.go_pprof_raw(a, self.tmp)["totals"][CPU]
        tb = ps.go_pprof_raw(b, self.tmp)["totals"][CPU]
        self.ptotal, self.oracle = pprof_diff(a, b, self.tmp)
        self.assertEqual(self.ptotal, ta, "pprof's total is the baseline's")
        # the recordings moved work from alpha to beta, or the test tests nothing
        self.assertLess(self.expect("main.alpha")[1], -0.2, self.oracle)
        self.assertGreater(self.expect("main.beta")[1], 0.2, self.oracle)
        self.post_go("diffapp{version=a}", a)
        self.post_go("diffapp{version=b}", b)
        self.post_go("difftime", a)
        time.sleep(2.5)  # b in a later 1 s slice
        self.post_go("difftime", b)
        key = "cpu:nanoseconds"
        self.wait_totals({("diffapp", key): ta + tb, ("difftime", key): ta + tb})

        # the JSON API
        q = {"service": "diffapp", "type": key, "labels": "version=b", "base_labels": "version=a"}
        top = self.api("/api/top", limit=100, **q)
        self.assertEqual((top["total"], top["base_total"]), (tb, ta))
        self.assertEqual(top["functions"], len(top["rows"]))
        for r in top["rows"]:
            self.check_row(r["name"], r["change"], r["cum_change"])
        big = {n for n, (f, c) in self.oracle.items() if abs(f) + abs(c) > self.ptotal // 1000}
        self.assertEqual(big - {r["name"] for r in top["rows"]}, set())
        self.check_order(top["rows"])
        fg = self.api("/api/flamegraph", **q)
        for name in CHANGED:
            node = [n for n in fg["nodes"] if fg["names"][n[0]] == name]
            self.assertEqual(len(node), 1, name)
            self.assertAlmostEqual(node[0][1] / fg["total"] - node[0][4] / fg["base_total"],
                                   self.expect(name)[1], delta=1e-6, msg=name)

        # the page: by label value, then by time range
        view = "http://127.0.0.1:%d/#%s" % (self.zport, urllib.parse.urlencode(
            {"service": "diffapp", "type": key, "label": "version=a"}))
        tview = "http://127.0.0.1:%d/#%s" % (self.zport, urllib.parse.urlencode(
            {"service": "difftime", "type": key}))
        res = self.drive({"url": view, "series": [],
                          "diff": {"url": view, "key": "version", "value": "b"},
                          "timeDiff": {"url": tview}})
        self.assertEqual(res.get("errors"), [], "errors in the page")
        d = res["diff"]
        frag = urllib.parse.parse_qs(urllib.parse.urlsplit(d["first"]["url"]).fragment)
        self.assertEqual((frag["label"], frag["base_label"]), (["version=b"], ["version=a"]))
        self.check_drawn(d)
        t = res["timeDiff"]
        self.assertEqual([x[1] for x in t["bars"]], [ta, tb], "a and b in a slice each")
        frag = urllib.parse.parse_qs(urllib.parse.urlsplit(t["first"]["url"]).fragment)
        slice_ms = self.api("/api/timeline", service="difftime", type=key)["slice_ms"]
        self.assertEqual([int(frag[k][0]) for k in ("base_from", "base_to", "from", "to")],
                         [t["bars"][0][0], t["bars"][0][0] + slice_ms,
                          t["bars"][1][0], t["bars"][1][0] + slice_ms])
        self.assertNotIn("label", frag)
        self.check_drawn(t)

    def check_drawn(self, d):
        """A diff the page drew: pprof's numbers in the table and on the frames, the same again
        from its URL in a fresh page."""
        a = d["first"]
        self.check_order(a["top"])
        for r in a["top"]:
            self.check_row(r["name"], r["change"], r["cumChange"])
            sign = "+" if r["change"] > 0 else "-" if r["change"] < 0 else ""
            if abs(r["change"]) >= 0.00005:  # printed with 2 decimals in percentage points
                self.assertTrue(r["text"][2].startswith(sign), r["text"])
        colors = {(n, dep): c for n, dep, c in a["colors"]}
        for name, depth, _total, change in a["frames"]:
            if name in CHANGED:
                self.assertAlmostEqual(change, self.expect(name)[1], delta=1e-6, msg=name)
                red, _g, blue = rgb(colors[(name, depth)])
                if name == "main.alpha":
                    self.assertGreater(blue, red, "a smaller share is drawn blue")
                else:
                    self.assertGreater(red, blue, "a larger share is drawn red")
        self.assertEqual({f[0] for f in a["frames"]} & set(CHANGED), set(CHANGED))
        self.assertEqual(d["second"], a)


class ScreenshotsTest(tp.ProfilezPageTest):
    """PNGs of every view from real data (see the module's docstring)."""
    SIZE = (1280, 800)

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="profilez-", dir=h.TMP)
        sink = h.started_sink(self)
        self.port, self.zport = h.free_port(), h.free_port()
        cfg = tp.tracelink_profilez_config(self.port, self.zport, sink.url,
                                           "    window: 2m\n    slices: 40\n")
        self.pc = h.started_profcol(self, cfg, [self.port, self.zport], "profilez-shots")

    def test_page(self):
        pass  # test_profilez.py's

    def test_screenshots(self):
        out_dir = os.environ.get("PROFILEZ_SCREENSHOTS") or os.path.join(tp.ARTIFACTS, "views")
        out_dir = os.path.abspath(os.path.join(h.SRC, out_dir))
        os.makedirs(out_dir, exist_ok=True)
        a, b = record_versions(self.tmp)
        go = ps.go_pprof_raw(tp.GO_CPU, self.tmp)
        counter = go["samples"][CPU]
        key = "cpu:nanoseconds"
        for i in range(3):  # three 3 s slices with data
            if i:
                time.sleep(3.5)
            self.post_go("shop", tp.GO_CPU)
        self.post_go("diffapp{version=a}", a)
        self.post_go("diffapp{version=b}", b)
        self.wait_totals({("shop", key): 3 * go["totals"][CPU]})
        tree = tp.Tree(counter)
        cands = [n for n in tree.nodes() if len(n[0]) >= 2 and n[3]]
        zoom = max(cands, key=lambda n: (n[1], n[0]))[0]
        below = [n for n in tree.nodes() if n[0][:len(zoom)] == zoom]
        term = max(below, key=lambda n: (n[2], n[0]))[0][-1][:6]
        spans = {}
        for (_n, labels), v in counter.items():
            s = tp.label_of(labels, "span_id")
            if s:
                spans[s] = spans.get(s, 0) + v
        span = max(spans, key=lambda s: (spans[s], s))
        tl = self.api("/api/timeline", service="shop", type=key)
        first = [p for p in tl["points"] if p[1]][0][0]
        base = "http://127.0.0.1:%d/#" % self.zport
        shop = {"service": "shop", "type": key}

        def url(**kw):
            return base + urllib.parse.urlencode(list(kw.items()), doseq=True)
        views = [
            ("flamegraph", url(**shop), {}),
            ("top-zoom-search", url(zoom=tp.SEP.join(zoom), search=term, **shop),
             {"zoom": zoom[-1], "search": term, "scroll": "#top"}),
            ("timeline-range", url(**{"from": first, "to": first + tl["slice_ms"]}, **shop), {}),
            ("labels-grouped", url(group="handler", **shop), {"groups": True}),
            ("spans", url(group="span_id", **shop), {"groups": True}),
            ("span-flamegraph", url(label="span_id=" + span, **shop), {}),
            ("diff", url(service="diffapp", type=key, label="version=b", base=1,
                         base_label="version=a"), {"diff": True}),
        ]
        plan = {"url": base, "series": [], "shots": {
            "width": self.SIZE[0], "height": self.SIZE[1],
            "views": [dict(w, file=os.path.join(out_dir, "profilez-%s.png" % n), url=u)
                      for n, u, w in views]}}
        res = self.drive(plan)
        self.assertEqual(res.get("errors"), [], "errors in the page")
        self.assertEqual(len(res["shots"]), len(views))
        for s in res["shots"]:
            with open(s["file"], "rb") as f:
                png = f.read()
            self.assertEqual(png[:8], b"\x89PNG\r\n\x1a\n", s["file"])
            # the width and height in the IHDR chunk: the fixed viewport
            self.assertEqual(struct.unpack(">II", png[16:24]), self.SIZE, s["file"])
            self.assertLess(len(png), 200 * 1024, s["file"])
            self.assertGreater(len(png), 10000, s["file"])
        print("screenshots: %s" % out_dir, file=sys.stderr)


if __name__ == "__main__":
    unittest.main()
