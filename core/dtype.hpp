#pragma once
// Element types Redwood's tensors can hold, with their sizes, names and the conversions of the
// 16-bit floating-point formats (stored as raw bits; arithmetic happens in float).

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace redwood {

enum class DType : std::uint8_t { kF32, kF16, kBF16, kI64, kI32, kU8, kBool, kUndefined };

/// Bytes per element (0 for kUndefined).
std::size_t dtype_size(DType t);
/// Lower-case name as ONNX spells it ("float", "float16", "int64", ...).
std::string_view dtype_name(DType t);
/// Maps an ONNX TensorProto::DataType code to a DType; nullopt-like kUndefined for the ones
/// Redwood does not hold (double, strings, complex, ...).
DType dtype_from_onnx(int onnx_type);
/// The ONNX TensorProto::DataType code of a DType.
int dtype_to_onnx(DType t);
/// Name of an ONNX data type code, for messages about types Redwood does not support.
std::string_view onnx_type_name(int onnx_type);
bool is_floating(DType t);

/// IEEE 754 binary16, stored as bits.
struct Half {
  std::uint16_t bits = 0;
};
/// bfloat16 (the upper half of a float), stored as bits.
struct BFloat16 {
  std::uint16_t bits = 0;
};

float half_to_float(Half h);
Half float_to_half(float f);  // round to nearest even, overflow to inf, NaN kept
inline float bf16_to_float(BFloat16 b) {
  std::uint32_t u = std::uint32_t(b.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
BFloat16 float_to_bf16(float f);  // round to nearest even, NaN kept

/// Compile-time map from C++ element type to DType.
template <typename T>
struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::kF32; };
template <> struct DTypeOf<Half> { static constexpr DType value = DType::kF16; };
template <> struct DTypeOf<BFloat16> { static constexpr DType value = DType::kBF16; };
template <> struct DTypeOf<std::int64_t> { static constexpr DType value = DType::kI64; };
template <> struct DTypeOf<std::int32_t> { static constexpr DType value = DType::kI32; };
template <> struct DTypeOf<std::uint8_t> { static constexpr DType value = DType::kU8; };
template <> struct DTypeOf<bool> { static constexpr DType value = DType::kBool; };
template <typename T>
inline constexpr DType dtype_of = DTypeOf<T>::value;

}  // namespace redwood
