#pragma once
// The narrow kernel of rw.ConvNhwc (conv_nhwc_narrow.cu): for layers with few channels, where
// the implicit GEMM's tiles (64 or more output channels, 32 or more of K-dim a stage) are mostly
// padding and its blocks wait on memory (MobileNetV3's stem 3(→8)→16 and its 16- to 40-channel
// 1×1 layers at 112×112 to 28×28). Each warp takes 16 to 64 output pixels at a time and holds
// their whole K-dim (R·S·C ≤ 128) in registers, read as 16-byte vectors of 8 channels straight
// from global memory, or through a per-warp ring of shared memory that cp.async keeps 2-3 steps
// ahead (no barrier: each lane reads back only its own copies); the weights sit in shared memory,
// loaded once per (persistent) block; tensor cores (mma.sync m16n8k16, fp32 accumulation)
// multiply them, 16 or 32 output channels at a time; the epilogue works on the accumulators in
// registers: + bias fp32, + residual, the Conv's activation, one rounding to the storage type,
// 8- or 16-byte stores. Storage fp16 and bf16; the same contract as launch_conv_nhwc
// (conv_nhwc.hpp): NHWC, C and K multiples of 8, 16-byte aligned tensors.

#include "backends/cuda/kernels/kernel_params.hpp"
#include "backends/cuda/kernels/nhwc/nhwc_storage.hpp"

namespace redwood::cuda::kernels {

/// The largest K-dim (R·S·C) the narrow kernel takes: a warp keeps it in registers.
inline constexpr int kNarrowMaxKdim = 128;
/// The most output channels it takes: the weights of all of them live in shared memory, and every
/// group of 16 or 32 channels re-uses the pixels' registers.
inline constexpr int kNarrowMaxK = 128;

/// Whether the narrow kernel takes p (16-bit storage, group 1, K-dim and K within the limits).
bool conv_nhwc_narrow_fits(const ConvShape& p, NhwcStorage storage);

/// The narrow kernel's variants, which rw.ConvNhwc's tuner times as tiles of their own
/// (nhwc_conv_tiles(): NhwcTile::narrow is 1 + the index): output channels a warp computes at a
/// time (16 or 32), and whether each warp pipelines its pixels' loads through a ring of shared
/// memory (cp.async, 3-4 steps of 16 pixels in flight; "p") or loads them straight into registers
/// (16 to 64 pixels a step, then the products and the stores).
struct NarrowVariant {
  int channels;
  bool pipelined;
  const char* name;
};
inline constexpr int kNarrowVariants = 4;
/// In this order: narrow16, narrow32, narrow16p, narrow32p. Throws std::invalid_argument for an
/// index outside 0 to kNarrowVariants − 1.
const NarrowVariant& narrow_variant(int index);

/// y = act(conv(x, w) + bias + residual) as launch_conv_nhwc, by the narrow kernel's variant
/// `variant` (narrow_variant). Throws std::invalid_argument, before any CUDA call, where
/// !conv_nhwc_narrow_fits(p, storage) or the variant does not exist. Launched with programmatic
/// dependent launch (pdl.cuh).
void launch_conv_nhwc_narrow(const ConvShape& p, NhwcStorage storage, const void* x, const void* w, void* y,
                             const float* bias, const void* residual, const Epilogue& e, int variant,
                             cudaStream_t stream);

}  // namespace redwood::cuda::kernels
