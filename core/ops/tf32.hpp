#pragma once
// tf32 (fp32's sign and 8 exponent bits, 10 mantissa bits) kept in a float: what Redwood's
// `rw.round_tf32` attribute means (core/ops/schema.hpp), an output stored rounded this way. The
// host twin of CUDA's cvt.rna.tf32.f32, so that the reference kernels and the GPU's agree bit for
// bit on such values.

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
