#!/usr/bin/env python3
"""Data that must arrive exactly as its rules say, end to end through the real binary (each case
once let a plausible one-line bug through, or was checked only by unit tests):

  * tracelink: trace ids over 32 hex digits and a 32-digit value under a span key are not ids
    (kept as attributes, no link), while the exact lengths still link;
  * batch: resources and scopes that differ in exactly one attribute (each attribute in turn, so
    at every position the merge key sorts it to; by value, by key, by type) stay apart, and the
    issue's {service.name=a, host.name=h} / {service.name=b, host.name=h} from two clients too;
  * partial success over OTLP/HTTP, protobuf and JSON: the count of rejected profiles in the
    answer, and exactly the valid profiles forwarded;
  * numeric pprof labels (num with and without num_unit, negative, several values for one key;
    and the real Go heap profile's `bytes` labels) through the Pyroscope receiver to OTLP;
  * uint64 values written as JSON strings above 2^63 (a mapping's memoryStart
    "18446744073699065856", kernel addresses) through OTLP/HTTP JSON, out as protobuf and JSON.

Oracles are Python's: expected results are computed here from what was sent (python-protobuf
decoding, the documented mapping rules), never taken from profcol."""
import collections
import copy
import gzip
import json
import os
import sys
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
import pyro_support as ps  # noqa: E402

h.ensure_debian_python()


def otlp_pipeline(port, sinks, processors=None, encodings=None):
    """otlp (HTTP on port) -> processors -> one otlphttp exporter per sink URL."""
    s = h.otlp_receiver_yaml(port)
    if processors:
        s += "processors:\n" + "".join("  %s\n" % line for line in processors.splitlines())
    s += "exporters:\n"
    names = []
    for i, url in enumerate(sinks):
        name = "otlphttp/%d" % i
        names.append(name)
        s += "  %s:\n    endpoint: %s\n" % (name, url)
        if encodings:
            s += "    encoding: %s\n" % encodings[i]
    s += "service:\n  pipelines:\n    profiles:\n      receivers: [otlp]\n"
    if processors:
        procs = [ln.split(":")[0] for ln in processors.splitlines()
                 if ln and not ln.startswith(" ")]
        s += "      processors: [%s]\n" % ", ".join(procs)
    s += "      exporters: [%s]\n" % ", ".join(names)
    return s


def one_profile_request(svc="fidelity"):
    """An empty request with one resource, scope and cpu profile; returns (req, db, profile)."""
    req = h.pb.Request()
    db = h.DictBuilder(req.dictionary)
    rp = req.resource_profiles.add()
    rp.resource.attributes.add(key="service.name").value.string_value = svc
    p = rp.scope_profiles.add().profiles.add()
    p.sample_type.type_strindex = db.s("cpu")
    p.sample_type.unit_strindex = db.s("nanoseconds")
    p.time_unix_nano = h.BASE_TIME
    return req, db, p


def sink_samples(messages, svc, typ=("cpu", "nanoseconds")):
    """summarize()'s samples of (svc, type, unit) over every message."""
    prof = h.summarize(messages)["profiles"].get((svc,) + typ)
    return prof["samples"] if prof else {}


# ---------------------------------------------------------------------------------------------
# tracelink: ids of the wrong length

HEX = "0123456789abcdefABCDEF"


def _id(value, nbytes):
    """The id an attribute value holds, by the OTLP rule: exactly 2*n hex digits (or n raw bytes),
    not all zero; None otherwise. Written from the rule, not from profcol."""
    if isinstance(value, bytes):
        if len(value) == nbytes:
            raw = value
        else:
            try:
                value = value.decode("ascii")
            except UnicodeDecodeError:
                return None
    if isinstance(value, str):
        if len(value) != 2 * nbytes or any(c not in HEX for c in value):
            return None
        raw = bytes.fromhex(value)
    return raw if any(raw) else None


class TracelinkIdsTest(unittest.TestCase):
    T1 = "0102030405060708090a0b0c0d0e0f10"
    S1 = "a1a2a3a4a5a6a7a8"
    # (trace_id attribute value or None, span_id attribute value or None)
    CASES = [
        (T1 + "1", S1),            # 33 digits: not a trace id; the span alone links
        (T1 + "11", None),         # 34
        (T1 + T1, None),           # 64
        (None, T1),                # a trace id's 32 digits under the span key
        (None, S1 + "a"),          # 17
        (None, T1.encode()),       # 32 hex characters as bytes under the span key
        (T1 + " ", None),          # 32 digits and a space
        (T1, S1),                  # the exact lengths: the control
        (T1.upper(), S1.upper()),  # upper case is hex too
    ]

    def test_wrong_length_ids_are_not_ids(self):
        req, db, p = one_profile_request("tracelink")
        stack = db.stack(h.CHAINS[0])
        want = {}
        names = tuple(reversed(h.CHAINS[0]))  # leaf first (CHAINS[0] has no inlined frames)
        for i, (tid, sid) in enumerate(self.CASES):
            s = p.samples.add(stack_index=stack, values=[1 << i])
            kept, trace, span = [], None, None
            for key, val, n in (("trace_id", tid, 16), ("span_id", sid, 8)):
                if val is None:
                    continue
                s.attribute_indices.append(db.attr(key, val))
                got = _id(val, n)
                if got is None:  # invalid: kept as it is
                    kept.append((key, ("y", val.hex()) if isinstance(val, bytes) else ("s", val),
                                 ""))
                elif n == 16:
                    trace = got
                else:
                    span = got
            link = None
            if span is not None:  # remove_attributes (default): valid ids leave the attributes
                link = ((trace or bytes(16)).hex(), span.hex())
            want.setdefault((names, tuple(sorted(kept)), link), [0, 0])[0] += 1 << i
        self.assertIsNotNone(list(want)[-1][2], "the control case must link")
        sink = h.Sink().start()
        self.addCleanup(sink.stop)
        port = h.free_port()
        pc = h.Profcol(otlp_pipeline(port, [sink.url], processors="tracelink: {}"),
                       wait_ports=[port], name="fidelity-tracelink")
        self.addCleanup(pc.kill)
        pc.start()
        r = h.post(port, req.SerializeToString())
        self.assertEqual(r.status, 200, r)
        sink.wait_requests(1, 15)
        pc.stop()
        got = sink_samples(sink.messages(), "tracelink")
        self.assertEqual(got, want)


# ---------------------------------------------------------------------------------------------
# batch: resources and scopes one attribute apart

BASE = [("service.name", "a"), ("host.name", "h1"), ("deployment.environment", "prod"),
        ("process.pid", 7)]
OTHER_VALUE = ["b", "h2", "dev", 8]
OTHER_KEY = ["service.namespace", "host.id", "deployment.name", "process.parent_pid"]


def one_apart():
    """The base attribute list, then lists that differ from it in exactly one attribute: each
    value in turn, each key in turn, and the int pid as a string."""
    out = [list(BASE)]
    for i in range(len(BASE)):
        v = list(BASE)
        v[i] = (v[i][0], OTHER_VALUE[i])
        out.append(v)
    for i in range(len(BASE)):
        v = list(BASE)
        v[i] = (OTHER_KEY[i], v[i][1])
        out.append(v)
    v = list(BASE)
    v[3] = ("process.pid", "7")
    out.append(v)
    return out


def set_attrs(kvs, attrs):
    for k, v in attrs:
        h.set_anyvalue(kvs.add(key=k).value, v)


def canon(attrs):
    return tuple(sorted((k, ("i", v) if isinstance(v, int) else ("s", v)) for k, v in attrs))


def grouped(messages):
    """{resource attrs: {(scope name, version, scope attrs): total}} of what arrived, each
    output resource and scope counted under its own attributes."""
    out = collections.defaultdict(collections.Counter)
    for m in messages:
        st = m.dictionary.string_table
        for rp in m.resource_profiles:
            res = tuple(sorted(h._keyvalue(kv, st) for kv in rp.resource.attributes))
            for sp in rp.scope_profiles:
                sc = (sp.scope.name, sp.scope.version,
                      tuple(sorted(h._keyvalue(kv, st) for kv in sp.scope.attributes)))
                out[res][sc] += sum(h._sample_value(s) for p in sp.profiles for s in p.samples)
    return {k: dict(v) for k, v in out.items()}


class BatchKeysTest(unittest.TestCase):
    def start(self, name):
        sink = h.Sink().start()
        self.addCleanup(sink.stop)
        port = h.free_port()
        pc = h.Profcol(otlp_pipeline(port, [sink.url], processors="batch:\n  timeout: 500ms"),
                       wait_ports=[port], name=name)
        self.addCleanup(pc.kill)
        pc.start()
        return port, sink, pc

    def test_one_attribute_apart_stays_apart(self):
        """One request: a resource per variant (one scope each), then the base resource again
        holding a scope per scope variant (and scopes differing by name or version only). Every
        sample value is a distinct power of two, so a total names the inputs merged into it."""
        req, db, _ = one_profile_request("unused")
        del req.resource_profiles[:]
        stack = db.stack(h.CHAINS[1])
        want = collections.defaultdict(collections.Counter)
        bit = 0
        base_scope = ("scope", "1", canon(BASE))

        def add(rp, scope_name, scope_version, scope_attrs):
            nonlocal bit
            sp = rp.scope_profiles.add()
            sp.scope.name, sp.scope.version = scope_name, scope_version
            set_attrs(sp.scope.attributes, scope_attrs)
            p = sp.profiles.add()
            p.sample_type.type_strindex = db.s("cpu")
            p.sample_type.unit_strindex = db.s("nanoseconds")
            p.samples.add(stack_index=stack, values=[1 << bit])
            want[canon(rp_attrs)][(scope_name, scope_version, canon(scope_attrs))] += 1 << bit
            bit += 1

        for rp_attrs in one_apart():
            rp = req.resource_profiles.add()
            set_attrs(rp.resource.attributes, rp_attrs)
            add(rp, *base_scope[:2], BASE)
        rp_attrs = BASE
        rp = req.resource_profiles.add()
        set_attrs(rp.resource.attributes, rp_attrs)
        for scope_attrs in one_apart():
            add(rp, "scope", "1", scope_attrs)
        add(rp, "scope2", "1", BASE)
        add(rp, "scope", "2", BASE)
        self.assertEqual(len(want), len(one_apart()))
        port, sink, pc = self.start("fidelity-batch")
        r = h.post(port, req.SerializeToString())
        self.assertEqual(r.status, 200, r)
        total = sum(sum(c.values()) for c in want.values())

        def arrived(reqs):
            return sum(h._sample_value(s) for m in (x.message for x in reqs if x.message)
                       for rp in m.resource_profiles for sp in rp.scope_profiles
                       for p in sp.profiles for s in p.samples) >= total

        sink.wait_until(arrived, 15)
        pc.stop()
        self.assertEqual(grouped(sink.messages()), {k: dict(v) for k, v in want.items()})

    def test_issue_example_from_two_clients(self):
        """{service.name=a, host.name=h} and {service.name=b, host.name=h} posted at once by two
        clients, merged by one flush: two resources, each with its own samples."""
        port, sink, pc = self.start("fidelity-batch-two")
        reqs = []
        for i, svc in enumerate(("a", "b")):
            req, db, p = one_profile_request(svc)
            req.resource_profiles[0].resource.attributes.add(key="host.name") \
                .value.string_value = "h"
            p.samples.add(stack_index=db.stack(h.CHAINS[0]), values=[10 + i])
            reqs.append(req)
        statuses = []
        threads = [threading.Thread(target=lambda q=q: statuses.append(
            h.post(port, q.SerializeToString()).status)) for q in reqs]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        self.assertEqual(statuses, [200, 200])
        pc.stop()
        msgs = sink.messages()
        scope = ("", "", ())
        self.assertEqual(grouped(msgs), {
            (("host.name", ("s", "h")), ("service.name", ("s", "a"))): {scope: 10},
            (("host.name", ("s", "h")), ("service.name", ("s", "b"))): {scope: 11}})


# ---------------------------------------------------------------------------------------------
# partial success over OTLP/HTTP

class PartialSuccessHttpTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sink = h.Sink().start()
        cls.port = h.free_port()
        cls.pc = h.Profcol(otlp_pipeline(cls.port, [cls.sink.url]), wait_ports=[cls.port],
                           name="fidelity-partial")
        cls.pc.start()

    @classmethod
    def tearDownClass(cls):
        h.stop_all(cls.pc, cls.sink)

    def request(self, seed):
        """Four profiles (two services, cpu and alloc); two of them invalid. Returns the request
        and the same request without the invalid profiles."""
        req = h.make_request(("partial-a", "partial-b"), seed=seed)
        cpu_a = req.resource_profiles[0].scope_profiles[0].profiles[0]
        alloc_b = req.resource_profiles[1].scope_profiles[0].profiles[1]
        cpu_a.samples[0].stack_index = len(req.dictionary.stack_table)  # one past the end
        alloc_b.samples[1].attribute_indices.append(len(req.dictionary.attribute_table) + 5)
        valid = copy.deepcopy(req)
        del valid.resource_profiles[1].scope_profiles[0].profiles[1]
        del valid.resource_profiles[0].scope_profiles[0].profiles[0]
        return req, valid

    def check(self, body, ctype, valid, decode):
        n = len(self.sink.snapshot())
        r = h.post(self.port, body, ctype)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.content_type, ctype)
        rejected, msg = decode(r.body)
        self.assertEqual(rejected, 2, r)
        self.assertIn("out of range", msg)
        got = self.sink.wait_requests(n + 1, 15)[n:]
        self.assertEqual(len(got), 1)
        self.assertIsNone(got[0].error)
        self.assertEqual(h.summarize(got[0].message), h.summarize(valid))
        self.assertEqual(h.count_samples([got[0].message]), h.count_samples([valid]))

    def test_protobuf(self):
        req, valid = self.request(21)

        def decode(body):
            resp = h.pb.Response()
            resp.ParseFromString(body)
            return resp.partial_success.rejected_profiles, resp.partial_success.error_message

        self.check(req.SerializeToString(), h.CT_PROTO, valid, decode)

    def test_json(self):
        req, valid = self.request(22)

        def decode(body):
            ps_ = json.loads(body.decode()).get("partialSuccess") or {}
            return int(ps_.get("rejectedProfiles", 0)), ps_.get("errorMessage", "")

        self.check(h.to_otlp_json(req), h.CT_JSON, valid, decode)


# ---------------------------------------------------------------------------------------------
# numeric pprof labels through the Pyroscope receiver

def pprof_expected(p, svc):
    """What summarize() must show for pprof p, by pprof.h's documented mapping: one profile per
    sample type; a string label -> string attribute, a numeric one -> int attribute with
    unit = num_unit; several labels of one key -> one array attribute in label order; an empty
    label (no str, num 0, no unit) is dropped. Entries with value 0 are left out."""
    st = p.string_table
    funcs = {f.id: st[f.name] or st[f.system_name] or st[f.filename] or "?" for f in p.function}
    locs = {loc.id: [funcs[ln.function_id] for ln in loc.line] for loc in p.location}
    out = {}
    for s in p.sample:
        names = tuple(n for lid in s.location_id for n in locs[lid])
        by_key = collections.OrderedDict()
        for lb in s.label:
            if not lb.str and not lb.num and not lb.num_unit:
                continue
            v = ("s", st[lb.str]) if lb.str else ("i", lb.num)
            by_key.setdefault(st[lb.key], []).append((v, "" if lb.str else st[lb.num_unit]))
        attrs = []
        for k, vs in by_key.items():
            if len(vs) == 1:
                attrs.append((k, vs[0][0], vs[0][1]))
            else:
                attrs.append((k, ("a", tuple(v for v, _ in vs)), vs[0][1]))
        for t, v in zip(p.sample_type, s.value):
            if not v:
                continue
            e = out.setdefault((svc, st[t.type], st[t.unit]), {})
            acc = e.setdefault((names, tuple(sorted(attrs)), None), [0, 0])
            acc[0] += v
    return out


def numeric_label_pprof():
    """A CPU pprof (samples/count, cpu/nanoseconds) with numeric labels of every shape."""
    p = ps.ppb.Profile()
    strings = [""]

    def s(text):
        if text not in strings:
            strings.append(text)
        return strings.index(text)

    p.sample_type.add(type=s("samples"), unit=s("count"))
    p.sample_type.add(type=s("cpu"), unit=s("nanoseconds"))
    p.period_type.type, p.period_type.unit, p.period = s("cpu"), s("nanoseconds"), 10_000_000
    p.time_nanos, p.duration_nanos = h.BASE_TIME, 10_000_000_000
    for i, name in enumerate(["main", "handle", "encode", "alloc"], 1):
        p.function.add(id=i, name=s(name), system_name=s(name), filename=s("/src/app.go"))
        p.location.add(id=i, address=0x1000 * i).line.add(function_id=i, line=10 * i)
    labels = [
        [("bytes", 4096, "bytes"), ("worker", "w1", None)],
        [("request_id", 123456789012, None), ("temperature", -40, "celsius")],
        [("retry", 1, "count"), ("retry", 2, "count"), ("big", 1 << 62, "bytes")],
        [],
        [("bytes", 4096, "bytes"), ("bytes", 8192, "bytes")],
        [("bytes", 512, "bytes"), ("worker", "w2", None), ("request_id", 7, None)],
    ]
    stacks = [[4, 3, 2, 1], [3, 2, 1], [2, 1], [1], [4, 2, 1], [3, 1]]
    for i, (ls, stack) in enumerate(zip(labels, stacks), 1):
        smp = p.sample.add(location_id=stack, value=[i, i * 10_000_000])
        for key, val, unit in ls:
            if isinstance(val, str):
                smp.label.add(key=s(key), str=s(val))
            else:
                lb = smp.label.add(key=s(key), num=val)
                if unit:
                    lb.num_unit = s(unit)
    p.string_table.extend(strings)
    return p


class PprofNumericLabelsTest(unittest.TestCase):
    def run_ingest(self, uploads):
        """uploads: [(service name, pprof message)]; returns what reached the OTLP sink."""
        port, sink, pc = ps.pyroscope_to_sink(self, "fidelity-pprof")
        for svc, p in uploads:
            r = h.post(port, gzip.compress(p.SerializeToString()), "application/octet-stream",
                       path="/ingest?name=%s&format=pprof" % svc)
            self.assertEqual(r.status, 200, r)
        sink.wait_requests(len(uploads), 15)
        pc.stop()
        return sink.messages()

    def check(self, msgs, svc, p):
        want = pprof_expected(p, svc)
        got = h.summarize(msgs)["profiles"]
        for key, e in want.items():
            self.assertIn(key, got)
            samples = {k: v for k, v in got[key]["samples"].items() if v[0]}
            self.assertEqual(samples, e, key)
        self.assertEqual({k for k in got if k[0] == svc}, set(want))

    def test_numeric_labels_with_units(self):
        p = numeric_label_pprof()
        self.check(self.run_ingest([("numlabels", p)]), "numlabels", p)

    def test_go_heap_numeric_labels(self):
        """Go's runtime heap profile labels samples with a numeric `bytes` (no unit)."""
        with open(os.path.join(h.SRC, "tests", "data", "go-heap.pb.gz"), "rb") as f:
            p = ps.pprof_profile(f.read())
        st = p.string_table
        self.assertTrue(any(not lb.str and st[lb.key] == "bytes" for s in p.sample
                            for lb in s.label), "the fixture has numeric labels")
        self.check(self.run_ingest([("goheap", p)]), "goheap", p)


# ---------------------------------------------------------------------------------------------
# uint64 as JSON strings

def u64_view(m):
    """Mappings (filename, start, limit, offset) and locations (address, mapping filename)."""
    d, st = m.dictionary, m.dictionary.string_table
    maps = [(st[x.filename_strindex], x.memory_start, x.memory_limit, x.file_offset)
            for x in d.mapping_table[1:]]
    locs = [(x.address, st[d.mapping_table[x.mapping_index].filename_strindex])
            for x in d.location_table[1:]]
    return sorted(maps), sorted(locs)


class Uint64StringsTest(unittest.TestCase):
    def test_uint64_strings_through_json(self):
        req = h.make_request(("u64",), seed=5)
        m = req.dictionary.mapping_table[1]
        m.memory_start = 18446744073699065856  # as Python's and Go's encoders write a kernel map
        m.memory_limit = (1 << 64) - 1
        m.file_offset = (1 << 63) + 5
        for i, loc in enumerate(req.dictionary.location_table[1:], 1):
            loc.address = 0xffffffff81000000 + 0x40 * i
        body = h.to_otlp_json(req)
        text = body.decode()
        self.assertIn('"memoryStart": "18446744073699065856"', text, "sent as a JSON string")
        self.assertIn('"memoryLimit": "18446744073709551615"', text)
        proto_sink, json_sink = h.Sink().start(), h.Sink().start()
        self.addCleanup(proto_sink.stop)
        self.addCleanup(json_sink.stop)
        port = h.free_port()
        pc = h.Profcol(otlp_pipeline(port, [proto_sink.url, json_sink.url],
                                     encodings=["proto", "json"]),
                       wait_ports=[port], name="fidelity-u64")
        self.addCleanup(pc.kill)
        pc.start()
        r = h.post(port, body, h.CT_JSON)
        self.assertEqual(r.status, 200, r)
        for sink, ctype in ((proto_sink, h.CT_PROTO), (json_sink, h.CT_JSON)):
            got = sink.wait_requests(1, 15)
            self.assertEqual(len(got), 1, ctype)
            self.assertEqual(got[0].content_type, ctype)
            self.assertIsNone(got[0].error, "%s: %s" % (ctype, got[0].error))
            self.assertEqual(u64_view(got[0].message), u64_view(req), ctype)
            self.assertEqual(h.summarize(got[0].message), h.summarize(req), ctype)
        # profcol's own JSON writes them as strings too (proto3 JSON for 64-bit integers)
        self.assertIn(b'"memoryStart":"18446744073699065856"', json_sink.snapshot()[0].body)
        pc.stop()


if __name__ == "__main__":
    unittest.main(verbosity=2)
