// Programmatic dependent launch (backends/cuda/kernels/pdl.cuh): captured into a CUDA graph, two
// kernels launched through launch_kernel keep a programmatic edge between them; and a long chain
// of dependent kernels over the same two buffers (each reads what the one before wrote and
// overwrites what the one before read: both hazards pdl_wait() guards) gives exact results, from
// the stream and from a graph. On a GPU before sm_90 the edge test skips saying why, and the chain
// must still be exact. A ProgrammaticLaunchScope that says no (CudaOptions::pdl off) leaves no
// programmatic edge in a capture.

#include "backends/cuda/device_tensor.hpp"
#include "backends/cuda/kernels/launchers.hpp"
#include "backends/cuda/kernels/pdl.cuh"
#include "gpu_test_support.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace redwood::cuda {
namespace {

using kernels::BinaryOp;

// The status names why it is off, and says "on" or "off" first.
TEST(ProgrammaticLaunch, StatusSaysWhetherAndWhy) {
  RW_SKIP_WITHOUT_GPU();
  const std::string status = kernels::programmatic_launch_status();
  if (kernels::programmatic_launch_enabled()) {
    EXPECT_EQ(status.rfind("on", 0), 0u) << status;
  } else {
    EXPECT_EQ(status.rfind("off: ", 0), 0u) << status;
  }
}

// Two launches (y = |-x|) captured into a graph on a stream of its own: the graph and stream for
// the caller to run and free.
struct CapturedPair {
  Tensor x = to_device(redwood::testing::random_tensor(DType::kF32, {1000}, -1, 1, 5));
  Tensor mid = device_empty(DType::kF32, {1000}), y = device_empty(DType::kF32, {1000});
  cudaStream_t stream = nullptr;
  cudaGraph_t graph = nullptr;

  CapturedPair() {
    EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    EXPECT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    try {
      kernels::launch_unary(kernels::UnaryOp::kNeg, x.data<float>(), mid.data<float>(), 1000, 0, 0, stream);
      kernels::launch_unary(kernels::UnaryOp::kAbs, mid.data<float>(), y.data<float>(), 1000, 0, 0, stream);
    } catch (...) {
      // A capture left open would refuse every later allocation and synchronization on this
      // thread, failing the tests after this one for this one's sake.
      cudaStreamEndCapture(stream, &graph);
      if (graph != nullptr) cudaGraphDestroy(graph);
      cudaStreamDestroy(stream);
      throw;
    }
    EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  }
  ~CapturedPair() {
    if (graph != nullptr) cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
  }
};

TEST(ProgrammaticLaunch, CaptureKeepsTheProgrammaticEdge) {
  RW_SKIP_WITHOUT_GPU();
  if (!kernels::programmatic_launch_enabled()) GTEST_SKIP() << kernels::programmatic_launch_status();
  CapturedPair pair;
  ASSERT_NE(pair.graph, nullptr);
  EXPECT_EQ(kernels::programmatic_edge_count(pair.graph), 1) << "the second launch depends programmatically on the first";
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, pair.graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, pair.stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(pair.stream), cudaSuccess);
  const Tensor got = to_host(pair.y), in = to_host(pair.x);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(got.data<float>()[i], std::fabs(in.data<float>()[i])) << i;
  cudaGraphExecDestroy(exec);
}

TEST(ProgrammaticLaunch, AScopeTurnsItOffForItsThread) {
  RW_SKIP_WITHOUT_GPU();
  const bool process = kernels::programmatic_launch_enabled();
  {
    const kernels::ProgrammaticLaunchScope off(false);
    EXPECT_FALSE(kernels::programmatic_launch_enabled());
    {
      const kernels::ProgrammaticLaunchScope on(true);  // the innermost scope wins, within the process's say
      EXPECT_EQ(kernels::programmatic_launch_enabled(), process);
    }
    EXPECT_FALSE(kernels::programmatic_launch_enabled());
    CapturedPair pair;
    ASSERT_NE(pair.graph, nullptr);
    EXPECT_EQ(kernels::programmatic_edge_count(pair.graph), 0);
  }
  EXPECT_EQ(kernels::programmatic_launch_enabled(), process);
}

// 2·kSteps kernels: b = a + one, a = b + one, ... over 2^20 elements; a kernel that wrote before
// its predecessor finished reading, or read before it finished writing, would lose a step.
TEST(ProgrammaticLaunch, DependentChainIsExactOnTheStreamAndInAGraph) {
  RW_SKIP_WITHOUT_GPU();
  constexpr long long n = 1 << 20;
  constexpr int kSteps = 100;
  kernels::Broadcast same;
  same.same_shape = true;
  Tensor ones_host = Tensor::empty(DType::kF32, {n});
  for (long long i = 0; i < n; ++i) ones_host.data<float>()[i] = 1.f;
  const Tensor ones = to_device(ones_host);
  Tensor a = device_empty(DType::kF32, {n}), b = device_empty(DType::kF32, {n});
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  auto chain = [&] {
    for (int s = 0; s < kSteps; ++s) {
      kernels::launch_binary(BinaryOp::kAdd, a.data<float>(), ones.data<float>(), b.data<float>(), n, same, stream);
      kernels::launch_binary(BinaryOp::kAdd, b.data<float>(), ones.data<float>(), a.data<float>(), n, same, stream);
    }
  };
  auto expect_all = [&](float want, const char* how) {
    const Tensor got = to_host(a, stream);
    long long wrong = 0;
    for (long long i = 0; i < n; ++i) wrong += got.data<float>()[i] != want ? 1 : 0;
    EXPECT_EQ(wrong, 0) << how << ": elements that are not " << want;
  };
  ASSERT_EQ(cudaMemsetAsync(a.data<float>(), 0, n * sizeof(float), stream), cudaSuccess);
  chain();
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  expect_all(2.f * kSteps, "on the stream");

  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  chain();
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  if (kernels::programmatic_launch_enabled()) {
    EXPECT_EQ(kernels::programmatic_edge_count(graph), 2 * kSteps - 1);
  } else {
    EXPECT_EQ(kernels::programmatic_edge_count(graph), 0);
  }
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int replay = 0; replay < 3; ++replay) ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  expect_all(2.f * kSteps * 4, "after three graph replays");
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace redwood::cuda
