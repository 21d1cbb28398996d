#pragma once
// Launchers of the convolution kernels (conv_kernels.cu). x is NCHW, w is [K, C/groups, R, S],
// y is [N, K, OH, OW]; all fp32 in memory. The epilogue (bias, residual, activation) is fused.

#include "backends/cuda/kernels/kernel_params.hpp"

namespace redwood::cuda::kernels {

/// Implicit GEMM: M = N·OH·OW output pixels, N = K/groups channels, K = C/groups·R·S, one grid
/// layer per group. kFp32: CUDA cores, exact fp32. kTf32/kFp16/kBf16: tensor cores (WMMA), the
/// operands rounded to that type as they enter shared memory, fp32 accumulation.
/// With splits > 1 the K dimension is cut in `splits` ranges computed by separate blocks (more
/// blocks for layers with few output pixels); their partial sums go to `partial`
/// (splits · N·OH·OW · K floats) and one more kernel adds them in order and runs the epilogue.
void launch_conv_implicit_gemm(const ConvShape& p, const float* x, const float* w, float* y, const Epilogue& e,
                               MmaType type, int splits, float* partial, cudaStream_t stream);
/// The split count for a shape: enough blocks for about two per multiprocessor.
int conv_split_k(const ConvShape& p, MmaType type, int multiprocessors);

/// One input channel per group (depthwise, channel multiplier K/groups): direct, fp32.
void launch_conv_depthwise(const ConvShape& p, const float* x, const float* w, float* y, const Epilogue& e,
                           cudaStream_t stream);

/// ConvTranspose (2-D), direct gather over the inputs that reach each output, fp32. w is
/// [C, K/groups, R, S]; out_pad is folded into oh/ow by the caller.
void launch_conv_transpose(const ConvShape& p, const float* x, const float* w, float* y, const Epilogue& e,
                           cudaStream_t stream);

}  // namespace redwood::cuda::kernels
