#pragma once
// The launcher of rw.ElementwiseChain on the GPU (elementwise_chain.cu; the node comes from
// core/passes/fuse_elementwise.cpp, whose header comment is the IR contract): every step of the
// chain applied to an element while it is in registers, one read and one write per element for
// the whole chain. No Redwood headers beyond kernel_params.hpp, so nvcc stays quick.

#include "backends/cuda/kernels/kernel_params.hpp"

namespace redwood::cuda::kernels {

/// The steps the pass makes, in the reference kernel's order
/// (backends/cpu/reference/elementwise_chain.cpp); the binary ones are kAdd and after.
enum class ChainOp : int {
  kRelu, kSigmoid, kTanh, kSqrt, kHardSigmoid, kHardSwish, kLeakyRelu, kClip,
  kAdd, kSub, kMul, kDiv, kPow
};

/// Steps one launch carries in its parameters; a longer chain takes one more launch per this many
/// steps, the later ones in place on the output.
inline constexpr int kMaxChainSteps = 24;

struct ChainStep {
  ChainOp op = ChainOp::kRelu;
  float alpha = 0, beta = 0;  // LeakyRelu alpha, HardSigmoid alpha/beta, Clip min/max
  // A binary step's constant: element i of the data meets c[(i / inner) % count]; the constant
  // is the left operand when `swapped` (c - x, c / x).
  const float* c = nullptr;
  long long inner = 1, count = 1;
  bool swapped = false;
};

struct ChainParams {
  int steps = 0;
  ChainStep step[kMaxChainSteps];
};

/// y[i] = step_k(... step_1(x[i])) for n elements; x may be y.
void launch_elementwise_chain(const ChainParams& p, const float* x, float* y, long long n, cudaStream_t stream);

}  // namespace redwood::cuda::kernels
