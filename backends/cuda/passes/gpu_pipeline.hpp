#pragma once
// The CUDA backend's graph passes: what the GPU runner's optimizer runs beyond core's pipeline
// (core/passes/pass_manager.hpp). They rewrite groups of convolutions into the backend's NHWC ops
// (rw.ConvNhwc, rw.ToNhwc, ...; their reference kernels: backends/cpu/reference/nhwc.cpp), so
// that activations stay channels-last in the convolutions' storage type between a conversion at
// each end of a group. Host code only: this library builds without the CUDA toolkit, and its tests
// run everywhere (tests/backends/cuda/passes/).
//
//   chain_pipeline() ─► choose_gpu_layout ─► fuse_conv_shortcut
//   (core: folding,       NHWC groups, tf32     a ResNet block's 1x1 downsample inside the
//    epilogues, chains)   rounding, the stem     convolution whose residual it is
//                         by space-to-depth

#include "core/dtype.hpp"
#include "core/passes/pass_manager.hpp"

#include <optional>
#include <string>
#include <vector>

namespace redwood::passes {

/// What gpu_pipeline runs (the CUDA runner's graph_runner.cpp runner_pipeline() fills it from its
/// RunnerOptions and CudaOptions).
struct GpuPipelineOptions {
  /// The NHWC groups' storage type: float16, bfloat16, or float (at tf32 and fp32); std::nullopt
  /// keeps every activation fp32 NCHW (no choose_gpu_layout, no fuse_conv_shortcut).
  std::optional<DType> nhwc_storage;
  /// Precision tf32 with float storage: the groups' weights and activations are rounded to tf32
  /// where they are written (rw.round_tf32 on the nodes).
  bool round_tf32 = false;
  /// choose_gpu_layout's stem by space-to-depth (space_to_depth.hpp).
  bool space_to_depth_stem = false;
  /// fuse_conv_shortcut after choose_gpu_layout.
  bool fuse_shortcuts = false;
};

/// chain_pipeline(), then with an NHWC storage choose_gpu_layout and, with fuse_shortcuts,
/// fuse_conv_shortcut.
std::vector<NamedPass> gpu_pipeline(const GpuPipelineOptions& options = {});

/// Groups of convolutions (with the max pools, global average pools and squeeze-excite scales
/// between them) keep their activations NHWC in `storage` (kF16, kBF16, or kF32 at tf32 and fp32),
/// as rw.*Nhwc ops, with one conversion at each end (choose_gpu_layout.cpp). `round_tf32`
/// (precision tf32, kF32 storage only): the convolutions' weights and every NHWC activation are
/// rounded to tf32 once, where they are written (rw.round_tf32 on the nodes).
/// `space_to_depth_stem`: a few-channel stride-2 convolution that reads its input through the
/// group's conversion (the ResNet stem) becomes a stride-1 convolution over the 2x2 space-to-depth
/// of that input, which the conversion writes (space_to_depth.hpp; the pass's header comment).
void choose_gpu_layout(Graph& graph, std::vector<std::string>& log, DType storage, bool round_tf32 = false,
                       bool space_to_depth_stem = false);
/// After choose_gpu_layout: a 1x1 rw.ConvNhwc whose residual is a ResNet downsample (a 1x1
/// rw.ConvNhwc of the block's input, stride s, no activation, read by nothing else) takes that
/// input as its own input 4 with both weights side by side, so the downsample's output is never
/// written (fuse_conv_shortcut.cpp).
void fuse_conv_shortcut(Graph& graph, std::vector<std::string>& log);

}  // namespace redwood::passes
