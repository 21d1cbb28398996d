#include "backends/cuda/kernel_select.hpp"

#include "core/error.hpp"
#include "core/op_registry.hpp"

#include <fmt/format.h>

namespace redwood::cuda {

SelectedKernel select_cuda_kernel(const Graph& graph, const Node& node, const std::vector<TensorDesc>& inputs) {
  const KernelInfo info = planned_kernel_info(graph, inputs);
  const auto candidates = OpRegistry::instance().candidates(node.op_type, Device::kCuda);
  RW_EXPECTS(!candidates.empty(), Unsupported, "{}: no CUDA kernel for {}", node.where(), node.op_type);
  std::string reasons;
  for (const KernelEntry* e : candidates) {
    std::unique_ptr<Kernel> kernel;
    try {
      kernel = e->factory(node, info);
    } catch (const Unsupported& u) {
      reasons += fmt::format("{}{}: {}", reasons.empty() ? "" : "; ", e->provider, u.what());
      continue;
    }
    auto* cuda_kernel = dynamic_cast<CudaKernel*>(kernel.get());
    RW_EXPECTS(cuda_kernel != nullptr, Unsupported, "{}: the {} kernel is not a CUDA kernel", node.where(), e->provider);
    kernel.release();
    return {std::unique_ptr<CudaKernel>(cuda_kernel), e->provider};
  }
  throw Unsupported(fmt::format("{}: no CUDA kernel accepts it ({})", node.where(), reasons));
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
