#!/usr/bin/env bash
# Makes assets/video/vtest-captions.avi: vtest.avi with the captions of scripts/vtest_captions.tsv
# burnt in by ffmpeg's drawtext (DejaVu Sans Bold from fonts-dejavu-core), white on a dark box.
# The clip is the shipped default for text detection and, with the TSV, the ground truth of the
# text-spotting tests. It is remade only when the TSV or this script change (a stamp beside it
# records their hash); it is written under a temporary name and moved into place when complete.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
assets=${REDWOOD_ASSETS:-$root/assets}
src=$assets/video/vtest.avi
out=$assets/video/vtest-captions.avi
captions=$root/scripts/vtest_captions.tsv
font=/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf

log() { echo "make_caption_clip: $*"; }
die() { echo "make_caption_clip: error: $*" >&2; exit 1; }

[[ -f $src ]] || die "$src is missing (scripts/fetch_assets.sh fetches it)"
[[ -f $font ]] || die "$font is missing (install fonts-dejavu-core)"
command -v ffmpeg >/dev/null || die "ffmpeg not found (install ffmpeg)"

stamp=$(cat "$captions" "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)
if [[ -f $out && -f $out.stamp && $(cat "$out.stamp") == "$stamp" ]]; then
  log "ok ${out#"$root"/} (up to date)"
  exit 0
fi

filters=()
while IFS=$'\t' read -r start end x y text; do
  [[ -z $start || $start == \#* ]] && continue
  [[ $text != *[:\'\\]* ]] || die "caption '$text': colons, quotes and backslashes are not allowed"
  filters+=("drawtext=fontfile=$font:expansion=none:text='$text':fontsize=40:fontcolor=white:box=1:boxcolor=black@0.7:boxborderw=8:x=$x:y=$y:enable='between(t,$start,$end)'")
done <"$captions"
((${#filters[@]})) || die "$captions holds no captions"
chain=$(IFS=,; echo "${filters[*]}")

part=$out.part.$$.avi
trap 'rm -f -- "$part"' EXIT
ffmpeg -nostdin -loglevel error -y -i "$src" -vf "$chain" -c:v mpeg4 -q:v 3 -an "$part"
mv -f -- "$part" "$out"
echo "$stamp" >"$out.stamp"
log "made ${out#"$root"/} (${#filters[@]} captions)"
