// RoiAlign: mode max, adaptive sampling (sampling_ratio 0), opset 10's output_half_pixel,
// spatial_scale and rois of another batch image, which ONNX's node tests leave out; and the error
// paths. The expected values come from ONNX's reference implementation
// (onnx/reference/ops/op_roi_align.py, after ONNX Runtime's) on the same inputs.

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/error.hpp"
#include "support/test_support.hpp"

namespace redwood {
namespace {

using testing::f32;
using testing::i64;
using testing::expect_close;
using testing::NodeSpec;
using testing::run_node;

// X [2, 1, 6, 6]; three rois, the last partly outside the image.
Tensor roi_align(std::map<std::string, AttributeValue> attrs, std::int64_t opset = 16,
                 Tensor batch_indices = i64({1, 0, 1})) {
  static const Tensor x = [] {
    std::vector<float> v(72);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = float(i * 5 % 13);
    return f32({2, 1, 6, 6}, v);
  }();
  const Tensor rois = f32({3, 4}, {0.5f, 1, 7, 9, 2, 2, 3, 3.5f, -3, -1, 2, 4});
  NodeSpec spec;
  spec.op_type = "RoiAlign";
  spec.inputs = {x, rois, std::move(batch_indices)};
  spec.attributes = std::move(attrs);
  spec.opset = opset;
  return run_node(spec).at(0);
}

TEST(RoiAlign, MaxTakesTheLargestWeightedCorner) {
  expect_close(roi_align({{"mode", std::string("max")},
                          {"output_height", std::int64_t{2}},
                          {"output_width", std::int64_t{3}},
                          {"sampling_ratio", std::int64_t{2}},
                          {"spatial_scale", 0.5f}}),
               f32({3, 1, 2, 3}, {5.385417f, 4.927083f, 4.875f, 4.895833f, 4.927083f, 4.46875f, 4.394531f,
                                  5.566406f, 6.738281f, 5.449219f, 6.902344f, 8.355469f, 0, 11, 11, 0,
                                  4.8125f, 4.8125f}),
               1e-5, 1e-5);
}

TEST(RoiAlign, AdaptiveSamplingWithOutputHalfPixel) {
  // Opset 10 knows only output_half_pixel: no -0.5 shift, rois at least a pixel wide.
  const std::map<std::string, AttributeValue> attrs{{"output_height", std::int64_t{2}},
                                                    {"output_width", std::int64_t{2}},
                                                    {"spatial_scale", 0.5f}};
  const Tensor expected = f32({3, 1, 2, 2}, {7.789062f, 6.46875f, 5.429688f, 7.96875f, 5.5625f, 3.1875f, 2.6875f,
                                             3.5625f, 4.515625f, 7.097656f, 1.75f, 5.375f});
  expect_close(roi_align(attrs, 10), expected, 1e-5, 1e-5);
  auto opset16 = attrs;
  opset16["coordinate_transformation_mode"] = std::string("output_half_pixel");
  expect_close(roi_align(opset16, 16), expected, 1e-5, 1e-5);
}

TEST(RoiAlign, Rejects) {
  EXPECT_THROWS_SAYING(roi_align({{"mode", std::string("min")}}), Unsupported, "mode 'min'");
  EXPECT_THROWS_SAYING(roi_align({{"output_height", std::int64_t{0}}}), Unsupported, "output_height");
  EXPECT_THROWS_SAYING(roi_align({{"sampling_ratio", std::int64_t{-1}}}), Unsupported, "sampling_ratio");
  EXPECT_THROWS_SAYING(roi_align({}, 16, i64({0, 2, 1})), InvalidArgument, "batch index 2 of roi 1");
  EXPECT_THROWS_SAYING(roi_align({}, 16, i64({0, 1})), InvalidArgument, "batch_indices");
}

}  // namespace
}  // namespace redwood
