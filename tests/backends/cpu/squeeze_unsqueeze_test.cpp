// Squeeze and Unsqueeze: attribute form (opset < 13) and input form, negative and unsorted axes,
// squeeze without axes, errors.

#include "core/error.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

namespace redwood {
namespace {

using testing::i64;
using testing::NodeSpec;
using testing::make_spec;
using testing::run_node;

Shape run_shape(const std::string& op, Shape in, std::optional<std::vector<std::int64_t>> axes,
                std::int64_t opset = 13) {
  NodeSpec spec = make_spec(op, {Tensor::zeros(DType::kF32, in)});
  spec.opset = opset;
  if (axes) {
    if (opset >= 13) {
      spec.inputs.push_back(i64(*axes));
      spec.constant = {false, true};
    } else {
      spec.attributes["axes"] = *axes;
    }
  }
  return run_node(spec).at(0).shape();
}

TEST(Squeeze, AxesInputAndAttribute) {
  EXPECT_EQ(run_shape("Squeeze", {1, 3, 1, 5}, std::vector<std::int64_t>{0}), (Shape{3, 1, 5}));
  EXPECT_EQ(run_shape("Squeeze", {1, 3, 1, 5}, std::vector<std::int64_t>{-2, 0}), (Shape{3, 5}));
  EXPECT_EQ(run_shape("Squeeze", {1, 3, 1, 5}, std::vector<std::int64_t>{2}, 9), (Shape{1, 3, 5}));
  EXPECT_EQ(run_shape("Squeeze", {1, 3, 1, 5}, std::vector<std::int64_t>{-4}, 11),
            (Shape{3, 1, 5}));
}

TEST(Squeeze, WithoutAxesRemovesAllOnes) {
  EXPECT_EQ(run_shape("Squeeze", {1, 3, 1, 5, 1}, std::nullopt), (Shape{3, 5}));
  EXPECT_EQ(run_shape("Squeeze", {1, 1}, std::nullopt, 9), (Shape{}));
}

TEST(Squeeze, KeepsValuesAndSharesStorage) {
  const Tensor x = Tensor::from_vector<std::int32_t>({1, 3}, {4, 5, 6});
  NodeSpec spec = make_spec("Squeeze", {x, i64({0})});
  spec.constant = {true, true};
  const Tensor y = run_node(spec).at(0);
  EXPECT_EQ(y.raw_data(), x.raw_data());
  EXPECT_EQ(y.to_int64_vector(), (std::vector<std::int64_t>{4, 5, 6}));
}

TEST(Squeeze, Errors) {
  EXPECT_THROW(run_shape("Squeeze", {1, 3}, std::vector<std::int64_t>{1}),
               InvalidArgument);  // extent 3
  EXPECT_THROW(run_shape("Squeeze", {1, 3}, std::vector<std::int64_t>{2}),
               InvalidArgument);  // out of range
  EXPECT_THROW(run_shape("Squeeze", {1, 1}, std::vector<std::int64_t>{0, -2}),
               InvalidArgument);  // repeated
}

TEST(Unsqueeze, AxesIndexTheOutput) {
  EXPECT_EQ(run_shape("Unsqueeze", {3, 4, 5}, std::vector<std::int64_t>{0}), (Shape{1, 3, 4, 5}));
  EXPECT_EQ(run_shape("Unsqueeze", {3, 4, 5}, std::vector<std::int64_t>{3}), (Shape{3, 4, 5, 1}));
  EXPECT_EQ(run_shape("Unsqueeze", {3, 4, 5}, std::vector<std::int64_t>{5, 4, 2}),
            (Shape{3, 4, 1, 5, 1, 1}));
  EXPECT_EQ(run_shape("Unsqueeze", {3, 4, 5}, std::vector<std::int64_t>{-2}), (Shape{3, 4, 1, 5}));
  EXPECT_EQ(run_shape("Unsqueeze", {}, std::vector<std::int64_t>{0}), (Shape{1}));
  EXPECT_EQ(run_shape("Unsqueeze", {3}, std::vector<std::int64_t>{0, 2}, 11), (Shape{1, 3, 1}));
}

TEST(Unsqueeze, Errors) {
  EXPECT_THROW(run_shape("Unsqueeze", {3}, std::vector<std::int64_t>{2}), InvalidArgument);
  EXPECT_THROW(run_shape("Unsqueeze", {3}, std::vector<std::int64_t>{0, 0}), InvalidArgument);
  EXPECT_THROW(run_shape("Unsqueeze", {3}, std::nullopt, 11),
               Unsupported);  // axes attribute missing
  EXPECT_THROW(run_shape("Unsqueeze", {3}, std::nullopt, 13),
               InvalidArgument);  // axes input missing
}

}  // namespace
}  // namespace redwood
