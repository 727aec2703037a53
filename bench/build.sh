#!/bin/sh
# Build the bench tools against an existing profcol build dir, without touching meson.build:
#   bench/build.sh [BUILD_DIR]        (default build-bench; outputs in BUILD_DIR/bench/)
# The link line mirrors profcol's own (see BUILD_DIR/build.ninja, "build profcol:").
set -eu
cd "$(dirname "$0")/.."
B=${1:-build-bench}
[ -f "$B/libprofcol_core.a" ] || { echo "no $B/libprofcol_core.a: meson setup $B -Dbuildtype=release && ninja -C $B profcol" >&2; exit 1; }
mkdir -p "$B/bench"
CFLAGS="-std=c11 -O3 -g -Wall -Wextra -Werror -D_GNU_SOURCE -pthread -Isrc -I$B/proto -Iproto -Ibench -isystem /usr/share/include/llhttp"
LIBS="-Wl,--start-group $B/libprofcol_core.a $B/libllhttp.a -luv -lprotobuf-c -lz -lyaml -ljansson -lssl -lcrypto -lnghttp2 -lrdkafka -lm -Wl,--end-group -pthread"
for t in loadgen sink mkpayloads zlibfloor; do
    cc $CFLAGS -o "$B/bench/$t" "bench/$t.c" $LIBS
done
echo "built $B/bench/{loadgen,sink,mkpayloads,zlibfloor}"
