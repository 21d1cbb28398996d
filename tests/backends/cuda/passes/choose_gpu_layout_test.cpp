// passes::choose_gpu_layout: which nodes go NHWC at fp16/bf16 (and in fp32 for tf32), where the
// conversions go, and that the rewritten graph computes what the original does through the
// reference kernels (the rw.*Nhwc reference kernels, backends/cpu/reference/nhwc.cpp), within the
// storage type's rounding (fp32 storage: to fp32 summation order).
// Host only; the CUDA kernels of these ops are tested in tests/backends/cuda.

#include "backends/cuda/passes/gpu_pipeline.hpp"
#include "core/error.hpp"
#include "runtime/executor.hpp"
#include "core/passes/pass_manager.hpp"
#include "core/ops/tf32.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <optional>

namespace redwood {
namespace {

// A graph built node by node with every value's shape known (the batch a symbol), as the ONNX
// importer's shape inference leaves it.
struct Builder {
  std::shared_ptr<Graph> g = std::make_shared<Graph>();
  std::uint32_t seed = 10;

  Builder(const std::string& input, std::vector<Dim> dims) {
    g->name = "layout";
    g->opset = 17;
    g->inputs = {info(input, dims)};
    g->value_info[input] = g->inputs[0];
  }
  static ValueInfo info(const std::string& name, std::vector<Dim> dims) {
    ValueInfo v;
    v.name = name;
    v.dtype = DType::kF32;
    v.has_shape = true;
    v.dims = std::move(dims);
    return v;
  }
  static std::vector<Dim> nchw(std::int64_t c, std::int64_t h, std::int64_t w) {
    return {{-1, "N"}, {c, ""}, {h, ""}, {w, ""}};
  }
  void value(const std::string& name, std::vector<Dim> dims) { g->value_info[name] = info(name, std::move(dims)); }

  // Conv x -> y with k output channels, a bias, and the given window; `group` 0 means depthwise.
  void conv(const std::string& name, const std::string& x, const std::string& y, std::int64_t c, std::int64_t k,
            std::int64_t window, std::int64_t stride, std::int64_t group, std::vector<Dim> out) {
    const std::int64_t groups = group == 0 ? c : group;
    g->initializers[name + "_w"] =
        testing::random_tensor(DType::kF32, {k, c / groups, window, window}, -0.5, 0.5, ++seed);
    g->initializers[name + "_b"] = testing::random_tensor(DType::kF32, {k}, -0.2, 0.2, ++seed);
    Node n = testing::make_node(name, "Conv", {x, name + "_w", name + "_b"}, {y});
    const std::int64_t pad = window / 2;
    n.attributes["strides"] = std::vector<std::int64_t>{stride, stride};
    n.attributes["pads"] = std::vector<std::int64_t>{pad, pad, pad, pad};
    n.attributes["group"] = groups;
    g->nodes.push_back(std::move(n));
    value(y, std::move(out));
  }
  void node(const std::string& name, const std::string& op, std::vector<std::string> in, const std::string& y,
            std::vector<Dim> out, std::map<std::string, AttributeValue> attrs = {}) {
    Node n = testing::make_node(name, op, std::move(in), {y});
    n.attributes = std::move(attrs);
    g->nodes.push_back(std::move(n));
    value(y, std::move(out));
  }
  void output(const std::string& name) { g->outputs.push_back(g->value_info.at(name)); }
};

std::vector<Tensor> run_reference(const std::shared_ptr<Graph>& g, const Tensor& x) {
  ExecutorOptions reference;
  reference.optimize = false;
  reference.reference_only = true;
  return Executor(g, reference).run({{g->inputs[0].name, x}});
}

std::size_t count(const Graph& g, const std::string& op) {
  return static_cast<std::size_t>(
      std::count_if(g.nodes.begin(), g.nodes.end(), [&](const Node& n) { return n.op_type == op; }));
}

const Node* producer(const Graph& g, const std::string& value) {
  for (const Node& n : g.nodes) {
    if (std::find(n.outputs.begin(), n.outputs.end(), value) != n.outputs.end()) return &n;
  }
  return nullptr;
}

// A small ResNet: 7x7/2 stem (3 channels, padded to 8), max pool, a residual block, global pool,
// classifier.
Builder resnet_like() {
  Builder b("image", Builder::nchw(3, 20, 20));
  b.conv("stem", "image", "stem_out", 3, 16, 7, 2, 1, Builder::nchw(16, 10, 10));
  b.node("stem_relu", "Relu", {"stem_out"}, "stem_act", Builder::nchw(16, 10, 10));
  b.node("pool", "MaxPool", {"stem_act"}, "pooled", Builder::nchw(16, 5, 5),
         {{"kernel_shape", std::vector<std::int64_t>{3, 3}},
          {"strides", std::vector<std::int64_t>{2, 2}},
          {"pads", std::vector<std::int64_t>{1, 1, 1, 1}}});
  b.conv("a", "pooled", "a_out", 16, 16, 3, 1, 1, Builder::nchw(16, 5, 5));
  b.node("a_relu", "Relu", {"a_out"}, "a_act", Builder::nchw(16, 5, 5));
  b.conv("b", "a_act", "b_out", 16, 16, 3, 1, 1, Builder::nchw(16, 5, 5));
  b.node("residual", "Add", {"b_out", "pooled"}, "sum", Builder::nchw(16, 5, 5));
  b.node("sum_relu", "Relu", {"sum"}, "block", Builder::nchw(16, 5, 5));
  b.node("gap", "GlobalAveragePool", {"block"}, "features", Builder::nchw(16, 1, 1));
  b.node("flatten", "Flatten", {"features"}, "flat", {{-1, "N"}, {16, ""}});
  b.g->initializers["fc_w"] = testing::random_tensor(DType::kF32, {10, 16}, -0.5, 0.5, 99);
  b.node("fc", "Gemm", {"flat", "fc_w"}, "logits", {{-1, "N"}, {10, ""}}, {{"transB", std::int64_t{1}}});
  b.output("logits");
  return b;
}

// A MobileNetV3 block: expand 1x1 + HardSwish, depthwise 3x3 + Relu, squeeze-excite (global pool,
// two 1x1 convolutions, HardSigmoid, Mul), project 1x1 with the block's input as residual.
Builder mobilenet_like() {
  Builder b("x", Builder::nchw(16, 9, 9));
  b.conv("expand", "x", "e", 16, 32, 1, 1, 1, Builder::nchw(32, 9, 9));
  b.node("expand_act", "HardSwish", {"e"}, "e_act", Builder::nchw(32, 9, 9));
  b.conv("dw", "e_act", "d", 32, 32, 3, 1, 0, Builder::nchw(32, 9, 9));
  b.node("dw_act", "Relu", {"d"}, "d_act", Builder::nchw(32, 9, 9));
  b.node("se_pool", "GlobalAveragePool", {"d_act"}, "s0", Builder::nchw(32, 1, 1));
  b.conv("se_reduce", "s0", "s1", 32, 8, 1, 1, 1, Builder::nchw(8, 1, 1));
  b.node("se_relu", "Relu", {"s1"}, "s1_act", Builder::nchw(8, 1, 1));
  b.conv("se_expand", "s1_act", "s2", 8, 32, 1, 1, 1, Builder::nchw(32, 1, 1));
  b.node("se_gate", "HardSigmoid", {"s2"}, "gate", Builder::nchw(32, 1, 1),
         {{"alpha", 1.0f / 6}, {"beta", 0.5f}});
  b.node("se_mul", "Mul", {"d_act", "gate"}, "scaled", Builder::nchw(32, 9, 9));
  b.conv("project", "scaled", "p", 32, 16, 1, 1, 1, Builder::nchw(16, 9, 9));
  b.node("residual", "Add", {"p", "x"}, "y", Builder::nchw(16, 9, 9));
  b.output("y");
  return b;
}

std::shared_ptr<Graph> optimized(const Builder& b, std::optional<DType> activations,
                                 std::vector<PassRecord>* records = nullptr) {
  auto g = std::make_shared<Graph>(*b.g);
  auto r = passes::optimize(*g, passes::gpu_pipeline({.nhwc_storage = activations}));
  if (records != nullptr) *records = std::move(r);
  return g;
}

TEST(ChooseGpuLayout, OnlyPipelinesWithAnNhwcStorageChooseALayout) {
  EXPECT_EQ(passes::gpu_pipeline().back().name, "fuse_elementwise");
  EXPECT_EQ(passes::gpu_pipeline({.nhwc_storage = std::nullopt}).back().name, "fuse_elementwise");
  EXPECT_EQ(passes::gpu_pipeline({.nhwc_storage = DType::kF32}).back().name, "choose_gpu_layout");  // tf32
  EXPECT_EQ(passes::gpu_pipeline({.nhwc_storage = DType::kF16}).back().name, "choose_gpu_layout");
  EXPECT_EQ(passes::gpu_pipeline({.nhwc_storage = DType::kBF16}).back().name, "choose_gpu_layout");
  Graph g;
  std::vector<std::string> log;
  EXPECT_THROW(passes::choose_gpu_layout(g, log, DType::kI32), InvalidArgument);
}

TEST(ChooseGpuLayout, ResNetBlockRunsNhwcFromTheStemToTheGlobalPool) {
  const Builder b = resnet_like();
  std::vector<PassRecord> records;
  auto g = optimized(b, DType::kF16, &records);
  EXPECT_EQ(count(*g, "rw.ToNhwc"), 1u);
  EXPECT_EQ(count(*g, "rw.ConvNhwc"), 3u);
  EXPECT_EQ(count(*g, "rw.MaxPoolNhwc"), 1u);
  EXPECT_EQ(count(*g, "rw.GlobalAveragePoolNhwc"), 1u);
  EXPECT_EQ(count(*g, "rw.ToNchw"), 0u);  // the global pool leaves NCHW fp32 itself
  EXPECT_EQ(count(*g, "Conv"), 0u);
  ASSERT_EQ(records.back().pass, "choose_gpu_layout");
  ASSERT_EQ(records.back().changes.size(), 1u);
  EXPECT_NE(records.back().changes[0].find("5 nodes run NHWC float16 (1 to NHWC, 0 back to NCHW)"), std::string::npos)
      << records.back().changes[0];

  // The image's 3 channels are padded to 8 by the conversion and in the stem's weights.
  const Node* stem = producer(*g, "stem_act_nhwc");
  ASSERT_NE(stem, nullptr);
  EXPECT_EQ(stem->op_type, "rw.ConvNhwc");
  const Node* to = producer(*g, stem->inputs[0]);
  ASSERT_NE(to, nullptr);
  EXPECT_EQ(to->op_type, "rw.ToNhwc");
  EXPECT_EQ(to->attr_int("rw.channels", 0), 8);
  EXPECT_EQ(to->attr_int("to", 0), dtype_to_onnx(DType::kF16));
  const Tensor* w = g->find_initializer(stem->inputs[1]);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dtype(), DType::kF16);
  EXPECT_EQ(w->shape(), (Shape{16, 7, 7, 8}));
  EXPECT_EQ(g->find_initializer("stem_w"), nullptr);  // the fp32 weights are gone
  // The residual block's second convolution reads the pooled NHWC value as its residual.
  const Node* second = producer(*g, "block_nhwc");
  ASSERT_NE(second, nullptr);
  ASSERT_EQ(second->inputs.size(), 4u);
  EXPECT_EQ(second->inputs[3], "pooled_nhwc");
  EXPECT_EQ(second->attr_string("rw.activation", ""), "Relu");
  const ValueInfo* vi = g->find_value("block_nhwc");
  ASSERT_NE(vi, nullptr);
  EXPECT_EQ(vi->dtype, DType::kF16);
  ASSERT_EQ(vi->dims.size(), 4u);
  EXPECT_EQ(vi->dims[0].symbol, "N");
  EXPECT_EQ(vi->dims[3].value, 16);

  const Tensor x = testing::random_tensor(DType::kF32, {2, 3, 20, 20}, -1, 1, 5);
  const Tensor want = run_reference(b.g, x).at(0);
  EXPECT_LT(testing::relative_l2(run_reference(g, x).at(0), want), 1e-2);
  EXPECT_LT(testing::relative_l2(run_reference(optimized(b, DType::kBF16), x).at(0), want), 4e-2);
  EXPECT_GT(testing::relative_l2(run_reference(g, x).at(0), want), 0);  // it really rounds
}

TEST(ChooseGpuLayout, MobileNetBlockKeepsTheSqueezeExciteProductsNchw) {
  const Builder b = mobilenet_like();
  auto g = optimized(b, DType::kBF16);
  EXPECT_EQ(count(*g, "rw.ConvNhwc"), 2u);  // expand, project
  EXPECT_EQ(count(*g, "rw.DepthwiseConvNhwc"), 1u);
  EXPECT_EQ(count(*g, "rw.GlobalAveragePoolNhwc"), 1u);
  EXPECT_EQ(count(*g, "rw.ScaleChannelsNhwc"), 1u);
  EXPECT_EQ(count(*g, "Conv"), 2u);  // the squeeze-excite 1x1 products on [N, C, 1, 1]
  // x enters once (shared by the expand convolution and the residual); y leaves once.
  EXPECT_EQ(count(*g, "rw.ToNhwc"), 1u);
  EXPECT_EQ(count(*g, "rw.ToNchw"), 1u);
  const Node* out = producer(*g, "y");
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(out->op_type, "rw.ToNchw");
  EXPECT_EQ(out->attr_int("rw.channels", 0), 16);
  const Node* dw = producer(*g, "d_act_nhwc");
  ASSERT_NE(dw, nullptr);
  EXPECT_EQ(dw->op_type, "rw.DepthwiseConvNhwc");
  EXPECT_EQ(g->find_initializer(dw->inputs[1])->shape(), (Shape{3, 3, 32}));
  EXPECT_EQ(g->find_initializer(dw->inputs[1])->dtype(), DType::kF32);
  const Node* scale = producer(*g, "scaled_nhwc");
  ASSERT_NE(scale, nullptr);
  EXPECT_EQ(scale->inputs, (std::vector<std::string>{"d_act_nhwc", "gate"}));

  const Tensor x = testing::random_tensor(DType::kF32, {3, 16, 9, 9}, -1, 1, 6);
  const Tensor want = run_reference(b.g, x).at(0);
  EXPECT_LT(testing::relative_l2(run_reference(g, x).at(0), want), 4e-2);
  EXPECT_LT(testing::relative_l2(run_reference(optimized(b, DType::kF16), x).at(0), want), 1e-2);
}

// x -> c1 -> a -> (global pool, Sigmoid) -> Mul(gate, a) -> c2 -> c3 -> y, with a also read by
// Tanh and a graph output; with `third` false c3 is left out (c2 gives y).
Builder scale_graph(bool third) {
  Builder b("x", Builder::nchw(8, 6, 6));
  b.conv("c1", "x", "a", 8, 16, 3, 1, 1, Builder::nchw(16, 6, 6));
  b.node("pool", "GlobalAveragePool", {"a"}, "s", Builder::nchw(16, 1, 1));
  b.node("gate", "Sigmoid", {"s"}, "g", Builder::nchw(16, 1, 1));
  b.node("mul", "Mul", {"g", "a"}, "m", Builder::nchw(16, 6, 6));
  b.conv("c2", "m", third ? "c" : "y", 16, third ? 16 : 8, 3, 1, 1, Builder::nchw(third ? 16 : 8, 6, 6));
  if (third) b.conv("c3", "c", "y", 16, 8, 1, 1, 1, Builder::nchw(8, 6, 6));
  b.node("tanh", "Tanh", {"a"}, "t", Builder::nchw(16, 6, 6));  // an NCHW reader of a
  b.output("y");
  b.output("t");
  b.output("a");  // and a graph output
  return b;
}

TEST(ChooseGpuLayout, AScaleWithTheDataOnTheRightAndAnNchwReaderOfAnNhwcValue) {
  const Builder b = scale_graph(true);
  auto g = optimized(b, DType::kF16);
  const Node* scale = producer(*g, "m_nhwc");
  ASSERT_NE(scale, nullptr);
  EXPECT_EQ(scale->op_type, "rw.ScaleChannelsNhwc");
  EXPECT_EQ(scale->inputs, (std::vector<std::string>{"a_nhwc", "g"}));
  // a comes back to NCHW once, under its own name, for Tanh and the graph output.
  const Node* back = producer(*g, "a");
  ASSERT_NE(back, nullptr);
  EXPECT_EQ(back->op_type, "rw.ToNchw");
  EXPECT_EQ(count(*g, "rw.ToNchw"), 2u);  // a and y
  EXPECT_EQ(count(*g, "rw.ToNhwc"), 1u);  // x
  std::vector<std::string> outputs;
  for (const auto& o : g->outputs) outputs.push_back(o.name);
  EXPECT_EQ(outputs, (std::vector<std::string>{"y", "t", "a"}));

  const Tensor x = testing::random_tensor(DType::kF32, {2, 8, 6, 6}, -1, 1, 7);
  const auto want = run_reference(b.g, x);
  const auto got = run_reference(g, x);
  ASSERT_EQ(got.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_LT(testing::relative_l2(got[i], want[i]), 1e-2) << i;
}

TEST(ChooseGpuLayout, AGroupNeedingMoreConversionsThanItHasConvolutionsStaysNchw) {
  // Two convolutions, three conversions (x in; a and y out).
  auto g = optimized(scale_graph(false), DType::kF16);
  EXPECT_EQ(count(*g, "Conv"), 2u);
  EXPECT_EQ(count(*g, "rw.ToNhwc") + count(*g, "rw.ToNchw") + count(*g, "rw.ScaleChannelsNhwc"), 0u);
}

TEST(ChooseGpuLayout, LeavesLoneConvolutionsAndOddChannelCounts) {
  // One convolution between NCHW ops: its two conversions would cost more than they save.
  Builder lone("x", Builder::nchw(8, 6, 6));
  lone.node("pre", "Tanh", {"x"}, "t", Builder::nchw(8, 6, 6));
  lone.conv("c", "t", "y", 8, 16, 3, 1, 1, Builder::nchw(16, 6, 6));
  lone.output("y");
  std::vector<PassRecord> records;
  auto g = optimized(lone, DType::kF16, &records);
  EXPECT_EQ(count(*g, "Conv"), 1u);
  EXPECT_EQ(count(*g, "rw.ToNhwc"), 0u);
  EXPECT_TRUE(records.back().changes.empty());

  // 12 output channels (not a multiple of 8) stay NCHW; the next two convolutions go NHWC from it.
  Builder odd("x", Builder::nchw(8, 6, 6));
  odd.conv("c1", "x", "a", 8, 12, 3, 1, 1, Builder::nchw(12, 6, 6));
  odd.conv("c2", "a", "b", 12, 16, 3, 1, 1, Builder::nchw(16, 6, 6));
  odd.conv("c3", "b", "y", 16, 16, 1, 1, 1, Builder::nchw(16, 6, 6));
  odd.output("y");
  g = optimized(odd, DType::kF16);
  EXPECT_EQ(count(*g, "Conv"), 1u);
  EXPECT_EQ(count(*g, "rw.ConvNhwc"), 2u);
  const Node* to = producer(*g, "a_nhwc");
  ASSERT_NE(to, nullptr);
  EXPECT_EQ(to->op_type, "rw.ToNhwc");
  EXPECT_EQ(to->attr_int("rw.channels", 0), 16);  // 12 padded to 16
  const Tensor x = testing::random_tensor(DType::kF32, {1, 8, 6, 6}, -1, 1, 8);
  EXPECT_LT(testing::relative_l2(run_reference(g, x).at(0), run_reference(odd.g, x).at(0)), 1e-2);

  // Without value info the pass cannot tell an image from a 1x1 plane: the convolutions stay.
  Builder unknown("x", Builder::nchw(8, 6, 6));
  unknown.conv("c1", "x", "a", 8, 16, 3, 1, 1, Builder::nchw(16, 6, 6));
  unknown.conv("c2", "a", "y", 16, 16, 1, 1, 1, Builder::nchw(16, 6, 6));
  unknown.output("y");
  unknown.g->value_info.erase("a");
  g = optimized(unknown, DType::kF16);
  EXPECT_EQ(count(*g, "Conv"), 2u);  // c2, whose input has no value info; then c1 alone is no group
  EXPECT_EQ(count(*g, "rw.ConvNhwc"), 0u);

  // Grouped (not depthwise) convolutions stay NCHW.
  Builder grouped("x", Builder::nchw(16, 6, 6));
  grouped.conv("c1", "x", "a", 16, 16, 3, 1, 2, Builder::nchw(16, 6, 6));
  grouped.conv("c2", "a", "y", 16, 16, 3, 1, 2, Builder::nchw(16, 6, 6));
  grouped.output("y");
  g = optimized(grouped, DType::kF16);
  EXPECT_EQ(count(*g, "Conv"), 2u);
}

TEST(ChooseGpuLayout, Fp32StoragePadsTheStemToFourChannelsAndKeepsTheValues) {
  // fp32 NHWC (precision tf32): the same groups as at fp16, the image's 3 channels padded to 4 (16
  // bytes of fp32) instead of 8, fp32 weights; through the reference kernels only the summation
  // order differs from the original graph.
  const Builder b = resnet_like();
  std::vector<PassRecord> records;
  auto g = optimized(b, DType::kF32, &records);
  EXPECT_EQ(count(*g, "rw.ToNhwc"), 1u);
  EXPECT_EQ(count(*g, "rw.ConvNhwc"), 3u);
  EXPECT_EQ(count(*g, "rw.MaxPoolNhwc"), 1u);
  EXPECT_EQ(count(*g, "rw.GlobalAveragePoolNhwc"), 1u);
  EXPECT_EQ(count(*g, "Conv"), 0u);
  ASSERT_EQ(records.back().pass, "choose_gpu_layout");
  ASSERT_EQ(records.back().changes.size(), 1u);
  EXPECT_NE(records.back().changes[0].find("5 nodes run NHWC float (1 to NHWC, 0 back to NCHW)"), std::string::npos)
      << records.back().changes[0];
  const Node* stem = producer(*g, "stem_act_nhwc");
  ASSERT_NE(stem, nullptr);
  const Node* to = producer(*g, stem->inputs[0]);
  ASSERT_NE(to, nullptr);
  EXPECT_EQ(to->op_type, "rw.ToNhwc");
  EXPECT_EQ(to->attr_int("rw.channels", 0), 4);
  EXPECT_EQ(to->attr_int("to", 0), dtype_to_onnx(DType::kF32));
  const Tensor* w = g->find_initializer(stem->inputs[1]);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dtype(), DType::kF32);
  EXPECT_EQ(w->shape(), (Shape{16, 7, 7, 4}));
  const ValueInfo* vi = g->find_value("block_nhwc");
  ASSERT_NE(vi, nullptr);
  EXPECT_EQ(vi->dtype, DType::kF32);

  const Tensor x = testing::random_tensor(DType::kF32, {2, 3, 20, 20}, -1, 1, 5);
  const Tensor want = run_reference(b.g, x).at(0);
  EXPECT_LT(testing::relative_l2(run_reference(g, x).at(0), want), 1e-6);

  // The MobileNet block: depthwise, squeeze-excite scale, residual, all fp32.
  const Builder m = mobilenet_like();
  auto gm = optimized(m, DType::kF32);
  EXPECT_EQ(count(*gm, "rw.ConvNhwc"), 2u);
  EXPECT_EQ(count(*gm, "rw.DepthwiseConvNhwc"), 1u);
  EXPECT_EQ(count(*gm, "rw.ScaleChannelsNhwc"), 1u);
  const Node* out = producer(*gm, "y");
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(out->op_type, "rw.ToNchw");
  const Tensor xm = testing::random_tensor(DType::kF32, {3, 16, 9, 9}, -1, 1, 6);
  EXPECT_LT(testing::relative_l2(run_reference(gm, xm).at(0), run_reference(m.g, xm).at(0)), 1e-6);

  // 12 channels into a convolution: padded to 12 at fp32 (16 at fp16).
  Builder odd("x", Builder::nchw(8, 6, 6));
  odd.conv("c1", "x", "a", 8, 12, 3, 1, 1, Builder::nchw(12, 6, 6));
  odd.conv("c2", "a", "b", 12, 16, 3, 1, 1, Builder::nchw(16, 6, 6));
  odd.conv("c3", "b", "y", 16, 16, 1, 1, 1, Builder::nchw(16, 6, 6));
  odd.output("y");
  auto go = optimized(odd, DType::kF32);
  const Node* to12 = producer(*go, "a_nhwc");
  ASSERT_NE(to12, nullptr);
  EXPECT_EQ(to12->attr_int("rw.channels", 0), 12);
  const Tensor xo = testing::random_tensor(DType::kF32, {1, 8, 6, 6}, -1, 1, 8);
  EXPECT_LT(testing::relative_l2(run_reference(go, xo).at(0), run_reference(odd.g, xo).at(0)), 1e-6);
}

bool is_tf32(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return (u & 0x1fffu) == 0;
}

std::shared_ptr<Graph> optimized_tf32(const Builder& b) {
  auto g = std::make_shared<Graph>(*b.g);
  passes::optimize(*g, passes::gpu_pipeline({.nhwc_storage = DType::kF32, .round_tf32 = true}));
  return g;
}

TEST(ChooseGpuLayout, Tf32RoundsTheWeightsAndMarksEveryNhwcWriter) {
  // Precision tf32: the convolutions' weights rounded to tf32 (nearest, ties away), and every
  // node that writes an NHWC activation marked rw.round_tf32, so that the tensor cores' tf32
  // operands are exact (wgmma truncates). Two stem weights with low bits set: a tie (rounds away
  // from zero) and one just below it (rounds down); at index 0 and 1 of [K, C, R, S], which are
  // indices 0 and 4 of [K, R, S, 4].
  Builder b = resnet_like();
  Tensor& stem_w = b.g->initializers.at("stem_w");
  std::uint32_t tie = 0x3e801000u, below = 0xbe800fffu;
  std::memcpy(stem_w.data<float>(), &tie, 4);
  std::memcpy(stem_w.data<float>() + 1, &below, 4);
  auto g = optimized_tf32(b);
  const Node* stem = producer(*g, "stem_act_nhwc");
  ASSERT_NE(stem, nullptr);
  const Tensor& w = *g->find_initializer(stem->inputs[1]);
  std::uint32_t got0, got4;
  std::memcpy(&got0, w.data<float>(), 4);
  std::memcpy(&got4, w.data<float>() + 4, 4);
  EXPECT_EQ(got0, 0x3e802000u);
  EXPECT_EQ(got4, 0xbe800000u);
  std::size_t marked = 0;
  for (const Node& n : g->nodes) {
    if (n.op_type.rfind("rw.", 0) != 0 || n.op_type == "rw.ToNchw" || n.op_type == "rw.ElementwiseChain") continue;
    const bool writes_nhwc = n.op_type != "rw.GlobalAveragePoolNhwc";  // it writes fp32 NCHW [N, C, 1, 1]
    EXPECT_EQ(n.attr_int("rw.round_tf32", 0), writes_nhwc ? 1 : 0) << n.name << " " << n.op_type;
    marked += writes_nhwc;
    if (n.op_type == "rw.ConvNhwc") {
      const Tensor& wt = *g->find_initializer(n.inputs[1]);
      for (std::int64_t i = 0; i < wt.numel(); ++i) ASSERT_TRUE(is_tf32(wt.data<float>()[i])) << n.name << " " << i;
    }
  }
  EXPECT_EQ(marked, 5u);  // rw.ToNhwc, three rw.ConvNhwc, rw.MaxPoolNhwc

  // Through the reference kernels (which honour the attribute) the graph is the original one with
  // operands rounded to tf32: close to it, not equal; every NHWC value is tf32.
  const Tensor x = testing::random_tensor(DType::kF32, {2, 3, 20, 20}, -1, 1, 5);
  const Tensor want = run_reference(b.g, x).at(0);
  const double err = testing::relative_l2(run_reference(g, x).at(0), want);
  EXPECT_LT(err, 2e-3);
  EXPECT_GT(err, 1e-6);

  // The MobileNet block: the depthwise convolution and the squeeze-excite scale are marked too.
  const Builder m = mobilenet_like();
  auto gm = optimized_tf32(m);
  for (const char* op : {"rw.DepthwiseConvNhwc", "rw.ScaleChannelsNhwc", "rw.ConvNhwc", "rw.ToNhwc"}) {
    for (const Node& n : gm->nodes) {
      if (n.op_type == op) {
        EXPECT_EQ(n.attr_int("rw.round_tf32", 0), 1) << n.name;
      }
    }
  }
  const Tensor xm = testing::random_tensor(DType::kF32, {3, 16, 9, 9}, -1, 1, 6);
  EXPECT_LT(testing::relative_l2(run_reference(gm, xm).at(0), run_reference(m.g, xm).at(0)), 2e-3);

  // fp32 (3xTF32) and fp16 storage neither round the fp32 weights nor mark the nodes; 16-bit
  // storage cannot be asked to.
  for (const DType s : {DType::kF32, DType::kF16}) {
    auto plain = optimized(b, s);
    for (const Node& n : plain->nodes) EXPECT_FALSE(n.has_attr("rw.round_tf32")) << n.name;
    if (s == DType::kF32) {
      std::uint32_t kept;
      std::memcpy(&kept, plain->find_initializer(producer(*plain, "stem_act_nhwc")->inputs[1])->data<float>(), 4);
      EXPECT_EQ(kept, tie);
    }
  }
  Graph copy = *b.g;
  std::vector<std::string> log;
  EXPECT_THROW(passes::choose_gpu_layout(copy, log, DType::kF16, true), InvalidArgument);
}

// ---- the stem by space-to-depth (choose_gpu_layout's space_to_depth_stem) ----

std::shared_ptr<Graph> optimized_s2d(const Builder& b, DType storage, bool on = true,
                                     std::vector<PassRecord>* records = nullptr) {
  auto g = std::make_shared<Graph>(*b.g);
  auto r = passes::optimize(*g, passes::gpu_pipeline({.nhwc_storage = storage, .space_to_depth_stem = on}));
  if (records != nullptr) *records = std::move(r);
  return g;
}

// image (c channels, h x w) -> stem (window x window / 2, `pads`, k = 16) -> Relu -> 3x3/1 conv -> y:
// two convolutions, one conversion in and one out, so the group goes NHWC.
Builder stem_graph(std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t window, std::vector<std::int64_t> pads,
                   std::int64_t stride = 2, std::int64_t dilation = 1) {
  const std::int64_t ext = (window - 1) * dilation + 1;
  const std::int64_t oh = (h + pads[0] + pads[2] - ext) / stride + 1, ow = (w + pads[1] + pads[3] - ext) / stride + 1;
  Builder b("image", Builder::nchw(c, h, w));
  b.conv("stem", "image", "s", c, 16, window, stride, 1, Builder::nchw(16, oh, ow));
  Node& stem = b.g->nodes.back();
  stem.attributes["pads"] = pads;
  stem.attributes["dilations"] = std::vector<std::int64_t>{dilation, dilation};
  b.node("stem_relu", "Relu", {"s"}, "a", Builder::nchw(16, oh, ow));
  b.conv("next", "a", "y", 16, 16, 3, 1, 1, Builder::nchw(16, oh, ow));
  b.output("y");
  return b;
}

TEST(ChooseGpuLayoutSpaceToDepth, TheResNetStemBecomesAFourByFourConvolutionOverTwelveChannels) {
  const Builder b = resnet_like();  // 7x7/2 pad 3 over 3 channels of 20x20
  std::vector<PassRecord> records;
  auto g = optimized_s2d(b, DType::kF16, true, &records);
  const Node* stem = producer(*g, "stem_act_nhwc");
  ASSERT_NE(stem, nullptr);
  EXPECT_EQ(stem->op_type, "rw.ConvNhwc");
  EXPECT_EQ(stem->attr_ints("strides"), (std::vector<std::int64_t>{1, 1}));
  EXPECT_EQ(stem->attr_ints("pads"), (std::vector<std::int64_t>{2, 2, 1, 1}));
  EXPECT_EQ(stem->attr_string("rw.activation", ""), "Relu");  // the fused epilogue stays
  const Tensor* w = g->find_initializer(stem->inputs[1]);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->shape(), (Shape{16, 4, 4, 16}));  // [K, 4, 4, 12 padded to 16]
  EXPECT_EQ(w->dtype(), DType::kF16);
  const Node* to = producer(*g, stem->inputs[0]);
  ASSERT_NE(to, nullptr);
  EXPECT_EQ(to->op_type, "rw.ToNhwc");
  EXPECT_EQ(to->attr_int("rw.space_to_depth", 0), 2);
  EXPECT_EQ(to->attr_ints("rw.space_to_depth_hw"), (std::vector<std::int64_t>{20, 20}));
  EXPECT_EQ(to->attr_int("rw.channels", 0), 16);
  const ValueInfo* vi = g->find_value(to->outputs[0]);
  ASSERT_NE(vi, nullptr);
  ASSERT_EQ(vi->dims.size(), 4u);
  EXPECT_EQ(vi->dims[0].symbol, "N");
  EXPECT_EQ(vi->dims[1].value, 10);
  EXPECT_EQ(vi->dims[2].value, 10);
  EXPECT_EQ(vi->dims[3].value, 16);
  EXPECT_EQ(count(*g, "rw.ToNhwc"), 1u);
  EXPECT_EQ(count(*g, "rw.ConvNhwc"), 3u);  // the other two as they were
  const auto layout = std::find_if(records.begin(), records.end(),
                                   [](const PassRecord& r) { return r.pass == "choose_gpu_layout"; });
  ASSERT_NE(layout, records.end());
  ASSERT_EQ(layout->changes.size(), 2u);
  EXPECT_NE(layout->changes[1].find("stem: 7x7/2 over 3 channels as 4x4/1 over the space-to-depth's 12 "
                                    "(K-dim 392 -> 256)"),
            std::string::npos)
      << layout->changes[1];

  // Through the reference kernels: at fp32 storage only the summation order differs from the
  // original graph; at fp16 the original's rounding, and nearly what the plain stem gives.
  const Tensor x = testing::random_tensor(DType::kF32, {2, 3, 20, 20}, -1, 1, 5);
  const Tensor want = run_reference(b.g, x).at(0);
  auto g32 = optimized_s2d(b, DType::kF32);
  EXPECT_EQ(g32->find_initializer(producer(*g32, "stem_act_nhwc")->inputs[1])->shape(), (Shape{16, 4, 4, 12}));
  EXPECT_LT(testing::relative_l2(run_reference(g32, x).at(0), want), 1e-6);
  const Tensor got16 = run_reference(g, x).at(0);
  EXPECT_LT(testing::relative_l2(got16, want), 1e-2);
  EXPECT_LT(testing::relative_l2(got16, run_reference(optimized(b, DType::kF16), x).at(0)), 2e-3);
  EXPECT_LT(testing::relative_l2(run_reference(optimized_s2d(b, DType::kBF16), x).at(0), want), 4e-2);

  // Off: the plain stem (7x7, 8 channels).
  auto off = optimized_s2d(b, DType::kF16, false);
  EXPECT_EQ(off->find_initializer(producer(*off, "stem_act_nhwc")->inputs[1])->shape(), (Shape{16, 7, 7, 8}));
}

TEST(ChooseGpuLayoutSpaceToDepth, OddSizesAndOtherWindowsMatchTheOriginal) {
  struct Case {
    std::int64_t c, h, w, window;
    std::vector<std::int64_t> pads;
    DType storage;  // fp32 where the rewrite saves K-dim there (7x7), else fp16
  };
  const Case cases[] = {
      {3, 224, 224, 7, {3, 3, 3, 3}, DType::kF32},  // the ResNet stem
      {3, 37, 33, 7, {3, 3, 3, 3}, DType::kF32},    // odd extents
      {3, 37, 33, 7, {3, 2, 2, 3}, DType::kF32},    // asymmetric pads
      {3, 37, 33, 3, {1, 1, 1, 1}, DType::kF16},    // 3x3/2: 2·2·16 = 64 < 3·3·8 = 72
      {3, 30, 31, 5, {2, 2, 2, 2}, DType::kF16},    // 5x5/2: 3·3·16 = 144 < 200
      {1, 25, 26, 5, {2, 2, 2, 2}, DType::kF16},    // one channel: 3·3·8 = 72 < 200
      {4, 24, 24, 7, {3, 3, 3, 3}, DType::kBF16},
  };
  std::uint32_t seed = 60;
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("{}x{}x{} {}x{}/2 at {}", c.c, c.h, c.w, c.window, c.window, dtype_name(c.storage)));
    const Builder b = stem_graph(c.c, c.h, c.w, c.window, c.pads);
    auto g = optimized_s2d(b, c.storage);
    const Node* stem = producer(*g, "a_nhwc");
    ASSERT_NE(stem, nullptr);
    const Node* to = producer(*g, stem->inputs[0]);
    ASSERT_NE(to, nullptr);
    EXPECT_EQ(to->attr_int("rw.space_to_depth", 0), 2);
    EXPECT_EQ(stem->attr_ints("strides"), (std::vector<std::int64_t>{1, 1}));
    const Tensor x = testing::random_tensor(DType::kF32, {2, c.c, c.h, c.w}, -1, 1, ++seed);
    const Tensor want = run_reference(b.g, x).at(0);
    const Tensor got = run_reference(g, x).at(0);
    if (c.storage == DType::kF32) {
      EXPECT_LT(testing::relative_l2(got, want), 1e-6);
    } else {
      // The same fp16/bf16 operands as the plain stem's, so nearly its result (the stem's outputs
      // may round the other way where the summation order moves them across a rounding boundary).
      const Tensor plain = run_reference(optimized_s2d(b, c.storage, false), x).at(0);
      EXPECT_LT(testing::relative_l2(got, plain), c.storage == DType::kF16 ? 2e-3 : 1.5e-2);
      EXPECT_LT(testing::relative_l2(got, want), c.storage == DType::kF16 ? 1e-2 : 4e-2);
    }
  }
}

TEST(ChooseGpuLayoutSpaceToDepth, LeavesWhatItDoesNotCover) {
  // Each stays the plain rw.ConvNhwc stem (its input from a plain rw.ToNhwc).
  const auto plain_stem = [](const Builder& b, DType storage) {
    auto g = optimized_s2d(b, storage);
    const Node* stem = producer(*g, "a_nhwc");
    if (stem == nullptr || stem->op_type != "rw.ConvNhwc") return false;
    const Node* to = producer(*g, stem->inputs[0]);
    return to != nullptr && to->op_type == "rw.ToNhwc" && !to->has_attr("rw.space_to_depth");
  };
  EXPECT_TRUE(plain_stem(stem_graph(3, 20, 20, 7, {3, 3, 3, 3}, 1), DType::kF16));     // stride 1
  EXPECT_TRUE(plain_stem(stem_graph(3, 20, 20, 3, {2, 2, 2, 2}, 2, 2), DType::kF16));  // dilation 2
  EXPECT_TRUE(plain_stem(stem_graph(8, 20, 20, 7, {3, 3, 3, 3}), DType::kF16));        // 8 channels
  EXPECT_TRUE(plain_stem(stem_graph(3, 20, 20, 1, {0, 0, 0, 0}), DType::kF16));        // 1x1
  // An odd extent, an even kernel and no padding: a negative end pad (backends/cuda/passes/space_to_depth.hpp).
  EXPECT_TRUE(plain_stem(stem_graph(3, 21, 20, 4, {0, 0, 0, 0}), DType::kF16));
  // fp32 storage pads 3 channels to 4: 3x3 (36 against 2·2·12 = 48) and 5x5 (100 against 108)
  // would grow the K-dim.
  EXPECT_TRUE(plain_stem(stem_graph(3, 20, 20, 3, {1, 1, 1, 1}), DType::kF32));
  EXPECT_TRUE(plain_stem(stem_graph(3, 20, 20, 5, {2, 2, 2, 2}), DType::kF32));
  // H and W unknown (symbolic): the pads depend on them.
  Builder symbolic = stem_graph(3, 20, 20, 7, {3, 3, 3, 3});
  symbolic.g->inputs[0].dims[2] = Dim{-1, "H"};
  symbolic.g->value_info["image"] = symbolic.g->inputs[0];
  EXPECT_TRUE(plain_stem(symbolic, DType::kF16));
  // A stride-2 convolution inside the group (its input produced NHWC) is left alone.
  Builder inner = stem_graph(3, 20, 20, 7, {3, 3, 3, 3});
  inner.conv("down", "y", "z", 16, 16, 3, 2, 1, Builder::nchw(16, 5, 5));
  inner.g->outputs = {inner.g->value_info.at("z")};
  auto g = optimized_s2d(inner, DType::kF16);
  const Node* down = producer(*g, "z");
  ASSERT_NE(down, nullptr);
  ASSERT_EQ(down->op_type, "rw.ToNchw");
  down = producer(*g, down->inputs[0]);
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->attr_ints("strides"), (std::vector<std::int64_t>{2, 2}));
}

TEST(NhwcReferenceKernels, SpaceToDepthConversion) {
  // rw.ToNhwc with rw.space_to_depth: channel (dy·2 + dx)·C + c of pixel (Y, X) is
  // x[c, 2Y + dy, 2X + dx], 0 past the input's odd edge and in the padding channels.
  const Tensor x = testing::random_tensor(DType::kF32, {2, 3, 5, 7}, -2, 2, 9);
  const std::map<std::string, AttributeValue> attrs = {{"to", std::int64_t{dtype_to_onnx(DType::kF32)}},
                                                       {"rw.channels", std::int64_t{16}},
                                                       {"rw.space_to_depth", std::int64_t{2}},
                                                       {"rw.space_to_depth_hw", std::vector<std::int64_t>{5, 7}}};
  const Tensor y = testing::run_node(testing::make_spec("rw.ToNhwc", {x}, attrs)).at(0);
  ASSERT_EQ(y.shape(), (Shape{2, 3, 4, 16}));
  for (std::int64_t n = 0; n < 2; ++n)
    for (std::int64_t oy = 0; oy < 3; ++oy)
      for (std::int64_t ox = 0; ox < 4; ++ox)
        for (std::int64_t ch = 0; ch < 16; ++ch) {
          const std::int64_t q = ch / 3, c = ch % 3, iy = 2 * oy + q / 2, ix = 2 * ox + q % 2;
          const float want = ch < 12 && iy < 5 && ix < 7 ? x.data<float>()[((n * 3 + c) * 5 + iy) * 7 + ix] : 0.f;
          ASSERT_EQ(y.data<float>()[((n * 3 + oy) * 4 + ox) * 16 + ch], want) << n << " " << oy << " " << ox << " " << ch;
        }
  // Another input extent than the one planned for, and too few channels, are refused.
  const Tensor other = testing::random_tensor(DType::kF32, {1, 3, 6, 7}, -2, 2, 9);
  EXPECT_THROW(testing::run_node(testing::make_spec("rw.ToNhwc", {other}, attrs)), InvalidArgument);
  auto few = attrs;
  few["rw.channels"] = std::int64_t{8};
  EXPECT_THROW(testing::run_node(testing::make_spec("rw.ToNhwc", {x}, few)), InvalidArgument);
}

TEST(NhwcReferenceKernels, RoundTf32AttributeRoundsTheStoredValues) {
  // rw.round_tf32: the reference kernel rounds its fp32 output to tf32 once (round_to_tf32).
  Tensor x = testing::random_tensor(DType::kF32, {1, 8, 3, 5}, -2, 2, 9);
  std::uint32_t tie = 0x3f801000u;
  std::memcpy(x.data<float>(), &tie, 4);  // channel 0 of pixel 0
  const std::map<std::string, AttributeValue> to = {{"to", std::int64_t{dtype_to_onnx(DType::kF32)}},
                                                    {"rw.channels", std::int64_t{8}}};
  auto rounded = to;
  rounded["rw.round_tf32"] = std::int64_t{1};
  const Tensor plain = testing::run_node(testing::make_spec("rw.ToNhwc", {x}, to)).at(0);
  const Tensor r = testing::run_node(testing::make_spec("rw.ToNhwc", {x}, rounded)).at(0);
  EXPECT_EQ(plain.data<float>()[0], x.data<float>()[0]);
  std::uint32_t got;
  std::memcpy(&got, r.data<float>(), 4);
  EXPECT_EQ(got, 0x3f802000u);
  for (std::int64_t i = 0; i < r.numel(); ++i) {
    EXPECT_EQ(r.data<float>()[i], round_to_tf32(plain.data<float>()[i])) << i;
  }
  // A scale and a max pool round what they store, too.
  const Tensor scale = testing::random_tensor(DType::kF32, {1, 8, 1, 1}, 0, 1, 10);
  const Tensor scaled = testing::run_node(testing::make_spec("rw.ScaleChannelsNhwc", {plain, scale},
                                                             {{"rw.round_tf32", std::int64_t{1}}})).at(0);
  for (std::int64_t i = 0; i < scaled.numel(); ++i) ASSERT_TRUE(is_tf32(scaled.data<float>()[i])) << i;
  const Tensor pooled = testing::run_node(testing::make_spec(
      "rw.MaxPoolNhwc", {plain}, {{"kernel_shape", std::vector<std::int64_t>{2, 2}}, {"rw.round_tf32", std::int64_t{1}}})).at(0);
  for (std::int64_t i = 0; i < pooled.numel(); ++i) ASSERT_TRUE(is_tf32(pooled.data<float>()[i])) << i;
}

TEST(NhwcReferenceKernels, ConversionsRoundTripAndRejectBadInput) {
  const Tensor x = testing::random_tensor(DType::kF32, {2, 3, 4, 5}, -2, 2, 9);
  auto to = testing::run_node(testing::make_spec("rw.ToNhwc", {x},
                                                 {{"to", std::int64_t{dtype_to_onnx(DType::kBF16)}},
                                                  {"rw.channels", std::int64_t{8}}}));
  ASSERT_EQ(to[0].shape(), (Shape{2, 4, 5, 8}));
  EXPECT_EQ(to[0].dtype(), DType::kBF16);
  EXPECT_EQ(to[0].get_as_double(7), 0.0);  // a padded channel
  EXPECT_EQ(to[0].get_as_double(1), static_cast<double>(bf16_to_float(float_to_bf16(x.data<float>()[20]))));
  auto back = testing::run_node(testing::make_spec("rw.ToNchw", {to[0]}, {{"rw.channels", std::int64_t{3}}}));
  testing::expect_close(back[0], x.cast(DType::kBF16).cast(DType::kF32), 0, 0);
  EXPECT_THROW(testing::run_node(testing::make_spec("rw.ToNhwc", {x}, {{"to", std::int64_t{1}},
                                                                        {"rw.channels", std::int64_t{2}}})),
               InvalidArgument);
  // A bad `to` fails when the kernel is made, which the executor reports as a node it cannot run.
  EXPECT_THROW(testing::run_node(testing::make_spec("rw.ToNhwc", {x}, {{"to", std::int64_t{7}},
                                                                        {"rw.channels", std::int64_t{8}}})),
               Unsupported);
  EXPECT_THROW(testing::run_node(testing::make_spec("rw.ToNchw", {to[0]}, {{"rw.channels", std::int64_t{9}}})),
               InvalidArgument);
}

}  // namespace
}  // namespace redwood
