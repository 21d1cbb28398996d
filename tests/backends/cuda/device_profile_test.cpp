// The CUDA device profile (backends/cuda/device_profiler.cu) through runtime::device_profile: the
// figures are measured, positive and within what any CUDA GPU of compute capability 7 or more
// reaches; pinned copies are not slower than pageable ones; the profile is cached. Without a GPU,
// the profile says why.

#include "backends/cuda/device_probe.hpp"
#include "core/error.hpp"
#include "gpu_test_support.hpp"
#include "runtime/device_profile.hpp"
#include "support/onnx_builder.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace redwood::cuda {
namespace {

runtime::ProfileOptions in_temp_dir(const std::string& tag) {
  runtime::ProfileOptions o;
  o.cache_dir = ::redwood::testing::temp_dir(tag);
  return o;
}

TEST(CudaDeviceProfile, FiguresAreMeasuredAndSane) {
  RW_SKIP_WITHOUT_GPU();
  const runtime::ProfileOptions options = in_temp_dir("cuda-profile");
  const runtime::DeviceProfile p = runtime::device_profile("cuda:0", options);
  std::printf("cuda:0 profile: %s\n", runtime::profile_to_json(p).c_str());
  const DeviceInfo info = probe_devices().devices.at(0);

  EXPECT_EQ(p.device, "cuda:0");
  EXPECT_EQ(p.name, info.name);
  EXPECT_EQ(p.cores, info.multiprocessors);
  EXPECT_EQ(p.isa, "sm_" + std::to_string(info.compute_major) + std::to_string(info.compute_minor));
  ASSERT_EQ(p.peak_gflops.count("fp32"), 1u);
  EXPECT_GT(p.peak_gflops.at("fp32"), 100.0);
  if (info.compute_major >= 8) {
    for (const char* precision : {"fp16", "bf16", "tf32"}) {
      ASSERT_EQ(p.peak_gflops.count(precision), 1u) << precision;
      // Tensor cores beat the FMA units at every precision they take.
      EXPECT_GT(p.peak_gflops.at(precision), p.peak_gflops.at("fp32")) << precision;
    }
  }
  for (const auto& [precision, gflops] : p.peak_gflops) EXPECT_LT(gflops, 1e7) << precision;
  EXPECT_GT(p.memory_gbps, 50.0);
  EXPECT_LT(p.memory_gbps, 1e5);
  for (const double gbps : {p.h2d_pinned_gbps, p.d2h_pinned_gbps, p.h2d_pageable_gbps, p.d2h_pageable_gbps}) {
    EXPECT_GT(gbps, 0.5);
    EXPECT_LT(gbps, 1000.0);
  }
  EXPECT_GE(p.h2d_pinned_gbps, 0.5 * p.h2d_pageable_gbps);
  EXPECT_GE(p.d2h_pinned_gbps, 0.5 * p.d2h_pageable_gbps);
  EXPECT_GT(p.copy_latency_ms, 0.001);
  EXPECT_LT(p.copy_latency_ms, 1.0);
  EXPECT_GT(p.launch_ms, 0.001);  // between 1 us and 1 ms
  EXPECT_LT(p.launch_ms, 1.0);
  EXPECT_GT(p.graph_launch_ms, 0.0);
  EXPECT_LT(p.graph_launch_ms, 1.0);
  // A batch through the CUDA runner beyond its copies and compute: its submit's host work, its
  // end noticed by the completion thread.
  EXPECT_GT(p.runner_roundtrip_ms, 0.0);
  EXPECT_LT(p.runner_roundtrip_ms, 5.0);
  EXPECT_LT(p.measure_seconds, 10.0);
  EXPECT_TRUE(std::filesystem::exists(runtime::profile_path(options.cache_dir, "cuda:0", p.key)));
  EXPECT_NE(p.key.find("driver"), std::string::npos) << p.key;
}

TEST(CudaDeviceProfile, ADeviceThatIsNotThereIsAnError) {
  RW_SKIP_WITHOUT_GPU();
  EXPECT_THROW(runtime::device_profile("cuda:99", in_temp_dir("cuda-profile-99")), InvalidArgument);
}

TEST(CudaDeviceProfile, WithoutAGpuTheProfileSaysWhy) {
  if (testing::gpu_unavailable().empty()) GTEST_SKIP() << "a GPU is usable here";
  try {
    runtime::device_profile("cuda:0", in_temp_dir("cuda-profile-none"));
    FAIL() << "no GPU, yet a profile";
  } catch (const Unsupported& e) {
    // backend_cuda registered its profiler (else: "no profiler for 'cuda' devices"), which names the reason.
    EXPECT_NE(std::string(e.what()).find("no usable CUDA device"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace redwood::cuda
