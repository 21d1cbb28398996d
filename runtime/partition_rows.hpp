#pragma once
// A partition at another batch size. The partitioner costs a model at one input shape, its
// largest batch; a pipeline tries every batch size its stage may send (pipelines/pipeline_planner.hpp),
// and a split's batches form by timing, mostly below that size, so the run's summary sets each
// segment's measured time beside its prediction at the rows its batches had.
//
// At r rows, for a partition analysed at R (dim 0 of its first input), a node costs
//     c(r) = f + (c(R) - f) * r / R,   f = min(c(R), the device's launch cost),
// a fixed launch and a part proportional to the rows, and moves r / R of the bytes; a time the
// cost history holds for the node at r rows (dim 0 of its values that were R is r) comes first.
// A split segment's time at r rows that a pipeline's runs measured (CostHistory::segment_rows_key)
// comes before either.

#include "runtime/cost_model.hpp"
#include "runtime/partition.hpp"
#include "runtime/pipeline_placement.hpp"

#include <optional>
#include <vector>

namespace redwood::runtime {

/// `descs` with dim 0 changed from `from` rows to `to` where it was `from` (their host values dropped).
std::vector<TensorDesc> at_batch(std::vector<TensorDesc> descs, std::int64_t from, std::int64_t to);

/// The rows `partition` (or `analysis`) was analysed at: dim 0 of its first input, 0 when it has
/// none.
std::int64_t analysed_rows(const Partition& partition);
std::int64_t analysed_rows(const ModelAnalysis& analysis);

/// `partition`'s problem at `rows` rows (see above); `history` may be null. Its nodes' times are
/// looked up in the history only at whole rows other than the analysed ones.
PlacementProblem problem_at_rows(const Partition& partition, double rows, const CostHistory* history);

/// Each segment's predicted time alone (predicted_segment_ms, at the analysed rows R) against a
/// batch's rows, at 1, 2, 4, ... rows below R and at R: the prediction at R scaled as the
/// segment's placed nodes and its device's segment cost change from R to those rows
/// (problem_at_rows); then with_measured_rows. One point, flat, for a model without a batch
/// dimension.
std::vector<RowsCurve> segment_curves(const Partition& partition, const CostHistory* history);

/// Times each accelerator segment of `partition`'s split on its device at each of `rows` below
/// the analysed rows (time_device_segment_at_rows; kept in Partition::device_row_times), where
/// its segments were timed while planning (PartitionOptions::use_analysis_times, a device this
/// process can run). A pipeline's batches form by timing, mostly far below the rows it was placed
/// at, and a GPU segment's time there is a floor of under-filled kernels the node costs' scaling
/// misses: on an H100 host rec's first segment took 0.98 ms at 7.9 rows, predicted 1.42 from its
/// nodes. Host segments are left to their nodes: timed alone at those rows, they miss a pipeline's
/// batches by about as much as the scaling does (the other stages' threads share the cores there),
/// and each of their timings costs evictions of the whole cache.
void time_segments_at_rows(Partition& partition, const std::vector<std::int64_t>& rows);

/// `curves` (one per segment of `partition`) with each segment's time at the row counts a
/// pipeline's runs measured it (CostHistory::segment_rows_times of its Partition::ran_key), else
/// was timed at while planning (Partition::device_row_times), in place of the prediction there,
/// and its predictions elsewhere scaled by how far they missed those times: by the measured time
/// over the prediction at the nearest measured rows, along a line between two,
/// and to 1 at the analysed rows (the prediction the placement was chosen on). Scaled node by node
/// from the analysed rows, a GPU segment's prediction at a few rows misses by more than its
/// launches: on an H100 host rec's fifth segment came out at 0.58 ms at 7.9 rows against 0.31
/// measured, and a curve that took the measured 0.31 at 7 rows and the prediction at 8 read 0.58
/// between. Unchanged without those times or for a partition without profiles; a curve that holds
/// them already is left as it is.
std::vector<RowsCurve> with_measured_rows(const Partition& partition, std::vector<RowsCurve> curves,
                                          const CostHistory* history);

/// One batch of `rows` rows through the split `partition` as the split runner runs it
/// (split_latency_ms of its segments): each segment's compute its curve's time at those rows
/// (`curves`, segment_curves of it), each crossing rows / R of its bytes, and the learned
/// hand-over a segment (`handover_ms` where given, else the partition's). At the analysed rows,
/// with the partition's hand-over, the batch time the partitioner predicted for its placement.
double split_latency_at_rows(const Partition& partition, const std::vector<RowsCurve>& curves, double rows,
                             std::optional<double> handover_ms = std::nullopt);

}  // namespace redwood::runtime
