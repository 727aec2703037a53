#!/bin/bash
# Count the instructions profcol executes for a fixed relay workload, under valgrind's callgrind:
# the same binary and input give the same count whatever else runs on the machine, so two builds
# compare exactly where wall-clock and even CPU time are noisy.
#
#   bench/instructions.sh OLD_BUILD NEW_BUILD SCENARIO [--requests N]
#
# SCENARIO is one of run.sh's pipelines whose load is OTLP/HTTP: otlp-relay, otlp-relay-large,
# otlp-passthrough-large, otlp-decoded-large (only builds that know passthrough: false),
# small-flood, processors. The workload: N requests (default 20) from the
# scenario's payloads, one connection, one at a time (closed loop: every request is its own batch,
# so the work does not depend on timing), after start-up. Counting starts once profcol is up
# (callgrind --instr-atstart=no, switched on with callgrind_control) and stops before shutdown.
# Prints Ir (instructions) in total and per request for each build and the ratio new/old on
# stderr, then one JSON line. Valgrind runs the code paths its CPU model offers (ISA-L picks its
# AVX2 or SSE kernels under valgrind, where a real CPU may run AVX-512 ones).
set -u
cd "$(dirname "$0")/.."
[ $# -ge 3 ] || { echo "usage: bench/instructions.sh OLD_BUILD NEW_BUILD SCENARIO [--requests N]" >&2; exit 2; }
OLD=$1 NEW=$2 SCEN=$3
shift 3
N=20
while [ $# -gt 0 ]; do
    case "$1" in
    --requests) N=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
case "$N" in '' | *[!0-9]*) echo "--requests takes a count" >&2; exit 2 ;; esac
[ "$N" -ge 1 ] && [ "$N" -le 10000 ] || { echo "--requests: 1..10000" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 1; }
case "$SCEN" in
otlp-relay | small-flood) SET=otlp ;;
otlp-relay-large | otlp-passthrough-large | otlp-decoded-large | processors) SET=otlp-large ;;
*) echo "instructions.sh: $SCEN is not an OTLP/HTTP scenario" >&2; exit 2 ;;
esac
case "$SCEN" in
otlp-relay | otlp-relay-large) PROCS="[batch]" ;;
processors) PROCS="[resource, redaction, tracelink, batch]" ;;
*) PROCS="[]" ;;
esac
EXP_EXTRA=""
[ "$SCEN" = otlp-decoded-large ] && EXP_EXTRA="    passthrough: false"

BIN=$NEW/bench
[ -x "$BIN/loadgen" ] && [ -x "$BIN/sink" ] && [ -x "$BIN/mkpayloads" ] ||
    ninja -C "$NEW" bench/loadgen bench/sink bench/mkpayloads >&2 || exit 1
PL=$BIN/payloads
[ -f "$PL/otlp-large/manifest" ] || "$BIN/mkpayloads" tests/data "$PL" >&2 || exit 1

BASE=${BENCH_PORT_BASE:-24300}
P_OTLP=$BASE P_SINK=$((BASE + 2)) P_METRICS=$((BASE + 3))
TMP=$(mktemp -d /tmp/profcol-instr.XXXXXX)
PIDS=()
cleanup() {
    local i p
    for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do  # profcol before the sink
        p=${PIDS[$i]}
        kill -TERM "$p" 2>/dev/null || continue
        for _ in $(seq 1 300); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    PIDS=()
}
trap 'cleanup; [ -n "${KEEP_TMP:-}" ] || rm -rf "$TMP"' EXIT
trap 'exit 130' INT TERM

cat >"$TMP/profcol.yaml" <<YAML
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:$P_OTLP
processors:
  batch: {}
  resource:
    attributes:
      - {key: deployment.environment, value: bench, action: upsert}
      - {key: host.name, action: hash}
  redaction:
    blocked_symbols: ['.*payments.*']
    strip_path_prefixes: [/home/build/go/src/]
    blocked_keys: [password]
  tracelink: {}
exporters:
  otlphttp:
    endpoint: http://127.0.0.1:$P_SINK
$EXP_EXTRA
service:
  telemetry:
    logs:
      level: warn
    metrics:
      address: 127.0.0.1:$P_METRICS
  pipelines:
    profiles:
      receivers: [otlp]
      processors: $PROCS
      exporters: [otlphttp]
YAML

# Ir of one build: prints the total.
count() {
    local build=$1 tag=$2
    "$BIN/sink" --port "$P_SINK" --max-seconds 3600 >"$TMP/sink-$tag.out" 2>&1 &
    PIDS+=($!)
    UV_THREADPOOL_SIZE=2 valgrind --tool=callgrind --instr-atstart=no \
        --callgrind-out-file="$TMP/cg-$tag.out" "$build/profcol" --config "$TMP/profcol.yaml" \
        >"$TMP/profcol-$tag.log" 2>&1 &
    local pid=$!
    PIDS+=($pid)
    local up=0
    for _ in $(seq 1 600); do
        kill -0 "$pid" 2>/dev/null || break
        curl -s -o /dev/null "http://127.0.0.1:$P_METRICS/metrics" && { up=1; break; }
        sleep 0.1
    done
    [ $up = 1 ] || { echo "profcol ($tag) did not start:" >&2; cat "$TMP/profcol-$tag.log" >&2; return 1; }
    callgrind_control -i on "$pid" >"$TMP/cgc-$tag.log" 2>&1
    timeout 3000 "$BIN/loadgen" --url "http://127.0.0.1:$P_OTLP/v1development/profiles" \
        --payload "$PL/$SET" -H "Content-Type: application/x-protobuf" -H "Content-Encoding: gzip" \
        --connections 1 --requests "$N" --timeout-ms 600000 --label "$tag" >"$TMP/lg-$tag.out"
    callgrind_control -i off "$pid" >/dev/null
    cleanup
    local ok
    ok=$(tail -n 1 "$TMP/lg-$tag.out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["ok"])')
    [ "$ok" = "$N" ] || { echo "$tag: $ok of $N requests answered 2xx" >&2; return 1; }
    awk '/^totals:/ {print $2; exit}' "$TMP/cg-$tag.out"
}
IR_OLD=$(count "$OLD" old) || exit 1
IR_NEW=$(count "$NEW" new) || exit 1
python3 - "$SCEN" "$N" "$IR_OLD" "$IR_NEW" "$OLD" "$NEW" <<'PY'
import json, sys
scen, n, old, new, ob, nb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
print("%s, %d requests: Ir old %d (%d per request), new %d (%d per request), new/old %.3f"
      % (scen, n, old, old // n, new, new // n, new / old), file=sys.stderr)
print(json.dumps({"scenario": scen, "requests": n, "old": ob, "new": nb, "ir_old": old, "ir_new": new,
                  "ir_per_request_old": old // n, "ir_per_request_new": new // n,
                  "ratio": round(new / old, 4)}, separators=(",", ":")))
PY
