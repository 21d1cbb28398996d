#include "core/dtype.hpp"

#include <cmath>

namespace redwood {

namespace {
// ONNX TensorProto::DataType codes (onnx.proto).
enum OnnxType : int {
  kOnnxUndefined = 0, kOnnxFloat = 1, kOnnxUint8 = 2, kOnnxInt8 = 3, kOnnxUint16 = 4,
  kOnnxInt16 = 5, kOnnxInt32 = 6, kOnnxInt64 = 7, kOnnxString = 8, kOnnxBool = 9,
  kOnnxFloat16 = 10, kOnnxDouble = 11, kOnnxUint32 = 12, kOnnxUint64 = 13,
  kOnnxComplex64 = 14, kOnnxComplex128 = 15, kOnnxBfloat16 = 16,
};
}  // namespace

std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kI64: return 8;
    case DType::kI32: return 4;
    case DType::kU8: return 1;
    case DType::kBool: return 1;
    case DType::kUndefined: return 0;
  }
  return 0;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "float";
    case DType::kF16: return "float16";
    case DType::kBF16: return "bfloat16";
    case DType::kI64: return "int64";
    case DType::kI32: return "int32";
    case DType::kU8: return "uint8";
    case DType::kBool: return "bool";
    case DType::kUndefined: return "undefined";
  }
  return "undefined";
}

DType dtype_from_onnx(int onnx_type) {
  switch (onnx_type) {
    case kOnnxFloat: return DType::kF32;
    case kOnnxFloat16: return DType::kF16;
    case kOnnxBfloat16: return DType::kBF16;
    case kOnnxInt64: return DType::kI64;
    case kOnnxInt32: return DType::kI32;
    case kOnnxUint8: return DType::kU8;
    case kOnnxBool: return DType::kBool;
    default: return DType::kUndefined;
  }
}

int dtype_to_onnx(DType t) {
  switch (t) {
    case DType::kF32: return kOnnxFloat;
    case DType::kF16: return kOnnxFloat16;
    case DType::kBF16: return kOnnxBfloat16;
    case DType::kI64: return kOnnxInt64;
    case DType::kI32: return kOnnxInt32;
    case DType::kU8: return kOnnxUint8;
    case DType::kBool: return kOnnxBool;
    case DType::kUndefined: return kOnnxUndefined;
  }
  return kOnnxUndefined;
}

std::string_view onnx_type_name(int onnx_type) {
  switch (onnx_type) {
    case kOnnxFloat: return "float";
    case kOnnxUint8: return "uint8";
    case kOnnxInt8: return "int8";
    case kOnnxUint16: return "uint16";
    case kOnnxInt16: return "int16";
    case kOnnxInt32: return "int32";
    case kOnnxInt64: return "int64";
    case kOnnxString: return "string";
    case kOnnxBool: return "bool";
    case kOnnxFloat16: return "float16";
    case kOnnxDouble: return "double";
    case kOnnxUint32: return "uint32";
    case kOnnxUint64: return "uint64";
    case kOnnxComplex64: return "complex64";
    case kOnnxComplex128: return "complex128";
    case kOnnxBfloat16: return "bfloat16";
    default: return "undefined";
  }
}

bool is_floating(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16;
}

float half_to_float(Half h) {
  const std::uint32_t sign = std::uint32_t(h.bits & 0x8000u) << 16;
  std::uint32_t exp = (h.bits >> 10) & 0x1fu;
  std::uint32_t mant = h.bits & 0x3ffu;
  std::uint32_t u;
  if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal: normalize
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ffu;
      u = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    u = sign | 0x7f800000u | (mant << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

Half float_to_half(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  const std::uint16_t sign = std::uint16_t((u >> 16) & 0x8000u);
  const std::uint32_t abs = u & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or NaN
    return Half{std::uint16_t(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u))};
  }
  if (abs >= 0x477ff000u) {  // rounds to a value past the largest half: inf
    return Half{std::uint16_t(sign | 0x7c00u)};
  }
  if (abs < 0x38800000u) {  // below the smallest normal half: subnormal or zero
    // value = abs_float; half subnormal unit is 2^-24.
    float a;
    std::memcpy(&a, &abs, 4);
    const float scaled = a * 16777216.0f;  // 2^24
    const auto m = static_cast<std::uint32_t>(std::nearbyint(scaled));  // ties to even
    return Half{std::uint16_t(sign | m)};
  }
  // normal: rebias exponent, round mantissa to 10 bits, nearest even
  std::uint32_t v = abs - ((127u - 15u) << 23);
  const std::uint32_t round_bit = 0x1000u;
  const std::uint32_t rest = v & 0x1fffu;
  v >>= 13;
  if (rest > round_bit || (rest == round_bit && (v & 1u))) ++v;
  return Half{std::uint16_t(sign | v)};
}

BFloat16 float_to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return BFloat16{std::uint16_t((u >> 16) | 0x40u)};
  const std::uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;
  return BFloat16{std::uint16_t(u >> 16)};
}

}  // namespace redwood
