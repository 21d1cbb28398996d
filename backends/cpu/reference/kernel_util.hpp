#pragma once
// Shared helpers for the reference kernels: dtype dispatch, parallel loops over oneTBB, and
// output allocation.

#include "core/error.hpp"
#include "core/op_registry.hpp"
#include "core/tensor.hpp"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>

#include <cstdint>
#include <type_traits>

namespace redwood::cpu {

/// Calls fn(T{}) where T is the C++ element type of `dtype`, if it is one of Ts; otherwise throws
/// Unsupported naming the node, the dtype and the supported ones.
template <typename... Ts, typename Fn>
void dispatch(DType dtype, const Node& node, Fn&& fn) {
  bool done = false;
  ((dtype == dtype_of<Ts> ? (fn(Ts{}), done = true) : false), ...);
  if (!done) {
    std::string list;
    ((list += (list.empty() ? "" : ", ") + std::string(dtype_name(dtype_of<Ts>))), ...);
    throw Unsupported(fmt::format("{}: type {} is not supported (supported: {})", node.where(),
                                  dtype_name(dtype), list));
  }
}

/// Runs body(begin, end) over [0, n) in chunks on oneTBB's workers; serially when n is small
/// (below `grain`) since a task costs about a microsecond.
template <typename Body>
void parallel_for(std::int64_t n, std::int64_t grain, Body&& body) {
  if (n <= 0) return;
  if (n <= grain) {
    body(std::int64_t{0}, n);
    return;
  }
  oneapi::tbb::parallel_for(oneapi::tbb::blocked_range<std::int64_t>(0, n, grain),
                            [&](const oneapi::tbb::blocked_range<std::int64_t>& r) {
                              body(r.begin(), r.end());
                            });
}

}  // namespace redwood::cpu
