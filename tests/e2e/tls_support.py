"""Helpers for the TLS and auth end-to-end tests.

Builds on harness.py and adds:
  * Certs -- throwaway certificates made with the `openssl` command at test time: a CA, a second
    (untrusted) CA, server certificates for 127.0.0.1/localhost (subjectAltName) with chosen
    serial numbers, and a client certificate;
  * TLSSink -- harness.Sink (the recording OTLP/HTTP endpoint) behind TLS, optionally requiring
    client certificates;
  * client_context(), https_request(), served_serial() -- a Python ssl client.

Debian's /usr/bin/python3 and the stdlib only (plus what harness.py needs).
"""

import http.client
import os
import signal
import ssl
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402  (re-execs under /usr/bin/python3 if needed)

OPENSSL = "openssl"
SERVER_EXT = ("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
              "extendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n")
CLIENT_EXT = ("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
              "extendedKeyUsage=clientAuth\n")


def _openssl(*args):
    r = subprocess.run([OPENSSL] + list(args), capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError("openssl %s failed:\n%s" % (" ".join(args), r.stderr))


class Certs:
    """Certificates in their own directory under the harness temp dir."""

    def __init__(self):
        self.dir = os.path.join(h.TMP, "certs")
        os.makedirs(self.dir, exist_ok=True)
        self.ca = self._ca("ca", "profcol test CA")
        self.other_ca = self._ca("other-ca", "untrusted test CA")

    def path(self, name):
        return os.path.join(self.dir, name)

    def _ca(self, name, cn):
        _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                 "-keyout", self.path(name + ".key"), "-out", self.path(name + ".crt"),
                 "-days", "2", "-subj", "/CN=" + cn,
                 "-addext", "basicConstraints=critical,CA:TRUE",
                 "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        return self.path(name + ".crt")

    def issue(self, name, serial, client=False, ca="ca", cn=None):
        """name.crt / name.key signed by `ca`; returns (cert, key)."""
        key, csr, crt = (self.path(name + s) for s in (".key", ".csr", ".crt"))
        ext = self.path(name + ".ext")
        with open(ext, "w") as f:
            f.write(CLIENT_EXT if client else SERVER_EXT)
        _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                 "-keyout", key, "-out", csr, "-subj", "/CN=" + (cn or name))
        _openssl("x509", "-req", "-in", csr, "-CA", self.path(ca + ".crt"),
                 "-CAkey", self.path(ca + ".key"), "-set_serial", str(serial), "-days", "2",
                 "-out", crt, "-extfile", ext)
        return crt, key


class TLSSink(h.Sink):
    """The recording OTLP/HTTP sink over HTTPS. client_ca: require client certificates."""
    scheme = "https"

    def __init__(self, cert, key, client_ca=None, port=None):
        super().__init__(port)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        if client_ca:
            ctx.load_verify_locations(client_ca)
            ctx.verify_mode = ssl.CERT_REQUIRED
        # the handshake runs in the handler thread, so a stuck client cannot block accept
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True,
                                             do_handshake_on_connect=False)
        self.handshake_errors = []
        sink = self

        def handle_error(request, client_address):  # refused handshakes are expected here
            sink.handshake_errors.append(str(sys.exc_info()[1]))

        self.server.handle_error = handle_error


def client_context(cafile=None, cert=None, key=None):
    ctx = ssl.create_default_context(cafile=cafile)
    if cert:
        ctx.load_cert_chain(cert, key)
    return ctx


def https_request(port, path, body=b"", ctx=None, headers=None, method="POST", timeout=10.0,
                  host="127.0.0.1"):
    """One HTTPS request; returns harness.Response. SSL and connection errors propagate."""
    conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=ctx)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        data = r.read()
        return h.Response(r.status, {k.lower(): v for k, v in r.getheaders()}, data)
    finally:
        conn.close()


def reload_broken_keeps_old(test, p, live_crt):
    """Replace live_crt with garbage and SIGHUP p: the reload fails and p says it keeps the
    previous certificates (the caller checks which one it serves)."""
    with open(live_crt, "w") as f:
        f.write("not a certificate\n")
    p.proc.send_signal(signal.SIGHUP)
    text = p.wait_stderr(lambda s: "TLS reload failed" in s)
    test.assertIn("keeping the previous certificates", text)


def served_serial(port, ctx):
    """The serial number (int) of the certificate a TLS server on 127.0.0.1:port presents."""
    import socket
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            return int(s.getpeercert()["serialNumber"], 16)
