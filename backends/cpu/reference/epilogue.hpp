#pragma once
// Fused epilogues of Conv, ConvTranspose, Gemm and MatMul: what the graph optimizer
// (core/passes/fuse_epilogue.cpp) folds into these nodes, as Redwood-specific attributes and one
// extra trailing input, so that the optimized graph also runs on the reference provider.
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
// [N]); it is not part of ONNX's MatMul.

#include "core/error.hpp"
#include "core/graph/graph.hpp"
#include "core/shape.hpp"
#include "core/tensor.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

namespace redwood::cpu {

inline constexpr const char* kAttrActivation = "rw.activation";
inline constexpr const char* kAttrAlpha = "rw.alpha";
inline constexpr const char* kAttrBeta = "rw.beta";
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
