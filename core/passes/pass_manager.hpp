#pragma once
// The graph optimizer: small rewrites of Redwood's IR, each numerically equivalent to the graph it
// was given (each has a test that runs both on random inputs through the reference kernels).
//
//   imported Graph -> fold_constants -> fold_conv_affine -> recognize_hardswish -> fuse_epilogue
//                  -> eliminate_dead_code -> form_regions -> fuse_elementwise -> optimized Graph
//
// form_regions is the one step that depends on the providers: a provider that can run a group of
// nodes together (oneDNN keeps its own layouts between them) registers a RegionProvider, and the
// step moves each maximal run of nodes it accepts into one composite node (Node::body). It is
// left out when only the reference kernels will run (default_pipeline(false)).
//
// Every pass records what it did (one line per rewrite), which `redwood plan MODEL` prints.
// Passes keep the graph's inputs and outputs (names, order) and its topological order; a pass
// that removes a node either renames the surviving producer's output to the removed node's
// output, or only removes nodes whose outputs nothing reads.

#include "core/graph/graph.hpp"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace redwood {

/// What one pass did: one line per rewrite.
struct PassRecord {
  std::string pass;
  std::vector<std::string> changes;
};

namespace passes {

/// A pass rewrites the graph in place and appends a line per rewrite to `log`.
using Pass = std::function<void(Graph& graph, std::vector<std::string>& log)>;

struct NamedPass {
  std::string name;
  Pass run;
};

/// The default pipeline, in order; `regions` adds form_regions and fuse_elementwise at
/// the end (both make composite nodes only the CPU providers run).
std::vector<NamedPass> default_pipeline(bool regions = true);
/// The pipeline of a runner that has a kernel for rw.ElementwiseChain but none for the CPU
/// regions (the CUDA graph runner): default_pipeline(false), then fuse_elementwise; with an
/// `nhwc_storage` (float16, bfloat16, or float for tf32 and fp32), then choose_gpu_layout for it.
/// Without one (std::nullopt) activations stay fp32 NCHW. `round_tf32` (precision tf32): the NHWC
/// groups round their operands to tf32 (choose_gpu_layout's round_tf32); `space_to_depth_stem`:
/// choose_gpu_layout's; then, with `fuse_shortcuts`, fuse_conv_shortcut.
std::vector<NamedPass> gpu_pipeline(std::optional<DType> nhwc_storage = std::nullopt, bool round_tf32 = false,
                                    bool space_to_depth_stem = false, bool fuse_shortcuts = false);

/// A provider that runs groups of nodes as one composite node.
struct RegionProvider {
  std::string op_type;  // the composite node's op type, which the provider has a kernel for
  /// Whether `node` may be part of a region (the kernel may still run it node by node for input
  /// shapes it cannot take).
  std::function<bool(const Graph& graph, const Node& node)> accepts;
  std::size_t min_nodes = 2;  // smaller groups stay ordinary nodes
};
/// Registers a region provider (at static initialization, from the provider's source file).
void register_region_provider(RegionProvider provider);
const std::vector<RegionProvider>& region_providers();

/// Runs `pipeline` (the default one when empty) on `graph`; returns what each pass did.
std::vector<PassRecord> optimize(Graph& graph, const std::vector<NamedPass>& pipeline = {});

// The passes, one file each.
/// Constant nodes become initializers; nodes whose inputs are all constant (and Shape of a value
/// whose shape is fully known) are evaluated once with the reference kernels.
void fold_constants(Graph& graph, std::vector<std::string>& log);
/// Removes nodes none of whose outputs reaches a graph output, and unused initializers.
void eliminate_dead_code(Graph& graph, std::vector<std::string>& log);
/// Conv or ConvTranspose followed by BatchNormalization, or by a constant per-channel/scalar Mul and Add (an
/// exported BatchNorm), folds into the Conv's weights and bias.
void fold_conv_affine(Graph& graph, std::vector<std::string>& log);
/// x * HardSigmoid(x) (alpha 1/6, beta 0.5) and x * Clip(x + 3, 0, 6) / 6 become HardSwish(x).
void recognize_hardswish(Graph& graph, std::vector<std::string>& log);
/// Bias Add, residual Add and an activation after Conv/ConvTranspose/Gemm/MatMul become the
/// node's fused epilogue (backends/cpu/reference/epilogue.hpp).
void fuse_epilogue(Graph& graph, std::vector<std::string>& log);
/// Moves each maximal group of nodes a region provider accepts into one composite node whose
/// body holds them (the nodes are first re-sorted so that accepted nodes stay together).
void form_regions(Graph& graph, std::vector<std::string>& log);
/// On the GPU: groups of convolutions (with the max pools, global average pools and squeeze-excite
/// scales between them) keep their activations NHWC in `storage` (kF16, kBF16, or kF32 at tf32 and
/// fp32), as internal rw.*Nhwc ops, with one conversion at each end (choose_gpu_layout.cpp).
/// `round_tf32` (precision tf32, kF32 storage only): the convolutions' weights and every NHWC
/// activation are rounded to tf32 once, where they are written (rw.round_tf32 on the nodes).
/// `space_to_depth_stem`: a few-channel stride-2 convolution that reads its input through the
/// group's conversion (the ResNet stem) becomes a stride-1 convolution over the 2x2 space-to-depth
/// of that input, which the conversion writes (core/space_to_depth.hpp; the pass's header comment).
void choose_gpu_layout(Graph& graph, std::vector<std::string>& log, DType storage, bool round_tf32 = false,
                       bool space_to_depth_stem = false);
/// Maximal chains of fp32 elementwise nodes (unary activations, and Add/Sub/Mul/Div/Pow with a
/// constant scalar or per-channel operand) whose intermediates nothing else reads become one
/// rw.ElementwiseChain node (backends/cpu/reference/elementwise_chain.cpp).
void fuse_elementwise(Graph& graph, std::vector<std::string>& log);
/// After choose_gpu_layout: a 1x1 rw.ConvNhwc whose residual is a ResNet downsample (a 1x1
/// rw.ConvNhwc of the block's input, stride s, no activation, read by nothing else) takes that
/// input as its own input 4 with both weights side by side, so the downsample's output is never
/// written (fuse_conv_shortcut.cpp).
void fuse_conv_shortcut(Graph& graph, std::vector<std::string>& log);

}  // namespace passes
}  // namespace redwood
