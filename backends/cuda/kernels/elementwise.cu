// Elementwise kernels: unary activations and math, binary ops with broadcasting, inference
// BatchNormalization. Memory-bound: one read and one write per element, grid-stride loops.

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/device_math.cuh"
#include "backends/cuda/kernels/launchers.hpp"
#include "backends/cuda/kernels/pdl.cuh"

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
