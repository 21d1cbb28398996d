// Softmax over one axis, the Reduce* family, ArgMax and ArgMin.

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/device_math.cuh"
#include "backends/cuda/kernels/launchers.hpp"
#include "backends/cuda/kernels/pdl.cuh"

#include <cfloat>

namespace redwood::cuda::kernels {
namespace {

// inner == 1: one warp per contiguous row.
__global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, long long rows, long long len, bool log) {
  pdl_wait();
  pdl_launch_dependents();
  const long long row = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const float* xp = x + row * len;
  float* yp = y + row * len;
  float m = -FLT_MAX;
  for (long long j = lane; j < len; j += 32) m = fmaxf(m, xp[j]);
  for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  float s = 0.f;
  for (long long j = lane; j < len; j += 32) s += expf(xp[j] - m);
  for (int off = 16; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
  const float ls = logf(s);
  for (long long j = lane; j < len; j += 32) yp[j] = log ? xp[j] - m - ls : expf(xp[j] - m) / s;
}

// inner > 1: one thread per (outer, inner) column, strided by inner.
__global__ void softmax_columns(const float* __restrict__ x, float* __restrict__ y, long long outer, long long len,
                                long long inner, bool log) {
  pdl_wait();
  pdl_launch_dependents();
  RW_GRID_STRIDE(i, outer * inner) {
    const long long o = i / inner, in = i % inner;
    const float* xp = x + o * len * inner + in;
    float* yp = y + o * len * inner + in;
    float m = -FLT_MAX;
    for (long long j = 0; j < len; ++j) m = fmaxf(m, xp[j * inner]);
    float s = 0.f;
    for (long long j = 0; j < len; ++j) s += expf(xp[j * inner] - m);
    const float ls = logf(s);
    for (long long j = 0; j < len; ++j) yp[j * inner] = log ? xp[j * inner] - m - ls : expf(xp[j * inner] - m) / s;
  }
}

__global__ void reduce_kernel(ReduceOp op, ReduceParams p, const float* __restrict__ x, float* __restrict__ y,
                              long long outputs) {
  pdl_wait();
  pdl_launch_dependents();
  RW_GRID_STRIDE(i, outputs) {
    long long rest = i, base = 0;
    for (int d = p.kept_rank - 1; d >= 0; --d) {
      base += (rest % p.kept_dims[d]) * p.kept_strides[d];
      rest /= p.kept_dims[d];
    }
    auto offset = [&](long long r) {
      long long rr = r, off = base;
      for (int d = p.red_rank - 1; d >= 0; --d) {
        off += (rr % p.red_dims[d]) * p.red_strides[d];
        rr /= p.red_dims[d];
      }
      return off;
    };
    // LogSumExp subtracts the maximum first so that exp cannot overflow.
    float shift = 0.f;
    if (op == ReduceOp::kLogSumExp) {
      shift = -FLT_MAX;
      for (long long r = 0; r < p.red_count; ++r) shift = fmaxf(shift, x[offset(r)]);
      if (p.red_count == 0) shift = 0.f;
    }
    float acc = op == ReduceOp::kMax ? -FLT_MAX : (op == ReduceOp::kMin ? FLT_MAX : (op == ReduceOp::kProd ? 1.f : 0.f));
    for (long long r = 0; r < p.red_count; ++r) {
      const float v = x[offset(r)];
      switch (op) {
        case ReduceOp::kMax: acc = fmaxf(acc, v); break;
        case ReduceOp::kMin: acc = fminf(acc, v); break;
        case ReduceOp::kSumSquare:
        case ReduceOp::kL2: acc += v * v; break;
        case ReduceOp::kProd: acc *= v; break;
        case ReduceOp::kL1: acc += fabsf(v); break;
        case ReduceOp::kLogSumExp: acc += expf(v - shift); break;
        default: acc += v; break;
      }
    }
    if (op == ReduceOp::kMean) acc /= static_cast<float>(p.red_count);
    if (op == ReduceOp::kL2) acc = sqrtf(acc);
    if (op == ReduceOp::kLogSum) acc = logf(acc);
    if (op == ReduceOp::kLogSumExp) acc = logf(acc) + shift;
    y[i] = acc;
  }
}

// ArgMax / ArgMin along the middle axis of [outer, len, inner]: one thread per (outer, inner).
// Ties go to the first index, or the last with select_last; NaN is never chosen over a number.
__global__ void arg_reduce_kernel(const float* __restrict__ x, long long* __restrict__ y, long long outer,
                                  long long len, long long inner, bool max, bool select_last) {
  pdl_wait();
  pdl_launch_dependents();
  RW_GRID_STRIDE(i, outer * inner) {
    const long long o = i / inner, in = i % inner;
    const float* xp = x + o * len * inner + in;
    long long best = 0;
    float bv = xp[0];
    for (long long j = 1; j < len; ++j) {
      const float v = xp[j * inner];
      const bool better = max ? (select_last ? v >= bv : v > bv) : (select_last ? v <= bv : v < bv);
      if (better) {
        bv = v;
        best = j;
      }
    }
    y[i] = best;
  }
}

}  // namespace

void launch_softmax(const float* x, float* y, long long outer, long long axis, long long inner, bool log,
                    cudaStream_t stream) {
  if (outer * axis * inner == 0) return;
  if (inner == 1) {
    const long long threads = outer * 32;
    launch_kernel(softmax_rows, static_cast<unsigned>((threads + 255) / 256), 256, 0, stream, x, y, outer, axis, log);
  } else {
    launch_kernel(softmax_columns, grid_for(outer * inner), 256, 0, stream, x, y, outer, axis, inner, log);
  }
  RW_CUDA_CHECK_LAUNCH("softmax");
}

void launch_reduce(ReduceOp op, const ReduceParams& p, const float* x, float* y, long long outputs,
                   cudaStream_t stream) {
  if (outputs == 0) return;
  launch_kernel(reduce_kernel, grid_for(outputs), 256, 0, stream, op, p, x, y, outputs);
  RW_CUDA_CHECK_LAUNCH("reduce");
}

void launch_arg_reduce(const float* x, long long* y, long long outer, long long len, long long inner, bool max,
                       bool select_last, cudaStream_t stream) {
  if (outer * inner == 0) return;
  launch_kernel(arg_reduce_kernel, grid_for(outer * inner), 256, 0, stream, x, y, outer, len, inner, max, select_last);
  RW_CUDA_CHECK_LAUNCH("arg_reduce");
}

}  // namespace redwood::cuda::kernels
