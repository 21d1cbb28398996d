#!/usr/bin/env bash
# How far the same CPU work moves from one process to the next on the GPU host: the floor under
# the cost model's error on host segments (a prediction can be no closer to a run than two runs of
# the same work are to each other). Each measurement is repeated in PROCESSES (6) new processes:
#   - `redwood probe` in an empty cache folder: the CPU's peak fp32 and bf16 GFLOP/s (oneDNN
#     matmuls), its memory bandwidth (a memcpy over the oneTBB threads) and an op's launch cost;
#   - `redwood infer` of PP-OCRv4 det on the CPU at 8x3x320x416, the median of REPEAT (30) runs,
#     on every core and on THREADS_FEW (8) threads.
# Writes $OUT/YYYY-MM-DD-<gpu>-cpu-repeat.md (machine, commit, each process's figure, the spread).
#
#   device run, carry [".device/pN"]:  bash scripts/cpu_repeat_device_run.sh
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device_env.sh
processes=${PROCESSES:-6}
repeat=${REPEAT:-30}
few=${THREADS_FEW:-8}
det=$RW_BUNDLE_DATA/assets/models/ch_PP-OCRv4_det_infer.onnx
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A row: the label, then each process's figure, then min, median, max and (max - min) / median.
row() {  # label values...
  local label=$1
  shift
  local values=("$@")
  local sorted
  sorted=$(printf '%s\n' "${values[@]}" | grep . | sort -n)
  [[ -n $sorted ]] || { echo "| $label | failed | | | | |"; return; }
  awk -v label="$label" -v all="${values[*]}" '{a[NR] = $1} END {
    med = a[int((NR + 1) / 2)]
    printf "| %s | %s | %s | %s | %s | %.0f %% |\n", label, all, a[1], med, a[NR], 100 * (a[NR] - a[1]) / med
  }' <<<"$sorted"
}

fp32=() bf16=() memory=() launch=()
for i in $(seq 1 "$processes"); do
  log="$OUT/probe-$i.log"
  REDWOOD_CACHE_DIR="$work/probe-$i" bash "$run" redwood probe >"$log" 2>&1
  read -r b f < <(sed -n 's/^  peak GFLOPS  bf16 \([0-9.]*\)  fp32 \([0-9.]*\).*/\1 \2/p' "$log" | head -1)
  bf16+=("$b") fp32+=("$f")
  memory+=("$(sed -n 's/^  memory       \([0-9.]*\) GB\/s.*/\1/p' "$log" | head -1)")
  launch+=("$(sed -n 's/^  launch       \([0-9.]*\) us an op.*/\1/p' "$log" | head -1)")
done

# det on the CPU: the launcher's p50 over REPEAT runs, one process at a time.
det_p50() {  # threads log
  REDWOOD_CACHE_DIR="$work/infer" bash "$run" redwood infer "$det" --random x=8x3x320x416 --device cpu \
    --repeat "$repeat" --threads "$1" >"$2" 2>&1
  sed -n 's/^latency: p50 \([0-9.]*\) ms.*/\1/p' "$2" | head -1
}
all=() some=()
for i in $(seq 1 "$processes"); do
  all+=("$(det_p50 0 "$OUT/det-cpu-all-$i.log")")
  some+=("$(det_p50 "$few" "$OUT/det-cpu-$few-$i.log")")
done

result="$OUT/$day-${tag:-gpu}-cpu-repeat.md"
{
  echo "# $day · ${gpu_name:-unknown GPU} host · the same CPU work in new processes"
  echo
  machine_rows
  echo "| command | \`bash scripts/cpu_repeat_device_run.sh\` (PROCESSES=$processes, REPEAT=$repeat, THREADS_FEW=$few) |"
  echo
  echo "Each figure is one new process. Spread: (max - min) / median."
  echo
  echo "| measurement | each process | min | median | max | spread |"
  echo "| --- | --- | --- | --- | --- | --- |"
  row "probe: fp32 peak, GFLOP/s (oneDNN matmul 2048^3)" "${fp32[@]}"
  row "probe: bf16 peak, GFLOP/s (oneDNN matmul 4096^3)" "${bf16[@]}"
  row "probe: memory, GB/s (128 MiB memcpy over the oneTBB threads)" "${memory[@]}"
  row "probe: launch, us an op (one more tiny node in the CPU executor)" "${launch[@]}"
  row "det on the CPU, 8x3x320x416, p50 of $repeat runs, ms (all cores)" "${all[@]}"
  row "det on the CPU, 8x3x320x416, p50 of $repeat runs, ms ($few threads)" "${some[@]}"
  echo
  echo "The CPU, as the host reports it:"
  echo
  echo '```'
  lscpu | grep -E '^(Model name|CPU\(s\)|Thread\(s\) per core|Core\(s\) per socket|Socket\(s\)|NUMA node\(s\)|Hypervisor vendor|CPU max MHz|L3 cache)' || true
  echo '```'
} >"$result"
cat "$result"
