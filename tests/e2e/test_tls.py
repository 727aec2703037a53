#!/usr/bin/env python3
"""TLS and auth, end to end with the real binary on 127.0.0.1 and throwaway certificates made by
the `openssl` command: a TLS pyroscope receiver fed by a Python ssl client, the otlphttp exporter
sending to an HTTPS sink, mutual TLS, an untrusted server refused with a clear log line,
certificate and token reload on SIGHUP, bearertokenauth and basicauth on both sides, and the
config errors `profcol validate` reports for bad certificates and authenticators."""
import base64
import hashlib
import http.client
import os
import signal
import ssl
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
import tls_support as t  # noqa: E402

h.ensure_debian_python()

CERTS = t.Certs()
SRV_CRT, SRV_KEY = CERTS.issue("server", 1001, cn="localhost")
SRV2_CRT, SRV2_KEY = CERTS.issue("server2", 1002, cn="localhost")
CLI_CRT, CLI_KEY = CERTS.issue("client", 2001, client=True)
BAD_CRT, BAD_KEY = CERTS.issue("untrusted", 3001, ca="other-ca", cn="localhost")

FOLDED = b"main;checkout;price 7\nmain;gc 3\n"
INGEST = "/ingest?name=shop&format=folded&from=1700000000&until=1700000010"


def pipeline(receiver_yaml, exporter_yaml, extensions_yaml="", service_extensions=()):
    s = "receivers:\n  pyroscope:\n" + receiver_yaml
    s += "exporters:\n  otlphttp:\n" + exporter_yaml
    if extensions_yaml:
        s += "extensions:\n" + extensions_yaml
    s += "service:\n  shutdown_timeout: 2s\n"  # a refused backend must not hold up the stop
    if service_extensions:
        s += "  extensions: [%s]\n" % ", ".join(service_extensions)
    s += ("  pipelines:\n    profiles:\n      receivers: [pyroscope]\n"
          "      exporters: [otlphttp]\n")
    return s


def receiver(port, tls=None, auth=None):
    s = "    endpoint: 127.0.0.1:%d\n" % port
    if tls:
        s += "    tls:\n" + "".join("      %s: %s\n" % kv for kv in tls.items())
    if auth:
        s += "    auth:\n      authenticator: %s\n" % auth
    return s


def exporter(url, tls=None, auth=None):
    s = ("    endpoint: %s\n    timeout: 3s\n    retry_on_failure:\n      initial_interval: 100ms\n"
         "      max_interval: 300ms\n" % url)
    if tls:
        s += "    tls:\n" + "".join("      %s: %s\n" % kv for kv in tls.items())
    if auth:
        s += "    auth:\n      authenticator: %s\n" % auth
    return s


def samples(sink_or_reqs):
    """Samples the sink recorded (pass the list a wait_until predicate gets: it holds the lock)."""
    reqs = sink_or_reqs if isinstance(sink_or_reqs, list) else sink_or_reqs.snapshot()
    return h.count_samples([r.message for r in reqs if r.message is not None])


class TLSTest(h.Started, unittest.TestCase):
    def stop(self, p):
        p.stop()
        self.procs.remove(p)

    def deliver_folded(self, port, sink):
        """FOLDED (two samples) posted to profcol's port arrives at sink, exactly."""
        self.assertEqual(h.post(port, FOLDED, content_type="text/plain", path=INGEST).status, 200)
        sink.wait_until(lambda reqs: samples(reqs) >= 2, timeout=10)
        self.assertEqual(samples(sink), 2)

    def abandon(self, p):
        """SIGKILL: a clean stop while a batch waits to be retried hits the shutdown deadline,
        which is the sender's business (and tested in test_reliability), not TLS's."""
        p.kill()
        self.procs.remove(p)

    def test_tls_receiver_to_https_exporter(self):
        """Python ssl client -> TLS pyroscope receiver -> otlphttp (https, ca_file) -> HTTPS sink."""
        port = h.free_port()
        sink = self.sink(t.TLSSink(SRV_CRT, SRV_KEY))
        cfg = pipeline(receiver(port, {"cert_file": SRV_CRT, "key_file": SRV_KEY}),
                       exporter(sink.url, {"ca_file": CERTS.ca}))
        p = self.start(cfg, port)
        r = t.https_request(port, INGEST, FOLDED, t.client_context(CERTS.ca))
        self.assertEqual(r.status, 200, r)
        got = sink.wait_until(lambda reqs: samples(reqs) >= 2, timeout=10)
        self.assertEqual(samples(sink), 2, got)
        self.assertEqual(sink.handshake_errors, [])
        # "localhost" is a name in the certificate as well
        r = t.https_request(port, INGEST, FOLDED, t.client_context(CERTS.ca), host="localhost")
        self.assertEqual(r.status, 200, r)
        # plain HTTP to the TLS port gets no HTTP answer
        with self.assertRaises((http.client.HTTPException, ConnectionError, OSError)):
            h.post(port, FOLDED, content_type="text/plain", path=INGEST, timeout=5)
        self.assertIn("https://127.0.0.1:%d" % port, p.stderr())
        self.stop(p)

    def test_mutual_tls_receiver(self):
        port = h.free_port()
        sink = self.sink(h.Sink())
        cfg = pipeline(receiver(port, {"cert_file": SRV_CRT, "key_file": SRV_KEY,
                                       "client_ca_file": CERTS.ca, "min_version": '"1.2"'}),
                       exporter(sink.url))
        p = self.start(cfg, port)
        with self.assertRaises((ssl.SSLError, ConnectionError, http.client.HTTPException)):
            t.https_request(port, INGEST, FOLDED, t.client_context(CERTS.ca))
        text = p.wait_stderr(lambda s: "TLS handshake with 127.0.0.1:" in s)
        self.assertRegex(text, r"TLS handshake with 127\.0\.0\.1:\d+ failed: .*certificate")
        r = t.https_request(port, INGEST, FOLDED, t.client_context(CERTS.ca, CLI_CRT, CLI_KEY))
        self.assertEqual(r.status, 200, r)
        sink.wait_until(lambda reqs: samples(reqs) >= 2, timeout=10)
        self.assertEqual(samples(sink), 2)
        self.stop(p)

    def test_mutual_tls_exporter(self):
        port = h.free_port()
        sink = self.sink(t.TLSSink(SRV_CRT, SRV_KEY, client_ca=CERTS.ca))
        cfg = pipeline(receiver(port),
                       exporter(sink.url, {"ca_file": CERTS.ca, "cert_file": CLI_CRT,
                                           "key_file": CLI_KEY}))
        p = self.start(cfg, port)
        r = h.post(port, FOLDED, content_type="text/plain", path=INGEST)
        self.assertEqual(r.status, 200, r)
        sink.wait_until(lambda reqs: samples(reqs) >= 2, timeout=10)
        self.assertEqual(samples(sink), 2)
        self.stop(p)

    def test_untrusted_server_refused(self):
        """The system trust store does not know the test CA: a clear log line, nothing sent; the
        batch stays queued and is retried (a connection error is retryable)."""
        port = h.free_port()
        sink = self.sink(t.TLSSink(SRV_CRT, SRV_KEY))
        cfg = pipeline(receiver(port), exporter(sink.url))
        p = self.start(cfg, port)
        r = h.post(port, FOLDED, content_type="text/plain", path=INGEST)
        self.assertEqual(r.status, 200, r)  # queued
        want = ("TLS handshake with 127.0.0.1:%d failed: certificate verify failed "
                "(unable to get local issuer certificate)" % sink.port)
        text = p.wait_stderr(lambda s: s.count(want) >= 2, timeout=10)
        self.assertGreaterEqual(text.count(want), 2, text[-3000:])  # retried
        self.assertEqual([r for r in sink.snapshot() if r.message is not None], [])
        self.abandon(p)

        # a certificate for the right name from another CA: refused even with our ca_file
        sink2 = self.sink(t.TLSSink(BAD_CRT, BAD_KEY))
        cfg = pipeline(receiver(port), exporter(sink2.url, {"ca_file": CERTS.ca}))
        p = self.start(cfg, port)
        h.post(port, FOLDED, content_type="text/plain", path=INGEST)
        want = "TLS handshake with 127.0.0.1:%d failed: certificate verify failed" % sink2.port
        self.assertIn(want, p.wait_stderr(lambda s: want in s))
        self.abandon(p)

        # insecure_skip_verify encrypts without verifying: delivered
        cfg = pipeline(receiver(port), exporter(sink2.url, {"insecure_skip_verify": "true"}))
        p = self.start(cfg, port)
        self.deliver_folded(port, sink2)
        self.stop(p)

    def test_pyroscope_exporter_https_with_token(self):
        """The pyroscope exporter over https (ca_file) with a bearer token."""
        port = h.free_port()
        sink = self.sink(t.TLSSink(SRV_CRT, SRV_KEY))
        cfg = ("receivers:\n  pyroscope:\n    endpoint: 127.0.0.1:%d\n"
               "exporters:\n  pyroscope:\n    endpoint: %s\n    tls:\n      ca_file: %s\n"
               "    auth:\n      authenticator: bearertokenauth\n"
               "extensions:\n  bearertokenauth:\n    token: pyro-token\n"
               "service:\n  shutdown_timeout: 2s\n  extensions: [bearertokenauth]\n"
               "  pipelines:\n    profiles:\n      receivers: [pyroscope]\n"
               "      exporters: [pyroscope]\n" % (port, sink.url, CERTS.ca))
        p = self.start(cfg, port)
        self.assertEqual(h.post(port, FOLDED, content_type="text/plain", path=INGEST).status, 200)
        reqs = sink.wait_requests(1, timeout=10)
        self.assertTrue(reqs, p.stderr()[-2000:])
        self.assertEqual(reqs[0].path, "/push.v1.PusherService/Push")
        self.assertEqual(reqs[0].headers.get("authorization"), "Bearer pyro-token")
        self.assertIn("sending to https://127.0.0.1:%d" % sink.port, p.stderr())
        self.stop(p)

    def test_insecure_means_plain_text(self):
        port = h.free_port()
        sink = self.sink(h.Sink())
        cfg = pipeline(receiver(port),
                       exporter("https://127.0.0.1:%d" % sink.port, {"insecure": "true"}))
        p = self.start(cfg, port)
        self.deliver_folded(port, sink)
        self.stop(p)

    def test_sighup_reloads_certificate(self):
        live_crt, live_key = CERTS.path("live.crt"), CERTS.path("live.key")
        for src, dst in ((SRV_CRT, live_crt), (SRV_KEY, live_key)):
            with open(src, "rb") as f, open(dst, "wb") as g:
                g.write(f.read())
        port = h.free_port()
        sink = self.sink(h.Sink())
        cfg = pipeline(receiver(port, {"cert_file": live_crt, "key_file": live_key}),
                       exporter(sink.url))
        p = self.start(cfg, port)
        ctx = t.client_context(CERTS.ca)
        self.assertEqual(t.served_serial(port, ctx), 1001)
        # a broken file: the reload fails, the old certificate stays
        t.reload_broken_keeps_old(self, p, live_crt)
        self.assertEqual(t.served_serial(port, ctx), 1001)
        for src, dst in ((SRV2_CRT, live_crt), (SRV2_KEY, live_key)):
            with open(src, "rb") as f, open(dst, "wb") as g:
                g.write(f.read())
        p.proc.send_signal(signal.SIGHUP)
        p.wait_stderr(lambda s: "TLS certificates reloaded" in s)
        self.assertEqual(t.served_serial(port, ctx), 1002)
        self.assertEqual(t.https_request(port, INGEST, FOLDED, ctx).status, 200)
        self.stop(p)


class AuthTest(h.Started, unittest.TestCase):
    def test_bearer_token_both_sides(self):
        """Receiver: 401 without or with a wrong token, 200 with it; the exporter sends its own
        token. The receiver's token comes from a file re-read on SIGHUP."""
        token_file = os.path.join(h.TMP, "token")
        with open(token_file, "w") as f:
            f.write("in-token-1\n")
        port = h.free_port()
        sink = h.Sink().start()
        self.sinks.append(sink)
        ext = ("  bearertokenauth/in:\n    filename: %s\n"
               "  bearertokenauth/out:\n    token: out-token\n" % token_file)
        cfg = pipeline(receiver(port, auth="bearertokenauth/in"),
                       exporter(sink.url, auth="bearertokenauth/out"), ext,
                       ["bearertokenauth/in", "bearertokenauth/out"])
        p = self.start(cfg, port)
        for hdrs in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "in-token-1"},
                     {"Authorization": "Bearer in-token-12"}):
            r = h.post(port, FOLDED, content_type="text/plain", path=INGEST, headers=hdrs)
            self.assertEqual(r.status, 401, (hdrs, r))
            self.assertEqual(r.headers.get("www-authenticate"), 'Bearer realm="profcol"')
        r = h.post(port, "{}".encode(), content_type="application/json",
                   path="/push.v1.PusherService/Push")
        self.assertEqual(r.status, 401)
        self.assertIn(b"unauthenticated", r.body)
        self.assertEqual(sink.snapshot(), [])
        good = {"Authorization": "Bearer in-token-1"}
        r = h.post(port, FOLDED, content_type="text/plain", path=INGEST, headers=good)
        self.assertEqual(r.status, 200, r)
        reqs = sink.wait_until(lambda reqs: samples(reqs) >= 2, timeout=10)
        self.assertEqual(reqs[0].headers.get("authorization"), "Bearer out-token")

        with open(token_file, "w") as f:
            f.write("in-token-2\n")
        p.proc.send_signal(signal.SIGHUP)
        p.wait_stderr(lambda s: "token reloaded" in s)
        r = h.post(port, FOLDED, content_type="text/plain", path=INGEST, headers=good)
        self.assertEqual(r.status, 401)
        r = h.post(port, FOLDED, content_type="text/plain", path=INGEST,
                   headers={"Authorization": "Bearer in-token-2"})
        self.assertEqual(r.status, 200)
        p.stop()
        self.procs.remove(p)

    def test_basicauth_htpasswd_and_client_auth(self):
        port = h.free_port()
        sink = h.Sink().start()
        self.sinks.append(sink)
        sha = base64.b64encode(hashlib.sha1(b"alice-pw").digest()).decode()
        htpasswd = os.path.join(h.TMP, "htpasswd")
        with open(htpasswd, "w") as f:
            f.write("# users\nalice:{SHA}%s\ncarol:carol-plain\n" % sha)
        ext = ("  basicauth/in:\n    htpasswd:\n      file: %s\n      inline: |\n"
               "        bob:{SHA}%s\n"
               "  basicauth/out:\n    client_auth:\n      username: exporter\n"
               "      password: ex-pw\n" % (htpasswd,
                                            base64.b64encode(hashlib.sha1(b"bob-pw").digest())
                                            .decode()))
        cfg = pipeline(receiver(port, auth="basicauth/in"),
                       exporter(sink.url, auth="basicauth/out"), ext,
                       ["basicauth/in", "basicauth/out"])
        p = self.start(cfg, port)

        def basic(user, pw):
            return {"Authorization": "Basic " + base64.b64encode(
                ("%s:%s" % (user, pw)).encode()).decode()}

        for hdrs in ({}, basic("alice", "wrong"), basic("nobody", "alice-pw"),
                     {"Authorization": "Basic !!!"}, {"Authorization": "Bearer alice-pw"}):
            r = h.post(port, FOLDED, content_type="text/plain", path=INGEST, headers=hdrs)
            self.assertEqual(r.status, 401, (hdrs, r))
            self.assertIn("Basic realm=", r.headers.get("www-authenticate", ""))
        for user, pw in (("alice", "alice-pw"), ("bob", "bob-pw"), ("carol", "carol-plain")):
            r = h.post(port, FOLDED, content_type="text/plain", path=INGEST,
                       headers=basic(user, pw))
            self.assertEqual(r.status, 200, (user, r))
        reqs = sink.wait_until(lambda reqs: samples(reqs) >= 6, timeout=10)
        want = "Basic " + base64.b64encode(b"exporter:ex-pw").decode()
        self.assertTrue(reqs and all(r.headers.get("authorization") == want for r in reqs))
        p.stop()
        self.procs.remove(p)


class ValidateTest(unittest.TestCase):
    def validate(self, text):
        path = h.write_config(text, "tls-validate")
        r = h.run_profcol(["validate", "--config", path])
        return r.returncode, r.stderr + r.stdout

    def assert_error(self, text, *needles):
        rc, out = self.validate(text)
        self.assertEqual(rc, 1, out)
        for n in needles:
            self.assertIn(n, out)

    def test_good(self):
        ext = "  bearertokenauth:\n    token: x\n"
        cfg = pipeline(receiver(1, {"cert_file": SRV_CRT, "key_file": SRV_KEY,
                                    "client_ca_file": CERTS.ca}, auth="bearertokenauth"),
                       exporter("https://127.0.0.1:2", {"ca_file": CERTS.ca},
                                auth="bearertokenauth"),
                       ext, ["bearertokenauth"])
        rc, out = self.validate(cfg)
        self.assertEqual(rc, 0, out)

    def test_certificate_errors(self):
        ex = exporter("http://127.0.0.1:2")
        self.assert_error(pipeline(receiver(1, {"cert_file": "/nonexistent.crt",
                                                "key_file": SRV_KEY}), ex),
                          "receivers::pyroscope::tls::cert_file", "No such file or directory")
        self.assert_error(pipeline(receiver(1, {"cert_file": SRV_CRT, "key_file": CLI_KEY}), ex),
                          "receivers::pyroscope::tls::key_file", "does not match")
        self.assert_error(pipeline(receiver(1, {"cert_file": SRV_CRT}), ex),
                          "receivers::pyroscope::tls::key_file", "required")
        self.assert_error(pipeline(receiver(1, {"cert_file": SRV_CRT, "key_file": SRV_KEY,
                                                "min_version": '"1.1"'}), ex),
                          "receivers::pyroscope::tls::min_version", "1.2, 1.3")
        self.assert_error(pipeline(receiver(1), exporter("https://127.0.0.1:2",
                                                         {"ca_file": SRV_KEY})),
                          "exporters::otlphttp::tls::ca_file")
        self.assert_error(pipeline(receiver(1), exporter("https://127.0.0.1:2",
                                                         {"ca_fil": CERTS.ca})),
                          "exporters::otlphttp::tls::ca_fil", 'did you mean "ca_file"')

    def test_authenticator_errors(self):
        ex = exporter("http://127.0.0.1:2")
        ext = "  bearertokenauth:\n    token: x\n  health_check:\n    endpoint: 127.0.0.1:3\n"
        self.assert_error(pipeline(receiver(1, auth="bearertokenauth"), ex, ext),
                          "receivers::pyroscope::auth::authenticator", "not enabled",
                          "service::extensions")
        self.assert_error(pipeline(receiver(1, auth="nope"), ex, ext, ["bearertokenauth"]),
                          "receivers::pyroscope::auth::authenticator", "not defined")
        self.assert_error(pipeline(receiver(1, auth="health_check"), ex, ext,
                                   ["bearertokenauth", "health_check"]),
                          "receivers::pyroscope::auth::authenticator", "not an authenticator")
        basic_out = "  basicauth:\n    client_auth:\n      username: u\n      password: p\n"
        self.assert_error(pipeline(receiver(1, auth="basicauth"), ex, basic_out, ["basicauth"]),
                          "receivers::pyroscope::auth::authenticator", "no htpasswd")
        basic_in = "  basicauth:\n    htpasswd:\n      inline: \"u:p\"\n"
        self.assert_error(pipeline(receiver(1), exporter("http://127.0.0.1:2", auth="basicauth"),
                                   basic_in, ["basicauth"]),
                          "exporters::otlphttp::auth::authenticator", "no client_auth")

    def test_auth_extension_config_errors(self):
        ex = exporter("http://127.0.0.1:2")
        cases = [
            ("  basicauth:\n    htpasswd:\n      inline: \"bob:$apr1$abc$def\"\n",
             "extensions::basicauth::htpasswd::inline", "$apr1$ (Apache MD5) hashes are not "
             "supported"),
            ("  basicauth:\n    htpasswd:\n      inline: \"bob:$2y$05$abcdefghijklmnopqrstuv\"\n",
             "extensions::basicauth::htpasswd::inline", "bcrypt"),
            ("  basicauth:\n    htpasswd:\n      inline: \"bob:{SHA}short\"\n",
             "extensions::basicauth::htpasswd::inline", "SHA-1"),
            ("  basicauth:\n    htpasswd:\n      file: /nonexistent/htpasswd\n",
             "extensions::basicauth::htpasswd::file", "No such file"),
            ("  basicauth: {}\n", "extensions::basicauth", "client_auth"),
            ("  bearertokenauth: {}\n", "extensions::bearertokenauth", "exactly one"),
            ("  bearertokenauth:\n    filename: /nonexistent/token\n",
             "extensions::bearertokenauth::filename", "No such file"),
        ]
        for ext, path, msg in cases:
            with self.subTest(path=path, msg=msg):
                self.assert_error(pipeline(receiver(1), ex, ext), path, msg)


if __name__ == "__main__":
    unittest.main(verbosity=2)
