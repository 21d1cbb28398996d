// Dropout in inference: the output is the input (the handle is shared, as Identity's), and the
// optional mask output is all true.
//
// ONNX's versions:
//   opset 7-11   ratio is an attribute (default 0.5); the node always runs in inference.
//   opset 12-22  ratio (optional scalar, default 0.5) and training_mode (optional bool scalar,
//                default false) are inputs; with training_mode true and ratio > 0 the node drops
//                elements at random, which Redwood, an inference runtime, does not do
//                (Unsupported: at load when both inputs are constants, else at run). With
//                training_mode false or ratio 0 it is the identity, and the seed attribute plays
//                no part.
//   opset 1-6    training unless the is_test attribute is 1; only is_test 1 is supported.
// The mask is bool from opset 10; before, it has the input's type (ones). Any floating-point
// input type passes through.

#include "backends/cpu/reference/kernel_util.hpp"

#include <algorithm>
#include <cstdint>

namespace redwood::cpu {
namespace {

constexpr float kDefaultRatio = 0.5f;

class DropoutKernel final : public Kernel {
 public:
  DropoutKernel(const Node& node, const KernelInfo& info)
      : inputs_ratio_(info.opset >= 12), bool_mask_(info.opset >= 10) {
    if (!info.input_dtypes.empty()) {
      expect_dtype(node, info.input_dtypes[0], {DType::kF32, DType::kF16, DType::kBF16});
    }
    if (info.opset < 7) {
      RW_EXPECTS(node.attr_int("is_test", 0) != 0, Unsupported,
                 "{}: training-mode dropout (opset {} with is_test 0) is not supported: Redwood "
                 "runs inference only",
                 node.where(), info.opset);
    }
    if (!inputs_ratio_) {
      RW_EXPECTS(node.inputs.size() <= 1, InvalidArgument,
                 "{}: Dropout before opset 12 takes one input (ratio is an attribute), got {}",
                 node.where(), node.inputs.size());
      check_ratio(node, node.attr_float("ratio", kDefaultRatio));
      return;
    }
    const Tensor* ratio = constant(info, 1);
    const Tensor* training = constant(info, 2);
    if (ratio != nullptr) check_ratio(node, read_ratio(node, *ratio));
    if (training != nullptr && ratio_known(node, info)) {
      const float r = ratio != nullptr ? read_ratio(node, *ratio) : kDefaultRatio;
      check_inference(node, read_training(node, *training), r);
    }
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor& x = ctx.input(0);
    if (inputs_ratio_ && ctx.has_input(2)) {
      const float ratio = ctx.has_input(1) ? read_ratio(node, ctx.inputs[1]) : kDefaultRatio;
      check_ratio(node, ratio);
      check_inference(node, read_training(node, ctx.inputs[2]), ratio);
    }
    ctx.outputs[0] = x;
    if (ctx.num_outputs() < 2) return;
    if (bool_mask_) {
      Tensor mask = ctx.allocate_output(1, DType::kBool, x.shape());
      std::fill_n(mask.data<bool>(), mask.numel(), true);
      ctx.outputs[1] = std::move(mask);
      return;
    }
    dispatch<float, Half, BFloat16>(x.dtype(), node, [&](auto tag) {
      using T = decltype(tag);
      T one{};
      if constexpr (std::is_same_v<T, float>) one = 1.0f;
      if constexpr (std::is_same_v<T, Half>) one = float_to_half(1.0f);
      if constexpr (std::is_same_v<T, BFloat16>) one = float_to_bf16(1.0f);
      Tensor mask = ctx.allocate_output(1, x.dtype(), x.shape());
      std::fill_n(mask.data<T>(), mask.numel(), one);
      ctx.outputs[1] = std::move(mask);
    });
  }

 private:
  static const Tensor* constant(const KernelInfo& info, std::size_t i) {
    return i < info.constant_inputs.size() ? info.constant_inputs[i] : nullptr;
  }
  // The ratio is known at load when it is absent (the default) or a constant.
  static bool ratio_known(const Node& node, const KernelInfo& info) {
    return !node.has_input(1) || constant(info, 1) != nullptr;
  }
  static float read_ratio(const Node& node, const Tensor& t) {
    RW_EXPECTS(t.numel() == 1 && is_floating(t.dtype()), InvalidArgument,
               "{}: ratio must be a floating-point scalar, got {}", node.where(), t.description());
    return static_cast<float>(t.get_as_double(0));
  }
  static bool read_training(const Node& node, const Tensor& t) {
    RW_EXPECTS(t.numel() == 1 && t.dtype() == DType::kBool, InvalidArgument,
               "{}: training_mode must be a bool scalar, got {}", node.where(), t.description());
    return t.get_as_double(0) != 0.0;
  }
  static void check_ratio(const Node& node, float ratio) {
    RW_EXPECTS(ratio >= 0.0f && ratio < 1.0f, InvalidArgument,
               "{}: ratio must be in [0, 1), got {}", node.where(), ratio);
  }
  static void check_inference(const Node& node, bool training, float ratio) {
    RW_EXPECTS(!training || ratio == 0.0f, Unsupported,
               "{}: training-mode dropout (training_mode true, ratio {}) is not supported: "
               "Redwood runs inference only",
               node.where(), ratio);
  }

  bool inputs_ratio_;  // opset >= 12: ratio and training_mode are inputs
  bool bool_mask_;     // opset >= 10: the mask is bool
};

}  // namespace

RW_REGISTER_KERNEL("Dropout", Device::kCpu, make_factory<DropoutKernel>());

}  // namespace redwood::cpu
