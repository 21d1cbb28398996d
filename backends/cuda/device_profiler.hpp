#pragma once
// The CUDA device profile (runtime/device_profile.hpp): registered as the "cuda" profiler at the
// bottom of device_profiler.cu, so device_profile("cuda:N") measures through it; declared here
// for tests that call it directly.

#include "runtime/device_profile.hpp"

#include <string>

namespace redwood::cuda {

/// What GPU `index`'s figures depend on: its model, compute capability, SMs and memory, the
/// driver's and the runtime's versions. Throws Unsupported when no CUDA device is usable,
/// InvalidArgument when there is no GPU `index`.
std::string device_profile_key(int index);

/// Measures GPU `index` (about a second): host<->device copies, device memory bandwidth, launch
/// costs, peak rates (device_profiler.cu says how). Throws as device_profile_key, and CudaError.
runtime::DeviceProfile measure_device_profile(int index);

}  // namespace redwood::cuda
