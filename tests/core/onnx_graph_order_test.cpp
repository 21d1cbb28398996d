// The importer is as lenient as ONNX Runtime where ONNX's checker is stricter: nodes out of
// topological order are sorted (stably), a graph without a name or a graph input without a
// shape load, each with a warning naming what the checker refuses. A cycle, an input nothing
// provides, a value written twice, and what the checker refuses that ONNX Runtime refuses too,
// stay errors naming the file, the nodes and the values.

#include "core/error.hpp"
#include "core/onnx/onnx_import.hpp"
#include "runtime/executor.hpp"
#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>
#include <onnx/checker.h>

namespace redwood {
namespace {

using testing::OnnxBuilder;
constexpr int kFloat = onnx::TensorProto::FLOAT;

std::vector<std::string> node_names(const Graph& graph) {
  std::vector<std::string> names;
  for (const Node& n : graph.nodes) names.push_back(n.name);
  return names;
}

// y = Relu(x + b), with the Relu written first.
OnnxBuilder unsorted_model() {
  OnnxBuilder b(13);
  b.input("x", kFloat, {2});
  b.initializer("b", Tensor::from_vector<float>({2}, {1.f, -5.f}));
  b.node("Relu", {"sum"}, {"y"}, "relu");
  b.node("Add", {"x", "b"}, {"sum"}, "add");
  b.output("y", kFloat, {2});
  return b;
}

TEST(OnnxGraphOrder, NodesOutOfOrderAreSortedWithAWarning) {
  OnnxBuilder b = unsorted_model();
  EXPECT_THROW(onnx::checker::check_model(b.model()), onnx::checker::ValidationError) << "ONNX's checker refuses it";
  testing::LogCapture log;
  const auto graph = load_onnx_bytes(b.bytes(), "unsorted.onnx");
  EXPECT_EQ(node_names(*graph), (std::vector<std::string>{"add", "relu"}));
  for (const char* part : {"unsorted.onnx: the nodes are not in topological order",
                           "node 'relu' (Relu) reads 'sum' before node 'add' (Add) writes it"}) {
    EXPECT_NE(log.text().find(part), std::string::npos) << log.text();
  }
  // Shape inference ran on the sorted graph.
  ASSERT_NE(graph->find_value("sum"), nullptr);
  EXPECT_EQ(graph->find_value("sum")->description(), "float[2]");
  Executor exec(graph);
  EXPECT_EQ(exec.run({{"x", Tensor::from_vector<float>({2}, {1.f, 2.f})}})[0].to_float_vector(),
            (std::vector<float>{2.f, 0.f}));
}

TEST(OnnxGraphOrder, SortingKeepsTheFilesOrderWhereItIsValid) {
  OnnxBuilder b(13);
  b.input("x", kFloat, {2});
  b.node("Neg", {"x"}, {"n"}, "neg");      // ready first, stays first
  b.node("Add", {"a", "n"}, {"y"}, "add");  // needs 'a', written below
  b.node("Relu", {"x"}, {"a"}, "relu");
  b.node("Abs", {"x"}, {"z"}, "abs");       // independent: stays last
  b.output("y", kFloat, {2});
  b.output("z", kFloat, {2});
  const auto graph = load_onnx_bytes(b.bytes(), "partly_sorted.onnx");
  EXPECT_EQ(node_names(*graph), (std::vector<std::string>{"neg", "relu", "add", "abs"}));

  // Sorted already: no warning.
  testing::LogCapture log;
  load_onnx_bytes(unsorted_model().bytes(), "unsorted.onnx");
  OnnxBuilder sorted(13);
  sorted.input("x", kFloat, {2});
  sorted.node("Relu", {"x"}, {"y"}, "relu");
  sorted.output("y", kFloat, {2});
  const std::string before = log.text();
  load_onnx_bytes(sorted.bytes(), "sorted.onnx");
  EXPECT_EQ(log.text(), before);
}

TEST(OnnxGraphOrder, ACycleIsAnErrorNamingItsNodes) {
  OnnxBuilder b(13);
  b.input("x", kFloat, {2});
  b.node("Add", {"x", "m"}, {"a"}, "add");
  b.node("Mul", {"a", "x"}, {"m"}, "mul");
  b.node("Relu", {"a"}, {"y"});
  b.output("y", kFloat, {2});
  for (const bool check : {true, false}) {
    EXPECT_THROWS_SAYING(load_onnx_bytes(b.bytes(), "cycle.onnx", {.check = check}), InvalidArgument,
                         "cycle.onnx: the nodes form a cycle: node 'add' (Add) -> node 'mul' (Mul) -> node 'add' (Add)");
  }
}

TEST(OnnxGraphOrder, AnInputNothingProvidesIsAnError) {
  OnnxBuilder b(13);
  b.input("x", kFloat, {2});
  b.node("Add", {"x", "nowhere"}, {"y"}, "add");
  b.output("y", kFloat, {2});
  for (const bool check : {true, false}) {
    EXPECT_THROWS_SAYING(load_onnx_bytes(b.bytes(), "missing.onnx", {.check = check}), InvalidArgument,
                         "missing.onnx: node 'add' (Add): input 'nowhere' is neither a graph input, an initializer nor "
                         "a node output");
  }
}

TEST(OnnxGraphOrder, AValueWrittenTwiceIsAnError) {
  OnnxBuilder b(13);
  b.input("x", kFloat, {2});
  b.initializer("w", Tensor::zeros(DType::kF32, {2}));
  b.node("Relu", {"x"}, {"y"}, "relu");
  b.node("Neg", {"x"}, {"y"});
  b.output("y", kFloat, {2});
  for (const bool check : {true, false}) {
    EXPECT_THROWS_SAYING(load_onnx_bytes(b.bytes(), "twice.onnx", {.check = check}), InvalidArgument,
                         "twice.onnx: node 'relu' (Relu) and the Neg node writing 'y' both write 'y'");
  }
  OnnxBuilder c(13);
  c.input("x", kFloat, {2});
  c.initializer("w", Tensor::zeros(DType::kF32, {2}));
  c.node("Relu", {"x"}, {"w"}, "relu");
  c.node("Add", {"x", "w"}, {"y"}, "add");
  c.output("y", kFloat, {2});
  EXPECT_THROWS_SAYING(load_onnx_bytes(c.bytes(), "init.onnx"), InvalidArgument,
                       "init.onnx: node 'relu' (Relu) writes 'w', which is a graph input or an initializer");
}

TEST(OnnxGraphOrder, WhatOnnxRuntimeAcceptsLoadsWithAWarning) {
  OnnxBuilder b(13);
  b.input("x", kFloat, {});
  b.model().mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->clear_shape();
  b.model().mutable_graph()->clear_name();
  b.model().set_ir_version(onnx::IR_VERSION + 1);
  b.node("Relu", {"x"}, {"y"}, "relu");
  b.output("y", kFloat, {-1, 3});
  testing::LogCapture log;
  const auto graph = load_onnx_bytes(b.bytes(), "lenient.onnx");
  for (const char* part : {"lenient.onnx: input 'x' has no shape (its rank is unknown): ONNX's checker requires one",
                           "lenient.onnx: the model's graph has no name", "lenient.onnx: IR version 9 is newer than"}) {
    EXPECT_NE(log.text().find(part), std::string::npos) << part << " not in " << log.text();
  }
  EXPECT_FALSE(graph->inputs.at(0).has_shape);  // the shape given for the check is gone
  EXPECT_EQ(graph->name, "");
  Executor exec(graph);
  EXPECT_EQ(exec.run({{"x", Tensor::from_vector<float>({2, 3}, {-1, 2, -3, 4, -5, 6})}})[0].to_float_vector(),
            (std::vector<float>{0, 2, 0, 4, 0, 6}));
}

TEST(OnnxGraphOrder, WhatOnnxRuntimeRefusesTooStaysAnError) {
  OnnxBuilder unknown(13);
  unknown.input("x", kFloat, {2});
  unknown.node("Frobnicate", {"x"}, {"y"}, "frob");
  unknown.output("y", kFloat, {2});
  EXPECT_THROWS_SAYING(load_onnx_bytes(unknown.bytes(), "unknown.onnx"), InvalidArgument,
                       "unknown.onnx: the ONNX checker rejects the model", "Frobnicate");

  OnnxBuilder attribute(13);
  attribute.input("x", kFloat, {2});
  OnnxBuilder::set_attr(attribute.node("Relu", {"x"}, {"y"}, "relu"), "alpha", std::int64_t{2});
  attribute.output("y", kFloat, {2});
  EXPECT_THROWS_SAYING(load_onnx_bytes(attribute.bytes(), "attribute.onnx"), InvalidArgument,
                       "attribute.onnx: the ONNX checker rejects the model", "alpha");

  OnnxBuilder no_ir = unsorted_model();
  no_ir.model().clear_ir_version();
  EXPECT_THROWS_SAYING(load_onnx_bytes(no_ir.bytes(), "no_ir.onnx"), InvalidArgument,
                       "no_ir.onnx: the model does not say its IR version");

  // The checker sees the whole model after sorting: a problem behind the first unsorted node is found.
  OnnxBuilder both = unsorted_model();
  both.node("Relu", {"x", "x"}, {"r"}, "relu_2");
  EXPECT_THROWS_SAYING(load_onnx_bytes(both.bytes(), "both.onnx"), InvalidArgument,
                       "both.onnx: the ONNX checker rejects the model", "relu_2");
}

}  // namespace
}  // namespace redwood
