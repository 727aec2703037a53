#!/usr/bin/env python3
"""The container image (deploy/Dockerfile), run as users run it. `tools/dev.sh image-test` builds
the image and runs this file; it is not part of `meson test` (it needs root and a container
engine, and the image build takes minutes).

  * the image's default command (CMD: `--config /etc/profcol/config.yaml`, which is
    config/gateway.yaml; the embedded default config is not what the image runs) answers a real
    Go runtime/pprof upload (tests/data/go-cpu.pb.gz) on its published Pyroscope port with 200
    and an OTLP/gRPC call (curl) on its published 4317 with grpc-status 0;
    the server is pid 1 with uid and gid 10001; `stop -t 10` (SIGTERM) ends it with exit code 0
    inside the grace period;
  * config/gateway.yaml mounted over /etc/profcol/config.yaml, on the host's network with its
    ports moved to free ones (a second `--config`, and PROFCOL_HEALTH for the health_check
    endpoint) and the image's opt-in /etc/profcol/otlp.yaml: a Go pprof upload and an OTLP
    request reach the harness's recording OTLP sink (OTLP_ENDPOINT) and a recording Pyroscope
    server (PYROSCOPE_ENDPOINT); the HEALTHCHECK
    passes (`podman healthcheck run`, or its command through `exec` with docker) and fails when
    PROFCOL_HEALTH names a port nothing listens on; SIGTERM exits 0 within the grace period;
  * deploy/docker-compose.yaml with podman-compose: profcol and the two demo apps (built from
    Debian packages; Pyroscope and Grafana are Docker Hub images and are left out), the apps'
    profiles go through profcol (its debug exporter, added by a test-only override file, names
    both services), `down` stops everything.

The image size is printed. Host ports are always 127.0.0.1 ones from harness.free_port(), and
the sinks listen on 127.0.0.1: no traffic leaves the machine.

Environment: PROFCOL_ENGINE (podman or docker; default podman), PROFCOL_IMAGE (default
profcol:0.1.0), PROFCOL_SRC as in harness.py; for podman CONTAINERS_CONF defaults to
<repo>/build-image/containers.conf (written by tools/dev.sh). IMAGE_TEST_COMPOSE=0 leaves out the
compose test."""
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402  (re-execs under Debian's python3)
import pyro_support as ps  # noqa: E402

SRC = h.SRC
ENGINE = os.environ.get("PROFCOL_ENGINE", "podman")
IMAGE = os.environ.get("PROFCOL_IMAGE", "profcol:0.1.0")
GRACE = 10                  # seconds: `stop -t 10`, the default of docker and podman
START_TIMEOUT = 30
GO_CPU = os.path.join(SRC, "tests", "data", "go-cpu.pb.gz")
UID = "10001"

if ENGINE == "podman" and not os.environ.get("CONTAINERS_CONF"):
    conf = os.path.join(SRC, "build-image", "containers.conf")
    if os.path.isfile(conf):
        os.environ["CONTAINERS_CONF"] = conf

_names = 0


def engine(*args, timeout=120, check=True):
    r = subprocess.run([ENGINE] + list(args), capture_output=True, text=True, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    if check and r.returncode != 0:
        raise AssertionError("%s %s: exit %d\n%s%s" % (ENGINE, " ".join(args), r.returncode,
                                                       r.stdout, r.stderr))
    return r


def inspect(name, fmt):
    return engine("inspect", "--format", fmt, name).stdout.strip()


def http_get(port, path="/", timeout=2.0):
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def wait_healthy(port, container, timeout=START_TIMEOUT):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            status, _ = http_get(port)
            if status == 200:
                return
            last = "HTTP %d" % status
        except OSError as e:
            last = str(e)
        if inspect(container, "{{.State.Running}}") != "true":
            break
        time.sleep(0.2)
    raise AssertionError("the container's health_check on 127.0.0.1:%d never answered 200 (%s)\n"
                         "--- logs ---\n%s" % (port, last, logs(container)))


def logs(name):
    r = engine("logs", name, check=False)
    return (r.stdout + r.stderr)[-6000:]


def ingest(port, body, name):
    """A Go pprof upload as Go programs send it to Pyroscope's /ingest."""
    path = "/ingest?" + urllib.parse.urlencode({"name": name, "format": "pprof"})
    return h.post(port, body, content_type="application/octet-stream", path=path)


def read(path, mode="r"):
    with open(path, mode) as f:
        return f.read()


def go_function_names():
    """Every function name of tests/data/go-cpu.pb.gz."""
    p = ps.pprof_profile(read(GO_CPU, "rb"))
    return {p.string_table[f.name] for f in p.function}


def finished_at(text):
    """Seconds since the epoch of an engine's RFC 3339 time (nanoseconds, Z or an offset)."""
    m = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)", text.strip())
    if not m:
        raise AssertionError("unreadable FinishedAt %r" % text)
    zone = "+00:00" if m.group(3) == "Z" else m.group(3)
    frac = float(m.group(2) or 0)
    return datetime.datetime.fromisoformat(m.group(1) + zone).timestamp() + frac


def setUpModule():
    r = engine("image", "inspect", "--format", "{{.Size}}", IMAGE, check=False)
    if r.returncode != 0:
        raise unittest.SkipTest("no image %s: build it with tools/dev.sh image (%s)"
                                % (IMAGE, r.stderr.strip()))
    print("image %s: %.1f MB (%s)" % (IMAGE, int(r.stdout.strip()) / 1e6, ENGINE),
          file=sys.stderr)


class Container:
    """One `run -d` of the image, removed at the test's cleanup."""

    def __init__(self, test, run_args, args=()):
        global _names
        _names += 1
        self.name = "profcol-image-test-%d-%d" % (os.getpid(), _names)
        extra = []
        if ENGINE == "podman":
            # no timer for the periodic health check (podman would ask systemd for one, which
            # a container host without systemd does not have); `healthcheck run` still runs it
            extra = ["--health-interval", "disable"]
        engine("run", "-d", "--name", self.name, *extra, *run_args, IMAGE, *args)
        test.addCleanup(self.remove)

    def remove(self):
        engine("rm", "-f", self.name, check=False)

    def exec(self, *cmd, env=None):
        e = []
        for k, v in (env or {}).items():
            e += ["-e", "%s=%s" % (k, v)]
        return engine("exec", *e, self.name, *cmd, check=False)

    def healthcheck_cmd(self):
        hc = json.loads(inspect(self.name, "{{json .Config.Healthcheck}}"))
        test = hc["Test"]
        if test[0] == "CMD-SHELL":
            return ["/bin/sh", "-c", test[1]]
        return test[1:]

    def healthcheck(self, env=None):
        """Exit status of the image's HEALTHCHECK command, run in the container."""
        if ENGINE == "podman" and env is None:
            return engine("healthcheck", "run", self.name, check=False)
        return self.exec(*self.healthcheck_cmd(), env=env)

    def stop(self, test, grace=GRACE):
        """SIGTERM (`stop -t grace`): exit code 0, not killed, within the grace period."""
        t = time.time()
        engine("stop", "-t", str(grace), self.name, timeout=grace + 60)
        state = json.loads(inspect(self.name, "{{json .State}}"))
        code = state.get("ExitCode")
        test.assertEqual(code, 0, "exit code %r after SIGTERM (137: killed after the %d s grace "
                         "period)\n--- logs ---\n%s" % (code, grace, logs(self.name)))
        # when the process ended (as the engine recorded it), not when `stop` returned: the
        # engine's own teardown (mounts, network) comes after and is not profcol's
        took = finished_at(state["FinishedAt"]) - t
        test.assertLess(took, grace, "exited %.1f s after SIGTERM" % took)
        text = logs(self.name)
        test.assertIn("profcol: stopped", text)
        return took, text

    def process_ids(self):
        """(uid line, gid line) of pid 1 (the server) inside the container."""
        r = self.exec("cat", "/proc/1/status")
        uid = re.search(r"^Uid:\s*(.*)$", r.stdout, re.M)
        gid = re.search(r"^Gid:\s*(.*)$", r.stdout, re.M)
        return uid.group(1).split(), gid.group(1).split()


class ImageTest(unittest.TestCase):
    def test_metadata(self):
        cfg = json.loads(engine("image", "inspect", "--format", "{{json .Config}}",
                                IMAGE).stdout)
        self.assertEqual(cfg["Entrypoint"], ["/usr/local/bin/profcol"])
        self.assertEqual(cfg["Cmd"], ["--config", "/etc/profcol/config.yaml"])
        self.assertEqual(cfg["User"], "10001:10001")
        # docker keeps the HEALTHCHECK in Config.Healthcheck, podman's image inspect beside it
        hc = cfg.get("Healthcheck") or json.loads(engine(
            "image", "inspect", "--format", "{{json .HealthCheck}}", IMAGE).stdout)
        self.assertTrue(hc and hc.get("Test"), "the image has no HEALTHCHECK (built with "
                        "--format oci?)")
        self.assertNotIn("13133", " ".join(hc["Test"]).replace(
            "${PROFCOL_HEALTH:-0.0.0.0:13133}", ""),
            "the HEALTHCHECK must take its port from PROFCOL_HEALTH, not a literal")
        # the config it runs by default is config/gateway.yaml as shipped
        r = engine("run", "--rm", "--entrypoint", "cat", IMAGE, "/etc/profcol/config.yaml")
        self.assertEqual(r.stdout, read(os.path.join(SRC, "config", "gateway.yaml")))
        r = engine("run", "--rm", IMAGE, "validate", "--config", "/etc/profcol/config.yaml")
        self.assertIn("valid", r.stdout + r.stderr)

    def test_default_command_answers_go_pprof(self):
        ingest_port, health_port, grpc_port = h.free_port(), h.free_port(), h.free_port()
        c = Container(self, ["-p", "127.0.0.1:%d:4040" % ingest_port,
                             "-p", "127.0.0.1:%d:13133" % health_port,
                             "-p", "127.0.0.1:%d:4317" % grpc_port])
        wait_healthy(health_port, c.name)
        r = ingest(ingest_port, read(GO_CPU, "rb"), "image-default{env=ci}")
        self.assertEqual(r.status, 200, r)
        # OTLP/gRPC on 4317, where the eBPF profiler and OTel SDKs send by default
        out = h.curl_grpc_export(grpc_port, h.make_request().SerializeToString())
        self.assertIn(b"grpc-status: 0", out.lower(), out)
        uid, gid = c.process_ids()
        self.assertEqual(uid, [UID] * 4, "the server's uids (real, effective, saved, fs)")
        self.assertEqual(gid, [UID] * 4)
        self.assertEqual(c.exec("id", "-u").stdout.strip(), UID)
        self.assertEqual(c.healthcheck().returncode, 0, logs(c.name))
        took, text = c.stop(self)
        print("default command: stopped in %.1f s" % took, file=sys.stderr)
        self.assertIn("everything is ready", text)

    def test_gateway_relays_and_is_healthy(self):
        sink = h.started_sink(self)
        pyro = h.started_sink(self, ps.PyroscopeServer())
        otlp, ingest_port, health, metrics, grpc = (h.free_port() for _ in range(5))
        # config/gateway.yaml mounted as it is (from a directory the image's user may read)
        cfg_dir = tempfile.mkdtemp(prefix="profcol-image-cfg-")
        self.addCleanup(shutil.rmtree, cfg_dir, True)
        os.chmod(cfg_dir, 0o755)
        shutil.copy(os.path.join(SRC, "config", "gateway.yaml"), cfg_dir)
        os.chmod(os.path.join(cfg_dir, "gateway.yaml"), 0o644)
        c = Container(self, [
            "--network", "host",
            "-v", "%s/gateway.yaml:/etc/profcol/config.yaml:ro" % cfg_dir,
            "-e", "PYROSCOPE_ENDPOINT=" + pyro.url,
            "-e", "OTLP_ENDPOINT=" + sink.url,
            "-e", "PROFCOL_HEALTH=127.0.0.1:%d" % health,
        ], args=[
            "--config", "/etc/profcol/config.yaml",
            # the image's opt-in OTLP route (config/gateway-otlp.yaml) to the sink
            "--config", "/etc/profcol/otlp.yaml",
            # the host's network is shared: the receivers and /metrics move to free ports
            "--config", "yaml:receivers::otlp::protocols::grpc::endpoint: 127.0.0.1:%d" % grpc,
            "--config", "yaml:receivers::otlp::protocols::http::endpoint: 127.0.0.1:%d" % otlp,
            "--config", "yaml:receivers::pyroscope::endpoint: 127.0.0.1:%d" % ingest_port,
            "--config", "yaml:service::telemetry::metrics::address: 127.0.0.1:%d" % metrics,
        ])
        wait_healthy(health, c.name)
        # the HEALTHCHECK follows PROFCOL_HEALTH, and fails where nothing answers
        r = c.healthcheck()
        self.assertEqual(r.returncode, 0, "HEALTHCHECK failed: %s%s\n%s"
                         % (r.stdout, r.stderr, logs(c.name)))
        self.assertEqual(c.healthcheck(env={}).returncode, 0)
        dead = h.free_port()
        r = c.healthcheck(env={"PROFCOL_HEALTH": "0.0.0.0:%d" % dead})
        self.assertNotEqual(r.returncode, 0, "HEALTHCHECK passed on a port nothing listens on")

        r = ingest(ingest_port, read(GO_CPU, "rb"), "image-go{env=ci}")
        self.assertEqual(r.status, 200, r)
        r = h.post(otlp, h.make_request(services=("image-otlp",)).SerializeToString())
        self.assertEqual(r.status, 200, r)

        def services(reqs):
            return {dict(res).get("service.name") for res in
                    h.summarize([q.message for q in reqs if q.message])["resources"]}
        got = sink.wait_until(lambda reqs: {("s", "image-go"), ("s", "image-otlp")}
                              <= services(reqs), timeout=20)
        self.assertTrue({("s", "image-go"), ("s", "image-otlp")} <= services(got),
                        "sink got %s\n%s" % (services(got), logs(c.name)))
        summary = h.summarize(sink.messages())
        names = {n for (svc, _, _), e in summary["profiles"].items() if svc == "image-go"
                 for (stack, _, _) in e["samples"] for n in stack}
        go = go_function_names()
        self.assertTrue(names and names <= go | {"?"}, "functions %s" % sorted(names)[:20])
        self.assertTrue(any(n.startswith("runtime.") for n in names), sorted(names)[:20])
        # the otlp route marks its copies (resource/otlp-route in config/gateway-otlp.yaml)
        self.assertIn(("profcol.route", ("s", "otlp")),
                      [kv for res in summary["resources"] for kv in res])
        ups = pyro.wait_until(lambda us: {"image-go", "image-otlp"} <= {u.app for u in us},
                              timeout=20)
        self.assertTrue({"image-go", "image-otlp"} <= {u.app for u in ups},
                        "pyroscope got %s" % [u.app for u in ups])
        self.assertFalse(pyro.violations, pyro.violations)
        uid, _ = c.process_ids()
        self.assertEqual(uid, [UID] * 4)
        took, text = c.stop(self)
        print("gateway: stopped in %.1f s" % took, file=sys.stderr)
        self.assertNotIn(" error ", text, text)


COMPOSE = os.path.join(SRC, "deploy", "docker-compose.yaml")
# Added over the compose file by the test only: a debug exporter that names every profile's
# service in profcol's log, and the Go app uploading every 2 s instead of 10.
COMPOSE_OVERRIDE = """services:
  profcol:
    command: ["--config", "/etc/profcol/config.yaml",
              "--config", "yaml:exporters::debug::verbosity: detailed",
              "--config", "yaml:service::pipelines::profiles/debug::receivers: [pyroscope]",
              "--config", "yaml:service::pipelines::profiles/debug::exporters: [debug]"]
  go-app:
    environment:
      INTERVAL: 2s
"""
# what runs without Docker Hub: profcol (the image above) and the apps built from Debian packages
LOCAL_SERVICES = ["profcol", "go-app", "node-app"]
COMPOSE_BUILD_TIMEOUT = 1200
APPS_TIMEOUT = 120
DEMO_IMAGES = ["profcol-demo-go-app", "profcol-demo-node-app"]   # the compose file's image names


class ComposeTest(unittest.TestCase):
    def compose_cmd(self):
        if ENGINE == "podman":
            return ["podman-compose"] if shutil.which("podman-compose") else None
        r = subprocess.run(["docker", "compose", "version"], capture_output=True)
        return ["docker", "compose"] if r.returncode == 0 else None

    def compose(self, *args, timeout=300, check=True):
        r = subprocess.run(self.base + list(args), capture_output=True, text=True,
                           timeout=timeout, env=self.env, stdin=subprocess.DEVNULL)
        if check and r.returncode != 0:
            raise AssertionError("%s: exit %d\n%s%s" % (" ".join(self.base + list(args)),
                                                        r.returncode, r.stdout[-4000:],
                                                        r.stderr[-4000:]))
        return r

    def service_container(self, service):
        r = engine("ps", "-a", "--filter", "label=com.docker.compose.project=" + self.project,
                   "--filter", "label=com.docker.compose.service=" + service,
                   "--format", "{{.Names}}")
        names = r.stdout.split()
        return names[0] if names else None

    def test_local_services(self):
        if os.environ.get("IMAGE_TEST_COMPOSE") == "0":
            self.skipTest("IMAGE_TEST_COMPOSE=0")
        cmd = self.compose_cmd()
        if not cmd:
            self.skipTest("no podman-compose (Debian package) / docker compose plugin")
        self.project = "profcol-image-test-%d" % os.getpid()
        tmp = tempfile.mkdtemp(prefix="profcol-compose-")
        self.addCleanup(shutil.rmtree, tmp, True)
        override = os.path.join(tmp, "override.yaml")
        with open(override, "w") as f:
            f.write(COMPOSE_OVERRIDE)
        self.base = cmd + ["-p", self.project, "-f", COMPOSE, "-f", override]
        # profcol's published ports on free host ports; podman build keeps the HEALTHCHECK
        # only in the docker image format
        self.env = dict(os.environ, BUILDAH_FORMAT="docker",
                        PROFCOL_PORT_OTLP=str(h.free_port()),
                        PROFCOL_PORT_INGEST=str(h.free_port()),
                        PROFCOL_PORT_HEALTH=str(h.free_port()),
                        PROFCOL_PORT_METRICS=str(h.free_port()))
        t = time.monotonic()
        r = self.compose("build", "go-app", "node-app", timeout=COMPOSE_BUILD_TIMEOUT)
        print("compose: demo apps built in %.0f s" % (time.monotonic() - t), file=sys.stderr)
        # podman-compose 1.0.3 exits 0 when a build fails: the images must be there
        for img in DEMO_IMAGES:
            self.assertEqual(engine("image", "inspect", img, check=False).returncode, 0,
                             "no image %s after compose build:\n%s%s"
                             % (img, r.stdout[-6000:], r.stderr[-3000:]))
        self.addCleanup(self.compose, "down", "-t", str(GRACE), timeout=120, check=False)
        self.compose("up", "-d", "--no-build", *LOCAL_SERVICES)
        names = {s: self.service_container(s) for s in LOCAL_SERVICES}
        self.assertTrue(all(names.values()), names)
        health = int(self.env["PROFCOL_PORT_HEALTH"])
        wait_healthy(health, names["profcol"])
        want = ["service.name=demo-go-app", "service.name=demo-node-app"]
        deadline = time.monotonic() + APPS_TIMEOUT
        text = ""
        while time.monotonic() < deadline:
            text = logs(names["profcol"])
            if all(w in text for w in want):
                break
            time.sleep(1)
        missing = [w for w in want if w not in text]
        self.assertFalse(missing, "profcol's log lacks %s after %d s\n--- profcol ---\n%s\n"
                         "--- go-app ---\n%s\n--- node-app ---\n%s"
                         % (missing, APPS_TIMEOUT, text, logs(names["go-app"]),
                            logs(names["node-app"])))
        # the apps' own functions, from the debug exporter's top-functions tables
        self.assertIn("main.", text)
        for s in ("go-app", "node-app"):
            self.assertEqual(inspect(names[s], "{{.State.Running}}"), "true", logs(names[s]))
        # SIGTERM to profcol as `down` sends it: exit 0 within the grace period
        c = Container.__new__(Container)
        c.name = names["profcol"]
        c.stop(self)
        self.compose("down", "-t", str(GRACE), timeout=120)
        left = [s for s in LOCAL_SERVICES if self.service_container(s)]
        self.assertFalse(left, "containers left after down: %s" % left)

if __name__ == "__main__":
    unittest.main(verbosity=2)
