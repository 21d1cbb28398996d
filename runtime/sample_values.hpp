#pragma once
// What the planner's timed runs carry: values in [0, 1), as a normalized picture's, not zeros. A
// GPU can run faster on zeros than on real data (an all-zero operand flips fewer bits and draws
// less power, so the clocks stay higher), and no real batch is zeros; the CUDA node times
// (time_nodes) and the split runner's measured batches (measure_partition) both run on these, so
// that the two measure the same data. C++17, for .cu files.

#include "core/dtype.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace redwood::runtime {

/// Fills `bytes` at `data` (of `dtype`): fp32 with a fixed pseudo-random sequence in [0, 1), the
/// same on every call; any other dtype with zeros (integer inputs may be indices).
inline void fill_sample_values(void* data, DType dtype, std::size_t bytes) {
  if (dtype != DType::kF32) {
    std::memset(data, 0, bytes);
    return;
  }
  auto* f = static_cast<float*>(data);
  std::uint32_t x = 12345;
  for (std::size_t i = 0; i < bytes / sizeof(float); ++i) {
    x = x * 1664525u + 1013904223u;  // Numerical Recipes' LCG
    f[i] = static_cast<float>(x >> 8) * (1.0f / 16777216.0f);
  }
}

}  // namespace redwood::runtime
