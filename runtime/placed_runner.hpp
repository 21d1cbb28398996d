#pragma once
// PlacedRunner: a model whose devices the partitioner chooses, once, when its input shapes are
// first known (prepare(), or the first batch): the model runs on one device's own runner when
// the placement keeps it whole, else split (runtime/split_runner.hpp). The segments do not depend
// on the shapes, so the placement made at the first shapes serves every later batch size. A
// whole-device placement is kept in the placement cache (runtime/placement_cache.hpp): a restart
// makes that device's runner at once, without the analysis.
//
// This is what `device: auto` and a `device: cuda` model with ops the GPU lacks get in a
// pipeline (stages/infer/infer_stage.cpp); the placement and its predicted time are logged. A
// pipeline's `device: auto` models are placed together instead (JointPlacement below,
// pipelines/pipeline_planner.hpp): the runner then takes the pipeline's decision.

#include "core/model_runner.hpp"
#include "runtime/partition.hpp"
#include "runtime/pipeline_placement.hpp"

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace redwood::runtime {

/// A pipeline's decision for one model (pipelines/pipeline_planner.hpp).
struct PlacementDecision {
  std::shared_ptr<const Partition> partition;  // the model analysed at its largest batch
  std::string device;       // whole on this device ("cpu", "cuda"); empty: split, as `partition` placed it
  int batch_frames = 1;     // frames a batch the stage sends
  double batch_rows = 1;    // rows such a batch has
  double predicted_batch_ms = 0;  // one batch of batch_rows alone
  /// One batch alone against its rows, as the same costs predict it (may be empty): the run's
  /// summary sets it beside the batches measured, at their mean rows.
  RowsCurve predicted_at;
  bool measured = false;    // the prediction came from batch times runs measured (the cost history)
  /// A split: each segment's predicted time alone at the partition's shapes, and against a
  /// batch's rows (segment_curves), for the run's summary (from the partition's costs, or kept
  /// with the placement: a split read back has none).
  std::vector<double> segment_ms;
  std::vector<RowsCurve> segment_at;
  /// The cost history's key of a batch of this many rows as decided: whole on a device
  /// (CostHistory::model_key), or the split's, its device the cut (`split <hash>`,
  /// pipelines/pipeline_planner.cpp). The run's batch times go there when it ends.
  std::function<std::string(std::int64_t rows)> history_key;
  std::string note;         // for the runner's description: "pipeline placement: ..."
  bool alone = false;       // not placed by the pipeline: each runner places alone, as without one
};

/// What a pipeline that places its `device: auto` models together (pipelines/pipeline_planner.hpp)
/// shares with one model's placed runners and the stage that feeds it. Until decide(), the runners
/// record the shapes they are prepared at instead of placing alone; decide() makes each runner's
/// own runner (the decided device's, or the split) and prepares it at those shapes. A runner
/// given a batch before any decision places alone, as without a pipeline.
class JointPlacement {
 public:
  /// The stage that feeds the model: its name, max_batch, timeout_ms, and the rows its input
  /// tensor has a frame (dim 0 of its spec: -1 when it varies, as crops do).
  struct Feed {
    std::string stage;
    int max_batch = 1;
    double timeout_ms = 0;
    std::int64_t rows_per_frame = 1;
  };
  void add_feed(Feed feed);
  std::vector<Feed> feeds() const;
  /// The input shapes of the largest batch (dim 0 of the first input) the runners were prepared
  /// at; empty when none was (the stage did not know its input's shape at load).
  std::vector<Shape> largest_shapes() const;
  /// Hands `decision` to every runner attached (once; later calls are refused with Error).
  void decide(PlacementDecision decision);
  /// The decision, or null before it.
  std::shared_ptr<const PlacementDecision> decision() const;
  /// Frames a batch for the stage: the decision's, else `max_batch`.
  int batch_frames(int max_batch) const;

  /// What one attached runner measured: its own runner's stats (copies and compute a batch),
  /// and for a split each segment's runner's (each counting the model's batches by their rows).
  struct Report {
    RunnerStats model;
    std::vector<RunnerStats> segments;
  };
  /// Every attached runner's; empty for one that runs no decided placement (before the decision,
  /// or given a batch before it: that one placed alone and keeps that placement).
  std::vector<Report> runner_reports() const;

  // For the placed runners (placed_runner.cpp).
  using Apply = std::function<void(std::shared_ptr<const PlacementDecision>)>;
  using Stats = std::function<Report()>;
  int attach(Apply apply, Stats stats);
  void detach(int id);
  void record(const std::vector<Shape>& shapes);

 private:
  mutable std::mutex mutex_;
  std::vector<Feed> feeds_;
  std::vector<Shape> largest_;
  std::map<int, std::pair<Apply, Stats>> runners_;
  int next_id_ = 0;
  std::shared_ptr<const PlacementDecision> decision_;
};

/// A runner that places `graph` with `options` (device 0 "cpu", device 1 the accelerator whose
/// runner `config` configures) when its input shapes are first known. `model_name` is for logs.
/// With `joint`, the pipeline decides instead (JointPlacement).
std::unique_ptr<ModelRunner> make_placed_runner(std::shared_ptr<const Graph> graph, PartitionOptions options,
                                                const RunnerConfig& config, std::string model_name,
                                                std::shared_ptr<JointPlacement> joint = nullptr);

/// The placement a PlacedRunner chose (null before it chose, for another runner, or for a split
/// cut again where the placement cache kept it: it has no costs).
const Partition* placed_partition(const ModelRunner& runner);

/// What the run's summary sets beside a split's measured segments: each segment's predicted time
/// alone (ms) at `at`, the input shape it was placed at, and against a batch's rows (`at_rows`,
/// segment_curves), which it reads at the rows the split's batches had.
struct SegmentPredictions {
  std::vector<double> ms;
  std::string at;
  std::vector<RowsCurve> at_rows;
};

/// A split PlacedRunner's segment predictions, placed now or kept with its placement (nullopt for
/// a runner on one device, before it chose, or for another runner).
std::optional<SegmentPredictions> placed_segment_predictions(const ModelRunner& runner);

/// Op types of `graph`'s nodes (after the device-neutral passes) that `device` has no kernel for
/// at any shape, sorted.
std::vector<std::string> ops_without_kernel(const Graph& graph, Device device);

}  // namespace redwood::runtime
