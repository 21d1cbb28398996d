// Reference unary elementwise kernels against hand-computed values and scalar formulas.

#include "core/error.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace redwood {
namespace {

using testing::f32;
using testing::expect_close;
using testing::NodeSpec;
using testing::random_tensor;
using testing::make_spec;
using testing::run_node;

Tensor run_unary(const std::string& op, const Tensor& x,
                 std::map<std::string, AttributeValue> attrs = {}, std::int64_t opset = 17) {
  NodeSpec spec = make_spec(op, {x}, std::move(attrs));
  spec.opset = opset;
  return run_node(spec).at(0);
}

// Compares an op with a scalar formula on random inputs (large enough to take the parallel path).
template <typename Fn>
void expect_matches_formula(const std::string& op, Fn fn,
                            std::map<std::string, AttributeValue> attrs = {}, double lo = -6,
                            double hi = 6) {
  const Tensor x = random_tensor(DType::kF32, {2, 3, 100, 120}, lo, hi, 7);
  Tensor expected = Tensor::empty(DType::kF32, x.shape());
  for (std::int64_t i = 0; i < x.numel(); ++i) expected.data<float>()[i] = fn(x.data<float>()[i]);
  expect_close(run_unary(op, x, std::move(attrs)), expected, 1e-6, 1e-7);
}

TEST(ElementwiseUnary, Relu) {
  const Tensor y = run_unary("Relu", f32({2, 3}, {-1, 0, 2, -0.5f, 3.5f, -7}));
  expect_close(y, f32({2, 3}, {0, 0, 2, 0, 3.5f, 0}));
}

TEST(ElementwiseUnary, ReluKeepsNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor y = run_unary("Relu", f32({3}, {nan, -1, 1}));
  EXPECT_TRUE(std::isnan(y.data<float>()[0]));
  EXPECT_EQ(y.data<float>()[1], 0.0f);
}

TEST(ElementwiseUnary, ReluInt64) {
  const Tensor y = run_unary("Relu", Tensor::from_vector<std::int64_t>({3}, {-5, 0, 9}));
  EXPECT_EQ(y.to_int64_vector(), (std::vector<std::int64_t>{0, 0, 9}));
}

TEST(ElementwiseUnary, LeakyReluAlpha) {
  expect_close(run_unary("LeakyRelu", f32({3}, {-2, 0, 3})), f32({3}, {-0.02f, 0, 3}));
  expect_close(run_unary("LeakyRelu", f32({3}, {-2, 0, 3}), {{"alpha", 0.5f}}),
               f32({3}, {-1, 0, 3}));
}

TEST(ElementwiseUnary, SigmoidMatchesFormulaAndSaturates) {
  expect_matches_formula("Sigmoid", [](float v) { return 1.0f / (1.0f + std::exp(-v)); });
  const Tensor y = run_unary("Sigmoid", f32({3}, {-100, 0, 100}));
  EXPECT_EQ(y.data<float>()[0], std::exp(-100.0f) / (1.0f + std::exp(-100.0f)));
  EXPECT_EQ(y.data<float>()[1], 0.5f);
  EXPECT_EQ(y.data<float>()[2], 1.0f);
}

TEST(ElementwiseUnary, HardSigmoidDefaultsAndAttributes) {
  expect_close(run_unary("HardSigmoid", f32({4}, {-3, 0, 1, 3})), f32({4}, {0, 0.5f, 0.7f, 1}));
  expect_close(run_unary("HardSigmoid", f32({3}, {-1, 0, 1}), {{"alpha", 0.5f}, {"beta", 0.6f}}),
               f32({3}, {0.1f, 0.6f, 1}));
}

TEST(ElementwiseUnary, HardSwish) {
  // x * clamp(x/6 + 1/2, 0, 1)
  expect_close(run_unary("HardSwish", f32({5}, {-4, -3, 0, 1.5f, 4})),
               f32({5}, {0, 0, 0, 1.5f * 0.75f, 4}));
  expect_matches_formula("HardSwish",
                         [](float v) { return v * std::min(1.0f, std::max(0.0f, v / 6 + 0.5f)); });
}

TEST(ElementwiseUnary, TanhAndSqrt) {
  expect_matches_formula("Tanh", [](float v) { return std::tanh(v); });
  expect_matches_formula(
      "Sqrt", [](float v) { return std::sqrt(v); }, {}, 0, 100);
  const Tensor y = run_unary("Sqrt", f32({2}, {-1, 4}));
  EXPECT_TRUE(std::isnan(y.data<float>()[0]));
  EXPECT_EQ(y.data<float>()[1], 2.0f);
}

TEST(ElementwiseUnary, ClipAttributesBeforeOpset11) {
  const Tensor x = f32({5}, {-3, -1, 0, 1, 3});
  expect_close(run_unary("Clip", x, {{"min", -1.5f}, {"max", 2.0f}}, 9),
               f32({5}, {-1.5f, -1, 0, 1, 2}));
  // Only min: no upper bound.
  expect_close(run_unary("Clip", x, {{"min", 0.0f}}, 6), f32({5}, {0, 0, 0, 1, 3}));
}

TEST(ElementwiseUnary, ClipInputsFromOpset11) {
  const Tensor x = f32({5}, {-3, -1, 0, 1, 3});
  NodeSpec both = make_spec("Clip", {x, Tensor::scalar<float>(-1), Tensor::scalar<float>(1)});
  both.opset = 11;
  expect_close(run_node(both).at(0), f32({5}, {-1, -1, 0, 1, 1}));
  // Absent min (an empty name), given max; constant bounds as initializers.
  NodeSpec max_only = make_spec("Clip", {x, Tensor(), Tensor::scalar<float>(0.5f)});
  max_only.constant = {false, false, true};
  expect_close(run_node(max_only).at(0), f32({5}, {-3, -1, 0, 0.5f, 0.5f}));
  // Neither: identity.
  expect_close(run_node(make_spec("Clip", {x})).at(0), x);
}

TEST(ElementwiseUnary, ClipInt32WithMinAboveMaxGivesMax) {
  NodeSpec spec =
      make_spec("Clip", {Tensor::from_vector<std::int32_t>({3}, {-5, 2, 9}),
                         Tensor::scalar<std::int32_t>(0), Tensor::scalar<std::int32_t>(4)});
  EXPECT_EQ(run_node(spec).at(0).to_int64_vector(), (std::vector<std::int64_t>{0, 2, 4}));
  spec.inputs[1] = Tensor::scalar<std::int32_t>(5);  // min > max: numpy.clip gives max
  EXPECT_EQ(run_node(spec).at(0).to_int64_vector(), (std::vector<std::int64_t>{4, 4, 4}));
}

TEST(ElementwiseUnary, ClipBoundOfOtherTypeIsRejected) {
  NodeSpec spec = make_spec("Clip", {f32({2}, {1, 2}), Tensor::scalar<std::int64_t>(0)});
  EXPECT_THROW(run_node(spec), Error);
}

TEST(ElementwiseUnary, NonContiguousInput) {
  std::vector<float> storage{1, -2, 3, -4, 5, -6};
  // A [3, 2] view of a [2, 3] buffer read column-major: [[1, -4], [-2, 5], [3, -6]].
  const Tensor view = Tensor::view(storage.data(), DType::kF32, {3, 2}, {1, 3});
  expect_close(run_unary("Relu", view), f32({3, 2}, {1, 0, 0, 5, 3, 0}));
}

TEST(ElementwiseUnary, RejectsUnsupportedTypesAtLoad) {
  EXPECT_THROW(run_unary("Sigmoid", Tensor::from_vector<std::int64_t>({1}, {1})), Unsupported);
  EXPECT_THROW(run_unary("Relu", Tensor::from_vector<std::uint8_t>({1}, {1})), Unsupported);
  EXPECT_THROW(run_unary("Clip", Tensor::from_vector<std::int32_t>({1}, {1}), {}, 9), Unsupported);
}

TEST(ElementwiseUnary, EmptyAndScalarTensors) {
  EXPECT_EQ(run_unary("Tanh", Tensor::empty(DType::kF32, {0, 3})).shape(), (Shape{0, 3}));
  expect_close(run_unary("Relu", Tensor::scalar<float>(-2)), Tensor::scalar<float>(0));
}

}  // namespace
}  // namespace redwood
