#pragma once
// The CUDA side of the plan cache (runtime/plan_cache.hpp; docs/planner.md, "Plan cache"): the
// key of a model on a GPU, the check of a file's picks against what this build's tuners offer
// there, and the seeding of the tuners' process-wide caches (kernels/variant_tuner.hpp).
//
//   GraphRunner(graph)   hash the graph as imported (what `redwood plan --cache-info MODEL` hashes);
//                        the optimized graph read back from <entry>.rwgraph, or the passes run
//                        and their result written there
//   first tuned plan     read the entry, check every pick, seed the tuners' caches: the tuners
//                        then find those shapes "cached" and time nothing
//   every tuned plan     a PickRecorder around the kernels' tune(); the picks it saw merged into
//                        the entry, which is written again when it grew
//
// The key holds the GPU's name, compute capability and multiprocessor count, the driver (the
// kernel module's version and the CUDA version it supports), the CUDA runtime, Redwood's version,
// and the runner options that change the plan, every CUDA option among them (cuda_options.hpp):
// runners whose options offer the tuners other candidates keep entries of their own.

#include "backends/cuda/graph_runner.hpp"
#include "core/passes/pass_manager.hpp"
#include "runtime/plan_cache.hpp"

#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace redwood::cuda {

/// The NVIDIA kernel module's version ("580.159.04") from the first line of
/// /proc/driver/nvidia/version, proprietary or open module; "unknown" when the line has none.
std::string driver_version_from(const std::string& line);

/// The options that change a plan, as a key holds them: precision, optimize, nhwc, every CUDA
/// option (cuda_options.hpp; the stem by space-to-depth as it applies, with the NHWC groups), the
/// tuning budget.
std::map<std::string, std::string> plan_cache_options(const RunnerOptions& options);

/// The key of the model whose graph_hash() is `model_hash` on GPU `device` under `options`.
/// Throws InvalidArgument when this process sees no such GPU.
runtime::PlanCacheKey plan_cache_key(const std::string& model_hash, const RunnerOptions& options, int device);

/// Throws redwood::Error saying why a pick of `tuner` cannot be used on `device`, the current
/// GPU: no tuner of that name in this build, a field missing, a config this GPU is not offered.
void check_tuned_pick(const std::string& tuner, const nlohmann::json& pick, int device);

/// Stores `picks` (checked already) in the tuners' caches for `device`, where a key has no pick
/// yet; returns how many picks there were.
std::size_t seed_tuned_picks(const runtime::PickSet& picks, int device);

/// Forgets every tuned pick of the process: a fresh process's state, for tests.
void forget_tuned_picks();

class RunnerPlanCache;

/// The entry of a GraphRunner for `graph` (the model as imported) on GPU `device`, or null when
/// its key cannot be made (a GPU the probe does not list): logged at warn, the runner goes on
/// without the cache, as it does when the folder cannot be written.
std::unique_ptr<RunnerPlanCache> make_runner_plan_cache(const Graph& graph, const RunnerOptions& options, int device);

/// A GraphRunner's entry (RunnerOptions::plan_cache). Thread-safe.
class RunnerPlanCache {
 public:
  /// `graph`: the model as imported, hashed now (ResNet-50's 100 MB in about 25 ms).
  RunnerPlanCache(const Graph& graph, const RunnerOptions& options, int device);

  /// Before a plan is tuned: the first call reads the entry and seeds the tuners' caches.
  void before_tuning();
  /// After a plan was tuned: its picks join the entry, written when some were new.
  void after_tuning(const runtime::PickRecorder& recorder);

  /// The optimized graph kept beside the entry (the file's name with .rwgraph: Redwood's graph
  /// file, core/graph/graph_file.hpp) and the passes' records, or null when there is none or it
  /// cannot be used: damaged, of another build or another key (logged at warn, naming the file).
  std::shared_ptr<Graph> load_optimized(std::vector<PassRecord>& records) const;
  /// Keeps the optimized graph and the passes' records; a failure is a warning, once.
  void save_optimized(const Graph& graph, const std::vector<PassRecord>& records) const;
  std::filesystem::path optimized_file() const;

  const std::filesystem::path& file() const { return cache_.file(); }
  /// Picks read from the file (0 before the first plan, or without a valid entry).
  std::size_t seeded() const { return seeded_; }

 private:
  int device_;
  runtime::ModelPlanCache cache_;
  std::once_flag seeded_once_;
  std::size_t seeded_ = 0;
};

}  // namespace redwood::cuda
