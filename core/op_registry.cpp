#include "core/op_registry.hpp"

#include "core/error.hpp"
#include "core/ops/schema.hpp"

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
  add(op_type, device, kReferenceProvider, 0, std::move(factory));
}

void OpRegistry::add(const std::string& op_type, Device device, const std::string& provider,
                     int priority, KernelFactory factory) {
  // Redwood's own ops are declared before anything implements them (core/ops/schema.hpp).
  RW_EXPECTS(!ops::is_redwood_op(op_type) || ops::find_schema(op_type) != nullptr, Error,
             "a kernel for {} on {} (provider {}) is registered, but the op has no schema: declare it in "
             "core/ops/schema.cpp",
             op_type, device_name(device), provider);
  for (const auto& e : entries_) {
    RW_EXPECTS(!(e.op_type == op_type && e.device == device && e.provider == provider), Error,
               "op {} on {} is registered twice by provider {}", op_type, device_name(device),
               provider);
  }
  entries_.push_back({op_type, device, provider, priority, std::move(factory)});
}

std::vector<const KernelEntry*> OpRegistry::candidates(const std::string& op_type,
                                                       Device device) const {
  std::vector<const KernelEntry*> out;
  for (const auto& e : entries_) {
    if (e.op_type == op_type && e.device == device) out.push_back(&e);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const KernelEntry* a, const KernelEntry* b) { return a->priority > b->priority; });
  return out;
}

const KernelFactory* OpRegistry::find(const std::string& op_type, Device device) const {
  const auto c = candidates(op_type, device);
  return c.empty() ? nullptr : &c.front()->factory;
}

std::vector<std::string> OpRegistry::ops(Device device) const {
  std::vector<std::string> out;
  for (const auto& e : entries_) {
    if (e.device == device) out.push_back(e.op_type);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
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
