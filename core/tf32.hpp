#pragma once
// tf32 (fp32's sign and 8 exponent bits, 10 mantissa bits) kept in a float: the host twin of
// CUDA's cvt.rna.tf32.f32, for operands that tensor cores take as tf32 (the GPU layout pass
// rounds the NHWC convolutions' weights with it at precision tf32, and the reference kernels of
// the rw.*Nhwc ops their outputs; core/passes/choose_gpu_layout.cpp).

#include <cstdint>
#include <cstring>

namespace redwood {

/// f rounded to tf32: to nearest, ties away from zero, on the 13 dropped mantissa bits; NaN and
/// Inf kept. A value rounded here passes through a tensor core's tf32 operand unchanged (Hopper's
/// wgmma truncates the dropped bits, mma.sync's cvt.rna rounds them: both see zeros).
inline float round_to_tf32(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) == 0x7f800000u) return f;  // Inf and NaN kept
  // Half the last kept bit's weight added to the magnitude bits, then the low 13 bits dropped
  // (ties away from zero; the sign bit is untouched). A carry into the exponent is the right
  // result: the next power of two, or Inf past the largest float.
  u = (u + 0x1000u) & ~0x1fffu;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace redwood
