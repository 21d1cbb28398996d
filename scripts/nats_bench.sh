#!/usr/bin/env bash
# The NATS JetStream sink on this machine: messages per second through it (a synthetic source as
# fast as taken, 32x24 frames, FRAMES (5000) messages, until the last is acknowledged), and the
# delay it adds from the sink's write to a subscriber's receipt, p50/p99, against the ZeroMQ
# sink's in the same paced run (FRAMES/2 messages at 1000 fps), REPEATS (3) times. Runs the DISABLED_ benchmark of
# tests/pipelines/nats_sink_test.cpp against a nats-server it starts. Writes
# docs/results/YYYY-MM-DD-<host>-nats-<commit>.md. Needs nats-server and a build with libnats.
#
#   bash scripts/nats_bench.sh            # HOST_TAG names the machine in the file (default: vm)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/results_header.sh
build=${BUILD_DIR:-build}
frames=${FRAMES:-5000}
repeats=${REPEATS:-3}
tag=${HOST_TAG:-vm}
command -v nats-server >/dev/null || [[ -x /usr/sbin/nats-server ]] || {
  echo "nats_bench: nats-server is not installed (apt-get install nats-server)" >&2
  exit 1
}
lines=
for ((i = 1; i <= repeats; ++i)); do  # REPEATS runs: a small shared machine varies from run to run
  text=$(NATS_BENCH_FRAMES=$frames "$build/bin/redwood_tests" --gtest_also_run_disabled_tests \
    --gtest_filter='PipelineNatsSink.DISABLED_Bench' 2>&1) || {
    echo "$text" >&2
    exit 1
  }
  run=$(grep '^nats_bench:' <<<"$text" | sed "s/^nats_bench:/nats_bench: run $i:/")
  [[ $(wc -l <<<"$run") -eq 3 ]] || { echo "nats_bench: the benchmark printed no figures (skipped?)" >&2; echo "$text" >&2; exit 1; }
  echo "$run"
  lines+=$run$'\n'
done
commit=$(results_commit)
day=$(date -u +%F)
out=docs/results/$day-$tag-nats-$commit.md
{
  results_header "$day" "$commit" "NATS JetStream sink" "| NATS | $(nats_versions) |" \
    "| command | \`bash scripts/nats_bench.sh\` (FRAMES=$frames, REPEATS=$repeats) |"
  echo
  echo "Throughput: one synthetic stream as fast as taken (32x24 frames, no stages), the NATS sink"
  echo "alone with its defaults (max_pending 256), timed from the run's start to its end, the"
  echo "sink's close included (every message acknowledged by JetStream, file storage). Latency: a"
  echo "run at 1000 fps with both sinks; per message, receipt time minus the sink's write time"
  echo "(captured_unix_ms + published_ms), for a core NATS subscription on the stream's subjects"
  echo "and a ZeroMQ SUB socket on an ipc:// endpoint; both readers in the test process."
  echo
  echo '```'
  printf '%s' "$lines"
  echo '```'
} >"$out"
echo "results: $out"
