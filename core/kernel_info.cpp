#include "core/kernel_info.hpp"

namespace redwood {

KernelInfo declared_kernel_info(const Graph& graph, const Node& node) {
  KernelInfo info;
  info.graph = &graph;
  info.opset = graph.opset;
  for (const auto& in : node.inputs) {
    const Tensor* c = in.empty() ? nullptr : graph.find_initializer(in);
    const ValueInfo* vi = in.empty() ? nullptr : graph.find_value(in);
    info.input_dtypes.push_back(c ? c->dtype() : vi ? vi->dtype : DType::kUndefined);
    info.constant_inputs.push_back(c);
  }
  return info;
}

KernelInfo constant_kernel_info(const Graph& graph, const std::vector<Tensor>& inputs) {
  std::vector<TensorDesc> descs;
  descs.reserve(inputs.size());
  for (const Tensor& t : inputs) descs.push_back(t.defined() ? TensorDesc{t.dtype(), t.shape(), &t} : TensorDesc{});
  return planned_kernel_info(graph, descs);
}

KernelInfo planned_kernel_info(const Graph& graph, const std::vector<TensorDesc>& inputs) {
  KernelInfo info;
  info.graph = &graph;
  info.opset = graph.opset;
  for (const TensorDesc& d : inputs) {
    info.input_dtypes.push_back(d.dtype);
    info.constant_inputs.push_back(d.host);
  }
  return info;
}

}  // namespace redwood
