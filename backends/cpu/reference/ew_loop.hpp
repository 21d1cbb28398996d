#pragma once
// The inner loop of the elementwise reference kernels, written so that GCC vectorizes it at -O2.
//
// At -O2 GCC uses its "very cheap" vectorizer cost model, which only vectorizes a loop whose trip
// count is a known multiple of the vector width; a plain `for (i < n)` loop stays scalar. Running
// the body over fixed blocks of kBlock elements (then a scalar tail) gives it such loops: about
// 3x faster for Add/Mul/Relu on large tensors, with no intrinsics and the same results.

#include <cstdint>

namespace redwood::cpu::detail {

inline constexpr std::int64_t kBlock = 16;

/// Calls body(i) for i in [0, n).
template <typename Body>
inline void blocked_loop(std::int64_t n, Body&& body) {
  std::int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    for (std::int64_t k = 0; k < kBlock; ++k) body(i + k);
  }
  for (; i < n; ++i) body(i);
}

}  // namespace redwood::cpu::detail
