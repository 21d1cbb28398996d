#pragma once
// Kernel selection: the one loop over the op registry (core/op_registry.hpp) that every planner
// runs to give a node its kernel: the CPU executable, the CUDA schedule's planner (and through it
// the partitioner's "does this device run the node"), and the host evaluations of constant
// folding and the schedule's shape arithmetic.
//
// Providers are tried from the highest priority down. A factory that throws Unsupported passes
// the node to the next provider (it cannot run this node: another may); any other Error ends the
// search (the node itself is wrong: no provider will do better) and is what the caller gets.
// Only ONNX's default domain is looked up: a node of another domain ("com.microsoft") has no
// kernel here even where an op of its name exists.

#include "core/graph/graph.hpp"
#include "core/op_registry.hpp"

#include <functional>
#include <memory>
#include <string>

namespace redwood {

struct SelectedKernel {
  std::unique_ptr<Kernel> kernel;
  std::string provider;
};

/// Which registered providers may answer; every one when empty.
using ProviderFilter = std::function<bool(const KernelEntry&)>;
/// The reference provider alone (the ground truth; host evaluation at plan time).
bool reference_provider_only(const KernelEntry& entry);

/// The kernel of the highest-priority provider on `device` (among those `filter` admits) whose
/// factory accepts `node` given `info`. Throws Unsupported naming the node: "op X has no cpu
/// kernel" when no provider has one, else "no cpu kernel accepts it (onednn: why; reference:
/// why)"; a factory's other Error as it is.
SelectedKernel select_kernel(const Node& node, const KernelInfo& info, Device device,
                             const ProviderFilter& filter = {});

}  // namespace redwood
