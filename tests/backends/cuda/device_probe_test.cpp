#include "backends/cuda/device_probe.hpp"

#include <gtest/gtest.h>

namespace redwood::cuda {
namespace {

TEST(CudaDeviceProbe, ReportsDevicesOrWhyNot) {
  const ProbeResult probe = probe_devices();
  EXPECT_GT(probe.runtime_version, 0);
  if (probe.devices.empty()) {
    EXPECT_FALSE(probe.error.empty());
    GTEST_SKIP() << "no usable CUDA device: " << probe.error;
  }
  for (const auto& d : probe.devices) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_GE(d.compute_major, 5);
    EXPECT_GT(d.total_memory, 0u);
    EXPECT_GT(d.multiprocessors, 0);
    EXPECT_GT(d.peak_bandwidth(), 1e10) << d.name;
  }
}

}  // namespace
}  // namespace redwood::cuda
