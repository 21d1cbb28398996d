#pragma once
// Measuring a partition: the cost model's history filled from the devices' own node timings, and
// each segment's predicted time set against what its runner measures (`redwood plan --profile`,
// the cost model's error in docs/planner.md).

#include "core/model_runner.hpp"
#include "runtime/cost_model.hpp"
#include "runtime/partition.hpp"

#include <vector>

namespace redwood::runtime {

/// Records measured node times into `history`: the analysis run's CPU times for every placed node,
/// and for each other device, its time_nodes() of every segment placed on it (nodes matched by
/// name; the matched nodes' times are scaled to add up to the segment's whole run, which includes
/// the steps the device's own passes added and not the gaps of launching nodes one by one; a node
/// those passes renamed or merged into another is recorded at 0 there, its time being in the
/// matched nodes'). The accelerators time them at the partition's precision, with its device
/// options, on its GPU (Partition::device_index), and the keys name them. Returns how many times
/// were recorded. Throws what the devices throw (a missing GPU).
std::size_t record_node_times(const Partition& partition, CostHistory& history, int runs = 10);

struct SegmentTimes {
  double predicted_ms = 0;  // its time as measured before (Partition::cut_times), else as timed alone
                            // while planning (Partition::timed_segment_ms), else from_nodes_ms
  double from_nodes_ms = 0; // the sum of its nodes' costs on its device, and its device's segment cost
  bool measured_before = false;
  bool timed_alone = false;
  double measured_ms = 0;   // its runner's compute time, the median batch's
  double measured_p10_ms = 0, measured_p90_ms = 0;  // the batches' 10th and 90th percentiles of it
  double transfer_in_predicted_ms = 0;  // its inputs' crossings, through the host
  double copy_ms = 0;       // its runner's copy time, the median batch's (0 on the CPU)
  double host_idle_ms = kLongIdle;  // a host segment's: its kernels' idle before it (split_latency_ms)
  bool host_woken = false;  // a host segment timed alone while planning: whether its timing after such
                            // an idle (Partition::host_timing) is the one with its threads woken just
                            // before, whether or not that timing predicts it
};

struct PartitionTimes {
  std::vector<SegmentTimes> segments;
  double predicted_batch_ms = 0;  // Partition::run_latency_ms of the placement
  double measured_batch_ms = 0;   // the median of `runs` batches, one at a time, through the split runner
};

/// Runs the partition through a split runner on inputs of the analysis's shapes holding sample
/// values (runtime/sample_values.hpp), in an accelerator's pinned memory where there is one, the
/// outputs into a recycled pool over it (runtime/value_pool.hpp), as a pipeline's frames are:
/// `warmup` batches, then `runs` timed ones, one at a time.
/// With `history`, each segment's measured time is recorded under its key (Partition::ran_key),
/// a host segment's thread count under its work's (CostHistory::host_threads_key of its cut_key),
/// its time beyond its nodes' predicted times as its device's segment cost
/// (CostHistory::segment_key), and the median batch's time beyond its segments' measured compute
/// and their inputs' predicted crossings, per segment, as the host's hand-over
/// (CostHistory::handover_key).
PartitionTimes measure_partition(const Partition& partition, const RunnerConfig& config, int runs = 20, int warmup = 3,
                                 CostHistory* history = nullptr);

/// Predicted per segment alone (no run).
std::vector<SegmentTimes> predict_segments(const Partition& partition);
/// predict_segments' predicted_ms alone: what a split's runner keeps for the run's summary.
std::vector<double> predicted_segment_ms(const Partition& partition);

}  // namespace redwood::runtime
