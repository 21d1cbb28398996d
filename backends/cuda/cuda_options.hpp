#pragma once
// CudaOptions: the CUDA backend's switches, in one place. Each names a kernel family the tuners may
// pick from, a launch mode, or a graph rewrite of the runner. Every default is on, the fastest
// measured on the H200 (docs/results/); each turns one thing off, to compare against it (the
// benchmarks run both sides in one process) or to step around a problem on a GPU or driver.
//
// They travel with the runner (RunnerOptions::cuda) down to the kernels' plans (PlanInfo), so two
// runners in one process may differ; the tuners' process-wide picks are keyed by what the options
// let them choose from, and the plan cache key holds every option. Users set them per model in a
// pipeline file (`cuda: {wgmma: off}`, docs/pipelines.md) and on the command line
// (`--cuda wgmma=off`); the table below is what both accept, and what docs/cuda.md lists.

#include <map>
#include <span>
#include <string>
#include <string_view>

namespace redwood::cuda {

struct CudaOptions {
  /// rw.ConvNhwc's Hopper wgmma tiles (plain and TMA-fed) among its tuner's candidates, where the
  /// build and the GPU have them (compute capability 9.0).
  bool wgmma = true;
  /// The TMA-fed wgmma tiles among them (with wgmma, where the layer fits them).
  bool tma = true;
  /// rw.ConvNhwc's narrow kernel (layers of few channels, 16-bit storage) among the candidates.
  bool narrow_conv = true;
  /// rw.DepthwiseConvNhwc times its variants; off, it keeps its default one.
  bool depthwise_tuning = true;
  /// rw.GlobalAveragePoolNhwc splits each image over several blocks where that fills the GPU;
  /// off, one part of 32 vectors × 8 slices a block.
  bool gap_split = true;
  /// Kernels are launched with programmatic dependent launch where the GPU and driver take it
  /// (sm_90 or newer; kernels/pdl.cuh); off, plain launches.
  bool pdl = true;
  /// With NHWC activations: a few-channel stride-2 convolution over the network's image runs as a
  /// stride-1 one over its 2x2 space-to-depth (passes/space_to_depth.hpp).
  bool space_to_depth_stem = true;
  /// With NHWC activations: a ResNet block's 1x1 projection shortcut runs inside the convolution
  /// whose residual it is (passes::fuse_conv_shortcut).
  bool fuse_conv_shortcuts = true;
  /// A model runner's completion thread sleeps until a batch's last event completes (a blocking-
  /// sync event: the driver wakes it); off, it polls the event, a CPU core busy while batches are
  /// in flight, to notice the end sooner. Changes no plan (not in the plan cache key).
  bool blocking_completion = true;

  bool operator==(const CudaOptions&) const = default;
};

/// One option by name, for the pipeline file, the command line, the docs and the plan cache key.
struct CudaOptionField {
  const char* name;
  bool CudaOptions::*member;
  const char* doc;
  /// Whether it changes the runner's plan (the graph or the kernels), and so the plan cache key.
  bool changes_plan = true;
};
/// Every option, in the struct's order.
std::span<const CudaOptionField> cuda_option_fields();
/// The option named `name`, or null.
const CudaOptionField* find_cuda_option(std::string_view name);

/// Sets option `name` from `value` ("on", "off", "true", "false", "1", "0"). Throws
/// InvalidArgument naming the unknown option (and listing the known ones) or the bad value.
void set_cuda_option(CudaOptions& options, std::string_view name, std::string_view value);
/// "name=value" (the command line's form), as set_cuda_option.
void set_cuda_option(CudaOptions& options, std::string_view assignment);
/// Options from a name -> value map (a pipeline file's `cuda:` block), over the defaults.
CudaOptions cuda_options_from(const std::map<std::string, std::string>& values);
/// Every option that changes the plan, as "on"/"off" by name (the plan cache key's share).
std::map<std::string, std::string> cuda_plan_option_values(const CudaOptions& options);
/// The options that differ from the defaults, "name=off ..."; "defaults" when none do.
std::string describe(const CudaOptions& options);

}  // namespace redwood::cuda
