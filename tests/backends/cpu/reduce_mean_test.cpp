// ReduceMean: hand-computed values, axes/keepdims combinations against a naive mean, opset 18's
// axes input and noop_with_empty_axes, and the error paths.

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

Tensor run_mean(std::vector<Tensor> inputs, std::map<std::string, AttributeValue> attrs,
                std::int64_t opset = 13) {
  NodeSpec spec;
  spec.op_type = "ReduceMean";
  spec.inputs = std::move(inputs);
  spec.attributes = std::move(attrs);
  spec.opset = opset;
  return run_node(spec).at(0);
}

// Mean over `axes` (all when empty), accumulating each input element into its output slot.
Tensor naive_mean(const Tensor& x, Ints axes, bool keepdims) {
  const std::int64_t rank = x.rank();
  std::vector<bool> reduced(static_cast<std::size_t>(rank), axes.empty());
  for (auto a : axes) reduced[a < 0 ? a + rank : a] = true;
  Shape kept_shape;  // with reduced axes as 1
  for (std::int64_t i = 0; i < rank; ++i) kept_shape.push_back(reduced[i] ? 1 : x.dim(i));
  std::vector<double> acc(static_cast<std::size_t>(shape_numel(kept_shape)), 0.0);
  const Strides xs = contiguous_strides(x.shape()), ks = contiguous_strides(kept_shape);
  for (std::int64_t flat = 0; flat < x.numel(); ++flat) {
    std::int64_t out = 0;
    for (std::int64_t i = 0; i < rank; ++i) {
      if (!reduced[i]) out += flat / xs[i] % x.dim(i) * ks[i];
    }
    acc[out] += x.data<float>()[flat];
  }
  const double count = double(x.numel()) / double(acc.size());
  std::vector<float> values;
  for (double v : acc) values.push_back(static_cast<float>(v / count));
  Shape out_shape;
  for (std::int64_t i = 0; i < rank; ++i) {
    if (!reduced[i] || keepdims) out_shape.push_back(kept_shape[i]);
  }
  return Tensor::from_vector<float>(out_shape, values);
}

TEST(ReduceMean, HandComputed) {
  const Tensor x = f32({2, 2}, {1, 2, 3, 4});
  expect_close(run_mean({x}, {{"axes", Ints{0}}}), f32({1, 2}, {2, 3}));
  expect_close(run_mean({x}, {{"axes", Ints{1}}, {"keepdims", std::int64_t{0}}}), f32({2}, {1.5f, 3.5f}));
  expect_close(run_mean({x}, {}), f32({1, 1}, {2.5f}));  // no axes: every axis
  expect_close(run_mean({x}, {{"keepdims", std::int64_t{0}}}), f32({}, {2.5f}));
}

TEST(ReduceMean, MatchesNaive) {
  const Tensor x = random_tensor(DType::kF32, {2, 3, 4, 5}, -1, 1, 1);
  for (const Ints& axes : {Ints{1}, Ints{0, 2}, Ints{1, 3}, Ints{-1}, Ints{2, 3}, Ints{0, 1, 2, 3},
                           Ints{0}, Ints{3, 0}, Ints{}}) {
    for (bool keepdims : {true, false}) {
      SCOPED_TRACE(fmt::format("axes [{}] keepdims {}", fmt::join(axes, ", "), keepdims));
      std::map<std::string, AttributeValue> attrs{{"keepdims", std::int64_t{keepdims}}};
      if (!axes.empty()) attrs["axes"] = axes;
      expect_close(run_mean({x}, attrs), naive_mean(x, axes, keepdims));
    }
  }
  // Extent-1 axes between reduced ones.
  const Tensor y = random_tensor(DType::kF32, {3, 1, 4, 1, 2}, -1, 1, 2);
  expect_close(run_mean({y}, {{"axes", Ints{0, 2}}}), naive_mean(y, {0, 2}, true));
  expect_close(run_mean({y}, {{"axes", Ints{1, 4}}, {"keepdims", std::int64_t{0}}}),
               naive_mean(y, {1, 4}, false));
}

TEST(ReduceMean, Opset18AxesInput) {
  const Tensor x = random_tensor(DType::kF32, {2, 3, 4}, -1, 1, 3);
  expect_close(run_mean({x, Tensor::from_vector<std::int64_t>({2}, {0, -1})}, {}, 18),
               naive_mean(x, {0, 2}, true));
  expect_close(run_mean({x}, {{"keepdims", std::int64_t{0}}}, 18), naive_mean(x, {}, false));
  // noop_with_empty_axes: no axes means no reduction.
  expect_close(run_mean({x, Tensor::from_vector<std::int64_t>({0}, {})},
                        {{"noop_with_empty_axes", std::int64_t{1}}}, 18),
               x);
}

TEST(ReduceMean, Rejects) {
  const Tensor x = random_tensor(DType::kF32, {2, 3});
  EXPECT_THROW(run_mean({x}, {{"axes", Ints{2}}}), InvalidArgument);
  EXPECT_THROW(run_mean({x}, {{"axes", Ints{1, -1}}}), InvalidArgument);
  EXPECT_THROW(run_mean({x.cast(DType::kF16)}, {}), Unsupported);
}

}  // namespace
}  // namespace redwood
