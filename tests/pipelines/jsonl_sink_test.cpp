// The JSON Lines sink: every frame a complete line; a disk that refuses writes ends the run with
// an error naming the sink and the file, the frames not written counted as failed; and the file
// only ever ends on a complete line, even when it fills up part-way through a write.

#include "core/error.hpp"
#include "pipelines/pipeline.hpp"
#include "pipelines/pipeline_text.hpp"
#include "stages/sink/line_file.hpp"
#include "support/onnx_builder.hpp"

#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <string>

namespace redwood {
namespace {

std::string yaml(const std::string& path, int frames) {
  return "version: 1\n"
         "sources:\n"
         "  - {name: cam, type: synthetic, width: 32, height: 24, frames: " + std::to_string(frames) + "}\n"
         "sinks:\n"
         "  - {name: log, type: jsonl, path: '" + path + "'}\n";
}

TEST(JsonlSink, EveryFrameIsOneCompleteLine) {
  const auto file = testing::temp_dir("jsonl") / "out" / "log.jsonl";
  Pipeline p(testing::pipeline_text(yaml(file.string(), 40)));
  const auto stats = p.run();
  EXPECT_EQ(stats.sinks.at(0).written, 40);
  EXPECT_EQ(stats.sinks.at(0).failed, 0);
  std::ifstream in(file);
  int lines = 0;
  for (std::string line; std::getline(in, line); ++lines) {
    EXPECT_EQ(line.front(), '{');
    EXPECT_EQ(line.back(), '}');
  }
  EXPECT_EQ(lines, 40);
}

TEST(JsonlSink, AFullDiskEndsTheRunNamingTheSinkAndTheFile) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full on this machine to stand in for a full disk";
  Pipeline p(testing::pipeline_text(yaml("/dev/full", 20)));
  try {
    p.run();
    FAIL() << "the run reported success writing to /dev/full";
  } catch (const RunError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("sink 'log'"), std::string::npos) << what;
    EXPECT_NE(what.find("cannot write '/dev/full': No space left on device"), std::string::npos) << what;
    EXPECT_GE(e.stats().sinks.at(0).failed, 1);
    EXPECT_EQ(e.stats().sinks.at(0).written, 0);
  }
}

// A file-size limit (RLIMIT_FSIZE) in a child process stands in for a disk that fills up
// part-way through a write.
TEST(LineFile, AWriteCutShortLeavesOnlyCompleteLines) {
  const auto file = testing::temp_dir("linefile") / "lines.txt";
  const std::string line = std::string(29, 'x') + '\n';  // 30 bytes
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::signal(SIGXFSZ, SIG_IGN);  // the write then fails with EFBIG instead of killing
    const rlimit limit{1000, 1000};
    setrlimit(RLIMIT_FSIZE, &limit);
    LineFile f(file);
    try {
      for (int i = 0; i < 10; ++i) f.append(line + line + line + line);  // 120 bytes a call
    } catch (const IoError&) {
      _exit(f.size() == 960 ? 3 : 4);  // eight calls fit: 960 bytes
    }
    _exit(5);
  }
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 3);
  EXPECT_EQ(std::filesystem::file_size(file), 960u);  // the ninth call's 40 bytes were cut back
  std::ifstream in(file);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(all.back(), '\n');
}

}  // namespace
}  // namespace redwood
