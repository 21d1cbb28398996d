// Each pass of the graph optimizer against the unoptimized graph: small graphs with random
// weights and inputs, run through the reference kernels before and after the pass; the outputs
// must agree, and the pass must have done the rewrite it exists for.

#include "core/executor.hpp"
#include "core/passes/pass_manager.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

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
  const auto records = passes::optimize(*optimized);
  EXPECT_EQ(optimized->nodes.size(), 2u);
  const auto expected = run(b.g, feeds);
  testing::expect_close(run(optimized, feeds)[0], expected[0], 1e-4, 1e-5);
  testing::expect_close(run(optimized, feeds, /*reference_only=*/false)[0], expected[0], 1e-4, 1e-5);
  Executor fast(b.g);  // the default: optimized, oneDNN first
  testing::expect_close(fast.run(feeds)[0], expected[0], 1e-4, 1e-5);
  EXPECT_EQ(fast.node_providers(), (std::vector<std::string>{"onednn", "onednn"}));
}

}  // namespace
}  // namespace redwood
