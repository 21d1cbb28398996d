#include "backends/cuda/cuda_check.hpp"

#include "backends/cuda/cuda_error.hpp"
#include "core/log.hpp"

#include <fmt/format.h>

namespace redwood::cuda {
namespace {

std::string describe(cudaError_t err, const char* call, const char* file, int line) {
  return fmt::format("{} failed at {}:{}: {}: {}", call, file, line, cudaGetErrorName(err),
                     cudaGetErrorString(err));
}

}  // namespace

void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
  // The error is reported here: taken off the thread's last error, so that a later launch check
  // (RW_CUDA_CHECK_LAUNCH reads cudaGetLastError) does not blame its kernel for it. Sticky errors
  // (a kernel fault) stay whatever this does.
  cudaGetLastError();
  throw CudaError(describe(err, call, file, line));
}

void warn_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
  cudaGetLastError();  // as throw_cuda_error
  redwood::log().warn("{}", describe(err, call, file, line));
}

void check_launch(const char* kernel, const char* file, int line) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    throw CudaError(fmt::format("launch of kernel {} failed at {}:{}: {}: {}", kernel, file, line,
                                cudaGetErrorName(err), cudaGetErrorString(err)));
  }
}

}  // namespace redwood::cuda
