#include "backends/cuda/device.hpp"

#include "core/error.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

namespace redwood::cuda {

const ProbeResult& cuda_devices() {
  static const ProbeResult probe = probe_devices();
  return probe;
}

const DeviceInfo& cuda_device(int index) {
  const ProbeResult& probe = cuda_devices();
  for (const DeviceInfo& d : probe.devices) {
    if (d.index == index) return d;
  }
  throw Unsupported(fmt::format("no CUDA device {}: {}", index,
                                probe.error.empty() ? fmt::format("this process sees {}", probe.devices.size())
                                                    : probe.error));
}

const DeviceInfo& current_cuda_device() {
  int index = 0;
  if (const cudaError_t err = cudaGetDevice(&index); err != cudaSuccess) {
    cudaGetLastError();  // not sticky: leave no error for the next launch check
    throw Unsupported(fmt::format("no current CUDA device: {}", cudaGetErrorString(err)));
  }
  return cuda_device(index);
}

const DeviceInfo& planning_device() {
  static const DeviceInfo target = [] {
    DeviceInfo d;
    d.index = -1;
    d.name = "planning target (no usable GPU: an H200's figures)";
    d.compute_major = 9;
    d.compute_minor = 0;
    d.multiprocessors = 132;
    return d;
  }();
  if (cuda_devices().devices.empty()) return target;
  try {
    return current_cuda_device();
  } catch (const Unsupported&) {
    return target;
  }
}

}  // namespace redwood::cuda
