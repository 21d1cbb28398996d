// MaxUnpool: pads, an output_shape larger than the unpooled shape on every axis (the unpooled
// tensor in its leading corner), indices over the whole [N, C, ...] tensor, and the error paths.

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "support/test_support.hpp"

namespace redwood {
namespace {

using testing::Ints;
using testing::f32;
using testing::i64;
using testing::expect_close;
using testing::make_spec;
using testing::run_node;

TEST(MaxUnpool, PadsShrinkTheUnpooledShape) {
  // 1-D, kernel 3, stride 2, pads 1 + 0: (2 - 1) * 2 - 1 + 3 = 4 long; the second channel's
  // indices count from 4.
  const Tensor y = run_node(make_spec("MaxUnpool", {f32({1, 2, 2}, {5, 6, 7, 8}), i64({1, 2, 2}, {0, 3, 5, 6})},
                                      {{"kernel_shape", Ints{3}}, {"strides", Ints{2}}, {"pads", Ints{1, 0}}}))
                       .at(0);
  expect_close(y, f32({1, 2, 4}, {5, 0, 0, 6, 0, 7, 8, 0}));
}

TEST(MaxUnpool, OutputShapeKeepsTheUnpooledTensorInItsCorner) {
  const Tensor y = run_node(make_spec("MaxUnpool",
                                      {f32({1, 2, 1}, {5, 6}), i64({1, 2, 1}, {1, 2}), i64({2, 2, 3})},
                                      {{"kernel_shape", Ints{2}}, {"strides", Ints{2}}}))
                       .at(0);
  expect_close(y, f32({2, 2, 3}, {0, 5, 0, 6, 0, 0, 0, 0, 0, 0, 0, 0}));
}

TEST(MaxUnpool, Rejects) {
  const Tensor x = f32({1, 1, 2}, {5, 6});
  const std::map<std::string, AttributeValue> attrs{{"kernel_shape", Ints{2}}, {"strides", Ints{2}}};
  EXPECT_THROWS_SAYING(run_node(make_spec("MaxUnpool", {x, i64({1, 1, 2}, {1, 4})}, attrs)), InvalidArgument,
                       "index 4", "outside");
  EXPECT_THROWS_SAYING(run_node(make_spec("MaxUnpool", {x, i64({1, 1, 1}, {1})}, attrs)), InvalidArgument, "I");
  EXPECT_THROWS_SAYING(run_node(make_spec("MaxUnpool", {x, i64({1, 1, 2}, {1, 3}), i64({1, 1, 3})}, attrs)),
                       InvalidArgument, "smaller than the unpooled shape");
  EXPECT_THROWS_SAYING(run_node(make_spec("MaxUnpool", {x, i64({1, 1, 2}, {1, 3})})), Unsupported, "kernel_shape");
}

}  // namespace
}  // namespace redwood
