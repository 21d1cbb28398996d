#pragma once
// Conv and ConvTranspose as oneDNN primitives, shared by the per-node kernel (conv.cpp) and the
// region kernel (region.cpp): the node's attributes and constant weights are read once at load
// (ConvSpec, which throws Unsupported for what oneDNN cannot do), and make_conv() builds the
// primitive for one input shape with every layout left to oneDNN (format_tag::any) and the
// weights reordered into the layout it chose, once.
//
// The fused epilogue y = act(conv(x) + bias + residual) becomes post-ops: sum (the residual,
// which the caller writes into dst before executing) and eltwise for the activation.

#include "backends/cpu/onednn/onednn_common.hpp"
#include "backends/cpu/reference/nn_common.hpp"

#include <optional>

namespace redwood::cpu::onednn {

struct ConvSpec {
  bool transposed = false;
  nn::WindowAttrs window;
  std::int64_t group = 1;
  Epilogue epilogue;
  std::vector<std::int64_t> output_padding;
  Tensor weights, bias;  // contiguous; bias undefined when absent
  bool residual = false;  // input 3 is present: a sum post-op

  /// Reads a Conv/ConvTranspose node; throws Unsupported (naming the node) when oneDNN cannot run
  /// it at all (weights not constant 2-D fp32, an activation without a post-op, ...).
  static ConvSpec from_node(const Node& node, const KernelInfo& info);
};

/// One convolution primitive for one input shape, with its memories' layouts.
struct ConvPrimitive {
  dnnl::primitive prim;
  dnnl::memory::desc src_md, dst_md;  // the layouts oneDNN chose
  dnnl::memory weights;               // reordered into the primitive's layout
  std::optional<dnnl::memory> bias;
  Shape out_shape;
};

/// Builds the primitive for input shape `xs` (rank 4); nullopt when oneDNN cannot take this shape
/// (the caller then runs the reference kernel).
/// `dst_tag` forces the output layout (tag::any lets oneDNN choose).
std::optional<ConvPrimitive> make_conv(const Node& node, const ConvSpec& spec, const Shape& xs,
                                       tag dst_tag = tag::any);

/// A ConvTranspose whose kernel equals its stride (no padding, dilation or groups: the DB head's
/// 2x2/2 up-sampling) computes every output pixel from one input pixel, so it is a 1x1 Conv to
/// kh*kw*Cout channels followed by a depth-to-space rearrangement. oneDNN 2.6's deconvolution is
/// slow for it (150 ms for 24x160x160 -> 24x320x320 here), the 1x1 Conv is not. Returns the 1x1
/// Conv's spec (weights [(i, j, co), ci, 1, 1], bias repeated per (i, j), the same activation);
/// nullopt when the node has another form or a residual.
std::optional<ConvSpec> deconv_as_pointwise(const Node& node, const ConvSpec& spec);

}  // namespace redwood::cpu::onednn
