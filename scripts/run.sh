#!/usr/bin/env bash
# The main job (README): set up and build, then run PP-OCRv4 text detection on a real video
# clip through `redwood infer`, frame by frame (FRAMES=N to change how many; default 10).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build_dir=${BUILD_DIR:-build}

bash scripts/setup.sh
# PP-OCR's detector takes BGR frames normalized with ImageNet's mean and std; the clip is vtest.avi
# with captions burnt in (scripts/make_caption_clip.sh), so there is text to find.
echo "run: redwood infer ch_PP-OCRv4_det_infer.onnx on vtest-captions.avi, ${FRAMES:-10} frames"
exec "$build_dir/bin/redwood" infer assets/models/ch_PP-OCRv4_det_infer.onnx \
  --input x=assets/video/vtest-captions.avi --bgr \
  --mean 0.485,0.456,0.406 --std 0.229,0.224,0.225 --frames "${FRAMES:-10}"
