#pragma once
// Plain parameter structs shared by the kernel launchers (.cu) and their CudaKernel classes
// (.cpp). No CUDA or Redwood headers here beyond the runtime API, so nvcc compiles little.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace redwood::cuda::kernels {

/// Up to this many dimensions in the strided kernels (transpose, slice, broadcast, reduce).
inline constexpr int kMaxDims = 8;

/// Fused activation codes, the order of redwood::ops::Activation (core/ops/epilogue.hpp).
enum Act : int { kActNone, kActRelu, kActClip, kActHardSigmoid, kActHardSwish, kActSigmoid, kActLeakyRelu };

/// y = act(acc + bias[channel] + residual[i]); bias and residual may be null.
struct Epilogue {
  int act = kActNone;
  float alpha = 0, beta = 0;
  const float* bias = nullptr;
  const float* residual = nullptr;  // the output's very shape
};

/// Operand precision of the matrix kernels.
enum class MmaType : int { kFp32, kTf32, kFp16, kBf16 };

struct ConvShape {
  int n, c, h, w;        // input
  int k, r, s;           // output channels, kernel extent
  int oh, ow;            // output extent
  int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
  int groups;
  // rw.ConvNhwc's projection shortcut only (input 4, backends/cuda/passes/fuse_conv_shortcut.cpp): a 1×1
  // stride-1 convolution whose K-dim goes on over a second input x2 [N, h2, w2, c2] sampled at
  // stride2 (a ResNet downsample's input), so K-dim = c + c2; c2 = 0 without one.
  int c2 = 0, h2 = 0, w2 = 0, stride2 = 1;
};

}  // namespace redwood::cuda::kernels
