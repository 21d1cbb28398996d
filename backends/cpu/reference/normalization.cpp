// Normalizations by statistics of the data (ONNX), float only:
//   LayerNormalization (opset 17): over the axes from `axis` (default -1) on,
//       Y = (X - mean) / sqrt(var + epsilon) * Scale + B
//     with Scale and the optional B broadcast (numpy-style, one way) to X's shape from `axis` on;
//     the optional outputs Mean and InvStdDev = 1 / sqrt(var + epsilon) have X's shape with the
//     normalized axes as extent 1. stash_type (the type the statistics are computed in) must be
//     1 (float); the statistics are kept in double regardless.
//   InstanceNormalization (opsets 1-22): per sample and channel over the spatial axes of
//     [N, C, D1, ...], with scale and B per channel ([C]).
//   GroupNormalization: per sample and group of C / num_groups channels over those channels'
//     spatial values. Opset 18 takes scale and bias per group ([num_groups]); opset 21 per
//     channel ([C]) and adds stash_type (1 only, as above).
//   MeanVarianceNormalization (opsets 9-13): over `axes` (default [0, 2, 3]),
//       Y = (X - mean) / (sqrt(var) + 1e-9)
//     the epsilon of the op's function body in ONNX.
//   LpNormalization (opset 1): X / ||X||_p along `axis` (default -1), p 1 or 2 (default 2); a
//     zero norm leaves its zeros as they are.
// epsilon defaults to 1e-5. Means and variances are two-pass sums in double.

#include "backends/cpu/reference/kernel_util.hpp"
#include "backends/cpu/reference/nn_common.hpp"
#include "backends/cpu/reference/reduce_plan.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

namespace redwood::cpu {
namespace {

/// Rows of contiguous values, each normalized by its own mean and variance, then scaled and
/// shifted by per-row or per-position parameters.
struct RowNorm {
  std::int64_t rows = 0, length = 0;
  /// The parameters repeat every `period` rows...
  std::int64_t period = 1;
  /// ...and a row is `segments` equal runs, each with its own scale and bias: run s of row r
  /// takes parameter (r % period) * segments + s.
  std::int64_t segments = 1;
  double epsilon = 1e-5;
};

/// Y = (X - mean) / sqrt(var + epsilon) * scale + bias per row as `n` describes; bias may be
/// null (0). mean and inv_std, when not null, receive each row's statistics.
void normalize_rows(const RowNorm& n, const float* x, const float* scale, const float* bias, float* y,
                    float* mean, float* inv_std) {
  if (n.length == 0) return;
  const std::int64_t run = n.length / n.segments;
  parallel_for(n.rows, std::max<std::int64_t>(1, 16384 / n.length), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const float* src = x + r * n.length;
      float* dst = y + r * n.length;
      double sum = 0.0;
      for (std::int64_t i = 0; i < n.length; ++i) sum += src[i];
      const double m = sum / double(n.length);
      double squares = 0.0;
      for (std::int64_t i = 0; i < n.length; ++i) squares += (src[i] - m) * (src[i] - m);
      const double inv = 1.0 / std::sqrt(squares / double(n.length) + n.epsilon);
      if (mean != nullptr) mean[r] = static_cast<float>(m);
      if (inv_std != nullptr) inv_std[r] = static_cast<float>(inv);
      const std::int64_t p0 = r % n.period * n.segments;
      for (std::int64_t s = 0; s < n.segments; ++s) {
        const double a = inv * scale[p0 + s];
        const double b = (bias != nullptr ? bias[p0 + s] : 0.0) - m * a;
        for (std::int64_t i = s * run; i < (s + 1) * run; ++i) dst[i] = static_cast<float>(src[i] * a + b);
      }
    }
  });
}

/// The values of parameter `t` broadcast (numpy-style, one way) to `shape`, row-major; throws
/// InvalidArgument naming the node when it does not broadcast.
std::vector<float> broadcast_param(const Node& node, const Tensor& t, const Shape& shape, const char* what) {
  nn::expect_f32(node, t, what);
  const std::size_t rank = shape.size(), t_rank = static_cast<std::size_t>(t.rank());
  bool fits = t_rank <= rank;
  for (std::size_t i = 0; fits && i < t_rank; ++i) {
    const std::int64_t d = t.shape()[t_rank - 1 - i];
    fits = d == 1 || d == shape[rank - 1 - i];
  }
  RW_EXPECTS(fits, InvalidArgument, "{}: {} {} does not broadcast to the normalized shape {}", node.where(),
             what, shape_str(t.shape()), shape_str(shape));
  const Tensor c = t.contiguous();
  const Strides own = contiguous_strides(c.shape());
  Strides strides(rank, 0);  // per axis of `shape`; 0 where t is broadcast
  for (std::size_t i = 0; i < t_rank; ++i) {
    if (c.shape()[i] != 1) strides[rank - t_rank + i] = own[i];
  }
  const float* src = c.data<float>();
  std::vector<float> out(static_cast<std::size_t>(shape_numel(shape)));
  for (std::int64_t flat = 0; flat < static_cast<std::int64_t>(out.size()); ++flat) {
    std::int64_t rest = flat, off = 0;
    for (std::size_t d = rank; d-- > 0;) {
      off += rest % shape[d] * strides[d];
      rest /= shape[d];
    }
    out[static_cast<std::size_t>(flat)] = src[off];
  }
  return out;
}

/// Throws Unsupported unless stash_type is 1 (float).
void expect_float_stash(const Node& node) {
  const std::int64_t stash = node.attr_int("stash_type", 1);
  RW_EXPECTS(stash == 1, Unsupported, "{}: stash_type {} is not supported (only 1, float)", node.where(), stash);
}

/// Load-time dtype checks of the first inputs, named as the op names them.
void expect_f32_inputs(const Node& node, const KernelInfo& info, std::initializer_list<const char*> names) {
  std::size_t i = 0;
  for (const char* name : names) {
    if (i < info.input_dtypes.size()) expect_dtype(node, info.input_dtypes[i], {DType::kF32}, name);
    ++i;
  }
}

/// Whether the node asks for its optional output i.
bool wants_output(const KernelContext& ctx, std::size_t i) {
  return i < ctx.num_outputs() && i < ctx.node.outputs.size() && !ctx.node.outputs[i].empty();
}

/// A per-channel (or per-group) parameter: float, 1-D of `extent` values.
std::vector<float> param_vector(const Node& node, const Tensor& t, std::int64_t extent, const char* what,
                                const Tensor& x) {
  nn::expect_f32(node, t, what);
  RW_EXPECTS(t.rank() == 1 && t.dim(0) == extent, InvalidArgument, "{}: {} {} must be [{}] for input {}",
             node.where(), what, shape_str(t.shape()), extent, shape_str(x.shape()));
  return t.to_float_vector();
}

class LayerNormKernel final : public Kernel {
 public:
  LayerNormKernel(const Node& node, const KernelInfo& info)
      : axis_(node.attr_int("axis", -1)), epsilon_(node.attr_float("epsilon", 1e-5f)) {
    expect_f32_inputs(node, info, {"X", "Scale", "B"});
    expect_float_stash(node);
    RW_EXPECTS(node.has_input(1), InvalidArgument, "{}: needs the input Scale", node.where());
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor x = ctx.input(0).contiguous();
    nn::expect_f32(node, x, "X");
    const std::int64_t axis = node_axis(node, axis_, x.shape());
    const Shape normalized(x.shape().begin() + axis, x.shape().end());
    const std::vector<float> scale = broadcast_param(node, ctx.input(1), normalized, "Scale");
    std::vector<float> bias;
    if (ctx.has_input(2)) bias = broadcast_param(node, ctx.input(2), normalized, "B");

    RowNorm n;
    n.length = shape_numel(normalized);
    n.rows = n.length == 0 ? 0 : x.numel() / n.length;
    n.segments = n.length;
    n.epsilon = epsilon_;
    Tensor y = ctx.allocate_output(0, DType::kF32, x.shape());
    ctx.outputs[0] = y;
    Shape stats_shape = x.shape();
    std::fill(stats_shape.begin() + axis, stats_shape.end(), 1);
    float* stats[2] = {nullptr, nullptr};
    for (std::size_t i = 1; i <= 2; ++i) {
      if (!wants_output(ctx, i)) continue;
      ctx.outputs[i] = ctx.allocate_output(i, DType::kF32, stats_shape);
      stats[i - 1] = ctx.outputs[i].data<float>();
    }
    normalize_rows(n, x.data<float>(), scale.data(), bias.empty() ? nullptr : bias.data(), y.data<float>(),
                   stats[0], stats[1]);
  }

 private:
  std::int64_t axis_;
  float epsilon_;
};

// InstanceNormalization is GroupNormalization with a group per channel and per-channel
// parameters; one kernel serves both.
class ChannelGroupNormKernel final : public Kernel {
 public:
  ChannelGroupNormKernel(const Node& node, const KernelInfo& info, bool instance)
      : instance_(instance),
        per_channel_(instance || info.opset >= 21),
        groups_(instance ? 0 : node.attr_int("num_groups", 0)),
        epsilon_(node.attr_float("epsilon", 1e-5f)),
        names_(instance ? std::array<const char*, 3>{"input", "scale", "B"}
                        : std::array<const char*, 3>{"X", "scale", "bias"}) {
    expect_f32_inputs(node, info, {names_[0], names_[1], names_[2]});
    if (!instance_) {
      expect_float_stash(node);
      RW_EXPECTS(groups_ > 0, InvalidArgument, "{}: num_groups must be given and positive, got {}",
                 node.where(), groups_);
    }
    RW_EXPECTS(node.inputs.size() >= 3, InvalidArgument, "{}: needs 3 inputs ({}, {}, {}), has {}", node.where(),
               names_[0], names_[1], names_[2], node.inputs.size());
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor x = ctx.input(0).contiguous();
    nn::expect_f32(node, x, names_[0]);
    const std::int64_t min_rank = instance_ ? 3 : 2;
    RW_EXPECTS(x.rank() >= min_rank, InvalidArgument, "{}: {} {} must be [N, C, D1, ...], rank {} or more",
               node.where(), names_[0], shape_str(x.shape()), min_rank);
    const std::int64_t channels = x.dim(1);
    const std::int64_t groups = instance_ ? channels : groups_;
    RW_EXPECTS(groups == 0 || channels % groups == 0, InvalidArgument,
               "{}: the {} channels of {} {} do not split into {} groups", node.where(), channels, names_[0],
               shape_str(x.shape()), groups);
    const std::int64_t params = per_channel_ ? channels : groups;
    const std::vector<float> scale = param_vector(node, ctx.input(1), params, names_[1], x);
    const std::vector<float> bias = param_vector(node, ctx.input(2), params, names_[2], x);
    Tensor y = ctx.allocate_output(0, DType::kF32, x.shape());
    ctx.outputs[0] = y;
    if (channels == 0) return;
    RowNorm n;
    n.rows = x.dim(0) * groups;
    n.length = n.rows == 0 ? 0 : x.numel() / n.rows;
    n.period = groups;
    n.segments = per_channel_ ? channels / groups : 1;
    n.epsilon = epsilon_;
    normalize_rows(n, x.data<float>(), scale.data(), bias.data(), y.data<float>(), nullptr, nullptr);
  }

 private:
  bool instance_;
  bool per_channel_;
  std::int64_t groups_;  // GroupNormalization's num_groups
  float epsilon_;
  std::array<const char*, 3> names_;  // the op's names of its inputs
};

KernelFactory channel_group_norm_factory(bool instance) {
  return [instance](const Node& node, const KernelInfo& info) -> std::unique_ptr<Kernel> {
    return std::make_unique<ChannelGroupNormKernel>(node, info, instance);
  };
}

class MeanVarianceNormKernel final : public Kernel {
 public:
  MeanVarianceNormKernel(const Node& node, const KernelInfo& info) : axes_(node.attr_ints("axes", {0, 2, 3})) {
    expect_f32_inputs(node, info, {"X"});
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor x = ctx.input(0).contiguous();
    nn::expect_f32(node, x, "X");
    const ReducePlan plan(x.shape(), reduced_axes_mask(node, axes_, x.shape()));
    Tensor y = ctx.allocate_output(0, DType::kF32, x.shape());
    ctx.outputs[0] = y;
    if (x.numel() == 0) return;
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    const double count = double(plan.count());
    std::vector<double> mean(static_cast<std::size_t>(plan.rows() * plan.width()));
    std::vector<double> inv_std(mean.size());
    reduce_rows(plan, xp, mean.data(), 0.0, [](double a, float v, std::int64_t) { return a + v; },
                [&](double a, std::int64_t) { return a / count; });
    reduce_rows(plan, xp, inv_std.data(), 0.0,
                [&](double a, float v, std::int64_t o) { return a + (v - mean[o]) * (v - mean[o]); },
                [&](double a, std::int64_t) { return 1.0 / (std::sqrt(a / count) + 1e-9); });
    for_each_input(plan, [&](std::int64_t i, std::int64_t o) {
      yp[i] = static_cast<float>((xp[i] - mean[o]) * inv_std[o]);
    });
  }

 private:
  std::vector<std::int64_t> axes_;
};

class LpNormKernel final : public Kernel {
 public:
  LpNormKernel(const Node& node, const KernelInfo& info)
      : axis_(node.attr_int("axis", -1)), p_(node.attr_int("p", 2)) {
    expect_f32_inputs(node, info, {"input"});
    RW_EXPECTS(p_ == 1 || p_ == 2, InvalidArgument, "{}: p must be 1 or 2, got {}", node.where(), p_);
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor x = ctx.input(0).contiguous();
    nn::expect_f32(node, x, "input");
    const AxisSplit s = split_at_axis(x.shape(), node_axis(node, axis_, x.shape()));
    Tensor y = ctx.allocate_output(0, DType::kF32, x.shape());
    ctx.outputs[0] = y;
    if (y.numel() == 0) return;
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    parallel_for(s.outer, std::max<std::int64_t>(1, 16384 / (s.length * s.inner)),
                 [&](std::int64_t begin, std::int64_t end) {
                   std::vector<double> norm(static_cast<std::size_t>(s.inner));
                   for (std::int64_t o = begin; o < end; ++o) {
                     const float* src = xp + o * s.length * s.inner;
                     float* dst = yp + o * s.length * s.inner;
                     std::fill(norm.begin(), norm.end(), 0.0);
                     for (std::int64_t l = 0; l < s.length; ++l) {
                       for (std::int64_t i = 0; i < s.inner; ++i) {
                         const double v = src[l * s.inner + i];
                         norm[i] += p_ == 1 ? std::abs(v) : v * v;
                       }
                     }
                     for (double& v : norm) v = v == 0.0 ? 1.0 : 1.0 / (p_ == 1 ? v : std::sqrt(v));
                     for (std::int64_t l = 0; l < s.length; ++l) {
                       for (std::int64_t i = 0; i < s.inner; ++i) {
                         dst[l * s.inner + i] = static_cast<float>(src[l * s.inner + i] * norm[i]);
                       }
                     }
                   }
                 });
  }

 private:
  std::int64_t axis_;
  std::int64_t p_;
};

}  // namespace

RW_REGISTER_KERNEL("LayerNormalization", Device::kCpu, make_factory<LayerNormKernel>());
RW_REGISTER_KERNEL("InstanceNormalization", Device::kCpu, channel_group_norm_factory(true));
RW_REGISTER_KERNEL("GroupNormalization", Device::kCpu, channel_group_norm_factory(false));
RW_REGISTER_KERNEL("MeanVarianceNormalization", Device::kCpu, make_factory<MeanVarianceNormKernel>());
RW_REGISTER_KERNEL("LpNormalization", Device::kCpu, make_factory<LpNormKernel>());

}  // namespace redwood::cpu
