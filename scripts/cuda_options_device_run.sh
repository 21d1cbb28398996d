#!/usr/bin/env bash
# Each CUDA option turned off against the defaults (backends/cuda/cuda_options.hpp; docs/cuda.md,
# "Options"), on the GPU host: redwood_gpu_bench with `--cuda NAME=off` on ResNet-50 and
# MobileNetV3-Large (torchvision, random weights, exported as scripts/bench_gpu.py does) at
# batch 32, fp16, then the defaults again; medians of 50 replays. Needs the bundle of
# scripts/cuda_bundle.sh in .device-cuda/. Prints a table (ms, and the ratio to the defaults'
# mean of the two default rows) and writes it to $OUT/cuda_options.md.
#
#   device run, carry [".device-cuda"]:  bash scripts/cuda_options_device_run.sh
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?set OUT to a folder for the logs}"
run=".device-cuda/run"
[[ -f $run ]] || { echo "no .device-cuda/run: build the bundle first (scripts/cuda_bundle.sh)" >&2; exit 2; }
bash "$run" true  # unpacks once
models=/tmp/bench
mkdir -p "$models"
for m in resnet50 mobilenet_v3_large; do
  [[ -s $models/$m.onnx ]] || python3 - "$m" "$models" <<'PY'
import sys, importlib.util, os
spec = importlib.util.spec_from_file_location("bench_gpu", os.path.join("scripts", "bench_gpu.py"))
bench = importlib.util.module_from_spec(spec); spec.loader.exec_module(bench)
bench.export(sys.argv[1], sys.argv[2])
PY
done
median() {  # model, then redwood_gpu_bench options: the median_ms of its JSON line
  bash "$run" redwood_gpu_bench "$models/$1.onnx" --batch 32 --precision fp16 --runs 50 --warmup 20 "${@:2}" 2>>"$OUT/cuda_options.log" |
    sed -n 's/.*"median_ms": \([0-9.]*\).*/\1/p' | tail -1
}
{
  echo "| model | options | median ms | vs defaults |"
  echo "| --- | --- | --- | --- |"
} >"$OUT/cuda_options.md"
for m in resnet50 mobilenet_v3_large; do
  case $m in
    resnet50) options=(wgmma tma pdl space_to_depth_stem fuse_conv_shortcuts) ;;
    *) options=(wgmma narrow_conv depthwise_tuning gap_split pdl) ;;
  esac
  first=$(median "$m")
  declare -A got=()
  for o in "${options[@]}"; do got[$o]=$(median "$m" --cuda "$o=off"); done
  last=$(median "$m")
  base=$(awk -v a="$first" -v b="$last" 'BEGIN { if (a == "" || b == "") print ""; else printf "%.4f", (a + b) / 2 }')
  echo "| $m | defaults (first) | ${first:-failed} | |" >>"$OUT/cuda_options.md"
  for o in "${options[@]}"; do
    ratio=$(awk -v x="${got[$o]}" -v b="$base" 'BEGIN { if (x == "" || b == "") print "-"; else printf "%.2fx", x / b }')
    echo "| $m | $o=off | ${got[$o]:-failed} | $ratio |" >>"$OUT/cuda_options.md"
  done
  echo "| $m | defaults (last) | ${last:-failed} | |" >>"$OUT/cuda_options.md"
  unset got
done
cat "$OUT/cuda_options.md"
