// The CUDA device's profile, registered below as the "cuda" profiler. Each figure is what a
// Redwood run sees:
//
//   h2d/d2h_pinned   64 MiB cudaMemcpy between the device and cudaHostAlloc'd memory, wall time
//                    around the synchronous call (what the waiting host thread sees), median of 5
//   h2d/d2h_pageable the same from and to ordinary (new[]) memory, which the driver stages
//   copy_latency_ms  a 4 KiB pinned host-to-device cudaMemcpy, wall time, median of 51
//   memory_gbps      a device-to-device cudaMemcpyAsync of up to 256 MiB, timed by events; bytes
//                    read plus bytes written per second (twice the copy's size), median of 5
//   launch_ms        per empty kernel, 256 launched back to back on one stream and timed by
//                    events: what a kernel adds to a stream of kernels, median of 9
//   graph_launch_ms  the same 256 kernels captured in a CUDA graph and replayed, per kernel: what a
//                    node of Redwood's captured subgraphs adds
//   peak_gflops      fp32: independent FMA chains in every thread of a full grid; fp16, bf16 and
//                    tf32: WMMA (mma.sync) loops on register-resident fragments with fp32
//                    accumulation, so no memory traffic; each scaled to run 2 ms or more, median of
//                    5. These are what mma.sync kernels reach; Hopper's wgmma (sm_90a, only in
//                    rw.ConvNhwc's wgmma tiles) reaches more.

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/device.hpp"
#include "backends/cuda/device_probe.hpp"
#include "backends/cuda/device_profiler.hpp"
#include "backends/cuda/stream.hpp"
#include "core/error.hpp"
#include "runtime/median_time.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <memory>
#include <vector>

namespace redwood::cuda {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr int kLaunches = 256;       // kernels per launch-cost batch
constexpr int kFmaChains = 8;        // independent FMA chains per thread: enough to hide the latency
constexpr int kAccumulators = 4;     // independent MMA accumulators per warp, likewise
constexpr double kMinKernelMs = 2;   // a peak kernel runs at least this long (clocks up, launch hidden)
const std::string kLaunchMethod = "launch: empty kernels back to back on a stream";

__global__ void empty_kernel() {}

// `sink` is written only when the sum is -1, which it never is: the chains stay live, the store
// never happens.
__global__ void fma_chains(float* sink, int iterations) {
  float x[kFmaChains];
  const float a = 0.999f, b = 1e-3f * static_cast<float>(threadIdx.x);
#pragma unroll
  for (int c = 0; c < kFmaChains; ++c) x[c] = static_cast<float>(c);
#pragma unroll 16
  for (int i = 0; i < iterations; ++i) {
#pragma unroll
    for (int c = 0; c < kFmaChains; ++c) x[c] = fmaf(x[c], a, b);
  }
  float s = 0;
#pragma unroll
  for (int c = 0; c < kFmaChains; ++c) s += x[c];
  if (s == -1.0f) sink[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

namespace wmma = nvcuda::wmma;

template <typename In>
struct FillValue;
template <>
struct FillValue<__half> {
  __device__ static __half get() { return __float2half(0.01f); }
};
template <>
struct FillValue<__nv_bfloat16> {
  __device__ static __nv_bfloat16 get() { return __float2bfloat16(0.01f); }
};
template <>
struct FillValue<wmma::precision::tf32> {
  __device__ static float get() { return wmma::__float_to_tf32(0.01f); }
};

// One warp multiplies the same two fragments into kAccumulators accumulators, `iterations` times.
template <typename In, int M, int N, int K>
__global__ void mma_loop(float* sink, int iterations) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  wmma::fragment<wmma::matrix_a, M, N, K, In, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, M, N, K, In, wmma::col_major> b;
  wmma::fragment<wmma::accumulator, M, N, K, float> acc[kAccumulators];
  wmma::fill_fragment(a, FillValue<In>::get());
  wmma::fill_fragment(b, FillValue<In>::get());
#pragma unroll
  for (int c = 0; c < kAccumulators; ++c) wmma::fill_fragment(acc[c], 0.0f);
  for (int i = 0; i < iterations; ++i) {
#pragma unroll
    for (int c = 0; c < kAccumulators; ++c) wmma::mma_sync(acc[c], a, b, acc[c]);
  }
  float s = 0;
#pragma unroll
  for (int c = 0; c < kAccumulators; ++c) {
    for (int e = 0; e < acc[c].num_elements; ++e) s += acc[c].x[e];
  }
  if (s == -1.0f) sink[blockIdx.x * blockDim.x + threadIdx.x] = s;
#endif
}

struct DeviceFree {
  void operator()(void* p) const { RW_CUDA_WARN(cudaFree(p)); }
};
struct HostFree {
  void operator()(void* p) const { RW_CUDA_WARN(cudaFreeHost(p)); }
};
using DevicePtr = std::unique_ptr<char, DeviceFree>;
using PinnedPtr = std::unique_ptr<char, HostFree>;

DevicePtr device_alloc(std::size_t bytes) {
  void* p = nullptr;
  RW_CUDA_CHECK(cudaMalloc(&p, bytes));
  return DevicePtr(static_cast<char*>(p));
}

PinnedPtr pinned_alloc(std::size_t bytes) {
  void* p = nullptr;
  RW_CUDA_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocDefault));
  return PinnedPtr(static_cast<char*>(p));
}

/// Makes GPU `index` current for one scope.
class CurrentDevice {
 public:
  explicit CurrentDevice(int index) {
    RW_CUDA_CHECK(cudaGetDevice(&previous_));
    RW_CUDA_CHECK(cudaSetDevice(index));
  }
  ~CurrentDevice() { RW_CUDA_WARN(cudaSetDevice(previous_)); }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

 private:
  int previous_ = 0;
};

/// Median event time of `reps` runs of `work` on `stream`, in ms.
template <typename Work>
double event_median_ms(cudaStream_t stream, int reps, Work&& work) {
  Event start(true), stop(true);
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    start.record(stream);
    work();
    stop.record(stream);
    stop.synchronize();
    times.push_back(stop.elapsed_ms_since(start));
  }
  return runtime::median(std::move(times));
}

/// GFLOPS of a kernel doing `flops_per_iteration` per loop iteration: the iterations are
/// multiplied by 4 until one launch takes kMinKernelMs, then the median of five is taken.
template <typename Launch>
double peak_gflops(cudaStream_t stream, double flops_per_iteration, Launch&& launch) {
  int iterations = 64;
  auto once = [&] {
    return event_median_ms(stream, 1, [&] {
      launch(iterations);
      RW_CUDA_CHECK_LAUNCH("device profile");
    });
  };
  once();  // loads the module, wakes the clocks
  while (once() < kMinKernelMs && iterations < (1 << 24)) iterations *= 4;
  const double ms = event_median_ms(stream, 5, [&] {
    launch(iterations);
    RW_CUDA_CHECK_LAUNCH("device profile");
  });
  return flops_per_iteration * iterations / (ms * 1e6);
}

const DeviceInfo& find_device(int index) {
  static const ProbeResult& probe = cuda_devices();
  RW_EXPECTS(!probe.devices.empty(), Unsupported, "cuda:{}: no usable CUDA device ({})", index, probe.error);
  for (const DeviceInfo& d : probe.devices) {
    if (d.index == index) return d;
  }
  throw InvalidArgument(fmt::format("cuda:{}: this machine has {} usable CUDA device(s)", index, probe.devices.size()));
}

void measure_copies(runtime::DeviceProfile& p, const Stream& stream) {
  const std::size_t bytes = 64 * kMiB;
  const DevicePtr device = device_alloc(bytes);
  const PinnedPtr pinned = pinned_alloc(bytes);
  const std::unique_ptr<char[]> pageable(new char[bytes]);
  std::memset(pinned.get(), 1, bytes);
  std::memset(pageable.get(), 1, bytes);  // touched: no page faults inside the timed copies
  auto gbps = [&](void* dst, const void* src, cudaMemcpyKind kind) {
    RW_CUDA_CHECK(cudaMemcpy(dst, src, bytes, kind));  // warm-up
    return bytes / (runtime::median_ms(5, [&] { RW_CUDA_CHECK(cudaMemcpy(dst, src, bytes, kind)); }) * 1e6);
  };
  p.h2d_pinned_gbps = gbps(device.get(), pinned.get(), cudaMemcpyHostToDevice);
  p.d2h_pinned_gbps = gbps(pinned.get(), device.get(), cudaMemcpyDeviceToHost);
  p.h2d_pageable_gbps = gbps(device.get(), pageable.get(), cudaMemcpyHostToDevice);
  p.d2h_pageable_gbps = gbps(pageable.get(), device.get(), cudaMemcpyDeviceToHost);
  p.copy_latency_ms = runtime::median_ms(51, [&] {
    RW_CUDA_CHECK(cudaMemcpy(device.get(), pinned.get(), 4096, cudaMemcpyHostToDevice));
  });

  // Device to device: 256 MiB each way where a quarter of the free memory allows it.
  std::size_t free = 0, total = 0;
  RW_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  const std::size_t d2d = std::max(kMiB, std::min(256 * kMiB, free / 8 / kMiB * kMiB));
  const DevicePtr from = device_alloc(d2d), to = device_alloc(d2d);
  RW_CUDA_CHECK(cudaMemsetAsync(from.get(), 1, d2d, stream.get()));
  auto copy = [&] { RW_CUDA_CHECK(cudaMemcpyAsync(to.get(), from.get(), d2d, cudaMemcpyDeviceToDevice, stream.get())); };
  event_median_ms(stream.get(), 1, copy);  // warm-up
  p.memory_gbps = 2.0 * d2d / (event_median_ms(stream.get(), 5, copy) * 1e6);
}

void measure_launches(runtime::DeviceProfile& p, const Stream& stream) {
  auto launches = [&] {
    for (int i = 0; i < kLaunches; ++i) empty_kernel<<<1, 1, 0, stream.get()>>>();
    RW_CUDA_CHECK_LAUNCH("empty_kernel");
  };
  event_median_ms(stream.get(), 1, launches);  // warm-up
  p.launch_ms = event_median_ms(stream.get(), 9, launches) / kLaunches;

  cudaGraph_t graph = nullptr;
  RW_CUDA_CHECK(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < kLaunches; ++i) empty_kernel<<<1, 1, 0, stream.get()>>>();
  RW_CUDA_CHECK(cudaStreamEndCapture(stream.get(), &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
  RW_CUDA_WARN(cudaGraphDestroy(graph));
  RW_CUDA_CHECK(instantiated);
  const std::unique_ptr<CUgraphExec_st, void (*)(cudaGraphExec_t)> owned(
      exec, [](cudaGraphExec_t e) { RW_CUDA_WARN(cudaGraphExecDestroy(e)); });
  auto replay = [&] { RW_CUDA_CHECK(cudaGraphLaunch(exec, stream.get())); };
  event_median_ms(stream.get(), 1, replay);  // the first launch uploads the graph
  p.graph_launch_ms = event_median_ms(stream.get(), 9, replay) / kLaunches;
}

void measure_peaks(runtime::DeviceProfile& p, const DeviceInfo& d, const Stream& stream) {
  const int blocks = d.multiprocessors * 8, threads = 256;  // 2048 threads an SM: full occupancy
  const DevicePtr sink = device_alloc(std::size_t{4} * blocks * threads);
  float* out = reinterpret_cast<float*>(sink.get());
  const double threads_total = double(blocks) * threads;
  p.peak_gflops["fp32"] = peak_gflops(stream.get(), 2.0 * kFmaChains * threads_total, [&](int iterations) {
    fma_chains<<<blocks, threads, 0, stream.get()>>>(out, iterations);
  });
  if (d.compute_major < 8) {
    p.peak_method = "fp32: FMA chains (no tensor-core figures below compute capability 8.0); " + kLaunchMethod;
    return;
  }
  const double warps = threads_total / 32;
  auto mma = [&](const char* precision, auto kernel, int m, int n, int k) {
    p.peak_gflops[precision] = peak_gflops(stream.get(), 2.0 * m * n * k * kAccumulators * warps, [&](int iterations) {
      kernel<<<blocks, threads, 0, stream.get()>>>(out, iterations);
    });
  };
  mma("fp16", mma_loop<__half, 16, 16, 16>, 16, 16, 16);
  mma("bf16", mma_loop<__nv_bfloat16, 16, 16, 16>, 16, 16, 16);
  mma("tf32", mma_loop<wmma::precision::tf32, 16, 16, 8>, 16, 16, 8);
  p.peak_method = "fp32: FMA chains; fp16, bf16, tf32: WMMA (mma.sync) loops, fp32 accumulation; " + kLaunchMethod;
}

}  // namespace

std::string device_profile_key(int index) {
  const DeviceInfo& d = find_device(index);
  int driver = 0, runtime_version = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime_version);
  return fmt::format("cuda {}; sm_{}{}; {} SMs; {} MiB; driver {}; runtime {}", d.name, d.compute_major,
                     d.compute_minor, d.multiprocessors, d.total_memory / kMiB, driver, runtime_version);
}

runtime::DeviceProfile measure_device_profile(int index) {
  const DeviceInfo& d = find_device(index);
  const CurrentDevice current(index);
  const Stream stream;
  runtime::DeviceProfile p;
  p.name = d.name;
  p.cores = d.multiprocessors;
  p.isa = fmt::format("sm_{}{}", d.compute_major, d.compute_minor);
  measure_copies(p, stream);
  measure_launches(p, stream);
  measure_peaks(p, d, stream);
  return p;
}

namespace {
const bool registered = runtime::register_device_profiler("cuda", measure_device_profile, device_profile_key);
}  // namespace

}  // namespace redwood::cuda
