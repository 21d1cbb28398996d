#pragma once
// The matrix-vector launcher (gemv.cu): products of a few rows (M ≤ kGemvMaxRows) by a weight
// matrix, as a classifier's Gemm at batch 1 to 32 or a squeeze-excite 1×1 convolution on a 1×1
// input.
// These are bound by reading the weights once, so all rows are computed together (each weight is
// read once), exactly in fp32 on the CUDA cores at every precision: rounding the operands would
// save no time. Used by MatMul/Gemm (matmul.cpp) and Conv (conv.cpp). No Redwood headers beyond
// kernel_params.hpp, so nvcc stays quick.

#include "backends/cuda/kernels/kernel_params.hpp"

namespace redwood::cuda::kernels {

/// The most rows one launch computes (rows are held in registers, one accumulator each): products
/// of at most this many rows take launch_gemv (MatMul/Gemm in matmul.cpp, Conv in conv.cpp), more
/// take the tiles. At 32 rows (batch 32) the tiled kernels still launch few blocks.
inline constexpr int kGemvMaxRows = 32;

/// Up to this many rows a warp sums one column (gemv_k); more rows (to kGemvMaxRows) take gemv_wide,
/// which keeps x in registers for several columns. W contiguous along n takes gemv_n at any count.
inline constexpr int kGemvWarpRows = 8;

/// Y(m, n) = act(alpha · Σ_k A(m, k) · W(k, n) + beta · C(m, n) + bias[n] + residual(m, n)) for
/// m < rows, n < n, all by strides, so that a convolution's NCHW tensors and a matrix product's
/// transposes need no copy. A row m lies in group m / group of `group` rows:
///   A(m, k) = a[(m / a_group) · a_group_stride + (m % a_group) · a_m + k · a_k]
///   W(k, n) = w[k · w_k + n · w_n]
///   Y(m, n) = y[(m / y_group) · y_group_stride + (m % y_group) · y_m + n · y_n]  (the residual too)
///   C(m, n) = c[m · c_m + n · c_n]  (Gemm's C; null: none)
/// A matrix product has one group (a_group = y_group = rows); a 1×1 convolution one per image,
/// of H·W pixels.
struct GemvParams {
  int rows = 0, n = 0, k = 0;
  long long a_group = 1, a_group_stride = 0, a_m = 0, a_k = 1;
  long long w_k = 1, w_n = 0;
  long long y_group = 1, y_group_stride = 0, y_m = 0, y_n = 1;
  const float* c = nullptr;
  long long c_m = 0, c_n = 0;
  float alpha = 1.f, beta = 0.f;
  Epilogue epilogue;  // bias over n, residual indexed as Y, activation
  // W is a constant of the plan (an initializer), which no kernel writes: the kernel may start
  // reading it before pdl_wait() (pdl.cuh). False when W may be an activation.
  bool w_constant = false;
};

/// Queues the product on `stream`. rows ≤ kGemvMaxRows (std::invalid_argument otherwise); rows
/// or n of 0 (an empty output) queue nothing; k of 0 gives the epilogue of zero sums. With W contiguous along k (w_k = 1: a
/// convolution's [N][C] weights, Gemm's transB) and at most kGemvWarpRows rows a warp sums each
/// output column, reading W with 16-byte loads where k, w_n and the pointer allow (and A too where
/// a_k = 1 and its rows are 16-byte aligned); with more rows a warp's lanes hold x for a slice of
/// 128 k in registers and sum up to 8 columns with it (the same 16-byte loads), the block's warps
/// taking the slices in turn and adding their sums in warp order; with W contiguous along n (w_n = 1, w_k > 1)
/// each thread of a block sums one column over a slice of k, and the block adds its slices in a
/// fixed order. Results are deterministic.
void launch_gemv(const GemvParams& p, const float* a, const float* w, float* y, cudaStream_t stream);

}  // namespace redwood::cuda::kernels
