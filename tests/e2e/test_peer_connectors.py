#!/usr/bin/env python3
"""Suite `peers`: profcol's connector validation against the OpenTelemetry Collector's own
(tests/peers/otelcol: otelcol 0.161.0 with its forward connector). Each config below is run
through `otelcol validate --config X --feature-gates=service.profilesSupport` (read-only use of
the built peer) and `profcol validate --config X`: both refuse it, and the message after
"failed to build pipelines: " (otelcol) is, character for character, the one after
"service::pipelines: " (profcol). Unused connectors are accepted by both. The contrib routing
connector is not in the peer (its releases stop at v0.149.0), so routing is not compared."""
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
import peer_support as peers  # noqa: E402

h.ensure_debian_python()

HEAD = """\
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:0
processors:
  batch:
  memory_limiter:
    check_interval: 1s
    limit_mib: 100
exporters:
  debug:
"""


def pipelines(**pls):
    """service: pipelines: from name=(receivers, processors, exporters) (names: _ for /)."""
    out = "service:\n  pipelines:\n"
    for name, (rec, procs, exps) in pls.items():
        out += "    %s:\n      receivers: [%s]\n" % (name.replace("_", "/"), ", ".join(rec))
        if procs:
            out += "      processors: [%s]\n" % ", ".join(procs)
        out += "      exporters: [%s]\n" % ", ".join(exps)
    return out


CASES = {
    "exporter only, two pipelines": HEAD + "connectors:\n  forward:\n  forward/unused:\n" +
    pipelines(traces_in=(["otlp"], [], ["forward"]), traces_b=(["otlp"], [], ["debug", "forward"])),
    "receiver only": HEAD + "connectors:\n  forward:\n" +
    pipelines(logs=(["otlp"], [], ["debug"]), logs_out=(["forward"], [], ["debug"])),
    "signals forward does not join": HEAD + "connectors:\n  forward:\n" +
    pipelines(traces=(["otlp"], [], ["forward"]), metrics=(["forward"], [], ["debug"])),
    "profiles to profiles, one way only": HEAD + "connectors:\n  forward:\n" +
    pipelines(profiles=(["otlp"], [], ["forward"]), logs=(["forward"], [], ["debug"])),
    "cycle through one connector": HEAD + "connectors:\n  forward:\n" +
    pipelines(profiles_in=(["otlp"], [], ["forward"]),
              profiles_loop=(["forward"], ["batch"], ["forward", "debug"])),
    "cycle through two connectors": HEAD + "connectors:\n  forward/a:\n  forward/b:\n" +
    pipelines(logs_in=(["otlp"], [], ["forward/a"]),
              logs_a=(["forward/a"], ["memory_limiter"], ["forward/b"]),
              logs_b=(["forward/b"], ["batch"], ["forward/a", "debug"])),
    "cycle, no processors on it": HEAD + "connectors:\n  forward/x:\n  forward/y:\n" +
    pipelines(metrics_in=(["otlp"], ["batch"], ["forward/x"]),
              metrics_x=(["forward/x"], [], ["forward/y"]),
              metrics_y=(["forward/y"], [], ["forward/x", "debug"])),
    "cycle, three pipelines": HEAD + "connectors:\n  forward/1:\n  forward/2:\n  forward/3:\n" +
    pipelines(traces_in=(["otlp"], [], ["forward/1"]),
              traces_1=(["forward/1"], ["batch", "memory_limiter"], ["forward/2"]),
              traces_2=(["forward/2"], ["batch"], ["forward/3"]),
              traces_3=(["forward/3"], ["memory_limiter"], ["forward/1", "debug"])),
}

VALID = {
    "declared, never used": HEAD + "connectors:\n  forward:\n" +
    pipelines(profiles=(["otlp"], [], ["debug"])),
    "fork and join": HEAD + "connectors:\n  forward:\n" +
    pipelines(logs_a=(["otlp"], [], ["forward"]), logs_b=(["otlp"], ["batch"], ["forward"]),
              logs_x=(["forward"], ["batch"], ["debug"]), logs_y=(["forward"], [], ["debug"])),
}


def pipeline_lists_sorted(msg):
    """otelcol lists the pipelines of "used as exporter in [a b] pipeline" in map order (it
    varies from run to run); profcol in config order: compare them as sets."""
    return re.sub(r"\[([^\]]*)\] pipeline",
                  lambda m: "[%s] pipeline" % " ".join(sorted(m.group(1).split())), msg)


def run(args):
    r = subprocess.run(args, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    return r.returncode, r.stdout + r.stderr


class ConnectorValidationTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.otelcol = os.path.join(peers.peer_dir("otelcol"), "otelcol")
        rc, out = run([cls.otelcol, "components"])
        if "name: forward" not in out:
            raise AssertionError("the otelcol peer has no forward connector: rebuild it "
                                 "(tools/peers.sh build otelcol)\n" + out[-2000:])

    def both(self, text):
        path = h.write_config(text, "peer-connectors")
        oc = run([self.otelcol, "validate", "--config", path,
                  "--feature-gates=service.profilesSupport"])
        pc = run([h.BIN, "validate", "--config", path])
        return oc, pc

    def test_same_errors(self):
        for name, text in CASES.items():
            with self.subTest(name):
                (orc, oout), (prc, pout) = self.both(text)
                self.assertNotEqual(orc, 0, oout)
                self.assertNotEqual(prc, 0, pout)
                want = [ln.split("failed to build pipelines: ", 1)[1]
                        for ln in oout.splitlines() if ln.startswith("Error: failed to build")]
                got = [ln.split("service::pipelines: ", 1)[1]
                       for ln in pout.splitlines() if "service::pipelines: " in ln]
                self.assertEqual(len(want), 1, oout)
                self.assertEqual([pipeline_lists_sorted(g) for g in got],
                                 [pipeline_lists_sorted(w) for w in want], "otelcol:\n%s\nprofcol:\n%s" % (oout, pout))

    def test_same_acceptance(self):
        for name, text in VALID.items():
            with self.subTest(name):
                (orc, oout), (prc, pout) = self.both(text)
                self.assertEqual(orc, 0, oout)
                self.assertEqual(prc, 0, pout)

    def test_unknown_type(self):
        (orc, oout), (prc, pout) = self.both(
            HEAD + "connectors:\n  fwd/x:\n" + pipelines(logs=(["otlp"], [], ["debug"])))
        self.assertNotEqual(orc, 0)
        self.assertNotEqual(prc, 0)
        # the same words; the valid values are each binary's own
        prefix = "'connectors' unknown type: \"fwd\" for id: \"fwd/x\" (valid values: ["
        self.assertIn(prefix + "forward])", oout)
        self.assertIn(prefix + "forward routing profilemetrics])", pout)


if __name__ == "__main__":
    h.main()
