// `redwood run` as a user runs it: status and summary, --set and --frames, a mistake in the file
// (exit 1, file:line:column), a stage error (exit 1, its message), SIGINT (drain, exit 0).

#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace redwood {
namespace {

using Result = testing::LauncherResult;

Result redwood_run(const std::string& args) { return testing::run_launcher("run " + args); }

std::filesystem::path test_dir() {
  static const auto dir = testing::temp_dir("run-command");
  return dir;
}

std::string write_config(const std::string& name, const std::string& text) {
  const auto path = test_dir() / name;
  std::ofstream(path) << text;
  return path.string();
}

const char* kSynthetic = R"(version: 1
name: synth
sources:
  - {name: a, type: synthetic, width: 64, height: 48, frames: 0, fps: 50}
  - {name: b, type: synthetic, width: 64, height: 48, frames: 0, fps: 50}
sinks:
  - {name: log, type: jsonl, path: out.jsonl}
)";

TEST(PipelineRunCommand, RunsWithFramesAndPrintsStatusAndSummary) {
  const auto config = write_config("synth.yaml", kSynthetic);
  const Result r = redwood_run(config + " --frames 70 --set sources.b.fps=100");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("pipeline synth: 2 stream(s) [a, b]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("a: "), std::string::npos) << r.output;                 // a status line
  EXPECT_NE(r.output.find(" fps p50 "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("stream a: read 70, delivered 70, dropped 0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("stream b: read 70, delivered 70, dropped 0"), std::string::npos) << r.output;
  std::ifstream lines(test_dir() / "out.jsonl");
  int count = 0;
  for (std::string line; std::getline(lines, line);) ++count;
  EXPECT_EQ(count, 140);
}

TEST(PipelineRunCommand, ConfigMistakeExitsOneWithPlace) {
  const auto config = write_config("bad.yaml", std::string(kSynthetic) + "stagess: []\n");
  const Result r = redwood_run(config);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("redwood: error: " + config + ":8:1: pipeline: unknown key 'stagess'"), std::string::npos)
      << r.output;
  const Result missing = redwood_run(config + ".nope");
  EXPECT_EQ(missing.exit_code, 1) << missing.output;
  EXPECT_NE(missing.output.find("cannot read the pipeline file"), std::string::npos) << missing.output;
}

TEST(PipelineRunCommand, SinkErrorExitsOneWithMessage) {
  // A video sink cannot write into a folder that is a file: the error stops the run.
  const auto blocker = test_dir() / "file";
  std::ofstream(blocker) << "x";
  const auto config = write_config("sinkfail.yaml", std::string(kSynthetic) +
                                                        "  - {name: vid, type: video, path: '" + blocker.string() +
                                                        "/x/{stream}.avi'}\n");
  const Result r = redwood_run(config + " --frames 5");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("redwood: error: sink 'vid' failed on frame 0"), std::string::npos) << r.output;
}

TEST(PipelineRunCommand, SigintDrainsAndExitsZero) {
  const auto config = write_config("endless.yaml", kSynthetic);
  const auto out = test_dir() / "sigint.txt";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::freopen(out.c_str(), "w", stdout);
    std::freopen(out.c_str(), "a", stderr);
    execl(REDWOOD_BINARY, REDWOOD_BINARY, "run", config.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  std::ifstream in(out);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_TRUE(WIFEXITED(status)) << text;
  EXPECT_EQ(WEXITSTATUS(status), 0) << text;
  EXPECT_NE(text.find("stopped by signal; frames in flight drained"), std::string::npos) << text;
  EXPECT_NE(text.find("summary:"), std::string::npos) << text;
}

}  // namespace
}  // namespace redwood
