// passes::fuse_conv_shortcut (after choose_gpu_layout in the GPU pipeline): a ResNet block's 1x1
// downsample becomes the second input of the 1x1 convolution whose residual it was, and the
// rewritten graph computes what the original does through the reference kernels (the rw.ConvNhwc
// reference kernel with input 4, backends/cpu/reference/nhwc.cpp). Host only; the CUDA kernel is
// tested in tests/backends/cuda/kernels/conv_nhwc/conv_nhwc_shortcut_test.cpp.

#include "backends/cuda/passes/gpu_pipeline.hpp"
#include "core/error.hpp"
#include "runtime/executor.hpp"
#include "core/passes/pass_manager.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace redwood {
namespace {

using testing::batched_nchw;

// ResNet's bottleneck entry block on a 16-channel 10x10 input: 1x1 16→8 + Relu, 3x3/`stride`
// 8→8 + Relu, 1x1 8→32, plus the downsample 1x1/`stride` 16→32 of the input, Add, Relu.
// `tap`: the downsample's output is also a graph output (so it must stay).
std::shared_ptr<Graph> block(std::int64_t stride, bool tap = false) {
  auto g = std::make_shared<Graph>();
  g->name = "block";
  g->opset = 17;
  g->inputs = {batched_nchw("x", 16, 10, 10)};
  g->value_info["x"] = g->inputs[0];
  const std::int64_t o = (10 - 1) / stride + 1;
  std::uint32_t seed = 40;
  auto conv = [&](const std::string& name, const std::string& in, const std::string& out, std::int64_t c,
                  std::int64_t k, std::int64_t window, std::int64_t s, std::int64_t extent) {
    g->initializers[name + "_w"] = testing::random_tensor(DType::kF32, {k, c, window, window}, -0.5, 0.5, ++seed);
    g->initializers[name + "_b"] = testing::random_tensor(DType::kF32, {k}, -0.2, 0.2, ++seed);
    Node n = testing::make_node(name, "Conv", {in, name + "_w", name + "_b"}, {out});
    n.attributes["strides"] = std::vector<std::int64_t>{s, s};
    const std::int64_t pad = window / 2;
    n.attributes["pads"] = std::vector<std::int64_t>{pad, pad, pad, pad};
    g->nodes.push_back(std::move(n));
    g->value_info[out] = batched_nchw(out, k, extent, extent);
  };
  auto unary = [&](const std::string& op, const std::string& in, const std::string& out, std::int64_t c,
                   std::int64_t extent) {
    g->nodes.push_back(testing::make_node(out + "_" + op, op, {in}, {out}));
    g->value_info[out] = batched_nchw(out, c, extent, extent);
  };
  conv("conv1", "x", "h1", 16, 8, 1, 1, 10);
  unary("Relu", "h1", "a1", 8, 10);
  conv("conv2", "a1", "h2", 8, 8, 3, stride, o);
  unary("Relu", "h2", "a2", 8, o);
  conv("conv3", "a2", "h3", 8, 32, 1, 1, o);
  conv("downsample", "x", "d", 16, 32, 1, stride, o);
  g->nodes.push_back(testing::make_node("add", "Add", {"h3", "d"}, {"sum"}));
  g->value_info["sum"] = batched_nchw("sum", 32, o, o);
  unary("Relu", "sum", "y", 32, o);
  g->outputs = {g->value_info.at("y")};
  if (tap) g->outputs.push_back(g->value_info.at("d"));
  return g;
}

std::shared_ptr<Graph> optimized(const std::shared_ptr<Graph>& g, DType storage, bool fuse,
                                 std::vector<PassRecord>* records = nullptr) {
  auto copy = std::make_shared<Graph>(*g);
  auto r = passes::optimize(*copy, passes::gpu_pipeline({.nhwc_storage = storage, .fuse_shortcuts = fuse}));
  if (records != nullptr) *records = std::move(r);
  return copy;
}

std::vector<Tensor> run_reference(const std::shared_ptr<Graph>& g, const Tensor& x) {
  ExecutorOptions reference;
  reference.optimize = false;
  reference.reference_only = true;
  return Executor(g, reference).run({{"x", x}});
}

std::size_t convs(const Graph& g) {
  return static_cast<std::size_t>(
      std::count_if(g.nodes.begin(), g.nodes.end(), [](const Node& n) { return n.op_type == "rw.ConvNhwc"; }));
}

const Node* with_shortcut(const Graph& g) {
  for (const Node& n : g.nodes) {
    if (n.op_type == "rw.ConvNhwc" && n.inputs.size() == 5 && !n.inputs[4].empty()) return &n;
  }
  return nullptr;
}

TEST(FuseConvShortcut, TheDownsampleBecomesTheLastConvolutionsSecondInput) {
  for (std::int64_t stride : {1, 2}) {
    const auto original = block(stride);
    std::vector<PassRecord> records;
    const auto g = optimized(original, DType::kF16, true, &records);
    EXPECT_EQ(convs(*g), 3u) << "stride " << stride;
    const Node* conv3 = with_shortcut(*g);
    ASSERT_NE(conv3, nullptr);
    EXPECT_EQ(conv3->inputs[3], "");  // the residual is gone: it was the downsample
    EXPECT_EQ(conv3->attr_ints("rw.shortcut_strides"), (std::vector<std::int64_t>{stride, stride}));
    EXPECT_EQ(conv3->attr_string("rw.activation", ""), "Relu");
    const Tensor* w = g->find_initializer(conv3->inputs[1]);
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->shape(), (Shape{32, 1, 1, 8 + 16}));
    EXPECT_EQ(w->dtype(), DType::kF16);
    const Tensor* b = g->find_initializer(conv3->inputs[2]);
    ASSERT_NE(b, nullptr);
    EXPECT_FLOAT_EQ(b->data<float>()[5], original->find_initializer("conv3_b")->data<float>()[5] +
                                             original->find_initializer("downsample_b")->data<float>()[5]);
    ASSERT_EQ(records.back().pass, "fuse_conv_shortcut");
    ASSERT_EQ(records.back().changes.size(), 1u);
    EXPECT_NE(records.back().changes[0].find("takes the shortcut downsample (1x1, stride " + std::to_string(stride)),
              std::string::npos)
        << records.back().changes[0];

    const Tensor x = testing::random_tensor(DType::kF32, {2, 16, 10, 10}, -1, 1, 9);
    const Tensor want = run_reference(original, x).at(0);
    EXPECT_LT(testing::relative_l2(run_reference(g, x).at(0), want), 1e-2);
    // At fp32 storage only the layout and the summation order change.
    const auto f32 = optimized(original, DType::kF32, true);
    ASSERT_NE(with_shortcut(*f32), nullptr);
    EXPECT_LT(testing::relative_l2(run_reference(f32, x).at(0), want), 1e-5);
  }
}

TEST(FuseConvShortcut, LeavesADownsampleOthersReadAndCanBeTurnedOff) {
  const auto tapped = optimized(block(2, true), DType::kF16, true);
  EXPECT_EQ(with_shortcut(*tapped), nullptr);
  EXPECT_EQ(convs(*tapped), 4u);
  const auto off = optimized(block(2), DType::kF16, false);
  EXPECT_EQ(with_shortcut(*off), nullptr);
  EXPECT_EQ(convs(*off), 4u);
  EXPECT_EQ(passes::gpu_pipeline({.nhwc_storage = DType::kF16}).back().name, "choose_gpu_layout");
  // The pass-level default: off (the CUDA runner asks for it, CudaOptions::fuse_conv_shortcuts).
  EXPECT_EQ(passes::gpu_pipeline({.nhwc_storage = DType::kF16}).back().name, "choose_gpu_layout");
  EXPECT_EQ(passes::gpu_pipeline({.nhwc_storage = DType::kF16, .fuse_shortcuts = true}).back().name, "fuse_conv_shortcut");
  // No layout, no fusion: it only rewrites rw.ConvNhwc nodes.
  EXPECT_EQ(passes::gpu_pipeline({.nhwc_storage = std::nullopt}).back().name, "fuse_elementwise");
}

TEST(FuseConvShortcut, ReferenceKernelRejectsWeightsWithoutTheShortcutsChannels) {
  auto g = optimized(block(2), DType::kF32, true);
  Node* conv3 = nullptr;
  for (Node& n : g->nodes) {
    if (n.op_type == "rw.ConvNhwc" && n.inputs.size() == 5 && !n.inputs[4].empty()) conv3 = &n;
  }
  ASSERT_NE(conv3, nullptr);
  Tensor& w = g->initializers.at(conv3->inputs[1]);
  w = testing::random_tensor(DType::kF32, {32, 1, 1, 8}, -1, 1, 3);  // x's channels only
  const Tensor x = testing::random_tensor(DType::kF32, {1, 16, 10, 10}, -1, 1, 9);
  try {
    run_reference(g, x);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("for a 1x1 convolution of 8 + 16 (shortcut) input channels"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace redwood
