#pragma once
// The 2x2 space-to-depth of an image, the reference form of what rw.ToNhwc with rw.space_to_depth
// writes: X'[(dy·2 + dx)·C + c, Y, X] = x[c, 2Y + dy, 2X + dx], 0 past the input (an odd extent's
// last row and column). backends/cuda/passes/space_to_depth.hpp has the convolution it feeds.

#include "core/tensor.hpp"

namespace redwood {

/// fp32 [N, C, H, W] → fp32 [N, 4C, ceil(H/2), ceil(W/2)]; throws InvalidArgument for another rank
/// or a non-floating type.
Tensor space_to_depth(const Tensor& x);

}  // namespace redwood
