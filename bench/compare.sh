#!/bin/bash
# Compare two profcol builds on one scenario, on a shared machine: run them alternately, RUNS
# times each (old, new, old, new, ...), with the same bench tools, payloads and ports, and print
# the ratio new/old of the medians of samples/s and of CPU s per GB (the less load-sensitive one),
# beside that of the bytes sent per byte received: where that moves, the batches differ (which
# requests met in one), and so does what they cost to merge and deflate.
#
#   bench/compare.sh OLD_BUILD NEW_BUILD SCENARIO [--runs N] [run.sh options, e.g. --seconds 10]
#
# OLD_BUILD and NEW_BUILD are build directories with a profcol binary (release builds:
# meson setup DIR -Dbuildtype=release). The load generator, sink and payloads come from NEW_BUILD
# (ninja -C NEW_BUILD builds them). Floors are not measured (--no-floor): only the two builds
# are compared. Prints one table on stderr and one JSON line on stdout.
set -u
cd "$(dirname "$0")/.."
[ $# -ge 3 ] || { echo "usage: bench/compare.sh OLD_BUILD NEW_BUILD SCENARIO [--runs N] [run.sh options]" >&2; exit 2; }
OLD=$1 NEW=$2 SCEN=$3
shift 3
RUNS=3
ARGS=()
while [ $# -gt 0 ]; do
    case "$1" in
    --runs) RUNS=$2; shift 2 ;;
    *) ARGS+=("$1"); shift ;;
    esac
done
for b in "$OLD" "$NEW"; do
    [ -x "$b/profcol" ] || { echo "no $b/profcol" >&2; exit 1; }
done
OUT=$(mktemp /tmp/profcol-compare.XXXXXX)
trap 'rm -f "$OUT"' EXIT
for i in $(seq 1 "$RUNS"); do
    for side in old new; do
        [ $side = old ] && bin=$OLD/profcol || bin=$NEW/profcol
        line=$(bench/run.sh "$SCEN" --build "$NEW" --profcol "$bin" --no-floor "${ARGS[@]}" 2>/dev/null | tail -n 1)
        [ -n "$line" ] || { echo "run $i ($side) failed" >&2; exit 1; }
        echo "$side $line" >>"$OUT"
        echo "run $i $side: $(echo "$line" | python3 -c 'import json,sys; r=json.load(sys.stdin); print("samples/s %s, CPU s/GB %s, p50 %s ms, errors %s, refused share %s, load %s" % (r.get("samples_per_s"), r.get("cpu_s_per_gb"), r.get("p50_ms"), r.get("errors"), r.get("refused_share"), r.get("loadavg_before")))')" >&2
    done
done
python3 - "$OUT" "$SCEN" "$OLD" "$NEW" <<'PY'
import json, statistics, sys
path, scen, old, new = sys.argv[1:]
runs = {"old": [], "new": []}
for line in open(path):
    side, js = line.split(" ", 1)
    r = json.loads(js)
    # bytes sent per byte received: a batch's merge and deflate cost follows what it sends, and
    # that depends on which requests meet in a batch (bench/README.md, "The sixth pass's
    # otlp-relay-large figure")
    if r.get("mb_per_s_in") and r.get("mb_per_s_out") is not None:
        r["out_per_in"] = r["mb_per_s_out"] / r["mb_per_s_in"]
    runs[side].append(r)
def med(side, key):
    v = [r[key] for r in runs[side] if r.get(key) is not None]
    return statistics.median(v) if v else None
out = {"scenario": scen, "old": old, "new": new, "runs": len(runs["new"])}
for key in ("samples_per_s", "cpu_s_per_gb", "p50_ms", "p99_ms", "peak_rss_mb", "idle_rss_mb",
            "refused_share", "cpu_util", "out_per_in"):
    o, n = med("old", key), med("new", key)
    out["old_" + key], out["new_" + key] = o, n
    out["ratio_" + key] = round(n / o, 3) if o and n is not None else None
print("%s: new/old samples/s %s, CPU s/GB %s, bytes out per byte in %s (medians of %d runs each: samples/s %s -> %s, CPU s/GB %s -> %s, refused share %s -> %s)"
      % (scen, out["ratio_samples_per_s"], out["ratio_cpu_s_per_gb"], out["ratio_out_per_in"],
         out["runs"], out["old_samples_per_s"], out["new_samples_per_s"], out["old_cpu_s_per_gb"],
         out["new_cpu_s_per_gb"], out["old_refused_share"], out["new_refused_share"]), file=sys.stderr)
print(json.dumps(out, separators=(",", ":")))
PY
