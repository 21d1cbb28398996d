// MaxPool, AveragePool, GlobalAveragePool and GlobalMaxPool: hand-computed values, a naive
// pooling on random shapes (pads, strides, dilations, ceil_mode, auto_pad, count_include_pad, 1-D
// to 3-D), and the error paths.

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
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

NodeSpec pool_spec(const std::string& op, const Tensor& x,
                   std::map<std::string, AttributeValue> attrs, std::int64_t opset = 12) {
  NodeSpec spec;
  spec.op_type = op;
  spec.inputs = {x};
  spec.attributes = std::move(attrs);
  spec.opset = opset;
  return spec;
}

Tensor run_pool(const std::string& op, const Tensor& x, std::map<std::string, AttributeValue> attrs) {
  return run_node(pool_spec(op, x, std::move(attrs))).at(0);
}

// Pools every output position over its window; `out` are the output spatial extents and pads
// [begins..., ends...] the padding they imply.
Tensor naive_pool(bool max, const Tensor& x, const Ints& kernel, const Ints& strides,
                  const Ints& pads, const Ints& dilations, bool count_include_pad, const Ints& out) {
  const std::size_t sp = kernel.size();
  Shape out_shape{x.dim(0), x.dim(1)};
  out_shape.insert(out_shape.end(), out.begin(), out.end());
  Tensor y = Tensor::empty(DType::kF32, out_shape);
  const Strides xs = contiguous_strides(x.shape()), ys = contiguous_strides(out_shape);
  std::int64_t taps = 1;
  for (auto k : kernel) taps *= k;
  for (std::int64_t flat = 0; flat < y.numel(); ++flat) {
    Ints idx(out_shape.size());
    for (std::size_t d = 0; d < idx.size(); ++d) idx[d] = flat / ys[d] % out_shape[d];
    double best = -std::numeric_limits<double>::infinity(), sum = 0;
    std::int64_t inside_count = 0, padded_count = 0;
    for (std::int64_t t = 0; t < taps; ++t) {
      std::int64_t rest = t, off = idx[0] * xs[0] + idx[1] * xs[1];
      bool inside = true, in_padded = true;
      for (std::size_t i = sp; i-- > 0;) {
        const std::int64_t k = rest % kernel[i];
        rest /= kernel[i];
        const std::int64_t pos = idx[2 + i] * strides[i] - pads[i] + k * dilations[i];
        inside = inside && pos >= 0 && pos < x.dim(2 + i);
        in_padded = in_padded && pos >= -pads[i] && pos < x.dim(2 + i) + pads[sp + i];
        off += pos * xs[2 + i];
      }
      padded_count += in_padded;
      if (!inside) continue;
      ++inside_count;
      const double v = x.data<float>()[off];
      best = std::max(best, v);
      sum += v;
    }
    y.data<float>()[flat] =
        static_cast<float>(max ? best : sum / double(count_include_pad ? padded_count : inside_count));
  }
  return y;
}

TEST(MaxPool, HandComputed) {
  std::vector<float> v(16);
  for (int i = 0; i < 16; ++i) v[i] = float(i);
  expect_close(run_pool("MaxPool", f32({1, 1, 4, 4}, v), {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}}),
               f32({1, 1, 2, 2}, {5, 7, 13, 15}));
}

TEST(MaxPool, CeilModeDropsWindowsStartingInPadding) {
  const Tensor x = f32({1, 1, 5}, {1, 2, 3, 4, 5});
  expect_close(run_pool("MaxPool", x, {{"kernel_shape", Ints{2}}, {"strides", Ints{2}}, {"ceil_mode", std::int64_t{1}}}),
               f32({1, 1, 3}, {2, 4, 5}));
  expect_close(run_pool("MaxPool", x, {{"kernel_shape", Ints{2}}, {"strides", Ints{2}}}),
               f32({1, 1, 2}, {2, 4}));
  // in 4, pad end 1: ceil((4 + 1 - 2) / 2) + 1 = 3 windows, but the third would start at 4, in
  // the padding, so it is dropped.
  expect_close(run_pool("MaxPool", f32({1, 1, 4}, {1, 2, 3, 4}),
                        {{"kernel_shape", Ints{2}}, {"strides", Ints{2}}, {"pads", Ints{0, 1}},
                         {"ceil_mode", std::int64_t{1}}}),
               f32({1, 1, 2}, {2, 4}));
}

TEST(MaxPool, MatchesNaive) {
  const Tensor x = random_tensor(DType::kF32, {2, 3, 11, 9}, -1, 1, 10);
  expect_close(run_pool("MaxPool", x, {{"kernel_shape", Ints{3, 2}}, {"strides", Ints{2, 1}},
                                       {"pads", Ints{1, 0, 2, 1}}, {"dilations", Ints{2, 3}}}),
               naive_pool(true, x, {3, 2}, {2, 1}, {1, 0, 2, 1}, {2, 3}, false, {5, 7}));
  // SAME_UPPER, stride 2: output 6 x 5, total padding 1 along both axes (at the end).
  expect_close(run_pool("MaxPool", x, {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}},
                                       {"auto_pad", std::string("SAME_UPPER")}}),
               naive_pool(true, x, {2, 2}, {2, 2}, {0, 0, 1, 1}, {1, 1}, false, {6, 5}));
  expect_close(run_pool("MaxPool", x, {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{1, 1}},
                                       {"auto_pad", std::string("SAME_LOWER")}}),
               naive_pool(true, x, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, false, {11, 9}));
  const Tensor x3 = random_tensor(DType::kF32, {1, 2, 5, 6, 4}, -1, 1, 11);
  expect_close(run_pool("MaxPool", x3, {{"kernel_shape", Ints{2, 3, 2}}, {"strides", Ints{1, 2, 2}}}),
               naive_pool(true, x3, {2, 3, 2}, {1, 2, 2}, {0, 0, 0, 0, 0, 0}, {1, 1, 1}, false, {4, 2, 2}));
}

TEST(MaxPool, Uint8) {
  const Tensor x = Tensor::from_vector<std::uint8_t>({1, 1, 2, 3}, {1, 200, 3, 4, 5, 255});
  const Tensor y = run_pool("MaxPool", x, {{"kernel_shape", Ints{2, 2}}, {"pads", Ints{0, 0, 0, 1}}});
  ASSERT_EQ(y.dtype(), DType::kU8);
  expect_close(y, Tensor::from_vector<std::uint8_t>({1, 1, 1, 3}, {200, 255, 255}));
}

TEST(AveragePool, HandComputedCountIncludePad) {
  // 2 x 2 ones, kernel 3, pads 1: every window holds the 4 ones, over 9 padded taps or 4 real.
  const Tensor x = f32({1, 1, 2, 2}, {1, 1, 1, 1});
  const std::map<std::string, AttributeValue> attrs{{"kernel_shape", Ints{3, 3}},
                                                    {"pads", Ints{1, 1, 1, 1}}};
  expect_close(run_pool("AveragePool", x, attrs), f32({1, 1, 2, 2}, {1, 1, 1, 1}));
  auto with_pad = attrs;
  with_pad["count_include_pad"] = std::int64_t{1};
  const float v = 4.0f / 9.0f;
  expect_close(run_pool("AveragePool", x, with_pad), f32({1, 1, 2, 2}, {v, v, v, v}));
}

TEST(AveragePool, CeilMode) {
  // The last window holds only 5.
  expect_close(run_pool("AveragePool", f32({1, 1, 5}, {1, 2, 3, 4, 5}),
                        {{"kernel_shape", Ints{2}}, {"strides", Ints{2}}, {"ceil_mode", std::int64_t{1}}}),
               f32({1, 1, 3}, {1.5f, 3.5f, 5}));
}

TEST(AveragePool, MatchesNaive) {
  const Tensor x = random_tensor(DType::kF32, {2, 3, 10, 9}, -1, 1, 20);
  for (bool include : {false, true}) {
    expect_close(run_pool("AveragePool", x, {{"kernel_shape", Ints{3, 4}}, {"strides", Ints{2, 3}},
                                             {"pads", Ints{1, 2, 2, 0}},
                                             {"count_include_pad", std::int64_t{include}}}),
                 naive_pool(false, x, {3, 4}, {2, 3}, {1, 2, 2, 0}, {1, 1}, include, {6, 3}));
  }
  expect_close(run_pool("AveragePool", x, {{"kernel_shape", Ints{2, 3}}, {"auto_pad", std::string("SAME_LOWER")}}),
               naive_pool(false, x, {2, 3}, {1, 1}, {1, 1, 0, 1}, {1, 1}, false, {10, 9}));
  const Tensor x1 = random_tensor(DType::kF32, {1, 4, 13}, -1, 1, 21);
  expect_close(run_pool("AveragePool", x1, {{"kernel_shape", Ints{4}}, {"strides", Ints{3}}}),
               naive_pool(false, x1, {4}, {3}, {0, 0}, {1}, false, {4}));
  const Tensor x3 = random_tensor(DType::kF32, {1, 2, 4, 5, 6}, -1, 1, 22);
  expect_close(run_pool("AveragePool", x3, {{"kernel_shape", Ints{2, 2, 3}}, {"pads", Ints{1, 0, 1, 1, 0, 1}},
                                            {"count_include_pad", std::int64_t{1}}}),
               naive_pool(false, x3, {2, 2, 3}, {1, 1, 1}, {1, 0, 1, 1, 0, 1}, {1, 1, 1}, true, {5, 4, 6}));
}

TEST(GlobalAveragePool, MatchesMean) {
  const Tensor x = random_tensor(DType::kF32, {2, 3, 4, 5}, -1, 1, 30);
  Tensor expected = Tensor::empty(DType::kF32, {2, 3, 1, 1});
  for (std::int64_t p = 0; p < 6; ++p) {
    double sum = 0;
    for (std::int64_t i = 0; i < 20; ++i) sum += x.data<float>()[p * 20 + i];
    expected.data<float>()[p] = static_cast<float>(sum / 20);
  }
  expect_close(run_pool("GlobalAveragePool", x, {}), expected);
  expect_close(run_pool("GlobalAveragePool", f32({1, 2, 3}, {1, 2, 3, 4, 5, 9}), {}), f32({1, 2, 1}, {2, 6}));
}

TEST(GlobalMaxPool, MaxOfEachPlane) {
  expect_close(run_pool("GlobalMaxPool", f32({1, 2, 3}, {1, -2, 3, -4, -5, -9}), {}), f32({1, 2, 1}, {3, -4}));
  expect_close(run_pool("GlobalMaxPool", f32({2, 1, 1, 2, 2}, {1, 7, 3, 4, -1, -2, -3, -4}), {}),
               f32({2, 1, 1, 1, 1}, {7, -1}));
}

TEST(Pool, RejectsAtLoad) {
  const Tensor x = random_tensor(DType::kF32, {1, 1, 4, 4});
  NodeSpec indices = pool_spec("MaxPool", x, {{"kernel_shape", Ints{2, 2}}});
  indices.num_outputs = 2;
  EXPECT_THROW(run_node(indices), Unsupported);
  EXPECT_THROW(run_pool("MaxPool", x, {}), Unsupported);  // kernel_shape is required
  EXPECT_THROW(run_pool("MaxPool", x, {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{0, 1}}}), Unsupported);
  EXPECT_THROW(run_pool("AveragePool", x.cast(DType::kU8), {{"kernel_shape", Ints{2, 2}}}), Unsupported);
  EXPECT_THROW(run_pool("GlobalAveragePool", x.cast(DType::kF16), {}), Unsupported);
  EXPECT_THROW(run_pool("GlobalMaxPool", x.cast(DType::kF16), {}), Unsupported);
}

TEST(Pool, RejectsBadShapes) {
  const Tensor x = random_tensor(DType::kF32, {1, 1, 4, 4});
  EXPECT_THROW(run_pool("MaxPool", x, {{"kernel_shape", Ints{2}}}), InvalidArgument);
  EXPECT_THROW(run_pool("AveragePool", x, {{"kernel_shape", Ints{5, 5}}}), InvalidArgument);
  EXPECT_THROW(run_pool("MaxPool", f32({2, 2}, {1, 2, 3, 4}), {{"kernel_shape", Ints{2}}}), InvalidArgument);
}

}  // namespace
}  // namespace redwood
