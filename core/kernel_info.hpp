#pragma once
// The two ways a kernel factory learns about a node's inputs (KernelInfo, core/op_registry.hpp),
// one function each, for every planner that selects kernels: from what the graph declares, or
// from tensors already computed on the host at plan time. Planners whose inputs are described
// otherwise (a oneDNN region's own constants, a CUDA schedule's values) fill KernelInfo themselves.

#include "core/op_registry.hpp"

#include <vector>

namespace redwood {

/// What the graph declares about `node`'s inputs: an initializer's dtype and value, else the
/// value's declared dtype (kUndefined when absent or unknown before the run).
KernelInfo declared_kernel_info(const Graph& graph, const Node& node);

/// Inputs known as tensors (evaluated on the host at plan time): each one's dtype, as a constant;
/// an undefined tensor is an absent input.
KernelInfo constant_kernel_info(const Graph& graph, const std::vector<Tensor>& inputs);

}  // namespace redwood
