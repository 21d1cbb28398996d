#pragma once
// A stride-2 convolution as a stride-1 convolution over the 2x2 space-to-depth of its input (the
// ResNet-50 stem trick of MLPerf implementations). choose_gpu_layout.cpp (this folder) rewrites the
// GPU's few-channel stride-2 convolutions with it (docs/cuda.md, "The stem by space-to-depth"):
// a 7x7/2 convolution over 3 image channels, whose NHWC fp16 input pads 3 channels to 8 (K-dim
// 7·7·8 = 392, 147 real), becomes a 4x4/1 convolution over 12 channels padded to 16 (K-dim 256).
//
// The algebra, per spatial axis (input extent n, kernel k, pads p_begin and p_end, stride 2,
// dilation 1; output o = floor((n + p_begin + p_end - k) / 2) + 1):
//   - space-to-depth (backends/cpu/reference/space_to_depth.hpp):
//     X'[(dy·2 + dx)·C + c, Y, X] = x[c, 2Y + dy, 2X + dx] (0 past the input), an
//     image of ceil(n/2) rows and 4C channels, with no offset, so that its out-of-range rows are
//     exactly the original's padding;
//   - the kernel gets f = p_begin % 2 zero taps in front (so that p_begin + f is even) and zeros
//     behind up to an even length: k' = ceil((k + f) / 2) taps of the new kernel,
//     w'[k, (dy·2 + dx)·C + c, jy, jx] = w[k, c, 2jy + dy - fh, 2jx + dx - fw] (0 outside);
//   - the new pads: begin q = (p_begin + f) / 2, end o + k' - 1 - q - ceil(n/2), so that the
//     stride-1 output has o positions again. Output position o reads X' row o + j - q, i.e. x row
//     2(o + j - q) + d = 2o - p_begin + (2j + d - f): the original tap 2j + d - f.
// A negative end pad (input rows past the last window, e.g. an odd extent with an even kernel and
// no padding) is a shape this does not cover: plan_space_to_depth_conv says so by nullopt.

#include "core/tensor.hpp"

#include <array>
#include <cstdint>
#include <optional>

namespace redwood {

/// The stride-1 convolution that replaces a stride-2 one over the space-to-depth of its input.
struct SpaceToDepthConv {
  std::int64_t kernel_h = 0, kernel_w = 0;  // k' of each axis
  std::int64_t shift_h = 0, shift_w = 0;    // f: zero taps in front of the original kernel
  std::array<std::int64_t, 4> pads{};       // top, left, bottom, right, all >= 0
};

/// The replacement of a stride-2, dilation-1 convolution with an r×s kernel and ONNX `pads`
/// (top, left, bottom, right) over an h×w input; nullopt where the shape is not covered (a
/// negative end pad, an empty output, a negative pad).
std::optional<SpaceToDepthConv> plan_space_to_depth_conv(std::int64_t h, std::int64_t w, std::int64_t r, std::int64_t s,
                                                         const std::array<std::int64_t, 4>& pads);

/// fp32 weights [K, C, R, S] → fp32 [K, 4C, k'h, k'w] of the replacement (the header's w').
Tensor space_to_depth_weights(const Tensor& w, const SpaceToDepthConv& plan);

}  // namespace redwood
