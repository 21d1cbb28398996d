#!/usr/bin/env bash
# The cluster test's figures on this machine: runs the `Cluster.*` tests of redwood_tests
# (tests/apps/cluster_test.cpp: nats-server with JetStream and launcher processes started as a
# StatefulSet's pods, on loopback; a kill -9 and a restart; a rescale from 2 to 3 workers) and
# keeps their `cluster:` lines: streams per worker, frames produced and stored, duplicates
# removed, recovery time after the kill, streams moved. Writes
# docs/results/YYYY-MM-DD-<host>-cluster-<commit>.md. Needs nats-server and a build with libnats.
#
#   bash scripts/cluster_report.sh          # HOST_TAG names the machine in the file (default: vm)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/results_header.sh
build=${BUILD_DIR:-build}
tag=${HOST_TAG:-vm}
command -v nats-server >/dev/null || [[ -x /usr/sbin/nats-server ]] || {
  echo "cluster_report: nats-server is not installed (apt-get install nats-server)" >&2
  exit 1
}
text=$("$build/bin/redwood_tests" --gtest_filter='Cluster.*' 2>&1) || {
  echo "$text" >&2
  echo "cluster_report: the cluster test failed" >&2
  exit 1
}
lines=$(grep '^cluster:' <<<"$text" || true)
[[ -n $lines ]] || { echo "$text" >&2; echo "cluster_report: the test printed no figures (skipped?)" >&2; exit 1; }
timing=$(grep -E '^\[ +OK \] Cluster\.' <<<"$text")
commit=$(results_commit)
day=$(date -u +%F)
out=docs/results/$day-$tag-cluster-$commit.md
{
  results_header "$day" "$commit" "the cluster test" "| NATS | $(nats_versions) |" \
    "| command | \`bash scripts/cluster_report.sh\` |"
  echo
  echo "On loopback: nats-server with JetStream, launchers started as a StatefulSet's pods"
  echo "(POD_NAME, REDWOOD_REPLICAS, \`--shard statefulset\`), 24 synthetic streams of 120 frames"
  echo "at 30 fps into a nats sink (docs/deploy.md, \"The cluster test\")."
  echo
  echo '```'
  echo "$lines"
  echo "$timing"
  echo '```'
} >"$out"
echo "results: $out"
