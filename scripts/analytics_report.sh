#!/usr/bin/env bash
# Runs the shipped detection and tracking pipelines over their whole clips and writes what they
# report: the run summary of each (fps, latency, tracks started, line crossings, zone entries,
# exits and occupancy) and a frame of each annotated video, into
# docs/results/DATE-vm-analytics-COMMIT.md (and .jpg frames beside it), with the machine and the
# commit. Needs the launcher built (scripts/run.sh or scripts/test.sh) and ffmpeg.
#
#   bash scripts/analytics_report.sh [BUILD_DIR]     # default: build
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
redwood="$build/bin/redwood"
[ -x "$redwood" ] || { echo "analytics_report: $redwood not found: build first (scripts/run.sh)" >&2; exit 1; }
command -v ffmpeg > /dev/null || { echo "analytics_report: ffmpeg not found (apt-get install -y ffmpeg)" >&2; exit 1; }

date="$(date -u +%Y-%m-%d)"
commit="$(git -C "$root" rev-parse --short HEAD)"
name="$date-vm-analytics-$commit"
out="$root/docs/results/$name.md"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
{
  echo "# Detection, tracking and analytics pipelines, whole clips ($date, commit $commit)"
  echo
  echo "Machine: $(nproc) cores ($cpu), $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), CPU only."
  echo "Written by \`scripts/analytics_report.sh\`: each config as shipped, sinks redirected to a"
  echo "scratch folder, over its whole clip; the run's summary as printed, and one frame of its"
  echo "annotated video."
} > "$out"

# config, frame of the annotated video to show
for entry in "detect 420" "faces 60" "face-expressions 60"; do
  set -- $entry
  config="$1" frame="$2"
  echo "analytics_report: running configs/$config.yaml" >&2
  "$redwood" run "$root/configs/$config.yaml" \
    --set "sinks.pub.endpoint=ipc://$work/$config.sock" \
    --set "sinks.log.path=$work/$config.jsonl" \
    --set "sinks.annotated.path=$work/$config-{stream}.avi" > "$work/$config.log" 2>&1
  video="$(ls "$work/$config"-*.avi | head -1)"
  picture="$name-$config-frame$frame.jpg"
  ffmpeg -v error -y -i "$video" -vf "select=eq(n\\,$frame)" -vframes 1 -q:v 4 "$root/docs/results/$picture"
  {
    echo
    echo "## configs/$config.yaml"
    echo
    echo '```'
    sed -n '/^summary:/,$p' "$work/$config.log"
    echo '```'
    echo
    echo "Frame $frame of the annotated video: ![configs/$config.yaml, frame $frame]($picture)"
  } >> "$out"
done
echo "analytics_report: wrote $out" >&2
