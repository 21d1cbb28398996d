#!/usr/bin/env bash
# The memory pools' figures on a GPU host in one call (see docs/memory.md, "Benchmark"): the
# random trace on every peer and the pipeline trace, then the memory suite of the GPU tests.
# Expects the stripped binaries bundled by /work/shared/tools/device-bundle -o .device-mem, writes
# to $OUT: host.txt, bench.txt, gpu_tests.txt, and the results file YYYY-MM-DD-<gpu>-memory.md
# (a header: date, GPU, driver, host cores, OS, Redwood commit from REDWOOD_COMMIT, the command;
# then the benchmark's output; copy it into docs/results/ to keep it).
#   bash memory/bench/device_run.sh
set -u
out=${OUT:-/tmp/out}
mkdir -p "$out"
# One repetition of each (the device time is shared); min_time keeps each case short.
bench() { timeout "$1" bash .device-mem/run redwood_memory_bench --benchmark_min_time=0.1 "${@:2}"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/host.txt" 2>&1
nproc >> "$out/host.txt"
export REDWOOD_PIPELINE_TRACE=$PWD/memory/bench/traces/ocr-video.rwtrace
{
  # Host pools first: within one call the benchmarks run in registration order (the CUDA peers'
  # file first), so a limit that cuts the call would otherwise cut the host groups.
  bench 50 --benchmark_filter='BM_(HostBuddy|Malloc)/'
  bench 60 --benchmark_filter='BM_(DeviceBuddy|CudaMallocAsync)/'
  # The synchronous peers pay a driver call (and for cudaHostAlloc, pinning) per allocation:
  # 100k allocations of up to 64 MiB would take minutes, so they run the two shorter lengths.
  bench 40 --benchmark_filter='BM_(CudaMalloc|CudaHostAlloc)/max_size:[0-9]+/allocations:(1000|10000)/'
  bench 15 --benchmark_filter='BM_PipelineTrace'
} > "$out/bench.txt" 2>&1
timeout 40 bash .device-mem/run redwood_gpu_tests --gtest_filter='*Memory*' > "$out/gpu_tests.txt" 2>&1
echo "exit $?" >> "$out/gpu_tests.txt"

# The dated results file; the GPU's tag is its model, lowercased, without vendor and memory words.
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
gpu_tag=$(echo "${gpu_name:-gpu}" | tr ' ' '\n' | grep -vxE 'NVIDIA|GeForce|Tesla|Quadro' |
  sed -e 's/-.*//' -e '/[0-9]GB$\|^HBM\|^PCIe\|^SXM\|^NVL$/,$d' | paste -sd- - | tr '[:upper:]' '[:lower:]' | tr -cd 'a-z0-9-')
day=$(date -u +%F)
{
  echo "# $day · ${gpu_name:-unknown GPU} · memory pools"
  echo
  echo "| | |"
  echo "| --- | --- |"
  echo "| date | $day |"
  echo "| machine | ${gpu_name:-unknown GPU}, $(nproc) host cores, $( (. /etc/os-release && echo "$PRETTY_NAME") 2>/dev/null) |"
  echo "| driver | $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1) |"
  echo "| commit | ${REDWOOD_COMMIT:-not recorded} (the results were recorded at this commit) |"
  echo "| command | \`bash memory/bench/device_run.sh\` |"
  echo
  echo "## redwood_memory_bench"
  echo
  echo '```'
  cat "$out/bench.txt"
  echo '```'
  echo
  echo "## redwood_gpu_tests --gtest_filter='*Memory*'"
  echo
  echo '```'
  tail -n 5 "$out/gpu_tests.txt"
  echo '```'
} >"$out/$day-${gpu_tag:-gpu}-memory.md"
