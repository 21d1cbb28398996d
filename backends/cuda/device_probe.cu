#include "backends/cuda/device_arch.hpp"
#include "backends/cuda/device_probe.hpp"

#include <cuda_runtime.h>

namespace redwood::cuda {
namespace {

// Compiled, like every kernel of this library, for CMAKE_CUDA_ARCHITECTURES: whether the runtime
// has an image of it for a GPU is whether it has one of any Redwood kernel.
__global__ void kernel_image_probe() {}

}  // namespace

KernelImage probe_kernel_image(int device) {
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess || cudaSetDevice(device) != cudaSuccess) {
    cudaGetLastError();
    return KernelImage::kNotAsked;
  }
  cudaFuncAttributes attributes{};
  const cudaError_t err = cudaFuncGetAttributes(&attributes, kernel_image_probe);
  cudaGetLastError();  // not sticky; leave no error for the next launch check
  cudaSetDevice(previous);
  if (err == cudaSuccess) return KernelImage::kPresent;
  if (err == cudaErrorNoKernelImageForDevice || err == cudaErrorInvalidDeviceFunction) return KernelImage::kMissing;
  return KernelImage::kNotAsked;
}

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
