#include "backends/cuda/device_probe.hpp"

#include <cuda_runtime.h>

namespace redwood::cuda {

ProbeResult probe_devices() {
  ProbeResult result;
  cudaRuntimeGetVersion(&result.runtime_version);
  if (cudaDriverGetVersion(&result.driver_version) != cudaSuccess || result.driver_version == 0) {
    result.error = "no CUDA driver is loaded";
    return result;
  }
  int count = 0;
  if (const cudaError_t err = cudaGetDeviceCount(&count); err != cudaSuccess) {
    result.error = std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
    return result;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    DeviceInfo info;
    info.index = i;
    info.name = prop.name;
    info.compute_major = prop.major;
    info.compute_minor = prop.minor;
    info.total_memory = prop.totalGlobalMem;
    info.multiprocessors = prop.multiProcessorCount;
    cudaDeviceGetAttribute(&info.clock_khz, cudaDevAttrClockRate, i);
    cudaDeviceGetAttribute(&info.memory_clock_khz, cudaDevAttrMemoryClockRate, i);
    cudaDeviceGetAttribute(&info.memory_bus_bits, cudaDevAttrGlobalMemoryBusWidth, i);
    result.devices.push_back(info);
  }
  if (result.devices.empty()) result.error = "the CUDA runtime reports no devices";
  return result;
}

}  // namespace redwood::cuda
