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
