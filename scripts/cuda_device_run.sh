#!/usr/bin/env bash
# The one command for the GPU host: the GPU tests, then scripts/bench_gpu.py (PP-OCRv4 det:
# Redwood GPU against Redwood CPU and ONNX Runtime CPU; then ResNet-50 and MobileNetV3-Large
# against PyTorch). Needs the bundle of scripts/cuda_bundle.sh in .device-cuda/. Writes to $OUT
# the results file YYYY-MM-DD-<gpu>.md (a header: date, GPU, driver, CUDA, PyTorch and ONNX
# Runtime versions, host cores, OS, Redwood commit, the command; then the tables; copy it into
# docs/results/ to keep it), and gpu.txt, gpu_tests.log, bench.log, det_table.md,
# pytorch_table.md, results.json, det_results.json.
#
#   device run, carry [".device-cuda"]:  bash scripts/cuda_device_run.sh
#
# Time limits (seconds; the device tool stops a command at 600): TESTS_TIMEOUT (90),
# DET_TIMEOUT (150), TORCH_TIMEOUT (330); BENCH_ARGS adds options to both bench_gpu.py calls.
# The GPU host has no .git: the commit comes from REDWOOD_COMMIT, else from .device-cuda/commit
# (written by scripts/cuda_bundle.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?set OUT to a folder for the logs}"
run=".device-cuda/run"
# A bundle in parts: the last part's run unpacks them all (the others were staged before).
[[ -f $run ]] || run=$(ls -d .device-cuda/p*/run 2>/dev/null | sort -V | tail -1)
[[ -n $run && -f $run ]] || { echo "no .device-cuda/run: build the bundle first (scripts/cuda_bundle.sh) and carry .device-cuda" >&2; exit 2; }
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
rm -f /tmp/bench/results.json /tmp/bench/det_results.json /tmp/bench/det_table.md /tmp/bench/pytorch_table.md
start=$(date +%s)
PYTHONUNBUFFERED=1 timeout "${DET_TIMEOUT:-150}" python3 scripts/bench_gpu.py --redwood "bash $run redwood_gpu_bench" \
  --out /tmp/bench --tables det ${BENCH_ARGS:-} >"$OUT/bench.log" 2>&1
echo "bench (det) rc=$? in $(($(date +%s) - start)) s" >>"$OUT/bench.log"
start=$(date +%s)
PYTHONUNBUFFERED=1 timeout "${TORCH_TIMEOUT:-330}" python3 scripts/bench_gpu.py --redwood "bash $run redwood_gpu_bench" \
  --out /tmp/bench --tables pytorch ${BENCH_ARGS:-} >>"$OUT/bench.log" 2>&1
echo "bench (pytorch) rc=$? in $(($(date +%s) - start)) s" >>"$OUT/bench.log"
cp /tmp/bench/results.json /tmp/bench/det_results.json /tmp/bench/det_table.md /tmp/bench/pytorch_table.md "$OUT/" 2>/dev/null
cat "$OUT/bench.log"

# The dated results file. The GPU's tag is its model without the vendor and memory words,
# lowercased: "NVIDIA H200" -> h200, "NVIDIA H100 80GB HBM3" -> h100, "NVIDIA GeForce RTX 4090" -> rtx-4090.
gpu_tag() {
  local w words=()
  for w in $1; do
    w=${w%%-*}  # "A100-SXM4-80GB" -> A100
    case $w in
      NVIDIA | GeForce | Tesla | Quadro) continue ;;
      *[0-9]GB | HBM* | PCIe | SXM* | NVL) break ;;
    esac
    words+=("$w")
  done
  local IFS=-
  echo "${words[*]:-gpu}" | tr '[:upper:]' '[:lower:]' | tr -cd 'a-z0-9-'
}
or_not_recorded() { if [[ -n $1 ]]; then echo "$1"; else echo "not recorded"; fi; }
day=$(date -u +%F)
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
driver_cuda=$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -1)
toolkit=$(cat .device-cuda/toolkit 2>/dev/null)
commit=${REDWOOD_COMMIT:-$(cat .device-cuda/commit 2>/dev/null)}
os_name=$( (. /etc/os-release && echo "$PRETTY_NAME") 2>/dev/null)
torch_v=$(python3 -c 'import torch, torchvision; print(f"{torch.__version__} (CUDA runtime {torch.version.cuda}), torchvision {torchvision.__version__}")' 2>/dev/null)
ort_v=$(python3 -c 'import onnxruntime; print(onnxruntime.__version__)' 2>/dev/null)
tests=$(grep -E '^\[  (PASSED|SKIPPED|FAILED) +\] [0-9]+ tests?' "$OUT/gpu_tests.log" |
  sed -E 's/^\[  ([A-Z]+) +\] ([0-9]+) tests?.*/\2 \L\1/' | paste -sd, - | sed 's/,/, /g')
tests_rc=$(grep -o 'redwood_gpu_tests rc=.*' "$OUT/gpu_tests.log" | tail -1)
results="$OUT/$day-$(gpu_tag "${gpu_name:-gpu}").md"
table() {  # a table bench_gpu.py wrote, or why it is missing
  if [[ -s /tmp/bench/$1 ]]; then cat "/tmp/bench/$1"; else echo "Not produced in this call: see bench.log."; fi
}
{
  echo "# $day · ${gpu_name:-unknown GPU} · Redwood against PyTorch, PP-OCRv4 det"
  echo
  echo "| | |"
  echo "| --- | --- |"
  echo "| date | $day |"
  echo "| machine | ${gpu_name:-unknown GPU}, $(nproc) host cores, $(or_not_recorded "$os_name") |"
  echo "| driver | $(or_not_recorded "$driver")${driver_cuda:+ (CUDA $driver_cuda)} |"
  echo "| CUDA toolkit (Redwood's build) | $(or_not_recorded "$toolkit") |"
  echo "| PyTorch | $(or_not_recorded "$torch_v") |"
  echo "| ONNX Runtime | $(or_not_recorded "$ort_v") |"
  echo "| commit | $(or_not_recorded "$commit") (the results were recorded at this commit) |"
  echo "| command | \`bash scripts/cuda_device_run.sh\`${BENCH_ARGS:+ with BENCH_ARGS=\"$BENCH_ARGS\"} |"
  echo "| \`redwood_gpu_tests\`, same call | $(or_not_recorded "$tests")${tests_rc:+ ($tests_rc)} |"
  echo
  echo "## PP-OCRv4 det: Redwood GPU against Redwood CPU and ONNX Runtime CPU"
  echo
  echo "\`scripts/bench_gpu.py --tables det\`: the shipped \`ch_PP-OCRv4_det_infer.onnx\` at 1×3×640×640 and"
  echo "8×3×640×640; GPU replay with CUDA events, the CPU sides and host to host by wall clock."
  echo
  table det_table.md
  echo
  echo "## ResNet-50 and MobileNetV3-Large against PyTorch"
  echo
  echo "\`scripts/bench_gpu.py --tables pytorch\`: medians of --runs (50) after --warmup (20), CUDA events;"
  echo "\"speed vs fastest\" is against the fastest PyTorch mode, \"PyTorch no-TF32\" is PyTorch with"
  echo "\`allow_tf32 = False\` (the peer of the exact fp32 rows); bold marks 1.25× or more."
  echo
  table pytorch_table.md
} >"$results"
echo "results: $results"
