#include "backends/cuda/kernels/variant_tuner.hpp"

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/stream.hpp"

namespace redwood::cuda {

VariantTimes time_variants(cudaStream_t stream, std::size_t count, const std::function<void()>& launch_default,
                           const std::function<void(std::size_t)>& launch_variant, int repeats) {
  Event start(true), mid(true), end(true);
  // Every variant once, untimed: a kernel's first launch may load its code (CUDA's lazy module
  // loading), and the host time that takes would be charged to it below (and past 3x the best,
  // it would not even be repeated).
  for (std::size_t i = 0; i < count; ++i) launch_variant(i);
  for (int round = 0; round < 10; ++round) {
    start.record(stream);
    for (int r = 0; r < 5; ++r) launch_default();
    mid.record(stream);
    mid.synchronize();
    if (mid.elapsed_ms_since(start) >= 1.0) break;
  }
  VariantTimes t;
  t.ms.resize(count);
  for (std::size_t i = 0; i < count; ++i) {
    start.record(stream);
    launch_variant(i);
    mid.record(stream);
    mid.synchronize();
    float ms = static_cast<float>(mid.elapsed_ms_since(start));
    if (i == 0 || ms <= 3 * t.best_ms) {  // else: slow from the first launch, not worth the repeats
      for (int r = 0; r < repeats; ++r) launch_variant(i);
      end.record(stream);
      end.synchronize();
      ms = static_cast<float>(end.elapsed_ms_since(mid)) / static_cast<float>(repeats);
      if (i == 0 || ms < t.best_ms) {
        t.best_ms = ms;
        t.best = i;
      }
    }
    t.ms[i] = ms;
  }
  return t;
}

}  // namespace redwood::cuda
