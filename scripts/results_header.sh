# Sourced by the scripts that write a results file on this machine (nats_bench.sh,
# cluster_report.sh, cpu_load_bench.sh): the commit the results belong to and the heading with
# the table of date, machine and commit that every such file opens with.

# The short commit, "-dirty" when tracked files have changes.
results_commit() {
  local commit
  commit=$(git rev-parse --short HEAD)
  [[ -z $(git status --porcelain --untracked-files=no) ]] || commit+=-dirty
  echo "$commit"
}

# results_header DAY COMMIT TITLE [ROW...]: "# DAY · <machine> · TITLE", then the table; each ROW
# is a further "| key | value |" line (the command, tool versions).
results_header() {
  local day=$1 commit=$2 title=$3
  shift 3
  echo "# $day · $(nproc)-core $(uname -m) VM · $title"
  echo
  echo "| | |"
  echo "| --- | --- |"
  echo "| date | $day |"
  echo "| machine | $(nproc) cores ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)), $(. /etc/os-release && echo "$PRETTY_NAME") |"
  echo "| commit | $commit (the results were recorded at this commit) |"
  local row
  for row in "$@"; do echo "$row"; done
}

# The NATS server's and client library's versions, for a results table row.
nats_versions() {
  echo "$(nats-server --version 2>/dev/null || /usr/sbin/nats-server --version), libnats $(pkg-config --modversion libnats 2>/dev/null || echo ?)"
}
