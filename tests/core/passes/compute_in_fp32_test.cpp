// compute_in_fp32: fp16/bf16 graphs run on the CPU executor in fp32 between casts at their
// inputs and outputs, and match the same graph built in fp32 within fp16 rounding.

#include "runtime/executor.hpp"
#include "core/error.hpp"
#include "core/passes/compute_in_fp32.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace redwood {
namespace {

using testing::random_tensor;

// A graph builder whose values and outputs take a dtype.
struct G {
  std::shared_ptr<Graph> g = std::make_shared<Graph>();
  G() {
    g->name = "fp16";
    g->opset = 17;
  }
  void value(const std::string& name, DType dtype, const Shape& shape) {
    ValueInfo vi;
    vi.name = name;
    vi.dtype = dtype;
    vi.onnx_type = dtype_to_onnx(dtype);
    vi.has_shape = true;
    for (auto d : shape) vi.dims.push_back({d, ""});
    g->value_info[name] = vi;
  }
  void input(const std::string& name, DType dtype, const Shape& shape) {
    value(name, dtype, shape);
    g->inputs.push_back(g->value_info[name]);
  }
  void output(const std::string& name, DType dtype, const Shape& shape) {
    value(name, dtype, shape);
    g->outputs.push_back(g->value_info[name]);
  }
  void node(const std::string& op, std::vector<std::string> ins, std::vector<std::string> outs,
            std::map<std::string, AttributeValue> attrs = {}) {
    Node& n = g->nodes.emplace_back(
        testing::make_node(op + "_" + std::to_string(g->nodes.size()), op, std::move(ins), std::move(outs)));
    n.attributes = std::move(attrs);
  }
};

constexpr std::int64_t kFloat = 1, kFloat16 = 10, kBFloat16 = 16;

// x -> Conv(W, B, pads 1) -> Relu -> Add(c) -> y, every tensor of `dtype` (weights are fp16
// values in either case, so the two builds hold the same numbers).
std::shared_ptr<Graph> conv_relu_add(DType dtype) {
  G b;
  const Shape xs{1, 3, 8, 8}, ys{1, 4, 8, 8};
  b.input("x", dtype, xs);
  b.g->initializers["W"] = random_tensor(DType::kF16, {4, 3, 3, 3}, -1, 1, 3).cast(dtype);
  b.g->initializers["B"] = random_tensor(DType::kF16, {4}, -0.5, 0.5, 4).cast(dtype);
  b.g->initializers["c"] = random_tensor(DType::kF16, {1, 4, 1, 1}, -0.5, 0.5, 5).cast(dtype);
  b.node("Conv", {"x", "W", "B"}, {"conv"}, {{"pads", std::vector<std::int64_t>{1, 1, 1, 1}}});
  b.value("conv", dtype, ys);
  b.node("Relu", {"conv"}, {"relu"});
  b.value("relu", dtype, ys);
  b.node("Add", {"relu", "c"}, {"y"});
  b.output("y", dtype, ys);
  return b.g;
}

std::vector<Tensor> run(std::shared_ptr<const Graph> g, const std::map<std::string, Tensor>& feeds,
                        bool optimize, std::vector<PassRecord>* records = nullptr) {
  ExecutorOptions o;
  o.optimize = optimize;
  o.reference_only = !optimize;
  Executor e(std::move(g), o);
  if (records != nullptr) *records = e.pass_records();
  return e.run(feeds);
}

// Output of an fp32 computation rounded once to fp16: within half an fp16 ulp of the fp32 result.
void expect_fp16_close(const Tensor& actual, const Tensor& expected) {
  testing::expect_close(actual.cast(DType::kF32), expected, 1e-3, 1e-3);
}

TEST(ComputeInFp32, Fp16ConvReluAddRunsOnTheCpuAndMatchesFp32) {
  const auto half = conv_relu_add(DType::kF16);
  const auto full = conv_relu_add(DType::kF32);
  const Tensor x = random_tensor(DType::kF16, {1, 3, 8, 8}, -1, 1, 7);
  for (const bool optimize : {false, true}) {
    SCOPED_TRACE(optimize ? "optimized" : "unoptimized, reference kernels");
    std::vector<PassRecord> records;
    const auto y = run(half, {{"x", x}}, optimize, &records);
    const auto expected = run(full, {{"x", x.cast(DType::kF32)}}, optimize);
    ASSERT_EQ(y.size(), 1u);
    EXPECT_EQ(y[0].dtype(), DType::kF16);  // the declared output type
    expect_fp16_close(y[0], expected[0]);
    ASSERT_FALSE(records.empty());
    EXPECT_EQ(records.front().pass, "compute_in_fp32");
    EXPECT_EQ(records.front().changes.size(), 1u);
  }
  // An fp32 input is refused: the graph still declares fp16.
  EXPECT_NE(testing::message_of<InvalidArgument>([&] { run(half, {{"x", x.cast(DType::kF32)}}, false); }).find("float16"), std::string::npos);
}

TEST(ComputeInFp32, RewritesTypesAndAddsBoundaryCasts) {
  auto g = std::make_shared<Graph>(*conv_relu_add(DType::kF16));
  std::vector<std::string> log;
  passes::compute_in_fp32(*g, log);
  ASSERT_EQ(log.size(), 1u);
  // The caller's view is unchanged.
  ASSERT_EQ(g->inputs.size(), 1u);
  EXPECT_EQ(g->inputs[0].name, "x");
  EXPECT_EQ(g->inputs[0].dtype, DType::kF16);
  ASSERT_EQ(g->outputs.size(), 1u);
  EXPECT_EQ(g->outputs[0].name, "y");
  EXPECT_EQ(g->outputs[0].dtype, DType::kF16);
  // Cast(x) first, Cast(to y) last; everything between is fp32.
  ASSERT_EQ(g->nodes.size(), 5u);
  EXPECT_EQ(g->nodes.front().op_type, "Cast");
  EXPECT_EQ(g->nodes.front().inputs[0], "x");
  EXPECT_EQ(g->nodes.front().attr_int("to", 0), kFloat);
  EXPECT_EQ(g->nodes[1].inputs[0], g->nodes.front().outputs[0]);
  EXPECT_EQ(g->nodes.back().op_type, "Cast");
  EXPECT_EQ(g->nodes.back().outputs[0], "y");
  EXPECT_EQ(g->nodes.back().attr_int("to", 0), kFloat16);
  EXPECT_EQ(g->nodes[3].outputs[0], g->nodes.back().inputs[0]);
  for (const auto& [name, t] : g->initializers) EXPECT_EQ(t.dtype(), DType::kF32) << name;
  for (const auto& [name, vi] : g->value_info) {
    EXPECT_EQ(vi.dtype, name == "x" || name == "y" ? DType::kF16 : DType::kF32) << name;
  }
  EXPECT_EQ(g->find_value(g->nodes.front().outputs[0])->dtype, DType::kF32);
  EXPECT_NO_THROW(g->sort_topologically());
  // Running it again changes nothing more than the boundary casts' types, which are declared.
  EXPECT_TRUE(passes::has_reduced_float(*g));
}

TEST(ComputeInFp32, CastToFp16InsideAnFp32Graph) {
  // x (fp32) -> Cast(to fp16) -> Mul(fp16 k) -> Cast(to fp32) -> y, and the same in fp32.
  auto build = [](bool half) {
    G b;
    b.input("x", DType::kF32, {2, 5});
    const DType t = half ? DType::kF16 : DType::kF32;
    b.g->initializers["k"] = random_tensor(DType::kF16, {5}, -2, 2, 9).cast(t);
    b.node("Cast", {"x"}, {"h"}, {{"to", std::int64_t{half ? kFloat16 : kFloat}}});
    b.value("h", t, {2, 5});
    b.node("Mul", {"h", "k"}, {"m"});
    b.value("m", t, {2, 5});
    b.node("Cast", {"m"}, {"y"}, {{"to", kFloat}});
    b.output("y", DType::kF32, {2, 5});
    return b.g;
  };
  const Tensor x = random_tensor(DType::kF32, {2, 5}, -3, 3, 11);
  for (const bool optimize : {false, true}) {
    const auto y = run(build(true), {{"x", x}}, optimize);
    const auto expected = run(build(false), {{"x", x}}, optimize);
    EXPECT_EQ(y[0].dtype(), DType::kF32);
    expect_fp16_close(y[0], expected[0]);
  }
  Graph g = *build(true);
  std::vector<std::string> log;
  passes::compute_in_fp32(g, log);
  ASSERT_EQ(g.nodes.size(), 3u);  // no boundary casts: the graph's inputs and outputs are fp32
  EXPECT_EQ(g.nodes[0].op_type, "Cast");
  EXPECT_EQ(g.nodes[0].outputs[0], "h");
  EXPECT_EQ(g.nodes[0].attr_int("to", 0), kFloat);
  EXPECT_EQ(g.value_info.at("h").dtype, DType::kF32);
  EXPECT_FALSE(passes::has_reduced_float(g));
}

TEST(ComputeInFp32, Bf16ConstantsDtypeAttributesAndAnOutputOtherNodesRead) {
  // x (bf16) -> Mul(k) -> y (a bf16 output that Relu also reads) -> Relu -> z (bf16);
  // ConstantOfShape with an fp16 value and EyeLike(dtype fp16) -> e (fp16 output).
  G b;
  b.input("x", DType::kBF16, {3, 3});
  b.g->initializers["k"] = random_tensor(DType::kF32, {3, 3}, -1, 1, 13).cast(DType::kBF16);
  b.g->initializers["shape"] = testing::i64({3, 3});
  b.node("Mul", {"x", "k"}, {"y"});
  b.output("y", DType::kBF16, {3, 3});
  b.node("Relu", {"y"}, {"z"});
  b.output("z", DType::kBF16, {3, 3});
  b.node("ConstantOfShape", {"shape"}, {"c"}, {{"value", Tensor::scalar(float_to_half(2.0f)).reshaped({1})}});
  b.value("c", DType::kF16, {3, 3});
  b.node("EyeLike", {"c"}, {"e"}, {{"dtype", kFloat16}});
  b.output("e", DType::kF16, {3, 3});
  const Tensor x = random_tensor(DType::kF32, {3, 3}, -1, 1, 17).cast(DType::kBF16);

  Graph rewritten = *b.g;
  std::vector<std::string> log;
  passes::compute_in_fp32(rewritten, log);
  EXPECT_EQ(rewritten.nodes.size(), 4u + 1 + 3);  // a Cast after x, one before each output
  for (const Node& n : rewritten.nodes) {
    if (n.op_type == "ConstantOfShape") {
      EXPECT_EQ(n.attr_tensor("value").dtype(), DType::kF32);
    } else if (n.op_type == "EyeLike") {
      EXPECT_EQ(n.attr_int("dtype", 0), kFloat);
    } else if (n.op_type == "Relu") {
      EXPECT_NE(n.inputs[0], "y");  // reads the fp32 value, not the output
    }
  }
  EXPECT_EQ(rewritten.nodes.back().attr_int("to", 0), kFloat16);  // e

  const auto out = run(b.g, {{"x", x}}, false);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].dtype(), DType::kBF16);
  EXPECT_EQ(out[1].dtype(), DType::kBF16);
  EXPECT_EQ(out[2].dtype(), DType::kF16);
  const Tensor product = x.cast(DType::kF32);
  const Tensor k = b.g->initializers["k"].cast(DType::kF32);
  for (std::int64_t i = 0; i < 9; ++i) {
    const double want = product.get_as_double(i) * k.get_as_double(i);
    EXPECT_NEAR(out[0].get_as_double(i), want, 1e-2 * std::abs(want) + 1e-6) << i;
    EXPECT_NEAR(out[1].get_as_double(i), std::max(0.0, want), 1e-2 * std::abs(want) + 1e-6) << i;
    EXPECT_EQ(out[2].get_as_double(i), i % 4 == 0 ? 1.0 : 0.0) << i;
  }
}

TEST(ComputeInFp32, LeavesGraphsWithoutFp16Untouched) {
  const auto full = conv_relu_add(DType::kF32);
  Graph g = *full;
  const Node* nodes = g.nodes.data();
  std::vector<std::string> log;
  passes::compute_in_fp32(g, log);
  EXPECT_TRUE(log.empty());
  EXPECT_EQ(g.nodes.data(), nodes);
  EXPECT_EQ(g.nodes.size(), full->nodes.size());
  EXPECT_EQ(g.value_info.size(), full->value_info.size());
  EXPECT_FALSE(passes::has_reduced_float(g));
  // The unoptimized CPU executor runs the graph it was given, not a copy.
  ExecutorOptions o;
  o.optimize = false;
  Executor e(full, o);
  EXPECT_EQ(&e.graph(), full.get());
  EXPECT_TRUE(e.pass_records().empty());
  // And the optimizer's pipeline does not start with the pass.
  Executor optimized(full, {});
  ASSERT_FALSE(optimized.pass_records().empty());
  EXPECT_NE(optimized.pass_records().front().pass, "compute_in_fp32");
}

TEST(ComputeInFp32, NotInTheDevicePipelines) {
  // The passes every device starts from and the GPU runner's base keep fp16 as it is.
  for (const auto& pipeline : {passes::default_pipeline(true), passes::default_pipeline(false), passes::chain_pipeline()}) {
    for (const auto& p : pipeline) EXPECT_NE(p.name, "compute_in_fp32");
  }
  EXPECT_EQ(passes::cpu_pipeline(*conv_relu_add(DType::kF16), false, false).size(), 1u);
  EXPECT_TRUE(passes::cpu_pipeline(*conv_relu_add(DType::kF32), false, false).empty());
}

}  // namespace
}  // namespace redwood
