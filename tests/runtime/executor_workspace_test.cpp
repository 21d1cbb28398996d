// The executor's memory plan (runtime/executor.hpp): intermediates in one workspace per input-shape
// signature must give exactly the results of one heap allocation per tensor, on random graphs
// (with views such as Reshape, multi-output Split, graph outputs that view intermediates) and on
// the shipped models; the workspace is allocated once per signature; concurrent runs are safe.

#include "runtime/executor.hpp"
#include "core/onnx/onnx_import.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <thread>

namespace redwood {
namespace {

using testing::make_node;
using testing::random_tensor;

void expect_identical(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE("output " + std::to_string(i));
    testing::expect_close(a[i], b[i], 0.0, 0.0);
  }
}

Tensor int64s(std::vector<std::int64_t> v) {
  return Tensor::from_vector<std::int64_t>({static_cast<std::int64_t>(v.size())}, v);
}

/// A random DAG over [1, C, S, S] float values: unary ops, binary ops on two earlier values,
/// Reshape round trips (views), Transpose, Softmax, Concat + Split (two outputs). A few values,
/// among them views of intermediates, are graph outputs.
std::shared_ptr<Graph> random_graph(std::uint32_t seed, std::int64_t c, std::int64_t s) {
  std::mt19937 rng(seed);
  auto g = std::make_shared<Graph>();
  g->opset = 17;
  g->name = "random" + std::to_string(seed);
  g->inputs.push_back(ValueInfo{"x", DType::kF32, 0, false, {}});
  g->initializers["flat"] = int64s({1, c * s * s});
  g->initializers["back"] = int64s({1, c, s, s});
  g->initializers["halves"] = int64s({c, c});
  std::vector<std::string> values{"x"};
  int next = 0;
  auto fresh = [&] { return "v" + std::to_string(next++); };
  auto pick = [&] { return values[rng() % values.size()]; };
  auto add = [&](const std::string& op, std::vector<std::string> ins, std::vector<std::string> outs,
                 std::map<std::string, AttributeValue> attrs = {}) {
    Node n;
    n.name = "n" + std::to_string(g->nodes.size());
    n.op_type = op;
    n.inputs = std::move(ins);
    n.outputs = outs;
    n.attributes = std::move(attrs);
    g->nodes.push_back(std::move(n));
  };
  const int nodes = 6 + static_cast<int>(rng() % 24);
  for (int i = 0; i < nodes; ++i) {
    const std::string a = pick(), b = pick();
    switch (rng() % 7) {
      case 0: { const auto y = fresh(); add(rng() % 2 ? "Relu" : "Sigmoid", {a}, {y}); values.push_back(y); break; }
      case 1: { const auto y = fresh(); add(rng() % 2 ? "Add" : "Mul", {a, b}, {y}); values.push_back(y); break; }
      case 2: {  // a view of a view: both alias the buffer of `a`
        const auto f = fresh(), y = fresh();
        add("Reshape", {a, "flat"}, {f});
        add("Reshape", {f, "back"}, {y});
        values.push_back(y);
        break;
      }
      case 3: { const auto y = fresh(); add("Transpose", {a}, {y}, {{"perm", std::vector<std::int64_t>{0, 1, 3, 2}}}); values.push_back(y); break; }
      case 4: { const auto y = fresh(); add("Softmax", {a}, {y}, {{"axis", std::int64_t{-1}}}); values.push_back(y); break; }
      case 5: {
        const auto cat = fresh(), p = fresh(), q = fresh();
        add("Concat", {a, b}, {cat}, {{"axis", std::int64_t{1}}});
        add("Split", {cat, "halves"}, {p, q}, {{"axis", std::int64_t{1}}});
        values.push_back(p);
        values.push_back(q);
        break;
      }
      default: { const auto y = fresh(); add("Identity", {a}, {y}); values.push_back(y); break; }
    }
  }
  // Outputs: the last value, one random earlier value, and sometimes a view of an intermediate.
  std::vector<std::string> outs{values.back(), values[1 + rng() % (values.size() - 1)]};
  if (rng() % 2) {
    const auto v = fresh();
    add("Reshape", {values[1 + rng() % (values.size() - 1)], "flat"}, {v});
    outs.push_back(v);
  }
  std::sort(outs.begin(), outs.end());
  outs.erase(std::unique(outs.begin(), outs.end()), outs.end());
  for (const auto& o : outs) g->outputs.push_back(ValueInfo{o, DType::kF32, 0, false, {}});
  return g;
}

ExecutorOptions options(bool plan, bool reference) {
  ExecutorOptions o;
  o.plan_memory = plan;
  o.optimize = !reference;
  o.reference_only = reference;
  return o;
}

TEST(ExecutorWorkspace, RandomGraphsGiveIdenticalResultsWithAndWithoutThePlan) {
  for (std::uint32_t seed = 1; seed <= 40; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const auto g = random_graph(seed, 4, 6);
    for (bool reference : {true, false}) {
      Executor heap(g, options(false, reference)), planned(g, options(true, reference));
      for (int run = 0; run < 3; ++run) {  // record, then two planned runs on one workspace
        const std::map<std::string, Tensor> in{{"x", random_tensor(DType::kF32, {1, 4, 6, 6}, -2, 2, seed * 10 + run)}};
        expect_identical(planned.run(in), heap.run(in));
        if (HasFailure()) return;
      }
      EXPECT_EQ(heap.workspace_allocations(), 0u);
      EXPECT_LE(planned.workspace_allocations(), 1u);
      const WorkspaceStats st = planned.workspace_stats();
      EXPECT_GE(st.workspace_bytes, st.lower_bound);
      EXPECT_EQ(planned.workspace_allocations(), st.workspace_bytes != 0 ? 1u : 0u);
    }
  }
}

TEST(ExecutorWorkspace, GraphOutputsNeverViewTheWorkspace) {
  // y = Relu(x); out = Reshape(y): `out` views y's buffer, so y must stay on the heap, and the
  // result must survive later runs that reuse the workspace.
  auto g = std::make_shared<Graph>();
  g->opset = 17;
  g->inputs.push_back(ValueInfo{"x", DType::kF32, 0, false, {}});
  g->initializers["flat"] = int64s({1, 16});
  const Node relu = make_node("relu", "Relu", {"x"}, {"y"});
  const Node sig = make_node("sig", "Sigmoid", {"x"}, {"s"});
  const Node add = make_node("add", "Add", {"y", "s"}, {"z"});
  const Node reshape = make_node("reshape", "Reshape", {"y", "flat"}, {"out"});
  g->nodes = {relu, sig, add, reshape};
  g->outputs = {ValueInfo{"out", DType::kF32, 0, false, {}}, ValueInfo{"z", DType::kF32, 0, false, {}}};
  Executor planned(g, options(true, true)), heap(g, options(false, true));
  const std::map<std::string, Tensor> a{{"x", random_tensor(DType::kF32, {1, 1, 4, 4}, -1, 1, 1)}};
  const std::map<std::string, Tensor> b{{"x", random_tensor(DType::kF32, {1, 1, 4, 4}, -1, 1, 2)}};
  planned.run(a);                                   // records
  const std::vector<Tensor> kept = planned.run(a);  // planned
  planned.run(b);                                   // reuses the workspace
  expect_identical(kept, heap.run(a));
  const WorkspaceStats st = planned.workspace_stats();
  EXPECT_EQ(st.heap_tensors, 2u);     // y (viewed by out) and z
  EXPECT_EQ(st.planned_tensors, 1u);  // s
}

TEST(ExecutorWorkspace, OneWorkspacePerShapeSignature) {
  const auto g = random_graph(7, 4, 6);
  Executor e(g, options(true, true));
  auto input = [](std::int64_t s) {
    return std::map<std::string, Tensor>{{"x", random_tensor(DType::kF32, {1, 4, s, s}, -1, 1, 3)}};
  };
  // Spatial size 6 and 8: two signatures; each records once, then allocates one workspace.
  const auto g8 = random_graph(7, 4, 8);  // same structure, reshape targets for 8x8
  Executor e8(g8, options(true, true));
  for (int i = 0; i < 5; ++i) e.run(input(6));
  EXPECT_EQ(e.planned_signatures(), 1u);
  EXPECT_EQ(e.workspace_allocations(), 1u);
  for (int i = 0; i < 5; ++i) e8.run(input(8));
  EXPECT_EQ(e8.workspace_allocations(), 1u);
}

// Relu -> Sigmoid -> Relu over a symbolic input: every input shape is its own signature.
std::shared_ptr<Graph> relu_sigmoid_relu() {
  auto g = std::make_shared<Graph>();
  g->opset = 17;
  g->inputs.push_back(ValueInfo{"x", DType::kF32, 0, false, {}});
  g->nodes = {make_node("a", "Relu", {"x"}, {"p"}), make_node("b", "Sigmoid", {"p"}, {"q"}),
              make_node("c", "Relu", {"q"}, {"y"})};
  g->outputs = {ValueInfo{"y", DType::kF32, 0, false, {}}};
  return g;
}

TEST(ExecutorWorkspace, DynamicShapesPlanOncePerSignature) {
  const auto g = relu_sigmoid_relu();
  Executor e(g, options(true, true)), heap(g, options(false, true));
  for (int round = 0; round < 3; ++round) {
    for (std::int64_t n : {3, 5, 9}) {
      const std::map<std::string, Tensor> in{{"x", random_tensor(DType::kF32, {n, 7}, -1, 1, static_cast<std::uint32_t>(n))}};
      expect_identical(e.run(in), heap.run(in));
    }
  }
  EXPECT_EQ(e.planned_signatures(), 3u);
  EXPECT_EQ(e.workspace_allocations(), 3u);
  const WorkspaceStats st = e.workspace_stats();
  EXPECT_EQ(st.planned_tensors, 2u);  // p and q share nothing (live together at b), y is returned
}

// Plans are kept for at most max_plans signatures: an endless run of new input shapes holds that
// many, the least recently used going first, and a shape that comes back is planned again and
// still runs right.
TEST(ExecutorWorkspace, PlansAreBoundedAndTheLeastRecentlyUsedGoesFirst) {
  const auto g = relu_sigmoid_relu();
  ExecutorOptions bounded = options(true, true);
  bounded.max_plans = 2;
  Executor e(g, bounded), heap(g, options(false, true));
  auto run = [&](std::int64_t n) {
    const std::map<std::string, Tensor> in{{"x", random_tensor(DType::kF32, {n, 7}, -1, 1, static_cast<std::uint32_t>(n))}};
    expect_identical(e.run(in), heap.run(in));
  };
  for (std::int64_t n = 1; n <= 20; ++n) run(n);
  EXPECT_EQ(e.planned_signatures(), 2u);
  // Each first run records its plan, and the plan's first workspace comes with it.
  EXPECT_EQ(e.workspace_allocations(), 20u);
  run(20);  // the most recent: its plan and workspace are kept and reused
  EXPECT_EQ(e.workspace_allocations(), 20u);
  run(18);  // evicted long ago: recorded again, with a workspace
  EXPECT_EQ(e.workspace_allocations(), 21u);
  EXPECT_EQ(e.planned_signatures(), 2u);
}

TEST(ExecutorWorkspace, ConcurrentRunsEachGetTheirOwnWorkspace) {
  const auto g = random_graph(11, 4, 6);
  Executor planned(g, options(true, true)), heap(g, options(false, true));
  const std::map<std::string, Tensor> warm{{"x", random_tensor(DType::kF32, {1, 4, 6, 6}, -1, 1, 99)}};
  planned.run(warm);
  std::vector<std::map<std::string, Tensor>> inputs;
  std::vector<std::vector<Tensor>> expected;
  for (std::uint32_t t = 0; t < 4; ++t) {
    inputs.push_back({{"x", random_tensor(DType::kF32, {1, 4, 6, 6}, -1, 1, 100 + t)}});
    expected.push_back(heap.run(inputs.back()));
  }
  std::vector<std::vector<std::vector<Tensor>>> got(4);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) got[t].push_back(planned.run(inputs[t]));
    });
  }
  for (auto& th : threads) th.join();
  for (std::size_t t = 0; t < 4; ++t) {
    for (const auto& r : got[t]) expect_identical(r, expected[t]);
  }
  EXPECT_GE(planned.workspace_allocations(), 1u);
  EXPECT_LE(planned.workspace_allocations(), 4u);  // at most one per concurrent run
}

TEST(ExecutorWorkspace, ShippedModelsGiveIdenticalResultsWithAndWithoutThePlan) {
  struct Model { const char* file; Shape shape; };
  // Small inputs where the model allows them (the planner's figures at full size are in
  // docs/memory.md, from `redwood plan --memory`).
  const Model models[] = {{"ch_PP-OCRv4_det_infer.onnx", {1, 3, 64, 96}},
                          {"ch_PP-OCRv4_rec_infer.onnx", {1, 3, 48, 64}},
                          {"ch_ppocr_mobile_v2.0_cls_infer.onnx", {1, 3, 48, 192}},
                          {"face_detection_front_128x128_barracuda.onnx", {1, 128, 128, 3}}};
  const auto dir = testing::assets_dir() / "models";
  for (const auto& m : models) {
    SCOPED_TRACE(m.file);
    if (!std::filesystem::exists(dir / m.file)) GTEST_SKIP() << (dir / m.file) << " is missing: run scripts/setup.sh";
    const auto g = load_onnx(dir / m.file);
    const std::map<std::string, Tensor> a{{g->inputs[0].name, random_tensor(DType::kF32, m.shape, 0, 1, 5)}};
    const std::map<std::string, Tensor> b{{g->inputs[0].name, random_tensor(DType::kF32, m.shape, 0, 1, 6)}};
    // Reference kernels (node by node: every intermediate goes through the plan), and the
    // default providers (oneDNN regions keep their members' buffers to themselves).
    for (bool reference : {true, false}) {
      SCOPED_TRACE(reference ? "reference" : "default providers");
      Executor heap(g, options(false, reference)), planned(g, options(true, reference));
      planned.run(b);  // records
      expect_identical(planned.run(a), heap.run(a));
      expect_identical(planned.run(b), heap.run(b));
      const WorkspaceStats st = planned.workspace_stats();
      EXPECT_EQ(planned.workspace_allocations(), st.workspace_bytes != 0 ? 1u : 0u);
      EXPECT_GE(st.workspace_bytes, st.lower_bound);
      if (reference) {
        EXPECT_GT(st.planned_tensors, 10u);
      }
    }
  }
}

}  // namespace
}  // namespace redwood
