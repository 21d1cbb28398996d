#pragma once
// One node run through one provider's kernel (the reference kernels on the CPU, or Redwood's
// CUDA kernels at a precision through CudaKernel::run), for the GPU kernel tests that compare the
// two on the same inputs and attributes.

#include "backends/cuda/cuda_kernel.hpp"
#include "core/error.hpp"

#include <fmt/format.h>

#include <map>
#include <string>
#include <vector>

namespace redwood::cuda::testing {

/// Runs `op` on `inputs` (an undefined Tensor is an absent input) with `attributes`; returns the
/// outputs, contiguous on the host.
inline std::vector<Tensor> run_with_provider(const std::string& op, const std::vector<Tensor>& inputs,
                                             const std::map<std::string, AttributeValue>& attributes, Device device,
                                             const std::string& provider, Precision precision,
                                             std::size_t outputs = 1, std::int64_t opset = 17) {
  Graph graph;
  graph.opset = opset;
  Node node;
  node.name = op + "_under_test";
  node.op_type = op;
  node.attributes = attributes;
  KernelInfo info;
  info.graph = &graph;
  info.opset = opset;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    node.inputs.push_back(inputs[i].defined() ? "in" + std::to_string(i) : "");
    info.input_dtypes.push_back(inputs[i].defined() ? inputs[i].dtype() : DType::kUndefined);
    info.constant_inputs.push_back(nullptr);
  }
  for (std::size_t o = 0; o < outputs; ++o) node.outputs.push_back("out" + std::to_string(o));
  const KernelEntry* entry = nullptr;
  for (const KernelEntry* e : OpRegistry::instance().candidates(op, device)) {
    if (e->provider == provider) entry = e;
  }
  if (entry == nullptr) throw Unsupported(fmt::format("no {} kernel for {}", provider, op));
  std::unique_ptr<Kernel> kernel = entry->factory(node, info);
  if (auto* ck = dynamic_cast<CudaKernel*>(kernel.get())) ck->set_precision(precision);
  std::vector<Tensor> out(outputs);
  KernelContext ctx{inputs, out, node};
  kernel->run(ctx);
  for (auto& t : out) t = t.contiguous();
  return out;
}

}  // namespace redwood::cuda::testing
