// Dead-code elimination: a node is live when one of its outputs is a graph output or is read by
// a live node; the others go, then initializers nothing reads.

#include "core/passes/graph_utils.hpp"
#include "core/passes/pass_manager.hpp"

#include <fmt/format.h>

namespace redwood::passes {

void eliminate_dead_code(Graph& g, std::vector<std::string>& log) {
  std::set<std::string> needed;
  for (const auto& o : g.outputs) needed.insert(o.name);
  std::vector<bool> dead(g.nodes.size(), true);
  for (std::size_t i = g.nodes.size(); i-- > 0;) {
    const Node& n = g.nodes[i];
    bool live = false;
    for (const auto& o : n.outputs) live = live || (!o.empty() && needed.count(o));
    if (!live) continue;
    dead[i] = false;
    for (const auto& in : n.inputs) {
      if (!in.empty()) needed.insert(in);
    }
  }
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    if (dead[i]) log.push_back(fmt::format("removed {}", g.nodes[i].where()));
  }
  detail::erase_nodes(g, dead);
  std::size_t unused = 0;
  for (auto it = g.initializers.begin(); it != g.initializers.end();) {
    if (!needed.count(it->first)) {
      it = g.initializers.erase(it);
      ++unused;
    } else {
      ++it;
    }
  }
  if (unused > 0) log.push_back(fmt::format("removed {} unused initializer(s)", unused));
}

}  // namespace redwood::passes
