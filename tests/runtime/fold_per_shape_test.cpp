// Per-shape folding (runtime/executor.hpp): Shape chains over symbolic dimensions run on the first
// run of each input-shape signature and are reused on later runs of it, with results identical
// to running every node every time.

#include "runtime/executor.hpp"
#include "core/onnx/onnx_import.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

namespace redwood {
namespace {

using testing::make_node;
using testing::random_tensor;

Tensor int64s(std::vector<std::int64_t> v) {
  return Tensor::from_vector<std::int64_t>({static_cast<std::int64_t>(v.size())}, v);
}

// y = Reshape(Relu(x), Concat(Unsqueeze(Gather(Shape(Relu(x)), 0)), [-1])): flattens all but
// the first dimension, whatever the input's shape, the way exported models build Reshape targets.
std::shared_ptr<Graph> flatten_by_shape_chain() {
  auto g = std::make_shared<Graph>();
  g->opset = 13;
  g->inputs.push_back(ValueInfo{"x", DType::kF32, 0, false, {}});
  g->initializers["zero"] = Tensor::scalar<std::int64_t>(0);
  g->initializers["axes"] = int64s({0});
  g->initializers["rest"] = int64s({-1});
  Node concat = make_node("concat", "Concat", {"n1", "rest"}, {"target"});
  concat.attributes["axis"] = std::int64_t{0};
  g->nodes = {make_node("relu", "Relu", {"x"}, {"r"}),
              make_node("shape", "Shape", {"r"}, {"s"}),
              make_node("gather", "Gather", {"s", "zero"}, {"n"}),
              make_node("unsqueeze", "Unsqueeze", {"n", "axes"}, {"n1"}),
              concat,
              make_node("reshape", "Reshape", {"r", "target"}, {"y"})};
  g->outputs = {ValueInfo{"y", DType::kF32, 0, false, {}}};
  return g;
}

ExecutorOptions options(bool fold, bool reference) {
  ExecutorOptions o;
  o.optimize = true;
  o.reference_only = reference;
  o.fold_shapes = fold;
  return o;
}

std::vector<std::string> op_types(const Executor& e) {
  std::vector<std::string> ops;
  for (std::size_t i : e.shape_folded_nodes()) ops.push_back(e.graph().nodes[i].op_type);
  return ops;
}

bool ran(const Executor& e, const std::string& op) {
  const auto& t = e.last_timings();
  return std::any_of(t.begin(), t.end(), [&](const NodeTiming& n) { return n.op_type == op; });
}

TEST(FoldPerShape, FindsTheShapeChainAndNothingElse) {
  Executor e(flatten_by_shape_chain(), options(true, true));
  EXPECT_EQ(op_types(e), (std::vector<std::string>{"Shape", "Gather", "Unsqueeze", "Concat"}));
  Executor off(flatten_by_shape_chain(), options(false, true));
  EXPECT_TRUE(off.shape_folded_nodes().empty());
  ExecutorOptions unoptimized;
  unoptimized.optimize = false;
  Executor raw(flatten_by_shape_chain(), unoptimized);
  EXPECT_TRUE(raw.shape_folded_nodes().empty()) << "folding is part of the optimizer";
}

TEST(FoldPerShape, RunsTheChainOncePerSignatureWithIdenticalResults) {
  for (bool reference : {true, false}) {
    SCOPED_TRACE(reference ? "reference kernels" : "default providers");
    Executor folded(flatten_by_shape_chain(), options(true, reference));
    Executor every_time(flatten_by_shape_chain(), options(false, reference));
    folded.set_profiling(true);
    const Shape shapes[] = {{2, 4, 3}, {5, 4, 7}, {2, 4, 3}, {1, 6}, {5, 4, 7}};
    std::vector<bool> seen_before = {false, false, true, false, true};
    for (std::size_t k = 0; k < std::size(shapes); ++k) {
      SCOPED_TRACE("run " + std::to_string(k));
      const std::map<std::string, Tensor> in{
          {"x", random_tensor(DType::kF32, shapes[k], -1, 1, static_cast<std::uint32_t>(k))}};
      const std::vector<Tensor> got = folded.run(in);
      const std::vector<Tensor> want = every_time.run(in);
      ASSERT_EQ(got.size(), 1u);
      EXPECT_EQ(got[0].shape(), (Shape{shapes[k][0], shape_numel(shapes[k]) / shapes[k][0]}));
      testing::expect_close(got[0], want[0], 0.0, 0.0);
      // The chain runs on a signature's first run only; the Reshape it feeds runs every time.
      EXPECT_EQ(ran(folded, "Shape"), !seen_before[k]);
      EXPECT_EQ(ran(folded, "Concat"), !seen_before[k]);
      EXPECT_TRUE(ran(folded, "Reshape"));
    }
  }
}

TEST(FoldPerShape, RecognitionModelFoldsItsShapeChainsPerWidth) {
  const auto file = testing::assets_dir() / "models" / "ch_PP-OCRv4_rec_infer.onnx";
  if (!std::filesystem::exists(file)) GTEST_SKIP() << file << " is missing: run scripts/setup.sh";
  const auto g = load_onnx(file);
  Executor folded(g, options(true, false)), every_time(g, options(false, false));
  EXPECT_GE(folded.shape_folded_nodes().size(), 4u) << "rec builds Reshape targets from Shape chains";
  for (std::int64_t width : {64, 96, 64}) {
    SCOPED_TRACE("width " + std::to_string(width));
    const std::map<std::string, Tensor> in{
        {g->inputs[0].name, random_tensor(DType::kF32, {1, 3, 48, width}, 0, 1, static_cast<std::uint32_t>(width))}};
    const auto got = folded.run(in);
    const auto want = every_time.run(in);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) testing::expect_close(got[i], want[i], 0.0, 0.0);
  }
}

}  // namespace
}  // namespace redwood
