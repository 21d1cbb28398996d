#!/usr/bin/env bash
# Where Redwood's own code allocates per frame: runs `redwood run CONFIG` twice under the
# allocation counter (tests/support/alloc_counter.c, with REDWOOD_ALLOC_SITES), for SHORT and LONG
# frames, and prints each call site of the program whose count grew between them, per frame, with
# its first four frames inside the program named by addr2line (function, file:line, inlined
# frames included). Both runs share a cache folder that a first short run fills, so both start warm.
#
#   scripts/alloc_sites.sh CONFIG [SHORT LONG] [-- redwood run options]
#   REDWOOD=build/bin/redwood COUNTER=build/tests/libredwood_alloc_counter.so (the defaults)
#
# On the GPU host, with the bundle of scripts/streaming_bundle.sh: REDWOOD="bash $run redwood"
# and SYMBOLS=no (the bundle's launcher is stripped: the offsets are printed, to be named here
# with `addr2line -f -C -i -e build/bin/redwood OFFSET...` against the same build).
set -euo pipefail
config=${1:?usage: scripts/alloc_sites.sh CONFIG [SHORT LONG] [-- redwood run options]}
shift
short=40 long=240
if [[ $# -ge 2 && $1 != -- ]]; then short=$1 long=$2; shift 2; fi
[[ ${1:-} == -- ]] && shift
redwood=${REDWOOD:-build/bin/redwood}
counter=${COUNTER:-build/tests/libredwood_alloc_counter.so}
program=${PROGRAM:-build/bin/redwood}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
count() {
  local frames=$1
  shift
  env OMP_WAIT_POLICY=PASSIVE LD_PRELOAD="$(realpath "$counter")" REDWOOD_CACHE_DIR="$work/cache" \
    REDWOOD_ALLOC_COUNT="$work/count-$frames" REDWOOD_ALLOC_ORIGINS="$work/origins-$frames" \
    REDWOOD_ALLOC_SITES="$work/sites-$frames" \
    $redwood run "$config" --quiet --frames "$frames" --set service.metrics.enabled=false \
    --set service.status_interval_s=3600 "$@" >"$work/run-$frames.log" 2>&1 ||
    { echo "redwood run failed:" >&2; tail -20 "$work/run-$frames.log" >&2; exit 1; }
}
count 5 "$@" && rm -f "$work"/count-5 "$work"/origins-5 "$work"/sites-5
count "$short" "$@"
count "$long" "$@"
/usr/bin/python3 - "$work" "$short" "$long" "$program" "${SYMBOLS:-yes}" <<'PY'
import collections, subprocess, sys
work, short, long_, program, symbols = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5] == "yes"
def read(path):
    out = collections.Counter()
    for line in open(path):
        parts = line.split()
        if len(parts) >= 3 and parts[1] == "redwood":
            out[" ".join(parts[2:])] += int(parts[0])
    return out
frames = long_ - short
for what in ("origins", "sites"):
    a, b = read(f"{work}/{what}-{short}"), read(f"{work}/{what}-{long_}")
    grown = sorted(((b[k] - a.get(k, 0)) / frames, k) for k in b if b[k] > a.get(k, 0))
    grown.reverse()
    print(f"== {what}: allocations a frame between {short} and {long_} frames")
    for per, k in grown[: 25 if what == "sites" else 40]:
        print(f"{per:10.2f}  {k}")
        if what == "sites" and symbols and k.startswith("0x"):
            names = subprocess.run(["addr2line", "-f", "-C", "-i", "-e", program] + k.split(","),
                                   capture_output=True, text=True).stdout.splitlines()
            for f, loc in zip(names[0::2], names[1::2]):
                print(f"              {f[:110]}  {loc.split('/work/main/')[-1] if '/work/main/' in loc else loc}")
PY
