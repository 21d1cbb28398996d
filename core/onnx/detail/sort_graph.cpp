// Ordering an ONNX file's graphs before ONNX's checker, which refuses nodes out of topological
// order where ONNX Runtime sorts them (onnxruntime/core/graph/graph.cc, Graph::PerformTopologicalSortAndCheckIsAcyclic).
// A node that holds graphs (If, Loop, Scan) depends on the values those graphs read from the
// enclosing one as much as on its own inputs: ONNX Runtime calls them implicit inputs.

#include "core/onnx/detail/onnx_proto.hpp"

#include "core/error.hpp"
#include "core/graph/topological_order.hpp"
#include "core/log.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace redwood::onnx_detail {

namespace {

using Names = std::unordered_set<std::string>;

void add_outer_reads(const onnx::GraphProto& graph, Names& reads);

// What the graphs held by `node`'s attributes read from outside themselves.
void add_implicit_inputs(const onnx::NodeProto& node, Names& reads) {
  for (const auto& a : node.attribute()) {
    if (a.has_g()) add_outer_reads(a.g(), reads);
    for (const auto& g : a.graphs()) add_outer_reads(g, reads);
  }
}

// What `graph` (its nodes, the graphs nested in them, its outputs) reads that it does not define.
void add_outer_reads(const onnx::GraphProto& graph, Names& reads) {
  Names defined;
  for (const auto& v : graph.input()) defined.insert(v.name());
  for (const auto& t : graph.initializer()) defined.insert(t.name());
  for (const auto& t : graph.sparse_initializer()) defined.insert(t.values().name());
  for (const auto& n : graph.node()) defined.insert(n.output().begin(), n.output().end());
  Names read;
  for (const auto& n : graph.node()) {
    read.insert(n.input().begin(), n.input().end());
    add_implicit_inputs(n, read);
  }
  for (const auto& v : graph.output()) read.insert(v.name());
  for (const auto& name : read) {
    if (!name.empty() && !defined.count(name)) reads.insert(name);
  }
}

std::string subgraph_where(const std::string& where, const onnx::NodeProto& node, const std::string& attribute) {
  return fmt::format("{}: {} attribute '{}'", where, node_label(node), attribute);
}

}  // namespace

void sort_graph(onnx::GraphProto& graph, const std::string& where, bool outermost) {
  const int count = graph.node_size();
  for (int i = 0; i < count; ++i) {
    onnx::NodeProto& node = *graph.mutable_node(i);
    for (auto& a : *node.mutable_attribute()) {
      if (a.has_g()) sort_graph(*a.mutable_g(), subgraph_where(where, node, a.name()), false);
      for (int k = 0; k < a.graphs_size(); ++k) {
        sort_graph(*a.mutable_graphs(k), subgraph_where(where, node, fmt::format("{}[{}]", a.name(), k)), false);
      }
    }
  }

  Names given;
  for (const auto& v : graph.input()) given.insert(v.name());
  for (const auto& t : graph.initializer()) given.insert(t.name());
  for (const auto& t : graph.sparse_initializer()) given.insert(t.values().name());
  std::unordered_map<std::string, int> producer;
  for (int i = 0; i < count; ++i) {
    const onnx::NodeProto& node = graph.node(i);
    for (const auto& out : node.output()) {
      if (out.empty()) continue;
      RW_EXPECTS(!given.count(out), InvalidArgument, "{}: {} writes '{}', which is a graph input or an initializer", where,
                 node_label(node), out);
      const auto [it, fresh] = producer.emplace(out, i);
      RW_EXPECTS(fresh, InvalidArgument, "{}: {} and {} both write '{}' (a graph names each value once)", where,
                 node_label(graph.node(it->second)), node_label(node), out);
    }
  }

  std::vector<std::vector<std::size_t>> needs(static_cast<std::size_t>(count));
  int first_early = -1;  // the first node that reads a value written after it
  std::string early_value;
  for (int i = 0; i < count; ++i) {
    const onnx::NodeProto& node = graph.node(i);
    for (const auto& name : node.input()) {
      if (name.empty() || given.count(name) || producer.count(name)) continue;
      RW_EXPECTS(!outermost, InvalidArgument, "{}: {}: input '{}' is neither a graph input, an initializer nor a node output",
                 where, node_label(node), name);
    }
    Names implicit;
    add_implicit_inputs(node, implicit);
    std::vector<std::string> reads(node.input().begin(), node.input().end());
    reads.insert(reads.end(), implicit.begin(), implicit.end());
    std::sort(reads.begin() + node.input_size(), reads.end());  // a message names the same value every time
    for (const auto& name : reads) {
      const auto it = producer.find(name);
      if (it == producer.end()) continue;  // given, absent (""), or from an enclosing graph
      needs[static_cast<std::size_t>(i)].push_back(static_cast<std::size_t>(it->second));
      if (it->second >= i && first_early < 0) {
        first_early = i;
        early_value = name;
      }
    }
  }
  const TopologicalOrder sorted = topological_order(needs);
  if (!sorted.cycle.empty()) {
    std::string path;
    for (std::size_t i : sorted.cycle) path += node_label(graph.node(static_cast<int>(i))) + " -> ";
    throw InvalidArgument(fmt::format("{}: the nodes form a cycle: {}{}", where, path,
                                      node_label(graph.node(static_cast<int>(sorted.cycle[0])))));
  }
  if (first_early < 0) return;
  log().warn("{}: the nodes are not in topological order ({} reads '{}' before {} writes it): sorted them as ONNX Runtime "
             "does (ONNX's checker refuses the order)",
             where, node_label(graph.node(first_early)), early_value, node_label(graph.node(producer.at(early_value))));
  google::protobuf::RepeatedPtrField<onnx::NodeProto> ordered;
  ordered.Reserve(count);
  for (std::size_t i : sorted.order) *ordered.Add() = std::move(*graph.mutable_node(static_cast<int>(i)));
  graph.mutable_node()->Swap(&ordered);
}

}  // namespace redwood::onnx_detail
