// `redwood run` as a user runs it: status and summary, --set and --frames, a mistake in the file
// (exit 1, file:line:column), a stage error (exit 1, its message), SIGINT and SIGTERM (drain,
// complete JSON Lines, summary, exit 0), and bad input (corrupt, empty and truncated videos, a
// model input the preprocess cannot produce).

#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <sstream>
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
  EXPECT_NE(r.output.find("frame pool: "), std::string::npos) << r.output;
  // The start's cost: the build, then the first frame through the sinks, added up.
  double total = 0, built = 0, first = 0;
  const auto at = r.output.find("first result ");
  ASSERT_NE(at, std::string::npos) << r.output;
  ASSERT_EQ(std::sscanf(r.output.c_str() + at,
                        "first result %lf ms after the start (pipeline built in %lf ms, then %lf ms to the first frame",
                        &total, &built, &first),
            3)
      << r.output.substr(at);
  EXPECT_GT(built, 0);
  EXPECT_GE(first, 0);
  EXPECT_NEAR(total, built + first, 0.15);
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

/// Starts `redwood run CONFIG`, sends `signal` once it has printed its first status line, and
/// returns how it exited and what it printed.
Result run_and_signal(const std::string& config, int signal, const std::string& tag) {
  const auto out = test_dir() / (tag + ".txt");
  const pid_t pid = fork();
  if (pid < 0) return {};
  if (pid == 0) {
    std::freopen(out.c_str(), "w", stdout);
    std::freopen(out.c_str(), "a", stderr);
    execl(REDWOOD_BINARY, REDWOOD_BINARY, "run", config.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  const auto read_out = [&out] {
    std::ifstream in(out);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  // Frames are flowing once a status line is out (or after 20 s, on a very loaded machine).
  for (int waited = 0; waited < 20000 && read_out().find(" fps p50 ") == std::string::npos; waited += 50) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(pid, signal);
  int status = 0;
  waitpid(pid, &status, 0);
  Result r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.output = read_out();
  return r;
}

/// The frames the summary says each stream delivered, summed.
std::int64_t delivered_in_summary(const std::string& text) {
  std::int64_t total = 0;
  for (std::size_t at = text.find(", delivered "); at != std::string::npos; at = text.find(", delivered ", at + 1)) {
    total += std::stoll(text.substr(at + 12));
  }
  return total;
}

/// Every line of a JSON Lines file parses (none half-written); returns how many there are.
std::int64_t complete_json_lines(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(text.empty() || text.back() == '\n') << "the last line is cut: ..." << text.substr(text.size() - std::min<std::size_t>(80, text.size()));
  std::int64_t n = 0;
  std::stringstream lines(text);
  for (std::string line; std::getline(lines, line); ++n) {
    EXPECT_FALSE(nlohmann::json::parse(line, nullptr, false).is_discarded()) << "line " << n + 1 << ": " << line;
  }
  return n;
}

class PipelineRunSignal : public ::testing::TestWithParam<int> {};

TEST_P(PipelineRunSignal, DrainsFlushesSinksAndExitsZero) {
  const int signal = GetParam();
  const std::string tag = signal == SIGINT ? "sigint" : "sigterm";
  // Endless streams, a stage that holds frames in flight, and a JSON Lines sink to check.
  std::string yaml = kSynthetic;
  yaml.replace(yaml.find("out.jsonl"), 9, tag + ".jsonl");
  const auto config = write_config(tag + ".yaml", yaml);
  const Result r = run_and_signal(config, signal, tag);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("stopped by signal; frames in flight drained"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("summary:"), std::string::npos) << r.output;
  // Every frame the summary counts as delivered is a complete line of the file.
  const std::int64_t delivered = delivered_in_summary(r.output);
  EXPECT_GT(delivered, 0) << r.output;
  EXPECT_EQ(complete_json_lines(test_dir() / (tag + ".jsonl")), delivered) << r.output;
}

INSTANTIATE_TEST_SUITE_P(Signals, PipelineRunSignal, ::testing::Values(SIGINT, SIGTERM),
                         [](const auto& info) { return std::string(info.param == SIGINT ? "Sigint" : "Sigterm"); });

// Bad input: each a clear message, exit 1, no crash, and the summary of what ran.

TEST(PipelineRunCommand, CorruptVideoFailsAtLoadWithPlace) {
  const auto bad = test_dir() / "corrupt.avi";
  std::ofstream(bad) << std::string(4096, 'x');
  const auto config = write_config("corrupt.yaml", "version: 1\nsources:\n  - {name: v, type: video, path: '" +
                                                       bad.string() + "'}\n");
  const Result r = redwood_run(config);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("redwood: error: " + config + ":3:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("path: video '" + bad.string() + "': FFmpeg cannot open it"), std::string::npos) << r.output;
}

TEST(PipelineRunCommand, VideoWithNoFrameFailsAfterFlushing) {
  // A real container with a video stream and no frame in it.
  if (std::system("command -v ffmpeg >/dev/null 2>&1") != 0) GTEST_SKIP() << "ffmpeg not found";
  const auto empty = test_dir() / "empty.avi";
  ASSERT_EQ(std::system(("ffmpeg -nostdin -loglevel error -y -f lavfi -i color=c=black:s=64x48:r=10 -frames:v 0 "
                         "-c:v mjpeg '" + empty.string() + "'").c_str()), 0);
  const auto config = write_config("empty.yaml", "version: 1\nsources:\n  - {name: v, type: video, path: '" +
                                                     empty.string() + "'}\n  - {name: s, type: synthetic, frames: 5}\n"
                                                     "sinks:\n  - {name: log, type: jsonl, path: empty.jsonl}\n");
  const Result r = redwood_run(config);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const bool no_frame = r.output.find("source 'v' failed after 0 frame(s): video '" + empty.string() + "': no readable frame") !=
                        std::string::npos;
  const bool unopenable = r.output.find("path: video '" + empty.string() + "': FFmpeg cannot") != std::string::npos;
  EXPECT_TRUE(no_frame || unopenable) << r.output;
  EXPECT_EQ(r.output.find("terminate"), std::string::npos) << r.output;
  if (no_frame) {
    EXPECT_NE(r.output.find("summary:"), std::string::npos) << r.output;
  }
}

TEST(PipelineRunCommand, TruncatedVideoWarnsAndKeepsWhatWasRead) {
  // The first 40 % of vtest.avi: FFmpeg opens it and reads until the data ends.
  const auto src = testing::assets_dir() / "video" / "vtest.avi";
  if (!std::filesystem::exists(src)) GTEST_SKIP() << src << " is missing: run scripts/setup.sh";
  const auto cut = test_dir() / "cut.avi";
  {
    std::ifstream in(src, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() * 2 / 5);
  }
  const auto config = write_config("cut.yaml", "version: 1\nsources:\n  - {name: v, type: video, path: '" + cut.string() +
                                                   "'}\nsinks:\n  - {name: log, type: jsonl, path: cut.jsonl}\n");
  const Result r = redwood_run(config + " --quiet");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("reading stopped after frame"), std::string::npos) << r.output;
  const std::int64_t delivered = delivered_in_summary(r.output);
  EXPECT_GT(delivered, 100) << r.output;
  EXPECT_LT(delivered, 795) << r.output;
  EXPECT_EQ(complete_json_lines(test_dir() / "cut.jsonl"), delivered);
}

TEST(PipelineRunCommand, ModelInputThePreprocessCannotProduce) {
  // BlazeFace takes 128 x 128 only; asking preprocess for 256 fails at load, naming the place.
  const auto model = testing::assets_dir() / "models" / "face_detection_front_128x128_barracuda.onnx";
  if (!std::filesystem::exists(model)) GTEST_SKIP() << model << " is missing: run scripts/setup.sh";
  const auto config = write_config("face256.yaml", "version: 1\nsources:\n  - {name: s, type: synthetic, frames: 3}\n"
                                                       "models:\n  face: {path: '" + model.string() + "'}\n"
                                                       "stages:\n  - {name: pre, type: preprocess, model: face, width: 256, "
                                                       "height: 256}\n");
  const Result r = redwood_run(config);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("redwood: error: " + config + ":7:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("its width is fixed at 128"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace redwood
