#!/usr/bin/env bash
# The main job (README): set up and build, then run the shipped text-spotting pipeline
# (configs/ocr-video.yaml: PP-OCRv4 detection -> crops -> recognition) over vtest-captions.avi,
# with a ZeroMQ subscriber (apps/examples/subscribe.py) printing the text read off each frame as
# it arrives, while `redwood run` prints fps, latency and drops once a second.
#   FRAMES=N bash scripts/run.sh     (default 150 frames, 15 s of video)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build_dir=${BUILD_DIR:-build}

BUILD_TARGETS=${BUILD_TARGETS:-redwood} bash scripts/setup.sh  # the launcher; scripts/test.sh builds the rest
echo "run: redwood run configs/ocr-video.yaml --frames ${FRAMES:-150}, results over ZeroMQ on tcp://127.0.0.1:5555"
/usr/bin/python3 apps/examples/subscribe.py tcp://127.0.0.1:5555 ocr-video/ --timeout 20 &
subscriber=$!
trap 'kill "$subscriber" 2>/dev/null || true' EXIT
status=0
"$build_dir/bin/redwood" run configs/ocr-video.yaml --frames "${FRAMES:-150}" || status=$?
sleep 1  # let the subscriber print the last messages
exit "$status"
