// Unary elementwise ops: Relu, LeakyRelu, Clip, Sigmoid, HardSigmoid, HardSwish, Tanh, Sqrt.
//
// Each op is a small functor built from the node's attributes at load; one kernel template
// applies it over the input in parallel chunks (apply_unary, ew_unary.hpp). Float ops take
// float32; Relu and Clip also take the integer types ONNX allows them that Redwood holds.

#include "backends/cpu/reference/ew_unary.hpp"
#include "backends/cpu/reference/kernel_util.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace redwood::cpu {
namespace {

// ---- float32-only ops -------------------------------------------------------------------------

struct LeakyReluOp {
  explicit LeakyReluOp(const Node& node) : alpha(node.attr_float("alpha", 0.01f)) {}
  float operator()(float x) const { return x >= 0.0f ? x : alpha * x; }
  float alpha;
};

struct SigmoidOp {
  explicit SigmoidOp(const Node&) {}
  float operator()(float x) const {
    // Split on the sign so that exp never overflows: both branches compute 1 / (1 + e^-x).
    if (x >= 0.0f) return 1.0f / (1.0f + std::exp(-x));
    const float e = std::exp(x);
    return e / (1.0f + e);
  }
};

struct HardSigmoidOp {
  explicit HardSigmoidOp(const Node& node)
      : alpha(node.attr_float("alpha", 0.2f)), beta(node.attr_float("beta", 0.5f)) {}
  float operator()(float x) const { return std::clamp(alpha * x + beta, 0.0f, 1.0f); }
  float alpha, beta;
};

struct HardSwishOp {
  explicit HardSwishOp(const Node&) {}
  // x * HardSigmoid(x) with alpha = 1/6, beta = 0.5 (the spec's definition).
  float operator()(float x) const { return x * std::clamp(x / 6.0f + 0.5f, 0.0f, 1.0f); }
};

struct TanhOp {
  explicit TanhOp(const Node&) {}
  float operator()(float x) const { return std::tanh(x); }
};

struct SqrtOp {
  explicit SqrtOp(const Node&) {}
  float operator()(float x) const { return std::sqrt(x); }  // negative -> NaN, as the spec says
};

// ---- Relu: float and signed integers ----------------------------------------------------------

class ReluKernel final : public Kernel {
 public:
  ReluKernel(const Node& node, const KernelInfo& info) {
    if (!info.input_dtypes.empty()) {
      expect_dtype(node, info.input_dtypes[0], {DType::kF32, DType::kI64, DType::kI32});
    }
  }
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    dispatch<float, std::int64_t, std::int32_t>(x.dtype(), ctx.node, [&](auto tag) {
      using T = decltype(tag);
      // x > 0 ? x : 0 keeps NaN as NaN (std::max(0, NaN) would not).
      ctx.outputs[0] = apply_unary<T>(ctx, x, [](T v) { return v < T(0) ? T(0) : v; });
    });
  }
};

// ---- Clip -------------------------------------------------------------------------------------
// opset < 11: min/max are float attributes (defaults: the type's range).
// opset >= 11: min/max are optional scalar inputs of the input's type.

class ClipKernel final : public Kernel {
 public:
  ClipKernel(const Node& node, const KernelInfo& info) : use_inputs_(info.opset >= 11) {
    const DType x_type = info.input_dtypes.empty() ? DType::kUndefined : info.input_dtypes[0];
    if (use_inputs_) {
      expect_dtype(node, x_type, {DType::kF32, DType::kI64, DType::kI32, DType::kU8});
      for (std::size_t i = 1; i < 3 && i < info.input_dtypes.size(); ++i) {
        RW_EXPECTS(info.input_dtypes[i] == DType::kUndefined ||
                       info.input_dtypes[0] == DType::kUndefined ||
                       info.input_dtypes[i] == info.input_dtypes[0],
                   InvalidArgument, "{}: {} has type {} but the input is {}", node.where(),
                   i == 1 ? "min" : "max", dtype_name(info.input_dtypes[i]),
                   dtype_name(info.input_dtypes[0]));
      }
    } else {
      expect_dtype(node, x_type, {DType::kF32});  // float types only before opset 11
      RW_EXPECTS(node.inputs.size() <= 1, InvalidArgument,
                 "{}: Clip before opset 11 takes one input (min/max are attributes), got {}",
                 node.where(), node.inputs.size());
      if (node.has_attr("min")) attr_min_ = node.attr_float("min", 0.0f);
      if (node.has_attr("max")) attr_max_ = node.attr_float("max", 0.0f);
    }
  }

  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    RW_EXPECTS(use_inputs_ || x.dtype() == DType::kF32, InvalidArgument,
               "{}: Clip before opset 11 takes float input, got {}", ctx.node.where(),
               x.description());
    dispatch<float, std::int64_t, std::int32_t, std::uint8_t>(x.dtype(), ctx.node, [&](auto tag) {
      using T = decltype(tag);
      T lo = std::numeric_limits<T>::lowest();
      T hi = std::numeric_limits<T>::max();
      if (use_inputs_) {
        if (ctx.has_input(1)) lo = bound<T>(ctx, 1, "min");
        if (ctx.has_input(2)) hi = bound<T>(ctx, 2, "max");
      } else {
        if (attr_min_) lo = static_cast<T>(*attr_min_);
        if (attr_max_) hi = static_cast<T>(*attr_max_);
      }
      // min(max(x, lo), hi), as numpy.clip: with lo > hi every element becomes hi. NaN stays.
      ctx.outputs[0] = apply_unary<T>(ctx, x, [lo, hi](T v) {
        if (v < lo) v = lo;
        if (v > hi) v = hi;
        return v;
      });
    });
  }

 private:
  template <typename T>
  static T bound(const KernelContext& ctx, std::size_t i, const char* what) {
    const Tensor& t = ctx.inputs[i];
    RW_EXPECTS(t.dtype() == ctx.inputs[0].dtype() && t.numel() == 1, InvalidArgument,
               "{}: {} must be a scalar of the input's type {}, got {}", ctx.node.where(), what,
               dtype_name(ctx.inputs[0].dtype()), t.description());
    return t.contiguous().data<T>()[0];
  }

  bool use_inputs_;
  std::optional<float> attr_min_, attr_max_;
};

}  // namespace

RW_REGISTER_KERNEL("Relu", Device::kCpu, make_factory<ReluKernel>());
RW_REGISTER_KERNEL("LeakyRelu", Device::kCpu, make_factory<FloatUnaryKernel<LeakyReluOp>>());
RW_REGISTER_KERNEL("Clip", Device::kCpu, make_factory<ClipKernel>());
RW_REGISTER_KERNEL("Sigmoid", Device::kCpu, make_factory<FloatUnaryKernel<SigmoidOp>>());
RW_REGISTER_KERNEL("HardSigmoid", Device::kCpu, make_factory<FloatUnaryKernel<HardSigmoidOp>>());
RW_REGISTER_KERNEL("HardSwish", Device::kCpu, make_factory<FloatUnaryKernel<HardSwishOp>>());
RW_REGISTER_KERNEL("Tanh", Device::kCpu, make_factory<FloatUnaryKernel<TanhOp>>());
RW_REGISTER_KERNEL("Sqrt", Device::kCpu, make_factory<FloatUnaryKernel<SqrtOp>>());

}  // namespace redwood::cpu
