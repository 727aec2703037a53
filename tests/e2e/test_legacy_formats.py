#!/usr/bin/python3
"""Pyroscope's legacy /ingest formats (trie, tree, speedscope; docs/formats.md) through profcol's
pyroscope receiver to a recording OTLP sink.

No program that writes trie or tree bodies can be installed here (they came from the old Pyroscope
agents), and no speedscope exporter is packaged for Debian, so the bodies are made by the encoders
below, written from docs/formats.md: a radix trie and a frame tree serialized in pre-order, and
speedscope files after the published schema (sampled and evented profiles, several units, merged
profiles). What reaches the sink is compared, per service, with what an independent decoder of the
very bytes sent (also below, written again from the same document, not from profcol's code) says
profcol must forward: the stacks (function names), their values scaled by the sampleRate and unit
rules of spec/pyroscope.md §1.6, totals, sample types, periods and resource attributes. Bad bodies
get 400/413/422 with a message, and nothing of them reaches the sink.

    PROFCOL_BIN=build/profcol /usr/bin/python3 tests/e2e/test_legacy_formats.py -v
    /usr/bin/python3 tests/e2e/test_legacy_formats.py --write-seeds DIR   # fuzz_legacy seeds
"""

import collections
import gzip
import json
import math
import os
import random
import sys
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
import pyro_support as ps  # noqa: E402

SCHEMA = "https://www.speedscope.app/file-format-schema.json"


# ---------------------------------------------------------------------------------------------
# encoders (docs/formats.md)

def uvarint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def node(name, value, children):
    return uvarint(len(name)) + name + uvarint(value) + uvarint(children)


def trie_encode(items):
    """{key bytes: value} -> a radix trie: each node names the bytes its children share."""
    keys = sorted(items)

    def build(name, group, off):
        value = 0
        if group and len(group[0]) == off:
            value, group = items[group[0]], group[1:]
        children = []
        for k in group:
            if children and children[-1][0][off] == k[off]:
                children[-1].append(k)
            else:
                children.append([k])
        out = [node(name, value, len(children))]
        for c in children:
            l = off + 1
            while l < len(c[0]) and l < len(c[-1]) and c[0][l] == c[-1][l]:
                l += 1
            out.append(build(c[0][off:l], c, l))
        return b"".join(out)

    return build(b"", keys, 0)


def tree_encode(stacks):
    """{(frame, ...) root first: value} -> a tree of frames under an empty root."""
    root = {}
    for st, v in stacks.items():
        n = root
        for f in st:
            n = n.setdefault(f, {})
        n[None] = n.get(None, 0) + v

    def ser(name, n):
        kids = sorted(k for k in n if k is not None)
        return node(name.encode(), n.get(None, 0), len(kids)) + b"".join(
            ser(k, n[k]) for k in kids)

    return ser("", root)


def random_stacks(rng, n, names):
    stacks = {}
    while len(stacks) < n:
        st = tuple(rng.choice(names) for _ in range(rng.randint(1, 7)))
        stacks[st] = rng.randint(1, 5000)
    return stacks


NAMES = ["main", "a", "ab", "abc", "net/http.(*conn).serve", "runtime.mallocgc", "ß", "日本",
         "x.y", "do_work", "handler", "parse_request_body_with_a_rather_long_name"]


# ---------------------------------------------------------------------------------------------
# the independent decoders

class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def uvarint(self):
        x = s = 0
        for i in range(10):
            b = self.data[self.pos]
            self.pos += 1
            if b < 0x80:
                if i == 9 and b > 1:
                    raise ValueError("varint overflow")
                return x | b << s
            x |= (b & 0x7F) << s
            s += 7
        raise ValueError("varint overflow")

    def node(self):
        ln = self.uvarint()
        name = self.data[self.pos:self.pos + ln]
        if len(name) != ln:
            raise ValueError("truncated name")
        self.pos += ln
        return name, self.uvarint(), self.uvarint()


def decode_keys(data, tree):
    """[(key bytes, value)] of every node with a value: a trie's key is the names from its root
    concatenated (several tries may follow each other); a tree's is ';' + name per node below
    the root, whose own name and value are ignored."""
    r, out = Reader(data), []
    while True:
        stack = []  # [children left, key length before the node]
        key, root = b"", True
        while True:
            name, value, children = r.node()
            before = len(key)
            if tree and root:
                name, value, sep = b"", 0, b""  # the root
            else:
                sep = b";" if tree else b""
            root = False
            key += sep + name
            if value:
                out.append((key, value))
            if children:
                stack.append([children, before])
                continue
            key = key[:before]
            while stack:
                stack[-1][0] -= 1
                if stack[-1][0]:
                    break
                key = key[:stack.pop()[1]]
            if not stack:
                break
        if tree and r.pos != len(data):
            raise ValueError("bytes after the tree")
        if tree or r.pos == len(data):
            return out


def frames_of(key):
    """Root-first function names of a collapsed key, empty frames dropped."""
    return [f.decode() for f in key.split(b";") if f]


TYPES = {  # spec §1.6: suffix -> (sample type, unit, scaled by the sampleRate period)
    "cpu": ("cpu", "nanoseconds", True), "wall": ("wall", "nanoseconds", True),
    "seconds": ("wall", "nanoseconds", True), "milliseconds": ("wall", "nanoseconds", True),
    "microseconds": ("wall", "nanoseconds", True), "nanoseconds": ("wall", "nanoseconds", True),
    "alloc_objects": ("alloc_objects", "count", False), "alloc_space": ("alloc_space", "bytes", False),
    "bytes": ("alloc_space", "bytes", False), "inuse_space": ("inuse_space", "bytes", False),
}


def profile_type(app, rate):
    """(service, type, unit, period) for an app name with its type suffix, or KeyError."""
    svc, _, suffix = app.rpartition(".")
    if not svc:
        svc, suffix = app, "cpu"
    t, unit, scaled = TYPES[suffix]
    period = 10**9 // rate if scaled and rate > 0 else 0
    if scaled and not period:
        t, unit = "samples", "count"
    return svc, t, unit, period


def expected_trie_tree(data, tree, app, rate):
    svc, t, unit, period = profile_type(app, rate)
    c = collections.Counter()
    for key, v in decode_keys(data, tree):
        c[(tuple(reversed(frames_of(key))), ())] += v * (period or 1)
    return [{"service": svc, "type": (t, unit), "period": period, "samples": c, "attrs": {}}]


SS_UNITS = {  # unit -> (default sampleRate, precision at the default rate, at another rate)
    "nanoseconds": (10**9, 1, 100), "microseconds": (10**8, 100, 100),
    "milliseconds": (10**5, 100, 100), "seconds": (100, 100, 100), "none": (10**4, 100, 100),
    "bytes": (0, 1, 1),
}


def ci(obj, key):
    """A member as Go's encoding/json finds it: case-insensitively, the last match."""
    found = None
    for k, v in (obj or {}).items():
        if k.lower() == key.lower():
            found = v
    return found


def expected_speedscope(doc, app, rate):
    """What profcol must forward for a speedscope document (docs/formats.md)."""
    frames = [ci(f, "name") or "" for f in (ci(ci(doc, "shared"), "frames") or [])]
    groups = collections.OrderedDict()
    for p in ci(doc, "profiles") or []:
        key = (ci(p, "startValue") or 0, ci(p, "name") or "", ci(p, "type") or "",
               ci(p, "unit") or "")
        groups.setdefault(key, []).append(p)
    out = []
    for key in sorted(groups):
        start, name, kind, unit = key
        members = groups[key]
        default_rate, p_default, p_other = SS_UNITS[unit]
        g_rate = default_rate if rate == 100 else rate
        precision = p_default if rate == 100 else p_other
        g_app = app + "." + unit if len(groups) > 1 else app
        svc, t, u, period = profile_type(g_app, g_rate)
        mult = precision * (period or 1)
        c = collections.Counter()

        def add(stack_idx, v):
            v = int(math.trunc(v)) * mult
            names = tuple(frames[i] for i in reversed(stack_idx) if frames[i])
            if v:
                c[(names, ())] += v

        if kind == "sampled":
            samples = [s for p in members for s in (ci(p, "samples") or [])]
            weights = [w for p in members for w in (ci(p, "weights") or [])]
            assert len(samples) == len(weights)
            for s, w in zip(samples, weights):
                add([int(math.trunc(x)) for x in (s or [])], w)
        else:
            last, open_ = start, []
            for p in members:
                for ev in ci(p, "events") or []:
                    at, fid = ci(ev, "at") or 0, int(math.trunc(ci(ev, "frame") or 0))
                    if ci(ev, "type") == "C":
                        assert open_ and open_[-1] == fid
                        add(open_, at - last)
                        open_.pop()
                    else:
                        if open_:
                            add(open_, at - last)
                        open_.append(fid)
                    last = at
        # samples of one stack are one sample (a call tree); compare the sums
        out.append({"service": svc, "type": (t, u), "period": period, "samples": c,
                    "attrs": {"profile_name": name} if name else {}})
    return out


# ---------------------------------------------------------------------------------------------
# the bodies

def sampled(name, unit, start, stacks, weights):
    return {"type": "sampled", "name": name, "unit": unit, "startValue": start,
            "endValue": start + 1000, "samples": stacks, "weights": weights}


def speedscope_docs(rng):
    frames = [{"name": n, "file": "src/%d.py" % i, "line": i} for i, n in enumerate(NAMES)]
    frames.append({"name": ""})
    nf = len(frames)
    stacks = [[rng.randrange(nf) for _ in range(rng.randint(0, 6))] for _ in range(300)]
    weights = [round(rng.uniform(0, 50), 3) for _ in stacks]
    one = {"$schema": SCHEMA, "shared": {"frames": frames}, "exporter": "profcol-e2e@1",
           "name": "one", "activeProfileIndex": 0,
           "profiles": [sampled("requests.py", "milliseconds", 0, stacks, weights)]}
    # evented: random balanced open/close at growing times
    events, t, open_ = [], 0.0, []
    for _ in range(400):
        t += round(rng.uniform(0, 3), 2)
        if open_ and (rng.random() < 0.45 or len(open_) > 8):
            events.append({"type": "C", "at": t, "frame": open_.pop()})
        else:
            f = rng.randrange(nf)
            open_.append(f)
            events.append({"type": "O", "at": t, "frame": f})
    while open_:
        t += 1
        events.append({"type": "C", "at": t, "frame": open_.pop()})
    half = len(events) // 2
    while events[half - 1]["type"] != "C":  # split the events between two merged profiles
        half += 1
    ev = {"type": "evented", "name": "worker", "unit": "seconds", "startValue": 0,
          "endValue": t}
    heap = sampled("heap", "bytes", 5, [[0, 1], [0, 2, 3], [0, 1]], [4096, 512.9, 1024])
    several = {"$schema": SCHEMA, "shared": {"frames": frames}, "profiles": [
        dict(ev, events=events[:half]), heap, dict(ev, events=events[half:])]}
    micro = {"$schema": SCHEMA, "shared": {"frames": frames},
             "profiles": [sampled("us", "microseconds", 0, stacks[:50], weights[:50])]}
    return one, several, micro


class LegacyFormatsTest(unittest.TestCase):
    def test_uploads_arrive_as_sent(self):
        rng = random.Random(12)
        port, sink, pc = ps.pyroscope_to_sink(self, "legacy")
        trie_stacks = {";".join(st).encode(): v for st, v in random_stacks(rng, 250, NAMES).items()}
        trie_stacks[b"main;;handler"] = 3  # an empty frame
        trie_stacks[b"main;zero"] = 0  # no sample
        trie1 = trie_encode(trie_stacks)
        trie2 = trie1 + trie_encode({b"main;a": 11, b"extra;tail": 5})  # one after the other
        tree1 = tree_encode(random_stacks(rng, 250, NAMES))
        tree2 = tree_encode({("handler", "a;b"): 7, ("x",): 1})  # a name holding ';'
        one, several, micro = speedscope_docs(rng)
        # (label, name, query, content type, headers, body, expected views)
        uploads = [
            ("trie, format=trie", "ltrie.cpu{env=e2e,kind=trie}", dict(format="trie",
             sampleRate=100, spyName="phpspy"), "binary/octet-stream", {}, trie1,
             expected_trie_tree(trie1, False, "ltrie.cpu", 100)),
            ("trie by Content-Type, gzip, two tries", "ltrie2.alloc_objects{}", {},
             "binary/octet-stream+trie", {"Content-Encoding": "gzip"}, trie2,
             expected_trie_tree(trie2, False, "ltrie2.alloc_objects", 100)),
            ("tree, format=tree", "ltree.wall{env=e2e}", dict(format="tree", sampleRate=50),
             "binary/octet-stream", {}, tree1, expected_trie_tree(tree1, True, "ltree.wall", 50)),
            ("tree by Content-Type (before format=lines)", "ltree2", dict(format="lines"),
             "binary/octet-stream+tree", {}, tree2, expected_trie_tree(tree2, True, "ltree2", 100)),
            ("speedscope, sampled ms", "lss1{env=e2e}", dict(format="speedscope"),
             "application/json", {}, json.dumps(one).encode(),
             expected_speedscope(one, "lss1", 100)),
            ("speedscope, evented split in two + bytes", "lss2", dict(format="speedscope"),
             "application/json", {}, json.dumps(several).encode(),
             expected_speedscope(several, "lss2", 100)),
            ("speedscope, microseconds at sampleRate 250", "lss3.wall",
             dict(format="speedscope", sampleRate=250), "application/json",
             {"Content-Encoding": "gzip"}, json.dumps(micro).encode(),
             expected_speedscope(micro, "lss3.wall", 250)),
        ]
        want = {}
        for label, name, q, ctype, hdrs, body, exp in uploads:
            query = dict(q, name=name)
            data = gzip.compress(body) if hdrs.get("Content-Encoding") == "gzip" else body
            r = h.post(port, data, ctype, path="/ingest?" + urllib.parse.urlencode(query),
                       headers=hdrs)
            self.assertEqual(r.status, 200, "%s: %r" % (label, r))
            _, labels = ps.parse_ingest_name(name)
            for e in exp:
                self.assertTrue(e["samples"], label)
                attrs = dict(labels, **e["attrs"])
                want[(e["service"], e["type"], tuple(sorted(attrs.items())))] = (label, e)
        self.assertEqual(len(want), 8)

        def key(v):
            attrs = {k: x for k, x in v["resource"].items()
                     if k not in ("service.name", "pyroscope.spy")}
            return (v["resource"]["service.name"], v["type"], tuple(sorted(attrs.items())))

        def arrived(reqs):
            views = ps.otlp_views([x.message for x in reqs if x.message is not None])
            return {key(v) for v in views} >= set(want)

        sink.wait_until(arrived, 20)
        pc.stop()
        views = ps.otlp_views(sink.messages())
        got = collections.defaultdict(list)
        for v in views:
            got[key(v)].append(v)
        self.assertEqual(set(got), set(want))
        for k, (label, e) in want.items():
            vs = got[k]
            self.assertEqual(len(vs), 1, label)
            v = vs[0]
            samples = collections.Counter()
            for s, x in v["samples"].items():
                samples[s] += x
            self.assertEqual(samples, e["samples"], label)
            self.assertEqual(v["total"], sum(e["samples"].values()), label)
            self.assertEqual(v["period"], e["period"], label)
            if e["period"]:
                self.assertEqual(v["period_type"], e["type"], label)
            self.assertEqual(v["scope"][0], "profcol/pyroscope", label)
            self.assertEqual(v["resource"]["pyroscope.spy"],
                             "phpspy" if label.startswith("trie, format") else "unknown", label)

    def test_bad_bodies(self):
        port, sink, pc = ps.pyroscope_to_sink(self, "legacy-bad")
        good = trie_encode({b"main;work": 5})
        evented_bomb = {"$schema": SCHEMA, "shared": {"frames": [{"name": "f"}]}, "profiles": [
            {"type": "evented", "unit": "milliseconds",
             "events": [{"type": "O", "at": i, "frame": 0} for i in range(20000)]}]}
        bad = [
            ("truncated trie", "b1", "trie", good[:-1], 422, "trie: node at offset"),
            ("trie, unknown type suffix", "my.app", "trie", good, 400,
             "unknown profile type: app"),
            ("tree, bytes after it", "b3", "tree", tree_encode({("a",): 1}) + b"\0", 422,
             "bytes after the end of the tree"),
            ("tree, empty", "b4", "tree", b"", 422, "tree: empty body"),
            ("tree, invalid UTF-8", "b5", "tree", node(b"", 0, 1) + node(b"\xff", 1, 0), 422,
             "not valid UTF-8"),
            ("speedscope, wrong schema", "b6", "speedscope",
             json.dumps({"$schema": "https://example.com/schema.json"}).encode(), 422,
             "unknown $schema"),
            ("speedscope, not JSON", "b7", "speedscope", b"{\"$schema\":", 422, "invalid JSON"),
            ("speedscope, unknown type suffix (several profiles, unit none)", "b8", "speedscope",
             json.dumps({"$schema": SCHEMA, "shared": {"frames": [{"name": "f"}]}, "profiles": [
                 sampled("a", "none", 0, [[0]], [1]), sampled("b", "bytes", 1, [[0]], [1])]}
             ).encode(), 422, "unknown profile type: none"),
            ("speedscope, stacks of 1..20000 frames", "b9", "speedscope",
             json.dumps(evented_bomb).encode(), 413, "max_request_decoded_size"),
        ]
        for label, name, fmt, body, status, msg in bad:
            r = h.post(port, body, "application/octet-stream",
                       path="/ingest?" + urllib.parse.urlencode(dict(name=name, format=fmt)))
            self.assertEqual(r.status, status, "%s: %r" % (label, r))
            self.assertIn(msg, r.body.decode(), label)
        r = h.post(port, good, "application/octet-stream",
                   path="/ingest?name=fine.cpu&format=trie")
        self.assertEqual(r.status, 200, r)
        sink.wait_requests(1, 15)
        pc.stop()
        services = {v["resource"]["service.name"] for v in ps.otlp_views(sink.messages())}
        self.assertEqual(services, {"fine"})


def write_seeds(d):
    """The fuzz_legacy seed corpus: the first byte picks the format (% 3) and options."""
    rng = random.Random(3)
    os.makedirs(d, exist_ok=True)
    trie = trie_encode({";".join(st).encode(): v
                        for st, v in random_stacks(rng, 12, NAMES[:6]).items()})
    tree = tree_encode(random_stacks(rng, 12, NAMES[:6]))
    one, several, micro = speedscope_docs(random.Random(4))
    small = {"$schema": SCHEMA, "shared": {"frames": [{"name": "a"}, {"name": "b"}]},
             "profiles": [sampled("s", "milliseconds", 0, [[0, 1], [0]], [3.5, 1]),
                          {"type": "evented", "name": "e", "unit": "bytes", "startValue": 0,
                           "events": [{"type": "O", "at": 0, "frame": 0},
                                      {"type": "O", "at": 1, "frame": 1},
                                      {"type": "C", "at": 3, "frame": 1},
                                      {"type": "C", "at": 4, "frame": 0}]}]}
    seeds = {"trie": b"\x00" + trie, "trie_two": b"\x03" + trie + trie,
             "tree": b"\x01" + tree, "tree_units": b"\x07" + tree,
             "speedscope_small": b"\x02" + json.dumps(small).encode(),
             "speedscope_micro": b"\x05" + json.dumps(micro).encode()}
    for name, data in seeds.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    h.main(write_seeds)
