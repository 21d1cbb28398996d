// round_to_tf32 (core/ops/tf32.hpp), the host twin of cvt.rna.tf32.f32: to nearest on the 13 dropped
// mantissa bits, ties away from zero, NaN and Inf kept, a carry into the exponent allowed.

#include "core/ops/tf32.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace redwood {
namespace {

float from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
std::uint32_t bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

TEST(RoundToTf32, NearestWithTiesAwayFromZero) {
  EXPECT_EQ(bits(round_to_tf32(1.0f)), 0x3f800000u);             // a tf32 value stays
  EXPECT_EQ(bits(round_to_tf32(from_bits(0x3f800fffu))), 0x3f800000u);  // below half: down
  EXPECT_EQ(bits(round_to_tf32(from_bits(0x3f801000u))), 0x3f802000u);  // the tie: away from zero
  EXPECT_EQ(bits(round_to_tf32(from_bits(0x3f803000u))), 0x3f804000u);  // a tie above an odd value too
  EXPECT_EQ(bits(round_to_tf32(from_bits(0xbf801000u))), 0xbf802000u);  // negative tie: away from zero
  EXPECT_EQ(bits(round_to_tf32(from_bits(0xbf801001u))), 0xbf802000u);
  EXPECT_EQ(bits(round_to_tf32(from_bits(0x3fffffffu))), 0x40000000u);  // carry into the exponent: 2
  EXPECT_EQ(bits(round_to_tf32(from_bits(0x00001000u))), 0x00002000u);  // a subnormal tie
}

TEST(RoundToTf32, KeepsNanAndInfAndOverflowsToInf) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(round_to_tf32(inf), inf);
  EXPECT_EQ(round_to_tf32(-inf), -inf);
  EXPECT_TRUE(std::isnan(round_to_tf32(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(bits(round_to_tf32(from_bits(0x7f800001u))), 0x7f800001u);  // a NaN's payload is not rounded to Inf
  EXPECT_EQ(round_to_tf32(std::numeric_limits<float>::max()), inf);     // past the largest tf32
  EXPECT_EQ(bits(round_to_tf32(from_bits(0x7f7fefffu))), 0x7f7fe000u);  // the largest tf32 stays finite
}

}  // namespace
}  // namespace redwood
