#!/usr/bin/env bash
# Sets up a Debian 12 machine to build and test Redwood, then fetches the assets and builds.
# Idempotent: packages already installed skip apt entirely, assets already fetched are only
# re-hashed, and the build is incremental, so a second run takes seconds.
#
#   bash scripts/setup.sh            # as root (CI), or with sudo available
#   BUILD_DIR=build-asan SANITIZE=address,undefined bash scripts/setup.sh   # a sanitizer build
#   BUILD_TARGETS=redwood bash scripts/setup.sh   # only these targets (default: everything)
#
# CUDA: CMake picks up /usr/local/cuda by itself when it exists (backends/cuda then builds).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build_dir=${BUILD_DIR:-build}

log() { echo "setup: $*"; }

# --no-install-recommends below: every package the build needs is named here, including those
# a -dev package only recommends (oneDNN's CMake package requires OpenCL's headers and loader,
# which libdnnl-dev merely recommends: ocl-icd-opencl-dev).
packages=(
  build-essential cmake ninja-build ccache pkg-config git xz-utils ca-certificates
  libtbb-dev libopencv-dev libdnnl-dev ocl-icd-opencl-dev libzmq3-dev cppzmq-dev libspdlog-dev libfmt-dev
  libavformat-dev libavcodec-dev libswscale-dev libavutil-dev
  libyaml-cpp-dev libonnx-dev libprotobuf-dev protobuf-compiler nlohmann-json3-dev libcli11-dev libcpp-httplib-dev
  libglpk-dev
  libgtest-dev libgmock-dev libbenchmark-dev libonnx-testdata
  python3 python3-numpy python3-onnx python3-zmq ffmpeg fonts-dejavu-core
  prometheus  # promtool, which the metrics tests run
  libnats-dev nats-server  # the NATS JetStream sink (optional in CMake) and its tests
)
# Node.js (for npm and the ONNX Runtime reference runner) may come from elsewhere, e.g.
# NodeSource's v20; Debian's nodejs/npm would conflict with it, so add them only when absent.
command -v node >/dev/null || packages+=(nodejs)
command -v npm >/dev/null || packages+=(npm)

# One dpkg-query for all (it prints nothing for a package it has never heard of).
declare -A installed=()
while read -r name state; do
  if [[ $state == "install ok installed" ]]; then installed[${name%%:*}]=1; fi
done < <(dpkg-query -W -f='${Package} ${Status}\n' "${packages[@]}" 2>/dev/null || true)
missing=()
for p in "${packages[@]}"; do
  [[ -n ${installed[$p]:-} ]] || missing+=("$p")
done

if ((${#missing[@]})); then
  sudo=()
  if ((EUID != 0)); then
    command -v sudo >/dev/null || {
      echo "setup: error: not root and no sudo; install as root: ${missing[*]}" >&2
      exit 1
    }
    sudo=(sudo)
  fi
  log "installing ${#missing[@]} packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get -q update
  "${sudo[@]}" apt-get -q install -y --no-install-recommends "${missing[@]}"
else
  log "all ${#packages[@]} packages installed"
fi

log "fetching assets"
bash "$root/scripts/fetch_assets.sh"
bash "$root/scripts/make_caption_clip.sh"

log "configuring $build_dir"
cmake_args=(-S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo)
# SANITIZE: GCC's -fsanitize list for every Redwood target (CUDA stays off there: the CUDA runtime
# and AddressSanitizer's shadow memory do not mix).
if [[ -n ${SANITIZE:-} ]]; then
  cmake_args+=(-DREDWOOD_SANITIZE="$SANITIZE" -DREDWOOD_WITH_CUDA=OFF)
fi
# A folder configured before keeps its generator (CMake refuses to switch it).
[[ -f $build_dir/CMakeCache.txt ]] || cmake_args+=(-G Ninja)
mkdir -p "$build_dir"
cmake "${cmake_args[@]}" >"$build_dir/configure.log" 2>&1 || {
  cat "$build_dir/configure.log" >&2
  echo "setup: error: cmake configure failed" >&2
  exit 1
}

read -r -a targets <<<"${BUILD_TARGETS:-}"
log "building $build_dir${targets[*]:+ (${targets[*]})} (${SECONDS}s so far)"
cmake --build "$build_dir" ${targets[@]:+--target "${targets[@]}"}
log "done in ${SECONDS}s"
