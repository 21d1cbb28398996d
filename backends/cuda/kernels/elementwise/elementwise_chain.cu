// rw.ElementwiseChain: all steps of a chain in one pass over memory. Each thread takes four
// consecutive elements (one 16-byte load and store when the extent and the pointers allow it),
// runs every step on them in registers, and writes them once. The scalar functions are written as
// the reference kernels write them (elementwise_chain.cpp), so NaNs and clamps behave the same.

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/device_math.cuh"
#include "backends/cuda/kernels/elementwise/elementwise_chain.hpp"
#include "backends/cuda/kernels/pdl.cuh"

#include <cstdint>

namespace redwood::cuda::kernels {
namespace {

__device__ __forceinline__ float clamp01(float v) { return v < 0.f ? 0.f : (1.f < v ? 1.f : v); }

__device__ __forceinline__ float chain_sigmoid(float v) {
  if (v >= 0.f) return 1.f / (1.f + expf(-v));
  const float e = expf(v);
  return e / (1.f + e);
}

// Step s on element `i` (the element's index in the data, for a broadcast constant).
__device__ __forceinline__ float chain_step(const ChainStep& s, float v, long long i) {
  switch (s.op) {
    case ChainOp::kRelu: return v < 0.f ? 0.f : v;
    case ChainOp::kSigmoid: return chain_sigmoid(v);
    case ChainOp::kTanh: return tanhf(v);
    case ChainOp::kSqrt: return sqrtf(v);
    case ChainOp::kHardSigmoid: return clamp01(s.alpha * v + s.beta);
    case ChainOp::kHardSwish: return v * clamp01(v / 6.f + 0.5f);
    case ChainOp::kLeakyRelu: return v >= 0.f ? v : s.alpha * v;
    case ChainOp::kClip:
      if (v < s.alpha) v = s.alpha;
      if (v > s.beta) v = s.beta;
      return v;
    default: break;
  }
  const float c = s.count == 1 ? __ldg(s.c) : __ldg(s.c + (i / s.inner) % s.count);
  const float p = s.swapped ? c : v, q = s.swapped ? v : c;
  switch (s.op) {
    case ChainOp::kAdd: return p + q;
    case ChainOp::kSub: return p - q;
    case ChainOp::kMul: return p * q;
    case ChainOp::kDiv: return p / q;
    case ChainOp::kPow: return powf(p, q);
    default: return v;
  }
}

__device__ __forceinline__ float run_chain(const ChainParams& p, float v, long long i) {
  for (int k = 0; k < p.steps; ++k) v = chain_step(p.step[k], v, i);
  return v;
}

// Four elements per thread as one float4 (n % 4 == 0, 16-byte aligned pointers).
__global__ void __launch_bounds__(256) chain_vec4(const __grid_constant__ ChainParams p, const float4* x, float4* y,
                                                  long long quads) {
  pdl_wait();
  pdl_launch_dependents();
  RW_GRID_STRIDE(q, quads) {
    float4 v = x[q];
    const long long i = 4 * q;
    v.x = run_chain(p, v.x, i);
    v.y = run_chain(p, v.y, i + 1);
    v.z = run_chain(p, v.z, i + 2);
    v.w = run_chain(p, v.w, i + 3);
    y[q] = v;
  }
}

__global__ void __launch_bounds__(256) chain_scalar(const __grid_constant__ ChainParams p, const float* x, float* y,
                                                    long long n) {
  pdl_wait();
  pdl_launch_dependents();
  RW_GRID_STRIDE(i, n) y[i] = run_chain(p, x[i], i);
}

}  // namespace

void launch_elementwise_chain(const ChainParams& p, const float* x, float* y, long long n, cudaStream_t stream) {
  if (n == 0) return;
  const bool aligned = (reinterpret_cast<std::uintptr_t>(x) | reinterpret_cast<std::uintptr_t>(y)) % 16 == 0;
  if (aligned && n % 4 == 0) {
    launch_kernel(chain_vec4, grid_for(n / 4), 256, 0, stream, p, reinterpret_cast<const float4*>(x),
                  reinterpret_cast<float4*>(y), n / 4);
    RW_CUDA_CHECK_LAUNCH("elementwise_chain_vec4");
  } else {
    launch_kernel(chain_scalar, grid_for(n), 256, 0, stream, p, x, y, n);
    RW_CUDA_CHECK_LAUNCH("elementwise_chain");
  }
}

}  // namespace redwood::cuda::kernels
