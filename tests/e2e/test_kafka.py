#!/usr/bin/python3
"""The kafka exporter and receiver against a real Kafka protocol: librdkafka's mock cluster
(kafka_mock, built by meson from kafka_mock.c, on 127.0.0.1; its brokers go down and up on
command), with kafkajs (tests/e2e/kafka, pinned in package-lock.json, `npm ci` when
node_modules is missing or stale), a client that shares no code with librdkafka, on the other
side of profcol:

  * the issue's example config, as written but for its ports: what clients post over OTLP/HTTP
    is what kafkajs reads from the topic (protobuf, and JSON with profiles::encoding otlp_json):
    totals, stacks, attributes and links (harness.summarize of python-protobuf's decoding of
    what was sent);
  * kafkajs produces OTLP profiles (protobuf on one topic, OTLP JSON on another; a header; one
    undecodable message) that two kafka receivers consume into a sink: everything arrives as
    sent, the header as the resource attribute kafka.header.tenant, the undecodable message is
    counted in otelcol_kafka_receiver_unmarshal_failed_profiles and logged with its offset;
  * sidecar profcol (otlp -> kafka) -> kafka -> gateway profcol (kafka -> otlphttp, no sending
    queue) -> sink, with the gateway killed with -9 in the middle and started again: every
    request the client got a 200 for arrives (duplicates allowed and counted), nothing else;
  * the broker down at start and during the run: the sidecar's requests are queued (200) and
    retried, the gateway's consumer reconnects; afterwards every acknowledged request arrived,
    and the sidecar counts exactly the acknowledged samples as sent.

Only 127.0.0.1; npm's registry is the only network use (and only when installing)."""

import base64
import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402  (re-execs under /usr/bin/python3 if needed)
from signal_support import self_metric  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
KAFKA_DIR = os.path.join(HERE, "kafka")
MOCK = os.environ.get("KAFKA_MOCK_BIN") or os.path.join(
    os.path.dirname(os.path.abspath(h.BIN)), "tests", "e2e", "kafka_mock")
ARRIVE = 60.0 if h.SANITIZED else 30.0


# ---------------------------------------------------------------------------------------------
# the broker and the independent client

class KafkaMock:
    """kafka_mock: librdkafka's mock cluster on 127.0.0.1; down()/up() take its broker away and
    back (connections closed, new ones refused)."""

    def __init__(self, topics=(), down=False):
        self.args = [MOCK] + (["--down"] if down else []) + ["%s:%d" % t for t in topics]
        self.proc = None

    def start(self):
        if not os.access(MOCK, os.X_OK):
            raise RuntimeError("kafka_mock not found: %s (set KAFKA_MOCK_BIN)" % MOCK)
        self.err = open(h._tmpfile("kafka-mock", ".stderr"), "wb")
        self.proc = subprocess.Popen(self.args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.err, text=True, bufsize=1)
        line = self.proc.stdout.readline().split()
        if len(line) != 2 or line[0] != "bootstraps":
            raise RuntimeError("kafka_mock said %r" % line)
        self.brokers = line[1]
        return self

    def cmd(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        reply = self.proc.stdout.readline().strip()
        if not reply.startswith("ok"):
            raise RuntimeError("kafka_mock %r: %r" % (line, reply))

    def down(self):
        self.cmd("down")

    def up(self):
        self.cmd("up")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.flush()
                self.proc.wait(15)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(5)
        if self.proc:
            self.proc.stdout.close()
            self.proc.stdin.close()
        self.err.close()


def kafkajs(*args, timeout=90):
    """Run tests/e2e/kafka/client.js; its JSON report."""
    r = subprocess.run([shutil.which("node"), "client.js"] + [str(a) for a in args],
                       cwd=KAFKA_DIR, capture_output=True, text=True, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise AssertionError("kafkajs %s failed (exit %d):\n%s" % (args[0], r.returncode,
                                                                  r.stderr[-3000:]))
    return json.loads(r.stdout.strip().splitlines()[-1])


def kafkajs_produce(brokers, topic, messages):
    """messages: [{value: bytes, key?, headers?}]; produced one by one with acks=all."""
    path = h._tmpfile("kafkajs-produce", ".json")
    with open(path, "w") as f:
        json.dump([dict(m, value=base64.b64encode(m["value"]).decode())
                   for m in messages], f)
    return kafkajs("produce", brokers, topic, path)["produced"]


def kafkajs_consume(brokers, topic, count, timeout_ms=30000):
    """Every message of topic from the start (until count arrived or the time is up)."""
    got = kafkajs("consume", brokers, topic, count, timeout_ms, timeout=timeout_ms / 1000 + 60)
    for m in got["consumed"]:
        m["value"] = base64.b64decode(m["value"])
    return got["consumed"]


def setUpModule():
    if h.node_version() < (14, 0):
        raise unittest.SkipTest("kafkajs needs node >= 14")
    h.ensure_npm_lockfile(KAFKA_DIR)


# ---------------------------------------------------------------------------------------------
# configs

def sidecar_config(port, brokers, metrics_port, extra=""):
    return ("receivers:\n  otlp:\n    protocols:\n      http:\n        endpoint: 127.0.0.1:%d\n"
            "exporters:\n  kafka:\n    brokers: [%s]\n    producer: {required_acks: -1}\n"
            "    timeout: 2s\n"
            "    retry_on_failure: {initial_interval: 200ms, max_interval: 1s}\n%s"
            "service:\n  telemetry:\n    metrics:\n      address: 127.0.0.1:%d\n"
            "  pipelines:\n    profiles:\n      receivers: [otlp]\n      exporters: [kafka]\n"
            % (port, brokers, extra, metrics_port))


def gateway_config(brokers, sink_url, metrics_port, group="gateway", extra=""):
    """kafka -> otlphttp without a sending queue: an offset is committed only once the sink has
    the data (a queue would acknowledge it before, and a kill -9 would lose what it held)."""
    return ("receivers:\n  kafka:\n    brokers: [%s]\n    group_id: %s\n"
            "    initial_offset: earliest\n    session_timeout: 6s\n"
            "    heartbeat_interval: 1s\n%s"
            "exporters:\n  otlphttp:\n    endpoint: %s\n    compression: none\n"
            "    sending_queue: {enabled: false}\n"
            "    retry_on_failure: {initial_interval: 200ms, max_interval: 1s}\n"
            "service:\n  telemetry:\n    metrics:\n      address: 127.0.0.1:%d\n"
            "  pipelines:\n    profiles:\n      receivers: [kafka]\n      exporters: [otlphttp]\n"
            % (brokers, group, extra, sink_url, metrics_port))


def request(i, samples=8):
    """Request i: its own service name (svc-<i>), so the sink can tell every request apart."""
    return h.make_request(("svc-%d" % i,), seed=i + 1, samples=samples)


def service_of(msg):
    """The service.name of a request holding one service."""
    for rp in msg.resource_profiles:
        for kv in rp.resource.attributes:
            if kv.key == "service.name":
                return kv.value.string_value
    return None


class Poster(threading.Thread):
    """Posts request(i) for i = start, start+1, ... every interval until stopped; records the
    ones answered 200."""

    def __init__(self, port, start=0, interval=0.05):
        super().__init__(daemon=True)
        self.port, self.i, self.interval = port, start, interval
        self.sent, self.acked, self.failed = {}, [], []
        self.stop_event = threading.Event()

    def run(self):
        while not self.stop_event.is_set():
            req = request(self.i)
            self.sent[self.i] = req
            try:
                r = h.post(self.port, req.SerializeToString(), timeout=10)
                (self.acked if r.status == 200 else self.failed).append(self.i)
            except OSError as e:
                self.failed.append((self.i, str(e)))
            self.i += 1
            self.stop_event.wait(self.interval)

    def finish(self):
        self.stop_event.set()
        self.join(30)
        return self.acked


def arrivals(sink):
    """{service: [summaries of the requests that arrived for it]}."""
    out = collections.defaultdict(list)
    for m in sink.messages():
        out[service_of(m)].append(h.summarize(m))
    return out


class KafkaTest(unittest.TestCase):
    def setUp(self):
        self.mocks, self.procs, self.sinks = [], [], []

    def tearDown(self):
        for p in self.procs:
            p.kill()
        for s in self.sinks:
            s.stop()
        for m in self.mocks:
            m.stop()

    def mock(self, topics=(("otlp_profiles", 4),), down=False):
        m = KafkaMock(topics, down)
        self.mocks.append(m)
        return m.start()

    def profcol(self, cfg, ports, name):
        p = h.Profcol(cfg, wait_ports=ports, name=name)
        self.procs.append(p)
        return p.start()

    def sink(self):
        self.sinks.append(h.Sink().start())
        return self.sinks[-1]

    def assert_all_arrive(self, sink, want, timeout=ARRIVE):
        """want: {service: request}. Waits until every one arrived; each arrival equals what
        was sent. Returns how many arrived twice or more (duplicates)."""
        sink.wait_until(lambda reqs: {service_of(r.message) for r in reqs if r.message}
                        >= set(want), timeout)
        got = arrivals(sink)
        missing = sorted(set(want) - set(got))
        self.assertFalse(missing, "acknowledged but never arrived: %s" % missing[:20])
        for svc, summaries in got.items():
            self.assertIn(svc, want, "arrived but never acknowledged: %s" % svc)
            for s in summaries:
                self.assertEqual(s, h.summarize(want[svc]), "%s arrived changed" % svc)
        return sum(len(v) - 1 for v in got.values())

    # ---- the exporter --------------------------------------------------------------------

    EXAMPLE = """receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:4318
exporters:
  kafka:
    brokers: [127.0.0.1:9092]
    profiles:
      topic: otlp_profiles
      encoding: otlp_proto
service:
  pipelines:
    profiles:
      receivers: [otlp]
      exporters: [kafka]
"""

    def run_exporter(self, cfg, port, topic, json_values):
        self.profcol(cfg, [port], "profcol-kafka-exporter")
        sent = [h.make_request(("checkout", "cart"), seed=s, samples=20, links=True)
                for s in (1, 2, 3)]
        for req in sent:
            r = h.post(port, req.SerializeToString())
            self.assertEqual(r.status, 200, r.body[:300])
        got = kafkajs_consume(self.broker.brokers, topic, len(sent))
        self.assertEqual(len(got), len(sent), "one message per request")
        msgs = []
        for m in got:
            if json_values:
                self.assertEqual(m["value"][:1], b"{", "otlp_json messages are JSON")
                msgs.append(h.parse_otlp_json(m["value"].decode()))
            else:
                msg = h.pb.Request()
                msg.ParseFromString(m["value"])
                msgs.append(msg)
            self.assertIsNone(m["key"])
        self.assertEqual(h.summarize(msgs), h.summarize(sent))
        self.assertEqual(h.count_samples(msgs), h.count_samples(sent))
        return sent

    def test_issue_example_config(self):
        """The issue's config as written, but for its ports."""
        self.broker = self.mock()
        port = h.free_port()
        cfg = self.EXAMPLE.replace("127.0.0.1:4318", "127.0.0.1:%d" % port) \
                          .replace("127.0.0.1:9092", self.broker.brokers)
        self.run_exporter(cfg, port, "otlp_profiles", False)
        self.procs[-1].stop()

    def test_json_encoding_and_self_metrics(self):
        self.broker = self.mock((("otlp_profiles_json", 2),))
        port, mport = h.free_port(), h.free_port()
        cfg = sidecar_config(port, self.broker.brokers, mport,
                             "    profiles: {topic: otlp_profiles_json, encoding: otlp_json}\n")
        sent = self.run_exporter(cfg, port, "otlp_profiles_json", True)
        samples = h.count_samples(sent)
        # counted when the delivery report is served, which may be just after kafkajs read it
        self.assertTrue(h.wait_for(lambda: self_metric(
            mport, "otelcol_exporter_sent_profile_samples", exporter="kafka") == samples,
            timeout=10))
        self.assertEqual(self_metric(mport, "otelcol_kafka_exporter_records", exporter="kafka",
                                     topic="otlp_profiles_json", outcome="success"), 3)
        self.procs[-1].stop()

    # ---- the receiver --------------------------------------------------------------------

    def test_kafkajs_produces_both_encodings(self):
        self.broker = self.mock((("p-proto", 2), ("p-json", 2)))
        sink = self.sink()
        mport = h.free_port()
        recv = ("receivers:\n"
                "  kafka/proto:\n    brokers: [%s]\n    profiles: {topic: p-proto}\n"
                "    group_id: e2e-proto\n    initial_offset: earliest\n"
                "    header_extraction: {extract_headers: true, headers: [tenant]}\n"
                "  kafka/json:\n    brokers: [%s]\n"
                "    profiles: {topic: p-json, encoding: otlp_json}\n"
                "    group_id: e2e-json\n    initial_offset: earliest\n"
                % (self.broker.brokers, self.broker.brokers))
        cfg = (recv + "exporters:\n  otlphttp:\n    endpoint: %s\n"
               "service:\n  telemetry:\n    metrics:\n      address: 127.0.0.1:%d\n"
               "  pipelines:\n    profiles:\n      receivers: [kafka/proto, kafka/json]\n"
               "      exporters: [otlphttp]\n" % (sink.url, mport))
        p = self.profcol(cfg, [mport], "profcol-kafka-receiver")
        proto = {"svc-%d" % i: request(i) for i in range(4)}
        js = {"svc-%d" % i: request(i) for i in range(10, 14)}
        msgs = [{"value": r.SerializeToString(), "headers": {"tenant": "acme"}}
                for r in proto.values()]
        msgs.insert(2, {"value": b"\x0a\xff\xff\xff not a protobuf"})
        produced = kafkajs_produce(self.broker.brokers, "p-proto", msgs)
        kafkajs_produce(self.broker.brokers, "p-json",
                        [{"value": h.to_otlp_json(r)} for r in js.values()])
        # the header as a resource attribute, on the proto topic's requests
        want = dict(js)
        for svc, r in proto.items():
            w = h.pb.Request()
            w.CopyFrom(r)
            for rp in w.resource_profiles:
                rp.resource.attributes.add(key="kafka.header.tenant").value.string_value = "acme"
            want[svc] = w
        dups = self.assert_all_arrive(sink, want)
        self.assertEqual(dups, 0)

        def settles(name, receiver, want):  # counted once the pipeline's answer is back
            return h.wait_for(lambda: self_metric(mport, name, receiver=receiver) == want,
                              timeout=10) or self_metric(mport, name, receiver=receiver)
        self.assertEqual(settles("otelcol_kafka_receiver_unmarshal_failed_profiles",
                                 "kafka/proto", 1), True)
        samples = h.count_samples(list(proto.values()))
        self.assertEqual(settles("otelcol_receiver_accepted_profile_samples", "kafka/proto",
                                 samples), True)
        self.assertEqual(settles("otelcol_receiver_accepted_profile_samples", "kafka/json",
                                 h.count_samples(list(js.values()))), True)
        bad = produced[2]
        err = p.wait_stderr(lambda t: "undecodable" in t)
        self.assertIn("topic p-proto, partition %d, offset %s" % (bad["partition"], bad["offset"]),
                      err)
        p.stop()

    # ---- through kafka, end to end -------------------------------------------------------

    def test_gateway_killed_and_restarted(self):
        """Every request the sidecar acknowledged arrives, across a kill -9 of the gateway."""
        self.broker = self.mock()
        sink = self.sink()
        port, m1, m2 = h.free_port(), h.free_port(), h.free_port()
        self.profcol(sidecar_config(port, self.broker.brokers, m1), [port], "profcol-sidecar")
        gw_cfg = gateway_config(self.broker.brokers, sink.url, m2)
        gw = self.profcol(gw_cfg, [m2], "profcol-gateway")
        poster = Poster(port)
        poster.start()
        h.wait_for(lambda: len(sink.snapshot()) >= 20, timeout=ARRIVE)
        self.assertGreaterEqual(len(sink.snapshot()), 20, "nothing flows before the kill")
        time.sleep(3)  # a few auto-commits (every second) before the kill
        gw.proc.send_signal(signal.SIGKILL)
        gw.proc.wait(10)
        before = len(sink.snapshot())
        time.sleep(2)
        gw2 = self.profcol(gw_cfg, [m2], "profcol-gateway-again")
        time.sleep(3)
        acked = poster.finish()
        self.assertFalse(poster.failed, "the sidecar refused: %s" % poster.failed[:5])
        self.assertGreater(len(acked), 50)
        dups = self.assert_all_arrive(sink, {"svc-%d" % i: poster.sent[i] for i in acked},
                                      timeout=ARRIVE * 2)
        print("\n  kill -9: %d requests acknowledged, all arrived, %d more than once (%d had "
              "arrived before the kill)" % (len(acked), dups, before), file=sys.stderr)
        # what the first gateway committed is not taken again: fewer duplicates than arrivals
        self.assertLess(dups, before)
        gw2.stop()
        self.procs[0].stop()

    def test_broker_down_at_start_and_during(self):
        self.broker = self.mock(down=True)
        sink = self.sink()
        port, m1, m2 = h.free_port(), h.free_port(), h.free_port()
        side = self.profcol(sidecar_config(port, self.broker.brokers, m1), [port],
                            "profcol-sidecar")
        gw = self.profcol(gateway_config(self.broker.brokers, sink.url, m2), [m2],
                          "profcol-gateway")
        sent = {}
        for i in range(10):  # the broker down: queued, acknowledged
            sent[i] = request(i)
            r = h.post(port, sent[i].SerializeToString())
            self.assertEqual(r.status, 200)
        time.sleep(2)
        self.assertEqual(sink.snapshot(), [], "nothing can arrive while the broker is down")
        # counted as sent only once the broker acknowledged it
        self.assertEqual(self_metric(m1, "otelcol_exporter_sent_profile_samples",
                                     exporter="kafka"), 0)
        self.broker.up()
        self.assert_all_arrive(sink, {"svc-%d" % i: sent[i] for i in sent})
        # down again in the middle of a run
        poster = Poster(port, start=100)
        poster.start()
        h.wait_for(lambda: len(poster.acked) >= 20, timeout=ARRIVE)
        self.broker.down()
        time.sleep(4)
        self.broker.up()
        time.sleep(2)
        acked = poster.finish()
        self.assertFalse(poster.failed, "the sidecar refused: %s" % poster.failed[:5])
        want = {"svc-%d" % i: sent[i] for i in sent}
        want.update({"svc-%d" % i: poster.sent[i] for i in acked})
        dups = self.assert_all_arrive(sink, want, timeout=ARRIVE * 2)
        # the sidecar counts what was acknowledged, once
        samples = h.count_samples(list(want.values()))
        self.assertTrue(h.wait_for(lambda: self_metric(
            m1, "otelcol_exporter_sent_profile_samples", exporter="kafka") == samples,
            timeout=ARRIVE))
        self.assertTrue(h.wait_for(lambda: self_metric(
            m2, "otelcol_receiver_accepted_profile_samples", receiver="kafka") >= samples,
            timeout=10), "the gateway counts at least what arrived")
        print("\n  broker down: %d requests acknowledged, all arrived, %d more than once"
              % (len(want), dups), file=sys.stderr)
        side.stop()
        gw.stop()


if __name__ == "__main__":
    unittest.main()
