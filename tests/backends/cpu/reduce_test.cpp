// The Reduce ops besides ReduceMean (reduce_mean_test.cpp): what the ONNX node tests leave out:
// reductions over an empty set, integer types, ReduceLogSumExp of large values, NaN in
// ReduceMax, the axes input of opset 18, and the error paths.

#include "core/error.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

namespace redwood {
namespace {

using testing::expect_close;
using testing::f32;
using testing::i64;
using testing::Ints;
using testing::make_spec;
using testing::NodeSpec;
using testing::run_node;

constexpr float kInf = std::numeric_limits<float>::infinity();

Tensor reduce(const std::string& op, std::vector<Tensor> inputs, std::map<std::string, AttributeValue> attrs = {},
              std::int64_t opset = 13) {
  NodeSpec spec = make_spec(op, std::move(inputs), std::move(attrs));
  spec.opset = opset;
  return run_node(spec).at(0);
}

// ReduceSum takes axes as an input from opset 13; the others as an attribute until opset 18.
Tensor reduce_axes(const std::string& op, const Tensor& x, Ints axes, std::int64_t keepdims = 1) {
  if (op == "ReduceSum") return reduce(op, {x, i64(axes)}, {{"keepdims", keepdims}});
  return reduce(op, {x}, {{"axes", axes}, {"keepdims", keepdims}});
}

TEST(Reduce, HandComputed) {
  const Tensor x = f32({2, 3}, {1, -2, 3, -4, 5, -6});
  expect_close(reduce_axes("ReduceSum", x, {1}), f32({2, 1}, {2, -5}));
  expect_close(reduce_axes("ReduceProd", x, {0}, 0), f32({3}, {-4, -10, -18}));
  expect_close(reduce_axes("ReduceMax", x, {1}, 0), f32({2}, {3, 5}));
  expect_close(reduce_axes("ReduceMin", x, {0}, 0), f32({3}, {-4, -2, -6}));
  expect_close(reduce_axes("ReduceL1", x, {1}, 0), f32({2}, {6, 15}));
  expect_close(reduce_axes("ReduceL2", x, {0}, 0), f32({3}, {std::sqrt(17.0f), std::sqrt(29.0f), std::sqrt(45.0f)}));
  expect_close(reduce_axes("ReduceSumSquare", x, {1}, 0), f32({2}, {14, 77}));
  expect_close(reduce_axes("ReduceLogSum", f32({2, 2}, {1, 2, 3, 4}), {1}, 0), f32({2}, {std::log(3.0f), std::log(7.0f)}));
  expect_close(reduce_axes("ReduceLogSumExp", f32({2}, {0, 0}), {0}, 0), f32({}, {std::log(2.0f)}));
}

TEST(Reduce, LogSumExpOfLargeValuesStaysFinite) {
  const Tensor r = reduce_axes("ReduceLogSumExp", f32({2, 2}, {1000, 1000, -1000, -kInf}), {1}, 0);
  expect_close(r, f32({2}, {1000 + std::log(2.0f), -1000}));
  EXPECT_EQ(reduce_axes("ReduceLogSumExp", f32({2}, {-kInf, -kInf}), {0}, 0).data<float>()[0], -kInf);
}

TEST(Reduce, MaxAndMinPropagateNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = f32({2, 3}, {1, nan, 3, 4, 5, 6});
  const Tensor mx = reduce_axes("ReduceMax", x, {1}, 0);
  EXPECT_TRUE(std::isnan(mx.data<float>()[0]));
  EXPECT_EQ(mx.data<float>()[1], 6.0f);
  EXPECT_TRUE(std::isnan(reduce_axes("ReduceMin", x, {0}, 0).data<float>()[1]));
}

// Each reduction of nothing is its identity.
TEST(Reduce, EmptySetGivesTheIdentity) {
  const Tensor x = Tensor::empty(DType::kF32, {2, 0, 3});
  auto first = [&](const std::string& op) {
    const Tensor r = reduce_axes(op, x, {1}, 0);
    EXPECT_EQ(shape_str(r.shape()), "[2, 3]") << op;
    return r.data<float>()[0];
  };
  EXPECT_EQ(first("ReduceSum"), 0.0f);
  EXPECT_EQ(first("ReduceProd"), 1.0f);
  EXPECT_EQ(first("ReduceMax"), -kInf);
  EXPECT_EQ(first("ReduceMin"), kInf);
  EXPECT_EQ(first("ReduceL1"), 0.0f);
  EXPECT_EQ(first("ReduceL2"), 0.0f);
  EXPECT_EQ(first("ReduceSumSquare"), 0.0f);
  EXPECT_EQ(first("ReduceLogSum"), -kInf);
  EXPECT_EQ(first("ReduceLogSumExp"), -kInf);
  EXPECT_TRUE(std::isnan(first("ReduceMean")));
  // Integers: the type's extremes.
  const Tensor xi = Tensor::empty(DType::kI32, {0, 2});
  EXPECT_EQ(reduce_axes("ReduceMax", xi, {0}, 0).data<std::int32_t>()[0], std::numeric_limits<std::int32_t>::lowest());
  EXPECT_EQ(reduce_axes("ReduceMin", xi, {0}, 0).data<std::int32_t>()[1], std::numeric_limits<std::int32_t>::max());
}

TEST(Reduce, IntegerTypes) {
  const Tensor x = i64({2, 3}, {1, -2, 3, 4, 5, 6});
  EXPECT_EQ(reduce_axes("ReduceSum", x, {1}, 0).to_int64_vector(), (Ints{2, 15}));
  EXPECT_EQ(reduce_axes("ReduceProd", x, {0}, 0).to_int64_vector(), (Ints{4, -10, 18}));
  const Tensor x32 = x.cast(DType::kI32);
  const Tensor m = reduce_axes("ReduceMax", x32, {0}, 0);
  EXPECT_EQ(m.dtype(), DType::kI32);
  EXPECT_EQ(m.to_int64_vector(), (Ints{4, 5, 6}));
  const Tensor u8 = Tensor::from_vector<std::uint8_t>({4}, {7, 255, 0, 9});
  EXPECT_EQ(reduce_axes("ReduceMin", u8, {0}, 0).to_int64_vector(), (Ints{0}));
  EXPECT_EQ(reduce_axes("ReduceMax", u8, {0}, 0).to_int64_vector(), (Ints{255}));
}

TEST(Reduce, Opset18AxesInput) {
  const Tensor x = f32({2, 2}, {1, 5, 3, 2});
  expect_close(reduce("ReduceMax", {x, i64({0})}, {{"keepdims", std::int64_t{0}}}, 18), f32({2}, {3, 5}));
  expect_close(reduce("ReduceL1", {x}, {{"keepdims", std::int64_t{0}}}, 18), f32({}, {11}));
  expect_close(reduce("ReduceProd", {x, i64({})}, {{"noop_with_empty_axes", std::int64_t{1}}}, 18), x);
  // Before opset 13, ReduceSum reads its axes from the attribute.
  expect_close(reduce("ReduceSum", {x}, {{"axes", Ints{1}}}, 11), f32({2, 1}, {6, 5}));
}

TEST(Reduce, Rejects) {
  const Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_THROWS_SAYING(reduce_axes("ReduceMax", x, {2}), InvalidArgument, "node 'ReduceMax_0' (ReduceMax)",
                       "axis 2 is out of range for input [2, 3]");
  EXPECT_THROWS_SAYING(reduce_axes("ReduceSum", x, {0, -2}), InvalidArgument, "node 'ReduceSum_0' (ReduceSum)",
                       "listed twice");
  EXPECT_THROWS_SAYING(reduce_axes("ReduceL2", x.cast(DType::kI32), {0}), Unsupported, "node 'ReduceL2_0'",
                       "int32 is not supported");
  EXPECT_THROWS_SAYING(reduce_axes("ReduceSum", x.cast(DType::kU8), {0}), Unsupported, "uint8 is not supported");
  EXPECT_THROWS_SAYING(reduce("ReduceSum", {x, f32({1}, {0})}), Unsupported, "axes of type float");
}

}  // namespace
}  // namespace redwood
