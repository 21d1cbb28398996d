// MatMul (numpy batching; the fused bias of input 2 and residual of input 3) and Gemm (alpha,
// beta, transA/B, broadcast C; residual input 3) on the GPU: exact fp32 on CUDA cores, or
// tensor cores at the runner's tf32/fp16/bf16 precision (matmul.cu). Products of at most
// kGemvMaxRows rows (32: a classifier at batch 1 to 32) take the matrix-vector kernel instead (gemv.cu),
// exact at every precision: they are bound by reading the weights, which a 64×64 tile does slowly.

#include "backends/cuda/cuda_kernel.hpp"
#include "backends/cuda/kernels/elementwise/fused_epilogue.hpp"
#include "backends/cuda/kernels/matmul/gemv.hpp"
#include "backends/cuda/kernels/matmul/matmul.hpp"
#include "core/error.hpp"

#include <fmt/format.h>

namespace redwood::cuda {
namespace {

kernels::MmaType operand_type(Precision p) {
  switch (p) {
    case Precision::kTf32: return kernels::MmaType::kTf32;
    case Precision::kFp16: return kernels::MmaType::kFp16;
    case Precision::kBf16: return kernels::MmaType::kBf16;
    default: return kernels::MmaType::kFp32;
  }
}

// The matrix-vector parameters of Y = op(A) · op(B) over `rows` rows of one group, from the
// tiled kernel's strides (C, alpha and beta included; the epilogue is bound per launch).
kernels::GemvParams gemv_params(const kernels::GemmParams& p, std::int64_t rows) {
  kernels::GemvParams g;
  g.rows = static_cast<int>(rows);
  g.n = p.n;
  g.k = p.k;
  g.a_group = rows;
  g.a_m = p.a_m;
  g.a_k = p.a_k;
  g.w_k = p.b_k;
  g.w_n = p.b_n;
  g.y_group = rows;
  g.y_m = p.n;
  g.y_n = 1;
  g.c = p.c;
  g.c_m = p.c_m;
  g.c_n = p.c_n;
  g.alpha = p.alpha;
  g.beta = p.beta;
  return g;
}

// What a product's variant() says: the matrix-vector kernel, or the tiles and their engine.
/// Binds a launch's run-time operands to GemmParams or GemvParams: the fused activation, input 2
/// (MatMul's fused bias, or Gemm's C) and input 3 (the fused residual).
enum class Input2 { kBias, kC, kNone };

template <typename Params>
Params bind_operands(Params p, const kernels::Epilogue& act, const LaunchArgs& a, Input2 input2) {
  p.epilogue = act;
  if (a.inputs.size() > 2 && input2 == Input2::kBias) p.epilogue.bias = static_cast<const float*>(a.inputs[2].data);
  if (input2 == Input2::kC) p.c = static_cast<const float*>(a.inputs[2].data);
  if (a.inputs.size() > 3) p.epilogue.residual = static_cast<const float*>(a.inputs[3].data);
  return p;
}

std::string matrix_variant(const Node& node, bool gemv, int rows, kernels::MmaType type, int k) {
  if (gemv) return fmt::format("{}: gemv, {} row{} (exact fp32)", node.where(), rows, rows == 1 ? "" : "s");
  const bool exact = type == kernels::MmaType::kFp32 || k <= 16;  // launch_gemm's rule for K ≤ 16
  return fmt::format("{}: {} 64x64 tiles", node.where(), exact ? "CUDA cores" : "mma.sync");
}

class MatMulKernel final : public CudaKernel {
 public:
  MatMulKernel(const Node& node, const KernelInfo& info) : node_(node), act_(fused_activation(node)) {
    for (DType t : info.input_dtypes) expect_f32(node, t);
  }

  std::vector<TensorDesc> plan(const PlanInfo& info) override {
    Shape a = info.input(0).shape, b = info.input(1).shape;
    expect_f32(node_, info.input(0).dtype);
    expect_f32(node_, info.input(1).dtype);
    RW_EXPECTS(!a.empty() && !b.empty(), InvalidArgument, "{}: MatMul of a scalar", node_.where());
    const bool a_vec = a.size() == 1, b_vec = b.size() == 1;
    if (a_vec) a.insert(a.begin(), 1);
    if (b_vec) b.push_back(1);
    const std::int64_t m = a[a.size() - 2], k = a.back(), n = b.back();
    RW_EXPECTS(b[b.size() - 2] == k, InvalidArgument, "{}: MatMul of {} and {}", node_.where(),
               shape_str(info.input(0).shape), shape_str(info.input(1).shape));
    // Numpy batch broadcasting: Y's batch dims, each operand's stride along them (0 where the
    // operand has extent 1 or lacks the axis).
    const Shape a_batch(a.begin(), a.end() - 2), b_batch(b.begin(), b.end() - 2);
    const Shape batch = broadcast_shapes(a_batch, b_batch);
    const std::int64_t count = shape_numel(batch);
    RW_EXPECTS(batch.size() <= static_cast<std::size_t>(kernels::kMaxDims), Unsupported, "{}: {} batch dimensions",
               node_.where(), batch.size());
    batches_ = {};
    batches_.rank = static_cast<int>(batch.size());
    auto batch_strides = [&](const Shape& own, std::int64_t matrix, long long* out) {
      std::int64_t stride = matrix;
      for (std::size_t d = own.size(); d-- > 0;) {
        out[batch.size() - own.size() + d] = own[d] == 1 ? 0 : stride;
        stride *= own[d];
      }
    };
    for (std::size_t d = 0; d < batch.size(); ++d) batches_.dims[d] = batch[d];
    batch_strides(a_batch, m * k, batches_.a_strides);
    batch_strides(b_batch, k * n, batches_.b_strides);
    p_ = {};
    p_.batch = static_cast<int>(count);
    p_.m = static_cast<int>(m);
    p_.n = static_cast<int>(n);
    p_.k = static_cast<int>(k);
    p_.a_m = k;
    p_.a_k = 1;
    p_.b_k = n;
    p_.b_n = 1;
    type_ = operand_type(info.precision);
    RW_EXPECTS(count <= 65535, Unsupported, "{}: {} batches", node_.where(), count);
    Shape y = batch;
    if (!a_vec) y.push_back(m);
    if (!b_vec) y.push_back(n);
    if (info.has_input(2)) {
      RW_EXPECTS(shape_numel(info.input(2).shape) == n, InvalidArgument, "{}: fused bias {} for {} columns",
                 node_.where(), shape_str(info.input(2).shape), n);
    }
    check_fused_residual(info, y);
    // A few rows by a B without batches (a classifier at batch ≤ 32): the matrix-vector kernel, the
    // batches folded into rows (A and Y are contiguous [batch..., M, K] and [batch..., M, N]).
    bool b_batched = false;
    for (int d = 0; d < batches_.rank; ++d) b_batched = b_batched || batches_.b_strides[d] != 0;
    const std::int64_t rows = count * m;
    gemv_ = !b_batched && rows >= 1 && rows <= kernels::kGemvMaxRows;
    gemv_p_ = gemv_ ? gemv_params(p_, rows) : kernels::GemvParams{};
    gemv_p_.w_constant = info.input(1).host != nullptr;  // an initializer: read before pdl_wait (pdl.cuh)
    return {{DType::kF32, y}};
  }

  std::string variant() const override { return matrix_variant(node_, gemv_, gemv_p_.rows, type_, p_.k); }

  void launch(const LaunchArgs& a) override {
    if (gemv_) {
      kernels::launch_gemv(bind_operands(gemv_p_, act_, a, Input2::kBias), static_cast<const float*>(a.inputs[0].data),
                           static_cast<const float*>(a.inputs[1].data), static_cast<float*>(a.outputs[0].data), a.stream);
      return;
    }
    kernels::launch_gemm(type_, bind_operands(p_, act_, a, Input2::kBias), batches_, static_cast<const float*>(a.inputs[0].data),
                         static_cast<const float*>(a.inputs[1].data), static_cast<float*>(a.outputs[0].data), a.stream);
  }

 private:
  const Node& node_;
  kernels::Epilogue act_;
  kernels::GemmParams p_{};
  kernels::GemmBatches batches_{};
  kernels::MmaType type_ = kernels::MmaType::kFp32;
  bool gemv_ = false;           // launch() runs the matrix-vector kernel with gemv_p_
  kernels::GemvParams gemv_p_{};
};

class GemmKernel final : public CudaKernel {
 public:
  GemmKernel(const Node& node, const KernelInfo& info) : node_(node), act_(fused_activation(node)) {
    for (DType t : info.input_dtypes) expect_f32(node, t);
  }

  std::vector<TensorDesc> plan(const PlanInfo& info) override {
    const Shape& a = info.input(0).shape;
    const Shape& b = info.input(1).shape;
    RW_EXPECTS(a.size() == 2 && b.size() == 2, InvalidArgument, "{}: Gemm of {} and {}", node_.where(), shape_str(a),
               shape_str(b));
    const bool ta = node_.attr_int("transA", 0) != 0, tb = node_.attr_int("transB", 0) != 0;
    const std::int64_t m = ta ? a[1] : a[0], k = ta ? a[0] : a[1];
    const std::int64_t kb = tb ? b[1] : b[0], n = tb ? b[0] : b[1];
    RW_EXPECTS(k == kb, InvalidArgument, "{}: Gemm of {} and {} (transA {}, transB {})", node_.where(), shape_str(a),
               shape_str(b), ta, tb);
    p_ = {};
    p_.batch = 1;
    p_.m = static_cast<int>(m);
    p_.n = static_cast<int>(n);
    p_.k = static_cast<int>(k);
    p_.a_m = ta ? 1 : a[1];
    p_.a_k = ta ? a[1] : 1;
    p_.b_k = tb ? 1 : b[1];
    p_.b_n = tb ? b[1] : 1;
    p_.alpha = node_.attr_float("alpha", 1.f);
    p_.beta = node_.attr_float("beta", 1.f);
    type_ = operand_type(info.precision);
    has_c_ = info.has_input(2);
    if (has_c_) {
      const Shape& c = info.input(2).shape;
      RW_EXPECTS(c.size() <= 2, InvalidArgument, "{}: C is {}", node_.where(), shape_str(c));
      Shape c2(2 - c.size(), 1);
      c2.insert(c2.end(), c.begin(), c.end());
      RW_EXPECTS((c2[0] == 1 || c2[0] == m) && (c2[1] == 1 || c2[1] == n), InvalidArgument,
                 "{}: C {} does not broadcast to [{}, {}]", node_.where(), shape_str(c), m, n);
      p_.c_m = c2[0] == 1 ? 0 : c2[1];
      p_.c_n = c2[1] == 1 ? 0 : 1;
    }
    const Shape y = {m, n};
    check_fused_residual(info, y);
    gemv_ = m >= 1 && m <= kernels::kGemvMaxRows;  // a classifier at batch ≤ 32: the matrix-vector kernel
    gemv_p_ = gemv_ ? gemv_params(p_, m) : kernels::GemvParams{};
    gemv_p_.w_constant = info.input(1).host != nullptr;  // an initializer: read before pdl_wait (pdl.cuh)
    return {{DType::kF32, y}};
  }

  std::string variant() const override { return matrix_variant(node_, gemv_, gemv_p_.rows, type_, p_.k); }

  void launch(const LaunchArgs& a) override {
    if (gemv_) {
      kernels::launch_gemv(bind_operands(gemv_p_, act_, a, c_input()), static_cast<const float*>(a.inputs[0].data),
                           static_cast<const float*>(a.inputs[1].data), static_cast<float*>(a.outputs[0].data), a.stream);
      return;
    }
    kernels::launch_gemm(type_, bind_operands(p_, act_, a, c_input()), kernels::GemmBatches{}, static_cast<const float*>(a.inputs[0].data),
                         static_cast<const float*>(a.inputs[1].data), static_cast<float*>(a.outputs[0].data), a.stream);
  }

 private:
  const Node& node_;
  kernels::Epilogue act_;
  kernels::GemmParams p_{};
  kernels::MmaType type_ = kernels::MmaType::kFp32;
  bool has_c_ = false;
  Input2 c_input() const { return has_c_ ? Input2::kC : Input2::kNone; }
  bool gemv_ = false;  // launch() runs the matrix-vector kernel with gemv_p_
  kernels::GemvParams gemv_p_{};
};

}  // namespace

RW_REGISTER_CUDA_KERNEL("MatMul", MatMulKernel);
RW_REGISTER_CUDA_KERNEL("Gemm", GemmKernel);

}  // namespace redwood::cuda
