// The partitioner's cost model (runtime/cost_model.hpp) and the profile of a placement
// (runtime/partition_profile.hpp): node and segment times measured, timed alone while planning,
// kept in the cost history and predicted from it. On the stand-in accelerator of
// split_fixture.hpp, so that it runs on a machine without a GPU.

#include "core/error.hpp"
#include "core/host_threads.hpp"
#include "core/model_runner.hpp"
#include "core/onnx/onnx_import.hpp"
#include "core/op_registry.hpp"
#include "runtime/cpu_runner.hpp"
#include "runtime/device_segment_time.hpp"
#include "runtime/host_segment_time.hpp"
#include "runtime/partition.hpp"
#include "runtime/partition_profile.hpp"
#include "runtime/partition_rows.hpp"
#include "runtime/placed_runner.hpp"
#include "runtime/split_runner.hpp"
#include "runtime/stand_in_accelerator.hpp"
#include "split_fixture.hpp"
#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include <sys/resource.h>

namespace redwood::runtime {
namespace {

using namespace split_fixture;

TEST(CostModel, CountsAConvolutionsMultiplyAdds) {
  Node conv;
  conv.op_type = "Conv";
  const std::vector<TensorDesc> in = {{DType::kF32, {1, 4, 8, 8}}, {DType::kF32, {8, 4, 3, 3}}, {DType::kF32, {8}}};
  const std::vector<TensorDesc> out = {{DType::kF32, {1, 8, 8, 8}}};
  const NodeWork w = node_work(conv, in, out);
  EXPECT_DOUBLE_EQ(w.flops, 2.0 * 8 * 8 * 8 * 4 * 3 * 3);
  EXPECT_DOUBLE_EQ(w.bytes, 4.0 * (256 + 288 + 8 + 512));
}

TEST(CostModel, MeasuredTimesComeFirstAndCalibrateTheRoofline) {
  CostHistory history;
  CostModel costs({stand_in_profile("cpu", 10, 10)}, "fp32", &history);
  Node relu;
  relu.op_type = "Relu";
  relu.name = "relu";
  const std::vector<TensorDesc> io = {{DType::kF32, {1000}}};
  const double roofline = costs.roofline_ms(0, node_work(relu, io, io));
  EXPECT_FALSE(costs.node_ms(0, relu, io, io).measured);
  const std::string key = CostHistory::key(costs.profiles()[0], "fp32", relu, io, io);
  history.record(key, 1.0);
  history.record(key, 3.0);
  history.record(key, 2.0);
  const CostEstimate e = costs.node_ms(0, relu, io, io);
  EXPECT_TRUE(e.measured);
  EXPECT_DOUBLE_EQ(e.ms, 2.0);  // the median
  costs.calibrate({{0, roofline, 4 * roofline}});
  EXPECT_DOUBLE_EQ(costs.calibration(0), 4.0);
}

// --- The profile pass (runtime/partition_profile.hpp) ---

std::size_t host_segment(const Partition& p) {
  for (std::size_t k = 0; k < p.segments.size(); ++k) {
    if (p.segments[k].device == 0) return k;
  }
  ADD_FAILURE() << "no host segment";
  return 0;
}

TEST(PartitionProfile, AHostSegmentPaysForTheLayoutsOfTheValuesCrossingItsEdges) {
  // The softmax segment takes c1 from the accelerator and gives p back: each read and written
  // once at the host's memory bandwidth; the model's own inputs and outputs are not counted.
  const Partition p = partition_model(model(), {{2, 4, 8, 8}}, options());
  const std::size_t k = host_segment(p);
  std::vector<double> free_edges, paid;
  SplitCosts free_layouts = p.split_costs();
  free_layouts.host_layout_gbps = 0;
  split_latency_ms(p.analysis, p.open, p.segments, free_layouts, &free_edges);
  split_latency_ms(p.analysis, p.open, p.segments, p.split_costs(), &paid);
  double edge_bytes = 0;
  std::set<std::string> model_values{"x", "y", "z"};
  for (const auto* values : {&p.segments[k].inputs, &p.segments[k].outputs}) {
    for (const auto& v : *values) {
      if (model_values.count(v) == 0) edge_bytes += static_cast<double>(shape_numel(p.analysis.values.at(v).shape)) * 4;
    }
  }
  ASSERT_GT(edge_bytes, 0.0);
  EXPECT_DOUBLE_EQ(p.host_layout_gbps, p.profiles[0].memory_gbps);
  EXPECT_NEAR(paid[k] - free_edges[k], 2 * edge_bytes / (p.host_layout_gbps * 1e6), 1e-12);
  for (std::size_t j = 0; j < paid.size(); ++j) {
    if (p.segments[j].device == 0) continue;
    EXPECT_DOUBLE_EQ(paid[j], free_edges[j]) << "segment " << j;
  }
}

TEST(PartitionProfile, RecordsTheAcceleratorsOwnNodeTimesAndTheAnalysissCpuTimes) {
  const Partition p = partition_model(model(), {{2, 4, 8, 8}}, options());
  ASSERT_FALSE(p.single_device());
  CostHistory history;
  const std::size_t recorded = record_node_times(p, history, 3);
  const Graph& g = *p.analysis.graph;
  auto key = [&](int device, const std::string& name) {
    for (std::size_t n = 0; n < g.nodes.size(); ++n) {
      if (g.nodes[n].name == name) {
        return CostHistory::key(p.profiles[static_cast<std::size_t>(device)], "fp32", g.nodes[n], p.analysis.input_descs(n),
                                p.analysis.output_descs(n));
      }
    }
    ADD_FAILURE() << "no node " << name;
    return std::string();
  };
  // Every placed node has its CPU time (the analysis ran them all there); conv1, on the
  // accelerator, also its time there, from the accelerator's own runner (time_nodes).
  for (const char* name : {"conv1", "softmax", "conv2", "add"}) {
    const auto ms = history.find(key(0, name));
    ASSERT_TRUE(ms.has_value()) << name;
    EXPECT_GT(*ms, 0.0) << name;
  }
  const auto accel = history.find(key(1, "conv1"));
  ASSERT_TRUE(accel.has_value());
  EXPECT_GT(*accel, 0.0);
  EXPECT_FALSE(history.find(key(1, "softmax")).has_value());  // the accelerator cannot run it
  EXPECT_GT(recorded, p.analysis.placeable.size());
}

// A switch that changes only how the host waits (CUDA's `blocking_completion`) changes no time:
// the device that defines it says so, and the history's keys leave it out.
TEST(PartitionProfile, ASwitchThatChangesNoCostIsLeftOutOfTheHistorysKeys) {
  static const bool registered = [] {
    DeviceRunnerFactory f;
    f.unavailable = [] { return std::string("a test device that runs nothing"); };
    f.option_changes_costs = [](const std::string& option) { return option != "test_busy_wait"; };
    return register_device_runner("test-waits", std::move(f));
  }();
  ASSERT_TRUE(registered);
  EXPECT_EQ(cost_precision(1, "fp16", {{"test_busy_wait", "on"}, {"tma", "on"}}), "fp16 tma=on");
  EXPECT_EQ(cost_precision(1, "fp16", {{"test_busy_wait", "off"}}), cost_precision(1, "fp16"));
}

// A time measured with an accelerator's switch set (CUDA's `wgmma: off`) predicts only runs with
// it set: the history's node and cut keys name the switches beside the precision.
TEST(PartitionProfile, NodeTimesMeasuredWithDeviceOptionsPredictOnlyRunsWithThem) {
  EXPECT_EQ(cost_precision(0, "fp16", {{"wgmma", "off"}}), "fp32");  // the host computes fp32
  EXPECT_EQ(cost_precision(1, "fp16"), "fp16");
  EXPECT_EQ(cost_precision(1, "fp16", {{"wgmma", "off"}, {"tma", "on"}}), "fp16 tma=on wgmma=off");
  PartitionOptions o = options();
  o.device_options = {{"wgmma", "off"}};
  const Partition p = partition_model(model(), {{2, 4, 8, 8}}, o);
  ASSERT_FALSE(p.single_device());
  CostHistory history;
  record_node_times(p, history, 1);
  const Graph& g = *p.analysis.graph;
  std::size_t conv1 = 0;
  while (conv1 < g.nodes.size() && g.nodes[conv1].name != "conv1") ++conv1;
  ASSERT_LT(conv1, g.nodes.size());
  const auto ins = p.analysis.input_descs(conv1);
  const auto outs = p.analysis.output_descs(conv1);
  EXPECT_TRUE(history.find(CostHistory::key(p.profiles[1], "fp32 wgmma=off", g.nodes[conv1], ins, outs)).has_value());
  EXPECT_FALSE(history.find(CostHistory::key(p.profiles[1], "fp32", g.nodes[conv1], ins, outs)).has_value());
  EXPECT_TRUE(CostModel(p.profiles, "fp32", &history, o.device_options).node_ms(1, g.nodes[conv1], ins, outs).measured);
  EXPECT_FALSE(CostModel(p.profiles, "fp32", &history).node_ms(1, g.nodes[conv1], ins, outs).measured);
  EXPECT_TRUE(CostModel(p.profiles, "fp32", &history).node_ms(0, g.nodes[conv1], ins, outs).measured);  // the host's
  for (const Segment& s : p.segments) {
    const bool named = p.cut_key(s).find("|fp32 wgmma=off|") != std::string::npos;
    EXPECT_EQ(named, s.device == 1) << p.cut_key(s);
  }
}

// A device whose passes merge conv2 into a neighbour: its timing names every other node of the
// graph it is given, 1 ms each, and the whole run takes 1 ms more (steps its passes added).
const char* merging_accelerator() {
  static const bool registered = [] {
    DeviceRunnerFactory f = device_runner_registry().at(kAccel);
    f.time_nodes = [](std::shared_ptr<const Graph> graph, const std::vector<Shape>&, const RunnerConfig&, int) {
      NodeTimes t;
      for (const Node& n : graph->nodes) {
        if (n.name != "conv2") t.by_node[n.name] = 1.0;
      }
      t.whole_ms = static_cast<double>(t.by_node.size()) + 1.0;
      return t;
    };
    return register_device_runner("test-merging-accelerator", std::move(f));
  }();
  (void)registered;
  return "test-merging-accelerator";
}

TEST(PartitionProfile, ANodeTheDevicesPassesMergedCostsNothingThereAndTheSegmentsAddUp) {
  PartitionOptions o = options();
  o.devices = {"cpu", merging_accelerator()};
  o.profiles[1].device = o.profiles[1].name = o.devices[1];
  o.supports[o.devices[1]] = [](const Graph&, const Node& node, const std::vector<TensorDesc>&) {
    return node.op_type == "Softmax" ? std::string("no") : std::string();
  };
  const Partition p = partition_model(model(), {{2, 4, 8, 8}}, o);
  CostHistory history;
  record_node_times(p, history, 1);
  const Graph& g = *p.analysis.graph;
  bool conv2_on_device = false;
  for (const Segment& s : p.segments) {
    if (s.device != 1) continue;
    double nodes_ms = 0, named = 0;
    for (const Node& n : s.graph->nodes) named += n.name != "conv2" ? 1 : 0;
    for (std::size_t n : s.nodes) {
      if (p.analysis.host_node[n]) continue;
      const auto ms = history.find(CostHistory::key(p.profiles[1], "fp32", g.nodes[n], p.analysis.input_descs(n),
                                                    p.analysis.output_descs(n)));
      ASSERT_TRUE(ms.has_value()) << g.nodes[n].name << " has no time on the device";
      if (g.nodes[n].name == "conv2") {
        conv2_on_device = true;
        EXPECT_DOUBLE_EQ(*ms, 0.0);  // merged: its time is in the timed nodes'
      } else {
        EXPECT_GT(*ms, 0.0) << g.nodes[n].name;
      }
      nodes_ms += *ms;
    }
    EXPECT_NEAR(nodes_ms, named + 1.0, 1e-9) << s.graph->name << ": its nodes add up to its whole run, once";
  }
  EXPECT_TRUE(conv2_on_device);
}

TEST(PartitionProfile, ASegmentMeasuredBeforeIsPredictedFromItsOwnTime) {
  const Partition first = partition_model(model(), {{2, 4, 8, 8}}, options());
  const std::size_t k = host_segment(first);
  const std::vector<SegmentTimes> from_nodes = predict_segments(first);
  EXPECT_FALSE(from_nodes[k].measured_before);
  EXPECT_DOUBLE_EQ(from_nodes[k].predicted_ms, from_nodes[k].from_nodes_ms);

  CostHistory history;
  const double measured = from_nodes[k].from_nodes_ms / 4;
  history.record(first.ran_key(first.segments[k]), measured);
  PartitionOptions o = options();
  o.history = &history;
  const Partition again = partition_model(model(), {{2, 4, 8, 8}}, o);
  ASSERT_EQ(again.placement.device, first.placement.device);
  const std::vector<SegmentTimes> t = predict_segments(again);
  EXPECT_TRUE(t[k].measured_before);
  EXPECT_DOUBLE_EQ(t[k].predicted_ms, measured);
  EXPECT_DOUBLE_EQ(t[k].from_nodes_ms, from_nodes[k].from_nodes_ms);
  for (std::size_t j = 0; j < t.size(); ++j) EXPECT_EQ(t[j].measured_before, j == k) << "segment " << j;
  EXPECT_NEAR(again.run_latency_ms(again.placement.device),
              first.run_latency_ms(first.placement.device) - (from_nodes[k].from_nodes_ms - measured), 1e-9);

  // The key is the segment's nodes at their shapes, on that device: another batch is another key.
  const Partition other_batch = partition_model(model(), {{3, 4, 8, 8}}, o);
  EXPECT_NE(other_batch.cut_key(other_batch.segments[host_segment(other_batch)]), first.cut_key(first.segments[k]));
  EXPECT_FALSE(predict_segments(other_batch)[host_segment(other_batch)].measured_before);
  EXPECT_NE(first.cut_key(first.segments[k]), first.cut_key(first.segments[k == 0 ? 1 : 0]));
}

// Two segments of the same work (the two convolutions around the Softmax: the same op at the
// same shapes, the same values crossing) share a cut key, and with it their timing alone; each
// keeps its measured times under its own key, since the same work runs at other speeds at other
// places in a split (rec's first two attention Softmax segments in the OCR pipeline, 12 starts on
// two H100 leases: the one after the long GPU segment 0.22-0.39 ms, the other 0.16-0.26).
TEST(PartitionProfile, TwoSegmentsOfTheSameWorkShareTheirTimingAloneButNotTheirMeasuredTimes) {
  const Partition p = partition_model(testing::softmax_between_convs_model(), {{2, 16, 32, 32}}, options());
  ASSERT_EQ(p.segments.size(), 3u);
  const Segment& first = p.segments[0];
  const Segment& last = p.segments[2];
  ASSERT_NE(first.device, 0);
  ASSERT_EQ(last.device, first.device);
  EXPECT_EQ(p.cut_key(first), p.cut_key(last));
  EXPECT_NE(p.ran_key(first), p.ran_key(last));
  EXPECT_NE(p.ran_key(first), p.cut_key(first));
  EXPECT_EQ(p.ran_key(first).rfind("cut ", 0), 0u) << "a segment's measured time is a cut entry of the history";

  // A time measured for the first predicts the first only.
  CostHistory history;
  const std::vector<SegmentTimes> from_nodes = predict_segments(p);
  ASSERT_DOUBLE_EQ(from_nodes[0].predicted_ms, from_nodes[2].predicted_ms);
  const double measured = 3 * from_nodes[0].predicted_ms + 1;
  history.record(p.ran_key(first), measured);
  PartitionOptions o = options();
  o.history = &history;
  const Partition again = partition_model(testing::softmax_between_convs_model(), {{2, 16, 32, 32}}, o);
  ASSERT_EQ(again.placement.device, p.placement.device);
  const std::vector<SegmentTimes> t = predict_segments(again);
  EXPECT_TRUE(t[0].measured_before);
  EXPECT_DOUBLE_EQ(t[0].predicted_ms, measured);
  EXPECT_FALSE(t[2].measured_before);
  EXPECT_DOUBLE_EQ(t[2].predicted_ms, from_nodes[2].predicted_ms);

  // measure_partition keeps each one's time under its own key.
  CostHistory ran;
  const PartitionTimes times = measure_partition(p, RunnerConfig{}, 2, 1, &ran);
  ASSERT_EQ(times.segments.size(), 3u);
  EXPECT_EQ(ran.find(p.ran_key(first)), times.segments[0].measured_ms);
  EXPECT_EQ(ran.find(p.ran_key(last)), times.segments[2].measured_ms);
  EXPECT_FALSE(ran.find(p.cut_key(first)).has_value());
}

// This machine's real times, the Softmax on the host and every other node on the accelerator:
// every node pinned, since with real times the placement (and the cut) would follow the timing's
// noise, and the host would take this small model whole.
PartitionOptions timed_split_options() {
  PartitionOptions o = options();
  o.use_analysis_times = true;
  o.pinned = {{"conv1", kAccel}, {"softmax", "cpu"}, {"conv2", kAccel}, {"reshape", kAccel}, {"add", kAccel}};
  return o;
}

TEST(PartitionProfile, AHostSegmentOfASplitIsTimedOnTheHostWhilePlanning) {
  PartitionOptions o = timed_split_options();
  const Partition p = partition_model(model(), {{2, 4, 8, 8}}, o);
  ASSERT_FALSE(p.single_device());
  const std::size_t k = host_segment(p);
  // Timed after a long idle and with its threads woken; it follows a short accelerator segment,
  // so the woken timing stands for it.
  ASSERT_NE(p.host_times.find(p.cut_key(p.segments[k])), p.host_times.end());
  const auto timed = p.host_woken_times.find(p.cut_key(p.segments[k]));
  ASSERT_NE(timed, p.host_woken_times.end());
  EXPECT_GT(timed->second, 0.0);
  const std::vector<SegmentTimes> t = predict_segments(p);
  EXPECT_LT(t[k].host_idle_ms, kShortIdleMs);
  for (std::size_t j = 0; j < t.size(); ++j) {
    EXPECT_TRUE(t[j].timed_alone) << "segment " << j;  // the accelerator's too (on its device)
    EXPECT_FALSE(t[j].measured_before) << "segment " << j;
  }
  EXPECT_DOUBLE_EQ(t[k].predicted_ms, timed->second);
  std::vector<double> compute;
  SplitCosts costs = p.split_costs();
  costs.measured = [&](const Segment& s, double idle) { return p.timed_segment_ms(s, idle); };
  split_latency_ms(p.analysis, p.open, p.segments, costs, &compute);
  EXPECT_DOUBLE_EQ(compute[k], timed->second);
  EXPECT_DOUBLE_EQ(p.run_latency_ms(p.placement.device), split_latency_ms(p.analysis, p.open, p.segments, costs));

  // A segment measured before keeps its measured time and is not timed again.
  CostHistory history;
  history.record(p.ran_key(p.segments[k]), 1234.5);
  o.history = &history;
  const Partition again = partition_model(model(), {{2, 4, 8, 8}}, o);
  ASSERT_EQ(again.segments.size(), p.segments.size());
  EXPECT_EQ(again.host_times.count(again.cut_key(again.segments[k])), 0u);
  EXPECT_TRUE(predict_segments(again)[k].measured_before);
  EXPECT_DOUBLE_EQ(predict_segments(again)[k].predicted_ms, 1234.5);

  // Costs from the roofline alone time nothing: placements that do not depend on the machine.
  const Partition roofline = partition_model(model(), {{2, 4, 8, 8}}, options());
  EXPECT_TRUE(roofline.host_times.empty());
  EXPECT_TRUE(roofline.device_times.empty());
}

// A device runner whose runners cannot be made: what a device does when a segment fails to plan.
std::atomic<int> failing_makes{0};  // the runners it was asked for
const char* failing_accelerator() {
  static const char* const name = testing::register_test_accelerator(
      "failing-accelerator", [](std::shared_ptr<const Graph> graph, const RunnerConfig&) -> std::unique_ptr<ModelRunner> {
        ++failing_makes;
        throw Unsupported(fmt::format("{}: this device plans nothing", graph->name));
      });
  return name;
}

TEST(PartitionProfile, AnAcceleratorSegmentOfASplitIsTimedOnItsDeviceWhilePlanning) {
  EXPECT_TRUE(can_time_on(kAccel));
  EXPECT_FALSE(can_time_on("cpu"));  // the host's segments are timed by time_host_segment
  EXPECT_FALSE(can_time_on("no-such-device"));

  PartitionOptions o = timed_split_options();
  const Partition p = partition_model(model(), {{2, 4, 8, 8}}, o);
  ASSERT_FALSE(p.single_device());
  // Its runners' batches are the planner's, not a run's: off the GPU's busy time.
  EXPECT_FALSE(p.segment_timing_config().device_clock);
  EXPECT_EQ(p.segment_timing_config().slots, 1);
  const std::vector<SegmentTimes> t = predict_segments(p);
  std::size_t accelerator_segments = 0;
  for (std::size_t j = 0; j < p.segments.size(); ++j) {
    if (p.segments[j].device == 0) continue;
    ++accelerator_segments;
    const auto timed = p.device_times.find(p.cut_key(p.segments[j]));
    ASSERT_NE(timed, p.device_times.end()) << "segment " << j;
    EXPECT_GT(timed->second, 0.0);
    EXPECT_DOUBLE_EQ(*p.timed_segment_ms(p.segments[j]), timed->second);
    EXPECT_TRUE(t[j].timed_alone);
    EXPECT_DOUBLE_EQ(t[j].predicted_ms, timed->second);
  }
  EXPECT_GE(accelerator_segments, 1u);

  // Timed directly: the runner's compute time of a batch, the median of the runs.
  const std::size_t a = p.segments[0].device != 0 ? 0 : p.segments.size() - 1;
  ASSERT_NE(p.segments[a].device, 0);
  const auto direct = time_device_segment(p.analysis, p.segments[a], kAccel, RunnerConfig{}, 3, 1);
  ASSERT_TRUE(direct.has_value());
  EXPECT_GT(*direct, 0.0);
  EXPECT_THROW(time_device_segment(p.analysis, p.segments[a], kAccel, RunnerConfig{}, 0), InvalidArgument);
  // A segment its device cannot plan is not timed (its runner will say why when the split runs).
  EXPECT_EQ(time_device_segment(p.analysis, p.segments[a], failing_accelerator(), RunnerConfig{}), std::nullopt);

  // A segment measured before keeps its measured time and is not timed again.
  CostHistory history;
  history.record(p.ran_key(p.segments[a]), 4321.0);
  o.history = &history;
  const Partition again = partition_model(model(), {{2, 4, 8, 8}}, o);
  EXPECT_EQ(again.device_times.count(again.cut_key(again.segments[a])), 0u);
  EXPECT_DOUBLE_EQ(predict_segments(again)[a].predicted_ms, 4321.0);
}

// A pipeline's batches form below the rows its split was placed at: the split's accelerator
// segments are timed there too, and their curves against rows hold those times.
TEST(PartitionProfile, AnAcceleratorSegmentIsTimedAtTheRowsAPipelinesBatchesMayHave) {
  Partition p = partition_model(model(), {{4, 4, 8, 8}}, timed_split_options());
  ASSERT_FALSE(p.single_device());
  ASSERT_EQ(analysed_rows(p), 4);
  time_segments_at_rows(p, {1, 2, 4, 8, 2});  // 4 rows are the analysed ones, 8 beyond them
  std::size_t accelerator_segments = 0;
  for (const Segment& s : p.segments) {
    const auto it = p.device_row_times.find(p.cut_key(s));
    if (s.device == 0) {
      EXPECT_EQ(it, p.device_row_times.end()) << "a host segment is left to its nodes";
      continue;
    }
    ++accelerator_segments;
    ASSERT_NE(it, p.device_row_times.end());
    ASSERT_EQ(it->second.size(), 2u);
    EXPECT_GT(it->second.at(1), 0.0);
    EXPECT_GT(it->second.at(2), 0.0);
  }
  EXPECT_EQ(p.device_row_times.size(), accelerator_segments);

  // The curves hold the timed points; a time a pipeline's runs measured comes first.
  const std::size_t a = p.segments[0].device != 0 ? 0 : p.segments.size() - 1;
  const std::string key = p.cut_key(p.segments[a]);
  const std::vector<double> at_analysed = predicted_segment_ms(p);
  std::vector<RowsCurve> curves = segment_curves(p, nullptr);
  EXPECT_DOUBLE_EQ(curves[a].at(1), p.device_row_times.at(key).at(1));
  EXPECT_DOUBLE_EQ(curves[a].at(2), p.device_row_times.at(key).at(2));
  EXPECT_DOUBLE_EQ(curves[a].at(4), at_analysed[a]);
  CostHistory history;
  history.record(CostHistory::segment_rows_key(p.ran_key(p.segments[a]), 2), 9.0);
  curves = segment_curves(p, &history);
  EXPECT_DOUBLE_EQ(curves[a].at(2), 9.0);
  EXPECT_DOUBLE_EQ(curves[a].at(1), p.device_row_times.at(key).at(1));

  // Directly: by one runner at each count; none where the device plans nothing; rows must be some.
  const auto direct = time_device_segment_at_rows(p.analysis, p.segments[a], kAccel, RunnerConfig{}, {3, 1}, 2, 1);
  EXPECT_EQ(direct.size(), 2u);
  EXPECT_TRUE(time_device_segment_at_rows(p.analysis, p.segments[a], failing_accelerator(), RunnerConfig{}, {1}).empty());
  EXPECT_THROW(time_device_segment_at_rows(p.analysis, p.segments[a], kAccel, RunnerConfig{}, {0}), InvalidArgument);

  // A roofline plan times nothing, at any rows.
  Partition roofline = partition_model(model(), {{4, 4, 8, 8}}, options());
  time_segments_at_rows(roofline, {1, 2});
  EXPECT_TRUE(roofline.device_row_times.empty());
}

// A device runner that records the configs its runners are made with; the CPU runner runs them.
std::mutex recorded_mutex;
std::vector<RunnerConfig> recorded_configs;
const char* recording_accelerator() {
  static const char* const name = testing::register_test_accelerator(
      "recording-accelerator", [](std::shared_ptr<const Graph> graph, const RunnerConfig& config) {
        {
          std::lock_guard lock(recorded_mutex);
          recorded_configs.push_back(config);
        }
        RunnerConfig host = config;
        host.device_options.clear();
        return make_cpu_runner(std::move(graph), host);
      });
  return name;
}

// A model's accelerator options (CUDA's `wgmma: off`) and GPU change what its segments cost there:
// they are timed with them, as the split's runners run them.
TEST(PartitionProfile, AcceleratorSegmentsAreTimedWithTheModelsDeviceOptionsAndGpu) {
  const std::string device = recording_accelerator();
  PartitionOptions o = timed_split_options();
  o.devices = {"cpu", device};
  o.profiles = {stand_in_profile("cpu", 10, 10), stand_in_profile(device, 100, 15)};
  o.pinned = {{"conv1", device}, {"softmax", "cpu"}, {"conv2", device}, {"reshape", device}, {"add", device}};
  o.device_options = {{"wgmma", "off"}};
  o.device_index = 2;
  {
    std::lock_guard lock(recorded_mutex);
    recorded_configs.clear();
  }
  const Partition p = partition_model(model(), {{2, 4, 8, 8}}, o);
  ASSERT_FALSE(p.single_device());
  EXPECT_EQ(p.device_options, o.device_options);
  EXPECT_EQ(p.device_index, 2);
  EXPECT_FALSE(p.device_times.empty());
  std::lock_guard lock(recorded_mutex);
  ASSERT_EQ(recorded_configs.size(), p.device_times.size());  // a runner for each segment timed
  for (const RunnerConfig& c : recorded_configs) {
    EXPECT_EQ(c.device_options, o.device_options);
    EXPECT_EQ(c.device, 2);
    EXPECT_EQ(c.slots, 1);
    EXPECT_EQ(c.precision, o.precision);
  }
}

TEST(PartitionProfile, AnAcceleratorThatCannotRunASegmentLeavesItToItsNodesTimes) {
  for (const std::string& device : {std::string(failing_accelerator()), std::string("registry-lacks-it")}) {
    PartitionOptions o = timed_split_options();
    o.devices = {"cpu", device};
    o.profiles = {stand_in_profile("cpu", 10, 10), stand_in_profile(device, 10000, 1000)};
    o.supports[device] = [](const Graph& g, const Node& n, const std::vector<TensorDesc>& in) {
      return testing::all_but_softmax(g, n, in, "fp32");
    };
    o.pinned = {{"conv1", device}, {"softmax", "cpu"}, {"conv2", device}, {"reshape", device}, {"add", device}};
    const int makes_before = failing_makes.load();
    const Partition p = partition_model(model(), {{2, 4, 8, 8}}, o);
    ASSERT_FALSE(p.single_device()) << device;
    EXPECT_TRUE(p.device_times.empty()) << device;
    // Every candidate cut is the same here (every node pinned): each segment is tried once.
    const auto accelerator_segments = std::count_if(p.segments.begin(), p.segments.end(), [](const Segment& s) { return s.device != 0; });
    EXPECT_EQ(failing_makes.load() - makes_before, device == failing_accelerator() ? accelerator_segments : 0) << device;
    EXPECT_FALSE(p.host_times.empty()) << device;  // the host's segment is still timed
    const std::vector<SegmentTimes> t = predict_segments(p);
    for (std::size_t j = 0; j < t.size(); ++j) {
      if (p.segments[j].device == 0) continue;
      EXPECT_FALSE(t[j].timed_alone) << device << ", segment " << j;
      EXPECT_DOUBLE_EQ(t[j].predicted_ms, t[j].from_nodes_ms) << device << ", segment " << j;
    }
  }
}

TEST(PartitionProfile, APartitionMadeAgainKeepsWhatTheFirstTimed) {
  PartitionOptions o = timed_split_options();
  const Partition first = partition_model(model(), {{2, 4, 8, 8}}, o);
  ASSERT_FALSE(first.single_device());
  ASSERT_FALSE(first.host_times.empty());
  ASSERT_FALSE(first.device_times.empty());
  o.timed_before = &first;
  const Partition again = partition_model(model(), {{2, 4, 8, 8}}, o);
  // The very timings (a segment timed again would read another time): nothing was run again.
  EXPECT_EQ(again.host_times, first.host_times);
  EXPECT_EQ(again.device_times, first.device_times);
  EXPECT_EQ(again.host_threads, first.host_threads);
  EXPECT_EQ(again.host_segment_threads(), first.host_segment_threads());
  // What the timing cost: the first plan timed every segment it kept, the second none.
  EXPECT_EQ(static_cast<std::size_t>(first.timing_spent.host_segments), first.host_times.size());
  EXPECT_EQ(static_cast<std::size_t>(first.timing_spent.device_segments), first.device_times.size());
  EXPECT_GT(first.timing_spent.host_s, 0.0);
  EXPECT_GT(first.timing_spent.device_s, 0.0);
  EXPECT_EQ(again.timing_spent.host_segments + again.timing_spent.device_segments, 0);
  EXPECT_EQ(again.timing_spent.host_s + again.timing_spent.device_s, 0.0);
  // Another batch is another cut: its segments are timed.
  const Partition other = partition_model(model(), {{3, 4, 8, 8}}, o);
  const std::string key = other.cut_key(other.segments[host_segment(other)]);
  EXPECT_EQ(first.host_times.count(key), 0u);
  EXPECT_EQ(other.host_times.count(key), 1u);
}

TEST(PartitionProfile, TheThreadCountsAHostSegmentIsTimedAt) {
  EXPECT_EQ(host_thread_counts(1), (std::vector<int>{1}));
  EXPECT_EQ(host_thread_counts(0), (std::vector<int>{1}));
  EXPECT_EQ(host_thread_counts(2), (std::vector<int>{1, 2}));
  EXPECT_EQ(host_thread_counts(6), (std::vector<int>{1, 2, 4, 6}));
  EXPECT_EQ(host_thread_counts(16), (std::vector<int>{1, 2, 4, 8, 16}));
}

// Which counts are timed, and the choice: the fewest threads within 5 % of the best 90th
// percentile, from the most threads down until two counts in a row are beyond it.
TEST(PartitionProfile, HostThreadsAreTimedFromTheMostDownAndTheFewestWithinFivePercentChosen) {
  const std::vector<int> counts = host_thread_counts(16);
  const auto choose = [&](std::map<int, double> p90, std::vector<int>* timed) {
    return choose_threads(counts, [&, timed](int threads) {
      timed->push_back(threads);
      return Spread{p90.at(threads) / 2, p90.at(threads) / 2, p90.at(threads)};
    });
  };
  // Work that spreads over the threads: 8 and 4 slower than 16, so 2 and 1 are not timed.
  std::vector<int> timed;
  HostThreadsChoice c = choose({{16, 5.0}, {8, 9.0}, {4, 17.0}, {2, 33.0}, {1, 65.0}}, &timed);
  EXPECT_EQ(timed, (std::vector<int>{16, 8, 4}));
  EXPECT_EQ(c.threads, 16);
  EXPECT_DOUBLE_EQ(c.p90_ms, 5.0);
  EXPECT_DOUBLE_EQ(c.ms, 2.5);
  // A short segment, fastest on few threads: every count timed, the fewest within 5 % chosen.
  timed.clear();
  c = choose({{16, 0.4}, {8, 0.3}, {4, 0.2}, {2, 0.204}, {1, 0.26}}, &timed);
  EXPECT_EQ(timed, (std::vector<int>{16, 8, 4, 2, 1}));
  EXPECT_EQ(c.threads, 2);
  // One count beyond the best is not enough to stop: 4 is slow, 2 the best.
  timed.clear();
  c = choose({{16, 1.0}, {8, 1.0}, {4, 1.2}, {2, 0.9}, {1, 2.0}}, &timed);
  EXPECT_EQ(timed, (std::vector<int>{16, 8, 4, 2, 1}));
  EXPECT_EQ(c.threads, 2);
  timed.clear();
  EXPECT_EQ(choose({{16, 1.0}, {8, 1.0}, {4, 1.0}, {2, 1.0}, {1, 1.0}}, &timed).threads, 1);
  // A short segment whose team's wake-up outweighs its work: 4 and 2 beyond 8, one thread timed
  // all the same (it wakes no team), and the fastest.
  timed.clear();
  c = choose({{16, 0.3}, {8, 0.2}, {4, 0.25}, {2, 0.3}, {1, 0.1}}, &timed);
  EXPECT_EQ(timed, (std::vector<int>{16, 8, 4, 2, 1}));
  EXPECT_EQ(c.threads, 1);
  timed.clear();
  c = choose({{16, 0.3}, {8, 0.2}, {4, 0.25}, {2, 0.25}, {1, 0.4}}, &timed);
  EXPECT_EQ(timed, (std::vector<int>{16, 8, 4, 2, 1}));
  EXPECT_EQ(c.threads, 8);
  // A long one: one thread is not timed.
  timed.clear();
  c = choose({{16, 3.0}, {8, 2.0}, {4, 2.5}, {2, 3.0}, {1, 1.0}}, &timed);
  EXPECT_EQ(timed, (std::vector<int>{16, 8, 4, 2}));
  EXPECT_EQ(c.threads, 8);
  EXPECT_THROW(choose_threads({}, [](int) { return Spread{}; }), InvalidArgument);
}

TEST(PartitionProfile, AHostSegmentRunsOnTheThreadsChosenByTimingAndTheNextPlanKeepsThem) {
  PartitionOptions o = timed_split_options();
  const Partition p = partition_model(model(), {{2, 4, 8, 8}}, o);
  ASSERT_FALSE(p.single_device());
  const std::size_t k = host_segment(p);
  const std::string key = p.cut_key(p.segments[k]);
  const std::vector<int> counts = host_thread_counts(process_host_threads());
  const int threads = p.segments[k].threads;
  EXPECT_NE(std::find(counts.begin(), counts.end(), threads), counts.end()) << threads << " threads";
  EXPECT_EQ(p.host_threads.at(key), threads);
  for (std::size_t j = 0; j < p.segments.size(); ++j) {
    if (j != k) {
      EXPECT_EQ(p.segments[j].threads, 0) << "segment " << j << ": the accelerator's";
    }
  }
  EXPECT_EQ(p.host_segment_threads(), std::vector<int>{threads});
  // The placement cut again (as a baseline measured against it is) runs there too; a model whole
  // on the host, on the process's count.
  const std::vector<Segment> cut = p.cut(p.placement.device);
  ASSERT_EQ(cut.size(), p.segments.size());
  EXPECT_EQ(cut[k].threads, threads);
  const std::vector<Segment> host_alone = p.cut(std::vector<int>(p.placement.device.size(), 0));
  ASSERT_EQ(host_alone.size(), 1u);
  EXPECT_EQ(host_alone[0].threads, 0);
  const auto choice = choose_host_threads(p.analysis, p.segments[k], 3);
  ASSERT_TRUE(choice.has_value());
  EXPECT_NE(std::find(counts.begin(), counts.end(), choice->threads), counts.end());
  EXPECT_GT(choice->ms, 0.0);
  EXPECT_GE(choice->p90_ms, choice->ms);

  // Its runner runs there, and a split run keeps the count with the segment's measured time.
  auto runner = make_split_runner(p, RunnerConfig{});
  EXPECT_NE(runner->description().find(fmt::format("cpu ({} thread(s))", threads)), std::string::npos)
      << runner->description();
  CostHistory history;
  measure_partition(p, RunnerConfig{}, 2, 1, &history);
  EXPECT_EQ(history.find(CostHistory::host_threads_key(key)), std::optional<double>(threads));
  EXPECT_TRUE(history.find(p.ran_key(p.segments[k])).has_value());

  // The next plan runs the segment on the count kept (3 here: one it would not have tried on
  // every machine), timing it there only.
  CostHistory kept;
  kept.record(CostHistory::host_threads_key(key), 3);
  o.history = &kept;
  const Partition next = partition_model(model(), {{2, 4, 8, 8}}, o);
  ASSERT_EQ(next.segments.size(), p.segments.size());
  EXPECT_EQ(next.segments[k].threads, 3);
  EXPECT_EQ(next.host_times.count(key), 1u);
  // A segment measured before any count was kept ran on the process's count: it stays there.
  CostHistory measured;
  measured.record(p.ran_key(p.segments[k]), 5.0);
  o.history = &measured;
  const Partition before = partition_model(model(), {{2, 4, 8, 8}}, o);
  EXPECT_EQ(before.segments[k].threads, 0);
  EXPECT_TRUE(before.host_segment_threads() == std::vector<int>{0});

  // A cut made again from a placement cache's entry takes the kept counts, one per host segment.
  const Partition again = partition_as_placed(p.analysis, o, p.node_devices(), {2});
  EXPECT_EQ(again.segments[k].threads, 2);
  EXPECT_THROW(partition_as_placed(p.analysis, o, p.node_devices(), {2, 2}), InvalidArgument);
  EXPECT_EQ(partition_as_placed(p.analysis, o, p.node_devices()).segments[k].threads, 0);
}

TEST(PartitionProfile, AHostSegmentsIdleIsTheTimeSinceTheHostSegmentBeforeItLessTheHandOvers) {
  // Run host, accelerator, host, the fixture's three segments: the second host segment waits for
  // the accelerator's segment and the crossings on either side of it; the first for nothing.
  const Partition p = partition_model(model(), {{2, 4, 8, 8}}, options());
  ASSERT_EQ(p.segments.size(), 3u);
  std::vector<Segment> cut = p.segments;
  cut[0].device = 0;
  cut[1].device = 1;
  cut[2].device = 0;
  SplitCosts costs = p.split_costs();
  costs.handover_ms = 0.5;
  std::vector<double> asked(cut.size(), -1);
  costs.measured = [&](const Segment& s, double idle) {
    const auto k = static_cast<std::size_t>(&s - cut.data());
    asked[k] = idle;
    return std::optional<double>(k == 1 ? 0.1 : 2.0);
  };
  std::vector<double> compute, crossing, idle;
  split_latency_ms(p.analysis, p.open, cut, costs, &compute, &crossing, &idle);
  ASSERT_EQ(idle.size(), 3u);
  EXPECT_EQ(idle[0], 0.0);        // the batch's inputs were made on the host just before it
  EXPECT_EQ(idle[1], kLongIdle);  // an accelerator's segment
  ASSERT_GT(crossing[1], 0.0);
  EXPECT_NEAR(idle[2], crossing[1] + 0.1 + crossing[2], 1e-9);
  EXPECT_EQ(asked, idle);  // each segment's time was asked for at that idle
}

TEST(PartitionProfile, AHostSegmentAfterAShortIdleIsPredictedFromItsTimingWithItsThreadsWoken) {
  const Partition p = partition_model(model(), {{2, 4, 8, 8}}, timed_split_options());
  ASSERT_FALSE(p.single_device());
  const std::size_t k = host_segment(p);
  const Segment& s = p.segments[k];
  const std::string key = p.cut_key(s);
  ASSERT_EQ(p.host_woken_times.count(key), 1u);  // timed both ways while planning
  EXPECT_GT(p.host_woken_times.at(key), 0.0);

  Partition q = p;
  q.host_times[key] = 2.0;
  q.host_woken_times[key] = 1.0;
  EXPECT_DOUBLE_EQ(q.timed_segment_ms(s, 0.0).value_or(0), 1.0);
  EXPECT_DOUBLE_EQ(q.timed_segment_ms(s, 0.9 * kShortIdleMs).value_or(0), 1.0);
  EXPECT_DOUBLE_EQ(q.timed_segment_ms(s, kShortIdleMs).value_or(0), 2.0);
  EXPECT_DOUBLE_EQ(q.timed_segment_ms(s).value_or(0), 2.0);  // no idle given: a long one
  EXPECT_EQ(q.host_timing(s, 0.0), std::optional(std::pair{1.0, true}));
  EXPECT_EQ(q.host_timing(s, kLongIdle), std::optional(std::pair{2.0, false}));
  // Here the host segment follows a short accelerator segment.
  std::vector<SegmentTimes> t = predict_segments(q);
  EXPECT_LT(t[k].host_idle_ms, kShortIdleMs);
  EXPECT_TRUE(t[k].host_woken);
  EXPECT_DOUBLE_EQ(t[k].predicted_ms, 1.0);
  // Behind a long one, the timing after a long idle stands for it.
  q.device_times[q.cut_key(q.segments[k - 1])] = 10 * kShortIdleMs;
  t = predict_segments(q);
  EXPECT_GE(t[k].host_idle_ms, kShortIdleMs);
  EXPECT_FALSE(t[k].host_woken);
  EXPECT_DOUBLE_EQ(t[k].predicted_ms, 2.0);
  // Without a woken timing (a timing kept from before), the other stands for any idle.
  q.host_woken_times.clear();
  EXPECT_DOUBLE_EQ(q.timed_segment_ms(s, 0.0).value_or(0), 2.0);
}

TEST(PartitionProfile, AHostSegmentThatCannotRunIsNotTimed) {
  const Partition p = partition_model(model(), {{2, 4, 8, 8}}, options());
  Segment broken = p.segments[host_segment(p)];
  auto graph = std::make_shared<Graph>(*broken.graph);
  for (Node& n : graph->nodes) {
    if (n.op_type == "Softmax") n.op_type = "NoSuchOp";
  }
  broken.graph = graph;
  EXPECT_FALSE(time_host_segment(p.analysis, broken).has_value());
  const auto timed = time_host_segment(p.analysis, p.segments[host_segment(p)], 1);
  ASSERT_TRUE(timed.has_value());
  EXPECT_GT(timed->ms, 0.0);
  EXPECT_GT(timed->woken_ms, 0.0);
}

TEST(PartitionProfile, TimingAHostSegmentFaultsItsOutputsInOnceNotEachRun) {
  // One Relu of 64 MiB: past the heap's largest mmap threshold (32 MiB), so that an output taken
  // from the heap would be mapped and faulted in afresh at every run, which the split runner's
  // recycled values never are.
  constexpr std::int64_t kRows = 16;
  constexpr std::int64_t kPageFloats = 1024;
  auto g = std::make_shared<Graph>();
  g->opset = 17;
  g->inputs.push_back(ValueInfo{boxed_name("x"), DType::kF32, 0, false, {}});
  g->nodes = {testing::make_node("relu", "Relu", {boxed_name("x")}, {boxed_name("y")})};
  g->outputs.push_back(ValueInfo{boxed_name("y"), DType::kF32, 0, false, {}});
  ModelAnalysis a;
  a.values["x"] = TensorDesc{DType::kF32, {kRows, 1024, kPageFloats}};
  Segment s;
  s.inputs = {"x"};
  s.outputs = {"y"};
  s.graph = g;
  const long output_pages = kRows * 1024;
  auto faults = [&](int runs) {
    rusage before{}, after{};
    getrusage(RUSAGE_SELF, &before);
    EXPECT_TRUE(time_host_segment(a, s, runs).has_value());
    getrusage(RUSAGE_SELF, &after);
    return after.ru_minflt - before.ru_minflt;
  };
  const long one = faults(1);
  const long six = faults(6);
  EXPECT_GE(one, output_pages);  // the input, and the output of the run that plans
  EXPECT_LT(six - one, output_pages) << "five more runs faulted in " << six - one << " pages";
}

TEST(PartitionProfile, MeasuringASplitKeepsEachSegmentsTime) {
  const Partition p = partition_model(model(), {{2, 4, 8, 8}}, options());
  CostHistory history;
  const PartitionTimes t = measure_partition(p, RunnerConfig{}, 2, 1, &history);
  ASSERT_EQ(t.segments.size(), p.segments.size());
  for (std::size_t k = 0; k < p.segments.size(); ++k) {
    const auto kept = history.find(p.ran_key(p.segments[k]));
    ASSERT_TRUE(kept.has_value()) << "segment " << k;
    EXPECT_DOUBLE_EQ(*kept, t.segments[k].measured_ms);
  }
  EXPECT_TRUE(history.find(CostHistory::segment_key(p.profiles[0])).has_value());
  EXPECT_EQ(history.entries("cut ").size(), p.segments.size());
}

// The stand-in accelerator's runner, with one batch held up: the 4th batch it is given sleeps
// `kHiccupMs` before it completes, counted in its compute, as a compute thread preempted on a busy
// host is.
constexpr double kHiccupMs = 200;

class HiccupRunner final : public testing::WrappedCpuRunner {
 public:
  using WrappedCpuRunner::WrappedCpuRunner;
  void submit(InferBatch batch, InferDone done) override {
    const int n = ++submitted_;
    inner_->submit(std::move(batch), [this, n, done = std::move(done)](InferResult& r) {
      if (n == 4) {
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(kHiccupMs));
        held_ms_ = kHiccupMs;
      }
      done(r);
    });
  }
  std::string description() const override { return "test-hiccup"; }
  RunnerStats stats() const override {
    RunnerStats s = inner_->stats();
    s.compute_ms += held_ms_;
    return s;
  }

 private:
  std::atomic<int> submitted_{0};
  std::atomic<double> held_ms_{0};
};

const char* hiccup_accelerator() {
  static const char* const name = testing::register_wrapped_accelerator<HiccupRunner>("test-hiccup");
  return name;
}

TEST(PartitionProfile, ASegmentsMeasuredTimeIsItsMedianBatchsNotTheMean) {
  PartitionOptions o = options();
  o.devices = {"cpu", hiccup_accelerator()};
  o.profiles[1].device = o.profiles[1].name = "test-hiccup";
  const Partition p = partition_model(model(), {{2, 4, 8, 8}}, o);
  ASSERT_GT(p.segments.size(), 1u);
  CostHistory history;
  const int runs = 5;  // after 1 warm-up batch: the held-up 4th is the 3rd timed one
  const PartitionTimes t = measure_partition(p, RunnerConfig{}, runs, 1, &history);
  ASSERT_EQ(t.segments.size(), p.segments.size());
  bool held = false;
  for (std::size_t k = 0; k < p.segments.size(); ++k) {
    const SegmentTimes& s = t.segments[k];
    EXPECT_LE(s.measured_p10_ms, s.measured_ms) << "segment " << k;
    EXPECT_LE(s.measured_ms, s.measured_p90_ms) << "segment " << k;
    if (p.segments[k].device != 1) continue;
    held = true;
    // A mean of the 5 batches would hold a fifth of the hiccup; the median holds none of it.
    EXPECT_GE(s.measured_p90_ms, kHiccupMs) << "segment " << k << ": the held-up batch is the slowest";
    EXPECT_LT(s.measured_ms, kHiccupMs / runs) << "segment " << k;
    const auto kept = history.find(p.ran_key(p.segments[k]));
    ASSERT_TRUE(kept.has_value());
    EXPECT_DOUBLE_EQ(*kept, s.measured_ms);
  }
  EXPECT_TRUE(held) << "no segment ran on the held-up device";
  EXPECT_LT(t.measured_batch_ms, kHiccupMs / runs);
}

TEST(PartitionProfile, ABatchsTimeBeyondItsSegmentsIsLearnedAsEachSegmentsHandOver) {
  const Partition p = partition_model(model(), {{2, 4, 8, 8}}, options());
  ASSERT_GT(p.segments.size(), 1u);
  EXPECT_EQ(p.handover_ms, 0.0);  // nothing learned yet
  CostHistory history;
  const PartitionTimes t = measure_partition(p, RunnerConfig{}, 3, 1, &history);
  const auto learned = history.find(CostHistory::handover_key(p.profiles[0]));
  ASSERT_TRUE(learned.has_value());
  // The median batch less its segments' measured compute (and their inputs' crossings), per segment.
  SplitCosts costs = p.split_costs();
  costs.measured = [&](const Segment& s, double) {
    for (std::size_t k = 0; k < p.segments.size(); ++k) {
      if (p.segments[k].graph == s.graph) return std::optional<double>(t.segments[k].measured_ms);
    }
    return std::optional<double>();
  };
  const double rest = t.measured_batch_ms - split_latency_ms(p.analysis, p.open, p.segments, costs);
  EXPECT_NEAR(*learned, std::max(0.0, rest) / static_cast<double>(p.segments.size()), 1e-9);

  // A later partition adds it to every segment of a batch.
  CostHistory known;
  known.record(CostHistory::handover_key(p.profiles[0]), 0.25);
  PartitionOptions o = options();
  o.history = &known;
  const Partition again = partition_model(model(), {{2, 4, 8, 8}}, o);
  EXPECT_DOUBLE_EQ(again.handover_ms, 0.25);
  const double without = p.run_latency_ms(p.placement.device);
  const double with = again.run_latency_ms(p.placement.device);
  EXPECT_GE(with - without, 0.25 - 1e-9);  // at least the first segment's
  EXPECT_LE(with - without, 0.25 * static_cast<double>(p.segments.size()) + 1e-9);

  // One that outweighs what the accelerator saves keeps the model whole on the host.
  CostHistory costly;
  costly.record(CostHistory::handover_key(p.profiles[0]), 1e4);
  o.history = &costly;
  const Partition whole = partition_model(model(), {{2, 4, 8, 8}}, o);
  EXPECT_TRUE(whole.single_device());
  EXPECT_EQ(whole.whole_device(), "cpu");
}

TEST(CostModel, HistoryRoundTripsAndACorruptFileIsIgnored) {
  const auto dir = testing::temp_dir("history");
  CostHistory h;
  h.record("a", 1.5);
  h.record("b", 2.5);
  h.save((dir / "costs.json").string());
  CostHistory back;
  back.load((dir / "costs.json").string());
  EXPECT_EQ(back.entries(), h.entries());
  std::ofstream((dir / "bad.json").string()) << "{\"format\": 1, \"entries\": {\"a\": [";
  CostHistory bad;
  bad.load((dir / "bad.json").string());
  EXPECT_EQ(bad.size(), 0u);
  std::ofstream((dir / "negative.json").string()) << "{\"format\": 1, \"entries\": {\"a\": [-1]}}";
  bad.load((dir / "negative.json").string());
  EXPECT_EQ(bad.size(), 0u);
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(f.path().string().find(".tmp"), std::string::npos) << f.path();
  }
}

// What a pipeline's runs measure (whole-model batches, a split's segments at a row count) is read
// back by rows, and stays out of the hash of the node entries a pipeline's placement is keyed by:
// every run adds samples, and a kept placement is checked against them instead.
TEST(CostModel, ASegmentsTimesAtRowCountsAreReadBackByRowsAndLeftOutOfTheNodeHash) {
  CostHistory h;
  h.record("cut cpu x|fp32|abc|3 nodes", 1.0);
  const std::uint64_t nodes = h.node_entries_hash();
  EXPECT_NE(nodes, 0u);
  const std::string cut = "cut cpu x|fp32|abc|3 nodes";
  EXPECT_EQ(CostHistory::segment_rows_key(cut, 8), "ran cut cpu x|fp32|abc|3 nodes|8 rows");
  h.record(CostHistory::segment_rows_key(cut, 8), 0.4);
  h.record(CostHistory::segment_rows_key(cut, 8), 0.6);
  h.record(CostHistory::segment_rows_key(cut, 2), 0.2);
  h.record(CostHistory::segment_rows_key("cut cpu x|fp32|abd|3 nodes", 4), 9.0);  // another segment
  h.record("ran " + cut + "|many rows", 9.0);                                        // not a row count
  EXPECT_EQ(h.segment_rows_times(cut), (std::map<std::int64_t, double>{{2, 0.2}, {8, 0.5}}));
  EXPECT_TRUE(h.segment_rows_times("cut cpu y|fp32|abc|3 nodes").empty());
  h.record(CostHistory::model_key(7, "cpu 1", "fp32", {TensorDesc{DType::kF32, {2, 3}}}), 1.0);
  EXPECT_EQ(h.node_entries_hash(), nodes);
  h.record("cut cpu x|fp32|abc|3 nodes", 2.0);
  EXPECT_NE(h.node_entries_hash(), nodes);
}

}  // namespace
}  // namespace redwood::runtime
