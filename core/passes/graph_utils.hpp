#pragma once
// Small helpers the passes share (private to core/passes).

#include "core/graph/graph.hpp"
#include "core/tensor.hpp"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace redwood::passes::detail {

/// Who reads each value: consumer node indices (a node reading a value twice appears twice).
struct Uses {
  std::map<std::string, std::vector<std::size_t>> consumers;
  std::set<std::string> graph_outputs;

  explicit Uses(const Graph& g) {
    for (std::size_t i = 0; i < g.nodes.size(); ++i) {
      for (const auto& in : g.nodes[i].inputs) {
        if (!in.empty()) consumers[in].push_back(i);
      }
    }
    for (const auto& o : g.outputs) graph_outputs.insert(o.name);
  }
  std::size_t count(const std::string& v) const {
    auto it = consumers.find(v);
    return it == consumers.end() ? 0 : it->second.size();
  }
  /// The one node reading v, when exactly one does and v is not a graph output; else npos.
  std::size_t sole_consumer(const std::string& v) const {
    if (graph_outputs.count(v) || count(v) != 1) return std::string::npos;
    return consumers.at(v).front();
  }
};

/// The constant fp32 tensor behind a value (an initializer), or nullptr.
inline const Tensor* constant_f32(const Graph& g, const std::string& v) {
  const Tensor* t = v.empty() ? nullptr : g.find_initializer(v);
  return t != nullptr && t->dtype() == DType::kF32 ? t : nullptr;
}

/// Whether a constant holds one value (a scalar or any shape of one element) and which.
inline bool scalar_value(const Tensor* t, float& value) {
  if (t == nullptr || t->numel() != 1) return false;
  value = static_cast<float>(t->get_as_double(0));
  return true;
}

/// Removes the nodes flagged in `dead`, keeping the others' order.
inline void erase_nodes(Graph& g, const std::vector<bool>& dead) {
  std::vector<Node> kept;
  kept.reserve(g.nodes.size());
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    if (!dead[i]) kept.push_back(std::move(g.nodes[i]));
  }
  g.nodes = std::move(kept);
}

/// A fresh initializer name based on `base`.
inline std::string fresh_name(const Graph& g, const std::string& base) {
  std::string name = base;
  for (int i = 1; g.initializers.count(name) || g.value_info.count(name); ++i) {
    name = base + "_" + std::to_string(i);
  }
  return name;
}

}  // namespace redwood::passes::detail
