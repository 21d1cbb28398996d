// Pad on the GPU: one thread per output element maps its index back into the input per dim.

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/device_math.cuh"
#include "backends/cuda/kernels/launchers.hpp"
#include "backends/cuda/kernels/pdl.cuh"

namespace redwood::cuda::kernels {
namespace {

// The input index of i (= output index - begin) along a dim of n elements; -1: the constant.
__device__ __forceinline__ long long source_index(long long i, long long n, PadMode mode) {
  if (i >= 0 && i < n) return i;
  if (mode == PadMode::kConstant) return -1;
  if (mode == PadMode::kEdge) return i < 0 ? 0 : n - 1;
  if (n == 1) return 0;
  const long long period = 2 * (n - 1);
  long long r = ((i % period) + period) % period;
  return r >= n ? period - r : r;
}

__global__ void pad_kernel(PadParams p, const float* __restrict__ x, float* __restrict__ y, long long n) {
  pdl_wait();
  pdl_launch_dependents();
  RW_GRID_STRIDE(i, n) {
    long long rest = i, offset = 0, stride = 1;
    bool inside = true;
    for (int d = p.rank - 1; d >= 0; --d) {
      const long long o = rest % p.out_dims[d];
      rest /= p.out_dims[d];
      const long long s = source_index(o - p.begin[d], p.in_dims[d], p.mode);
      if (s < 0) inside = false;
      offset += s * stride;
      stride *= p.in_dims[d];
    }
    y[i] = inside ? x[offset] : p.value;
  }
}

}  // namespace

void launch_pad(const PadParams& p, const float* x, float* y, long long n, cudaStream_t stream) {
  if (n == 0) return;
  launch_kernel(pad_kernel, grid_for(n), 256, 0, stream, p, x, y, n);
  RW_CUDA_CHECK_LAUNCH("pad");
}

}  // namespace redwood::cuda::kernels
