#!/bin/bash
# What a request waiting in the sending queue holds: profcol (otlp -> otlphttp, no processor, so
# each request passes through as received) exports to a closed port, so every request it accepts
# stays queued (retrying); the load generator sends N small requests (the otlp set: 1.3-3.5 KB
# gzip, 2.2-8.5 KB inflated) and the resident memory they added is divided by N. The baseline,
# printed beside it: the bytes a pass-through request cannot do without, its gzip body (sent as
# received) and its inflated bytes (checked, and decoded if a later step needs the model).
#
# Usage: bench/queued.sh [--requests N] [--payloads DIR] [PROFCOL_BINARY ...]
# (default binary: $BENCH_BUILD/profcol; several: one line each, in the order given)
# Environment: BENCH_BUILD (default build-bench), BENCH_PORT_BASE (default 24300: the receiver's).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BENCH_BUILD:-build-bench}
N=2000
PAYLOADS=$BUILD/bench/payloads/otlp
BINS=()
while [ $# -gt 0 ]; do
    case "$1" in
    --requests) N=$2; shift 2 ;;
    --payloads) PAYLOADS=$2; shift 2 ;;
    -*) echo "usage: bench/queued.sh [--requests N] [--payloads DIR] [PROFCOL_BINARY ...]" >&2; exit 2 ;;
    *) BINS+=("$1"); shift ;;
    esac
done
[ ${#BINS[@]} -eq 0 ] && BINS=("$BUILD/profcol")
[ -x "$BUILD/bench/loadgen" ] || { echo "no $BUILD/bench/loadgen: build $BUILD first" >&2; exit 1; }
BASE=${BENCH_PORT_BASE:-24300}
P_OTLP=$BASE
TMP=$(mktemp -d /tmp/profcol-queued.XXXXXX)
PID=""
trap '[ -n "$PID" ] && kill $PID 2>/dev/null; rm -rf "$TMP"' EXIT

# the baseline: mean gzip and inflated bytes of the set (the load generator sends them in turn)
FLOOR=$(cd "$PAYLOADS" && for f in $(awk '{print $1}' manifest); do
    echo "$(stat -c %s "$f") $(gzip -dc "$f" | wc -c)"; done |
    awk '{z += $1; r += $2; n++} END {printf "%.2f %.2f", z / n / 1024, r / n / 1024}')

cat >"$TMP/profcol.yaml" <<EOF
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:$P_OTLP
exporters:
  otlphttp:
    endpoint: http://127.0.0.1:1
    sending_queue:
      queue_size: $((N + 100))
    retry_on_failure:
      initial_interval: 60s
      max_interval: 60s
      max_elapsed_time: 0
service:
  telemetry:
    logs:
      level: error
    metrics:
      level: none
  pipelines:
    profiles:
      receivers: [otlp]
      exporters: [otlphttp]
EOF

rss() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
printf '%-40s %9s %9s %9s %12s %12s %8s\n' binary requests rss0_kb rss1_kb kb_per_req floor_kb ratio
for bin in "${BINS[@]}"; do
    "$bin" --config "$TMP/profcol.yaml" >"$TMP/profcol.log" 2>&1 &
    PID=$!
    for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$P_OTLP/" && break; sleep 0.1; done
    r0=$(rss $PID)
    "$BUILD/bench/loadgen" --url "http://127.0.0.1:$P_OTLP/v1development/profiles" --payload "$PAYLOADS" \
        --header "Content-Type: application/x-protobuf" --header "Content-Encoding: gzip" \
        --connections 8 --requests "$N" --quiet >"$TMP/loadgen.json"
    ok=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ok"])' "$TMP/loadgen.json")
    sleep 1
    r1=$(rss $PID)
    kill $PID; wait $PID 2>/dev/null || true; PID=""
    [ "$ok" = "$N" ] || { echo "$bin: only $ok of $N requests accepted" >&2; cat "$TMP/profcol.log" >&2; exit 1; }
    python3 - "$bin" "$ok" "$r0" "$r1" "$N" $FLOOR <<'EOF'
import sys
b, q, r0, r1, n, z, r = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6]), float(sys.argv[7])
per = (r1 - r0) / n
print("%-40s %9d %9d %9d %12.2f %12.2f %8.2f" % (b[-40:], q, r0, r1, per, z + r, per / (z + r)))
EOF
done
