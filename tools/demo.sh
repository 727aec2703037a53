#!/usr/bin/env bash
# profcol's offline demo, for machines without Docker: one command, everything on 127.0.0.1.
#
#   Go app (runtime/pprof) --/ingest--> sidecar profcol --OTLP+gzip--> gateway profcol --+--> debug exporter (top functions)
#                                        config/sidecar.yaml             config/demo.yaml  +--> recorder (OTLP JSON)
#                                                                                         +--> profilez (the live view)
#
# Builds profcol if needed (meson), builds the demo app (deploy/demo/go-app, Go standard library
# only, offline), starts a recording sink, the gateway and the sidecar on free 127.0.0.1 ports,
# lets the app profile itself and upload, waits until everything it sent has passed both
# profcols, prints the gateway's top-functions tables and ends on the live view: the gateway's
# profilez page (docs/profilez.md, the one flame graph profcol draws),
# whose URL it prints last. On a terminal (or with DEMO_STAY=1) the gateway stays up for it until
# Ctrl-C; otherwise (DEMO_STAY=0, tests, CI) both profcols stop (SIGTERM: flush and exit 0) once
# the URL is printed.
#
# Needs: meson + the build dependencies (tools/dev.sh installs them), golang-go, /usr/bin/python3.
# Environment:
#   PROFCOL_BIN     profcol binary to use (default: build/profcol, built or rebuilt first)
#   DEMO_OUT        output directory (default /tmp/profcol-demo): gateway.log,
#                   sidecar.log, app.log, recorded/ (the OTLP JSON bodies the gateway sent)
#   DEMO_UPLOADS    profiles the app uploads (default 2)
#   DEMO_INTERVAL   length of each profile (default 3s)
#   DEMO_KEEP=1     keep the temp dir (configs, queue, go build) and print its path
#   DEMO_STAY       1: keep the live view up until Ctrl-C (SIGINT or SIGTERM), 0: stop at the end
#                   (default: 1 when stdin and stderr are terminals)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=/usr/bin/python3
OUT=${DEMO_OUT:-/tmp/profcol-demo}
UPLOADS=${DEMO_UPLOADS:-2}
INTERVAL=${DEMO_INTERVAL:-3s}

if [ -t 2 ]; then
  say() { printf '\033[1mdemo:\033[0m %s\n' "$*" >&2; }
else
  say() { printf 'demo: %s\n' "$*" >&2; }
fi
die() {
  say "error: $*"
  exit 1
}

command -v go >/dev/null || die "Go is missing: apt-get install golang-go (tools/dev.sh test installs it)"
[ -x "$PY" ] || die "$PY is missing: apt-get install python3"

# ---- 1. profcol ----
if [ -n "${PROFCOL_BIN:-}" ]; then
  BIN=$PROFCOL_BIN
else
  if [ -d build ]; then
    meson compile -C build >&2 || die "build failed (meson compile -C build)"
  else
    { meson setup build && meson compile -C build; } >&2 || die "build failed; tools/dev.sh run installs the dependencies"
  fi
  BIN=$ROOT/build/profcol
fi
[ -x "$BIN" ] || die "no profcol binary at $BIN"

TMP=$(mktemp -d /tmp/profcol-demo-run.XXXXXX)
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do # only what this script started, by pid
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  if [ "${DEMO_KEEP:-0}" = 1 ]; then say "kept $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$OUT"
# only what an earlier run wrote: DEMO_OUT may be a directory with other things in it
rm -rf "$OUT/recorded"
rm -f "$OUT"/{gateway.log,sidecar.log,app.log,recorder.log}
mkdir "$OUT/recorded"

# ---- 2. the demo app (Go standard library, offline) ----
say "building the demo app (deploy/demo/go-app)"
# Go's build cache outlives the demo (the one the e2e tests share, tests/e2e/harness.py): a Go of
# 1.24 or later compiles the standard library into an empty cache, minutes on two loaded cores
GO111MODULE=off GOFLAGS="" GOPATH=$TMP/gopath \
  GOCACHE=${PROFCOL_E2E_GOCACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/profcol-e2e/go-build} \
  go build -o "$TMP/go-app" "$ROOT/deploy/demo/go-app/main.go" || die "go build failed"

# ---- 3. ports, recorder, gateway, sidecar ----
read -r G_OTLP G_PYRO G_HEALTH G_METRICS G_PROFILEZ S_OTLP S_PYRO S_HEALTH S_METRICS < <("$PY" -c '
import socket
socks = [socket.socket() for _ in range(9)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])')

wait_http() { # URL SECONDS PID: until URL answers 200, while PID lives
  "$PY" - "$@" <<'EOF'
import os, sys, time, urllib.request
url, limit, pid = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
end = time.time() + limit
while time.time() < end:
    try:
        os.kill(pid, 0)
    except OSError:
        sys.exit('process %d exited' % pid)
    try:
        with urllib.request.urlopen(url, timeout=1) as r:
            if r.status == 200:
                sys.exit(0)
    except Exception:
        pass
    time.sleep(0.1)
sys.exit('%s: no answer within %gs' % (url, limit))
EOF
}

"$PY" "$ROOT/deploy/demo/recorder.py" --dir "$OUT/recorded" --port-file "$TMP/recorder.port" \
  2>"$OUT/recorder.log" &
PIDS+=($!)
for _ in $(seq 100); do [ -s "$TMP/recorder.port" ] && break; sleep 0.05; done
[ -s "$TMP/recorder.port" ] || die "the recorder did not start (see $OUT/recorder.log)"
RECORDER_PORT=$(cat "$TMP/recorder.port")

say "gateway: config/demo.yaml on 127.0.0.1:$G_OTLP (OTLP) and :$G_PYRO (Pyroscope), log $OUT/gateway.log"
DEMO_GATEWAY_OTLP=127.0.0.1:$G_OTLP DEMO_GATEWAY_PYROSCOPE=127.0.0.1:$G_PYRO \
  DEMO_GATEWAY_HEALTH=127.0.0.1:$G_HEALTH DEMO_GATEWAY_METRICS=127.0.0.1:$G_METRICS \
  DEMO_GATEWAY_PROFILEZ=127.0.0.1:$G_PROFILEZ DEMO_RECORDER=http://127.0.0.1:$RECORDER_PORT \
  "$BIN" --config "$ROOT/config/demo.yaml" 2>"$OUT/gateway.log" &
GATEWAY=$!
PIDS+=("$GATEWAY")
wait_http "http://127.0.0.1:$G_HEALTH/" 15 "$GATEWAY" || die "the gateway did not start (see $OUT/gateway.log)"

# The sidecar runs config/sidecar.yaml as shipped; a second config file merged over it moves its
# receivers to free ports (a later file's maps merge key by key), the rest comes from environment.
cat >"$TMP/sidecar-demo.yaml" <<EOF
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:$S_OTLP
  pyroscope:
    endpoint: 127.0.0.1:$S_PYRO
EOF
say "sidecar: config/sidecar.yaml on 127.0.0.1:$S_PYRO (Pyroscope), forwarding to the gateway, log $OUT/sidecar.log"
POD_NAME=demo-pod-1 POD_NAMESPACE=demo NODE_NAME=$(hostname) \
  PROFCOL_GATEWAY=http://127.0.0.1:$G_OTLP PROFCOL_QUEUE_DIR=$TMP/queue \
  PROFCOL_HEALTH=127.0.0.1:$S_HEALTH PROFCOL_METRICS=127.0.0.1:$S_METRICS \
  "$BIN" --config "$ROOT/config/sidecar.yaml" --config "$TMP/sidecar-demo.yaml" 2>"$OUT/sidecar.log" &
SIDECAR=$!
PIDS+=("$SIDECAR")
wait_http "http://127.0.0.1:$S_HEALTH/" 15 "$SIDECAR" || die "the sidecar did not start (see $OUT/sidecar.log)"

# ---- 4. the profiled app ----
say "app: profiling itself, $UPLOADS upload(s) of $INTERVAL each to the sidecar's /ingest"
# GODEBUG=asyncpreemptoff=1: on some VMs (Firecracker among them) Go 1.19 attributes half of a
# busy program's CPU samples to runtime.asyncPreempt; the demo wants the app's own functions.
GODEBUG=asyncpreemptoff=1 PROFCOL_URL=http://127.0.0.1:$S_PYRO APP_NAME=demo-go-app \
  LABELS=env=demo,version=1.0 INTERVAL=$INTERVAL COUNT=$UPLOADS DUTY=0.5 \
  timeout 120 "$TMP/go-app" 2>"$OUT/app.log" || {
  cat "$OUT/app.log" >&2
  die "the app failed"
}
sed 's/^/  /' "$OUT/app.log" >&2

# ---- 5. wait until every accepted sample has left both profcols, then stop them ----
drained() { # METRICS_PORT EXPORTER: exporter sent >= receivers accepted > 0
  "$PY" - "$@" <<'EOF'
import re, sys, urllib.request
port, exporter = sys.argv[1], sys.argv[2]
text = urllib.request.urlopen('http://127.0.0.1:%s/metrics' % port, timeout=2).read().decode()
def total(pattern):
    return sum(float(v) for v in re.findall(r'^%s (\S+)$' % pattern, text, re.M))
accepted = total(r'otelcol_receiver_accepted_profile_samples\{[^}]*\}')
sent = total(r'otelcol_exporter_sent_profile_samples\{exporter="%s"\}' % re.escape(exporter))
sys.exit(0 if accepted > 0 and sent >= accepted else 1)
EOF
}
wait_drained() { # METRICS_PORT EXPORTER NAME
  for _ in $(seq 300); do
    drained "$1" "$2" 2>/dev/null && return 0
    sleep 0.1
  done
  die "$3: not everything was exported within 30 s (see $OUT/$3.log)"
}
wait_drained "$S_METRICS" otlphttp/gateway sidecar
wait_drained "$G_METRICS" otlphttp/recorder gateway

stop() { # PID NAME: SIGTERM, then it must exit 0 within 20 s
  kill -TERM "$1"
  local rc=0
  timeout 20 tail --pid="$1" -f /dev/null || die "$2 did not stop within 20 s"
  wait "$1" || rc=$?
  local keep=() pid
  for pid in "${PIDS[@]}"; do [ "$pid" = "$1" ] || keep+=("$pid"); done
  PIDS=("${keep[@]}") # reaped: never signal that pid again
  [ "$rc" = 0 ] || die "$2 exited with status $rc (see $OUT/$2.log)"
}
# ---- 6. what went through ----
stop "$SIDECAR" sidecar # everything it took has reached the gateway
wait_drained "$G_METRICS" debug gateway
say "the gateway's debug exporter (verbosity: detailed) printed:"
grep -E '^debug: ' "$OUT/gateway.log" || die "no debug output in $OUT/gateway.log"
say "$(find "$OUT/recorded" -name "*.json" | wc -l) OTLP request(s) recorded in $OUT/recorded"

# ---- 7. the live view: the gateway's profilez page, on the app's CPU ----
LIVE="http://127.0.0.1:$G_PROFILEZ/#service=demo-go-app&type=cpu%3Ananoseconds"
wait_http "http://127.0.0.1:$G_PROFILEZ/api/series" 15 "$GATEWAY" || die "no live view (see $OUT/gateway.log)"
STAY=${DEMO_STAY:-}
if [ -z "$STAY" ]; then
  if [ -t 0 ] && [ -t 2 ]; then STAY=1; else STAY=0; fi
fi
if [ "$STAY" = 1 ]; then
  say "live view (open it in a browser; Ctrl-C ends the demo): $LIVE"
  STOPPED=""
  trap 'STOPPED=1' INT TERM
  while [ -z "$STOPPED" ] && kill -0 "$GATEWAY" 2>/dev/null; do sleep 0.5; done
  trap 'exit 130' INT TERM
  stop "$GATEWAY" gateway
  say "stopped"
else
  stop "$GATEWAY" gateway
  say "live view (up while the demo ran; DEMO_STAY=1 keeps it up until Ctrl-C): $LIVE"
fi
