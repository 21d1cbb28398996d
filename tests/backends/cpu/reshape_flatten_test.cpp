// Reshape and Flatten: 0 and -1 in the target shape, allowzero, the opset 1 attribute form,
// storage sharing, and element-count errors.

#include "core/error.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <numeric>

namespace redwood {
namespace {

using testing::i64;
using testing::iota_f32;
using testing::NodeSpec;
using testing::make_spec;
using testing::run_node;

Tensor reshape(const Tensor& x, std::vector<std::int64_t> shape, std::int64_t allowzero = 0) {
  NodeSpec spec = make_spec("Reshape", {x, i64(shape)});
  if (allowzero) spec.attributes["allowzero"] = allowzero;
  spec.constant = {false, true};
  return run_node(spec).at(0);
}

TEST(Reshape, ExplicitZeroAndMinusOne) {
  const Tensor x = iota_f32({2, 3, 4});
  EXPECT_EQ(reshape(x, {4, 6}).shape(), (Shape{4, 6}));
  EXPECT_EQ(reshape(x, {0, -1}).shape(), (Shape{2, 12}));       // 0 copies dim 0
  EXPECT_EQ(reshape(x, {-1, 0, 2}).shape(), (Shape{4, 3, 2}));  // 0 copies dim 1
  EXPECT_EQ(reshape(x, {-1}).shape(), (Shape{24}));
  EXPECT_EQ(reshape(x, {2, 0, 4, 1}).shape(), (Shape{2, 3, 4, 1}));
  const Tensor y = reshape(x, {6, -1});
  EXPECT_EQ(y.shape(), (Shape{6, 4}));
  EXPECT_EQ(y.get_as_double(23), 23.0);
}

TEST(Reshape, SharesTheInputsStorage) {
  const Tensor x = iota_f32({2, 3});
  NodeSpec spec = make_spec("Reshape", {x, i64({3, 2})});
  spec.constant = {true, true};  // an initializer reaches the kernel as is
  EXPECT_EQ(run_node(spec).at(0).raw_data(), x.raw_data());
}

TEST(Reshape, AllowZeroMeansAnEmptyDimension) {
  const Tensor x = Tensor::empty(DType::kF32, {0, 3, 4});
  EXPECT_EQ(reshape(x, {3, 4, 0}, 1).shape(), (Shape{3, 4, 0}));
  // Without allowzero the 0 copies the input's dim 2 (4): [3, 4, 4] has 48 elements, not 0.
  EXPECT_THROW(reshape(x, {3, 4, 0}), InvalidArgument);
}

TEST(Reshape, ShapeAttributeBeforeOpset5) {
  NodeSpec spec =
      make_spec("Reshape", {iota_f32({2, 3})}, {{"shape", std::vector<std::int64_t>{3, -1}}});
  spec.opset = 1;
  EXPECT_EQ(run_node(spec).at(0).shape(), (Shape{3, 2}));
}

TEST(Reshape, Errors) {
  const Tensor x = iota_f32({2, 3});
  EXPECT_THROW(reshape(x, {4, 2}), InvalidArgument);     // wrong element count
  EXPECT_THROW(reshape(x, {-1, -1}), InvalidArgument);   // two -1
  EXPECT_THROW(reshape(x, {5, -1}), InvalidArgument);    // -1 not integral
  EXPECT_THROW(reshape(x, {1, 1, 0}), InvalidArgument);  // 0 past the input's rank
  EXPECT_THROW(reshape(x, {-2, 3}), InvalidArgument);    // negative extent
}

TEST(Flatten, Axes) {
  const Tensor x = iota_f32({2, 3, 4, 5});
  auto flatten = [&](std::optional<std::int64_t> axis) {
    NodeSpec spec = make_spec("Flatten", {x});
    if (axis) spec.attributes["axis"] = *axis;
    return run_node(spec).at(0).shape();
  };
  EXPECT_EQ(flatten(std::nullopt), (Shape{2, 60}));
  EXPECT_EQ(flatten(0), (Shape{1, 120}));
  EXPECT_EQ(flatten(3), (Shape{24, 5}));
  EXPECT_EQ(flatten(4), (Shape{120, 1}));
  EXPECT_EQ(flatten(-1), (Shape{24, 5}));
  EXPECT_EQ(flatten(-4), (Shape{1, 120}));
  EXPECT_THROW(flatten(5), InvalidArgument);
  EXPECT_THROW(flatten(-5), InvalidArgument);
}

TEST(Flatten, NonContiguousInputIsCopiedInLogicalOrder) {
  std::vector<float> storage{0, 1, 2, 3, 4, 5};
  const Tensor view =
      Tensor::view(storage.data(), DType::kF32, {3, 2}, {1, 3});  // [[0,3],[1,4],[2,5]]
  const Tensor y = run_node(make_spec("Flatten", {view}, {{"axis", std::int64_t{0}}})).at(0);
  EXPECT_EQ(y.to_float_vector(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

}  // namespace
}  // namespace redwood
