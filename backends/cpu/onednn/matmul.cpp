// MatMul and Gemm on oneDNN's matmul primitive (fp32), with the fused epilogue: MatMul's bias
// (input 2, over the last axis) or Gemm's C ([N] or [1, N], times beta) as the primitive's bias,
// the residual (input 3, the output's shape) as a sum post-op, the activation as eltwise.
// MatMul's batch axes broadcast (ranks 2 and up); 1-D operands go to the reference kernel.

#include "backends/cpu/onednn/onednn_common.hpp"

#include <cstring>

namespace redwood::cpu::onednn {
namespace {

class MatMulKernel final : public FallbackKernel {
 public:
  MatMulKernel(const Node& node, const KernelInfo& info)
      : FallbackKernel(node, info), gemm_(node.op_type == "Gemm"), epilogue_(Epilogue::from_node(node)) {
    for (DType d : info.input_dtypes) {
      RW_EXPECTS(d == DType::kF32 || d == DType::kUndefined, Unsupported, "{}: oneDNN matmul needs fp32", node.where());
    }
    if (gemm_) {
      trans_a_ = node.attr_int("transA", 0) != 0;
      trans_b_ = node.attr_int("transB", 0) != 0;
      alpha_ = node.attr_float("alpha", 1.0f);
      beta_ = node.attr_float("beta", 1.0f);
    }
    dnnl::post_ops po;
    RW_EXPECTS(append_activation(po, epilogue_), Unsupported, "{}: activation", node.where());
  }

 protected:
  bool run_onednn(KernelContext& ctx) override {
    if (!all_f32(ctx)) return false;
    const Tensor a = ctx.input(0).contiguous(), b = ctx.input(1).contiguous();
    if (a.rank() < 2 || b.rank() < 2) return false;
    if (gemm_ && (a.rank() != 2 || b.rank() != 2 || alpha_ == 0.0f)) return false;
    Tensor bias;
    if (ctx.has_input(2)) {
      bias = ctx.input(2).contiguous();
      if (gemm_ && beta_ == 0.0f) bias = Tensor();
    }
    const Tensor residual = residual_input(ctx);
    Shape& key = key_;  // reused: a key of more than Shape's inline extents would allocate per run
    key = a.shape();
    key.push_back(-1);
    key.insert(key.end(), b.shape().begin(), b.shape().end());
    key.push_back(bias.defined() ? bias.numel() : -1);
    key.push_back(residual.defined() ? 1 : 0);
    auto it = cache_.find(key);
    if (it == cache_.end()) {
      Entry e;
      if (!build(a.shape(), b.shape(), bias, residual.defined(), e)) return false;
      it = cache_.emplace(key, std::move(e)).first;
    }
    Entry& e = it->second;
    if (residual.defined() && residual.shape() != e.out_shape) return false;
    Tensor y = ctx.allocate_output(0, DType::kF32, e.out_shape);
    if (residual.defined()) {
      const Tensor r = residual.contiguous();
      std::memcpy(y.raw_data(), r.raw_data(), r.nbytes());
    }
    e.prim.set(DNNL_ARG_SRC, a.raw_data());
    e.prim.set(DNNL_ARG_WEIGHTS, b.raw_data());
    e.prim.set(DNNL_ARG_DST, y.raw_data());
    Tensor scaled_bias;
    if (bias.defined()) {
      scaled_bias = bias;
      // oneDNN scales the bias with the output scale: dst = alpha * (A B + bias).
      if (gemm_ && beta_ != alpha_) {
        scaled_bias = bias.clone();
        for (float& v : scaled_bias.values<float>()) v *= beta_ / alpha_;
      }
      e.prim.set(DNNL_ARG_BIAS, scaled_bias.raw_data());
    }
    e.prim.execute();
    stream().wait();
    ctx.outputs[0] = y;
    return true;
  }

 private:
  struct Entry {
    Bound prim;
    dnnl::memory::desc a_md, b_md, y_md, bias_md;
    Shape out_shape;
  };

  bool build(Shape as, Shape bs, const Tensor& bias, bool residual, Entry& e) {
    const std::size_t rank = std::max(as.size(), bs.size());
    Shape a_full = as, b_full = bs;
    a_full.insert(a_full.begin(), rank - as.size(), 1);
    b_full.insert(b_full.begin(), rank - bs.size(), 1);
    std::int64_t m, k, kb, n;
    dims a_strides(rank), b_strides(rank);
    auto plain_strides = [](const Shape& s) {
      dims st(s.size(), 1);
      for (std::size_t i = s.size() - 1; i-- > 0;) st[i] = st[i + 1] * s[i + 1];
      return st;
    };
    if (gemm_) {
      m = trans_a_ ? as[1] : as[0];
      k = trans_a_ ? as[0] : as[1];
      kb = trans_b_ ? bs[1] : bs[0];
      n = trans_b_ ? bs[0] : bs[1];
      a_strides = trans_a_ ? dims{1, as[1]} : dims{as[1], 1};
      b_strides = trans_b_ ? dims{1, bs[1]} : dims{bs[1], 1};
      a_full = {m, k};
      b_full = {kb, n};
    } else {
      m = a_full[rank - 2], k = a_full[rank - 1], kb = b_full[rank - 2], n = b_full[rank - 1];
      a_strides = plain_strides(a_full);
      b_strides = plain_strides(b_full);
    }
    if (k != kb) return false;
    Shape out(rank);
    for (std::size_t i = 0; i + 2 < rank; ++i) {
      if (a_full[i] != b_full[i] && a_full[i] != 1 && b_full[i] != 1) return false;
      out[i] = std::max(a_full[i], b_full[i]);
      if (a_full[i] == 0 || b_full[i] == 0) return false;
    }
    out[rank - 2] = m;
    out[rank - 1] = n;
    if (shape_numel(out) == 0 || k == 0) return false;
    if (bias.defined()) {
      // [N] or [1, N] (Gemm's C may not be [M, N] or [M, 1] here).
      if (bias.numel() != n || (bias.rank() >= 1 && bias.shape().back() != n)) return false;
      if (n == 1 && bias.rank() >= 1 && bias.shape().front() != 1 && bias.rank() == 2) return false;
    }
    e.out_shape = Shape(out.begin(), out.end());
    // Gemm: only the 2-D shape counts; MatMul with a lower-rank operand: dropped leading axes.
    if (!gemm_ && as.size() < rank) e.out_shape = out;
    e.a_md = dnnl::memory::desc(dims(a_full.begin(), a_full.end()), dt::f32, a_strides);
    e.b_md = dnnl::memory::desc(dims(b_full.begin(), b_full.end()), dt::f32, b_strides);
    e.y_md = plain_desc(out);
    dims bias_dims(rank, 1);
    bias_dims[rank - 1] = n;
    e.bias_md = plain_desc(Shape(bias_dims.begin(), bias_dims.end()));
    dnnl::primitive_attr attr;
    if (alpha_ != 1.0f) attr.set_output_scales(0, {alpha_});
    dnnl::post_ops po;
    if (residual) po.append_sum(1.f);
    append_activation(po, epilogue_);
    attr.set_post_ops(po);
    try {
      auto d = bias.defined() ? dnnl::matmul::desc(e.a_md, e.b_md, e.bias_md, e.y_md)
                              : dnnl::matmul::desc(e.a_md, e.b_md, e.y_md);
      e.prim = Bound(dnnl::matmul(dnnl::matmul::primitive_desc(d, attr, engine())));
    } catch (const dnnl::error&) {
      return false;
    }
    e.prim.bind(DNNL_ARG_SRC, e.a_md).bind(DNNL_ARG_WEIGHTS, e.b_md).bind(DNNL_ARG_DST, e.y_md);
    if (bias.defined()) e.prim.bind(DNNL_ARG_BIAS, e.bias_md);
    return true;
  }

  bool gemm_;
  bool trans_a_ = false, trans_b_ = false;
  float alpha_ = 1.0f, beta_ = 1.0f;
  Epilogue epilogue_;
  std::map<Shape, Entry> cache_;
  Shape key_;
};

}  // namespace

RW_REGISTER_PROVIDER_KERNEL("MatMul", Device::kCpu, kProvider, kPriority, make_onednn_factory<MatMulKernel>());
RW_REGISTER_PROVIDER_KERNEL("Gemm", Device::kCpu, kProvider, kPriority, make_onednn_factory<MatMulKernel>());

}  // namespace redwood::cpu::onednn
