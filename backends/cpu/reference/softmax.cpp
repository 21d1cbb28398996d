// Softmax, LogSoftmax and Hardmax (ONNX opsets 1-22), which share their axis semantics:
//   opset < 13: the input is coerced to 2-D at `axis` (default 1), [prod(dims before axis),
//               prod(dims from axis)], and each row is one unit: the op runs over all the axes
//               from `axis` on.
//   opset >= 13: over the one axis `axis` (default -1).
// Either way the data is [outer, length, inner] and the op runs along `length` (softmax_along,
// declared in softmax.hpp for SoftmaxCrossEntropyLoss too). Softmax and LogSoftmax subtract the
// maximum first so that large inputs do not overflow exp; LogSoftmax is x - max - log(sum), never
// the log of a softmax that underflowed to 0. Hardmax is 1 at the first maximum along the axis.

#include "backends/cpu/reference/softmax.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/reference/kernel_util.hpp"
#include "backends/cpu/reference/nn_common.hpp"

namespace redwood::cpu {
namespace {

// Per-worker scratch, one value per inner position.
struct Scratch {
  explicit Scratch(std::int64_t inner)
      : best(static_cast<std::size_t>(inner)),
        acc(static_cast<std::size_t>(inner)),
        arg(static_cast<std::size_t>(inner)) {}
  std::vector<float> best;        // running maximum
  std::vector<float> acc;         // running sum of exponentials
  std::vector<std::int64_t> arg;  // Hardmax: where the first maximum is
};

void hardmax_block(const float* src, float* dst, std::int64_t length, std::int64_t inner,
                   Scratch& s) {
  std::copy(src, src + inner, s.best.begin());
  std::fill(s.arg.begin(), s.arg.end(), 0);
  for (std::int64_t l = 1; l < length; ++l) {
    for (std::int64_t i = 0; i < inner; ++i) {
      const float v = src[l * inner + i];
      if (v > s.best[i] || (std::isnan(v) && !std::isnan(s.best[i]))) {
        s.best[i] = v;
        s.arg[i] = l;
      }
    }
  }
  std::fill(dst, dst + length * inner, 0.0f);
  for (std::int64_t i = 0; i < inner; ++i) dst[s.arg[i] * inner + i] = 1.0f;
}

// One [length, inner] block of Softmax or LogSoftmax. The loops over `inner` vectorize.
void softmax_block(SoftmaxFn fn, const float* src, float* dst, std::int64_t length,
                   std::int64_t inner, Scratch& s) {
  std::vector<float>& best = s.best;
  std::vector<float>& acc = s.acc;
  std::fill(best.begin(), best.end(), -std::numeric_limits<float>::infinity());
  std::fill(acc.begin(), acc.end(), 0.0f);
  for (std::int64_t l = 0; l < length; ++l) {
    for (std::int64_t i = 0; i < inner; ++i) best[i] = std::max(best[i], src[l * inner + i]);
  }
  if (fn == SoftmaxFn::kSoftmax) {
    for (std::int64_t l = 0; l < length; ++l) {
      for (std::int64_t i = 0; i < inner; ++i) {
        const float e = std::exp(src[l * inner + i] - best[i]);
        dst[l * inner + i] = e;
        acc[i] += e;
      }
    }
    for (std::int64_t l = 0; l < length; ++l) {
      for (std::int64_t i = 0; i < inner; ++i) dst[l * inner + i] /= acc[i];
    }
    return;
  }
  for (std::int64_t l = 0; l < length; ++l) {
    for (std::int64_t i = 0; i < inner; ++i) acc[i] += std::exp(src[l * inner + i] - best[i]);
  }
  // (x - max) first: max + log(sum) would round away the small differences of large inputs.
  for (std::int64_t i = 0; i < inner; ++i) acc[i] = std::log(acc[i]);
  for (std::int64_t l = 0; l < length; ++l) {
    for (std::int64_t i = 0; i < inner; ++i)
      dst[l * inner + i] = (src[l * inner + i] - best[i]) - acc[i];
  }
}

template <SoftmaxFn Fn>
class SoftmaxFamilyKernel final : public Kernel {
 public:
  SoftmaxFamilyKernel(const Node& node, const KernelInfo& info)
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
    softmax_along(Fn, x.data<float>(), y.data<float>(), outer, length, inner);
  }

 private:
  bool coerce_2d_;
  std::int64_t axis_;
};

}  // namespace

void softmax_along(SoftmaxFn fn, const float* x, float* y, std::int64_t outer, std::int64_t length,
                   std::int64_t inner) {
  if (outer * length * inner == 0) return;
  parallel_for(outer, std::max<std::int64_t>(1, 4096 / (length * inner)),
               [&](std::int64_t begin, std::int64_t end) {
                 Scratch scratch(inner);
                 for (std::int64_t o = begin; o < end; ++o) {
                   const float* src = x + o * length * inner;
                   float* dst = y + o * length * inner;
                   if (fn == SoftmaxFn::kHardmax) {
                     hardmax_block(src, dst, length, inner, scratch);
                   } else {
                     softmax_block(fn, src, dst, length, inner, scratch);
                   }
                 }
               });
}

RW_REGISTER_KERNEL("Softmax", Device::kCpu,
                   make_factory<SoftmaxFamilyKernel<SoftmaxFn::kSoftmax>>());
RW_REGISTER_KERNEL("LogSoftmax", Device::kCpu,
                   make_factory<SoftmaxFamilyKernel<SoftmaxFn::kLogSoftmax>>());
RW_REGISTER_KERNEL("Hardmax", Device::kCpu,
                   make_factory<SoftmaxFamilyKernel<SoftmaxFn::kHardmax>>());

}  // namespace redwood::cpu
