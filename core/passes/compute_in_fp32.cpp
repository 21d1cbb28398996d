// fp16 and bf16 graphs on kernels that compute in fp32 (the CPU's): every reduced-precision
// value inside the graph becomes fp32, while the graph's inputs and outputs keep the types the
// caller sees.
//
//   fp16/bf16 initializers, and fp16/bf16 tensor attributes (Constant's value,
//   ConstantOfShape's value)                           -> fp32 tensors
//   Cast(to = FLOAT16 | BFLOAT16)                      -> Cast(to = FLOAT) (an fp32 -> fp32 copy;
//                                                         kept, so that names and counts stay)
//   dtype = FLOAT16 | BFLOAT16 (EyeLike, RandomNormal, RandomUniform, their -Like forms,
//   Bernoulli)                                         -> dtype = FLOAT
//   value_info of fp16/bf16 intermediates              -> float
//   graph input x: fp16                                -> x, Cast(x -> x_f32, to = FLOAT), and
//                                                         every reader reads x_f32
//   graph output y: fp16                               -> its producer writes y_f32, then
//                                                         Cast(y_f32 -> y, to = FLOAT16)
//
// Results then differ from an fp16 computation by the roundings of the fp16 intermediates that
// are no longer made (within fp16 tolerance); graph outputs are rounded once, at the end.
// A graph without fp16/bf16 values, constants, casts or dtype attributes is left untouched.

#include "core/passes/compute_in_fp32.hpp"

#include <fmt/format.h>

#include <set>

namespace redwood::passes {
namespace {

bool reduced(DType t) { return t == DType::kF16 || t == DType::kBF16; }
bool reduced_onnx(std::int64_t onnx_type) { return reduced(dtype_from_onnx(static_cast<int>(onnx_type))); }

// The attribute naming an output element type, for the ops whose output type is an attribute.
const char* dtype_attribute(const Node& node) {
  if (!node.domain.empty()) return nullptr;
  if (node.op_type == "Cast") return "to";
  static const std::set<std::string> with_dtype{"EyeLike", "RandomNormal", "RandomUniform", "RandomNormalLike",
                                                "RandomUniformLike", "Bernoulli"};
  return with_dtype.count(node.op_type) ? "dtype" : nullptr;
}

bool reduced_dtype_attribute(const Node& node) {
  const char* key = dtype_attribute(node);
  if (key == nullptr) return false;
  const auto it = node.attributes.find(key);
  return it != node.attributes.end() && std::holds_alternative<std::int64_t>(it->second) &&
         reduced_onnx(std::get<std::int64_t>(it->second));
}

bool reduced_tensor_attribute(const Node& node) {
  for (const auto& [key, value] : node.attributes) {
    if (const auto* t = std::get_if<Tensor>(&value); t != nullptr && reduced(t->dtype())) return true;
  }
  return false;
}

bool reduced_node(const Node& node) {
  if (reduced_dtype_attribute(node) || reduced_tensor_attribute(node)) return true;
  for (const Node& inner : node.body) {
    if (reduced_node(inner)) return true;
  }
  return false;
}

// The node's reduced-precision constants and dtypes become fp32 (and those of its body's nodes).
void widen_node(Node& node) {
  if (reduced_dtype_attribute(node)) node.attributes[dtype_attribute(node)] = std::int64_t{dtype_to_onnx(DType::kF32)};
  for (auto& [key, value] : node.attributes) {
    if (auto* t = std::get_if<Tensor>(&value); t != nullptr && reduced(t->dtype())) *t = t->cast(DType::kF32);
  }
  for (Node& inner : node.body) widen_node(inner);
}

ValueInfo as_f32(ValueInfo vi, std::string name) {
  vi.name = std::move(name);
  vi.dtype = DType::kF32;
  vi.onnx_type = dtype_to_onnx(DType::kF32);
  return vi;
}

Node cast_node(std::string name, std::string from, std::string to, DType dtype) {
  Node cast;
  cast.name = std::move(name);
  cast.op_type = "Cast";
  cast.inputs = {std::move(from)};
  cast.outputs = {std::move(to)};
  cast.attributes["to"] = std::int64_t{dtype_to_onnx(dtype)};
  return cast;
}

// Unique value and node names: `base`, else base_1, base_2...
class Names {
 public:
  explicit Names(const Graph& g) {
    for (const auto& vi : g.inputs) taken_.insert(vi.name);
    for (const auto& vi : g.outputs) taken_.insert(vi.name);
    for (const auto& [name, vi] : g.value_info) taken_.insert(name);
    for (const auto& [name, t] : g.initializers) taken_.insert(name);
    for (const Node& node : g.nodes) {
      taken_.insert(node.name);
      for (const auto& v : node.inputs) taken_.insert(v);
      for (const auto& v : node.outputs) taken_.insert(v);
    }
  }
  std::string fresh(const std::string& base) {
    std::string name = base;
    for (int i = 1; taken_.count(name); ++i) name = base + "_" + std::to_string(i);
    taken_.insert(name);
    return name;
  }

 private:
  std::set<std::string> taken_;
};

}  // namespace

bool has_reduced_float(const Graph& g) {
  for (const auto& vi : g.inputs) {
    if (reduced(vi.dtype)) return true;
  }
  for (const auto& vi : g.outputs) {
    if (reduced(vi.dtype)) return true;
  }
  for (const auto& [name, vi] : g.value_info) {
    if (reduced(vi.dtype)) return true;
  }
  for (const auto& [name, t] : g.initializers) {
    if (reduced(t.dtype())) return true;
  }
  for (const Node& node : g.nodes) {
    if (reduced_node(node)) return true;
  }
  return false;
}

void compute_in_fp32(Graph& g, std::vector<std::string>& log) {
  if (!has_reduced_float(g)) return;
  Names names(g);
  std::set<std::string> graph_inputs, graph_outputs;
  for (const auto& vi : g.inputs) graph_inputs.insert(vi.name);
  for (const auto& vi : g.outputs) graph_outputs.insert(vi.name);

  // Outputs: whatever makes y (a node, an initializer) makes y_f32, which a Cast at the end turns
  // into y. An output that is a graph input is the caller's own tensor and stays as it is.
  std::vector<Node> output_casts;
  std::set<std::string> cast_outputs;
  for (const auto& out : g.outputs) {
    if (!reduced(out.dtype) || graph_inputs.count(out.name) || !cast_outputs.insert(out.name).second) continue;
    const std::string wide = names.fresh(out.name + "_f32");
    for (Node& node : g.nodes) {
      for (auto& v : node.inputs) if (v == out.name) v = wide;
      for (auto& v : node.outputs) if (v == out.name) v = wide;
    }
    if (auto it = g.initializers.find(out.name); it != g.initializers.end()) {
      g.initializers[wide] = it->second;
      g.initializers.erase(it);
    }
    const auto vi = g.value_info.find(out.name);
    g.value_info[wide] = as_f32(vi != g.value_info.end() ? vi->second : out, wide);
    output_casts.push_back(cast_node(names.fresh(out.name + "_cast"), wide, out.name, out.dtype));
  }

  // Inputs: readers read a Cast of x to fp32.
  std::vector<Node> input_casts;
  for (const auto& in : g.inputs) {
    if (!reduced(in.dtype)) continue;
    bool read = false;
    for (const Node& node : g.nodes) {
      for (const auto& v : node.inputs) read = read || v == in.name;
    }
    if (!read) continue;
    const std::string wide = names.fresh(in.name + "_f32");
    for (Node& node : g.nodes) {
      for (auto& v : node.inputs) if (v == in.name) v = wide;
    }
    g.value_info[wide] = as_f32(in, wide);
    input_casts.push_back(cast_node(names.fresh(in.name + "_cast"), in.name, wide, DType::kF32));
  }

  std::size_t initializers = 0, nodes = 0, values = 0;
  for (auto& [name, t] : g.initializers) {
    if (!reduced(t.dtype())) continue;
    t = t.cast(DType::kF32);
    ++initializers;
  }
  for (Node& node : g.nodes) {
    if (!reduced_node(node)) continue;
    widen_node(node);
    ++nodes;
  }
  for (auto& [name, vi] : g.value_info) {
    if (!reduced(vi.dtype) || graph_inputs.count(name) || graph_outputs.count(name)) continue;
    vi = as_f32(std::move(vi), name);
    ++values;
  }

  const std::size_t added = input_casts.size() + output_casts.size();
  std::vector<Node> all = std::move(input_casts);
  all.reserve(all.size() + g.nodes.size() + output_casts.size());
  for (Node& node : g.nodes) all.push_back(std::move(node));
  for (Node& node : output_casts) all.push_back(std::move(node));
  g.nodes = std::move(all);
  log.push_back(fmt::format(
      "fp16/bf16 computed in fp32: {} initializer(s), {} node(s) with an fp16/bf16 type or constant, {} value "
      "type(s) widened; {} Cast(s) added at the graph's fp16/bf16 inputs and outputs",
      initializers, nodes, values, added));
}

std::vector<NamedPass> cpu_pipeline(const Graph& graph, bool optimize, bool regions, bool fp32) {
  std::vector<NamedPass> pipeline;
  if (fp32 && has_reduced_float(graph)) pipeline.push_back({"compute_in_fp32", compute_in_fp32});
  if (optimize) {
    for (auto& p : default_pipeline(regions)) pipeline.push_back(std::move(p));
  }
  return pipeline;
}

}  // namespace redwood::passes
