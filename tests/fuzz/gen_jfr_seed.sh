#!/usr/bin/env bash
# Make fuzz_jfr's JDK seed (tests/fuzz/README.md): a 0.8 s JDK 17 recording of a small program
# that spins under a contended monitor, parks and allocates, with only the events the decoder
# maps enabled (so the file is the JDK's ~96 KB of metadata plus a few KB), and the synthetic
# recordings of tests/unit/test_jfr.c. Needs a JDK (javac, java, jfr) and build/tests/test_jfr.
#   tests/fuzz/gen_jfr_seed.sh [OUT_DIR]     (default tests/fuzz/corpus/fuzz_jfr)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(realpath -m "${1:-tests/fuzz/corpus/fuzz_jfr}")
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/Seed.java" <<'JAVA'
import java.util.concurrent.locks.LockSupport;
public class Seed {
    static final Object lock = new Object();
    static volatile long sink;
    static long spin(long n) { long x = n; for (long i = 0; i < n; i++) x = x * 31 + i; return x; }
    static void work() { synchronized (lock) { sink += spin(200000); LockSupport.parkNanos(2000000); } sink += new byte[20000].length; }
    public static void main(String[] a) throws Exception {
        long end = System.currentTimeMillis() + 800;
        Runnable r = () -> { while (System.currentTimeMillis() < end) work(); };
        Thread t = new Thread(r, "seed-worker"); t.start(); r.run(); t.join();
    }
}
JAVA
(cd "$tmp" && javac Seed.java &&
  jfr configure --input none --output seed.jfc \
    '+jdk.ExecutionSample#enabled=true' '+jdk.ExecutionSample#period=10 ms' \
    '+jdk.ObjectAllocationSample#enabled=true' '+jdk.ObjectAllocationSample#throttle=50/s' \
    '+jdk.ObjectAllocationSample#stackTrace=true' \
    '+jdk.ObjectAllocationInNewTLAB#enabled=true' '+jdk.ObjectAllocationInNewTLAB#stackTrace=true' \
    '+jdk.JavaMonitorEnter#enabled=true' '+jdk.JavaMonitorEnter#threshold=0 ms' \
    '+jdk.JavaMonitorEnter#stackTrace=true' \
    '+jdk.ThreadPark#enabled=true' '+jdk.ThreadPark#threshold=0 ms' '+jdk.ThreadPark#stackTrace=true' \
    >/dev/null &&
  java "-XX:StartFlightRecording=settings=$tmp/seed.jfc,filename=$tmp/seed.jfr" -cp . Seed >/dev/null 2>&1)
{ printf '\000'; cat "$tmp/seed.jfr"; } >"$out/jdk17-seed" # options byte 0: no labels, defaults
TEST_JFR_SEEDS="$out" build/tests/test_jfr
ls -l "$out"
