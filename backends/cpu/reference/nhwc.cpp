// Reference kernels of the internal NHWC ops that backends/cuda/passes/choose_gpu_layout.cpp makes for the
// CUDA graph runner at fp16/bf16/tf32 (that file has the ops' contract): rw.ToNhwc, rw.ToNchw,
// rw.ConvNhwc, rw.DepthwiseConvNhwc, rw.MaxPoolNhwc, rw.GlobalAveragePoolNhwc,
// rw.ScaleChannelsNhwc. NHWC tensors are float16, bfloat16 or float (the tf32 groups; the
// reference multiplies in fp32, the ground truth the CUDA kernel's tf32 products are held to).
//
// The ground truth for the pass's test and the CUDA kernels' tests, so written to be obviously
// right rather than fast: operands are widened to fp32 NCHW, the ordinary reference kernel (Conv,
// MaxPool, GlobalAveragePool) runs on them, and the result is rounded once to the storage type
// and laid out NHWC again, which is what the CUDA kernels promise (fp32 math, one rounding).
// With `rw.round_tf32` = 1 (precision tf32; fp32 storage) that one rounding of an fp32 output is
// to tf32 (round_to_tf32, as the CUDA kernels' cvt.rna.tf32.f32).
// rw.ToNhwc with `rw.space_to_depth` = 2 (the stem by space-to-depth) lays out the 2x2
// space-to-depth of its input (backends/cpu/reference/space_to_depth.hpp) instead of the input itself.

#include "backends/cpu/reference/kernel_util.hpp"
#include "core/kernel_info.hpp"
#include "core/kernel_select.hpp"
#include "core/layout.hpp"
#include "backends/cpu/reference/space_to_depth.hpp"
#include "core/ops/names.hpp"
#include "core/ops/tf32.hpp"

#include <map>
#include <string>
#include <vector>

namespace redwood::cpu {
namespace {

void expect_nhwc(const Node& node, const Tensor& t, const char* what) {
  RW_EXPECTS(t.shape().size() == 4, InvalidArgument, "{}: {} must be NHWC [N, H, W, C], not {}", node.where(), what,
             shape_str(t.shape()));
  RW_EXPECTS(is_floating(t.dtype()), Unsupported, "{}: {} is {}, not a floating type", node.where(), what,
             dtype_name(t.dtype()));
}

// Runs the reference kernel of `op` on fp32 NCHW operands, with `like`'s attributes (plus extra).
Tensor run_reference(const std::string& op, const Node& like, const std::vector<Tensor>& inputs,
                     const std::map<std::string, AttributeValue>& extra = {}) {
  Node node;
  node.name = like.name;
  node.op_type = op;
  node.attributes = like.attributes;
  for (const auto& [k, v] : extra) node.attributes[k] = v;
  Graph graph;
  graph.opset = 17;
  std::vector<TensorDesc> descs;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    node.inputs.push_back(inputs[i].defined() ? "in" + std::to_string(i) : "");
    descs.push_back(inputs[i].defined() ? TensorDesc{inputs[i].dtype(), inputs[i].shape(), nullptr} : TensorDesc{});
  }
  node.outputs = {"out"};
  std::vector<Tensor> outs(1);
  KernelContext ctx{inputs, outs, node};
  select_kernel(node, planned_kernel_info(graph, descs), Device::kCpu, reference_provider_only).kernel->run(ctx);
  return outs[0];
}

// y, rounded to tf32 in place when the node asks for it (rw.round_tf32) and y is fp32.
Tensor round_output(const Node& node, Tensor y) {
  if (node.attr_int(ops::attr::kRoundTf32, 0) == 0 || y.dtype() != DType::kF32) return y;
  y = y.contiguous();
  float* v = y.data<float>();
  for (std::int64_t i = 0; i < y.numel(); ++i) v[i] = round_to_tf32(v[i]);
  return y;
}

DType onnx_storage(const Node& node) {
  const DType t = dtype_from_onnx(static_cast<int>(node.attr_int("to", 0)));
  RW_EXPECTS(t == DType::kF16 || t == DType::kBF16 || t == DType::kF32, InvalidArgument,
             "{}: 'to' must name float16, bfloat16 or float, not {}", node.where(), node.attr_int("to", 0));
  return t;
}

class ToNhwcKernel final : public Kernel {
 public:
  ToNhwcKernel(const Node& node, const KernelInfo&)
      : node_(node),
        to_(onnx_storage(node)),
        channels_(node.attr_int(ops::attr::kChannels, 0)),
        space_to_depth_(node.attr_int(ops::attr::kSpaceToDepth, 0)) {
    RW_EXPECTS(space_to_depth_ == 0 || space_to_depth_ == 2, InvalidArgument,
               "{}: rw.space_to_depth must be 2 (2x2 blocks) or absent, not {}", node_.where(), space_to_depth_);
  }
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    RW_EXPECTS(x.shape().size() == 4 && x.dtype() == DType::kF32, InvalidArgument,
               "{}: input must be float NCHW, not {}", node_.where(), x.description());
    if (space_to_depth_ != 0) {
      // The convolution after it was rewritten for this input extent (its pads depend on it).
      const auto hw = node_.attr_ints(ops::attr::kSpaceToDepthHw);
      RW_EXPECTS(hw.size() == 2 && hw[0] == x.shape()[2] && hw[1] == x.shape()[3], InvalidArgument,
                 "{}: the space-to-depth stem was planned for a {}x{} input (rw.space_to_depth_hw), not {}",
                 node_.where(), hw.size() == 2 ? hw[0] : -1, hw.size() == 2 ? hw[1] : -1, shape_str(x.shape()));
    }
    const Tensor in = space_to_depth_ != 0 ? space_to_depth(x) : x;
    RW_EXPECTS(channels_ >= in.shape()[1], InvalidArgument, "{}: rw.channels {} is fewer than the {} channels{}",
               node_.where(), channels_, in.shape()[1], space_to_depth_ != 0 ? " of the space-to-depth" : "");
    ctx.outputs[0] = round_output(node_, to_channels_last(in, channels_, to_));
  }

 private:
  const Node& node_;
  DType to_;
  std::int64_t channels_;
  std::int64_t space_to_depth_;  // 2: the 2x2 space-to-depth of the input (rw.space_to_depth)
};

class ToNchwKernel final : public Kernel {
 public:
  ToNchwKernel(const Node& node, const KernelInfo&) : node_(node), channels_(node.attr_int(ops::attr::kChannels, 0)) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    expect_nhwc(node_, x, "input");
    RW_EXPECTS(channels_ > 0 && channels_ <= x.shape()[3], InvalidArgument,
               "{}: rw.channels {} for an input of {} channels", node_.where(), channels_, x.shape()[3]);
    ctx.outputs[0] = to_channels_first(x, channels_);
  }

 private:
  const Node& node_;
  std::int64_t channels_;
};

// The first `from` .. `from + count` channels of fp32 NCHW weights [K, C, R, S].
Tensor weight_channels(const Tensor& w, std::int64_t from, std::int64_t count) {
  const Shape& s = w.shape();
  const Tensor src = w.contiguous();
  Tensor out = Tensor::empty(DType::kF32, {s[0], count, s[2], s[3]});
  const std::int64_t plane = s[2] * s[3];
  for (std::int64_t k = 0; k < s[0]; ++k)
    for (std::int64_t c = 0; c < count; ++c)
      for (std::int64_t i = 0; i < plane; ++i)
        out.data<float>()[(k * count + c) * plane + i] = src.data<float>()[(k * s[1] + from + c) * plane + i];
  return out;
}

// rw.ConvNhwc (W [K, R, S, Cp] in the storage type) and rw.DepthwiseConvNhwc (W fp32 [R, S, C]).
// rw.ConvNhwc's input 4 (the projection shortcut, backends/cuda/passes/fuse_conv_shortcut.cpp): X2 NHWC
// [N, H2, W2, C2], W [K, 1, 1, C + C2]; y = act(conv(x, W[.., :C]) + conv(x2, W[.., C:]) at
// stride rw.shortcut_strides + bias + residual), the first product summed in fp32 as the residual
// of the second.
class ConvNhwcKernel final : public Kernel {
 public:
  ConvNhwcKernel(const Node& node, const KernelInfo&, bool depthwise) : node_(node), depthwise_(depthwise) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    expect_nhwc(node_, x, "input");
    RW_EXPECTS(w.shape().size() == (depthwise_ ? 3u : 4u), InvalidArgument, "{}: weights {}", node_.where(),
               shape_str(w.shape()));
    const std::int64_t c = x.shape()[3];
    const std::int64_t k = depthwise_ ? w.shape()[2] : w.shape()[0];
    if (!depthwise_ && ctx.has_input(4)) {
      ctx.outputs[0] = round_output(node_, with_shortcut(ctx, x, w, k));
      return;
    }
    RW_EXPECTS(w.shape().back() == c, InvalidArgument, "{}: weights {} for an input of {} channels", node_.where(),
               shape_str(w.shape()), c);
    const Shape& ws = w.shape();
    // Depthwise [R, S, C] -> [C, 1, R, S] (through [1, R, S, C]); dense [K, R, S, Cp] -> [K, Cp, R, S].
    const Tensor wn =
        depthwise_ ? to_channels_first(w.contiguous().reshaped({1, ws[0], ws[1], c}), c).reshaped({c, 1, ws[0], ws[1]})
                   : to_channels_first(w, c);
    std::vector<Tensor> ins{to_channels_first(x, c), wn, ctx.has_input(2) ? ctx.input(2) : Tensor(), Tensor()};
    if (ctx.has_input(3)) {
      expect_nhwc(node_, ctx.input(3), "residual");
      ins[3] = to_channels_first(ctx.input(3), k);
    }
    const Tensor y = run_reference("Conv", node_, ins, {{"group", depthwise_ ? c : std::int64_t{1}}});
    ctx.outputs[0] = round_output(node_, to_channels_last(y, k, x.dtype()));
  }

 private:
  Tensor with_shortcut(KernelContext& ctx, const Tensor& x, const Tensor& w, std::int64_t k) const {
    const Tensor& x2 = ctx.input(4);
    expect_nhwc(node_, x2, "shortcut input");
    const std::int64_t c = x.shape()[3], c2 = x2.shape()[3];
    RW_EXPECTS(w.shape().size() == 4 && w.shape()[1] == 1 && w.shape()[2] == 1 && w.shape()[3] == c + c2,
               InvalidArgument, "{}: weights {} for a 1x1 convolution of {} + {} (shortcut) input channels",
               node_.where(), shape_str(w.shape()), c, c2);
    const Tensor wn = to_channels_first(w, c + c2);  // fp32 [K, C + C2, 1, 1]
    Node plain;  // the main product alone: no bias, residual or activation
    plain.name = node_.name;
    for (const char* key : {"strides", "pads", "dilations"}) {
      if (auto it = node_.attributes.find(key); it != node_.attributes.end()) plain.attributes[key] = it->second;
    }
    const Tensor main = run_reference("Conv", plain, {to_channels_first(x, c), weight_channels(wn, 0, c)});
    std::vector<Tensor> ins{to_channels_first(x2, c2), weight_channels(wn, c, c2),
                            ctx.has_input(2) ? ctx.input(2) : Tensor(), main};
    if (ctx.has_input(3)) {
      expect_nhwc(node_, ctx.input(3), "residual");
      Tensor sum = to_channels_first(ctx.input(3), k).cast(DType::kF32).contiguous();
      RW_EXPECTS(sum.shape() == main.shape(), InvalidArgument, "{}: the residual {} is not the output's {}",
                 node_.where(), shape_str(sum.shape()), shape_str(main.shape()));
      const Tensor m = main.contiguous();
      for (std::int64_t i = 0; i < sum.numel(); ++i) sum.data<float>()[i] += m.data<float>()[i];
      ins[3] = sum;
    }
    const Tensor y = run_reference("Conv", node_, ins,
                                   {{"strides", node_.attr_ints(ops::attr::kShortcutStrides, {1, 1})},
                                    {"pads", std::vector<std::int64_t>{0, 0, 0, 0}}});
    RW_EXPECTS(y.shape() == main.shape(), InvalidArgument,
               "{}: the shortcut input {} at stride {} does not give the output's extent {}", node_.where(),
               shape_str(x2.shape()), node_.attr_ints(ops::attr::kShortcutStrides, {1, 1}).at(0), shape_str(main.shape()));
    return to_channels_last(y, k, x.dtype());
  }

  const Node& node_;
  bool depthwise_;
};

class MaxPoolNhwcKernel final : public Kernel {
 public:
  MaxPoolNhwcKernel(const Node& node, const KernelInfo&) : node_(node) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    expect_nhwc(node_, x, "input");
    const Tensor y = run_reference("MaxPool", node_, {to_channels_first(x, x.shape()[3])});
    ctx.outputs[0] = round_output(node_, to_channels_last(y, x.shape()[3], x.dtype()));
  }

 private:
  const Node& node_;
};

class GlobalAveragePoolNhwcKernel final : public Kernel {
 public:
  GlobalAveragePoolNhwcKernel(const Node& node, const KernelInfo&) : node_(node) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    expect_nhwc(node_, x, "input");
    ctx.outputs[0] = run_reference("GlobalAveragePool", node_, {to_channels_first(x, x.shape()[3])});
  }

 private:
  const Node& node_;
};

class ScaleChannelsNhwcKernel final : public Kernel {
 public:
  ScaleChannelsNhwcKernel(const Node& node, const KernelInfo&) : node_(node) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    expect_nhwc(node_, x, "input");
    const Tensor scale = ctx.input(1).contiguous();
    const std::int64_t n = x.shape()[0], hw = x.shape()[1] * x.shape()[2], c = x.shape()[3];
    RW_EXPECTS(scale.dtype() == DType::kF32 && scale.numel() == n * c, InvalidArgument,
               "{}: the scale must be float with N·C = {} elements, not {}", node_.where(), n * c,
               scale.description());
    const Tensor xf = x.cast(DType::kF32);
    Tensor y = Tensor::empty(DType::kF32, x.shape());
    const float* s = scale.data<float>();
    for (std::int64_t b = 0; b < n; ++b)
      for (std::int64_t p = 0; p < hw; ++p)
        for (std::int64_t ch = 0; ch < c; ++ch) {
          const std::int64_t i = (b * hw + p) * c + ch;
          y.data<float>()[i] = xf.data<float>()[i] * s[b * c + ch];
        }
    ctx.outputs[0] = x.dtype() == DType::kF32 ? round_output(node_, y) : y.cast(x.dtype());
  }

 private:
  const Node& node_;
};

KernelFactory conv_factory(bool depthwise) {
  return [depthwise](const Node& node, const KernelInfo& info) -> std::unique_ptr<Kernel> {
    return std::make_unique<ConvNhwcKernel>(node, info, depthwise);
  };
}

}  // namespace

RW_REGISTER_KERNEL(ops::kToNhwc, Device::kCpu, make_factory<ToNhwcKernel>());
RW_REGISTER_KERNEL(ops::kToNchw, Device::kCpu, make_factory<ToNchwKernel>());
RW_REGISTER_KERNEL(ops::kConvNhwc, Device::kCpu, conv_factory(false));
RW_REGISTER_KERNEL(ops::kDepthwiseConvNhwc, Device::kCpu, conv_factory(true));
RW_REGISTER_KERNEL(ops::kMaxPoolNhwc, Device::kCpu, make_factory<MaxPoolNhwcKernel>());
RW_REGISTER_KERNEL(ops::kGlobalAveragePoolNhwc, Device::kCpu, make_factory<GlobalAveragePoolNhwcKernel>());
RW_REGISTER_KERNEL(ops::kScaleChannelsNhwc, Device::kCpu, make_factory<ScaleChannelsNhwcKernel>());

}  // namespace redwood::cpu
