// Concat and Split reference kernels: axes (negative too), dtypes moved as bytes, the opset
// variants of Split's sizes, and shape errors.

#include "core/error.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <numeric>

namespace redwood {
namespace {

using testing::f32;
using testing::iota_f32;
using testing::expect_close;
using testing::NodeSpec;
using testing::make_spec;
using testing::run_node;

TEST(Concat, Axis0And1AndNegative) {
  const Tensor a = iota_f32({2, 2});      // [[0,1],[2,3]]
  const Tensor b = iota_f32({2, 1}, 10);  // [[10],[11]]
  expect_close(run_node(make_spec("Concat", {a, b}, {{"axis", std::int64_t{1}}})).at(0),
               f32({2, 3}, {0, 1, 10, 2, 3, 11}));
  expect_close(run_node(make_spec("Concat", {a, b}, {{"axis", std::int64_t{-1}}})).at(0),
               f32({2, 3}, {0, 1, 10, 2, 3, 11}));
  expect_close(
      run_node(make_spec("Concat", {a, iota_f32({1, 2}, 20)}, {{"axis", std::int64_t{0}}})).at(0),
      f32({3, 2}, {0, 1, 2, 3, 20, 21}));
}

TEST(Concat, ThreeInputsMiddleAxisWithEmptyPart) {
  const Tensor a = iota_f32({2, 1, 2});
  const Tensor empty = Tensor::empty(DType::kF32, {2, 0, 2});
  const Tensor c = iota_f32({2, 2, 2}, 100);
  expect_close(run_node(make_spec("Concat", {a, empty, c}, {{"axis", std::int64_t{1}}})).at(0),
               f32({2, 3, 2}, {0, 1, 100, 101, 102, 103, 2, 3, 104, 105, 106, 107}));
}

TEST(Concat, Int64AndBool) {
  const Tensor y = run_node(make_spec("Concat",
                                      {Tensor::from_vector<std::int64_t>({2}, {1, 2}),
                                       Tensor::from_vector<std::int64_t>({1}, {-1})},
                                      {{"axis", std::int64_t{0}}}))
                       .at(0);
  EXPECT_EQ(y.to_int64_vector(), (std::vector<std::int64_t>{1, 2, -1}));
  const Tensor b = run_node(make_spec("Concat",
                                      {Tensor::from_vector<bool>({1}, {true}),
                                       Tensor::from_vector<bool>({2}, {false, true})},
                                      {{"axis", std::int64_t{0}}}))
                       .at(0);
  EXPECT_EQ(b.dtype(), DType::kBool);
  EXPECT_EQ(b.to_int64_vector(), (std::vector<std::int64_t>{1, 0, 1}));
}

TEST(Concat, MismatchedShapesAreInvalid) {
  EXPECT_THROW(run_node(make_spec("Concat", {iota_f32({2, 2}), iota_f32({3, 1})},
                                  {{"axis", std::int64_t{1}}})),
               InvalidArgument);
  EXPECT_THROW(run_node(make_spec("Concat", {iota_f32({2, 2}), iota_f32({2, 2})},
                                  {{"axis", std::int64_t{2}}})),
               InvalidArgument);
}

TEST(Concat, AxisIsRequiredFromOpset4) {
  EXPECT_THROW(run_node(make_spec("Concat", {iota_f32({2}), iota_f32({2})})), Unsupported);
}

TEST(Split, EqualPartsDefaultAxis) {
  NodeSpec spec = make_spec("Split", {iota_f32({6})}, {}, 3);
  const auto out = run_node(spec);
  ASSERT_EQ(out.size(), 3u);
  expect_close(out[0], f32({2}, {0, 1}));
  expect_close(out[2], f32({2}, {4, 5}));
}

TEST(Split, SplitAttributeBeforeOpset13) {
  NodeSpec spec =
      make_spec("Split", {iota_f32({2, 5})},
                {{"axis", std::int64_t{1}}, {"split", std::vector<std::int64_t>{2, 3}}}, 2);
  spec.opset = 11;
  const auto out = run_node(spec);
  expect_close(out[0], f32({2, 2}, {0, 1, 5, 6}));
  expect_close(out[1], f32({2, 3}, {2, 3, 4, 7, 8, 9}));
}

TEST(Split, SplitInputFromOpset13WithNegativeAxis) {
  NodeSpec spec =
      make_spec("Split", {iota_f32({2, 5}), Tensor::from_vector<std::int64_t>({3}, {1, 0, 4})},
                {{"axis", std::int64_t{-1}}}, 3);
  spec.constant = {false, true};
  const auto out = run_node(spec);
  expect_close(out[0], f32({2, 1}, {0, 5}));
  EXPECT_EQ(out[1].shape(), (Shape{2, 0}));
  expect_close(out[2], f32({2, 4}, {1, 2, 3, 4, 6, 7, 8, 9}));
}

TEST(Split, UnevenWithoutSizesIsInvalidBeforeOpset18) {
  EXPECT_THROW(run_node(make_spec("Split", {iota_f32({5})}, {}, 2)), InvalidArgument);
  NodeSpec spec = make_spec("Split", {iota_f32({5})}, {{"num_outputs", std::int64_t{2}}}, 2);
  spec.opset = 18;
  const auto out = run_node(spec);
  expect_close(out[0], f32({3}, {0, 1, 2}));
  expect_close(out[1], f32({2}, {3, 4}));
}

TEST(Split, SizesMustSumToTheExtent) {
  NodeSpec spec =
      make_spec("Split", {iota_f32({6}), Tensor::from_vector<std::int64_t>({2}, {2, 3})}, {}, 2);
  EXPECT_THROW(run_node(spec), InvalidArgument);
}

TEST(ConcatSplit, RoundTripUint8) {
  const Tensor x =
      Tensor::from_vector<std::uint8_t>({3, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  NodeSpec split = make_spec("Split", {x, Tensor::from_vector<std::int64_t>({2}, {1, 3})},
                             {{"axis", std::int64_t{1}}}, 2);
  const auto parts = run_node(split);
  const Tensor back =
      run_node(make_spec("Concat", {parts[0], parts[1]}, {{"axis", std::int64_t{1}}})).at(0);
  EXPECT_EQ(back.dtype(), DType::kU8);
  EXPECT_EQ(back.to_int64_vector(), x.to_int64_vector());
}

}  // namespace
}  // namespace redwood
