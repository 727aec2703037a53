#!/usr/bin/env bash
# profcol's one entry point for a fresh Debian machine:
#   tools/dev.sh run [profcol args...]  install what is missing, build, run profcol
#   tools/dev.sh test                   install what is missing, build, run every test
#                                       (plain build, then AddressSanitizer+UBSan build;
#                                       the release build is compiled, not run)
#   tools/dev.sh mutate [NAME...|--list] build one-line mutants of the code in a scratch copy and
#                                       check that the tests catch each (slow; tests/README.md)
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_PKGS=(gcc meson ninja-build pkg-config python3 libuv1-dev libprotobuf-c-dev
  protobuf-c-compiler zlib1g-dev libyaml-dev libjansson-dev node-llhttp libnghttp2-dev libssl-dev
  librdkafka-dev)
TEST_PKGS=(python3-protobuf protobuf-compiler clang libclang-rt-14-dev golang-go python3-grpcio
  python3-grpc-tools openssl python3-yaml clang-format curl)

install_missing() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "installing: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

build() { # build DIR [meson options...]
  local dir=$1
  shift
  [ -f "$dir/build.ninja" ] || meson setup "$dir" "$@"
  meson compile -C "$dir"
}

# Node.js runs the real @pyroscope/nodejs client in the e2e tests; any node >= 18 will do, so
# only install Debian's when there is none (a nodesource build already ships npm).
install_node() {
  command -v node >/dev/null && command -v npm >/dev/null && return 0
  install_missing nodejs npm
}

case "${1:-}" in
run)
  shift
  install_missing "${BUILD_PKGS[@]}"
  build build
  exec build/profcol "$@"
  ;;
test)
  install_missing "${BUILD_PKGS[@]}" "${TEST_PKGS[@]}"
  install_node
  build build
  # -O3 brings warnings of its own (-Wmaybe-uninitialized, -Wstringop-*, -Wformat-truncation)
  # and werror stays on in release builds: compile that configuration too (no test run)
  build build-release -Dbuildtype=release
  meson test -C build --print-errorlogs
  # the whole suite again under AddressSanitizer + UndefinedBehaviorSanitizer
  build build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    meson test -C build-asan --print-errorlogs
  # every decoder under libFuzzer (clang): regression inputs, then a fixed number of runs
  tools/fuzz.sh
  ;;
fuzz)
  install_missing "${BUILD_PKGS[@]}" "${TEST_PKGS[@]}"
  shift
  exec tools/fuzz.sh "$@"
  ;;
mutate)
  install_missing "${BUILD_PKGS[@]}" "${TEST_PKGS[@]}"
  shift
  exec python3 tools/mutate.py "$@"
  ;;
*)
  echo "usage: tools/dev.sh run [profcol args...] | tools/dev.sh test | tools/dev.sh fuzz [RUNS|long SECONDS] | tools/dev.sh mutate [NAME...|--list]" >&2
  exit 2
  ;;
esac
