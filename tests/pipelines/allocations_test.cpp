// Heap allocations per frame of the shipped OCR pipeline on the CPU, in steady state: the launcher
// runs configs/ocr-video.yaml for two frame counts under an allocation counter preloaded into the
// process (tests/support/alloc_counter.c, every malloc-family call of every library), and the
// difference over the frames between them is the per-frame cost, start-up cancelling out.

#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <fstream>

namespace redwood {
namespace {

std::uint64_t allocations(std::int64_t frames, const std::filesystem::path& dir) {
  const auto count = dir / ("count-" + std::to_string(frames));
  const std::string command = "env OMP_WAIT_POLICY=PASSIVE LD_PRELOAD=" + std::string(REDWOOD_ALLOC_COUNTER) +
                              " REDWOOD_ALLOC_COUNT=" + count.string() + " " + REDWOOD_BINARY + " run " +
                              REDWOOD_SOURCE_DIR + "/configs/ocr-video.yaml --quiet --set service.metrics.enabled=false --frames " + std::to_string(frames) +
                              " --set sinks.pub.endpoint=ipc://" + (dir / "pub.sock").string() +
                              " --set sinks.log.path=" + (dir / "log.jsonl").string();
  const auto r = testing::run_command(command);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  // One line per process that had the counter preloaded: "COUNT PROGRAM"; the launcher's counts.
  std::ifstream in(count);
  std::uint64_t n = 0, value = 0;
  std::string program;
  while (in >> value >> program) {
    if (program == "redwood") n = value;
  }
  EXPECT_GT(n, 0u) << "no count written for redwood: " << r.output;
  return n;
}

// Measured on the 2-core VM: 2,500 to 4,000 per frame (the rows of the recognizer's batches
// vary, and a new row count plans anew), nearly all inside oneDNN's primitive execution (its
// argument maps, once per primitive run) and the oneDNN regions' own argument lists; a quarter
// above the highest catches a regression.
constexpr double kAllocationsPerFrameBound = 5000;

TEST(PipelineAllocations, SteadyStateOfTheShippedOcrPipelineOnTheCpu) {
#ifdef REDWOOD_SANITIZED
  GTEST_SKIP() << "a sanitizer build: AddressSanitizer must be the first library loaded, and it replaces "
                  "malloc, so the preloaded counter can neither load first nor count";
#endif
  if (!std::filesystem::exists(testing::assets_dir() / "video" / "vtest-captions.avi")) {
    GTEST_SKIP() << "assets/video/vtest-captions.avi is missing (scripts/setup.sh makes it)";
  }
  const auto dir = std::filesystem::temp_directory_path() / ("redwood-allocations-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::uint64_t short_run = allocations(40, dir), long_run = allocations(240, dir);
  ASSERT_GT(long_run, short_run);
  const double per_frame = static_cast<double>(long_run - short_run) / 200.0;
  std::printf("[ measured ] %.1f heap allocations per frame (40 frames: %llu, 240: %llu)\n", per_frame,
              static_cast<unsigned long long>(short_run), static_cast<unsigned long long>(long_run));
  RecordProperty("allocations_per_frame", std::to_string(per_frame));
  // What remains per frame comes from oneDNN's argument maps in every primitive execution,
  // OpenCV's temporaries and ZeroMQ's message buffers (docs/streaming.md, "Allocations").
  EXPECT_LE(per_frame, kAllocationsPerFrameBound);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace redwood
