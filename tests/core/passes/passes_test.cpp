// Each pass of the graph optimizer against the unoptimized graph: small graphs with random
// weights and inputs, run through the reference kernels before and after the pass; the outputs
// must agree, and the pass must have done the rewrite it exists for.

#include "runtime/executor.hpp"
#include "core/passes/pass_manager.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <cstring>

namespace redwood {
namespace {

using testing::random_tensor;

// A tiny graph builder: values declared with concrete shapes so shape-dependent rewrites apply.
struct G {
  std::shared_ptr<Graph> g = std::make_shared<Graph>();
  std::uint32_t seed = 10;
  G() {
    g->name = "test";
    g->opset = 17;
  }
  void value(const std::string& name, const Shape& shape) {
    ValueInfo vi;
    vi.name = name;
    vi.dtype = DType::kF32;
    vi.has_shape = true;
    for (auto d : shape) vi.dims.push_back({d, ""});
    g->value_info[name] = vi;
  }
  void input(const std::string& name, const Shape& shape) {
    value(name, shape);
    g->inputs.push_back(g->value_info[name]);
  }
  void output(const std::string& name) {
    ValueInfo vi;
    vi.name = name;
    vi.dtype = DType::kF32;
    g->outputs.push_back(vi);
  }
  std::string init(const std::string& name, const Tensor& t) {
    g->initializers[name] = t;
    return name;
  }
  std::string rand(const std::string& name, const Shape& shape, double lo = -1, double hi = 1) {
    return init(name, random_tensor(DType::kF32, shape, lo, hi, seed++));
  }
  Node& node(const std::string& op, std::vector<std::string> ins, std::vector<std::string> outs,
             std::map<std::string, AttributeValue> attrs = {}) {
    Node n;
    n.name = op + "_" + std::to_string(g->nodes.size());
    n.op_type = op;
    n.inputs = std::move(ins);
    n.outputs = std::move(outs);
    n.attributes = std::move(attrs);
    g->nodes.push_back(std::move(n));
    return g->nodes.back();
  }
};

std::vector<Tensor> run(std::shared_ptr<const Graph> g, const std::map<std::string, Tensor>& feeds,
                        bool reference_only = true) {
  ExecutorOptions o;
  o.optimize = false;
  o.reference_only = reference_only;
  Executor e(std::move(g), o);
  return e.run(feeds);
}

// Runs `pass` on a copy of the graph and checks equivalence on random inputs; returns the
// optimized graph and the pass's log.
std::pair<std::shared_ptr<Graph>, std::vector<std::string>> check_pass(const G& b, passes::Pass pass,
                                                                        const std::map<std::string, Tensor>& feeds) {
  auto optimized = std::make_shared<Graph>(*b.g);
  std::vector<std::string> log;
  pass(*optimized, log);
  const auto expected = run(b.g, feeds);
  const auto actual = run(optimized, feeds);
  EXPECT_EQ(actual.size(), expected.size());
  for (std::size_t i = 0; i < actual.size() && i < expected.size(); ++i) {
    testing::expect_close(actual[i], expected[i], 1e-4, 1e-5);
  }
  return {optimized, log};
}

std::size_t count_op(const Graph& g, const std::string& op) {
  std::size_t n = 0;
  for (const auto& node : g.nodes) n += node.op_type == op;
  return n;
}

TEST(Passes, FoldConstantsEvaluatesConstantSubgraphsAndStaticShapes) {
  G b;
  b.input("x", {2, 3, 4});
  Tensor two = Tensor::scalar<float>(2.0f);
  b.node("Constant", {}, {"c"}, {{"value", two}});
  b.rand("k", {4});
  b.node("Mul", {"k", "c"}, {"k2"});                // constant * constant -> folded
  b.node("Shape", {"x"}, {"s"});                     // x's shape is known -> folded
  b.init("idx", Tensor::scalar<std::int64_t>(2));
  b.node("Gather", {"s", "idx"}, {"last"}, {{"axis", std::int64_t{0}}});
  b.init("one", Tensor::from_vector<std::int64_t>({1}, {-1}));
  b.node("Unsqueeze", {"last", "zero_axes"}, {"last1"});
  b.init("zero_axes", Tensor::from_vector<std::int64_t>({1}, {0}));
  b.node("Concat", {"one", "last1"}, {"shape"}, {{"axis", std::int64_t{0}}});
  b.node("Reshape", {"x", "shape"}, {"r"});
  b.node("Add", {"r", "k2"}, {"y"});
  b.output("y");
  auto [g, log] = check_pass(b, passes::fold_constants, {{"x", random_tensor(DType::kF32, {2, 3, 4})}});
  EXPECT_EQ(count_op(*g, "Shape") + count_op(*g, "Gather") + count_op(*g, "Concat") + count_op(*g, "Constant"), 0u);
  EXPECT_EQ(g->nodes.size(), 2u);  // Reshape, Add
}

TEST(Passes, DeadCodeEliminationRemovesUnreachableNodes) {
  G b;
  b.input("x", {4});
  b.node("Relu", {"x"}, {"y"});
  b.node("Sigmoid", {"x"}, {"unused"});
  b.rand("w", {4});
  b.node("Mul", {"unused", "w"}, {"unused2"});
  b.output("y");
  auto [g, log] = check_pass(b, passes::eliminate_dead_code, {{"x", random_tensor(DType::kF32, {4})}});
  EXPECT_EQ(g->nodes.size(), 1u);
  EXPECT_EQ(g->initializers.count("w"), 0u);
}

TEST(Passes, ConvBatchNormAndAffineFoldIntoConv) {
  G b;
  b.input("x", {1, 4, 9, 9});
  b.rand("w", {8, 4, 3, 3});
  b.rand("bias", {8});
  b.node("Conv", {"x", "w", "bias"}, {"c"}, {{"pads", std::vector<std::int64_t>{1, 1, 1, 1}}});
  b.rand("gamma", {8}, 0.5, 1.5);
  b.rand("beta", {8});
  b.rand("mean", {8});
  b.rand("var", {8}, 0.5, 2.0);
  b.node("BatchNormalization", {"c", "gamma", "beta", "mean", "var"}, {"bn"}, {{"epsilon", 1e-3f}});
  b.rand("w2", {8, 8, 1, 1});
  b.node("Conv", {"bn", "w2"}, {"c2"});
  b.init("s", Tensor::scalar<float>(0.7f));
  b.node("Mul", {"s", "c2"}, {"m"});
  b.rand("shift", {1, 8, 1, 1});
  b.node("Add", {"m", "shift"}, {"y"});
  b.output("y");
  auto [g, log] = check_pass(b, passes::fold_conv_affine, {{"x", random_tensor(DType::kF32, {1, 4, 9, 9})}});
  EXPECT_EQ(g->nodes.size(), 2u);
  EXPECT_EQ(log.size(), 3u);
}

TEST(Passes, ConvAffineFoldLeavesMalformedConvsAlone) {
  // A bias that is not one value per output channel, or a Conv with no output channels: the pass
  // must not read past the bias or divide by zero; the Conv stays for its kernel to refuse.
  for (const Shape& w_shape : {Shape{4, 2, 3, 3}, Shape{0, 2, 3, 3}}) {
    G b;
    b.input("x", {1, 2, 5, 5});
    b.rand("w", w_shape);
    b.init("bias", Tensor::empty(DType::kF32, {4, 0}));
    b.node("Conv", {"x", "w", "bias"}, {"c"});
    b.rand("gamma", {1, 4, 1, 1});
    b.node("Mul", {"c", "gamma"}, {"y"});
    b.output("y");
    auto g = std::make_shared<Graph>(*b.g);
    std::vector<std::string> log;
    passes::fold_conv_affine(*g, log);
    EXPECT_TRUE(log.empty()) << shape_str(w_shape);
    EXPECT_EQ(count_op(*g, "Mul"), 1u) << shape_str(w_shape);
  }
}

TEST(Passes, ZeroPadFoldsIntoTheConvsPads) {
  using Ints = std::vector<std::int64_t>;
  // Opset 17 (pads an input; once with constant_value 0 given) and opset 10 (pads an attribute):
  // an asymmetric spatial pad before a stride-2 Conv, and one added to a Conv's own pads.
  for (const std::int64_t opset : {17, 10}) {
    for (const bool explicit_value : {false, true}) {
      if (opset < 11 && explicit_value) continue;
      G b;
      b.g->opset = opset;
      b.input("x", {1, 3, 9, 8});
      const Ints pads1{0, 0, 0, 0, 0, 0, 1, 1}, pads2{0, 0, 2, 1, 0, 0, 0, 3};
      if (opset >= 11) {
        b.init("p1", Tensor::from_vector<std::int64_t>({8}, pads1));
        b.init("p2", Tensor::from_vector<std::int64_t>({8}, pads2));
        b.init("zero", Tensor::scalar<float>(0.0f));
        b.node("Pad", {"x", "p1", explicit_value ? "zero" : ""}, {"xp"});
      } else {
        b.node("Pad", {"x"}, {"xp"}, {{"pads", pads1}, {"mode", std::string("constant")}});
      }
      b.rand("w", {4, 3, 3, 3});
      b.rand("bias", {4});
      b.node("Conv", {"xp", "w", "bias"}, {"c"}, {{"strides", Ints{2, 2}}});
      if (opset >= 11) {
        b.node("Pad", {"c", "p2"}, {"cp"});
      } else {
        b.node("Pad", {"c"}, {"cp"}, {{"pads", pads2}, {"value", 0.0f}});
      }
      b.rand("w2", {2, 2, 3, 3});
      b.node("Conv", {"cp", "w2"}, {"y"}, {{"group", std::int64_t{2}}, {"pads", Ints{1, 1, 1, 1}}, {"dilations", Ints{2, 1}}});
      b.output("y");
      auto [g, log] = check_pass(b, passes::fold_pad_into_conv, {{"x", random_tensor(DType::kF32, {1, 3, 9, 8})}});
      EXPECT_EQ(count_op(*g, "Pad"), 0u) << opset;
      EXPECT_EQ(log.size(), 2u) << opset;
      ASSERT_EQ(g->nodes.size(), 2u);
      EXPECT_EQ(g->nodes[0].inputs[0], "x");
      EXPECT_EQ(g->nodes[0].attr_ints("pads"), (Ints{0, 0, 1, 1}));
      EXPECT_EQ(g->nodes[1].attr_ints("pads"), (Ints{3, 2, 1, 4}));
    }
  }
}

TEST(Passes, PadFoldLeavesNonZeroReflectAndChannelPadsAlone) {
  using Ints = std::vector<std::int64_t>;
  struct Case {
    const char* what;
    Ints pads;
    std::string mode;
    float value;
  };
  for (const Case& c : {Case{"value 0.5", {0, 0, 1, 1, 0, 0, 1, 1}, "constant", 0.5f},
                        Case{"reflect", {0, 0, 1, 1, 0, 0, 1, 1}, "reflect", 0.0f},
                        Case{"channel pad", {0, 1, 1, 1, 0, 0, 1, 1}, "constant", 0.0f},
                        Case{"negative pad", {0, 0, -1, 1, 0, 0, 1, 1}, "constant", 0.0f}}) {
    G b;
    b.input("x", {1, 3, 6, 6});
    b.init("p", Tensor::from_vector<std::int64_t>({8}, c.pads));
    b.init("v", Tensor::scalar<float>(c.value));
    b.node("Pad", {"x", "p", "v"}, {"xp"}, {{"mode", c.mode}});
    const std::int64_t cin = c.pads[1] + 3;
    b.rand("w", {4, cin, 3, 3});
    b.node("Conv", {"xp", "w"}, {"y"}, {{"strides", Ints{2, 2}}});
    b.output("y");
    auto [g, log] = check_pass(b, passes::fold_pad_into_conv, {{"x", random_tensor(DType::kF32, {1, 3, 6, 6})}});
    EXPECT_TRUE(log.empty()) << c.what;
    EXPECT_EQ(count_op(*g, "Pad"), 1u) << c.what;
  }
}

TEST(Passes, HardSwishIsRecognized) {
  G b;
  b.input("x", {2, 5, 3});
  b.init("three", Tensor::scalar<float>(3.0f));
  b.init("zero", Tensor::scalar<float>(0.0f));
  b.init("six", Tensor::scalar<float>(6.0f));
  b.node("Add", {"x", "three"}, {"a"});
  b.node("Clip", {"a", "zero", "six"}, {"c"});
  b.node("Mul", {"x", "c"}, {"m"});
  b.node("Div", {"m", "six"}, {"h1"});
  b.node("HardSigmoid", {"h1"}, {"hs"}, {{"alpha", 1.0f / 6.0f}, {"beta", 0.5f}});
  b.node("Mul", {"hs", "h1"}, {"y"});
  b.output("y");
  auto [g, log] = check_pass(b, passes::recognize_hardswish, {{"x", random_tensor(DType::kF32, {2, 5, 3}, -5, 5)}});
  EXPECT_EQ(count_op(*g, "HardSwish"), 2u);
  EXPECT_EQ(g->nodes.size(), 2u);
}

TEST(Passes, EpilogueFusionOfResidualAndActivations) {
  const char* acts[] = {"Relu", "Clip", "HardSigmoid", "HardSwish", "Sigmoid", "LeakyRelu"};
  for (const char* act : acts) {
    SCOPED_TRACE(act);
    G b;
    b.input("x", {1, 6, 7, 7});
    b.input("r", {1, 6, 7, 7});
    b.rand("w", {6, 3, 3, 3});
    b.rand("bias", {6});
    b.node("Conv", {"x", "w", "bias"}, {"c"}, {{"pads", std::vector<std::int64_t>{1, 1, 1, 1}}, {"group", std::int64_t{2}}});
    b.value("c", {1, 6, 7, 7});
    b.node("Add", {"c", "r"}, {"s"});
    b.value("s", {1, 6, 7, 7});
    std::map<std::string, AttributeValue> attrs;
    if (std::string(act) == "Clip") {
      b.init("lo", Tensor::scalar<float>(-0.5f));
      b.init("hi", Tensor::scalar<float>(0.8f));
      b.node(act, {"s", "lo", "hi"}, {"y"});
    } else {
      if (std::string(act) == "LeakyRelu") attrs["alpha"] = 0.1f;
      b.node(act, {"s"}, {"y"}, attrs);
    }
    b.output("y");
    auto [g, log] = check_pass(b, passes::fuse_epilogue,
                               {{"x", random_tensor(DType::kF32, {1, 6, 7, 7}, -1, 1, 3)},
                                {"r", random_tensor(DType::kF32, {1, 6, 7, 7}, -1, 1, 4)}});
    ASSERT_EQ(g->nodes.size(), 1u);
    EXPECT_EQ(g->nodes[0].attr_string("rw.activation", ""), act);
    EXPECT_EQ(g->nodes[0].inputs.size(), 4u);
  }
}

TEST(Passes, EpilogueFusionOfMatMulBiasResidualAndGemmActivation) {
  G b;
  b.input("x", {2, 5, 8});
  b.rand("w", {8, 6});
  b.rand("bias", {6});
  b.rand("r", {2, 5, 6});
  b.node("MatMul", {"x", "w"}, {"m"});
  b.value("m", {2, 5, 6});
  b.node("Add", {"m", "bias"}, {"mb"});
  b.value("mb", {2, 5, 6});
  b.node("Add", {"r", "mb"}, {"s"});
  b.value("s", {2, 5, 6});
  b.node("Reshape", {"s", "shape"}, {"flat"});
  b.init("shape", Tensor::from_vector<std::int64_t>({2}, {10, 6}));
  b.rand("gw", {4, 6});
  b.rand("gc", {4});
  b.node("Gemm", {"flat", "gw", "gc"}, {"gm"}, {{"transB", std::int64_t{1}}});
  b.node("Relu", {"gm"}, {"y"});
  b.output("y");
  auto [g, log] = check_pass(b, passes::fuse_epilogue, {{"x", random_tensor(DType::kF32, {2, 5, 8})}});
  EXPECT_EQ(g->nodes.size(), 3u);  // MatMul(+bias+residual), Reshape, Gemm+Relu
  EXPECT_EQ(log.size(), 3u);
}

TEST(Passes, DefaultPipelineMatchesReferenceAndOneDnnMatchesReference) {
  G b;
  b.input("x", {1, 3, 16, 16});
  b.rand("w", {8, 3, 3, 3});
  b.node("Conv", {"x", "w"}, {"c"}, {{"pads", std::vector<std::int64_t>{1, 1, 1, 1}}, {"strides", std::vector<std::int64_t>{2, 2}}});
  b.value("c", {1, 8, 8, 8});
  b.init("k", Tensor::scalar<float>(1.3f));
  b.node("Mul", {"c", "k"}, {"ck"});
  b.value("ck", {1, 8, 8, 8});
  b.init("three", Tensor::scalar<float>(3.0f));
  b.init("six", Tensor::scalar<float>(6.0f));
  b.init("zero", Tensor::scalar<float>(0.0f));
  b.node("Add", {"ck", "three"}, {"a"});
  b.node("Clip", {"a", "zero", "six"}, {"cl"});
  b.node("Div", {"cl", "six"}, {"d"});
  b.node("Mul", {"ck", "d"}, {"hs"});
  b.value("hs", {1, 8, 8, 8});
  b.rand("dw", {8, 1, 3, 3});
  b.node("Conv", {"hs", "dw"}, {"c2"}, {{"pads", std::vector<std::int64_t>{1, 1, 1, 1}}, {"group", std::int64_t{8}}});
  b.value("c2", {1, 8, 8, 8});
  b.node("Add", {"c2", "hs"}, {"res"});
  b.value("res", {1, 8, 8, 8});
  b.node("Relu", {"res"}, {"y"});
  b.output("y");
  const std::map<std::string, Tensor> feeds{{"x", random_tensor(DType::kF32, {1, 3, 16, 16}, -2, 2)}};
  auto optimized = std::make_shared<Graph>(*b.g);
  const auto records = passes::optimize(*optimized, passes::default_pipeline(/*regions=*/false));
  EXPECT_EQ(optimized->nodes.size(), 2u);
  const auto expected = run(b.g, feeds);
  testing::expect_close(run(optimized, feeds)[0], expected[0], 1e-4, 1e-5);
  testing::expect_close(run(optimized, feeds, /*reference_only=*/false)[0], expected[0], 1e-4, 1e-5);
  Executor fast(b.g);  // the default: optimized, oneDNN first
  testing::expect_close(fast.run(feeds)[0], expected[0], 1e-4, 1e-5);
  // The two Convs became one oneDNN region (form_regions, the last step of the default pipeline).
  EXPECT_EQ(fast.node_providers(), (std::vector<std::string>{"onednn"}));
  ASSERT_EQ(fast.graph().nodes.size(), 1u);
  EXPECT_EQ(fast.graph().nodes[0].body.size(), 2u);
}

TEST(Passes, ConvTransposeAffineFoldsIntoWeightsPerGroup) {
  // ConvTranspose (2 groups) -> Add(per-channel bias) -> BatchNormalization, as in PP-OCR's DB head.
  G b;
  b.input("x", {1, 4, 5, 5});
  b.rand("w", {4, 3, 2, 2});  // [Cin, Cout / group, kh, kw]: Cout = 6
  b.node("ConvTranspose", {"x", "w"}, {"ct"},
         {{"strides", std::vector<std::int64_t>{2, 2}}, {"group", std::int64_t{2}}});
  b.value("ct", {1, 6, 10, 10});
  b.rand("bias", {1, 6, 1, 1});
  b.node("Add", {"ct", "bias"}, {"a"});
  b.value("a", {1, 6, 10, 10});
  b.rand("gamma", {6}, 0.5, 1.5);
  b.rand("beta", {6});
  b.rand("mean", {6});
  b.rand("var", {6}, 0.5, 2.0);
  b.node("BatchNormalization", {"a", "gamma", "beta", "mean", "var"}, {"y"});
  b.output("y");
  const auto [g, log] = check_pass(b, passes::fold_conv_affine,
                                   {{"x", random_tensor(DType::kF32, {1, 4, 5, 5}, -1, 1, 3)}});
  EXPECT_EQ(log.size(), 2u);
  EXPECT_EQ(count_op(*g, "BatchNormalization"), 0u);
  EXPECT_EQ(count_op(*g, "Add"), 0u);
  EXPECT_EQ(count_op(*g, "ConvTranspose"), 1u);
}

// Bitwise equality (NaN included): the fused chain runs the same float operations in the same order.
void expect_identical(const Tensor& actual, const Tensor& expected) {
  ASSERT_EQ(actual.shape(), expected.shape());
  const Tensor a = actual.contiguous(), e = expected.contiguous();
  ASSERT_EQ(a.dtype(), DType::kF32);
  std::int64_t differing = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    differing += std::memcmp(a.data<float>() + i, e.data<float>() + i, sizeof(float)) != 0;
  }
  EXPECT_EQ(differing, 0) << "of " << a.numel() << " elements";
  testing::expect_close(actual, expected, 1e-6, 0);
}

TEST(Passes, ElementwiseChainIsBitIdenticalToTheSeparateNodes) {
  // Every step kind once, scalar, per-channel and trailing-vector operands on either side, over
  // a tensor large enough for several parallel chunks and tiles (which cut through channels).
  G b;
  const Shape shape{2, 3, 37, 301};
  b.input("x", shape);
  b.init("half", Tensor::scalar<float>(0.5f));
  b.rand("per_channel", {3, 1, 1}, -2, 2);
  b.init("one", Tensor::scalar<float>(1.0f));
  b.init("lo", Tensor::scalar<float>(-2.0f));
  b.init("hi", Tensor::scalar<float>(2.0f));
  b.rand("per_column", {301}, 0.5, 1.5);
  b.init("two", Tensor::from_vector<float>({1}, {2.0f}));
  b.node("Add", {"x", "half"}, {"a1"});
  b.node("Mul", {"per_channel", "a1"}, {"a2"});  // constant first
  b.node("LeakyRelu", {"a2"}, {"a3"}, {{"alpha", 0.1f}});
  b.node("Sub", {"one", "a3"}, {"a4"});  // 1 - x
  b.node("Clip", {"a4", "lo", "hi"}, {"a5"});
  b.node("HardSwish", {"a5"}, {"a6"});
  b.node("Div", {"a6", "per_column"}, {"a7"});
  b.node("Sigmoid", {"a7"}, {"a8"});
  b.node("HardSigmoid", {"a8"}, {"a9"}, {{"alpha", 0.3f}, {"beta", 0.4f}});
  b.node("Pow", {"a9", "two"}, {"a10"});
  b.node("Sqrt", {"a10"}, {"a11"});
  b.node("Tanh", {"a11"}, {"a12"});
  b.node("Relu", {"a12"}, {"y"});
  b.output("y");
  const std::map<std::string, Tensor> feeds{{"x", random_tensor(DType::kF32, shape, -4, 4, 21)}};
  auto fused = std::make_shared<Graph>(*b.g);
  std::vector<std::string> log;
  passes::fuse_elementwise(*fused, log);
  ASSERT_EQ(fused->nodes.size(), 1u);
  EXPECT_EQ(fused->nodes[0].op_type, "rw.ElementwiseChain");
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find("13 nodes"), std::string::npos) << log[0];
  expect_identical(run(fused, feeds)[0], run(b.g, feeds)[0]);

  // Clip before opset 11 (bounds as attributes) and with absent bounds, and a negative Sqrt (NaN).
  G old;
  old.g->opset = 9;
  old.input("x", {5, 7});
  old.node("Clip", {"x"}, {"c"}, {{"min", -0.5f}});
  old.init("k", Tensor::scalar<float>(-1.0f));
  old.node("Mul", {"c", "k"}, {"m"});
  old.node("Sqrt", {"m"}, {"y"});
  old.output("y");
  const std::map<std::string, Tensor> small{{"x", random_tensor(DType::kF32, {5, 7}, -2, 2, 4)}};
  auto fused_old = std::make_shared<Graph>(*old.g);
  log.clear();
  passes::fuse_elementwise(*fused_old, log);
  EXPECT_EQ(count_op(*fused_old, "rw.ElementwiseChain"), 1u);
  EXPECT_EQ(fused_old->nodes.size(), 1u);
  expect_identical(run(fused_old, small)[0], run(old.g, small)[0]);
}

TEST(Passes, ElementwiseChainStopsAtSharedValuesOutputsAndShapeChanges) {
  G b;
  b.input("x", {4, 5});
  for (const char* v : {"a", "b", "c", "d", "e", "f", "g", "h", "r"}) b.value(v, {4, 5});
  b.node("Relu", {"x"}, {"a"});
  b.node("Sigmoid", {"a"}, {"b"});  // b is a graph output: the chain Relu -> Sigmoid ends here
  b.node("Tanh", {"b"}, {"c"});
  b.node("Add", {"c", "x"}, {"d"});  // not a constant operand: Tanh stays alone
  b.node("Sqrt", {"d"}, {"e"});      // e has two readers
  b.node("Relu", {"e"}, {"f"});
  b.init("k", Tensor::scalar<float>(0.25f));
  b.node("Mul", {"e", "k"}, {"g"});
  b.node("Add", {"f", "g"}, {"h"});
  b.node("Relu", {"h"}, {"r"});
  b.rand("wide", {2, 4, 5});
  b.node("Mul", {"r", "wide"}, {"y"});  // would broadcast [4,5] to [2,4,5]: not a step
  b.output("b");
  b.output("y");
  auto [g, log] = check_pass(b, passes::fuse_elementwise, {{"x", random_tensor(DType::kF32, {4, 5}, -2, 2)}});
  EXPECT_EQ(log.size(), 1u);
  EXPECT_EQ(count_op(*g, "rw.ElementwiseChain"), 1u);
  EXPECT_EQ(count_op(*g, "Sigmoid"), 0u);
  EXPECT_EQ(count_op(*g, "Tanh") + count_op(*g, "Sqrt"), 2u);
  EXPECT_EQ(count_op(*g, "Relu"), 2u);
  EXPECT_EQ(count_op(*g, "Mul"), 2u);
}

TEST(Passes, ElementwiseChainRunsAfterRegionsWithoutSplittingThem) {
  // Conv+Sigmoid -> MaxPool -> Add(scalar) is one oneDNN region (the Add would also be a chain
  // step); Sqrt -> Pow -> Tanh after it (Sqrt and Pow are no region ops, a lone Tanh makes no
  // region) becomes one chain node.
  G b;
  b.input("x", {1, 3, 12, 12});
  b.rand("w", {4, 3, 3, 3});
  b.node("Conv", {"x", "w"}, {"c"}, {{"pads", std::vector<std::int64_t>{1, 1, 1, 1}}});
  b.node("Sigmoid", {"c"}, {"s"});
  b.node("MaxPool", {"s"}, {"p"}, {{"kernel_shape", std::vector<std::int64_t>{3, 3}},
                                   {"pads", std::vector<std::int64_t>{1, 1, 1, 1}}});
  b.init("k", Tensor::scalar<float>(0.7f));
  b.node("Add", {"p", "k"}, {"a"});
  for (const char* v : {"c", "s", "p", "a", "q", "e"}) b.value(v, {1, 4, 12, 12});
  b.node("Sqrt", {"a"}, {"q"});
  b.init("three", Tensor::scalar<float>(3.0f));
  b.node("Pow", {"q", "three"}, {"e"});
  b.node("Tanh", {"e"}, {"y"});
  b.output("y");
  const std::map<std::string, Tensor> feeds{{"x", random_tensor(DType::kF32, {1, 3, 12, 12}, -2, 2)}};
  const auto expected = run(b.g, feeds);
  Executor fast(b.g);  // the default: optimized, oneDNN first
  ASSERT_EQ(fast.graph().nodes.size(), 2u);
  EXPECT_EQ(fast.graph().nodes[0].body.size(), 3u);
  EXPECT_EQ(fast.graph().nodes[1].op_type, "rw.ElementwiseChain");
  EXPECT_EQ(fast.node_providers(), (std::vector<std::string>{"onednn", "reference"}));
  testing::expect_close(fast.run(feeds)[0], expected[0], 1e-4, 1e-5);
  // The reference-only executor (no regions) has no chains either: it stays the unfused ground truth.
  ExecutorOptions o;
  o.reference_only = true;
  Executor reference(b.g, o);
  EXPECT_EQ(count_op(reference.graph(), "rw.ElementwiseChain"), 0u);
  testing::expect_close(reference.run(feeds)[0], expected[0], 1e-5, 1e-6);
}

}  // namespace
}  // namespace redwood
