#include "core/kernel_select.hpp"

#include "core/error.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string_view>
#include <vector>

namespace redwood {
namespace {

// A provider's reason without the node's name in front: the message names the node once.
std::string_view reason_of(const Node& node, std::string_view what) {
  const std::string where = node.where() + ": ";
  if (what.substr(0, where.size()) == where) what.remove_prefix(where.size());
  return what;
}

}  // namespace

bool reference_provider_only(const KernelEntry& entry) { return entry.provider == kReferenceProvider; }

SelectedKernel select_kernel(const Node& node, const KernelInfo& info, Device device, const ProviderFilter& filter) {
  std::vector<const KernelEntry*> candidates;
  if (node.domain.empty() || node.domain == "ai.onnx") {
    for (const KernelEntry* e : OpRegistry::instance().candidates(node.op_type, device)) {
      if (!filter || filter(*e)) candidates.push_back(e);
    }
  }
  RW_EXPECTS(!candidates.empty(), Unsupported, "{}: op {}{} has no {} kernel", node.where(),
             node.domain.empty() ? "" : node.domain + ".", node.op_type, device_name(device));
  std::vector<std::string> reasons;  // "provider: why", one per provider that refused
  std::string last;                  // the last refusal in its provider's own words
  for (const KernelEntry* e : candidates) {
    try {
      return {e->factory(node, info), e->provider};
    } catch (const Unsupported& u) {
      last = reason_of(node, u.what());
      reasons.push_back(fmt::format("{}: {}", e->provider, last));
    }  // any other Error propagates as it is: the node itself is wrong
  }
  if (candidates.size() == 1) throw Unsupported(fmt::format("{}: {}", node.where(), last));
  throw Unsupported(fmt::format("{}: no {} kernel accepts it ({})", node.where(), device_name(device),
                                fmt::join(reasons, "; ")));
}

}  // namespace redwood
