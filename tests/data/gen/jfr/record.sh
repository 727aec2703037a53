#!/bin/sh
# Record a real JFR file with the JDK: JfrLoad.java (CPU in named methods on named threads,
# allocations, a contended monitor, parked threads) under -XX:StartFlightRecording with the
# `profile` settings plus what Pyroscope's JFR mapping needs (spec/jfr.md §4.1): both TLAB
# events on, JavaMonitorEnter and ThreadPark thresholds lowered to 1 ms.
#
#   tests/data/gen/jfr/record.sh [--seconds N] [--java-home DIR] [--rotate] OUT.jfr
#
# --java-home: the JDK to record with (default: the one `java` on PATH belongs to; e.g.
#   /usr/lib/jvm/temurin-25-jdk-amd64). Its bin/java must exist; javac and jfr are only needed
#   from the default JDK (the classes are compiled once for release 17, next to OUT, and run on
#   any newer JDK).
# --rotate: start and stop a second recording halfway, so the JDK writes several chunks.
# On a terminal (or with JFR_SUMMARY=1) prints `jfr summary OUT`'s Chunks line and the counts of
# the events that matter.
# Exit 2 (with a message) when the JDK asked for is not installed.
set -eu
SECONDS_RUN=3
JAVA_HOME_ARG=""
ROTATE=""
while [ $# -gt 1 ]; do
    case "$1" in
    --seconds) SECONDS_RUN=$2; shift 2 ;;
    --java-home) JAVA_HOME_ARG=$2; shift 2 ;;
    --rotate) ROTATE=rotate; shift ;;
    *) echo "record.sh: unknown option $1" >&2; exit 64 ;;
    esac
done
[ $# -eq 1 ] || { echo "usage: record.sh [--seconds N] [--java-home DIR] [--rotate] OUT.jfr" >&2; exit 64; }
OUT=$1
HERE=$(cd "$(dirname "$0")" && pwd)
for t in javac java jfr; do
    command -v $t >/dev/null || { echo "record.sh: $t not found (Debian: openjdk-17-jdk-headless)" >&2; exit 2; }
done
JAVA=java
if [ -n "$JAVA_HOME_ARG" ]; then
    JAVA=$JAVA_HOME_ARG/bin/java
    [ -x "$JAVA" ] || { echo "record.sh: no JDK at $JAVA_HOME_ARG" >&2; exit 2; }
fi
OUTDIR=$(cd "$(dirname "$OUT")" && pwd)
CLASSES=$OUTDIR/jfrload-classes
# compiled once per output folder; concurrent runs wait for the first one's javac
mkdir -p "$CLASSES"
(
    flock 9
    if [ ! -f "$CLASSES/profcol/jfrtest/JfrLoad.class" ] ||
        [ "$HERE/JfrLoad.java" -nt "$CLASSES/profcol/jfrtest/JfrLoad.class" ]; then
        javac --release 17 -d "$CLASSES" "$HERE/JfrLoad.java"
    fi
) 9>"$CLASSES.lock"
SETTINGS=settings=profile
SETTINGS=$SETTINGS,+jdk.ObjectAllocationInNewTLAB#enabled=true
SETTINGS=$SETTINGS,+jdk.ObjectAllocationOutsideTLAB#enabled=true
SETTINGS=$SETTINGS,jdk.JavaMonitorEnter#threshold=1ms,jdk.ThreadPark#threshold=1ms
rm -f "$OUT"
# a fixed heap keeps the runs alike; the recording is written at exit
"$JAVA" -Xmx256m "-XX:StartFlightRecording=$SETTINGS,dumponexit=true,filename=$OUT" \
    -cp "$CLASSES" profcol.jfrtest.JfrLoad "$SECONDS_RUN" $ROTATE >"$OUT.log" 2>&1 ||
    { cat "$OUT.log" >&2; exit 1; }
[ -s "$OUT" ] || { echo "record.sh: $OUT not written" >&2; cat "$OUT.log" >&2; exit 1; }
[ -t 1 ] || [ -n "${JFR_SUMMARY:-}" ] || exit 0
jfr summary "$OUT" | awk '/Chunks:/ || /jdk\.(ExecutionSample|ObjectAllocation[A-Za-z]*|JavaMonitorEnter|ThreadPark) /'
