#!/usr/bin/python3
"""Recording OTLP/HTTP sink for profcol's offline demo (tools/demo.sh).

Accepts POST /v1development/profiles (OTLP JSON or protobuf, optionally gzip), writes each body
to DIR/NNNNNN.json (or .pb) and answers 200 with an empty ExportProfilesServiceResponse.
Listens on 127.0.0.1 on a free port and writes that port to --port-file once it is listening.
Stops on SIGTERM or SIGINT. Python 3 standard library only.
"""
import argparse
import gzip
import http.server
import os
import signal
import sys
import threading


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--dir', required=True, help='where to write the received bodies')
    ap.add_argument('--port-file', required=True, help='written with the port once listening')
    ap.add_argument('--host', default='127.0.0.1')
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    lock = threading.Lock()
    counter = [0]

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = 'HTTP/1.1'

        def reply(self, status, ctype, body):
            self.send_response(status)
            self.send_header('Content-Type', ctype)
            self.send_header('Content-Length', str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            length = int(self.headers.get('Content-Length') or 0)
            body = self.rfile.read(length)
            if self.path.split('?')[0] != '/v1development/profiles':
                self.reply(404, 'text/plain', b'not found\n')
                return
            if 'gzip' in (self.headers.get('Content-Encoding') or ''):
                body = gzip.decompress(body)
            is_json = 'json' in (self.headers.get('Content-Type') or '')
            with lock:
                counter[0] += 1
                n = counter[0]
            name = os.path.join(args.dir, '%06d.%s' % (n, 'json' if is_json else 'pb'))
            with open(name + '.tmp', 'wb') as f:
                f.write(body)
            os.rename(name + '.tmp', name)  # readers never see a partial file
            if is_json:
                self.reply(200, 'application/json', b'{}')
            else:
                self.reply(200, 'application/x-protobuf', b'')

        def log_message(self, fmt, *a):
            pass

    srv = http.server.ThreadingHTTPServer((args.host, 0), Handler)
    srv.daemon_threads = True

    def stop(signum, frame):
        threading.Thread(target=srv.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    with open(args.port_file + '.tmp', 'w') as f:
        f.write('%d\n' % srv.server_address[1])
    os.rename(args.port_file + '.tmp', args.port_file)
    srv.serve_forever()
    print('recorder: %d request(s) written to %s' % (counter[0], args.dir), file=sys.stderr)


if __name__ == '__main__':
    main()
