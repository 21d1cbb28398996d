// Mod and BitShift with numpy (multidirectional) broadcasting; two inputs of one type, which is
// the output's.
//
// Mod (opsets 10, 13; 13 only adds bfloat16): the attribute fmod picks the remainder's sign.
//   fmod = 0 (default): the sign of the divisor, as Python's % and numpy.mod (-4 mod 3 = 2).
//                       ONNX defines it for integers only, so with float inputs the node is
//                       malformed.
//   fmod = 1:           the sign of the dividend, as C's fmod and % (-4 mod 3 = -1).
// Types: float and float16 (fmod = 1; float16 is computed in float, where fmod is exact), int64,
// int32, uint8. An integer divisor of 0 is an error rather than
// undefined behaviour; INT_MIN mod -1 is 0.
//
// BitShift (opset 11): direction LEFT or RIGHT (required) shifts X by Y bits. Of the unsigned
// types ONNX allows, Redwood holds uint8; a shift by 8 or more gives 0 (every bit shifted out).

#include "backends/cpu/reference/ew_broadcast.hpp"
#include "backends/cpu/reference/ew_operands.hpp"

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

namespace redwood::cpu {
namespace {

/// Remainder with the sign of the dividend (fmod = 1).
struct TruncatedModOp {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, Half>) {
      return float_to_half(std::fmod(half_to_float(a), half_to_float(b)));
    } else if constexpr (std::is_floating_point_v<T>) {
      return std::fmod(a, b);
    } else {
      if constexpr (std::is_signed_v<T>) {
        if (b == -1) return 0;  // INT_MIN % -1 overflows
      }
      return static_cast<T>(a % b);
    }
  }
};

/// Remainder with the sign of the divisor (fmod = 0, integers).
struct FlooredModOp {
  template <typename T>
  T operator()(T a, T b) const {
    const T r = TruncatedModOp{}(a, b);
    if constexpr (std::is_signed_v<T>) {
      if (r != 0 && ((r < 0) != (b < 0))) return static_cast<T>(r + b);
    }
    return r;
  }
};

class ModKernel final : public Kernel {
 public:
  ModKernel(const Node& node, const KernelInfo& info) : fmod_(node.attr_int("fmod", 0)) {
    expect_input_count(node, 2);
    RW_EXPECTS(fmod_ == 0 || fmod_ == 1, InvalidArgument, "{}: fmod must be 0 or 1, not {}",
               node.where(), fmod_);
    expect_same_typed_inputs(node, info, 0,
                             {DType::kF32, DType::kF16, DType::kI64, DType::kI32, DType::kU8});
    if (!info.input_dtypes.empty()) expect_fmod_for_float(node, info.input_dtypes[0]);
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const std::vector<Tensor> in = contiguous_inputs(ctx, 0, 2);
    expect_fmod_for_float(node, in[0].dtype());
    Tensor out = allocate_broadcast_output(ctx, in[0].dtype(), in);
    const DType dtype = in[0].dtype();
    dispatch<float, Half, std::int64_t, std::int32_t, std::uint8_t>(dtype, node, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (!std::is_integral_v<T>) {
        detail::broadcast_binary<T, T, T>(in[0], in[1], out, TruncatedModOp{});
      } else {
        for (T v : in[1].values<T>()) {
          RW_EXPECTS(v != 0, InvalidArgument, "{}: integer modulo by zero (divisor {})",
                     node.where(), in[1].description());
        }
        if (fmod_ == 1) {
          detail::broadcast_binary<T, T, T>(in[0], in[1], out, TruncatedModOp{});
        } else {
          detail::broadcast_binary<T, T, T>(in[0], in[1], out, FlooredModOp{});
        }
      }
    });
    ctx.outputs[0] = std::move(out);
  }

 private:
  void expect_fmod_for_float(const Node& node, DType dtype) const {
    RW_EXPECTS(fmod_ == 1 || !is_floating(dtype), InvalidArgument,
               "{}: fmod=0 is defined for integers only; {} inputs need fmod=1", node.where(),
               dtype_name(dtype));
  }

  std::int64_t fmod_;
};

class BitShiftKernel final : public Kernel {
 public:
  BitShiftKernel(const Node& node, const KernelInfo& info) {
    expect_input_count(node, 2);
    const std::string direction = node.attr_string("direction", "");
    RW_EXPECTS(direction == "LEFT" || direction == "RIGHT", InvalidArgument,
               "{}: direction must be LEFT or RIGHT, not '{}'", node.where(), direction);
    left_ = direction == "LEFT";
    expect_same_typed_inputs(node, info, 0, {DType::kU8});
  }

  void run(KernelContext& ctx) override {
    const std::vector<Tensor> in = contiguous_inputs(ctx, 0, 2);
    Tensor out = allocate_broadcast_output(ctx, in[0].dtype(), in);
    dispatch<std::uint8_t>(in[0].dtype(), ctx.node, [&](auto tag) {
      using T = decltype(tag);
      constexpr T kBits = sizeof(T) * 8;
      if (left_) {
        detail::broadcast_binary<T, T, T>(in[0], in[1], out, [](T x, T y) {
          return y < kBits ? static_cast<T>(x << y) : T{0};
        });
      } else {
        detail::broadcast_binary<T, T, T>(in[0], in[1], out, [](T x, T y) {
          return y < kBits ? static_cast<T>(x >> y) : T{0};
        });
      }
    });
    ctx.outputs[0] = std::move(out);
  }

 private:
  bool left_ = true;
};

}  // namespace

RW_REGISTER_KERNEL("Mod", Device::kCpu, make_factory<ModKernel>());
RW_REGISTER_KERNEL("BitShift", Device::kCpu, make_factory<BitShiftKernel>());

}  // namespace redwood::cpu
