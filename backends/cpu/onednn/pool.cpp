// MaxPool, AveragePool and GlobalAveragePool on oneDNN's pooling (2-D, fp32, NCHW), one node at a
// time, with ceil_mode and padding (geometry in pool_primitive.hpp); cases oneDNN cannot take go
// to the reference kernel.

#include "backends/cpu/onednn/pool_primitive.hpp"

namespace redwood::cpu::onednn {

PoolSpec PoolSpec::from_node(const Node& node, const std::vector<DType>& input_dtypes) {
  PoolSpec s;
  s.global = node.op_type == "GlobalAveragePool";
  s.max = node.op_type == "MaxPool";
  s.window = s.global ? nn::WindowAttrs{} : nn::parse_window(node, true);
  s.include_pad = node.attr_int("count_include_pad", 0) != 0;
  RW_EXPECTS(!(s.max && node.outputs.size() > 1 && !node.outputs[1].empty()), Unsupported,
             "{}: oneDNN pooling has no Indices output", node.where());
  for (auto d : s.window.dilations) RW_EXPECTS(d == 1, Unsupported, "{}: dilated pooling", node.where());
  RW_EXPECTS(!(s.include_pad && s.window.ceil_mode), Unsupported, "{}: count_include_pad with ceil_mode", node.where());
  RW_EXPECTS(node.attr_int("storage_order", 0) == 0, Unsupported, "{}: storage_order", node.where());
  for (DType d : input_dtypes) {
    RW_EXPECTS(d == DType::kF32 || d == DType::kUndefined, Unsupported, "{}: oneDNN pooling needs fp32", node.where());
  }
  return s;
}

std::optional<PoolGeometry> pool_geometry(const Node& node, const PoolSpec& spec, const Shape& xs) {
  if (xs.size() != 4 || shape_numel(xs) == 0) return std::nullopt;
  PoolGeometry p;
  p.out = {xs[0], xs[1]};
  if (spec.global) {
    p.strides = {1, 1};
    p.kernel = {xs[2], xs[3]};
    p.pad_begin = p.pad_end = {0, 0};
    p.out.push_back(1);
    p.out.push_back(1);
  } else {
    if (spec.window.kernel_shape.size() != 2) return std::nullopt;
    nn::Axes3 a;
    try {
      a = nn::resolve_forward(node, spec.window, {xs[2], xs[3]}, spec.window.kernel_shape, xs);
    } catch (const Error&) {
      return std::nullopt;
    }
    for (int i = 1; i < 3; ++i) {
      p.strides.push_back(a[i].stride);
      p.kernel.push_back(a[i].kernel);
      p.pad_begin.push_back(a[i].pad_begin);
      // ceil_mode: pad the end so that the last window fits.
      p.pad_end.push_back(std::max<std::int64_t>(a[i].pad_end, (a[i].out - 1) * a[i].stride + a[i].kernel - a[i].in - a[i].pad_begin));
      p.out.push_back(a[i].out);
      if (a[i].out <= 0) return std::nullopt;
    }
    // AveragePool excluding padding: oneDNN excludes the end padding it added for ceil_mode
    // as well, as ONNX does; with count_include_pad the spec sent ceil_mode away.
  }
  p.alg = spec.max ? dnnl::algorithm::pooling_max
          : spec.include_pad ? dnnl::algorithm::pooling_avg_include_padding
                             : dnnl::algorithm::pooling_avg_exclude_padding;
  return p;
}

namespace {

class PoolKernel final : public FallbackKernel {
 public:
  PoolKernel(const Node& node, const KernelInfo& info)
      : FallbackKernel(node, info), spec_(PoolSpec::from_node(node, info.input_dtypes)) {}

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
    Tensor y = ctx.allocate_output(0, DType::kF32, e.out_shape);
    e.prim.set(DNNL_ARG_SRC, x.raw_data());
    e.prim.set(DNNL_ARG_DST, y.raw_data());
    e.prim.execute();
    stream().wait();
    ctx.outputs[0] = y;
    return true;
  }

 private:
  struct Entry {
    Bound prim;
    dnnl::memory::desc x_md, y_md;
    Shape out_shape;
  };

  bool build(const Node& node, const Shape& xs, Entry& e) {
    const auto p = pool_geometry(node, spec_, xs);
    if (!p) return false;
    e.out_shape = p->out;
    e.x_md = dnnl::memory::desc(dims(xs.begin(), xs.end()), dt::f32, tag::nchw);
    e.y_md = dnnl::memory::desc(dims(p->out.begin(), p->out.end()), dt::f32, tag::nchw);
    try {
      dnnl::pooling_forward::desc d(dnnl::prop_kind::forward_inference, p->alg, e.x_md, e.y_md, p->strides,
                                    p->kernel, p->pad_begin, p->pad_end);
      e.prim = Bound(dnnl::pooling_forward(dnnl::pooling_forward::primitive_desc(d, engine())));
      e.prim.bind(DNNL_ARG_SRC, e.x_md).bind(DNNL_ARG_DST, e.y_md);
    } catch (const dnnl::error&) {
      return false;
    }
    return true;
  }

  PoolSpec spec_;
  std::map<Shape, Entry> cache_;
};

}  // namespace

RW_REGISTER_PROVIDER_KERNEL("MaxPool", Device::kCpu, kProvider, kPriority, make_onednn_factory<PoolKernel>());
RW_REGISTER_PROVIDER_KERNEL("AveragePool", Device::kCpu, kProvider, kPriority, make_onednn_factory<PoolKernel>());
RW_REGISTER_PROVIDER_KERNEL("GlobalAveragePool", Device::kCpu, kProvider, kPriority, make_onednn_factory<PoolKernel>());

}  // namespace redwood::cpu::onednn
