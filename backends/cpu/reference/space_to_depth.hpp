#pragma once
// Space-to-depth: moving b×b blocks of an image's pixels into channels.
//
// The ONNX SpaceToDepth (block b, H and W multiples of b), on any dtype:
//   y[n, (dy·b + dx)·C + c, Y, X] = x[n, c, b·Y + dy, b·X + dx].
// The 2x2 form that rw.ToNhwc with rw.space_to_depth writes is that with b = 2, for any extent:
// an odd extent's last row and column pair with zeros. backends/cuda/passes/space_to_depth.hpp has
// the convolution it feeds.

#include "core/tensor.hpp"

#include <cstdint>

namespace redwood {

/// fp32 [N, C, H, W] → fp32 [N, 4C, ceil(H/2), ceil(W/2)]; throws InvalidArgument for another rank
/// or a non-floating type.
Tensor space_to_depth(const Tensor& x);

/// Writes the space-to-depth of x ([N, C, H, W], H and W multiples of `block`, any strides) into
/// y, a contiguous [N, C·block², H/block, W/block] tensor of x's dtype.
void space_to_depth(const Tensor& x, std::int64_t block, Tensor& y);

}  // namespace redwood
