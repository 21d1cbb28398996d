// Conv and ConvTranspose on oneDNN, one node at a time (fp32, constant 2-D weights): grouped,
// depthwise, dilated, strided and transposed, with the fused epilogue as post-ops:
// y = act(conv(x) + bias + residual). The primitive comes from make_conv (conv_primitive.hpp),
// cached per input shape, weights reordered once per primitive.
//
// A node on its own exchanges NCHW tensors with its neighbours, so when oneDNN picks a blocked or
// NHWC layout the input and output are reordered around each run. Chains of oneDNN nodes avoid
// that by running as one region (region.cpp), which keeps oneDNN's layouts inside.

#include "backends/cpu/onednn/conv_primitive.hpp"

#include <cstring>

namespace redwood::cpu::onednn {
namespace {

class ConvKernel final : public FallbackKernel {
 public:
  ConvKernel(const Node& node, const KernelInfo& info)
      : FallbackKernel(node, info), spec_(ConvSpec::from_node(node, info)) {}

 protected:
  bool run_onednn(KernelContext& ctx) override {
    if (!all_f32(ctx) || ctx.input(0).rank() != 4) return false;
    const Tensor x = ctx.input(0).contiguous();
    const Shape& xs = x.shape();
    auto it = cache_.find(xs);
    if (it == cache_.end()) {
      auto e = build(ctx.node, xs);
      if (!e) return false;
      it = cache_.emplace(xs, std::move(*e)).first;
    }
    Entry& e = it->second;
    const Tensor residual = residual_input(ctx);
    if (residual.defined() && residual.shape() != e.conv.out_shape) return false;

    Tensor y = ctx.allocate_output(0, DType::kF32, e.conv.out_shape);
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
        {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, e.conv.weights}, {DNNL_ARG_DST, dst}};
    if (e.conv.bias) args.emplace(DNNL_ARG_BIAS, *e.conv.bias);
    e.conv.prim.execute(stream(), args);
    if (e.y_reorder) e.from_dst.execute(stream(), dst, y_user);
    stream().wait();
    ctx.outputs[0] = y;
    return true;
  }

 private:
  struct Entry {
    ConvPrimitive conv;
    dnnl::memory::desc x_plain, y_plain;
    dnnl::memory src, dst;
    bool x_reorder = false, y_reorder = false;
    dnnl::reorder to_src, to_dst, from_dst;  // cached reorder primitives
  };

  std::optional<Entry> build(const Node& node, const Shape& xs) {
    auto conv = make_conv(node, spec_, xs);
    if (!conv) return std::nullopt;
    Entry e;
    e.conv = std::move(*conv);
    const Shape& out = e.conv.out_shape;
    try {
      e.x_plain = dnnl::memory::desc(dims(xs.begin(), xs.end()), dt::f32, tag::nchw);
      e.y_plain = dnnl::memory::desc(dims(out.begin(), out.end()), dt::f32, tag::nchw);
      e.x_reorder = e.conv.src_md != e.x_plain;
      e.y_reorder = e.conv.dst_md != e.y_plain;
      if (e.x_reorder) {
        e.src = dnnl::memory(e.conv.src_md, engine());
        e.to_src = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), e.x_plain, engine(), e.conv.src_md));
      }
      if (e.y_reorder) {
        e.dst = dnnl::memory(e.conv.dst_md, engine());
        e.to_dst = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), e.y_plain, engine(), e.conv.dst_md));
        e.from_dst = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), e.conv.dst_md, engine(), e.y_plain));
      }
    } catch (const dnnl::error&) {
      return std::nullopt;
    }
    return e;
  }

  ConvSpec spec_;
  std::map<Shape, Entry> cache_;
};

}  // namespace

RW_REGISTER_PROVIDER_KERNEL("Conv", Device::kCpu, kProvider, kPriority, make_onednn_factory<ConvKernel>());
RW_REGISTER_PROVIDER_KERNEL("ConvTranspose", Device::kCpu, kProvider, kPriority, make_onednn_factory<ConvKernel>());

}  // namespace redwood::cpu::onednn
