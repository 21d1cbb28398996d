// Resize and Upsample: hand-computed values for the models' cases (PP-OCR det's
// nearest/asymmetric/floor x2, opset 10's legacy nearest), every coordinate transformation and
// nearest mode against a naive per-element implementation, N-d linear, the cases ONNX's node tests
// leave out (antialias, keep_aspect_ratio_policy, half_pixel_symmetric, tf_crop_and_resize with
// nearest and axes, Upsample), and the rejections.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/error.hpp"
#include "support/test_support.hpp"

namespace redwood {
namespace {

using testing::Ints;
using testing::f32;
using testing::iota_f32;
using testing::i64;
using testing::expect_close;
using testing::NodeSpec;
using testing::random_tensor;
using testing::run_node;

using Attrs = std::map<std::string, AttributeValue>;

Tensor run_resize(std::vector<Tensor> inputs, Attrs attrs, std::int64_t opset = 13) {
  NodeSpec spec;
  spec.op_type = "Resize";
  spec.inputs = std::move(inputs);
  spec.attributes = std::move(attrs);
  spec.opset = opset;
  return run_node(spec).at(0);
}

// Opset 13 inputs: X, roi (absent), scales or sizes.
Tensor resize_scales(const Tensor& x, std::vector<float> scales, Attrs attrs) {
  const std::int64_t n = static_cast<std::int64_t>(scales.size());
  return run_resize({x, Tensor(), f32({n}, scales)}, std::move(attrs));
}
Tensor resize_sizes(const Tensor& x, std::vector<std::int64_t> sizes, Attrs attrs) {
  return run_resize({x, Tensor(), Tensor(), i64(sizes)}, std::move(attrs));
}

// The input coordinate of output index o along an axis, as the ONNX reference computes it.
double source(const std::string& mode, std::int64_t o, std::int64_t in, double scale) {
  const double length = in * scale;
  if (mode == "asymmetric") return o / scale;
  if (mode == "align_corners") return length == 1 ? 0 : o * double(in - 1) / (length - 1);
  if (mode == "pytorch_half_pixel") return length == 1 ? -0.5 : (o + 0.5) / scale - 0.5;
  if (mode == "tf_half_pixel_for_nn") return (o + 0.5) / scale;
  return (o + 0.5) / scale - 0.5;  // half_pixel
}

std::int64_t clamp_index(std::int64_t i, std::int64_t in) { return std::min(std::max<std::int64_t>(i, 0), in - 1); }

// Every output element on its own: nearest picks one input element, linear sums the 2^rank
// corners with the product of per-axis weights.
Tensor naive_resize(const Tensor& x, const Shape& out, const std::vector<double>& scales,
                    const std::string& transform, const std::string& mode,
                    const std::string& nearest_mode) {
  const std::size_t rank = out.size();
  Tensor y = Tensor::empty(DType::kF32, out);
  const Strides xs = contiguous_strides(x.shape()), ys = contiguous_strides(out);
  for (std::int64_t flat = 0; flat < y.numel(); ++flat) {
    std::vector<std::int64_t> lo(rank), hi(rank);
    std::vector<double> frac(rank);
    for (std::size_t a = 0; a < rank; ++a) {
      const std::int64_t o = flat / ys[a] % out[a];
      const double c = source(transform, o, x.dim(a), scales[a]);
      const double f = std::floor(c);
      lo[a] = static_cast<std::int64_t>(f);
      frac[a] = c - f;
      hi[a] = lo[a] + 1;
      if (mode == "nearest") {
        bool up = false;
        if (frac[a] != 0) {
          if (nearest_mode == "round_prefer_floor") up = frac[a] > 0.5;
          if (nearest_mode == "round_prefer_ceil") up = frac[a] >= 0.5;
          if (nearest_mode == "ceil") up = true;
        }
        lo[a] = clamp_index(lo[a] + (up ? 1 : 0), x.dim(a));
      } else {
        lo[a] = clamp_index(lo[a], x.dim(a));
        hi[a] = clamp_index(hi[a], x.dim(a));
      }
    }
    double value = 0;
    if (mode == "nearest") {
      std::int64_t off = 0;
      for (std::size_t a = 0; a < rank; ++a) off += lo[a] * xs[a];
      value = x.data<float>()[off];
    } else {
      for (std::int64_t corner = 0; corner < (std::int64_t{1} << rank); ++corner) {
        double weight = 1;
        std::int64_t off = 0;
        for (std::size_t a = 0; a < rank; ++a) {
          const bool upper = (corner >> a) & 1;
          weight *= upper ? frac[a] : 1 - frac[a];
          off += (upper ? hi[a] : lo[a]) * xs[a];
        }
        value += weight * x.data<float>()[off];
      }
    }
    y.data<float>()[flat] = static_cast<float>(value);
  }
  return y;
}

TEST(Resize, NearestAsymmetricFloorWithRoiAndScales) {
  // PP-OCR det (opset 11): X, roi, scales; nearest, asymmetric, floor, x2.
  const Tensor y = run_resize({f32({1, 1, 2, 2}, {1, 2, 3, 4}), f32({0}, {}), f32({4}, {1, 1, 2, 2})},
                              {{"mode", std::string("nearest")},
                               {"coordinate_transformation_mode", std::string("asymmetric")},
                               {"nearest_mode", std::string("floor")}},
                              11);
  expect_close(y, f32({1, 1, 4, 4}, {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
}

TEST(Resize, HandComputedOnnxExamples) {
  const Tensor x24 = f32({1, 1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  expect_close(resize_scales(x24, {1, 1, 0.6f, 0.6f}, {{"mode", std::string("nearest")}}),
               f32({1, 1, 1, 2}, {1, 3}));
  expect_close(resize_scales(x24, {1, 1, 0.6f, 0.6f}, {{"mode", std::string("linear")}}),
               f32({1, 1, 1, 2}, {2.6666665f, 4.3333331f}));
  // align_corners with scales measures the unrounded output length (2.4 here), as ONNX's
  // reference does.
  expect_close(resize_scales(x24, {1, 1, 0.6f, 0.6f},
                             {{"mode", std::string("linear")},
                              {"coordinate_transformation_mode", std::string("align_corners")}}),
               f32({1, 1, 1, 2}, {1, 3.1428571f}));
  const Tensor x22 = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  expect_close(resize_scales(x22, {1, 1, 2, 2}, {{"mode", std::string("linear")}}),
               f32({1, 1, 4, 4}, {1, 1.25f, 1.75f, 2, 1.5f, 1.75f, 2.25f, 2.5f, 2.5f, 2.75f, 3.25f,
                                  3.5f, 3, 3.25f, 3.75f, 4}));
}

TEST(Resize, Opset10LegacyNearest) {
  // Opset 10: inputs X, scales; asymmetric; ceil when shrinking, floor when growing.
  const Tensor x = f32({1, 5}, {1, 2, 3, 4, 5});
  expect_close(run_resize({x, f32({2}, {1, 0.6f})}, {}, 10), f32({1, 3}, {1, 3, 5}));
  expect_close(run_resize({f32({1, 2}, {1, 2}), f32({2}, {1, 2.5f})}, {}, 10),
               f32({1, 5}, {1, 1, 1, 2, 2}));
  // Opset 10 linear is asymmetric too.
  expect_close(run_resize({f32({1, 2}, {1, 2}), f32({2}, {1, 2})}, {{"mode", std::string("linear")}}, 10),
               f32({1, 4}, {1, 1.5f, 2, 2}));
}

TEST(Resize, NearestModesAndTransformsMatchNaive) {
  const Tensor x = random_tensor(DType::kF32, {1, 2, 5, 7}, -1, 1, 1);
  for (const char* transform : {"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel",
                                "tf_half_pixel_for_nn"}) {
    for (const char* nearest : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}) {
      SCOPED_TRACE(fmt::format("{} {}", transform, nearest));
      const Attrs attrs{{"mode", std::string("nearest")},
                        {"coordinate_transformation_mode", std::string(transform)},
                        {"nearest_mode", std::string(nearest)}};
      expect_close(resize_sizes(x, {1, 2, 8, 4}, attrs),
                   naive_resize(x, {1, 2, 8, 4}, {1, 1, 8.0 / 5, 4.0 / 7}, transform, "nearest", nearest));
      expect_close(resize_scales(x, {1, 1, 1.5f, 2.0f}, attrs),
                   naive_resize(x, {1, 2, 7, 14}, {1, 1, 1.5, 2.0}, transform, "nearest", nearest));
    }
  }
}

TEST(Resize, LinearMatchesNaive) {
  const Tensor x = random_tensor(DType::kF32, {2, 3, 4, 5}, -1, 1, 2);
  for (const char* transform : {"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"}) {
    SCOPED_TRACE(transform);
    const Attrs attrs{{"mode", std::string("linear")},
                      {"coordinate_transformation_mode", std::string(transform)}};
    // Bilinear, up along H and down along W.
    expect_close(resize_sizes(x, {2, 3, 9, 3}, attrs),
                 naive_resize(x, {2, 3, 9, 3}, {1, 1, 9.0 / 4, 3.0 / 5}, transform, "linear", ""),
                 1e-5, 1e-6);
    // N-d: the channel axis is interpolated too.
    expect_close(resize_sizes(x, {2, 5, 6, 5}, attrs),
                 naive_resize(x, {2, 5, 6, 5}, {1, 5.0 / 3, 6.0 / 4, 1}, transform, "linear", ""),
                 1e-5, 1e-6);
  }
  // An output of one pixel: pytorch_half_pixel reads at -0.5 (clamped to the first pixel).
  const Attrs pytorch{{"mode", std::string("linear")},
                      {"coordinate_transformation_mode", std::string("pytorch_half_pixel")}};
  expect_close(resize_sizes(x, {2, 3, 4, 1}, pytorch),
               naive_resize(x, {2, 3, 4, 1}, {1, 1, 1, 0.2}, "pytorch_half_pixel", "linear", ""));
}

TEST(Resize, AxesAttribute) {
  // Opset 18: scales only for the listed axes.
  const Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  const Tensor y = run_resize({x, Tensor(), f32({2}, {2, 1})},
                              {{"axes", Ints{-2, 3}}, {"mode", std::string("nearest")},
                               {"coordinate_transformation_mode", std::string("asymmetric")}},
                              18);
  expect_close(y, f32({1, 1, 4, 2}, {1, 2, 1, 2, 3, 4, 3, 4}));
}

template <typename Fn>
void expect_unsupported_naming(Fn fn, const std::string& what) {
  try {
    fn();
    ADD_FAILURE() << "expected Unsupported naming " << what;
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

TEST(Resize, RejectsAtLoad) {
  const Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  expect_unsupported_naming([&] { resize_scales(x, {1, 1, 2, 2}, {{"mode", std::string("area")}}); },
                            "area");
  expect_unsupported_naming(
      [&] { resize_scales(x, {1, 1, 2, 2}, {{"nearest_mode", std::string("round_half_even")}}); },
      "round_half_even");
  expect_unsupported_naming(
      [&] { run_resize({x, Tensor(), Tensor(), i64({1, 1, 3, 3})}, {{"keep_aspect_ratio_policy", std::string("fit")}}, 18); },
      "fit");
  // Resize-10 has no cubic mode.
  EXPECT_THROWS_SAYING(run_resize({x, f32({4}, {1, 1, 2, 2})}, {{"mode", std::string("cubic")}}, 10),
                       Unsupported, "cubic", "opset 11");
  EXPECT_THROW(resize_scales(x.cast(DType::kF16), {1, 1, 2, 2}, {}), Unsupported);
}

// The expected values of the cases below come from ONNX's reference implementation
// (onnx/reference/ops/op_resize.py) on the same inputs.
TEST(Resize, AntialiasStretchesTheKernelWhenShrinking) {
  const Tensor x = f32({4, 6}, {0, 1, 4, 2, 2, 4, 1, 0, 1, 4, 2, 2, 4, 1, 0, 1, 4, 2, 2, 4, 1, 0, 1, 4});
  expect_close(run_resize({x, Tensor(), Tensor(), i64({2, 3})},
                          {{"mode", std::string("linear")}, {"antialias", std::int64_t{1}}}, 18),
               f32({2, 3}, {0.96875f, 2.234375f, 2.671875f, 2.28125f, 1.140625f, 2.453125f}));
  // Cubic: axis 0 keeps its extent (the plain 4-tap kernel), axis 1 halves (8 taps).
  expect_close(run_resize({x, Tensor(), f32({2}, {1, 0.5f})},
                          {{"mode", std::string("cubic")}, {"antialias", std::int64_t{1}}}, 18),
               f32({4, 3}, {0.822265625f, 2.748046875f, 2.912109375f, 0.384765625f, 2.248046875f,
                            2.349609375f, 2.31640625f, 0.671875f, 2.87109375f, 2.87109375f, 0.671875f,
                            2.31640625f}));
}

TEST(Resize, KeepAspectRatioPolicy) {
  const Tensor x = f32({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  // not_larger: scale min(3/2, 3/4) = 0.75 for both axes, extents round(1.5) = 2 and 3.
  expect_close(run_resize({x, Tensor(), Tensor(), i64({3, 3})},
                          {{"keep_aspect_ratio_policy", std::string("not_larger")}}, 18),
               f32({2, 3}, {1, 2, 4, 5, 6, 8}));
  // not_smaller: scale 1.5, extents 3 and 6.
  expect_close(run_resize({x, Tensor(), Tensor(), i64({3, 3})},
                          {{"mode", std::string("linear")},
                           {"keep_aspect_ratio_policy", std::string("not_smaller")}},
                          18),
               f32({3, 6}, {1, 1.5f, 2.1666667f, 2.8333333f, 3.5f, 4, 3, 3.5f, 4.1666665f, 4.8333335f,
                            5.5f, 6, 5, 5.5f, 6.1666665f, 6.8333335f, 7.5f, 8}));
}

TEST(Resize, HalfPixelSymmetricCentresTheRoundedOutput) {
  // 5 * 0.7 = 3.5 rounds down to 3 outputs, shifted by 2.5 * (1 - 3 / 3.5) against half_pixel.
  const Tensor x = f32({1, 5}, {1, 4, 2, 8, 5});
  const Tensor scales = f32({2}, {1, 0.7f});
  expect_close(run_resize({x, Tensor(), scales},
                          {{"mode", std::string("linear")},
                           {"coordinate_transformation_mode", std::string("half_pixel_symmetric")}},
                          19),
               f32({1, 3}, {2.7142856f, 2.0f, 6.7142859f}));
  expect_close(run_resize({x, Tensor(), scales}, {{"mode", std::string("linear")}}, 19),
               f32({1, 3}, {1.6428572f, 2.7142856f, 7.7857141f}));
}

TEST(Resize, TfCropAndResizeNearestExtrapolates) {
  // roi rows [0.2, 1.3], columns [-0.1, 0.9]: row 2 and column 0 fall outside the image.
  const Tensor x = iota_f32({3, 4});
  const Attrs attrs{{"mode", std::string("nearest")},
                    {"coordinate_transformation_mode", std::string("tf_crop_and_resize")},
                    {"extrapolation_value", -1.0f}};
  expect_close(run_resize({x, f32({4}, {0.2f, -0.1f, 1.3f, 0.9f}), Tensor(), i64({3, 3})}, attrs),
               f32({3, 3}, {-1, 1, 3, -1, 5, 7, -1, -1, -1}));
  // With axes, the roi speaks of the listed axes only.
  expect_close(run_resize({x, f32({2}, {-0.1f, 0.9f}), Tensor(), i64({3})},
                          {{"mode", std::string("nearest")},
                           {"coordinate_transformation_mode", std::string("tf_crop_and_resize")},
                           {"extrapolation_value", -1.0f},
                           {"axes", Ints{1}}},
                          18),
               f32({3, 3}, {-1, 1, 3, -1, 5, 7, -1, 9, 11}));
  EXPECT_THROWS_SAYING(run_resize({x, f32({2}, {0, 1}), Tensor(), i64({3, 3})}, attrs), InvalidArgument,
                       "roi", "start and an end");
  EXPECT_THROWS_SAYING(run_resize({x, Tensor(), Tensor(), i64({3, 3})}, attrs), InvalidArgument, "roi");
}

TEST(Upsample, IsResize10ByAnotherName) {
  const Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  NodeSpec spec;
  spec.op_type = "Upsample";
  spec.inputs = {x};
  spec.attributes = {{"mode", std::string("linear")}, {"scales", std::vector<float>{1, 1, 2, 2}}};
  spec.opset = 7;
  // Asymmetric coordinates: the last row and column repeat the edge.
  expect_close(run_node(spec).at(0),
               f32({1, 1, 4, 4}, {1, 1.5f, 2, 2, 2, 2.5f, 3, 3, 3, 3.5f, 4, 4, 3, 3.5f, 4, 4}));
  spec.opset = 9;
  spec.inputs = {x, f32({4}, {1, 1, 1, 2})};
  spec.attributes = {};
  expect_close(run_node(spec).at(0), f32({1, 1, 2, 4}, {1, 1, 2, 2, 3, 3, 4, 4}));

  spec.opset = 7;
  spec.inputs = {x};
  EXPECT_THROWS_SAYING(run_node(spec), Unsupported, "scales attribute is required");
  spec.attributes = {{"mode", std::string("cubic")}, {"scales", std::vector<float>{1, 1, 2, 2}}};
  EXPECT_THROWS_SAYING(run_node(spec), Unsupported, "cubic");
}

TEST(Resize, RejectsBadInputs) {
  const Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  EXPECT_THROW(run_resize({x, Tensor(), f32({4}, {1, 1, 2, 2}), i64({1, 1, 4, 4})}, {}), InvalidArgument);
  EXPECT_THROW(run_resize({x, Tensor(), Tensor(), Tensor()}, {}), InvalidArgument);
  EXPECT_THROW(resize_scales(x, {1, 2, 2}, {}), InvalidArgument);
  EXPECT_THROW(resize_scales(x, {1, 1, -2, 2}, {}), InvalidArgument);
  EXPECT_THROW(resize_sizes(x, {1, 1, 4}, {}), InvalidArgument);
}

// Scales from a crafted model's constants (folded at load) whose extent is past 2^56, or
// infinite: an error naming the node, where the extent's conversion to int64 was undefined
// (UBSan, found by tests/fuzz/onnx_import_fuzz.cpp).
TEST(Resize, ScalesPastAnyExtentAreRejected) {
  const Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  EXPECT_THROW(resize_scales(x, {1, 1, 1e30f, 1}, {}), InvalidArgument);
  EXPECT_THROW(resize_scales(x, {1, 1, std::numeric_limits<float>::infinity(), 1}, {}), InvalidArgument);
  EXPECT_THROW(resize_scales(x, {1, 1, std::numeric_limits<float>::quiet_NaN(), 1}, {}), InvalidArgument);
}

}  // namespace
}  // namespace redwood
