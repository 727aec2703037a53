#!/usr/bin/python3
"""JFR through the pyroscope receiver (issue 12), against the JDK's own reader.

Recordings are made here, at run time, by tests/data/gen/jfr/record.sh (JfrLoad.java under
-XX:StartFlightRecording: CPU in named methods on named threads, allocations in and outside
TLABs, a contended monitor, parked threads, stacks deeper than the JDK's stackdepth):
  * A: JDK 17, one chunk;  R: JDK 17, several chunks (a second recording started and stopped
    halfway: the JDK rotates chunks);  T: Temurin 25 when installed (skipped with a message
    otherwise);  C: A and T (else R) concatenated, a multi-chunk file from two JVMs (spec §2.1);
  * S: a small recording written here from spec §2 (constant pools split over two checkpoints,
    an async-profiler style lambda class, a truncated stack, and the Grafana fork's contextId /
    spanId / spanName / traceIdHi / traceIdLo fields of §3.1), read back by `jfr` too.

The oracle is `jfr print --json --stack-depth 2048` of the same file, chunk by chunk (each chunk
cut out alone: see Recordings for why not the whole file at once), folded in Python with
Pyroscope's mapping written again from spec §3.2-3.5: per event type, per stack
of Class.method frames (symbol rewrites of §3.5, a `[truncated]` root frame for truncated
stacks) the count of events and the sum of the value (ExecutionSample x 1e9/sampleRate,
tlabSize, allocationSize, weight, lock durations). No expected number is typed in here.

ingest: profcol with the issue's example config (pyroscope receiver -> [tracelink] ->
otlphttp to harness' Sink + pyroscope exporter (push) to pyro_support's PyroscopeServer).
Every recording is uploaded raw, gzipped, or as the Java agent's multipart (gzipped `jfr` part,
gzipped LabelsSnapshot `labels` part built by hand from spec §1.2). What reaches the OTLP sink,
and what `go tool pprof -raw` reads from the Pyroscope exporter's uploads, equals the oracle per
event type: total, per method (self and inclusive), and per stack; the series carry the metric
name (`__name__`) of §3.2. S's labels part: contextId labels and span_name as sample
attributes, spanId/traceId as links made by [tracelink] (§3.4).

bad input: while a good client keeps uploading S (only 200s, and only its data reaches the
sink): a truncated chunk, wrong magic, a checkpoint chain that loops, a constant-pool type that
contains itself, a stack of 100,000 frames, a string claiming 4 GB, a multipart without its jfr
part: each 4xx with a message.
"""

import collections
import concurrent.futures
import gzip
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
import pyro_support as ps  # noqa: E402

GEN = os.path.join(h.SRC, "tests", "data", "gen", "jfr", "record.sh")
TEMURIN25 = "/usr/lib/jvm/temurin-25-jdk-amd64"
SAMPLE_RATE = 100
MASK64 = (1 << 64) - 1

# ---------------------------------------------------------------------------------------------
# Pyroscope's JFR -> pprof mapping, written from spec §3.2 (JDK event types)
# event -> (__name__, period type, [(sample type, value: 1 | "period" | a field name)])

MAPPING = {
    "jdk.ExecutionSample": ("process_cpu", ("cpu", "nanoseconds"),
                            [(("cpu", "nanoseconds"), "period")]),
    "jdk.ObjectAllocationInNewTLAB": ("memory", ("space", "bytes"),
                                      [(("alloc_in_new_tlab_objects", "count"), 1),
                                       (("alloc_in_new_tlab_bytes", "bytes"), "tlabSize")]),
    "jdk.ObjectAllocationOutsideTLAB": ("memory", ("space", "bytes"),
                                        [(("alloc_outside_tlab_objects", "count"), 1),
                                         (("alloc_outside_tlab_bytes", "bytes"),
                                          "allocationSize")]),
    "jdk.ObjectAllocationSample": ("memory", ("space", "bytes"),
                                   [(("alloc_sample_objects", "count"), 1),
                                    (("alloc_sample_bytes", "bytes"), "weight")]),
    "jdk.JavaMonitorEnter": ("mutex", ("mutex", "count"),
                             [(("contentions", "count"), 1),
                              (("delay", "nanoseconds"), "duration")]),
    "jdk.ThreadPark": ("block", ("block", "count"),
                       [(("contentions", "count"), 1), (("delay", "nanoseconds"), "duration")]),
}
# §3.3: these carry no correlation (contextId, span, trace) even if the fields were there
NO_CORRELATION = {"jdk.ObjectAllocationSample", "jdk.ThreadPark"}

# §3.5 symbol rewrites that can match a Java class or method symbol (the native-library ones
# cannot occur in JDK recordings), anchored to the whole symbol
REWRITES = [
    (re.compile(r"^jdk/internal/reflect/GeneratedMethodAccessor[0-9]+$"),
     "jdk/internal/reflect/GeneratedMethodAccessor_"),
    (re.compile(r"^(.*)\$\$Lambda(?:\$?[0-9]*[./](?:0x)?[0-9a-fA-F]+|[0-9]+)$"), r"\1$$Lambda_"),
    (re.compile(r"^(.*)\$\$EnhancerBySpringCGLIB\$\$.*$"), r"\1$$EnhancerBySpringCGLIB$$_"),
]
TRUNCATED_FRAME = "[truncated]"


def rewrite(sym):
    for pat, rep in REWRITES:
        if pat.match(sym):
            return pat.sub(rep, sym)
    return sym


def frame_name(frame):
    m = frame["method"]
    cls = (m.get("type") or {}).get("name") or ""
    return rewrite(cls) + "." + rewrite(m.get("name") or "")


_DUR = re.compile(r"^(-)?PT(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)(?:\.(\d+))?S)?$")


def duration_ns(v):
    """jfr print --json writes Timespan fields as ISO-8601 durations (PT0.004101045S)."""
    if isinstance(v, int):
        return v
    m = _DUR.match(v)
    if not m:
        raise AssertionError("duration %r" % v)
    sign, hh, mm, ss, frac = m.groups()
    ns = ((int(hh or 0) * 60 + int(mm or 0)) * 60 + int(ss or 0)) * 1_000_000_000
    ns += int(((frac or "") + "000000000")[:9])
    return -ns if sign else ns


def jfr_print(path, jfr="jfr"):
    """The events Pyroscope maps, as `jfr print --json` reads them."""
    r = subprocess.run([jfr, "print", "--json", "--stack-depth", "2048", "--events",
                        ",".join(MAPPING), path], capture_output=True, timeout=300,
                       stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise RuntimeError("jfr print %s: %s" % (path, r.stderr.decode()[-2000:]))
    return json.loads(r.stdout)["recording"]["events"]


def correlation(values, snapshot):
    """-> (sorted string labels, link (trace hex, span hex) or None), as spec §3.4 gives them
    and [tracelink] turns span/trace ids into a link (a span id alone: zero trace id)."""
    labels = []
    ctx = values.get("contextId") or 0
    strings = snapshot.get("strings", {}) if snapshot else {}
    if snapshot and ctx in snapshot.get("contexts", {}):
        for k, v in snapshot["contexts"][ctx].items():
            labels.append((strings.get(k, ""), strings.get(v, "")))
    span = (values.get("spanId") or 0) & MASK64
    name = values.get("spanName") or 0
    if name and strings.get(name):
        labels.append(("span_name", strings[name]))
    hi, lo = (values.get("traceIdHi") or 0) & MASK64, (values.get("traceIdLo") or 0) & MASK64
    link = None
    if span or hi or lo:
        link = ("%016x%016x" % (hi, lo), "%016x" % span)
    return tuple(sorted(labels)), link


def fold(events, sample_rate, snapshot=None):
    """Pyroscope's mapping of the events: {(metric, period type, sample type):
    Counter{(frame names leaf first, labels, link): value}}, plus dropped-event counts."""
    period = 1_000_000_000 // sample_rate if sample_rate else 0
    out = collections.defaultdict(collections.Counter)
    dropped = collections.Counter()
    for e in events:
        t, v = e["type"], e["values"]
        metric, ptype, values = MAPPING[t]
        if t == "jdk.ExecutionSample":
            state = v.get("state")
            state = state.get("name") if isinstance(state, dict) else state
            if not state or state == "STATE_SLEEPING":
                dropped["state"] += 1
                continue
        st = v.get("stackTrace")
        if st is None:              # §2.10: a missing stack drops the sample
            dropped["no stack"] += 1
            continue
        names = tuple(frame_name(f) for f in st["frames"])
        if st["truncated"]:
            names += (TRUNCATED_FRAME,)
        labels, link = ((), None) if t in NO_CORRELATION else correlation(v, snapshot)
        for stype, how in values:
            if how == 1:
                val = 1
            elif how == "period":
                val = period
            elif how == "duration":
                val = duration_ns(v["duration"])
            else:
                val = v[how]
            out[(metric, ptype, stype)][(names, labels, link)] += val
    return dict(out), dropped


def add_folds(*folds):
    out = collections.defaultdict(collections.Counter)
    for f in folds:
        for k, c in f.items():
            out[k].update(c)
    return dict(out)


def per_method(counter, leaf):
    """{method: value}: leaf=True the self value (leaf frame), else inclusive (once per stack)."""
    out = collections.Counter()
    for (names, *_), v in counter.items():
        for n in (names[:1] if leaf else set(names)):
            out[n] += v
    return out


# ---------------------------------------------------------------------------------------------
# a small JFR writer, from spec §2 (for S and for the bad recordings)

def jv(n):
    """Compressed integer (§2.3): LEB128 of the 64-bit pattern, the 9th byte whole."""
    n &= MASK64
    out = bytearray()
    for _ in range(8):
        if n < 0x80:
            out.append(n)
            return bytes(out)
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def jstr(s):
    """java.lang.String (§2.4): null, empty, else UTF-8 (encoding 3)."""
    if s is None:
        return b"\x00"
    if s == "":
        return b"\x01"
    b = s.encode("utf-8")
    return b"\x03" + jv(len(b)) + b


def record(type_id, payload):
    """Record (§2.5): size as a padded 4-byte varint counting itself, type, payload."""
    body = jv(type_id) + payload
    n = 4 + len(body)
    return bytes([n & 0x7F | 0x80, n >> 7 & 0x7F | 0x80, n >> 14 & 0x7F | 0x80, n >> 21]) + body


class Meta:
    """The metadata record (§2.6): classes with ids and fields (name, type, cp, array)."""

    def __init__(self):
        self.classes, self.ids = [], {}

    def cls(self, name, fields=(), super_type=None, simple=False, cid=None):
        self.ids[name] = cid if cid is not None else 20 + len(self.classes)
        self.classes.append((name, self.ids[name], super_type, simple, fields))

    def encode(self, ticks):
        strings, index = [], {}

        def s(text):
            if text not in index:
                index[text] = len(strings)
                strings.append(text)
            return jv(index[text])

        def element(name, attrs, children=()):
            return (s(name) + jv(len(attrs)) + b"".join(s(k) + s(v) for k, v in attrs) +
                    jv(len(children)) + b"".join(children))

        classes = []
        for name, cid, sup, simple, fields in self.classes:
            attrs = [("name", name), ("id", str(cid))]
            attrs += [("superType", sup)] if sup else []
            attrs += [("simpleType", "true")] if simple else []
            kids = [element("field", [("name", f), ("class", str(self.ids[ft]))] +
                            ([("constantPool", "true")] if "*" in how else []) +
                            ([("dimension", "1")] if "[]" in how else []))
                    for f, ft, how in fields]
            classes.append(element("class", attrs, kids))
        root = element("root", [], [element("metadata", [], classes),
                                    element("region", [("locale", "en_US"), ("gmtOffset", "0")])])
        return record(0, jv(ticks) + jv(0) + jv(1) + jv(len(strings)) +
                      b"".join(jstr(t) for t in strings) + root)


def std_meta():
    """The types stacks need (§2.9), ExecutionSample with the Grafana fork's correlation
    fields (§3.1), ActiveSetting. Field spec: "*" constant-pool reference, "[]" array."""
    m = Meta()
    for p in ("boolean", "char", "float", "double", "byte", "short", "int", "long",
              "java.lang.String"):
        m.cls(p)
    sym, cls, s = "jdk.types.Symbol", "java.lang.Class", "java.lang.String"
    m.cls(sym, [("string", s, "")], simple=True)
    m.cls("jdk.types.Package", [("name", sym, "*")])
    m.cls("jdk.types.ClassLoader", [("type", cls, "*"), ("name", sym, "*")])
    m.cls(cls, [("classLoader", "jdk.types.ClassLoader", "*"), ("name", sym, "*"),
                ("package", "jdk.types.Package", "*"), ("modifiers", "int", ""),
                ("hidden", "boolean", "")])
    m.cls("jdk.types.Method", [("type", cls, "*"), ("name", sym, "*"), ("descriptor", sym, "*"),
                               ("modifiers", "int", ""), ("hidden", "boolean", "")])
    m.cls("jdk.types.FrameType", [("description", s, "")])
    m.cls("jdk.types.ThreadState", [("name", s, "")])
    m.cls("jdk.types.StackFrame", [("method", "jdk.types.Method", "*"), ("lineNumber", "int", ""),
                                   ("bytecodeIndex", "int", ""),
                                   ("type", "jdk.types.FrameType", "*")])
    m.cls("jdk.types.StackTrace", [("truncated", "boolean", ""),
                                   ("frames", "jdk.types.StackFrame", "[]")])
    m.cls("java.lang.Thread", [("osName", s, ""), ("osThreadId", "long", ""),
                               ("javaName", s, ""), ("javaThreadId", "long", "")])
    m.cls("jdk.ExecutionSample", [("startTime", "long", ""), ("sampledThread", "java.lang.Thread", "*"),
                                  ("stackTrace", "jdk.types.StackTrace", "*"),
                                  ("state", "jdk.types.ThreadState", "*"),
                                  ("contextId", "long", ""), ("spanId", "long", ""),
                                  ("spanName", "long", ""), ("traceIdHi", "long", ""),
                                  ("traceIdLo", "long", "")], "jdk.jfr.Event", cid=101)
    m.cls("jdk.ActiveSetting", [("startTime", "long", ""), ("duration", "long", ""),
                                ("eventThread", "java.lang.Thread", "*"),
                                ("stackTrace", "jdk.types.StackTrace", "*"), ("id", "long", ""),
                                ("name", s, ""), ("value", s, "")], "jdk.jfr.Event", cid=102)
    return m


def checkpoint(meta, ticks, delta, pools):
    """Checkpoint record (§2.8); pools = [(type name, {key: encoded value})]."""
    out = jv(ticks) + jv(0) + jv(delta) + jv(1) + jv(len(pools))
    for tname, entries in pools:
        out += jv(meta.ids[tname]) + jv(len(entries))
        out += b"".join(jv(k) + v for k, v in entries.items())
    return record(1, out)


def chunk(meta, events, pools_a, pools_b, start_ns, cycle=False):
    """Header, metadata, events, then two checkpoints (the header points at the second, whose
    delta points back at the first). cycle: the first one's delta points forward at the
    second, so the chain never ends."""
    ticks = 1_000_000
    body = meta.encode(ticks) + b"".join(events)
    off_a = 68 + len(body)
    delta = 0
    cp_a = checkpoint(meta, ticks, 0, pools_a)
    while cycle and delta != len(cp_a):       # the delta's varint length is part of the length
        delta = len(cp_a)
        cp_a = checkpoint(meta, ticks, delta, pools_a)
    off_b = off_a + len(cp_a)
    cp_b = checkpoint(meta, ticks, off_a - off_b, pools_b)
    header = b"FLR\0" + struct.pack(">HHqqqqqqq", 2, 1, off_b + len(cp_b), off_b, 68, start_ns,
                                    1_000_000_000, ticks, 1_000_000_000) + b"\0\0\0\x01"
    return header + body + cp_a + cp_b


# S's events: (count, (thread, stack, contextId, spanId, spanName, traceIdHi, traceIdLo))
SYN_EVENTS = [
    (5, (1, 1, 0, 0, 0, 0, 0)),
    (4, (1, 1, 1, 0x11223344556677AA, 0, 0x01020304050607AB, 0x111213141516171C)),
    (3, (2, 2, 2, 0xF0E1D2C3B4A59687, 6, 0x2122232425262728, 0x31323334353637CD)),
    (2, (2, 3, 3, 0, 0, 0, 0)),
    (2, (1, 2, 4, 0x0A0B0C0D0E0F1011, 0, 0, 0)),
    (1, (1, 2, 9, 0, 0, 0, 0)),
]
# the agent's LabelsSnapshot for S (spec §1.2): context 9 is not in it
SYN_LABELS = {"strings": {1: "route", 2: "/checkout", 3: "/db", 4: "tenant", 5: "acme",
                          6: "SELECT cart"},
              "contexts": {1: {1: 2}, 2: {1: 3, 4: 5}, 3: {4: 5}, 4: {4: 5}}}


def synthetic(start_ns, cycle=False, frames=0, huge_string=False, self_type=False):
    """Recording S: Symbols, Classes and ClassLoaders (a Class <-> ClassLoader reference
    cycle, as real files have) in the first checkpoint; Methods, StackTraces and Threads in
    the second. Variants for the bad-input cases."""
    m = std_meta()
    if self_type:     # a type that contains itself inline: decoding an entry never ends
        m.cls("profcol.test.Loop", [("next", "profcol.test.Loop", "")])
    syms = {1: "com/example/Shop", 2: "com/example/Db", 3: "java/lang/Thread",
            4: "com/example/Shop$$Lambda$17.0x0000000800c01234", 5: "checkout", 6: "price",
            7: "query", 8: "run", 9: "()V", 10: "jdk/internal/loader/ClassLoaders$AppClassLoader",
            11: "app"}
    symbols = {k: jstr(v) for k, v in syms.items()}
    if huge_string:
        symbols[12] = b"\x03" + jv(4 << 30) + b"claims 4 GB"
    classes = {k: jv(1) + jv(k) + jv(0) + jv(1) + (b"\x01" if k == 4 else b"\x00")
               for k in (1, 2, 3, 4, 10)}
    methods = {1: (1, 5), 2: (1, 6), 3: (2, 7), 4: (3, 8), 5: (4, 8)}
    methods = {k: jv(c) + jv(n) + jv(9) + jv(1) + b"\x00" for k, (c, n) in methods.items()}

    def stack(meths, truncated=False):
        return (b"\x01" if truncated else b"\x00") + jv(len(meths)) + b"".join(
            jv(mk) + jv(10 + i) + jv(i) + jv(1) for i, mk in enumerate(meths))

    stacks = {1: stack([2, 1, 5, 4]), 2: stack([3, 1, 5, 4]), 3: stack([1, 4], truncated=True)}
    if frames:
        stacks[4] = stack([1] * frames)
    pools_a = [("jdk.types.Symbol", symbols), ("java.lang.Class", classes),
               ("jdk.types.ClassLoader", {1: jv(10) + jv(11)}),
               ("jdk.types.FrameType", {1: jstr("JIT compiled")}),
               ("jdk.types.ThreadState", {1: jstr("STATE_RUNNABLE")})]
    pools_b = [("jdk.types.Method", methods), ("jdk.types.StackTrace", stacks),
               ("java.lang.Thread", {1: jstr("syn-main") + jv(101) + jstr("syn-main") + jv(1),
                                     2: jstr("syn-worker") + jv(102) + jstr("syn-worker") + jv(2)})]
    if self_type:
        pools_b.append(("profcol.test.Loop", {1: b""}))
    # the async-profiler `event` setting (§3.4: the series label jfr_event)
    events = [record(102, jv(1_000_100) + jv(0) + jv(1) + jv(0) + jv(101) + jstr("event") +
                     jstr("itimer"))]
    t = 1_000_200
    for n, fields in SYN_EVENTS + ([(1, (1, 4, 0, 0, 0, 0, 0))] if frames else []):
        for _ in range(n):
            t += 10_000_000
            tid, st, *corr = fields
            events.append(record(101, jv(t) + jv(tid) + jv(st) + jv(1) +
                                 b"".join(jv(x) for x in corr)))
    return chunk(m, events, pools_a, pools_b, start_ns, cycle)


# ---------------------------------------------------------------------------------------------
# what the Java agent sends (spec §1.1, §1.2)

def labels_snapshot(snap):
    """LabelsSnapshot protobuf by hand: contexts (1) map<int64, Context{labels (1)
    map<int64, int64>}>, strings (2) map<int64, string>."""
    out = b""
    for cid, labels in snap.get("contexts", {}).items():
        ctx = b"".join(h.pb_field(1, b"\x08" + h.varint(k) + b"\x10" + h.varint(v))
                       for k, v in labels.items())
        out += h.pb_field(1, b"\x08" + h.varint(cid) + h.pb_field(2, ctx))
    for sid, text in snap.get("strings", {}).items():
        out += h.pb_field(2, b"\x08" + h.varint(sid) + h.pb_field(2, text.encode()))
    return out


BOUNDARY = "5e2b1c0a-jfr-e2e-boundary"


def agent_multipart(jfr_part, labels_part=None):
    """The agent's form (OkHttp MultipartBody): `jfr` without a Content-Type, `labels` as
    application/x-protobuf, both with filename=."""
    out = (b"--%s\r\nContent-Disposition: form-data; name=\"jfr\"; filename=\"jfr\"\r\n\r\n"
           % BOUNDARY.encode()) + jfr_part + b"\r\n"
    if labels_part is not None:
        out += (b"--%s\r\nContent-Disposition: form-data; name=\"labels\"; filename=\"labels\""
                b"\r\nContent-Type: application/x-protobuf\r\n\r\n" % BOUNDARY.encode() +
                labels_part + b"\r\n")
    return out + b"--%s--\r\n" % BOUNDARY.encode(), "multipart/form-data; boundary=" + BOUNDARY


def ingest_path(app, labels, t_from, until, sample_rate=SAMPLE_RATE):
    name = app + "{" + ",".join("%s=%s" % kv for kv in sorted(labels.items())) + "}"
    q = [("name", name), ("units", "samples"), ("aggregationType", "sum"), ("from", t_from),
         ("until", until), ("spyName", "javaspy"), ("sampleRate", sample_rate),
         ("format", "jfr")]
    return "/ingest?" + urllib.parse.urlencode(q)


def upload(port, app, data, shape, snapshot=None, sample_rate=SAMPLE_RATE, t_from=None):
    """POST one recording as `shape` (raw, gzip, multipart); returns (response, from, until)."""
    t_from = t_from or int(time.time()) - 10
    until = t_from + 10
    path = ingest_path(app, {"env": "e2e", "shape": shape}, t_from, until, sample_rate)
    if shape == "raw":
        body, ctype = data, "application/octet-stream"
    elif shape == "gzip":
        body, ctype = gzip.compress(data, 1), "application/octet-stream"
    else:
        lp = gzip.compress(labels_snapshot(snapshot), 1) if snapshot else None
        body, ctype = agent_multipart(gzip.compress(data, 1), lp)
    return h.post(port, body, ctype, path=path, timeout=60), t_from, until


# ---------------------------------------------------------------------------------------------
# the recordings of one run, made once

def split_chunks(data):
    """The chunks of a recording (each is self-contained, spec §2.1; chunk size at offset 8)."""
    out, pos = [], 0
    while pos + 68 <= len(data):
        size, = struct.unpack(">q", data[pos + 8:pos + 16])
        if size < 68 or pos + size > len(data):
            raise AssertionError("chunk at %d: size %d" % (pos, size))
        out.append(data[pos:pos + size])
        pos += size
    return out


class Recordings:
    """The recordings of one run and their events as `jfr print` reads them, chunk by chunk.

    Why each chunk alone: reading a whole file, the JDK reader parses an event's constant field
    with a parser that first returns the value of the previous event's field when the key is the
    same (jdk.jfr.internal.consumer.ParserFactory's EventValueConstantParser), and that parser
    lives on into the next chunk. An event whose stack trace is missing from its own chunk (the
    JDK writes a few at a rotation) thus gets the previous event's stack when the keys happen to
    match, and for two JVMs' files put together, the first file's constants. A chunk cut out alone
    reads the same everywhere else, leaves those events without a stack (Pyroscope drops them; its
    parser resets the pools per chunk), and C's chunks are A's and T's."""

    def __init__(self):
        self.dir = ps.mktemp("jfr-")
        self.files, self.by_chunk, self.t25_missing = {}, {}, None

    def _print_chunks(self, name, jfr="jfr"):
        for i, c in enumerate(split_chunks(self.files[name])):
            path = os.path.join(self.dir, "%s-chunk%d.jfr" % (name, i))
            with open(path, "wb") as f:
                f.write(c)
            self.by_chunk[c] = jfr_print(path, jfr)

    def _record(self, name, args, jfr="jfr"):
        """record.sh, then jfr print of each chunk (on a worker thread)."""
        path = os.path.join(self.dir, name + ".jfr")
        r = subprocess.run([GEN] + list(args) + [path], capture_output=True, text=True,
                           timeout=180, stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            raise RuntimeError("record.sh %s: exit %d\n%s%s" % (name, r.returncode, r.stdout,
                                                                r.stderr))
        with open(path, "rb") as f:
            self.files[name] = f.read()
        self._print_chunks(name, jfr)

    def make(self):
        for tool in ("java", "javac", "jfr"):
            if not shutil.which(tool):
                raise unittest.SkipTest("%s not found (Debian: openjdk-17-jdk-headless)" % tool)
        jobs = [("A", ["--seconds", "2"]), ("R", ["--seconds", "3", "--rotate"])]
        if os.access(os.path.join(TEMURIN25, "bin", "java"), os.X_OK):
            # the newer JDK's own reader for its file
            jobs.append(("T", ["--seconds", "2", "--java-home", TEMURIN25],
                         os.path.join(TEMURIN25, "bin", "jfr")))
        else:
            self.t25_missing = "Temurin 25 not installed at %s" % TEMURIN25
            print("test_jfr: %s: no JDK 25 recording" % self.t25_missing, file=sys.stderr)
        self.files["S"] = synthetic(time.time_ns())
        with concurrent.futures.ThreadPoolExecutor(len(jobs) + 1) as ex:
            futs = [ex.submit(self._record, *j) for j in jobs]
            futs.append(ex.submit(self._print_chunks, "S"))
            for f in futs:
                f.result()
        # C: two JVMs' files back to back (constant ids collide across its chunks)
        self.files["C"] = self.files["A"] + self.files["T" if "T" in self.files else "R"]
        return self

    def events(self, name):
        return [e for c in split_chunks(self.files[name]) for e in self.by_chunk[c]]

    def oracle(self, name, sample_rate=SAMPLE_RATE, snapshot=None):
        folded, _ = fold(self.events(name), sample_rate, snapshot)
        return folded

    def chunks(self, name):
        return len(split_chunks(self.files[name]))


_RECS = None


def recordings():
    global _RECS
    if _RECS is None:
        _RECS = Recordings().make()
    return _RECS


# ---------------------------------------------------------------------------------------------
# what arrived, in the oracle's form

def otlp_fold(views):
    """{(period type, sample type): Counter{(names, labels, link): value}} from otlp_views."""
    out = collections.defaultdict(collections.Counter)
    for v in views:
        for (names, attrs), val in v["samples"].items():
            d = dict(attrs)
            link = None
            if "link.trace_id" in d:
                link = (d.pop("link.trace_id")[1], d.pop("link.span_id")[1])
            labels = tuple(sorted((k, x[1]) for k, x in d.items()))
            out[(v["period_type"], v["type"])][(names, labels, link)] += val
    return dict(out)


def pyro_fold(uploads, label_keys, tmp):
    """{(__name__, sample type): Counter{(names, labels, link): value}} from the Pyroscope
    exporter's pprofs as `go tool pprof -raw` reads them; also {__name__: series labels}."""
    out = collections.defaultdict(collections.Counter)
    series = collections.defaultdict(list)
    n = 0
    for u in uploads:
        metric = u.labels.get("__name__")
        series[metric].append(u.labels)
        for raw in u.raws:
            n += 1
            path = os.path.join(tmp, "up-%d.pb.gz" % n)
            with open(path, "wb") as f:
                f.write(raw)
            v = ps.go_pprof_raw(path, tmp)
            for t in v["types"]:
                for (names, labels), val in v["samples"][t].items():
                    d = dict((k, x[1]) for k, x in labels)
                    link = None
                    if "span_id" in d or "trace_id" in d:
                        link = (d.pop("trace_id", "0" * 32), d.pop("span_id", "0" * 16))
                    kept = tuple(sorted((k, x) for k, x in d.items() if k in label_keys))
                    out[(metric, t)][(names, kept, link)] += val
    return dict(out), dict(series)


def by_otlp_key(oracle):
    return {(ptype, stype): c for (_, ptype, stype), c in oracle.items()}


def by_pyro_key(oracle):
    return {(metric, stype): c for (metric, _, stype), c in oracle.items()}


def clean(c):
    return +collections.Counter(c)


class JfrIngestTest(unittest.TestCase):
    """The issue's example config; every recording in several shapes; OTLP and Pyroscope
    exporter outputs against the oracle."""

    @classmethod
    def setUpClass(cls):
        cls.recs = recordings()
        cls.tmp = ps.mktemp("jfr-pprof-")
        cls.sink = h.Sink().start()
        cls.pyro = ps.PyroscopeServer().start()
        cls.port = h.free_port()
        cfg = ("receivers:\n  pyroscope:\n    endpoint: 127.0.0.1:%d\n"
               "processors:\n  tracelink: {}\n"
               "exporters:\n  otlphttp:\n    endpoint: %s\n  pyroscope:\n    endpoint: %s\n"
               "service:\n  pipelines:\n    profiles:\n      receivers: [pyroscope]\n"
               "      processors: [tracelink]\n      exporters: [otlphttp, pyroscope]\n"
               % (cls.port, cls.sink.url, cls.pyro.url))
        cls.pc = h.Profcol(cfg, wait_ports=[cls.port], name="jfr-ingest").start()

    @classmethod
    def tearDownClass(cls):
        h.stop_all(cls.pc, cls.sink, cls.pyro)

    def send(self, app, rec, shape, snapshot=None, sample_rate=SAMPLE_RATE):
        r, t_from, until = upload(self.port, app, self.recs.files[rec], shape, snapshot,
                                  sample_rate)
        self.assertEqual(r.status, 200, "%s (%s %s): %r" % (app, rec, shape, r))
        return t_from, until

    def wait_arrived(self, apps_want):
        """apps_want: {app: oracle}. Wait until the sink and the Pyroscope server hold at least
        the oracle's totals for every app; return (views per app, uploads per app)."""
        def otlp_ok(reqs):
            views = ps.otlp_views([r.message for r in reqs if r.message is not None])
            for app, want in apps_want.items():
                got = otlp_fold(ps.select(views, **{"service.name": app}))
                for k, c in by_otlp_key(want).items():
                    if sum(got.get(k, {}).values()) < sum(c.values()):
                        return False
            return True

        def pyro_ok(ups):
            for app, want in apps_want.items():
                got = collections.Counter()
                for u in ups:
                    if u.app == app:
                        for p in u.profiles:
                            for t, v in ps.pprof_view(p)["totals"].items():
                                got[(u.labels.get("__name__"), t)] += v
                for k, c in by_pyro_key(want).items():
                    if got[k] < sum(c.values()):
                        return False
            return True

        self.sink.wait_until(otlp_ok, 30)
        self.pyro.wait_until(pyro_ok, 30)
        views = ps.otlp_views(self.sink.messages())
        return ({app: ps.select(views, **{"service.name": app}) for app in apps_want},
                {app: [u for u in self.pyro.snapshot() if u.app == app] for app in apps_want})

    def check_equal(self, want, got, where):
        """Per profile: the total, per method (self, inclusive), per (stack, labels, link)."""
        self.assertEqual(sorted(got), sorted(want), "%s: the profiles present" % where)
        for k in sorted(want):
            w, g = clean(want[k]), clean(got[k])
            self.assertEqual(sum(g.values()), sum(w.values()), "%s %s: total" % (where, k))
            for leaf in (True, False):
                wm, gm = per_method(w, leaf), per_method(g, leaf)
                self.assertEqual(dict(gm), dict(wm), "%s %s: per method (%s); differ: %s"
                                 % (where, k, "self" if leaf else "inclusive",
                                    sorted(set(wm.items()) ^ set(gm.items()))[:10]))
            self.assertEqual(g, w, "%s %s: per stack; only in profcol's: %s; only in jfr's: %s"
                             % (where, k, list((g - w).items())[:5], list((w - g).items())[:5]))

    def check_upload(self, app, want, views, uploads, t_from, until, label_keys=(),
                     jfr_event=None):
        self.assertTrue(views, "%s: nothing reached the OTLP sink" % app)
        for v in views:
            res = v["resource"]
            self.assertEqual(res.get("service.name"), app)
            self.assertEqual(res.get("env"), "e2e")
            self.assertEqual(res.get("pyroscope.spy"), "javaspy")
            self.assertEqual((v["time"], v["duration"]),
                             (t_from * 1_000_000_000, (until - t_from) * 1_000_000_000),
                             "%s: time from `from`, duration until - from" % app)
        self.check_equal(by_otlp_key(want), otlp_fold(views), "%s OTLP" % app)
        self.assertEqual(self.pyro.violations, [], "protocol violations at the Pyroscope server")
        got, series = pyro_fold(uploads, set(label_keys), self.tmp)
        # Older Go pprof readers show no sample without locations, newer ones (Go 1.26's) do
        # (the JDK writes an occasional event with an empty stack; OTLP above keeps it): those
        # samples are left out on both sides
        located = {k: collections.Counter({x: v for x, v in c.items() if x[0]})
                   for k, c in by_pyro_key(want).items()}
        got = {k: collections.Counter({x: v for x, v in c.items() if x[0]})
               for k, c in got.items()}
        self.check_equal(located, got, "%s pyroscope exporter (go tool pprof)" % app)
        for metric, labels in series.items():
            for lb in labels:
                self.assertEqual(lb.get("service_name"), app)
                self.assertEqual(lb.get("pyroscope_spy"), "javaspy")
                if jfr_event:
                    self.assertEqual(lb.get("jfr_event"), jfr_event, "%s %s" % (app, metric))

    def check_oracle_sane(self, rec, want):
        """The recording has every event type the program makes, in its named methods."""
        metrics = {m for m, _, _ in want}
        self.assertEqual(metrics, {"process_cpu", "memory", "mutex", "block"}, rec)
        methods = set(per_method(want[("process_cpu", ("cpu", "nanoseconds"),
                                      ("cpu", "nanoseconds"))], False))
        for m in ("profcol/jfrtest/JfrLoad.burnAlpha", "profcol/jfrtest/JfrLoad.burnBeta"):
            self.assertIn(m, methods, "%s: no CPU sample in %s" % (rec, m))

    def run_uploads(self, cases):
        """cases: [(app, recording, shape, snapshot, sample rate)]: upload all, then check."""
        sent = {}
        for app, rec, shape, snap, rate in cases:
            want = self.recs.oracle(rec, rate, snap)
            t_from, until = self.send(app, rec, shape, snap, rate)
            sent[app] = (want, t_from, until, rec)
        views, uploads = self.wait_arrived({a: s[0] for a, s in sent.items()})
        for app, (want, t_from, until, rec) in sent.items():
            with self.subTest(app):
                self.check_upload(app, want, views[app], uploads[app], t_from, until)

    def test_jdk17_raw_gzip_multipart(self):
        """One JDK 17 chunk as a raw body, gzipped (sniffed; sampleRate 250) and as the agent's
        multipart with a labels part (no contextId in JDK events: it changes nothing)."""
        want = self.recs.oracle("A")
        self.check_oracle_sane("A", want)
        self.assertTrue(any(n and n[-1] == TRUNCATED_FRAME for c in want.values() for n, _, _ in c),
                        "the recording has no truncated stack (parkDeep)")
        snap = {"contexts": {1: {1: 2}}, "strings": {1: "thread_name", 2: "main"}}
        self.run_uploads([("jfr-a-raw", "A", "raw", None, SAMPLE_RATE),
                          ("jfr-a-gzip", "A", "gzip", None, 250),
                          ("jfr-a-multipart", "A", "multipart", snap, SAMPLE_RATE)])

    def test_real_multichunk(self):
        """A JDK 17 recording with several chunks, as the JDK rotates them."""
        self.assertGreater(self.recs.chunks("R"), 1, "record.sh --rotate made one chunk")
        self.check_oracle_sane("R", self.recs.oracle("R"))
        self.run_uploads([("jfr-r-gzip", "R", "gzip", None, SAMPLE_RATE),
                          ("jfr-r-multipart", "R", "multipart", None, SAMPLE_RATE)])

    def test_concatenated_recordings(self):
        """Two JVMs' recordings concatenated (spec §2.1): constant ids collide across chunks."""
        self.assertGreaterEqual(self.recs.chunks("C"), 2)
        self.run_uploads([("jfr-c-multipart", "C", "multipart", None, SAMPLE_RATE)])

    def test_jdk25(self):
        if self.recs.t25_missing:
            self.skipTest(self.recs.t25_missing)
        self.check_oracle_sane("T", self.recs.oracle("T"))
        self.run_uploads([("jfr-t-raw", "T", "raw", None, SAMPLE_RATE)])

    def test_labels_part_and_links(self):
        """S with the agent's labels part: contextId labels and span_name as sample
        attributes, span and trace ids as links after [tracelink]; S raw (no labels part):
        the links only (§3.4: span ids come from the events). jfr_event from the `event`
        setting."""
        links = {lk for c in self.recs.oracle("S", SAMPLE_RATE, SYN_LABELS).values()
                 for _, _, lk in c if lk}
        self.assertEqual(len(links), 3, "the oracle sees S's three span ids")
        cases = [("jfr-s-multipart", "S", "multipart", SYN_LABELS, SAMPLE_RATE),
                 ("jfr-s-raw", "S", "raw", None, SAMPLE_RATE)]
        sent = {}
        for app, rec, shape, snap, rate in cases:
            sent[app] = (self.recs.oracle(rec, rate, snap),) + self.send(app, rec, shape, snap,
                                                                          rate)
        views, uploads = self.wait_arrived({a: s[0] for a, s in sent.items()})
        keys = {k for _, ctx in SYN_LABELS["contexts"].items() for k in ctx}
        label_keys = {SYN_LABELS["strings"][k] for k in keys} | {"span_name"}
        for app, (want, t_from, until) in sent.items():
            with self.subTest(app):
                self.check_upload(app, want, views[app], uploads[app], t_from, until,
                                  label_keys, jfr_event="itimer")
                got = otlp_fold(views[app])
                linked = {lk for c in got.values() for _, _, lk in c if lk}
                self.assertEqual(linked, links, "%s: links made by tracelink" % app)


class JfrBadInputTest(unittest.TestCase):
    """Bad recordings while a good client keeps uploading S."""

    def test_bad_recordings_while_good_client_runs(self):
        recs = recordings()
        port, sink, pc = ps.pyroscope_to_sink(self, "jfr-bad")
        good = gzip.compress(recs.files["S"], 1)
        t_from = int(time.time()) - 10
        client = h.GoodClient(port, good, "application/octet-stream", interval=0.05,
                              path=ingest_path("goodjfr", {"env": "good"}, t_from, t_from + 10))
        self.addCleanup(client.finish)
        client.start()
        self.assertTrue(h.wait_for(lambda: client.count() >= 3, 15),
                        "the good client got no 200s: %s" % client.failures[:3])
        a = recs.files["A"]
        now = time.time_ns()
        no_jfr, no_jfr_ct = agent_multipart(b"")
        parse = (422,)
        limit = (413, 422)
        cases = [
            ("truncated chunk", a[:len(a) // 2], None, parse),
            ("truncated chunk, gzip", gzip.compress(a[:len(a) - 1000], 1), None, parse),
            ("wrong magic", b"FLX\0" + a[4:], None, parse),
            ("checkpoint chain that loops", synthetic(now, cycle=True), None, parse),
            ("constant-pool type that contains itself", synthetic(now, self_type=True), None,
             limit),
            ("stack of 100,000 frames", synthetic(now, frames=100_000), None, limit),
            ("string claiming 4 GB", synthetic(now, huge_string=True), None, limit),
            ("multipart with an empty jfr part", no_jfr, no_jfr_ct, (400, 422)),
        ]
        for label, body, ctype, want in cases:
            with self.subTest(label):
                mp = ctype is not None
                path = ingest_path("badjfr", {"case": re.sub(r"\W+", "_", label)}, t_from,
                                   t_from + 10)
                r = h.post(port, body, ctype or "application/octet-stream", path=path,
                           timeout=60)
                self.assertIn(r.status, want, "%s: %r" % (label, r))
                msg = r.body.decode("utf-8", "replace")
                self.assertTrue(msg.strip(), "%s: %d without a message" % (label, r.status))
                if not mp:
                    self.assertRegex(msg, r"\d", "%s: the message names no offset: %s"
                                     % (label, msg))
                if label == "wrong magic":
                    self.assertRegex(msg.lower(), "magic", msg)
        before = client.count()
        self.assertTrue(h.wait_for(lambda: client.count() >= before + 3, 15),
                        "the good client stopped getting 200s after the bad input")
        ok, failures = client.finish()
        self.assertEqual(failures, [], "the good client saw failures")
        want = {(p, s): sum(c.values()) * ok
                for (_, p, s), c in recs.oracle("S").items()}

        def arrived(reqs):
            got = collections.Counter()
            for v in ps.otlp_views([x.message for x in reqs if x.message is not None]):
                got[(v["period_type"], v["type"])] += v["total"]
            return all(got[k] >= n for k, n in want.items())

        sink.wait_until(arrived, 30)
        pc.stop()
        views = ps.otlp_views(sink.messages())
        self.assertEqual({v["resource"].get("service.name") for v in views}, {"goodjfr"},
                         "only the good client's data may reach the sink")
        got = collections.Counter()
        for v in views:
            got[(v["period_type"], v["type"])] += v["total"]
        self.assertEqual(dict(got), want)


if __name__ == "__main__":
    unittest.main(verbosity=2)
