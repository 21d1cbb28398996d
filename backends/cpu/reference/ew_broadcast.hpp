#pragma once
// Numpy-style broadcasting loop for the elementwise reference kernels of two operands (binary
// ops, and pairwise folds of variadic ones) and three (Where).
//
// The output is walked as `rows x inner`: dimensions of extent 1 in the output are dropped,
// and neighbouring dimensions that every operand traverses the same way are merged, so that the
// common cases end up as one flat loop with a unit or zero stride per operand:
//
//   same shape                 [N,C,H,W] + [N,C,H,W] -> 1 row of N*C*H*W, strides (1, 1)
//   scalar                     [N,C,H,W] * []        -> 1 row of N*C*H*W, strides (1, 0)
//   per channel                [N,C,H,W] * [1,C,1,1] -> N*C rows of H*W,  strides (1, 0)
//
// Inner strides are always 0 or 1 (operands are contiguous, and a broadcast dimension has stride
// 0), so the inner loop is specialised for those and vectorises (see ew_loop.hpp).

#include "backends/cpu/reference/ew_loop.hpp"
#include "backends/cpu/reference/kernel_util.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

namespace redwood::cpu::detail {

/// The coalesced iteration of one broadcast of N operands: outer dimensions (outermost first)
/// with each operand's element stride, then the inner run.
template <std::size_t N>
struct BroadcastPlan {
  Shape outer_dims;
  std::array<Strides, N> outer;
  std::int64_t inner = 1;
  std::array<std::int64_t, N> inner_stride{};  // 0 or 1 each
};

/// Plans the walk of `out` over contiguous operands of shapes `in`. `out` must be a broadcast of
/// every operand; it may be larger than their joint broadcast (a dimension where every operand
/// has extent 1 is walked with stride 0 for all), which lets a fold of many operands run
/// pairwise in an output of the final shape.
template <std::size_t N>
BroadcastPlan<N> plan_broadcast(const std::array<Shape, N>& in, const Shape& out) {
  const std::size_t rank = out.size();
  std::array<Shape, N> dims;
  std::array<Strides, N> str;
  for (std::size_t k = 0; k < N; ++k) {
    dims[k] = Shape(rank, 1);
    std::copy(in[k].begin(), in[k].end(),
              dims[k].begin() + static_cast<std::ptrdiff_t>(rank - in[k].size()));
    str[k] = contiguous_strides(dims[k]);
  }

  // Groups from the innermost out: the extent and each operand's stride of the group's innermost
  // dimension. An outer dimension joins the group below when, for every operand, stepping it is
  // the same as stepping past the whole group (always true for a broadcast stride of 0 over 0).
  struct Group {
    std::int64_t extent;
    std::array<std::int64_t, N> stride;
  };
  // Innermost first; in place up to Shape's inline rank (a plan is made on every run), on the
  // heap only beyond.
  std::array<Group, Shape::kInline> inline_groups;
  std::vector<Group> heap_groups;
  std::size_t group_count = 0;
  const auto push_group = [&](const Group& g) {
    if (group_count < inline_groups.size()) {
      inline_groups[group_count] = g;
    } else {
      if (heap_groups.empty()) heap_groups.assign(inline_groups.begin(), inline_groups.end());
      heap_groups.push_back(g);
    }
    ++group_count;
  };
  const auto group = [&](std::size_t i) -> Group& {
    return group_count <= inline_groups.size() ? inline_groups[i] : heap_groups[i];
  };
  for (std::size_t d = rank; d-- > 0;) {
    if (out[d] == 1) continue;
    std::array<std::int64_t, N> stride;
    for (std::size_t k = 0; k < N; ++k) stride[k] = dims[k][d] == 1 ? 0 : str[k][d];
    if (group_count > 0) {
      Group& g = group(group_count - 1);
      bool joins = true;
      for (std::size_t k = 0; k < N; ++k) joins = joins && stride[k] == g.stride[k] * g.extent;
      if (joins) {
        g.extent *= out[d];
        continue;
      }
    }
    push_group({out[d], stride});
  }

  BroadcastPlan<N> plan;
  if (group_count == 0) return plan;  // every extent is 1: one element
  plan.inner = group(0).extent;
  plan.inner_stride = group(0).stride;
  for (std::size_t g = group_count; g-- > 1;) {
    plan.outer_dims.push_back(group(g).extent);
    for (std::size_t k = 0; k < N; ++k) plan.outer[k].push_back(group(g).stride[k]);
  }
  return plan;
}

/// Walks the `total` output elements of `plan` in parallel chunks as runs: run(offsets, i, len)
/// covers output elements [i, i + len), where operand k starts at element offsets[k] and steps
/// by plan.inner_stride[k]. Chunks may start and end mid-row, so a run is a (row, column) segment.
template <std::size_t N, typename Run>
void for_each_broadcast_run(const BroadcastPlan<N>& plan, std::int64_t total, const Run& run) {
  const std::int64_t inner = plan.inner;
  const std::size_t outer_rank = plan.outer_dims.size();
  parallel_for(total, std::int64_t{1} << 15, [&](std::int64_t begin, std::int64_t end) {
    std::int64_t i = begin;
    while (i < end) {
      const std::int64_t row = i / inner;
      const std::int64_t col = i % inner;
      const std::int64_t len = std::min(inner - col, end - i);
      std::array<std::int64_t, N> offsets;
      for (std::size_t k = 0; k < N; ++k) offsets[k] = col * plan.inner_stride[k];
      std::int64_t rem = row;
      for (std::size_t d = outer_rank; d-- > 0;) {
        const std::int64_t idx = rem % plan.outer_dims[d];
        rem /= plan.outer_dims[d];
        for (std::size_t k = 0; k < N; ++k) offsets[k] += idx * plan.outer[k][d];
      }
      run(offsets, i, len);
      i += len;
    }
  });
}

// Output never aliases the inputs (outputs are freshly allocated); __restrict says so, which lets
// GCC's -O2 vectorizer skip the runtime overlap checks it refuses to emit. noinline keeps the
// guarantee attached to these parameters (once inlined into the caller's lambda it was lost).
template <typename A, typename B, typename O, typename Op>
[[gnu::noinline]] void binary_run(const A* __restrict a, std::int64_t sa, const B* __restrict b,
                                  std::int64_t sb, O* __restrict out, std::int64_t n,
                                  const Op& op) {
  if (sa == 1 && sb == 1) {
    blocked_loop(n, [&](std::int64_t i) { out[i] = op(a[i], b[i]); });
  } else if (sa == 1) {
    const B bv = b[0];
    blocked_loop(n, [&](std::int64_t i) { out[i] = op(a[i], bv); });
  } else if (sb == 1) {
    const A av = a[0];
    blocked_loop(n, [&](std::int64_t i) { out[i] = op(av, b[i]); });
  } else {
    const O v = op(a[0], b[0]);
    for (std::int64_t i = 0; i < n; ++i) out[i] = v;
  }
}

/// out[i] = op(a[ia], b[ib]) over the broadcast of a and b. `a` and `b` must be contiguous;
/// `out` must be contiguous with the broadcast shape (or a broadcast of it, see plan_broadcast).
template <typename A, typename B, typename O, typename Op>
void broadcast_binary(const Tensor& a, const Tensor& b, Tensor& out, const Op& op) {
  const BroadcastPlan<2> plan = plan_broadcast<2>({a.shape(), b.shape()}, out.shape());
  const A* pa = a.data<A>();
  const B* pb = b.data<B>();
  O* po = out.data<O>();
  for_each_broadcast_run(plan, out.numel(),
                         [&](const std::array<std::int64_t, 2>& at, std::int64_t i,
                             std::int64_t len) {
                           binary_run(pa + at[0], plan.inner_stride[0], pb + at[1],
                                      plan.inner_stride[1], po + i, len, op);
                         });
}

template <typename A, typename B, typename C, typename O, typename Op>
[[gnu::noinline]] void ternary_run(const A* __restrict a, std::int64_t sa, const B* __restrict b,
                                   std::int64_t sb, const C* __restrict c, std::int64_t sc,
                                   O* __restrict out, std::int64_t n, const Op& op) {
  if (sa == 1 && sb == 1 && sc == 1) {
    blocked_loop(n, [&](std::int64_t i) { out[i] = op(a[i], b[i], c[i]); });
  } else {
    blocked_loop(n, [&](std::int64_t i) { out[i] = op(a[i * sa], b[i * sb], c[i * sc]); });
  }
}

/// out[i] = op(a[ia], b[ib], c[ic]) over the broadcast of a, b and c (Where); contiguity as for
/// broadcast_binary.
template <typename A, typename B, typename C, typename O, typename Op>
void broadcast_ternary(const Tensor& a, const Tensor& b, const Tensor& c, Tensor& out,
                       const Op& op) {
  const BroadcastPlan<3> plan =
      plan_broadcast<3>({a.shape(), b.shape(), c.shape()}, out.shape());
  const A* pa = a.data<A>();
  const B* pb = b.data<B>();
  const C* pc = c.data<C>();
  O* po = out.data<O>();
  for_each_broadcast_run(plan, out.numel(),
                         [&](const std::array<std::int64_t, 3>& at, std::int64_t i,
                             std::int64_t len) {
                           ternary_run(pa + at[0], plan.inner_stride[0], pb + at[1],
                                       plan.inner_stride[1], pc + at[2], plan.inner_stride[2],
                                       po + i, len, op);
                         });
}

}  // namespace redwood::cpu::detail
