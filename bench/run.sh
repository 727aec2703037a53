#!/bin/bash
# Run one benchmark scenario end to end on 127.0.0.1 and print a table and ONE JSON line.
#
#   bench/run.sh SCENARIO [--seconds N] [--connections C] [--rate R] [--payloads DIR]
#                         [--build DIR] [--profcol BINARY] [--threads T] [--cpus N] [--perf FILE]
#                         [--no-floor]
#                         [--profilez [--viewer old|new]]
#
# Scenarios: otlp-relay, otlp-relay-large, otlp-passthrough-large, otlp-decoded-large, small-flood,
# pyroscope-relay, bridge, processors, overload, jfr-relay, fleet, kafka-relay, collector-relay,
# collector-relay-small, otlp-relay-neighbours.
# Environment: BENCH_BUILD (default build-bench: a release build of profcol, whose bench/ tools
# are used), BENCH_PROFCOL (the profcol binary, default BUILD/profcol: compare.sh runs an older
# one with the same tools), BENCH_PORT_BASE (default 24300: ports base+0..base+4; neighbours also
# base+6..base+9; fleet also
# base+10..base+15, kafka-relay base+5), BENCH_KEEP (keep the temp dir), PROFCOL_EXTRA_ENV
# (e.g. "UV_THREADPOOL_SIZE=2"; --threads T sets it, and GOMAXPROCS for the Collector),
# BENCH_NEIGHBOURS (otlp-relay-neighbours: whose clients run, default "dead slow"),
# BENCH_COLLECTOR (the Collector binary of collector-relay, default the peer tools/peers.sh builds).
# --cpus N: profcol (or the Collector) and the floors on the last N CPUs of this script's affinity
# mask, and everything else (load generator, sink, gateways, broker, viewer) on the others, as the
# issue 27 scaling runs placed them; profcol sizes its pool to those CPUs (docs/sizing.md) and
# the floors run one thread per CPU.
# --profilez: the same relay with the profilez extension (port base+4) aggregating everything,
# and a viewer polling its JSON as the page does every 3 s (bench/profilez_viewer.py; --viewer new,
# the default: the live view's timeline, labels, group-by, label filter, top with focus and
# search, a time-range diff; --viewer old: series, flame graph and top, as the first page did).
#
# Steps: measure the zlib and ISA-L floors on the scenario's payloads (before anything else runs), start the
# sink and profcol (config written here), record profcol's idle RSS and CPU ticks, drive the load
# with loadgen, record CPU ticks and VmHWM, scrape profcol's /metrics and the sink's /stats, stop
# everything (SIGTERM, then SIGKILL after 10 s). Every process started here is killed on exit.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD

SCENARIO=${1:-}
[ -n "$SCENARIO" ] && shift
# symbolize (issue 23): three phases (baseline, cold, warm) and a binary built for it, in its own
# script; it takes --seconds, --connections, --build and --profcol
[ "$SCENARIO" = symbolize ] && exec python3 bench/symbolize.py "$@"
SECONDS_RUN=10
CONNS=""
RATE=""
PAYLOADS=""
BUILD=${BENCH_BUILD:-build-bench}
PROFCOL=${BENCH_PROFCOL:-}
PERF_OUT=""
PROFILEZ=0
VIEWER=new
FLOOR=1
CPUS_N=""
while [ $# -gt 0 ]; do
    case "$1" in
    --seconds) SECONDS_RUN=$2; shift 2 ;;
    --connections) CONNS=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --payloads) PAYLOADS=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --perf) PERF_OUT=$2; shift 2 ;;
    --profilez) PROFILEZ=1; shift ;;
    --viewer) VIEWER=$2; shift 2 ;;
    --profcol) PROFCOL=$2; shift 2 ;;
    --threads) PROFCOL_EXTRA_ENV="${PROFCOL_EXTRA_ENV:-} UV_THREADPOOL_SIZE=$2 GOMAXPROCS=$2"; shift 2 ;;
    --cpus) CPUS_N=$2; shift 2 ;;
    --no-floor) FLOOR=0; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
case "$SECONDS_RUN" in '' | *[!0-9]*) echo "--seconds takes whole seconds" >&2; exit 2 ;; esac
[ "$SECONDS_RUN" -ge 1 ] && [ "$SECONDS_RUN" -le 600 ] || { echo "--seconds: 1..600" >&2; exit 2; }
case "$VIEWER" in old | new) ;; *) echo "--viewer: old or new" >&2; exit 2 ;; esac
# ON_PC / ON_REST: the command prefixes that place a process with --cpus (empty without it)
ON_PC=()
ON_REST=()
if [ -n "$CPUS_N" ]; then
    mapfile -t ALL_CPUS < <(python3 -c 'import os; print("\n".join(map(str, sorted(os.sched_getaffinity(0)))))')
    case "$CPUS_N" in '' | *[!0-9]*) echo "--cpus takes a whole number" >&2; exit 2 ;; esac
    [ "$CPUS_N" -ge 1 ] && [ "$CPUS_N" -lt "${#ALL_CPUS[@]}" ] ||
        { echo "--cpus: 1..$((${#ALL_CPUS[@]} - 1)) (the rest run the load)" >&2; exit 2; }
    split=$((${#ALL_CPUS[@]} - CPUS_N))
    PC_CPUS=$(IFS=,; echo "${ALL_CPUS[*]:$split}")
    REST_CPUS=$(IFS=,; echo "${ALL_CPUS[*]:0:$split}")
    ON_PC=(taskset -c "$PC_CPUS")
    ON_REST=(taskset -c "$REST_CPUS")
    export BENCH_PC_CPUS=$PC_CPUS # for the JSON's profcol_cpus
    echo "--cpus $CPUS_N: profcol and the floors on CPU(s) $PC_CPUS, the rest on $REST_CPUS" >&2
fi

BIN=$BUILD/bench
[ -n "$PROFCOL" ] || PROFCOL=$BUILD/profcol
[ -x "$PROFCOL" ] || { echo "no $PROFCOL: meson setup $BUILD -Dbuildtype=release && ninja -C $BUILD" >&2; exit 1; }
if [ ! -x "$BIN/loadgen" ] || [ ! -x "$BIN/sink" ] || [ ! -x "$BIN/mkpayloads" ] || [ ! -x "$BIN/codecs" ]; then
    ninja -C "$BUILD" bench/loadgen bench/sink bench/mkpayloads bench/codecs >&2 || exit 1
fi
PL=$BIN/payloads
[ -f "$PL/otlp-large/manifest" ] || "$BIN/mkpayloads" tests/data "$PL" >&2 || exit 1
# jfr-relay's payloads: two real JDK 17 recordings of tests/data/gen/jfr/JfrLoad.java (5 s, one
# chunk; 5 s, several chunks), made once (the JDK is needed only here)
if [ "$SCENARIO" = jfr-relay ] && [ ! -f "$PL/jfr/manifest" ]; then
    JT=$(mktemp -d /tmp/profcol-bench-jfr.XXXXXX)
    if ! tests/data/gen/jfr/record.sh --seconds 5 "$JT/jdk17-5s.jfr" >&2 ||
        ! tests/data/gen/jfr/record.sh --seconds 5 --rotate "$JT/jdk17-5s-chunks.jfr" >&2; then
        rm -rf "$JT"
        echo "scenario jfr-relay SKIPPED: no JDK to record with (openjdk-17-jdk-headless)" >&2
        printf '{"scenario":"jfr-relay","skipped":true,"reason":"no JDK to record with"}\n'
        exit 0
    fi
    "$BIN/mkpayloads" --jfr "$PL/jfr" "$JT"/*.jfr >&2 || { rm -rf "$JT"; exit 1; }
    rm -rf "$JT"
fi

BASE=${BENCH_PORT_BASE:-24300}
P_OTLP=$BASE
P_PYRO=$((BASE + 1))
P_SINK=$((BASE + 2))
P_METRICS=$((BASE + 3))
P_PROFILEZ=$((BASE + 4))
P_NB_DEAD=$((BASE + 6)) P_NB_SLOW=$((BASE + 7)) P_NB_SINK=$((BASE + 8)) P_NB_GONE=$((BASE + 9))
P_METRICS2=$((BASE + 5)) # kafka-relay's gateway

OTLP_URL="http://127.0.0.1:$P_OTLP/v1development/profiles"
INGEST_URL="http://127.0.0.1:$P_PYRO/ingest?name=bench-go%7Benv%3Dbench%7D&format=pprof&spyName=gospy"
JFR_URL="http://127.0.0.1:$P_PYRO/ingest?name=bench-java%7Benv%3Dbench%7D&units=samples&aggregationType=sum&spyName=javaspy&sampleRate=100&format=jfr"
OTLP_HDRS=(-H "Content-Type: application/x-protobuf" -H "Content-Encoding: gzip")
PPROF_HDRS=(-H "Content-Type: application/octet-stream")
JFR_HDRS=(-H "Content-Type: application/octet-stream" -H "Content-Encoding: gzip")

SINK_DELAY=0
FLEET=0
COLLECTOR=0
KAFKA=0
LIMIT_MIB=0
OTLP_EXP_EXTRA=""
MODE_CONNS=8
MODE_RATE=""
NEIGHBOURS=0
case "$SCENARIO" in
otlp-relay-neighbours)
    # otlp-relay's pipeline beside two more, each with its own receiver and otlphttp exporter
    # and clients at 100 requests/s: one to a closed port, one to a sink answering 500 ms late
    # (healthy but slow: its backlog grows past a round of sends and presses the decode gate,
    # sdk/pool.h). Both queues fill and their clients are refused; what is measured is the first
    # pipeline, to compare with otlp-relay run alone.
    SET=otlp; URL=$OTLP_URL; HDRS=("${OTLP_HDRS[@]}")
    PROCS="[batch]"; RECV="[otlp]"; EXP="[otlphttp]"; MODE_CONNS=128; NEIGHBOURS=1 ;;
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
otlp-passthrough-large)
    # otlp-relay-large without batch: nothing changes the data, so the validated request bytes
    # go to the sink as received (pass-through); compare with otlp-relay-large.
    SET=otlp-large; URL=$OTLP_URL; HDRS=("${OTLP_HDRS[@]}")
    PROCS="[]"; RECV="[otlp]"; EXP="[otlphttp]" ;;
otlp-decoded-large)
    # otlp-passthrough-large with the exporter's passthrough: false: the decoded path (decode,
    # validate, encode, deflate) on the same pipeline, the "without" of pass-through.
    SET=otlp-large; URL=$OTLP_URL; HDRS=("${OTLP_HDRS[@]}")
    PROCS="[]"; RECV="[otlp]"; EXP="[otlphttp]"; OTLP_EXP_EXTRA="    passthrough: false" ;;
small-flood)
    # 64 connections of small OTLP requests (1.3-3.5 KB) flat out into a fast sink, one export per
    # request: profcol should accept up to CPU saturation and refuse nothing (refused share) while
    # the exporter's sends in flight keep up: one connection per sending-queue consumer (10 by
    # default; 8 before issue 27's fifth pass, when they were the limit, bench/README.md).
    SET=otlp; URL=$OTLP_URL; HDRS=("${OTLP_HDRS[@]}")
    PROCS="[]"; RECV="[otlp]"; EXP="[otlphttp]"; MODE_CONNS=64 ;;
processors)
    SET=otlp-large; URL=$OTLP_URL; HDRS=("${OTLP_HDRS[@]}")
    PROCS="[resource, redaction, tracelink, batch]"; RECV="[otlp]"; EXP="[otlphttp]" ;;
fleet)
    # A sidecar in front of 3 gateway profcols (OTLP/gRPC -> otlphttp -> sink), measured twice in
    # one run: the sidecar's loadbalancing exporter (routing_key traceID over the 3 gateways),
    # then a plain otlp exporter relaying to one gateway. Both sidecars run tracelink first, so
    # the payloads' trace_id/span_id labels (1 sample in 8) become links and the loadbalancing
    # sidecar splits most batches over the three gateways (the rest of a batch goes by service).
    # What is measured is the sidecar's CPU per GB and samples/s.
    SET=otlp-large; URL=$OTLP_URL; HDRS=("${OTLP_HDRS[@]}")
    PROCS="[tracelink]"; RECV="[otlp]"; EXP="[otlphttp]"; FLEET=1 ;;
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
collector-relay | collector-relay-small)
    # The relay of otlp-relay-large (or, -small, of otlp-relay: 1.3-3.5 KB requests on 128
    # connections) run twice in one invocation, on the same payloads, load generator and sink:
    # through profcol, then through the real OpenTelemetry Collector (the release and build the
    # peer tests use, tests/peers/otelcol), both otlp -> batch -> OTLP/HTTP exporter with their
    # defaults (the Collector batches in its exporter: below). The figures of both stand in one
    # table with profcol's ratios to the Collector.
    SET=otlp-large; URL=$OTLP_URL; HDRS=("${OTLP_HDRS[@]}")
    [ "$SCENARIO" = collector-relay-small ] && { SET=otlp; MODE_CONNS=128; }
    PROCS="[batch]"; RECV="[otlp]"; EXP="[otlphttp]"; COLLECTOR=1 ;;
jfr-relay)
    # The Java agent's uploads: JFR in (gzip, as the agent compresses its jfr part), OTLP out.
    SET=jfr; URL=$JFR_URL; HDRS=("${JFR_HDRS[@]}")
    PROCS="[]"; RECV="[pyroscope]"; EXP="[otlphttp]" ;;
*)
    echo "usage: bench/run.sh otlp-relay|otlp-relay-large|otlp-passthrough-large|otlp-decoded-large|small-flood|pyroscope-relay|bridge|processors|overload|jfr-relay|fleet|kafka-relay|collector-relay|collector-relay-small|symbolize [--seconds N]" >&2
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

NB_RECV="" NB_EXP="" NB_PIPES=""
if [ "$NEIGHBOURS" = 1 ]; then
    NB_RECV="  otlp/dead:
    protocols: {http: {endpoint: 127.0.0.1:$P_NB_DEAD}}
  otlp/slow:
    protocols: {http: {endpoint: 127.0.0.1:$P_NB_SLOW}}"
    NB_EXP="  otlphttp/dead:
    endpoint: http://127.0.0.1:$P_NB_GONE
  otlphttp/slow:
    endpoint: http://127.0.0.1:$P_NB_SINK"
    NB_PIPES="    profiles/dead: {receivers: [otlp/dead], exporters: [otlphttp/dead]}
    profiles/slow: {receivers: [otlp/slow], exporters: [otlphttp/slow]}"
fi
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
$NB_RECV
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
$OTLP_EXP_EXTRA
  pyroscope:
    endpoint: http://127.0.0.1:$P_SINK
$KAFKA_EXPORTER
$NB_EXP
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
$NB_PIPES
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

if [ "$PROFILEZ" = 1 ]; then
    # the extension, listed in service.extensions: one more target of the pipeline's fan-out
    python3 - "$TMP/profcol.yaml" "$P_PROFILEZ" <<'EOF2'
import sys
path, port = sys.argv[1], sys.argv[2]
text = open(path).read()
text = text.replace("service:\n", "extensions:\n  profilez:\n    endpoint: 127.0.0.1:%s\n"
                    "service:\n  extensions: [profilez]\n" % port, 1)
open(path, "w").write(text)
EOF2
fi

LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
echo "== scenario $SCENARIO: payloads $SET_DIR, ${SECONDS_RUN}s, load average before: $LOAD" >&2

# 1. the floors, alone on the machine (as far as this script is concerned): inflate + re-deflate
# of the same payloads with zlib (level 1) and with ISA-L's igzip (the level profcol maps 1 to).
FLOOR_S=$((SECONDS_RUN / 2))
[ "$FLOOR_S" -lt 2 ] && FLOOR_S=2
[ "$FLOOR_S" -gt 5 ] && FLOOR_S=5
FLOOR_THREADS=()
case "${PROFCOL_EXTRA_ENV:-}" in *UV_THREADPOOL_SIZE=*)
    FLOOR_THREADS=(--threads "$(echo "$PROFCOL_EXTRA_ENV" | sed 's/.*UV_THREADPOOL_SIZE=\([0-9]*\).*/\1/')") ;;
esac
# with --cpus, codecs runs a thread per CPU of its affinity mask (as profcol sizes its pool)
if [ "$FLOOR" = 1 ]; then
    for codec in zlib isal; do
        timeout 60 "${ON_PC[@]}" "$BIN/codecs" --codec $codec --payload "$SET_DIR" --seconds "$FLOOR_S" "${FLOOR_THREADS[@]}" \
            >"$TMP/floor-$codec.out" || { echo "codecs --codec $codec failed" >&2; exit 1; }
        sed '$d' "$TMP/floor-$codec.out" >&2
    done
else
    for codec in zlib isal; do echo '{"mb_per_s_in":0,"cpu_s_per_gb":null,"threads":0}' >"$TMP/floor-$codec.out"; done
fi

# 2. the sink (and, for fleet, the gateways), then profcol: one phase, or two for fleet.
"${ON_REST[@]}" "$BIN/sink" --port "$P_SINK" --delay-ms "$SINK_DELAY" --max-seconds $((SECONDS_RUN * 2 + 240)) \
    >"$TMP/sink.out" 2>"$TMP/sink.err" &
PIDS+=($!)
if [ "$NEIGHBOURS" = 1 ]; then # the slow neighbour's backend
    "${ON_REST[@]}" "$BIN/sink" --port "$P_NB_SINK" --delay-ms 500 --max-seconds $((SECONDS_RUN * 2 + 240)) \
        >"$TMP/nb-sink.out" 2>"$TMP/nb-sink.err" &
    PIDS+=($!)
fi

wait_http() { # URL...: 0 once every URL answers (10 s at most), 1 otherwise
    local u
    for _ in $(seq 1 100); do
        for u in "$@"; do
            curl -s -o /dev/null "$u" || { sleep 0.1; continue 2; }
        done
        return 0
    done
    return 1
}

KAFKA_BROKERS=""
if [ "$KAFKA" = 1 ]; then # the broker, then the gateway; the sidecar is the measured phase
    MOCK=$BUILD/tests/e2e/kafka_mock
    [ -x "$MOCK" ] || ninja -C "$BUILD" tests/e2e/kafka_mock >&2 || exit 1
    "${ON_REST[@]}" "$MOCK" --serve otlp_profiles:16 >"$TMP/kafka.out" 2>"$TMP/kafka.err" &
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
    env ${PROFCOL_EXTRA_ENV:-} "${ON_REST[@]}" "$PROFCOL" --config "$TMP/gateway.yaml" >"$TMP/gateway.log" 2>&1 &
    PIDS+=($!)
    GW_PID=$!
    wait_http "http://127.0.0.1:$P_METRICS2/metrics" || {
        echo "the gateway did not start:" >&2
        cat "$TMP/gateway.log" >&2
        exit 1
    }
fi
export KAFKA_BROKERS

if [ "$FLEET" = 1 ]; then
    G0=$((BASE + 10)); G1=$((BASE + 11)); G2=$((BASE + 12))
    for g in 0 1 2; do
        cat >"$TMP/gateway-$g.yaml" <<EOF
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:$((BASE + 10 + g))
exporters:
  otlphttp:
    endpoint: http://127.0.0.1:$P_SINK
service:
  telemetry:
    logs:
      level: warn
    metrics:
      address: 127.0.0.1:$((BASE + 13 + g))
  pipelines:
    profiles:
      receivers: [otlp]
      exporters: [otlphttp]
EOF
        env ${PROFCOL_EXTRA_ENV:-} "${ON_REST[@]}" "$PROFCOL" --config "$TMP/gateway-$g.yaml" >"$TMP/gateway-$g.log" 2>&1 &
        PIDS+=($!)
    done
    wait_http "http://127.0.0.1:$((BASE + 13))/metrics" "http://127.0.0.1:$((BASE + 14))/metrics" \
        "http://127.0.0.1:$((BASE + 15))/metrics" || {
        echo "gateways did not start:" >&2
        cat "$TMP"/gateway-*.log >&2
        exit 1
    }
    # phase 1: the sidecar with the loadbalancing exporter; phase 2: a plain otlp exporter
    python3 - "$TMP/profcol.yaml" "$G0" "$G1" "$G2" <<'EOF'
import sys
path, g0, g1, g2 = sys.argv[1:]
text = open(path).read()
lines = text.splitlines(True)
start = lines.index("exporters:\n")
end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith(" "))
head, tail = "".join(lines[:start]), "".join(lines[end:])
lb = ("exporters:\n  loadbalancing:\n    routing_key: traceID\n    protocol:\n      otlp:\n"
      "        tls:\n          insecure: true\n    resolver:\n      static:\n"
      "        hostnames: [127.0.0.1:%s, 127.0.0.1:%s, 127.0.0.1:%s]\n" % (g0, g1, g2))
relay = "exporters:\n  otlp:\n    endpoint: 127.0.0.1:%s\n    tls:\n      insecure: true\n" % g0
open(path.replace("profcol.yaml", "sidecar-lb.yaml"), "w").write(
    head + lb + tail.replace("exporters: [otlphttp]", "exporters: [loadbalancing]"))
open(path.replace("profcol.yaml", "sidecar-otlp.yaml"), "w").write(
    head + relay + tail.replace("exporters: [otlphttp]", "exporters: [otlp]"))
EOF
    PHASES="loadbalancing:$TMP/sidecar-lb.yaml otlp-relay:$TMP/sidecar-otlp.yaml"
elif [ "$COLLECTOR" = 1 ]; then
    COLLECTOR_BIN=${BENCH_COLLECTOR:-$(tools/peers.sh path otelcol)/otelcol}
    if [ ! -x "$COLLECTOR_BIN" ]; then
        tools/peers.sh build otelcol >&2 || { echo "the Collector peer did not build" >&2; exit 1; }
    fi
    # The Collector's config: the same pipeline under its names (otlp_http is 0.161's name of
    # otlphttp) and its telemetry reader (it has no metrics::address any more). Its batch
    # processor refuses profiles ("telemetry type is not supported"), so it batches where 0.161
    # can: in the exporter's sending queue (sending_queue::batch, its defaults).
    cat >"$TMP/collector.yaml" <<EOF
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:$P_OTLP
exporters:
  otlp_http:
    endpoint: http://127.0.0.1:$P_SINK
    sending_queue:
      batch: {}
service:
  telemetry:
    logs:
      level: warn
    metrics:
      readers:
        - pull:
            exporter:
              prometheus:
                host: 127.0.0.1
                port: $P_METRICS
  pipelines:
    profiles:
      receivers: [otlp]
      exporters: [otlp_http]
EOF
    PHASES="profcol:$TMP/profcol.yaml collector:$TMP/collector.yaml"
else
    PHASES="$SCENARIO:$TMP/profcol.yaml"
fi

ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }
# the whole machine: busy ticks (user, nice, system, irq, softirq), idle ticks (idle, iowait),
# stolen ticks (a VM's host ran something else) and the time in ns, as "busy,idle,steal,ns"
machine() { awk -v ns="$(date +%s%N)" '/^cpu / {printf "%d,%d,%d,%s", $2+$3+$4+$7+$8, $5+$6, $9, ns}' /proc/stat; }
# metric PORT NAME: the sum of a counter's series on a /metrics page (0 when absent)
metric() { curl -s "http://127.0.0.1:$1/metrics" | awk -v n="$2" '$1 == n || index($1, n "{") == 1 {s += $NF} END {printf "%d", s}'; }

summarize() {
python3 - "$@" <<'EOF'
import json, os, re, sys
(scen, tmp, floor_dir, cpu0, cpu1, hz, hwm, idle, limit, load0, load1, ncpu,
 profilez, idle_after, flt0, flt1, mach0, mach1) = sys.argv[1:]
gw = json.loads(open(tmp + "/gateway.json").read())
lg = json.loads(open(tmp + "/loadgen.out").read().strip().splitlines()[-1])
fl = json.loads(open(floor_dir + "/floor-zlib.out").read().strip().splitlines()[-1])
fi = json.loads(open(floor_dir + "/floor-isal.out").read().strip().splitlines()[-1])
try:
    sink = json.loads(open(tmp + "/sink.json").read())
except Exception:
    sink = {"requests": 0, "bytes": 0}
try:  # what the sink had before this phase (fleet: two phases share one sink)
    sink0 = json.loads(open(tmp + "/sink0.json").read())
    sink = {"requests": sink["requests"] - sink0["requests"],
            "bytes": sink["bytes"] - sink0["bytes"]}
except Exception:
    pass
metrics = {}
for line in open(tmp + "/metrics.txt"):
    m = re.match(r"^([a-zA-Z_:]+)(\{[^}]*\})?\s+([0-9.eE+-]+)$", line.strip())
    if m:
        metrics[m.group(1)] = metrics.get(m.group(1), 0) + float(m.group(3))
rss = [int(x) for x in open(tmp + "/rss.series").read().split() if x.isdigit()]
secs = lg["seconds"]
cpu_s = (int(cpu1) - int(cpu0)) / int(hz)
# the machine over the same window as profcol's ticks: what the load generator, the sink, the
# kernel's work not charged to profcol and anything else took, and how much stayed idle
(b0, i0, s0, n0), (b1, i1, s1, n1) = ([int(x) for x in m.split(",")] for m in (mach0, mach1))
win = (n1 - n0) / 1e9
all_ticks = (b1 - b0) + (i1 - i0) + (s1 - s0)
mach_util = (b1 - b0) / int(hz) / win if win > 0 else None
other_util = ((b1 - b0) - (int(cpu1) - int(cpu0))) / int(hz) / win if win > 0 else None
idle_share = (i1 - i0) / all_ticks if all_ticks > 0 else None
steal_share = (s1 - s0) / all_ticks if all_ticks > 0 else None
gb_in = lg["bytes_ok"] / 1e9
mb_in = lg["mb_per_s_ok"]
floor = fl["mb_per_s_in"]
ifloor = fi["mb_per_s_in"]
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
    "idle_rss_after_mb": round(int(idle_after) / 1024, 1),
    "minor_faults_per_request": round((int(flt1) - int(flt0)) / lg["requests"], 1) if lg.get("requests") else None,
    "max_sampled_rss_mb": round(max(rss) / 1024, 1) if rss else None,
    "cpu_s": round(cpu_s, 2),
    "cpu_util": round(cpu_s / secs, 3),
    "cpu_s_per_gb": round(cpu_s / gb_in, 1) if gb_in > 0 else None,
    "machine_cpu_util": round(mach_util, 3) if mach_util is not None else None,
    "other_cpu_util": round(other_util, 3) if other_util is not None else None,
    "machine_idle_share": round(idle_share, 3) if idle_share is not None else None,
    "machine_steal_share": round(steal_share, 3) if steal_share is not None else None,
    "zlib_floor_mb_per_s": round(floor, 4),
    "zlib_floor_cpu_s_per_gb": fl.get("cpu_s_per_gb"),
    "ratio": round(mb_in / floor, 3) if floor > 0 else None,
    "isal_floor_mb_per_s": round(ifloor, 4),
    "isal_floor_cpu_s_per_gb": fi.get("cpu_s_per_gb"),
    "isal_ratio": round(mb_in / ifloor, 3) if ifloor > 0 else None,
    "isal_cpu_ratio": round(fi["cpu_s_per_gb"] / (cpu_s / gb_in), 3) if gb_in > 0 and cpu_s > 0 and fi.get("cpu_s_per_gb") else None,
    "refused_share": round(lg["non_2xx"] / (lg["non_2xx"] + lg["ok"]), 4) if lg.get("ok", 0) + lg["non_2xx"] > 0 else None,
    "cpu_ratio": round(fl["cpu_s_per_gb"] / (cpu_s / gb_in), 3) if gb_in > 0 and cpu_s > 0 and fl.get("cpu_s_per_gb") else None,
    "connections": lg["connections"], "offered_rate": lg["rate"], "seconds": secs,
    "profcol_cpus": os.environ.get("BENCH_PC_CPUS") or None,
    "sink_requests": sink.get("requests", 0),
    "receiver_accepted_samples": metrics.get("otelcol_receiver_accepted_profile_samples"),
    "receiver_refused_samples": metrics.get("otelcol_receiver_refused_profile_samples"),
    "exporter_sent_samples": metrics.get("otelcol_exporter_sent_profile_samples"),
    "loadavg_before": load0, "loadavg_after": load1, "nproc": int(ncpu),
    "profilez": profilez == "1",
}
if profilez == "1":
    for k in ("profiles_total", "samples_total", "evicted_stacks_total",
              "over_budget_samples_total", "dropped_profiles_total", "dropped_batches_total",
              "stacks", "cpu_seconds_total"):
        r["profilez_" + k] = metrics.get("profcol_profilez_" + k)
    # its share of profcol's CPU over the whole run (metrics are scraped after the load)
    r["profilez_cpu_share"] = (round(r["profilez_cpu_seconds_total"] / cpu_s, 3)
                               if cpu_s > 0 and r["profilez_cpu_seconds_total"] is not None
                               else None)
    try:  # which viewer polled, how often, how many of its polls failed
        v = json.loads(open(tmp + "/viewer.json").read())
        r["profilez_viewer"], r["viewer_polls"], r["viewer_errors"] = v["viewer"], v["polls"], v["errors"]
    except Exception:
        r["profilez_viewer"] = None
for nb in ("dead", "slow"):  # otlp-relay-neighbours: what their clients were answered
    try:
        n = json.loads(open(tmp + "/nb-%s.out" % nb).read().strip().splitlines()[-1])
        r["neighbour_" + nb + "_statuses"] = n.get("statuses")
    except Exception:
        pass
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
    ("peak RSS MB (VmHWM)", r["peak_rss_mb"]),
    ("idle RSS MB before / 3 s after the load", "%s / %s" % (r["idle_rss_mb"], r["idle_rss_after_mb"])),
    ("page faults per request", r["minor_faults_per_request"]),
    ("profcol CPU s (util)", "%s (%s)" % (r["cpu_s"], r["cpu_util"])),
    ("CPU s per GB in", r["cpu_s_per_gb"]),
    ("machine: busy cores / not profcol's", "%s / %s" % (r["machine_cpu_util"], r["other_cpu_util"])),
    ("machine: idle / stolen share", "%s / %s" % (r["machine_idle_share"], r["machine_steal_share"])),
    ("zlib floor MB/s (%d thr)" % fl["threads"], r["zlib_floor_mb_per_s"]),
    ("zlib floor CPU s per GB", r["zlib_floor_cpu_s_per_gb"]),
    ("ratio (MB/s in / floor)", r["ratio"]), ("cpu_ratio (floor/profcol CPU/GB)", r["cpu_ratio"]),
    ("ISA-L floor MB/s", r["isal_floor_mb_per_s"]),
    ("ISA-L floor CPU s per GB", r["isal_floor_cpu_s_per_gb"]),
    ("isal_ratio / isal_cpu_ratio", "%s / %s" % (r["isal_ratio"], r["isal_cpu_ratio"])),
    ("refused share (non-2xx / answered)", r["refused_share"]),
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
for nb in ("dead", "slow"):
    if "neighbour_%s_statuses" % nb in r:
        rows.append(("neighbour %s: statuses" % nb, r["neighbour_%s_statuses" % nb]))
if profilez == "1":
    rows.append(("profilez: profiles aggregated", r["profilez_profiles_total"]))
    rows.append(("profilez: batches dropped (behind)", r["profilez_dropped_batches_total"]))
    rows.append(("profilez: CPU s (share of profcol)", "%s (%s)" % (
        r["profilez_cpu_seconds_total"], r["profilez_cpu_share"])))
    rows.append(("profilez: viewer, polls, failed polls", "%s, %s, %s" % (
        r["profilez_viewer"], r.get("viewer_polls"), r.get("viewer_errors"))))
print("scenario %s%s" % (scen, " (with profilez)" if profilez == "1" else ""), file=sys.stderr)
for k, v in rows:
    print("  %-34s %s" % (k, v), file=sys.stderr)
print(json.dumps(r, separators=(",", ":")))
EOF
}

# One measured run of profcol on config $2, results in directory $3 (label $1).
run_phase() {
    local label=$1 cfg=$2 dir=$3 pc up reason perf_file
    mkdir -p "$dir"
    curl -s "http://127.0.0.1:$P_SINK/stats" >"$dir/sink0.json"
    local cmd=("$PROFCOL" --config "$cfg")
    [ "$label" = collector ] && cmd=("$COLLECTOR_BIN" --feature-gates=service.profilesSupport --config "$cfg")
    env ${PROFCOL_EXTRA_ENV:-} "${ON_PC[@]}" "${cmd[@]}" >"$dir/profcol.log" 2>&1 &
    pc=$!
    PIDS+=($pc)
    up=0
    for _ in $(seq 1 100); do
        kill -0 "$pc" 2>/dev/null || break
        if curl -s -o /dev/null "http://127.0.0.1:$P_METRICS/metrics" && curl -s -o /dev/null "http://127.0.0.1:$P_SINK/stats"; then
            up=1
            break
        fi
        sleep 0.1
    done
    if [ "$up" != 1 ]; then
        if grep -q "not implemented yet" "$dir/profcol.log"; then
            reason=$(grep -m1 "not implemented yet" "$dir/profcol.log" | tr -d '"\\')
            echo "scenario $SCENARIO SKIPPED: $reason" >&2
            printf '{"scenario":"%s","skipped":true,"reason":"%s"}\n' "$SCENARIO" "$reason"
            exit 0
        fi
        echo "profcol did not start:" >&2
        cat "$dir/profcol.log" >&2
        exit 1
    fi
    sleep 0.5
    local idle_kb cpu0 cpu1 mach0 mach1 hwm_kb perf_pid="" viewer_pid="" rss_pid load0 load1 flt0 flt1 idle_after_kb
    idle_kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$pc/status")
    flt0=$(sed 's/^.*) //' "/proc/$pc/stat" | awk '{print $8}')
    cpu0=$(ticks "$pc")
    mach0=$(machine)
    local gw_cpu0=""
    [ "$KAFKA" = 1 ] && gw_cpu0=$(ticks "$GW_PID")
    load0=$(cut -d' ' -f1-3 /proc/loadavg)
    if [ -n "$PERF_OUT" ]; then
        perf_file=$PERF_OUT
        [ "$FLEET" = 1 ] && perf_file=$PERF_OUT.$label
        perf record -e cpu-clock -F 499 --call-graph dwarf,16384 -p "$pc" -o "$perf_file" -- sleep "$SECONDS_RUN" \
            >"$dir/perf.log" 2>&1 &
        perf_pid=$!
        PIDS+=($perf_pid)
    fi
    # Sample RSS while the load runs (VmHWM has the peak; this adds the time series maximum of
    # VmRSS and lets overload show how close to the limit it ran).
    (
        for _ in $(seq 1 $((SECONDS_RUN * 10 + 100))); do
            awk '/^VmRSS:/ {print $2}' "/proc/$pc/status" 2>/dev/null || break
            sleep 0.1
        done
    ) >"$dir/rss.series" &
    rss_pid=$!
    PIDS+=($rss_pid)

    # A viewer: the page's requests every 3 s while the load runs (bench/profilez_viewer.py:
    # --viewer old asks what the first page did, new the live view's APIs as well).
    if [ "$PROFILEZ" = 1 ]; then
        "${ON_REST[@]}" python3 "$ROOT/bench/profilez_viewer.py" "http://127.0.0.1:$P_PROFILEZ" "$SECONDS_RUN" \
            "$VIEWER" >"$dir/viewer.json" 2>/dev/null &
        viewer_pid=$!
        PIDS+=($viewer_pid)
    fi

    # 3. load.
    LG_ARGS=(--url "$URL" --payload "$SET_DIR" "${HDRS[@]}" --connections "$MODE_CONNS"
             --seconds "$SECONDS_RUN" --timeout-ms 30000 --label "$label")
    [ -n "$MODE_RATE" ] && LG_ARGS+=(--rate "$MODE_RATE" --max-inflight "$MODE_CONNS")
    local nb nb_pids=()
    if [ "$NEIGHBOURS" = 1 ]; then # the neighbours' clients, during the measured load
        for nb in dead:$P_NB_DEAD slow:$P_NB_SLOW; do
            case " ${BENCH_NEIGHBOURS:-dead slow} " in *" ${nb%%:*} "*) ;; *) continue ;; esac
            timeout $((SECONDS_RUN + 60)) "${ON_REST[@]}" "$BIN/loadgen" --url "http://127.0.0.1:${nb#*:}/v1development/profiles" \
                --payload "$SET_DIR" "${HDRS[@]}" --connections 8 --rate 100 --max-inflight 8 \
                --seconds "$SECONDS_RUN" --timeout-ms 30000 --label "${nb%%:*}" >"$dir/nb-${nb%%:*}.out" 2>/dev/null &
            nb_pids+=($!)
        done
    fi
    timeout $((SECONDS_RUN + 60)) "${ON_REST[@]}" "$BIN/loadgen" "${LG_ARGS[@]}" >"$dir/loadgen.out"
    sed '$d' "$dir/loadgen.out" >&2
    for nb in "${nb_pids[@]}"; do wait "$nb"; done

    cpu1=$(ticks "$pc")
    mach1=$(machine)
    hwm_kb=$(awk '/^VmHWM:/ {print $2}' "/proc/$pc/status")
    flt1=$(sed 's/^.*) //' "/proc/$pc/stat" | awk '{print $8}')
    # idle again: profcol gives free memory back after a second without work (base/alloc.h)
    for _ in 1 2 3 4 5 6; do sleep 1; awk '/^VmRSS:/ {print "rss after load: " $2 " kB"}' "/proc/$pc/status" >&2; done
    idle_after_kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$pc/status")
    kill "$rss_pid" 2>/dev/null
    [ -n "$viewer_pid" ] && wait "$viewer_pid" 2>/dev/null # its last poll, before the metrics
    [ -n "$perf_pid" ] && wait "$perf_pid" 2>/dev/null
    if [ "$COLLECTOR" = 1 ]; then
        # delivered: wait (60 s at most) until the exporter has sent every sample the receiver
        # accepted, as both count them (the same metric names), and time it
        local acc=0 snt=0 c0 j
        c0=$(date +%s%N)
        for j in $(seq 1 100000); do
            [ $((($(date +%s%N) - c0) / 1000000000)) -ge 60 ] && break
            acc=$(metric "$P_METRICS" otelcol_receiver_accepted_profile_samples)
            snt=$(metric "$P_METRICS" otelcol_exporter_sent_profile_samples)
            [ "$snt" -ge "$acc" ] && break
            [ $((j % 50)) = 0 ] && echo "$label catching up: accepted $acc samples, sent $snt" >&2
            sleep 0.1
        done
        printf '{"catch_up_ms":%d,"accepted":%d,"sent":%d}\n' \
            $((($(date +%s%N) - c0) / 1000000)) "$acc" "$snt" >"$dir/delivery.json"
    fi
    curl -s "http://127.0.0.1:$P_METRICS/metrics" >"$dir/metrics.txt"
    echo "{}" >"$dir/gateway.json"
    if [ "$KAFKA" = 1 ]; then
        # the gateway catches up: everything the broker acknowledged to the sidecar arrives
        local sent=0 got=0 queued t0 i
        t0=$(date +%s%N)
        for i in $(seq 1 600); do
            sent=$(metric "$P_METRICS" otelcol_exporter_sent_profile_samples)
            got=$(metric "$P_METRICS2" otelcol_receiver_accepted_profile_samples)
            queued=$(metric "$P_METRICS" otelcol_exporter_queue_size)
            [ "$got" -ge "$sent" ] && [ "$queued" = 0 ] && break
            [ $((i % 50)) = 0 ] && echo "gateway catching up: sidecar sent $sent samples ($queued requests queued), gateway accepted $got" >&2
            sleep 0.1
        done
        curl -s "http://127.0.0.1:$P_METRICS/metrics" >"$dir/metrics.txt"
        curl -s "http://127.0.0.1:$P_METRICS2/metrics" >"$dir/gateway-metrics.txt"
        printf '{"cpu_ticks":%d,"hwm_kb":%d,"catch_up_ms":%d,"sent":%d,"accepted":%d}\n' \
            $(($(ticks "$GW_PID") - gw_cpu0)) "$(awk '/^VmHWM:/ {print $2}' "/proc/$GW_PID/status")" \
            $((($(date +%s%N) - t0) / 1000000)) "$sent" "$got" >"$dir/gateway.json"
    fi
    # stop profcol (its final flush reaches the sink), then count what the sink got
    kill -TERM "$pc" 2>/dev/null
    for _ in $(seq 1 100); do kill -0 "$pc" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pc" 2>/dev/null
    wait "$pc" 2>/dev/null
    [ "$FLEET" = 1 ] && sleep 1 # the gateways' own queues
    curl -s "http://127.0.0.1:$P_SINK/stats" >"$dir/sink.json"
    if [ -s "$dir/profcol.log" ]; then
        echo "profcol log (warn and above), first lines:" >&2
        head -n 5 "$dir/profcol.log" | cut -c1-300 >&2
    fi
    if [ "$KAFKA" = 1 ] && [ -s "$TMP/gateway.log" ]; then
        echo "gateway log (warn and above), first lines:" >&2
        head -n 5 "$TMP/gateway.log" | cut -c1-300 >&2
    fi
    load1=$(cut -d' ' -f1-3 /proc/loadavg)
    summarize "$label" "$dir" "$TMP" "$cpu0" "$cpu1" "$(getconf CLK_TCK)" "$hwm_kb" "$idle_kb" \
        "$LIMIT_MIB" "$load0" "$load1" "$(nproc)" "$PROFILEZ" "$idle_after_kb" "$flt0" "$flt1" \
        "$mach0" "$mach1" \
        >"$dir/result.json"
}

for ph in $PHASES; do
    run_phase "${ph%%:*}" "${ph#*:}" "$TMP/phase-${ph%%:*}"
done
cleanup
if [ "$FLEET" = 1 ]; then
    python3 - "$TMP/phase-loadbalancing/result.json" "$TMP/phase-otlp-relay/result.json" <<'EOF'
import json, sys
lb, relay = (json.loads(open(p).read()) for p in sys.argv[1:3])
keys = ("samples_per_s", "mb_per_s_in", "cpu_s", "cpu_util", "cpu_s_per_gb", "p50_ms", "p99_ms",
        "errors", "peak_rss_mb", "receiver_accepted_samples", "exporter_sent_samples")
r = {"scenario": "fleet",
     "loadbalancing": {k: lb.get(k) for k in keys},
     "otlp_relay": {k: relay.get(k) for k in keys},
     "sidecar_cpu_s_per_gb_ratio": round(lb["cpu_s_per_gb"] / relay["cpu_s_per_gb"], 3)
     if lb.get("cpu_s_per_gb") and relay.get("cpu_s_per_gb") else None,
     "zlib_floor_mb_per_s": lb.get("zlib_floor_mb_per_s"),
     "zlib_floor_cpu_s_per_gb": lb.get("zlib_floor_cpu_s_per_gb"),
     "loadavg_before": lb.get("loadavg_before"), "loadavg_after": relay.get("loadavg_after"),
     "nproc": lb.get("nproc"), "seconds": lb.get("seconds")}
print("scenario fleet: sidecar -> 3 gateways (loadbalancing) and -> 1 gateway (otlp), one run",
      file=sys.stderr)
print("  %-28s %14s %14s" % ("sidecar", "loadbalancing", "otlp relay"), file=sys.stderr)
for k in keys:
    print("  %-28s %14s %14s" % (k, r["loadbalancing"][k], r["otlp_relay"][k]), file=sys.stderr)
print("  sidecar CPU per GB, loadbalancing / relay: %s" % r["sidecar_cpu_s_per_gb_ratio"],
      file=sys.stderr)
print(json.dumps(r, separators=(",", ":")))
EOF
elif [ "$COLLECTOR" = 1 ]; then
    python3 - "$SCENARIO" "$TMP/phase-profcol" "$TMP/phase-collector" <<'EOF'
import json, sys
scen = sys.argv[1]
pc, oc = (json.loads(open(d + "/result.json").read()) for d in sys.argv[2:4])
for r, d in ((pc, sys.argv[2]), (oc, sys.argv[3])):
    dl = json.loads(open(d + "/delivery.json").read())
    # delivered samples/s: what the exporter sent over the load plus the time it took to catch up
    r["catch_up_s"] = round(dl["catch_up_ms"] / 1000, 2)
    r["delivered_samples_per_s"] = round(dl["sent"] / (r["seconds"] + r["catch_up_s"]), 1)
    r["delivered_all"] = dl["sent"] >= dl["accepted"] > 0
keys = ("delivered_samples_per_s", "samples_per_s", "requests_per_s", "mb_per_s_in", "cpu_s",
        "cpu_util", "cpu_s_per_gb", "p50_ms", "p99_ms", "errors", "peak_rss_mb", "idle_rss_mb",
        "catch_up_s", "delivered_all")
def per_cpu(r):  # accepted samples per CPU second of the relay (CPU counted over the load only)
    return r["samples_per_s"] * r["seconds"] / r["cpu_s"] if r.get("cpu_s") else None
def ratio(a, b):
    return round(a / b, 2) if a and b else None
r = {"scenario": scen,
     "profcol": {k: pc.get(k) for k in keys}, "collector": {k: oc.get(k) for k in keys},
     "samples_per_cpu_s": {"profcol": round(per_cpu(pc) or 0), "collector": round(per_cpu(oc) or 0)},
     "samples_per_cpu_s_ratio": ratio(per_cpu(pc), per_cpu(oc)),
     "samples_per_s_ratio": ratio(pc["samples_per_s"], oc["samples_per_s"]),
     "cpu_s_per_gb_ratio": ratio(pc.get("cpu_s_per_gb"), oc.get("cpu_s_per_gb")),
     "peak_rss_ratio": ratio(pc["peak_rss_mb"], oc["peak_rss_mb"]),
     "zlib_floor_mb_per_s": pc.get("zlib_floor_mb_per_s"),
     "loadavg_before": pc.get("loadavg_before"), "loadavg_after": oc.get("loadavg_after"),
     "nproc": pc.get("nproc"), "seconds": pc.get("seconds"), "connections": pc.get("connections")}
print("scenario %s: profcol and the OpenTelemetry Collector, one run" % scen, file=sys.stderr)
print("  %-28s %14s %14s" % ("", "profcol", "Collector"), file=sys.stderr)
for k in keys:
    print("  %-28s %14s %14s" % (k, r["profcol"][k], r["collector"][k]), file=sys.stderr)
print("  %-28s %14s %14s" % ("samples per CPU s", r["samples_per_cpu_s"]["profcol"],
                             r["samples_per_cpu_s"]["collector"]), file=sys.stderr)
print("  profcol / Collector: samples per CPU s %s, samples/s %s, CPU s per GB %s, peak RSS %s"
      % (r["samples_per_cpu_s_ratio"], r["samples_per_s_ratio"], r["cpu_s_per_gb_ratio"],
         r["peak_rss_ratio"]), file=sys.stderr)
print(json.dumps(r, separators=(",", ":")))
EOF
else
    cat "$TMP/phase-$SCENARIO/result.json"
fi
