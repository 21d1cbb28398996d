// Elementwise ops on oneDNN (fp32): unary eltwise (LeakyRelu, Tanh, Clip, HardSwish, Exp, Sqrt,
// Abs) over the tensor as one flat array, and binary (Add,
// Sub, Mul, Div) with numpy broadcasting where the first operand has the output's shape (or,
// for Add and Mul, the second one: the operands swap). Anything else goes to the reference
// kernel.

#include "backends/cpu/onednn/onednn_common.hpp"

namespace redwood::cpu::onednn {
namespace {

class UnaryKernel final : public FallbackKernel {
 public:
  UnaryKernel(const Node& node, const KernelInfo& info) : FallbackKernel(node, info), op_(node.op_type) {
    for (std::size_t i = 0; i < info.input_dtypes.size(); ++i) {
      RW_EXPECTS(info.input_dtypes[i] == DType::kF32 || info.input_dtypes[i] == DType::kUndefined, Unsupported,
                 "{}: oneDNN eltwise needs fp32", node.where());
    }
    using dnnl::algorithm;
    if (op_ == "Relu") alg_ = algorithm::eltwise_relu;
    else if (op_ == "LeakyRelu") alg_ = algorithm::eltwise_relu, alpha_ = node.attr_float("alpha", 0.01f);
    else if (op_ == "Sigmoid") alg_ = algorithm::eltwise_logistic;
    else if (op_ == "Tanh") alg_ = algorithm::eltwise_tanh;
    else if (op_ == "Exp") alg_ = algorithm::eltwise_exp;
    else if (op_ == "Sqrt") alg_ = algorithm::eltwise_sqrt;
    else if (op_ == "Abs") alg_ = algorithm::eltwise_abs;
    else if (op_ == "HardSwish") alg_ = algorithm::eltwise_hardswish;
    else if (op_ == "HardSigmoid") alg_ = algorithm::eltwise_linear, alpha_ = node.attr_float("alpha", 0.2f), beta_ = node.attr_float("beta", 0.5f), hard_sigmoid_ = true;
    else if (op_ == "Clip") {
      alg_ = algorithm::eltwise_clip_v2;
      alpha_ = node.attr_float("min", -INFINITY);
      beta_ = node.attr_float("max", INFINITY);
      clip_inputs_ = true;
    }
  }

 protected:
  bool run_onednn(KernelContext& ctx) override {
    if (!all_f32(ctx)) return false;
    float alpha = alpha_, beta = beta_;
    if (clip_inputs_) {
      if (ctx.has_input(1)) {
        if (ctx.input(1).numel() != 1) return false;
        alpha = static_cast<float>(ctx.input(1).get_as_double(0));
      }
      if (ctx.has_input(2)) {
        if (ctx.input(2).numel() != 1) return false;
        beta = static_cast<float>(ctx.input(2).get_as_double(0));
      }
    }
    const Tensor x = ctx.input(0).contiguous();
    if (x.numel() == 0) return false;
    const std::int64_t n = x.numel();
    const std::tuple<std::int64_t, float, float> key{n, alpha, beta};
    auto it = cache_.find(key);
    if (it == cache_.end()) {
      const dnnl::memory::desc md({n}, dt::f32, tag::a);
      dnnl::primitive_attr attr;
      if (hard_sigmoid_) {
        dnnl::post_ops po;
        po.append_eltwise(1.f, dnnl::algorithm::eltwise_clip_v2, 0.f, 1.f);
        attr.set_post_ops(po);
      }
      try {
        dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, alg_, md, alpha, beta);
        Bound b(dnnl::eltwise_forward(dnnl::eltwise_forward::primitive_desc(d, attr, engine())));
        b.bind(DNNL_ARG_SRC, md).bind(DNNL_ARG_DST, md);
        it = cache_.emplace(key, std::move(b)).first;
      } catch (const dnnl::error&) {
        return false;
      }
    }
    Tensor y = ctx.allocate_output(0, DType::kF32, x.shape());
    it->second.set(DNNL_ARG_SRC, x.raw_data());
    it->second.set(DNNL_ARG_DST, y.raw_data());
    it->second.execute();
    stream().wait();
    ctx.outputs[0] = y;
    return true;
  }

 private:
  std::string op_;
  dnnl::algorithm alg_ = dnnl::algorithm::eltwise_relu;
  float alpha_ = 0.f, beta_ = 0.f;
  bool hard_sigmoid_ = false, clip_inputs_ = false;
  std::map<std::tuple<std::int64_t, float, float>, Bound> cache_;
};

class BinaryKernel final : public FallbackKernel {
 public:
  BinaryKernel(const Node& node, const KernelInfo& info) : FallbackKernel(node, info) {
    for (DType d : info.input_dtypes) {
      RW_EXPECTS(d == DType::kF32 || d == DType::kUndefined, Unsupported, "{}: oneDNN binary needs fp32", node.where());
    }
    using dnnl::algorithm;
    const std::string& op = node.op_type;
    alg_ = op == "Add" ? algorithm::binary_add : op == "Sub" ? algorithm::binary_sub
         : op == "Mul" ? algorithm::binary_mul : algorithm::binary_div;
    commutative_ = op == "Add" || op == "Mul";
  }

 protected:
  bool run_onednn(KernelContext& ctx) override {
    if (!all_f32(ctx)) return false;
    Tensor a = ctx.input(0).contiguous(), b = ctx.input(1).contiguous();
    Shape out;
    try {
      out = broadcast_shapes(a.shape(), b.shape());
    } catch (const Error&) {
      return false;
    }
    if (shape_numel(out) == 0 || out.size() > 6) return false;
    if (a.shape() != out || a.rank() != static_cast<std::int64_t>(out.size())) {
      if (!commutative_ || b.shape() != out) return false;
      std::swap(a, b);
    }
    Shape bs = b.shape();
    bs.insert(bs.begin(), out.size() - bs.size(), 1);
    Shape& key = key_;  // reused: a key of more than Shape's inline extents would allocate per run
    key = out;
    key.push_back(-1);
    key.insert(key.end(), bs.begin(), bs.end());
    auto it = cache_.find(key);
    if (it == cache_.end()) {
      // The descriptors only where a primitive is made: building one allocates its dims.
      const dnnl::memory::desc a_md = plain_desc(out), b_md = plain_desc(bs);
      try {
        dnnl::binary::desc d(alg_, a_md, b_md, a_md);
        Bound bound(dnnl::binary(dnnl::binary::primitive_desc(d, engine())));
        bound.bind(DNNL_ARG_SRC_0, a_md).bind(DNNL_ARG_SRC_1, b_md).bind(DNNL_ARG_DST, a_md);
        it = cache_.emplace(key, std::move(bound)).first;
      } catch (const dnnl::error&) {
        return false;
      }
    }
    Tensor y = ctx.allocate_output(0, DType::kF32, out);
    it->second.set(DNNL_ARG_SRC_0, a.raw_data());
    it->second.set(DNNL_ARG_SRC_1, b.raw_data());
    it->second.set(DNNL_ARG_DST, y.raw_data());
    it->second.execute();
    stream().wait();
    ctx.outputs[0] = y;
    return true;
  }

 private:
  dnnl::algorithm alg_;
  bool commutative_ = false;
  std::map<Shape, Bound> cache_;
  Shape key_;
};

class SoftmaxKernel final : public FallbackKernel {
 public:
  SoftmaxKernel(const Node& node, const KernelInfo& info)
      : FallbackKernel(node, info), axis_(node.attr_int("axis", info.opset >= 13 ? -1 : 1)), legacy_(info.opset < 13) {
    for (DType d : info.input_dtypes) {
      RW_EXPECTS(d == DType::kF32 || d == DType::kUndefined, Unsupported, "{}: oneDNN softmax needs fp32", node.where());
    }
  }

 protected:
  bool run_onednn(KernelContext& ctx) override {
    if (!all_f32(ctx)) return false;
    const Tensor x = ctx.input(0).contiguous();
    const std::int64_t rank = x.rank();
    if (rank == 0 || x.numel() == 0 || axis_ < -rank || axis_ >= rank) return false;
    const std::int64_t axis = axis_ < 0 ? axis_ + rank : axis_;
    // Softmax over `axis` of [outer, extent, inner] (opset < 13: over everything from axis on).
    std::int64_t outer = 1, extent = 1, inner = 1;
    for (std::int64_t i = 0; i < rank; ++i) {
      if (i < axis) outer *= x.dim(i);
      else if (i == axis || legacy_) extent *= x.dim(i);
      else inner *= x.dim(i);
    }
    const Shape key{outer, extent, inner};
    auto it = cache_.find(key);
    if (it == cache_.end()) {
      const dnnl::memory::desc md({outer, extent, inner}, dt::f32, tag::abc);
      try {
        dnnl::softmax_forward::desc d(dnnl::prop_kind::forward_inference, md, 1);
        Bound b(dnnl::softmax_forward(dnnl::softmax_forward::primitive_desc(d, engine())));
        b.bind(DNNL_ARG_SRC, md).bind(DNNL_ARG_DST, md);
        it = cache_.emplace(key, std::move(b)).first;
      } catch (const dnnl::error&) {
        return false;
      }
    }
    Tensor y = ctx.allocate_output(0, DType::kF32, x.shape());
    it->second.set(DNNL_ARG_SRC, x.raw_data());
    it->second.set(DNNL_ARG_DST, y.raw_data());
    it->second.execute();
    stream().wait();
    ctx.outputs[0] = y;
    return true;
  }

 private:
  std::int64_t axis_;
  bool legacy_;
  std::map<Shape, Bound> cache_;
};

}  // namespace

#define RW_ONEDNN(op, K) RW_REGISTER_PROVIDER_KERNEL(op, Device::kCpu, kProvider, kPriority, make_onednn_factory<K>())
// Relu, Sigmoid and HardSigmoid stay on the reference kernels when they stand alone: oneDNN's
// Relu turns NaN into 0 and its Sigmoid flushes tiny results to 0, where ONNX (and the
// conformance tests) keep them; fused into a Conv or MatMul they are oneDNN post-ops.
RW_ONEDNN("LeakyRelu", UnaryKernel);
RW_ONEDNN("Tanh", UnaryKernel);
RW_ONEDNN("Sqrt", UnaryKernel);
RW_ONEDNN("HardSwish", UnaryKernel);
RW_ONEDNN("Clip", UnaryKernel);
RW_ONEDNN("Add", BinaryKernel);
RW_ONEDNN("Sub", BinaryKernel);
RW_ONEDNN("Mul", BinaryKernel);
RW_ONEDNN("Div", BinaryKernel);
RW_ONEDNN("Softmax", SoftmaxKernel);

}  // namespace redwood::cpu::onednn
