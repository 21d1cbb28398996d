// main() of redwood_gpu_tests: GoogleTest's, plus `--redwood-gpu-probe`, which ctest's discovery
// asks once per run (cmake/RedwoodGpuTests.cmake): exit 0 when a CUDA device is usable, else 1
// with the reason the tests would skip with. The runners' plan cache goes to a fresh folder, so
// that a test that expects its kernels to be timed is not answered by a file an earlier run left
// (and the tests leave nothing in the user's cache).

#include "gpu_test_support.hpp"
#include "support/onnx_builder.hpp"

#include <cstdlib>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--redwood-gpu-probe") == 0) {
      const std::string why = redwood::cuda::testing::gpu_unavailable();
      std::printf("%s\n", why.empty() ? "a CUDA device is usable" : why.c_str());
      return why.empty() ? 0 : 1;
    }
  }
  setenv("REDWOOD_CACHE_DIR", redwood::testing::temp_dir("gpu-tests-cache").c_str(), 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
