#pragma once
// The schema of Redwood's own ops: each op whose type starts with "rw." is declared once, with its
// inputs, outputs, attributes (type, whether required, default, meaning) and what it computes
// (core/ops/schema.cpp holds them all, the names are core/ops/names.hpp). The op registry refuses a
// kernel for an "rw." op that has no schema (as DALI's DALI_SCHEMA / DALI_REGISTER_OPERATOR), and
// check_node() holds a node to its op's schema where graphs come from outside the process (a
// saved optimized graph, core/graph/graph_file.hpp) and in the passes' tests.
//
// Standard ONNX ops that carry Redwood attributes (the fused epilogue's rw.activation on a Conv)
// are not "rw." ops; their attributes are declared as `rw_attributes_of_onnx_ops()`.

#include "core/graph/graph.hpp"

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace redwood::ops {

/// The value types of AttributeValue (core/graph/graph.hpp), in its order.
enum class AttrType { kInt, kFloat, kString, kInts, kFloats, kStrings, kTensor };
std::string_view attr_type_name(AttrType t);

struct AttrSchema {
  std::string name;
  AttrType type;
  bool required = false;
  std::string default_value;  // as documentation ("1, 1"; empty where required or absent means off)
  std::string doc;
};

struct InputSchema {
  std::string name;
  bool optional = false;
  std::string doc;  // its dtype and shape
};

struct OpSchema {
  std::string op_type;
  std::string doc;
  std::vector<InputSchema> inputs{};
  std::vector<std::string> outputs{};  // each output's dtype and shape
  std::vector<AttrSchema> attributes{};
  /// Also takes attributes the schema does not name (ONNX's own, e.g. a convolution's strides,
  /// copied from the op it replaces), where the op's kernels read them by ONNX's rules.
  bool onnx_attributes = false;
  /// Takes any number of trailing inputs after those listed (rw.ElementwiseChain's operands).
  bool variadic_inputs = false;

  const AttrSchema* attribute(std::string_view name) const;
};

/// The schema of `op_type`, or nullptr.
const OpSchema* find_schema(std::string_view op_type);
/// Every schema, by op type.
std::vector<const OpSchema*> all_schemas();
/// Adds a schema (the built-in ones need no call; tests declare their own "rw.test.*" ops).
/// Throws Error when the op type already has one or does not start with "rw.".
void register_schema(OpSchema schema);

/// Whether `op_type` is one of Redwood's own ("rw." ...), and so needs a schema.
inline bool is_redwood_op(std::string_view op_type) { return op_type.rfind("rw.", 0) == 0; }

/// Holds a node to its op's schema: inputs within the declared count and the required ones
/// present, required attributes present, every "rw." attribute declared and of its type (other
/// attributes only where the op takes ONNX's). Throws InvalidArgument naming the node and what
/// differs. Nodes of ONNX ops: their "rw." attributes against rw_attributes_of_onnx_ops().
void check_node(const Node& node);

/// The Redwood attributes standard ONNX ops may carry (the fused epilogue's).
std::span<const AttrSchema> rw_attributes_of_onnx_ops();

}  // namespace redwood::ops

/// Declares a schema at static initialization (tests; the built-in schemas are in schema.cpp).
#define RW_OP_SCHEMA(...)                                                                     \
  [[maybe_unused]] static const bool RW_OP_SCHEMA_CONCAT(rw_op_schema_, __COUNTER__) =        \
      (::redwood::ops::register_schema(__VA_ARGS__), true)
#define RW_OP_SCHEMA_CONCAT_INNER(a, b) a##b
#define RW_OP_SCHEMA_CONCAT(a, b) RW_OP_SCHEMA_CONCAT_INNER(a, b)
