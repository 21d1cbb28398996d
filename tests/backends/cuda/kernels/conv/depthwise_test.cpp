// The tiled depthwise convolution (conv_depthwise.cu) and the direct kernel it falls back to,
// both against the reference Conv kernel on odd shapes: 3×3/5×5/7×7 windows, stride 1 and 2,
// symmetric and asymmetric padding, planes of 1×1 to 112×112 with W not a multiple of the 4
// outputs a thread computes, planes split into several tiles along W and H, several planes per
// block (7×7, 13×13), channel multiplier 1 and 2, batch 1 and 3, with and without bias, Relu,
// HardSwish, Clip or no activation, with and without a residual. Dilation, other windows and
// other strides take the direct kernel (checked). Exact fp32: relative L2 ≤ 1e-5 and element-wise
// |got − want| ≤ 1e-5 + 1e-4·|want|. Then the Conv kernel's dispatch through a GraphRunner (at
// fp16: depthwise stays exact) and, host only, the tiling the kernel picks per shape.

#include "backends/cuda/device_tensor.hpp"
#include "backends/cuda/graph_runner.hpp"
#include "backends/cuda/kernels/conv/conv_depthwise.hpp"
#include "backends/cuda/kernels/conv/conv_kernels.hpp"
#include "backends/cuda/kernels/elementwise/fused_epilogue.hpp"
#include "core/error.hpp"
#include "gpu_test_support.hpp"
#include "provider_run.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <fmt/format.h>

namespace redwood::cuda {
namespace {

using kernels::ConvShape;
using kernels::DepthwiseTiling;
using redwood::testing::random_tensor;

struct DwCase {
  std::string name;
  int n, c, h, w;
  int mult;              // output channels per input channel
  int r;                 // square window
  int stride;
  int pt, pl, pb, pr;    // pads: top, left, bottom, right
  int dil = 1;
  bool bias = true, residual = false;
  std::string act;       // "" (none), Relu, HardSwish, Clip (0, 1.5)
  bool tiled = true;     // the tiled kernel takes it
};

std::vector<DwCase> dw_cases() {
  return {
      {"mnv3_3x3_s1_56_hswish", 3, 8, 56, 56, 1, 3, 1, 1, 1, 1, 1, 1, true, false, "HardSwish"},
      {"3x3_s2_112_relu", 1, 4, 112, 112, 1, 3, 2, 1, 1, 1, 1, 1, true, false, "Relu"},
      {"3x3_s1_112_two_x_tiles", 1, 3, 112, 112, 1, 3, 1, 1, 1, 1, 1, 1, false, true, ""},
      {"5x5_s2_13_mult2_residual_clip", 3, 5, 13, 13, 2, 5, 2, 2, 2, 2, 2, 1, true, true, "Clip"},
      {"5x5_s1_7x7_planes_per_block", 1, 40, 7, 7, 1, 5, 1, 2, 2, 2, 2, 1, false, false, "HardSwish"},
      {"7x7_s1_13x29_mult2", 1, 3, 13, 29, 2, 7, 1, 3, 3, 3, 3, 1, true, false, ""},
      {"3x3_valid_14_residual", 3, 6, 14, 14, 1, 3, 1, 0, 0, 0, 0, 1, true, true, "Relu"},
      {"3x3_s2_asymmetric_pads", 1, 7, 15, 22, 1, 3, 2, 0, 1, 1, 2, 1, true, false, "HardSwish"},
      {"7x7_s2_asymmetric_residual", 3, 2, 56, 57, 1, 7, 2, 2, 3, 3, 2, 1, true, true, "Clip"},
      {"5x5_s1_wide_three_x_tiles", 1, 3, 9, 301, 1, 5, 1, 2, 2, 2, 2, 1, true, false, "Relu"},
      {"3x3_s1_tall_narrow", 1, 2, 300, 5, 1, 3, 1, 1, 1, 1, 1, 1, true, true, "HardSwish"},
      {"3x3_one_pixel_plane", 3, 5, 1, 1, 2, 3, 1, 1, 1, 1, 1, 1, true, false, "Relu"},
      {"3x3_s1_7x7_many_planes_mult2", 3, 37, 7, 7, 2, 3, 1, 1, 1, 1, 1, 1, true, true, "HardSwish"},
      {"dilated_3x3_direct", 1, 4, 13, 13, 1, 3, 1, 2, 2, 2, 2, 2, true, false, "Relu", false},
      {"9x9_direct", 1, 3, 12, 12, 1, 9, 1, 4, 4, 4, 4, 1, true, false, "", false},
      {"stride3_direct", 1, 3, 16, 16, 1, 3, 3, 1, 1, 1, 1, 1, true, false, "", false},
  };
}

int out_extent(int in, int pad, int r, int dil, int stride) { return (in + pad - (r - 1) * dil - 1) / stride + 1; }

ConvShape shape_of(const DwCase& c) {
  const int oh = out_extent(c.h, c.pt + c.pb, c.r, c.dil, c.stride);
  const int ow = out_extent(c.w, c.pl + c.pr, c.r, c.dil, c.stride);
  return ConvShape{c.n,      c.c,      c.h,  c.w,  c.c * c.mult, c.r, c.r, oh, ow,
                   c.stride, c.stride, c.pt, c.pl, c.dil,        c.dil, c.c};
}

Node conv_node(const DwCase& c, const std::vector<std::string>& inputs) {
  Node node = redwood::testing::make_node(c.name, "Conv", inputs, {"y"});
  node.attributes["strides"] = std::vector<std::int64_t>{c.stride, c.stride};
  node.attributes["pads"] = std::vector<std::int64_t>{c.pt, c.pl, c.pb, c.pr};
  node.attributes["dilations"] = std::vector<std::int64_t>{c.dil, c.dil};
  node.attributes["group"] = std::int64_t{c.c};
  if (!c.act.empty()) node.attributes["rw.activation"] = c.act;
  if (c.act == "Clip") {
    node.attributes["rw.alpha"] = 0.0f;
    node.attributes["rw.beta"] = 1.5f;
  }
  return node;
}

// The reference Conv kernel (CPU) on `inputs` (x, w, bias or undefined, residual).
Tensor reference_conv(const DwCase& c, const std::vector<Tensor>& inputs) {
  return testing::run_with_provider("Conv", inputs, conv_node(c, {}).attributes, Device::kCpu, kReferenceProvider,
                                    Precision::kFp32)
      .at(0);
}

void PrintTo(const DwCase& c, std::ostream* os) { *os << c.name; }

class DepthwiseVsReference : public ::testing::TestWithParam<DwCase> {};

TEST_P(DepthwiseVsReference, TiledAndDirectAgree) {
  const DwCase& c = GetParam();
  const ConvShape p = shape_of(c);
  const DepthwiseTiling t = kernels::depthwise_tiling(p);
  EXPECT_EQ(t.ok, c.tiled) << c.name << ": which kernel runs it";
  RW_SKIP_WITHOUT_GPU();
  const Shape y_shape = {p.n, p.k, p.oh, p.ow};
  std::vector<Tensor> inputs = {random_tensor(DType::kF32, {c.n, c.c, c.h, c.w}, -1, 1, 31),
                                random_tensor(DType::kF32, {p.k, 1, c.r, c.r}, -1, 1, 32)};
  inputs.push_back(c.bias ? random_tensor(DType::kF32, {p.k}, -1, 1, 33) : Tensor());
  if (c.residual) inputs.push_back(random_tensor(DType::kF32, y_shape, -1, 1, 34));
  const Tensor expected = reference_conv(c, inputs);
  ASSERT_EQ(expected.shape(), y_shape);

  const Tensor x = to_device(inputs[0]), w = to_device(inputs[1]);
  const Tensor bias = c.bias ? to_device(inputs[2]) : Tensor();
  const Tensor residual = c.residual ? to_device(inputs[3]) : Tensor();
  kernels::Epilogue e = fused_activation(conv_node(c, {"x", "w"}));
  if (c.bias) e.bias = bias.data<float>();
  if (c.residual) e.residual = residual.data<float>();
  cudaGetLastError();  // an earlier test's deliberate failure stays here: clear it
  for (const bool tiled : {true, false}) {
    if (tiled && !t.ok) continue;
    Tensor y = device_empty(DType::kF32, y_shape);
    if (tiled) {
      kernels::launch_conv_depthwise_tiled(p, t, x.data<float>(), w.data<float>(), y.data<float>(), e, nullptr);
    } else {
      kernels::launch_conv_depthwise(p, x.data<float>(), w.data<float>(), y.data<float>(), e, nullptr);
    }
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const Tensor got = to_host(y);
    EXPECT_LE(testing::relative_l2(got, expected), 1e-5) << c.name << (tiled ? " tiled" : " direct");
    redwood::testing::expect_close(got, expected, 1e-4, 1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, DepthwiseVsReference, ::testing::ValuesIn(dw_cases()),
                         [](const ::testing::TestParamInfo<DwCase>& info) { return info.param.name; });

// x → depthwise Conv(w, b) → y through the Conv kernel's dispatch.
std::shared_ptr<Graph> depthwise_graph(const DwCase& c) {
  auto graph = redwood::testing::make_x_to_y_graph("depthwise");
  graph->initializers["w"] = random_tensor(DType::kF32, {c.c * c.mult, 1, c.r, c.r}, -1, 1, 41);
  graph->initializers["b"] = random_tensor(DType::kF32, {c.c * c.mult}, -1, 1, 42);
  graph->nodes.push_back(conv_node(c, {"x", "w", "b"}));
  graph->nodes.back().outputs = {"y"};
  return graph;
}

TEST(DepthwiseDispatch, ConvKernelRunsTheTiledKernelAndFallsBack) {
  RW_SKIP_WITHOUT_GPU();
  const DwCase tiled{"dw_tiled", 2, 24, 28, 30, 1, 5, 2, 2, 2, 2, 2, 1, true, false, "HardSwish"};
  DwCase direct = tiled;
  direct.name = "dw_dilated";
  direct.dil = 2;
  for (const DwCase& c : {tiled, direct}) {
    auto graph = depthwise_graph(c);
    RunnerOptions options;
    options.precision = Precision::kFp16;  // depthwise runs exact fp32 at every precision
    options.optimize = false;
    GraphRunner runner(graph, options);
    const Shape input = {c.n, c.c, c.h, c.w};
    const std::vector<std::string> v = runner.plan_for({input}).variants();
    ASSERT_EQ(v.size(), 1u);
    EXPECT_NE(v[0].find(c.dil == 1 ? "depthwise tiled" : "depthwise direct"), std::string::npos) << v[0];
    const Tensor xin = random_tensor(DType::kF32, input, -1, 1, 43);
    const auto got = runner.run({{"x", xin}});
    ASSERT_EQ(got.size(), 1u);
    const Tensor expected = reference_conv(c, {xin, graph->initializers.at("w"), graph->initializers.at("b")});
    EXPECT_LE(testing::relative_l2(got[0], expected), 1e-5) << c.name;
    redwood::testing::expect_close(got[0], expected, 1e-4, 1e-5);
  }
}

TEST(DepthwiseTilingChoice, CoversThePlaneWithinTheBlockAndSharedMemory) {
  // Host only: MobileNetV3 and PP-OCR depthwise shapes and the odd ones above.
  std::vector<ConvShape> shapes;
  for (const DwCase& c : dw_cases()) {
    if (c.tiled) shapes.push_back(shape_of(c));
  }
  const int big[][6] = {{32, 16, 112, 3, 1, 1}, {32, 64, 112, 3, 2, 1}, {32, 72, 56, 5, 2, 2}, {32, 120, 28, 5, 1, 2},
                        {32, 672, 14, 5, 2, 2}, {32, 960, 7, 5, 1, 2},  {1, 16, 320, 3, 1, 1}, {1, 48, 160, 3, 2, 1},
                        {1, 8, 640, 7, 2, 3}};
  for (const auto& b : big) {
    const int o = (b[2] + 2 * b[5] - b[3]) / b[4] + 1;
    shapes.push_back(ConvShape{b[0], b[1], b[2], b[2], b[1], b[3], b[3], o, o, b[4], b[4], b[5], b[5], 1, 1, b[1]});
  }
  for (const ConvShape& p : shapes) {
    const DepthwiseTiling t = kernels::depthwise_tiling(p);
    const std::string at = fmt::format("{}x{} plane, {}x{} window, stride {}", p.oh, p.ow, p.r, p.s, p.stride_h);
    ASSERT_TRUE(t.ok) << at;
    const int threads = t.tx * t.ty * t.tc;
    EXPECT_LE(threads, 256) << at;
    EXPECT_LE(t.tx, 16) << at;
    // Every output is covered, and no tile is wholly outside the plane.
    EXPECT_GE(t.tx * kernels::kDepthwiseVec * t.xtiles, p.ow) << at;
    EXPECT_LT(t.tx * kernels::kDepthwiseVec * (t.xtiles - 1), p.ow) << at;
    EXPECT_GE(t.ty * t.ytiles, p.oh) << at;
    EXPECT_LT(t.ty * (t.ytiles - 1), p.oh) << at;
    // The shared-memory tile holds each thread's whole window.
    EXPECT_GE(t.rows, (t.ty - 1) * p.stride_h + p.r) << at;
    EXPECT_GE(t.pitch, ((t.tx - 1) * kernels::kDepthwiseVec + kernels::kDepthwiseVec - 1) * p.stride_w + p.s) << at;
    EXPECT_EQ(t.pitch % 4, 0) << at << ": float4 reads";
    EXPECT_EQ(t.smem_bytes, t.tc * t.rows * t.pitch * 4) << at;
    EXPECT_LE(t.smem_bytes, 44 * 1024) << at;
    const long long planes = static_cast<long long>(p.n) * p.k;
    EXPECT_EQ(t.blocks, (planes + t.tc - 1) / t.tc * t.xtiles * t.ytiles) << at;
    // Small planes fill the block with more planes: at least half its threads do work.
    if (planes >= 256) {
      EXPECT_GE(threads, 128) << at;
    }
  }
  // A 7×7 plane: 2 × 7 threads a plane, 18 planes a block.
  const DepthwiseTiling small =
      kernels::depthwise_tiling(ConvShape{32, 960, 7, 7, 960, 5, 5, 7, 7, 1, 1, 2, 2, 1, 1, 960});
  EXPECT_EQ(small.tx, 2);
  EXPECT_EQ(small.ty, 7);
  EXPECT_EQ(small.tc, 18);
}

TEST(DepthwiseTilingChoice, LeavesOtherShapesToTheDirectKernel) {
  const ConvShape base{1, 8, 20, 20, 8, 3, 3, 20, 20, 1, 1, 1, 1, 1, 1, 8};
  EXPECT_TRUE(kernels::depthwise_tiling(base).ok);
  ConvShape p = base;
  p.dil_h = p.dil_w = 2;
  EXPECT_FALSE(kernels::depthwise_tiling(p).ok) << "dilation";
  p = base;
  p.s = 5;
  EXPECT_FALSE(kernels::depthwise_tiling(p).ok) << "a 3×5 window";
  p = base;
  p.r = p.s = 1;
  EXPECT_FALSE(kernels::depthwise_tiling(p).ok) << "a 1×1 window";
  p = base;
  p.stride_w = 2;
  EXPECT_FALSE(kernels::depthwise_tiling(p).ok) << "unequal strides";
  p = base;
  p.groups = 1;
  p.c = 1;
  p.k = 8;
  EXPECT_TRUE(kernels::depthwise_tiling(p).ok) << "one input channel, eight outputs: multiplier 8";
  p = base;
  p.groups = 4;
  EXPECT_FALSE(kernels::depthwise_tiling(p).ok) << "two input channels per group";
}

}  // namespace
}  // namespace redwood::cuda
