#include "backends/cuda/kernel_select.hpp"

#include "core/error.hpp"
#include "core/kernel_select.hpp"

#include <fmt/format.h>

namespace redwood::cuda {

SelectedKernel select_cuda_kernel(const Graph& graph, const Node& node, const std::vector<TensorDesc>& inputs) {
  redwood::SelectedKernel selected = select_kernel(node, planned_kernel_info(graph, inputs), Device::kCuda);
  auto* cuda_kernel = dynamic_cast<CudaKernel*>(selected.kernel.get());
  RW_EXPECTS(cuda_kernel != nullptr, Unsupported, "{}: the {} kernel is not a CUDA kernel", node.where(),
             selected.provider);
  selected.kernel.release();
  return {std::unique_ptr<CudaKernel>(cuda_kernel), std::move(selected.provider)};
}

std::string cuda_supports(const Graph& graph, const Node& node, const std::vector<TensorDesc>& inputs,
                          Precision precision) {
  try {
    SelectedKernel selected = select_cuda_kernel(graph, node, inputs);
    selected.kernel->set_precision(precision);
    const PlanInfo info{node, inputs, precision, graph.opset};
    selected.kernel->plan(info);
    return {};
  } catch (const Unsupported& e) {
    return e.what();
  } catch (const InvalidArgument& e) {
    // A kernel that refuses these shapes (plan() checks them) cannot run the node here either.
    return e.what();
  }
}

}  // namespace redwood::cuda
