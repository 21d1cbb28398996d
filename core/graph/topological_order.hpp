#pragma once
// A stable topological order of a graph's nodes: each node as early as its inputs allow, ties
// broken by position, so that an order that is already valid comes back unchanged. The IR
// (Graph::sort_topologically) and the ONNX importer (the file's graphs, before ONNX's checker)
// order their nodes with it.

#include <cstddef>
#include <vector>

namespace redwood {

struct TopologicalOrder {
  /// Every node, producers before consumers; empty when there is a cycle.
  std::vector<std::size_t> order;
  /// When there is a cycle, the nodes of one: each reads what the one before it writes, and the
  /// first what the last writes (one node reading its own output is a cycle of one). It starts
  /// at its lowest position.
  std::vector<std::size_t> cycle;
};

/// needs[i]: the positions of the nodes whose outputs node i reads (repeats allowed).
TopologicalOrder topological_order(const std::vector<std::vector<std::size_t>>& needs);

}  // namespace redwood
