#pragma once
// The tiled depthwise convolution (conv_depthwise.cu): one input channel per group, channel
// multiplier K/groups, exact fp32, fused epilogue. A block computes a tile of output rows of
// `tc` output planes; the input tile plus its halo is loaded once into shared memory (coalesced,
// zeros for padding), and each thread computes 4 consecutive outputs along W from a window held in
// registers, with the filter in registers too. Shapes it does not take (see depthwise_tiling) run
// the direct kernel (launch_conv_depthwise, conv_kernels.hpp).

#include "backends/cuda/kernels/kernel_params.hpp"

namespace redwood::cuda::kernels {

/// How the tiled kernel covers one shape; ok is false for the shapes it does not take.
struct DepthwiseTiling {
  bool ok = false;
  int tx = 0, ty = 0, tc = 0;  // threads along W (4 outputs each), along H (1 row each), planes per block
  int xtiles = 0, ytiles = 0;  // tiles per output plane
  int rows = 0, pitch = 0;     // shared-memory input tile per plane: rows × pitch floats
  long long blocks = 0;        // grid size
  int smem_bytes = 0;
};

/// Outputs per thread along W.
inline constexpr int kDepthwiseVec = 4;

/// The tiling for a depthwise shape (C/groups = 1): a square 3×3, 5×5 or 7×7 kernel, equal
/// strides of 1 or 2, dilation 1, an input tile within 44 KiB of shared memory, and fewer than
/// 2^31 blocks; !ok otherwise (the caller runs the direct kernel). The tile follows the plane:
/// W and H are split into nearly equal tiles of at most 64 × 256/tx outputs, and the remaining
/// threads of a 256-thread block take more planes (a 7×7 plane: 2 × 7 threads, 18 planes a block).
DepthwiseTiling depthwise_tiling(const ConvShape& p);

/// Runs the tiled kernel with a tiling depthwise_tiling(p) returned ok.
void launch_conv_depthwise_tiled(const ConvShape& p, const DepthwiseTiling& t, const float* x, const float* w,
                                 float* y, const Epilogue& e, cudaStream_t stream);

}  // namespace redwood::cuda::kernels
