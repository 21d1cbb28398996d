#pragma once
// Host side of numpy broadcasting for the elementwise kernels: an operand's element strides over
// the output's dims, 0 along the axes it is broadcast on.

#include "backends/cuda/kernels/launchers.hpp"
#include "core/shape.hpp"

namespace redwood::cuda {

/// Writes the strides of `operand` (right-aligned against `out`) into strides[0, out.size()).
inline void broadcast_strides(const Shape& operand, const Shape& out, long long* strides) {
  const Strides cs = contiguous_strides(operand);
  const std::size_t off = out.size() - operand.size();
  for (std::size_t d = 0; d < off; ++d) strides[d] = 0;
  for (std::size_t d = 0; d < operand.size(); ++d) strides[off + d] = operand[d] == 1 ? 0 : cs[d];
}

/// The walk of y = op(a, b) for y = broadcast_shapes(a, b) (rank <= kMaxDims, checked by the caller).
inline kernels::Broadcast binary_broadcast(const Shape& a, const Shape& b, const Shape& y) {
  kernels::Broadcast bc;
  bc.rank = static_cast<int>(y.size());
  bc.same_shape = a == y && b == y;
  for (std::size_t d = 0; d < y.size(); ++d) bc.out_dims[d] = y[d];
  broadcast_strides(a, y, bc.a_strides);
  broadcast_strides(b, y, bc.b_strides);
  return bc;
}

}  // namespace redwood::cuda
