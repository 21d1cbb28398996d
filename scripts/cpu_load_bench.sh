#!/usr/bin/env bash
# CPU inference under load, against ONNX Runtime under the same load: PP-OCRv4 det on a real frame
# (1x3x640x640, --threads 2) through `redwood bench --peer ort`, unloaded and with LOAD (3) busy
# threads, with OpenMP's passive wait policy (the launcher's default) REPEATS (3) times and once
# with OMP_WAIT_POLICY=ACTIVE. Writes docs/results/YYYY-MM-DD-<host>-cpu-load.md (date, machine,
# commit, the command, the table). Needs the build and assets of scripts/setup.sh.
#
#   bash scripts/cpu_load_bench.sh            # HOST_TAG names the machine in the file (default: vm)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/results_header.sh
build=${BUILD_DIR:-build}
load=${LOAD:-3}
repeats=${REPEATS:-3}
tag=${HOST_TAG:-vm}
bench=("$build/bin/redwood" bench assets/models/ch_PP-OCRv4_det_infer.onnx --input x=assets/video/vtest-captions.avi
  --size 640x640 --bgr --mean 0.485,0.456,0.406 --std 0.229,0.224,0.225 --peer ort --threads 2 --runs 20)
day=$(date -u +%F)
out=docs/results/$day-$tag-cpu-load.md
rows=()
measure() {  # label, env assignment or "", load
  local text
  text=$(env ${2:+"$2"} "${bench[@]}" --load "$3" 2>&1)
  local rw ort ratio
  rw=$(sed -n 's/^redwood: median *\([0-9.]*\) ms.*/\1/p' <<<"$text")
  ort=$(sed -n 's/^ort: *median *\([0-9.]*\) ms.*/\1/p' <<<"$text")
  ratio=$(sed -n 's/^ratio: *\([0-9.]*\)x.*/\1/p' <<<"$text")
  rows+=("| $1 | $3 | ${rw:-?} ms | ${ort:-?} ms | ${ratio:-?}x |")
  echo "cpu_load_bench: $1, load $3: Redwood ${rw:-?} ms, ONNX Runtime ${ort:-?} ms, ${ratio:-?}x" >&2
}
measure "passive (default)" "" 0
for ((i = 1; i <= repeats; ++i)); do measure "passive (default), run $i" "" "$load"; done
measure "OMP_WAIT_POLICY=ACTIVE" "OMP_WAIT_POLICY=ACTIVE" "$load"
commit=$(results_commit)
{
  results_header "$day" "$commit" "CPU inference under load"
  echo "| command | \`bash scripts/cpu_load_bench.sh\` (LOAD=$load, REPEATS=$repeats): \`${bench[*]} --load N\` |"
  echo
  echo "PP-OCRv4 det on a real frame of vtest-captions.avi, two threads each, medians of 20 runs; the"
  echo "load is N busy threads of \`redwood bench --load\`, running through both runtimes' runs. The ratio"
  echo "is ONNX Runtime's median over Redwood's (above 1: Redwood is faster)."
  echo
  echo "| OpenMP wait policy | busy threads | Redwood | ONNX Runtime | ratio |"
  echo "| --- | --- | --- | --- | --- |"
  printf '%s\n' "${rows[@]}"
} >"$out"
echo "results: $out"
