#pragma once
// The walk the Softmax family shares (softmax.cpp): Softmax, LogSoftmax and Hardmax view their
// input as [outer, length, inner] and work along `length`; SoftmaxCrossEntropyLoss (losses.cpp)
// takes its log-probabilities the same way, over the class axis of [N, C, D].

#include <cstdint>

namespace redwood::cpu {

enum class SoftmaxFn {
  kSoftmax,     // exp(x - max) / sum(exp(x - max))
  kLogSoftmax,  // x - max - log(sum(exp(x - max)))
  kHardmax,     // 1 at the first maximum (a NaN counts as the maximum, as numpy.argmax), else 0
};

/// Writes fn of the contiguous fp32 `x`, viewed as [outer, length, inner], along `length` into
/// `y` (same layout; may not alias x), spread over oneTBB's workers by `outer`.
void softmax_along(SoftmaxFn fn, const float* x, float* y, std::int64_t outer, std::int64_t length,
                   std::int64_t inner);

}  // namespace redwood::cpu
