// Conv: hand-computed values, then the im2col/GEMM, pointwise and depthwise paths against a naive
// direct convolution on random shapes (groups, dilations, strides, asymmetric pads, auto_pad,
// 1-D, 2-D and 3-D), and the error paths.

#include <gtest/gtest.h>

#include <vector>

#include "core/error.hpp"
#include "support/test_support.hpp"

namespace redwood {
namespace {

using testing::Ints;
using testing::f32;
using testing::expect_close;
using testing::NodeSpec;
using testing::random_tensor;
using testing::run_node;

Tensor run_conv(std::vector<Tensor> inputs, std::map<std::string, AttributeValue> attrs,
                std::vector<bool> constant = {}) {
  NodeSpec spec;
  spec.op_type = "Conv";
  spec.inputs = std::move(inputs);
  spec.attributes = std::move(attrs);
  spec.constant = std::move(constant);
  return run_node(spec).at(0);
}

// Direct convolution, one output element at a time, in double. pads = [begins..., ends...].
Tensor naive_conv(const Tensor& x, const Tensor& w, const Tensor* b, const Ints& strides,
                  const Ints& pads, const Ints& dilations, std::int64_t group) {
  const std::size_t sp = static_cast<std::size_t>(x.rank() - 2);
  const std::int64_t n_batch = x.dim(0), cin = x.dim(1), cout = w.dim(0);
  const std::int64_t cin_g = cin / group, cout_g = cout / group;
  Shape out_shape{n_batch, cout};
  for (std::size_t i = 0; i < sp; ++i) {
    const std::int64_t ext = (w.dim(2 + i) - 1) * dilations[i] + 1;
    out_shape.push_back((x.dim(2 + i) + pads[i] + pads[sp + i] - ext) / strides[i] + 1);
  }
  Tensor y = Tensor::empty(DType::kF32, out_shape);
  const Strides xs = contiguous_strides(x.shape()), ws = contiguous_strides(w.shape());
  const Strides ys = contiguous_strides(out_shape);
  std::int64_t taps = 1;
  for (std::size_t i = 0; i < sp; ++i) taps *= w.dim(2 + i);
  for (std::int64_t flat = 0; flat < y.numel(); ++flat) {
    Ints idx(out_shape.size());
    for (std::size_t d = 0; d < out_shape.size(); ++d) idx[d] = flat / ys[d] % out_shape[d];
    const std::int64_t n = idx[0], oc = idx[1], g = oc / cout_g;
    double acc = b ? b->data<float>()[oc] : 0.0;
    for (std::int64_t icg = 0; icg < cin_g; ++icg) {
      for (std::int64_t t = 0; t < taps; ++t) {
        std::int64_t rest = t, x_off = n * xs[0] + (g * cin_g + icg) * xs[1];
        std::int64_t w_off = oc * ws[0] + icg * ws[1];
        bool inside = true;
        for (std::size_t i = sp; i-- > 0;) {
          const std::int64_t k = rest % w.dim(2 + i);
          rest /= w.dim(2 + i);
          const std::int64_t pos = idx[2 + i] * strides[i] - pads[i] + k * dilations[i];
          inside = inside && pos >= 0 && pos < x.dim(2 + i);
          x_off += pos * xs[2 + i];
          w_off += k * ws[2 + i];
        }
        if (inside) acc += double(x.data<float>()[x_off]) * double(w.data<float>()[w_off]);
      }
    }
    y.data<float>()[flat] = static_cast<float>(acc);
  }
  return y;
}

struct ConvCase {
  Shape x, w;
  Ints strides, pads, dilations;
  std::int64_t group;
  bool bias;
};

void expect_matches_naive(const ConvCase& c, std::uint32_t seed) {
  const Tensor x = random_tensor(DType::kF32, c.x, -1, 1, seed);
  const Tensor w = random_tensor(DType::kF32, c.w, -1, 1, seed + 1);
  const Tensor b = random_tensor(DType::kF32, {c.w[0]}, -1, 1, seed + 2);
  std::vector<Tensor> inputs{x, w};
  if (c.bias) inputs.push_back(b);
  const Tensor y = run_conv(inputs, {{"strides", c.strides},
                                     {"pads", c.pads},
                                     {"dilations", c.dilations},
                                     {"group", c.group}});
  expect_close(y, naive_conv(x, w, c.bias ? &b : nullptr, c.strides, c.pads, c.dilations, c.group),
               1e-4, 1e-5);
}

TEST(Conv, HandComputedWithPadding) {
  std::vector<float> xv(25);
  for (int i = 0; i < 25; ++i) xv[i] = float(i);
  const Tensor x = f32({1, 1, 5, 5}, xv);
  const Tensor w = f32({1, 1, 3, 3}, std::vector<float>(9, 1.0f));
  const Tensor y = run_conv({x, w}, {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}});
  expect_close(y, f32({1, 1, 5, 5}, {12, 21, 27, 33, 24, 33, 54, 63, 72, 51, 63, 99, 108,
                                     117, 81, 93, 144, 153, 162, 111, 72, 111, 117, 123, 84}));
}

TEST(Conv, HandComputedStridedWithBias) {
  // 1-D: x = [1 2 3 4 5], w = [1 0 -1], stride 2, bias 10: windows [1 2 3], [3 4 5].
  const Tensor y = run_conv({f32({1, 1, 5}, {1, 2, 3, 4, 5}), f32({1, 1, 3}, {1, 0, -1}), f32({1}, {10})},
                            {{"strides", Ints{2}}});
  expect_close(y, f32({1, 1, 2}, {8, 8}));
}

TEST(Conv, Im2colMatchesNaive) {
  expect_matches_naive({{2, 3, 9, 11}, {4, 3, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true}, 10);
  expect_matches_naive({{1, 4, 10, 9}, {6, 2, 3, 2}, {2, 1}, {1, 0, 2, 1}, {2, 3}, 2, true}, 20);
  expect_matches_naive({{1, 6, 8, 8}, {6, 2, 5, 5}, {3, 2}, {2, 2, 2, 2}, {1, 1}, 3, false}, 30);
  // 1x1 with stride 2 is not pointwise: it goes through im2col.
  expect_matches_naive({{1, 5, 7, 7}, {3, 5, 1, 1}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1, true}, 40);
}

TEST(Conv, PointwiseMatchesNaive) {
  expect_matches_naive({{2, 8, 6, 5}, {12, 8, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, true}, 50);
  expect_matches_naive({{1, 8, 6, 5}, {6, 4, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 2, false}, 60);
}

TEST(Conv, DepthwiseMatchesNaive) {
  expect_matches_naive({{2, 4, 9, 10}, {4, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 4, true}, 70);
  expect_matches_naive({{1, 3, 12, 7}, {3, 1, 5, 3}, {1, 2}, {2, 0, 2, 3}, {2, 1}, 3, false}, 80);
  // Channel multiplier 2: output channels 2c and 2c + 1 read input channel c.
  expect_matches_naive({{1, 3, 6, 6}, {6, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 3, true}, 90);
}

TEST(Conv, OneAndThreeSpatialAxesMatchNaive) {
  expect_matches_naive({{2, 4, 17}, {6, 2, 4}, {3}, {2, 1}, {2}, 2, true}, 100);
  expect_matches_naive({{1, 2, 5, 6, 7}, {3, 2, 3, 2, 3}, {1, 2, 1}, {1, 0, 1, 1, 1, 0}, {1, 1, 2}, 1, true}, 110);
  expect_matches_naive({{1, 2, 5, 6, 7}, {2, 1, 3, 3, 3}, {2, 1, 1}, {1, 1, 1, 1, 1, 1}, {1, 1, 1}, 2, false}, 120);
}

TEST(Conv, LargeMatchesNaive) {
  // K = 30 * 9 spans two depth blocks of the GEMM and 20 x 20 pixels two column blocks, so the
  // product runs on several workers. (MatMul's tests cover several row blocks.)
  expect_matches_naive({{2, 30, 20, 20}, {21, 30, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true}, 130);
  // K = 288 and 200 pixels a line: the im2col matrix is built in bands of 18 lines, here 2.
  expect_matches_naive({{1, 32, 60, 200}, {1, 32, 3, 3}, {2, 1}, {1, 1, 1, 1}, {2, 1}, 1, true}, 140);
}

TEST(Conv, AutoPad) {
  const Tensor x = random_tensor(DType::kF32, {1, 2, 7, 8}, -1, 1, 140);
  const Tensor w = random_tensor(DType::kF32, {3, 2, 4, 3}, -1, 1, 141);
  // SAME with stride 2: output ceil(7/2) x ceil(8/2) = 4 x 4; total padding 3 along H
  // ((4-1)*2 + 4 - 7) and 1 along W ((4-1)*2 + 3 - 8); the odd pixel goes at the end for
  // SAME_UPPER, at the beginning for SAME_LOWER.
  expect_close(run_conv({x, w}, {{"auto_pad", std::string("SAME_UPPER")}, {"strides", Ints{2, 2}}}),
               naive_conv(x, w, nullptr, {2, 2}, {1, 0, 2, 1}, {1, 1}, 1), 1e-4, 1e-5);
  expect_close(run_conv({x, w}, {{"auto_pad", std::string("SAME_LOWER")}, {"strides", Ints{2, 2}}}),
               naive_conv(x, w, nullptr, {2, 2}, {2, 1, 1, 0}, {1, 1}, 1), 1e-4, 1e-5);
  // VALID ignores pads.
  expect_close(run_conv({x, w}, {{"auto_pad", std::string("VALID")}, {"pads", Ints{1, 1, 1, 1}}}),
               naive_conv(x, w, nullptr, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1), 1e-4, 1e-5);
}

TEST(Conv, ConstantWeightsAndNonContiguousInput) {
  // X given as a transposed view: the kernel must read it through its strides.
  const Tensor base = random_tensor(DType::kF32, {1, 3, 6, 5}, -1, 1, 150);
  const Tensor xt = Tensor::view(base.raw_data(), DType::kF32, {1, 3, 5, 6}, {90, 30, 1, 5});
  ASSERT_FALSE(xt.is_contiguous());
  const Tensor w = random_tensor(DType::kF32, {2, 3, 3, 3}, -1, 1, 151);
  const Tensor y = run_conv({xt, w}, {{"pads", Ints{1, 1, 1, 1}}}, {false, true});
  expect_close(y, naive_conv(xt.contiguous(), w, nullptr, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1), 1e-4,
               1e-5);
}

TEST(Conv, RejectsBadShapesAtRun) {
  const Tensor x = random_tensor(DType::kF32, {1, 3, 5, 5});
  // W expects 4 input channels.
  EXPECT_THROW(run_conv({x, random_tensor(DType::kF32, {2, 4, 3, 3})}, {}), InvalidArgument);
  // 4 output channels are not divisible by group 3 (and Cin/group = 1 does not match W).
  EXPECT_THROW(run_conv({x, random_tensor(DType::kF32, {4, 1, 3, 3})}, {{"group", std::int64_t{3}}}),
               InvalidArgument);
  // Bias of the wrong length.
  EXPECT_THROW(run_conv({x, random_tensor(DType::kF32, {2, 3, 3, 3}), random_tensor(DType::kF32, {3})}, {}),
               InvalidArgument);
  // Kernel larger than the padded input.
  EXPECT_THROW(run_conv({x, random_tensor(DType::kF32, {2, 3, 7, 7})}, {}), InvalidArgument);
  // kernel_shape disagrees with W.
  EXPECT_THROW(run_conv({x, random_tensor(DType::kF32, {2, 3, 3, 3})}, {{"kernel_shape", Ints{2, 2}}}),
               InvalidArgument);
}

TEST(Conv, RejectsAtLoad) {
  const Tensor x = random_tensor(DType::kF32, {1, 1, 5, 5});
  const Tensor w = random_tensor(DType::kF32, {1, 1, 3, 3});
  EXPECT_THROW(run_conv({x, w}, {{"auto_pad", std::string("SAME_MIDDLE")}}), Unsupported);
  EXPECT_THROW(run_conv({x.cast(DType::kF16), w}, {}), Unsupported);
  // Four spatial axes in a constant weight.
  EXPECT_THROW(run_conv({random_tensor(DType::kF32, {1, 1, 2, 2, 2, 2}),
                         random_tensor(DType::kF32, {1, 1, 1, 1, 1, 1})},
                        {}, {false, true}),
               Unsupported);
}

}  // namespace
}  // namespace redwood
