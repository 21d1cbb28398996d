#pragma once
// Shared by the GPU tests: whether a CUDA device is usable (tests skip with the reason where not,
// as in CI), the tolerances per precision, and relative L2 error.

#include "backends/cuda/cuda_kernel.hpp"
#include "backends/cuda/device_probe.hpp"
#include "core/tensor.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <string>

namespace redwood::cuda::testing {

/// Empty when a CUDA device is usable, else why not.
inline std::string gpu_unavailable() {
  static const std::string why = [] {
    const ProbeResult probe = probe_devices();
    return probe.devices.empty() ? "no usable CUDA device: " + probe.error : std::string();
  }();
  return why;
}

#define RW_SKIP_WITHOUT_GPU()                                                          \
  do {                                                                                 \
    if (const std::string why = ::redwood::cuda::testing::gpu_unavailable(); !why.empty()) \
      GTEST_SKIP() << why;                                                             \
  } while (0)

/// The per-kernel bounds on relative L2 error against the reference kernels, by precision.
inline double tolerance(Precision p) {
  switch (p) {
    case Precision::kFp32: return 1e-4;
    case Precision::kTf32: return 1e-3;
    default: return 1e-2;
  }
}

/// ‖actual − expected‖₂ / ‖expected‖₂ (tests/support/test_support.hpp).
using ::redwood::testing::relative_l2;

}  // namespace redwood::cuda::testing
