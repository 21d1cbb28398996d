#pragma once
// What the GPU benchmarks (redwood_gpu_bench, redwood_ops_bench, redwood_conv_bench,
// redwood_nhwc_bench) share: option parsing, inputs, the error measure, CUDA-event timing, main's
// error report. Header-only: the benchmarks link no test library.

#include "backends/cuda/cuda_check.hpp"
#include "core/error.hpp"
#include "core/tensor.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <random>
#include <string>
#include <vector>

namespace redwood::bench {

/// The value of option argv[i] (argv[i + 1]; i moves past it), or InvalidArgument naming the
/// option when the command line ends first.
inline std::string option_value(int argc, char** argv, int& i) {
  RW_EXPECTS(i + 1 < argc, InvalidArgument, "{} needs a value", argv[i]);
  return argv[++i];
}

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

/// `samples` timings of `reps` calls of launch() on `stream`, each between two CUDA events, in ms
/// per call, sorted (the median is the middle one). Synchronizes `stream`.
template <typename Launch>
std::vector<double> event_samples(cudaStream_t stream, int samples, int reps, Launch launch) {
  std::vector<cudaEvent_t> events(static_cast<std::size_t>(samples) * 2);
  for (auto& e : events) RW_CUDA_CHECK(cudaEventCreate(&e));
  for (int i = 0; i < samples; ++i) {
    RW_CUDA_CHECK(cudaEventRecord(events[2 * i], stream));
    for (int r = 0; r < reps; ++r) launch();
    RW_CUDA_CHECK(cudaEventRecord(events[2 * i + 1], stream));
  }
  RW_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> ms;
  for (int i = 0; i < samples; ++i) {
    float t = 0;
    RW_CUDA_CHECK(cudaEventElapsedTime(&t, events[2 * i], events[2 * i + 1]));
    ms.push_back(t / reps);
  }
  for (auto& e : events) cudaEventDestroy(e);
  std::sort(ms.begin(), ms.end());
  return ms;
}

/// main's body: body()'s exit code, or "name: what" on stderr and 1 for an exception.
template <typename Body>
int guarded_main(const char* name, Body body) {
  try {
    return body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return 1;
  }
}

}  // namespace redwood::bench
