#!/usr/bin/env bash
# Builds what the streaming benchmark runs on the GPU host (Release, CUDA, sm_90): the launcher
# `redwood`, redwood_gpu_tests, redwood_gpu_bench, redwood_stream_bench and redwood_context_floor
# (a bare CUDA context, scripts/plan_cache_device_run.sh), and packs them with
# their shared libraries, the models, the video, ONNX's node tests and the allocation counter
# (tests/support/alloc_counter.c) into .device/ (ignored by
# git). With OpenCV's closure the bundle is over what one device call carries (64 MiB, the tracked
# files included), so it comes out as parts of PART_MIB (default here 54 MiB, leaving the tracked
# files room) .device/p1 .. .device/pN, carried by calls made back to back (../shared/tools/device-bundle):
#
#   scripts/streaming_bundle.sh [BUILD_DIR]        # default build-cuda
#   device run, carry [".device/p1"]:  bash .device/p1/run --stage       (each part but the last)
#   device run, carry [".device/pN"]:  bash scripts/streaming_device_run.sh
#
# The GPU host gets no .git: the commit (with -dirty when the tree has changes) and the CUDA
# toolkit's version go into .device/commit and .device/toolkit, which the tracked scripts read.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-cuda}
if [[ ! -f $build/CMakeCache.txt ]]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DREDWOOD_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90
fi
targets=(redwood redwood_gpu_tests redwood_gpu_bench redwood_stream_bench redwood_context_floor)
cmake --build "$build" --target "${targets[@]}" redwood_alloc_counter
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
for t in "${targets[@]}"; do strip -o "$stage/$t" "$build/bin/$t"; done
# The allocation counter (tests/support/alloc_counter.c) travels as data: it is preloaded, not run.
export PART_MIB=${PART_MIB:-54}
../shared/tools/device-bundle -o .device "${targets[@]/#/$stage/}" \
  -d assets/models -d assets/video/vtest-captions.avi -d /usr/share/libonnx-testdata/data/node \
  -d "$build/tests/libredwood_alloc_counter.so"
commit=$(git rev-parse --short HEAD)
[[ -z $(git status --porcelain --untracked-files=no) ]] || commit+=-dirty
nvcc=$(sed -n 's/^CMAKE_CUDA_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
toolkit=$({ "${nvcc:-nvcc}" --version 2>/dev/null || true; } | sed -n 's/.*release \([0-9.]*\).*/\1/p')
for d in .device .device/p*; do
  [[ -d $d ]] || continue
  echo "$commit" >"$d/commit"
  echo "$toolkit" >"$d/toolkit"
done
ls -d .device/p* 2>/dev/null || true
