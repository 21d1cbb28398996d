// Pad reference kernel: modes constant/reflect/edge against numpy.pad's results, attribute form
// (opset < 11) and input form, negative pads (cropping), axes (opset 18), errors.

#include "core/error.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <numeric>

namespace redwood {
namespace {

using testing::f32;
using testing::i64;
using testing::expect_close;
using testing::NodeSpec;
using testing::make_spec;
using testing::run_node;

Tensor pad(const Tensor& x, std::vector<std::int64_t> pads, const std::string& mode,
           Tensor value = Tensor()) {
  NodeSpec spec = make_spec("Pad", {x, i64(pads)}, {{"mode", mode}});
  if (value.defined()) spec.inputs.push_back(value);
  spec.constant = {false, true, true};
  return run_node(spec).at(0);
}

const Tensor kX = f32({2, 3}, {1, 2, 3, 4, 5, 6});

TEST(Pad, ConstantWithValueInput) {
  // numpy.pad(x, ((1, 0), (0, 2)), constant_values=9)
  expect_close(pad(kX, {1, 0, 0, 2}, "constant", Tensor::scalar<float>(9)),
               f32({3, 5}, {9, 9, 9, 9, 9, 1, 2, 3, 9, 9, 4, 5, 6, 9, 9}));
  // Default value 0.
  expect_close(pad(kX, {0, 1, 0, 0}, "constant"), f32({2, 4}, {0, 1, 2, 3, 0, 4, 5, 6}));
}

TEST(Pad, Reflect) {
  // numpy.pad(x, ((0, 0), (2, 2)), 'reflect')
  expect_close(pad(kX, {0, 2, 0, 2}, "reflect"),
               f32({2, 7}, {3, 2, 1, 2, 3, 2, 1, 6, 5, 4, 5, 6, 5, 4}));
  // Pad larger than the extent: numpy keeps reflecting. numpy.pad([1,2,3], (5, 4), 'reflect')
  expect_close(pad(f32({3}, {1, 2, 3}), {5, 4}, "reflect"),
               f32({12}, {2, 1, 2, 3, 2, 1, 2, 3, 2, 1, 2, 3}));
}

TEST(Pad, Edge) {
  // numpy.pad(x, ((1, 1), (1, 0)), 'edge')
  expect_close(pad(kX, {1, 1, 1, 0}, "edge"),
               f32({4, 4}, {1, 1, 2, 3, 1, 1, 2, 3, 4, 4, 5, 6, 4, 4, 5, 6}));
}

TEST(Pad, NegativePadsCrop) {
  expect_close(pad(kX, {0, -1, 0, 1}, "constant"), f32({2, 3}, {2, 3, 0, 5, 6, 0}));
  EXPECT_THROW(pad(kX, {0, -2, 0, -2}, "constant"), InvalidArgument);
}

// Pads from a crafted model (constant folding runs Pad at load): extents past 2^56 elements or
// past 2^63 are errors naming the node, and a huge extent of an empty output allocates nothing.
// Each once threw std::length_error or std::bad_alloc sizing an index map per output extent
// (found by tests/fuzz/onnx_import_fuzz.cpp).
TEST(Pad, HugePadsAreErrorsOrEmpty) {
  EXPECT_THROW(pad(kX, {0, 0, 0, std::int64_t{1} << 60}, "constant"), InvalidArgument);
  EXPECT_THROW(pad(kX, {0, 0, 0, std::numeric_limits<std::int64_t>::max()}, "constant"), InvalidArgument);
  EXPECT_THROW(pad(kX, {std::numeric_limits<std::int64_t>::min(), 0, 0, 0}, "constant"), InvalidArgument);
  const Tensor empty = pad(Tensor::zeros(DType::kF32, {0, 3}), {0, std::int64_t{1} << 50, 0, 0}, "constant");
  EXPECT_EQ(empty.shape(), (Shape{0, (std::int64_t{1} << 50) + 3}));
  // Empty, but its extents span past 2^56 (core/shape.cpp, contiguous_strides).
  EXPECT_THROW(pad(Tensor::zeros(DType::kF32, {0, 3}), {0, std::int64_t{1} << 60, 0, 0}, "constant"), InvalidArgument);
}

TEST(Pad, Int32AndUint8) {
  const Tensor x = Tensor::from_vector<std::int32_t>({3}, {7, 8, 9});
  EXPECT_EQ(pad(x, {1, 2}, "constant", Tensor::scalar<std::int32_t>(-1)).to_int64_vector(),
            (std::vector<std::int64_t>{-1, 7, 8, 9, -1, -1}));
  const Tensor u = Tensor::from_vector<std::uint8_t>({2}, {3, 4});
  EXPECT_EQ(pad(u, {2, 1}, "edge").to_int64_vector(), (std::vector<std::int64_t>{3, 3, 3, 4, 4}));
}

TEST(Pad, AttributesBeforeOpset11) {
  NodeSpec spec =
      make_spec("Pad", {kX}, {{"pads", std::vector<std::int64_t>{0, 1, 0, 0}}, {"value", 2.5f}});
  spec.opset = 2;
  expect_close(run_node(spec).at(0), f32({2, 4}, {2.5f, 1, 2, 3, 2.5f, 4, 5, 6}));
  spec.attributes["mode"] = std::string("reflect");
  expect_close(run_node(spec).at(0), f32({2, 4}, {2, 1, 2, 3, 5, 4, 5, 6}));
}

TEST(Pad, AxesInput) {
  NodeSpec spec =
      make_spec("Pad", {kX, i64({1, 1}), Tensor(), i64({-1})}, {{"mode", std::string("constant")}});
  spec.opset = 18;
  expect_close(run_node(spec).at(0), f32({2, 5}, {0, 1, 2, 3, 0, 0, 4, 5, 6, 0}));
}

TEST(Pad, Errors) {
  EXPECT_THROW(pad(kX, {1, 1}, "constant"), InvalidArgument);  // pads length != 2 * rank
  NodeSpec wrap = make_spec("Pad", {kX, i64({0, 0, 0, 0})}, {{"mode", std::string("wrap")}});
  EXPECT_THROW(run_node(wrap), Unsupported);
  EXPECT_THROW(pad(Tensor::empty(DType::kF32, {0}), {1, 1}, "reflect"), InvalidArgument);
}

}  // namespace
}  // namespace redwood
