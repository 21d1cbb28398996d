#!/usr/bin/env bash
# The CUDA backend's clean build time here, per commit: each REV checked out in a throwaway
# worktree, configured as the working build (RelWithDebInfo, the default CUDA architectures) with
# ccache off, and `ninja -j2 redwood_backend_cuda` (with core, memory and runtime under it) timed
# from an empty build folder; then its slowest translation units from ninja's log. Run it with
# nothing else building (it takes both cores for about eight minutes a commit). Writes
# YYYY-MM-DD-vm-cuda-build.md into OUT (default: the current folder) and prints it.
#
#   scripts/cuda_build_time.sh REV [REV...]
set -euo pipefail
cd "$(dirname "$0")/.."
(($# > 0)) || { echo "usage: scripts/cuda_build_time.sh REV [REV...]" >&2; exit 2; }
out=${OUT:-.}
day=$(date -u +%F)
file="$out/$day-vm-cuda-build.md"
{
  echo "# $day · this VM · clean build of the CUDA backend"
  echo
  echo "| | |"
  echo "| --- | --- |"
  echo "| machine | $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), $(. /etc/os-release && echo "$PRETTY_NAME") |"
  echo "| compilers | $(c++ --version | head -1); nvcc $(/usr/local/cuda/bin/nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p') |"
  echo "| command | \`scripts/cuda_build_time.sh $*\` (RelWithDebInfo, ccache off, \`ninja -j2 redwood_backend_cuda\`) |"
  echo
} >"$file"
for rev in "$@"; do
  commit=$(git rev-parse --short "$rev")
  tree=$(mktemp -d)
  git worktree add --detach "$tree" "$commit" >/dev/null 2>&1
  cmake -S "$tree" -B "$tree/b" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DREDWOOD_CCACHE=REDWOOD_CCACHE-NOTFOUND >/dev/null
  start=$(date +%s)
  CCACHE_DISABLE=1 ninja -C "$tree/b" -j2 redwood_backend_cuda >/dev/null
  seconds=$(($(date +%s) - start))
  units=$(awk 'NR > 1 && $4 ~ /backend_cuda|conv_wgmma/ {printf "%.1f %s\n", ($2 - $1) / 1000, $4}' "$tree/b/.ninja_log" | sort -rn)
  {
    echo "## $commit: $(git log -1 --format=%s "$commit" | cut -c1-90)"
    echo
    echo "- wall: **$seconds s** for \`redwood_backend_cuda\` and what it depends on, 2 jobs"
    echo "- the CUDA backend's translation units: $(echo "$units" | wc -l), $(echo "$units" | awk '{s += $1} END {printf "%.0f", s}') s summed"
    echo
    echo "| seconds | slowest translation units |"
    echo "| --- | --- |"
    echo "$units" | head -8 | sed -E 's#^([0-9.]+) .*\.dir/(.*)\.o$#| \1 | \2 |#'
    echo
  } >>"$file"
  git worktree remove --force "$tree"
done
cat "$file"
