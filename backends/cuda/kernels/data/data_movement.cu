// One strided gather serves Transpose, Slice and Expand: each output element reads the input at
// base + Σ idx_d · stride_d (a permuted, stepped or zero stride per output axis).

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/device_math.cuh"
#include "backends/cuda/kernels/launchers.hpp"
#include "backends/cuda/kernels/pdl.cuh"

#include <cstdint>

namespace redwood::cuda::kernels {
namespace {

template <typename T>
__global__ void strided_copy_kernel(const T* __restrict__ src, T* __restrict__ dst, long long n, StridedCopy p) {
  pdl_wait();
  pdl_launch_dependents();
  RW_GRID_STRIDE(i, n) {
    long long rest = i, off = p.base;
    for (int d = p.rank - 1; d >= 0; --d) {
      off += (rest % p.dims[d]) * p.strides[d];
      rest /= p.dims[d];
    }
    dst[i] = src[off];
  }
}

template <typename T>
void launch_typed(const void* src, void* dst, long long n, const StridedCopy& p, cudaStream_t stream) {
  launch_kernel(strided_copy_kernel<T>, grid_for(n), 256, 0, stream, static_cast<const T*>(src), static_cast<T*>(dst), n,
                p);
}

}  // namespace

void launch_strided_copy(const void* src, void* dst, std::size_t element_bytes, long long n, const StridedCopy& p,
                         cudaStream_t stream) {
  if (n == 0) return;
  switch (element_bytes) {
    case 1: launch_typed<std::uint8_t>(src, dst, n, p, stream); break;
    case 2: launch_typed<std::uint16_t>(src, dst, n, p, stream); break;
    case 4: launch_typed<std::uint32_t>(src, dst, n, p, stream); break;
    default: launch_typed<std::uint64_t>(src, dst, n, p, stream); break;
  }
  RW_CUDA_CHECK_LAUNCH("strided_copy");
}

}  // namespace redwood::cuda::kernels
