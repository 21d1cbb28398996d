#pragma once
// What every fuzz target in this folder defines: libFuzzer's two entry points. The same source
// links either with libFuzzer (clang, -DREDWOOD_FUZZ=ON: scripts/fuzz.sh) or with
// replay_main.cpp (every other build: ctest's `fuzz` label), which feeds it the seed corpus
// and a bounded, seeded set of mutations of it.
//
// The contract a target checks: any input either goes through or is refused with a
// redwood::Error. A target catches redwood::Error and nothing else, so a crash, a sanitizer
// report, or any other exception (std::bad_alloc, std::out_of_range, YAML::Exception,
// cv::Exception...) escapes and is a finding.

#include <cstddef>
#include <cstdint>

/// Called once before the first input (quiets the log, makes folders the target needs).
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv);
/// Called once per input; returns 0.
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
