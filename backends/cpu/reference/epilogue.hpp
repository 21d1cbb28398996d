#pragma once
// The reference kernels' side of the fused-epilogue contract (core/ops/epilogue.hpp): the residual
// added and the activation applied to a whole fp32 output, the last step of every kernel that
// accepts epilogue attributes.

#include "core/error.hpp"
#include "core/graph/graph.hpp"
#include "core/ops/epilogue.hpp"
#include "core/shape.hpp"
#include "core/tensor.hpp"

#include <cstdint>
#include <vector>

namespace redwood::cpu {

using ops::Activation;
using ops::Epilogue;
using ops::kAttrActivation;
using ops::kAttrAlpha;
using ops::kAttrBeta;
using ops::kResidualInput;

/// Adds `residual` (the output's shape, or broadcastable to it unidirectionally) into `y`,
/// then applies the activation; y is contiguous fp32. Throws InvalidArgument naming the node
/// when the residual does not broadcast to y.
inline void apply_epilogue(const Node& node, const Epilogue& e, Tensor& y, const Tensor& residual) {
  float* yp = y.data<float>();
  const std::int64_t n = y.numel();
  if (residual.defined()) {
    RW_EXPECTS(residual.dtype() == DType::kF32, InvalidArgument, "{}: the fused residual is {}",
               node.where(), residual.description());
    Shape b;
    try {
      b = broadcast_shapes(y.shape(), residual.shape());
    } catch (const Error&) {
      b.clear();
    }
    RW_EXPECTS(b == y.shape(), InvalidArgument,
               "{}: the fused residual {} does not broadcast to the output {}", node.where(),
               shape_str(residual.shape()), shape_str(y.shape()));
    const Tensor r = residual.contiguous();
    const float* rp = r.data<float>();
    if (r.shape() == y.shape()) {
      for (std::int64_t i = 0; i < n; ++i) yp[i] += rp[i];
    } else {
      // Broadcast: the residual's strides over y's axes (0 where it has extent 1 or is absent).
      const std::size_t rank = y.shape().size();
      std::vector<std::int64_t> rs(rank, 0);
      std::int64_t stride = 1;
      for (std::size_t i = 0; i < r.shape().size(); ++i) {
        const std::size_t ax = r.shape().size() - 1 - i;
        if (r.shape()[ax] != 1) rs[rank - 1 - i] = stride;
        stride *= r.shape()[ax];
      }
      std::vector<std::int64_t> idx(rank, 0);
      for (std::int64_t i = 0; i < n; ++i) {
        std::int64_t off = 0;
        for (std::size_t a = 0; a < rank; ++a) off += idx[a] * rs[a];
        yp[i] += rp[off];
        for (std::size_t a = rank; a-- > 0;) {
          if (++idx[a] < y.shape()[a]) break;
          idx[a] = 0;
        }
      }
    }
  }
  e.apply(yp, n);
}

/// The fused residual input of a run (undefined when absent).
template <typename Ctx>
Tensor residual_input(const Ctx& ctx) {
  return ctx.has_input(kResidualInput) ? ctx.inputs[kResidualInput] : Tensor();
}

/// Applies the node's fused epilogue (activation, residual) to its output y, if it has one: the
/// last step of every kernel that accepts epilogue attributes.
template <typename Ctx>
void finish_epilogue(const Ctx& ctx, const Epilogue& e, Tensor& y) {
  const Tensor residual = residual_input(ctx);
  if (!e.none() || residual.defined()) apply_epilogue(ctx.node, e, y, residual);
}

}  // namespace redwood::cpu
