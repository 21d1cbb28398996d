#pragma once
// The convolution tuner's process-wide cache (conv.cpp): the (tile, split-K) pick per conv shape
// and precision, measured once per process on the first plan that meets the shape; later layers
// and plans of the same shape reuse it without timing again.

#include "backends/cuda/kernels/conv/conv_kernels.hpp"

#include <cstdint>

namespace redwood::cuda {

struct ConvTuningStats {
  std::int64_t measured = 0;  // shapes timed (cache misses)
  std::int64_t reused = 0;    // convolutions that took a cached pick
  std::int64_t skipped = 0;   // convolutions left at the default because the plan's budget was spent
};
ConvTuningStats conv_tuning_stats();

/// The cached pick for a shape and precision, if there is one.
bool conv_tuned_config(const kernels::ConvShape& shape, kernels::MmaType type, kernels::ConvConfig* out);

}  // namespace redwood::cuda
