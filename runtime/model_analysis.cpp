#include "runtime/model_analysis.hpp"

#include "core/error.hpp"
#include "core/passes/pass_manager.hpp"
#include "runtime/cost_model.hpp"
#include "runtime/executor.hpp"
#include "runtime/value_pool.hpp"

#include <algorithm>
#include <chrono>
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

}  // namespace redwood::runtime
