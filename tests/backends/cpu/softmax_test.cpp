// Softmax: hand-computed values, both axis conventions (opset < 13 coerces to 2-D at `axis`,
// opset >= 13 normalizes along `axis`) against the formula, and the error paths.

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

Tensor run_softmax(const Tensor& x, std::int64_t opset, std::map<std::string, AttributeValue> attrs = {}) {
  NodeSpec spec;
  spec.op_type = "Softmax";
  spec.inputs = {x};
  spec.attributes = std::move(attrs);
  spec.opset = opset;
  return run_node(spec).at(0);
}

// Softmax of x viewed as [outer, length, inner] along `length`, in double.
Tensor naive_softmax(const Tensor& x, std::int64_t outer, std::int64_t length, std::int64_t inner) {
  Tensor y = Tensor::empty(DType::kF32, x.shape());
  const float* xp = x.data<float>();
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t i = 0; i < inner; ++i) {
      double max = -INFINITY, sum = 0;
      for (std::int64_t l = 0; l < length; ++l) max = std::max(max, double(xp[(o * length + l) * inner + i]));
      for (std::int64_t l = 0; l < length; ++l) sum += std::exp(xp[(o * length + l) * inner + i] - max);
      for (std::int64_t l = 0; l < length; ++l) {
        const std::int64_t at = (o * length + l) * inner + i;
        y.data<float>()[at] = static_cast<float>(std::exp(xp[at] - max) / sum);
      }
    }
  }
  return y;
}

TEST(Softmax, HandComputed) {
  const double e = std::exp(1.0), s = 1 / e + 1 + e;
  expect_close(run_softmax(f32({1, 3}, {-1, 0, 1}), 13),
               f32({1, 3}, {float(1 / e / s), float(1 / s), float(e / s)}));
}

TEST(Softmax, LargeNumbersDoNotOverflow) {
  const Tensor y = run_softmax(f32({2, 4}, {0, 1, 2, 3, 10000, 10001, 10002, 10003}), 13);
  const Tensor small = run_softmax(f32({1, 4}, {0, 1, 2, 3}), 13);
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(y.data<float>()[i], small.data<float>()[i], 1e-7);
    EXPECT_NEAR(y.data<float>()[4 + i], small.data<float>()[i], 1e-7);
  }
}

TEST(Softmax, Opset13AlongOneAxis) {
  const Tensor x = random_tensor(DType::kF32, {3, 4, 5}, -4, 4, 1);
  expect_close(run_softmax(x, 13, {{"axis", std::int64_t{0}}}), naive_softmax(x, 1, 3, 20));
  expect_close(run_softmax(x, 13, {{"axis", std::int64_t{1}}}), naive_softmax(x, 3, 4, 5));
  expect_close(run_softmax(x, 13, {{"axis", std::int64_t{2}}}), naive_softmax(x, 12, 5, 1));
  expect_close(run_softmax(x, 13, {{"axis", std::int64_t{-2}}}), naive_softmax(x, 3, 4, 5));
  expect_close(run_softmax(x, 13), naive_softmax(x, 12, 5, 1));  // default -1
}

TEST(Softmax, BeforeOpset13CoercesTo2d) {
  const Tensor x = random_tensor(DType::kF32, {3, 4, 5}, -4, 4, 2);
  expect_close(run_softmax(x, 11), naive_softmax(x, 3, 20, 1));  // default axis 1: rows of 20
  expect_close(run_softmax(x, 9, {{"axis", std::int64_t{0}}}), naive_softmax(x, 1, 60, 1));
  expect_close(run_softmax(x, 11, {{"axis", std::int64_t{2}}}), naive_softmax(x, 12, 5, 1));
  expect_close(run_softmax(x, 11, {{"axis", std::int64_t{-2}}}), naive_softmax(x, 3, 20, 1));
}

TEST(Softmax, Rejects) {
  const Tensor x = random_tensor(DType::kF32, {3, 4});
  EXPECT_THROW(run_softmax(x, 13, {{"axis", std::int64_t{2}}}), InvalidArgument);
  EXPECT_THROW(run_softmax(x, 13, {{"axis", std::int64_t{-3}}}), InvalidArgument);
  EXPECT_THROW(run_softmax(x.cast(DType::kF16), 13), Unsupported);
}

}  // namespace
}  // namespace redwood
