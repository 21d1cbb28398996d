// oneDNN regions (core/passes/form_regions.cpp + backends/cpu/onednn/region.cpp) against the
// reference kernels: small ONNX models (tests/support/onnx_builder) with random weights and
// inputs, run once unoptimized on the reference kernels and once on the default executor, which
// must have grouped the nodes into a region and agree with the reference.

#include "backends/cpu/onednn/region.hpp"
#include "core/error.hpp"
#include "runtime/executor.hpp"
#include "core/onnx/onnx_import.hpp"
#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

namespace redwood {
namespace {

using testing::Ints;
using testing::OnnxBuilder;
using testing::random_tensor;
constexpr int kF = onnx::TensorProto::FLOAT;

struct Model {
  OnnxBuilder b{14};  // HardSwish needs opset 14
  std::uint32_t seed = 100;
  std::string weight(const std::string& name, const Shape& shape) {
    b.initializer(name, random_tensor(DType::kF32, shape, -0.5, 0.5, seed++));
    return name;
  }
  void conv(const std::string& x, const std::string& y, std::int64_t cin, std::int64_t cout, std::int64_t k,
            std::int64_t group = 1, std::int64_t stride = 1) {
    auto& n = b.node("Conv", {x, weight(y + ".w", {cout, cin / group, k, k}), weight(y + ".b", {cout})}, {y});
    OnnxBuilder::set_attr(n, "pads", Ints{k / 2, k / 2, k / 2, k / 2});
    OnnxBuilder::set_attr(n, "strides", Ints{stride, stride});
    OnnxBuilder::set_attr(n, "group", group);
  }
  static void set_string(onnx::NodeProto& n, const std::string& key, const std::string& value) {
    auto* a = n.add_attribute();
    a->set_name(key);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(value);
  }
};

// Runs the model both ways; returns the optimized graph's op types.
std::vector<std::string> check(Model& m, const std::map<std::string, Tensor>& feeds) {
  auto g = load_onnx_bytes(m.b.bytes(), "region_test.onnx");
  ExecutorOptions ref;
  ref.optimize = false;
  ref.reference_only = true;
  Executor r(g, ref), fast(g);
  const auto expected = r.run(feeds);
  for (int pass = 0; pass < 2; ++pass) {  // the second run reuses the cached plan
    const auto actual = fast.run(feeds);
    EXPECT_EQ(actual.size(), expected.size());
    for (std::size_t i = 0; i < actual.size(); ++i) testing::expect_close(actual[i], expected[i], 1e-4, 1e-4);
  }
  std::vector<std::string> ops;
  for (const auto& n : fast.graph().nodes) ops.push_back(n.op_type);
  return ops;
}

TEST(OneDnnRegion, ConvChainWithResidualPoolAndActivationsIsOneRegion) {
  // BlazeFace-like: depthwise + pointwise conv, residual Add + Relu (fused), MaxPool, and a
  // channel-padding-free second block with a strided conv; two outputs.
  Model m;
  m.b.input("x", kF, {1, 8, 20, 20}).output("y", kF, {1, 16, 10, 10}).output("z", kF, {1, 8, 10, 10});
  m.conv("x", "dw", 8, 8, 3, 8);
  m.conv("dw", "pw", 8, 8, 1);
  m.b.node("Add", {"pw", "x"}, {"sum"});
  m.b.node("Relu", {"sum"}, {"r"});
  auto& pool = m.b.node("MaxPool", {"r"}, {"z"});
  OnnxBuilder::set_attr(pool, "kernel_shape", Ints{2, 2});
  OnnxBuilder::set_attr(pool, "strides", Ints{2, 2});
  m.conv("r", "s2", 8, 16, 3, 1, 2);
  m.b.node("HardSwish", {"s2"}, {"h"});
  m.b.node("Clip", {"h", m.weight("lo", {}), m.weight("hi", {})}, {"c"});
  m.b.node("LeakyRelu", {"c"}, {"y"});
  const auto ops = check(m, {{"x", random_tensor(DType::kF32, {1, 8, 20, 20}, -1, 1, 7)}});
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0], cpu::onednn::kRegionOp);
}

TEST(OneDnnRegion, ProfilingTimesEachBodyNodeInsideTheRegion) {
  // A profile says where a region's time goes: one timing per body node (its primitive and the
  // reorders it needs), named by the node and by its region, and one for the region's own work
  // around them; together they are the region's run.
  Model m;
  m.b.input("x", kF, {1, 8, 20, 20}).output("y", kF, {1, 16, 10, 10});
  m.conv("x", "a", 8, 16, 3);
  m.b.node("Relu", {"a"}, {"r"});
  auto& pool = m.b.node("MaxPool", {"r"}, {"y"});
  OnnxBuilder::set_attr(pool, "kernel_shape", Ints{2, 2});
  OnnxBuilder::set_attr(pool, "strides", Ints{2, 2});
  Executor e(load_onnx_bytes(m.b.bytes(), "region_profile.onnx"));
  ASSERT_EQ(e.graph().nodes.size(), 1u);
  const Node& region = e.graph().nodes[0];
  ASSERT_EQ(region.op_type, cpu::onednn::kRegionOp);
  const std::map<std::string, Tensor> feeds{{"x", random_tensor(DType::kF32, {1, 8, 20, 20}, -1, 1, 7)}};
  e.run(feeds);
  e.set_profiling(true);
  e.run(feeds);
  std::map<std::string, NodeTiming> by_node;
  for (const NodeTiming& t : e.last_timings()) by_node[t.node] = t;
  ASSERT_EQ(by_node.size(), region.body.size() + 1);
  for (const Node& member : region.body) {
    ASSERT_TRUE(by_node.count(member.name)) << member.name;
    EXPECT_EQ(by_node[member.name].op_type, member.op_type);
    EXPECT_EQ(by_node[member.name].region, region.name);
    EXPECT_GT(by_node[member.name].milliseconds, 0.0) << member.name;
  }
  ASSERT_TRUE(by_node.count(region.name));
  EXPECT_EQ(by_node[region.name].region, "");
  EXPECT_GE(by_node[region.name].milliseconds, 0.0);
  e.set_profiling(false);
  e.run(feeds);  // and unprofiled, nothing is reported afresh
  EXPECT_EQ(e.last_timings().size(), region.body.size() + 1);
}

TEST(OneDnnRegion, SqueezeExciteConcatResizeAndBroadcastBinaries) {
  // PP-OCR-like: SE block (GlobalAveragePool, convs, HardSigmoid, Mul broadcast over H, W),
  // nearest Resize by 2, Concat on channels, Sub/Div by constants, Sigmoid.
  Model m;
  m.b.input("x", kF, {1, 16, 8, 8}).output("y", kF, {1, 32, 16, 16});
  m.conv("x", "c0", 16, 16, 3);
  m.b.node("GlobalAveragePool", {"c0"}, {"gap"});
  m.conv("gap", "se1", 16, 4, 1);
  m.b.node("Relu", {"se1"}, {"se1r"});
  m.conv("se1r", "se2", 4, 16, 1);
  m.b.node("HardSigmoid", {"se2"}, {"gate"});
  m.b.node("Mul", {"c0", "gate"}, {"scaled"});
  m.b.initializer("roi", Tensor::from_vector<float>({0}, {}));
  m.b.initializer("scales", Tensor::from_vector<float>({4}, {1, 1, 2, 2}));
  auto& rs = m.b.node("Resize", {"scaled", "roi", "scales"}, {"up"});
  Model::set_string(rs, "mode", "nearest");
  Model::set_string(rs, "coordinate_transformation_mode", "asymmetric");
  Model::set_string(rs, "nearest_mode", "floor");
  auto& ct = m.b.node("ConvTranspose", {"x", m.weight("ct.w", {16, 16, 2, 2})}, {"ct"});
  OnnxBuilder::set_attr(ct, "strides", Ints{2, 2});
  auto& cat = m.b.node("Concat", {"up", "ct"}, {"cat"});
  OnnxBuilder::set_attr(cat, "axis", std::int64_t{1});
  m.b.node("Sub", {"cat", m.weight("shift", {1, 32, 1, 1})}, {"d"});
  // Div by a positive per-channel constant (no division by ~0).
  m.b.initializer("den", random_tensor(DType::kF32, {32, 1, 1}, 0.5, 2.0, 3));
  m.b.node("Div", {"d", "den"}, {"q"});
  m.b.node("Sigmoid", {"q"}, {"y"});
  const auto ops = check(m, {{"x", random_tensor(DType::kF32, {1, 16, 8, 8}, -1, 1, 8)}});
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0], cpu::onednn::kRegionOp);
}

TEST(OneDnnRegion, ScalarAffineChainsAfterAConv) {
  // PP-LCNet's learnable affine block: Conv+HardSwish -> Mul(scalar) -> Add(scalar), then
  // Sub and Div by scalars, as broadcast binaries inside the region.
  Model m;
  m.b.input("x", kF, {2, 6, 9, 9}).output("y", kF, {2, 6, 9, 9});
  m.conv("x", "c", 6, 6, 3);
  m.b.node("HardSwish", {"c"}, {"h"});
  m.b.node("Mul", {m.weight("k", {1}), "h"}, {"hk"});
  m.b.node("Add", {"hk", m.weight("b", {1, 1, 1, 1})}, {"hb"});
  m.b.node("Sub", {"hb", m.weight("s", {})}, {"hs"});
  m.b.initializer("d", Tensor::scalar<float>(1.7f));
  m.b.node("Div", {"hs", "d"}, {"hd"});
  m.conv("hd", "y", 6, 6, 1);
  const std::map<std::string, Tensor> feeds{{"x", random_tensor(DType::kF32, {2, 6, 9, 9}, -1, 1, 12)}};
  EXPECT_EQ(check(m, feeds).size(), 1u);
  // The same with the Add's output also a graph output (a region output in the middle).
  m.b.output("hb", kF, {2, 6, 9, 9});
  EXPECT_EQ(check(m, feeds).size(), 1u);
}

TEST(OneDnnRegion, NodesOutsideSplitRegionsAndBoundaryValuesLeaveInPlainLayout) {
  // A Transpose (not a oneDNN op) between two conv chains: two regions, and an intermediate that
  // a node outside reads must come out in NCHW.
  // (Conv+Relu and Conv+residual Add fuse into one node each, so each side needs two nodes.)
  Model m;
  m.b.input("x", kF, {2, 4, 6, 10}).output("y", kF, {2, 8, 10, 6}).output("t", kF, {2, 8, 10, 6});
  m.conv("x", "a", 4, 8, 3);
  m.b.node("Relu", {"a"}, {"ar"});
  m.conv("ar", "a2", 8, 8, 1);
  auto& tr = m.b.node("Transpose", {"a2"}, {"t"});
  OnnxBuilder::set_attr(tr, "perm", Ints{0, 1, 3, 2});
  m.conv("t", "b", 8, 8, 3);
  m.b.node("Add", {"b", "t"}, {"s"});
  m.b.node("Tanh", {"s"}, {"y"});  // not an epilogue activation: stays a node
  const auto ops = check(m, {{"x", random_tensor(DType::kF32, {2, 4, 6, 10}, -1, 1, 9)}});
  EXPECT_EQ(ops, (std::vector<std::string>{cpu::onednn::kRegionOp, "Transpose", cpu::onednn::kRegionOp}));
}

TEST(OneDnnRegion, ShapesOneDnnCannotTakeRunNodeByNode) {
  // Dynamic H/W: each new input shape gets its own plan; a Resize to a non-integer factor cannot
  // be a oneDNN resampling and the whole body runs on the ordinary kernels instead.
  Model m;
  m.b.input("x", kF, {1, 3, -1, -1}, {"h", "w"}).output("y", kF, {1, 6, -1, -1}, {"h2", "w2"});
  m.conv("x", "c", 3, 6, 3);
  m.b.initializer("roi", Tensor::from_vector<float>({0}, {}));
  m.b.initializer("scales", Tensor::from_vector<float>({4}, {1, 1, 1.5f, 1.5f}));
  auto& rs = m.b.node("Resize", {"c", "roi", "scales"}, {"y"});
  Model::set_string(rs, "mode", "nearest");
  check(m, {{"x", random_tensor(DType::kF32, {1, 3, 8, 8}, -1, 1, 10)}});
  m.b.model().mutable_graph()->mutable_node()->RemoveLast();
  m.b.initializer("scales2", Tensor::from_vector<float>({4}, {1, 1, 2, 2}));
  auto& rs2 = m.b.node("Resize", {"c", "roi", "scales2"}, {"y"});
  Model::set_string(rs2, "mode", "nearest");
  auto g = load_onnx_bytes(m.b.bytes(), "region_test.onnx");
  ExecutorOptions ref;
  ref.optimize = false;
  ref.reference_only = true;
  Executor r(g, ref), fast(g);
  ASSERT_EQ(fast.graph().nodes.size(), 1u);
  for (const Shape& s : {Shape{1, 3, 8, 8}, Shape{1, 3, 5, 7}, Shape{1, 3, 8, 8}}) {
    const std::map<std::string, Tensor> feeds{{"x", random_tensor(DType::kF32, s, -1, 1, 11)}};
    testing::expect_close(fast.run(feeds)[0], r.run(feeds)[0], 1e-4, 1e-4);
  }
}

TEST(OneDnnRegion, InvalidInputsAreReportedByTheNodeThatFails) {
  Model m;
  m.b.input("x", kF, {1, 4, -1, -1}, {"h", "w"}).input("s", kF, {1, 4, -1, -1}, {"h2", "w2"});
  m.b.output("y", kF, {1, 4, -1, -1}, {"h", "w"});
  m.conv("x", "c", 4, 4, 3);
  m.b.node("Add", {"c", "s"}, {"y"});
  auto g = load_onnx_bytes(m.b.bytes(), "region_test.onnx");
  Executor fast(g);
  ASSERT_EQ(fast.graph().nodes.size(), 1u);
  const std::map<std::string, Tensor> feeds{{"x", random_tensor(DType::kF32, {1, 4, 6, 6})},
                                            {"s", random_tensor(DType::kF32, {1, 4, 5, 6})}};
  try {
    fast.run(feeds);
    FAIL() << "no error for shapes that do not broadcast";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("(Add)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace redwood
