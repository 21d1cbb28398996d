#pragma once
// The pipeline's `device: auto` models placed together: at load, once every
// stage is checked, each such model's placement (whole on the CPU, whole on the GPU, or the
// partitioner's split) and batch size are chosen for the pipeline's throughput under its latency
// limit (runtime/pipeline_placement.hpp), and handed to the model's runners
// (runtime::JointPlacement) instead of each placing alone for one batch.
//
// What the problem is made of:
//   input shape   the largest batch the infer stage prepared its runners at (the stage knows its
//                 input tensor's shape at load); a model whose stage does not, or that two stages
//                 feed, is placed alone (each runner for its own batch), and the log says why
//   costs         runtime::partition_model once a model, at that largest batch R: per node, its
//                 cost on the CPU and on the GPU, the bytes it moves, and the split; at another
//                 batch of r rows, as runtime/partition_rows.hpp scales them (a fixed launch and a
//                 part proportional to the rows; the cost history's time for the node at r rows
//                 first). An option's busy time on a device is its nodes'
//                 costs plus its device's segment cost for each segment there; on each copy
//                 direction, its transfers (runtime::resource_loads); its batch time whole on a
//                 device is the list schedule's (runtime::makespan) plus its segments' costs,
//                 split, its segments' as the split runner runs them, values crossing through
//                 the host, each handed over as earlier pipeline runs on this host measured
//                 (runtime::split_latency_at_rows, CostHistory::pipeline_handover_key). Where earlier runs
//                 measured the model whole on a device, or the same split (record_batch_times),
//                 those batch times come first for that option (MeasuredCurves); a split's
//                 segments measured at a row count come first for their time there.
//   batch sizes   frames a batch: the powers of two below the stage's max_batch, and max_batch
//                 (a model whose batch is fixed at 1 keeps one row a run)
//   rows a frame  dim 0 of the stage's input tensor (1 for a picture); where it varies (crops)
//                 the model's `rows_per_frame` key, default 4
//   demand        every stream's frame rate (--streams copies included): --fps, else the
//                 source's own rate when paced (--realtime, or live sources); files read as fast
//                 as they go have none, and the placement minimizes the bottleneck a frame
//   other stages  `service.cpu_stage_ms`: what the other stages take a frame on the CPU, in
//                 core-milliseconds (default 0), divided by the cores as the CPU's fixed load and
//                 taken whole as their time along the path
//   limit         `service.latency_limit_ms` on the path (default: none)

#include "runtime/partition.hpp"
#include "runtime/pipeline_placement.hpp"
#include "stages/stage.hpp"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace redwood {

/// The pipeline placement's settings (the `service:` keys and the defaults above).
struct PipelinePlacementSettings {
  double latency_limit_ms = 0;
  double cpu_stage_ms = 0;
  double crop_rows_per_frame = 4;
};

/// Batch times runs measured of a model, by placement ("cpu", the accelerator, "split" for the
/// partition's split): the cost history's whole-model entries (runtime::CostHistory::model_times)
/// against rows.
using MeasuredCurves = std::map<std::string, runtime::RowsCurve>;

/// A model's options, derived from its partition at the batch it was analysed at (see the header's
/// comment). `frames` are the batch sizes in frames, `rows_per_frame` the rows each adds;
/// `fixed_one`: the model runs one row at a time. The history's keys are at the partition's
/// precision and device options (runtime::cost_precision); `history` may be null. A placement
/// with `measured` batch times takes its batch time from them (interpolated in rows, or the node
/// costs scaled to a single one); whole on a device it scales its busy times by the same ratio
/// (a split keeps its segments': its batch waits between them without keeping a device busy);
/// the option says it is `measured`.
std::vector<runtime::PipelineOption> pipeline_options(const runtime::Partition& partition, const std::vector<int>& frames,
                                                      double rows_per_frame, bool fixed_one,
                                                      const runtime::CostHistory* history, const MeasuredCurves& measured = {});

/// Frames a batch to try for a stage of `max_batch`: the powers of two below it, and it.
std::vector<int> batch_candidates(int max_batch);

struct PipelinePlan {
  /// Read from the placement cache: `problem` and `result` are empty, `kept_lines` are the lines
  /// of the plan that was kept, `cache_file` where.
  bool from_cache = false;
  runtime::PipelineProblem problem;
  runtime::PipelinePlacementResult result;
  std::vector<std::string> models;  // the problem's models, by name
  std::vector<std::string> alone;   // models left to place alone, each with why
  std::vector<std::string> kept_lines;
  std::string cache_file;
  /// The log's and the summary's lines: the search, the choice per model beside the baseline's
  /// (a prediction from measured batches says so), the predicted utilization of each resource and
  /// the path's latency; read from the cache, a line saying so and the kept plan's lines. Then
  /// the models placed alone, each with why.
  std::vector<std::string> lines() const;
};

/// Places the `device: auto` models of `models` whose stage recorded a feed (their
/// runtime::JointPlacement), together, and hands each its decision; the others' runners are told
/// to place alone. `base` is the partitioner's options (devices {"cpu", accelerator}, profiles,
/// history; tests give a stand-in accelerator); `frames_per_s` the demand (0: unpaced). Returns
/// nothing when no model takes part.
///
/// The decision is kept in the placement cache (runtime/placement_cache.hpp,
/// `placements/pipeline-<hash>.json`), and a later call with the same key takes it from there
/// without timing or placing any model (a split is cut again where it was placed, from one run
/// for its values' shapes; one that does not fit the model makes the entry not stand). The key: per model its name, graph_hash,
/// feed (input shapes, max_batch, timeout, rows a frame), precision, pinned nodes, CUDA options,
/// slots and instances; the demand; the settings; each device's profile key; the cost history's
/// node and segment entries (a hash: a `redwood plan --profile` pass re-places); build_stamp().
/// Batch times runs measured are not in the key (every run adds samples): the entry keeps, per
/// model and device (and for the split it chose), the measured time at the batch sizes tried it
/// was made with, and is placed again when the history's differs by more than 10 % or a device
/// gained or lost measurements.
std::optional<PipelinePlan> place_auto_models(const ModelTable& models, double frames_per_s,
                                              const PipelinePlacementSettings& settings,
                                              const runtime::PartitionOptions& base);

/// Device `d` of `base` as the cost history's whole-model keys name it: its name and the XXH64 of
/// its profile's key (runtime::device_cache_key); "" for a device without one. Throws what the
/// profile key throws (a missing GPU).
std::string history_device(const runtime::PartitionOptions& base, std::size_t d);

/// Batches at one row count below this many are not recorded (too few to stand for the row count).
inline constexpr std::int64_t kMinBatchesRecorded = 3;

/// What the runners of `models`' pipeline-placed models measured, into `history`: per row count a
/// batch ran (dim 0, padding included), one sample, the mean of those batches' copy in + compute +
/// copy out, under CostHistory::model_key (the model's graph_hash, the device and its profile's
/// key, or for a split its cut and devices, precision, the inputs at those rows); for a split,
/// also each segment's compute at each row count, under CostHistory::segment_rows_key (of its
/// Partition::ran_key), a host segment's threads, under CostHistory::host_threads_key where the
/// history holds another count, and at each row count its batches beyond their segments' compute
/// and crossings, per segment, under CostHistory::pipeline_handover_key, where the split was placed
/// at this start (a split read back from the placement cache has no crossings costed); a split not
/// measured yet is predicted with it.
/// Row counts with fewer than kMinBatchesRecorded batches are left out. Returns the batch-time
/// samples recorded (whole batches and segments).
std::size_t record_batch_times(const ModelTable& models, runtime::CostHistory& history);

}  // namespace redwood
