// Shape (with opset 15's start/end) and Gather (axes, negative and int32 indices, index-shaped
// output, out-of-range errors).

#include "core/error.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <numeric>

namespace redwood {
namespace {

using testing::iota_f32;
using testing::expect_close;
using testing::NodeSpec;
using testing::make_spec;
using testing::run_node;

std::vector<std::int64_t> shape_of(Shape in, std::map<std::string, AttributeValue> attrs = {}) {
  const Tensor y =
      run_node(make_spec("Shape", {Tensor::zeros(DType::kU8, in)}, std::move(attrs))).at(0);
  EXPECT_EQ(y.dtype(), DType::kI64);
  EXPECT_EQ(y.rank(), 1);
  return y.to_int64_vector();
}

TEST(Shape, WholeShapeAndScalar) {
  EXPECT_EQ(shape_of({3, 4, 5}), (std::vector<std::int64_t>{3, 4, 5}));
  EXPECT_EQ(shape_of({}), (std::vector<std::int64_t>{}));
  EXPECT_EQ(shape_of({0, 2}), (std::vector<std::int64_t>{0, 2}));
}

TEST(Shape, StartAndEnd) {
  const Shape s{3, 4, 5};
  EXPECT_EQ(shape_of(s, {{"start", std::int64_t{1}}}), (std::vector<std::int64_t>{4, 5}));
  EXPECT_EQ(shape_of(s, {{"end", std::int64_t{-1}}}), (std::vector<std::int64_t>{3, 4}));
  EXPECT_EQ(shape_of(s, {{"start", std::int64_t{-1}}}), (std::vector<std::int64_t>{5}));
  EXPECT_EQ(shape_of(s, {{"start", std::int64_t{1}}, {"end", std::int64_t{2}}}),
            (std::vector<std::int64_t>{4}));
  EXPECT_EQ(shape_of(s, {{"start", std::int64_t{-10}}}),
            (std::vector<std::int64_t>{3, 4, 5}));  // clamped
  EXPECT_EQ(shape_of(s, {{"end", std::int64_t{10}}}), (std::vector<std::int64_t>{3, 4, 5}));
  EXPECT_EQ(shape_of(s, {{"start", std::int64_t{2}}, {"end", std::int64_t{1}}}),
            (std::vector<std::int64_t>{}));
}

Tensor gather(const Tensor& data, const Tensor& indices, std::int64_t axis) {
  return run_node(make_spec("Gather", {data, indices}, {{"axis", axis}})).at(0);
}

TEST(Gather, Axis0WithNegativeIndices) {
  const Tensor data = iota_f32({10});
  expect_close(gather(data, Tensor::from_vector<std::int64_t>({3}, {0, -9, -10}), 0),
               Tensor::from_vector<float>({3}, {0, 1, 0}));
}

TEST(Gather, Axis1With2dIndices) {
  // numpy: data.take([[0, 2]], axis=1) for data = arange(9).reshape(3, 3)
  const Tensor y = gather(iota_f32({3, 3}), Tensor::from_vector<std::int64_t>({1, 2}, {0, 2}), 1);
  expect_close(y, Tensor::from_vector<float>({3, 1, 2}, {0, 2, 3, 5, 6, 8}));
}

TEST(Gather, ScalarIndexDropsTheAxis) {
  const Tensor y = gather(iota_f32({2, 3, 4}), Tensor::scalar<std::int32_t>(-1), -2);
  expect_close(y, Tensor::from_vector<float>({2, 4}, {8, 9, 10, 11, 20, 21, 22, 23}));
}

TEST(Gather, ShapeThenGatherOnInt64) {
  // The usual "batch size of a tensor" subgraph: Gather(Shape(x), 0).
  const Tensor shape = run_node(make_spec("Shape", {iota_f32({7, 2})})).at(0);
  const Tensor n = gather(shape, Tensor::scalar<std::int64_t>(0), 0);
  EXPECT_EQ(n.rank(), 0);
  EXPECT_EQ(n.to_int64_vector(), (std::vector<std::int64_t>{7}));
}

TEST(Gather, Errors) {
  EXPECT_THROW(gather(iota_f32({3}), Tensor::from_vector<std::int64_t>({1}, {3}), 0),
               InvalidArgument);
  EXPECT_THROW(gather(iota_f32({3}), Tensor::from_vector<std::int64_t>({1}, {-4}), 0),
               InvalidArgument);
  EXPECT_THROW(gather(iota_f32({3}), Tensor::from_vector<std::int64_t>({1}, {0}), 1),
               InvalidArgument);
  EXPECT_THROW(gather(iota_f32({3}), Tensor::from_vector<float>({1}, {0}), 0), Unsupported);
}

}  // namespace
}  // namespace redwood
