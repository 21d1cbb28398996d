// oneDNN's OpenMP team size per thread (backends/cpu/onednn/onednn_common.hpp, apply_threads): the
// count HostThreads sets for the thread comes first, and outside one the thread goes back to its
// own; a CPU runner given host threads runs its kernels on that many. (OpenMP comes with the CPU
// backend's link; omp.h is the compiler's own.)

#include "backends/cpu/onednn/onednn_common.hpp"
#include "core/host_threads.hpp"
#include "core/model_runner.hpp"
#include "core/onnx/onnx_import.hpp"
#include "runtime/cpu_runner.hpp"
#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>
#include <omp.h>

#include <future>
#include <thread>

namespace redwood {
namespace {

TEST(OneDnnThreads, AKernelsTeamIsTheCountHostThreadsSetThenTheThreadsOwnAgain) {
  std::thread([] {  // a thread of its own: OpenMP's count is per thread
    cpu::onednn::apply_threads();
    const int own = omp_get_max_threads();
    HostThreads(1).run([] {
      cpu::onednn::apply_threads();
      EXPECT_EQ(omp_get_max_threads(), 1);
    });
    HostThreads(3).run([] {
      cpu::onednn::apply_threads();
      EXPECT_EQ(omp_get_max_threads(), 3);
    });
    cpu::onednn::apply_threads();
    EXPECT_EQ(omp_get_max_threads(), own);
  }).join();
}

// x [1,4,8,8] -> Conv (oneDNN) -> y.
std::shared_ptr<const Graph> conv_model() {
  const auto dir = testing::temp_dir("onednn_threads");
  testing::OnnxBuilder b(13);
  b.input("x", onnx::TensorProto::FLOAT, {1, 4, 8, 8});
  b.initializer("w", testing::random_tensor(DType::kF32, {8, 4, 3, 3}, -0.5, 0.5, 1));
  auto& c = b.node("Conv", {"x", "w"}, {"y"}, "conv");
  testing::OnnxBuilder::set_attr(c, "pads", std::vector<std::int64_t>{1, 1, 1, 1});
  b.output("y", onnx::TensorProto::FLOAT, {1, 8, 8, 8});
  b.save(dir / "conv.onnx");
  return load_onnx(dir / "conv.onnx");
}

// The OpenMP count on the runner's worker after its batch: the one its convolution ran with
// (a batch completes on that thread).
int team_after_a_batch(ModelRunner& runner) {
  InferBatch batch;
  batch.inputs.push_back({testing::random_tensor(DType::kF32, {1, 4, 8, 8}, -1, 1, 2)});
  std::promise<int> team;
  runner.submit(std::move(batch), [&](InferResult& r) {
    EXPECT_EQ(r.error, nullptr);
    team.set_value(omp_get_max_threads());
  });
  return team.get_future().get();
}

TEST(OneDnnThreads, ACpuRunnerGivenHostThreadsRunsItsKernelsOnThatMany) {
  const auto graph = conv_model();
  auto all = make_cpu_runner(graph, RunnerConfig{});
  const int process = team_after_a_batch(*all);
  if (process < 2) GTEST_SKIP() << "OpenMP runs one thread here (one core, or OMP_NUM_THREADS=1): one is no limit";
  RunnerConfig one;
  one.host_threads = 1;
  auto limited = make_cpu_runner(graph, one);
  EXPECT_EQ(team_after_a_batch(*limited), 1);
  EXPECT_NE(limited->description().find("1 thread(s)"), std::string::npos) << limited->description();
  EXPECT_EQ(all->description().find("thread"), std::string::npos) << all->description();
  EXPECT_EQ(team_after_a_batch(*all), process);
}

}  // namespace
}  // namespace redwood
