// Row normalization for LayerNormalization and InstanceNormalization: one block per row, the
// mean and then the variance of the centred values (two passes over the row, which stays in L2),
// then the scaled and shifted output.

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/device_math.cuh"
#include "backends/cuda/kernels/launchers.hpp"
#include "backends/cuda/kernels/pdl.cuh"

namespace redwood::cuda::kernels {
namespace {

constexpr int kThreads = 256;

// The block's sum of v (every thread gets it).
__device__ float block_sum(float v, float* shared) {
  for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // `shared` may still be read by an earlier call
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float total = 0.f;
  for (int w = 0; w < kThreads / 32; ++w) total += shared[w];
  return total;
}

__global__ void __launch_bounds__(kThreads) row_norm_kernel(RowNorm p, const float* __restrict__ x,
                                                            const float* __restrict__ scale,
                                                            const float* __restrict__ bias, float* __restrict__ y,
                                                            float* __restrict__ mean_out,
                                                            float* __restrict__ inv_std_out) {
  pdl_wait();
  pdl_launch_dependents();
  __shared__ float shared[kThreads / 32];
  for (long long row = blockIdx.x; row < p.rows; row += gridDim.x) {
    const float* xr = x + row * p.len;
    float* yr = y + row * p.len;
    float s = 0.f;
    for (long long j = threadIdx.x; j < p.len; j += kThreads) s += xr[j];
    const float mean = block_sum(s, shared) / static_cast<float>(p.len);
    float q = 0.f;
    for (long long j = threadIdx.x; j < p.len; j += kThreads) {
      const float d = xr[j] - mean;
      q += d * d;
    }
    const float inv_std = rsqrtf(block_sum(q, shared) / static_cast<float>(p.len) + p.epsilon);
    const long long channel = p.per_row ? row % p.channels : 0;
    for (long long j = threadIdx.x; j < p.len; j += kThreads) {
      const long long k = p.per_row ? channel : j;
      const float b = bias != nullptr ? bias[k] : 0.f;
      yr[j] = (xr[j] - mean) * inv_std * scale[k] + b;
    }
    if (threadIdx.x == 0) {
      if (mean_out != nullptr) mean_out[row] = mean;
      if (inv_std_out != nullptr) inv_std_out[row] = inv_std;
    }
  }
}

}  // namespace

void launch_row_norm(const RowNorm& p, const float* x, const float* scale, const float* bias, float* y,
                     float* mean_out, float* inv_std_out, cudaStream_t stream) {
  if (p.rows == 0 || p.len == 0) return;
  const unsigned blocks = static_cast<unsigned>(p.rows < 65535LL * 8 ? p.rows : 65535LL * 8);
  launch_kernel(row_norm_kernel, blocks, kThreads, 0, stream, p, x, scale, bias, y, mean_out, inv_std_out);
  RW_CUDA_CHECK_LAUNCH("row_norm");
}

}  // namespace redwood::cuda::kernels
