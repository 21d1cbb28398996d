// GridSample: the padding modes with bicubic and align_corners that ONNX's node tests leave out,
// with channels sharing one grid, and the error paths. The expected values come from ONNX's
// reference implementation (onnx/reference/ops/op_grid_sample.py) on the same inputs.

#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "support/test_support.hpp"

namespace redwood {
namespace {

using testing::f32;
using testing::expect_close;
using testing::make_spec;
using testing::run_node;

// X [1, 2, 3, 4] (two channels) and a grid [1, 2, 3, 2] with locations inside and outside.
const Tensor& image() {
  static const Tensor x = f32({1, 2, 3, 4}, {0, 7, 3, 10, 6, 2, 9, 5, 1, 8, 4, 0,
                                             7, 3, 10, 6, 2, 9, 5, 1, 8, 4, 0, 7});
  return x;
}
const Tensor& grid() {
  static const Tensor g = f32({1, 2, 3, 2}, {-1.3f, 0.2f, 0.45f, -0.8f, 1.6f, 1.2f, 0.1f, -1.7f, -0.55f, 0.95f, 2.9f, -0.2f});
  return g;
}

Tensor grid_sample(const std::string& mode, const std::string& padding, std::int64_t align_corners) {
  return run_node(make_spec("GridSample", {image(), grid()},
                            {{"mode", mode}, {"padding_mode", padding}, {"align_corners", align_corners}}))
      .at(0);
}

TEST(GridSample, BicubicBorderAndReflection) {
  expect_close(grid_sample("bicubic", "border", 0),
               f32({1, 2, 2, 3}, {5.2665f, 5.003681f, 0.0f, 3.675f, 4.010323f, 6.94625f, 3.122751f, 9.798047f,
                                  7.0f, 8.299001f, 6.91853f, 1.7335f}),
               1e-5, 1e-5);
  expect_close(grid_sample("bicubic", "reflection", 0),
               f32({1, 2, 2, 3}, {5.055992f, 4.933601f, 1.69747f, 5.834704f, 4.014997f, 5.214891f, 3.579723f,
                                  9.94656f, 1.280282f, 8.201427f, 7.053443f, 1.923359f}),
               1e-5, 1e-5);
  expect_close(grid_sample("bicubic", "zeros", 1),
               f32({1, 2, 2, 3}, {3.482774f, 5.33141f, -0.061608f, 0.971528f, 6.426553f, 0.0f, 0.924515f,
                                  10.11326f, 0.566271f, 2.229065f, 6.359624f, 0.0f}),
               1e-5, 1e-5);
}

TEST(GridSample, ReflectionWithAlignCorners) {
  expect_close(grid_sample("nearest", "reflection", 1),
               f32({1, 2, 2, 3}, {6, 3, 4, 9, 8, 6, 2, 10, 0, 5, 4, 2}));
  // Opset 20 calls bilinear "linear".
  expect_close(grid_sample("linear", "reflection", 1),
               f32({1, 2, 2, 3}, {4.19f, 5.040001f, 4.599999f, 5.905001f, 5.60375f, 4.530001f, 5.36f, 8.299999f,
                                  1.480001f, 6.745f, 5.37125f, 3.719998f}),
               1e-5, 1e-5);
}

TEST(GridSample, NonFiniteLocationsReadZero) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const Tensor g = f32({1, 1, 2, 2}, {nan, 0.0f, 0.0f, inf});
  expect_close(run_node(make_spec("GridSample", {image(), g}, {{"padding_mode", std::string("border")}})).at(0),
               f32({1, 2, 1, 2}, {0, 0, 0, 0}));
}

TEST(GridSample, Rejects) {
  EXPECT_THROWS_SAYING(grid_sample("area", "zeros", 0), Unsupported, "mode 'area'");
  EXPECT_THROWS_SAYING(grid_sample("bilinear", "wrap", 0), Unsupported, "padding_mode 'wrap'");
  // grid's batch must be X's, its last axis 2.
  EXPECT_THROWS_SAYING(run_node(make_spec("GridSample", {image(), f32({1, 1, 1, 3}, {0, 0, 0})})),
                       InvalidArgument, "grid");
  EXPECT_THROWS_SAYING(run_node(make_spec("GridSample", {f32({1, 1, 1, 1, 1}, {1}), f32({1, 1, 1, 1, 3}, {0, 0, 0})})),
                       Unsupported, "[N, C, H, W]");
  EXPECT_THROWS_SAYING(run_node(make_spec("GridSample", {image().cast(DType::kF16), grid()})), Unsupported, "X");
}

}  // namespace
}  // namespace redwood
