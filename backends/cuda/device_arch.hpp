#pragma once
// Whether this build's GPU code runs on a device: the build carries machine code (SASS) and/or
// PTX for the architectures of CMAKE_CUDA_ARCHITECTURES; a GPU whose compute capability none of
// them covers cannot launch a single Redwood kernel ("no kernel image is available"). The "cuda"
// model runner checks GPU 0 at load (cuda_model_runner.cpp), so `device: cuda` fails there with a
// clear error and `device: auto` falls back to the CPU with it, instead of failing on the first
// frame. The rules and the message are host code (tested without a GPU); the runtime's own answer
// (probe_kernel_image, device_probe.cu) decides where it is available.

#include "backends/cuda/device_probe.hpp"

#include <string>
#include <string_view>

namespace redwood::cuda {

/// CMAKE_CUDA_ARCHITECTURES as this library was built ("90", "80-real;90", ...).
std::string_view built_cuda_architectures();

enum class ArchFit { kRuns, kNoCode, kUnknown };

/// Whether code built for `architectures` (CMake's syntax: ';' or ',' separated entries `XY`
/// (SASS and PTX), `XY-real` (SASS), `XY-virtual` (PTX), an `a`/`f` suffix for arch-specific
/// code) runs on compute capability major.minor: SASS for X.Y runs on X.Z with Z ≥ Y ("a": X.Y
/// only), PTX for X.Y is compiled by the driver for any later GPU. kUnknown for "all",
/// "all-major", "native" or anything else it cannot read.
ArchFit architecture_fit(std::string_view architectures, int major, int minor);

/// What the runtime said when asked for a kernel of this library on the device.
enum class KernelImage { kPresent, kMissing, kNotAsked };

/// "" when `device` can run this build's kernels, else the error: the GPU's index and name, its
/// sm_XY, and the architectures built, with the CMake option that fixes it. The runtime's answer
/// decides when there is one; otherwise the rule above on `architectures`.
std::string architecture_problem(const DeviceInfo& device, std::string_view architectures, KernelImage image);

/// The same for a device this process sees: asks the runtime (probe_kernel_image).
std::string architecture_problem(const DeviceInfo& device);

/// Asks the CUDA runtime whether this library has a kernel image for GPU `device`
/// (cudaFuncGetAttributes on a kernel of this library: cudaErrorNoKernelImageForDevice when not).
KernelImage probe_kernel_image(int device);

}  // namespace redwood::cuda
