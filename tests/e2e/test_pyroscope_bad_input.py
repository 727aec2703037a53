#!/usr/bin/python3
"""Bad input against the pyroscope receiver, while a good client keeps uploading.

profcol (pyroscope receiver, max_request_body_size 1MiB) -> otlphttp -> the harness' recording
sink. A good client posts a real Go CPU profile to /ingest every 20 ms throughout; every bad
request must get its status (spec/pyroscope.md §1.8, issue 3) with a message, the good client
must only ever get 200, and exactly its data (and nothing from the bad requests) must reach
the sink."""

import gzip
import os
import sys
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
import pyro_support as ps  # noqa: E402

GO_CPU = os.path.join(h.SRC, "tests", "data", "go-cpu.pb.gz")


def ingest_path(name, **params):
    q = {"name": name}
    q.update(params)
    return "/ingest?" + urllib.parse.urlencode(q)


def multipart(parts, boundary="profcol-e2e-boundary"):
    """parts: [(name, filename or None, bytes)] -> (body, content type)."""
    out = b""
    for name, fn, data in parts:
        disp = 'form-data; name="%s"' % name + ('; filename="%s"' % fn if fn else "")
        out += (b"--" + boundary.encode() + b"\r\nContent-Disposition: " + disp.encode() +
                b"\r\nContent-Type: application/octet-stream\r\n\r\n" + data + b"\r\n")
    out += b"--" + boundary.encode() + b"--\r\n"
    return out, "multipart/form-data; boundary=" + boundary


class PyroscopeBadInputTest(unittest.TestCase):
    def setUp(self):
        with open(GO_CPU, "rb") as f:
            self.good = f.read()
        self.good_view = ps.pprof_view(self.good)
        self.sink = h.Sink().start()
        self.port = h.free_port()
        self.pc = h.Profcol(ps.pyroscope_to_otlp_config(self.port, self.sink.url, "1MiB"),
                            wait_ports=[self.port], name="pyro-bad").start()
        self.client = h.GoodClient(
            self.port, self.good, "application/octet-stream",
            path=ingest_path("goodapp{env=good}", format="pprof", spyName="gospy"))

    def tearDown(self):
        try:
            self.client.finish()
        finally:
            try:
                if self.pc.running():
                    self.pc.stop()
            finally:
                self.pc.kill()
                self.sink.stop()

    # --- crafted bodies ---

    def profile(self):
        return ps.pprof_profile(self.good)

    def gz(self, p):
        return gzip.compress(p.SerializeToString())

    def missing_location(self):
        p = self.profile()
        p.sample[0].location_id.append(max(loc.id for loc in p.location) + 1000)
        return self.gz(p)

    def missing_function(self):
        p = self.profile()
        p.location[0].line[0].function_id = max(f.id for f in p.function) + 1000
        return self.gz(p)

    def string_out_of_range(self):
        p = self.profile()
        p.function[0].name = len(p.string_table) + 50
        return self.gz(p)

    def sample_type_out_of_range(self):
        p = self.profile()
        p.sample_type[0].type = len(p.string_table) + 5
        return self.gz(p)

    def wrong_value_count(self):
        p = self.profile()
        p.sample[0].value.append(7)
        return self.gz(p)

    def cases(self):
        raw = gzip.decompress(self.good)
        pprof = dict(format="pprof")
        ok_name = "badapp{env=bad}"
        no_profile, mp_ct = multipart([("sample_type_config", "sample_type_config.json",
                                        b'{"samples":{"units":"samples"}}')])
        prev, prev_ct = multipart([("profile", "profile.pprof", self.good),
                                   ("prev_profile", "profile.pprof", self.good)])
        empty_profile, empty_ct = multipart([("profile", "profile.pprof", b"")])
        # (label, method, path, body, content type, extra headers, want status)
        return [
            ("no name", "POST", "/ingest?format=pprof", self.good, None, {}, 400),
            ("empty app name", "POST", ingest_path("{env=x}", **pprof), self.good, None, {}, 400),
            ("space in app name", "POST", ingest_path("bad app{env=x}", **pprof), self.good, None,
             {}, 400),
            ("'-' in label name", "POST", ingest_path("app{bad-key=x}", **pprof), self.good, None,
             {}, 400),
            ("label without '='", "POST", ingest_path("app{novalue}", **pprof), self.good, None,
             {}, 400),
            ("bad from", "POST", ingest_path(ok_name, format="pprof", **{"from": "yesterday"}),
             self.good, None, {}, 400),
            ("truncated pprof", "POST", ingest_path(ok_name, **pprof), raw[:len(raw) // 2], None,
             {}, 422),
            ("truncated gzip pprof", "POST", ingest_path(ok_name, **pprof),
             self.good[:len(self.good) // 2], None, {}, 422),
            ("not a pprof", "POST", ingest_path(ok_name, **pprof), b"\xff" * 64, None, {}, 422),
            ("gzip garbage, Content-Encoding gzip", "POST", ingest_path(ok_name, **pprof),
             b"\x1f\x8b\x08\x00garbage-garbage-garbage", None, {"Content-Encoding": "gzip"}, 400),
            ("sample -> missing location id", "POST", ingest_path(ok_name, **pprof),
             self.missing_location(), None, {}, 422),
            ("location -> missing function id", "POST", ingest_path(ok_name, **pprof),
             self.missing_function(), None, {}, 422),
            ("function name string out of range", "POST", ingest_path(ok_name, **pprof),
             self.string_out_of_range(), None, {}, 422),
            ("sample type string out of range", "POST", ingest_path(ok_name, **pprof),
             self.sample_type_out_of_range(), None, {}, 422),
            ("more values than sample types", "POST", ingest_path(ok_name, **pprof),
             self.wrong_value_count(), None, {}, 422),
            ("multipart without profile part", "POST", ingest_path(ok_name), no_profile, mp_ct,
             {}, 400),
            ("multipart with empty profile part", "POST", ingest_path(ok_name), empty_profile,
             empty_ct, {}, 400),
            ("multipart without boundary", "POST", ingest_path(ok_name), no_profile,
             "multipart/form-data", {}, 400),
            ("non-empty prev_profile", "POST", ingest_path(ok_name), prev, prev_ct, {}, 422),
            ("format=jfr: wrong magic", "POST", ingest_path(ok_name, format="jfr"),
             b"JFR\0" + raw[:100], None, {}, 422),
            ("folded: unknown profile type suffix", "POST", ingest_path("my.app{}"),
             b"main;work 10\n", "text/plain", {}, 400),
            ("folded: bad sample count", "POST", ingest_path("app.cpu{}"),
             b"main;work 10\nmain;idle ten\n", "text/plain", {}, 422),
            ("unsupported Content-Encoding", "POST", ingest_path(ok_name, **pprof), self.good,
             None, {"Content-Encoding": "br"}, 415),
            ("push: malformed protobuf", "POST", ps.PUSH_PATH, b"\x0a\xff\xff\xff",
             "application/proto", {}, 400),
            ("push: bad raw_profile", "POST", ps.PUSH_PATH, self.push_body(raw[:len(raw) // 3]),
             "application/proto", {}, 400),
            ("push: missing location id", "POST", ps.PUSH_PATH,
             self.push_body(self.missing_location()), "application/proto", {}, 400),
            ("push: wrong content type", "POST", ps.PUSH_PATH, self.push_body(self.good),
             "text/plain", {}, 415),
            ("/v1/pprof: truncated", "POST", "/v1/pprof", raw[:len(raw) // 2],
             "application/octet-stream", {}, 422),
            ("unknown path", "POST", "/ingestx?name=app", self.good, None, {}, 404),
            ("GET /ingest", "GET", ingest_path(ok_name, **pprof), b"", None, {}, 405),
            ("GET push", "GET", ps.PUSH_PATH, b"", None, {}, 405),
        ]

    def push_body(self, raw_profile):
        req = ps.ppb.PushRequest()
        s = req.series.add()
        s.labels.add(name="__name__", value="process_cpu")
        s.labels.add(name="service_name", value="badapp")
        s.samples.add(raw_profile=raw_profile, ID="3f1e4b9c-6b1d-4a43-9a51-1f2a3b4c5d6e")
        return req.SerializeToString()

    # --- the test ---

    def test_bad_inputs_while_good_client_runs(self):
        self.client.start()
        self.assertTrue(h.wait_for(lambda: self.client.count() >= 3, 10),
                        "the good client got no 200s before the bad input started: %s"
                        % self.client.failures[:3])
        for label, method, path, body, ctype, extra, want in self.cases():
            with self.subTest(label):
                r = h.post(self.port, body, ctype if ctype else "application/octet-stream",
                           path=path, headers=extra, method=method)
                self.assertEqual(r.status, want, "%s: %s %s -> %r" % (label, method, path, r))
                if want not in (404, 405):
                    self.assertTrue(r.body.strip(), "%s: %d without a message" % (label, want))
                if path.startswith(ps.PUSH_PATH) and method == "POST":
                    self.assertEqual(r.content_type, "application/json", label)
        with self.subTest("oversize body"):
            big = os.urandom(2 << 20)
            head = ("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                    "application/octet-stream\r\nContent-Length: %d\r\n\r\n"
                    % (ingest_path("badapp{}", format="pprof"), len(big))).encode()
            r = h.raw_request(self.port, head, [big[i:i + 65536] for i in range(0, len(big), 65536)])
            self.assertEqual(r.status, 413, r)
        bomb = h.gzip_bomb(8 << 20)
        with self.subTest("gzip pprof inflating over the limit"):
            r = h.post(self.port, bomb, "application/octet-stream",
                       path=ingest_path("badapp{}", format="pprof"))
            self.assertEqual(r.status, 413, r)
        with self.subTest("Content-Encoding gzip inflating over the limit"):
            r = h.post(self.port, bomb, "application/octet-stream",
                       path=ingest_path("badapp{}", format="pprof"),
                       headers={"Content-Encoding": "gzip"})
            self.assertEqual(r.status, 413, r)
        with self.subTest("push: gzip body inflating over the limit"):
            r = h.post(self.port, bomb, "application/proto", path=ps.PUSH_PATH,
                       headers={"Content-Encoding": "gzip"})
            self.assertEqual(r.status, 413, r)
            self.assertEqual(r.content_type, "application/json")
        before = self.client.count()
        self.assertTrue(h.wait_for(lambda: self.client.count() >= before + 3, 10),
                        "the good client stopped getting 200s after the bad input")
        ok, failures = self.client.finish()
        self.assertEqual(failures, [], "the good client saw failures")
        self.assertGreater(ok, 0)

        # exactly the good client's data reached the sink, nothing from the bad requests
        want = {t: v * ok for t, v in self.good_view["totals"].items()}

        def arrived(reqs):
            msgs = [r.message for r in reqs if r.message is not None]
            got = {t: e["total"] for t, e in ps.by_type(ps.otlp_views(msgs)).items()}
            return all(got.get(t, 0) >= v for t, v in want.items())

        self.sink.wait_until(arrived, 15)
        views = ps.otlp_views(self.sink.messages())
        apps = {v["resource"].get("service.name") for v in views}
        self.assertEqual(apps, {"goodapp"}, "only the good client's data may reach the sink")
        got = {t: e["total"] for t, e in ps.by_type(views).items()}
        self.assertEqual(got, want)
        self.pc.stop()
        self.assertTrue(self.pc.stderr(), "profcol logged nothing")


if __name__ == "__main__":
    unittest.main(verbosity=2)
