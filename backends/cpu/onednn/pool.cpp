// MaxPool, AveragePool and GlobalAveragePool on oneDNN's pooling (2-D, fp32, NCHW), with
// ceil_mode and padding; dilated pooling, MaxPool's Indices output and count_include_pad with
// ceil_mode go to the reference kernel.

#include "backends/cpu/onednn/onednn_common.hpp"
#include "backends/cpu/reference/nn_common.hpp"

namespace redwood::cpu::onednn {
namespace {

class PoolKernel final : public FallbackKernel {
 public:
  PoolKernel(const Node& node, const KernelInfo& info)
      : FallbackKernel(node, info),
        global_(node.op_type == "GlobalAveragePool"),
        max_(node.op_type == "MaxPool"),
        window_(global_ ? nn::WindowAttrs{} : nn::parse_window(node, true)),
        include_pad_(node.attr_int("count_include_pad", 0) != 0) {
    RW_EXPECTS(!(max_ && node.outputs.size() > 1 && !node.outputs[1].empty()), Unsupported,
               "{}: oneDNN pooling has no Indices output", node.where());
    for (auto d : window_.dilations) RW_EXPECTS(d == 1, Unsupported, "{}: dilated pooling", node.where());
    RW_EXPECTS(!(include_pad_ && window_.ceil_mode), Unsupported, "{}: count_include_pad with ceil_mode", node.where());
    RW_EXPECTS(node.attr_int("storage_order", 0) == 0, Unsupported, "{}: storage_order", node.where());
    for (DType d : info.input_dtypes) {
      RW_EXPECTS(d == DType::kF32 || d == DType::kUndefined, Unsupported, "{}: oneDNN pooling needs fp32", node.where());
    }
  }

 protected:
  bool run_onednn(KernelContext& ctx) override {
    if (!all_f32(ctx) || ctx.input(0).rank() != 4) return false;
    const Tensor x = ctx.input(0).contiguous();
    auto it = cache_.find(x.shape());
    if (it == cache_.end()) {
      Entry e;
      if (!build(ctx.node, x.shape(), e)) return false;
      it = cache_.emplace(x.shape(), std::move(e)).first;
    }
    Entry& e = it->second;
    Tensor y = Tensor::empty(DType::kF32, e.out_shape);
    e.prim.execute(stream(), {{DNNL_ARG_SRC, wrap(e.x_md, x)}, {DNNL_ARG_DST, wrap(e.y_md, y)}});
    stream().wait();
    ctx.outputs[0] = y;
    return true;
  }

 private:
  struct Entry {
    dnnl::primitive prim;
    dnnl::memory::desc x_md, y_md;
    Shape out_shape;
  };

  bool build(const Node& node, const Shape& xs, Entry& e) {
    dims strides, kernel, pl, pr;
    Shape out{xs[0], xs[1]};
    if (global_) {
      strides = {1, 1};
      kernel = {xs[2], xs[3]};
      pl = pr = {0, 0};
      out.push_back(1);
      out.push_back(1);
    } else {
      if (window_.kernel_shape.size() != 2) return false;
      nn::Axes3 a;
      try {
        a = nn::resolve_forward(node, window_, {xs[2], xs[3]}, window_.kernel_shape, xs);
      } catch (const Error&) {
        return false;
      }
      for (int i = 1; i < 3; ++i) {
        strides.push_back(a[i].stride);
        kernel.push_back(a[i].kernel);
        pl.push_back(a[i].pad_begin);
        // ceil_mode: pad the end so that the last window fits.
        pr.push_back(std::max<std::int64_t>(a[i].pad_end, (a[i].out - 1) * a[i].stride + a[i].kernel - a[i].in - a[i].pad_begin));
        out.push_back(a[i].out);
        if (a[i].out <= 0) return false;
      }
      // AveragePool excluding padding: oneDNN excludes the end padding it added for ceil_mode
      // as well, as ONNX does; with count_include_pad the constructor sent ceil_mode away.
    }
    if (shape_numel(xs) == 0) return false;
    e.out_shape = out;
    e.x_md = dnnl::memory::desc(dims(xs.begin(), xs.end()), dt::f32, tag::nchw);
    e.y_md = dnnl::memory::desc(dims(out.begin(), out.end()), dt::f32, tag::nchw);
    const auto alg = max_ ? dnnl::algorithm::pooling_max
                     : include_pad_ ? dnnl::algorithm::pooling_avg_include_padding
                                    : dnnl::algorithm::pooling_avg_exclude_padding;
    try {
      dnnl::pooling_forward::desc d(dnnl::prop_kind::forward_inference, alg, e.x_md, e.y_md, strides, kernel, pl, pr);
      e.prim = dnnl::pooling_forward(dnnl::pooling_forward::primitive_desc(d, engine()));
    } catch (const dnnl::error&) {
      return false;
    }
    return true;
  }

  bool global_, max_;
  nn::WindowAttrs window_;
  bool include_pad_;
  std::map<Shape, Entry> cache_;
};

}  // namespace

RW_REGISTER_PROVIDER_KERNEL("MaxPool", Device::kCpu, kProvider, kPriority, make_onednn_factory<PoolKernel>());
RW_REGISTER_PROVIDER_KERNEL("AveragePool", Device::kCpu, kProvider, kPriority, make_onednn_factory<PoolKernel>());
RW_REGISTER_PROVIDER_KERNEL("GlobalAveragePool", Device::kCpu, kProvider, kPriority, make_onednn_factory<PoolKernel>());

}  // namespace redwood::cpu::onednn
