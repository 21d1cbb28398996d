#include "runtime/partition.hpp"

#include "core/error.hpp"
#include "runtime/device_segment_time.hpp"
#include "runtime/executor.hpp"
#include "runtime/host_segment_time.hpp"
#include "runtime/value_pool.hpp"
#include "core/log.hpp"
#include "core/model_runner.hpp"
#include "core/passes/pass_manager.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <set>

namespace redwood::runtime {
namespace {

// Whether node n is shape arithmetic: Shape of anything, or a node all of whose present inputs
// are known on the host (initializers, and what such nodes compute).
bool is_host_node(const Node& node, const std::set<std::string>& host_known) {
  if (node.op_type == "Shape" && node.domain.empty() && node.has_input(0)) return true;
  bool any = false;
  for (const auto& in : node.inputs) {
    if (in.empty()) continue;
    if (host_known.count(in) == 0) return false;
    any = true;
  }
  return any;
}

std::map<std::string, std::size_t> producers(const Graph& g) {
  std::map<std::string, std::size_t> by_value;
  for (std::size_t n = 0; n < g.nodes.size(); ++n) {
    for (const auto& out : g.nodes[n].outputs) {
      if (!out.empty()) by_value[out] = n;
    }
  }
  return by_value;
}

// The devices' supports() answers: the overrides, else the registry's (bound to the precision).
std::vector<SupportFn> support_functions(const PartitionOptions& options) {
  std::vector<SupportFn> fns;
  for (std::size_t d = 0; d < options.devices.size(); ++d) {
    const std::string& name = options.devices[d];
    if (auto it = options.supports.find(name); it != options.supports.end()) {
      fns.push_back(it->second);
      continue;
    }
    if (d == 0) {  // the host: the analysis ran every node there
      fns.push_back([](const Graph&, const Node&, const std::vector<TensorDesc>&) { return std::string(); });
      continue;
    }
    const auto& registry = device_runner_registry();
    const auto it = registry.find(name);
    if (it == registry.end() || !it->second.supports) {
      const std::string why = fmt::format("this Redwood has no '{}' device", name);
      fns.push_back([why](const Graph&, const Node&, const std::vector<TensorDesc>&) { return why; });
      continue;
    }
    fns.push_back([fn = it->second.supports, precision = options.precision](
                      const Graph& g, const Node& node, const std::vector<TensorDesc>& inputs) {
      return fn(g, node, inputs, precision);
    });
  }
  return fns;
}

std::uint64_t placements_to_try(const PlacementProblem& p) {
  std::uint64_t count = 1;
  for (const auto& node : p.nodes) {
    std::uint64_t options = 0;
    for (double c : node.cost_ms) options += c != kUnsupported ? 1 : 0;
    if (options > 1 && count > (std::uint64_t{1} << 62) / options) return std::uint64_t{1} << 62;
    count *= std::max<std::uint64_t>(options, 1);
  }
  return count;
}

void fill_objectives(const PlacementProblem& p, Placement& placement) {
  placement.makespan_ms = makespan(p, placement.device);
  placement.bottleneck_ms = bottleneck(p, placement.device);
}

const char* kColors[] = {"lightblue", "palegreen", "khaki", "plum"};

}  // namespace

/// Each placed node's time on the CPU as the CPU runner runs the model: the executor with its own
/// passes (oneDNN regions keep their blocked layouts between convolutions, which node-by-node
/// timing would charge as reorders), one warm-up run and three timed (medians, scaled to add up
/// to the whole run's median). A region times each of its nodes' primitives (a reorder counts
/// for the node it feeds or whose output it makes plain); what it spends around them is shared
/// among its nodes by their work (operations, or ten per byte moved where that is more: a CPU's
/// balance of compute to memory). A node the passes merged away keeps 0 (the roofline then).
std::vector<double> cpu_node_times(const ModelAnalysis& a, const std::map<std::string, Tensor>& feeds) {
  constexpr int kRuns = 3;
  // The model's outputs come from recycled memory, as a runner's pool gives them: from the heap,
  // the nodes that make them would pay for faulting their pages in at every run.
  auto pool = std::make_shared<ValuePool>(nullptr);
  const TensorAllocator allocate = pool->allocator();
  Executor executor(a.graph);
  executor.run(feeds, &allocate);
  executor.set_profiling(true);
  // Per node, the median of kRuns runs; and the runs' own median, which the nodes are scaled to
  // (the executor's work between nodes: input checks, the plan's lookup).
  std::map<std::string, std::vector<double>> samples;
  std::vector<double> whole;
  for (int r = 0; r < kRuns; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    executor.run(feeds, &allocate);
    whole.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    std::map<std::string, double> run;
    for (const NodeTiming& t : executor.last_timings()) run[t.node] += t.milliseconds;
    for (const auto& [node, ms] : run) samples[node].push_back(ms);
  }
  std::vector<NodeTiming> timings;
  double summed = 0;
  for (auto& [node, v] : samples) {
    std::sort(v.begin(), v.end());
    timings.push_back({node, "", "", v[v.size() / 2], ""});
    summed += timings.back().milliseconds;
  }
  std::sort(whole.begin(), whole.end());
  const double scale = summed > 0 ? whole[whole.size() / 2] / summed : 1.0;
  const Graph& g = *a.graph;
  const Graph& og = executor.graph();
  std::map<std::string, std::size_t> by_name, optimized;
  for (std::size_t n = 0; n < g.nodes.size(); ++n) by_name[g.nodes[n].name] = n;
  for (std::size_t n = 0; n < og.nodes.size(); ++n) optimized[og.nodes[n].name] = n;
  std::map<std::string, double> ms;
  for (NodeTiming& t : timings) {
    t.milliseconds *= scale;
    const auto it = optimized.find(t.node);
    if (it == optimized.end() || og.nodes[it->second].body.empty()) {
      ms[t.node] += t.milliseconds;
      continue;
    }
    std::vector<std::pair<std::string, double>> weights;
    double total = 0;
    for (const Node& member : og.nodes[it->second].body) {
      const auto n = by_name.find(member.name);
      if (n == by_name.end()) continue;
      const NodeWork w = node_work(g.nodes[n->second], a.input_descs(n->second), a.output_descs(n->second));
      weights.emplace_back(member.name, std::max(w.flops, 10.0 * w.bytes));
      total += weights.back().second;
    }
    for (const auto& [name, w] : weights) ms[name] += total > 0 ? t.milliseconds * w / total : 0.0;
  }
  std::vector<double> out;
  for (std::size_t n : a.placeable) out.push_back(ms[g.nodes[n].name]);
  return out;
}

std::vector<bool> shape_arithmetic(const Graph& g) {
  std::set<std::string> host_known;
  for (const auto& [name, t] : g.initializers) host_known.insert(name);
  std::vector<bool> host(g.nodes.size(), false);
  for (std::size_t n = 0; n < g.nodes.size(); ++n) {
    if (!is_host_node(g.nodes[n], host_known)) continue;
    host[n] = true;
    for (const auto& out : g.nodes[n].outputs) {
      if (!out.empty()) host_known.insert(out);
    }
  }
  return host;
}

std::vector<TensorDesc> ModelAnalysis::input_descs(std::size_t n) const {
  std::vector<TensorDesc> out;
  for (const auto& in : graph->nodes[n].inputs) {
    if (in.empty()) {
      out.emplace_back();
      continue;
    }
    TensorDesc d = values.at(in);
    if (auto it = host_values.find(in); it != host_values.end()) d.host = &it->second;
    out.push_back(d);
  }
  return out;
}

std::vector<TensorDesc> ModelAnalysis::output_descs(std::size_t n) const {
  std::vector<TensorDesc> out;
  for (const auto& name : graph->nodes[n].outputs) out.push_back(name.empty() ? TensorDesc{} : values.at(name));
  return out;
}

ModelAnalysis analyze_model(std::shared_ptr<const Graph> graph, const std::vector<Shape>& input_shapes, bool optimize,
                            AnalysisDepth depth) {
  RW_EXPECTS(graph != nullptr, InvalidArgument, "analyze_model: no graph");
  RW_EXPECTS(input_shapes.size() == graph->inputs.size(), InvalidArgument, "{}: {} input shapes for {} inputs",
             graph->name, input_shapes.size(), graph->inputs.size());
  auto g = std::make_shared<Graph>(*graph);
  // The passes every device runs first (no CPU regions): what is placed is what each device's
  // own pipeline then starts from.
  ModelAnalysis a;
  if (optimize) a.passes = passes::optimize(*g, passes::default_pipeline(false));
  a.graph = g;
  a.input_shapes = input_shapes;

  a.host_node = shape_arithmetic(*g);
  std::set<std::string> host_known;
  for (std::size_t n = 0; n < g->nodes.size(); ++n) {
    if (!a.host_node[n]) {
      a.placeable.push_back(n);
      continue;
    }
    for (const auto& out : g->nodes[n].outputs) {
      if (!out.empty()) host_known.insert(out);
    }
  }

  // Every value of the model becomes an output of a copy, run once to warm up and once timed.
  auto probe = std::make_shared<Graph>(*g);
  std::set<std::string> listed;
  for (const auto& o : probe->outputs) listed.insert(o.name);
  for (const Node& node : probe->nodes) {
    for (const auto& out : node.outputs) {
      if (!out.empty() && listed.insert(out).second) {
        ValueInfo vi;
        vi.name = out;
        probe->outputs.push_back(vi);
      }
    }
  }
  std::map<std::string, Tensor> feeds;
  for (std::size_t i = 0; i < g->inputs.size(); ++i) {
    const ValueInfo& vi = g->inputs[i];
    const DType dtype = vi.dtype == DType::kUndefined ? DType::kF32 : vi.dtype;
    feeds[vi.name] = Tensor::zeros(dtype, input_shapes[i]);
    a.values[vi.name] = {dtype, input_shapes[i], nullptr};
  }
  ExecutorOptions options;
  options.optimize = false;  // node for node: the values are the analysis graph's
  const std::vector<Tensor> outs = Executor(probe, options).run(feeds);
  for (std::size_t o = 0; o < outs.size(); ++o) {
    const std::string& name = probe->outputs[o].name;
    a.values[name] = {outs[o].dtype(), outs[o].shape(), nullptr};
    if (host_known.count(name) != 0) a.host_values[name] = outs[o].contiguous();
  }
  for (const auto& [name, t] : g->initializers) {
    a.host_values[name] = t;
    a.values[name] = {t.dtype(), t.shape(), nullptr};
  }
  a.cpu_ms = depth == AnalysisDepth::kTimed ? cpu_node_times(a, feeds) : std::vector<double>(a.placeable.size(), 0.0);
  return a;
}

std::string boxed_name(const std::string& value) { return "rw.boxed:" + value; }

Shape boxed_shape(const Shape& shape) {
  Shape boxed{1};
  boxed.insert(boxed.end(), shape.begin(), shape.end());
  return boxed;
}

std::vector<Segment> cut_model(const ModelAnalysis& a, const std::vector<int>& device) {
  const Graph& g = *a.graph;
  RW_EXPECTS(device.size() == a.placeable.size(), InvalidArgument, "cut_model: {} devices for {} placed nodes",
             device.size(), a.placeable.size());
  const auto producer = producers(g);
  std::vector<int> slot(g.nodes.size(), -1);  // node -> index in a.placeable
  for (std::size_t i = 0; i < a.placeable.size(); ++i) slot[a.placeable[i]] = static_cast<int>(i);

  // Dependencies between placed nodes, through the shape arithmetic between them.
  std::vector<std::set<int>> deps(a.placeable.size());
  std::vector<std::set<int>> host_deps(g.nodes.size());  // placed nodes a shape node depends on
  for (std::size_t n = 0; n < g.nodes.size(); ++n) {
    std::set<int> d;
    for (const auto& in : g.nodes[n].inputs) {
      const auto it = in.empty() ? producer.end() : producer.find(in);
      if (it == producer.end()) continue;
      if (slot[it->second] >= 0) d.insert(slot[it->second]);
      else d.insert(host_deps[it->second].begin(), host_deps[it->second].end());
    }
    if (slot[n] >= 0) deps[static_cast<std::size_t>(slot[n])] = std::move(d);
    else host_deps[n] = std::move(d);
  }

  // A topological order that stays on the current device while it has a ready node.
  std::vector<int> waiting(a.placeable.size());
  std::vector<std::vector<int>> users(a.placeable.size());
  for (std::size_t i = 0; i < deps.size(); ++i) {
    waiting[i] = static_cast<int>(deps[i].size());
    for (int d : deps[i]) users[static_cast<std::size_t>(d)].push_back(static_cast<int>(i));
  }
  std::set<int> ready;
  for (std::size_t i = 0; i < waiting.size(); ++i) {
    if (waiting[i] == 0) ready.insert(static_cast<int>(i));
  }
  std::vector<std::vector<int>> runs;  // placed nodes per segment
  int current = -1;
  while (!ready.empty()) {
    auto pick = std::find_if(ready.begin(), ready.end(), [&](int i) { return device[static_cast<std::size_t>(i)] == current; });
    if (pick == ready.end()) {
      pick = ready.begin();
      current = device[static_cast<std::size_t>(*pick)];
      runs.emplace_back();
    }
    const int i = *pick;
    ready.erase(pick);
    runs.back().push_back(i);
    for (int u : users[static_cast<std::size_t>(i)]) {
      if (--waiting[static_cast<std::size_t>(u)] == 0) ready.insert(u);
    }
  }

  std::set<std::string> graph_outputs;
  for (const auto& o : g.outputs) graph_outputs.insert(o.name);
  std::vector<Segment> segments;
  std::vector<std::set<std::string>> produced;
  for (const auto& run : runs) {
    Segment s;
    s.device = device[static_cast<std::size_t>(run.front())];
    std::set<std::size_t> nodes;
    std::vector<std::size_t> pending;  // nodes to add with the shape arithmetic they read
    for (int i : run) pending.push_back(a.placeable[static_cast<std::size_t>(i)]);
    while (!pending.empty()) {
      const std::size_t n = pending.back();
      pending.pop_back();
      if (!nodes.insert(n).second) continue;
      for (const auto& in : g.nodes[n].inputs) {
        const auto it = in.empty() ? producer.end() : producer.find(in);
        if (it != producer.end() && a.host_node[it->second]) pending.push_back(it->second);
      }
    }
    s.nodes.assign(nodes.begin(), nodes.end());
    std::set<std::string> made, read;
    for (std::size_t n : s.nodes) {
      for (const auto& out : g.nodes[n].outputs) {
        if (!out.empty()) made.insert(out);
      }
    }
    for (std::size_t n : s.nodes) {
      for (const auto& in : g.nodes[n].inputs) {
        if (!in.empty() && made.count(in) == 0 && g.find_initializer(in) == nullptr && read.insert(in).second) {
          s.inputs.push_back(in);
        }
      }
    }
    produced.push_back(std::move(made));
    segments.push_back(std::move(s));
  }
  // Outputs: what later segments read, and the model's outputs (where first made).
  std::set<std::string> delivered;
  for (std::size_t k = 0; k < segments.size(); ++k) {
    for (std::size_t n : segments[k].nodes) {
      for (const auto& out : g.nodes[n].outputs) {
        if (out.empty() || delivered.count(out) != 0) continue;
        bool needed = graph_outputs.count(out) != 0;
        for (std::size_t later = k + 1; !needed && later < segments.size(); ++later) {
          needed = std::find(segments[later].inputs.begin(), segments[later].inputs.end(), out) !=
                   segments[later].inputs.end();
        }
        // Shape arithmetic is copied wherever it is read, so only a model output of it is sent.
        if (needed && (!a.host_node[n] || graph_outputs.count(out) != 0)) {
          segments[k].outputs.push_back(out);
          delivered.insert(out);
        }
      }
    }
  }
  // Each segment's boxed graph.
  for (std::size_t k = 0; k < segments.size(); ++k) {
    Segment& s = segments[k];
    auto sg = std::make_shared<Graph>();
    sg->name = fmt::format("{} [segment {} of {}]", g.name, k + 1, segments.size());
    sg->source = g.source;
    sg->opset = g.opset;
    const std::string axes_name = "rw.box_axes";
    auto box_node = [&](const std::string& op, const std::string& in, const std::string& out) {
      Node node;
      node.name = fmt::format("rw.box:{}", out);
      node.op_type = op;
      node.inputs = {in};
      node.outputs = {out};
      // Squeeze and Unsqueeze take their axes as an input from opset 13, as an attribute before.
      if (g.opset >= 13) node.inputs.push_back(axes_name);
      else node.attributes["axes"] = std::vector<std::int64_t>{0};
      return node;
    };
    if (g.opset >= 13) sg->initializers[axes_name] = Tensor::from_vector<std::int64_t>({1}, {0});
    for (const auto& in : s.inputs) {
      ValueInfo vi;
      vi.name = boxed_name(in);
      vi.dtype = a.values.at(in).dtype;
      sg->inputs.push_back(vi);
      sg->nodes.push_back(box_node("Squeeze", vi.name, in));
    }
    for (std::size_t n : s.nodes) {
      const Node& node = g.nodes[n];
      sg->nodes.push_back(node);
      for (const auto& in : node.inputs) {
        if (const Tensor* t = in.empty() ? nullptr : g.find_initializer(in)) sg->initializers[in] = *t;
      }
      for (const auto& name : node.inputs) {
        if (auto it = g.value_info.find(name); it != g.value_info.end()) sg->value_info[name] = it->second;
      }
    }
    for (const auto& out : s.outputs) {
      ValueInfo vi;
      vi.name = boxed_name(out);
      vi.dtype = a.values.at(out).dtype;
      sg->outputs.push_back(vi);
      sg->nodes.push_back(box_node("Unsqueeze", out, vi.name));
    }
    s.graph = std::move(sg);
  }
  return segments;
}

std::optional<Placement> place_naive(const PlacementProblem& p) {
  if (p.devices.size() < 2) return std::nullopt;
  Placement placement;
  bool host = false;
  for (const auto& node : p.nodes) {
    host = host || node.cost_ms[1] == kUnsupported;
    if (host && node.cost_ms[0] == kUnsupported) return std::nullopt;  // pinned to the accelerator after the cut
    placement.device.push_back(host ? 0 : 1);
  }
  if (!host) return std::nullopt;
  fill_objectives(p, placement);
  return placement;
}

double split_latency_ms(const ModelAnalysis& a, const PlacementProblem& p, const std::vector<Segment>& segments,
                        const SplitCosts& costs, std::vector<double>* compute, std::vector<double>* transfer_in) {
  const std::vector<double>& segment_ms = costs.segment_ms;
  const double host_layout_gbps = costs.host_layout_gbps;
  std::map<std::size_t, std::size_t> slot;  // graph node -> placeable index
  for (std::size_t i = 0; i < a.placeable.size(); ++i) slot[a.placeable[i]] = i;
  std::set<std::string> outputs, inputs;
  for (const auto& vi : a.graph->outputs) outputs.insert(vi.name);
  for (const auto& vi : a.graph->inputs) inputs.insert(vi.name);
  auto bytes = [&](const std::string& v) {
    const TensorDesc& d = a.values.at(v);
    return static_cast<double>(shape_numel(d.shape)) * static_cast<double>(dtype_size(d.dtype));
  };
  // Through the host: down from the producer's device, up to the consumer's.
  auto cross = [&](int from, int to, double b) {
    return (from != 0 ? p.transfer_ms(from, 0, b) : 0.0) + (to != 0 ? p.transfer_ms(0, to, b) : 0.0);
  };
  std::map<std::string, std::pair<int, double>> made;  // value -> (device, when it is on the host side)
  double latency = 0;
  if (compute) compute->assign(segments.size(), 0.0);
  if (transfer_in) transfer_in->assign(segments.size(), 0.0);
  for (std::size_t k = 0; k < segments.size(); ++k) {
    const Segment& s = segments[k];
    double ready = 0, crossing = 0, work = 0;
    for (const auto& in : s.inputs) {
      const auto it = made.find(in);
      const int from = it != made.end() ? it->second.first : 0;
      ready = std::max(ready, it != made.end() ? it->second.second : 0.0);
      crossing += cross(from, s.device, bytes(in));
    }
    for (std::size_t n : s.nodes) {
      if (auto it = slot.find(n); it != slot.end()) work += p.nodes[it->second].cost_ms[static_cast<std::size_t>(s.device)];
    }
    if (static_cast<std::size_t>(s.device) < segment_ms.size()) work += segment_ms[static_cast<std::size_t>(s.device)];
    if (s.device == 0 && segments.size() > 1 && host_layout_gbps > 0) {
      // Its edges' layout conversions: each value read and written once.
      double edge_bytes = 0;
      for (const auto& in : s.inputs) edge_bytes += inputs.count(in) != 0 ? 0.0 : bytes(in);
      for (const auto& out : s.outputs) edge_bytes += outputs.count(out) != 0 ? 0.0 : bytes(out);
      work += 2 * edge_bytes / (host_layout_gbps * 1e6);
    }
    if (costs.measured) {
      if (const auto ms = costs.measured(s)) work = *ms;
    }
    const double done = ready + costs.handover_ms + crossing + work;
    for (const auto& out : s.outputs) {
      made[out] = {s.device, done};
      if (outputs.count(out) != 0) latency = std::max(latency, done + cross(s.device, 0, bytes(out)));
    }
    latency = std::max(latency, done);
    if (compute) (*compute)[k] = work;
    if (transfer_in) (*transfer_in)[k] = crossing;
  }
  return latency;
}

namespace {

std::optional<double> find_ms(const std::map<std::string, double>& times, const std::string& key) {
  const auto it = times.find(key);
  return it != times.end() ? std::optional<double>(it->second) : std::nullopt;
}

// A host segment's time as timed alone while planning, scaled to what it takes in a split run.
std::optional<double> scaled_host_ms(const Partition& p, const std::string& key) {
  const auto timed = find_ms(p.host_times, key);
  return timed ? std::optional<double>(*timed * p.host_timing_scale) : std::nullopt;
}

// The timings alone that segment `s` may be among: the host's or the accelerators'.
const std::map<std::string, double>& timed_times(const Partition& p, const Segment& s) {
  return s.device == 0 ? p.host_times : p.device_times;
}

// Segment `s`'s time as timed alone while planning (Partition::timed_segment_ms) under `key`.
std::optional<double> timed_ms(const Partition& p, const Segment& s, const std::string& key) {
  return s.device == 0 ? scaled_host_ms(p, key) : find_ms(p.device_times, key);
}

// Segment `s`'s time as measured before, else as timed while planning: its cut key made once for
// both (and not at all when nothing is known).
std::optional<double> known_segment_ms(const Partition& p, const Segment& s) {
  if (p.cut_times.empty() && timed_times(p, s).empty()) return std::nullopt;
  const std::string key = p.cut_key(s);
  if (const auto ms = find_ms(p.cut_times, key)) return ms;
  return timed_ms(p, s, key);
}

double cut_latency_ms(const Partition& p, const std::vector<Segment>& segments) {
  SplitCosts costs = p.split_costs();
  costs.measured = [&p](const Segment& s) { return known_segment_ms(p, s); };
  return split_latency_ms(p.analysis, p.open, segments, costs);
}

// Times the segments of a cut (a split's: a model wholly on one device is what its nodes' times
// describe) that were neither measured before nor timed already. A host segment at the thread
// count chosen for it before, else at each count, choosing one; an accelerator's on its device
// where this process can run it. `tried` holds the keys timed (or that failed to run) before, so
// a segment several cuts share is run once.
void time_segments(Partition& part, const std::vector<Segment>& segments, std::set<std::string>& tried) {
  if (segments.size() < 2) return;
  for (const Segment& s : segments) {
    std::string key = part.cut_key(s);
    if (part.cut_times.count(key) != 0 || part.host_times.count(key) != 0 || part.device_times.count(key) != 0 ||
        !tried.insert(key).second) {
      continue;
    }
    const std::string& device = part.devices[static_cast<std::size_t>(s.device)];
    if (s.device != 0 && !can_time_on(device)) continue;
    const auto start = std::chrono::steady_clock::now();
    bool timed = false;
    if (s.device != 0) {
      RunnerConfig config;
      config.slots = 1;  // one batch at a time
      config.precision = part.precision;
      config.device_options = part.device_options;
      config.device = part.device_index;
      const auto ms = time_device_segment(part.analysis, s, device, config);
      if ((timed = ms.has_value())) part.device_times[std::move(key)] = *ms;
    } else if (const auto chosen = part.host_threads.find(key); chosen != part.host_threads.end()) {
      const auto ms = time_host_segment(part.analysis, s, 5, chosen->second);
      if ((timed = ms.has_value())) part.host_times[std::move(key)] = *ms;
    } else if (const auto choice = choose_host_threads(part.analysis, s)) {
      timed = true;
      part.host_times[key] = choice->ms;
      part.host_threads[std::move(key)] = choice->threads;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    Partition::TimingSpent& t = part.timing_spent;
    (s.device != 0 ? t.device_s : t.host_s) += seconds;
    (s.device != 0 ? t.device_segments : t.host_segments) += timed ? 1 : 0;
  }
}

// A split's host segments run on the threads chosen for them (none: the process's count).
void set_host_threads(const Partition& part, std::vector<Segment>& segments) {
  if (segments.size() < 2 || part.host_threads.empty()) return;
  for (Segment& s : segments) {
    if (s.device != 0) continue;
    const auto it = part.host_threads.find(part.cut_key(s));
    if (it != part.host_threads.end()) s.threads = it->second;
  }
}

}  // namespace

SplitCosts Partition::split_costs() const {
  SplitCosts costs;
  costs.segment_ms = segment_ms;
  costs.host_layout_gbps = host_layout_gbps;
  costs.handover_ms = handover_ms;
  return costs;
}

double Partition::run_latency_ms(const std::vector<int>& device) const {
  return cut_latency_ms(*this, cut_model(analysis, device));
}

std::vector<Segment> Partition::cut(const std::vector<int>& device) const {
  std::vector<Segment> segments = cut_model(analysis, device);
  set_host_threads(*this, segments);
  return segments;
}

std::string Partition::cut_key(const Segment& s) const {
  const Graph& g = *analysis.graph;
  const DeviceProfile& profile = profiles.at(static_cast<std::size_t>(s.device));
  const std::string device_precision = cost_precision(s.device, precision, device_options);
  std::vector<std::string> keys;
  for (std::size_t n : s.nodes) {
    if (analysis.host_node[n]) continue;
    keys.push_back(CostHistory::key(profile, device_precision, g.nodes[n], analysis.input_descs(n), analysis.output_descs(n)));
  }
  // Which values cross its edges: the same nodes cut elsewhere convert other tensors.
  auto edge = [&](const char* what, const std::string& v) {
    const TensorDesc& d = analysis.values.at(v);
    return fmt::format("{} {}{}", what, dtype_name(d.dtype), shape_str(d.shape));
  };
  for (const auto& v : s.inputs) keys.push_back(edge("in", v));
  for (const auto& v : s.outputs) keys.push_back(edge("out", v));
  return CostHistory::cut_key(profile, device_precision, keys);
}

std::optional<double> Partition::measured_segment_ms(const Segment& s) const {
  return cut_times.empty() ? std::nullopt : find_ms(cut_times, cut_key(s));
}

std::optional<double> Partition::timed_segment_ms(const Segment& s) const {
  if (timed_times(*this, s).empty()) return std::nullopt;
  return timed_ms(*this, s, cut_key(s));
}

std::vector<int> Partition::host_segment_threads() const {
  std::vector<int> threads;
  if (segments.size() < 2) return threads;
  for (const Segment& s : segments) {
    if (s.device == 0) threads.push_back(s.threads);
  }
  return threads;
}

std::vector<std::string> Partition::node_devices() const {
  std::vector<std::string> names;
  names.reserve(placement.device.size());
  for (int d : placement.device) names.push_back(devices[static_cast<std::size_t>(d)]);
  return names;
}

double Partition::objective_ms(const Placement& p) const {
  return objective == PartitionOptions::Objective::kLatency ? p.makespan_ms : p.bottleneck_ms;
}

bool Partition::single_device() const { return segments.size() <= 1; }

const std::string& Partition::whole_device() const {
  return devices[segments.empty() ? 0 : static_cast<std::size_t>(segments.front().device)];
}

std::string Partition::dot() const {
  const Graph& g = *analysis.graph;
  std::string out = fmt::format("digraph \"{}\" {{\n  rankdir=TB;\n  node [shape=box, style=filled, fontsize=10];\n", g.name);
  for (std::size_t d = 0; d < devices.size(); ++d) {
    out += fmt::format("  \"legend {}\" [label=\"{}\", fillcolor={}];\n", devices[d], devices[d], kColors[d % 4]);
  }
  std::vector<int> where(g.nodes.size(), -1);
  for (std::size_t i = 0; i < analysis.placeable.size(); ++i) where[analysis.placeable[i]] = placement.device[i];
  for (std::size_t n = 0; n < g.nodes.size(); ++n) {
    const Node& node = g.nodes[n];
    if (where[n] < 0) {
      out += fmt::format("  n{} [label=\"{}\", fillcolor=white, style=dashed];\n", n, node.op_type);
    } else {
      out += fmt::format("  n{} [label=\"{}\\n{}\", fillcolor={}];\n", n, node.op_type, node.name, kColors[where[n] % 4]);
    }
  }
  const auto producer = producers(g);
  for (std::size_t n = 0; n < g.nodes.size(); ++n) {
    for (const auto& in : g.nodes[n].inputs) {
      const auto it = in.empty() ? producer.end() : producer.find(in);
      if (it == producer.end()) continue;
      const bool crosses = where[it->second] >= 0 && where[n] >= 0 && where[it->second] != where[n];
      const TensorDesc& d = analysis.values.at(in);
      const double bytes = static_cast<double>(shape_numel(d.shape)) * static_cast<double>(dtype_size(d.dtype));
      out += crosses ? fmt::format("  n{} -> n{} [penwidth=3, color=red, label=\"{:.2f} MB\"];\n", it->second, n, bytes / 1e6)
                     : fmt::format("  n{} -> n{};\n", it->second, n);
    }
  }
  return out + "}\n";
}

Partition partition_model(std::shared_ptr<const Graph> graph, const std::vector<Shape>& input_shapes,
                          const PartitionOptions& options) {
  return partition_analysis(analyze_model(std::move(graph), input_shapes), options);
}

Partition partition_as_placed(ModelAnalysis analysis, const PartitionOptions& options,
                              const std::vector<std::string>& device, const std::vector<int>& threads) {
  Partition part;
  part.analysis = std::move(analysis);
  part.devices = options.devices;
  part.objective = options.objective;
  part.precision = options.precision;
  part.device_options = options.device_options;
  part.device_index = options.device_index;
  const ModelAnalysis& a = part.analysis;
  const Graph& g = *a.graph;
  RW_EXPECTS(device.size() == a.placeable.size(), InvalidArgument, "{}: {} placed nodes given, the model has {}", g.name,
             device.size(), a.placeable.size());
  const std::vector<SupportFn> supports = support_functions(options);
  part.placement.device.reserve(device.size());
  for (std::size_t i = 0; i < device.size(); ++i) {
    const Node& node = g.nodes[a.placeable[i]];
    const auto it = std::find(options.devices.begin(), options.devices.end(), device[i]);
    RW_EXPECTS(it != options.devices.end(), InvalidArgument, "{}: placed on '{}', which is not one of the devices ({})",
               node.where(), device[i], fmt::join(options.devices, ", "));
    const auto d = static_cast<std::size_t>(it - options.devices.begin());
    const std::string why = supports[d](g, node, a.input_descs(a.placeable[i]));
    RW_EXPECTS(why.empty(), InvalidArgument, "{}: placed on '{}', which cannot run it: {}", node.where(), device[i], why);
    if (const auto pin = options.pinned.find(node.name); pin != options.pinned.end()) {
      RW_EXPECTS(pin->second == device[i], InvalidArgument, "{}: placed on '{}', pinned to '{}'", node.where(), device[i],
                 pin->second);
    }
    part.placement.device.push_back(static_cast<int>(d));
  }
  part.placer = part.heft = part.placement;
  part.segments = cut_model(a, part.placement.device);
  if (!threads.empty()) {
    std::vector<Segment*> host;
    for (Segment& s : part.segments) {
      if (s.device == 0) host.push_back(&s);
    }
    RW_EXPECTS(threads.size() == host.size() && part.segments.size() > 1, InvalidArgument,
               "{}: thread counts for {} host segments given, the cut has {}", g.name, threads.size(),
               part.segments.size() > 1 ? host.size() : 0);
    for (std::size_t k = 0; k < host.size(); ++k) host[k]->threads = std::max(threads[k], 0);
  }
  return part;
}

Partition partition_as_placed(std::shared_ptr<const Graph> graph, const std::vector<Shape>& input_shapes,
                              const PartitionOptions& options, const std::vector<std::string>& device,
                              const std::vector<int>& threads) {
  return partition_as_placed(analyze_model(std::move(graph), input_shapes, true, AnalysisDepth::kShapesOnly), options, device,
                             threads);
}

Partition partition_analysis(ModelAnalysis analysis, const PartitionOptions& options) {
  RW_EXPECTS(!options.devices.empty() && options.devices[0] == "cpu", InvalidArgument,
             "partition: the first device must be the host, 'cpu' (given: {})", fmt::join(options.devices, ", "));
  Partition part;
  part.analysis = std::move(analysis);
  part.devices = options.devices;
  part.objective = options.objective;
  const ModelAnalysis& a = part.analysis;
  const Graph& g = *a.graph;
  const std::size_t devices = options.devices.size();

  std::vector<DeviceProfile> profiles = options.profiles;
  if (profiles.empty()) {
    for (const auto& d : options.devices) {
      profiles.push_back(device_profile(d == "cuda" ? fmt::format("cuda:{}", options.device_index) : d));
    }
  }
  RW_EXPECTS(profiles.size() == devices, InvalidArgument, "partition: {} profiles for {} devices", profiles.size(), devices);
  CostModel costs(profiles, options.precision, options.history, options.device_options);
  part.profiles = profiles;
  part.host_layout_gbps = profiles[0].memory_gbps;
  part.precision = options.precision;
  part.device_options = options.device_options;
  part.device_index = options.device_index;
  if (options.history) part.cut_times = options.history->entries("cut ");
  for (const DeviceProfile& prof : profiles) {
    const auto learned = options.history ? options.history->find(CostHistory::segment_key(prof)) : std::nullopt;
    part.segment_ms.push_back(learned.value_or(0.0));
  }
  if (options.timed_before) {
    part.host_times = options.timed_before->host_times;
    part.device_times = options.timed_before->device_times;
    part.host_threads = options.timed_before->host_threads;
  }
  if (options.history) {
    part.handover_ms = options.history->find(CostHistory::handover_key(profiles[0])).value_or(0.0);
    part.host_timing_scale = options.history->find(CostHistory::host_timing_key(profiles[0])).value_or(1.0);
    for (const auto& [key, threads] : options.history->entries(CostHistory::host_threads_prefix)) {
      part.host_threads[key.substr(std::strlen(CostHistory::host_threads_prefix))] = static_cast<int>(std::lround(threads));
    }
  }

  // What each device can run, and the measurements that calibrate each roofline.
  const std::vector<SupportFn> supports = support_functions(options);
  part.why_not.assign(a.placeable.size(), std::vector<std::string>(devices));
  std::vector<std::tuple<int, double, double>> samples;
  for (std::size_t i = 0; i < a.placeable.size(); ++i) {
    const std::size_t n = a.placeable[i];
    const auto ins = a.input_descs(n), outs = a.output_descs(n);
    for (std::size_t d = 0; d < devices; ++d) {
      part.why_not[i][d] = supports[d](g, g.nodes[n], ins);
      const double roofline = costs.roofline_ms(static_cast<int>(d), node_work(g.nodes[n], ins, outs));
      const CostEstimate e = costs.node_ms(static_cast<int>(d), g.nodes[n], ins, outs);
      if (e.measured) samples.emplace_back(static_cast<int>(d), roofline, e.ms);
      if (d == 0 && options.use_analysis_times && a.cpu_ms[i] > 0 && !e.measured) {
        samples.emplace_back(0, roofline, a.cpu_ms[i]);
      }
    }
  }
  costs.calibrate(samples);

  PlacementProblem& p = part.problem;
  p.devices = options.devices;
  p.links.assign(devices, std::vector<PlacementProblem::Link>(devices));
  for (std::size_t x = 0; x < devices; ++x) {
    for (std::size_t y = 0; y < devices; ++y) {
      if (x != y) p.links[x][y] = costs.link(static_cast<int>(x), static_cast<int>(y));
    }
  }
  std::set<std::string> graph_inputs, graph_outputs;
  for (const auto& vi : g.inputs) graph_inputs.insert(vi.name);
  for (const auto& vi : g.outputs) graph_outputs.insert(vi.name);
  std::map<std::string, int> placed_producer;
  std::map<std::pair<int, int>, double> edge_bytes;
  part.costs.assign(a.placeable.size(), std::vector<CostEstimate>(devices));
  std::vector<int> pinned_to(a.placeable.size(), -1);
  auto bytes_of = [&](const std::string& v) {
    const TensorDesc& d = a.values.at(v);
    return static_cast<double>(shape_numel(d.shape)) * static_cast<double>(dtype_size(d.dtype));
  };
  for (std::size_t i = 0; i < a.placeable.size(); ++i) {
    const std::size_t n = a.placeable[i];
    const Node& node = g.nodes[n];
    PlacementProblem::Node pn;
    pn.name = node.name;
    const auto ins = a.input_descs(n), outs = a.output_descs(n);
    for (std::size_t d = 0; d < devices; ++d) {
      CostEstimate e = costs.node_ms(static_cast<int>(d), node, ins, outs);
      if (d == 0 && options.use_analysis_times && !e.measured && a.cpu_ms[i] > 0) e = {a.cpu_ms[i], true};
      if (!part.why_not[i][d].empty()) e.ms = kUnsupported;
      part.costs[i][d] = e;
      pn.cost_ms.push_back(e.ms);
    }
    if (!options.prefer.empty()) {
      const auto it = std::find(options.devices.begin(), options.devices.end(), options.prefer);
      RW_EXPECTS(it != options.devices.end(), InvalidArgument, "partition: preferred device '{}' is not one of {}",
                 options.prefer, fmt::join(options.devices, ", "));
      const auto d = static_cast<std::size_t>(it - options.devices.begin());
      if (part.why_not[i][d].empty()) {
        for (std::size_t o = 0; o < devices; ++o) {
          if (o != d) pn.cost_ms[o] = kUnsupported;
        }
      }
    }
    if (auto pin = options.pinned.find(node.name); pin != options.pinned.end()) {
      const auto it = std::find(options.devices.begin(), options.devices.end(), pin->second);
      RW_EXPECTS(it != options.devices.end(), InvalidArgument, "{}: pinned to '{}', which is not one of the devices ({})",
                 node.where(), pin->second, fmt::join(options.devices, ", "));
      const auto d = static_cast<std::size_t>(it - options.devices.begin());
      pinned_to[i] = static_cast<int>(d);
      RW_EXPECTS(part.why_not[i][d].empty(), Unsupported, "{}: pinned to '{}', which cannot run it: {}", node.where(),
                 pin->second, part.why_not[i][d]);
      for (std::size_t o = 0; o < devices; ++o) pn.cost_ms[o] = o == d ? part.costs[i][d].ms : kUnsupported;
    }
    for (const auto& in : node.inputs) {
      if (in.empty()) continue;
      if (graph_inputs.count(in) != 0) pn.input_bytes += bytes_of(in);
      if (auto it = placed_producer.find(in); it != placed_producer.end()) {
        edge_bytes[{it->second, static_cast<int>(i)}] += bytes_of(in);
      }
    }
    for (const auto& out : node.outputs) {
      if (out.empty()) continue;
      placed_producer[out] = static_cast<int>(i);
      if (graph_outputs.count(out) != 0) pn.output_bytes += bytes_of(out);
    }
    p.nodes.push_back(std::move(pn));
  }
  for (const auto& [ends, bytes] : edge_bytes) p.edges.push_back({ends.first, ends.second, bytes});
  part.open = p;
  for (std::size_t i = 0; i < p.nodes.size(); ++i) {
    for (std::size_t d = 0; d < devices; ++d) {
      const bool pinned_elsewhere = pinned_to[i] >= 0 && pinned_to[i] != static_cast<int>(d);
      part.open.nodes[i].cost_ms[d] = pinned_elsewhere ? kUnsupported : part.costs[i][d].ms;
    }
  }
  for (const auto& pin : options.pinned) {
    RW_EXPECTS(std::any_of(g.nodes.begin(), g.nodes.end(), [&](const Node& n) { return n.name == pin.first; }),
               InvalidArgument, "{}: no node '{}' to pin (node names after the optimizer's passes: `redwood plan -v`)",
               g.name, pin.first);
  }
  p.validate();

  // Place: the objective's placer, HEFT as the baseline, the exact reference when small enough.
  part.heft = place_heft(p);
  const bool small = placements_to_try(p) <= options.exhaustive_limit;
  if (options.objective == PartitionOptions::Objective::kLatency) {
    part.placement = place_latency(p);
    if (small) part.optimum = place_exhaustive(p, options.exhaustive_limit);
  } else {
    try {
      part.placement = place_throughput_ilp(p, options.ilp_time_limit_s);
      if (part.placement.proven_optimal) part.optimum = part.placement;
    } catch (const Error& e) {
      log().warn("{}: the throughput ILP found no placement ({}); using HEFT's", g.name, e.what());
      part.placement = part.heft;
    }
    if (small && !part.optimum) part.optimum = place_throughput_exhaustive(p, options.exhaustive_limit);
  }
  // An exact optimum is at least as good as the heuristic: take it.
  if (part.optimum && part.objective_ms(*part.optimum) < part.objective_ms(part.placement)) part.placement = *part.optimum;
  part.naive = place_naive(part.open);
  part.placer = part.placement;
  std::set<std::string> tried;  // the segments timed while planning (time_segments)
  if (options.objective == PartitionOptions::Objective::kLatency) {
    // The list schedule keeps a value on its device between two nodes there; a cut sends every
    // value between segments through the host. Among the candidates, keep the one whose cut runs
    // fastest (ties: the earlier), so a split must pay for its crossings.
    std::vector<std::vector<int>> candidates{part.placement.device, part.heft.device};
    if (part.naive) candidates.push_back(part.naive->device);
    for (std::size_t d = 0; d < devices; ++d) {
      if (std::all_of(p.nodes.begin(), p.nodes.end(), [&](const auto& n) { return n.cost_ms[d] != kUnsupported; })) {
        candidates.emplace_back(p.nodes.size(), static_cast<int>(d));
      }
    }
    double best = kUnsupported;
    for (const auto& device : candidates) {
      bool allowed = true;  // within the pins and the preference
      for (std::size_t i = 0; i < device.size(); ++i) allowed = allowed && p.nodes[i].cost_ms[static_cast<std::size_t>(device[i])] != kUnsupported;
      double ms = kUnsupported;
      if (allowed) {
        const std::vector<Segment> cut = cut_model(a, device);
        if (options.use_analysis_times) time_segments(part, cut, tried);
        ms = cut_latency_ms(part, cut);
      }
      if (ms < best - 1e-12) {
        best = ms;
        if (device != part.placement.device) {
          part.placement = Placement{device, 0, 0, false};
        }
      }
    }
  }
  fill_objectives(p, part.heft);
  fill_objectives(p, part.placement);
  fill_objectives(p, part.placer);
  if (part.optimum) fill_objectives(p, *part.optimum);
  part.segments = cut_model(a, part.placement.device);
  if (options.use_analysis_times) time_segments(part, part.segments, tried);
  set_host_threads(part, part.segments);
  return part;
}

}  // namespace redwood::runtime
