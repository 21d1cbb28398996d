// ConvTranspose: hand-computed values, then GEMM + col2im against a naive scatter on random
// shapes (groups, strides, dilations, pads, output_padding, output_shape, auto_pad, 1-D to 3-D),
// and the error paths.

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

Tensor run_convt(std::vector<Tensor> inputs, std::map<std::string, AttributeValue> attrs) {
  NodeSpec spec;
  spec.op_type = "ConvTranspose";
  spec.inputs = std::move(inputs);
  spec.attributes = std::move(attrs);
  return run_node(spec).at(0);
}

// Every input element times every tap, added at out = in * stride - pad_begin + tap * dilation
// when that lies inside `out_spatial`. In double.
Tensor naive_convt(const Tensor& x, const Tensor& w, const Tensor* b, const Ints& strides,
                   const Ints& pad_begin, const Ints& dilations, std::int64_t group,
                   const Ints& out_spatial) {
  const std::size_t sp = static_cast<std::size_t>(x.rank() - 2);
  const std::int64_t n_batch = x.dim(0), cin = x.dim(1), cout_g = w.dim(1);
  const std::int64_t cin_g = cin / group, cout = cout_g * group;
  Shape out_shape{n_batch, cout};
  out_shape.insert(out_shape.end(), out_spatial.begin(), out_spatial.end());
  std::vector<double> acc(static_cast<std::size_t>(shape_numel(out_shape)), 0.0);
  const Strides xs = contiguous_strides(x.shape()), ws = contiguous_strides(w.shape());
  const Strides ys = contiguous_strides(out_shape);
  std::int64_t taps = 1;
  for (std::size_t i = 0; i < sp; ++i) taps *= w.dim(2 + i);
  for (std::int64_t flat = 0; flat < x.numel(); ++flat) {
    Ints idx(x.shape().size());
    for (std::size_t d = 0; d < idx.size(); ++d) idx[d] = flat / xs[d] % x.dim(d);
    const std::int64_t n = idx[0], ic = idx[1], g = ic / cin_g;
    for (std::int64_t ocg = 0; ocg < cout_g; ++ocg) {
      for (std::int64_t t = 0; t < taps; ++t) {
        std::int64_t rest = t, y_off = n * ys[0] + (g * cout_g + ocg) * ys[1];
        std::int64_t w_off = ic * ws[0] + ocg * ws[1];
        bool inside = true;
        for (std::size_t i = sp; i-- > 0;) {
          const std::int64_t k = rest % w.dim(2 + i);
          rest /= w.dim(2 + i);
          const std::int64_t pos = idx[2 + i] * strides[i] - pad_begin[i] + k * dilations[i];
          inside = inside && pos >= 0 && pos < out_spatial[i];
          y_off += pos * ys[2 + i];
          w_off += k * ws[2 + i];
        }
        if (inside) acc[y_off] += double(x.data<float>()[flat]) * double(w.data<float>()[w_off]);
      }
    }
  }
  Tensor y = Tensor::empty(DType::kF32, out_shape);
  for (std::int64_t i = 0; i < y.numel(); ++i) {
    const std::int64_t oc = i / ys[1] % cout;
    y.data<float>()[i] = static_cast<float>(acc[i] + (b ? b->data<float>()[oc] : 0.0));
  }
  return y;
}

TEST(ConvTranspose, HandComputed1d) {
  const Tensor y = run_convt({f32({1, 1, 3}, {0, 1, 2}), f32({1, 2, 3}, {1, 1, 1, 1, 1, 1})}, {});
  expect_close(y, f32({1, 2, 5}, {0, 1, 3, 3, 2, 0, 1, 3, 3, 2}));
}

TEST(ConvTranspose, HandComputedStrideAndBias) {
  // x = [1 2], w = [1 10], stride 3: [1 10 0 2 20], plus bias 0.5.
  const Tensor y = run_convt({f32({1, 1, 2}, {1, 2}), f32({1, 1, 2}, {1, 10}), f32({1}, {0.5f})},
                             {{"strides", Ints{3}}});
  expect_close(y, f32({1, 1, 5}, {1.5f, 10.5f, 0.5f, 2.5f, 20.5f}));
}

TEST(ConvTranspose, PadsOutputPaddingGroupsDilationsMatchNaive) {
  const Tensor x = random_tensor(DType::kF32, {2, 4, 5, 6}, -1, 1, 10);
  const Tensor w = random_tensor(DType::kF32, {4, 3, 3, 2}, -1, 1, 11);
  const Tensor b = random_tensor(DType::kF32, {6}, -1, 1, 12);
  // H: 2 * 4 + 1 + (3 - 1) * 2 + 1 - 1 - 2 = 11; W: 3 * 5 + 0 + 1 * 1 + 1 - 0 - 1 = 16.
  const Tensor y = run_convt({x, w, b}, {{"strides", Ints{2, 3}},
                                         {"dilations", Ints{2, 1}},
                                         {"pads", Ints{1, 0, 2, 1}},
                                         {"output_padding", Ints{1, 0}},
                                         {"group", std::int64_t{2}}});
  expect_close(y, naive_convt(x, w, &b, {2, 3}, {1, 0}, {2, 1}, 2, {11, 16}), 1e-4, 1e-5);
}

TEST(ConvTranspose, OutputShape) {
  const Tensor x = random_tensor(DType::kF32, {1, 2, 3, 3}, -1, 1, 20);
  const Tensor w = random_tensor(DType::kF32, {2, 2, 3, 3}, -1, 1, 21);
  // Full extents 2 * 2 + 3 = 7. Asking for 6 crops 1 (at the beginning: the spec's odd pixel
  // goes first unless SAME_UPPER); asking for 9 leaves 2 positions at the end untouched.
  expect_close(run_convt({x, w}, {{"strides", Ints{2, 2}}, {"output_shape", Ints{6, 9}}}),
               naive_convt(x, w, nullptr, {2, 2}, {1, 0}, {1, 1}, 1, {6, 9}), 1e-4, 1e-5);
  // output_shape with the batch and channel extents in front.
  expect_close(run_convt({x, w}, {{"strides", Ints{2, 2}}, {"output_shape", Ints{1, 2, 5, 7}}}),
               naive_convt(x, w, nullptr, {2, 2}, {1, 0}, {1, 1}, 1, {5, 7}), 1e-4, 1e-5);
}

TEST(ConvTranspose, AutoPad) {
  const Tensor x = random_tensor(DType::kF32, {1, 1, 3, 4}, -1, 1, 30);
  const Tensor w = random_tensor(DType::kF32, {1, 2, 3, 3}, -1, 1, 31);
  // Output in * stride = 6 x 8 of the full 7 x 9: one pixel cropped per axis, at the end for
  // SAME_UPPER and at the beginning for SAME_LOWER.
  expect_close(run_convt({x, w}, {{"strides", Ints{2, 2}}, {"auto_pad", std::string("SAME_UPPER")}}),
               naive_convt(x, w, nullptr, {2, 2}, {0, 0}, {1, 1}, 1, {6, 8}), 1e-4, 1e-5);
  expect_close(run_convt({x, w}, {{"strides", Ints{2, 2}}, {"auto_pad", std::string("SAME_LOWER")}}),
               naive_convt(x, w, nullptr, {2, 2}, {1, 1}, {1, 1}, 1, {6, 8}), 1e-4, 1e-5);
  expect_close(run_convt({x, w}, {{"strides", Ints{2, 2}}, {"auto_pad", std::string("VALID")},
                                  {"pads", Ints{1, 1, 1, 1}}}),
               naive_convt(x, w, nullptr, {2, 2}, {0, 0}, {1, 1}, 1, {7, 9}), 1e-4, 1e-5);
}

TEST(ConvTranspose, OneAndThreeSpatialAxesMatchNaive) {
  const Tensor x1 = random_tensor(DType::kF32, {2, 3, 7}, -1, 1, 40);
  const Tensor w1 = random_tensor(DType::kF32, {3, 2, 4}, -1, 1, 41);
  // 2 * 6 + (4 - 1) * 3 + 1 - 2 - 1 = 19.
  expect_close(run_convt({x1, w1}, {{"strides", Ints{2}}, {"dilations", Ints{3}}, {"pads", Ints{2, 1}}}),
               naive_convt(x1, w1, nullptr, {2}, {2}, {3}, 1, {19}), 1e-4, 1e-5);
  const Tensor x3 = random_tensor(DType::kF32, {1, 2, 3, 4, 2}, -1, 1, 42);
  const Tensor w3 = random_tensor(DType::kF32, {2, 2, 2, 3, 2}, -1, 1, 43);
  const Tensor b3 = random_tensor(DType::kF32, {2}, -1, 1, 44);
  // Extents: 2*2+2 = 6, 1*3+3 = 6, 3*1+2 = 5.
  expect_close(run_convt({x3, w3, b3}, {{"strides", Ints{2, 1, 3}}}),
               naive_convt(x3, w3, &b3, {2, 1, 3}, {0, 0, 0}, {1, 1, 1}, 1, {6, 6, 5}), 1e-4, 1e-5);
}

TEST(ConvTranspose, LargeMatchesNaive) {
  // The DB head's upsampling: 2x2 kernel, stride 2, many input channels.
  const Tensor x = random_tensor(DType::kF32, {1, 64, 12, 14}, -1, 1, 50);
  const Tensor w = random_tensor(DType::kF32, {64, 16, 2, 2}, -1, 1, 51);
  const Tensor b = random_tensor(DType::kF32, {16}, -1, 1, 52);
  expect_close(run_convt({x, w, b}, {{"strides", Ints{2, 2}}}),
               naive_convt(x, w, &b, {2, 2}, {0, 0}, {1, 1}, 1, {24, 28}), 1e-4, 1e-5);
}

TEST(ConvTranspose, RejectsBadShapes) {
  const Tensor x = random_tensor(DType::kF32, {1, 4, 3, 3});
  EXPECT_THROW(run_convt({x, random_tensor(DType::kF32, {3, 2, 3, 3})}, {}), InvalidArgument);
  EXPECT_THROW(run_convt({x, random_tensor(DType::kF32, {4, 2, 3, 3})}, {{"group", std::int64_t{3}}}),
               InvalidArgument);
  EXPECT_THROW(run_convt({x, random_tensor(DType::kF32, {4, 2, 3, 3}), random_tensor(DType::kF32, {3})}, {}),
               InvalidArgument);
  // Pads larger than the output.
  EXPECT_THROW(run_convt({x, random_tensor(DType::kF32, {4, 2, 3, 3})}, {{"pads", Ints{3, 3, 3, 3}}}),
               InvalidArgument);
  EXPECT_THROW(run_convt({x, random_tensor(DType::kF32, {4, 2, 3, 3})}, {{"output_padding", Ints{1}}}),
               InvalidArgument);
}

TEST(ConvTranspose, RejectsAtLoad) {
  const Tensor x = random_tensor(DType::kF32, {1, 1, 3, 3});
  const Tensor w = random_tensor(DType::kF32, {1, 1, 3, 3});
  EXPECT_THROW(run_convt({x, w}, {{"output_padding", Ints{-1, 0}}}), Unsupported);
  EXPECT_THROW(run_convt({x, w}, {{"auto_pad", std::string("FULL")}}), Unsupported);
  EXPECT_THROW(run_convt({x, w.cast(DType::kF16)}, {}), Unsupported);
}

}  // namespace
}  // namespace redwood
