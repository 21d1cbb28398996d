#pragma once
// The fused epilogue of a Conv/ConvTranspose/MatMul/Gemm node (the contract: core/ops/epilogue.hpp;
// rw.activation/rw.alpha/rw.beta, bias input 2, residual input 3) as the CUDA kernels take it.
// One place for what the convolution and the matrix kernels share.

#include "backends/cuda/cuda_kernel.hpp"
#include "backends/cuda/kernels/kernel_params.hpp"
#include "core/error.hpp"
#include "core/ops/epilogue.hpp"

namespace redwood::cuda {

/// The node's fused activation (bias and residual pointers are set per launch).
inline kernels::Epilogue fused_activation(const Node& node) {
  const ops::Epilogue e = ops::Epilogue::from_node(node);
  kernels::Epilogue k;
  k.act = static_cast<int>(e.act);
  k.alpha = e.alpha;
  k.beta = e.beta;
  return k;
}

/// The CUDA kernels add a residual elementwise: it must have the output's shape.
inline void check_fused_residual(const PlanInfo& info, const Shape& out) {
  if (!info.has_input(ops::kResidualInput)) return;
  RW_EXPECTS(info.input(ops::kResidualInput).shape == out, Unsupported,
             "{}: the CUDA kernel fuses a residual of the output's shape {}, not {}", info.node.where(),
             shape_str(out), shape_str(info.input(ops::kResidualInput).shape));
}

}  // namespace redwood::cuda
