#!/usr/bin/env bash
# The plan cache on the GPU host: time to first inference of `redwood infer --device cuda` in a
# new process, cold (an empty cache folder: the model imported from ONNX, every convolution's
# candidates timed) against warm (the folder the cold run left: the imported model and the picks
# read back, nothing parsed or timed), for PP-OCRv4 det and rec
# (assets/models) and ResNet-50 (torchvision's, weights=None, exported as scripts/bench_gpu.py
# does; skipped where PyTorch is missing). Each start is repeated RUNS times, each cold one with a
# fresh cache folder; the medians go into $OUT/YYYY-MM-DD-<gpu>-plan-cache.md with the machine,
# driver and commit; the launcher's logs (REDWOOD_LOG=debug: the caches' lines and the parts of a start) stay in $OUT.
# Beside them, the floor no cache removes: a bare CUDA context in a new process
# (redwood_context_floor, RUNS + 2 times), and each start's cold time against it.
#
# Needs the bundle of scripts/streaming_bundle.sh (the launcher `redwood` and assets/models):
#
#   scripts/streaming_bundle.sh                          # here
#   device run, carry [".device/p1"]:  bash .device/p1/run --stage       (each part but the last)
#   device run, carry [".device/pN"]:  bash scripts/plan_cache_device_run.sh
#
# PRECISION (fp16) and RUNS (3) change the runs, PIPELINE_RUNS (RUNS; 0: none) the pipeline's.
# A second table splits the last cold and warm start of each model into its parts (debug log lines).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device_env.sh
[[ -e assets ]] || ln -s "$RW_BUNDLE_DATA/assets" assets  # the pipeline file names ../assets
models=$RW_BUNDLE_DATA/assets/models
precision=${PRECISION:-fp16}
runs=${RUNS:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# name, model file, input name, input shape
cases=("PP-OCRv4 det|$models/ch_PP-OCRv4_det_infer.onnx|x|1x3x640x640"
       "PP-OCRv4 rec|$models/ch_PP-OCRv4_rec_infer.onnx|x|1x3x48x320")
if python3 -c 'import torch, torchvision' 2>/dev/null; then
  if python3 -c "import sys; sys.path.insert(0, 'scripts'); import bench_gpu; bench_gpu.export('resnet50', '$work')" \
      >"$OUT/resnet50_export.log" 2>&1; then
    cases+=("ResNet-50|$work/resnet50.onnx|input|1x3x224x224")
  fi
fi
[[ -f $work/resnet50.onnx ]] || echo "ResNet-50: not measured (no PyTorch/torchvision here, or the export failed: $OUT/resnet50_export.log)" >&2

# One start of the launcher: prints its time to first inference in ms, or nothing when it failed.
start() {  # model input shape cache_dir log
  REDWOOD_CACHE_DIR=$4 REDWOOD_LOG=debug timeout 300 bash "$run" redwood infer "$1" --random "$2=$3" \
    --device cuda --precision "$precision" >"$5" 2>&1
  sed -n 's/^time to first inference: \([0-9.]*\) ms.*/\1/p' "$5" | head -1
}
median() { sort -n | awk '{a[NR] = $1} END {if (NR) print a[int((NR + 1) / 2)]}'; }
ratio() { [[ -n $1 && -n $2 ]] && awk -v a="$1" -v b="$2" 'BEGIN{printf "%.1fx", a / b}'; }

nvidia-smi --query-gpu=name,driver_version,persistence_mode,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
persistence=$(nvidia-smi --query-gpu=persistence_mode --format=csv,noheader 2>/dev/null | head -1)

# The floor under every start: a new process that only loads the driver (cuInit) and makes the
# GPU's primary context (cudaFree(0)), nothing of Redwood (redwood_context_floor), timed from its
# main. No cache can take a warm start below it; the best cold / warm a start can reach is cold / floor.
floor_runs=()
for i in $(seq 1 $((runs + 2))); do
  floor_runs+=("$(bash "$run" redwood_context_floor 2>>"$OUT/context_floor.log" | tee -a "$OUT/context_floor.log" \
    | sed -n 's/.*total \([0-9.]*\) ms.*/\1/p')")
done
floor=$(printf '%s\n' "${floor_runs[@]}" | grep . | median)
floor_init=$(sed -n 's/^cuInit \([0-9.]*\) ms.*/\1/p' "$OUT/context_floor.log" | median)
floor_ctx=$(sed -n 's/.*primary context \([0-9.]*\) ms.*/\1/p' "$OUT/context_floor.log" | median)
echo "bare CUDA context: ${floor_runs[*]} ms (median ${floor:-failed}; cuInit ${floor_init:-?}, primary context ${floor_ctx:-?})" >&2
table="$OUT/plan_cache_table.md"
parts="$OUT/plan_cache_parts.md"
# Where one start's time went, from its log: import, the wait for the CUDA context (made on a
# thread of its own while the model is read), the plan cache's key (the graph's hash), the
# optimizer's passes, the plan made at load (fixed shapes) and the pinned-copy peak, the first run.
breakdown() {  # log
  local log=$1
  local import runner first made ctx key opt plan pinned
  read -r import runner first < <(sed -n 's/^time to first inference: .*(import \([0-9.]*\) ms, runner \([0-9.]*\) ms, first run \([0-9.]*\) ms).*/\1 \2 \3/p' "$log" | head -1)
  made=$(sed -n 's/.*context made in \([0-9.]*\) ms.*/\1/p' "$log" | head -1)
  ctx=$(sed -n 's/.*context ready in \([0-9.]*\) ms.*/\1/p' "$log" | head -1)
  read -r key opt < <(sed -n 's/.*plan cache key in \([0-9.]*\) ms, optimized in \([0-9.]*\) ms.*/\1 \2/p' "$log" | head -1)
  read -r plan pinned < <(sed -n 's/.*at load[^0-9]* in \([0-9.]*\) ms, pinned peak in \([0-9.]*\) ms.*/\1 \2/p' "$log" | head -1)

  echo "${import:-?} | ${runner:-?} | ${made:-?} | ${ctx:-?} | ${key:-?} | ${opt:-?} | ${plan:-?} | ${pinned:-?} | ${first:-?}"
}
{
  echo "| model | input | cold ms (median of $runs) | warm ms (median of $runs) | cold / warm | picks read back (warm) | cold / floor (the most a warm start could gain) |"
  echo "| --- | --- | --- | --- | --- | --- | --- |"
} >"$table"
{
  echo "| model | start | import | runner | context made (alongside) | context wait | plan cache key | optimize | plan at load | pinned peak wait | first run |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
} >"$parts"
for spec in "${cases[@]}"; do
  IFS='|' read -r name file input shape <<<"$spec"
  model_tag=$(tr -cd 'a-zA-Z0-9' <<<"$name")
  cold=() warm=() seeded=""
  for i in $(seq 1 "$runs"); do
    cache="$work/cache-$model_tag-$i"
    mkdir -p "$cache"
    cold+=("$(start "$file" "$input" "$shape" "$cache" "$OUT/$model_tag-cold-$i.log")")
    warm+=("$(start "$file" "$input" "$shape" "$cache" "$OUT/$model_tag-warm-$i.log")")
    n=$(grep -oE "[0-9]+ tuned picks seeded" "$OUT/$model_tag-warm-$i.log" | head -1 | cut -d' ' -f1)
    [[ -n $n ]] && seeded=$n
  done
  # The last pair's parts, in ms.
  echo "| $name | cold | $(breakdown "$OUT/$model_tag-cold-$runs.log") |" >>"$parts"
  echo "| $name | warm | $(breakdown "$OUT/$model_tag-warm-$runs.log") |" >>"$parts"
  c=$(printf '%s\n' "${cold[@]}" | grep . | median)
  w=$(printf '%s\n' "${warm[@]}" | grep . | median)
  if [[ -n $c && -n $w ]]; then
    echo "| $name | $shape | $c | $w | $(ratio "$c" "$w") | ${seeded:-none} | $(ratio "$c" "$floor") |" >>"$table"
  else
    echo "| $name | $shape | ${c:-failed} | ${w:-failed} | | see $model_tag-*.log | |" >>"$table"
  fi
  echo "$name: cold ${cold[*]} ms, warm ${warm[*]} ms" >&2
done

# The OCR pipeline as a user restarts it: `redwood run configs/ocr-streams.yaml` for one frame of
# one stream, both models `device: auto` (placed at load), each prepared at every batch size its
# stage pads to (14 for det, 14 for rec): a plan, tuned and captured, per size. Timed to the first
# frame through the sinks ("first result" line). The 3 GiB frame-pool reservation, sized for 100
# cameras, is left out (frame_pool_reserve_mb=0): no cache shortens it.
pipeline_start() {  # cache_dir log
  REDWOOD_CACHE_DIR=$1 REDWOOD_LOG=debug timeout 590 bash "$run" redwood run configs/ocr-streams.yaml --frames 1 --quiet \
    --set service.frame_pool_reserve_mb=0 >"$2" 2>&1
  sed -n 's/^first result \([0-9.]*\) ms after the start.*/\1/p' "$2" | head -1
}
if [[ ${PIPELINE_RUNS:-$runs} -gt 0 ]]; then
  cold=() warm=()
  for i in $(seq 1 "${PIPELINE_RUNS:-$runs}"); do
    cache="$work/cache-pipeline-$i"
    mkdir -p "$cache"
    cold+=("$(pipeline_start "$cache" "$OUT/pipeline-cold-$i.log")")
    warm+=("$(pipeline_start "$cache" "$OUT/pipeline-warm-$i.log")")
  done
  c=$(printf '%s\n' "${cold[@]}" | grep . | median)
  w=$(printf '%s\n' "${warm[@]}" | grep . | median)
  if [[ -n $c && -n $w ]]; then
    echo "| OCR pipeline (ocr-streams.yaml, det and rec auto, every batch size) | 1 stream, 1 frame | $c | $w | $(ratio "$c" "$w") | | $(ratio "$c" "$floor") |" >>"$table"
  else
    echo "| OCR pipeline (ocr-streams.yaml) | 1 stream, 1 frame | ${c:-failed} | ${w:-failed} | | see pipeline-*.log | |" >>"$table"
  fi
  echo "OCR pipeline: cold ${cold[*]} ms, warm ${warm[*]} ms" >&2
fi
cat "$table" "$parts"

# What the cache holds after the last warm run (when the launcher has `plan --cache-info`).
last_cache=$(ls -d "$work"/cache-* 2>/dev/null | tail -1)
info=""
if [[ -n $last_cache ]] && bash "$run" redwood plan --help 2>&1 | grep -q -- --cache-info; then
  info=$(REDWOOD_CACHE_DIR=$last_cache bash "$run" redwood plan --cache-info 2>&1 | head -40)
fi

results="$OUT/$day-${tag:-gpu}-plan-cache.md"
{
  echo "# $day · ${gpu_name:-unknown GPU} · the plan cache: time to first inference, cold and warm"
  echo
  machine_rows
  echo "| command | \`bash scripts/plan_cache_device_run.sh\` (PRECISION=$precision, RUNS=$runs) |"
  echo
  echo "Each start is a new process: \`redwood infer MODEL --random INPUT=SHAPE --device cuda --precision $precision\`,"
  echo "timed from before the model is read to the first result (its \"time to first inference\" line)."
  echo "Cold: an empty \`REDWOOD_CACHE_DIR\`: the model is imported from ONNX (and kept in the model"
  echo "cache), the tuners time every convolution's candidates (within 3 s a plan) and keep their picks."
  echo "Warm: the same folder in a new process: the imported model and the picks read back."
  echo "The pipeline's row: \`redwood run configs/ocr-streams.yaml --frames 1 --set service.frame_pool_reserve_mb=0\`,"
  echo "timed to its \"first result\" line (the pipeline built, then the first frame through the sinks)."
  echo
  echo "The floor: \`redwood_context_floor\`, a new process that only loads the CUDA driver (cuInit) and"
  echo "makes the GPU's primary context (cudaFree(0)), timed from its main, $((runs + 2)) times: ${floor_runs[*]} ms,"
  echo "median **${floor:-not measured} ms** (cuInit ${floor_init:-?} ms, the context ${floor_ctx:-?} ms). Persistence mode: ${persistence:-not recorded}."
  echo "A warm start makes the same context, so no cache takes it below that floor."
  echo
  cat "$table"
  echo
  echo "Where the last cold and warm start of each model spent their time, in ms (from the launcher's"
  echo "log). The CUDA context is made, and the pinned peak measured, on a thread of its own while the"
  echo "model is read (\"context made\", from that thread's start); \"runner\" is everything from the"
  echo "import's end to a runner ready, the wait for the context included (\"context wait\" is only the"
  echo "part the runner's own first CUDA call saw: a probe before it may have waited already)."
  echo
  cat "$parts"
  if [[ -n $info ]]; then
    echo
    echo "The cache after the last warm start (\`redwood plan --cache-info\`):"
    echo
    echo '```'
    echo "$info"
    echo '```'
  fi
} >"$results"
echo "results: $results"
