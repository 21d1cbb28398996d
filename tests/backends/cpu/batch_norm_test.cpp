// BatchNormalization (inference): hand-computed values, the formula on random data, and the
// training-mode rejections.

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.hpp"
#include "support/test_support.hpp"

namespace redwood {
namespace {

using testing::f32;
using testing::expect_close;
using testing::NodeSpec;
using testing::random_tensor;
using testing::run_node;

NodeSpec bn_spec(std::vector<Tensor> inputs, std::map<std::string, AttributeValue> attrs = {},
                 std::int64_t opset = 15) {
  NodeSpec spec;
  spec.op_type = "BatchNormalization";
  spec.inputs = std::move(inputs);
  spec.attributes = std::move(attrs);
  spec.opset = opset;
  return spec;
}

TEST(BatchNorm, HandComputed) {
  // Channel 0: (x - 1) / 1 * 1 + 0; channel 1: (x - 3) / 2 * 2 + 1.
  const Tensor y = run_node(bn_spec({f32({1, 2, 1, 2}, {1, 2, 3, 4}), f32({2}, {1, 2}),
                                     f32({2}, {0, 1}), f32({2}, {1, 3}), f32({2}, {1, 4})},
                                    {{"epsilon", 0.0f}}))
                       .at(0);
  expect_close(y, f32({1, 2, 1, 2}, {0, 1, 1, 2}));
}

void expect_formula(const Shape& shape, float epsilon, std::int64_t opset) {
  const std::int64_t c = shape[1];
  const Tensor x = random_tensor(DType::kF32, shape, -3, 3, 1);
  const Tensor scale = random_tensor(DType::kF32, {c}, -2, 2, 2);
  const Tensor bias = random_tensor(DType::kF32, {c}, -1, 1, 3);
  const Tensor mean = random_tensor(DType::kF32, {c}, -1, 1, 4);
  const Tensor var = random_tensor(DType::kF32, {c}, 0.01, 2, 5);
  const Tensor y =
      run_node(bn_spec({x, scale, bias, mean, var}, {{"epsilon", epsilon}}, opset)).at(0);
  Tensor expected = Tensor::empty(DType::kF32, shape);
  const std::int64_t inner = x.numel() / (shape[0] * c);
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const std::int64_t ch = i / inner % c;
    const double v = (double(x.data<float>()[i]) - mean.data<float>()[ch]) /
                         std::sqrt(double(var.data<float>()[ch]) + epsilon) *
                         scale.data<float>()[ch] +
                     bias.data<float>()[ch];
    expected.data<float>()[i] = static_cast<float>(v);
  }
  expect_close(y, expected, 1e-5, 1e-6);
}

TEST(BatchNorm, MatchesFormula) {
  expect_formula({2, 3, 4, 5}, 1e-5f, 15);
  expect_formula({3, 7}, 1e-3f, 9);              // [N, C]
  expect_formula({1, 4, 3, 2, 5}, 0.5f, 14);     // 3 spatial axes
}

TEST(BatchNorm, RejectsTraining) {
  const Tensor x = random_tensor(DType::kF32, {1, 2, 3, 3});
  const Tensor p = f32({2}, {1, 1});
  EXPECT_THROW(run_node(bn_spec({x, p, p, p, p}, {{"training_mode", std::int64_t{1}}})),
               Unsupported);
  NodeSpec three = bn_spec({x, p, p, p, p});
  three.num_outputs = 3;
  EXPECT_THROW(run_node(three), Unsupported);
  EXPECT_THROW(run_node(bn_spec({x, p, p, p, p}, {{"spatial", std::int64_t{0}}}, 7)), Unsupported);
  EXPECT_THROW(run_node(bn_spec({x.cast(DType::kF16), p, p, p, p})), Unsupported);
}

TEST(BatchNorm, RejectsBadShapes) {
  const Tensor x = random_tensor(DType::kF32, {1, 2, 3, 3});
  const Tensor p = f32({2}, {1, 1});
  EXPECT_THROW(run_node(bn_spec({x, p, p, f32({3}, {0, 0, 0}), p})), InvalidArgument);
  EXPECT_THROW(run_node(bn_spec({f32({2}, {1, 2}), p, p, p, p})), InvalidArgument);
}

}  // namespace
}  // namespace redwood
