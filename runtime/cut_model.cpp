#include "runtime/cut_model.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace redwood::runtime {

std::map<std::string, std::size_t> value_producers(const Graph& g) {
  std::map<std::string, std::size_t> by_value;
  for (std::size_t n = 0; n < g.nodes.size(); ++n) {
    for (const auto& out : g.nodes[n].outputs) {
      if (!out.empty()) by_value[out] = n;
    }
  }
  return by_value;
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
  const auto producer = value_producers(g);
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

}  // namespace redwood::runtime
