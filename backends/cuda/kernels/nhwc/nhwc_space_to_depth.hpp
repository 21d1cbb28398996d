#pragma once
// rw.ToNhwc with rw.space_to_depth (the stem by space-to-depth, backends/cuda/passes/space_to_depth.hpp and
// backends/cuda/passes/choose_gpu_layout.cpp's header comment): the conversion of the network's image into
// the NHWC storage type S that also lays out its 2x2 space-to-depth, so the rearrangement costs
// no pass of its own.

#include "backends/cuda/kernels/kernel_params.hpp"
#include "backends/cuda/kernels/nhwc/nhwc_storage.hpp"

namespace redwood::cuda::kernels {

/// The most input channels the kernel takes: 4C fits two 16-byte chunks of a 16-bit type.
inline constexpr int kSpaceToDepthMaxChannels = 4;

/// The channels of the space-to-depth of c channels padded to whole 16-byte chunks of S: the
/// fewest the conversion writes (16 for an RGB image at 16-bit S, 12 at fp32).
constexpr int space_to_depth_channels(NhwcStorage s, int c) {
  const int chunk = nhwc_chunk_channels(s);
  return (4 * c + chunk - 1) / chunk * chunk;
}

/// fp32 [N, C, H, W] → S [N, ceil(H/2), ceil(W/2), cp]: channel (dy·2 + dx)·C + c of pixel
/// (Y, X) is x[n, c, 2Y + dy, 2X + dx] (0 past the input), channels 4C..cp-1 are 0.
/// 1 ≤ c ≤ kSpaceToDepthMaxChannels, cp ≥ space_to_depth_channels(s, c) and a multiple of a
/// chunk (InvalidArgument otherwise). `round_tf32`: as launch_to_nhwc's (fp32 S only).
void launch_to_nhwc_space_to_depth(NhwcStorage s, const float* x, void* y, int n, int c, int h, int w, int cp,
                                   cudaStream_t stream, bool round_tf32 = false);

}  // namespace redwood::cuda::kernels
