// Pad on the GPU (fp32; modes constant, reflect, edge; negative pads crop). The pads, the
// constant value and the axes must be known on the host at plan time (attributes before opset 11,
// initializers or shape arithmetic after); otherwise the node runs on the CPU.

#include "backends/cuda/cuda_kernel.hpp"
#include "backends/cuda/kernels/launchers.hpp"
#include "core/error.hpp"

#include <fmt/ranges.h>

namespace redwood::cuda {
namespace {

class PadKernel final : public CudaKernel {
 public:
  PadKernel(const Node& node, const KernelInfo& info) : node_(node), opset_(info.opset) {
    if (!info.input_dtypes.empty()) expect_f32(node, info.input_dtypes[0]);
    const std::string mode = node.attr_string("mode", "constant");
    if (mode == "constant") {
      mode_ = kernels::PadMode::kConstant;
    } else if (mode == "reflect") {
      mode_ = kernels::PadMode::kReflect;
    } else if (mode == "edge") {
      mode_ = kernels::PadMode::kEdge;
    } else {
      throw Unsupported(fmt::format("{}: mode '{}' is not supported (constant, reflect, edge)", node.where(), mode));
    }
  }

  std::vector<TensorDesc> plan(const PlanInfo& info) override {
    const Shape& x = info.input(0).shape;
    expect_f32(node_, info.input(0).dtype);
    const auto rank = static_cast<std::int64_t>(x.size());
    RW_EXPECTS(rank <= kernels::kMaxDims, Unsupported, "{}: rank {} is over {}", node_.where(), rank, kernels::kMaxDims);
    std::vector<std::int64_t> pads;
    std::vector<std::int64_t> axes;
    float value = 0.f;
    if (opset_ >= 11) {
      pads = info.host_input(1, "the pads").to_int64_vector();
      if (info.has_input(2)) value = static_cast<float>(info.host_input(2, "the constant value").get_as_double(0));
      if (info.has_input(3)) axes = info.host_input(3, "the axes").to_int64_vector();
    } else {
      pads = node_.attr_ints(node_.has_attr("paddings") ? "paddings" : "pads");
      value = node_.attr_float("value", 0.0f);
    }
    if (axes.empty()) {
      for (std::int64_t d = 0; d < rank; ++d) axes.push_back(d);
    }
    RW_EXPECTS(pads.size() == 2 * axes.size(), InvalidArgument, "{}: pads [{}] must have {} entries for input {}",
               node_.where(), fmt::join(pads, ", "), 2 * axes.size(), shape_str(x));
    p_ = {};
    p_.rank = static_cast<int>(rank);
    p_.mode = mode_;
    p_.value = value;
    Shape y = x;
    for (std::size_t i = 0; i < axes.size(); ++i) {
      RW_EXPECTS(axes[i] >= -rank && axes[i] < rank, InvalidArgument, "{}: axis {} is out of range for input {}",
                 node_.where(), axes[i], shape_str(x));
      const auto d = static_cast<std::size_t>(normalize_axis(axes[i], rank));
      p_.begin[d] = pads[i];
      y[d] = x[d] + pads[i] + pads[i + axes.size()];
      RW_EXPECTS(y[d] >= 0, InvalidArgument, "{}: pads [{}] crop axis {} of input {} below zero", node_.where(),
                 fmt::join(pads, ", "), d, shape_str(x));
      RW_EXPECTS(mode_ == kernels::PadMode::kConstant || x[d] > 0 || y[d] == 0, InvalidArgument,
                 "{}: {} padding of the empty axis {} of input {}", node_.where(),
                 node_.attr_string("mode", "constant"), d, shape_str(x));
    }
    for (std::size_t d = 0; d < x.size(); ++d) {
      p_.in_dims[d] = x[d];
      p_.out_dims[d] = y[d];
    }
    return {{DType::kF32, y}};
  }

  void launch(const LaunchArgs& a) override {
    kernels::launch_pad(p_, static_cast<const float*>(a.inputs[0].data), static_cast<float*>(a.outputs[0].data),
                        shape_numel(a.outputs[0].shape), a.stream);
  }

 private:
  const Node& node_;
  std::int64_t opset_;
  kernels::PadMode mode_ = kernels::PadMode::kConstant;
  kernels::PadParams p_;
};

}  // namespace

RW_REGISTER_CUDA_KERNEL("Pad", PadKernel);

}  // namespace redwood::cuda
