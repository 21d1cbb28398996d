// LayerNormalization (opset 17: axis, epsilon, the optional Mean and InvStdDev outputs) and
// InstanceNormalization on the GPU, both as row normalizations (normalize.cu).

#include "backends/cuda/cuda_kernel.hpp"
#include "backends/cuda/kernels/launchers.hpp"
#include "core/error.hpp"

namespace redwood::cuda {
namespace {

class LayerNormKernel final : public CudaKernel {
 public:
  LayerNormKernel(const Node& node, const KernelInfo& info) : node_(node) {
    for (DType t : info.input_dtypes) {
      if (t != DType::kUndefined) expect_f32(node, t);
    }
    p_.epsilon = node.attr_float("epsilon", 1e-5f);
    RW_EXPECTS(node.attr_int("stash_type", 1) == 1, Unsupported,
               "{}: stash_type {} (only 1, float statistics, runs on the GPU)", node.where(),
               node.attr_int("stash_type", 1));
  }

  std::vector<TensorDesc> plan(const PlanInfo& info) override {
    const Shape& x = info.input(0).shape;
    for (std::size_t i = 0; i < 3; ++i) {
      if (info.has_input(i)) expect_f32(node_, info.input(i).dtype);
    }
    const auto rank = static_cast<std::int64_t>(x.size());
    const std::int64_t axis_attr = node_.attr_int("axis", -1);
    RW_EXPECTS(rank > 0 && axis_attr >= -rank && axis_attr < rank, InvalidArgument,
               "{}: axis {} is out of range for input {}", node_.where(), axis_attr, shape_str(x));
    const std::int64_t axis = normalize_axis(axis_attr, rank);
    p_.rows = 1;
    p_.len = 1;
    Shape stats;
    for (std::int64_t d = 0; d < rank; ++d) {
      const auto e = x[static_cast<std::size_t>(d)];
      (d < axis ? p_.rows : p_.len) *= e;
      stats.push_back(d < axis ? e : 1);
    }
    for (std::size_t i = 1; i < 3; ++i) {
      if (!info.has_input(i)) continue;
      RW_EXPECTS(shape_numel(info.input(i).shape) == p_.len, Unsupported,
                 "{}: {} {} is not one value per normalized element ({}; broadcast scales run on the CPU)",
                 node_.where(), i == 1 ? "Scale" : "B", shape_str(info.input(i).shape), p_.len);
    }
    std::vector<TensorDesc> outputs = {{DType::kF32, x}};
    for (std::size_t o = 1; o < node_.outputs.size(); ++o) outputs.push_back({DType::kF32, stats});
    return outputs;
  }

  void launch(const LaunchArgs& a) override {
    auto out = [&](std::size_t o) {
      return o < a.outputs.size() ? static_cast<float*>(a.outputs[o].data) : nullptr;
    };
    const float* bias = a.inputs.size() > 2 ? static_cast<const float*>(a.inputs[2].data) : nullptr;
    kernels::launch_row_norm(p_, static_cast<const float*>(a.inputs[0].data),
                             static_cast<const float*>(a.inputs[1].data), bias, out(0), out(1), out(2), a.stream);
  }

 private:
  const Node& node_;
  kernels::RowNorm p_;
};

class InstanceNormKernel final : public CudaKernel {
 public:
  InstanceNormKernel(const Node& node, const KernelInfo& info) : node_(node) {
    for (DType t : info.input_dtypes) {
      if (t != DType::kUndefined) expect_f32(node, t);
    }
    p_.epsilon = node.attr_float("epsilon", 1e-5f);
    p_.per_row = true;
  }

  std::vector<TensorDesc> plan(const PlanInfo& info) override {
    const Shape& x = info.input(0).shape;
    for (std::size_t i = 0; i < 3; ++i) expect_f32(node_, info.input(i).dtype);
    RW_EXPECTS(x.size() >= 3, InvalidArgument, "{}: input {} is not [N, C, D1, ...]", node_.where(), shape_str(x));
    p_.channels = x[1];
    p_.rows = x[0] * x[1];
    p_.len = 1;
    for (std::size_t d = 2; d < x.size(); ++d) p_.len *= x[d];
    for (std::size_t i = 1; i < 3; ++i) {
      RW_EXPECTS(shape_numel(info.input(i).shape) == p_.channels, InvalidArgument, "{}: {} {} is not one value per channel ({})",
                 node_.where(), i == 1 ? "scale" : "B", shape_str(info.input(i).shape), p_.channels);
    }
    return {{DType::kF32, x}};
  }

  void launch(const LaunchArgs& a) override {
    kernels::launch_row_norm(p_, static_cast<const float*>(a.inputs[0].data),
                             static_cast<const float*>(a.inputs[1].data), static_cast<const float*>(a.inputs[2].data),
                             static_cast<float*>(a.outputs[0].data), nullptr, nullptr, a.stream);
  }

 private:
  const Node& node_;
  kernels::RowNorm p_;
};

}  // namespace

RW_REGISTER_CUDA_KERNEL("LayerNormalization", LayerNormKernel);
RW_REGISTER_CUDA_KERNEL("InstanceNormalization", InstanceNormKernel);

}  // namespace redwood::cuda
