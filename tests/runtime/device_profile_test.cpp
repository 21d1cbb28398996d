// runtime/device_profile: the JSON form, the cache (a hit is read back without measuring; a corrupt
// or mismatching file is measured again and rewritten; an unwritable folder still gives a profile),
// the cache folder from the environment, the profilers' registry, and the CPU's own figures. The
// cache cases use a profiler registered here, which counts its measurements; the CPU ones use the
// quick measurement, so the suite takes well under a second.

#include "runtime/device_profile.hpp"

#include "core/error.hpp"
#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>

namespace redwood::runtime {
namespace {

namespace fs = std::filesystem;
using ::redwood::testing::temp_dir;

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_text(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

DeviceProfile sample_profile() {
  DeviceProfile p;
  p.device = "cuda:1";
  p.name = "NVIDIA H200";
  p.peak_gflops = {{"fp32", 61000.5}, {"fp16", 650000}, {"bf16", 640000}, {"tf32", 320000}};
  p.memory_gbps = 4100.25;
  p.launch_ms = 0.0023;
  p.h2d_pinned_gbps = 53.1;
  p.d2h_pinned_gbps = 54.2;
  p.h2d_pageable_gbps = 20.3;
  p.d2h_pageable_gbps = 18.4;
  p.copy_latency_ms = 0.011;
  p.graph_launch_ms = 0.0011;
  p.runner_roundtrip_ms = 0.21;
  p.cores = 132;
  p.isa = "sm_90";
  p.key = "cuda NVIDIA H200; sm_90; driver 13000";
  p.peak_method = "fp32: FMA chains";
  p.measured_at = "2026-12-02T10:11:12Z";
  p.measure_seconds = 0.8;
  p.others_cpu_share = 0.05;
  return p;
}

void expect_same(const DeviceProfile& a, const DeviceProfile& b) {
  EXPECT_EQ(a.device, b.device);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.peak_gflops, b.peak_gflops);
  EXPECT_EQ(a.memory_gbps, b.memory_gbps);
  EXPECT_EQ(a.launch_ms, b.launch_ms);
  EXPECT_EQ(a.h2d_pinned_gbps, b.h2d_pinned_gbps);
  EXPECT_EQ(a.d2h_pinned_gbps, b.d2h_pinned_gbps);
  EXPECT_EQ(a.h2d_pageable_gbps, b.h2d_pageable_gbps);
  EXPECT_EQ(a.d2h_pageable_gbps, b.d2h_pageable_gbps);
  EXPECT_EQ(a.copy_latency_ms, b.copy_latency_ms);
  EXPECT_EQ(a.graph_launch_ms, b.graph_launch_ms);
  EXPECT_EQ(a.runner_roundtrip_ms, b.runner_roundtrip_ms);
  EXPECT_EQ(a.cores, b.cores);
  EXPECT_EQ(a.isa, b.isa);
  EXPECT_EQ(a.key, b.key);
  EXPECT_EQ(a.peak_method, b.peak_method);
  EXPECT_EQ(a.measured_at, b.measured_at);
  EXPECT_EQ(a.measure_seconds, b.measure_seconds);
  EXPECT_EQ(a.others_cpu_share, b.others_cpu_share);
}

// A device kind whose profiler counts its calls and whose key and contention the test can change.
std::atomic<int> fake_measurements{0};
std::string fake_key = "fake accelerator, driver 1";
double fake_others_share = 0;
const bool fake_registered = register_device_profiler(
    "fake",
    [](int index) {
      ++fake_measurements;
      DeviceProfile p;
      p.name = "Fake " + std::to_string(index);
      p.peak_gflops["fp32"] = 1000;
      p.memory_gbps = 100;
      p.launch_ms = 0.005;
      p.cores = 4;
      p.isa = "fake_1";
      p.others_cpu_share = fake_others_share;
      return p;
    },
    [](int index) { return fake_key + ", index " + std::to_string(index); });

ProfileOptions in(const fs::path& dir) {
  ProfileOptions o;
  o.cache_dir = dir;
  return o;
}

TEST(DeviceProfile, JsonRoundTrip) {
  const DeviceProfile p = sample_profile();
  expect_same(profile_from_json(profile_to_json(p)), p);
}

TEST(DeviceProfile, JsonThatCannotBeAProfileIsRefused) {
  const std::string good = profile_to_json(sample_profile());
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const auto at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return s.replace(at, from.size(), to);
  };
  EXPECT_THROW(profile_from_json("{\"format\": 2, \"device\": "), InvalidArgument);  // not JSON
  EXPECT_THROW(profile_from_json(replaced("\"format\": 2", "\"format\": 1")), InvalidArgument);  // an older one
  EXPECT_THROW(profile_from_json(replaced("\"runner_roundtrip_ms\"", "\"roundtrip\"")), InvalidArgument);
  EXPECT_THROW(profile_from_json(replaced("\"memory_gbps\"", "\"memory_gb\"")), InvalidArgument);  // missing
  EXPECT_THROW(profile_from_json(replaced("\"cores\": 132", "\"cores\": \"many\"")), InvalidArgument);
  EXPECT_THROW(profile_from_json(replaced("\"launch_ms\": 0.0023", "\"launch_ms\": -1")), InvalidArgument);
  EXPECT_THROW(profile_from_json(replaced("\"runner_roundtrip_ms\": 0.21", "\"runner_roundtrip_ms\": -0.5")), InvalidArgument);
  EXPECT_THROW(profile_from_json(replaced("\"fp32\": 61000.5", "\"fp32\": 0")), InvalidArgument);
  try {
    profile_from_json(replaced("\"memory_gbps\"", "\"memory_gb\""));
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("memory_gbps"), std::string::npos) << e.what();
  }
}

TEST(DeviceProfile, TheEnvironmentsCacheDirIsWhereProfilesGo) {
  const fs::path dir = temp_dir("profile-env");
  {
    redwood::testing::ScopedEnv redwood("REDWOOD_CACHE_DIR", dir.c_str());
    const DeviceProfile p = device_profile("fake:7");
    EXPECT_EQ(p.name, "Fake 7");
    const fs::path path = profile_path(dir, "fake:7", p.key);
    EXPECT_TRUE(fs::exists(path));
    EXPECT_EQ(path.parent_path(), dir / "profiles");
    EXPECT_EQ(path.filename().string().rfind("fake_7-", 0), 0u) << path;
  }
  // Without REDWOOD_CACHE_DIR, under XDG_CACHE_HOME.
  const fs::path xdg = temp_dir("profile-xdg");
  redwood::testing::ScopedEnv no_redwood("REDWOOD_CACHE_DIR", nullptr);
  redwood::testing::ScopedEnv xdg_home("XDG_CACHE_HOME", xdg.c_str());
  const DeviceProfile p = device_profile("fake:8");
  EXPECT_TRUE(fs::exists(profile_path(xdg / "redwood", "fake:8", p.key)));
}

TEST(DeviceProfile, MeasuresOnceThenReadsTheCache) {
  const fs::path dir = temp_dir("profile-hit");
  const int before = fake_measurements;
  const DeviceProfile first = device_profile("fake:0", in(dir));
  EXPECT_EQ(fake_measurements, before + 1);
  EXPECT_EQ(first.device, "fake:0");
  EXPECT_NE(first.key.find("fake accelerator, driver 1, index 0"), std::string::npos) << first.key;
  EXPECT_NE(first.key.find("Redwood"), std::string::npos) << first.key;
  EXPECT_EQ(first.measured_at.size(), 20u) << first.measured_at;  // 2026-12-02T10:11:12Z
  EXPECT_EQ(first.measured_at.back(), 'Z');
  expect_same(device_profile("fake:0", in(dir)), first);  // the memo
  EXPECT_EQ(fake_measurements, before + 1);

  // Another folder holding a profile the test wrote (its key, a date no measurement would give):
  // read back as it is, nothing measured.
  DeviceProfile saved = first;
  saved.measured_at = "2000-01-01T00:00:00Z";
  saved.peak_gflops["fp32"] = 12345;
  const fs::path other = temp_dir("profile-hit-other");
  write_text(profile_path(other, "fake:0", first.key), profile_to_json(saved));
  expect_same(device_profile("fake:0", in(other)), saved);
  EXPECT_EQ(fake_measurements, before + 1);

  // --remeasure measures and replaces the file.
  ProfileOptions again = in(other);
  again.remeasure = true;
  const DeviceProfile remeasured = device_profile("fake:0", again);
  EXPECT_EQ(fake_measurements, before + 2);
  EXPECT_EQ(remeasured.peak_gflops.at("fp32"), 1000);
  expect_same(profile_from_json(read_text(profile_path(other, "fake:0", first.key))), remeasured);
}

TEST(DeviceProfile, ACorruptOrMismatchingFileIsMeasuredAgainAndRewritten) {
  const std::string key = device_profile("fake:2", in(temp_dir("profile-key"))).key;
  DeviceProfile foreign = sample_profile();
  foreign.device = "fake:2";
  foreign.key = "another machine";
  DeviceProfile other_device = sample_profile();
  other_device.key = key;  // the right key, but cuda:1's profile
  for (const std::string& content : {std::string("{ not json"), std::string(), profile_to_json(foreign),
                                     profile_to_json(other_device)}) {
    const fs::path dir = temp_dir("profile-corrupt");
    const fs::path path = profile_path(dir, "fake:2", key);
    write_text(path, content);
    const int before = fake_measurements;
    const DeviceProfile p = device_profile("fake:2", in(dir));
    EXPECT_EQ(fake_measurements, before + 1) << content;
    EXPECT_EQ(p.key, key);
    EXPECT_EQ(p.name, "Fake 2");
    expect_same(profile_from_json(read_text(path)), p);
  }
}

TEST(DeviceProfile, ANewKeyMeasuresAgain) {
  const fs::path dir = temp_dir("profile-newkey");
  const DeviceProfile old_driver = device_profile("fake:3", in(dir));
  // Another process, after a driver update: the old file is there, under the old key's name.
  const fs::path later = temp_dir("profile-newkey-later");
  fs::create_directories(later / "profiles");
  fs::copy_file(profile_path(dir, "fake:3", old_driver.key), profile_path(later, "fake:3", old_driver.key));
  fake_key = "fake accelerator, driver 2";
  const int before = fake_measurements;
  const DeviceProfile new_driver = device_profile("fake:3", in(later));
  fake_key = "fake accelerator, driver 1";
  EXPECT_EQ(fake_measurements, before + 1);
  EXPECT_NE(new_driver.key, old_driver.key);
  EXPECT_NE(new_driver.key.find("driver 2"), std::string::npos) << new_driver.key;
  EXPECT_TRUE(fs::exists(profile_path(later, "fake:3", new_driver.key)));
}

TEST(DeviceProfile, AnUnwritableCacheStillGivesAProfile) {
  const fs::path dir = temp_dir("profile-unwritable");
  write_text(dir / "file", "a file where the cache folder would be");
  const int before = fake_measurements;
  const DeviceProfile p = device_profile("fake:4", in(dir / "file"));
  EXPECT_EQ(fake_measurements, before + 1);
  EXPECT_EQ(p.name, "Fake 4");
  EXPECT_FALSE(fs::exists(dir / "file" / "profiles"));
}

TEST(DeviceProfile, AProfileMeasuredOnABusyMachineIsNotSaved) {
  const fs::path dir = temp_dir("profile-busy");
  fake_others_share = 0.6;
  const DeviceProfile busy = device_profile("fake:5", in(dir));
  fake_others_share = 0;
  EXPECT_EQ(busy.others_cpu_share, 0.6);
  EXPECT_FALSE(fs::exists(profile_path(dir, "fake:5", busy.key)));
  // The memo keeps it for this process; remeasured on an idle machine, it is saved.
  const int before = fake_measurements;
  EXPECT_EQ(device_profile("fake:5", in(dir)).others_cpu_share, 0.6);
  EXPECT_EQ(fake_measurements, before);
  ProfileOptions again = in(dir);
  again.remeasure = true;
  EXPECT_EQ(device_profile("fake:5", again).others_cpu_share, 0.0);
  EXPECT_TRUE(fs::exists(profile_path(dir, "fake:5", busy.key)));
}

TEST(DeviceProfile, DeviceNamesAndKinds) {
  for (const char* bad : {"", "gpu", "cuda", "cuda:", "cuda:x", ":0", "cpu:0", "cuda:-1"}) {
    EXPECT_THROW(device_profile(bad), InvalidArgument) << bad;
  }
  try {
    device_profile("tpu:0");
    FAIL() << "no profiler is registered for tpu";
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("no profiler for 'tpu' devices"), std::string::npos) << e.what();
  }
  EXPECT_THROW(register_device_profiler("cpu", [](int) { return DeviceProfile{}; }), InvalidArgument);
}

TEST(DeviceProfile, AProfilerWithoutAKeyIsNotCached) {
  register_device_profiler("keyless", [](int) {
    DeviceProfile p;
    p.name = "Keyless";
    p.peak_gflops["fp16"] = 10;
    p.memory_gbps = 1;
    p.cores = 1;
    return p;
  });
  const fs::path dir = temp_dir("profile-keyless");
  const DeviceProfile p = device_profile("keyless:0", in(dir));
  EXPECT_EQ(p.name, "Keyless");
  EXPECT_TRUE(p.key.empty());
  EXPECT_FALSE(fs::exists(dir / "profiles"));
}

TEST(DeviceProfile, TheCpusFiguresAreMeasuredAndSane) {
  const fs::path dir = temp_dir("profile-cpu");
  ProfileOptions quick = in(dir);
  quick.quick = true;
  const DeviceProfile p = device_profile("cpu", quick);
  std::printf("quick CPU profile: %s\n", profile_to_json(p).c_str());
  EXPECT_EQ(p.device, "cpu");
  EXPECT_FALSE(p.name.empty());
  EXPECT_GT(p.cores, 0);
  ASSERT_EQ(p.peak_gflops.count("fp32"), 1u);
  EXPECT_GT(p.peak_gflops.at("fp32"), 1.0);
  for (const auto& [precision, gflops] : p.peak_gflops) EXPECT_LT(gflops, 1e6) << precision;
  EXPECT_GT(p.memory_gbps, 0.5);
  EXPECT_LT(p.memory_gbps, 1e5);
  EXPECT_GT(p.launch_ms, 0.0);
  EXPECT_LT(p.launch_ms, 10.0);
  EXPECT_EQ(p.h2d_pinned_gbps, 0.0);  // no host<->device link
  // A CPU runner's batch beyond its copies and compute: the submit and the wake of its worker.
  EXPECT_GT(p.runner_roundtrip_ms, 0.0);
  EXPECT_LT(p.runner_roundtrip_ms, 10.0);
  EXPECT_NE(p.key.find("quick"), std::string::npos) << "a quick profile must not stand in for a full one";
  EXPECT_NE(p.peak_method.find("oneDNN matmul"), std::string::npos) << p.peak_method;
  EXPECT_NE(p.peak_method.find("CPU Executor"), std::string::npos) << "the CPU kernels are linked into the tests";
  EXPECT_LT(p.measure_seconds, 5.0);  // about 0.2 s on an idle 2-core VM

  EXPECT_GE(p.others_cpu_share, 0.0);
  // Saved, unless the machine was too busy for the figures to be trusted.
  EXPECT_EQ(fs::exists(profile_path(dir, "cpu", p.key)), p.others_cpu_share <= kMaxOthersCpuShare);

  // Another folder holding the profile with a date no measurement gives: read back as it is.
  const fs::path copy = temp_dir("profile-cpu-copy");
  DeviceProfile saved = p;
  saved.measured_at = "1999-12-31T23:59:59Z";
  write_text(profile_path(copy, "cpu", p.key), profile_to_json(saved));
  ProfileOptions quick_copy = in(copy);
  quick_copy.quick = true;
  expect_same(device_profile("cpu", quick_copy), saved);
}

}  // namespace
}  // namespace redwood::runtime
