#!/usr/bin/env bash
# Redwood as an installed package (cmake/RedwoodInstall.cmake): `cmake --install` of this build
# into a temporary prefix, then apps/examples/custom_stage configured against that prefix alone
# (find_package(Redwood)), built, and run on its pipeline file. Checks that the app's own stage
# ran on every frame, that Redwood's sink wrote them, that a mistake in the file is reported
# with its place, and that the installed package names nothing in the source or build tree.
#
#   tests/install/custom_stage_test.sh BUILD_DIR SOURCE_DIR        (ctest: install.custom_stage)
set -euo pipefail
build=$(realpath "$1")
src=$(realpath "$2")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$work/prefix" >"$work/install.log" || { cat "$work/install.log"; fail "cmake --install"; }
for f in lib/cmake/Redwood/RedwoodConfig.cmake lib/cmake/Redwood/RedwoodConfigVersion.cmake \
         include/redwood/config.hpp include/redwood/pipelines/pipeline.hpp bin/redwood; do
  [[ -e $work/prefix/$f ]] || fail "not installed: $f"
done
if grep -rl -e "$src" -e "$build" "$work/prefix/lib/cmake" "$work/prefix/include/redwood/config.hpp"; then
  fail "the installed package names the source or build tree (files above)"
fi
# Dependencies by their targets, not by this machine's library paths.
if grep -n "/usr/lib/[^\"]*\.so" "$work/prefix/lib/cmake/Redwood/RedwoodTargets.cmake"; then
  fail "the installed package names a library by its path on this machine (lines above)"
fi
"$work/prefix/bin/redwood" --version | grep -q "^redwood $(sed -n 's/^#define REDWOOD_VERSION "\(.*\)"/\1/p' "$work/prefix/include/redwood/config.hpp")$" \
  || fail "redwood --version does not print the installed config.hpp's version"

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$src/apps/examples/custom_stage" -B "$work/app" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$work/prefix" "${launcher[@]}" >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; fail "configure"; }
cmake --build "$work/app" >"$work/build.log" 2>&1 || { tail -50 "$work/build.log"; fail "build"; }

"$work/app/custom_stage" "$src/apps/examples/custom_stage/pipeline.yaml" "sinks.log.path=$work/out.jsonl" \
  >"$work/run.log" 2>&1 || { cat "$work/run.log"; fail "the example's run"; }
cat "$work/run.log"
grep -q "12 frames through mean_brightness" "$work/run.log" || fail "the app's stage did not see 12 frames"
[[ $(wc -l <"$work/out.jsonl") -eq 12 ]] || fail "Redwood's jsonl sink wrote $(wc -l <"$work/out.jsonl") lines, not 12"

# A stage type nobody registered: refused at its place, exit 1.
sed 's/type: mean_brightness/type: mean_brightnes/' "$src/apps/examples/custom_stage/pipeline.yaml" >"$work/bad.yaml"
set +e
"$work/app/custom_stage" "$work/bad.yaml" "sinks.log.path=$work/bad.jsonl" >"$work/bad.log" 2>&1
rc=$?
set -e
[[ $rc -eq 1 ]] || { cat "$work/bad.log"; fail "a bad file exited $rc, not 1"; }
grep -q "bad.yaml:13:11:.*unknown stage type 'mean_brightnes'.*mean_brightness" "$work/bad.log" \
  || { cat "$work/bad.log"; fail "the bad file's message does not name its place and the known types"; }
echo "PASS: installed, built against the install, ran"
