// CudaOptions (backends/cuda/cuda_options.hpp), host only: the options by name as pipeline files
// and the command line give them, their errors, and where they reach (the plan cache key, the
// cost history's keys, the runner's pipeline, a kernel's candidates).

#include "backends/cuda/cuda_options.hpp"

#include "backends/cuda/graph_runner.hpp"
#include "backends/cuda/plan_cache.hpp"
#include "core/error.hpp"
#include "core/model_runner.hpp"
#include "runtime/cost_model.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

namespace redwood::cuda {
namespace {

TEST(CudaOptions, EveryOptionIsOnByDefaultAndNamedOnce) {
  const CudaOptions defaults;
  std::set<std::string> names;
  for (const CudaOptionField& f : cuda_option_fields()) {
    EXPECT_TRUE(defaults.*f.member) << f.name;
    EXPECT_TRUE(names.insert(f.name).second) << f.name << " twice";
    EXPECT_NE(std::string(f.doc), "") << f.name;
  }
  EXPECT_EQ(names.size(), 9u);
  EXPECT_EQ(describe(defaults), "defaults");
}

TEST(CudaOptions, SetByNameAndValue) {
  CudaOptions o;
  set_cuda_option(o, "wgmma=off");
  set_cuda_option(o, "pdl", "false");
  set_cuda_option(o, "tma", "0");
  set_cuda_option(o, "tma", "on");
  EXPECT_FALSE(o.wgmma);
  EXPECT_FALSE(o.pdl);
  EXPECT_TRUE(o.tma);
  EXPECT_EQ(describe(o), "wgmma=off pdl=off");
  const auto values = cuda_plan_option_values(o);
  EXPECT_EQ(values.at("wgmma"), "off");
  EXPECT_EQ(values.at("tma"), "on");
  EXPECT_EQ(values.count("blocking_completion"), 0u);  // a runner's wait, not its plan
  EXPECT_EQ(values.size(), cuda_option_fields().size() - 1);
  EXPECT_EQ(cuda_options_from({{"narrow_conv", "off"}, {"gap_split", "false"}}).narrow_conv, false);
}

TEST(CudaOptions, BadNamesAndValuesAreNamed) {
  CudaOptions o;
  EXPECT_THROWS_SAYING(set_cuda_option(o, "wgmmma=off"), InvalidArgument, "unknown CUDA option 'wgmmma'",
                       "known: wgmma, tma, narrow_conv");
  EXPECT_THROWS_SAYING(set_cuda_option(o, "pdl", "maybe"), InvalidArgument, "CUDA option 'pdl'", "'maybe'",
                       "on, off");
  EXPECT_THROWS_SAYING(set_cuda_option(o, "wgmma"), InvalidArgument, "expected name=value");
  EXPECT_EQ(o, CudaOptions{});  // nothing half-set
}

TEST(CudaOptions, TheDeviceRunnerChecksThemForPipelineFiles) {
  const auto it = device_runner_registry().find("cuda");
  ASSERT_NE(it, device_runner_registry().end());
  ASSERT_TRUE(it->second.check_options);
  it->second.check_options({{"wgmma", "off"}, {"pdl", "on"}});
  EXPECT_THROWS_SAYING(it->second.check_options({{"tmaa", "off"}}), InvalidArgument, "unknown CUDA option 'tmaa'");
}

// The cost history keys the options that change the plan; blocking_completion, how the host
// waits, is left out, so a run with it off is costed from the times measured with it on.
TEST(CudaOptions, TheCostHistoryKeysEveryOptionThatChangesThePlan) {
  const auto it = device_runner_registry().find("cuda");
  ASSERT_NE(it, device_runner_registry().end());
  ASSERT_TRUE(it->second.option_changes_costs);
  for (const CudaOptionField& f : cuda_option_fields()) {
    EXPECT_EQ(it->second.option_changes_costs(f.name), f.changes_plan) << f.name;
  }
  EXPECT_EQ(runtime::cost_precision(1, "fp16", {{"blocking_completion", "off"}, {"pdl", "off"}}), "fp16 pdl=off");
}

TEST(CudaOptions, EveryOptionThatChangesThePlanIsInThePlanCacheKey) {
  RunnerOptions r;
  r.precision = Precision::kFp16;
  const auto on = plan_cache_options(r);
  for (const CudaOptionField& f : cuda_option_fields()) {
    ASSERT_EQ(on.count(f.name), f.changes_plan ? 1u : 0u) << f.name;
    RunnerOptions off = r;
    off.cuda.*f.member = false;
    if (f.changes_plan) {
      EXPECT_NE(plan_cache_options(off), on) << f.name << " off gives the same key";
    } else {
      EXPECT_EQ(plan_cache_options(off), on) << f.name << " off, a plan of its own";
    }
  }
}

TEST(CudaOptions, TheRunnersPipelineFollowsTheRewrites) {
  RunnerOptions r;
  r.precision = Precision::kFp16;
  auto names = [](const RunnerOptions& o) {
    std::vector<std::string> out;
    for (const auto& p : runner_pipeline(o)) out.push_back(p.name);
    return out;
  };
  EXPECT_EQ(names(r).back(), "fuse_conv_shortcut");
  RunnerOptions off = r;
  off.cuda.fuse_conv_shortcuts = false;
  EXPECT_EQ(names(off).back(), "choose_gpu_layout");
  EXPECT_TRUE(space_to_depth_stem(r));
  off.cuda.space_to_depth_stem = false;
  EXPECT_FALSE(space_to_depth_stem(off));
}

}  // namespace
}  // namespace redwood::cuda
