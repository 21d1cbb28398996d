#pragma once
// The graph optimizer: small rewrites of Redwood's IR, each numerically equivalent to the graph it
// was given (each has a test that runs both on random inputs through the reference kernels).
//
//   imported Graph -> fold_constants -> fold_pad_into_conv -> fold_conv_affine -> recognize_hardswish
//                  -> fuse_epilogue -> eliminate_dead_code -> form_regions -> fuse_elementwise
//                  -> optimized Graph
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
/// regions: default_pipeline(false), then fuse_elementwise. A backend appends its own passes
/// (the CUDA backend's: backends/cuda/passes/gpu_pipeline.hpp).
std::vector<NamedPass> chain_pipeline();

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
/// A constant-mode zero Pad of the spatial axes whose only reader is a Conv's data input adds its
/// pads to the Conv's pads (core/passes/fold_pad_into_conv.cpp).
void fold_pad_into_conv(Graph& graph, std::vector<std::string>& log);
/// Conv or ConvTranspose followed by BatchNormalization, or by a constant per-channel/scalar Mul and Add (an
/// exported BatchNorm), folds into the Conv's weights and bias.
void fold_conv_affine(Graph& graph, std::vector<std::string>& log);
/// x * HardSigmoid(x) (alpha 1/6, beta 0.5) and x * Clip(x + 3, 0, 6) / 6 become HardSwish(x).
void recognize_hardswish(Graph& graph, std::vector<std::string>& log);
/// Bias Add, residual Add and an activation after Conv/ConvTranspose/Gemm/MatMul become the
/// node's fused epilogue (core/ops/epilogue.hpp).
void fuse_epilogue(Graph& graph, std::vector<std::string>& log);
/// Moves each maximal group of nodes a region provider accepts into one composite node whose
/// body holds them (the nodes are first re-sorted so that accepted nodes stay together).
void form_regions(Graph& graph, std::vector<std::string>& log);
/// Maximal chains of fp32 elementwise nodes (unary activations, and Add/Sub/Mul/Div/Pow with a
/// constant scalar or per-channel operand) whose intermediates nothing else reads become one
/// rw.ElementwiseChain node (backends/cpu/reference/elementwise_chain.cpp).
void fuse_elementwise(Graph& graph, std::vector<std::string>& log);

}  // namespace passes
}  // namespace redwood
