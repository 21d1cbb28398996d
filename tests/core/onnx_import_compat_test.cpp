// What the importer reads beyond fp32 graphs of one opset: every default-domain opset from 7 to
// the newest the ONNX library knows (a newer one is refused naming both), fp16 and bf16 weights
// and graph inputs, and absent optional inputs and outputs ("" names).

#include "core/error.hpp"
#include "core/onnx/onnx_import.hpp"
#include "runtime/executor.hpp"
#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>
#include <onnx/defs/schema.h>

#include <fmt/format.h>

namespace redwood {
namespace {

using testing::OnnxBuilder;
constexpr int kFloat = onnx::TensorProto::FLOAT;

int newest_opset() {
  return onnx::OpSchemaRegistry::DomainToVersionRange::Instance().LastReleaseVersionMap().at(onnx::ONNX_DOMAIN);
}

// y = Relu(x + w).
OnnxBuilder add_relu(std::int64_t opset) {
  OnnxBuilder b(opset);
  b.input("x", kFloat, {2});
  b.initializer("w", Tensor::from_vector<float>({2}, {1.f, -3.f}));
  b.node("Add", {"x", "w"}, {"s"}, "add");
  b.node("Relu", {"s"}, {"y"}, "relu");
  b.output("y", kFloat, {2});
  return b;
}

TEST(OnnxOpsets, EveryOpsetFrom7ToTheNewestLoadsAndRuns) {
  ASSERT_GE(newest_opset(), 17);
  for (int opset = 7; opset <= newest_opset(); ++opset) {
    SCOPED_TRACE(opset);
    const auto graph = load_onnx_bytes(add_relu(opset).bytes(), fmt::format("opset{}.onnx", opset));
    EXPECT_EQ(graph->opset, opset);
    Executor exec(graph);
    EXPECT_EQ(exec.run({{"x", Tensor::from_vector<float>({2}, {1.f, 2.f})}})[0].to_float_vector(),
              (std::vector<float>{2.f, 0.f}));
  }
}

TEST(OnnxOpsets, ANewerOpsetIsRefusedNamingBoth) {
  const int newer = newest_opset() + 1;
  const std::string model = fmt::format("the model imports opset {} of the default ONNX domain", newer);
  const std::string newest = fmt::format("Redwood reads opsets up to {}, the newest that its ONNX library", newest_opset());
  for (const bool check : {true, false}) {
    EXPECT_THROWS_SAYING(load_onnx_bytes(add_relu(newer).bytes(), "new.onnx", {.check = check}), Unsupported,
                         "new.onnx", model.c_str(), newest.c_str());
  }
  OnnxBuilder named = add_relu(13);
  named.model().mutable_opset_import(0)->set_domain("ai.onnx");
  named.model().mutable_opset_import(0)->set_version(newer);
  EXPECT_THROWS_SAYING(load_onnx_bytes(named.bytes(), "ai_onnx.onnx"), Unsupported, model.c_str());
}

OnnxBuilder& cast(OnnxBuilder& b, const std::string& in, const std::string& out, int to) {
  OnnxBuilder::set_attr(b.node("Cast", {in}, {out}, "cast_" + out), "to", std::int64_t{to});
  return b;
}

// y = Cast(Cast(x) * Cast(w)) for an input x and weights w of `type` (fp16 or bf16), computed in fp32.
OnnxBuilder half_model(DType dtype) {
  const int type = dtype_to_onnx(dtype);
  OnnxBuilder b(13);
  b.input("x", type, {4});
  b.initializer("w", Tensor::from_vector<float>({4}, {0.5f, -2.f, 3.f, 0.25f}).cast(dtype));
  cast(b, "x", "xf", kFloat);
  cast(b, "w", "wf", kFloat);
  b.node("Mul", {"xf", "wf"}, {"p"}, "mul");
  cast(b, "p", "y", type);
  b.output("y", type, {4});
  return b;
}

TEST(OnnxHalfFloats, Fp16AndBf16WeightsAndInputsLoadAndRunThroughCasts) {
  for (const DType dtype : {DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const auto graph = load_onnx_bytes(half_model(dtype).bytes(), "half.onnx");
    EXPECT_EQ(graph->inputs.at(0).dtype, dtype);
    EXPECT_EQ(graph->outputs.at(0).dtype, dtype);
    EXPECT_EQ(graph->initializers.at("w").dtype(), dtype);
    EXPECT_EQ(graph->initializers.at("w").to_float_vector(), (std::vector<float>{0.5f, -2.f, 3.f, 0.25f}));
    ASSERT_NE(graph->find_value("xf"), nullptr);
    EXPECT_EQ(graph->find_value("xf")->description(), "float[4]");
    Executor exec(graph);
    const Tensor y = exec.run({{"x", Tensor::from_vector<float>({4}, {2.f, 1.5f, -1.f, 4.f}).cast(dtype)}})[0];
    EXPECT_EQ(y.dtype(), dtype);
    EXPECT_EQ(y.to_float_vector(), (std::vector<float>{1.f, -3.f, -3.f, 1.f}));
  }
}

TEST(OnnxHalfFloats, Fp16WeightsInTheTypedFieldReadAsTheirBits) {
  OnnxBuilder b = half_model(DType::kF16);
  onnx::TensorProto& w = *b.model().mutable_graph()->mutable_initializer(0);
  w.clear_raw_data();
  for (const float v : {0.5f, -2.f, 3.f, 0.25f}) w.add_int32_data(float_to_half(v).bits);
  const auto graph = load_onnx_bytes(b.bytes(), "half_typed.onnx");
  EXPECT_EQ(graph->initializers.at("w").to_float_vector(), (std::vector<float>{0.5f, -2.f, 3.f, 0.25f}));
}

TEST(OnnxOptionalValues, AbsentInputsAndOutputsLoadAndRun) {
  OnnxBuilder b(13);
  b.input("x", kFloat, {1, 1, 2, 2});
  b.initializer("hi", Tensor::scalar<float>(2.5f));
  b.initializer("scales", Tensor::from_vector<float>({4}, {1.f, 1.f, 2.f, 2.f}));
  b.node("Clip", {"x", "", "hi"}, {"c"}, "clip");         // no min
  b.node("Resize", {"c", "", "scales"}, {"r"}, "resize");  // no roi, no sizes
  b.node("Dropout", {"r"}, {"y", ""}, "dropout");           // no mask
  b.output("y", kFloat, {1, 1, 4, 4});
  const auto graph = load_onnx_bytes(b.bytes(), "optional.onnx");
  ASSERT_EQ(graph->nodes.size(), 3u);
  EXPECT_FALSE(graph->nodes[0].has_input(1));
  EXPECT_TRUE(graph->nodes[0].has_input(2));
  EXPECT_EQ(graph->nodes[1].inputs, (std::vector<std::string>{"c", "", "scales"}));
  EXPECT_EQ(graph->nodes[2].outputs, (std::vector<std::string>{"y", ""}));
  Executor exec(graph);
  const Tensor y = exec.run({{"x", Tensor::from_vector<float>({1, 1, 2, 2}, {1.f, 2.f, 3.f, -4.f})}})[0];
  EXPECT_EQ(y.shape(), (Shape{1, 1, 4, 4}));
  EXPECT_EQ(y.to_float_vector(), (std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2, 2.5f, 2.5f, -4, -4, 2.5f, 2.5f, -4, -4}));
}

}  // namespace
}  // namespace redwood
