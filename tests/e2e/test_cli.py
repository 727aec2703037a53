#!/usr/bin/python3
"""The command line and config as Collector users expect them, and SIGHUP reloads.

CliTest: `validate` reports every error (one line each, file:line: key path); unknown keys in
service::telemetry are errors; logs encoding json; ${file:...}, ${env:...} (unset: warned),
--config yaml:/env:, --set; print-config (redacted, unredacted, json); featuregate and
--feature-gates; an otlp exporter endpoint with a URL path is accepted and its path dropped
(a grpcio backend receives the data); the debug exporter's otelcol_exporter_* series.

ReloadTest: SIGHUP re-reads the config: a changed exporter and an added processor take effect
while the unchanged receiver keeps its socket and a keep-alive connection; an invalid config is
refused with its errors logged and the old pipeline keeps delivering; SIGHUPs while clients
send lose nothing that was acknowledged (ids compared at the sinks); a replaced exporter with a
persistent queue leaves the queue to its successor, which delivers it; a hostile config (nested
100k deep in 200 KB) is refused on reload while the running pipeline keeps serving.

DeepConfigTest: such a config costs `validate` no more CPU than a flat one of the same size
(libyaml's scanner is quadratic in flow nesting: over a minute before the nesting check).
"""

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
import signal_support as ss  # noqa: E402

import yaml  # noqa: E402  (Debian's python3-yaml: an independent reader of print-config)


def receiver(port, name="otlp"):
    return ("  %s:\n    protocols:\n      http:\n        endpoint: 127.0.0.1:%d\n"
            % (name, port))


def resource_attr(messages, key):
    """Values of resource attribute `key` in every resource that arrived."""
    out = []
    for m in messages:
        st = m.dictionary.string_table
        for rp in m.resource_profiles:
            for kv in rp.resource.attributes:
                k = kv.key or (st[kv.key_strindex] if kv.key_strindex else "")
                if k == key:
                    out.append(kv.value.string_value)
    return out


def services(messages):
    """service.name of every resource that arrived, with repeats."""
    return resource_attr(messages, "service.name")


def request_for(n):
    return h.make_request(services=("svc-%05d" % n,), seed=n % 50 + 1, samples=6).SerializeToString()


class CliTest(unittest.TestCase):

    def test_validate_reports_every_error(self):
        path = h.write_config(
            "receivers:\n"                          # 1
            "  otlp:\n"                             # 2
            "    protocols:\n"                      # 3
            "      htttp:\n"                        # 4
            "exporters:\n"                          # 5
            "  debug:\n"                            # 6
            "    verbosity: loud\n"                 # 7
            "service:\n"                            # 8
            "  telemetry:\n"                        # 9
            "    logs:\n"                           # 10
            "      levle: debug\n"                  # 11
            "      encoding: xml\n"                 # 12
            "  pipelines:\n"                        # 13
            "    profiles:\n"                       # 14
            "      receivers: [otlp]\n"             # 15
            "      exporters: [debug, nope]\n", "many-errors")
        r = h.run_profcol(["validate", "--config", path])
        self.assertEqual(r.returncode, 1, r.stderr)
        lines = [l for l in r.stderr.splitlines() if "invalid config" in l]
        base = os.path.basename(path)
        want = [(4, "receivers::otlp::protocols::htttp", 'unknown key "htttp" (did you mean "http"?)'),
                (7, "exporters::debug::verbosity", '"loud" is not one of'),
                (11, "service::telemetry::logs::levle", 'did you mean "level"'),
                (12, "service::telemetry::logs::encoding", 'not one of: console, json'),
                (16, "service::pipelines::profiles", 'exporters "nope" is not defined')]
        self.assertEqual(len(lines), len(want), r.stderr)
        for (line, key, text), got in zip(want, lines):  # one per line, in file order
            self.assertIn("%s:%d: %s" % (base, line, key), got)
            self.assertIn(text, got)

    def test_errors_that_point_the_way(self):
        """Issue 28: an unknown type with no near name lists the kind's types (and where a
        Collector user's zpages / pprof went); yaml: fragments alone say that they replaced the
        embedded default; an enum given a list names its values."""
        cases = [
            ("receivers::pprof: {}", 'unknown receiver type "pprof" (profcol\'s receivers: otlp, '
             "pyroscope, kafka, pyroscope_scrape; pprof endpoints are scraped by the "
             "pyroscope_scrape receiver, pprof uploads go to the pyroscope receiver"),
            ("extensions::zpages: {}", 'unknown extension type "zpages" (profcol\'s extensions: '),
            ("extensions::zpages: {}", "shown by the profilez extension"),
            ("receivers::otlpp: {}", 'unknown receiver type "otlpp" (did you mean "otlp"?)'),
        ]
        for frag, want in cases:
            r = h.run_profcol(["validate", "--config", "yaml:" + frag])
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn(want, r.stderr)
        # the Collector's sending_queue::storage names a file_storage extension; profcol's a
        # directory: said, instead of queueing into ./file_storage
        r = h.run_profcol(["validate", "--config", "yaml:receivers::otlp::protocols::http: {}",
                           "--config", "yaml:exporters::otlphttp::endpoint: http://h:4318",
                           "--config", "yaml:exporters::otlphttp::sending_queue::storage: "
                           "file_storage/q",
                           "--config", "yaml:service::pipelines::profiles: "
                           "{receivers: [otlp], exporters: [otlphttp]}"])
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn('sending_queue::storage: "file_storage/q" is the Collector\'s file_storage '
                      "extension; profcol takes the queue's directory here", r.stderr)
        r = h.run_profcol(["validate", "--config", "yaml:exporters::debug::verbosity: detailed"])
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("at least one pipeline is required", r.stderr)
        self.assertIn("replaces the embedded default config", r.stderr)
        path = h.write_config("receivers:\n" + receiver(h.free_port()) +
                              "exporters:\n  debug:\n    verbosity: [detailed]\n"
                              "service:\n  pipelines:\n    profiles:\n"
                              "      receivers: [otlp]\n      exporters: [debug]\n", "enum-list")
        r = h.run_profcol(["validate", "--config", path])
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("exporters::debug::verbosity: must be one of: basic, normal, detailed",
                      r.stderr)
        self.assertNotIn("replaces the embedded default", r.stderr)  # a file was given

    def test_errors_never_print_secrets(self):
        """Issue 28: a value from ${file:} or ${env:}, or under a key print-config redacts, and
        URL user info are [REDACTED] in every error of validate, print-config and a start, while
        each error still names its place. The secret file is read as text (lines) and as YAML
        (shadow-like lines ending in ':' make a mapping whose keys are the secrets)."""
        d = os.path.join(h.TMP, "secrets")
        os.makedirs(d, exist_ok=True)
        text_file, yaml_file = os.path.join(d, "text"), os.path.join(d, "yaml")
        with open(text_file, "w") as f:
            f.write("root:$6$SALTYsalt$HASHEDpw1:19000\nalice:$6$ALICEsalt$ALICEhash:19000\n")
        with open(yaml_file, "w") as f:
            f.write("root:$6$SALTYsalt$HASHEDpw1:19000:0:99999:7:::\n"
                    "alice:$6$ALICEsalt$ALICEhash:19000:0:99999:7:::\n")
        secrets = ("SALTY", "HASHED", "ALICE", "topsecret-env", "hunter2", "pw-carol", "tok-7")
        env = {"PROFCOL_T_SECRET": "topsecret-env", "PROFCOL_T_EP": "tok-7:notaport"}

        def config(ref):
            return ("extensions:\n  bearertokenauth:\n    token: ${file:%s}\n"
                    "receivers:\n  otlp:\n    protocols:\n      http:\n"
                    "        endpoint: 127.0.0.1:%d\n        max_request_body_size: ${file:%s}\n"
                    "exporters:\n  otlphttp:\n    endpoint: http://bob:hunter2@h:4318\n"
                    "    compression: ${file:%s}\n    timeout: ${env:PROFCOL_T_SECRET}\n"
                    "    headers:\n      x-key: ${file:%s}\n"
                    "  pyroscope:\n    endpoint: ftp://carol:pw-carol@host\n"
                    "    protocol: ${env:PROFCOL_T_SECRET}\n"
                    "  otlp:\n    endpoint: ${env:PROFCOL_T_EP}\n"
                    "service:\n  extensions: [bearertokenauth]\n  pipelines:\n    profiles:\n"
                    "      receivers: [otlp]\n      exporters: [otlphttp, pyroscope, otlp]\n"
                    % (ref, h.free_port(), ref, ref, ref))

        text_cfg = h.write_config(config(text_file), "secrets-text")
        good_but_userinfo = (config("x").replace("${file:x}", "1MiB")
                             .replace("compression: 1MiB", "compression: gzip")
                             .replace("x-key: 1MiB", "x-key: v").replace("token: 1MiB", "token: t")
                             .replace("${env:PROFCOL_T_SECRET}", "push")
                             .replace("timeout: push", "timeout: 1s")
                             .replace("${env:PROFCOL_T_EP}", "h:4317"))
        wants = [(text_cfg, ["max_request_body_size: \"[REDACTED]\" is not a size",
                             "compression: \"[REDACTED]\" is not one of",
                             "timeout: \"[REDACTED]\" is not a duration",
                             "protocol: \"[REDACTED]\" is not one of",
                             'endpoint: endpoint "[REDACTED]": port must be a number']),
                 (h.write_config(config(yaml_file), "secrets-yaml"),
                  ['key "[REDACTED]" has an empty part']),
                 (h.write_config(good_but_userinfo, "secrets-url"),
                  ['endpoint "http://[REDACTED]@h:4318": user info in URLs is not supported',
                   'endpoint "ftp://[REDACTED]@host": unsupported scheme'])]
        for path, want in wants:
            for args in (["validate", "--config", path], ["print-config", "--config", path],
                         ["--config", path]):
                r = h.run_profcol(args, env=env)
                self.assertEqual(r.returncode, 1, r.stderr[-2000:])
                for secret in secrets:
                    self.assertNotIn(secret, r.stderr, args)
                for w in want:
                    self.assertIn(w, r.stderr, args)
        # the same mistakes typed into the config itself are shown (the user's own text)
        with open(text_cfg) as f:
            plain = f.read().replace("${env:PROFCOL_T_SECRET}", "plain-dur")
        r = h.run_profcol(["validate", "--config", h.write_config(plain, "secrets-plain")])
        self.assertIn('timeout: "plain-dur" is not a duration', r.stderr)

    def test_collector_exporter_names(self):
        """otelcol 0.161.0 calls the otlp and otlphttp exporters otlp_grpc and otlp_http: a
        Collector config with those names runs as written (data reaches the sink)."""
        sink = h.started_sink(self)
        port = h.free_port()
        p = h.started_profcol(self, "receivers:\n" + receiver(port) +
                              "exporters:\n  otlp_http/out:\n    endpoint: %s\n"
                              "  otlp_grpc:\n    endpoint: 127.0.0.1:%d\n"
                              "    tls:\n      insecure: true\n"
                              "service:\n  pipelines:\n    profiles:\n"
                              "      receivers: [otlp]\n      exporters: [otlp_http/out]\n"
                              % (sink.url, h.free_port()), port, "collector-names")
        self.assertEqual(h.post(port, request_for(3)).status, 200)
        self.assertEqual(services(m.message for m in sink.wait_requests(1)), ["svc-00003"])
        p.stop()

    def test_refusals_before_decoding_are_counted(self):
        """docs/limits.md: every refused request is counted by reason, those refused before any
        decoding too: no credentials (401, gRPC UNAUTHENTICATED: reason unauthorized) and an
        unsupported Content-Type or Content-Encoding (415: unsupported)."""
        hport, gport, mport = h.free_port(), h.free_port(), h.free_port()
        p = h.started_profcol(self, (
            "receivers:\n  otlp:\n    protocols:\n"
            "      http:\n        endpoint: 127.0.0.1:%d\n"
            "        auth:\n          authenticator: bearertokenauth\n"
            "      grpc:\n        endpoint: 127.0.0.1:%d\n"
            "        auth:\n          authenticator: bearertokenauth\n"
            "extensions:\n  bearertokenauth:\n    token: t0k\n"
            "exporters:\n  debug:\n"
            "service:\n  extensions: [bearertokenauth]\n"
            "  telemetry:\n    metrics:\n      address: 127.0.0.1:%d\n"
            "  pipelines:\n    profiles:\n      receivers: [otlp]\n      exporters: [debug]\n")
            % (hport, gport, mport), [hport, gport], "refusals")
        body = request_for(1)
        auth = {"Authorization": "Bearer t0k"}
        self.assertEqual(h.post(hport, body).status, 401)
        self.assertEqual(h.post(hport, body, content_type="text/plain", headers=auth).status, 415)
        self.assertEqual(h.post(hport, body, headers=dict(auth, **{"Content-Encoding": "br"}))
                         .status, 415)
        self.assertEqual(h.post(hport, body, headers=auth).status, 200)
        self.assertIn(b"grpc-status: 16", h.curl_grpc_export(gport, body).lower())
        import signal_support as ss

        def count(transport, reason):
            return ss.self_metric(mport, "profcol_receiver_refused_requests",
                                  transport=transport, reason=reason)
        self.assertEqual(count("http", "unauthorized"), 1)
        self.assertEqual(count("http", "unsupported"), 2)
        self.assertEqual(count("grpc", "unauthorized"), 1)
        p.stop()

    def test_metrics_port_in_use_stops_the_start(self):
        """Issue 28: as otelcol, a self-metrics port already taken ends the start with exit 1
        and the reason (running on would let a scraper read the other process)."""
        import socket
        busy = socket.socket()
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        self.addCleanup(busy.close)
        port = busy.getsockname()[1]
        r = h.run_profcol(["--config", "yaml:receivers::otlp::protocols::http::endpoint: "
                           "127.0.0.1:%d" % h.free_port(),
                           "--config", "yaml:exporters::debug: {}",
                           "--config", "yaml:service::pipelines::profiles: "
                           "{receivers: [otlp], exporters: [debug]}",
                           "--set", "service::telemetry::metrics::address=127.0.0.1:%d" % port])
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("cannot start: self-metrics on 127.0.0.1:%d: listen 127.0.0.1:%d: "
                      "address already in use" % (port, port), r.stderr)

    def test_default_config_serves_otlp_grpc(self):
        """The embedded default listens for OTLP/gRPC on localhost:4317 as well (issue 28: the
        eBPF profiler and most OTel SDKs default to it); here on free ports, moved with --set, a
        gRPC call made by curl is answered OK and printed by the debug exporter."""
        r = h.run_profcol(["print-default-config"])
        self.assertIn("endpoint: localhost:4317", r.stdout)
        gport, hport, pport = h.free_port(), h.free_port(), h.free_port()
        sets = ["receivers::otlp::protocols::grpc::endpoint=127.0.0.1:%d" % gport,
                "receivers::otlp::protocols::http::endpoint=127.0.0.1:%d" % hport,
                "receivers::pyroscope::endpoint=127.0.0.1:%d" % pport,
                "service::telemetry::metrics::address=127.0.0.1:%d" % h.free_port()]
        args = [a for s in sets for a in ("--set", s)]
        p = h.Profcol([], args=args, wait_ports=[gport, hport, pport], name="default").start()
        try:
            body = h.make_request(("checkout",), seed=11).SerializeToString()
            out = h.curl_grpc_export(gport, body)
            self.assertIn(b"grpc-status: 0", out.lower(), out)
            p.stop()
            with open(p.stderr_path) as f:
                self.assertIn("OTLP/gRPC on 127.0.0.1:%d" % gport, f.read())
        finally:
            p.kill()

    def test_logs_encoding_json(self):
        port = h.free_port()
        p = h.Profcol("receivers:\n" + receiver(port) + "exporters:\n  debug:\n"
                      "    verbosity: detailed\n"
                      "service:\n  telemetry:\n    logs:\n      encoding: json\n"
                      "      disable_caller: true\n    metrics:\n      level: none\n"
                      "  pipelines:\n    profiles:\n      receivers: [otlp]\n"
                      "      exporters: [debug]\n", wait_ports=[port]).start()
        try:
            text = p.wait_stderr(lambda t: "everything is ready" in t)
            # the debug exporter's output follows the encoding too (issue 28), one record a batch
            self.assertEqual(h.post(port, request_for(7)).status, 200)
            p.wait_stderr(lambda t: "svc-00007" in t)
        finally:
            p.stop()
        lines = [json.loads(l) for l in p.stderr().splitlines() if l.strip()]
        self.assertTrue(lines)
        self.assertTrue(all({"level", "ts", "component", "msg"} <= set(l) for l in lines), text)
        self.assertTrue(any(l["component"] == "otlp" and "listening" in l["msg"] for l in lines))
        printed = [l for l in lines if l["component"] == "debug" and "svc-00007" in l["msg"]]
        self.assertEqual(len(printed), 1, lines)
        self.assertGreater(printed[0]["msg"].count("\n"), 2, "the table's lines, in one record")

    def test_providers_and_set(self):
        """${file:...} and ${env:...} in values, --config env:/yaml: sources, --set over all of
        them: what reaches the sink proves each took effect."""
        sink = h.Sink().start()
        port, ignored_port = h.free_port(), h.free_port()
        token = h._tmpfile("token", ".txt", "file-token-1")
        base = h.write_config(
            "receivers:\n" + receiver(ignored_port) +
            "exporters:\n  otlphttp:\n    endpoint: http://127.0.0.1:1\n"
            "    headers:\n      x-file: ${file:%s}\n      x-env: ${env:PC_E2E_HDR}\n"
            "      x-unset: a${env:PC_E2E_UNSET_VAR}b\n"
            "service:\n  pipelines:\n    profiles:\n      receivers: [otlp]\n"
            "      exporters: [otlphttp]\n" % token, "providers")
        env = dict(os.environ, PC_E2E_HDR="env-value",
                   PC_E2E_CFG="exporters:\n  otlphttp:\n    compression: none\n")
        env.pop("PC_E2E_UNSET_VAR", None)
        args = ["--config", base, "--config", "env:PC_E2E_CFG",
                "--set", "exporters.otlphttp.endpoint=%s" % sink.url,
                "--config", "yaml:receivers::otlp::protocols::http::endpoint: 127.0.0.1:%d" % port]
        p = ProfcolArgs(args, wait_ports=[port], env=env).start()
        try:
            body = h.make_request().SerializeToString()
            self.assertEqual(h.post(port, body).status, 200)
            reqs = sink.wait_requests(1)
            self.assertEqual(len(reqs), 1)
            hd = reqs[0].headers
            self.assertEqual(hd.get("x-file"), "file-token-1")
            self.assertEqual(hd.get("x-env"), "env-value")
            self.assertEqual(hd.get("x-unset"), "ab")
            self.assertNotIn("content-encoding", hd)  # compression: none from env:PC_E2E_CFG
            self.assertIn('configuration references unset environment variable '
                          '"PC_E2E_UNSET_VAR"', p.stderr())
            self.assertFalse(h.wait_port(ignored_port, timeout=0.2))
        finally:
            p.stop()
            sink.stop()

    def test_print_config(self):
        token = h._tmpfile("secret", ".txt", "from-a-file")
        path = h.write_config(
            "receivers:\n" + receiver(h.free_port()) +
            "exporters:\n"
            "  otlphttp:\n    endpoint: http://127.0.0.1:1\n"
            "    headers:\n      x-api-token: ${env:PC_E2E_TOKEN}\n      x-file: ${file:%s}\n"
            "    auth:\n      authenticator: bearertokenauth\n"
            "  pyroscope:\n    endpoint: http://127.0.0.1:2\n"
            "    basic_auth: {username: alice, password: hunter2}\n"
            "extensions:\n  bearertokenauth:\n    token: tok-123\n"
            "  basicauth:\n    client_auth: {username: bob, password: pw-456}\n"
            "service:\n  extensions: [bearertokenauth, basicauth]\n"
            "  pipelines:\n    profiles:\n      receivers: [otlp]\n"
            "      exporters: [otlphttp, pyroscope]\n" % token, "print")
        env = {"PC_E2E_TOKEN": "env-secret"}
        r = h.run_profcol(["print-config", "--config", path, "--set",
                           "exporters::otlphttp::timeout=7s"], env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        for secret in ("env-secret", "from-a-file", "hunter2", "tok-123", "pw-456"):
            self.assertNotIn(secret, r.stdout)
        cfg = yaml.safe_load(r.stdout)
        ex = cfg["exporters"]
        self.assertEqual(ex["otlphttp"]["headers"], {"x-api-token": "[REDACTED]",
                                                     "x-file": "[REDACTED]"})
        self.assertEqual(ex["otlphttp"]["auth"], {"authenticator": "bearertokenauth"})
        self.assertEqual(ex["otlphttp"]["timeout"], "7s")
        self.assertEqual(ex["pyroscope"]["basic_auth"], {"username": "alice",
                                                         "password": "[REDACTED]"})
        self.assertEqual(cfg["extensions"]["bearertokenauth"]["token"], "[REDACTED]")
        self.assertEqual(cfg["service"]["pipelines"]["profiles"]["exporters"],
                         ["otlphttp", "pyroscope"])
        r = h.run_profcol(["print-config", "--mode", "unredacted", "--format", "json",
                           "--config", path], env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        cfg = json.loads(r.stdout)
        self.assertEqual(cfg["exporters"]["otlphttp"]["headers"]["x-api-token"], "env-secret")
        self.assertEqual(cfg["extensions"]["basicauth"]["client_auth"]["password"], "pw-456")
        # an invalid config is not printed (unless --validate=false)
        bad = h.write_config("exporters:\n  debug:\n    verbosity: loud\n", "print-bad")
        r = h.run_profcol(["print-config", "--config", bad])
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stdout, "")
        self.assertIn("exporters::debug::verbosity", r.stderr)
        r = h.run_profcol(["print-config", "--validate=false", "--config", bad])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(yaml.safe_load(r.stdout), {"exporters": {"debug": {"verbosity": "loud"}}})
        r = h.run_profcol(["print-config", "--mode", "loud"])
        self.assertEqual(r.returncode, 2)

    def test_featuregate_and_usage(self):
        r = h.run_profcol(["featuregate"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"service.profilesSupport +enabled +stable")
        # an otelcol command line's gate is accepted (profiles are always on), not disabled
        r = h.run_profcol(["--feature-gates=service.profilesSupport", "validate"])
        self.assertEqual(r.returncode, 0, r.stderr)
        r = h.run_profcol(["--feature-gates=-service.profilesSupport", "validate"])
        self.assertEqual(r.returncode, 2)
        self.assertIn('gate "service.profilesSupport" is stable and cannot be disabled', r.stderr)
        r = h.run_profcol(["featuregate", "some.gate"])
        self.assertEqual(r.returncode, 1)
        self.assertIn('"some.gate" not found', r.stderr)
        r = h.run_profcol(["--feature-gates=-some.gate", "validate"])
        self.assertEqual(r.returncode, 2)
        self.assertIn('no such feature gate "some.gate"', r.stderr)
        r = h.run_profcol(["--feature-gates=", "validate"])
        self.assertEqual(r.returncode, 0, r.stderr)
        r = h.run_profcol(["--set", "novalue", "validate"])
        self.assertEqual(r.returncode, 2)
        self.assertIn("missing equal sign", r.stderr)
        r = h.run_profcol(["validate", "--mode", "redacted"])
        self.assertEqual(r.returncode, 2)
        r = h.run_profcol(["--help"])
        for word in ("print-config", "featuregate", "--set", "--feature-gates", "yaml:", "SIGHUP"):
            self.assertIn(word, r.stdout)

    def test_grpc_endpoint_with_path(self):
        """otlp/profiles: endpoint: http://host:port/otlp -- accepted, the path dropped with a
        warning, and the data reaches the gRPC server at host:port."""
        backend = ss.GrpcBackend(signals=(ss.PROFILES,))
        port = h.free_port()
        p = h.Profcol("receivers:\n" + receiver(port) +
                      "exporters:\n  otlp/profiles:\n    endpoint: http://127.0.0.1:%d/otlp\n"
                      "service:\n  pipelines:\n    profiles:\n      receivers: [otlp]\n"
                      "      exporters: [otlp/profiles]\n" % backend.port,
                      wait_ports=[port]).start()
        try:
            req = h.make_request()
            self.assertEqual(h.post(port, req.SerializeToString()).status, 200)
            got = h.wait_for(lambda: backend.requests(ss.PROFILES), timeout=15)
            self.assertEqual(h.summarize(got), h.summarize(req))
            text = p.stderr()
            self.assertIn('endpoint "http://127.0.0.1:%d/otlp": gRPC has no URL path, so "/otlp" '
                          'is dropped: calls go to 127.0.0.1:%d' % (backend.port, backend.port), text)
        finally:
            p.stop()
            backend.stop()

    def test_debug_exporter_self_metrics(self):
        port, mport = h.free_port(), h.free_port()
        p = h.Profcol("receivers:\n" + receiver(port) + "exporters:\n  debug:\n"
                      "service:\n  telemetry:\n    metrics:\n      address: 127.0.0.1:%d\n"
                      "  pipelines:\n    profiles:\n      receivers: [otlp]\n"
                      "      exporters: [debug]\n    traces:\n      receivers: [otlp]\n"
                      "      exporters: [debug]\n" % mport, wait_ports=[port, mport]).start()
        try:
            reqs = [h.make_request(seed=s) for s in (1, 2)]
            for req in reqs:
                self.assertEqual(h.post(port, req.SerializeToString()).status, 200)
            traces = ss.TRACES.Req()
            scope = traces.resource_spans.add().scope_spans.add()
            for i in range(5):
                sp = scope.spans.add(name="s%d" % i)
                sp.trace_id = bytes([7] * 16)
                sp.span_id = bytes([i + 1] * 8)
            self.assertEqual(h.post(port, traces.SerializeToString(), path="/v1/traces").status,
                             200)
            want_samples = h.count_samples(reqs)
            want_spans = sum(len(s.spans) for rs in traces.resource_spans for s in rs.scope_spans)
            got = h.wait_for(lambda: ss.self_metric(mport, "otelcol_exporter_sent_spans",
                                                    exporter="debug") == want_spans, timeout=10)
            self.assertTrue(got, ss.http_get(mport, "/metrics")[1])
            self.assertEqual(ss.self_metric(mport, "otelcol_exporter_sent_profile_samples",
                                            exporter="debug"), want_samples)
            self.assertEqual(ss.self_metric(mport, "otelcol_exporter_send_failed_profile_samples",
                                            exporter="debug"), 0)
        finally:
            p.stop()


class ProfcolArgs(h.Profcol):
    """A Profcol started with the given arguments instead of one --config file per YAML."""

    def __init__(self, args, **kw):
        super().__init__([], **kw)
        self.args = list(args)
        if not any("telemetry::metrics" in a for a in self.args):  # as harness.Profcol does
            self.args += ["--set", "service::telemetry::metrics::address=127.0.0.1:%d"
                          % h.free_port()]

    def start(self):
        import subprocess
        self._err = open(self.stderr_path, "wb")
        self._out = open(self.stdout_path, "wb")
        self.proc = subprocess.Popen([h.BIN] + self.args, stdout=self._out, stderr=self._err,
                                     stdin=subprocess.DEVNULL, env=self.env)
        for port in self.wait_ports:
            if not h.wait_port(port, h.START_TIMEOUT, self.proc):
                self.kill()
                raise AssertionError("profcol did not listen on 127.0.0.1:%d\n%s"
                                     % (port, self.stderr()[-3000:]))
        return self


class ReloadTest(unittest.TestCase):

    def rewrite(self, p, text):
        """Replace the running profcol's config file (atomically, as editors and ConfigMaps do)."""
        tmp = p.config_paths[0] + ".new"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, p.config_paths[0])

    def hup_and_wait(self, p, marker, count_before=None):
        n = p.stderr().count(marker) if count_before is None else count_before
        p.proc.send_signal(signal.SIGHUP)
        text = p.wait_stderr(lambda t: t.count(marker) > n, timeout=30)
        self.assertGreater(text.count(marker), n, text[-3000:])
        return text

    def test_reload_changed_exporter_added_processor(self):
        sink1, sink2 = h.Sink().start(), h.Sink().start()
        port, port2 = h.free_port(), h.free_port()

        def config(sink, processors, max_body="20MiB", extra=""):
            return ("receivers:\n" + receiver(port) + receiver(port2, "otlp/two") +
                    "        max_request_body_size: %s\n" % max_body +
                    "processors:\n  resource:\n    attributes:\n"
                    "      - {key: reloaded, value: \"yes\", action: upsert}\n"
                    "exporters:\n  otlphttp:\n    endpoint: %s\n" % sink.url +
                    "service:\n  telemetry:\n    metrics:\n      level: none\n" + extra +
                    "  pipelines:\n    profiles:\n      receivers: [otlp, otlp/two]\n"
                    "      processors: [%s]\n      exporters: [otlphttp]\n" % processors)

        p = h.Profcol(config(sink1, ""), wait_ports=[port, port2], name="reload").start()
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
            self.assertEqual(h.post(port, request_for(1), conn=conn).status, 200)
            self.assertEqual(services(m.message for m in sink1.wait_requests(1)), ["svc-00001"])

            # the exporter now points at sink2, a processor is added, otlp/two changes
            self.rewrite(p, config(sink2, "resource", max_body="10MiB"))
            text = self.hup_and_wait(p, "reload: complete")
            self.assertIn("reload: restarting receivers::otlp/two, exporters::otlphttp, the "
                          "processors of pipeline profiles", text)
            self.assertEqual(text.count("otlp: listening on"), 1, "otlp must not restart")
            self.assertEqual(text.count("otlp/two: listening on"), 2, "otlp/two restarts")
            # the same keep-alive connection to the unchanged receiver, after the reload
            self.assertEqual(h.post(port, request_for(2), conn=conn).status, 200)
            self.assertEqual(h.post(port2, request_for(3)).status, 200)
            got = sink2.wait_requests(2)
            self.assertEqual(sorted(services(m.message for m in got)), ["svc-00002", "svc-00003"])
            self.assertEqual(resource_attr([m.message for m in got], "reloaded"), ["yes", "yes"])
            self.assertEqual(len(sink1.snapshot()), 1, "nothing new for the old endpoint")

            # an invalid config: refused with its errors, the old pipeline keeps delivering
            self.rewrite(p, config(sink1, "resource, nope", extra="    logs:\n      levle: x\n"))
            text = self.hup_and_wait(p, "the running one stays")
            base = os.path.basename(p.config_paths[0])
            self.assertRegex(text, r"reload: invalid config: \S*%s:\d+: "
                             r"service::telemetry::logs::levle: unknown key" % base)
            self.assertRegex(text, r'reload: invalid config: \S*%s:\d+: '
                             r'service::pipelines::profiles: processors "nope" is not defined'
                             % base)
            self.assertEqual(h.post(port, request_for(4), conn=conn).status, 200)
            got = sink2.wait_requests(3)
            self.assertEqual(sorted(services(m.message for m in got)),
                             ["svc-00002", "svc-00003", "svc-00004"])
            # the same config again: nothing restarts
            self.rewrite(p, config(sink2, "resource", max_body="10MiB"))
            p.proc.send_signal(signal.SIGHUP)
            p.wait_stderr(lambda t: "reload: the config is unchanged" in t)
            conn.close()
        finally:
            p.stop()
            sink1.stop()
            sink2.stop()
        self.assertEqual(len(sink1.snapshot()), 1)

    def test_reload_while_sending_loses_nothing(self):
        """Clients send distinct requests on keep-alive connections while profcol is reloaded
        again and again (exporter switched between two sinks, processors added and removed);
        every request answered 200 arrives at a sink."""
        sink1, sink2 = h.Sink().start(), h.Sink().start()
        port = h.free_port()

        def config(sink, processors):
            return ("receivers:\n" + receiver(port) +
                    "processors:\n  batch:\n    timeout: 300ms\n"
                    "  resource:\n    attributes:\n      - {key: r, value: x, action: upsert}\n"
                    "exporters:\n  otlphttp:\n    endpoint: %s\n"
                    "    retry_on_failure:\n      initial_interval: 100ms\n"
                    "      max_interval: 500ms\n" % sink.url +
                    "service:\n  telemetry:\n    metrics:\n      level: none\n"
                    "  pipelines:\n    profiles:\n      receivers: [otlp]\n"
                    "      processors: [%s]\n      exporters: [otlphttp]\n" % processors)

        # each reload switches away from the sink in use, which refuses a few requests just then:
        # the replaced exporter holds data waiting for a retry that it must still deliver
        configs = [(sink1, config(sink2, "batch")), (sink2, config(sink1, "resource, batch")),
                   (sink1, config(sink2, "")), (sink2, config(sink1, "batch"))]
        p = h.Profcol(config(sink1, ""), wait_ports=[port], name="reload-flight").start()
        acked, lock, stop = [], threading.Lock(), threading.Event()
        counter = iter(range(100000))
        failures = []

        def client():
            conn = None
            while not stop.is_set():
                with lock:
                    n = next(counter)
                try:
                    if conn is None:
                        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                    r = h.post(port, request_for(n), conn=conn)
                    if r.status == 200:
                        with lock:
                            acked.append(n)
                    else:
                        failures.append(r.status)  # retryable refusals are allowed
                except Exception as e:  # a closed keep-alive connection: reconnect
                    failures.append(repr(e))
                    if conn is not None:
                        conn.close()
                    conn = None
                stop.wait(0.005)
            if conn is not None:
                conn.close()

        threads = [threading.Thread(target=client, daemon=True) for _ in range(3)]
        for t in threads:
            t.start()
        try:
            for old_sink, cfg in configs:
                h.wait_for(lambda: len(acked) >= 10, timeout=10)
                before = len(acked)
                old_sink.fail_next(3, status=503, retry_after=None)
                self.rewrite(p, cfg)
                self.hup_and_wait(p, "reload: complete")
                h.wait_for(lambda: len(acked) >= before + 10, timeout=10)
        finally:
            stop.set()
            for t in threads:
                t.join(40)
            p.stop()  # drains what is queued
        sink1.stop()
        sink2.stop()
        got = set(services([r.message for r in sink1.snapshot() + sink2.snapshot()
                            if not r.refused]))
        want = {"svc-%05d" % n for n in acked}
        self.assertGreater(len(want), 40)
        self.assertEqual(sorted(want - got), [], "acknowledged but lost (%d acked, %d failures: "
                         "%s)" % (len(want), len(failures), failures[:5]))
        self.assertEqual(p.stderr().count("reload: complete"), len(configs))

    def test_persistent_queue_handed_over(self):
        """A replaced exporter with a persistent queue leaves it on disk; its successor (another
        timeout) sends it once the backend is back."""
        sink = h.Sink().start()
        sink.fail_next(1000, status=503, retry_after=None)
        port = h.free_port()
        storage = os.path.join(h.TMP, "queue-%d" % port)

        def config(timeout):
            return ("receivers:\n" + receiver(port) +
                    "exporters:\n  otlphttp:\n    endpoint: %s\n    timeout: %s\n"
                    "    sending_queue:\n      storage: %s\n"
                    "    retry_on_failure:\n      initial_interval: 200ms\n"
                    "      max_interval: 200ms\n      max_elapsed_time: 0\n" % (sink.url, timeout,
                                                                               storage) +
                    "service:\n  telemetry:\n    metrics:\n      level: none\n"
                    "  pipelines:\n    profiles:\n      receivers: [otlp]\n"
                    "      exporters: [otlphttp]\n")

        p = h.Profcol(config("5s"), wait_ports=[port], name="reload-queue").start()
        try:
            for n in range(5):
                self.assertEqual(h.post(port, request_for(100 + n)).status, 200)
            sink.wait_requests(3)  # the backend refused what was tried
            self.rewrite(p, config("6s"))
            text = self.hup_and_wait(p, "reload: complete")
            self.assertIn("reload: restarting exporters::otlphttp", text)
            self.assertIn("replaying", text)
            sink.fail_next(0)
            want = {"svc-%05d" % n for n in range(100, 105)}
            got = sink.wait_until(lambda reqs: want <= set(services(
                r.message for r in reqs if r.message and not r.refused)), timeout=20)
            self.assertEqual(want - set(services(r.message for r in got if not r.refused)), set())
        finally:
            p.stop()
            sink.stop()

    def test_reload_that_cannot_start_stops(self):
        """As the Collector: a config that validates but whose new receiver cannot listen ends
        profcol with exit 1 (the data path is never left half-started)."""
        port, busy = h.free_port(), h.free_port()
        blocker = __import__("socket").socket()
        blocker.bind(("127.0.0.1", busy))
        blocker.listen(1)
        base = ("exporters:\n  debug:\nservice:\n  telemetry:\n    metrics:\n      level: none\n"
                "  pipelines:\n    profiles:\n      receivers: [otlp]\n      exporters: [debug]\n")
        p = h.Profcol("receivers:\n" + receiver(port) + base, wait_ports=[port],
                      name="reload-busy").start()
        try:
            self.rewrite(p, "receivers:\n" + receiver(busy) + base)
            p.proc.send_signal(signal.SIGHUP)
            rc = p.proc.wait(20)
            self.assertEqual(rc, 1, p.stderr()[-2000:])
            self.assertIn("reload: cannot start the new config: receivers::otlp: listen "
                          "127.0.0.1:%d" % busy, p.stderr())
            for marker in h.SANITIZER_MARKERS:
                self.assertNotIn(marker, p.stderr())
        finally:
            p.kill()
            blocker.close()

    def test_reload_of_a_hostile_config(self):
        """A config nested 100k deep (issue 28) sent by SIGHUP: refused with the reason, the
        running pipeline keeps answering, and a good config reloads after it."""
        port = h.free_port()
        base = ("exporters:\n  debug:\nservice:\n  telemetry:\n    metrics:\n      level: none\n"
                "  pipelines:\n    profiles:\n      receivers: [otlp]\n      exporters: [debug]\n")
        good = "receivers:\n" + receiver(port) + base
        p = h.Profcol(good, wait_ports=[port], name="reload-deep").start()
        try:
            for deep in DeepConfigTest.HOSTILE:
                self.rewrite(p, good + deep)
                text = self.hup_and_wait(p, "the running one stays")
                self.assertIn("nested deeper than 64 levels", text)
                self.assertEqual(h.post(port, request_for(1)).status, 200)
            self.rewrite(p, good.replace("level: none", "level: basic"))
            self.hup_and_wait(p, "reload: complete")
            self.assertEqual(h.post(port, request_for(2)).status, 200)
        finally:
            p.stop()


class DeepConfigTest(unittest.TestCase):
    N = 100_000
    HOSTILE = ("extensions: " + "[" * N + "]" * N + "\n",
               "extensions: " + "{a: " * (N // 2) + "1" + "}" * (N // 2) + "\n",
               "extensions:\n  " + "- " * N + "x\n")

    def cpu_of_validate(self, path):
        before = os.times()
        r = subprocess.run([h.BIN, "validate", "--config", path], capture_output=True,
                           text=True, timeout=600, stdin=subprocess.DEVNULL)
        after = os.times()
        return r, (after.children_user - before.children_user +
                   after.children_system - before.children_system)

    def test_deep_config_refused_at_the_cost_of_a_flat_one(self):
        d = os.path.join(h.TMP, "deep-config")
        os.makedirs(d, exist_ok=True)
        for i, deep in enumerate(self.HOSTILE):
            flat = "extensions: [" + ", ".join(["x"] * ((len(deep) - 14) // 3)) + "]\n"
            paths = []
            for name, text in (("deep-%d.yaml" % i, deep), ("flat-%d.yaml" % i, flat)):
                paths.append(os.path.join(d, name))
                with open(paths[-1], "w") as f:
                    f.write(text)
            r, deep_cpu = self.cpu_of_validate(paths[0])
            self.assertEqual(r.returncode, 1)
            self.assertIn("nested deeper than 64 levels", r.stderr)
            r, flat_cpu = self.cpu_of_validate(paths[1])
            self.assertIn("extensions", r.stderr)  # refused for its content, not its shape
            # both are mostly process start-up; 0.05 s keeps the ratio off timer granularity
            self.assertLess(max(deep_cpu, 0.05) / max(flat_cpu, 0.05), 3,
                            "%d: deep %.2fs CPU, flat %.2fs" % (i, deep_cpu, flat_cpu))


if __name__ == "__main__":
    unittest.main()
