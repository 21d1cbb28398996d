#include "core/graph/graph.hpp"

#include "core/error.hpp"

#include <queue>
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

  std::vector<std::size_t> pending(nodes.size(), 0);
  std::vector<std::vector<std::size_t>> consumers(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    for (const auto& in : nodes[i].inputs) {
      if (in.empty() || available.count(in)) continue;
      auto it = producer.find(in);
      RW_EXPECTS(it != producer.end(), InvalidArgument,
                 "{}: input '{}' is neither a graph input, an initializer nor a node output",
                 nodes[i].where(), in);
      ++pending[i];
      consumers[it->second].push_back(i);
    }
  }
  // Kahn's algorithm, keeping the file's order among ready nodes (a min-heap on index).
  std::priority_queue<std::size_t, std::vector<std::size_t>, std::greater<>> ready;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (pending[i] == 0) ready.push(i);
  }
  std::vector<Node> sorted;
  sorted.reserve(nodes.size());
  while (!ready.empty()) {
    const std::size_t i = ready.top();
    ready.pop();
    for (std::size_t c : consumers[i]) {
      if (--pending[c] == 0) ready.push(c);
    }
    sorted.push_back(std::move(nodes[i]));
  }
  if (sorted.size() != nodes.size()) {
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      RW_EXPECTS(pending[i] == 0, InvalidArgument, "{} is part of a cycle", nodes[i].where());
    }
  }
  nodes = std::move(sorted);
}

}  // namespace redwood
