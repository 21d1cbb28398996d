#include "core/graph/graph.hpp"

#include "core/error.hpp"
#include "core/graph/topological_order.hpp"

#include <set>
#include <unordered_map>

namespace redwood {

std::string ValueInfo::description() const {
  std::string out(dtype != DType::kUndefined ? dtype_name(dtype) : onnx_type_name(onnx_type));
  if (!has_shape) return out + "[?]";
  out += "[";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i) out += ", ";
    if (dims[i].known()) {
      out += std::to_string(dims[i].value);
    } else {
      out += dims[i].symbol.empty() ? "?" : dims[i].symbol;
    }
  }
  return out + "]";
}

namespace {
template <typename T>
const T* get_attr(const Node& node, const std::string& key, const char* type_name) {
  auto it = node.attributes.find(key);
  if (it == node.attributes.end()) return nullptr;
  const T* v = std::get_if<T>(&it->second);
  RW_EXPECTS(v != nullptr, InvalidArgument, "{}: attribute '{}' is not of type {}", node.where(),
             key, type_name);
  return v;
}
}  // namespace

std::int64_t Node::attr_int(const std::string& key, std::int64_t fallback) const {
  const auto* v = get_attr<std::int64_t>(*this, key, "int");
  return v ? *v : fallback;
}

float Node::attr_float(const std::string& key, float fallback) const {
  const auto* v = get_attr<float>(*this, key, "float");
  return v ? *v : fallback;
}

std::string Node::attr_string(const std::string& key, const std::string& fallback) const {
  const auto* v = get_attr<std::string>(*this, key, "string");
  return v ? *v : fallback;
}

std::vector<std::int64_t> Node::attr_ints(const std::string& key,
                                          const std::vector<std::int64_t>& fallback) const {
  const auto* v = get_attr<std::vector<std::int64_t>>(*this, key, "ints");
  return v ? *v : fallback;
}

std::vector<float> Node::attr_floats(const std::string& key, const std::vector<float>& fallback) const {
  const auto* v = get_attr<std::vector<float>>(*this, key, "floats");
  return v ? *v : fallback;
}

const Tensor& Node::attr_tensor(const std::string& key) const {
  const auto* v = get_attr<Tensor>(*this, key, "tensor");
  RW_EXPECTS(v != nullptr, InvalidArgument, "{}: attribute '{}' is missing", where(), key);
  return *v;
}

std::string Node::where() const { return "node '" + name + "' (" + op_type + ")"; }

const ValueInfo* Graph::find_value(const std::string& value) const {
  auto it = value_info.find(value);
  return it == value_info.end() ? nullptr : &it->second;
}

const Tensor* Graph::find_initializer(const std::string& value) const {
  auto it = initializers.find(value);
  return it == initializers.end() ? nullptr : &it->second;
}

void Graph::sort_topologically() {
  std::unordered_map<std::string, std::size_t> producer;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    for (const auto& out : nodes[i].outputs) {
      if (!out.empty()) producer[out] = i;
    }
  }
  std::set<std::string> available;
  for (const auto& in : inputs) available.insert(in.name);
  for (const auto& [n, t] : initializers) available.insert(n);

  std::vector<std::vector<std::size_t>> needs(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    for (const auto& in : nodes[i].inputs) {
      if (in.empty() || available.count(in)) continue;
      auto it = producer.find(in);
      RW_EXPECTS(it != producer.end(), InvalidArgument,
                 "{}: input '{}' is neither a graph input, an initializer nor a node output",
                 nodes[i].where(), in);
      needs[i].push_back(it->second);
    }
  }
  const TopologicalOrder sorted = topological_order(needs);
  if (!sorted.cycle.empty()) {
    std::string path;
    for (std::size_t i : sorted.cycle) path += nodes[i].where() + " -> ";
    throw InvalidArgument(fmt::format("{}{}the nodes form a cycle: {}{}", source, source.empty() ? "" : ": ", path,
                                      nodes[sorted.cycle[0]].where()));
  }
  std::vector<Node> ordered;
  ordered.reserve(nodes.size());
  for (std::size_t i : sorted.order) ordered.push_back(std::move(nodes[i]));
  nodes = std::move(ordered);
}

}  // namespace redwood
