#!/usr/bin/env bash
# The one command for the GPU host (issue 6): the GPU tests, then scripts/bench_gpu.py (PP-OCRv4
# det: Redwood GPU against Redwood CPU and ONNX Runtime CPU; then ResNet-50 and MobileNetV3-Large
# against PyTorch). Needs the bundle of scripts/cuda_bundle.sh in .device-cuda/. Logs go to $OUT:
# gpu.txt, gpu_tests.log, bench.log (the tables), results.json, det_results.json.
#
#   device run, carry [".device-cuda"]:  bash scripts/cuda_device_run.sh
#
# Time limits (seconds; the device tool stops a command at 600): TESTS_TIMEOUT (90),
# DET_TIMEOUT (150), TORCH_TIMEOUT (330); BENCH_ARGS adds options to both bench_gpu.py calls.
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?set OUT to a folder for the logs}"
run=".device-cuda/run"
[[ -f $run ]] || { echo "no .device-cuda/run: build the bundle first (scripts/cuda_bundle.sh) and carry .device-cuda" >&2; exit 2; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
echo "cpu cores: $(nproc)" | tee -a "$OUT/gpu.txt"
bash "$run" true  # unpacks once
export REDWOOD_ASSETS=/tmp/rw-bundle/data/assets
export REDWOOD_ONNX_TESTDATA=/tmp/rw-bundle/data/usr/share/libonnx-testdata/data/node
start=$(date +%s)
timeout "${TESTS_TIMEOUT:-90}" bash "$run" redwood_gpu_tests --gtest_brief=1 >"$OUT/gpu_tests.log" 2>&1
echo "redwood_gpu_tests rc=$? in $(($(date +%s) - start)) s" | tee -a "$OUT/gpu_tests.log"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests ran|FAILED|Failure" "$OUT/gpu_tests.log" | head -40
mkdir -p /tmp/bench
start=$(date +%s)
PYTHONUNBUFFERED=1 timeout "${DET_TIMEOUT:-150}" python3 scripts/bench_gpu.py --redwood "bash $run redwood_gpu_bench" \
  --out /tmp/bench --tables det ${BENCH_ARGS:-} >"$OUT/bench.log" 2>&1
echo "bench (det) rc=$? in $(($(date +%s) - start)) s" >>"$OUT/bench.log"
start=$(date +%s)
PYTHONUNBUFFERED=1 timeout "${TORCH_TIMEOUT:-330}" python3 scripts/bench_gpu.py --redwood "bash $run redwood_gpu_bench" \
  --out /tmp/bench --tables pytorch ${BENCH_ARGS:-} >>"$OUT/bench.log" 2>&1
echo "bench (pytorch) rc=$? in $(($(date +%s) - start)) s" >>"$OUT/bench.log"
cp /tmp/bench/results.json /tmp/bench/det_results.json "$OUT/" 2>/dev/null
cat "$OUT/bench.log"
