#pragma once
// Redwood's model IR: a graph of nodes over named values. Values carry an element type and a
// shape whose dimensions are either known extents or named symbols ("batch", "height") resolved
// per run. Initializers are constant tensors. Nodes keep their ONNX op type and attributes.

#include "core/tensor.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace redwood {

/// One dimension of a value's shape: a known extent, or a symbol (possibly empty: unknown).
struct Dim {
  std::int64_t value = -1;  // -1 when unknown or symbolic
  std::string symbol;
  bool known() const { return value >= 0; }
};

/// A graph input, output or intermediate: name, dtype, and (when known) its shape.
struct ValueInfo {
  std::string name;
  DType dtype = DType::kUndefined;
  int onnx_type = 0;  // the ONNX type code, kept to name types Redwood lacks
  bool has_shape = false;
  std::vector<Dim> dims;
  /// "float[batch, 3, ?, 640]".
  std::string description() const;
};

/// An attribute value. Graph-valued attributes (If/Loop bodies) are not held: the importer
/// inlines an If whose condition is a constant and reports other such nodes as unsupported.
using AttributeValue = std::variant<std::int64_t, float, std::string, std::vector<std::int64_t>,
                                    std::vector<float>, std::vector<std::string>, Tensor>;

struct Node {
  std::string name;     // unique within the graph (the importer names unnamed nodes)
  std::string op_type;  // "Conv"
  std::string domain;   // "" for the default ONNX domain
  std::vector<std::string> inputs;   // "" marks an absent optional input
  std::vector<std::string> outputs;  // "" marks an unused optional output
  std::map<std::string, AttributeValue> attributes;
  /// A composite node's inner nodes, in topological order (empty for ONNX ops). The optimizer's
  /// region step (core/passes/form_regions.cpp) moves a group of nodes here, so one kernel can run
  /// them together; the node's inputs/outputs are the group's boundary values.
  std::vector<Node> body;

  bool has_attr(const std::string& key) const { return attributes.count(key) != 0; }
  /// Typed attribute access with a default; a present attribute of the wrong type throws
  /// InvalidArgument naming the node and the attribute.
  std::int64_t attr_int(const std::string& key, std::int64_t fallback) const;
  float attr_float(const std::string& key, float fallback) const;
  std::string attr_string(const std::string& key, const std::string& fallback) const;
  std::vector<std::int64_t> attr_ints(const std::string& key,
                                      const std::vector<std::int64_t>& fallback = {}) const;
  std::vector<float> attr_floats(const std::string& key, const std::vector<float>& fallback = {}) const;
  const Tensor& attr_tensor(const std::string& key) const;

  /// "node 'conv_1' (Conv)": how errors name a node.
  std::string where() const;
  /// Number of inputs that are present (not "").
  bool has_input(std::size_t i) const { return i < inputs.size() && !inputs[i].empty(); }
};

class Graph {
 public:
  std::string name;
  std::string source;          // file the graph came from, for messages
  std::int64_t opset = 0;      // opset of the default ONNX domain
  std::vector<ValueInfo> inputs;   // real inputs only (initializers are not listed here)
  std::vector<ValueInfo> outputs;
  std::map<std::string, ValueInfo> value_info;  // everything shape inference knows, by name
  std::map<std::string, Tensor> initializers;
  std::vector<Node> nodes;  // topologically ordered

  const ValueInfo* find_value(const std::string& value) const;
  const Tensor* find_initializer(const std::string& value) const;
  /// Reorders nodes so that each comes after the producers of its inputs, keeping the present
  /// order where it is valid (core/graph/topological_order.hpp); throws InvalidArgument naming a
  /// node whose input nothing produces, or the nodes on a cycle.
  void sort_topologically();
};

}  // namespace redwood
