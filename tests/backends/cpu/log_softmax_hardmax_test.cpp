// LogSoftmax and Hardmax (Softmax's walk, softmax.cpp): LogSoftmax against the log of Softmax
// under both axis conventions and for large inputs, Hardmax's first-maximum rule (ties, NaN,
// coerced rows before opset 13), and the error paths. ONNX's node tests cover opset 13 only.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/error.hpp"
#include "support/test_support.hpp"

namespace redwood {
namespace {

using testing::expect_close;
using testing::f32;
using testing::NodeSpec;
using testing::random_tensor;
using testing::run_node;

Tensor run_op(const std::string& op, const Tensor& x, std::int64_t opset,
              std::map<std::string, AttributeValue> attrs = {}) {
  NodeSpec spec = testing::make_spec(op, {x}, std::move(attrs));
  spec.opset = opset;
  return run_node(spec).at(0);
}

Tensor log_of(const Tensor& t) {
  Tensor y = t.clone();
  for (float& v : y.values<float>()) v = std::log(v);
  return y;
}

TEST(LogSoftmax, IsTheLogOfSoftmaxUnderBothAxisConventions) {
  const Tensor x = random_tensor(DType::kF32, {3, 4, 5}, -4, 4, 3);
  for (std::int64_t opset : {11, 13}) {
    for (std::int64_t axis : {0, 1, 2, -1}) {
      SCOPED_TRACE(::testing::Message() << "opset " << opset << " axis " << axis);
      const std::map<std::string, AttributeValue> attrs{{"axis", axis}};
      expect_close(run_op("LogSoftmax", x, opset, attrs),
                   log_of(run_op("Softmax", x, opset, attrs)), 1e-5, 1e-5);
    }
  }
}

TEST(LogSoftmax, LargeAndFarApartInputsStayFinite) {
  // exp(-200) underflows in float: a log of the softmax would give -inf.
  expect_close(run_op("LogSoftmax", f32({1, 3}, {10000, 10001, 9800}), 13),
               f32({1, 3}, {-1.3132617f, -0.3132617f, -201.31326f}));
}

TEST(Hardmax, FirstMaximumWins) {
  expect_close(run_op("Hardmax", f32({2, 4}, {1, 3, 3, 0, -1, -2, -1, -5}), 13),
               f32({2, 4}, {0, 1, 0, 0, 1, 0, 0, 0}));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  expect_close(run_op("Hardmax", f32({1, 3}, {1, nan, 5}), 13), f32({1, 3}, {0, 1, 0}));
}

TEST(Hardmax, AlongOneAxisOrCoercedRows) {
  // [2, 2, 2]: opset 13 along axis 1 picks per (n, k); opset 11 with axis 1 picks one of each
  // row of 4.
  const Tensor x = f32({2, 2, 2}, {1, 5, 2, 0, 7, 3, 4, 9});
  expect_close(run_op("Hardmax", x, 13, {{"axis", std::int64_t{1}}}),
               f32({2, 2, 2}, {0, 1, 1, 0, 1, 0, 0, 1}));
  expect_close(run_op("Hardmax", x, 11, {{"axis", std::int64_t{1}}}),
               f32({2, 2, 2}, {0, 1, 0, 0, 0, 0, 0, 1}));
  expect_close(run_op("Hardmax", x, 11), run_op("Hardmax", x, 11, {{"axis", std::int64_t{1}}}));
}

TEST(SoftmaxFamily, Rejects) {
  const Tensor x = random_tensor(DType::kF32, {3, 4});
  EXPECT_THROWS_SAYING(run_op("LogSoftmax", x, 13, {{"axis", std::int64_t{2}}}), InvalidArgument,
                       "node 'LogSoftmax_0' (LogSoftmax)", "axis 2 is out of range");
  EXPECT_THROWS_SAYING(run_op("Hardmax", x, 13, {{"axis", std::int64_t{-3}}}), InvalidArgument,
                       "node 'Hardmax_0' (Hardmax)", "axis -3");
  EXPECT_THROWS_SAYING(run_op("Hardmax", x.cast(DType::kF16), 13), Unsupported, "float16");
  EXPECT_THROWS_SAYING(run_op("LogSoftmax", x.cast(DType::kF16), 13), Unsupported, "float16");
}

}  // namespace
}  // namespace redwood
