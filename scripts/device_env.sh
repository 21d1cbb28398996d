# Sourced by the GPU host's scripts (scripts/*_device_run.sh), from the repository's root: finds
# the bundle of scripts/streaming_bundle.sh (.device/run, or the last staged part's), unpacks it
# once (every part must be staged), and sets $run (the bundle's runner: `bash "$run" BINARY ...`),
# $meta (its folder: the commit and toolkit files) and RW_BUNDLE_DATA (where its data lands).
: "${OUT:?set OUT to a folder for the results}"
run=""
for r in .device/run $(ls -d .device/p* 2>/dev/null | sort -V | tail -1)/run; do
  [[ -f $r ]] && run=$r
done
[[ -n $run ]] || { echo "no .device/run or .device/pN/run: build the bundle first (scripts/streaming_bundle.sh)" >&2; exit 2; }
bash "$run" true || exit 3
meta=$(dirname "$run")
export RW_BUNDLE_DATA=/tmp/rw-bundle/data

# What a results file records of the machine and the build: day, gpu_name, tag (the GPU's short
# name for file names: "h200"), driver, os_name, commit; and machine_rows, the opening table's
# rows about them (date, machine, driver, toolkit, commit), for the scripts' results files.
day=$(date -u +%F)
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
tag=$(tr '[:upper:]' '[:lower:]' <<<"${gpu_name#NVIDIA }" | cut -d' ' -f1 | tr -cd 'a-z0-9-')
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
os_name=$( (. /etc/os-release && echo "$PRETTY_NAME") 2>/dev/null)
commit=${REDWOOD_COMMIT:-$(cat "$meta/commit" 2>/dev/null)}
machine_rows() {
  echo "| | |"
  echo "| --- | --- |"
  echo "| date | $day |"
  echo "| machine | ${gpu_name:-unknown GPU}, $(nproc) host cores, ${os_name:-OS not recorded} |"
  echo "| driver | ${driver:-not recorded} |"
  echo "| CUDA toolkit (Redwood's build) | $(cat "$meta/toolkit" 2>/dev/null || echo not recorded) |"
  echo "| commit | ${commit:-not recorded} (the results were recorded at this commit) |"
}
