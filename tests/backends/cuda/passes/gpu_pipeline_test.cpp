// passes::gpu_pipeline(), the optimizer pipeline of the CUDA graph runner: the regions-free
// default pipeline, then fuse_elementwise (the GPU has a kernel for the chain node, none for the
// CPU regions). Host only; the GPU kernel itself is tested in tests/backends/cuda.

#include "backends/cuda/passes/gpu_pipeline.hpp"
#include "runtime/executor.hpp"
#include "core/passes/pass_manager.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

namespace redwood {
namespace {

std::vector<std::string> names(const std::vector<passes::NamedPass>& pipeline) {
  std::vector<std::string> out;
  for (const auto& p : pipeline) out.push_back(p.name);
  return out;
}

TEST(GpuPipeline, IsTheRegionsFreePipelineThenElementwiseChains) {
  std::vector<std::string> want = names(passes::default_pipeline(false));
  want.push_back("fuse_elementwise");
  EXPECT_EQ(names(passes::gpu_pipeline()), want);
  for (const auto& name : names(passes::gpu_pipeline())) EXPECT_NE(name, "form_regions");
}

TEST(GpuPipeline, FusesAChainThatTheReferenceKernelsRunAsBefore) {
  auto g = std::make_shared<Graph>();
  g->name = "chain";
  g->opset = 17;
  ValueInfo x;
  x.name = "x";
  x.dtype = DType::kF32;
  x.has_shape = true;
  x.dims = {{2, ""}, {3, ""}, {4, ""}, {5, ""}};
  g->inputs = {x};
  g->value_info["x"] = x;
  ValueInfo y = x;
  y.name = "y";
  g->outputs = {y};
  g->initializers["scale"] = testing::random_tensor(DType::kF32, {3, 1, 1}, 0.5, 1.5, 3);
  g->initializers["shift"] = Tensor::scalar<float>(0.1f);
  g->nodes = {testing::make_node("mul", "Mul", {"x", "scale"}, {"a"}),
              testing::make_node("add", "Add", {"a", "shift"}, {"b"}),
              testing::make_node("sigmoid", "Sigmoid", {"b"}, {"y"})};

  auto fused = std::make_shared<Graph>(*g);
  const auto records = passes::optimize(*fused, passes::gpu_pipeline());
  ASSERT_EQ(fused->nodes.size(), 1u);
  EXPECT_EQ(fused->nodes[0].op_type, "rw.ElementwiseChain");
  EXPECT_EQ(records.back().pass, "fuse_elementwise");
  EXPECT_EQ(records.back().changes.size(), 1u);

  ExecutorOptions reference;
  reference.optimize = false;
  reference.reference_only = true;
  const std::map<std::string, Tensor> feeds{{"x", testing::random_tensor(DType::kF32, {2, 3, 4, 5}, -2, 2, 4)}};
  const Tensor want = Executor(g, reference).run(feeds).at(0);
  const Tensor got = Executor(fused, reference).run(feeds).at(0);
  testing::expect_close(got, want, 0, 0);  // the chain kernel repeats the same float operations
}

}  // namespace
}  // namespace redwood
