// redwood_context_floor: what a new process pays for the GPU before it can run anything, with
// nothing of Redwood in it. It loads the CUDA driver (cuInit), then makes the device's primary
// context as the CUDA runtime does on its first call (cudaFree(0)), and prints both in ms from
// main's start. scripts/plan_cache_device_run.sh runs it beside the launcher's cold and warm
// starts: a warm start's time to first inference cannot fall below this, whatever the caches keep.
//
//   redwood_context_floor            one line: "cuInit X ms, primary context Y ms, total Z ms"

#include <cuda.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>

namespace {

double ms_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

int main() {
  const auto start = std::chrono::steady_clock::now();
  const CUresult init = cuInit(0);
  const auto inited = std::chrono::steady_clock::now();
  if (init != CUDA_SUCCESS) {
    const char* what = nullptr;
    cuGetErrorString(init, &what);
    std::fprintf(stderr, "redwood_context_floor: cuInit failed: %s\n", what != nullptr ? what : "unknown error");
    return 1;
  }
  const cudaError_t made = cudaFree(nullptr);
  const auto ready = std::chrono::steady_clock::now();
  if (made != cudaSuccess) {
    std::fprintf(stderr, "redwood_context_floor: the primary context could not be made: %s\n", cudaGetErrorString(made));
    return 1;
  }
  std::printf("cuInit %.1f ms, primary context %.1f ms, total %.1f ms\n", ms_between(start, inited),
              ms_between(inited, ready), ms_between(start, ready));
  return 0;
}
