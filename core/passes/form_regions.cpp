// Regions: groups of nodes one provider runs together as one composite node (Node::body), so it
// can keep its own data layouts between them (oneDNN's blocked/NHWC layouts, reordered only at the
// region's boundary) instead of exchanging plain NCHW tensors at every node.
//
// 1. The nodes are re-sorted topologically, preferring, among the ready nodes, those a provider
//    accepts (in their original order), so accepted nodes form long contiguous runs and the
//    others (Transpose, Reshape of the outputs...) gather between them.
// 2. Each maximal contiguous run of nodes one provider accepts (at least min_nodes) becomes one
//    node: its inputs are the values the run reads and does not produce (initializers included),
//    its outputs the values it produces that later nodes or the graph outputs read. A contiguous
//    run of a topological order cannot create a cycle, whatever the run's shape.

#include "core/passes/graph_utils.hpp"
#include "core/passes/pass_manager.hpp"

#include <fmt/format.h>

#include <queue>

namespace redwood::passes {
namespace {

std::vector<RegionProvider>& registry() {
  static std::vector<RegionProvider> providers;
  return providers;
}

// Index of the provider accepting node n (the first registered that does), or -1.
int provider_of(const Graph& g, const Node& n) {
  const auto& providers = registry();
  for (std::size_t p = 0; p < providers.size(); ++p) {
    if (providers[p].accepts(g, n)) return static_cast<int>(p);
  }
  return -1;
}

// Kahn's algorithm with two ready queues (accepted nodes first), each by original index.
void sort_preferring(Graph& g, std::vector<int>& provider) {
  const std::size_t count = g.nodes.size();
  std::map<std::string, std::size_t> producer;
  for (std::size_t i = 0; i < count; ++i) {
    for (const auto& o : g.nodes[i].outputs) {
      if (!o.empty()) producer[o] = i;
    }
  }
  std::vector<std::vector<std::size_t>> readers(count);
  std::vector<std::size_t> pending(count, 0);
  for (std::size_t i = 0; i < count; ++i) {
    for (const auto& in : g.nodes[i].inputs) {
      auto it = producer.find(in);
      if (in.empty() || it == producer.end()) continue;
      readers[it->second].push_back(i);
      ++pending[i];
    }
  }
  using MinQueue = std::priority_queue<std::size_t, std::vector<std::size_t>, std::greater<>>;
  MinQueue accepted, other;
  auto push = [&](std::size_t i) { (provider[i] >= 0 ? accepted : other).push(i); };
  for (std::size_t i = 0; i < count; ++i) {
    if (pending[i] == 0) push(i);
  }
  std::vector<std::size_t> order;
  while (!accepted.empty() || !other.empty()) {
    MinQueue& q = !accepted.empty() ? accepted : other;
    const std::size_t i = q.top();
    q.pop();
    order.push_back(i);
    for (std::size_t r : readers[i]) {
      if (--pending[r] == 0) push(r);
    }
  }
  if (order.size() != count) return;  // not a DAG: leave it (the executor reports it)
  std::vector<Node> nodes;
  std::vector<int> prov;
  for (std::size_t i : order) {
    nodes.push_back(std::move(g.nodes[i]));
    prov.push_back(provider[i]);
  }
  g.nodes = std::move(nodes);
  provider = std::move(prov);
}

}  // namespace

void register_region_provider(RegionProvider provider) { registry().push_back(std::move(provider)); }
const std::vector<RegionProvider>& region_providers() { return registry(); }

void form_regions(Graph& g, std::vector<std::string>& log) {
  if (registry().empty()) return;
  std::vector<int> provider(g.nodes.size());
  for (std::size_t i = 0; i < g.nodes.size(); ++i) provider[i] = provider_of(g, g.nodes[i]);
  sort_preferring(g, provider);

  // Readers of each value by node index, to find a run's outputs.
  std::map<std::string, std::vector<std::size_t>> readers;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    for (const auto& in : g.nodes[i].inputs) {
      if (!in.empty()) readers[in].push_back(i);
    }
  }
  std::set<std::string> graph_outputs;
  for (const auto& o : g.outputs) graph_outputs.insert(o.name);

  std::vector<Node> nodes;
  std::size_t regions = 0;
  for (std::size_t i = 0; i < g.nodes.size();) {
    std::size_t end = i + 1;
    if (provider[i] >= 0) {
      while (end < g.nodes.size() && provider[end] == provider[i]) ++end;
    }
    const RegionProvider* p = provider[i] >= 0 ? &registry()[provider[i]] : nullptr;
    if (p == nullptr || end - i < p->min_nodes) {
      for (std::size_t k = i; k < end; ++k) nodes.push_back(std::move(g.nodes[k]));
      i = end;
      continue;
    }
    Node region;
    region.name = detail::fresh_name(g, fmt::format("region_{}", regions++));
    region.op_type = p->op_type;
    std::set<std::string> produced, seen_inputs;
    std::map<std::string, int> ops;
    for (std::size_t k = i; k < end; ++k) {
      const Node& n = g.nodes[k];
      for (const auto& in : n.inputs) {
        if (!in.empty() && !produced.count(in) && seen_inputs.insert(in).second) region.inputs.push_back(in);
      }
      for (const auto& o : n.outputs) {
        if (o.empty()) continue;
        produced.insert(o);
        bool outside = graph_outputs.count(o) != 0;
        for (std::size_t r : readers[o]) outside = outside || r < i || r >= end;
        if (outside) region.outputs.push_back(o);
      }
      ++ops[n.op_type];
    }
    std::string summary;
    for (const auto& [op, c] : ops) summary += fmt::format("{}{} x{}", summary.empty() ? "" : ", ", op, c);
    log.push_back(fmt::format("grouped {} nodes into {}: {} input(s), {} output(s) ({})", end - i,
                              fmt::format("node '{}' ({})", region.name, region.op_type),
                              region.inputs.size(), region.outputs.size(), summary));
    for (std::size_t k = i; k < end; ++k) region.body.push_back(std::move(g.nodes[k]));
    nodes.push_back(std::move(region));
    i = end;
  }
  g.nodes = std::move(nodes);
}

}  // namespace redwood::passes
