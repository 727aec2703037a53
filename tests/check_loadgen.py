#!/usr/bin/env python3
"""bench/loadgen sends the request target its --url names, once: a recording http.server (the
real peer) sees every request line, and each must equal the path and query that Python's
urllib.parse splits from the same URL. A query used to be appended twice (`?a=b?a=b`).

    tests/check_loadgen.py BUILD/bench/loadgen SRC_ROOT"""
import http.server
import json
import os
import subprocess
import sys
import threading
import urllib.parse

loadgen, src = sys.argv[1], sys.argv[2]
payload = os.path.join(src, "tests", "data", "go-cpu.pb.gz")
lines, lock = [], threading.Lock()


class Recorder(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as loadgen's client expects

    def log_message(self, fmt, *args):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with lock:
            lines.append((self.command, self.path, len(body)))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
threading.Thread(target=server.serve_forever, daemon=True).start()
base = "http://127.0.0.1:%d" % server.server_address[1]

cases = ["/ingest?name=app%7Benv%3Ddev%7D&format=pprof",  # the bench's /ingest form
         "/v1development/profiles",
         "",                                               # no path: "/"
         "/a/b/?q=x/&r=",                                  # slashes kept as given
         "/ingest?name=x#fragment"]                        # a fragment is never sent
failures = 0
for case in cases:
    url = base + case
    parts = urllib.parse.urlsplit(url)
    want = (parts.path or "/") + ("?" + parts.query if parts.query else "")
    with lock:
        lines.clear()
    r = subprocess.run([loadgen, "--url", url, "--payload", payload, "--requests", "3",
                        "--connections", "1", "--quiet"], capture_output=True, text=True,
                       timeout=60)
    with lock:
        got = list(lines)
    report = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else {}
    size = os.path.getsize(payload)
    ok = (r.returncode == 0 and report.get("ok") == 3 and
          got == [("POST", want, size)] * 3)
    if not ok:
        failures += 1
        print("FAIL %s: want 3 x POST %s (%d bytes), server saw %r; loadgen exit %d %s%s"
              % (url, want, size, got, r.returncode, r.stdout[-300:], r.stderr[-300:]))
    else:
        print("ok   %s -> POST %s" % (url, want))
server.shutdown()
print("%d passed, %d failed" % (len(cases) - failures, failures))
sys.exit(1 if failures else 0)
