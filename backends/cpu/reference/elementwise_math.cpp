// Unary math ops: Abs, Neg, Sign, Exp, Log, Reciprocal, Floor, Ceil, Round, Erf, the
// trigonometric and hyperbolic functions and their inverses, IsNaN, IsInf and Not.
//
// Each op is a functor applied by UnaryKernel (ew_unary.hpp). Float ops take float32. Abs and
// Sign also take int64, int32 and uint8, Neg int64 and int32 (ONNX allows them all numeric, or
// all signed, types; these are the ones Redwood holds). Integer Abs and Neg wrap like numpy's
// fixed-width integers: the most negative value stays itself.
//
// Semantics as ONNX defines them:
//   Log        of 0 is -inf, of a negative number NaN; Reciprocal of 0 is inf.
//   Round      rounds halves to even (1.5 -> 2, 2.5 -> 2, -0.5 -> -0), as numpy.round.
//   Sign       is -1, 0 or 1; NaN stays NaN.
//   Asin/Acos  of |x| > 1, Acosh of x < 1 and Atanh of |x| > 1 are NaN (the C library's answer).
//   IsNaN      and IsInf produce bool; IsInf's detect_negative and detect_positive (default 1)
//              select which infinities count.
//   Not        takes and produces bool.
// Opset versions differ only in the types they allow (bfloat16 from 13 for most, float8 from 20
// for IsNaN/IsInf) and in opset 1's unused consumed_inputs attribute, which is ignored.

#include "backends/cpu/reference/ew_unary.hpp"
#include "backends/cpu/reference/kernel_util.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace redwood::cpu {
namespace {

// ---- numeric ops that also take integers ------------------------------------------------------

struct AbsOp {
  template <typename T>
  T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) {
      return std::fabs(x);
    } else if constexpr (std::is_signed_v<T>) {
      // Negate in the unsigned type: defined for the most negative value, which stays itself.
      using U = std::make_unsigned_t<T>;
      return x < 0 ? static_cast<T>(U(0) - static_cast<U>(x)) : x;
    } else {
      return x;
    }
  }
};

struct NegOp {
  template <typename T>
  T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) {
      return -x;
    } else {
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(U(0) - static_cast<U>(x));
    }
  }
};

struct SignOp {
  template <typename T>
  T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) {
      return x > T(0) ? T(1) : x < T(0) ? T(-1) : x;  // 0 and NaN stay themselves
    } else {
      return static_cast<T>((T(0) < x) - (x < T(0)));
    }
  }
};

// ---- float32 ops ------------------------------------------------------------------------------

// Ops that are one function of the C library (captureless lambdas: default-constructible types).
constexpr auto kExp = [](float x) { return std::exp(x); };
constexpr auto kLog = [](float x) { return std::log(x); };
constexpr auto kReciprocal = [](float x) { return 1.0f / x; };
constexpr auto kFloor = [](float x) { return std::floor(x); };
constexpr auto kCeil = [](float x) { return std::ceil(x); };
// nearbyint rounds in the current rounding mode, which Redwood never changes from the default,
// round to nearest, halves to even.
constexpr auto kRound = [](float x) { return std::nearbyint(x); };
constexpr auto kErf = [](float x) { return std::erf(x); };
constexpr auto kSin = [](float x) { return std::sin(x); };
constexpr auto kCos = [](float x) { return std::cos(x); };
constexpr auto kTan = [](float x) { return std::tan(x); };
constexpr auto kAsin = [](float x) { return std::asin(x); };
constexpr auto kAcos = [](float x) { return std::acos(x); };
constexpr auto kAtan = [](float x) { return std::atan(x); };
constexpr auto kSinh = [](float x) { return std::sinh(x); };
constexpr auto kCosh = [](float x) { return std::cosh(x); };
constexpr auto kAsinh = [](float x) { return std::asinh(x); };
constexpr auto kAcosh = [](float x) { return std::acosh(x); };
constexpr auto kAtanh = [](float x) { return std::atanh(x); };

// ---- predicates and logic ---------------------------------------------------------------------

struct IsNaNOp {
  bool operator()(float x) const { return std::isnan(x); }
};

struct IsInfOp {
  explicit IsInfOp(const Node& node)
      : negative(node.attr_int("detect_negative", 1) != 0),
        positive(node.attr_int("detect_positive", 1) != 0) {}
  bool operator()(float x) const {
    return (positive && x == std::numeric_limits<float>::infinity()) ||
           (negative && x == -std::numeric_limits<float>::infinity());
  }
  bool negative, positive;
};

struct NotOp {
  bool operator()(bool x) const { return !x; }
};

using AbsKernel = UnaryKernel<AbsOp, float, std::int64_t, std::int32_t, std::uint8_t>;
using NegKernel = UnaryKernel<NegOp, float, std::int64_t, std::int32_t>;
using SignKernel = UnaryKernel<SignOp, float, std::int64_t, std::int32_t, std::uint8_t>;
using NotKernel = UnaryKernel<NotOp, bool>;

}  // namespace

RW_REGISTER_KERNEL("Abs", Device::kCpu, make_factory<AbsKernel>());
RW_REGISTER_KERNEL("Neg", Device::kCpu, make_factory<NegKernel>());
RW_REGISTER_KERNEL("Sign", Device::kCpu, make_factory<SignKernel>());
RW_REGISTER_KERNEL("Exp", Device::kCpu, make_factory<FloatUnaryKernel<decltype(kExp)>>());
RW_REGISTER_KERNEL("Log", Device::kCpu, make_factory<FloatUnaryKernel<decltype(kLog)>>());
RW_REGISTER_KERNEL("Reciprocal", Device::kCpu,
                   make_factory<FloatUnaryKernel<decltype(kReciprocal)>>());
RW_REGISTER_KERNEL("Floor", Device::kCpu, make_factory<FloatUnaryKernel<decltype(kFloor)>>());
RW_REGISTER_KERNEL("Ceil", Device::kCpu, make_factory<FloatUnaryKernel<decltype(kCeil)>>());
RW_REGISTER_KERNEL("Round", Device::kCpu, make_factory<FloatUnaryKernel<decltype(kRound)>>());
RW_REGISTER_KERNEL("Erf", Device::kCpu, make_factory<FloatUnaryKernel<decltype(kErf)>>());
RW_REGISTER_KERNEL("Sin", Device::kCpu, make_factory<FloatUnaryKernel<decltype(kSin)>>());
RW_REGISTER_KERNEL("Cos", Device::kCpu, make_factory<FloatUnaryKernel<decltype(kCos)>>());
RW_REGISTER_KERNEL("Tan", Device::kCpu, make_factory<FloatUnaryKernel<decltype(kTan)>>());
RW_REGISTER_KERNEL("Asin", Device::kCpu, make_factory<FloatUnaryKernel<decltype(kAsin)>>());
RW_REGISTER_KERNEL("Acos", Device::kCpu, make_factory<FloatUnaryKernel<decltype(kAcos)>>());
RW_REGISTER_KERNEL("Atan", Device::kCpu, make_factory<FloatUnaryKernel<decltype(kAtan)>>());
RW_REGISTER_KERNEL("Sinh", Device::kCpu, make_factory<FloatUnaryKernel<decltype(kSinh)>>());
RW_REGISTER_KERNEL("Cosh", Device::kCpu, make_factory<FloatUnaryKernel<decltype(kCosh)>>());
RW_REGISTER_KERNEL("Asinh", Device::kCpu, make_factory<FloatUnaryKernel<decltype(kAsinh)>>());
RW_REGISTER_KERNEL("Acosh", Device::kCpu, make_factory<FloatUnaryKernel<decltype(kAcosh)>>());
RW_REGISTER_KERNEL("Atanh", Device::kCpu, make_factory<FloatUnaryKernel<decltype(kAtanh)>>());
RW_REGISTER_KERNEL("IsNaN", Device::kCpu, make_factory<FloatUnaryKernel<IsNaNOp>>());
RW_REGISTER_KERNEL("IsInf", Device::kCpu, make_factory<FloatUnaryKernel<IsInfOp>>());
RW_REGISTER_KERNEL("Not", Device::kCpu, make_factory<NotKernel>());

}  // namespace redwood::cpu
