// Whether kernels are launched with programmatic dependent launch (pdl.cuh): on where the current
// GPU is sm_90 or newer and stream capture takes such launches (the probe in pdl_probe.cu).
// Decided once per process, logged once at debug level (at warn when the probe fails on a GPU
// that should support it); a ProgrammaticLaunchScope turns it off for one thread's launches.

#include "backends/cuda/kernels/pdl.cuh"

#include "backends/cuda/device.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

#include <fmt/format.h>


namespace redwood::cuda::kernels {
namespace {

struct Decision {
  bool enabled = false;
  std::string status;
};

Decision decide() {
  const DeviceInfo* gpu = nullptr;
  try {
    gpu = &current_cuda_device();
  } catch (const Unsupported&) {
    return {false, "off: no usable CUDA device"};
  }
  if (!gpu->has_pdl()) {
    return {false, fmt::format("off: GPU {} is sm_{}{} (needs sm_90 or newer)", gpu->index, gpu->compute_major,
                               gpu->compute_minor)};
  }
  int edges = 0;
  const std::string error = detail::probe_programmatic_capture(&edges);
  if (!error.empty()) {
    log().warn("CUDA: programmatic dependent launch is off: {}", error);
    return {false, "off: " + error};
  }
  // A capture that keeps no programmatic edge still runs correctly (the launches serialize as
  // plain ones inside graphs); say so, since the gain is then only outside graphs.
  return {true, fmt::format("on (sm_{}{}; a captured pair of launches keeps {} programmatic edge{})",
                            gpu->compute_major, gpu->compute_minor, edges, edges == 1 ? "" : "s")};
}

const Decision& decision() {
  static const Decision d = [] {
    Decision r = decide();
    log().debug("CUDA: programmatic dependent launch {}", r.status);
    return r;
  }();
  return d;
}

thread_local bool t_allowed = true;  // the innermost ProgrammaticLaunchScope's say

}  // namespace

bool programmatic_launch_enabled() { return t_allowed && decision().enabled; }

ProgrammaticLaunchScope::ProgrammaticLaunchScope(bool allowed) : previous_(t_allowed) { t_allowed = allowed; }
ProgrammaticLaunchScope::~ProgrammaticLaunchScope() { t_allowed = previous_; }

std::string programmatic_launch_status() { return decision().status; }

}  // namespace redwood::cuda::kernels
