// LRN, local response normalization across channels (ONNX opsets 1-13), float only. For X of
// shape [N, C, D1, ...]:
//     square_sum[n, c, d] = sum of X[n, i, d]^2 over i in [c - floor((size - 1) / 2),
//                                                         c + ceil((size - 1) / 2)] within [0, C)
//     Y[n, c, d] = X[n, c, d] / (bias + alpha / size * square_sum[n, c, d])^beta
// size is required; alpha defaults to 1e-4, beta to 0.75, bias to 1.

#include "backends/cpu/reference/kernel_util.hpp"
#include "backends/cpu/reference/nn_common.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace redwood::cpu {
namespace {

class LrnKernel final : public Kernel {
 public:
  LrnKernel(const Node& node, const KernelInfo& info)
      : size_(node.attr_int("size", 0)),
        alpha_(node.attr_float("alpha", 1e-4f)),
        beta_(node.attr_float("beta", 0.75f)),
        bias_(node.attr_float("bias", 1.0f)) {
    expect_dtype(node, info.input_dtypes.empty() ? DType::kUndefined : info.input_dtypes[0], {DType::kF32}, "X");
    RW_EXPECTS(size_ > 0, InvalidArgument, "{}: size must be given and positive, got {}", node.where(), size_);
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor x = ctx.input(0).contiguous();
    nn::expect_f32(node, x, "X");
    RW_EXPECTS(x.rank() >= 3, InvalidArgument, "{}: X {} must be [N, C, D1, ...], rank 3 or more", node.where(),
               shape_str(x.shape()));
    Tensor y = ctx.allocate_output(0, DType::kF32, x.shape());
    ctx.outputs[0] = y;
    if (y.numel() == 0) return;
    const std::int64_t channels = x.dim(1);
    const std::int64_t plane = x.numel() / (x.dim(0) * channels);
    const std::int64_t before = (size_ - 1) / 2, after = size_ - 1 - before;
    const double scale = double(alpha_) / double(size_);
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    parallel_for(x.dim(0) * channels, std::max<std::int64_t>(1, 16384 / (plane * size_)),
                 [&](std::int64_t begin, std::int64_t end) {
                   std::vector<double> sum(static_cast<std::size_t>(plane));
                   for (std::int64_t p = begin; p < end; ++p) {
                     const std::int64_t n = p / channels, c = p % channels;
                     std::fill(sum.begin(), sum.end(), 0.0);
                     const std::int64_t lo = std::max<std::int64_t>(0, c - before);
                     const std::int64_t hi = std::min(channels - 1, c + after);
                     for (std::int64_t i = lo; i <= hi; ++i) {
                       const float* src = xp + (n * channels + i) * plane;
                       for (std::int64_t j = 0; j < plane; ++j) sum[j] += double(src[j]) * src[j];
                     }
                     const float* src = xp + p * plane;
                     float* dst = yp + p * plane;
                     for (std::int64_t j = 0; j < plane; ++j) {
                       dst[j] = static_cast<float>(src[j] / std::pow(bias_ + scale * sum[j], double(beta_)));
                     }
                   }
                 });
  }

 private:
  std::int64_t size_;
  float alpha_;
  float beta_;
  float bias_;
};

}  // namespace

RW_REGISTER_KERNEL("LRN", Device::kCpu, make_factory<LrnKernel>());

}  // namespace redwood::cpu
