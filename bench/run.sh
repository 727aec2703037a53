#!/bin/bash
# Run one benchmark scenario end to end on 127.0.0.1 and print a table and ONE JSON line.
#
#   bench/run.sh SCENARIO [--seconds N] [--connections C] [--rate R] [--payloads DIR]
#                         [--build DIR] [--perf FILE]
#
# Scenarios: otlp-relay, otlp-relay-large, pyroscope-relay, bridge, processors, overload,
# kafka-relay.
# Environment: BENCH_BUILD (default build-bench: a release build of profcol), BENCH_PORT_BASE
# (default 24300: ports base+0..base+4), PROFCOL_EXTRA_ENV (e.g. "UV_THREADPOOL_SIZE=2").
#
# Steps: measure the zlib floor on the scenario's payloads (before anything else runs), start the
# sink and profcol (config written here), record profcol's idle RSS and CPU ticks, drive the load
# with loadgen, record CPU ticks and VmHWM, scrape profcol's /metrics and the sink's /stats, stop
# everything (SIGTERM, then SIGKILL after 10 s). Every process started here is killed on exit.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD

SCENARIO=${1:-}
[ -n "$SCENARIO" ] && shift
SECONDS_RUN=10
CONNS=""
RATE=""
PAYLOADS=""
BUILD=${BENCH_BUILD:-build-bench}
PERF_OUT=""
while [ $# -gt 0 ]; do
    case "$1" in
    --seconds) SECONDS_RUN=$2; shift 2 ;;
    --connections) CONNS=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --payloads) PAYLOADS=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --perf) PERF_OUT=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
case "$SECONDS_RUN" in '' | *[!0-9]*) echo "--seconds takes whole seconds" >&2; exit 2 ;; esac
[ "$SECONDS_RUN" -ge 1 ] && [ "$SECONDS_RUN" -le 600 ] || { echo "--seconds: 1..600" >&2; exit 2; }

BIN=$BUILD/bench
PROFCOL=$BUILD/profcol
[ -x "$PROFCOL" ] || { echo "no $PROFCOL: meson setup $BUILD -Dbuildtype=release && ninja -C $BUILD profcol" >&2; exit 1; }
if [ ! -x "$BIN/loadgen" ] || [ ! -x "$BIN/sink" ] || [ ! -x "$BIN/mkpayloads" ] || [ ! -x "$BIN/zlibfloor" ]; then
    bench/build.sh "$BUILD" >&2 || exit 1
fi
PL=$BIN/payloads
[ -f "$PL/otlp-large/manifest" ] || "$BIN/mkpayloads" tests/data "$PL" >&2 || exit 1

BASE=${BENCH_PORT_BASE:-24300}
P_OTLP=$BASE
P_PYRO=$((BASE + 1))
P_SINK=$((BASE + 2))
P_METRICS=$((BASE + 3))
P_METRICS2=$((BASE + 4))

OTLP_URL="http://127.0.0.1:$P_OTLP/v1development/profiles"
INGEST_URL="http://127.0.0.1:$P_PYRO/ingest?name=bench-go%7Benv%3Dbench%7D&format=pprof&spyName=gospy"
OTLP_HDRS=(-H "Content-Type: application/x-protobuf" -H "Content-Encoding: gzip")
PPROF_HDRS=(-H "Content-Type: application/octet-stream")

SINK_DELAY=0
KAFKA=0
LIMIT_MIB=0
MODE_CONNS=8
MODE_RATE=""
case "$SCENARIO" in
otlp-relay)
    # 128 clients: the batch processor acknowledges a request only once its flush is delivered,
    # so with few connections of small profiles the batch timeout (200ms), not the CPU, bounds it.
    SET=otlp; URL=$OTLP_URL; HDRS=("${OTLP_HDRS[@]}")
    PROCS="[batch]"; RECV="[otlp]"; EXP="[otlphttp]"; MODE_CONNS=128 ;;
otlp-relay-large)
    SET=otlp-large; URL=$OTLP_URL; HDRS=("${OTLP_HDRS[@]}")
    PROCS="[batch]"; RECV="[otlp]"; EXP="[otlphttp]" ;;
pyroscope-relay)
    SET=pprof; URL=$INGEST_URL; HDRS=("${PPROF_HDRS[@]}")
    PROCS="[]"; RECV="[pyroscope]"; EXP="[pyroscope]" ;;
bridge)
    SET=pprof; URL=$INGEST_URL; HDRS=("${PPROF_HDRS[@]}")
    PROCS="[]"; RECV="[pyroscope]"; EXP="[otlphttp]" ;;
processors)
    SET=otlp-large; URL=$OTLP_URL; HDRS=("${OTLP_HDRS[@]}")
    PROCS="[resource, redaction, tracelink, batch]"; RECV="[otlp]"; EXP="[otlphttp]" ;;
overload)
    # Offered load far above capacity (open loop, many connections) into a slow backend, with a
    # memory_limiter: profcol must refuse (503) rather than grow past the limit.
    SET=otlp-large; URL=$OTLP_URL; HDRS=("${OTLP_HDRS[@]}")
    PROCS="[memory_limiter, batch]"; RECV="[otlp]"; EXP="[otlphttp]"
    SINK_DELAY=200; LIMIT_MIB=${BENCH_LIMIT_MIB:-128}; MODE_CONNS=256; MODE_RATE=400 ;;
kafka-relay)
    # A sidecar producing to Kafka and a gateway consuming it: profcol (otlp -> batch -> kafka,
    # acks from every in-sync replica, lz4) -> librdkafka's mock broker (tests/e2e/kafka_mock,
    # 16 partitions) -> a second profcol (kafka -> otlphttp without a sending queue, so an offset is
    # committed only once the sink has the data) -> sink. The figures are the sidecar's; the
    # gateway's CPU, memory and how long it took to catch up are reported beside them.
    SET=otlp-large; URL=$OTLP_URL; HDRS=("${OTLP_HDRS[@]}")
    PROCS="[batch]"; RECV="[otlp]"; EXP="[kafka]"; KAFKA=1 ;;
*)
    echo "usage: bench/run.sh otlp-relay|otlp-relay-large|pyroscope-relay|bridge|processors|overload|kafka-relay [--seconds N]" >&2
    exit 2 ;;
esac
[ -n "$PAYLOADS" ] && SET_DIR=$PAYLOADS || SET_DIR=$PL/$SET
[ -n "$CONNS" ] && MODE_CONNS=$CONNS
[ -n "$RATE" ] && MODE_RATE=$RATE

TMP=$(mktemp -d /tmp/profcol-bench.XXXXXX)
PIDS=()
# Stop in reverse start order (profcol before the sink, so its final flush is delivered).
cleanup() {
    local i p
    for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
        p=${PIDS[$i]}
        kill -TERM "$p" 2>/dev/null || continue
        for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    PIDS=()
}
trap 'cleanup; if [ -n "${BENCH_KEEP:-}" ]; then echo "kept $TMP" >&2; else rm -rf "$TMP"; fi' EXIT
trap 'exit 130' INT TERM

KAFKA_EXPORTER=""
[ "$KAFKA" = 1 ] && KAFKA_EXPORTER='  kafka:
    brokers: ["${env:KAFKA_BROKERS}"]
    producer: {required_acks: -1, compression: lz4}'
cat >"$TMP/profcol.yaml" <<EOF
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:$P_OTLP
  pyroscope:
    endpoint: 127.0.0.1:$P_PYRO
processors:
  batch: {}
  memory_limiter:
    check_interval: 1s
    limit_mib: $LIMIT_MIB
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
  pyroscope:
    endpoint: http://127.0.0.1:$P_SINK
$KAFKA_EXPORTER
service:
  telemetry:
    logs:
      level: warn
    metrics:
      address: 127.0.0.1:$P_METRICS
  pipelines:
    profiles:
      receivers: $RECV
      processors: $PROCS
      exporters: $EXP
EOF
# Processors not in the pipeline must not be configured (a limit of 0 is invalid, for one).
python3 - "$TMP/profcol.yaml" "$PROCS" <<'EOF'
import re, sys
path, procs = sys.argv[1], sys.argv[2]
used = set(p.strip() for p in procs.strip("[]").split(",") if p.strip())
out, skip = [], False
in_procs = False
for line in open(path):
    if line.startswith("processors:"):
        in_procs = True
        out.append(line)
        continue
    if in_procs and re.match(r"^\S", line):
        in_procs = False
    if in_procs and re.match(r"^  \S", line):
        skip = line.strip().split(":")[0] not in used
    if in_procs and skip:
        continue
    out.append(line)
text = "".join(out)
if not used:
    text = text.replace("processors:\n", "", 1)
open(path, "w").write(text)
EOF

LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
echo "== scenario $SCENARIO: payloads $SET_DIR, ${SECONDS_RUN}s, load average before: $LOAD" >&2

# 1. zlib floor, alone on the machine (as far as this script is concerned).
FLOOR_S=$((SECONDS_RUN / 2))
[ "$FLOOR_S" -lt 2 ] && FLOOR_S=2
[ "$FLOOR_S" -gt 5 ] && FLOOR_S=5
timeout 60 "$BIN/zlibfloor" --payload "$SET_DIR" --seconds "$FLOOR_S" >"$TMP/floor.out" || { echo "zlibfloor failed" >&2; exit 1; }
cat "$TMP/floor.out" | sed '$d' >&2

# 2. sink and profcol (kafka-relay: the broker first, the gateway after the sidecar).
"$BIN/sink" --port "$P_SINK" --delay-ms "$SINK_DELAY" --max-seconds $((SECONDS_RUN + 120)) \
    >"$TMP/sink.out" 2>"$TMP/sink.err" &
PIDS+=($!)
SINK_PID=$!
KAFKA_BROKERS=""
if [ "$KAFKA" = 1 ]; then
    MOCK=$BUILD/tests/e2e/kafka_mock
    [ -x "$MOCK" ] || ninja -C "$BUILD" tests/e2e/kafka_mock >&2 || exit 1
    "$MOCK" --serve otlp_profiles:16 >"$TMP/kafka.out" 2>"$TMP/kafka.err" &
    PIDS+=($!)
    for _ in $(seq 1 100); do
        KAFKA_BROKERS=$(awk '/^bootstraps/ {print $2}' "$TMP/kafka.out")
        [ -n "$KAFKA_BROKERS" ] && break
        sleep 0.1
    done
    [ -n "$KAFKA_BROKERS" ] || { echo "kafka_mock did not start" >&2; exit 1; }
    cat >"$TMP/gateway.yaml" <<GWEOF
receivers:
  kafka:
    brokers: [$KAFKA_BROKERS]
    initial_offset: earliest
exporters:
  otlphttp:
    endpoint: http://127.0.0.1:$P_SINK
    sending_queue: {enabled: false}
service:
  telemetry:
    logs:
      level: warn
    metrics:
      address: 127.0.0.1:$P_METRICS2
  pipelines:
    profiles:
      receivers: [kafka]
      exporters: [otlphttp]
GWEOF
fi
env KAFKA_BROKERS="$KAFKA_BROKERS" ${PROFCOL_EXTRA_ENV:-} "$PROFCOL" --config "$TMP/profcol.yaml" \
    >"$TMP/profcol.log" 2>&1 &
PIDS+=($!)
PC_PID=$!
GW_PID=""
if [ "$KAFKA" = 1 ]; then
    env ${PROFCOL_EXTRA_ENV:-} "$PROFCOL" --config "$TMP/gateway.yaml" >"$TMP/gateway.log" 2>&1 &
    PIDS+=($!)
    GW_PID=$!
fi
up=0
for _ in $(seq 1 100); do
    kill -0 "$PC_PID" 2>/dev/null || break
    if curl -s -o /dev/null "http://127.0.0.1:$P_METRICS/metrics" && curl -s -o /dev/null "http://127.0.0.1:$P_SINK/stats"; then
        up=1
        break
    fi
    sleep 0.1
done
if [ "$up" != 1 ]; then
    if grep -q "not implemented yet" "$TMP/profcol.log"; then
        reason=$(grep -m1 "not implemented yet" "$TMP/profcol.log" | tr -d '"\\')
        echo "scenario $SCENARIO SKIPPED: $reason" >&2
        printf '{"scenario":"%s","skipped":true,"reason":"%s"}\n' "$SCENARIO" "$reason"
        exit 0
    fi
    echo "profcol did not start:" >&2
    cat "$TMP/profcol.log" >&2
    exit 1
fi
sleep 0.5
IDLE_RSS_KB=$(awk '/^VmRSS:/ {print $2}' "/proc/$PC_PID/status")
ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }
CPU0=$(ticks "$PC_PID")
[ -n "$GW_PID" ] && GW_CPU0=$(ticks "$GW_PID")

PERF_PID=""
if [ -n "$PERF_OUT" ]; then
    perf record -e cpu-clock -F 499 --call-graph dwarf,16384 -p "$PC_PID" -o "$PERF_OUT" -- sleep "$SECONDS_RUN" \
        >"$TMP/perf.log" 2>&1 &
    PERF_PID=$!
    PIDS+=($PERF_PID)
fi

# Sample RSS while the load runs (VmHWM has the peak; this adds the time series maximum of VmRSS
# and lets overload show how close to the limit it ran).
(
    for _ in $(seq 1 $((SECONDS_RUN * 10 + 100))); do
        awk '/^VmRSS:/ {print $2}' "/proc/$PC_PID/status" 2>/dev/null || break
        sleep 0.1
    done
) >"$TMP/rss.series" &
PIDS+=($!)
RSS_PID=$!

# 3. load.
LG_ARGS=(--url "$URL" --payload "$SET_DIR" "${HDRS[@]}" --connections "$MODE_CONNS"
         --seconds "$SECONDS_RUN" --timeout-ms 30000 --label "$SCENARIO")
[ -n "$MODE_RATE" ] && LG_ARGS+=(--rate "$MODE_RATE" --max-inflight "$MODE_CONNS")
timeout $((SECONDS_RUN + 60)) "$BIN/loadgen" "${LG_ARGS[@]}" >"$TMP/loadgen.out"
sed '$d' "$TMP/loadgen.out" >&2

CPU1=$(ticks "$PC_PID")
HWM_KB=$(awk '/^VmHWM:/ {print $2}' "/proc/$PC_PID/status")
kill "$RSS_PID" 2>/dev/null
[ -n "$PERF_PID" ] && wait "$PERF_PID" 2>/dev/null
curl -s "http://127.0.0.1:$P_METRICS/metrics" >"$TMP/metrics.txt"
GW_JSON="{}"
if [ -n "$GW_PID" ]; then
    # the gateway catches up: everything the broker acknowledged to the sidecar arrives
    metric() { curl -s "http://127.0.0.1:$1/metrics" | awk -v n="$2" '$1 == n || index($1, n "{") == 1 {s += $NF} END {printf "%d", s}'; }
    SENT=0; GOT=0; T0=$(date +%s%N)
    for i in $(seq 1 600); do
        SENT=$(metric "$P_METRICS" otelcol_exporter_sent_profile_samples)
        GOT=$(metric "$P_METRICS2" otelcol_receiver_accepted_profile_samples)
        QUEUED=$(metric "$P_METRICS" otelcol_exporter_queue_size)
        [ "$GOT" -ge "$SENT" ] && [ "$QUEUED" = 0 ] && break
        [ $((i % 50)) = 0 ] && echo "gateway catching up: sidecar sent $SENT samples ($QUEUED requests queued), gateway accepted $GOT" >&2
        sleep 0.1
    done
    curl -s "http://127.0.0.1:$P_METRICS2/metrics" >"$TMP/gateway-metrics.txt"
    CATCH_UP_MS=$((($(date +%s%N) - T0) / 1000000))
    GW_CPU1=$(ticks "$GW_PID")
    GW_HWM_KB=$(awk '/^VmHWM:/ {print $2}' "/proc/$GW_PID/status")
    GW_JSON=$(printf '{"cpu_ticks":%d,"hwm_kb":%d,"catch_up_ms":%d,"sent":%d,"accepted":%d}' \
        $((GW_CPU1 - GW_CPU0)) "$GW_HWM_KB" "$CATCH_UP_MS" "$SENT" "$GOT")
fi
curl -s "http://127.0.0.1:$P_SINK/stats" >"$TMP/sink.json"
cleanup
if [ -s "$TMP/profcol.log" ]; then
    echo "profcol log (warn and above), first lines:" >&2
    head -n 5 "$TMP/profcol.log" | cut -c1-300 >&2
fi
if [ -s "$TMP/gateway.log" ]; then
    echo "gateway log (warn and above), first lines:" >&2
    head -n 5 "$TMP/gateway.log" | cut -c1-300 >&2
fi
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

python3 - "$SCENARIO" "$TMP" "$CPU0" "$CPU1" "$(getconf CLK_TCK)" "$HWM_KB" "$IDLE_RSS_KB" \
    "$LIMIT_MIB" "$LOAD" "$LOAD_AFTER" "$(nproc)" "$GW_JSON" <<'EOF'
import json, re, sys
(scen, tmp, cpu0, cpu1, hz, hwm, idle, limit, load0, load1, ncpu, gw) = sys.argv[1:]
gw = json.loads(gw)
lg = json.loads(open(tmp + "/loadgen.out").read().strip().splitlines()[-1])
fl = json.loads(open(tmp + "/floor.out").read().strip().splitlines()[-1])
try:
    sink = json.loads(open(tmp + "/sink.json").read())
except Exception:
    sink = {"requests": 0, "bytes": 0}
metrics = {}
for line in open(tmp + "/metrics.txt"):
    m = re.match(r"^([a-zA-Z_:]+)(\{[^}]*\})?\s+([0-9.eE+-]+)$", line.strip())
    if m:
        metrics[m.group(1)] = metrics.get(m.group(1), 0) + float(m.group(3))
rss = [int(x) for x in open(tmp + "/rss.series").read().split() if x.isdigit()]
secs = lg["seconds"]
cpu_s = (int(cpu1) - int(cpu0)) / int(hz)
gb_in = lg["bytes_ok"] / 1e9
mb_in = lg["mb_per_s_ok"]
floor = fl["mb_per_s_in"]
errors = lg["non_2xx"] + lg["transport_errors"]
r = {
    "scenario": scen,
    "profiles_per_s": round(lg["profiles_per_s"], 2),
    "samples_per_s": round(lg["samples_per_s"], 1),
    "requests_per_s": round(lg["ok_per_s"], 2),
    "mb_per_s_in": round(mb_in, 4),
    "mb_per_s_out": round(sink.get("bytes", 0) / secs / 1e6, 4),
    "p50_ms": lg["p50_ms"], "p90_ms": lg["p90_ms"], "p99_ms": lg["p99_ms"], "max_ms": lg["max_ms"],
    "errors": errors, "non_2xx": lg["non_2xx"], "transport_errors": lg["transport_errors"],
    "statuses": lg["statuses"],
    "peak_rss_mb": round(int(hwm) / 1024, 1),
    "idle_rss_mb": round(int(idle) / 1024, 1),
    "max_sampled_rss_mb": round(max(rss) / 1024, 1) if rss else None,
    "cpu_s": round(cpu_s, 2),
    "cpu_util": round(cpu_s / secs, 3),
    "cpu_s_per_gb": round(cpu_s / gb_in, 1) if gb_in > 0 else None,
    "zlib_floor_mb_per_s": round(floor, 4),
    "zlib_floor_cpu_s_per_gb": fl.get("cpu_s_per_gb"),
    "ratio": round(mb_in / floor, 3) if floor > 0 else None,
    "cpu_ratio": round(fl["cpu_s_per_gb"] / (cpu_s / gb_in), 3) if gb_in > 0 and cpu_s > 0 and fl.get("cpu_s_per_gb") else None,
    "connections": lg["connections"], "offered_rate": lg["rate"], "seconds": secs,
    "sink_requests": sink.get("requests", 0),
    "receiver_accepted_samples": metrics.get("otelcol_receiver_accepted_profile_samples"),
    "receiver_refused_samples": metrics.get("otelcol_receiver_refused_profile_samples"),
    "exporter_sent_samples": metrics.get("otelcol_exporter_sent_profile_samples"),
    "loadavg_before": load0, "loadavg_after": load1, "nproc": int(ncpu),
}
if int(limit) > 0:
    r["memory_limit_mib"] = int(limit)
    r["peak_rss_within_limit"] = int(hwm) / 1024 <= int(limit)
if gw:
    kafka = {}
    for line in open(tmp + "/metrics.txt"):
        m = re.match(r'^otelcol_kafka_exporter_records\{.*outcome="(\w+)".*\}\s+([0-9.eE+-]+)$', line)
        if m:
            kafka[m.group(1)] = kafka.get(m.group(1), 0) + float(m.group(2))
    r.update({
        "kafka_messages": int(kafka.get("success", 0)),
        "kafka_messages_failed": int(kafka.get("failure", 0)),
        "gateway_cpu_s": round(gw["cpu_ticks"] / int(hz), 2),
        "gateway_cpu_s_per_gb": round(gw["cpu_ticks"] / int(hz) / gb_in, 1) if gb_in > 0 else None,
        "gateway_peak_rss_mb": round(gw["hwm_kb"] / 1024, 1),
        "gateway_catch_up_s": round(gw["catch_up_ms"] / 1000, 2),
        "gateway_accepted_samples": gw["accepted"],
        "delivered_all": gw["accepted"] >= gw["sent"] > 0,
    })
rows = [
    ("profiles/s", r["profiles_per_s"]), ("samples/s", r["samples_per_s"]),
    ("requests/s (2xx)", r["requests_per_s"]), ("MB/s in (compressed)", r["mb_per_s_in"]),
    ("MB/s out (to sink)", r["mb_per_s_out"]),
    ("latency p50 / p99 ms", "%s / %s" % (r["p50_ms"], r["p99_ms"])),
    ("errors (non-2xx, transport)", "%d (%d, %d)" % (errors, lg["non_2xx"], lg["transport_errors"])),
    ("peak RSS MB (VmHWM)", r["peak_rss_mb"]), ("idle RSS MB", r["idle_rss_mb"]),
    ("profcol CPU s (util)", "%s (%s)" % (r["cpu_s"], r["cpu_util"])),
    ("CPU s per GB in", r["cpu_s_per_gb"]),
    ("zlib floor MB/s (%d thr)" % fl["threads"], r["zlib_floor_mb_per_s"]),
    ("zlib floor CPU s per GB", r["zlib_floor_cpu_s_per_gb"]),
    ("ratio (MB/s in / floor)", r["ratio"]), ("cpu_ratio (floor/profcol CPU/GB)", r["cpu_ratio"]),
    ("load average before / after", "%s / %s" % (load0, load1)),
]
if gw:
    rows += [("kafka messages (failed)", "%d (%d)" % (r["kafka_messages"], r["kafka_messages_failed"])),
             ("gateway CPU s (s per GB in)", "%s (%s)" % (r["gateway_cpu_s"], r["gateway_cpu_s_per_gb"])),
             ("gateway peak RSS MB", r["gateway_peak_rss_mb"]),
             ("gateway caught up after s", r["gateway_catch_up_s"]),
             ("delivered all (gateway accepted >= sent)", r["delivered_all"])]
if int(limit) > 0:
    rows.append(("memory limit MiB", limit))
    rows.append(("refused (503/429)", lg["statuses"].get("503", 0) + lg["statuses"].get("429", 0)))
print("scenario %s" % scen, file=sys.stderr)
for k, v in rows:
    print("  %-34s %s" % (k, v), file=sys.stderr)
print(json.dumps(r, separators=(",", ":")))
EOF
