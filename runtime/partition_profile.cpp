#include "runtime/partition_profile.hpp"

#include "core/error.hpp"
#include "core/model_runner.hpp"
#include "runtime/cpu_runner.hpp"
#include "runtime/median_time.hpp"
#include "runtime/run_batch.hpp"
#include "runtime/sample_values.hpp"
#include "runtime/split_runner.hpp"
#include "runtime/value_pool.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <tuple>

namespace redwood::runtime {
namespace {

// The profile the partition was placed with, or cut again with (partition_as_placed): its cost
// model's keys; a partition without them gets its devices' own (an accelerator's on the
// partition's GPU).
DeviceProfile profile_of(const Partition& p, int device) {
  if (static_cast<std::size_t>(device) < p.profiles.size()) return p.profiles[static_cast<std::size_t>(device)];
  const std::string& name = p.devices[static_cast<std::size_t>(device)];
  return device_profile(name == "cpu" ? name : fmt::format("{}:{}", name, p.device_index));
}

}  // namespace

std::size_t record_node_times(const Partition& p, CostHistory& history, int runs) {
  const ModelAnalysis& a = p.analysis;
  const Graph& g = *a.graph;
  std::size_t recorded = 0;
  const DeviceProfile cpu = profile_of(p, 0);
  const std::string cpu_precision = cost_precision(0, p.precision);
  for (std::size_t i = 0; i < a.placeable.size(); ++i) {
    const std::size_t n = a.placeable[i];
    if (a.cpu_ms[i] <= 0) continue;
    history.record(CostHistory::key(cpu, cpu_precision, g.nodes[n], a.input_descs(n), a.output_descs(n)), a.cpu_ms[i]);
    ++recorded;
  }
  std::map<std::string, std::size_t> by_name;
  for (std::size_t n = 0; n < g.nodes.size(); ++n) by_name[g.nodes[n].name] = n;
  for (const Segment& s : p.segments) {
    if (s.device == 0) continue;
    const std::string& device = p.devices[static_cast<std::size_t>(s.device)];
    const auto& registry = device_runner_registry();
    const auto it = registry.find(device);
    RW_EXPECTS(it != registry.end() && it->second.time_nodes, Unsupported, "{}: '{}' cannot time its nodes",
               s.graph->name, device);
    std::vector<Shape> shapes;
    for (const auto& in : s.inputs) shapes.push_back(boxed_shape(a.values.at(in).shape));
    RunnerConfig config;
    config.device = p.device_index;
    config.precision = p.precision;
    config.device_options = p.device_options;
    const DeviceProfile profile = profile_of(p, s.device);
    const std::string precision = cost_precision(s.device, p.precision, p.device_options);
    // Steps the device's own passes added (layout conversions, the boxing) match no node of the
    // analysis: their time is shared among the matched nodes in proportion, so that a segment's
    // nodes still add up to what the device spends on it.
    std::vector<std::pair<std::size_t, double>> matched;
    double matched_ms = 0, other_ms = 0;
    const NodeTimes times = it->second.time_nodes(s.graph, shapes, config, runs);
    for (const auto& [name, ms] : times.by_node) {
      const auto node = by_name.find(name);
      if (node == by_name.end() || a.host_node[node->second]) {
        other_ms += ms;
        continue;
      }
      matched.emplace_back(node->second, ms);
      matched_ms += ms;
    }
    // And the nodes add up to the whole segment's run, not to their times launched one by one.
    const double total = times.whole_ms > 0 ? times.whole_ms : matched_ms + other_ms;
    const double scale = matched_ms > 0 ? total / matched_ms : 1.0;
    std::set<std::size_t> timed;
    for (const auto& [n, ms] : matched) {
      history.record(CostHistory::key(profile, precision, g.nodes[n], a.input_descs(n), a.output_descs(n)), ms * scale);
      timed.insert(n);
      ++recorded;
    }
    // A node of the segment with no step of its own was merged by the device's passes into one
    // that has (an activation into its convolution): its time is in that one's, so it costs
    // nothing more there. Left to the roofline, it would be counted twice.
    if (matched.empty()) continue;
    for (std::size_t n : s.nodes) {
      if (a.host_node[n] || timed.count(n) != 0) continue;
      history.record(CostHistory::key(profile, precision, g.nodes[n], a.input_descs(n), a.output_descs(n)), 0.0);
      ++recorded;
    }
  }
  return recorded;
}

std::vector<SegmentTimes> predict_segments(const Partition& p) {
  std::vector<SegmentTimes> out(p.segments.size());
  std::vector<double> from_nodes, transfer_in, predicted;
  split_latency_ms(p.analysis, p.open, p.segments, p.split_costs(), &from_nodes, &transfer_in);
  // Again as the run's latency is predicted: each segment at its time measured before, else as
  // timed alone while planning, a host segment's after the idle it meets in the batch.
  SplitCosts costs = p.split_costs();
  costs.measured = [&](const Segment& s, double idle_ms) -> std::optional<double> {
    SegmentTimes& t = out[static_cast<std::size_t>(&s - p.segments.data())];  // s is one of p.segments
    if (s.device == 0) t.host_idle_ms = idle_ms;
    if (const auto host = p.host_timing(s, idle_ms)) t.host_woken = host->second;
    const auto before = p.measured_segment_ms(s);
    const auto timed = before ? std::nullopt : p.timed_segment_ms(s, idle_ms);
    t.measured_before = before.has_value();
    t.timed_alone = timed.has_value();
    return before ? before : timed;
  };
  split_latency_ms(p.analysis, p.open, p.segments, costs, &predicted);
  for (std::size_t k = 0; k < out.size(); ++k) {
    out[k].from_nodes_ms = from_nodes[k];
    out[k].predicted_ms = predicted[k];
    out[k].transfer_in_predicted_ms = transfer_in[k];
  }
  return out;
}

std::vector<double> predicted_segment_ms(const Partition& p) {
  std::vector<double> ms;
  for (const SegmentTimes& t : predict_segments(p)) ms.push_back(t.predicted_ms);
  return ms;
}

PartitionTimes measure_partition(const Partition& p, const RunnerConfig& config, int runs, int warmup,
                                 CostHistory* history) {
  RW_EXPECTS(runs > 0 && warmup >= 0, InvalidArgument, "measure_partition: {} runs, {} warm-up", runs, warmup);
  // A placement on one device runs as that device's own runner, as a pipeline runs it.
  auto runner = p.single_device()
                    ? make_runner(p.whole_device(), p.analysis.graph, config)
                    : make_split_runner(p, config);
  auto stats = [&] {
    std::vector<RunnerStats> s = runner->segment_stats();
    return s.empty() ? std::vector<RunnerStats>{runner->stats()} : s;
  };
  const Graph& g = *p.analysis.graph;
  // The inputs, and the outputs batch after batch, in a pool over the first accelerator's
  // page-locked memory where there is one, as a pipeline's frames are on a GPU machine (pageable
  // inputs would be staged through a host copy first; heap outputs page-faulted in each batch).
  auto pool = std::make_shared<ValuePool>(accelerator_pinned_memory(p.devices));
  std::vector<Tensor> inputs;
  for (std::size_t i = 0; i < g.inputs.size(); ++i) {
    const DType dtype = g.inputs[i].dtype == DType::kUndefined ? DType::kF32 : g.inputs[i].dtype;
    inputs.push_back(pool->make(dtype, p.analysis.input_shapes[i]));
    if (inputs.back().nbytes() > 0) fill_sample_values(inputs.back().raw_data(), dtype, inputs.back().nbytes());
  }
  runner->prepare(p.analysis.input_shapes);
  for (int i = 0; i < warmup; ++i) run_batch(*runner, inputs, pool->allocator());
  // Each segment's compute and copies batch by batch (its runner records a batch before it
  // completes, so the stats after a batch hold it), for medians as the batch's own: one batch
  // preempted on a busy host would move a mean, and with it the history, by its whole delay.
  std::vector<RunnerStats> last = stats();
  std::vector<std::vector<double>> compute(last.size()), copies(last.size());
  std::vector<double> batch_ms;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    run_batch(*runner, inputs, pool->allocator());
    batch_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    std::vector<RunnerStats> now = stats();
    for (std::size_t k = 0; k < now.size() && k < last.size(); ++k) {
      if (now[k].batches != last[k].batches + 1) continue;  // a segment that ran no batch (or more) this time
      compute[k].push_back(now[k].compute_ms - last[k].compute_ms);
      copies[k].push_back(now[k].copy_in_ms + now[k].copy_out_ms - last[k].copy_in_ms - last[k].copy_out_ms);
    }
    last = std::move(now);
  }
  PartitionTimes times;
  times.segments = predict_segments(p);
  for (std::size_t k = 0; k < times.segments.size() && k < compute.size(); ++k) {
    if (compute[k].empty()) continue;
    const Spread c = spread(std::move(compute[k]));
    SegmentTimes& t = times.segments[k];
    t.measured_ms = c.median;
    t.measured_p10_ms = c.p10;
    t.measured_p90_ms = c.p90;
    t.copy_ms = median(copies[k]);
  }
  times.measured_batch_ms = median(batch_ms);
  times.predicted_batch_ms = p.run_latency_ms(p.placement.device);
  if (history != nullptr) {
    for (std::size_t k = 0; k < times.segments.size(); ++k) {
      const auto d = static_cast<std::size_t>(p.segments.empty() ? 0 : p.segments[k].device);
      const double nodes = times.segments[k].from_nodes_ms - (d < p.segment_ms.size() ? p.segment_ms[d] : 0.0);
      history->record(CostHistory::segment_key(p.profiles[d]), std::max(0.0, times.segments[k].measured_ms - nodes));
      if (p.segments.empty()) continue;
      const Partition::SegmentKeys keys = p.segment_keys(p.segments[k]);
      history->record(keys.ran, times.segments[k].measured_ms);
      if (d == 0 && p.segments[k].threads > 0) history->record(CostHistory::host_threads_key(keys.cut), p.segments[k].threads);
    }
    if (!p.segments.empty() && times.segments.size() == p.segments.size()) {
      // The batch beyond its segments' compute as measured and their inputs' crossings, shared
      // among its segments: each one's hand-over.
      std::map<const Graph*, double> compute;
      for (std::size_t k = 0; k < p.segments.size(); ++k) compute[p.segments[k].graph.get()] = times.segments[k].measured_ms;
      SplitCosts costs = p.split_costs();
      costs.handover_ms = 0;
      costs.measured = [&compute](const Segment& s, double) { return std::optional<double>(compute.at(s.graph.get())); };
      const double rest = times.measured_batch_ms - split_latency_ms(p.analysis, p.open, p.segments, costs);
      history->record(CostHistory::handover_key(p.profiles[0]),
                      std::max(0.0, rest) / static_cast<double>(p.segments.size()));
    }
  }
  return times;
}

}  // namespace redwood::runtime
