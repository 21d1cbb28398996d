#!/usr/bin/env bash
# Builds the GPU test and benchmark binaries (Release, CUDA, sm_90) here and packs them for the
# GPU host into .device-cuda/ (ignored by git), with the models and ONNX's node tests. None
# of them links OpenCV; a bundle over the device tool's part size comes out as parts p1..pN
# (../shared/tools/device-bundle). Then, on the host, one command runs everything
# (scripts/cuda_device_run.sh; docs/cuda.md, "Running on the GPU host"):
#
#   scripts/cuda_bundle.sh [BUILD_DIR]      # default build-cuda
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-cuda}
if [[ ! -f $build/CMakeCache.txt ]]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DREDWOOD_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90
fi
ninja -C "$build" -j2 redwood_gpu_tests redwood_gpu_bench redwood_stream_bench
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
for t in redwood_gpu_tests redwood_gpu_bench redwood_stream_bench; do strip -o "$stage/$t" "$build/bin/$t"; done
../shared/tools/device-bundle -o .device-cuda "$stage/redwood_gpu_tests" "$stage/redwood_gpu_bench" "$stage/redwood_stream_bench" \
  -d assets/models -d /usr/share/libonnx-testdata/data/node
grep -qx '/.device-cuda/' .git/info/exclude || echo '/.device-cuda/' >>.git/info/exclude
# The GPU host gets no .git: cuda_device_run.sh reads the commit (with -dirty when the tree has
# changes) and the CUDA toolkit's version from here for its results file's header.
commit=$(git rev-parse --short HEAD)
[[ -z $(git status --porcelain) ]] || commit+=-dirty
echo "$commit" >.device-cuda/commit
nvcc=$(sed -n 's/^CMAKE_CUDA_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
{ "${nvcc:-nvcc}" --version 2>/dev/null || true; } | sed -n 's/.*release \([0-9.]*\).*/\1/p' >.device-cuda/toolkit
# One bundle, or parts p1..pN when it is over the tool's part size (each part its own call).
if [[ -f .device-cuda/bundle.tar.xz ]]; then
  echo "bundle: $(($(stat -c %s .device-cuda/bundle.tar.xz) / 1048576)) MiB in one call"
else
  echo "bundle: parts $(cd .device-cuda && echo p*): stage each but the last with 'bash .device-cuda/pK/run --stage'"
fi
