#pragma once
// How the convolution tuners (conv.cpp, conv_nhwc.cpp) time a kernel's variants on the plan's own
// stream and buffers before its CUDA graph is captured.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <vector>

namespace redwood::cuda {

struct VariantTimes {
  std::size_t best = 0;   // index of the fastest variant
  float best_ms = 0;      // its mean time
  std::vector<float> ms;  // each variant's time: the mean of the repeats, or its one launch when
                          // that was already over 3× the best so far (not repeated)
};

/// Runs `launch_default` until about 1 ms has passed (at most 50 launches: an idle GPU raises its
/// clocks over the first milliseconds, which would handicap the early variants), then each of
/// `count` variants once (`launch_variant(i)`) and, unless that launch took over 3× the best mean
/// so far, `repeats` more times between two events; the fastest mean wins, ties to the earlier
/// variant. Synchronizes `stream`; throws CudaError naming the failed call.
VariantTimes time_variants(cudaStream_t stream, std::size_t count, const std::function<void()>& launch_default,
                           const std::function<void(std::size_t)>& launch_variant, int repeats = 3);

}  // namespace redwood::cuda
