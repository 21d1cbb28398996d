#pragma once
// Which CUDA kernel runs a node: one loop over the op registry for every CUDA planner (the
// schedule of graph_runner.cpp) and for the partitioner's question "does the GPU run this node at
// these shapes?" (the "cuda" device's supports(), registered in cuda_model_runner.cpp). Host only:
// factories and plan() make no CUDA call, so the answer is the same on a machine without a GPU.

#include "backends/cuda/cuda_kernel.hpp"
#include "core/graph/graph.hpp"
#include "core/kernel_info.hpp"

#include <memory>
#include <string>
#include <vector>

namespace redwood::cuda {

struct SelectedKernel {
  std::unique_ptr<CudaKernel> kernel;
  std::string provider;
};

/// The highest-priority CUDA kernel whose factory accepts `node` with these inputs (an absent
/// input has dtype kUndefined). Throws Unsupported naming the node, with every provider's reason,
/// when none does.
SelectedKernel select_cuda_kernel(const Graph& graph, const Node& node, const std::vector<TensorDesc>& inputs);

/// "" when a CUDA kernel accepts `node` and plans it at these input shapes and `precision`, else
/// why not (the kernel's own words). Never throws for an unsupported node.
std::string cuda_supports(const Graph& graph, const Node& node, const std::vector<TensorDesc>& inputs,
                          Precision precision);

}  // namespace redwood::cuda
