#!/usr/bin/env bash
# The planner's figures on the GPU host, in one call (the bundle of scripts/streaming_bundle.sh
# staged by the calls before): the device profiles (`redwood probe`); then `redwood plan --profile`
# on PP-OCRv4 det and rec across the CPU and the GPU: every node timed on its device (the cost
# history), the placement against HEFT, the naive split and each device alone, and each segment's
# predicted time against its measured one; once as the models are, five times with an op the GPU
# is taken to lack (--cpu-only Resize: the detector's FPN upsampling; a later run predicts each
# segment an earlier one measured from that time), rec three times with Softmax taken as
# CPU-only, and det once for throughput (the ILP); then the OCR pipeline with rec's Softmax nodes
# pinned to the CPU (`device: auto`), run three times in one cache folder: placed, placed again
# on the first run's measured batch times, then read back from the placement cache, each run's
# summary printing the split's segments, measured and predicted; then a fourth start with two of
# the three Softmax nodes pinned, a cut not run before, costed with the hand-over the three
# runs measured in the pipeline; then the three pinned again, rec's GPU runners with the CUDA
# option blocking_completion off, then with pdl off (what each does to the hand-overs).
# Writes $OUT/YYYY-MM-DD-<gpu>-planner.md (machine, commit, the outputs); copy it into
# docs/results/ to keep it. With --pipeline-only, the pipeline's six starts alone
# ($OUT/YYYY-MM-DD-<gpu>-planner-pipeline.md).
#
#   device run, carry [".device/pN"]:  bash scripts/planner_device_run.sh [--pipeline-only]
set -uo pipefail
pipeline_only=false
case ${1:-} in
  --pipeline-only) pipeline_only=true ;;
  "") ;;
  *) echo "usage: $0 [--pipeline-only]" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
source scripts/device_env.sh
export REDWOOD_CACHE_DIR=${REDWOOD_CACHE_DIR:-/tmp/rw-planner-cache}
det=$RW_BUNDLE_DATA/assets/models/ch_PP-OCRv4_det_infer.onnx
rec=$RW_BUNDLE_DATA/assets/models/ch_PP-OCRv4_rec_infer.onnx
result="$OUT/$day-${tag:-gpu}-planner$($pipeline_only && echo -pipeline).md"
section() {
  local title=$1
  shift
  echo "== $title ($(date -u +%T))" >&2
  {
    echo
    echo "## $title"
    echo
    echo '```'
    echo "\$ redwood $*"
    timeout 280 bash "$run" redwood "$@" 2>&1 | grep -v '^\[.*\] \[debug\]'
    echo "(exit ${PIPESTATUS[0]})"
    echo '```'
  } >>"$result"
}
{
  echo "# $day · ${gpu_name:-unknown GPU} · the planner"
  echo
  machine_rows
  echo "| command | \`bash scripts/planner_device_run.sh $*\` |"
} >"$result"
if ! $pipeline_only; then
  section "Device profiles" probe
  section "det, batch 8, fp16: placement and the cost model's error" \
    plan "$det" --devices cpu,cuda --shape 8x3x320x416 --precision fp16 --profile --runs 20
  section "det with Resize taken as CPU-only: the split against the naive split and the CPU alone" \
    plan "$det" --devices cpu,cuda --shape 8x3x320x416 --precision fp16 --cpu-only Resize --profile --runs 20
  for again in "again: each segment measured before predicted from its own time" \
    "a third time: the cut settled, every segment measured before" "a fourth time" "a fifth time"; do
    section "det with Resize taken as CPU-only, $again" \
      plan "$det" --devices cpu,cuda --shape 8x3x320x416 --precision fp16 --cpu-only Resize --profile --runs 20
  done
  section "rec, batch 8, fp16" \
    plan "$rec" --devices cpu,cuda --shape 8x3x48x320 --precision fp16 --profile --runs 20
  section "rec with Softmax taken as CPU-only (the attention blocks'): a second model's split, predicted from node times" \
    plan "$rec" --devices cpu,cuda --shape 8x3x48x320 --precision fp16 --cpu-only Softmax --profile --runs 20
  for n in second third; do
    section "rec with Softmax taken as CPU-only, a $n time" \
      plan "$rec" --devices cpu,cuda --shape 8x3x48x320 --precision fp16 --cpu-only Softmax --profile --runs 20
  done
  section "det, batch 8, fp16, objective throughput (GLPK)" \
    plan "$det" --devices cpu,cuda --shape 8x3x320x416 --precision fp16 --cpu-only Resize --objective throughput
fi
# configs/ocr-streams.yaml with rec's three Softmax nodes pinned to the CPU: the pipeline splits
# rec (its placement decides where the rest goes). The file sits beside the original, whose paths
# are relative to it; it is removed afterwards.
[[ -e assets ]] || ln -s "$RW_BUNDLE_DATA/assets" assets  # the configs name ../assets
split_config=configs/.planner-rec-split.yaml
awk '{print} /path: ..\/assets\/models\/ch_PP-OCRv4_rec_infer.onnx/ {
  print "    nodes: {p2o.Softmax.0: cpu, p2o.Softmax.1: cpu, p2o.Softmax.2: cpu}"}' configs/ocr-streams.yaml >"$split_config"
export REDWOOD_CACHE_DIR=/tmp/rw-planner-pipeline-cache
rm -rf "$REDWOOD_CACHE_DIR"
# The second start places again (the first run measured det's batches, rec's split batches and
# each of its segments' by rows, which the placement now predicts from); the third reads the
# second's placement back.
for start in "placed" "placed again on the batch times the first run measured" "read back from the placement cache"; do
  section "OCR pipeline, rec's Softmax nodes pinned to the CPU, 200 frames: $start" \
    run "$split_config" --frames 200 --quiet --set service.frame_pool_reserve_mb=0
done
# A cut not run before (two of the three Softmax nodes pinned): no batches of it measured, its
# batch costed from node costs, the segments' times the runs measured, and the hand-over a
# segment the runs above measured in the pipeline.
awk '{print} /path: ..\/assets\/models\/ch_PP-OCRv4_rec_infer.onnx/ {
  print "    nodes: {p2o.Softmax.0: cpu, p2o.Softmax.1: cpu}"}' configs/ocr-streams.yaml >"$split_config"
section "OCR pipeline, two of rec's Softmax nodes pinned to the CPU (a cut not run before), 200 frames" \
  run "$split_config" --frames 200 --quiet --set service.frame_pool_reserve_mb=0
# The split's hand-overs under two CUDA options (docs/cuda.md, "Options"): its GPU segments'
# completion threads polling their batches' ends instead of sleeping, then their kernels
# launched without programmatic dependent launch. Each option is its own cost-history key, so
# these starts are costed without the runs above; the three Softmax nodes pin the same cut.
for option in "blocking_completion: off" "pdl: off"; do
  awk -v option="$option" '{print} /path: ..\/assets\/models\/ch_PP-OCRv4_rec_infer.onnx/ {
    print "    nodes: {p2o.Softmax.0: cpu, p2o.Softmax.1: cpu, p2o.Softmax.2: cpu}"
    print "    cuda: {" option "}"}' configs/ocr-streams.yaml >"$split_config"
  section "OCR pipeline, rec's Softmax nodes pinned to the CPU, its GPU runners with $option, 200 frames" \
    run "$split_config" --frames 200 --quiet --set service.frame_pool_reserve_mb=0
done
rm -f "$split_config"
cat "$result"
