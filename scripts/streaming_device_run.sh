#!/usr/bin/env bash
# The streaming benchmark on the GPU host, in one call (the bundle of scripts/streaming_bundle.sh
# staged by the calls before): the GPU tests; redwood_stream_bench (the CUDA runner's slots against
# the serial call, PP-OCRv4 det at 8 x 3x320x416, fp16); the detector's and recognizer's replay
# time per batch size; then the shipped configs/ocr-streams.yaml as N streams, as fast as they go
# and as cameras at 30 fps. Writes $OUT/YYYY-MM-DD-<gpu>-streaming.md (a header with the machine,
# driver, versions and commit; the tables; the summaries) and the logs; copy the results file into
# docs/results/ to keep it.
#
#   device run, carry [".device/pN"]:  bash scripts/streaming_device_run.sh
#
# STREAMS_FAST (32) streams run unpaced; STREAMS_REALTIME ("100 128") run at 30 fps; each run
# lasts DURATION (30) seconds after its start-up. Steps that overrun their time limit are cut
# and say so; the rest still runs.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device_env.sh
export REDWOOD_ASSETS=$RW_BUNDLE_DATA/assets
export REDWOOD_ONNX_TESTDATA=$RW_BUNDLE_DATA/usr/share/libonnx-testdata/data/node
[[ -e assets ]] || ln -s "$REDWOOD_ASSETS" assets  # the configs name ../assets
duration=${DURATION:-30}
det=assets/models/ch_PP-OCRv4_det_infer.onnx
rec=assets/models/ch_PP-OCRv4_rec_infer.onnx
step() { echo "== $* ($(date -u +%T))" >&2; }

step "machine"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
echo "cpu cores: $(nproc)" | tee -a "$OUT/gpu.txt"

step "GPU tests"
start=$(date +%s)
timeout 150 bash "$run" redwood_gpu_tests --gtest_brief=1 >"$OUT/gpu_tests.log" 2>&1
echo "redwood_gpu_tests rc=$? in $(($(date +%s) - start)) s" >>"$OUT/gpu_tests.log"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests ran|rc=" "$OUT/gpu_tests.log" | tail -8

step "slots against the serial call"
timeout 240 bash "$run" redwood_stream_bench "$det" --shape 3,320,416 --batch 8 --precision fp16 --batches 200 \
  >"$OUT/stream_bench.md" 2>&1 || echo "(redwood_stream_bench rc=$?)" >>"$OUT/stream_bench.md"
cat "$OUT/stream_bench.md"

step "replay time per batch size"
{
  echo "| model | input | batch | replay median ms | ms per row |"
  echo "| --- | --- | --- | --- | --- |"
  for spec in "det 3,320,416 1 8 32 64" "rec 3,48,320 1 8 32"; do
    read -r name shape batches <<<"$spec"
    model=$det; [[ $name == rec ]] && model=$rec
    for b in $batches; do
      line=$(timeout 60 bash "$run" redwood_gpu_bench "$model" --shape "$shape" --batch "$b" --precision fp16 --runs 30 --warmup 10 2>/dev/null | tail -1)
      ms=$(sed -n 's/.*"median_ms": *\([0-9.]*\).*/\1/p' <<<"$line")
      [[ -n $ms ]] && echo "| PP-OCRv4 $name | ${shape//,/x} | $b | $ms | $(awk -v m="$ms" -v b="$b" 'BEGIN{printf "%.3f", m/b}') |"
      [[ -z $ms ]] && echo "| PP-OCRv4 $name | ${shape//,/x} | $b | failed: ${line:0:80} | |"
    done
  done
} >"$OUT/replay.md"
cat "$OUT/replay.md"

# The metrics endpoint mid-run: once the launcher says where it listens, wait half the run and
# keep /metrics and /readyz.
scrape() {  # name
  local log=$OUT/run-$1.log url=""
  for _ in $(seq 1 600); do
    url=$(grep -oE "metrics: http://[0-9.]+:[0-9]+" "$log" 2>/dev/null | head -1 | cut -d' ' -f2)
    [[ -n $url ]] && break
    sleep 0.2
  done
  [[ -n $url ]] || { echo "(no metrics endpoint in the log)" >"$OUT/metrics-$1.txt"; return; }
  sleep $((duration / 2 + 10))
  python3 - "$url" "$OUT/metrics-$1.txt" <<'PY'
import sys, urllib.request, urllib.error
url, out = sys.argv[1], sys.argv[2]
with open(out, "w") as f:
    for path in ("/readyz", "/metrics"):
        try:
            r = urllib.request.urlopen(url + path, timeout=10)
            f.write(f"# GET {path}: {r.status}\n" + r.read().decode())
        except urllib.error.HTTPError as e:
            f.write(f"# GET {path}: {e.code}\n" + e.read().decode())
        except Exception as e:
            f.write(f"# GET {path}: failed: {e}\n")
PY
}

pipeline() {  # name, then redwood run's options
  local name=$1
  shift
  step "pipeline $name: $*"
  # Not --quiet: the status line every second shows the start-up and the steady state apart.
  timeout $((duration + 120)) bash "$run" redwood run configs/ocr-streams.yaml --loop --duration "$duration" \
    --set service.metrics.port=0 "$@" >"$OUT/run-$name.log" 2>&1 &
  local pid=$!
  python3 scripts/thread_cpu.py "$pid" $((duration / 2)) $((duration / 4 + 8)) >"$OUT/threads-$name.md" 2>&1 &
  scrape "$name"
  wait "$pid"
  wait
  echo "(rc=$?)" >>"$OUT/run-$name.log"
  sed -n '/^summary/,$p' "$OUT/run-$name.log"
}
step "heap allocations per frame, one stream on the GPU"
counter=$(ls "$RW_BUNDLE_DATA"/*/tests/libredwood_alloc_counter.so 2>/dev/null | head -1)
if [[ -n $counter ]]; then
  # Both models on the GPU by name (not `auto`): the partitioner's analysis at load runs each model
  # once on the CPU, whose allocations vary from run to run by more than 300 frames' worth.
  # Both counted runs start warm from one cache folder that an uncounted first run fills (a cold
  # start imports and tunes the models: start-up would not cancel out).
  # Counted as shipped (decoder_threads 0: one thread for this SD clip); ALLOC_DECODER_THREADS
  # lists other counts to compare (FFmpeg's frame threads allocate in their hand-overs).
  export REDWOOD_CACHE_DIR=$(mktemp -d)
  for threads in ${ALLOC_DECODER_THREADS:-0}; do
    for n in 10 100 400; do
      rm -f /tmp/allocs-$threads-$n /tmp/origins-$threads-$n  # every preloaded process appends its lines: keep the launcher's
      OMP_WAIT_POLICY=PASSIVE LD_PRELOAD=$counter REDWOOD_ALLOC_COUNT=/tmp/allocs-$threads-$n REDWOOD_ALLOC_ORIGINS=/tmp/origins-$threads-$n \
        timeout 120 bash "$run" redwood run configs/ocr-streams.yaml --quiet --frames "$n" \
        --set models.det.device=cuda --set models.rec.device=cuda --set sources.captions.decoder_threads=$threads >/dev/null 2>&1
    done
  done
  rm -rf "$REDWOOD_CACHE_DIR"
  unset REDWOOD_CACHE_DIR
fi
: >"$OUT/allocations.txt"
for threads in ${ALLOC_DECODER_THREADS:-0}; do
  label="decoder_threads $threads"
  [[ $threads == 0 ]] && label="as shipped (decoder_threads 0, so one thread for this SD clip)"
  [[ -n $counter ]] || allocs="not measured (no allocation counter in the bundle)"
  [[ -n $counter ]] && allocs="not measured (a run failed)"
  a=$(awk '$2 == "redwood" {n = $1} END {print n}' /tmp/allocs-$threads-100 2>/dev/null)
  b=$(awk '$2 == "redwood" {n = $1} END {print n}' /tmp/allocs-$threads-400 2>/dev/null)
  if [[ -n $a && -n $b ]]; then
    allocs=$(awk -v a="$a" -v b="$b" 'BEGIN{printf "%.1f (100 frames: %d, 400 frames: %d)", (b-a)/300, a, b}')
  fi
  echo "allocations per frame, $label: $allocs" | tee -a "$OUT/allocations.txt"
  # Per frame by the object that asked ("COUNT PROGRAM OBJECT"; "(program)" is Redwood's own code).
  awk '$2 == "redwood" { if (FILENAME ~ /-100$/) a[$3] = $1; else b[$3] = $1 }
       END { for (o in b) { d = (b[o] - a[o]) / 300; if (d >= 0.5) printf "  %.1f from %s\n", d, o } }' \
    /tmp/origins-$threads-100 /tmp/origins-$threads-400 2>/dev/null | sort -rn | tee -a "$OUT/allocations.txt"
done

pipeline "fast-${STREAMS_FAST:-32}" --streams "${STREAMS_FAST:-32}"
for n in ${STREAMS_REALTIME:-100 128}; do pipeline "realtime-$n" --streams "$n" --fps 30; done

# The dated results file.
tests=$(grep -E '^\[  (PASSED|SKIPPED|FAILED) +\] [0-9]+ tests?' "$OUT/gpu_tests.log" |
  sed -E 's/^\[  ([A-Z]+) +\] ([0-9]+) tests?.*/\2 \L\1/' | paste -sd, - | sed 's/,/, /g')
results="$OUT/$day-${tag:-gpu}-streaming.md"
row() {  # a run's line of the pipeline table, from its summary
  local log=$OUT/run-$1.log
  local line
  line=$(grep -E "^  ([0-9]+ streams|stream [^ ]+):" "$log" | head -1)
  local thr
  thr=$(grep -oE "throughput [0-9.]+ fps, [0-9]+ % of the bottleneck's bound \([^)]*\)" "$log" | head -1)
  echo "| $1 | ${line#  } | ${thr:-not reached} |"
}
{
  echo "# $day · ${gpu_name:-unknown GPU} · the streaming runtime"
  echo
  machine_rows
  echo "| command | \`bash scripts/streaming_device_run.sh\` (DURATION=$duration) |"
  echo "| \`redwood_gpu_tests\`, same call | ${tests:-not recorded} |"
  grep '^allocations per frame, ' "$OUT/allocations.txt" 2>/dev/null | sed -E 's/^allocations per frame, ([^:]*): (.*)$/| heap allocations per frame, one stream, both models on the GPU, \1 (tests\/support\/alloc_counter.c) | \2 |/'
  echo
  if [[ -s $OUT/allocations.txt ]]; then
    echo "Heap allocations per frame by the object that asked (\"(program)\": Redwood's own code):"
    echo
    echo '```'
    cat "$OUT/allocations.txt"
    echo '```'
    echo
  fi
  echo "## Slots against the serial call (\`redwood_stream_bench\`)"
  echo
  cat "$OUT/stream_bench.md"
  echo
  echo "## Replay time per batch size (\`redwood_gpu_bench\`, fp16, CUDA-graph replays)"
  echo
  cat "$OUT/replay.md"
  echo
  echo "## The OCR pipeline as N streams (\`configs/ocr-streams.yaml\`)"
  echo
  echo "\"fast\": every stream reads its file as fast as the pipeline takes frames; \"realtime\": each"
  echo "stream delivers 30 frames a second, as a camera, dropping its oldest waiting frame when behind."
  echo
  echo "| run | streams | throughput and bound |"
  echo "| --- | --- | --- |"
  for log in "$OUT"/run-*.log; do
    name=${log##*/run-}
    row "${name%.log}"
  done
  echo
  echo "## The metrics endpoint, scraped mid-run (fast run; GPU, stage and readiness lines)"
  echo
  echo '```'
  grep -E '^# GET|^redwood_ready|^redwood_gpu_|_count\{|^redwood_memory_pool_(in_use|high_water|fragmentation)' \
    "$OUT/metrics-fast-${STREAMS_FAST:-32}.txt" 2>/dev/null | grep -v '^redwood_frame_latency' | head -40
  echo '```'
  for log in "$OUT"/run-*.log; do
    name=${log##*/run-}
    echo
    echo "### ${name%.log}"
    echo
    echo '```'
    grep -E "^pipeline|^\[|^  " "$log" | grep -v "^\[.*\] \[info\]" | sed -n '/^pipeline/,$p' | head -$((duration + 70))
    echo '```'
    if grep -qE "pipeline placement|: placed at " "$log"; then
      echo
      echo "The placement, from the log:"
      echo
      echo '```'
      grep -E "pipeline placement|: placed at " "$log" | sed -E 's/^\[[^]]*\] \[[a-z]+\] //' | head -20
      echo '```'
    fi
    if [[ -s $OUT/threads-${name%.log}.md ]]; then
      echo
      echo "CPU by thread mid-run (scripts/thread_cpu.py):"
      echo
      cat "$OUT/threads-${name%.log}.md"
    fi
  done
} >"$results"
echo "results: $results"
