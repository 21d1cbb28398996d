// An If whose condition is a constant (an initializer or a Constant node) is replaced at import
// by the branch it takes, renamed into the graph; an If whose condition is computed at run time,
// and other control flow, stay Unsupported naming the node.

#include "core/error.hpp"
#include "core/onnx/onnx_import.hpp"
#include "runtime/executor.hpp"
#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace redwood {
namespace {

using testing::OnnxBuilder;
constexpr int kFloat = onnx::TensorProto::FLOAT;

// A branch graph: `build` adds its nodes; `out` is its one output.
template <class Build>
onnx::GraphProto branch(const std::string& name, const std::string& out, Build build) {
  OnnxBuilder b;
  build(b);
  b.output(out, kFloat, {2});
  onnx::GraphProto g = b.model().graph();
  g.set_name(name);
  return g;
}

// out = If(cond) then { t = ...; out t } else { e = ...; out e }, the branches' nodes added by
// `then` and `otherwise`.
template <class Then, class Else>
onnx::NodeProto& add_if(OnnxBuilder& b, const std::string& cond, const std::string& name, Then then, Else otherwise,
                        const std::string& out = "y") {
  auto& n = b.node("If", {cond}, {out}, name);
  OnnxBuilder::set_attr(n, "then_branch", branch("then", "t", then));
  OnnxBuilder::set_attr(n, "else_branch", branch("else", "e", otherwise));
  return n;
}

// out = If(cond) then Relu(x) else Neg(x).
onnx::NodeProto& relu_or_neg(OnnxBuilder& b, const std::string& cond, const std::string& name = "branch",
                             const std::string& out = "y") {
  return add_if(
      b, cond, name, [](OnnxBuilder& g) { g.node("Relu", {"x"}, {"t"}, "relu"); },
      [](OnnxBuilder& g) { g.node("Neg", {"x"}, {"e"}, "neg"); }, out);
}

// A graph of x: float[2], with the initializer cond = `cond`, for the caller's nodes.
OnnxBuilder x_and_cond(bool cond) {
  OnnxBuilder b(13);
  b.input("x", kFloat, {2});
  b.initializer("cond", Tensor::scalar<bool>(cond));
  return b;
}

std::vector<float> run(const std::shared_ptr<Graph>& graph, std::vector<float> x) {
  Executor exec(graph);
  return exec.run({{"x", Tensor::from_vector<float>({2}, x)}})[0].to_float_vector();
}

bool has_op(const Graph& graph, const std::string& op) {
  return std::any_of(graph.nodes.begin(), graph.nodes.end(), [&](const Node& n) { return n.op_type == op; });
}

TEST(OnnxInlineIf, AnInitializerConditionTakesItsBranch) {
  for (const bool cond : {true, false}) {
    OnnxBuilder b = x_and_cond(cond);
    relu_or_neg(b, "cond");
    b.output("y", kFloat, {2});
    const auto graph = load_onnx_bytes(b.bytes(), "if_init.onnx");
    ASSERT_EQ(graph->nodes.size(), 1u);
    EXPECT_EQ(graph->nodes[0].op_type, cond ? "Relu" : "Neg");
    EXPECT_EQ(graph->nodes[0].name, cond ? "branch/relu" : "branch/neg");
    EXPECT_EQ(graph->nodes[0].outputs, (std::vector<std::string>{"y"}));  // the branch's output written as the If's
    EXPECT_EQ(run(graph, {-1, 2}), cond ? (std::vector<float>{0, 2}) : (std::vector<float>{1, -2}));
  }
}

TEST(OnnxInlineIf, AConstantNodeConditionAndBranchInitializers) {
  OnnxBuilder b(13);
  b.input("x", kFloat, {2});
  OnnxBuilder::set_attr(b.node("Constant", {}, {"cond"}, "flag"), "value", Tensor::scalar<bool>(false));
  // The else branch scales by its own initializer and then adds a value computed inside it.
  add_if(
      b, "cond", "scale", [](OnnxBuilder& g) { g.node("Relu", {"x"}, {"t"}); },
      [](OnnxBuilder& g) {
        g.initializer("k", Tensor::from_vector<float>({2}, {2.f, 3.f}));
        g.node("Mul", {"x", "k"}, {"m"});
        g.node("Add", {"m", "x"}, {"e"});
      });
  b.output("y", kFloat, {2});
  const auto graph = load_onnx_bytes(b.bytes(), "if_const.onnx");
  EXPECT_FALSE(has_op(*graph, "If"));
  ASSERT_NE(graph->find_initializer("scale/k"), nullptr);
  EXPECT_EQ(graph->find_initializer("k"), nullptr);
  ASSERT_EQ(graph->nodes.size(), 2u);
  EXPECT_EQ(graph->nodes[0].outputs, (std::vector<std::string>{"scale/m"}));
  EXPECT_EQ(graph->nodes[1].inputs, (std::vector<std::string>{"scale/m", "x"}));
  EXPECT_EQ(run(graph, {1, 2}), (std::vector<float>{3, 8}));
}

TEST(OnnxInlineIf, BranchOutputsNoBranchNodeWritesGoThroughIdentity) {
  OnnxBuilder b = x_and_cond(true);
  auto& n = b.node("If", {"cond"}, {"y", "z"}, "pass");
  // then: y = x (a value of the enclosing graph), z = its own initializer.
  onnx::GraphProto then = branch("then", "x", [](OnnxBuilder& g) {
    g.initializer("c", Tensor::from_vector<float>({2}, {7.f, 8.f}));
  });
  *then.add_output() = then.output(0);
  then.mutable_output(1)->set_name("c");
  OnnxBuilder::set_attr(n, "then_branch", then);
  onnx::GraphProto otherwise = branch("else", "e", [](OnnxBuilder& g) { g.node("Neg", {"x"}, {"e"}); });
  *otherwise.add_output() = otherwise.output(0);
  OnnxBuilder::set_attr(n, "else_branch", otherwise);
  b.output("y", kFloat, {2});
  b.output("z", kFloat, {2});
  const auto graph = load_onnx_bytes(b.bytes(), "if_identity.onnx");
  ASSERT_EQ(graph->nodes.size(), 2u);
  EXPECT_EQ(graph->nodes[0].op_type, "Identity");
  EXPECT_EQ(graph->nodes[0].inputs, (std::vector<std::string>{"x"}));
  EXPECT_EQ(graph->nodes[1].inputs, (std::vector<std::string>{"pass/c"}));
  Executor exec(graph);
  const auto out = exec.run({{"x", Tensor::from_vector<float>({2}, {1, 2})}});
  EXPECT_EQ(out[0].to_float_vector(), (std::vector<float>{1, 2}));
  EXPECT_EQ(out[1].to_float_vector(), (std::vector<float>{7, 8}));
}

TEST(OnnxInlineIf, NestedIfsAreInlinedInTurn) {
  OnnxBuilder b = x_and_cond(true);
  add_if(
      b, "cond", "outer_if",
      [](OnnxBuilder& g) {
        OnnxBuilder::set_attr(g.node("Constant", {}, {"inner"}), "value", Tensor::scalar<bool>(false));
        g.node("Abs", {"x"}, {"a"}, "abs");
        relu_or_neg(g, "inner", "inner_if", "t");  // its branches read x from the outermost graph
      },
      [](OnnxBuilder& g) { g.node("Abs", {"x"}, {"e"}); });
  b.output("y", kFloat, {2});
  const auto graph = load_onnx_bytes(b.bytes(), "if_nested.onnx");
  EXPECT_FALSE(has_op(*graph, "If"));
  EXPECT_TRUE(has_op(*graph, "Neg"));
  EXPECT_EQ(run(graph, {-1, 2}), (std::vector<float>{1, -2}));
}

TEST(OnnxInlineIf, ABranchReadingAValueWrittenLaterIsSortedFirst) {
  OnnxBuilder b = x_and_cond(true);
  // The branches read h, which the outermost graph writes after the If: an implicit input.
  add_if(
      b, "cond", "late", [](OnnxBuilder& g) { g.node("Neg", {"h"}, {"t"}); },
      [](OnnxBuilder& g) { g.node("Abs", {"h"}, {"e"}); });
  b.node("Relu", {"x"}, {"h"}, "relu");
  b.output("y", kFloat, {2});
  const auto graph = load_onnx_bytes(b.bytes(), "if_late.onnx");
  EXPECT_EQ(graph->nodes.at(0).name, "relu");
  EXPECT_EQ(run(graph, {-1, 2}), (std::vector<float>{0, -2}));
}

TEST(OnnxInlineIf, BranchNodesOutOfOrderAreSorted) {
  OnnxBuilder b = x_and_cond(true);
  add_if(
      b, "cond", "br",
      [](OnnxBuilder& g) {
        g.node("Neg", {"r"}, {"t"}, "neg");
        g.node("Relu", {"x"}, {"r"}, "relu");
      },
      [](OnnxBuilder& g) { g.node("Abs", {"x"}, {"e"}); });
  b.output("y", kFloat, {2});
  testing::LogCapture log;
  const auto graph = load_onnx_bytes(b.bytes(), "if_unsorted.onnx");
  EXPECT_NE(log.text().find("if_unsorted.onnx: node 'br' (If) attribute 'then_branch': the nodes are not in topological "
                            "order"),
            std::string::npos)
      << log.text();
  EXPECT_EQ(run(graph, {-1, 2}), (std::vector<float>{0, -2}));
}

TEST(OnnxInlineIf, AConditionComputedAtRunTimeIsUnsupported) {
  OnnxBuilder b(13);
  b.input("x", kFloat, {2});
  b.node("ReduceSum", {"x"}, {"s"}, "sum");
  b.initializer("zero", Tensor::scalar<float>(0.f));
  b.node("Greater", {"s", "zero"}, {"positive"}, "test");
  relu_or_neg(b, "positive", "choose");
  b.output("y", kFloat, {2});
  EXPECT_THROWS_SAYING(load_onnx_bytes(b.bytes(), "if_dynamic.onnx"), Unsupported,
                       "if_dynamic.onnx: node 'choose' (If): the condition 'positive' is computed when the model runs");
}

TEST(OnnxInlineIf, AConditionThatIsNotOneBoolIsAnError) {
  OnnxBuilder b(13);
  b.input("x", kFloat, {2});
  b.initializer("cond", Tensor::from_vector<std::int64_t>({2}, {1, 0}));
  relu_or_neg(b, "cond");
  b.output("y", kFloat, {2});
  EXPECT_THROWS_SAYING(load_onnx_bytes(b.bytes(), "if_int.onnx"), InvalidArgument,
                       "if_int.onnx: node 'branch' (If): the condition 'cond' is int64[2], not one bool");
}

TEST(OnnxInlineIf, LoopsStayUnsupported) {
  OnnxBuilder b(13);
  b.input("x", kFloat, {2});
  b.initializer("trips", Tensor::scalar<std::int64_t>(2));
  auto& loop = b.node("Loop", {"trips", "", "x"}, {"y"}, "repeat");
  OnnxBuilder body;
  body.input("i", onnx::TensorProto::INT64, {});
  body.input("c", onnx::TensorProto::BOOL, {});
  body.input("v", kFloat, {2});
  body.node("Identity", {"c"}, {"c_out"});
  body.node("Relu", {"v"}, {"v_out"});
  body.output("c_out", onnx::TensorProto::BOOL, {});
  body.output("v_out", kFloat, {2});
  body.model().mutable_graph()->set_name("body");
  OnnxBuilder::set_attr(loop, "body", body.model().graph());
  b.output("y", kFloat, {2});
  EXPECT_THROWS_SAYING(load_onnx_bytes(b.bytes(), "loop.onnx"), Unsupported, "node 'repeat' (Loop)",
                       "attribute 'body' holds a graph");
}

}  // namespace
}  // namespace redwood
