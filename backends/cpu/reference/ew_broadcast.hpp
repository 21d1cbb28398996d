#pragma once
// Numpy-style broadcasting loop for the binary elementwise reference kernels.
//
// The output is walked as `rows x inner`: dimensions of extent 1 in the output are dropped,
// and neighbouring dimensions that both operands traverse the same way are merged, so that the
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
#include <cstdint>
#include <vector>

namespace redwood::cpu::detail {

/// The coalesced iteration of one broadcast: outer dimensions (outermost first) with each
/// operand's element stride, then the inner run.
struct BroadcastPlan {
  Shape outer_dims;
  Strides outer_a, outer_b;
  std::int64_t inner = 1;
  std::int64_t inner_a = 0, inner_b = 0;  // 0 or 1
};

/// Plans the walk of `out` (the broadcast of a and b, both contiguous).
inline BroadcastPlan plan_broadcast(const Shape& a, const Shape& b, const Shape& out) {
  const std::size_t rank = out.size();
  auto aligned = [&](const Shape& s) {
    Shape r(rank, 1);
    std::copy(s.begin(), s.end(), r.begin() + static_cast<std::ptrdiff_t>(rank - s.size()));
    return r;
  };
  const Shape a_dims = aligned(a), b_dims = aligned(b);
  const Strides a_str = contiguous_strides(a_dims), b_str = contiguous_strides(b_dims);

  // Groups from the innermost out: (extent, stride of a, stride of b) of the group's innermost
  // dimension. An outer dimension joins the group below when, for both operands, stepping it is
  // the same as stepping past the whole group (always true for a broadcast stride of 0 over 0).
  struct Group {
    std::int64_t extent, sa, sb;
  };
  std::vector<Group> groups;  // innermost first
  for (std::size_t d = rank; d-- > 0;) {
    if (out[d] == 1) continue;
    const std::int64_t sa = a_dims[d] == 1 ? 0 : a_str[d];
    const std::int64_t sb = b_dims[d] == 1 ? 0 : b_str[d];
    if (!groups.empty()) {
      Group& g = groups.back();
      if (sa == g.sa * g.extent && sb == g.sb * g.extent) {
        g.extent *= out[d];
        continue;
      }
    }
    groups.push_back({out[d], sa, sb});
  }

  BroadcastPlan plan;
  if (groups.empty()) return plan;  // every extent is 1: one element
  plan.inner = groups.front().extent;
  plan.inner_a = groups.front().sa;
  plan.inner_b = groups.front().sb;
  for (std::size_t g = groups.size(); g-- > 1;) {
    plan.outer_dims.push_back(groups[g].extent);
    plan.outer_a.push_back(groups[g].sa);
    plan.outer_b.push_back(groups[g].sb);
  }
  return plan;
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
/// `out` must be contiguous with the broadcast shape.
template <typename A, typename B, typename O, typename Op>
void broadcast_binary(const Tensor& a, const Tensor& b, Tensor& out, const Op& op) {
  const BroadcastPlan plan = plan_broadcast(a.shape(), b.shape(), out.shape());
  const A* pa = a.data<A>();
  const B* pb = b.data<B>();
  O* po = out.data<O>();
  const std::int64_t total = out.numel();
  const std::int64_t inner = plan.inner;
  const std::size_t outer_rank = plan.outer_dims.size();

  // Chunks may start and end mid-row, so work in (row, column) segments.
  parallel_for(total, std::int64_t{1} << 15, [&](std::int64_t begin, std::int64_t end) {
    std::int64_t i = begin;
    while (i < end) {
      const std::int64_t row = i / inner;
      const std::int64_t col = i % inner;
      const std::int64_t len = std::min(inner - col, end - i);
      std::int64_t oa = col * plan.inner_a, ob = col * plan.inner_b;
      std::int64_t rem = row;
      for (std::size_t d = outer_rank; d-- > 0;) {
        const std::int64_t idx = rem % plan.outer_dims[d];
        rem /= plan.outer_dims[d];
        oa += idx * plan.outer_a[d];
        ob += idx * plan.outer_b[d];
      }
      binary_run(pa + oa, plan.inner_a, pb + ob, plan.inner_b, po + i, len, op);
      i += len;
    }
  });
}

}  // namespace redwood::cpu::detail
