// Constant (each value attribute form; rejected sparse/string forms) and ConstantOfShape.

#include "core/error.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

namespace redwood {
namespace {

using testing::expect_close;
using testing::NodeSpec;
using testing::make_spec;
using testing::run_node;

Tensor constant(std::map<std::string, AttributeValue> attrs) {
  return run_node(make_spec("Constant", {}, std::move(attrs))).at(0);
}

TEST(Constant, ValueTensor) {
  const Tensor v = Tensor::from_vector<float>({2, 2}, {1, 2, 3, 4});
  expect_close(constant({{"value", v}}), v);
  const Tensor i = Tensor::from_vector<std::int64_t>({3}, {7, 8, 9});
  EXPECT_EQ(constant({{"value", i}}).to_int64_vector(), (std::vector<std::int64_t>{7, 8, 9}));
}

TEST(Constant, ScalarAndListForms) {
  const Tensor f = constant({{"value_float", 2.5f}});
  EXPECT_EQ(f.dtype(), DType::kF32);
  EXPECT_EQ(f.rank(), 0);
  EXPECT_EQ(f.get_as_double(0), 2.5);
  const Tensor fs = constant({{"value_floats", std::vector<float>{1.5f, -2}}});
  expect_close(fs, Tensor::from_vector<float>({2}, {1.5f, -2}));
  const Tensor n = constant({{"value_int", std::int64_t{-4}}});
  EXPECT_EQ(n.dtype(), DType::kI64);
  EXPECT_EQ(n.rank(), 0);
  EXPECT_EQ(n.to_int64_vector(), (std::vector<std::int64_t>{-4}));
  const Tensor ns = constant({{"value_ints", std::vector<std::int64_t>{1, 2, 3}}});
  EXPECT_EQ(ns.shape(), (Shape{3}));
  EXPECT_EQ(ns.to_int64_vector(), (std::vector<std::int64_t>{1, 2, 3}));
}

TEST(Constant, RejectsSparseStringsAndAmbiguity) {
  EXPECT_THROW(constant({{"value_string", std::string("x")}}), Unsupported);
  EXPECT_THROW(constant({{"value_strings", std::vector<std::string>{"a"}}}), Unsupported);
  EXPECT_THROW(constant({{"sparse_value", Tensor::scalar<float>(1)}}), Unsupported);
  EXPECT_THROW(constant({}), Unsupported);  // no value at all: invalid at load
  EXPECT_THROW(constant({{"value_int", std::int64_t{1}}, {"value_float", 1.0f}}), Unsupported);
}

Tensor constant_of_shape(std::vector<std::int64_t> shape,
                         std::optional<Tensor> value = std::nullopt) {
  NodeSpec spec = make_spec(
      "ConstantOfShape",
      {Tensor::from_vector<std::int64_t>({static_cast<std::int64_t>(shape.size())}, shape)});
  if (value) spec.attributes["value"] = *value;
  return run_node(spec).at(0);
}

TEST(ConstantOfShape, DefaultIsFloatZero) {
  const Tensor y = constant_of_shape({2, 3});
  expect_close(y, Tensor::zeros(DType::kF32, {2, 3}), 0, 0);
}

TEST(ConstantOfShape, ValueAttributeSetsTypeAndFill) {
  const Tensor ones = constant_of_shape({4, 3, 2}, Tensor::from_vector<float>({1}, {1}));
  expect_close(ones, Tensor::from_vector<float>({4, 3, 2}, std::vector<float>(24, 1.0f)), 0, 0);
  const Tensor ints = constant_of_shape({3}, Tensor::from_vector<std::int32_t>({1}, {-7}));
  EXPECT_EQ(ints.dtype(), DType::kI32);
  EXPECT_EQ(ints.to_int64_vector(), (std::vector<std::int64_t>{-7, -7, -7}));
  const Tensor i64 = constant_of_shape({2}, Tensor::from_vector<std::int64_t>({1}, {1LL << 40}));
  EXPECT_EQ(i64.to_int64_vector(), (std::vector<std::int64_t>{1LL << 40, 1LL << 40}));
}

TEST(ConstantOfShape, EmptyAndScalarShapes) {
  EXPECT_EQ(constant_of_shape({0}).shape(), (Shape{0}));
  const Tensor scalar = constant_of_shape({}, Tensor::from_vector<float>({1}, {3}));
  EXPECT_EQ(scalar.rank(), 0);
  EXPECT_EQ(scalar.get_as_double(0), 3.0);
}

TEST(ConstantOfShape, Errors) {
  EXPECT_THROW(constant_of_shape({2, -1}), InvalidArgument);
  EXPECT_THROW(constant_of_shape({2}, Tensor::from_vector<float>({2}, {1, 2})),
               Unsupported);  // load
}

}  // namespace
}  // namespace redwood
