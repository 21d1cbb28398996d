#pragma once
// The two ways a kernel factory learns about a node's inputs (KernelInfo, core/op_registry.hpp),
// one function each, for every planner that selects kernels: from what the graph declares, or
// from tensors already computed on the host at plan time. Planners whose inputs are described
// otherwise (a oneDNN region's own constants, a CUDA schedule's values) fill KernelInfo themselves.

#include "core/op_registry.hpp"

#include <vector>

namespace redwood {

/// An input or output as planned: dtype, shape, and the value itself when it is known on the
/// host at plan time (nullptr otherwise). What device planners (the CUDA schedule) and the
/// partitioner's support checks know of a value before it exists.
struct TensorDesc {
  DType dtype = DType::kUndefined;
  Shape shape;
  const Tensor* host = nullptr;
  bool defined() const { return dtype != DType::kUndefined; }
};

/// What the graph declares about `node`'s inputs: an initializer's dtype and value, else the
/// value's declared dtype (kUndefined when absent or unknown before the run).
KernelInfo declared_kernel_info(const Graph& graph, const Node& node);

/// Inputs known as tensors (evaluated on the host at plan time): each one's dtype, as a constant;
/// an undefined tensor is an absent input.
KernelInfo constant_kernel_info(const Graph& graph, const std::vector<Tensor>& inputs);

/// Planned inputs: each one's dtype, and its value where known on the host.
KernelInfo planned_kernel_info(const Graph& graph, const std::vector<TensorDesc>& inputs);

}  // namespace redwood
