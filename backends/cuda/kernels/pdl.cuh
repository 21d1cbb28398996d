#pragma once
// Programmatic dependent launch (sm_90): a kernel may be launched while the kernel before it on
// the stream is still finishing, so its launch and prologue (index math, reading weights, which
// no kernel of a plan writes) overlap the predecessor's tail. The contract every Redwood kernel
// keeps, whether or not it was launched that way:
//
//   pdl_wait() before the first read of an activation (anything a kernel of the plan writes) and
//   before the first global write: it returns once every kernel this one depends on has finished
//   and its writes are visible. Without a programmatic launch it returns at once. Every thread
//   calls it, before any early return: a kernel whose blocks all left without waiting could
//   complete before its predecessor, and the next kernel, which waits only on this one, would
//   then overtake both.
//
// Because each kernel waits for its predecessor's completion before it completes, waiting on the
// previous kernel transitively waits on all earlier ones. The workspace planner reuses memory, so
// a global write before pdl_wait() could overwrite what the previous kernel still reads.
//
// pdl_launch_dependents() may be called once a block no longer needs the multiprocessor's
// resources to itself (a hint; the dependents still wait for this kernel's completion). The next
// kernel is launched once every block of this one has called it or exited, so its blocks take
// the multiprocessors this one's last wave leaves idle and wait there in pdl_wait().
//
// Launch with launch_kernel() (below), which asks for the programmatic launch when
// programmatic_launch_enabled() (pdl.cpp: on where the current GPU is sm_90 or newer and a probe
// finds that stream capture into a CUDA graph takes such launches, unless a
// ProgrammaticLaunchScope on the launching thread says no: the graph runner holds one for its
// CudaOptions::pdl).

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <utility>

namespace redwood::cuda::kernels {

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

/// Whether launch_kernel asks for programmatic dependent launch: the process's decision (made once,
/// on the first call; see programmatic_launch_status()), unless a ProgrammaticLaunchScope on this
/// thread turns it off.
bool programmatic_launch_enabled();

/// While alive, launches on this thread ask for programmatic launch only if `allowed` (and the
/// process's decision allows it); scopes nest, the innermost wins.
class ProgrammaticLaunchScope {
 public:
  explicit ProgrammaticLaunchScope(bool allowed);
  ~ProgrammaticLaunchScope();
  ProgrammaticLaunchScope(const ProgrammaticLaunchScope&) = delete;
  ProgrammaticLaunchScope& operator=(const ProgrammaticLaunchScope&) = delete;

 private:
  bool previous_;
};

/// Why programmatic launch is on or off, for logs and the benchmark: "on (…)" or "off: <reason>".
std::string programmatic_launch_status();

/// The edges of `graph` of type cudaGraphDependencyTypeProgrammatic (a captured launch_kernel
/// after another kernel gives one); -1 if the graph's edges cannot be read.
int programmatic_edge_count(cudaGraph_t graph);

/// kernel<<<grid, block, smem, stream>>>(args...), with the programmatic-launch attribute when
/// enabled. Returns the launch's error (callers check it with RW_CUDA_CHECK_LAUNCH, as after a
/// <<<>>> launch).
template <typename... Params, typename... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem, cudaStream_t stream,
                          Args&&... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = programmatic_launch_enabled() ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

namespace detail {
/// The probe behind programmatic_launch_enabled() (pdl_probe.cu): two programmatic launches of a
/// tiny kernel captured into a CUDA graph, instantiated and run on a private stream. Empty when
/// that works, else what failed; `edges` gets the captured graph's programmatic edges.
std::string probe_programmatic_capture(int* edges);
}  // namespace detail

}  // namespace redwood::cuda::kernels
