// Slice reference kernel against a numpy-style loop: attribute form (opset < 10), input form,
// negative axes, negative steps, clamping of out-of-range starts/ends, and errors.

#include "core/error.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <numeric>

namespace redwood {
namespace {

using testing::f32;
using testing::i64;
using testing::iota_f32;
using testing::expect_close;
using testing::NodeSpec;
using testing::make_spec;
using testing::run_node;

Tensor slice(const Tensor& x, std::vector<std::int64_t> starts, std::vector<std::int64_t> ends,
             std::vector<std::int64_t> axes = {}, std::vector<std::int64_t> steps = {}) {
  NodeSpec spec = make_spec("Slice", {x, i64(starts), i64(ends)});
  spec.inputs.push_back(axes.empty() ? Tensor() : i64(axes));
  spec.inputs.push_back(steps.empty() ? Tensor() : i64(steps));
  return run_node(spec).at(0);
}

TEST(Slice, BasicRangesWithDefaultAxes) {
  const Tensor x = iota_f32({3, 4});
  expect_close(slice(x, {1, 0}, {3, 2}), f32({2, 2}, {4, 5, 8, 9}));
}

TEST(Slice, NegativeIndicesAndAxes) {
  const Tensor x = iota_f32({3, 4});
  // x[:, -3:-1]
  expect_close(slice(x, {-3}, {-1}, {-1}), f32({3, 2}, {1, 2, 5, 6, 9, 10}));
}

TEST(Slice, StepsPositiveAndNegative) {
  const Tensor x = iota_f32({10});
  expect_close(slice(x, {1}, {8}, {0}, {3}), f32({3}, {1, 4, 7}));
  // x[8:1:-3]
  expect_close(slice(x, {8}, {1}, {0}, {-3}), f32({3}, {8, 5, 2}));
  // x[::-1] spelled the ONNX way: start -1, end INT64_MIN.
  const std::int64_t min = std::numeric_limits<std::int64_t>::min();
  expect_close(slice(iota_f32({4}), {-1}, {min}, {0}, {-1}), f32({4}, {3, 2, 1, 0}));
}

TEST(Slice, ClampsOutOfRangeStartsAndEnds) {
  const Tensor x = iota_f32({2, 5});
  const std::int64_t max = std::numeric_limits<std::int64_t>::max();
  expect_close(slice(x, {1}, {max}, {1}), f32({2, 4}, {1, 2, 3, 4, 6, 7, 8, 9}));
  expect_close(slice(x, {-100}, {2}, {1}), f32({2, 2}, {0, 1, 5, 6}));
  EXPECT_EQ(slice(x, {1000}, {1000}, {1}).shape(), (Shape{2, 0}));
  EXPECT_EQ(slice(x, {3}, {1}, {1}).shape(), (Shape{2, 0}));  // empty, not negative
  // Negative step with start past the end clamps to the last element.
  expect_close(slice(x, {100}, {-100}, {1}, {-2}), f32({2, 3}, {4, 2, 0, 9, 7, 5}));
}

TEST(Slice, MatchesNumpyLoopOn3d) {
  const Tensor x = iota_f32({4, 5, 6});
  const Tensor y = slice(x, {3, 1, -1}, {0, 5, 0}, {0, 1, 2}, {-2, 2, -2});
  // x[3:0:-2, 1:5:2, -1:0:-2]
  std::vector<float> expected;
  for (int i = 3; i > 0; i -= 2)
    for (int j = 1; j < 5; j += 2)
      for (int k = 5; k > 0; k -= 2) expected.push_back(static_cast<float>((i * 5 + j) * 6 + k));
  expect_close(y, f32({2, 2, 3}, expected));
}

TEST(Slice, Int32IndexInputsAndInt64Data) {
  const Tensor x = Tensor::from_vector<std::int64_t>({5}, {10, 11, 12, 13, 14});
  NodeSpec spec = make_spec("Slice", {x, Tensor::from_vector<std::int32_t>({1}, {1}),
                                      Tensor::from_vector<std::int32_t>({1}, {4})});
  spec.constant = {false, true, true};
  EXPECT_EQ(run_node(spec).at(0).to_int64_vector(), (std::vector<std::int64_t>{11, 12, 13}));
}

TEST(Slice, AttributesBeforeOpset10) {
  NodeSpec spec = make_spec("Slice", {iota_f32({3, 4})},
                            {{"starts", std::vector<std::int64_t>{1, -2}},
                             {"ends", std::vector<std::int64_t>{1000, 4}},
                             {"axes", std::vector<std::int64_t>{0, 1}}});
  spec.opset = 9;
  expect_close(run_node(spec).at(0), f32({2, 2}, {6, 7, 10, 11}));
  spec.attributes.erase("axes");  // default: the first len(starts) axes
  expect_close(run_node(spec).at(0), f32({2, 2}, {6, 7, 10, 11}));
}

TEST(Slice, Errors) {
  const Tensor x = iota_f32({3, 4});
  EXPECT_THROW(slice(x, {0}, {1}, {0}, {0}), InvalidArgument);       // step 0
  EXPECT_THROW(slice(x, {0}, {1}, {2}), InvalidArgument);            // axis out of range
  EXPECT_THROW(slice(x, {0, 0}, {1, 1}, {1, -1}), InvalidArgument);  // repeated axis
  EXPECT_THROW(slice(x, {0, 0}, {1}), InvalidArgument);              // length mismatch
  NodeSpec spec = make_spec("Slice", {x}, {{"starts", std::vector<std::int64_t>{0}}});
  spec.opset = 9;
  EXPECT_THROW(run_node(spec), Unsupported);  // ends missing: rejected at load
}

}  // namespace
}  // namespace redwood
