#!/usr/bin/env bash
# libFuzzer targets of tests/fuzz (see tests/fuzz/README.md).
#   tools/fuzz.sh [RUNS]          CI: every target, RUNS mutations (default 10000) over a temporary
#                                 copy of its seed corpus, plus every regression input; fails on
#                                 any crash, leak, UBSan report or timeout
#   tools/fuzz.sh long SECONDS    fuzz each target for SECONDS, keeping the grown corpus in
#                                 build-fuzz/corpus/<target> and crashes in build-fuzz/crashes/
# Environment: FUZZ_BUILD (build dir, default build-fuzz), FUZZ_TARGETS (space-separated subset),
# FUZZ_JOBS (parallel targets in long mode, default: number of cores), FUZZ_EXTRA (more libFuzzer
# flags for long mode, e.g. "-fork=1 -ignore_crashes=1" to keep going past a known crash).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${FUZZ_BUILD:-build-fuzz}
ALL_TARGETS=(fuzz_otlp_proto fuzz_otlp_json fuzz_gzip fuzz_config fuzz_pprof fuzz_http fuzz_ingest fuzz_grpc fuzz_signals fuzz_jfr fuzz_legacy fuzz_delta fuzz_symbolizer
  fuzz_prometheus fuzz_wire_check fuzz_wire_merge fuzz_proto_pack fuzz_proto_unpack fuzz_gopclntab)
read -r -a TARGETS <<<"${FUZZ_TARGETS:-${ALL_TARGETS[*]}}"
FLAGS=(-max_len=1048576 -timeout=10 -rss_limit_mb=2048 -print_final_stats=0)
read -r -a EXTRA <<<"${FUZZ_EXTRA:-}"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

if [ ! -f "$BUILD/build.ninja" ]; then
  CC=clang meson setup "$BUILD" -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false \
    -Dbuildtype=debugoptimized
fi
meson compile -C "$BUILD"

run_ci() { # RUNS
  local runs=$1 fail=0 start
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  for t in "${TARGETS[@]}"; do
    local exe="$BUILD/tests/fuzz/$t"
    # regression inputs first, one process each so every failing input is reported
    local r
    for r in tests/fuzz/regress/"$t"/*; do
      [ -f "$r" ] || continue
      if ! "$exe" "${FLAGS[@]}" "$r" >"$tmp/regress.log" 2>&1; then
        grep -E -m 12 'invariant|ERROR|runtime error|SUMMARY|^    #[0-9] ' "$tmp/regress.log" || true
        echo "FAIL: $t regression input $r" >&2
        fail=1
      fi
    done
    echo "== $t: $runs runs"
    start=$SECONDS
    mkdir -p "$tmp/corpus/$t" "$tmp/artifacts/$t"
    cp -r tests/fuzz/corpus/"$t"/. "$tmp/corpus/$t/" 2>/dev/null || true
    "$exe" "${FLAGS[@]}" -runs="$runs" -seed=1 -artifact_prefix="$tmp/artifacts/$t/" \
      "$tmp/corpus/$t" >"$tmp/$t.log" 2>&1 || {
      tail -n 60 "$tmp/$t.log"
      for a in "$tmp/artifacts/$t"/*; do
        [ -e "$a" ] || continue
        mkdir -p "$BUILD/crashes/$t"
        cp "$a" "$BUILD/crashes/$t/"
        echo "input saved: $BUILD/crashes/$t/$(basename "$a")" >&2
      done
      echo "FAIL: $t" >&2
      fail=1
    }
    echo "   $((SECONDS - start))s"
  done
  return $fail
}

run_long() { # SECONDS
  local secs=$1 jobs=${FUZZ_JOBS:-$(nproc)} fail=0
  local pids=() names=()
  for t in "${TARGETS[@]}"; do
    mkdir -p "$BUILD/corpus/$t" "$BUILD/crashes/$t"
    cp -rn tests/fuzz/corpus/"$t"/. "$BUILD/corpus/$t/" 2>/dev/null || true
    echo "== $t: ${secs}s, corpus $BUILD/corpus/$t, log $BUILD/crashes/$t.log"
    "$BUILD/tests/fuzz/$t" "${FLAGS[@]}" ${EXTRA[@]+"${EXTRA[@]}"} -max_total_time="$secs" \
      -artifact_prefix="$BUILD/crashes/$t/" "$BUILD/corpus/$t" >"$BUILD/crashes/$t.log" 2>&1 &
    pids+=($!)
    names+=("$t")
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  done
  for i in "${!pids[@]}"; do
    if ! wait "${pids[$i]}"; then
      echo "FAIL: ${names[$i]} (see $BUILD/crashes/${names[$i]}.log)" >&2
      fail=1
    fi
  done
  ls -l "$BUILD"/crashes/*/ 2>/dev/null | grep -E 'crash-|leak-|timeout-|oom-' || true
  return $fail
}

case "${1:-10000}" in
long) run_long "${2:?usage: tools/fuzz.sh long SECONDS}" ;;
*[!0-9]*)
  echo "usage: tools/fuzz.sh [RUNS] | tools/fuzz.sh long SECONDS" >&2
  exit 2
  ;;
*) run_ci "${1:-10000}" ;;
esac
