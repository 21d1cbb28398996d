#pragma once
// The placement cache: where a PlacedRunner (runtime/placed_runner.hpp) put a model, on disk, so
// that a restart placing the same model at the same shapes, with the same options, on the same
// machine and build, skips the placing: the analysis's timing (the model run on the CPU as a
// runner runs it, each node timed: about a second for PP-OCRv4 det on a 2-core machine), the
// timing of a split's host segments and the placer. A model kept whole on one device gets that
// device's runner at once; a split is cut again where it was placed, from one run of the model
// for its values' shapes (docs/planner.md, "Plan cache").
//
//   key: graph_hash, input shapes, devices and their profiles' keys (the CPU model, the GPU and its
//        driver), precision, the accelerator's options, objective, pinned nodes, preferred device,
//        build_stamp()
//   file: <cache>/placements/<XXH64 of the key>.json
//         {"key": ..., "device": ..., "predicted_ms": ..., "nodes": [a split: each node's device],
//          "threads": [a split: each host segment's threads],
//          "segment_ms": [a split: each segment's predicted time alone, for the run's summary],
//          "segment_at": [a split: each segment's predicted time against rows, [[rows, ms], ...]]}
//
// A pipeline's placement of its `device: auto` models (pipelines/pipeline_planner.hpp) is kept in
// the same folder, as pipeline-<XXH64 of its key>.json: each model's device, or for a split, each
// placed node's device, which a restart cuts again as this cache's own splits are.
//
// A kept placement does not follow later changes of the costs it was made from
// (a `redwood plan --profile` pass, a placement that would come out otherwise on a busier CPU):
// deleting the folder places every model again. A file that cannot be read or is for another key
// is ignored (logged at warn) and replaced; one that cannot be written is a warning, once.

#include "core/graph/graph.hpp"
#include "runtime/partition.hpp"
#include "runtime/placed_runner.hpp"

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace redwood::runtime {

/// cache_dir() / "placements".
std::filesystem::path placement_cache_dir();

/// What identifies device `d` of `options` for a cache key: the profile the options give (its
/// name, key and figures: tests' stand-ins), else the machine's profile key (computed without
/// measuring); "" for a device kind without one.
std::string device_cache_key(const PartitionOptions& options, std::size_t d);

/// The key of placing `graph` at `input_shapes` with `options`; "" (nothing is cached) when a
/// device's profile has no key (a device kind without one), or the options carry measured costs
/// (`history`) or their own supports() answers.
std::string placement_key(const Graph& graph, const std::vector<Shape>& input_shapes, const PartitionOptions& options);

struct KeptPlacement {
  std::string device;         // the device that runs the whole model; "" for a split
  double predicted_ms = 0;    // what the partitioner predicted for a batch at the key's shapes
  /// A split: each placed node's device (the analysis's placeable order); empty when whole.
  std::vector<std::string> nodes;
  /// A split: each host segment's threads (Partition::host_segment_threads); may be empty.
  std::vector<int> threads;
  /// A split: each segment's predicted time alone at the key's shapes (predict_segments), and
  /// against a batch's rows (segment_curves), which the run's summary sets beside the measured ones.
  std::vector<double> segment_ms;
  std::vector<RowsCurve> segment_at;
};

/// The placement kept under `key` in `dir`, if any.
std::optional<KeptPlacement> read_placement(const std::filesystem::path& dir, const std::string& key);

/// Throws InvalidArgument unless `segment_ms` and `segment_at`, kept with a split, have a
/// prediction for each segment of `cut` (the split cut again where it was placed): an entry that
/// does not is placed again.
void check_kept_predictions(const Partition& cut, const std::vector<double>& segment_ms,
                            const std::vector<RowsCurve>& segment_at);

/// Keeps `placement` under `key` in `dir` (a temporary file renamed over the entry).
void write_placement(const std::filesystem::path& dir, const std::string& key, const KeptPlacement& placement);

/// One model of a pipeline placement (pipelines/pipeline_planner.hpp makes the key).
struct KeptPipelineModel {
  std::string name;
  /// What the runners are handed: device ("" for a split), frames and rows a batch, predicted
  /// batch time and its curve against rows, a split's segment predictions, whether measured, the
  /// note (the partition and history key are not kept).
  PlacementDecision decision;
  /// A split: each placed node's device (the analysis's placeable order); empty when whole.
  std::vector<std::string> nodes;
  /// A split: each host segment's threads (Partition::host_segment_threads); may be empty.
  std::vector<int> threads;
  /// The measured batch times the placement was made with: per device, (rows, ms) at each batch
  /// size tried (a device without any is absent). A reader compares the history's times now.
  std::map<std::string, std::vector<std::pair<double, double>>> measured_ms;
};

struct KeptPipelinePlacement {
  std::vector<KeptPipelineModel> models;
  std::vector<std::string> lines;  // the plan's log lines
};

/// The pipeline placement kept under `key` in `dir`, if any: `pipeline-<XXH64 of the key>.json`.
/// A file that cannot be read, of another format or key, or with a model missing a field, is
/// logged at warn and not used.
std::optional<KeptPipelinePlacement> read_pipeline_placement(const std::filesystem::path& dir, const std::string& key);
/// Keeps `placement` under `key` in `dir` (atomically); a folder that cannot be written is a
/// warning, once.
void write_pipeline_placement(const std::filesystem::path& dir, const std::string& key, const KeptPipelinePlacement& placement);
/// The file a pipeline placement under `key` is kept in.
std::filesystem::path pipeline_placement_file(const std::filesystem::path& dir, const std::string& key);

}  // namespace redwood::runtime
