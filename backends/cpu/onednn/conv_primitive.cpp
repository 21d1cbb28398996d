// Conv/ConvTranspose primitives for one input shape (see conv_primitive.hpp).

#include "backends/cpu/onednn/conv_primitive.hpp"

namespace redwood::cpu::onednn {

ConvSpec ConvSpec::from_node(const Node& node, const KernelInfo& info) {
  ConvSpec s;
  s.transposed = node.op_type == "ConvTranspose";
  s.window = nn::parse_window(node, false);
  s.group = node.attr_int("group", 1);
  s.epilogue = Epilogue::from_node(node);
  const Tensor* w = info.constant_inputs.size() > 1 ? info.constant_inputs[1] : nullptr;
  RW_EXPECTS(w != nullptr && w->dtype() == DType::kF32 && w->rank() == 4, Unsupported,
             "{}: oneDNN convolution needs constant 2-D fp32 weights", node.where());
  for (std::size_t i = 0; i < info.input_dtypes.size(); ++i) {
    RW_EXPECTS(info.input_dtypes[i] == DType::kF32 || info.input_dtypes[i] == DType::kUndefined,
               Unsupported, "{}: oneDNN convolution needs fp32", node.where());
  }
  dnnl::post_ops po;
  RW_EXPECTS(append_activation(po, s.epilogue), Unsupported, "{}: activation", node.where());
  s.weights = w->contiguous();
  if (info.constant_inputs.size() > 2 && info.constant_inputs[2] != nullptr) {
    s.bias = info.constant_inputs[2]->contiguous();
  }
  RW_EXPECTS(!node.has_input(2) || s.bias.defined(), Unsupported,
             "{}: oneDNN convolution needs a constant bias", node.where());
  if (s.transposed) {
    s.output_padding = node.attr_ints("output_padding");
    RW_EXPECTS(node.attr_ints("output_shape").empty() && s.window.auto_pad == nn::AutoPad::kNotSet,
               Unsupported, "{}: oneDNN ConvTranspose takes explicit pads only", node.where());
  }
  s.residual = node.has_input(kResidualInput);
  return s;
}

std::optional<ConvPrimitive> make_conv(const Node& node, const ConvSpec& spec, const Shape& xs, tag dst_tag) {
  const Shape& ws = spec.weights.shape();
  if (xs.size() != 4) return std::nullopt;
  const std::int64_t n = xs[0], cin = xs[1], group = spec.group;
  if (group <= 0 || cin % group != 0) return std::nullopt;
  dims strides, dil, pl, pr, kernel{ws[2], ws[3]};
  std::int64_t cout;
  Shape out{n, 0};
  const auto& ks = spec.window.kernel_shape;
  if (!ks.empty() && ks != std::vector<std::int64_t>(kernel.begin(), kernel.end())) return std::nullopt;
  if (!spec.transposed) {
    cout = ws[0];
    if (ws[1] * group != cin || cout % group != 0) return std::nullopt;
    nn::Axes3 a;
    try {
      a = nn::resolve_forward(node, spec.window, {xs[2], xs[3]}, {ws[2], ws[3]}, xs);
    } catch (const Error&) {
      return std::nullopt;
    }
    for (int i = 1; i < 3; ++i) {
      strides.push_back(a[i].stride);
      dil.push_back(a[i].dilation - 1);
      pl.push_back(a[i].pad_begin);
      pr.push_back(a[i].pad_end);
      out.push_back(a[i].out);
    }
  } else {
    if (ws[0] != cin) return std::nullopt;
    cout = ws[1] * group;
    for (int i = 0; i < 2; ++i) {
      const std::int64_t s = nn::attr_at(spec.window.strides, i, 1), d = nn::attr_at(spec.window.dilations, i, 1);
      const std::int64_t op = nn::attr_at(spec.output_padding, i, 0);
      const std::int64_t b = nn::attr_at(spec.window.pads, i, 0), en = nn::attr_at(spec.window.pads, 2 + i, 0) - op;
      const std::int64_t full = s * (xs[2 + i] - 1) + (kernel[i] - 1) * d + 1;
      if (en < 0 || full - b - en <= 0) return std::nullopt;
      strides.push_back(s);
      dil.push_back(d - 1);
      pl.push_back(b);
      pr.push_back(en);
      out.push_back(full - b - en);
    }
  }
  out[1] = cout;
  if (spec.bias.defined() && spec.bias.numel() != cout) return std::nullopt;
  if (shape_numel(xs) == 0 || shape_numel(out) == 0) return std::nullopt;
  ConvPrimitive c;
  c.out_shape = out;
  const dims src_dims(xs.begin(), xs.end()), dst_dims(out.begin(), out.end());
  dims w_dims;
  tag w_tag;
  if (group == 1) {
    w_dims = dims{cout, cin, kernel[0], kernel[1]};
    w_tag = spec.transposed ? tag::iohw : tag::oihw;
  } else {
    w_dims = dims{group, cout / group, cin / group, kernel[0], kernel[1]};
    w_tag = spec.transposed ? tag::giohw : tag::goihw;
  }
  const dnnl::memory::desc src_any(src_dims, dt::f32, tag::any), dst_any(dst_dims, dt::f32, dst_tag),
      w_any(w_dims, dt::f32, tag::any), b_md({cout}, dt::f32, tag::a);
  dnnl::primitive_attr attr;
  dnnl::post_ops po;
  if (spec.residual) po.append_sum(1.f);
  append_activation(po, spec.epilogue);
  attr.set_post_ops(po);
  const bool has_bias = spec.bias.defined();
  try {
    dnnl::memory::desc w_md;
    // Convolution and deconvolution share the descriptor's form and what we keep of it.
    auto build = [&]<typename F>(dnnl::algorithm algorithm) {
      auto d = has_bias ? typename F::desc(dnnl::prop_kind::forward_inference, algorithm, src_any, w_any, b_md,
                                           dst_any, strides, dil, pl, pr)
                        : typename F::desc(dnnl::prop_kind::forward_inference, algorithm, src_any, w_any, dst_any,
                                           strides, dil, pl, pr);
      typename F::primitive_desc pd(d, attr, engine());
      c.src_md = pd.src_desc(), c.dst_md = pd.dst_desc(), w_md = pd.weights_desc();
      c.prim = F(pd);
    };
    if (!spec.transposed) {
      build.template operator()<dnnl::convolution_forward>(dnnl::algorithm::convolution_direct);
    } else {
      build.template operator()<dnnl::deconvolution_forward>(dnnl::algorithm::deconvolution_direct);
    }
    // Weights: once into the primitive's layout.
    dnnl::memory w_user(dnnl::memory::desc(w_dims, dt::f32, w_tag), engine(), spec.weights.raw_data());
    c.weights = dnnl::memory(w_md, engine());
    reorder(w_user, c.weights);
    if (has_bias) c.bias = dnnl::memory(b_md, engine(), spec.bias.raw_data());
    stream().wait();
  } catch (const dnnl::error&) {
    return std::nullopt;
  }
  return c;
}

std::optional<ConvSpec> deconv_as_pointwise(const Node& node, const ConvSpec& spec) {
  if (!spec.transposed || spec.group != 1 || spec.residual) return std::nullopt;
  const Shape& ws = spec.weights.shape();  // [Cin, Cout, kh, kw]
  const std::int64_t cin = ws[0], cout = ws[1], kh = ws[2], kw = ws[3];
  const std::vector<std::int64_t> k{kh, kw};
  if (spec.window.strides != k) return std::nullopt;
  for (auto p : spec.window.pads) {
    if (p != 0) return std::nullopt;
  }
  for (auto d : spec.window.dilations) {
    if (d != 1) return std::nullopt;
  }
  for (auto p : spec.output_padding) {
    if (p != 0) return std::nullopt;
  }
  if (!node.attr_ints("output_shape").empty()) return std::nullopt;
  ConvSpec pw = spec;
  pw.transposed = false;
  pw.window = nn::WindowAttrs{};
  pw.window.kernel_shape = {1, 1};
  pw.output_padding.clear();
  Tensor w = Tensor::empty(DType::kF32, {kh * kw * cout, cin, 1, 1});
  const float* src = spec.weights.data<float>();
  float* dst = w.data<float>();
  for (std::int64_t ci = 0; ci < cin; ++ci) {
    for (std::int64_t co = 0; co < cout; ++co) {
      for (std::int64_t ij = 0; ij < kh * kw; ++ij) dst[(ij * cout + co) * cin + ci] = src[(ci * cout + co) * kh * kw + ij];
    }
  }
  pw.weights = w;
  if (spec.bias.defined()) {
    Tensor b = Tensor::empty(DType::kF32, {kh * kw * cout});
    for (std::int64_t ij = 0; ij < kh * kw; ++ij) {
      for (std::int64_t co = 0; co < cout; ++co) b.data<float>()[ij * cout + co] = spec.bias.data<float>()[co];
    }
    pw.bias = b;
  }
  return pw;
}

}  // namespace redwood::cpu::onednn
