#!/usr/bin/env python3
"""bench/run.sh symbolize: the symbolizer processor's throughput (issue 23), three phases in one
run on the same payloads, sink and load generator:

1. baseline: otlp -> otlphttp -> sink, no symbolizer, loadgen flat out for --seconds;
2. cold: a fresh profcol with otlp -> symbolizer (debug_dirs: a local build-id directory) ->
   otlphttp -> sink; every payload sent once on one connection (the first pass: every address a
   cache miss, the debug file opened and parsed on first use);
3. warm: the same profcol, loadgen flat out for --seconds (the addresses in the cache).

The binary: profcol's own src/base, src/pdata and src/formats compiled here as one shared library
with gcc -O2 -g (a real binary with a few hundred functions and inlined code), its debug info
split into BUILD/bench/symbolize/debug/.build-id. The payloads: eBPF-shaped OTLP requests
(`process.executable.build_id.gnu`, `profile.frame.type: native`, ELF addresses, no lines), 8
files of 2,000 samples with stacks 8 to 24 deep over the library's instruction addresses, each
file a different slice of them, gzipped, with a manifest for loadgen's samples/s.
Prints a table on stderr and one JSON line on stdout."""
import argparse
import glob
import gzip
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import test_symbolizer as ts  # noqa: E402  (the e2e test's ELF helpers and request builder)

N_FILES, SAMPLES, SEED = 8, 2000, 23


def build_binary(out):
    """The shared library and its build-id directory, made once per build dir."""
    lib = os.path.join(out, "libbench.so")
    dbg = os.path.join(out, "debug")
    if not os.path.exists(lib):
        os.makedirs(out, exist_ok=True)
        srcs = sorted(glob.glob(os.path.join(ROOT, "src", d, "*.c"))
                      for d in ("base", "pdata", "formats"))
        build = os.path.dirname(os.path.dirname(out))
        ts.run(["gcc", "-O2", "-g", "-shared", "-fPIC", "-Wl,--build-id", "-I" + ROOT + "/src",
                "-I" + build + "/proto", "-I" + build, "-o", lib + ".tmp"] + sum(srcs, []))
        os.rename(lib + ".tmp", lib)
    bid = ts.build_id(lib)
    sub = os.path.join(dbg, ".build-id", bid[:2])
    if not os.path.exists(os.path.join(sub, bid[2:] + ".debug")):
        os.makedirs(sub, exist_ok=True)
        ts.run(["objcopy", "--only-keep-debug", lib, os.path.join(sub, bid[2:] + ".debug")])
    return lib, dbg, bid


def make_payloads(lib, bid, outdir):
    addrs = ts.text_addresses(lib, lambda s: True)
    rnd = random.Random(SEED)
    os.makedirs(outdir, exist_ok=True)
    manifest = []
    per = len(addrs) // N_FILES
    for i in range(N_FILES):
        pool = addrs[i * per:(i + 1) * per]
        req = ts.Request()
        m = req.mapping("libbench.so", bid, ts.exec_load(lib))
        locs = {}
        for _ in range(SAMPLES):
            stack = []
            for a in rnd.sample(pool, rnd.randint(8, 24)):
                if a not in locs:
                    req.d.location_table.add(mapping_index=m, address=a,
                                             attribute_indices=[req.native])
                    locs[a] = len(req.d.location_table) - 1
                stack.append(locs[a])
            req.d.stack_table.add(location_indices=stack)
            req.p.samples.add(stack_index=len(req.d.stack_table) - 1, values=[10000000])
        name = "ebpf-%d.pb.gz" % i
        with open(os.path.join(outdir, name), "wb") as f:
            f.write(gzip.compress(req.body(), 6))
        manifest.append("%s 1 %d\n" % (name, SAMPLES))
    with open(os.path.join(outdir, "manifest"), "w") as f:
        f.writelines(manifest)
    return len(addrs)


def config(port, sink, mport, dbg):
    procs = "[symbolizer]" if dbg else "[]"
    s = "receivers:\n  otlp:\n    protocols:\n      http:\n        endpoint: 127.0.0.1:%d\n" % port
    if dbg:
        s += "processors:\n  symbolizer:\n    debug_dirs: [%s]\n" % dbg
    s += ("exporters:\n  otlphttp:\n    endpoint: http://127.0.0.1:%d\n" % sink +
          "service:\n  telemetry:\n    logs:\n      level: warn\n    metrics:\n"
          "      address: 127.0.0.1:%d\n  pipelines:\n    profiles:\n      receivers: [otlp]\n"
          "      processors: %s\n      exporters: [otlphttp]\n" % (mport, procs))
    return s


def wait_port(port, proc, timeout=30):
    import socket
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit("profcol exited: %s" % proc.returncode)
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise SystemExit("port %d not up" % port)


def loadgen(bindir, port, payloads, extra):
    r = subprocess.run([os.path.join(bindir, "loadgen"), "--url",
                        "http://127.0.0.1:%d/v1development/profiles" % port, "--payload", payloads,
                        "-H", "Content-Type: application/x-protobuf",
                        "-H", "Content-Encoding: gzip", "--quiet"] + extra,
                       capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        raise SystemExit("loadgen failed: %s" % r.stderr[-1000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def metrics(mport):
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % mport, timeout=10).read()
    out = {}
    for line in text.decode().splitlines():
        m = re.match(r"^profcol_processor_symbolizer_(\w+)(\{[^}]*\})? (\S+)$", line)
        if m:
            key = m.group(1) + (re.sub(r'.*reason="(\w+)".*', r":\1", m.group(2))
                                if m.group(2) and "reason=" in m.group(2) else "")
            out[key] = float(m.group(3))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--build", default=os.environ.get("BENCH_BUILD", "build-bench"))
    ap.add_argument("--profcol", default="")
    a = ap.parse_args()
    build = os.path.join(ROOT, a.build) if not os.path.isabs(a.build) else a.build
    bindir = os.path.join(build, "bench")
    profcol = a.profcol or os.path.join(build, "profcol")
    if not os.access(profcol, os.X_OK) or not os.access(os.path.join(bindir, "loadgen"), os.X_OK):
        raise SystemExit("no %s or loadgen: meson setup %s -Dbuildtype=release && ninja -C %s"
                         % (profcol, a.build, a.build))
    base = int(os.environ.get("BENCH_PORT_BASE", "24300"))
    port, sport, mport = base, base + 2, base + 3
    lib, dbg, bid = build_binary(os.path.join(bindir, "symbolize"))
    tmp = tempfile.mkdtemp(prefix="profcol-bench-sym.")
    procs = []

    def start(cmd, **kw):
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(
            os.path.join(tmp, "stderr-%d" % len(procs)), "w"), **kw)
        procs.append(p)
        return p

    def stop(p):
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()

    try:
        payloads = os.path.join(tmp, "payloads")
        n_addrs = make_payloads(lib, bid, payloads)
        load = open("/proc/loadavg").read().split()[:3]
        print("== scenario symbolize: %d functions' %d addresses, %d files x %d samples, %ds, "
              "load average before: %s" % (len(ts.symbols(lib)), n_addrs, N_FILES, SAMPLES,
                                           a.seconds, " ".join(load)), file=sys.stderr)
        sink = start([os.path.join(bindir, "sink"), "--port", str(sport), "--max-seconds",
                      str(a.seconds * 4 + 600)])
        wait_port(sport, sink)
        res = {}
        for phase, d in (("baseline", None), ("symbolize", dbg)):
            cfg = os.path.join(tmp, "%s.yaml" % phase)
            with open(cfg, "w") as f:
                f.write(config(port, sport, mport, d))
            pc = start([profcol, "--config", cfg])
            wait_port(port, pc)
            wait_port(mport, pc)
            if d:
                t0 = time.monotonic()
                res["cold"] = loadgen(bindir, port, payloads,
                                      ["--connections", "1", "--requests", str(N_FILES)])
                res["cold"]["wall_s"] = time.monotonic() - t0
                res["cold_metrics"] = metrics(mport)
                res["warm"] = loadgen(bindir, port, payloads, [
                    "--connections", str(a.connections), "--seconds", str(a.seconds)])
                res["warm_metrics"] = metrics(mport)
            else:
                res["baseline"] = loadgen(bindir, port, payloads, [
                    "--connections", str(a.connections), "--seconds", str(a.seconds)])
            stop(pc)
            procs.remove(pc)
        wm = res["warm_metrics"]
        if not wm.get("locations_resolved"):
            raise SystemExit("nothing was symbolized: %s" % wm)
        rows = [("baseline (no symbolizer)", res["baseline"]), ("cold: first pass, 1 conn",
                                                                res["cold"]),
                ("warm: cache hits", res["warm"])]
        print("%-28s %12s %10s %10s" % ("phase", "samples/s", "p50 ms", "p99 ms"), file=sys.stderr)
        for name, r in rows:
            print("%-28s %12.0f %10.2f %10.2f" % (name, r["samples_per_s"], r["p50_ms"],
                                                  r["p99_ms"]), file=sys.stderr)
        print("resolved %d, unresolved %s, cache hits %d, misses %d" % (
            wm.get("locations_resolved", 0),
            {k.split(":")[1]: v for k, v in wm.items() if k.startswith("locations_unresolved:")
             and v}, wm.get("cache_hits", 0), wm.get("cache_misses", 0)), file=sys.stderr)
        print(json.dumps({
            "scenario": "symbolize", "seconds": a.seconds, "connections": a.connections,
            "load_before": load, "addresses": n_addrs,
            "baseline_samples_per_s": res["baseline"]["samples_per_s"],
            "cold_samples_per_s": res["cold"]["samples_per_s"],
            "cold_first_pass_s": round(res["cold"]["wall_s"], 3),
            "warm_samples_per_s": res["warm"]["samples_per_s"],
            "warm_vs_baseline": round(res["warm"]["samples_per_s"] /
                                      max(res["baseline"]["samples_per_s"], 1e-9), 3),
            "resolved": wm.get("locations_resolved", 0),
            "cache_hits": wm.get("cache_hits", 0), "cache_misses": wm.get("cache_misses", 0)}))
    finally:
        for p in reversed(procs):
            stop(p)
        if not os.environ.get("BENCH_KEEP"):
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
