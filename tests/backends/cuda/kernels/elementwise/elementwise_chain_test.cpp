// rw.ElementwiseChain on the GPU: the CUDA kernel against the reference kernel on random chains
// (every step type, every way a constant broadcasts, on either side, lengths 1 to 30: past one
// launch's 24 steps), then a graph of separate elementwise nodes through the GPU runner, whose
// optimizer fuses them into chains, against the reference executor on the unfused graph.

#include "backends/cuda/graph_runner.hpp"
#include "runtime/executor.hpp"
#include "gpu_test_support.hpp"
#include "provider_run.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <random>

namespace redwood::cuda {
namespace {

using redwood::testing::random_tensor;

const std::vector<std::string> kSteps = {"Relu",      "Sigmoid", "Tanh", "Sqrt", "HardSigmoid", "HardSwish", "LeakyRelu",
                                         "Clip",      "Add",     "Sub",  "Mul",  "Div",         "Pow"};

// A chain node's inputs and attributes (the IR contract of core/passes/fuse_elementwise.cpp).
struct Chain {
  std::vector<Tensor> inputs;
  std::vector<std::string> ops;
  std::vector<float> alpha, beta;
  std::vector<std::int64_t> operand, swapped;

  void unary(const std::string& op, float a = 0, float b = 0) {
    ops.push_back(op);
    alpha.push_back(a);
    beta.push_back(b);
    operand.push_back(-1);
    swapped.push_back(0);
  }
  void binary(const std::string& op, Tensor c, bool constant_first) {
    ops.push_back(op);
    alpha.push_back(0);
    beta.push_back(0);
    operand.push_back(static_cast<std::int64_t>(inputs.size()));
    swapped.push_back(constant_first ? 1 : 0);
    inputs.push_back(std::move(c));
  }
  std::map<std::string, AttributeValue> attributes() const {
    return {{"rw.steps", ops},
            {"rw.step_alpha", alpha},
            {"rw.step_beta", beta},
            {"rw.step_operand", operand},
            {"rw.step_swapped", swapped}};
  }
};

// The shapes of constants that broadcast to x without changing it: scalars, and blocks of
// consecutive axes (per channel, trailing vectors, leading blocks).
std::vector<Shape> operand_shapes(const Shape& x) {
  std::vector<Shape> out{{}, {1}};
  for (std::size_t first = 0; first < x.size(); ++first) {
    for (std::size_t last = first; last < x.size(); ++last) {
      Shape s(x.size() - first, 1);  // rank from `first` on: leading axes dropped
      for (std::size_t k = first; k <= last; ++k) s[k - first] = x[k];
      out.push_back(s);
      Shape padded(x.size(), 1);  // the same block at full rank
      for (std::size_t k = first; k <= last; ++k) padded[k] = x[k];
      out.push_back(padded);
    }
  }
  return out;
}

// A random chain of `length` steps (more with the guards) over data of shape x. `forced` steps
// come first, so that a test can ask for every type. Sqrt, Pow and a constant divided by the data
// get a guard first (Sigmoid, then + 1: the data in (1, 2)), so that no NaN or infinity appears.
Chain random_chain(const Shape& x, int length, std::uint32_t seed, std::vector<std::string> forced = {}) {
  std::mt19937 rng(seed);
  auto uniform = [&](float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng); };
  const std::vector<Shape> shapes = operand_shapes(x);
  Chain c;
  c.inputs.push_back(random_tensor(DType::kF32, x, -3, 3, seed));
  std::uint32_t constant_seed = seed * 1000;
  auto constant = [&](float lo, float hi) {
    const Shape& s = shapes[std::uniform_int_distribution<std::size_t>(0, shapes.size() - 1)(rng)];
    return random_tensor(DType::kF32, s, lo, hi, ++constant_seed);
  };
  auto guard = [&] {
    c.unary("Sigmoid");
    c.binary("Add", Tensor::scalar<float>(1.0f), rng() % 2 == 0);
  };
  for (int i = 0; i < length; ++i) {
    const std::string op = i < static_cast<int>(forced.size())
                               ? forced[static_cast<std::size_t>(i)]
                               : kSteps[std::uniform_int_distribution<std::size_t>(0, kSteps.size() - 1)(rng)];
    const bool constant_first = rng() % 2 == 0;
    if (op == "Sqrt") {
      guard();
      c.unary(op);
    } else if (op == "LeakyRelu") {
      c.unary(op, uniform(0.01f, 0.3f));
    } else if (op == "HardSigmoid") {
      c.unary(op, uniform(0.1f, 0.5f), uniform(0.3f, 0.6f));
    } else if (op == "Clip") {
      // Absent bounds are float's lowest/max (what the pass writes), present ones anything.
      const bool open_low = rng() % 4 == 0, open_high = rng() % 4 == 0;
      c.unary(op, open_low ? std::numeric_limits<float>::lowest() : uniform(-2, -0.1f),
              open_high ? std::numeric_limits<float>::max() : uniform(0.1f, 2));
    } else if (op == "Div") {
      if (constant_first) guard();
      c.binary(op, constant(0.5f, 1.5f), constant_first);
    } else if (op == "Pow") {
      if (!constant_first) guard();
      c.binary(op, constant_first ? constant(0.5f, 1.5f) : constant(-2, 2), constant_first);
    } else if (op == "Add" || op == "Sub" || op == "Mul") {
      c.binary(op, constant(-1, 1), constant_first);
    } else {
      c.unary(op);
    }
  }
  return c;
}

void expect_gpu_matches_reference(const Chain& c, const std::string& what) {
  const auto attrs = c.attributes();
  const std::vector<Tensor> want =
      testing::run_with_provider("rw.ElementwiseChain", c.inputs, attrs, Device::kCpu, kReferenceProvider, Precision::kFp32);
  const std::vector<Tensor> got =
      testing::run_with_provider("rw.ElementwiseChain", c.inputs, attrs, Device::kCuda, kCudaProvider, Precision::kFp32);
  ASSERT_EQ(got.at(0).shape(), want.at(0).shape()) << what;
  const double err = testing::relative_l2(got[0], want[0]);
  EXPECT_LE(err, 1e-5) << what;
  redwood::testing::expect_close(got[0], want[0], 1e-4, 1e-5);
}

struct ChainCase {
  Shape x;
  int length;
  std::uint32_t seed;
};
void PrintTo(const ChainCase& c, std::ostream* os) { *os << shape_str(c.x) << " length " << c.length; }

class ChainOnGpu : public ::testing::TestWithParam<ChainCase> {};

TEST_P(ChainOnGpu, RandomChainMatchesTheReferenceKernel) {
  RW_SKIP_WITHOUT_GPU();
  const ChainCase& p = GetParam();
  const Chain c = random_chain(p.x, p.length, p.seed);
  std::string ops;
  for (const auto& op : c.ops) ops += op + " ";
  expect_gpu_matches_reference(c, shape_str(p.x) + ": " + ops);
}

std::vector<ChainCase> chain_cases() {
  std::vector<ChainCase> out;
  std::uint32_t seed = 1;
  // 210 elements (not a multiple of 4: the scalar kernel), 384 and 100000 (the float4 kernel),
  // 1-D with an odd count.
  for (const Shape& x : std::vector<Shape>{{2, 3, 5, 7}, {2, 4, 6, 8}, {4, 25, 1000}, {10007}}) {
    for (int length : {1, 2, 4, 7, 13, 30}) out.push_back({x, length, seed++});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Chains, ChainOnGpu, ::testing::ValuesIn(chain_cases()), [](const auto& info) {
  std::string name;
  for (auto d : info.param.x) name += std::to_string(d) + "x";
  return name + "len" + std::to_string(info.param.length);
});

TEST(ChainOnGpuEveryStep, EveryStepTypeOnEitherSide) {
  RW_SKIP_WITHOUT_GPU();
  // Each type at least twice in one chain of 26 (the binary ones with random sides and
  // operand shapes): past one launch's 24 steps, so the second launch runs in place.
  std::vector<std::string> forced = kSteps;
  forced.insert(forced.end(), kSteps.begin(), kSteps.end());
  for (std::uint32_t seed : {101u, 102u, 103u}) {
    const Chain c = random_chain({3, 8, 5, 6}, static_cast<int>(forced.size()), seed, forced);
    for (const auto& op : kSteps) EXPECT_NE(std::find(c.ops.begin(), c.ops.end(), op), c.ops.end()) << op;
    expect_gpu_matches_reference(c, "every step, seed " + std::to_string(seed));
  }
}

TEST(ChainOnGpuPlan, RejectsAnOperandThatChangesTheShape) {
  // Host only: plan() checks what the reference kernel checks.
  Chain c;
  c.inputs.push_back(Tensor());
  c.binary("Add", Tensor(), false);
  Graph graph;
  graph.opset = 17;
  Node node;
  node.name = "the_chain";
  node.op_type = "rw.ElementwiseChain";
  node.inputs = {"x", "c"};
  node.outputs = {"y"};
  node.attributes = c.attributes();
  KernelInfo info;
  info.graph = &graph;
  info.opset = 17;
  info.input_dtypes = {DType::kF32, DType::kF32};
  info.constant_inputs = {nullptr, nullptr};
  const auto candidates = OpRegistry::instance().candidates("rw.ElementwiseChain", Device::kCuda);
  ASSERT_FALSE(candidates.empty()) << "no CUDA kernel for rw.ElementwiseChain";
  auto kernel = candidates.at(0)->factory(node, info);
  auto* ck = dynamic_cast<CudaKernel*>(kernel.get());
  ASSERT_NE(ck, nullptr);
  std::vector<TensorDesc> fits = {{DType::kF32, {2, 3, 4}}, {DType::kF32, {3, 1}}};
  EXPECT_EQ(ck->plan(PlanInfo{node, fits, Precision::kFp32, 17}).at(0).shape, (Shape{2, 3, 4}));
  for (const Shape& bad : std::vector<Shape>{{2, 1, 4}, {5}, {1, 2, 3, 4}, {2, 3, 4, 1}}) {
    std::vector<TensorDesc> in = {{DType::kF32, {2, 3, 4}}, {DType::kF32, bad}};
    try {
      ck->plan(PlanInfo{node, in, Precision::kFp32, 17});
      ADD_FAILURE() << "operand " << shape_str(bad) << " was planned";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("the_chain"), std::string::npos) << e.what();
    }
  }
  node.attributes["rw.steps"] = std::vector<std::string>{"Exp"};
  EXPECT_THROW(candidates.at(0)->factory(node, info), InvalidArgument);
}

// A graph of separate elementwise nodes: the GPU runner's optimizer fuses them into chains, and
// the result matches the reference executor on the graph as it is.
TEST(ChainOnGpuRunner, FusesChainsAndMatchesTheUnfusedReference) {
  RW_SKIP_WITHOUT_GPU();
  auto g = std::make_shared<Graph>();
  g->name = "chains";
  g->opset = 17;
  auto value = [&](const std::string& name, const Shape& shape) {
    ValueInfo vi;
    vi.name = name;
    vi.dtype = DType::kF32;
    vi.has_shape = true;
    for (auto d : shape) vi.dims.push_back({d, ""});
    g->value_info[name] = vi;
    return vi;
  };
  auto node = [&](const std::string& op, std::vector<std::string> in, std::string out,
                  std::map<std::string, AttributeValue> attrs = {}) {
    Node n = redwood::testing::make_node(op + std::to_string(g->nodes.size()), op, std::move(in), {std::move(out)});
    n.attributes = std::move(attrs);
    g->nodes.push_back(std::move(n));
  };
  g->inputs.push_back(value("x", {2, 3, 9, 10}));
  g->initializers["per_channel"] = random_tensor(DType::kF32, {3, 1, 1}, 0.5, 1.5, 5);
  g->initializers["shift"] = Tensor::scalar<float>(0.25f);
  g->initializers["per_row"] = random_tensor(DType::kF32, {3}, -1, 1, 6);
  node("Mul", {"x", "per_channel"}, "a");
  node("Add", {"shift", "a"}, "b");
  node("HardSwish", {"b"}, "c");
  node("Sigmoid", {"c"}, "d");
  node("Sqrt", {"d"}, "e");
  node("Transpose", {"e"}, "t", {{"perm", std::vector<std::int64_t>{0, 2, 3, 1}}});
  value("t", {2, 9, 10, 3});
  node("Sub", {"t", "per_row"}, "f");
  node("Tanh", {"f"}, "y");
  g->outputs.push_back(value("y", {2, 9, 10, 3}));

  ExecutorOptions ref_options;
  ref_options.optimize = false;
  ref_options.reference_only = true;
  Executor reference(g, ref_options);
  GraphRunner runner(g);
  std::size_t chains = 0;
  for (const Node& n : runner.graph().nodes) chains += n.op_type == "rw.ElementwiseChain";
  EXPECT_EQ(chains, 2u);
  const Tensor x = random_tensor(DType::kF32, {2, 3, 9, 10}, -3, 3, 7);
  const Tensor want = reference.run({{"x", x}}).at(0);
  const Tensor got = runner.run({{"x", x}}).at(0);
  EXPECT_LE(testing::relative_l2(got, want), 1e-5);
  redwood::testing::expect_close(got, want, 1e-4, 1e-5);
}

}  // namespace
}  // namespace redwood::cuda
