#!/usr/bin/python3
"""bench/scrape.py: the pyroscope_scrape receiver's cost per target.

One asyncio test server (this process) listens on N loopback ports and answers every GET at once
with a Go profile from tests/data (go-cpu.pb.gz for /debug/pprof/profile, go-heap.pb.gz for
everything else: a memory scrape is decoded and subtracted in full, and its delta, all zero, is
not sent, as for a service whose allocations are done); profcol scrapes the N targets (process_cpu, memory, goroutine)
every --interval into otlphttp -> bench/sink. Measured over --seconds after a warm-up interval:
profcol's CPU time (utime + stime of /proc/PID/stat) and RSS (VmRSS, VmHWM), reported per target
and per minute, with profcol's idle RSS (no target yet) beside them, a table on stderr and one
JSON line on stdout.

    bench/scrape.py [--targets 500] [--interval 15s] [--seconds 60] [--build build]
"""
import argparse
import asyncio
import gzip
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TICK = os.sysconf("SC_CLK_TCK")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def mem_kib(pid, key):
    with open("/proc/%d/status" % pid) as f:
        m = re.search(r"^%s:\s+(\d+) kB" % key, f.read(), re.M)
    return int(m.group(1))


class Server:
    def __init__(self, n):
        self.n = n
        with open(os.path.join(SRC, "tests", "data", "go-cpu.pb.gz"), "rb") as f:
            self.cpu = f.read()
        with open(os.path.join(SRC, "tests", "data", "go-heap.pb.gz"), "rb") as f:
            self.heap = f.read()
        self.requests = 0

    async def handle(self, reader, writer):
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                path = head.split(b" ", 2)[1]
                body = self.cpu if path.startswith(b"/debug/pprof/profile") else self.heap
                self.requests += 1
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                             b"Content-Length: %d\r\n\r\n" % len(body) + body)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def start(self):
        self.ports, self.servers = [], []
        for _ in range(self.n):
            srv = await asyncio.start_server(self.handle, "127.0.0.1", 0)
            self.servers.append(srv)
            self.ports.append(srv.sockets[0].getsockname()[1])


def config(ports, interval, sink_port, metrics_port):
    targets = "".join("      - targets: [127.0.0.1:%d]\n        labels: {service_name: svc-%d}\n"
                      % (p, i) for i, p in enumerate(ports))
    return ("receivers:\n  pyroscope_scrape:\n    scrape_interval: %s\n"
            "    max_concurrent_scrapes: 64\n"
            "    profiling_config:\n      mutex: {enabled: false}\n      block: {enabled: false}\n"
            "    static_configs:\n%s"
            "exporters:\n  otlphttp:\n    endpoint: http://127.0.0.1:%d\n"
            "service:\n  telemetry:\n    metrics:\n      address: 127.0.0.1:%d\n"
            "  pipelines:\n    profiles:\n      receivers: [pyroscope_scrape]\n"
            "      exporters: [otlphttp]\n" % (interval, targets, sink_port, metrics_port))


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--targets", type=int, default=500)
    ap.add_argument("--interval", default="15s")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    a = ap.parse_args()
    # connections cut at the end are no bench result
    asyncio.get_running_loop().set_exception_handler(lambda loop, ctx: None)
    interval_s = float(a.interval.rstrip("s"))
    srv = Server(a.targets)
    await srv.start()
    tmp = tempfile.mkdtemp(prefix="bench-scrape-")
    sink_port, metrics_port = free_port(), free_port()
    sink = subprocess.Popen([os.path.join(a.build, "bench", "sink"), "--port", str(sink_port),
                             "--max-seconds", str(int(a.seconds + 3 * interval_s + 60))],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cfg = os.path.join(tmp, "scrape.yaml")
    idle = os.path.join(tmp, "idle.yaml")
    with open(cfg, "w") as f:
        f.write(config(srv.ports, a.interval, sink_port, metrics_port))
    with open(idle, "w") as f:
        f.write(config([], a.interval, sink_port, metrics_port).replace(
            "    static_configs:\n", "    static_configs: []\n"))
    binary = os.path.join(a.build, "profcol")
    # the idle floor: the same profcol with no target
    p = subprocess.Popen([binary, "--config", idle], stderr=subprocess.DEVNULL)
    await asyncio.sleep(2)
    idle_rss = mem_kib(p.pid, "VmRSS")
    p.send_signal(signal.SIGTERM)
    p.wait(10)
    p = subprocess.Popen([binary, "--config", cfg], stderr=open(os.path.join(tmp, "log"), "w"))
    try:
        await asyncio.sleep(interval_s + 2)  # every target scraped once: the series exist
        cpu0, req0, t0 = cpu_seconds(p.pid), srv.requests, time.monotonic()
        await asyncio.sleep(a.seconds)
        cpu1, req1, t1 = cpu_seconds(p.pid), srv.requests, time.monotonic()
        rss, hwm = mem_kib(p.pid, "VmRSS"), mem_kib(p.pid, "VmHWM")
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(20)
        sink.terminate()
        sink.wait(5)
        for s in srv.servers:  # profcol's connections are gone: the handlers have ended
            s.close()
            await s.wait_closed()
    minutes = (t1 - t0) / 60
    out = {
        "scenario": "scrape", "targets": a.targets, "interval": a.interval,
        "seconds": round(t1 - t0, 1), "scrapes": req1 - req0,
        "cpu_s": round(cpu1 - cpu0, 3),
        "cpu_ms_per_target_minute": round((cpu1 - cpu0) * 1000 / a.targets / minutes, 3),
        "idle_rss_kib": idle_rss, "rss_kib": rss, "hwm_kib": hwm,
        "rss_kib_per_target": round((rss - idle_rss) / a.targets, 1),
    }
    sys.stderr.write("targets %d every %s for %.0f s: %d scrapes, CPU %.2f s = %.2f ms per target "
                     "per minute; RSS %d KiB (idle %d KiB, %.1f KiB per target), peak %d KiB\n"
                     % (a.targets, a.interval, t1 - t0, out["scrapes"], out["cpu_s"],
                        out["cpu_ms_per_target_minute"], rss, idle_rss,
                        out["rss_kib_per_target"], hwm))
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main())
