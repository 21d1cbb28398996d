// TopK on the GPU: float X, int64 indices. k is the attribute (opset 1-9) or the input K (opset
// 10+), which must be known on the host at plan time (an initializer or shape arithmetic); k
// above kernels::kTopKMaxK, K computed on the device or X not float are Unsupported, so the node
// runs on the CPU. The result is always sorted, equal values in the order of their indices, NaN
// above every number: the reference kernel's order (backends/cpu/reference/arg_topk.cpp).

#include "backends/cuda/cuda_kernel.hpp"
#include "backends/cuda/kernels/launchers.hpp"
#include "core/error.hpp"

#include <limits>

namespace redwood::cuda {
namespace {

class TopKKernel final : public CudaKernel {
 public:
  TopKKernel(const Node& node, const KernelInfo& info)
      : node_(node),
        k_from_input_(info.opset >= 10),
        k_attr_(node.attr_int("k", -1)),
        axis_(node.attr_int("axis", -1)),
        largest_(node.attr_int("largest", 1) != 0) {
    if (!info.input_dtypes.empty()) expect_f32(node, info.input_dtypes[0], "X");
    RW_EXPECTS(node.outputs.size() == 2, InvalidArgument, "{}: has {} outputs; TopK has two (Values, Indices)",
               node.where(), node.outputs.size());
    if (k_from_input_) {
      RW_EXPECTS(node.has_input(1), InvalidArgument, "{}: needs the input K (opset {})", node.where(), info.opset);
    } else {
      RW_EXPECTS(k_attr_ >= 0, InvalidArgument, "{}: needs a non-negative attribute k (opset {}), got {}",
                 node.where(), info.opset, k_attr_);
    }
  }

  std::vector<TensorDesc> plan(const PlanInfo& info) override {
    const TensorDesc& x = info.input(0);
    expect_f32(node_, x.dtype, "X");
    std::int64_t k = k_attr_;
    if (k_from_input_) {
      const Tensor& kt = info.host_input(1, "TopK's K");
      RW_EXPECTS(kt.dtype() == DType::kI64 && kt.rank() <= 1 && kt.numel() == 1, InvalidArgument,
                 "{}: K {} must be one int64 value", node_.where(), kt.description());
      k = kt.to_int64_vector()[0];
    }
    const auto rank = static_cast<std::int64_t>(x.shape.size());
    RW_EXPECTS(rank > 0, InvalidArgument, "{}: X is a scalar", node_.where());
    const auto axis = static_cast<std::size_t>(normalize_axis(axis_, rank));
    len_ = x.shape[axis];
    RW_EXPECTS(k >= 0 && k <= len_, InvalidArgument, "{}: k = {} is out of range for axis {} of X {}", node_.where(), k,
               axis, shape_str(x.shape));
    RW_EXPECTS(k <= kernels::kTopKMaxK, Unsupported, "{}: k = {} is over the CUDA kernel's {}", node_.where(), k,
               kernels::kTopKMaxK);
    RW_EXPECTS(len_ < std::numeric_limits<std::int32_t>::max(), Unsupported, "{}: axis {} of X {} is too long for the CUDA kernel",
               node_.where(), axis, shape_str(x.shape));
    k_ = k;
    outer_ = 1;
    inner_ = 1;
    for (std::size_t d = 0; d < axis; ++d) outer_ *= x.shape[d];
    for (std::size_t d = axis + 1; d < x.shape.size(); ++d) inner_ *= x.shape[d];
    Shape y = x.shape;
    y[axis] = k;
    return {{DType::kF32, y}, {DType::kI64, y}};
  }

  void launch(const LaunchArgs& a) override {
    kernels::launch_top_k(static_cast<const float*>(a.inputs[0].data), static_cast<float*>(a.outputs[0].data),
                          static_cast<long long*>(a.outputs[1].data), outer_, len_, inner_, k_, largest_, a.stream);
  }

 private:
  const Node& node_;
  bool k_from_input_;
  std::int64_t k_attr_;
  std::int64_t axis_;
  bool largest_;
  long long outer_ = 1, len_ = 0, inner_ = 1, k_ = 0;
};

}  // namespace

RW_REGISTER_CUDA_KERNEL("TopK", TopKKernel);

}  // namespace redwood::cuda
