// Reference kernels of the broadcasting comparison, logical, Where, Mod, BitShift and variadic
// (Min, Max, Sum, Mean) ops: what the ONNX node tests leave out (NaN, a three-way broadcast,
// folds whose output is larger than any pair's broadcast, edge values) and the error paths.

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
using testing::run_node;

Tensor run_op(const std::string& op, std::vector<Tensor> inputs,
              std::map<std::string, AttributeValue> attributes = {}) {
  return run_node(make_spec(op, std::move(inputs), std::move(attributes))).at(0);
}

Tensor bools(Shape shape, std::vector<bool> values) {
  return Tensor::from_vector<bool>(std::move(shape), values);
}

Ints as_ints(const Tensor& t) { return t.to_int64_vector(); }

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

TEST(Comparison, NaNComparesFalseExceptNotEqual) {
  const Tensor a = f32({3}, {kNaN, 1, kNaN});
  const Tensor b = f32({3}, {kNaN, kNaN, 1});
  for (const char* op : {"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"}) {
    const Tensor r = run_op(op, {a, b});
    EXPECT_EQ(r.dtype(), DType::kBool) << op;
    EXPECT_EQ(as_ints(r), (Ints{0, 0, 0})) << op;
  }
}

TEST(Comparison, IntegerAndBoolTypesBroadcast) {
  const Tensor u8 = Tensor::from_vector<std::uint8_t>({2, 2}, {0, 200, 7, 255});
  EXPECT_EQ(as_ints(run_op("Less", {u8, Tensor::scalar<std::uint8_t>(7)})), (Ints{1, 0, 0, 0}));
  EXPECT_EQ(as_ints(run_op("GreaterOrEqual", {i64({2, 1}, {-1, 5}), i64({3}, {-2, -1, 6})})),
            (Ints{1, 1, 0, 1, 1, 0}));
  EXPECT_EQ(as_ints(run_op("Equal", {bools({2}, {true, false}), bools({2, 1}, {true, false})})),
            (Ints{1, 0, 0, 1}));
}

TEST(Logical, TruthTablesOverAnOuterBroadcast) {
  const Tensor a = bools({2, 1}, {false, true});
  const Tensor b = bools({1, 2}, {false, true});
  EXPECT_EQ(as_ints(run_op("And", {a, b})), (Ints{0, 0, 0, 1}));
  EXPECT_EQ(as_ints(run_op("Or", {a, b})), (Ints{0, 1, 1, 1}));
  EXPECT_EQ(as_ints(run_op("Xor", {a, b})), (Ints{0, 1, 1, 0}));
}

TEST(Where, BroadcastsAllThree) {
  // condition [2, 1], X [1, 3], Y scalar -> [2, 3]
  const Tensor r = run_op("Where", {bools({2, 1}, {true, false}), f32({1, 3}, {1, 2, 3}),
                                    Tensor::scalar<float>(-1)});
  expect_close(r, f32({2, 3}, {1, 2, 3, -1, -1, -1}));
  // A larger case, whose chunks run in parallel and mix every stride pattern.
  const Tensor cond = testing::random_tensor(DType::kF32, {4, 1, 300}, 0, 1, 7);
  Tensor c = Tensor::empty(DType::kBool, {4, 1, 300});
  for (std::int64_t i = 0; i < c.numel(); ++i) c.data<bool>()[i] = cond.data<float>()[i] > 0.5f;
  const Tensor x = testing::random_tensor(DType::kF32, {1, 300, 300}, -1, 1, 8);
  const Tensor y = testing::random_tensor(DType::kF32, {300, 1}, -1, 1, 9);
  const Tensor big = run_op("Where", {c, x, y});
  ASSERT_EQ(big.shape(), (Shape{4, 300, 300}));
  for (std::int64_t n : {0, 3}) {
    for (std::int64_t h : {0, 151, 299}) {
      for (std::int64_t w : {0, 17, 299}) {
        const float want = c.data<bool>()[n * 300 + w] ? x.data<float>()[h * 300 + w]
                                                       : y.data<float>()[h];
        EXPECT_EQ(big.data<float>()[(n * 300 + h) * 300 + w], want) << n << "," << h << "," << w;
      }
    }
  }
}

TEST(Where, SelectsAnyHeldType) {
  const Tensor cond = bools({3}, {true, false, true});
  const Tensor r = run_op("Where", {cond, Tensor::from_vector<std::int32_t>({3}, {1, 2, 3}),
                                    Tensor::from_vector<std::int32_t>({1}, {0})});
  EXPECT_EQ(r.dtype(), DType::kI32);
  EXPECT_EQ(as_ints(r), (Ints{1, 0, 3}));
  const Tensor half = run_op("Where", {cond, f32({3}, {1, 2, 3}).cast(DType::kF16),
                                       f32({3}, {4, 5, 6}).cast(DType::kF16)});
  EXPECT_EQ(half.dtype(), DType::kF16);
  EXPECT_EQ(half.to_float_vector(), (std::vector<float>{1, 5, 3}));
}

TEST(Mod, SignFollowsTheDivisorOrTheDividend) {
  const Tensor a = i64({4}, {-4, 4, -4, 7});
  const Tensor b = i64({4}, {3, -3, -3, 7});
  EXPECT_EQ(as_ints(run_op("Mod", {a, b})), (Ints{2, -2, -1, 0}));
  EXPECT_EQ(as_ints(run_op("Mod", {a, b}, {{"fmod", std::int64_t{1}}})), (Ints{-1, 1, -1, 0}));
  // The overflowing quotient of INT64_MIN / -1 does not matter to the remainder.
  const std::int64_t min = std::numeric_limits<std::int64_t>::min();
  EXPECT_EQ(as_ints(run_op("Mod", {i64({1}, {min}), i64({1}, {-1})})), (Ints{0}));
  expect_close(run_op("Mod", {f32({2}, {-5.5f, 5.5f}), Tensor::scalar<float>(2)},
                      {{"fmod", std::int64_t{1}}}),
               f32({2}, {-1.5f, 1.5f}));
}

TEST(Mod, RejectsZeroDivisorAndFloatWithoutFmod) {
  EXPECT_THROWS_SAYING(run_op("Mod", {i64({2}, {1, 2}), i64({2}, {3, 0})}), InvalidArgument,
                       "node 'Mod_0' (Mod)", "modulo by zero");
  EXPECT_THROWS_SAYING(run_op("Mod", {f32({1}, {1}), f32({1}, {2})}), Unsupported,
                       "node 'Mod_0' (Mod)", "fmod=0 is defined for integers only");
}

TEST(BitShift, ShiftsPastTheWidthGiveZero) {
  const Tensor x = Tensor::from_vector<std::uint8_t>({4}, {1, 0x81, 0xff, 0xff});
  const Tensor y = Tensor::from_vector<std::uint8_t>({4}, {7, 1, 8, 200});
  EXPECT_EQ(as_ints(run_op("BitShift", {x, y}, {{"direction", std::string("LEFT")}})),
            (Ints{128, 2, 0, 0}));
  EXPECT_EQ(as_ints(run_op("BitShift", {x, y}, {{"direction", std::string("RIGHT")}})),
            (Ints{0, 0x40, 0, 0}));
  EXPECT_THROWS_SAYING(run_op("BitShift", {x, y}), Unsupported, "node 'BitShift_0' (BitShift)",
                       "direction must be LEFT or RIGHT");
}

TEST(Variadic, FoldsToABroadcastLargerThanAnyPair) {
  // [2, 1] and [1] broadcast to [2, 1]; only the third input brings the [2, 3].
  const Tensor a = f32({2, 1}, {1, 10});
  const Tensor b = f32({1}, {2});
  const Tensor c = f32({1, 3}, {0, 5, 20});
  expect_close(run_op("Sum", {a, b, c}), f32({2, 3}, {3, 8, 23, 12, 17, 32}));
  expect_close(run_op("Max", {a, b, c}), f32({2, 3}, {2, 5, 20, 10, 10, 20}));
  expect_close(run_op("Min", {a, b, c}), f32({2, 3}, {0, 1, 1, 0, 2, 2}));
  // Four inputs: an even number of passes still ends in the output.
  expect_close(run_op("Mean", {a, b, c, f32({1, 1}, {4})}),
               f32({2, 3}, {7 / 4.f, 12 / 4.f, 27 / 4.f, 16 / 4.f, 21 / 4.f, 36 / 4.f}));
  EXPECT_EQ(as_ints(run_op("Min", {i64({3}, {5, -7, 0}), i64({1}, {-1}), i64({3}, {9, 9, -9})})),
            (Ints{-1, -7, -9}));
}

TEST(Variadic, NaNPropagatesThroughMinAndMax) {
  const Tensor a = f32({3}, {kNaN, 1, 2});
  const Tensor b = f32({3}, {0, kNaN, 1});
  for (const char* op : {"Min", "Max"}) {
    const std::vector<float> r = run_op(op, {a, b}).to_float_vector();
    EXPECT_TRUE(std::isnan(r[0]) && std::isnan(r[1])) << op;
    EXPECT_EQ(r[2], std::string(op) == "Min" ? 1.f : 2.f);
  }
}

TEST(BroadcastOps, ShapesThatDoNotBroadcastNameTheNode) {
  EXPECT_THROWS_SAYING(run_op("Less", {f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({2}, {1, 2})}),
                       InvalidArgument, "node 'Less_0' (Less)", "[2, 3], [2] do not broadcast");
  EXPECT_THROWS_SAYING(
      run_op("Where", {bools({2}, {true, false}), f32({3}, {1, 2, 3}), Tensor::scalar<float>(0)}),
      InvalidArgument, "node 'Where_0' (Where)", "do not broadcast");
  EXPECT_THROWS_SAYING(run_op("Max", {f32({2}, {1, 2}), f32({1}, {0}), f32({3}, {1, 2, 3})}),
                       InvalidArgument, "node 'Max_0' (Max)", "[2], [1], [3] do not broadcast");
}

TEST(BroadcastOps, MismatchedOrUnsupportedTypesAreRejectedAtLoad) {
  EXPECT_THROWS_SAYING(run_op("Equal", {f32({1}, {1}), i64({1}, {1})}), Unsupported,
                       "node 'Equal_0' (Equal)", "must have one type, found float and int64");
  EXPECT_THROWS_SAYING(run_op("Max", {f32({1}, {1}), f32({1}, {1}), i64({1}, {1})}), Unsupported,
                       "node 'Max_0' (Max)",
                       "inputs 0 to 2 must have one type, found float and int64");
  EXPECT_THROWS_SAYING(
      run_op("Where", {bools({1}, {true}), f32({1}, {1}), i64({1}, {1})}), Unsupported,
      "node 'Where_0' (Where)", "found float and int64");
  EXPECT_THROWS_SAYING(run_op("Where", {f32({1}, {1}), f32({1}, {1}), f32({1}, {2})}),
                       Unsupported, "node 'Where_0' (Where)", "condition of type float");
  EXPECT_THROWS_SAYING(run_op("Less", {bools({1}, {true}), bools({1}, {false})}), Unsupported,
                       "node 'Less_0' (Less)", "input 0 of type bool is not supported");
  EXPECT_THROWS_SAYING(run_op("And", {f32({1}, {1}), f32({1}, {1})}), Unsupported,
                       "node 'And_0' (And)", "input 0 of type float");
  EXPECT_THROWS_SAYING(run_op("Sum", {i64({1}, {1}), i64({1}, {2})}), Unsupported,
                       "node 'Sum_0' (Sum)", "input 0 of type int64");
}

}  // namespace
}  // namespace redwood
