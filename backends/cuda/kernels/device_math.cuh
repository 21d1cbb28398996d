#pragma once
// Device helpers shared by the .cu files: the fused activation and grid-stride loops.

#include "backends/cuda/kernels/kernel_params.hpp"

namespace redwood::cuda::kernels {

__device__ __forceinline__ float activate(float x, int act, float alpha, float beta) {
  switch (act) {
    case kActRelu: return x > 0.f ? x : 0.f;
    case kActClip: return fminf(fmaxf(x, alpha), beta);
    case kActHardSigmoid: return fmaxf(0.f, fminf(1.f, alpha * x + beta));
    case kActHardSwish: return x * fmaxf(0.f, fminf(1.f, x * (1.f / 6.f) + 0.5f));
    case kActSigmoid: return 1.f / (1.f + expf(-x));
    case kActLeakyRelu: return x >= 0.f ? x : alpha * x;
    default: return x;
  }
}

/// A matrix product's fused epilogue for one output: act(alpha·acc + beta·C + bias[n] +
/// residual[idx]); `c` points at C's element, or is null without C (matmul.cu, gemv.cu).
__device__ __forceinline__ float product_epilogue(float acc, float alpha, float beta, const float* c, const Epilogue& e,
                                                  long long n, long long idx) {
  float v = alpha * acc;
  if (c != nullptr) v += beta * *c;
  if (e.bias != nullptr) v += e.bias[n];
  if (e.residual != nullptr) v += e.residual[idx];
  return activate(v, e.act, e.alpha, e.beta);
}

/// Blocks for n elements at `threads` per block, capped so grid-stride loops cover the rest.
inline unsigned grid_for(std::int64_t n, int threads = 256) {
  std::int64_t blocks = (n + threads - 1) / threads;
  if (blocks > 65535LL * 8) blocks = 65535LL * 8;
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks);
}

}  // namespace redwood::cuda::kernels

#define RW_GRID_STRIDE(i, n)                                                                       \
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<std::int64_t>(blockDim.x) * gridDim.x)
