// Elementwise ops on the GPU: unary activations and math, binary arithmetic with numpy
// broadcasting (two-input Sum/Mean/Max/Min, PRelu, float Mod), inference BatchNormalization.

#include "backends/cuda/cuda_kernel.hpp"
#include "backends/cuda/kernels/elementwise/broadcast.hpp"
#include "backends/cuda/kernels/launchers.hpp"
#include "core/error.hpp"

#include <cmath>

namespace redwood::cuda {
namespace {

using kernels::BinaryOp;
using kernels::UnaryOp;

UnaryOp unary_op(const std::string& op) {
  static const std::pair<const char*, UnaryOp> kOps[] = {
      {"Relu", UnaryOp::kRelu},       {"Sigmoid", UnaryOp::kSigmoid},         {"Tanh", UnaryOp::kTanh},
      {"HardSigmoid", UnaryOp::kHardSigmoid}, {"HardSwish", UnaryOp::kHardSwish}, {"LeakyRelu", UnaryOp::kLeakyRelu},
      {"Clip", UnaryOp::kClip},       {"Sqrt", UnaryOp::kSqrt},               {"Exp", UnaryOp::kExp},
      {"Log", UnaryOp::kLog},         {"Neg", UnaryOp::kNeg},                 {"Abs", UnaryOp::kAbs},
      {"Reciprocal", UnaryOp::kReciprocal}, {"Floor", UnaryOp::kFloor},       {"Ceil", UnaryOp::kCeil},
      {"Erf", UnaryOp::kErf},         {"Sign", UnaryOp::kSign},               {"Round", UnaryOp::kRound},
      {"Sin", UnaryOp::kSin},         {"Cos", UnaryOp::kCos},                 {"Tan", UnaryOp::kTan},
      {"Asin", UnaryOp::kAsin},       {"Acos", UnaryOp::kAcos},               {"Atan", UnaryOp::kAtan},
      {"Sinh", UnaryOp::kSinh},       {"Cosh", UnaryOp::kCosh},               {"Asinh", UnaryOp::kAsinh},
      {"Acosh", UnaryOp::kAcosh},     {"Atanh", UnaryOp::kAtanh},             {"Softplus", UnaryOp::kSoftplus},
      {"Softsign", UnaryOp::kSoftsign}, {"Elu", UnaryOp::kElu},               {"Selu", UnaryOp::kSelu},
      {"Celu", UnaryOp::kCelu},       {"ThresholdedRelu", UnaryOp::kThresholdedRelu},
      {"Shrink", UnaryOp::kShrink},   {"Mish", UnaryOp::kMish},               {"Gelu", UnaryOp::kGelu}};
  for (const auto& [name, value] : kOps) {
    if (op == name) return value;
  }
  throw Unsupported(fmt::format("{} is not a CUDA unary op", op));
}

class UnaryKernel final : public CudaKernel {
 public:
  UnaryKernel(const Node& node, const KernelInfo& info) : node_(node), op_(unary_op(node.op_type)) {
    if (!info.input_dtypes.empty()) expect_f32(node, info.input_dtypes[0]);
    if (op_ == UnaryOp::kLeakyRelu) alpha_ = node.attr_float("alpha", 0.01f);
    if (op_ == UnaryOp::kHardSigmoid) {
      alpha_ = node.attr_float("alpha", 0.2f);
      beta_ = node.attr_float("beta", 0.5f);
    }
    if (op_ == UnaryOp::kClip) {
      alpha_ = node.attr_float("min", -INFINITY);
      beta_ = node.attr_float("max", INFINITY);
    }
    if (op_ == UnaryOp::kElu || op_ == UnaryOp::kCelu) alpha_ = node.attr_float("alpha", 1.0f);
    if (op_ == UnaryOp::kThresholdedRelu) alpha_ = node.attr_float("alpha", 1.0f);
    if (op_ == UnaryOp::kSelu) {
      alpha_ = node.attr_float("alpha", 1.67326319217681884765625f);
      beta_ = node.attr_float("gamma", 1.05070102214813232421875f);
    }
    if (op_ == UnaryOp::kShrink) {
      alpha_ = node.attr_float("bias", 0.0f);
      beta_ = node.attr_float("lambd", 0.5f);
    }
    if (op_ == UnaryOp::kGelu) {
      const std::string approximate = node.attr_string("approximate", "none");
      RW_EXPECTS(approximate == "none" || approximate == "tanh", InvalidArgument,
                 "{}: approximate '{}' is not one of none, tanh", node.where(), approximate);
      if (approximate == "tanh") op_ = UnaryOp::kGeluTanh;
    }
  }

  std::vector<TensorDesc> plan(const PlanInfo& info) override {
    expect_f32(node_, info.input(0).dtype);
    if (op_ == UnaryOp::kClip) {  // opset 11+: min and max are optional scalar inputs
      if (info.has_input(1)) alpha_ = static_cast<float>(info.host_input(1, "Clip's min").get_as_double(0));
      if (info.has_input(2)) beta_ = static_cast<float>(info.host_input(2, "Clip's max").get_as_double(0));
    }
    return {{DType::kF32, info.input(0).shape}};
  }

  void launch(const LaunchArgs& a) override {
    kernels::launch_unary(op_, static_cast<const float*>(a.inputs[0].data), static_cast<float*>(a.outputs[0].data),
                          shape_numel(a.outputs[0].shape), alpha_, beta_, a.stream);
  }

 private:
  const Node& node_;
  UnaryOp op_;
  float alpha_ = 0, beta_ = 0;
};

// Sum, Mean, Max and Min are variadic in ONNX; this kernel takes their two-input form (one or
// three and more inputs run on the CPU). Mod runs here with fmod = 1 on floats (C's fmod).
BinaryOp binary_op(const Node& node) {
  const std::string& op = node.op_type;
  if (op == "Add" || op == "Sum") return BinaryOp::kAdd;
  if (op == "Mean") return BinaryOp::kMean;
  if (op == "PRelu") return BinaryOp::kPRelu;
  if (op == "Mod") {
    RW_EXPECTS(node.attr_int("fmod", 0) == 1, Unsupported,
               "{}: Mod with fmod = 0 on floats is not defined (ONNX asks for fmod = 1)", node.where());
    return BinaryOp::kFmod;
  }
  if (op == "Sub") return BinaryOp::kSub;
  if (op == "Mul") return BinaryOp::kMul;
  if (op == "Div") return BinaryOp::kDiv;
  if (op == "Pow") return BinaryOp::kPow;
  if (op == "Max") return BinaryOp::kMax;
  if (op == "Min") return BinaryOp::kMin;
  throw Unsupported(fmt::format("{} is not a CUDA binary op", op));
}

class BinaryKernel final : public CudaKernel {
 public:
  BinaryKernel(const Node& node, const KernelInfo& info) : node_(node), op_(binary_op(node)) {
    RW_EXPECTS(node.inputs.size() == 2, Unsupported, "{}: the CUDA kernel takes exactly two inputs, not {}",
               node.where(), node.inputs.size());
    for (DType t : info.input_dtypes) expect_f32(node, t);
  }

  std::vector<TensorDesc> plan(const PlanInfo& info) override {
    const Shape& a = info.input(0).shape;
    const Shape& b = info.input(1).shape;
    expect_f32(node_, info.input(0).dtype);
    expect_f32(node_, info.input(1).dtype);
    const Shape y = broadcast_shapes(a, b);
    RW_EXPECTS(y.size() <= static_cast<std::size_t>(kernels::kMaxDims), Unsupported, "{}: rank {} is over {}",
               node_.where(), y.size(), kernels::kMaxDims);
    bc_ = binary_broadcast(a, b, y);
    return {{DType::kF32, y}};
  }

  void launch(const LaunchArgs& a) override {
    kernels::launch_binary(op_, static_cast<const float*>(a.inputs[0].data), static_cast<const float*>(a.inputs[1].data),
                           static_cast<float*>(a.outputs[0].data), shape_numel(a.outputs[0].shape), bc_, a.stream);
  }

 private:
  const Node& node_;
  BinaryOp op_;
  kernels::Broadcast bc_;
};

class BatchNormKernel final : public CudaKernel {
 public:
  BatchNormKernel(const Node& node, const KernelInfo& info) : node_(node), epsilon_(node.attr_float("epsilon", 1e-5f)) {
    for (DType t : info.input_dtypes) expect_f32(node, t);
    RW_EXPECTS(node.attr_int("training_mode", 0) == 0 && node.outputs.size() == 1, Unsupported,
               "{}: only inference BatchNormalization (one output) runs on the GPU", node.where());
  }

  std::vector<TensorDesc> plan(const PlanInfo& info) override {
    const Shape& x = info.input(0).shape;
    RW_EXPECTS(x.size() >= 2, InvalidArgument, "{}: input {} has no channel axis", node_.where(), shape_str(x));
    for (std::size_t i = 1; i < 5; ++i) {
      RW_EXPECTS(shape_numel(info.input(i).shape) == x[1], InvalidArgument, "{}: input {} is {} for {} channels",
                 node_.where(), i, shape_str(info.input(i).shape), x[1]);
    }
    channels_ = static_cast<int>(x[1]);
    inner_ = 1;
    for (std::size_t d = 2; d < x.size(); ++d) inner_ *= x[d];
    return {{DType::kF32, x}};
  }

  void launch(const LaunchArgs& a) override {
    auto in = [&](std::size_t i) { return static_cast<const float*>(a.inputs[i].data); };
    kernels::launch_batch_norm(in(0), in(1), in(2), in(3), in(4), static_cast<float*>(a.outputs[0].data),
                               shape_numel(a.outputs[0].shape), channels_, inner_, epsilon_, a.stream);
  }

 private:
  const Node& node_;
  float epsilon_;
  int channels_ = 0;
  long long inner_ = 1;
};

}  // namespace

RW_REGISTER_CUDA_KERNEL("Relu", UnaryKernel);
RW_REGISTER_CUDA_KERNEL("Sigmoid", UnaryKernel);
RW_REGISTER_CUDA_KERNEL("Tanh", UnaryKernel);
RW_REGISTER_CUDA_KERNEL("HardSigmoid", UnaryKernel);
RW_REGISTER_CUDA_KERNEL("HardSwish", UnaryKernel);
RW_REGISTER_CUDA_KERNEL("LeakyRelu", UnaryKernel);
RW_REGISTER_CUDA_KERNEL("Clip", UnaryKernel);
RW_REGISTER_CUDA_KERNEL("Sqrt", UnaryKernel);
RW_REGISTER_CUDA_KERNEL("Exp", UnaryKernel);
RW_REGISTER_CUDA_KERNEL("Log", UnaryKernel);
RW_REGISTER_CUDA_KERNEL("Neg", UnaryKernel);
RW_REGISTER_CUDA_KERNEL("Abs", UnaryKernel);
RW_REGISTER_CUDA_KERNEL("Reciprocal", UnaryKernel);
RW_REGISTER_CUDA_KERNEL("Floor", UnaryKernel);
RW_REGISTER_CUDA_KERNEL("Ceil", UnaryKernel);
RW_REGISTER_CUDA_KERNEL("Erf", UnaryKernel);
RW_REGISTER_CUDA_KERNEL("Sign", UnaryKernel);
RW_REGISTER_CUDA_KERNEL("Round", UnaryKernel);
RW_REGISTER_CUDA_KERNEL("Sin", UnaryKernel);
RW_REGISTER_CUDA_KERNEL("Cos", UnaryKernel);
RW_REGISTER_CUDA_KERNEL("Tan", UnaryKernel);
RW_REGISTER_CUDA_KERNEL("Asin", UnaryKernel);
RW_REGISTER_CUDA_KERNEL("Acos", UnaryKernel);
RW_REGISTER_CUDA_KERNEL("Atan", UnaryKernel);
RW_REGISTER_CUDA_KERNEL("Sinh", UnaryKernel);
RW_REGISTER_CUDA_KERNEL("Cosh", UnaryKernel);
RW_REGISTER_CUDA_KERNEL("Asinh", UnaryKernel);
RW_REGISTER_CUDA_KERNEL("Acosh", UnaryKernel);
RW_REGISTER_CUDA_KERNEL("Atanh", UnaryKernel);
RW_REGISTER_CUDA_KERNEL("Softplus", UnaryKernel);
RW_REGISTER_CUDA_KERNEL("Softsign", UnaryKernel);
RW_REGISTER_CUDA_KERNEL("Elu", UnaryKernel);
RW_REGISTER_CUDA_KERNEL("Selu", UnaryKernel);
RW_REGISTER_CUDA_KERNEL("Celu", UnaryKernel);
RW_REGISTER_CUDA_KERNEL("ThresholdedRelu", UnaryKernel);
RW_REGISTER_CUDA_KERNEL("Shrink", UnaryKernel);
RW_REGISTER_CUDA_KERNEL("Mish", UnaryKernel);
RW_REGISTER_CUDA_KERNEL("Gelu", UnaryKernel);
RW_REGISTER_CUDA_KERNEL("Add", BinaryKernel);
RW_REGISTER_CUDA_KERNEL("Sub", BinaryKernel);
RW_REGISTER_CUDA_KERNEL("Mul", BinaryKernel);
RW_REGISTER_CUDA_KERNEL("Div", BinaryKernel);
RW_REGISTER_CUDA_KERNEL("Pow", BinaryKernel);
RW_REGISTER_CUDA_KERNEL("Max", BinaryKernel);
RW_REGISTER_CUDA_KERNEL("Min", BinaryKernel);
RW_REGISTER_CUDA_KERNEL("Sum", BinaryKernel);
RW_REGISTER_CUDA_KERNEL("Mean", BinaryKernel);
RW_REGISTER_CUDA_KERNEL("PRelu", BinaryKernel);
RW_REGISTER_CUDA_KERNEL("Mod", BinaryKernel);
RW_REGISTER_CUDA_KERNEL("BatchNormalization", BatchNormKernel);

}  // namespace redwood::cuda
