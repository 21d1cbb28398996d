// The plan cache's files, device-neutral (runtime/plan_cache.hpp): an entry written and read back
// whole; every way a file can be wrong (truncated, another format version, another key, a pick
// its tuner refuses, not JSON at all) refused with its reason, logged once, never thrown, and
// replaced by the next save; writes that leave no temporary file; an unwritable folder a warning.
// The CUDA tuners' picks are checked in tests/backends/cuda/plan_cache_test.cpp.

#include "core/error.hpp"
#include "core/log.hpp"
#include "runtime/plan_cache.hpp"
#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

namespace redwood::runtime {
namespace {

namespace fs = std::filesystem;
using testing::LogCapture;

PlanCacheKey test_key() {
  PlanCacheKey key;
  key.model_hash = "0123456789abcdef";
  key.device = "Test GPU, sm_90, 132 SMs";
  key.driver = "570.86.15, CUDA 12.8";
  key.runtime = "CUDA runtime 13.0";
  key.redwood = redwood_version();
  key.options = {{"precision", "fp16"}, {"nhwc", "on"}};
  return key;
}

nlohmann::json conv_pick(int n, const std::string& tile) {
  return {{"key", {{"n", n}, {"c", 64}, {"type", "fp16"}}}, {"config", {{"tile", tile}, {"splits", 1}}}, {"how", "measured"}};
}

// A tuner "conv" whose tiles are "64x64" and "128x64"; anything else is refused, as the CUDA
// tuners refuse a config their kernel does not offer.
void check_test_pick(const std::string& tuner, const nlohmann::json& pick) {
  RW_EXPECTS(tuner == "conv", InvalidArgument, "this build has no tuner \"{}\"", tuner);
  const std::string tile = pick.at("config").at("tile");
  RW_EXPECTS(tile == "64x64" || tile == "128x64", InvalidArgument, "tile \"{}\" is not offered", tile);
}

std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string read_text(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_text(const fs::path& file, const std::string& text) { std::ofstream(file) << text; }

TEST(PlanCacheKey, FileNameFollowsEveryField) {
  const PlanCacheKey key = test_key();
  EXPECT_EQ(key.file_name(), test_key().file_name());
  EXPECT_EQ(key.file_name().rfind(key.model_hash + "-", 0), 0u) << "the model's entries sort together";
  EXPECT_EQ(key.difference(test_key()), "");
  std::vector<PlanCacheKey> others(6, key);
  others[0].model_hash = "fedcba9876543210";
  others[1].device = "Another GPU, sm_90, 132 SMs";
  others[2].driver = "575.1, CUDA 12.9";
  others[3].runtime = "CUDA runtime 13.1";
  others[4].redwood = "99.0.0";
  others[5].options["precision"] = "bf16";
  for (const PlanCacheKey& other : others) {
    EXPECT_NE(other.file_name(), key.file_name());
    EXPECT_NE(key.difference(other), "");
  }
  EXPECT_EQ(key.difference(others[1]), "device 'Another GPU, sm_90, 132 SMs', here 'Test GPU, sm_90, 132 SMs'");
  EXPECT_EQ(PlanCacheKey::from_json(key.to_json()), key);
}

TEST(PickSet, OnePickPerTunerAndKey) {
  PickSet picks;
  EXPECT_TRUE(picks.add("conv", conv_pick(1, "64x64")));
  EXPECT_FALSE(picks.add("conv", conv_pick(1, "128x64"))) << "the first pick of a key stays";
  EXPECT_TRUE(picks.add("conv", conv_pick(2, "64x64")));
  EXPECT_TRUE(picks.add("depthwise", conv_pick(1, "64x64")));
  EXPECT_EQ(picks.size(), 3u);
  PickSet more;
  more.add("conv", conv_pick(2, "128x64"));
  more.add("conv", conv_pick(3, "128x64"));
  EXPECT_EQ(picks.merge(more), 1u);
  EXPECT_EQ(picks.size(), 4u);
  EXPECT_THROW(picks.add("conv", nlohmann::json{{"config", {}}}), InvalidArgument);
}

TEST(PickRecorder, CollectsOnItsThreadInnermostFirst) {
  PickRecorder::record("conv", [] { return conv_pick(9, "64x64"); }, true);  // no recorder: nothing happens
  PickRecorder outer;
  PickRecorder::record("conv", [] { return conv_pick(1, "64x64"); }, true);
  {
    PickRecorder inner;
    PickRecorder::record("conv", [] { return conv_pick(2, "64x64"); }, false);
    EXPECT_EQ(inner.picks().size(), 1u);
    EXPECT_EQ(inner.measured(), 0u);
  }
  PickRecorder::record("conv", [] { return conv_pick(3, "64x64"); }, true);
  EXPECT_EQ(outer.picks().size(), 2u);
  EXPECT_EQ(outer.measured(), 2u);
}

class PlanCacheFile : public ::testing::Test {
 protected:
  fs::path dir_ = testing::temp_dir("plan-cache");
  PlanCacheKey key_ = test_key();

  // An entry of two picks, written as a runner writes it.
  fs::path write_entry() {
    ModelPlanCache cache(dir_, key_, "model.onnx", check_test_pick);
    PickSet picks;
    picks.add("conv", conv_pick(1, "64x64"));
    picks.add("conv", conv_pick(2, "128x64"));
    EXPECT_EQ(cache.add(picks), 2u);
    return cache.file();
  }

  // What a new runner of the same key finds in the file, and what it logs.
  std::pair<std::size_t, std::string> load_again() {
    LogCapture capture;
    ModelPlanCache cache(dir_, key_, "model.onnx", check_test_pick);
    return {cache.load().size(), capture.text()};
  }
};

TEST_F(PlanCacheFile, RoundTrips) {
  const fs::path file = write_entry();
  EXPECT_EQ(files_in(dir_), std::vector<std::string>{key_.file_name()});
  const EntryRead read = read_plan_cache_entry(file, &key_, check_test_pick);
  ASSERT_TRUE(read.entry.has_value()) << read.problem;
  EXPECT_EQ(read.entry->key, key_);
  EXPECT_EQ(read.entry->model, "model.onnx");
  EXPECT_EQ(read.entry->created.size(), std::string("2026-12-03T10:00:00Z").size());
  EXPECT_EQ(read.entry->picks.to_json(), nlohmann::json::parse(read_text(file))["picks"]);
  EXPECT_EQ(read.entry->picks.size(), 2u);
  const auto [loaded, log_text] = load_again();
  EXPECT_EQ(loaded, 2u);
  EXPECT_EQ(log_text, "");

  // New picks join the entry; known ones do not write it again.
  ModelPlanCache cache(dir_, key_, "model.onnx", check_test_pick);
  PickSet picks;
  picks.add("conv", conv_pick(2, "128x64"));
  EXPECT_EQ(cache.add(picks), 0u);
  picks.add("conv", conv_pick(3, "64x64"));
  EXPECT_EQ(cache.add(picks), 1u);
  EXPECT_EQ(load_again().first, 3u);
}

TEST_F(PlanCacheFile, MissingIsNoProblem) {
  const EntryRead read = read_plan_cache_entry(dir_ / key_.file_name(), &key_, check_test_pick);
  EXPECT_TRUE(read.missing);
  EXPECT_FALSE(read.entry.has_value());
  EXPECT_EQ(load_again(), std::make_pair(std::size_t{0}, std::string()));
}

struct Corruption {
  std::string name;
  std::function<std::string(const std::string& text)> spoil;
  std::string reason;  // in the problem and the log line
};
void PrintTo(const Corruption& c, std::ostream* os) { *os << c.name; }

class PlanCacheCorruption : public PlanCacheFile, public ::testing::WithParamInterface<Corruption> {};

// A bad file is refused whole, its reason logged once with the file's name, and the next save
// replaces it with a good one.
TEST_P(PlanCacheCorruption, IsRefusedLoggedOnceAndRebuilt) {
  const fs::path file = write_entry();
  const std::string spoiled = GetParam().spoil(read_text(file));
  write_text(file, spoiled);

  const EntryRead read = read_plan_cache_entry(file, &key_, check_test_pick);
  EXPECT_FALSE(read.entry.has_value());
  EXPECT_FALSE(read.missing);
  EXPECT_NE(read.problem.find(GetParam().reason), std::string::npos) << read.problem;

  const auto [loaded, first_log] = load_again();
  EXPECT_EQ(loaded, 0u) << "no pick of a bad file is used";
  EXPECT_NE(first_log.find(file.string()), std::string::npos) << first_log;
  EXPECT_NE(first_log.find(GetParam().reason), std::string::npos) << first_log;
  EXPECT_NE(first_log.find("[warning]"), std::string::npos) << first_log;
  EXPECT_EQ(load_again().second, "") << "said once per process";

  ModelPlanCache cache(dir_, key_, "model.onnx", check_test_pick);
  PickSet picks;
  picks.add("conv", conv_pick(5, "64x64"));
  EXPECT_EQ(cache.add(picks), 1u);
  EXPECT_EQ(load_again().first, 1u) << "rebuilt: only this run's pick";
  EXPECT_EQ(files_in(dir_), std::vector<std::string>{key_.file_name()});
}

std::string with(const std::string& text, const std::function<void(nlohmann::json&)>& change) {
  nlohmann::json j = nlohmann::json::parse(text);
  change(j);
  return j.dump();
}

INSTANTIATE_TEST_SUITE_P(
    Files, PlanCacheCorruption,
    ::testing::Values(
        Corruption{"Truncated", [](const std::string& t) { return t.substr(0, t.size() / 2); }, "corrupt"},
        Corruption{"Empty", [](const std::string&) { return std::string(); }, "corrupt"},
        Corruption{"NotAnObject", [](const std::string&) { return std::string("[1, 2]"); }, "not a JSON object"},
        Corruption{"OtherFormatVersion",
                   [](const std::string& t) { return with(t, [](nlohmann::json& j) { j["format_version"] = 2; }); },
                   "format version 2, this build reads version 1"},
        Corruption{"OtherDevice",
                   [](const std::string& t) { return with(t, [](nlohmann::json& j) { j["key"]["device"] = "Old GPU"; }); },
                   "stale: made for another key (device 'Old GPU'"},
        Corruption{"OtherOptions",
                   [](const std::string& t) {
                     return with(t, [](nlohmann::json& j) { j["key"]["options"]["precision"] = "fp32"; });
                   },
                   "stale: made for another key (options"},
        Corruption{"KeyFieldMissing",
                   [](const std::string& t) { return with(t, [](nlohmann::json& j) { j["key"].erase("driver"); }); },
                   "key: no \"driver\""},
        Corruption{"ConfigNotOffered",
                   [](const std::string& t) {
                     return with(t, [](nlohmann::json& j) { j["picks"]["conv"][1]["config"]["tile"] = "512x512"; });
                   },
                   "pick 1 of \"conv\": tile \"512x512\" is not offered"},
        Corruption{"UnknownTuner",
                   [](const std::string& t) {
                     return with(t, [](nlohmann::json& j) { j["picks"]["gemm"] = j["picks"]["conv"]; });
                   },
                   "this build has no tuner \"gemm\""},
        Corruption{"PickWithoutConfig",
                   [](const std::string& t) {
                     return with(t, [](nlohmann::json& j) { j["picks"]["conv"][0].erase("config"); });
                   },
                   "pick 0 of \"conv\": not an object with a \"key\" and a \"config\" object"},
        Corruption{"UnknownHow",
                   [](const std::string& t) {
                     return with(t, [](nlohmann::json& j) { j["picks"]["conv"][0]["how"] = 3; });
                   },
                   "pick 0 of \"conv\": \"how\" is 3, neither"},
        Corruption{"SameKeyTwice",
                   [](const std::string& t) {
                     return with(t, [](nlohmann::json& j) { j["picks"]["conv"][1]["key"] = j["picks"]["conv"][0]["key"]; });
                   },
                   "its key is there twice"}),
    [](const ::testing::TestParamInfo<Corruption>& info) { return info.param.name; });

TEST_F(PlanCacheFile, WritesLeaveNoTemporaryFile) {
  ModelPlanCache cache(dir_, key_, "model.onnx", check_test_pick);
  for (int n = 1; n <= 20; ++n) {
    PickSet picks;
    picks.add("conv", conv_pick(n, n % 2 ? "64x64" : "128x64"));
    EXPECT_EQ(cache.add(picks), 1u);
    EXPECT_EQ(files_in(dir_), std::vector<std::string>{key_.file_name()}) << "after write " << n;
  }
  EXPECT_EQ(load_again().first, 20u);
}

TEST_F(PlanCacheFile, AnUnwritableFolderIsAWarning) {
  // A folder under a regular file cannot be made, even by root.
  write_text(dir_ / "not-a-folder", "x");
  LogCapture capture;
  ModelPlanCache cache(dir_ / "not-a-folder" / "plans", key_, "model.onnx", check_test_pick);
  PickSet picks;
  picks.add("conv", conv_pick(1, "64x64"));
  EXPECT_NO_THROW(cache.add(picks));
  EXPECT_NE(capture.text().find("[warning] plan cache:"), std::string::npos) << capture.text();
  EXPECT_NE(capture.text().find("not kept for the next run"), std::string::npos) << capture.text();
  EXPECT_EQ(cache.load().size(), 1u) << "the runner goes on with its picks";
}

TEST(PlanCacheDir, FollowsTheEnvironment) {
  testing::ScopedEnv redwood("REDWOOD_CACHE_DIR", "/tmp/rw-cache");
  testing::ScopedEnv xdg("XDG_CACHE_HOME", "/tmp/xdg");
  EXPECT_EQ(plan_cache_dir(), fs::path("/tmp/rw-cache/plans"));
  redwood.set(nullptr);
  EXPECT_EQ(plan_cache_dir(), fs::path("/tmp/xdg/redwood/plans"));
  xdg.set(nullptr);
  testing::ScopedEnv home("HOME", "/home/someone");
  EXPECT_EQ(plan_cache_dir(), fs::path("/home/someone/.cache/redwood/plans"));
}

}  // namespace
}  // namespace redwood::runtime
