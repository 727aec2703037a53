#!/usr/bin/env python3
"""Connectors end to end (issue 25): one profiles pipeline fed by an OTLP and a pyroscope
receiver exports into a `routing` connector that sends tenant "acme" (X-Scope-OrgID) to one
pipeline, service.name "checkout" to another, the rest to default_pipelines, whose pipeline
exports to a sink and into a `forward` connector feeding one more pipeline (a resource processor
there). Each pipeline has its own otlphttp exporter and sink. The oracle: Python's protobuf
decoding of what each sink received (harness.summarize) against the part of what was sent that
should reach it (the request filtered by resource here, or the folded lines posted)."""
import copy
import os
import signal
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
import signal_support as ss  # noqa: E402

h.ensure_debian_python()

CONFIG = """\
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:{otlp}
  pyroscope:
    endpoint: 127.0.0.1:{pyro}
processors:
  resource/forwarded:
    attributes:
      - key: forwarded
        value: "yes"
        action: upsert
exporters:
  otlphttp/acme:
    endpoint: {acme}
  otlphttp/checkout:
    endpoint: {checkout}
  otlphttp/default:
    endpoint: {default}
  otlphttp/forwarded:
    endpoint: {forwarded}
connectors:
  forward:
  forward/unused:
  routing:
    default_pipelines: [profiles/default]
    table:
      - context: request
        condition: request["X-Scope-OrgID"] == "acme"
        pipelines: [profiles/acme]
      - condition: attributes["service.name"] == "checkout"
        pipelines: [profiles/checkout]
service:
  telemetry:
    metrics:
      address: 127.0.0.1:{metrics}
  pipelines:
    profiles:
      receivers: [otlp, pyroscope]
      exporters: [routing]
    profiles/acme:
      receivers: [routing]
      exporters: [otlphttp/acme]
    profiles/checkout:
      receivers: [routing]
      exporters: [otlphttp/checkout]
    profiles/default:
      receivers: [routing]
      exporters: [otlphttp/default, forward]
    profiles/forwarded:
      receivers: [forward]
      processors: [resource/forwarded]
      exporters: [otlphttp/forwarded]
"""

SINKS = ("acme", "checkout", "default", "forwarded")


def only(req, services):
    """A copy of req with only the resources whose service.name is in services."""
    out = copy.deepcopy(req)
    keep = [rp for rp in out.resource_profiles
            if {kv.key: kv.value.string_value for kv in rp.resource.attributes}
            .get("service.name") in services]
    del out.resource_profiles[:]
    for rp in keep:
        out.resource_profiles.add().CopyFrom(rp)
    return out


def with_attr(req, key, value):
    out = copy.deepcopy(req)
    for rp in out.resource_profiles:
        rp.resource.attributes.add(key=key).value.string_value = value
    return out


def folded_summary(messages):
    """{(service, leaf-first stack): summed value} of what arrived from folded uploads."""
    out = {}
    for (svc, _t, _u), e in h.summarize(messages)["profiles"].items():
        for (names, _a, _l), (v, _n) in e["samples"].items():
            out[(svc, names)] = out.get((svc, names), 0) + v
    return out


class ConnectorsTest(h.Started, unittest.TestCase):
    def setUp(self):
        super().setUp()
        self.sinks_by = {name: self.sink() for name in SINKS}
        self.otlp, self.pyro, self.metrics = h.free_port(), h.free_port(), h.free_port()
        cfg = CONFIG.format(otlp=self.otlp, pyro=self.pyro, metrics=self.metrics,
                            **{n: s.url for n, s in self.sinks_by.items()})
        self.pc = self.start(cfg, self.otlp, name="connectors")
        h.wait_port(self.pyro)

    def settle(self, expect):
        """Wait until each sink has expect[name] requests, then a little longer for strays."""
        for name, n in expect.items():
            self.sinks_by[name].wait_requests(n)
        time.sleep(0.5)
        got = {name: self.sinks_by[name].messages() for name in SINKS}
        self.assertEqual({n: len(m) for n, m in got.items()},
                         {n: expect.get(n, 0) for n in SINKS})
        return got

    def test_otlp_by_resource_and_tenant(self):
        req = h.make_request(services=("checkout", "cart", "search"), seed=3)
        r = h.post(self.otlp, req.SerializeToString())
        self.assertEqual(r.status, 200, r.body)
        got = self.settle({"checkout": 1, "default": 1, "forwarded": 1})
        self.assertEqual(h.summarize(got["checkout"]), h.summarize(only(req, {"checkout"})))
        rest = only(req, {"cart", "search"})
        self.assertEqual(h.summarize(got["default"]), h.summarize(rest))
        # forward: the same data into the next pipeline, where its processor ran
        self.assertEqual(h.summarize(got["forwarded"]),
                         h.summarize(with_attr(rest, "forwarded", "yes")))
        # the tenant's route comes first: all of it, checkout included, goes to acme
        req2 = h.make_request(services=("checkout", "cart"), seed=4)
        r = h.post(self.otlp, req2.SerializeToString(), headers={"X-Scope-OrgID": "acme"})
        self.assertEqual(r.status, 200, r.body)
        got = self.settle({"acme": 1, "checkout": 1, "default": 1, "forwarded": 1})
        self.assertEqual(h.summarize(got["acme"]), h.summarize(req2))
        # another tenant is routed by resource
        r = h.post(self.otlp, req2.SerializeToString(), headers={"X-Scope-OrgID": "other"})
        self.assertEqual(r.status, 200, r.body)
        got = self.settle({"acme": 1, "checkout": 2, "default": 2, "forwarded": 2})
        self.assertEqual(h.summarize(got["checkout"][1:]), h.summarize(only(req2, {"checkout"})))
        self.assertEqual(h.summarize(got["default"][1:]), h.summarize(only(req2, {"cart"})))
        # counted (samples): routed = checkout, all of req2, checkout of req2; unrouted = the rest
        def n(req, services=None):
            return sum(len(p.samples) for rp in req.resource_profiles for sp in rp.scope_profiles
                       for p in sp.profiles
                       if services is None or rp.resource.attributes[0].value.string_value
                       in services)
        labels = {"connector": "routing", "signal": "profiles"}
        self.assertEqual(ss.self_metric(self.metrics, "profcol_connector_routed_items_total",
                                        **labels),
                         n(req, {"checkout"}) + n(req2) + n(req2, {"checkout"}))
        self.assertEqual(ss.self_metric(self.metrics, "profcol_connector_unrouted_items_total",
                                        **labels),
                         n(req, {"cart", "search"}) + n(req2, {"cart"}))
        self.assertEqual(ss.self_metric(self.metrics, "profcol_connector_dropped_items_total",
                                        **labels), 0)

    def test_pyroscope_tenant(self):
        folded = b"main;work;spin 30\nmain;idle 12\n"
        path = "/ingest?name=%s.cpu&format=folded&sampleRate=100&from=1700000000&until=1700000010"
        for name, tenant in (("checkout", "acme"), ("checkout", "other"), ("cart", "other"),
                             ("cart", None)):
            headers = {"Content-Type": "text/plain"}
            if tenant:
                headers["X-Scope-OrgID"] = tenant
            r = h.post(self.pyro, folded, content_type=None, path=path % name, headers=headers)
            self.assertEqual(r.status, 200, r.body)
        got = self.settle({"acme": 1, "checkout": 1, "default": 2, "forwarded": 2})
        # cpu samples at sampleRate 100 Hz: 10 ms of CPU each, in nanoseconds
        want = {("main", "work", "spin")[::-1]: 30 * 10**7, ("main", "idle")[::-1]: 12 * 10**7}

        def per(svc, n):
            return {(svc, k): v * n for k, v in want.items()}
        self.assertEqual(folded_summary(got["acme"]), per("checkout", 1))
        self.assertEqual(folded_summary(got["checkout"]), per("checkout", 1))
        self.assertEqual(folded_summary(got["default"]), per("cart", 2))
        self.assertEqual(folded_summary(got["forwarded"]), per("cart", 2))

    def test_reload_changes_routes(self):
        """SIGHUP with another routing table: the connector is rebuilt with the new routes, the
        receivers keep their sockets, the unchanged exporters keep sending."""
        text = self.pc.stderr()
        path = self.pc.config_paths[0]
        with open(path) as f:
            cfg = f.read()
        new = cfg.replace('attributes["service.name"] == "checkout"',
                          'attributes["service.name"] == "cart"')
        self.assertNotEqual(new, cfg)
        with open(path + ".new", "w") as f:
            f.write(new)
        os.replace(path + ".new", path)
        marker = "reload: running the new config"
        n = text.count(marker)
        self.pc.proc.send_signal(signal.SIGHUP)
        text = self.pc.wait_stderr(lambda t: t.count(marker) > n, timeout=30)
        self.assertGreater(text.count(marker), n, text[-3000:])
        self.assertIn("connectors::routing (profiles to profiles)", text)  # the restart line
        req = h.make_request(services=("checkout", "cart"), seed=5)
        r = h.post(self.otlp, req.SerializeToString())
        self.assertEqual(r.status, 200, r.body)
        got = self.settle({"checkout": 1, "default": 1, "forwarded": 1})
        self.assertEqual(h.summarize(got["checkout"]), h.summarize(only(req, {"cart"})))
        self.assertEqual(h.summarize(got["default"]), h.summarize(only(req, {"checkout"})))
        # and back: the reload of the reload
        with open(path + ".new", "w") as f:
            f.write(cfg)
        os.replace(path + ".new", path)
        n = text.count(marker)
        self.pc.proc.send_signal(signal.SIGHUP)
        text = self.pc.wait_stderr(lambda t: t.count(marker) > n, timeout=30)
        r = h.post(self.otlp, req.SerializeToString())
        self.assertEqual(r.status, 200, r.body)
        got = self.settle({"checkout": 2, "default": 2, "forwarded": 2})
        self.assertEqual(h.summarize(got["checkout"][1:]), h.summarize(only(req, {"checkout"})))
        self.pc.stop()
        self.assertNotIn("Z error ", self.pc.stderr())


class ShutdownTest(h.Started, unittest.TestCase):
    def test_sigterm_flushes_through_connectors(self):
        """Batches held by a batch processor on both sides of two connectors (10 s timeouts) are
        flushed at SIGTERM and reach the sink before profcol exits 0. (The service stops a
        downstream pipeline's processors after its upstream's; batch passes data on after its
        own shutdown too, so this test does not tell that order from the old one.)"""
        sink = self.sink()
        port = h.free_port()
        cfg = ("receivers:\n  otlp:\n    protocols:\n      http:\n"
               "        endpoint: 127.0.0.1:%d\n"
               "processors:\n  batch:\n    timeout: 10s\n"
               "exporters:\n  otlphttp:\n    endpoint: %s\n"
               "connectors:\n  forward:\n  routing:\n    default_pipelines: [profiles/b]\n"
               "    table:\n      - condition: attributes[\"service.name\"] == \"none\"\n"
               "        pipelines: [profiles/b]\n"
               "service:\n  pipelines:\n    profiles:\n      receivers: [otlp]\n"
               "      processors: [batch]\n      exporters: [routing]\n"
               "    profiles/b:\n      receivers: [routing]\n      processors: [batch]\n"
               "      exporters: [forward]\n"
               "    profiles/c:\n      receivers: [forward]\n      processors: [batch]\n"
               "      exporters: [otlphttp]\n") % (port, sink.url)
        pc = self.start(cfg, port, name="connectors-shutdown")
        reqs = [h.make_request(services=("s%d" % i,), seed=10 + i) for i in range(3)]
        # batch answers a request once it flushed it: the clients wait while it is held
        answers = [None] * len(reqs)

        def send(i):
            answers[i] = h.post(port, reqs[i].SerializeToString(), timeout=30).status
        threads = [threading.Thread(target=send, args=(i,)) for i in range(len(reqs))]
        for t in threads:
            t.start()
        time.sleep(1.0)
        self.assertEqual(sink.snapshot(), [])  # held by the batch processors
        pc.stop()
        for t in threads:
            t.join(30)
        self.assertEqual(answers, [200] * len(reqs))
        self.assertEqual(h.summarize(sink.messages()), h.summarize(reqs))


if __name__ == "__main__":
    h.main()
