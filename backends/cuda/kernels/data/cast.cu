// Cast on the GPU: one templated conversion per (from, to) pair of the types the GPU holds.

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/device_math.cuh"
#include "backends/cuda/kernels/launchers.hpp"
#include "backends/cuda/kernels/pdl.cuh"

#include <cuda_fp16.h>

#include <cstdint>

namespace redwood::cuda::kernels {
namespace {

template <typename T>
__device__ __forceinline__ float to_float(T v) { return static_cast<float>(v); }
template <>
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }

template <typename To, typename From>
__device__ __forceinline__ To convert(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return to_float(v) != 0.f;
  } else if constexpr (std::is_same_v<To, __half>) {
    return __float2half_rn(to_float(v));
  } else if constexpr (std::is_same_v<From, __half>) {
    return static_cast<To>(__half2float(v));
  } else {
    return static_cast<To>(v);
  }
}

template <typename From, typename To>
__global__ void cast_kernel(const From* __restrict__ x, To* __restrict__ y, long long n) {
  pdl_wait();
  pdl_launch_dependents();
  RW_GRID_STRIDE(i, n) y[i] = convert<To>(x[i]);
}

template <typename From>
void launch_from(CastType to, const void* x, void* y, long long n, cudaStream_t stream) {
  const auto* in = static_cast<const From*>(x);
  switch (to) {
    case CastType::kF32: launch_kernel(cast_kernel<From, float>, grid_for(n), 256, 0, stream, in, static_cast<float*>(y), n); break;
    case CastType::kF16: launch_kernel(cast_kernel<From, __half>, grid_for(n), 256, 0, stream, in, static_cast<__half*>(y), n); break;
    case CastType::kI64: launch_kernel(cast_kernel<From, long long>, grid_for(n), 256, 0, stream, in, static_cast<long long*>(y), n); break;
    case CastType::kI32: launch_kernel(cast_kernel<From, int>, grid_for(n), 256, 0, stream, in, static_cast<int*>(y), n); break;
    case CastType::kU8: launch_kernel(cast_kernel<From, std::uint8_t>, grid_for(n), 256, 0, stream, in, static_cast<std::uint8_t*>(y), n); break;
    case CastType::kBool: launch_kernel(cast_kernel<From, bool>, grid_for(n), 256, 0, stream, in, static_cast<bool*>(y), n); break;
  }
}

}  // namespace

void launch_cast(CastType from, CastType to, const void* x, void* y, long long n, cudaStream_t stream) {
  if (n == 0) return;
  switch (from) {
    case CastType::kF32: launch_from<float>(to, x, y, n, stream); break;
    case CastType::kF16: launch_from<__half>(to, x, y, n, stream); break;
    case CastType::kI64: launch_from<long long>(to, x, y, n, stream); break;
    case CastType::kI32: launch_from<int>(to, x, y, n, stream); break;
    case CastType::kU8: launch_from<std::uint8_t>(to, x, y, n, stream); break;
    case CastType::kBool: launch_from<bool>(to, x, y, n, stream); break;
  }
  RW_CUDA_CHECK_LAUNCH("cast");
}

}  // namespace redwood::cuda::kernels
