#!/usr/bin/env bash
# Fuzzes Redwood's parsers of untrusted input with libFuzzer (docs/fuzzing.md): builds the
# targets of tests/fuzz with clang in build-fuzz (-DREDWOOD_FUZZ=ON: ASan, UBSan and coverage on
# every library, CUDA off), runs each on a copy of its seed corpus for RUNS inputs, and writes
# docs/results/YYYY-MM-DD-<host>-fuzz.md (machine, commit, and per target: executions, crashes,
# time, exec/s, new corpus entries). Crash artifacts and the grown corpora stay in
# build-fuzz/fuzz/; the seeds in tests/fuzz/corpus are never written.
#
#   bash scripts/fuzz.sh                           # every target, a million inputs each
#   RUNS=20000 TARGETS="npy onnx_import" bash scripts/fuzz.sh
#   JOBS=2 bash scripts/fuzz.sh                    # two targets at once (one core each)
#   MAX_TIME=1200 bash scripts/fuzz.sh             # and at most 20 minutes each (0: no limit)
#   PARALLEL=4 bash scripts/fuzz.sh                # four processes per target (seeds 1-4), RUNS/4 each
#
# On a machine without the compiler (the GPU host), the binaries built here travel in a bundle
# (../shared/tools/device-bundle) and run through its wrapper: FUZZ_RUNNER="bash .device-fuzz/run"
# SKIP_BUILD=1 HOST_DESC="the GPU host" RESULTS_DIR=$OUT bash scripts/fuzz.sh.
#
# Needs clang-14, libclang-rt-14-dev (libFuzzer and the sanitizer runtimes) and libomp-14-dev
# (clang's OpenMP, which backends/cpu links) besides the packages of scripts/setup.sh. Exits 1
# when a target crashed (its artifact is named below).
set -euo pipefail
cd "$(dirname "$0")/.."
cores=$(nproc)  # before OMP_NUM_THREADS is set below, which nproc reports instead
build=${BUILD_DIR:-build-fuzz}
runs=${RUNS:-1000000}
jobs=${JOBS:-1}
max_time=${MAX_TIME:-0}
tag=${HOST_TAG:-vm}
parallel=${PARALLEL:-1}
runner=${FUZZ_RUNNER:-}         # a prefix for the binaries (a bundle's wrapper), or none
results_dir=${RESULTS_DIR:-docs/results}
targets=(${TARGETS:-pipeline_config onnx_import npy image_tensor})  # the slowest first
# Inputs stay small: the seeds are under 1 kB except text_rec.onnx (14 kB), and a larger input
# only makes each run slower, not the parsers' paths different.
declare -A max_len=([npy]=4096 [onnx_import]=16384 [image_tensor]=4096 [pipeline_config]=4096)

if [[ -z ${SKIP_BUILD:-} ]]; then
  # The compiler and its runtimes, where missing (as scripts/setup.sh installs the rest).
  missing=()
  for p in clang-14 libclang-rt-14-dev libomp-14-dev; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    sudo=(); ((EUID == 0)) || sudo=(sudo)
    echo "fuzz: installing ${missing[*]}" >&2
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get -q update
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get -q install -y --no-install-recommends "${missing[@]}"
  fi
  CC=${CC:-clang-14} CXX=${CXX:-clang++-14} cmake -S . -B "$build" -G Ninja -DREDWOOD_FUZZ=ON -DREDWOOD_WITH_CUDA=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$build" -j "${BUILD_JOBS:-2}" --target "${targets[@]/#/redwood_fuzz_}"
fi
binary() {  # target -> the command that runs it
  if [[ -n $runner ]]; then echo "$runner redwood_fuzz_$1"; else echo "$build/bin/redwood_fuzz_$1"; fi
}

export ASAN_OPTIONS=${ASAN_OPTIONS:-allocator_may_return_null=1:max_allocation_size_mb=2048:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export OPENCV_IO_MAX_IMAGE_PIXELS=262144
export OMP_NUM_THREADS=1

work=$build/fuzz
fuzz_one() {  # target: runs it, leaves $work/<target>.summary
  local t=$1
  local corpus=$work/corpus/$t artifacts=$work/artifacts/$t/
  rm -rf "$corpus" "$artifacts"
  mkdir -p "$corpus" "$artifacts"
  cp tests/fuzz/corpus/"$t"/* "$corpus"/
  local before=$(ls "$corpus" | wc -l)
  local start=$(date +%s.%N) rc=0 k
  # PARALLEL processes share the corpus folder (each reads what the others add on its reloads),
  # with seeds 1..PARALLEL and RUNS/PARALLEL inputs each; their executions add up.
  local pids=()
  for ((k = 1; k <= parallel; k++)); do
    $(binary "$t") -runs="$((runs / parallel))" -max_total_time="$max_time" -max_len="${max_len[$t]}" -seed="$k" \
      -timeout=30 -rss_limit_mb=4096 -malloc_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$artifacts" \
      "$corpus" >"$work/$t.$k.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  cat "$work/$t".[0-9]*.log >"$work/$t.log"
  local seconds=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  local done_runs=$(awk '/^stat::number_of_executed_units:/ { n += $2 } END { print n + 0 }' "$work/$t.log")
  local crashes=$(ls "$artifacts" | grep -cE '^(crash|leak|timeout|oom)-' || true)
  local after=$(ls "$corpus" | wc -l)
  printf '%s %s %s %s %s %s %s\n' "$t" "${done_runs:-0}" "$crashes" "$seconds" "$before" "$after" "$rc" >"$work/$t.summary"
  echo "fuzz: $t: ${done_runs:-0} runs, $crashes crashes, $(printf '%.0f' "$seconds") s (log: $work/$t.log)" >&2
}
mkdir -p "$work"
running=0
for t in "${targets[@]}"; do
  fuzz_one "$t" &
  if ((++running >= jobs)); then
    wait -n || true
    running=$((running - 1))
  fi
done
wait

day=$(date -u +%F)
out=$results_dir/$day-$tag-fuzz.md
commit=${REDWOOD_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)}
[[ -n ${REDWOOD_COMMIT:-} || -z $(git status --porcelain --untracked-files=no 2>/dev/null) ]] || commit+=-dirty
status=0
{
  echo "# $day · ${HOST_DESC:-$cores-core $(uname -m) VM} · fuzzing"
  echo
  echo "| | |"
  echo "| --- | --- |"
  echo "| date | $day |"
  echo "| machine | $cores cores ($(lscpu | sed -n 's/^Model name: *//p' | head -1)), $(. /etc/os-release && echo "$PRETTY_NAME") |"
  if [[ -n $runner ]]; then compiler="the build machine's clang (the binaries travel in a bundle)"
  else compiler=$(${CXX:-clang++-14} --version | head -1); fi
  echo "| compiler | $compiler, libFuzzer, -fsanitize=fuzzer,address,undefined |"
  echo "| commit | $commit (the results were recorded at this commit) |"
  echo "| command | \`bash scripts/fuzz.sh\` (RUNS=$runs, JOBS=$jobs, PARALLEL=$parallel, MAX_TIME=$max_time): per process \`redwood_fuzz_TARGET -runs=$((runs / parallel)) -max_total_time=$max_time -max_len=N -seed=K -timeout=30 -rss_limit_mb=4096 CORPUS\` |"
  echo
  echo "Each target starts from its seeds in tests/fuzz/corpus (docs/fuzzing.md says what each covers)."
  echo "A crash is any sanitizer report, fatal signal, timeout or exception other than redwood::Error;"
  echo "new corpus entries are the inputs libFuzzer kept for new coverage. exec/s is executions over"
  echo "the target's wall time, its PARALLEL processes together (JOBS targets share the cores); a"
  echo "target reaching MAX_TIME seconds (0: no limit) stops before RUNS."
  echo
  echo "| target | max_len | executions | crashes | time | exec/s | seeds | new corpus entries |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
  for t in "${targets[@]}"; do
    read -r name done_runs crashes seconds before after rc <"$work/$t.summary"
    ((crashes == 0 && rc == 0)) || status=1
    printf '| %s | %s | %s | %s | %.0f s | %.0f | %s | %s |\n' "$name" "${max_len[$t]}" "$done_runs" "$crashes" \
      "$seconds" "$(awk -v n="$done_runs" -v s="$seconds" 'BEGIN { print (s > 0 ? n / s : 0) }')" "$before" \
      "$((after - before))"
  done
} >"$out"
echo "results: $out"
for t in "${targets[@]}"; do
  ls "$work/artifacts/$t" | grep -E '^(crash|leak|timeout|oom)-' | sed "s|^|fuzz: $t: $work/artifacts/$t/|" >&2 || true
done
exit $status
