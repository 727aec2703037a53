#!/usr/bin/env bash
# The real peers of profcol's peer tests (tests/peers/README.md), built from pinned versions once
# per machine into a cache outside the checkout:
#   tools/peers.sh build [NAME...]   build what is missing or stale (all peers by default)
#   tools/peers.sh path NAME         print the peer's folder (built or not)
#   tools/peers.sh list              NAME VERSION STATE per peer
# The cache is ${PROFCOL_PEERS_CACHE:-~/.cache/profcol-peers}: NAME-VERSION/ per peer, with the
# registries' downloads beside them (go-mod, go-build, m2, cargo, pip). A peer is rebuilt when a
# file of tests/peers/NAME/ or its build function changed (NAME-VERSION/.inputs holds their
# hash). Builds are atomic (a temp folder renamed) and serialized by a lock, so concurrent callers
# wait and reuse.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$PWD
CACHE=${PROFCOL_PEERS_CACHE:-$HOME/.cache/profcol-peers}
mkdir -p "$CACHE"

versions() { sed -e 's/#.*//' -e '/^[[:space:]]*$/d' tests/peers/versions.txt; }
version_of() { versions | awk -v n="$1" '$1 == n { print $2 }'; }
dir_of() { echo "$CACHE/$1-$(version_of "$1")"; }
inputs_hash() { # the peer's committed files, its version and its build function, hashed
  (
    cd "$SRC"
    find "tests/peers/$1" -type f ! -path '*/target/*' ! -name '*.class' | LC_ALL=C sort |
      xargs sha256sum
    version_of "$1"
    declare -f "build_${1//-/_}" go_env
  ) | sha256sum | cut -c1-16
}

# a Go new enough for the peers' go.mod files (1.26: the machine's own Go; Debian's is older)
go_bin() {
  local g
  for g in /usr/local/go/bin/go "$(command -v go || true)"; do
    [ -x "$g" ] || continue
    if "$g" version | grep -qE 'go1\.(2[6-9]|[3-9][0-9])'; then
      echo "$g"
      return 0
    fi
  done
  echo "peers: no Go >= 1.26 (found: $(go version 2>&1 || echo none))" >&2
  return 1
}

go_env() {
  export GOTOOLCHAIN=local GOFLAGS=-mod=readonly GOMODCACHE="$CACHE/go-mod" \
    GOCACHE="$CACHE/go-build" CGO_ENABLED=${CGO_ENABLED:-1}
}

# ---- one function per peer: build_NAME OUT (OUT is an empty folder to fill) ----

# The Collector distribution (tests/peers/otelcol/main.go) and otlpcheck, the upstream-generated
# decoder and rule check, from one go.mod; and Go's own pprof (cmd/pprof of the same toolchain),
# so that `pprof -raw` needs no compile at test time (`go tool pprof` builds it on first use).
build_otelcol() {
  local go
  go=$(go_bin)
  go_env
  (cd tests/peers/otelcol && "$go" build -trimpath -o "$1/otelcol" . &&
    "$go" build -trimpath -o "$1/otlpcheck" ./otlpcheck && "$go" build -o "$1/pprof" cmd/pprof)
}

# A small app on pyroscope-go and godeltaprof (tests/peers/pyroscope-go/main.go).
build_pyroscope_go() {
  local go
  go=$(go_bin)
  go_env
  (cd tests/peers/pyroscope-go && "$go" build -trimpath -o "$1/goapp" .)
}

# The Pyroscope Java agent (io.pyroscope:agent, pinned in tests/peers/pyroscope-java/pom.xml,
# copied by the pinned maven-dependency-plugin) and App.java compiled against it.
build_pyroscope_java() {
  command -v mvn >/dev/null || {
    echo "peers: mvn not found (Debian: maven)" >&2
    return 1
  }
  (cd tests/peers/pyroscope-java &&
    mvn -B -q -Dmaven.repo.local="$CACHE/m2" dependency:copy-dependencies \
      -DoutputDirectory="$1" -Dmdep.stripVersion=true &&
    javac -d "$1/classes" -cp "$1/agent.jar" App.java)
}

# A small app on the pyroscope crate with its pprof-rs backend (tests/peers/pyroscope-rs,
# Cargo.lock committed; crates and target dir in the cache).
build_pyroscope_rs() {
  command -v cargo >/dev/null || {
    echo "peers: cargo not found (rustup's, on this kind of machine)" >&2
    return 1
  }
  (cd tests/peers/pyroscope-rs &&
    CARGO_HOME="$CACHE/cargo" CARGO_TARGET_DIR="$CACHE/cargo-target" \
      cargo build --release --locked &&
    cp "$CACHE/cargo-target/release/pyroscope-peer" "$1/")
}

# pyroscope-io (requirements.txt with hashes) in a venv of Debian's python3, and app.py.
build_pyroscope_io() {
  /usr/bin/python3 -m venv "$1/venv" &&
    PIP_CACHE_DIR="$CACHE/pip" "$1/venv/bin/pip" install --disable-pip-version-check -q \
      --require-hashes -r tests/peers/pyroscope-io/requirements.txt &&
    cp tests/peers/pyroscope-io/app.py "$1/"
}

build_one() {
  local name=$1 version dir want t0
  version=$(version_of "$name")
  [ -n "$version" ] || {
    echo "peers: unknown peer $name (tests/peers/versions.txt)" >&2
    return 2
  }
  dir="$CACHE/$name-$version"
  want=$(inputs_hash "$name")
  if [ -f "$dir/.inputs" ] && [ "$(cat "$dir/.inputs")" = "$want" ]; then
    echo "peer $name-$version: cached ($dir)"
    return 0
  fi
  t0=$(date +%s)
  echo "peer $name-$version: building into $dir"
  local tmp="$dir.tmp.$$"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  if ! "build_${name//-/_}" "$tmp" >"$CACHE/$name.log" 2>&1; then
    echo "peer $name-$version: BUILD FAILED ($CACHE/$name.log):" >&2
    tail -30 "$CACHE/$name.log" >&2
    rm -rf "$tmp"
    return 1
  fi
  echo "$want" >"$tmp/.inputs"
  rm -rf "$dir"
  mv "$tmp" "$dir"
  echo "peer $name-$version: built in $(($(date +%s) - t0)) s"
}

case "${1:-}" in
build)
  shift
  names=("$@")
  [ ${#names[@]} -gt 0 ] || mapfile -t names < <(versions | awk '{ print $1 }')
  exec 9>"$CACHE/.lock"
  flock 9
  t_all=$(date +%s)
  failed=()
  for n in "${names[@]}"; do
    build_one "$n" || failed+=("$n")
  done
  echo "peers: $((${#names[@]} - ${#failed[@]})) ready, ${#failed[@]} failed${failed:+: ${failed[*]}} ($(($(date +%s) - t_all)) s)"
  [ ${#failed[@]} -eq 0 ]
  ;;
path)
  [ -n "${2:-}" ] && [ -n "$(version_of "$2")" ] || {
    echo "usage: tools/peers.sh path NAME (one of: $(versions | awk '{ printf "%s ", $1 }'))" >&2
    exit 2
  }
  dir_of "$2"
  ;;
list)
  versions | while read -r n v; do
    d="$CACHE/$n-$v"
    state=missing
    if [ -f "$d/.inputs" ]; then
      if [ "$(cat "$d/.inputs")" = "$(inputs_hash "$n")" ]; then state=built; else state=stale; fi
    fi
    echo "$n $v $state $d"
  done
  ;;
*)
  echo "usage: tools/peers.sh build [NAME...] | path NAME | list" >&2
  exit 2
  ;;
esac
