#!/usr/bin/python3
"""A viewer of the profilez page for bench/run.sh --profilez: the page's JSON requests every 3 s.

  profilez_viewer.py URL SECONDS old|new

old: what the first page asked (issue 26 before): /api/series, then the first series' flame graph
and top table. new: the live view's requests on top of those, each a view a user can open
(docs/profilez.md): the timeline, the label keys grouped by the first key (span_id when present:
the spans table), the flame graph and top table filtered by that key's largest value, the top
table under a focus path (the widest child of the root, then its widest child) with a search,
and a diff by time range (the older half of the window as the baseline, the newer half compared)
as flame graph and top table. Errors are counted, not fatal: the bench reads profcol's metrics."""

import json
import sys
import time
import urllib.parse
import urllib.request

SEP = "\x1f"


def get(base, path, **query):
    url = base + path + ("?" + urllib.parse.urlencode(query) if query else "")
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.load(r)


def focus_path(fg):
    """The widest child of the root, then its widest child: root first, joined by U+001F (nodes
    are [name, total, self, depth] in pre-order)."""
    nodes, names = fg.get("nodes") or [], fg.get("names") or []
    path, lo, depth = [], 1, 1
    while depth <= 2:
        kids = []  # the node's children: one deeper, until its own depth comes back
        for i in range(lo, len(nodes)):
            if nodes[i][3] < depth:
                break
            if nodes[i][3] == depth:
                kids.append(i)
        if not kids:
            break
        lo = max(kids, key=lambda i: nodes[i][1])
        path.append(names[nodes[lo][0]])
        lo, depth = lo + 1, depth + 1
    return SEP.join(path)


def new_views(base, q):
    tl = get(base, "/api/timeline", **q)
    lb = get(base, "/api/labels", **q)
    keys = [k["key"] for k in lb.get("keys", [])]
    key = "span_id" if "span_id" in keys else (keys[0] if keys else "")
    if key:
        g = get(base, "/api/labels", group_by=key, limit=50, **q)
        vals = [r["value"] for r in g.get("rows", []) if r["value"] is not None]
        if vals:
            flt = dict(q, labels="%s=%s" % (key, vals[0]))
            get(base, "/api/flamegraph", **flt)
            get(base, "/api/top", limit=30, **flt)
    fg = get(base, "/api/flamegraph", **q)
    get(base, "/api/top", limit=30, focus=focus_path(fg), search="a", **q)
    pts = [p[0] for p in tl.get("points", [])]
    if len(pts) >= 2:
        mid = pts[len(pts) // 2]
        d = dict(q, base_from=pts[0], base_to=mid, **{"from": mid})
        get(base, "/api/flamegraph", **d)
        get(base, "/api/top", limit=30, **d)


def main():
    base, seconds, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    end, errors, polls = time.time() + seconds, 0, 0
    while time.time() < end:
        try:
            s = get(base, "/api/series")["series"]
            if s:
                q = {"service": s[0]["service"], "type": s[0]["type"]}
                get(base, "/api/flamegraph", **q)
                get(base, "/api/top", limit=30, **q)
                if mode == "new":
                    new_views(base, q)
            polls += 1
        except (OSError, ValueError, KeyError, IndexError):
            errors += 1
        time.sleep(3)
    print(json.dumps({"viewer": mode, "polls": polls, "errors": errors}))


if __name__ == "__main__":
    main()
