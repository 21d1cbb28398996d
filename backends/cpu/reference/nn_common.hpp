#pragma once
// Helpers shared by the neural-network reference kernels (private to backends/cpu/reference).
//
// Most of it is sliding-window geometry for Conv, ConvTranspose, MaxPool and AveragePool: the
// attributes as the node gives them (parsed and checked at load), and their resolution against
// the actual input of a run (auto_pad, ceil_mode, output sizes).
//
// The kernels work on three spatial axes: a 1-D or 2-D window is padded in front with axes of
// extent 1 (kernel 1, stride 1, no padding), which leaves the arithmetic unchanged and lets one
// loop nest serve 1-D, 2-D and 3-D.

#include "core/error.hpp"
#include "core/graph/graph.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace redwood::cpu::nn {

/// Throws InvalidArgument naming the node unless `t` holds fp32: the dtype of an input that was
/// not known at load is checked here, per run.
inline void expect_f32(const Node& node, const Tensor& t, const char* what) {
  RW_EXPECTS(t.dtype() == DType::kF32, InvalidArgument, "{}: {} is {}; only float is supported",
             node.where(), what, t.description());
}

/// The indices i in [0, count) for which i * stride + offset lies in [0, limit), as [lo, hi):
/// the part of an output row whose window tap falls inside the data, so that the inner loops
/// need no bounds checks.
inline std::pair<std::int64_t, std::int64_t> valid_range(std::int64_t count, std::int64_t limit,
                                                         std::int64_t stride,
                                                         std::int64_t offset) {
  const std::int64_t lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  const std::int64_t last = limit - 1 - offset;
  const std::int64_t hi = last < 0 ? 0 : std::min(count, last / stride + 1);
  return {std::min(lo, hi), hi};
}

enum class AutoPad { kNotSet, kSameUpper, kSameLower, kValid };

/// The most spatial axes the window kernels handle.
inline constexpr std::int64_t kMaxSpatial = 3;

/// Window attributes as written in the node; empty vectors mean "not given".
struct WindowAttrs {
  std::vector<std::int64_t> kernel_shape;
  std::vector<std::int64_t> strides;
  std::vector<std::int64_t> pads;  // [x1_begin, x2_begin, ..., x1_end, x2_end, ...]
  std::vector<std::int64_t> dilations;
  AutoPad auto_pad = AutoPad::kNotSet;
  bool ceil_mode = false;
};

/// One spatial axis resolved for a run: input extent, output extent and the window.
struct Axis {
  std::int64_t in = 1;
  std::int64_t out = 1;
  std::int64_t kernel = 1;
  std::int64_t stride = 1;
  std::int64_t dilation = 1;
  std::int64_t pad_begin = 0;
  std::int64_t pad_end = 0;  // may be negative for ConvTranspose (output extends past the data)

  /// Span of the dilated kernel.
  std::int64_t extent() const { return (kernel - 1) * dilation + 1; }
};

/// Three axes, outermost first; fewer spatial axes are padded in front with trivial ones.
using Axes3 = std::array<Axis, kMaxSpatial>;

inline AutoPad parse_auto_pad(const Node& node) {
  const std::string s = node.attr_string("auto_pad", "NOTSET");
  if (s == "NOTSET" || s.empty()) return AutoPad::kNotSet;
  if (s == "SAME_UPPER") return AutoPad::kSameUpper;
  if (s == "SAME_LOWER") return AutoPad::kSameLower;
  if (s == "VALID") return AutoPad::kValid;
  throw InvalidArgument(fmt::format(
      "{}: auto_pad '{}' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID", node.where(), s));
}

/// Reads kernel_shape, strides, pads, dilations, auto_pad (and ceil_mode when asked) and checks
/// what can be checked without the input: positive values, consistent lengths.
inline WindowAttrs parse_window(const Node& node, bool read_ceil_mode) {
  WindowAttrs w;
  w.kernel_shape = node.attr_ints("kernel_shape");
  w.strides = node.attr_ints("strides");
  w.pads = node.attr_ints("pads");
  w.dilations = node.attr_ints("dilations");
  w.auto_pad = parse_auto_pad(node);
  if (read_ceil_mode) w.ceil_mode = node.attr_int("ceil_mode", 0) != 0;

  auto check_positive = [&](const std::vector<std::int64_t>& v, const char* name) {
    for (std::int64_t x : v) {
      RW_EXPECTS(x > 0, InvalidArgument, "{}: {} must be positive, got {}", node.where(), name,
                 fmt::join(v, ", "));
    }
  };
  check_positive(w.kernel_shape, "kernel_shape");
  check_positive(w.strides, "strides");
  check_positive(w.dilations, "dilations");
  for (std::int64_t p : w.pads) {
    RW_EXPECTS(p >= 0, InvalidArgument, "{}: pads must not be negative, got [{}]", node.where(),
               fmt::join(w.pads, ", "));
  }
  RW_EXPECTS(w.pads.size() % 2 == 0, InvalidArgument,
             "{}: pads has {} values; it needs two per spatial axis", node.where(), w.pads.size());

  // Every attribute given must agree on the number of spatial axes.
  std::int64_t rank = -1;
  auto agree = [&](std::int64_t r, const char* name) {
    if (r < 0) return;
    RW_EXPECTS(rank < 0 || rank == r, InvalidArgument,
               "{}: {} implies {} spatial axes but another attribute implies {}", node.where(),
               name, r, rank);
    rank = r;
  };
  agree(w.kernel_shape.empty() ? -1 : std::int64_t(w.kernel_shape.size()), "kernel_shape");
  agree(w.strides.empty() ? -1 : std::int64_t(w.strides.size()), "strides");
  agree(w.dilations.empty() ? -1 : std::int64_t(w.dilations.size()), "dilations");
  agree(w.pads.empty() ? -1 : std::int64_t(w.pads.size() / 2), "pads");
  RW_EXPECTS(rank <= kMaxSpatial, Unsupported,
             "{}: {} spatial axes are not supported (at most {})", node.where(), rank, kMaxSpatial);
  return w;
}

/// Value i of an optional per-axis attribute, or the fallback when the attribute is absent.
inline std::int64_t attr_at(const std::vector<std::int64_t>& v, std::size_t i,
                            std::int64_t fallback) {
  return v.empty() ? fallback : v[i];
}

/// Checks that the attributes given have one value per spatial axis of this run's input.
inline void check_window_rank(const Node& node, const WindowAttrs& w, std::size_t spatial,
                              const Shape& input_shape) {
  auto check = [&](std::size_t n, const char* name) {
    RW_EXPECTS(n == 0 || n == spatial, InvalidArgument,
               "{}: {} has {} values but the input {} has {} spatial axes", node.where(), name, n,
               shape_str(input_shape), spatial);
  };
  check(w.kernel_shape.size(), "kernel_shape");
  check(w.strides.size(), "strides");
  check(w.dilations.size(), "dilations");
  check(w.pads.size() / 2, "pads");
  RW_EXPECTS(spatial >= 1 && std::int64_t(spatial) <= kMaxSpatial, Unsupported,
             "{}: input {} has {} spatial axes; 1 to {} are supported", node.where(),
             shape_str(input_shape), spatial, kMaxSpatial);
}

/// Resolves the axes of a forward window (Conv, pooling) for input spatial extents `in` and kernel
/// extents `kernel`: padding from pads or auto_pad, output extent with floor or ceil rounding.
/// Throws InvalidArgument naming the node when the window does not fit the padded input.
inline Axes3 resolve_forward(const Node& node, const WindowAttrs& w,
                             const std::vector<std::int64_t>& in,
                             const std::vector<std::int64_t>& kernel, const Shape& input_shape) {
  const std::size_t spatial = in.size();
  Axes3 axes{};
  const std::size_t offset = kMaxSpatial - spatial;
  for (std::size_t i = 0; i < spatial; ++i) {
    Axis& a = axes[offset + i];
    a.in = in[i];
    a.kernel = kernel[i];
    a.stride = attr_at(w.strides, i, 1);
    a.dilation = attr_at(w.dilations, i, 1);
    switch (w.auto_pad) {
      case AutoPad::kNotSet:
        a.pad_begin = attr_at(w.pads, i, 0);
        a.pad_end = attr_at(w.pads, spatial + i, 0);
        break;
      case AutoPad::kValid:
        a.pad_begin = a.pad_end = 0;
        break;
      case AutoPad::kSameUpper:
      case AutoPad::kSameLower: {
        // Output extent ceil(in / stride), padded as little as possible; the odd pixel goes at
        // the end for SAME_UPPER and at the beginning for SAME_LOWER.
        const std::int64_t out = (a.in + a.stride - 1) / a.stride;
        const std::int64_t total = std::max<std::int64_t>(0, (out - 1) * a.stride + a.extent() - a.in);
        a.pad_begin = w.auto_pad == AutoPad::kSameUpper ? total / 2 : total - total / 2;
        a.pad_end = total - a.pad_begin;
        break;
      }
    }
    const std::int64_t span = a.in + a.pad_begin + a.pad_end - a.extent();
    RW_EXPECTS(span >= 0, InvalidArgument,
               "{}: the window (kernel {}, dilation {}) is larger than the padded input along "
               "spatial axis {} of {}",
               node.where(), a.kernel, a.dilation, i, shape_str(input_shape));
    if (w.ceil_mode) {
      a.out = (span + a.stride - 1) / a.stride + 1;
      // A last window that would start in the end padding covers no input: drop it (PyTorch's
      // rule, and ONNX's since opset 19's clarification).
      if ((a.out - 1) * a.stride >= a.in + a.pad_begin) --a.out;
    } else {
      a.out = span / a.stride + 1;
    }
  }
  return axes;
}

// Conv and ConvTranspose share their operands (X, W, optional B) and their load-time checks.
struct ConvOperands {
  Tensor x, w, b;  // contiguous; b undefined when absent
};

/// Load time: X, W and B are float, group is positive, and a constant W has 1 to kMaxSpatial
/// spatial axes.
inline void check_conv_node(const Node& node, const KernelInfo& info, std::int64_t group) {
  for (std::size_t i = 0; i < info.input_dtypes.size() && i < 3; ++i) {
    expect_dtype(node, info.input_dtypes[i], {DType::kF32}, i == 0 ? "X" : i == 1 ? "W" : "B");
  }
  RW_EXPECTS(group >= 1, InvalidArgument, "{}: group must be positive, got {}", node.where(), group);
  if (info.constant_inputs.size() > 1 && info.constant_inputs[1] != nullptr) {
    const std::int64_t rank = info.constant_inputs[1]->rank();
    RW_EXPECTS(rank >= 3 && rank - 2 <= kMaxSpatial, Unsupported,
               "{}: weight {} has {} spatial axes; 1 to {} are supported", node.where(),
               info.constant_inputs[1]->description(), rank - 2, kMaxSpatial);
  }
}

/// Run time: the operands, contiguous and float, X and W of the same rank (at least 3).
inline ConvOperands read_conv_operands(const KernelContext& ctx) {
  const Node& node = ctx.node;
  ConvOperands ops{ctx.input(0).contiguous(), ctx.input(1).contiguous(), Tensor()};
  expect_f32(node, ops.x, "X");
  expect_f32(node, ops.w, "W");
  if (ctx.has_input(2)) {
    ops.b = ctx.input(2).contiguous();
    expect_f32(node, ops.b, "B");
  }
  RW_EXPECTS(ops.x.rank() >= 3 && ops.w.rank() == ops.x.rank(), InvalidArgument,
             "{}: X {} and W {} must have the same rank, at least 3", node.where(),
             shape_str(ops.x.shape()), shape_str(ops.w.shape()));
  return ops;
}

}  // namespace redwood::cpu::nn
