#pragma once
// How the convolution tuners (conv.cpp, conv_nhwc.cpp, nhwc.cpp's depthwise) pick a kernel's
// variant: a process-wide cache of picks by shape, and the variants timed on the plan's own stream
// and buffers before its CUDA graph is captured. The caches are also what the plan cache keeps on
// disk (backends/cuda/plan_cache.hpp): each has a name and a codec that writes a pick as JSON and
// reads it back, checked against what the kernel offers here.

#include "backends/cuda/cuda_kernel.hpp"
#include "core/error.hpp"
#include "runtime/plan_cache.hpp"

#include <cuda_runtime_api.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
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

/// A tuner's cache as the plan cache sees it, whatever its key and config types.
class StoredPicks {
 public:
  virtual ~StoredPicks() = default;
  /// Throws redwood::Error saying why `pick` (as the codec writes it) cannot be used on `device`.
  virtual void check(const nlohmann::json& pick, int device) const = 0;
  /// Stores `pick` for `device` unless there is one for its key (the first stays); throws as check().
  virtual void seed(const nlohmann::json& pick, int device) = 0;
  /// Forgets every pick: a fresh process's state, for tests.
  virtual void clear() = 0;
};

/// The tuners' caches by name ("conv"); each registers when it is made, which its file makes
/// happen at static initialization, so that a plan cache file can be checked before any plan.
const std::map<std::string, StoredPicks*>& stored_picks();
/// Called by PickCache's constructor; a second cache of one name is a programming error (throws).
void register_stored_picks(const std::string& name, StoredPicks* picks);

/// How a tuner's picks are written into a plan cache file and read back. A pick is
/// {"key": {...}, "config": {...}} with named fields (tiles by name, not index) and without the
/// device ordinal, which is the runner's.
template <typename Key, typename Config>
struct PickCodec {
  std::function<nlohmann::json(const Key&, const Config&)> write;
  /// The pick for device ordinal `device`. Throws InvalidArgument naming what is wrong: a field
  /// missing or out of range, or a config that is not among the key's candidates on this device.
  std::function<std::pair<Key, Config>(const nlohmann::json& pick, int device)> read;
};

/// Tuned picks by key, for the process (thread-safe); the first pick stored for a key stays.
/// Each remembers whether it was measured or is the default a spent budget left.
template <typename Key, typename Config>
class PickCache final : public StoredPicks {
 public:
  /// `name`: the tuner's name in plan cache files.
  PickCache(std::string name, PickCodec<Key, Config> codec) : name_(std::move(name)), codec_(std::move(codec)) {
    register_stored_picks(name_, this);
  }
  PickCache(const PickCache&) = delete;
  PickCache& operator=(const PickCache&) = delete;

  const std::string& name() const { return name_; }
  bool find(const Key& key, Config* out, bool* measured = nullptr) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = picks_.find(key);
    if (it == picks_.end()) return false;
    *out = it->second.first;
    if (measured != nullptr) *measured = it->second.second;
    return true;
  }
  void store(const Key& key, const Config& config, bool measured = true) {
    std::lock_guard<std::mutex> lock(mutex_);
    picks_.emplace(key, std::make_pair(config, measured));
  }
  /// The pick as a plan cache file holds it: the codec's JSON and "how" ("measured", "default").
  nlohmann::json to_json(const Key& key, const Config& config, bool measured) const {
    nlohmann::json pick = codec_.write(key, config);
    pick["how"] = measured ? "measured" : "default";
    return pick;
  }

  void check(const nlohmann::json& pick, int device) const override { decode(pick, device); }
  void seed(const nlohmann::json& pick, int device) override {
    const auto [key, config] = decode(pick, device);
    store(key, config, !(pick.contains("how") && pick["how"] == "default"));
  }
  void clear() override {
    std::lock_guard<std::mutex> lock(mutex_);
    picks_.clear();
  }

 private:
  // The codec's reading, a JSON type error (an object where a number should be) as InvalidArgument.
  std::pair<Key, Config> decode(const nlohmann::json& pick, int device) const {
    try {
      return codec_.read(pick, device);
    } catch (const nlohmann::json::exception& e) {
      throw InvalidArgument(e.what());
    }
  }

  std::string name_;
  PickCodec<Key, Config> codec_;
  mutable std::mutex mutex_;
  std::map<Key, std::pair<Config, bool>> picks_;  // key -> (config, measured)
};

/// For the codecs: NhwcStorage's values by name, in its order ("fp16", "bf16", "fp32").
const std::vector<std::string>& nhwc_storage_names();
/// For the codecs: `object`'s integer field `name` in [lo, hi]; throws InvalidArgument naming it.
int pick_int(const nlohmann::json& object, const char* name, int lo, int hi);
/// For the codecs: the index of `object`'s string field `name` among `names`; throws
/// InvalidArgument naming the field and its value when it is none of them.
int pick_name(const nlohmann::json& object, const char* name, const std::vector<std::string>& names);

/// How tune_variants settled a kernel's configuration.
enum class TuneOutcome { kCached, kBudgetSpent, kMeasured };

/// The tuners' flow. The cached pick of `key`, if there is one (measured in this process, or
/// loaded from the plan cache). Else, with the plan's budget spent, `config` as it is (the
/// default), cached too, so that every later plan of the shape runs the same kernel (an eager plan
/// and a captured one give the same bits). Else every candidate timed by time_variants (`launch`
/// runs `config`; the default first, for the clocks), the fastest kept and cached, the time spent
/// charged to the budget, and the measurement in `times`. Whichever it is, the pick goes to this
/// thread's PickRecorder (the plan cache's record of the plan), if there is one.
template <typename Key, typename Config>
TuneOutcome tune_variants(PickCache<Key, Config>& cache, const Key& key, const std::vector<Config>& candidates,
                          Config& config, TuneBudget& budget, cudaStream_t stream,
                          const std::function<void()>& launch, VariantTimes* times) {
  TuneOutcome outcome = TuneOutcome::kMeasured;
  bool measured = true;
  if (cache.find(key, &config, &measured)) {
    outcome = TuneOutcome::kCached;
  } else if (budget.ms_left <= 0) {
    measured = false;
    cache.store(key, config, measured);
    outcome = TuneOutcome::kBudgetSpent;
  } else {
    const auto start = std::chrono::steady_clock::now();
    *times = time_variants(stream, candidates.size(), launch, [&](std::size_t i) {
      config = candidates[i];
      launch();
    });
    config = candidates[times->best];
    cache.store(key, config);
    budget.ms_left -= std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
  runtime::PickRecorder::record(cache.name(), [&] { return cache.to_json(key, config, measured); },
                                outcome == TuneOutcome::kMeasured);
  return outcome;
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
