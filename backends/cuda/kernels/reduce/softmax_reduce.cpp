// Softmax / LogSoftmax, the Reduce* family (Mean, Sum, Max, Min, SumSquare, L2, Prod, L1, LogSum,
// LogSumExp), ArgMax and ArgMin on the GPU.

#include "backends/cuda/cuda_kernel.hpp"
#include "backends/cuda/kernels/launchers.hpp"
#include "core/error.hpp"

#include <algorithm>

namespace redwood::cuda {
namespace {

class SoftmaxKernel final : public CudaKernel {
 public:
  SoftmaxKernel(const Node& node, const KernelInfo& info)
      : node_(node), opset_(info.opset), log_(node.op_type == "LogSoftmax") {
    if (!info.input_dtypes.empty()) expect_f32(node, info.input_dtypes[0]);
  }

  std::vector<TensorDesc> plan(const PlanInfo& info) override {
    const Shape& x = info.input(0).shape;
    expect_f32(node_, info.input(0).dtype);
    const auto rank = static_cast<std::int64_t>(x.size());
    const bool coerced = opset_ > 0 && opset_ < 13;  // before opset 13: 2-D [prod(:axis), prod(axis:)]
    const std::int64_t axis = normalize_axis(node_.attr_int("axis", coerced ? 1 : -1), std::max<std::int64_t>(rank, 1));
    outer_ = 1;
    len_ = 1;
    inner_ = 1;
    for (std::int64_t d = 0; d < rank; ++d) {
      const auto e = x[static_cast<std::size_t>(d)];
      if (d < axis) {
        outer_ *= e;
      } else if (d == axis || coerced) {
        len_ *= e;
      } else {
        inner_ *= e;
      }
    }
    return {{DType::kF32, x}};
  }

  void launch(const LaunchArgs& a) override {
    kernels::launch_softmax(static_cast<const float*>(a.inputs[0].data), static_cast<float*>(a.outputs[0].data), outer_,
                            len_, inner_, log_, a.stream);
  }

 private:
  const Node& node_;
  std::int64_t opset_;
  bool log_;
  long long outer_ = 1, len_ = 1, inner_ = 1;
};

kernels::ReduceOp reduce_op(const std::string& op) {
  if (op == "ReduceMean") return kernels::ReduceOp::kMean;
  if (op == "ReduceSum") return kernels::ReduceOp::kSum;
  if (op == "ReduceMax") return kernels::ReduceOp::kMax;
  if (op == "ReduceMin") return kernels::ReduceOp::kMin;
  if (op == "ReduceSumSquare") return kernels::ReduceOp::kSumSquare;
  if (op == "ReduceL2") return kernels::ReduceOp::kL2;
  if (op == "ReduceProd") return kernels::ReduceOp::kProd;
  if (op == "ReduceL1") return kernels::ReduceOp::kL1;
  if (op == "ReduceLogSum") return kernels::ReduceOp::kLogSum;
  if (op == "ReduceLogSumExp") return kernels::ReduceOp::kLogSumExp;
  throw Unsupported(fmt::format("{} is not a CUDA reduction", op));
}

class ReduceKernel final : public CudaKernel {
 public:
  ReduceKernel(const Node& node, const KernelInfo& info) : node_(node), op_(reduce_op(node.op_type)) {
    if (!info.input_dtypes.empty()) expect_f32(node, info.input_dtypes[0]);
  }

  std::vector<TensorDesc> plan(const PlanInfo& info) override {
    const Shape& x = info.input(0).shape;
    expect_f32(node_, info.input(0).dtype);
    const auto rank = static_cast<std::int64_t>(x.size());
    RW_EXPECTS(rank <= kernels::kMaxDims, Unsupported, "{}: rank {} is over {}", node_.where(), rank, kernels::kMaxDims);
    std::vector<std::int64_t> axes = node_.attr_ints("axes", {});
    if (info.has_input(1)) axes = info.host_input(1, "the axes").to_int64_vector();
    const bool keepdims = node_.attr_int("keepdims", 1) != 0;
    if (axes.empty()) {
      RW_EXPECTS(node_.attr_int("noop_with_empty_axes", 0) == 0, Unsupported, "{}: noop_with_empty_axes", node_.where());
      for (std::int64_t d = 0; d < rank; ++d) axes.push_back(d);
    }
    std::vector<bool> reduced(x.size(), false);
    for (auto a : axes) reduced[static_cast<std::size_t>(normalize_axis(a, rank))] = true;
    const Strides st = contiguous_strides(x);
    p_ = {};
    Shape y;
    for (std::size_t d = 0; d < x.size(); ++d) {
      if (reduced[d]) {
        p_.red_dims[p_.red_rank] = x[d];
        p_.red_strides[p_.red_rank++] = st[d];
        p_.red_count *= x[d];
        if (keepdims) y.push_back(1);
      } else {
        p_.kept_dims[p_.kept_rank] = x[d];
        p_.kept_strides[p_.kept_rank++] = st[d];
        y.push_back(x[d]);
      }
    }
    outputs_ = shape_numel(y);
    return {{DType::kF32, y}};
  }

  void launch(const LaunchArgs& a) override {
    kernels::launch_reduce(op_, p_, static_cast<const float*>(a.inputs[0].data), static_cast<float*>(a.outputs[0].data),
                           outputs_, a.stream);
  }

 private:
  const Node& node_;
  kernels::ReduceOp op_;
  kernels::ReduceParams p_;
  long long outputs_ = 0;
};

// ArgMax / ArgMin (axis, keepdims, select_last_index): int64 indices along one axis.
class ArgReduceKernel final : public CudaKernel {
 public:
  ArgReduceKernel(const Node& node, const KernelInfo& info)
      : node_(node),
        max_(node.op_type == "ArgMax"),
        select_last_(node.attr_int("select_last_index", 0) != 0),
        keepdims_(node.attr_int("keepdims", 1) != 0) {
    if (!info.input_dtypes.empty()) expect_f32(node, info.input_dtypes[0]);
  }

  std::vector<TensorDesc> plan(const PlanInfo& info) override {
    const Shape& x = info.input(0).shape;
    expect_f32(node_, info.input(0).dtype);
    const auto rank = static_cast<std::int64_t>(x.size());
    const std::int64_t axis = node_.attr_int("axis", 0);
    RW_EXPECTS(axis >= -std::max<std::int64_t>(rank, 1) && axis < std::max<std::int64_t>(rank, 1), InvalidArgument,
               "{}: axis {} is out of range for input {}", node_.where(), axis, shape_str(x));
    const std::int64_t a = normalize_axis(axis, std::max<std::int64_t>(rank, 1));
    outer_ = 1;
    len_ = rank == 0 ? 1 : x[static_cast<std::size_t>(a)];
    inner_ = 1;
    Shape y;
    for (std::int64_t d = 0; d < rank; ++d) {
      const auto e = x[static_cast<std::size_t>(d)];
      if (d < a) outer_ *= e;
      if (d > a) inner_ *= e;
      if (d != a) y.push_back(e);
      else if (keepdims_) y.push_back(1);
    }
    RW_EXPECTS(len_ > 0, InvalidArgument, "{}: the axis of input {} is empty", node_.where(), shape_str(x));
    return {{DType::kI64, y}};
  }

  void launch(const LaunchArgs& a) override {
    kernels::launch_arg_reduce(static_cast<const float*>(a.inputs[0].data), static_cast<long long*>(a.outputs[0].data),
                               outer_, len_, inner_, max_, select_last_, a.stream);
  }

 private:
  const Node& node_;
  bool max_, select_last_, keepdims_;
  long long outer_ = 1, len_ = 1, inner_ = 1;
};

}  // namespace

RW_REGISTER_CUDA_KERNEL("Softmax", SoftmaxKernel);
RW_REGISTER_CUDA_KERNEL("LogSoftmax", SoftmaxKernel);
RW_REGISTER_CUDA_KERNEL("ReduceMean", ReduceKernel);
RW_REGISTER_CUDA_KERNEL("ReduceSum", ReduceKernel);
RW_REGISTER_CUDA_KERNEL("ReduceMax", ReduceKernel);
RW_REGISTER_CUDA_KERNEL("ReduceMin", ReduceKernel);
RW_REGISTER_CUDA_KERNEL("ReduceSumSquare", ReduceKernel);
RW_REGISTER_CUDA_KERNEL("ReduceL2", ReduceKernel);
RW_REGISTER_CUDA_KERNEL("ReduceProd", ReduceKernel);
RW_REGISTER_CUDA_KERNEL("ReduceL1", ReduceKernel);
RW_REGISTER_CUDA_KERNEL("ReduceLogSum", ReduceKernel);
RW_REGISTER_CUDA_KERNEL("ReduceLogSumExp", ReduceKernel);
RW_REGISTER_CUDA_KERNEL("ArgMax", ArgReduceKernel);
RW_REGISTER_CUDA_KERNEL("ArgMin", ArgReduceKernel);

}  // namespace redwood::cuda
