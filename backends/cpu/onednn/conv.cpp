// Conv and ConvTranspose on oneDNN (2-D, fp32, constant weights): grouped, depthwise, dilated,
// strided and transposed, with the fused epilogue as post-ops (sum for the residual, eltwise for
// the activation): y = act(conv(x) + bias + residual).
//
// oneDNN picks the layouts (format_tag::any): the weights are reordered into its layout once per
// primitive, the input is reordered into the primitive's source layout and the output back to
// Redwood's NCHW around each run when they differ. Primitives are cached per input shape.

#include "backends/cpu/onednn/onednn_common.hpp"
#include "backends/cpu/reference/nn_common.hpp"

#include <cstring>

namespace redwood::cpu::onednn {
namespace {

class ConvKernel final : public FallbackKernel {
 public:
  ConvKernel(const Node& node, const KernelInfo& info)
      : FallbackKernel(node, info),
        transposed_(node.op_type == "ConvTranspose"),
        window_(nn::parse_window(node, false)),
        group_(node.attr_int("group", 1)),
        epilogue_(Epilogue::from_node(node)) {
    const Tensor* w = info.constant_inputs.size() > 1 ? info.constant_inputs[1] : nullptr;
    RW_EXPECTS(w != nullptr && w->dtype() == DType::kF32 && w->rank() == 4, Unsupported,
               "{}: oneDNN convolution needs constant 2-D fp32 weights", node.where());
    for (std::size_t i = 0; i < info.input_dtypes.size(); ++i) {
      RW_EXPECTS(info.input_dtypes[i] == DType::kF32 || info.input_dtypes[i] == DType::kUndefined,
                 Unsupported, "{}: oneDNN convolution needs fp32", node.where());
    }
    dnnl::post_ops po;
    RW_EXPECTS(append_activation(po, epilogue_), Unsupported, "{}: activation", node.where());
    weights_ = w->contiguous();
    if (info.constant_inputs.size() > 2 && info.constant_inputs[2] != nullptr) bias_ = info.constant_inputs[2]->contiguous();
    if (transposed_) {
      output_padding_ = node.attr_ints("output_padding");
      RW_EXPECTS(node.attr_ints("output_shape").empty() && window_.auto_pad == nn::AutoPad::kNotSet,
                 Unsupported, "{}: oneDNN ConvTranspose takes explicit pads only", node.where());
    }
  }

 protected:
  bool run_onednn(KernelContext& ctx) override {
    if (!all_f32(ctx) || ctx.input(0).rank() != 4) return false;
    if (ctx.has_input(2) && !bias_.defined()) return false;  // a bias computed at run time
    const Tensor x = ctx.input(0).contiguous();
    const Shape& xs = x.shape();
    auto it = cache_.find(xs);
    if (it == cache_.end()) {
      Entry e;
      if (!build(ctx.node, xs, e)) return false;
      it = cache_.emplace(xs, std::move(e)).first;
    }
    Entry& e = it->second;
    const Tensor residual = residual_input(ctx);
    if (residual.defined() && residual.shape() != e.out_shape) return false;

    Tensor y = Tensor::empty(DType::kF32, e.out_shape);
    dnnl::memory x_user = wrap(e.x_plain, x), y_user = wrap(e.y_plain, y);
    dnnl::memory src = x_user;
    if (e.x_reorder) {
      e.to_src.execute(stream(), x_user, e.src);
      src = e.src;
    }
    dnnl::memory dst = e.y_reorder ? e.dst : y_user;
    if (residual.defined()) {
      const Tensor r = residual.contiguous();
      dnnl::memory r_user = wrap(e.y_plain, r);
      if (e.y_reorder) {
        e.to_dst.execute(stream(), r_user, dst);
      } else {
        std::memcpy(y.raw_data(), r.raw_data(), r.nbytes());
      }
    }
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, e.weights}, {DNNL_ARG_DST, dst}};
    if (e.bias) args.emplace(DNNL_ARG_BIAS, *e.bias);
    e.prim.execute(stream(), args);
    if (e.y_reorder) e.from_dst.execute(stream(), dst, y_user);
    stream().wait();
    ctx.outputs[0] = y;
    return true;
  }

 private:
  struct Entry {
    dnnl::primitive prim;
    dnnl::memory::desc x_plain, y_plain;
    dnnl::memory src, dst, weights;
    std::optional<dnnl::memory> bias;
    bool x_reorder = false, y_reorder = false;
    dnnl::reorder to_src, to_dst, from_dst;  // cached reorder primitives
    Shape out_shape;
  };

  bool build(const Node& node, const Shape& xs, Entry& e) {
    const Shape& ws = weights_.shape();
    const std::int64_t n = xs[0], cin = xs[1];
    if (cin % group_ != 0) return false;
    dims strides, dil, pl, pr, kernel{ws[2], ws[3]};
    std::int64_t cout;
    Shape out{n, 0};
    if (!window_.kernel_shape.empty() && window_.kernel_shape != std::vector<std::int64_t>(kernel.begin(), kernel.end())) return false;
    if (!transposed_) {
      cout = ws[0];
      if (ws[1] * group_ != cin || cout % group_ != 0) return false;
      nn::Axes3 a;
      try {
        a = nn::resolve_forward(node, window_, {xs[2], xs[3]}, {ws[2], ws[3]}, xs);
      } catch (const Error&) {
        return false;
      }
      for (int i = 1; i < 3; ++i) {
        strides.push_back(a[i].stride);
        dil.push_back(a[i].dilation - 1);
        pl.push_back(a[i].pad_begin);
        pr.push_back(a[i].pad_end);
        out.push_back(a[i].out);
      }
    } else {
      if (ws[0] != cin) return false;
      cout = ws[1] * group_;
      for (int i = 0; i < 2; ++i) {
        const std::int64_t s = nn::attr_at(window_.strides, i, 1), d = nn::attr_at(window_.dilations, i, 1);
        const std::int64_t op = nn::attr_at(output_padding_, i, 0);
        const std::int64_t b = nn::attr_at(window_.pads, i, 0), en = nn::attr_at(window_.pads, 2 + i, 0) - op;
        const std::int64_t full = s * (xs[2 + i] - 1) + (kernel[i] - 1) * d + 1;
        if (en < 0 || full - b - en <= 0) return false;
        strides.push_back(s);
        dil.push_back(d - 1);
        pl.push_back(b);
        pr.push_back(en);
        out.push_back(full - b - en);
      }
    }
    out[1] = cout;
    if (bias_.defined() && bias_.numel() != cout) return false;
    e.out_shape = out;
    const dims src_dims(xs.begin(), xs.end()), dst_dims(out.begin(), out.end());
    dims w_dims;
    tag w_tag;
    if (group_ == 1) {
      w_dims = transposed_ ? dims{cout, cin, kernel[0], kernel[1]} : dims{cout, cin, kernel[0], kernel[1]};
      w_tag = transposed_ ? tag::iohw : tag::oihw;
    } else {
      w_dims = dims{group_, cout / group_, cin / group_, kernel[0], kernel[1]};
      w_tag = transposed_ ? tag::giohw : tag::goihw;
    }
    const dnnl::memory::desc src_any(src_dims, dt::f32, tag::any), dst_any(dst_dims, dt::f32, tag::any),
        w_any(w_dims, dt::f32, tag::any), b_md({cout}, dt::f32, tag::a);
    dnnl::primitive_attr attr;
    dnnl::post_ops po;
    if (ctx_has_residual_) po.append_sum(1.f);
    append_activation(po, epilogue_);
    attr.set_post_ops(po);
    try {
      dnnl::memory::desc src_md, dst_md, w_md;
      if (!transposed_) {
        auto d = bias_.defined()
                     ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                       dnnl::algorithm::convolution_direct, src_any, w_any,
                                                       b_md, dst_any, strides, dil, pl, pr)
                     : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                       dnnl::algorithm::convolution_direct, src_any, w_any,
                                                       dst_any, strides, dil, pl, pr);
        dnnl::convolution_forward::primitive_desc pd(d, attr, engine());
        src_md = pd.src_desc(), dst_md = pd.dst_desc(), w_md = pd.weights_desc();
        e.prim = dnnl::convolution_forward(pd);
      } else {
        auto d = bias_.defined()
                     ? dnnl::deconvolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                         dnnl::algorithm::deconvolution_direct, src_any,
                                                         w_any, b_md, dst_any, strides, dil, pl, pr)
                     : dnnl::deconvolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                         dnnl::algorithm::deconvolution_direct, src_any,
                                                         w_any, dst_any, strides, dil, pl, pr);
        dnnl::deconvolution_forward::primitive_desc pd(d, attr, engine());
        src_md = pd.src_desc(), dst_md = pd.dst_desc(), w_md = pd.weights_desc();
        e.prim = dnnl::deconvolution_forward(pd);
      }
      e.x_plain = dnnl::memory::desc(src_dims, dt::f32, tag::nchw);
      e.y_plain = dnnl::memory::desc(dst_dims, dt::f32, tag::nchw);
      e.x_reorder = src_md != e.x_plain;
      e.y_reorder = dst_md != e.y_plain;
      if (e.x_reorder) {
        e.src = dnnl::memory(src_md, engine());
        e.to_src = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), e.x_plain, engine(), src_md));
      }
      if (e.y_reorder) {
        e.dst = dnnl::memory(dst_md, engine());
        e.to_dst = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), e.y_plain, engine(), dst_md));
        e.from_dst = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), dst_md, engine(), e.y_plain));
      }
      // Weights: once into the primitive's layout.
      dnnl::memory w_user(dnnl::memory::desc(w_dims, dt::f32, w_tag), engine(), weights_.raw_data());
      e.weights = dnnl::memory(w_md, engine());
      reorder(w_user, e.weights);
      if (bias_.defined()) e.bias = dnnl::memory(b_md, engine(), bias_.raw_data());
      stream().wait();
    } catch (const dnnl::error&) {
      return false;
    }
    return true;
  }

  bool transposed_;
  nn::WindowAttrs window_;
  std::int64_t group_;
  Epilogue epilogue_;
  std::vector<std::int64_t> output_padding_;
  Tensor weights_, bias_;
  bool ctx_has_residual_ = false;
  std::map<Shape, Entry> cache_;

 public:
  void set_residual(bool on) { ctx_has_residual_ = on; }
};

KernelFactory conv_factory() {
  return [](const Node& node, const KernelInfo& info) -> std::unique_ptr<Kernel> {
    auto k = std::make_unique<ConvKernel>(node, info);
    k->set_residual(node.has_input(kResidualInput));
    return k;
  };
}

}  // namespace

RW_REGISTER_PROVIDER_KERNEL("Conv", Device::kCpu, kProvider, kPriority, conv_factory());
RW_REGISTER_PROVIDER_KERNEL("ConvTranspose", Device::kCpu, kProvider, kPriority, conv_factory());

}  // namespace redwood::cpu::onednn
