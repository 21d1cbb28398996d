#pragma once
// The fused-epilogue contract of Conv, ConvTranspose, Gemm and MatMul (and Redwood's rw.ConvNhwc):
// what the graph optimizer (core/passes/fuse_epilogue.cpp) folds into these nodes, as Redwood's
// own attributes and one extra trailing input, and what every provider's kernel for them then
// computes (the reference: backends/cpu/reference/epilogue.hpp; oneDNN's post-ops; the CUDA
// kernels' epilogues, backends/cuda/kernels/elementwise/fused_epilogue.hpp).
//
//   y = act(op(x) + bias + residual)
//
//   "rw.activation"  string: Relu, Clip, HardSigmoid, HardSwish, Sigmoid, LeakyRelu (absent: none)
//   "rw.alpha"       float: Clip min, HardSigmoid alpha, LeakyRelu alpha
//   "rw.beta"        float: Clip max, HardSigmoid beta
//   residual         input 3 (Conv/ConvTranspose: X, W, B, R; Gemm: A, B, C, R; MatMul: A, B,
//                    bias [N], R). It is added BEFORE the activation (BlazeFace's
//                    Conv -> Add -> Relu), and it must have the output's shape or broadcast to it
//                    unidirectionally. A residual added after an activation is not fused.
//
// MatMul's input 2 is an optional bias over the last axis (a fused MatMul -> Add of a constant
// [N]); it is not part of ONNX's MatMul. The attributes are declared with Redwood's other ops and
// attributes in core/ops/schema.hpp.

#include "core/error.hpp"
#include "core/graph/graph.hpp"
#include "core/ops/names.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

namespace redwood::ops {

inline constexpr const char* kAttrActivation = attr::kActivation;
inline constexpr const char* kAttrAlpha = attr::kAlpha;
inline constexpr const char* kAttrBeta = attr::kBeta;
/// The residual's input index on Conv, ConvTranspose, Gemm and MatMul (and rw.ConvNhwc).
inline constexpr std::size_t kResidualInput = 3;

enum class Activation { kNone, kRelu, kClip, kHardSigmoid, kHardSwish, kSigmoid, kLeakyRelu };

/// A fused activation with its parameters.
struct Epilogue {
  Activation act = Activation::kNone;
  float alpha = 0.0f;
  float beta = 0.0f;

  /// Reads rw.activation / rw.alpha / rw.beta (with each activation's ONNX defaults); throws
  /// InvalidArgument naming the node for an unknown activation.
  static Epilogue from_node(const Node& node) {
    Epilogue e;
    const std::string name = node.attr_string(kAttrActivation, "");
    if (name.empty()) return e;
    if (name == "Relu") {
      e.act = Activation::kRelu;
    } else if (name == "Clip") {
      e.act = Activation::kClip;
      e.alpha = node.attr_float(kAttrAlpha, -INFINITY);
      e.beta = node.attr_float(kAttrBeta, INFINITY);
    } else if (name == "HardSigmoid") {
      e.act = Activation::kHardSigmoid;
      e.alpha = node.attr_float(kAttrAlpha, 0.2f);
      e.beta = node.attr_float(kAttrBeta, 0.5f);
    } else if (name == "HardSwish") {
      e.act = Activation::kHardSwish;
      e.alpha = 1.0f / 6.0f;
      e.beta = 0.5f;
    } else if (name == "Sigmoid") {
      e.act = Activation::kSigmoid;
    } else if (name == "LeakyRelu") {
      e.act = Activation::kLeakyRelu;
      e.alpha = node.attr_float(kAttrAlpha, 0.01f);
    } else {
      throw InvalidArgument(fmt::format("{}: {} '{}' is not one of Relu, Clip, HardSigmoid, "
                                        "HardSwish, Sigmoid, LeakyRelu",
                                        node.where(), kAttrActivation, name));
    }
    return e;
  }

  bool none() const { return act == Activation::kNone; }

  float apply(float x) const {
    switch (act) {
      case Activation::kNone: return x;
      case Activation::kRelu: return x > 0.0f ? x : 0.0f;
      case Activation::kClip: return std::min(std::max(x, alpha), beta);
      case Activation::kHardSigmoid: return std::max(0.0f, std::min(1.0f, alpha * x + beta));
      case Activation::kHardSwish: return x * std::max(0.0f, std::min(1.0f, alpha * x + beta));
      case Activation::kSigmoid: return 1.0f / (1.0f + std::exp(-x));
      case Activation::kLeakyRelu: return x >= 0.0f ? x : alpha * x;
    }
    return x;
  }

  /// Applies the activation to n contiguous values in place.
  void apply(float* y, std::int64_t n) const {
    if (none()) return;
    for (std::int64_t i = 0; i < n; ++i) y[i] = apply(y[i]);
  }
};

}  // namespace redwood::ops
