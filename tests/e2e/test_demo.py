#!/usr/bin/env python3
"""Deployments, end to end: the offline demo (tools/demo.sh: a real Go app -> sidecar profcol ->
gateway profcol -> debug exporter + recording sink; it ends on the gateway's live
view, whose URL it prints last: the page and the app's CPU series with its spans answer there
until the test sends SIGINT, as Ctrl-C), `profcol validate` on every
shipped config (config/*.yaml and the configs embedded in deploy/kubernetes ConfigMaps, merged as
the manifests' `--config` arguments merge them), the compose file through `docker-compose config`
or `docker compose config` when either is installed, and the container image's package lists
against what the binary links and what README.md lists.

Debian's /usr/bin/python3 and its standard library only (python3-yaml is used for extra checks
when it happens to be installed). Environment: PROFCOL_BIN, PROFCOL_SRC as in harness.py;
DEMO_KEEP=1 keeps the demo's output directory and prints its path."""
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402  (the e2e tests' shared Go build cache)

SRC = os.environ.get("PROFCOL_SRC") or os.path.normpath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BIN = os.environ.get("PROFCOL_BIN") or os.path.join(SRC, "build", "profcol")
DEMO_TIMEOUT = 90  # seconds for the whole of tools/demo.sh

# what the demo app (deploy/demo/go-app/main.go) spends its CPU in
APP_LEAVES = ["main.isPrime", "main.hashDocument"]
APP_FUNCTIONS = APP_LEAVES + ["main.computePrimes", "main.scoreDocuments",
                              "main.checkoutHandler", "main.searchHandler"]

try:
    import yaml  # python3-yaml: optional
except ImportError:
    yaml = None


def read(path):
    with open(path) as f:
        return f.read()


def validate(*configs):
    r = subprocess.run([BIN, "validate"] + [a for c in configs for a in ("--config", c)],
                       capture_output=True, text=True, timeout=30)
    return r.returncode, (r.stdout + r.stderr).strip()


# ---- Kubernetes manifests without a YAML library ----

def split_documents(text):
    return [d for d in re.split(r"^---[ \t]*$", text, flags=re.M) if d.strip()]


def configmap_files(doc):
    """{key: text} of a ConfigMap's data entries written as block scalars (`key: |`)."""
    if not re.search(r"^kind:\s*ConfigMap\s*$", doc, re.M):
        return None
    files, lines = {}, doc.splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s+)([\w.-]+):\s*\|\s*$", lines[i])
        if not m:
            i += 1
            continue
        key_indent, block, i = len(m.group(1)), [], i + 1
        indent = None
        while i < len(lines):
            line = lines[i]
            if line.strip():
                n = len(line) - len(line.lstrip(" "))
                if n <= key_indent:
                    break
                indent = n if indent is None else indent
                block.append(line[indent:])
            else:
                block.append("")
            i += 1
        while block and not block[-1]:
            block.pop()
        files[m.group(2)] = "\n".join(block) + "\n"
    return files


def config_args(doc):
    """Each container's list of --config paths (args written as a one-line JSON-style list)."""
    out = []
    for m in re.finditer(r"^\s*args:\s*(\[.*\])\s*$", doc, re.M):
        args = json.loads(m.group(1))
        out.append([args[i + 1] for i, a in enumerate(args[:-1]) if a == "--config"])
    return out


class ConfigsTest(unittest.TestCase):
    def test_every_config_validates(self):
        configs = sorted(glob.glob(os.path.join(SRC, "config", "*.yaml")))
        names = [os.path.basename(c) for c in configs]
        for want in ("sidecar.yaml", "gateway.yaml", "demo.yaml", "default.yaml"):
            self.assertIn(want, names)
        for cfg in configs:
            # an opt-in fragment (config/gateway-otlp.yaml) names on its first line the config it
            # is merged over
            m = re.match(r"# Opt-in for (config/\S+\.yaml)", read(cfg))
            base = m and os.path.basename(m.group(1))
            rc, out = validate(*([os.path.join(SRC, "config", base)] if base else []), cfg)
            self.assertEqual(rc, 0, "%s: %s" % (cfg, out))
            if base:  # a fragment is not a config of its own
                self.assertNotEqual(validate(cfg)[0], 0, cfg)

    def test_kubernetes_configmaps_validate(self):
        manifests = sorted(glob.glob(os.path.join(SRC, "deploy", "kubernetes", "*.yaml")))
        self.assertTrue(manifests, "no manifests in deploy/kubernetes")
        shipped = {n: read(os.path.join(SRC, "config", n))
                   for n in ("sidecar.yaml", "gateway.yaml", "fleet-sidecar.yaml",
                             "fleet-gateway.yaml")}
        checked = 0
        for path in manifests:
            text = read(path)
            docs = split_documents(text)
            maps = [f for f in (configmap_files(d) for d in docs) if f is not None]
            runs = [a for d in docs for a in config_args(d)]
            self.assertTrue(maps, "%s: no ConfigMap" % path)
            self.assertTrue(runs, "%s: no container with --config arguments" % path)
            files = {}
            for m in maps:
                files.update(m)
            # the embedded configs are the shipped ones, unchanged
            self.assertIn("config.yaml", files, path)
            base = os.path.basename(path)  # fleet-*.yaml: the config of the same name
            if base not in shipped:
                base = "sidecar.yaml" if "sidecar" in base else "gateway.yaml"
            self.assertEqual(files["config.yaml"], shipped[base],
                             "%s: config.yaml differs from config/%s" % (path, base))
            if yaml:  # the text extraction agrees with a YAML parser
                parsed = {}
                for d in yaml.safe_load_all(text):
                    if d and d.get("kind") == "ConfigMap":
                        parsed.update(d["data"])
                self.assertEqual(parsed, files, path)
            with tempfile.TemporaryDirectory(prefix="profcol-k8s-") as tmp:
                for name, body in files.items():
                    with open(os.path.join(tmp, name), "w") as f:
                        f.write(body)
                for cfgs in runs:
                    local = []
                    for c in cfgs:
                        self.assertTrue(c.startswith("/etc/profcol/"), "%s: %s" % (path, c))
                        self.assertIn(os.path.basename(c), files, "%s: %s" % (path, c))
                        local.append(os.path.join(tmp, os.path.basename(c)))
                    rc, out = validate(*local)
                    self.assertEqual(rc, 0, "%s %s: %s" % (path, cfgs, out))
                    checked += 1
        self.assertGreaterEqual(checked, 3)


class GatewayRoutesTest(unittest.TestCase):
    """config/gateway.yaml as shipped (issue 28): every profile reaches Pyroscope once, by push
    (the totals Pyroscope receives equal the input's, read with the protobuf module), OTLP/gRPC
    answers on its 4317 receiver, and nothing goes by OTLP; with config/gateway-otlp.yaml added
    the OTLP copy goes to OTLP_ENDPOINT, marked profcol.route=otlp, and Pyroscope still gets each
    profile once. Ports are moved by yaml: fragments; the backends are recording servers."""

    def run_gateway(self, extra_configs):
        import pyro_support as ps
        sink = h.started_sink(self)
        pyro = h.started_sink(self, ps.PyroscopeServer())
        grpc, otlp, ingest, health, metrics = (h.free_port() for _ in range(5))
        cfgs = [os.path.join(SRC, "config", "gateway.yaml")] + extra_configs + [
            "yaml:receivers::otlp::protocols::grpc::endpoint: 127.0.0.1:%d" % grpc,
            "yaml:receivers::otlp::protocols::http::endpoint: 127.0.0.1:%d" % otlp,
            "yaml:receivers::pyroscope::endpoint: 127.0.0.1:%d" % ingest,
            "yaml:service::telemetry::metrics::address: 127.0.0.1:%d" % metrics]
        env = dict(os.environ, PYROSCOPE_ENDPOINT=pyro.url, OTLP_ENDPOINT=sink.url,
                   PROFCOL_HEALTH="127.0.0.1:%d" % health, PROFCOL_SHUTDOWN_TIMEOUT="10s")
        p = h.Profcol([], args=[a for c in cfgs for a in ("--config", c)], env=env,
                      wait_ports=[grpc, otlp, ingest], name="gateway-routes").start()
        self.addCleanup(p.kill)
        go_cpu = os.path.join(SRC, "tests", "data", "go-cpu.pb.gz")
        with open(go_cpu, "rb") as f:
            r = h.post(ingest, f.read(), "application/octet-stream",
                       path="/ingest?name=routes-go&format=pprof")
        self.assertEqual(r.status, 200, r)
        req = h.make_request(services=("routes-otlp",), seed=5)
        out = h.curl_grpc_export(grpc, req.SerializeToString())
        self.assertIn(b"grpc-status: 0", out.lower(), out)
        p.stop()  # flushes the batches and the sending queues
        want = {("routes-go", t): v for t, v in ps.pprof_view(open(go_cpu, "rb").read())
                ["totals"].items()}
        for (svc, typ, unit), e in h.summarize(req)["profiles"].items():
            want[(svc, (typ, unit))] = want.get((svc, (typ, unit)), 0) + e["total"]
        got = {}
        for u in pyro.uploads:
            for prof in u.profiles:
                for t, v in ps.pprof_view(prof)["totals"].items():
                    got[(u.app, t)] = got.get((u.app, t), 0) + v
        self.assertEqual(pyro.violations, [])
        return want, got, sink

    def test_push_once_by_default(self):
        want, got, sink = self.run_gateway([])
        self.assertEqual(got, want, "Pyroscope's totals (push) against the input")
        self.assertEqual(sink.snapshot(), [], "nothing goes by OTLP unless asked")

    def test_otlp_route_is_an_opt_in(self):
        want, got, sink = self.run_gateway([os.path.join(SRC, "config", "gateway-otlp.yaml")])
        self.assertEqual(got, want, "Pyroscope still gets each profile once")
        summary = h.summarize(sink.messages())
        otlp = {}
        for (svc, typ, unit), e in summary["profiles"].items():
            otlp[(svc, (typ, unit))] = e["total"]
        self.assertEqual(otlp, want, "the OTLP copy")
        self.assertTrue(all(("profcol.route", ("s", "otlp")) in res
                            for res in summary["resources"]), summary["resources"])


class ComposeTest(unittest.TestCase):
    COMPOSE = os.path.join(SRC, "deploy", "docker-compose.yaml")

    def compose_cmd(self):
        if shutil.which("docker-compose"):
            return ["docker-compose"]
        if shutil.which("docker"):
            r = subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=30)
            if r.returncode == 0:
                return ["docker", "compose"]
        return None

    def test_compose_config(self):
        cmd = self.compose_cmd()
        if not cmd:
            self.skipTest("neither docker-compose nor the docker compose plugin is installed")
        r = subprocess.run(cmd + ["-f", self.COMPOSE, "config", "-q"], capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_compose_references(self):
        if not yaml:
            self.skipTest("python3-yaml is not installed")
        d = yaml.safe_load(read(self.COMPOSE))
        services = d["services"]
        for want in ("pyroscope", "profcol", "node-app", "go-app", "grafana"):
            self.assertIn(want, services)
        base = os.path.dirname(self.COMPOSE)
        for name, svc in services.items():
            build = svc.get("build")
            if build is None:
                continue
            if isinstance(build, str):
                build = {"context": build}
            ctx = os.path.normpath(os.path.join(base, build["context"]))
            dockerfile = os.path.join(ctx, build.get("dockerfile", "Dockerfile"))
            self.assertTrue(os.path.isfile(dockerfile), "%s: %s" % (name, dockerfile))
        for vol in services["grafana"].get("volumes", []):
            self.assertTrue(os.path.exists(os.path.join(base, vol.split(":")[0])), vol)
        self.assertTrue(glob.glob(os.path.join(
            base, "grafana", "provisioning", "datasources", "*.yaml")))


def dockerfile_stages():
    text = read(os.path.join(SRC, "deploy", "Dockerfile"))
    text = re.sub(r"\\\n", " ", text)
    stages = re.split(r"^FROM\s", text, flags=re.M)[1:]
    return ["FROM " + s for s in stages]


def apt_packages(stage):
    pkgs = set()
    for m in re.finditer(r"apt-get install ([^&\n]*)", stage):
        pkgs.update(w for w in m.group(1).split() if not w.startswith("-"))
    return pkgs


class DockerfileTest(unittest.TestCase):
    def test_build_stage_has_every_build_dependency(self):
        readme = read(os.path.join(SRC, "README.md"))
        m = re.search(r"Dependencies are Debian packages: `([^`]+)`", readme)
        self.assertTrue(m, "README.md no longer lists the build dependencies")
        stages = dockerfile_stages()
        self.assertEqual(len(stages), 2)
        want = set(m.group(1).split())
        # and every Debian package meson.build's deb_deps names
        deb_deps = re.search(r"deb_deps = \[(.*?)\n\]", read(os.path.join(SRC, "meson.build")),
                             re.S)
        self.assertTrue(deb_deps, "meson.build has no deb_deps list")
        want.update(re.findall(r"\[\s*'[^']+'\s*,\s*'([^']+)'\s*\]", deb_deps.group(1)))
        missing = want - apt_packages(stages[0])
        self.assertFalse(missing, "deploy/Dockerfile's build stage lacks %s" % sorted(missing))

    def test_runtime_stage_has_every_linked_library(self):
        if not (shutil.which("ldd") and shutil.which("dpkg")):
            self.skipTest("ldd or dpkg missing")
        runtime = apt_packages(dockerfile_stages()[1])
        out = subprocess.run(["ldd", BIN], capture_output=True, text=True, check=True).stdout
        needed = set()
        for lib in re.findall(r"=>\s*(\S+)", out):
            r = subprocess.run(["dpkg", "-S", os.path.realpath(lib)], capture_output=True,
                               text=True)
            if r.returncode:
                r = subprocess.run(["dpkg", "-S", lib], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, "no Debian package owns %s" % lib)
            needed.add(r.stdout.split(":")[0])
        # the C library is in the base image; the sanitizer runtimes only in sanitizer builds
        needed = {p for p in needed if p != "libc6" and not re.match(
            r"lib(asan|ubsan|lsan|tsan)\d*$|libgcc-s1$|libstdc\+\+6$", p)}
        self.assertFalse(needed - runtime, "deploy/Dockerfile's runtime stage lacks %s"
                         % sorted(needed - runtime))


class DemoTest(unittest.TestCase):
    def test_offline_demo(self):
        if not shutil.which("go"):
            self.skipTest("go is not installed (golang-go; tools/dev.sh test installs it)")
        out_dir = tempfile.mkdtemp(prefix="profcol-demo-test-")
        # DEMO_STAY=1: the demo ends on the live view and keeps it up until SIGINT, as on a
        # terminal until Ctrl-C
        env = dict(os.environ, PROFCOL_BIN=BIN, DEMO_OUT=out_dir, DEMO_UPLOADS="2",
                   PROFCOL_E2E_GOCACHE=h.GO_CACHE, DEMO_STAY="1",
                   DEMO_INTERVAL="2s")
        proc = subprocess.Popen(["bash", os.path.join(SRC, "tools", "demo.sh")], env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        out, err = [], []
        readers = [threading.Thread(target=lambda f=f, acc=acc: acc.extend(f), daemon=True)
                   for f, acc in ((proc.stdout, out), (proc.stderr, err))]
        for t in readers:
            t.start()
        live = None
        end = time.time() + DEMO_TIMEOUT
        while time.time() < end and proc.poll() is None and live is None:
            live = next((ln for ln in list(err) if "live view" in ln), None)
            time.sleep(0.2)
        try:
            self.assertIsNotNone(live, "no live view URL within %d s:\n%s" % (
                DEMO_TIMEOUT, "".join(err)[-3000:]))
            self.check_live(live)
            os.kill(proc.pid, signal.SIGINT)  # Ctrl-C: the script stops what it started
            proc.wait(timeout=30)
        except BaseException:
            os.killpg(proc.pid, signal.SIGTERM)  # the script's trap stops what it started
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
            raise
        for t in readers:
            t.join(timeout=10)
        proc.stdout.close()
        proc.stderr.close()
        stdout, stderr = "".join(out), "".join(err)
        try:
            self.check_demo(proc.returncode, stdout, stderr, out_dir)
            says = [ln for ln in stderr.splitlines() if ln.startswith("demo: ")]
            self.assertEqual(says[-2:], [live.rstrip("\n"), "demo: stopped"],
                             "the demo ends on the live view")
        finally:
            if os.environ.get("DEMO_KEEP") == "1":
                print("demo output kept in %s" % out_dir, file=sys.stderr)
            else:
                shutil.rmtree(out_dir, ignore_errors=True)

    def check_live(self, line):
        """The live view's URL opens the app's CPU series, with its spans (tracelink's links)."""
        url = urllib.parse.urlsplit(line.split(": ", 2)[-1].strip())
        frag = urllib.parse.parse_qs(url.fragment)
        self.assertEqual((frag["service"], frag["type"]), (["demo-go-app"], ["cpu:nanoseconds"]))
        base = "http://%s" % url.netloc

        def get(path, **q):
            with urllib.request.urlopen(base + path + "?" + urllib.parse.urlencode(q),
                                        timeout=10) as r:
                return r.status, r.read()
        status, page = get("/")
        self.assertEqual(status, 200)
        self.assertIn(b"profilez", page)
        series = json.loads(get("/api/series")[1])["series"]
        cpu = [s for s in series if (s["service"], s["type"]) == ("demo-go-app", "cpu:nanoseconds")]
        self.assertEqual(len(cpu), 1, series)
        self.assertGreater(cpu[0]["total"], 0)
        spans = json.loads(get("/api/labels", service="demo-go-app", type="cpu:nanoseconds",
                               group_by="span_id")[1])
        self.assertTrue([r for r in spans["rows"] if r["value"]], spans)
        # the flame graph there holds the app's functions (the demo's only drawing: the page)
        graph = get("/api/flamegraph", service="demo-go-app", type="cpu:nanoseconds")[1]
        for fn in APP_FUNCTIONS:
            self.assertIn(fn.encode(), graph, "the live flame graph lacks %s" % fn)

    def check_demo(self, rc, stdout, stderr, out_dir):
        self.assertEqual(rc, 0, "tools/demo.sh failed:\n%s\n%s" % (stdout, stderr))
        debug = [line for line in stdout.splitlines() if line.startswith("debug: ")]
        self.assertTrue(debug, "no debug exporter output:\n" + stdout)
        # top-functions tables: rows end with the function name
        rows = [line for line in debug if re.match(r"debug:\s+\S+\s+[\d.]+%\s+[\d.]+%", line)]
        table_functions = {line.split()[-1] for line in rows}
        for fn in APP_LEAVES:
            self.assertIn(fn, table_functions, "top-functions table lacks %s:\n%s"
                          % (fn, "\n".join(debug)))
        text = "\n".join(debug)
        self.assertIn("service.name=demo-go-app", text)
        # the sidecar's resource processor (config/sidecar.yaml) tagged the profiles
        self.assertIn("k8s.pod.name=demo-pod-1", text)
        self.assertIn("k8s.namespace.name=demo", text)
        self.assertIn("type=cpu/nanoseconds", text)
        # the gateway's tracelink processor turned the app's trace_id/span_id labels into links
        linked = [int(n) for n in re.findall(r"linked=(\d+)", text)]
        self.assertTrue(linked and max(linked) > 0, "no linked samples:\n" + text)
        self.assertTrue(glob.glob(os.path.join(out_dir, "recorded", "*.json")))
        # both profcols stopped cleanly (the script also requires exit status 0)
        for name in ("gateway", "sidecar"):
            log = read(os.path.join(out_dir, name + ".log"))
            self.assertIn("profcol: stopped", log, name)
            self.assertNotIn(" error ", log, "%s.log:\n%s" % (name, log))


if __name__ == "__main__":
    unittest.main(verbosity=2)
