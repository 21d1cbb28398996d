#include "apps/redwood/plan_partition.hpp"

#include "core/error.hpp"
#include "core/graph/graph_hash.hpp"
#include "core/model_runner.hpp"
#include "pipelines/pipeline_planner.hpp"
#include "runtime/partition.hpp"
#include "runtime/partition_profile.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>

namespace redwood::app {
namespace {

std::string mb(double bytes) { return fmt::format("{:.2f} MB", bytes / 1e6); }

std::string percent_off(double predicted, double measured) {
  return measured > 0 ? fmt::format("{:+.0f} %", 100.0 * (predicted - measured) / measured) : "-";
}

// A host segment's other timing alone, beside the one that stands for it: after a long
// idle where the woken one does, else with its threads woken.
std::string other_host_timing(const runtime::Partition& p, const runtime::Segment& s, bool woken) {
  const auto& times = woken ? p.host_times : p.host_woken_times;
  const auto it = times.find(p.cut_key(s));
  if (it == times.end()) return "";
  return fmt::format("; {} {:.3f} ms", woken ? "after a long idle" : "with its threads woken", it->second);
}

runtime::PartitionOptions options_from(const PartitionArgs& args, const runtime::CostHistory* history) {
  runtime::PartitionOptions o;
  o.devices = args.devices;
  o.precision = args.precision;
  RW_EXPECTS(args.objective == "latency" || args.objective == "throughput", InvalidArgument,
             "--objective {}: expected latency or throughput", args.objective);
  o.objective = args.objective == "latency" ? runtime::PartitionOptions::Objective::kLatency
                                            : runtime::PartitionOptions::Objective::kThroughput;
  for (const auto& pin : args.pins) {
    const auto eq = pin.find('=');
    RW_EXPECTS(eq != std::string::npos && eq > 0 && eq + 1 < pin.size(), InvalidArgument,
               "--pin '{}': expected NODE=DEVICE", pin);
    o.pinned[pin.substr(0, eq)] = pin.substr(eq + 1);
  }
  o.history = history;
  // --cpu-only OP: the accelerators answer as if they had no kernel for OP (what-if placement of a
  // model with an op the GPU lacks).
  for (std::size_t d = 1; d < args.devices.size() && !args.cpu_only.empty(); ++d) {
    const auto& factory = device_runner_registry().at(args.devices[d]);
    o.supports[args.devices[d]] = [supports = factory.supports, only = args.cpu_only, precision = args.precision](
                                      const Graph& g, const Node& node, const std::vector<TensorDesc>& inputs) {
      if (std::find(only.begin(), only.end(), node.op_type) != only.end()) {
        return fmt::format("{}: --cpu-only {}", node.where(), node.op_type);
      }
      return supports ? supports(g, node, inputs, precision) : std::string("the device answers no support questions");
    };
  }
  return o;
}

void print_devices(const runtime::Partition& p) {
  fmt::print("\ndevices:\n");
  for (std::size_t d = 0; d < p.devices.size(); ++d) {
    const std::string name = p.devices[d] == "cpu" ? "cpu" : p.devices[d] + ":0";
    const runtime::DeviceProfile prof = runtime::device_profile(name);
    std::string peaks;
    for (const auto& [precision, gflops] : prof.peak_gflops) peaks += fmt::format(" {} {:.0f}", precision, gflops);
    fmt::print("  {:8s} {} ({} {}): GFLOP/s{}; memory {:.0f} GB/s; launch {:.3f} ms", name, prof.name, prof.cores,
               d == 0 ? "threads" : "SMs", peaks, prof.memory_gbps, prof.launch_ms);
    if (d > 0) fmt::print("; host->device {:.1f} GB/s, device->host {:.1f} GB/s (pageable)", prof.h2d_pageable_gbps, prof.d2h_pageable_gbps);
    fmt::print("\n");
  }
}

void print_support(const runtime::Partition& p, bool verbose) {
  for (std::size_t d = 1; d < p.devices.size(); ++d) {
    std::vector<std::string> lines;
    for (std::size_t i = 0; i < p.why_not.size(); ++i) {
      if (!p.why_not[i][d].empty()) lines.push_back(p.why_not[i][d]);
    }
    fmt::print("\n{} runs {} of {} placed nodes", p.devices[d], p.why_not.size() - lines.size(), p.why_not.size());
    if (lines.empty()) {
      fmt::print("\n");
      continue;
    }
    fmt::print("; it cannot run:\n");
    const std::size_t shown = verbose ? lines.size() : std::min<std::size_t>(lines.size(), 10);
    for (std::size_t k = 0; k < shown; ++k) fmt::print("  {}\n", lines[k]);
    if (shown < lines.size()) fmt::print("  ... and {} more (--verbose lists them)\n", lines.size() - shown);
  }
}

void print_placements(const runtime::Partition& p) {
  const bool latency = p.objective == runtime::PartitionOptions::Objective::kLatency;
  fmt::print("\nplacement, objective {} ({}):\n", latency ? "latency" : "throughput",
             latency ? "one batch's time as the split runner runs it, every value between segments through the host"
                     : "the busiest device's or link's time per batch, batches in a pipeline");
  fmt::print("  (as run: segment by segment, values through the host; list schedule: node by node, values staying on\n"
             "   their device, what the placers optimize; bottleneck: the busiest device or link per batch)\n");
  auto row = [&](const std::string& what, const std::vector<int>& device) {
    std::map<std::string, int> count;
    for (int d : device) count[p.devices[static_cast<std::size_t>(d)]]++;
    std::string where;
    for (const auto& [name, n] : count) where += fmt::format("{}{} {}", where.empty() ? "" : ", ", n, name);
    fmt::print("  {:28s} as run {:9.3f} ms   list schedule {:9.3f} ms   bottleneck {:9.3f} ms   ({})\n", what,
               p.run_latency_ms(device), runtime::makespan(p.open, device), runtime::bottleneck(p.open, device), where);
  };
  row("chosen", p.placement.device);
  if (p.placer.device != p.placement.device) row(latency ? "placer (list schedule)" : "placer", p.placer.device);
  row("HEFT (baseline)", p.heft.device);
  if (p.naive) row("naive split", p.naive->device);
  for (std::size_t d = 0; d < p.devices.size(); ++d) {
    const bool all = std::all_of(p.open.nodes.begin(), p.open.nodes.end(),
                                 [&](const auto& n) { return n.cost_ms[d] != runtime::kUnsupported; });
    if (all) row("all on " + p.devices[d], std::vector<int>(p.open.nodes.size(), static_cast<int>(d)));
  }
  if (p.optimum) {
    const double gap = 100.0 * (p.objective_ms(p.placer) / p.objective_ms(*p.optimum) - 1.0);
    row(latency ? "exact optimum (exhaustive)" : "exact optimum", p.optimum->device);
    fmt::print("  gap of the placer to the exact optimum ({}): {:.2f} %\n", latency ? "list schedule" : "bottleneck", gap);
  } else if (latency) {
    fmt::print("  exact optimum: not computed (too many placements to try every one)\n");
  } else if (p.placer.lower_bound_ms > 0) {
    fmt::print("  exact optimum: not proven (the ILP ran out of time; its best is the chosen placement). No placement "
               "has a bottleneck under {:.3f} ms (the ILP's bound): the placer is within {:.2f} % of the optimum\n",
               p.placer.lower_bound_ms, 100.0 * (p.objective_ms(p.placer) / p.placer.lower_bound_ms - 1.0));
  } else {
    fmt::print("  exact optimum: not computed (the ILP ran out of time; its best is the chosen placement)\n");
  }
}

void print_segments(const runtime::Partition& p, const std::vector<runtime::SegmentTimes>& times, bool measured) {
  const runtime::ModelAnalysis& a = p.analysis;
  fmt::print("\nsegments ({}):\n", p.segments.size());
  for (std::size_t k = 0; k < p.segments.size(); ++k) {
    const runtime::Segment& s = p.segments[k];
    double in_bytes = 0, out_bytes = 0;
    for (const auto& v : s.inputs) in_bytes += static_cast<double>(shape_numel(a.values.at(v).shape)) * dtype_size(a.values.at(v).dtype);
    for (const auto& v : s.outputs) out_bytes += static_cast<double>(shape_numel(a.values.at(v).shape)) * dtype_size(a.values.at(v).dtype);
    std::size_t placed = 0;
    for (std::size_t n : s.nodes) placed += a.host_node[n] ? 0 : 1;
    const runtime::SegmentTimes& t = times[k];
    fmt::print("  {:2d} {:6s} {:4d} nodes{}  in {} ({} values), out {} ({} values)\n", k + 1,
               p.devices[static_cast<std::size_t>(s.device)], placed,
               s.threads > 0 ? fmt::format(" on {} thread(s)", s.threads) : "", mb(in_bytes), s.inputs.size(),
               mb(out_bytes), s.outputs.size());
    const std::string source = t.measured_before ? "as measured before"
                               : !t.timed_alone                ? ""
                               : s.device != 0                 ? fmt::format("timed alone on {}", p.devices[static_cast<std::size_t>(s.device)])
                               : fmt::format("timed alone on the host{}{}", t.host_woken ? ", threads just woken" : "",
                                             other_host_timing(p, s, t.host_woken));
    fmt::print("       predicted {:.3f} ms{}{}", t.predicted_ms,
               source.empty() ? "" : fmt::format(" ({}; from its nodes {:.3f} ms)", source, t.from_nodes_ms),
               t.transfer_in_predicted_ms > 0 ? fmt::format(" + {:.3f} ms to bring its inputs", t.transfer_in_predicted_ms) : "");
    if (measured) {
      fmt::print("; measured {:.3f} ms ({} off; batches {:.3f}-{:.3f} ms, 10-90 %){}", t.measured_ms,
                 percent_off(t.predicted_ms, t.measured_ms), t.measured_p10_ms, t.measured_p90_ms,
                 t.copy_ms > 0 ? fmt::format(", copies {:.3f} ms", t.copy_ms) : "");
    }
    fmt::print("\n");
  }
}

// The baselines run too: the naive split and each device alone (where it runs every node), each
// batch one at a time through the same split runner (a split's host segments on the threads
// chosen for them while planning, as the chosen placement's), so the chosen placement is compared
// on measurements, not only on predictions.
// Measures the chosen placement's baselines and prints them against it; returns, per device that
// runs the whole model, its measured batch time.
std::map<std::size_t, double> print_measured_baselines(const runtime::Partition& p, const RunnerConfig& config, int runs,
                                                       double chosen_ms) {
  std::map<std::size_t, double> whole;
  std::vector<std::pair<std::string, std::vector<int>>> baselines;
  if (p.naive) baselines.emplace_back("naive split", p.naive->device);
  for (std::size_t d = 0; d < p.devices.size(); ++d) {
    const bool all = std::all_of(p.open.nodes.begin(), p.open.nodes.end(),
                                 [&](const auto& n) { return n.cost_ms[d] != runtime::kUnsupported; });
    if (all) baselines.emplace_back("all on " + p.devices[d], std::vector<int>(p.open.nodes.size(), static_cast<int>(d)));
  }
  if (baselines.empty()) return whole;
  fmt::print("\nmeasured against the baselines (one batch, median of {}):\n", runs);
  fmt::print("  {:16s} {:>12s} {:>12s} {:>10s}\n", "placement", "predicted", "measured", "chosen is");
  fmt::print("  {:16s} {:9.3f} ms {:9.3f} ms {:>10s}\n", "chosen", p.run_latency_ms(p.placement.device), chosen_ms, "");
  for (const auto& [what, device] : baselines) {
    runtime::Partition alt = p;
    alt.placement.device = device;
    alt.placement.makespan_ms = runtime::makespan(p.open, device);
    const double predicted = p.run_latency_ms(device);
    alt.segments = p.cut(device);  // host segments on the threads chosen for them, as predicted
    const runtime::PartitionTimes t = runtime::measure_partition(alt, config, runs);
    fmt::print("  {:16s} {:9.3f} ms {:9.3f} ms {:>9.2f}x\n", what, predicted, t.measured_batch_ms,
               t.measured_batch_ms / chosen_ms);
    if (what != "naive split") whole[static_cast<std::size_t>(device[0])] = t.measured_batch_ms;
  }
  return whole;
}

}  // namespace

int run_partition_plan(std::shared_ptr<const Graph> graph, const PartitionArgs& args) {
  RW_EXPECTS(!args.devices.empty() && args.devices[0] == "cpu", InvalidArgument,
             "--devices {}: the first device must be cpu (the host, which every split model returns to)",
             fmt::join(args.devices, ","));
  for (std::size_t d = 1; d < args.devices.size(); ++d) {
    const auto& registry = device_runner_registry();
    RW_EXPECTS(registry.count(args.devices[d]) != 0, InvalidArgument, "--devices: this Redwood has no '{}' device{}",
               args.devices[d], args.devices[d] == "cuda" ? " (it was built without CUDA)" : "");
  }
  runtime::CostHistory history;
  const std::string history_path = runtime::CostHistory::default_path();
  history.load(history_path);
  runtime::ModelAnalysis analysis = runtime::analyze_model(graph, args.input_shapes);
  fmt::print("model: {}: {} nodes after the device-neutral passes, {} placed, {} of shape arithmetic (run where read)\n",
             args.model, analysis.graph->nodes.size(), analysis.placeable.size(),
             analysis.graph->nodes.size() - analysis.placeable.size());
  std::string rewrites;
  for (const auto& r : analysis.passes) {
    if (!r.changes.empty()) rewrites += fmt::format("{}{} {}", rewrites.empty() ? "" : ", ", r.pass, r.changes.size());
  }
  fmt::print("device-neutral passes (rewrites): {}\n", rewrites.empty() ? "none" : rewrites);
  for (std::size_t i = 0; i < graph->inputs.size(); ++i) {
    fmt::print("input: {} {}{}\n", graph->inputs[i].name, dtype_name(graph->inputs[i].dtype), shape_str(args.input_shapes[i]));
  }
  // The plan printed is the last one made: its time, and how many segments it timed alone.
  double planned_s = 0;
  auto place = [&](runtime::ModelAnalysis a, const runtime::Partition* before) {
    const auto start = std::chrono::steady_clock::now();
    runtime::PartitionOptions options = options_from(args, &history);
    options.timed_before = before;  // what it timed alone stands: the node times do not change it
    runtime::Partition part = runtime::partition_analysis(std::move(a), options);
    planned_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return part;
  };
  runtime::Partition p = place(analysis, nullptr);
  if (args.profile) {
    // Measure every node where the current placement runs it, then place again on the measurements.
    const std::size_t n = runtime::record_node_times(p, history);
    history.save(history_path);
    fmt::print("profile: {} node times measured, kept in {} ({} entries)\n", n, history_path, history.size());
    p = place(std::move(analysis), &p);
  }
  std::size_t measured = 0, total = 0;
  for (const auto& row : p.costs) {
    for (std::size_t d = 0; d < row.size(); ++d) {
      if (row[d].ms == runtime::kUnsupported) continue;
      ++total;
      measured += row[d].measured ? 1 : 0;
    }
  }
  print_devices(p);
  fmt::print("costs: {} of {} node/device pairs measured (the analysis run on the CPU, the history), the rest by roofline\n",
             measured, total);
  std::string learned;
  for (std::size_t d = 0; d < p.devices.size() && d < p.segment_ms.size(); ++d) {
    learned += fmt::format("{}{} {:.3f} ms", learned.empty() ? "" : ", ", p.devices[d], p.segment_ms[d]);
  }
  fmt::print("segment cost (a segment's time beyond its nodes, learned from segments measured before): {}\n", learned);
  fmt::print("hand-over: {:.3f} ms a segment of a batch (a batch's time beyond its segments and their crossings, {})\n",
             p.handover_ms,
             p.handover_learned ? "learned from batches measured before"
                                : "as the devices' runner round trips measured in their profiles: no batch measured yet");
  // What timing segments alone took of it; a placement made again (--profile) keeps the first's.
  const runtime::Partition::TimingSpent& spent = p.timing_spent;
  const std::size_t kept = p.host_times.size() + p.device_times.size() -
                           static_cast<std::size_t>(spent.host_segments + spent.device_segments);
  fmt::print("planned in {:.2f} s (timed alone while planning: {} host segment(s) in {:.2f} s, {} accelerator segment(s) "
             "in {:.2f} s{})\n",
             planned_s, spent.host_segments, spent.host_s, spent.device_segments, spent.device_s,
             kept > 0 ? fmt::format("; {} segment(s) timed by the placement before kept", kept) : std::string());
  print_support(p, args.verbose);
  print_placements(p);
  if (args.profile) {
    RunnerConfig config;
    config.precision = args.precision;
    const runtime::PartitionTimes t = runtime::measure_partition(p, config, args.runs, 3, &history);
    history.save(history_path);
    print_segments(p, t.segments, true);
    fmt::print("\none batch: predicted {:.3f} ms, measured {:.3f} ms (median of {}; {} off)\n", t.predicted_batch_ms,
               t.measured_batch_ms, args.runs, percent_off(t.predicted_batch_ms, t.measured_batch_ms));
    // Each device that runs the model whole: its batch time, where a pipeline's placement reads
    // what runs measured (pipelines/pipeline_planner.hpp).
    const auto whole = print_measured_baselines(p, config, args.runs, t.measured_batch_ms);
    if (!whole.empty()) {
      const runtime::PartitionOptions options = options_from(args, &history);
      std::vector<TensorDesc> inputs;
      for (std::size_t i = 0; i < graph->inputs.size() && i < args.input_shapes.size(); ++i) {
        inputs.push_back({graph->inputs[i].dtype, args.input_shapes[i]});
      }
      const std::uint64_t hash = graph_hash(*graph);
      for (const auto& [d, ms] : whole) {
        const std::string device = history_device(options, d);
        if (device.empty()) continue;
        const std::string precision = runtime::cost_precision(static_cast<int>(d), args.precision);
        history.record(runtime::CostHistory::model_key(hash, device, precision, inputs), ms);
      }
      history.save(history_path);
      fmt::print("profile: the whole model's batch time on {} device(s) kept in {}\n", whole.size(), history_path);
    }
  } else {
    print_segments(p, runtime::predict_segments(p), false);
  }
  if (!args.dot.empty()) {
    std::ofstream out(args.dot);
    RW_EXPECTS(out.good(), InvalidArgument, "--dot {}: cannot write the file", args.dot);
    out << p.dot();
    fmt::print("\ngraph written to {} (dot -Tsvg {} -o plan.svg)\n", args.dot, args.dot);
  }
  return 0;
}

}  // namespace redwood::app
