// Resize: hand-computed values for the models' cases (PP-OCR det's nearest/asymmetric/floor x2,
// opset 10's legacy nearest), every coordinate transformation and nearest mode against a naive
// per-element implementation, N-d linear, and the rejections.

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
  const Tensor scales = f32({4}, {1, 1, 2, 2});
  expect_unsupported_naming([&] { resize_scales(x, {1, 1, 2, 2}, {{"mode", std::string("cubic")}}); },
                            "cubic");
  expect_unsupported_naming(
      [&] {
        run_resize({x, f32({8}, {0, 0, 0, 0, 1, 1, 1, 1}), Tensor(), i64({1, 1, 3, 3})},
                   {{"mode", std::string("linear")},
                    {"coordinate_transformation_mode", std::string("tf_crop_and_resize")}});
      },
      "tf_crop_and_resize");
  expect_unsupported_naming(
      [&] { resize_scales(x, {1, 1, 2, 2}, {{"nearest_mode", std::string("round_half_even")}}); },
      "round_half_even");
  expect_unsupported_naming(
      [&] { run_resize({x, Tensor(), scales}, {{"antialias", std::int64_t{1}}}, 18); }, "antialias");
  EXPECT_THROW(resize_scales(x.cast(DType::kF16), {1, 1, 2, 2}, {}), Unsupported);
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
