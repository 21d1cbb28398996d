// A partition at other rows (runtime/partition_rows.hpp): its nodes' costs scaled from the
// analysed batch (a launch kept whole, the rest in proportion), a time the cost history holds at
// those rows first; and each segment's prediction against rows, what the run's summary reads at
// the rows a split's batches had. On a stand-in accelerator that lacks Softmax (the split: conv on
// the accelerator, Softmax on the host, conv on the accelerator).

#include "core/error.hpp"
#include "runtime/partition.hpp"
#include "runtime/partition_profile.hpp"
#include "runtime/partition_rows.hpp"
#include "runtime/stand_in_accelerator.hpp"

#include <gtest/gtest.h>

namespace redwood::runtime {
namespace {

const char* const kAccel = testing::stand_in_accelerator();

// Placed at 8 rows on profiles whose launch costs `launch_ms`.
Partition split_at_8(double launch_ms) {
  PartitionOptions o;
  o.devices = {"cpu", kAccel};
  o.profiles = {testing::stand_in_profile("cpu", 10, 10), testing::stand_in_profile(kAccel, 10000, 10000)};
  for (DeviceProfile& p : o.profiles) p.launch_ms = launch_ms;
  o.use_analysis_times = false;
  Partition p = partition_model(testing::softmax_between_convs_model(), {{8, 16, 32, 32}}, o);
  EXPECT_EQ(p.segments.size(), 3u);
  return p;
}

// The placed nodes' index of the analysis's node named `name`.
std::size_t placed_index(const Partition& p, const std::string& name) {
  for (std::size_t i = 0; i < p.analysis.placeable.size(); ++i) {
    if (p.analysis.graph->nodes[p.analysis.placeable[i]].name == name) return i;
  }
  ADD_FAILURE() << "no placed node " << name;
  return 0;
}

TEST(PartitionRows, WithoutALaunchCostEveryNodeAndSegmentScalesInProportionToTheRows) {
  const Partition p = split_at_8(0);
  ASSERT_EQ(analysed_rows(p), 8);
  const PlacementProblem half = problem_at_rows(p, 4, nullptr);
  ASSERT_EQ(half.nodes.size(), p.problem.nodes.size());
  for (std::size_t i = 0; i < half.nodes.size(); ++i) {
    for (std::size_t d = 0; d < half.nodes[i].cost_ms.size(); ++d) {
      const double c = p.problem.nodes[i].cost_ms[d];
      if (!std::isfinite(c)) continue;
      EXPECT_DOUBLE_EQ(half.nodes[i].cost_ms[d], c / 2) << "node " << i << " device " << d;
    }
    EXPECT_DOUBLE_EQ(half.nodes[i].input_bytes, p.problem.nodes[i].input_bytes / 2);
    EXPECT_DOUBLE_EQ(half.nodes[i].output_bytes, p.problem.nodes[i].output_bytes / 2);
  }

  const std::vector<double> at_8 = predicted_segment_ms(p);
  const std::vector<RowsCurve> curves = segment_curves(p, nullptr);
  ASSERT_EQ(curves.size(), p.segments.size());
  for (std::size_t k = 0; k < curves.size(); ++k) {
    std::vector<double> rows;
    for (const auto& [r, ms] : curves[k].points) rows.push_back(r);
    EXPECT_EQ(rows, (std::vector<double>{1, 2, 4, 8})) << "segment " << k;
    EXPECT_EQ(curves[k].at(8), at_8[k]) << "segment " << k;
    for (double r : {1.0, 2.0, 3.0, 4.0, 6.0}) EXPECT_NEAR(curves[k].at(r), at_8[k] * r / 8, 1e-12 * at_8[k]) << r << " rows";
  }
}

TEST(PartitionRows, ALaunchStaysWholeAndATimeMeasuredAtThoseRowsComesFirst) {
  const double launch = 0.01;
  const Partition p = split_at_8(launch);
  const PlacementProblem one = problem_at_rows(p, 1, nullptr);
  for (std::size_t i = 0; i < one.nodes.size(); ++i) {
    for (std::size_t d = 0; d < one.nodes[i].cost_ms.size(); ++d) {
      const double c = p.problem.nodes[i].cost_ms[d];
      if (!std::isfinite(c)) continue;
      const double f = std::min(c, launch);
      EXPECT_DOUBLE_EQ(one.nodes[i].cost_ms[d], f + (c - f) / 8) << "node " << i << " device " << d;
    }
  }

  // The host segment holds the Softmax alone. Its time at 4 rows, measured at 3x its cost at 8:
  // the node costs that there, and the segment's prediction at 4 rows is 3x its prediction at 8.
  std::size_t host = p.segments.size();
  for (std::size_t k = 0; k < p.segments.size(); ++k) host = p.segments[k].device == 0 ? k : host;
  ASSERT_LT(host, p.segments.size());
  ASSERT_EQ(p.segments[host].nodes.size(), 1u);
  const std::size_t i = placed_index(p, "softmax");
  ASSERT_EQ(p.segments[host].nodes[0], p.analysis.placeable[i]);
  const std::size_t node = p.analysis.placeable[i];
  const double at_8 = p.problem.nodes[i].cost_ms[0];
  ASSERT_GT(at_8, 0);
  CostHistory history;
  history.record(CostHistory::key(p.profiles[0], cost_precision(0, p.precision, p.device_options), p.analysis.graph->nodes[node],
                                  at_batch(p.analysis.input_descs(node), 8, 4), at_batch(p.analysis.output_descs(node), 8, 4)),
                 3 * at_8);
  EXPECT_DOUBLE_EQ(problem_at_rows(p, 4, &history).nodes[i].cost_ms[0], 3 * at_8);
  EXPECT_DOUBLE_EQ(problem_at_rows(p, 3, &history).nodes[i].cost_ms[0], launch + (at_8 - launch) * 3 / 8)
      << "no time at 3 rows: scaled";
  const std::vector<double> predicted = predicted_segment_ms(p);
  const std::vector<RowsCurve> curves = segment_curves(p, &history);
  ASSERT_EQ(p.segment_ms.empty() ? 0.0 : p.segment_ms[0], 0.0) << "no segment cost learned";
  EXPECT_NEAR(curves[host].at(4), 3 * predicted[host], 1e-12 * predicted[host]);
  EXPECT_EQ(curves[host].at(8), predicted[host]);
}

// A split's batch at other rows is its segments as the split runner runs them: each segment's
// curve at those rows, each value through the host at those rows' bytes, and the hand-over a
// segment; at the analysed rows, the time predicted for its placement.
TEST(PartitionRows, ASplitsBatchAtOtherRowsIsItsSegmentsAtThoseRowsWithTheirCrossingsAndHandOvers) {
  Partition p = split_at_8(0.01);
  ASSERT_EQ(p.segments.size(), 3u);
  const std::vector<RowsCurve> curves = segment_curves(p, nullptr);
  EXPECT_NEAR(split_latency_at_rows(p, curves, 8), p.run_latency_ms(p.placement.device), 1e-9);
  // The chain accelerator -> host -> accelerator: at 4 rows, the segments' curves there and
  // every crossing (the input up, each edge down or up, the output down) at half its bytes.
  std::vector<double> compute, crossing;
  SplitCosts costs = p.split_costs();
  const double at_8 = split_latency_ms(p.analysis, p.problem, p.segments, costs, &compute, &crossing);
  const double out_bytes = static_cast<double>(shape_numel(p.analysis.values.at(p.analysis.graph->outputs[0].name).shape)) * 4;
  const double out_down = p.problem.transfer_ms(1, 0, out_bytes);
  double crossings_at_8 = out_down;
  for (double c : crossing) crossings_at_8 += c;
  EXPECT_NEAR(at_8, compute[0] + compute[1] + compute[2] + crossings_at_8, 1e-9);
  costs.bytes_scale = 0.5;
  double crossings_at_4 = p.problem.transfer_ms(1, 0, out_bytes / 2);
  split_latency_ms(p.analysis, p.problem, p.segments, costs, &compute, &crossing);
  for (double c : crossing) crossings_at_4 += c;
  EXPECT_LT(crossings_at_4, crossings_at_8);
  const double at_4 = curves[0].at(4) + curves[1].at(4) + curves[2].at(4) + crossings_at_4;
  EXPECT_NEAR(split_latency_at_rows(p, curves, 4), at_4, 1e-9);
  // A hand-over learned: once a segment.
  p.handover_ms = 0.25;
  EXPECT_NEAR(split_latency_at_rows(p, curves, 4), at_4 + 3 * 0.25, 1e-9);
  EXPECT_THROW(split_latency_at_rows(p, {curves[0]}, 4), InvalidArgument);
}

// A split segment's time at a row count that a pipeline's runs measured comes first there, in
// the curve the run's summary and the pipeline's split option read; elsewhere the prediction,
// scaled by how far it missed the nearest measured times.
TEST(PartitionRows, ASegmentsTimeMeasuredAtARowCountComesFirstInItsCurveAndScalesItsPredictionsElsewhere) {
  const Partition p = split_at_8(0.01);
  ASSERT_EQ(p.segments.size(), 3u);
  const std::vector<RowsCurve> predicted = segment_curves(p, nullptr);
  CostHistory history;
  history.record(CostHistory::segment_rows_key(p.ran_key(p.segments[1]), 4), 7.5);
  history.record(CostHistory::segment_rows_key(p.ran_key(p.segments[1]), 3), 6.0);  // between the curve's points
  const std::vector<RowsCurve> curves = segment_curves(p, &history);
  ASSERT_EQ(curves.size(), 3u);
  EXPECT_EQ(curves[0].points, predicted[0].points);
  EXPECT_EQ(curves[2].points, predicted[2].points);
  EXPECT_DOUBLE_EQ(curves[1].at(4), 7.5);
  EXPECT_DOUBLE_EQ(curves[1].at(3), 6.0);
  EXPECT_EQ(curves[1].points.size(), predicted[1].points.size() + 1);
  // Below the measured rows, the prediction by the nearest one's miss (3 rows'); at the analysed
  // 8 rows, the prediction the placement was chosen on.
  const double at_3 = 6.0 / predicted[1].at(3);
  ASSERT_GT(std::abs(at_3 - 1), 0.01) << "the test's measured times must miss the prediction";
  EXPECT_DOUBLE_EQ(curves[1].at(2), predicted[1].at(2) * at_3);
  EXPECT_DOUBLE_EQ(curves[1].at(1), predicted[1].at(1) * at_3);
  EXPECT_DOUBLE_EQ(curves[1].at(8), predicted[1].at(8));
  // The same onto curves kept from before (a placement read back); once more changes nothing (the
  // curve holds the measured times); and nothing without a history.
  const std::vector<RowsCurve> kept = with_measured_rows(p, predicted, &history);
  for (std::size_t k = 0; k < 3; ++k) EXPECT_EQ(kept[k].points, curves[k].points) << "segment " << k;
  for (std::size_t k = 0; k < 3; ++k) EXPECT_EQ(with_measured_rows(p, curves, &history)[k].points, curves[k].points);
  EXPECT_EQ(with_measured_rows(p, predicted, nullptr)[1].points, predicted[1].points);
}

// Between a time measured at few rows and the analysed rows, the prediction is scaled along the
// line from that time's miss to none: a GPU segment's floor of launches shows at few rows, and
// the placement's own prediction stands at its rows.
TEST(PartitionRows, BetweenATimeMeasuredAtFewRowsAndTheAnalysedRowsAPredictionIsScaledAlongALine) {
  const Partition p = split_at_8(0.01);
  ASSERT_EQ(p.segments.size(), 3u);
  const std::vector<RowsCurve> predicted = segment_curves(p, nullptr);
  ASSERT_EQ(predicted[1].points.size(), 4u);  // 1, 2, 4 and 8 rows
  CostHistory history;
  history.record(CostHistory::segment_rows_key(p.ran_key(p.segments[1]), 2), 0.5 * predicted[1].at(2));
  const std::vector<RowsCurve> curves = segment_curves(p, &history);
  EXPECT_DOUBLE_EQ(curves[1].at(2), 0.5 * predicted[1].at(2));
  EXPECT_DOUBLE_EQ(curves[1].at(1), 0.5 * predicted[1].at(1));
  // 4 rows are a third of the way from 2 to 8: the ratio there a third of the way from 0.5 to 1.
  EXPECT_DOUBLE_EQ(curves[1].at(4), (0.5 + 0.5 / 3) * predicted[1].at(4));
  EXPECT_DOUBLE_EQ(curves[1].at(8), predicted[1].at(8));
}

}  // namespace
}  // namespace redwood::runtime
