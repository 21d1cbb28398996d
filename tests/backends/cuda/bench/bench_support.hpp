#pragma once
// What redwood_gpu_bench and redwood_ops_bench share: option parsing, inputs, the error measure.
// Header-only: the benchmarks link no test library.

#include "core/tensor.hpp"

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace redwood::bench {

/// "3,640,640" → {3, 640, 640}.
inline std::vector<std::int64_t> parse_list(const std::string& s) {
  std::vector<std::int64_t> out;
  std::size_t at = 0;
  while (at <= s.size()) {
    const std::size_t comma = s.find(',', at);
    out.push_back(std::stoll(s.substr(at, comma - at)));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

/// fp32 values uniform in [-1, 1), reproducible from `seed`.
inline Tensor random_input(const Shape& shape, std::uint32_t seed) {
  Tensor t = Tensor::empty(DType::kF32, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (float& v : t.values<float>()) v = dist(rng);
  return t;
}

/// ||a - e|| / ||e|| (the absolute norm when e is zero).
inline double relative_l2(const Tensor& a, const Tensor& e) {
  double num = 0, den = 0;
  for (std::int64_t i = 0; i < e.numel(); ++i) {
    const double d = a.get_as_double(i) - e.get_as_double(i);
    num += d * d;
    den += e.get_as_double(i) * e.get_as_double(i);
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

}  // namespace redwood::bench
