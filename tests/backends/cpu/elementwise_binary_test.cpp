// Reference binary elementwise kernels: numpy broadcasting (checked against an index-by-index
// loop), integer semantics, Pow's mixed types and the error paths.

#include "core/error.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

namespace redwood {
namespace {

using testing::f32;
using testing::i64;
using testing::expect_close;
using testing::NodeSpec;
using testing::random_tensor;
using testing::make_spec;
using testing::run_node;

Tensor run_binary(const std::string& op, const Tensor& a, const Tensor& b,
                  std::int64_t opset = 17) {
  NodeSpec spec = make_spec(op, {a, b});
  spec.opset = opset;
  return run_node(spec).at(0);
}

// Numpy broadcasting spelled out: for every output index, the operand indices with broadcast
// dimensions pinned to 0.
Tensor broadcast_expected(const Tensor& a, const Tensor& b,
                          const std::function<double(double, double)>& fn) {
  const Shape out_shape = broadcast_shapes(a.shape(), b.shape());
  Tensor out = Tensor::empty(DType::kF32, out_shape);
  const std::size_t rank = out_shape.size();
  auto operand_index = [&](const Tensor& t, std::int64_t flat) {
    std::int64_t idx = 0, stride = 1, rem = flat;
    for (std::size_t d = rank; d-- > 0;) {
      const std::int64_t coord = rem % out_shape[d];
      rem /= out_shape[d];
      const std::size_t offset = rank - t.shape().size();
      if (d < offset) continue;
      const std::int64_t extent = t.shape()[d - offset];
      idx += (extent == 1 ? 0 : coord) * stride;
      stride *= extent;
    }
    return idx;
  };
  for (std::int64_t i = 0; i < out.numel(); ++i) {
    out.data<float>()[i] = static_cast<float>(
        fn(a.get_as_double(operand_index(a, i)), b.get_as_double(operand_index(b, i))));
  }
  return out;
}

struct BroadcastCase {
  Shape a, b;
};

// "a2x3x4_b1x4x1": the case's name, and what a failure prints as its parameter (a rank-0
// operand is "scalar").
std::string case_name(const BroadcastCase& c) {
  const auto dims = [](const Shape& s) {
    std::string out;
    for (auto d : s) out += (out.empty() ? "" : "x") + std::to_string(d);
    return out.empty() ? std::string("scalar") : out;
  };
  return "a" + dims(c.a) + "_b" + dims(c.b);
}
void PrintTo(const BroadcastCase& c, std::ostream* os) { *os << case_name(c); }

class BinaryBroadcast : public ::testing::TestWithParam<BroadcastCase> {};

TEST_P(BinaryBroadcast, AllOpsMatchNumpyLoop) {
  const Tensor a = random_tensor(DType::kF32, GetParam().a, -2, 2, 3);
  const Tensor b = random_tensor(DType::kF32, GetParam().b, 0.5, 2, 4);  // positive: Div and Pow
  expect_close(run_binary("Add", a, b), broadcast_expected(a, b, std::plus<>()));
  expect_close(run_binary("Sub", a, b), broadcast_expected(a, b, std::minus<>()));
  expect_close(run_binary("Mul", a, b), broadcast_expected(a, b, std::multiplies<>()));
  expect_close(run_binary("Div", a, b), broadcast_expected(a, b, std::divides<>()));
  expect_close(run_binary("Pow", b, a),
               broadcast_expected(b, a, [](double x, double y) { return std::pow(x, y); }), 1e-5,
               1e-6);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, BinaryBroadcast,
    ::testing::Values(BroadcastCase{{2, 3, 4}, {2, 3, 4}},            // same shape
                      BroadcastCase{{1, 16, 40, 40}, {}},             // scalar right
                      BroadcastCase{{}, {1, 16, 40, 40}},             // scalar left
                      BroadcastCase{{1, 16, 40, 40}, {1, 16, 1, 1}},  // per channel
                      BroadcastCase{{2, 16, 8, 8}, {16, 1, 1}},       // per channel, lower rank
                      BroadcastCase{{2, 1, 5}, {1, 4, 1}},            // both sides broadcast
                      BroadcastCase{{3, 1}, {1, 7}},                  // outer product
                      BroadcastCase{{2, 3, 4, 5}, {5}},               // last axis
                      BroadcastCase{{2, 3, 4, 5}, {3, 1, 5}},         // mixed
                      BroadcastCase{{1, 1}, {1}},                     // all ones
                      BroadcastCase{{4, 300, 300}, {4, 1, 300}},      // large: parallel chunks
                      BroadcastCase{{0, 3}, {1, 3}}),                 // empty
    [](const ::testing::TestParamInfo<BroadcastCase>& info) { return case_name(info.param); });

TEST(ElementwiseBinary, HandValues) {
  expect_close(run_binary("Sub", f32({2, 2}, {5, 6, 7, 8}), f32({2}, {1, 2})),
               f32({2, 2}, {4, 4, 6, 6}));
  expect_close(run_binary("Div", f32({2}, {3, 4}), f32({2}, {1, 2})), f32({2}, {3, 2}));
}

TEST(ElementwiseBinary, IntegerTypes) {
  EXPECT_EQ(run_binary("Add", i64({3}, {1, -2, 3}), i64({1}, {10})).to_int64_vector(),
            (std::vector<std::int64_t>{11, 8, 13}));
  EXPECT_EQ(run_binary("Mul", i64({2, 2}, {1, 2, 3, 4}), i64({2, 1}, {-1, 2})).to_int64_vector(),
            (std::vector<std::int64_t>{-1, -2, 6, 8}));
  const Tensor a32 = Tensor::from_vector<std::int32_t>({4}, {7, -7, 7, -7});
  const Tensor b32 = Tensor::from_vector<std::int32_t>({4}, {2, 2, -2, -2});
  const Tensor q = run_binary("Div", a32, b32);
  EXPECT_EQ(q.dtype(), DType::kI32);
  // Truncation toward zero (C++ and ONNX Runtime), not numpy's floor.
  EXPECT_EQ(q.to_int64_vector(), (std::vector<std::int64_t>{3, -3, -3, 3}));
  EXPECT_EQ(run_binary("Sub", a32, b32).to_int64_vector(),
            (std::vector<std::int64_t>{5, -9, 9, -5}));
}

TEST(ElementwiseBinary, Uint8WrapsLikeNumpy) {
  const Tensor a = Tensor::from_vector<std::uint8_t>({3}, {250, 3, 16});
  const Tensor b = Tensor::from_vector<std::uint8_t>({3}, {10, 5, 3});
  EXPECT_EQ(run_binary("Add", a, b).to_int64_vector(), (std::vector<std::int64_t>{4, 8, 19}));
  EXPECT_EQ(run_binary("Sub", a, b).to_int64_vector(), (std::vector<std::int64_t>{240, 254, 13}));
  EXPECT_EQ(run_binary("Mul", a, b).to_int64_vector(), (std::vector<std::int64_t>{196, 15, 48}));
  EXPECT_EQ(run_binary("Div", a, b).to_int64_vector(), (std::vector<std::int64_t>{25, 0, 5}));
}

TEST(ElementwiseBinary, Int64OverflowWraps) {
  const std::int64_t max = std::numeric_limits<std::int64_t>::max();
  const std::int64_t min = std::numeric_limits<std::int64_t>::min();
  EXPECT_EQ(run_binary("Add", i64({1}, {max}), i64({1}, {1})).to_int64_vector()[0], min);
  EXPECT_EQ(run_binary("Div", i64({1}, {min}), i64({1}, {-1})).to_int64_vector()[0], min);
}

TEST(ElementwiseBinary, IntegerDivisionByZeroIsAnError) {
  EXPECT_THROW(run_binary("Div", i64({2}, {1, 2}), i64({2}, {1, 0})), InvalidArgument);
  // Float division by zero is IEEE: inf.
  EXPECT_TRUE(std::isinf(run_binary("Div", f32({1}, {1}), f32({1}, {0})).data<float>()[0]));
}

TEST(ElementwiseBinary, PowMixedTypes) {
  const Tensor base = f32({3}, {1, 2, 3});
  expect_close(run_binary("Pow", base, i64({3}, {4, 5, 6})), f32({3}, {1, 32, 729}));
  expect_close(run_binary("Pow", base, Tensor::from_vector<std::int32_t>({3}, {4, 5, 6})),
               f32({3}, {1, 32, 729}));
  expect_close(run_binary("Pow", base, Tensor::scalar<float>(0.5f)),
               f32({3}, {1, std::sqrt(2.0f), std::sqrt(3.0f)}));
  const Tensor ib = run_binary("Pow", i64({3}, {1, 2, 3}), f32({3}, {4, 5, 6}));
  EXPECT_EQ(ib.dtype(), DType::kI64);
  EXPECT_EQ(ib.to_int64_vector(), (std::vector<std::int64_t>{1, 32, 729}));
  const Tensor ii = run_binary("Pow", Tensor::from_vector<std::int32_t>({3}, {-2, 3, 10}),
                               Tensor::from_vector<std::int32_t>({3}, {3, 0, 9}));
  EXPECT_EQ(ii.dtype(), DType::kI32);
  EXPECT_EQ(ii.to_int64_vector(), (std::vector<std::int64_t>{-8, 1, 1000000000}));
}

TEST(ElementwiseBinary, NonBroadcastableShapesAreInvalid) {
  EXPECT_THROW(run_binary("Add", f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({2}, {1, 2})),
               InvalidArgument);
  EXPECT_THROW(run_binary("Mul", f32({3}, {1, 2, 3}), f32({4}, {1, 2, 3, 4})), InvalidArgument);
}

TEST(ElementwiseBinary, MismatchedOrUnsupportedTypesAreRejectedAtLoad) {
  EXPECT_THROW(run_binary("Add", f32({1}, {1}), i64({1}, {1})), Unsupported);
  EXPECT_THROW(run_binary("Add", Tensor::from_vector<bool>({1}, {true}),
                          Tensor::from_vector<bool>({1}, {true})),
               Unsupported);
  EXPECT_THROW(run_binary("Pow", Tensor::from_vector<std::uint8_t>({1}, {2}), f32({1}, {1})),
               Unsupported);
}

TEST(ElementwiseBinary, NonContiguousOperand) {
  std::vector<float> storage{1, 2, 3, 4, 5, 6};
  const Tensor transposed =
      Tensor::view(storage.data(), DType::kF32, {3, 2}, {1, 3});  // [[1,4],[2,5],[3,6]]
  expect_close(run_binary("Add", transposed, f32({2}, {10, 20})),
               f32({3, 2}, {11, 24, 12, 25, 13, 26}));
}

}  // namespace
}  // namespace redwood
