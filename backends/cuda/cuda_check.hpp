#pragma once
// Errors from the CUDA runtime become redwood::cuda::CudaError, whose message names the call, the
// file and line, and cudaGetErrorName/String:
//
//   cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream) failed at
//   backends/cuda/device_tensor.cpp:42: cudaErrorInvalidValue: invalid argument
//
// This header needs only the runtime API header, so .cu files include it without fmt.
// Destructors never throw: they use RW_CUDA_WARN, which logs instead.

#include <cuda_runtime_api.h>

namespace redwood::cuda {

/// Throws CudaError (a redwood::Error) describing `err` from `call` at file:line.
[[noreturn]] void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line);
/// Logs (never throws) a failed call; for destructors.
void warn_cuda_error(cudaError_t err, const char* call, const char* file, int line);
/// After a kernel launch: throws CudaError naming `kernel` if the launch failed.
void check_launch(const char* kernel, const char* file, int line);

}  // namespace redwood::cuda

#define RW_CUDA_CHECK(call)                                                          \
  do {                                                                               \
    const cudaError_t rw_cuda_err_ = (call);                                         \
    if (rw_cuda_err_ != cudaSuccess)                                                 \
      ::redwood::cuda::throw_cuda_error(rw_cuda_err_, #call, __FILE__, __LINE__);    \
  } while (0)

#define RW_CUDA_WARN(call)                                                           \
  do {                                                                               \
    const cudaError_t rw_cuda_err_ = (call);                                         \
    if (rw_cuda_err_ != cudaSuccess)                                                 \
      ::redwood::cuda::warn_cuda_error(rw_cuda_err_, #call, __FILE__, __LINE__);     \
  } while (0)

/// RW_CUDA_CHECK_LAUNCH("conv_wmma"): right after a <<<...>>> launch.
#define RW_CUDA_CHECK_LAUNCH(kernel) ::redwood::cuda::check_launch(kernel, __FILE__, __LINE__)
