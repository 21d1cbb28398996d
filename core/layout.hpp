#pragma once
// Moving the channel axis of 4-D tensors: NCHW ↔ NHWC (channels last), with the channels padded or
// cut to a count, e.g. for a backend that keeps activations channels-last. The same permutation
// turns convolution weights
// [K, C, R, S] into [K, R, S, C], and, through a reshape to [1, C, R, S], depthwise weights
// [C, 1, R, S] into [R, S, C].

#include "core/tensor.hpp"

#include <cstdint>

namespace redwood {

/// [A, B, C, D] of a floating type → `to` [A, C, D, channels], channels ≥ B; channels B..channels-1
/// are 0. The values are widened to fp32 and rounded to `to` once.
Tensor to_channels_last(const Tensor& t, std::int64_t channels, DType to);

/// [A, C, D, B] of a floating type → fp32 [A, channels, C, D], channels ≤ B (the rest dropped).
Tensor to_channels_first(const Tensor& t, std::int64_t channels);

}  // namespace redwood
