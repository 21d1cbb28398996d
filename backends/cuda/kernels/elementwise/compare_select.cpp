// Comparisons (Equal, Less, Greater, LessOrEqual, GreaterOrEqual), logical ops (And, Or, Xor,
// Not), IsNaN, IsInf and Where on the GPU: the ops a detector's postprocess or a masked blend
// runs per frame. Outputs of the predicates are bool tensors (one byte per element).

#include "backends/cuda/cuda_kernel.hpp"
#include "backends/cuda/kernels/elementwise/broadcast.hpp"
#include "backends/cuda/kernels/launchers.hpp"
#include "core/error.hpp"

#include <string>

namespace redwood::cuda {
namespace {

using kernels::CompareOp;
using kernels::CompareType;

CompareOp compare_op(const std::string& op) {
  static const std::pair<const char*, CompareOp> kOps[] = {
      {"Equal", CompareOp::kEqual},     {"Less", CompareOp::kLess},
      {"Greater", CompareOp::kGreater}, {"LessOrEqual", CompareOp::kLessOrEqual},
      {"GreaterOrEqual", CompareOp::kGreaterOrEqual},
      {"And", CompareOp::kAnd},         {"Or", CompareOp::kOr},
      {"Xor", CompareOp::kXor}};
  for (const auto& [name, value] : kOps) {
    if (op == name) return value;
  }
  throw Unsupported(fmt::format("{} is not a CUDA comparison", op));
}

bool is_logical(CompareOp op) { return op == CompareOp::kAnd || op == CompareOp::kOr || op == CompareOp::kXor; }

/// The operand type of a comparison, or Unsupported naming the node.
CompareType compare_type(const Node& node, DType t, bool logical) {
  if (logical) {
    RW_EXPECTS(t == DType::kBool, Unsupported, "{}: {} takes bool inputs, not {}", node.where(), node.op_type,
               dtype_name(t));
    return CompareType::kBool;
  }
  switch (t) {
    case DType::kF32: return CompareType::kF32;
    case DType::kI64: return CompareType::kI64;
    case DType::kI32: return CompareType::kI32;
    case DType::kBool: return CompareType::kBool;
    default:
      throw Unsupported(fmt::format("{}: type {} is not supported on the GPU (float, int64, int32, bool)",
                                    node.where(), dtype_name(t)));
  }
}

Shape checked_broadcast(const Node& node, const Shape& a, const Shape& b) {
  const Shape y = broadcast_shapes(a, b);
  RW_EXPECTS(y.size() <= static_cast<std::size_t>(kernels::kMaxDims), Unsupported, "{}: rank {} is over {}",
             node.where(), y.size(), kernels::kMaxDims);
  return y;
}

class CompareKernel final : public CudaKernel {
 public:
  CompareKernel(const Node& node, const KernelInfo& info) : node_(node), op_(compare_op(node.op_type)) {
    for (DType t : info.input_dtypes) {
      if (t != DType::kUndefined) compare_type(node, t, is_logical(op_));
    }
  }

  std::vector<TensorDesc> plan(const PlanInfo& info) override {
    const TensorDesc& a = info.input(0);
    const TensorDesc& b = info.input(1);
    RW_EXPECTS(a.dtype == b.dtype, InvalidArgument, "{}: the inputs are {} and {}; they must have one type",
               node_.where(), dtype_name(a.dtype), dtype_name(b.dtype));
    type_ = compare_type(node_, a.dtype, is_logical(op_));
    const Shape y = checked_broadcast(node_, a.shape, b.shape);
    bc_ = binary_broadcast(a.shape, b.shape, y);
    return {{DType::kBool, y}};
  }

  void launch(const LaunchArgs& a) override {
    kernels::launch_compare(op_, type_, a.inputs[0].data, a.inputs[1].data,
                            static_cast<std::uint8_t*>(a.outputs[0].data), shape_numel(a.outputs[0].shape), bc_,
                            a.stream);
  }

 private:
  const Node& node_;
  CompareOp op_;
  CompareType type_ = CompareType::kF32;
  kernels::Broadcast bc_;
};

class PredicateKernel final : public CudaKernel {
 public:
  PredicateKernel(const Node& node, const KernelInfo& info)
      : node_(node),
        op_(node.op_type == "Not" ? kernels::PredicateOp::kNot
                                  : (node.op_type == "IsNaN" ? kernels::PredicateOp::kIsNaN
                                                             : kernels::PredicateOp::kIsInf)),
        detect_negative_(node.attr_int("detect_negative", 1) != 0),
        detect_positive_(node.attr_int("detect_positive", 1) != 0) {
    if (!info.input_dtypes.empty() && info.input_dtypes[0] != DType::kUndefined) check(info.input_dtypes[0]);
  }

  std::vector<TensorDesc> plan(const PlanInfo& info) override {
    check(info.input(0).dtype);
    return {{DType::kBool, info.input(0).shape}};
  }

  void launch(const LaunchArgs& a) override {
    kernels::launch_predicate(op_, a.inputs[0].data, static_cast<std::uint8_t*>(a.outputs[0].data),
                              shape_numel(a.outputs[0].shape), detect_negative_, detect_positive_, a.stream);
  }

 private:
  void check(DType t) const {
    if (op_ == kernels::PredicateOp::kNot) {
      RW_EXPECTS(t == DType::kBool, Unsupported, "{}: Not takes a bool input, not {}", node_.where(), dtype_name(t));
    } else {
      expect_f32(node_, t);
    }
  }

  const Node& node_;
  kernels::PredicateOp op_;
  bool detect_negative_, detect_positive_;
};

class WhereKernel final : public CudaKernel {
 public:
  WhereKernel(const Node& node, const KernelInfo& info) : node_(node) {
    if (!info.input_dtypes.empty() && info.input_dtypes[0] != DType::kUndefined) {
      RW_EXPECTS(info.input_dtypes[0] == DType::kBool, InvalidArgument, "{}: the condition is {}, not bool",
                 node.where(), dtype_name(info.input_dtypes[0]));
    }
  }

  std::vector<TensorDesc> plan(const PlanInfo& info) override {
    const TensorDesc& c = info.input(0);
    const TensorDesc& x = info.input(1);
    const TensorDesc& z = info.input(2);
    RW_EXPECTS(c.dtype == DType::kBool, InvalidArgument, "{}: the condition is {}, not bool", node_.where(),
               dtype_name(c.dtype));
    RW_EXPECTS(x.dtype == z.dtype, InvalidArgument, "{}: X is {} and Y is {}; they must have one type",
               node_.where(), dtype_name(x.dtype), dtype_name(z.dtype));
    const Shape y = checked_broadcast(node_, checked_broadcast(node_, c.shape, x.shape), z.shape);
    bc_ = {};
    bc_.rank = static_cast<int>(y.size());
    for (std::size_t d = 0; d < y.size(); ++d) bc_.out_dims[d] = y[d];
    broadcast_strides(c.shape, y, bc_.strides[0]);
    broadcast_strides(x.shape, y, bc_.strides[1]);
    broadcast_strides(z.shape, y, bc_.strides[2]);
    element_bytes_ = dtype_size(x.dtype);
    return {{x.dtype, y}};
  }

  void launch(const LaunchArgs& a) override {
    kernels::launch_where(static_cast<const std::uint8_t*>(a.inputs[0].data), a.inputs[1].data, a.inputs[2].data,
                          a.outputs[0].data, element_bytes_, shape_numel(a.outputs[0].shape), bc_, a.stream);
  }

 private:
  const Node& node_;
  kernels::Broadcast3 bc_;
  std::size_t element_bytes_ = 4;
};

}  // namespace

RW_REGISTER_CUDA_KERNEL("Equal", CompareKernel);
RW_REGISTER_CUDA_KERNEL("Less", CompareKernel);
RW_REGISTER_CUDA_KERNEL("Greater", CompareKernel);
RW_REGISTER_CUDA_KERNEL("LessOrEqual", CompareKernel);
RW_REGISTER_CUDA_KERNEL("GreaterOrEqual", CompareKernel);
RW_REGISTER_CUDA_KERNEL("And", CompareKernel);
RW_REGISTER_CUDA_KERNEL("Or", CompareKernel);
RW_REGISTER_CUDA_KERNEL("Xor", CompareKernel);
RW_REGISTER_CUDA_KERNEL("Not", PredicateKernel);
RW_REGISTER_CUDA_KERNEL("IsNaN", PredicateKernel);
RW_REGISTER_CUDA_KERNEL("IsInf", PredicateKernel);
RW_REGISTER_CUDA_KERNEL("Where", WhereKernel);

}  // namespace redwood::cuda
