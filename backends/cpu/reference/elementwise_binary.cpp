// Binary elementwise ops with numpy (multidirectional) broadcasting: Add, Sub, Mul, Div, Pow.
//
// Add/Sub/Mul/Div take two inputs of one type (float, int64, int32, uint8) and produce that type.
// Integer arithmetic wraps around like numpy's fixed-width integers (it is done in the unsigned
// type, so overflow is defined); integer Div truncates toward zero like C++ and ONNX Runtime, and
// a zero divisor is an error rather than undefined behaviour. (ONNX 1.12's only integer Div test
// is uint8, where truncation and numpy's floor division agree.)
//
// Pow's output has the base's type; base float, int32 or int64, exponent float, int32 or int64.

#include "backends/cpu/reference/ew_broadcast.hpp"
#include "backends/cpu/reference/kernel_util.hpp"

#include <cmath>
#include <type_traits>

namespace redwood::cpu {
namespace {

// Wrapping integer arithmetic: compute in the unsigned type of the same width (defined modulo
// 2^n), convert back. uint8 promotes to int, which cannot overflow for one operation.
template <typename T>
using Wide = std::conditional_t<std::is_same_v<T, std::uint8_t>, unsigned, std::make_unsigned_t<T>>;

struct AddOp {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>)
      return a + b;
    else
      return static_cast<T>(static_cast<Wide<T>>(a) + static_cast<Wide<T>>(b));
  }
};
struct SubOp {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>)
      return a - b;
    else
      return static_cast<T>(static_cast<Wide<T>>(a) - static_cast<Wide<T>>(b));
  }
};
struct MulOp {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>)
      return a * b;
    else
      return static_cast<T>(static_cast<Wide<T>>(a) * static_cast<Wide<T>>(b));
  }
};
struct DivOp {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      return a / b;
    } else if constexpr (std::is_signed_v<T>) {
      // min / -1 overflows; wrap it as numpy does (the result is min again).
      if (b == -1) return static_cast<T>(Wide<T>(0) - static_cast<Wide<T>>(a));
      return a / b;
    } else {
      return static_cast<T>(a / b);
    }
  }
};

/// Integer power by squaring, wrapping like the other integer ops (exponent >= 0).
template <typename T>
T int_pow(T base, std::int64_t exp) {
  using U = Wide<T>;
  U result = 1, b = static_cast<U>(base);
  while (exp > 0) {
    if (exp & 1) result = static_cast<U>(result * b);
    b = static_cast<U>(b * b);
    exp >>= 1;
  }
  return static_cast<T>(result);
}

template <typename T, typename E>
struct PowOp {
  T operator()(T base, E exp) const {
    if constexpr (std::is_same_v<T, float> && std::is_same_v<E, float>) {
      return std::pow(base, exp);
    } else if constexpr (std::is_same_v<T, float>) {
      // Integer exponent: double keeps x^n exact where float pow of a converted n would too.
      return static_cast<float>(std::pow(static_cast<double>(base), static_cast<double>(exp)));
    } else if constexpr (std::is_integral_v<E>) {
      if (exp >= 0) return int_pow(base, static_cast<std::int64_t>(exp));
      return static_cast<T>(std::pow(static_cast<double>(base), static_cast<double>(exp)));
    } else {
      // Integer base, float exponent (as ONNX Runtime: pow in floating point, then convert).
      return static_cast<T>(std::pow(static_cast<double>(base), static_cast<double>(exp)));
    }
  }
};

Tensor broadcast_output(const KernelContext& ctx, DType dtype, const Tensor& a, const Tensor& b) {
  const Node& node = ctx.node;
  Shape shape;
  try {
    shape = broadcast_shapes(a.shape(), b.shape());
  } catch (const InvalidArgument&) {
    throw InvalidArgument(fmt::format("{}: input shapes {} and {} do not broadcast", node.where(),
                                      shape_str(a.shape()), shape_str(b.shape())));
  }
  return ctx.allocate_output(0, dtype, std::move(shape));
}

template <typename Op>
class ArithmeticKernel final : public Kernel {
 public:
  ArithmeticKernel(const Node& node, const KernelInfo& info) {
    for (std::size_t i = 0; i < 2 && i < info.input_dtypes.size(); ++i) {
      expect_dtype(node, info.input_dtypes[i], {DType::kF32, DType::kI64, DType::kI32, DType::kU8},
                   i == 0 ? "input A" : "input B");
    }
    if (info.input_dtypes.size() >= 2 && info.input_dtypes[0] != DType::kUndefined &&
        info.input_dtypes[1] != DType::kUndefined) {
      RW_EXPECTS(info.input_dtypes[0] == info.input_dtypes[1], InvalidArgument,
                 "{}: inputs have different types ({} and {})", node.where(),
                 dtype_name(info.input_dtypes[0]), dtype_name(info.input_dtypes[1]));
    }
  }

  void run(KernelContext& ctx) override {
    const Tensor a = ctx.input(0).contiguous();
    const Tensor b = ctx.input(1).contiguous();
    const Node& node = ctx.node;
    RW_EXPECTS(a.dtype() == b.dtype(), InvalidArgument,
               "{}: inputs have different types ({} and {})", node.where(), a.description(),
               b.description());
    Tensor out = broadcast_output(ctx, a.dtype(), a, b);
    dispatch<float, std::int64_t, std::int32_t, std::uint8_t>(a.dtype(), node, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<Op, DivOp> && std::is_integral_v<T>) {
        for (T v : b.values<T>()) {
          RW_EXPECTS(v != 0, InvalidArgument, "{}: integer division by zero (divisor {})",
                     node.where(), b.description());
        }
      }
      detail::broadcast_binary<T, T, T>(a, b, out, Op{});
    });
    ctx.outputs[0] = std::move(out);
  }
};

class PowKernel final : public Kernel {
 public:
  PowKernel(const Node& node, const KernelInfo& info) {
    for (std::size_t i = 0; i < 2 && i < info.input_dtypes.size(); ++i) {
      expect_dtype(node, info.input_dtypes[i], {DType::kF32, DType::kI64, DType::kI32},
                   i == 0 ? "base X" : "exponent Y");
    }
  }

  void run(KernelContext& ctx) override {
    const Tensor a = ctx.input(0).contiguous();
    const Tensor b = ctx.input(1).contiguous();
    const Node& node = ctx.node;
    Tensor out = broadcast_output(ctx, a.dtype(), a, b);
    dispatch<float, std::int64_t, std::int32_t>(a.dtype(), node, [&](auto base_tag) {
      using T = decltype(base_tag);
      dispatch<float, std::int64_t, std::int32_t>(b.dtype(), node, [&](auto exp_tag) {
        using E = decltype(exp_tag);
        detail::broadcast_binary<T, E, T>(a, b, out, PowOp<T, E>{});
      });
    });
    ctx.outputs[0] = std::move(out);
  }
};

}  // namespace

RW_REGISTER_KERNEL("Add", Device::kCpu, make_factory<ArithmeticKernel<AddOp>>());
RW_REGISTER_KERNEL("Sub", Device::kCpu, make_factory<ArithmeticKernel<SubOp>>());
RW_REGISTER_KERNEL("Mul", Device::kCpu, make_factory<ArithmeticKernel<MulOp>>());
RW_REGISTER_KERNEL("Div", Device::kCpu, make_factory<ArithmeticKernel<DivOp>>());
RW_REGISTER_KERNEL("Pow", Device::kCpu, make_factory<PowKernel>());

}  // namespace redwood::cpu
