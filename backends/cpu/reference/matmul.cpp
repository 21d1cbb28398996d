// MatMul (ONNX opsets 1-22): numpy.matmul. The last two axes are the matrices; leading (batch)
// axes broadcast; a 1-D A is a row vector [1, K] and a 1-D B a column vector [K, 1], the added
// axis being dropped from the result.
//
// When B has no batch axes, the batch of A folds into the rows of one GEMM (a linear layer over
// a sequence becomes one [batch * M, K] x [K, N] product); otherwise one GEMM per batch entry,
// the entries spread over the workers. Optional Redwood extensions (from the optimizer): input 2,
// a bias over the last axis, and a fused epilogue (epilogue.hpp: residual input 3, activation).

#include "backends/cpu/reference/gemm_kernel.hpp"
#include "backends/cpu/reference/epilogue.hpp"
#include "backends/cpu/reference/kernel_util.hpp"
#include "backends/cpu/reference/nn_common.hpp"

#include <vector>

namespace redwood::cpu {
namespace {

class MatMulKernel final : public Kernel {
 public:
  MatMulKernel(const Node& node, const KernelInfo& info) : epilogue_(Epilogue::from_node(node)) {
    for (std::size_t i = 0; i < info.input_dtypes.size() && i < 2; ++i) {
      expect_dtype(node, info.input_dtypes[i], {DType::kF32}, i == 0 ? "A" : "B");
    }
  }

  void run(KernelContext& ctx) override {
    compute(ctx);
    Tensor& y = ctx.outputs[0];
    if (ctx.has_input(2)) {
      // Fused bias over the last axis.
      const Tensor bias = ctx.input(2).contiguous();
      nn::expect_f32(ctx.node, bias, "bias");
      const std::int64_t n = y.rank() > 0 ? y.dim(-1) : 1;
      RW_EXPECTS(bias.numel() == n, InvalidArgument, "{}: the fused bias {} does not match the output {}",
                 ctx.node.where(), shape_str(bias.shape()), shape_str(y.shape()));
      const float* bp = bias.data<float>();
      float* yp = y.data<float>();
      for (std::int64_t i = 0, rows = y.numel() / std::max<std::int64_t>(n, 1); i < rows; ++i) {
        for (std::int64_t j = 0; j < n; ++j) yp[i * n + j] += bp[j];
      }
    }
    finish_epilogue(ctx, epilogue_, y);
  }

 private:
  void compute(KernelContext& ctx) {
    const Node& node = ctx.node;
    const Tensor a = ctx.input(0).contiguous();
    const Tensor b = ctx.input(1).contiguous();
    nn::expect_f32(node, a, "A");
    nn::expect_f32(node, b, "B");
    RW_EXPECTS(a.rank() >= 1 && b.rank() >= 1, InvalidArgument,
               "{}: A {} and B {} must have rank 1 or more", node.where(), shape_str(a.shape()),
               shape_str(b.shape()));

    // Matrix views of both operands: [..., M, K] and [..., K, N].
    Shape as = a.shape(), bs = b.shape();
    if (a.rank() == 1) as.insert(as.begin(), 1);
    if (b.rank() == 1) bs.push_back(1);
    const std::int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
    RW_EXPECTS(bs[bs.size() - 2] == k, InvalidArgument,
               "{}: A {} and B {} cannot be multiplied (inner extents {} and {} differ)",
               node.where(), shape_str(a.shape()), shape_str(b.shape()), k, bs[bs.size() - 2]);
    const Shape a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2);
    Shape batch;
    try {
      batch = broadcast_shapes(a_batch, b_batch);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(fmt::format("{}: the batch axes of A {} and B {} do not broadcast",
                                        node.where(), shape_str(a.shape()),
                                        shape_str(b.shape())));
    }

    Shape out_shape = batch;
    if (a.rank() > 1) out_shape.push_back(m);
    if (b.rank() > 1) out_shape.push_back(n);
    Tensor y = ctx.allocate_output(0, DType::kF32, out_shape);
    ctx.outputs[0] = y;
    if (y.numel() == 0) return;
    const float* ap = a.data<float>();
    const float* bp = b.data<float>();
    float* yp = y.data<float>();
    const std::int64_t batches = shape_numel(batch);

    if (b_batch.empty() || shape_numel(b_batch) == 1) {
      // B is one matrix for every batch entry; A's batch entries are contiguous rows.
      sgemm(false, false, batches * m, n, k, 1.0f, ap, k, bp, n, 0.0f, yp, n);
      return;
    }

    // Element offsets of each batch entry in A and B (stride 0 along broadcast axes).
    auto batch_strides = [&](const Shape& own, std::int64_t matrix) {
      Strides strides(batch.size(), 0);
      std::int64_t stride = matrix;
      for (std::size_t i = 0; i < own.size(); ++i) {
        const std::size_t axis = own.size() - 1 - i;
        const std::size_t out_axis = batch.size() - 1 - i;
        if (own[axis] != 1) strides[out_axis] = stride;
        stride *= own[axis];
      }
      return strides;
    };
    const Strides a_strides = batch_strides(a_batch, m * k);
    const Strides b_strides = batch_strides(b_batch, k * n);
    parallel_for(batches, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t e = begin; e < end; ++e) {
        std::int64_t a_off = 0, b_off = 0, rest = e;
        for (std::size_t i = batch.size(); i-- > 0;) {
          const std::int64_t idx = rest % batch[i];
          rest /= batch[i];
          a_off += idx * a_strides[i];
          b_off += idx * b_strides[i];
        }
        sgemm(false, false, m, n, k, 1.0f, ap + a_off, k, bp + b_off, n, 0.0f, yp + e * m * n, n);
      }
    });
  }

  Epilogue epilogue_;
};

}  // namespace

RW_REGISTER_KERNEL("MatMul", Device::kCpu, make_factory<MatMulKernel>());

}  // namespace redwood::cpu
