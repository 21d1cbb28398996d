// The probe of programmatic dependent launch under stream capture (pdl.cuh): a driver or GPU that
// rejects the launch attribute, or rejects it only inside a capture, must turn the programmatic
// launch off before the graph runner captures a plan, not fail that capture.

#include "backends/cuda/kernels/pdl.cuh"

#include <string>
#include <vector>

namespace redwood::cuda::kernels {
namespace {

// Writes nothing: a programmatic launch without data to hand over.
__global__ void pdl_probe_kernel(int steps) {
  pdl_wait();
  pdl_launch_dependents();
  if (steps < 0) __trap();  // never: keeps the argument
}

std::string failed(const char* what, cudaError_t err) {
  return std::string(what) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
}

}  // namespace

int programmatic_edge_count(cudaGraph_t graph) {
  std::size_t n = 0;
  if (cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &n) != cudaSuccess) return -1;
  std::vector<cudaGraphNode_t> from(n), to(n);
  std::vector<cudaGraphEdgeData> data(n);
  if (n > 0 && cudaGraphGetEdges(graph, from.data(), to.data(), data.data(), &n) != cudaSuccess) return -1;
  int count = 0;
  for (std::size_t i = 0; i < n; ++i) count += data[i].type == cudaGraphDependencyTypeProgrammatic ? 1 : 0;
  return count;
}

namespace detail {

std::string probe_programmatic_capture(int* edges) {
  *edges = 0;
  // The first launch may come while this thread captures a plan (cudaStreamCaptureModeThreadLocal
  // forbids stream creation and synchronization then): relax the mode for the probe's calls.
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  std::string error;
  cudaStream_t stream = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaError_t err = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (err != cudaSuccess) {
    error = failed("cudaStreamCreateWithFlags", err);
  } else {
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(2);
    config.blockDim = dim3(32);
    config.stream = stream;
    config.attrs = attr;
    config.numAttrs = 1;
    // Outside a capture first, then captured: a kernel then a programmatic dependent of it.
    err = cudaLaunchKernelEx(&config, pdl_probe_kernel, 1);
    if (err == cudaSuccess) err = cudaLaunchKernelEx(&config, pdl_probe_kernel, 1);
    if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
    if (err != cudaSuccess) error = failed("a programmatic launch", err);
    if (error.empty()) {
      err = cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed);
      if (err != cudaSuccess) {
        error = failed("cudaStreamBeginCapture", err);
      } else {
        cudaError_t launch = cudaLaunchKernelEx(&config, pdl_probe_kernel, 1);
        if (launch == cudaSuccess) launch = cudaLaunchKernelEx(&config, pdl_probe_kernel, 1);
        err = cudaStreamEndCapture(stream, &graph);
        if (launch != cudaSuccess) {
          error = failed("a programmatic launch under stream capture", launch);
        } else if (err != cudaSuccess) {
          error = failed("cudaStreamEndCapture after programmatic launches", err);
        }
      }
    }
    if (error.empty()) {
      *edges = programmatic_edge_count(graph);
      err = cudaGraphInstantiate(&exec, graph, 0);
      if (err == cudaSuccess) err = cudaGraphLaunch(exec, stream);
      if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
      if (err != cudaSuccess) error = failed("a captured graph of programmatic launches", err);
    }
  }
  if (exec != nullptr) cudaGraphExecDestroy(exec);
  if (graph != nullptr) cudaGraphDestroy(graph);
  if (stream != nullptr) cudaStreamDestroy(stream);
  cudaGetLastError();  // a failure above is reported in the string, not left for the next check
  cudaThreadExchangeStreamCaptureMode(&mode);
  return error;
}

}  // namespace detail
}  // namespace redwood::cuda::kernels
