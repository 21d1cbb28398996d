// Gemm (ONNX opsets 1-22): Y = alpha * op(A) * op(B) + beta * C, with op the optional transpose
// (transA, transB) of a 2-D operand and C optional (opset 11+), broadcast to [M, N]
// (unidirectionally: a scalar, [N], [1, N], [M, 1] or [M, N]); then a fused epilogue
// (epilogue.hpp: residual input 3, activation).

#include "backends/cpu/reference/gemm_kernel.hpp"
#include "backends/cpu/reference/epilogue.hpp"
#include "backends/cpu/reference/kernel_util.hpp"
#include "backends/cpu/reference/nn_common.hpp"

namespace redwood::cpu {
namespace {

class GemmKernel final : public Kernel {
 public:
  GemmKernel(const Node& node, const KernelInfo& info)
      : trans_a_(node.attr_int("transA", 0) != 0),
        trans_b_(node.attr_int("transB", 0) != 0),
        alpha_(node.attr_float("alpha", 1.0f)),
        beta_(node.attr_float("beta", 1.0f)),
        epilogue_(Epilogue::from_node(node)) {
    for (std::size_t i = 0; i < info.input_dtypes.size() && i < 3; ++i) {
      expect_dtype(node, info.input_dtypes[i], {DType::kF32}, i == 0 ? "A" : i == 1 ? "B" : "C");
    }
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor a = ctx.input(0).contiguous();
    const Tensor b = ctx.input(1).contiguous();
    nn::expect_f32(node, a, "A");
    nn::expect_f32(node, b, "B");
    RW_EXPECTS(a.rank() == 2 && b.rank() == 2, InvalidArgument, "{}: A {} and B {} must be 2-D",
               node.where(), shape_str(a.shape()), shape_str(b.shape()));
    const std::int64_t m = trans_a_ ? a.dim(1) : a.dim(0);
    const std::int64_t k = trans_a_ ? a.dim(0) : a.dim(1);
    const std::int64_t kb = trans_b_ ? b.dim(1) : b.dim(0);
    const std::int64_t n = trans_b_ ? b.dim(0) : b.dim(1);
    RW_EXPECTS(k == kb, InvalidArgument,
               "{}: A {} (transA {}) and B {} (transB {}) cannot be multiplied: inner extents {} "
               "and {} differ",
               node.where(), shape_str(a.shape()), int(trans_a_), shape_str(b.shape()),
               int(trans_b_), k, kb);

    Tensor y = ctx.allocate_output(0, DType::kF32, {m, n});
    ctx.outputs[0] = y;
    float* yp = y.data<float>();
    float beta = 0.0f;
    if (ctx.has_input(2) && beta_ != 0.0f) {
      const Tensor c = ctx.input(2).contiguous();
      nn::expect_f32(node, c, "C");
      // C as [rows, cols] with rows in {1, M} and cols in {1, N}.
      const std::int64_t rows = c.rank() == 2 ? c.dim(0) : 1;
      const std::int64_t cols = c.rank() >= 1 ? c.dim(-1) : 1;
      RW_EXPECTS(c.rank() <= 2 && (rows == 1 || rows == m) && (cols == 1 || cols == n),
                 InvalidArgument, "{}: C {} does not broadcast to the result [{}, {}]",
                 node.where(), shape_str(c.shape()), m, n);
      const float* cp = c.data<float>();
      for (std::int64_t i = 0; i < m; ++i) {
        const float* crow = cp + (rows == 1 ? 0 : i * cols);
        float* yrow = yp + i * n;
        if (cols == 1) {
          for (std::int64_t j = 0; j < n; ++j) yrow[j] = beta_ * crow[0];
        } else {
          for (std::int64_t j = 0; j < n; ++j) yrow[j] = beta_ * crow[j];
        }
      }
      beta = 1.0f;
    }
    sgemm(trans_a_, trans_b_, m, n, k, alpha_, a.data<float>(), a.dim(1), b.data<float>(),
          b.dim(1), beta, yp, n);
    finish_epilogue(ctx, epilogue_, y);
  }

 private:
  bool trans_a_, trans_b_;
  float alpha_, beta_;
  Epilogue epilogue_;
};

}  // namespace

RW_REGISTER_KERNEL("Gemm", Device::kCpu, make_factory<GemmKernel>());

}  // namespace redwood::cpu
