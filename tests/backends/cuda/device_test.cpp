// The GPUs as Redwood knows them (backends/cuda/device.hpp): the driver asked once, every reader
// given the same answer; where no GPU is usable (here, in CI) plans are made for the named
// planning target, and asking for a device says why there is none. On a GPU host the planning
// device is the current GPU.

#include "backends/cuda/cuda_kernel.hpp"
#include "backends/cuda/device.hpp"
#include "core/error.hpp"

#include <gtest/gtest.h>

namespace redwood::cuda {
namespace {

TEST(CudaDeviceInfo, TheDriverIsAskedOnceAndEveryReaderGetsItsAnswer) {
  const ProbeResult& first = cuda_devices();
  const ProbeResult& again = cuda_devices();
  EXPECT_EQ(&first, &again);
  EXPECT_THROW(cuda_device(static_cast<int>(first.devices.size()) + 7), Unsupported);
  for (const DeviceInfo& d : first.devices) {
    EXPECT_EQ(&cuda_device(d.index), &d);
    EXPECT_GT(d.multiprocessors, 0);
    EXPECT_EQ(d.has_pdl(), d.compute_major >= 9);
    EXPECT_EQ(d.has_wgmma(), d.compute_major == 9 && d.compute_minor == 0);
  }
}

TEST(CudaDeviceInfo, PlansAreMadeForTheCurrentGpuElseForTheNamedPlanningTarget) {
  const DeviceInfo& planning = planning_device();
  if (cuda_devices().devices.empty()) {
    EXPECT_EQ(planning.index, -1);
    EXPECT_NE(planning.name.find("planning target"), std::string::npos) << planning.name;
    EXPECT_EQ(multiprocessor_count(), 132);
    try {
      current_cuda_device();
      FAIL() << "a current device where none is usable";
    } catch (const Unsupported& e) {
      EXPECT_NE(std::string(e.what()).find("CUDA"), std::string::npos) << e.what();
    }
  } else {
    EXPECT_EQ(&planning, &current_cuda_device());
    EXPECT_EQ(multiprocessor_count(), planning.multiprocessors);
  }
}

}  // namespace
}  // namespace redwood::cuda
