#pragma once
// How the convolution tuners (conv.cpp, conv_nhwc.cpp) pick a kernel's variant: a process-wide
// cache of picks by shape, and the variants timed on the plan's own stream and buffers before its
// CUDA graph is captured.

#include "backends/cuda/cuda_kernel.hpp"

#include <cuda_runtime_api.h>

#include <fmt/format.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace redwood::cuda {

struct VariantTimes {
  std::size_t best = 0;   // index of the fastest variant
  float best_ms = 0;      // its mean time
  std::vector<float> ms;  // each variant's time: the mean of the repeats, or its one launch when
                          // that was already over 3× the best so far (not repeated)
};

/// Launches every variant once untimed (a kernel's first launch may load its code), then runs
/// `launch_default` until about 1 ms has passed (at most 50 launches: an idle GPU raises its
/// clocks over the first milliseconds, which would handicap the early variants), then each of
/// `count` variants once (`launch_variant(i)`) and, unless that launch took over 3× the best mean
/// so far, `repeats` more times between two events; the fastest mean wins, ties to the earlier
/// variant. Synchronizes `stream`; throws CudaError naming the failed call.
VariantTimes time_variants(cudaStream_t stream, std::size_t count, const std::function<void()>& launch_default,
                           const std::function<void(std::size_t)>& launch_variant, int repeats = 3);

/// Tuned picks by key, for the process (thread-safe); the first pick stored for a key stays.
template <typename Key, typename Config>
class PickCache {
 public:
  bool find(const Key& key, Config* out) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = picks_.find(key);
    if (it == picks_.end()) return false;
    *out = it->second;
    return true;
  }
  void store(const Key& key, const Config& config) {
    std::lock_guard<std::mutex> lock(mutex_);
    picks_.emplace(key, config);
  }

 private:
  mutable std::mutex mutex_;
  std::map<Key, Config> picks_;
};

/// How tune_variants settled a kernel's configuration.
enum class TuneOutcome { kCached, kBudgetSpent, kMeasured };

/// The tuners' flow. The cached pick of `key`, if there is one. Else, with the plan's budget spent,
/// `config` as it is (the default), cached too, so that every later plan of the shape runs the same
/// kernel (an eager plan and a captured one give the same bits). Else every candidate timed by
/// time_variants (`launch` runs `config`; the default first, for the clocks), the fastest kept and
/// cached, the time spent charged to the budget, and the measurement in `times`.
template <typename Key, typename Config>
TuneOutcome tune_variants(PickCache<Key, Config>& cache, const Key& key, const std::vector<Config>& candidates,
                          Config& config, TuneBudget& budget, cudaStream_t stream,
                          const std::function<void()>& launch, VariantTimes* times) {
  if (cache.find(key, &config)) return TuneOutcome::kCached;
  if (budget.ms_left <= 0) {
    cache.store(key, config);
    return TuneOutcome::kBudgetSpent;
  }
  const auto start = std::chrono::steady_clock::now();
  *times = time_variants(stream, candidates.size(), launch, [&](std::size_t i) {
    config = candidates[i];
    launch();
  });
  config = candidates[times->best];
  cache.store(key, config);
  budget.ms_left -= std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return TuneOutcome::kMeasured;
}

/// How tune_variants settled, as a kernel's variant() says it: "cached", "default: the plan's
/// tuning budget is spent", or "measured 0.0123 ms" (the fastest mean of `times`).
inline std::string tune_outcome_text(TuneOutcome outcome, const VariantTimes& times) {
  switch (outcome) {
    case TuneOutcome::kCached: return "cached";
    case TuneOutcome::kBudgetSpent: return "default: the plan's tuning budget is spent";
    case TuneOutcome::kMeasured: break;
  }
  return fmt::format("measured {:.4f} ms", times.best_ms);
}

/// The measured candidates for the debug log, "name:ms name:ms …"; name(i) names candidate i.
inline std::string variant_timings(const VariantTimes& times, const std::function<std::string(std::size_t)>& name) {
  std::string out;
  for (std::size_t i = 0; i < times.ms.size(); ++i) {
    out += fmt::format("{}{}:{:.4f}", out.empty() ? "" : " ", name(i), times.ms[i]);
  }
  return out;
}

}  // namespace redwood::cuda
