// Softmax (ONNX opsets 1-22).
//   opset < 13: the input is coerced to 2-D at `axis` (default 1), [prod(dims before axis),
//               prod(dims from axis)], and each row is normalized: the softmax runs over all
//               the axes from `axis` on.
//   opset >= 13: over the one axis `axis` (default -1).
// Either way the data is [outer, length, inner] and the softmax runs along `length`; the
// maximum is subtracted first so that large inputs do not overflow exp.

#include "backends/cpu/reference/kernel_util.hpp"
#include "backends/cpu/reference/nn_common.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace redwood::cpu {
namespace {

class SoftmaxKernel final : public Kernel {
 public:
  SoftmaxKernel(const Node& node, const KernelInfo& info)
      : coerce_2d_(info.opset < 13), axis_(node.attr_int("axis", info.opset < 13 ? 1 : -1)) {
    expect_dtype(node, info.input_dtypes.empty() ? DType::kUndefined : info.input_dtypes[0],
                 {DType::kF32}, "input");
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor x = ctx.input(0).contiguous();
    nn::expect_f32(node, x, "input");
    std::int64_t axis = 0;
    try {
      // Opsets before 13 allow axis == rank (every row one element long).
      axis = coerce_2d_ && axis_ == x.rank() ? axis_ : normalize_axis(axis_, x.rank());
    } catch (const InvalidArgument&) {
      throw InvalidArgument(fmt::format("{}: axis {} is out of range for input {}", node.where(),
                                        axis_, shape_str(x.shape())));
    }
    std::int64_t outer = 1, length = 1, inner = 1;
    for (std::int64_t i = 0; i < x.rank(); ++i) {
      if (i < axis) {
        outer *= x.dim(i);
      } else if (i == axis || coerce_2d_) {
        length *= x.dim(i);
      } else {
        inner *= x.dim(i);
      }
    }

    Tensor y = ctx.allocate_output(0, DType::kF32, x.shape());
    ctx.outputs[0] = y;
    if (y.numel() == 0) return;
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    parallel_for(outer, std::max<std::int64_t>(1, 4096 / (length * inner)),
                 [&](std::int64_t begin, std::int64_t end) {
                   // Running max and sum per inner position; the loops over `inner` vectorize.
                   std::vector<float> max(static_cast<std::size_t>(inner));
                   std::vector<float> sum(static_cast<std::size_t>(inner));
                   for (std::int64_t o = begin; o < end; ++o) {
                     const float* src = xp + o * length * inner;
                     float* dst = yp + o * length * inner;
                     std::fill(max.begin(), max.end(), -std::numeric_limits<float>::infinity());
                     std::fill(sum.begin(), sum.end(), 0.0f);
                     for (std::int64_t l = 0; l < length; ++l) {
                       for (std::int64_t i = 0; i < inner; ++i) {
                         max[i] = std::max(max[i], src[l * inner + i]);
                       }
                     }
                     for (std::int64_t l = 0; l < length; ++l) {
                       for (std::int64_t i = 0; i < inner; ++i) {
                         const float e = std::exp(src[l * inner + i] - max[i]);
                         dst[l * inner + i] = e;
                         sum[i] += e;
                       }
                     }
                     for (std::int64_t l = 0; l < length; ++l) {
                       for (std::int64_t i = 0; i < inner; ++i) dst[l * inner + i] /= sum[i];
                     }
                   }
                 });
  }

 private:
  bool coerce_2d_;
  std::int64_t axis_;
};

}  // namespace

RW_REGISTER_KERNEL("Softmax", Device::kCpu, make_factory<SoftmaxKernel>());

}  // namespace redwood::cpu
