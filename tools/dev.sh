#!/usr/bin/env bash
# profcol's one entry point for a fresh Debian machine:
#   tools/dev.sh run [profcol args...]  install what is missing, build, run profcol
#   tools/dev.sh test                   install what is missing, build, run every test
#                                       (plain build, then AddressSanitizer+UBSan build;
#                                       the release build is compiled, not run; the real peers
#                                       built once into ~/.cache/profcol-peers: tools/peers.sh)
#   tools/dev.sh mutate [NAME...|--list] build one-line mutants of the code in a scratch copy and
#                                       check that the tests catch each (slow; tests/README.md)
#   tools/dev.sh image                  build the container image (deploy/Dockerfile) with podman,
#                                       or docker where a Docker daemon answers
#   tools/dev.sh image-test             build it, then run it (tests/e2e/test_image.py: the image,
#                                       and the compose file's services that need no Docker Hub)
set -euo pipefail
cd "$(dirname "$0")/.."

# libisal-dev: gzip through ISA-L's igzip; libzstd-dev: zstd on the wire; libdeflate-dev: only
# bench/codecs, which compares it (meson configures the bench tools with the rest).
BUILD_PKGS=(gcc meson ninja-build pkg-config python3 libuv1-dev libprotobuf-c-dev
  protobuf-c-compiler zlib1g-dev libyaml-dev libjansson-dev node-llhttp libnghttp2-dev libssl-dev
  libisal-dev libzstd-dev libdeflate-dev librdkafka-dev libsnappy-dev libdw-dev libelf-dev
  libdebuginfod-dev libiberty-dev)
# zstd: the command-line tool the e2e tests make and check zstd bodies with
# llvm: llvm-symbolizer, test_symbolizer's oracle of Go inline chains (binutils 2.40 misreads Go's DWARF)
TEST_PKGS=(python3-protobuf protobuf-compiler clang libclang-rt-14-dev golang-go python3-grpcio maven
  python3-grpc-tools openssl python3-yaml clang-format curl openjdk-17-jdk-headless
  dnsmasq iproute2 chromium zstd python3-venv prometheus python3-prometheus-client debuginfod
  elfutils binutils llvm)
# The container image without Docker Hub and without a daemon (deploy/README.md):
#   podman        builds and runs the image (daemonless, Debian's docker-compatible engine)
#   buildah       podman build's back end (a Recommends of podman, so named here)
#   runc          the OCI runtime: crun, podman's other choice, refuses this sandbox's hybrid
#                 cgroups (v1 controllers + a v2 mount)
#   debootstrap   makes the debian:bookworm-slim base image from the Debian mirror apt uses
#   podman-compose  runs deploy/docker-compose.yaml
#   golang-github-containernetworking-plugin-dnsname  lets compose services find each other by
#                 name (http://profcol:4040) on podman's CNI networks
IMAGE_PKGS=(podman buildah runc debootstrap podman-compose
  golang-github-containernetworking-plugin-dnsname)
IMAGE=${PROFCOL_IMAGE:-profcol:0.1.0}
BASE_IMAGE=debian:bookworm-slim
IMAGE_DIR=${PROFCOL_IMAGE_DIR:-build-image}

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

# ---- the container image ----

# docker where a Docker daemon answers, else podman (installed when missing)
container_engine() {
  if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
    echo docker
  else
    echo podman
  fi
}

# podman's settings for this machine, in $IMAGE_DIR/containers.conf (nothing under /etc changes):
# runc (crun refuses hybrid cgroups) and ulimits no higher than the hard limits, which podman's
# defaults (nofile 1048576, nproc 4194304) exceed here: runc may not raise them without
# CAP_SYS_RESOURCE. conmon, which starts runc, runs with at most 32768 processes. cgroupfs and a
# file for podman's events: there is no systemd to ask.
podman_setup() {
  mkdir -p "$IMAGE_DIR"
  local nofile nproc
  nofile=$(ulimit -Hn)
  nproc=$(ulimit -Hu)
  [ "$nofile" = unlimited ] && nofile=1048576
  { [ "$nproc" = unlimited ] || [ "$nproc" -gt 32768 ]; } && nproc=32768
  cat >"$IMAGE_DIR/containers.conf" <<EOF
# written by tools/dev.sh; used through CONTAINERS_CONF
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
  export CONTAINERS_CONF=$PWD/$IMAGE_DIR/containers.conf
}

# The Debian entries apt uses here (sources.list, sources.list.d/*.list and *.sources) for the
# bookworm suites, as one deb822 file on stdout; the first line is "# mirror: URI" of the main
# suite, which debootstrap is given.
debian_sources() {
  python3 - <<'EOF'
import glob, re
entries = []  # (uris, suites, components, signed_by)
def add(uris, suites, comps, signed):
    suites = [s for s in suites if re.fullmatch(r"bookworm(-updates|-security|-backports)?", s)]
    if suites and uris:
        entries.append((uris, suites, comps or ["main"], signed))
for path in ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list")):
    try:
        lines = open(path).read().splitlines()
    except OSError:
        continue
    for line in lines:
        line = line.split("#", 1)[0].strip()
        m = re.match(r"deb\s+(\[([^]]*)\]\s+)?(\S+)\s+(\S+)\s*(.*)$", line)
        if m:
            opts = dict(o.split("=", 1) for o in (m.group(2) or "").split() if "=" in o)
            add([m.group(3)], [m.group(4)], m.group(5).split(), opts.get("signed-by"))
for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
    for stanza in re.split(r"\n\s*\n", open(path).read()):
        f = {}
        for line in stanza.splitlines():
            if line.startswith("#") or ":" not in line:
                continue
            k, v = line.split(":", 1)
            f[k.strip().lower()] = v.split()
        if "deb" in f.get("types", []) and f.get("enabled", ["yes"]) != ["no"]:
            add(f.get("uris"), f.get("suites", []), f.get("components"),
                (f.get("signed-by") or [None])[0])
main = [e for e in entries if "bookworm" in e[1]]
if not main:
    raise SystemExit("no Debian bookworm entry in /etc/apt/sources.list{,.d}")
print("# mirror: " + main[0][0][0])
print("# the Debian sources of the machine that built this image (tools/dev.sh image)")
for uris, suites, comps, signed in entries:
    print("\nTypes: deb\nURIs: %s\nSuites: %s\nComponents: %s" % (" ".join(uris), " ".join(suites), " ".join(comps)))
    print("Signed-By: %s" % (signed or "/usr/share/keyrings/debian-archive-keyring.gpg"))
EOF
}

# debian:bookworm-slim made here: debootstrap --variant=minbase from the mirror apt already uses,
# trimmed as Debian's own slim image is (no docs but copyright files, no man pages or locales,
# apt without caches or translations), imported into podman. Built once per machine: kept until
# removed (podman rmi debian:bookworm-slim).
base_image() {
  podman image exists "$BASE_IMAGE" && return 0
  local sources mirror root
  sources=$(debian_sources)
  mirror=$(sed -n '1s/^# mirror: //p' <<<"$sources")
  root=$(mktemp -d /var/tmp/profcol-rootfs.XXXXXX)
  echo "base image: debootstrap --variant=minbase bookworm from $mirror"
  if ! debootstrap --variant=minbase bookworm "$root" "$mirror" >"$IMAGE_DIR/debootstrap.log" 2>&1; then
    tail -20 "$IMAGE_DIR/debootstrap.log" >&2
    rm -rf "$root"
    return 1
  fi
  rm -f "$root/etc/apt/sources.list"
  sed 1d <<<"$sources" >"$root/etc/apt/sources.list.d/debian.sources"
  # what this machine needs to reach the registries, which the image's build steps need too:
  # apt settings (a stale snapshot's dates, a proxy) and the machine's own CA certificates
  # (/usr/local/share/ca-certificates; on the test machines the sandbox's HTTPS egress
  # certificate, without which npm in the demo app's build cannot reach the npm registry).
  # ca-certificates, when a Dockerfile installs it, adds them to the image's trust store.
  if compgen -G "/usr/local/share/ca-certificates/*" >/dev/null; then
    mkdir -p "$root/usr/local/share/ca-certificates"
    cp -a /usr/local/share/ca-certificates/. "$root/usr/local/share/ca-certificates/"
  fi
  apt-config dump | grep -E '^Acquire::(Check-Valid-Until|Check-Date|https?::Proxy) ' \
    >"$root/etc/apt/apt.conf.d/90host" || rm -f "$root/etc/apt/apt.conf.d/90host"
  cat >"$root/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
  echo 'Acquire::GzipIndexes "true";' >"$root/etc/apt/apt.conf.d/docker-gzip-indexes"
  echo 'Acquire::Languages "none";' >"$root/etc/apt/apt.conf.d/docker-no-languages"
  echo 'Apt::AutoRemove::SuggestsImportant "false";' >"$root/etc/apt/apt.conf.d/docker-autoremove-suggests"
  echo force-unsafe-io >"$root/etc/dpkg/dpkg.cfg.d/docker-apt-speedup"
  cat >"$root/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
  find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
  find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
  rm -rf "$root"/usr/share/{man,groff,info,lintian,linda}/* "$root"/var/cache/apt/*.bin \
    "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/var/log/*.log \
    "$root"/var/log/apt/* "$root"/var/cache/debconf/*-old
  find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} +
  tar -C "$root" --numeric-owner -c . | podman import \
    --change 'CMD ["bash"]' --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    - "$BASE_IMAGE" >/dev/null
  rm -rf "$root"
  echo "base image: $BASE_IMAGE imported ($(podman image inspect --format '{{.Size}}' "$BASE_IMAGE" | awk '{printf "%.0f MB", $1/1e6}'))"
}

# the image from deploy/Dockerfile, tagged $IMAGE; prints the engine used on the last line
image_build() {
  local engine
  engine=$(container_engine)
  if [ "$engine" = docker ]; then
    docker build -f deploy/Dockerfile -t "$IMAGE" . >&2
  else
    install_missing "${IMAGE_PKGS[@]}" >&2
    podman_setup
    base_image >&2
    # --jobs 2: the runtime stage's apt-get runs while the build stage compiles
    podman build --pull=never --format docker --jobs 2 -f deploy/Dockerfile -t "$IMAGE" . >&2
  fi
  echo "$engine"
}

# whether containers run here at all; prints why not
can_run_containers() {
  if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
    return 0
  fi
  if ! command -v apt-get >/dev/null; then
    echo "no Docker daemon answers and this is not a Debian machine (podman is installed from Debian)"
    return 1
  fi
  if [ "$(id -u)" -ne 0 ]; then
    echo "not root: podman as a normal user needs subuid ranges set up by hand (deploy/README.md)"
    return 1
  fi
  install_missing "${IMAGE_PKGS[@]}" >&2
  podman_setup
  local err
  if ! err=$(podman info 2>&1 >/dev/null); then
    echo "podman info failed: $(tail -1 <<<"$err")"
    return 1
  fi
  if ! err=$(unshare --mount --pid --net --uts --ipc --fork true 2>&1); then
    echo "no namespaces for containers: $err"
    return 1
  fi
}

image_test() {
  local engine t0=$SECONDS
  engine=$(image_build | tail -1)
  echo "image: $IMAGE built with $engine in $((SECONDS - t0)) s"
  [ "$engine" = podman ] && podman_setup
  PROFCOL_ENGINE=$engine PROFCOL_IMAGE=$IMAGE /usr/bin/python3 tests/e2e/test_image.py -v
  echo "image-test: $((SECONDS - t0)) s in all"
}

# The images take minutes, mostly downloads (debootstrap, apt, npm): `test` builds them in the
# background while the suites run, at the lowest CPU and I/O priority so the suites' timing is
# not disturbed, then image_test finds them cached. The log is printed only when it fails.
image_prebuild_start() {
  mkdir -p "$IMAGE_DIR"
  set -m # its own process group, so that an early exit of `test` can stop all of it
  (
    set -e
    renice -n 19 -p "$BASHPID" >/dev/null 2>&1 || true # its children inherit both
    ionice -c 3 -p "$BASHPID" >/dev/null 2>&1 || true
    image_build >/dev/null
    if command -v podman-compose >/dev/null; then
      podman_setup
      BUILDAH_FORMAT=docker podman-compose -f deploy/docker-compose.yaml build go-app node-app
    fi
  ) >"$IMAGE_DIR/prebuild.log" 2>&1 &
  IMAGE_PREBUILD_PID=$!
  set +m
  trap stop_prebuilds EXIT
}

# what an early exit of `test` leaves running in the background: stopped, process group and all
stop_prebuilds() {
  local pid
  for pid in ${IMAGE_PREBUILD_PID:-} ${PEERS_PREBUILD_PID:-}; do
    kill -- -"$pid" 2>/dev/null || true
  done
}

# The peers (tools/peers.sh, tests/peers/README.md) build in the background too, from the start of
# `test`, at the lowest CPU and I/O priority: on a fresh machine that is minutes of downloads and
# Go, Rust and Maven builds, which then overlap profcol's own builds and the plain suite. The
# peer tests (suite peers) wait for it; its log is printed when it fails, its timings always.
peers_prebuild_start() {
  PEERS_LOG=$(mktemp /tmp/profcol-peers-build.XXXXXX)
  set -m
  (
    renice -n 19 -p "$BASHPID" >/dev/null 2>&1 || true
    ionice -c 3 -p "$BASHPID" >/dev/null 2>&1 || true
    exec tools/peers.sh build
  ) >"$PEERS_LOG" 2>&1 &
  PEERS_PREBUILD_PID=$!
  set +m
  trap stop_prebuilds EXIT
}

peers_prebuild_wait() {
  local rc=0
  wait "$PEERS_PREBUILD_PID" || rc=$?
  PEERS_PREBUILD_PID=""
  if [ "$rc" -ne 0 ]; then
    echo "peers build failed:" >&2
    tail -60 "$PEERS_LOG" >&2
  else
    grep '^peer' "$PEERS_LOG" || true
  fi
  rm -f "$PEERS_LOG"
  return "$rc"
}

image_prebuild_wait() {
  local rc=0
  wait "$IMAGE_PREBUILD_PID" || rc=$?
  IMAGE_PREBUILD_PID=""
  if [ "$rc" -ne 0 ]; then
    echo "image build failed:" >&2
    tail -40 "$IMAGE_DIR/prebuild.log" >&2
    return 1
  fi
}

# The e2e tests' go commands share one build cache (tests/e2e/harness.py GO_CACHE): fill it once
# here, outside any test's timeout, with what they build (a Go of 1.24 or later builds `go tool
# pprof` on first use; the Go uploader needs the standard library), minutes on a fresh machine.
e2e_go_cache_warm() {
  local cache=${PROFCOL_E2E_GOCACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/profcol-e2e/go-build}
  command -v go >/dev/null || return 0
  GOCACHE=$cache GOTOOLCHAIN=local go tool pprof -h >/dev/null 2>&1 || true
  (cd tests/e2e/go/uploader &&
    GOCACHE=$cache GOTOOLCHAIN=local GOFLAGS=-mod=mod GOPROXY=off go build -o /dev/null .) || true
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
  # the container images build in the background meanwhile, where containers can run
  image_skip=""
  if image_skip=$(can_run_containers); then image_prebuild_start; fi
  # the real peers (Collector, Pyroscope SDKs and agent; tests/peers/README.md), built once per
  # machine into ~/.cache/profcol-peers from their pinned versions; reused when already there
  peers_prebuild_start
  build build
  # -O3 brings warnings of its own (-Wmaybe-uninitialized, -Wstringop-*, -Wformat-truncation)
  # and werror stays on in release builds: compile that configuration too (no test run)
  build build-release -Dbuildtype=release
  e2e_go_cache_warm
  meson test -C build --print-errorlogs --no-suite peers
  # the peer tests, once (not again under ASan): after their peers are built; a peer that did not
  # build makes its tests fail, naming it
  peers_rc=0
  peers_prebuild_wait || peers_rc=$?
  meson test -C build --print-errorlogs --suite peers
  [ "$peers_rc" -eq 0 ]
  # the whole suite again under AddressSanitizer + UndefinedBehaviorSanitizer, but for the peer
  # tests (suite peers): they run once, above
  build build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    meson test -C build-asan --print-errorlogs --no-suite peers
  # every decoder under libFuzzer (clang): regression inputs, then a fixed number of runs
  tools/fuzz.sh
  # the container image, built and run (podman, or docker with a daemon), where containers run
  if [ -n "${IMAGE_PREBUILD_PID:-}" ]; then
    image_prebuild_wait
    image_test
  else
    echo "image-test skipped: $image_skip"
  fi
  ;;
image)
  install_missing python3 # reads apt's sources for the base image
  engine=$(image_build | tail -1)
  echo "image: $IMAGE ($engine)"
  ;;
image-test)
  install_missing "${BUILD_PKGS[@]}" "${TEST_PKGS[@]}"
  image_test
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
  echo "usage: tools/dev.sh run [profcol args...] | tools/dev.sh test | tools/dev.sh fuzz [RUNS|long SECONDS] | tools/dev.sh mutate [NAME...|--list] | tools/dev.sh image | tools/dev.sh image-test" >&2
  exit 2
  ;;
esac
