#include "core/op_registry.hpp"

#include "core/error.hpp"

#include <algorithm>

namespace redwood {

const Tensor& KernelContext::input(std::size_t i) const {
  RW_EXPECTS(has_input(i), InvalidArgument, "{}: input {} is required but absent", node.where(), i);
  return inputs[i];
}

OpRegistry& OpRegistry::instance() {
  static OpRegistry registry;
  return registry;
}

void OpRegistry::add(const std::string& op_type, Device device, KernelFactory factory) {
  RW_EXPECTS(find(op_type, device) == nullptr, Error, "op {} on {} is registered twice", op_type,
             device_name(device));
  entries_.emplace_back(op_type, device, std::move(factory));
}

const KernelFactory* OpRegistry::find(const std::string& op_type, Device device) const {
  for (const auto& [op, dev, factory] : entries_) {
    if (op == op_type && dev == device) return &factory;
  }
  return nullptr;
}

std::vector<std::string> OpRegistry::ops(Device device) const {
  std::vector<std::string> out;
  for (const auto& [op, dev, factory] : entries_) {
    if (dev == device) out.push_back(op);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void expect_dtype(const Node& node, DType dtype, std::initializer_list<DType> allowed, const char* what) {
  if (dtype == DType::kUndefined) return;
  if (std::find(allowed.begin(), allowed.end(), dtype) != allowed.end()) return;
  std::string list;
  for (DType d : allowed) {
    if (!list.empty()) list += ", ";
    list += dtype_name(d);
  }
  throw Unsupported(fmt::format("{}: {} of type {} is not supported (supported: {})", node.where(),
                                what, dtype_name(dtype), list));
}

}  // namespace redwood
