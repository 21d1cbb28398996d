// Elementwise kernels: unary activations and math, binary ops with broadcasting, inference
// BatchNormalization. Memory-bound: one read and one write per element, grid-stride loops.

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/device_math.cuh"
#include "backends/cuda/kernels/launchers.hpp"
#include "backends/cuda/kernels/pdl.cuh"

#include <algorithm>
#include <cstdint>

namespace redwood::cuda::kernels {
namespace {

__device__ __forceinline__ float unary(UnaryOp op, float x, float alpha, float beta) {
  switch (op) {
    case UnaryOp::kRelu: return x > 0.f ? x : 0.f;
    case UnaryOp::kSigmoid: return 1.f / (1.f + expf(-x));
    case UnaryOp::kTanh: return tanhf(x);
    case UnaryOp::kHardSigmoid: return fmaxf(0.f, fminf(1.f, alpha * x + beta));
    case UnaryOp::kHardSwish: return x * fmaxf(0.f, fminf(1.f, x * (1.f / 6.f) + 0.5f));
    case UnaryOp::kLeakyRelu: return x >= 0.f ? x : alpha * x;
    case UnaryOp::kClip: return fminf(fmaxf(x, alpha), beta);
    case UnaryOp::kSqrt: return sqrtf(x);
    case UnaryOp::kExp: return expf(x);
    case UnaryOp::kLog: return logf(x);
    case UnaryOp::kNeg: return -x;
    case UnaryOp::kAbs: return fabsf(x);
    case UnaryOp::kReciprocal: return 1.f / x;
    case UnaryOp::kFloor: return floorf(x);
    case UnaryOp::kCeil: return ceilf(x);
    case UnaryOp::kErf: return erff(x);
    case UnaryOp::kSign: return x > 0.f ? 1.f : (x < 0.f ? -1.f : x);  // 0 stays 0, NaN stays NaN
    case UnaryOp::kRound: return rintf(x);                              // half to even
    case UnaryOp::kSin: return sinf(x);
    case UnaryOp::kCos: return cosf(x);
    case UnaryOp::kTan: return tanf(x);
    case UnaryOp::kAsin: return asinf(x);
    case UnaryOp::kAcos: return acosf(x);
    case UnaryOp::kAtan: return atanf(x);
    case UnaryOp::kSinh: return sinhf(x);
    case UnaryOp::kCosh: return coshf(x);
    case UnaryOp::kAsinh: return asinhf(x);
    case UnaryOp::kAcosh: return acoshf(x);
    case UnaryOp::kAtanh: return atanhf(x);
    case UnaryOp::kSoftplus: return x > 20.f ? x : log1pf(expf(x));  // exp overflows past ~88
    case UnaryOp::kSoftsign: return x / (1.f + fabsf(x));
    case UnaryOp::kElu: return x >= 0.f ? x : alpha * expm1f(x);
    case UnaryOp::kSelu: return beta * (x > 0.f ? x : alpha * expm1f(x));
    case UnaryOp::kCelu: return fmaxf(0.f, x) + fminf(0.f, alpha * expm1f(x / alpha));
    case UnaryOp::kThresholdedRelu: return x > alpha ? x : 0.f;
    case UnaryOp::kShrink: return x < -beta ? x + alpha : (x > beta ? x - alpha : 0.f);
    case UnaryOp::kMish: return x * tanhf(x > 20.f ? x : log1pf(expf(x)));
    case UnaryOp::kGelu: return 0.5f * x * (1.f + erff(x * 0.70710678118654752f));
    case UnaryOp::kGeluTanh:
      return 0.5f * x * (1.f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
  }
  return x;
}

__global__ void unary_kernel(UnaryOp op, const float* __restrict__ x, float* __restrict__ y, long long n, float alpha,
                             float beta) {
  pdl_wait();
  pdl_launch_dependents();
  RW_GRID_STRIDE(i, n) y[i] = unary(op, x[i], alpha, beta);
}

__device__ __forceinline__ float binary(BinaryOp op, float a, float b) {
  switch (op) {
    case BinaryOp::kAdd: return a + b;
    case BinaryOp::kSub: return a - b;
    case BinaryOp::kMul: return a * b;
    case BinaryOp::kDiv: return a / b;
    case BinaryOp::kPow: return powf(a, b);
    case BinaryOp::kMax: return fmaxf(a, b);
    case BinaryOp::kMin: return fminf(a, b);
    case BinaryOp::kMean: return (a + b) * 0.5f;
    case BinaryOp::kPRelu: return a < 0.f ? a * b : a;
    case BinaryOp::kFmod: return fmodf(a, b);
  }
  return a;
}

__global__ void binary_kernel(BinaryOp op, const float* __restrict__ a, const float* __restrict__ b,
                              float* __restrict__ y, long long n, Broadcast bc) {
  pdl_wait();
  pdl_launch_dependents();
  RW_GRID_STRIDE(i, n) {
    if (bc.same_shape) {
      y[i] = binary(op, a[i], b[i]);
      continue;
    }
    long long rest = i, ao = 0, bo = 0;
    for (int d = bc.rank - 1; d >= 0; --d) {
      const long long idx = rest % bc.out_dims[d];
      rest /= bc.out_dims[d];
      ao += idx * bc.a_strides[d];
      bo += idx * bc.b_strides[d];
    }
    y[i] = binary(op, a[ao], b[bo]);
  }
}

// Same shapes, four elements a thread (16-byte loads and stores; n % 4 == 0, aligned operands).
__global__ void binary_same_vec4(BinaryOp op, const float4* __restrict__ a, const float4* __restrict__ b,
                                 float4* __restrict__ y, long long n4) {
  pdl_wait();
  pdl_launch_dependents();
  RW_GRID_STRIDE(i, n4) {
    const float4 u = a[i], v = b[i];
    y[i] = make_float4(binary(op, u.x, v.x), binary(op, u.y, v.y), binary(op, u.z, v.z), binary(op, u.w, v.w));
  }
}

// Broadcasting with the dims collapsed to at most three and 32-bit index arithmetic (what a
// channel scale [N, C, 1, 1] over [N, C, H, W] becomes: [N·C, H·W], b's strides [1, 0]).
__global__ void binary_collapsed(BinaryOp op, const float* __restrict__ a, const float* __restrict__ b,
                                 float* __restrict__ y, unsigned n, int rank, uint3 dims, uint3 as, uint3 bs) {
  pdl_wait();
  pdl_launch_dependents();
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    unsigned rest = i, ao = 0, bo = 0;
    const unsigned d2 = rest % dims.z;
    rest /= dims.z;
    ao += d2 * as.z;
    bo += d2 * bs.z;
    if (rank > 1) {
      const unsigned d1 = rest % dims.y;
      rest /= dims.y;
      ao += d1 * as.y;
      bo += d1 * bs.y;
    }
    if (rank > 2) {
      ao += rest * as.x;
      bo += rest * bs.x;
    }
    y[i] = binary(op, a[ao], b[bo]);
  }
}

__global__ void batch_norm_kernel(const float* __restrict__ x, const float* __restrict__ scale,
                                  const float* __restrict__ bias, const float* __restrict__ mean,
                                  const float* __restrict__ var, float* __restrict__ y, long long n, int c,
                                  long long inner, float epsilon) {
  pdl_wait();
  pdl_launch_dependents();
  RW_GRID_STRIDE(i, n) {
    const int ch = static_cast<int>((i / inner) % c);
    y[i] = (x[i] - mean[ch]) * (scale[ch] * rsqrtf(var[ch] + epsilon)) + bias[ch];
  }
}

}  // namespace

void launch_unary(UnaryOp op, const float* x, float* y, long long n, float alpha, float beta, cudaStream_t stream) {
  if (n == 0) return;
  launch_kernel(unary_kernel, grid_for(n), 256, 0, stream, op, x, y, n, alpha, beta);
  RW_CUDA_CHECK_LAUNCH("unary");
}

void launch_binary(BinaryOp op, const float* a, const float* b, float* y, long long n, const Broadcast& bc,
                   cudaStream_t stream) {
  if (n == 0) return;
  const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  if (bc.same_shape && n % 4 == 0 && aligned(a) && aligned(b) && aligned(y)) {
    launch_kernel(binary_same_vec4, grid_for(n / 4), 256, 0, stream, op, reinterpret_cast<const float4*>(a),
                  reinterpret_cast<const float4*>(b), reinterpret_cast<float4*>(y), n / 4);
    RW_CUDA_CHECK_LAUNCH("binary_same_vec4");
    return;
  }
  if (!bc.same_shape) {
    // Collapse: drop extents of 1, merge neighbours that both operands step through alike.
    long long dims[kMaxDims], as[kMaxDims], bs[kMaxDims];
    int rank = 0;
    for (int d = 0; d < bc.rank; ++d) {
      if (bc.out_dims[d] == 1) continue;
      if (rank > 0 && as[rank - 1] == bc.a_strides[d] * bc.out_dims[d] && bs[rank - 1] == bc.b_strides[d] * bc.out_dims[d]) {
        dims[rank - 1] *= bc.out_dims[d];
        as[rank - 1] = bc.a_strides[d];
        bs[rank - 1] = bc.b_strides[d];
        continue;
      }
      dims[rank] = bc.out_dims[d];
      as[rank] = bc.a_strides[d];
      bs[rank] = bc.b_strides[d];
      ++rank;
    }
    bool small = n < (1ll << 31) && rank <= 3;
    for (int d = 0; d < rank && small; ++d) small = dims[d] * std::max(as[d], bs[d]) < (1ll << 31);
    if (small) {
      // Left-pad to three: the kernel's dims are (x, y, z) outermost first.
      uint3 dm{1, 1, 1}, sa{0, 0, 0}, sb{0, 0, 0};
      unsigned* dp[3] = {&dm.x, &dm.y, &dm.z};
      unsigned* ap[3] = {&sa.x, &sa.y, &sa.z};
      unsigned* bp[3] = {&sb.x, &sb.y, &sb.z};
      for (int d = 0; d < rank; ++d) {
        const int at = 3 - rank + d;
        *dp[at] = static_cast<unsigned>(dims[d]);
        *ap[at] = static_cast<unsigned>(as[d]);
        *bp[at] = static_cast<unsigned>(bs[d]);
      }
      launch_kernel(binary_collapsed, grid_for(n), 256, 0, stream, op, a, b, y, static_cast<unsigned>(n),
                    std::max(rank, 1), dm, sa, sb);
      RW_CUDA_CHECK_LAUNCH("binary_collapsed");
      return;
    }
  }
  launch_kernel(binary_kernel, grid_for(n), 256, 0, stream, op, a, b, y, n, bc);
  RW_CUDA_CHECK_LAUNCH("binary");
}

void launch_batch_norm(const float* x, const float* scale, const float* bias, const float* mean, const float* var,
                       float* y, long long n, int c, long long inner, float epsilon, cudaStream_t stream) {
  if (n == 0) return;
  launch_kernel(batch_norm_kernel, grid_for(n), 256, 0, stream, x, scale, bias, mean, var, y, n, c, inner, epsilon);
  RW_CUDA_CHECK_LAUNCH("batch_norm");
}

}  // namespace redwood::cuda::kernels
