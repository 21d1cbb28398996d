#pragma once
// The plan cache: what a device runner tuned for a model, kept on disk between runs, so that a
// restart reuses the picks instead of timing every kernel's candidates again (docs/planner.md,
// "Plan cache").
//
//   first run  load model ─► hash it ─► no entry ──────────► plan: tuners time candidates ─► save picks
//   restart    load model ─► hash it ─► valid entry ─► seed the tuners' caches ─► plan: nothing timed
//
// One file per key: the model's content hash (core/graph/graph_hash.hpp: weights included, never
// the file name), the device, its driver and runtime, Redwood's version and the runner options
// that change the plan. The file is JSON: a header (format version, the key, the model's file
// name, when it was made) and the picks, per tuner a list of
// {"key": {...}, "config": {...}, "how": "measured" | "default"}.
//
// This file is device-neutral. What a pick's fields mean, and whether its config is one the kernel
// offers for its key on this device, is the tuner's to say (PickCheck; the CUDA tuners':
// backends/cuda/plan_cache.hpp).
//
// What must hold: a file is written whole or not at all (a temporary file renamed over it), and
// a file that fails any check (unreadable, not JSON, another format version, another key, a pick
// its tuner refuses) is never used in part: it is logged once, naming the file and the reason, and
// the next save replaces it.

#include "core/cache_dir.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace redwood::runtime {

/// The layout of the file; a file of another version is stale.
inline constexpr int kPlanCacheFormat = 1;

/// Where entries live: cache_dir() (core/cache_dir.hpp: $REDWOOD_CACHE_DIR, else
/// $XDG_CACHE_HOME/redwood, else $HOME/.cache/redwood) / "plans". Not created here.
std::filesystem::path plan_cache_dir();

/// Tuned picks by tuner ("conv", "conv_nhwc", ...), at most one per tuner and key: a JSON object
/// {"key": {...}, "config": {...}, "how": "..."}.
class PickSet {
 public:
  /// Adds `pick` unless its tuner has one for the same key already; whether it was added. Throws
  /// InvalidArgument when `pick` is not an object with an object "key".
  bool add(const std::string& tuner, nlohmann::json pick);
  /// add() of each of `other`'s picks; how many were new.
  std::size_t merge(const PickSet& other);
  std::size_t size() const;
  bool empty() const { return picks_.empty(); }
  /// tuner -> (the key's JSON text -> pick), both in order.
  const std::map<std::string, std::map<std::string, nlohmann::json>>& tuners() const { return picks_; }
  /// {"tuner": [pick, ...], ...}
  nlohmann::json to_json() const;

 private:
  std::map<std::string, std::map<std::string, nlohmann::json>> picks_;
};

/// Collects the picks that tuners settle on this thread while it lives: GraphRunner::make_plan
/// holds one around its kernels' tune() calls. Recorders nest; the innermost collects.
class PickRecorder {
 public:
  PickRecorder();
  ~PickRecorder();
  PickRecorder(const PickRecorder&) = delete;
  PickRecorder& operator=(const PickRecorder&) = delete;

  /// Every pick the tuners settled, timed now or taken from their caches or defaults.
  const PickSet& picks() const { return picks_; }
  /// How many of them were timed while this recorder lived.
  std::size_t measured() const { return measured_; }

  /// For tuners: hands a pick to this thread's recorder; `pick` is only called when there is one.
  static void record(const std::string& tuner, const std::function<nlohmann::json()>& pick, bool measured);

 private:
  PickSet picks_;
  std::size_t measured_ = 0;
  PickRecorder* outer_;
};

/// What an entry is for: entries of equal keys are interchangeable, others never are.
struct PlanCacheKey {
  std::string model_hash;  // graph_hash() of the imported model, 16 hex digits
  std::string device;      // "NVIDIA H200, sm_90, 132 SMs"
  std::string driver;      // "570.86.15, CUDA 12.8"
  std::string runtime;     // "CUDA runtime 13.0"
  std::string redwood;     // redwood_version() (core/cache_dir.hpp)
  std::map<std::string, std::string> options;  // the runner options that change the plan

  nlohmann::json to_json() const;
  /// Throws InvalidArgument naming the field that is missing or not a string.
  static PlanCacheKey from_json(const nlohmann::json& json);
  /// "" when equal, else the first field that differs, with both values (`this` is the runner's).
  std::string difference(const PlanCacheKey& file) const;
  /// "<model_hash>-<16 hex digits of the other fields' hash>.json"
  std::string file_name() const;
  bool operator==(const PlanCacheKey&) const = default;
};

struct PlanCacheEntry {
  PlanCacheKey key;
  std::string model;    // the model file's name, for people reading the folder
  std::string created;  // UTC, "2026-12-03T10:00:00Z"
  PickSet picks;
};

/// Checks one pick of `tuner` (a "key" and a "config" it understands, the config one that the
/// kernel offers for that key here); throws redwood::Error saying why not.
using PickCheck = std::function<void(const std::string& tuner, const nlohmann::json& pick)>;

struct EntryRead {
  std::optional<PlanCacheEntry> entry;  // set when the file exists and passed every check
  bool missing = false;                 // no such file (not a problem: the first run)
  std::string problem;                  // why the file is not used, when it exists
};

/// Reads and checks an entry: format and version, the key (equal to `expected` when given), the
/// header's fields, and every pick (its shape, then `check`, when given). Never throws: a problem
/// is a result.
EntryRead read_plan_cache_entry(const std::filesystem::path& file, const PlanCacheKey* expected,
                                const PickCheck& check);

/// The entry as the file holds it.
nlohmann::json plan_cache_json(const PlanCacheEntry& entry);

/// Writes the entry whole: a temporary file beside it, renamed over it. Throws Error naming the
/// file and the system's reason.
void write_plan_cache_entry(const std::filesystem::path& file, const PlanCacheEntry& entry);

/// The time now, UTC, as "2026-12-03T10:00:00Z".
std::string utc_now();

/// One model's entry under one key, as a runner uses it: read once (a file that fails its checks
/// logged once at warn, naming it and the reason, and ignored), then the picks of each plan added,
/// and the merged set written back whenever it grew. A write that fails (an unwritable folder, a
/// full disk) is a warning, logged once, never an error: the runner goes on without the cache.
/// Thread-safe.
class ModelPlanCache {
 public:
  /// `model`: the model file's name, written into the entry for people.
  ModelPlanCache(std::filesystem::path dir, PlanCacheKey key, std::string model, PickCheck check);

  const std::filesystem::path& file() const { return file_; }
  const PlanCacheKey& key() const { return key_; }
  /// The entry's picks (none when there is no valid entry); the file is read on the first call.
  PickSet load();
  /// Adds a plan's picks; writes the merged set when some were new. Returns how many were new.
  std::size_t add(const PickSet& picks);

 private:
  void load_locked();
  std::mutex mutex_;
  std::filesystem::path file_;
  PlanCacheKey key_;
  std::string model_;
  PickCheck check_;
  bool loaded_ = false;
  PickSet picks_;  // on disk, or about to be
};

}  // namespace redwood::runtime
