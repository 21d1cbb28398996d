// Activations: Elu, Selu, Celu, Softplus, Softsign, ThresholdedRelu, Shrink, Mish, Gelu and PRelu.
//
// All take float32; PRelu also int64 and int32. Attributes (ONNX defaults):
//   Elu              alpha 1:  x < 0 ? alpha (e^x - 1) : x
//   Selu             alpha 1.67326..., gamma 1.05070...:  gamma (x > 0 ? x : alpha (e^x - 1))
//   Celu (12)        alpha 1:  max(0, x) + min(0, alpha (e^(x/alpha) - 1)); alpha 0 is malformed
//   Softplus         log(1 + e^x), computed so that it neither overflows nor loses small values
//   Softsign         x / (1 + |x|)
//   ThresholdedRelu  alpha 1:  x > alpha ? x : 0
//   Shrink (9)       lambd 0.5, bias 0:  x < -lambd ? x + bias : x > lambd ? x - bias : 0
//   Mish (18)        x tanh(softplus(x))
//   Gelu (20)        approximate "none": x/2 (1 + erf(x / sqrt 2));
//                    approximate "tanh": x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
//   PRelu            x < 0 ? slope x : x, slope broadcast to X's shape (unidirectionally, from
//                    opset 7; before it a one-element slope or one of X's shape, which the same
//                    broadcast covers)
// Opsets before 6 carry an unused consumed_inputs attribute, which is ignored; later versions
// differ only in the types they allow.

#include "backends/cpu/reference/ew_broadcast.hpp"
#include "backends/cpu/reference/ew_unary.hpp"
#include "backends/cpu/reference/kernel_util.hpp"

#include <cmath>
#include <cstdint>
#include <numbers>
#include <type_traits>

namespace redwood::cpu {
namespace {

// log(1 + e^x) without overflow for large x: x + log(1 + e^-x) when x > 0.
float softplus(float x) {
  return x > 0.0f ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}

struct EluOp {
  explicit EluOp(const Node& node) : alpha(node.attr_float("alpha", 1.0f)) {}
  float operator()(float x) const { return x < 0.0f ? alpha * std::expm1(x) : x; }
  float alpha;
};

struct SeluOp {
  explicit SeluOp(const Node& node)
      : alpha(node.attr_float("alpha", 1.67326319217681884765625f)),
        gamma(node.attr_float("gamma", 1.05070102214813232421875f)) {}
  float operator()(float x) const { return gamma * (x > 0.0f ? x : alpha * std::expm1(x)); }
  float alpha, gamma;
};

struct CeluOp {
  explicit CeluOp(const Node& node) : alpha(node.attr_float("alpha", 1.0f)) {
    RW_EXPECTS(alpha != 0.0f, InvalidArgument, "{}: alpha must not be 0 (Celu divides by it)",
               node.where());
  }
  float operator()(float x) const { return x > 0.0f ? x : alpha * std::expm1(x / alpha); }
  float alpha;
};

struct SoftplusOp {
  float operator()(float x) const { return softplus(x); }
};

struct SoftsignOp {
  float operator()(float x) const { return x / (1.0f + std::fabs(x)); }
};

struct ThresholdedReluOp {
  explicit ThresholdedReluOp(const Node& node) : alpha(node.attr_float("alpha", 1.0f)) {}
  float operator()(float x) const { return x > alpha ? x : 0.0f; }
  float alpha;
};

struct ShrinkOp {
  explicit ShrinkOp(const Node& node)
      : lambd(node.attr_float("lambd", 0.5f)), bias(node.attr_float("bias", 0.0f)) {}
  float operator()(float x) const {
    if (x < -lambd) return x + bias;
    if (x > lambd) return x - bias;
    return 0.0f;
  }
  float lambd, bias;
};

struct MishOp {
  float operator()(float x) const { return x * std::tanh(softplus(x)); }
};

struct GeluOp {
  explicit GeluOp(const Node& node) {
    const std::string approximate = node.attr_string("approximate", "none");
    RW_EXPECTS(approximate == "none" || approximate == "tanh", InvalidArgument,
               "{}: approximate must be \"none\" or \"tanh\", got \"{}\"", node.where(),
               approximate);
    tanh = approximate == "tanh";
  }
  float operator()(float x) const {
    constexpr float kInvSqrt2 = static_cast<float>(1.0 / std::numbers::sqrt2);
    constexpr float kSqrt2OverPi =
        static_cast<float>(std::numbers::sqrt2 * std::numbers::inv_sqrtpi);
    if (tanh) return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
    return 0.5f * x * (1.0f + std::erf(x * kInvSqrt2));
  }
  bool tanh = false;
};


// ---- PRelu ------------------------------------------------------------------------------------

struct PReluOp {
  template <typename T>
  T operator()(T x, T slope) const {
    if constexpr (std::is_floating_point_v<T>) {
      return x < T(0) ? slope * x : x;
    } else {
      // Multiply in the unsigned type: wraps like numpy's fixed-width integers, never overflows.
      using U = std::make_unsigned_t<T>;
      return x < T(0) ? static_cast<T>(static_cast<U>(slope) * static_cast<U>(x)) : x;
    }
  }
};

class PReluKernel final : public Kernel {
 public:
  PReluKernel(const Node& node, const KernelInfo& info) {
    for (std::size_t i = 0; i < 2 && i < info.input_dtypes.size(); ++i) {
      expect_dtype(node, info.input_dtypes[i], {DType::kF32, DType::kI64, DType::kI32},
                   i == 0 ? "input X" : "slope");
    }
    if (info.input_dtypes.size() >= 2 && info.input_dtypes[0] != DType::kUndefined &&
        info.input_dtypes[1] != DType::kUndefined) {
      RW_EXPECTS(info.input_dtypes[0] == info.input_dtypes[1], InvalidArgument,
                 "{}: X is {} but slope is {}", node.where(), dtype_name(info.input_dtypes[0]),
                 dtype_name(info.input_dtypes[1]));
    }
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor x = ctx.input(0).contiguous();
    const Tensor slope = ctx.input(1).contiguous();
    RW_EXPECTS(x.dtype() == slope.dtype(), InvalidArgument, "{}: X is {} but slope is {}",
               node.where(), x.description(), slope.description());
    RW_EXPECTS(broadcasts_to(slope.shape(), x.shape()), InvalidArgument,
               "{}: slope of shape {} does not broadcast to X's shape {}", node.where(),
               shape_str(slope.shape()), shape_str(x.shape()));
    Tensor y = ctx.allocate_output(0, x.dtype(), x.shape());
    dispatch<float, std::int64_t, std::int32_t>(x.dtype(), node, [&](auto tag) {
      using T = decltype(tag);
      detail::broadcast_binary<T, T, T>(x, slope, y, PReluOp{});
    });
    ctx.outputs[0] = std::move(y);
  }

 private:
  // Unidirectional broadcast: `from` aligns with the trailing dimensions of `to`, each of its
  // extents 1 or equal to to's.
  static bool broadcasts_to(const Shape& from, const Shape& to) {
    if (from.size() > to.size()) return false;
    const std::size_t offset = to.size() - from.size();
    for (std::size_t d = 0; d < from.size(); ++d) {
      if (from[d] != 1 && from[d] != to[offset + d]) return false;
    }
    return true;
  }
};

}  // namespace

RW_REGISTER_KERNEL("Elu", Device::kCpu, make_factory<FloatUnaryKernel<EluOp>>());
RW_REGISTER_KERNEL("Selu", Device::kCpu, make_factory<FloatUnaryKernel<SeluOp>>());
RW_REGISTER_KERNEL("Celu", Device::kCpu, make_factory<FloatUnaryKernel<CeluOp>>());
RW_REGISTER_KERNEL("Softplus", Device::kCpu, make_factory<FloatUnaryKernel<SoftplusOp>>());
RW_REGISTER_KERNEL("Softsign", Device::kCpu, make_factory<FloatUnaryKernel<SoftsignOp>>());
RW_REGISTER_KERNEL("ThresholdedRelu", Device::kCpu,
                   make_factory<FloatUnaryKernel<ThresholdedReluOp>>());
RW_REGISTER_KERNEL("Shrink", Device::kCpu, make_factory<FloatUnaryKernel<ShrinkOp>>());
RW_REGISTER_KERNEL("Mish", Device::kCpu, make_factory<FloatUnaryKernel<MishOp>>());
RW_REGISTER_KERNEL("Gelu", Device::kCpu, make_factory<FloatUnaryKernel<GeluOp>>());
RW_REGISTER_KERNEL("PRelu", Device::kCpu, make_factory<PReluKernel>());

}  // namespace redwood::cpu
