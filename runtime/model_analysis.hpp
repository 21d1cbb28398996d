#pragma once
// The model as the partitioner sees it at one set of input shapes: the device-neutral passes run,
// then one run on zeros on the CPU gives every value's dtype and shape, and the shape arithmetic
// (Shape, and what is computed from shapes and constants alone) is found: it is not placed, as
// every device evaluates it on the host when it plans (the CUDA schedule, the CPU executor's
// per-shape folding). A timed analysis also gives each placed node's time on the CPU.

#include "core/graph/graph.hpp"
#include "core/kernel_info.hpp"
#include "core/passes/pass_manager.hpp"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace redwood::runtime {

/// The model at one set of input shapes.
struct ModelAnalysis {
  std::shared_ptr<const Graph> graph;        // after the device-neutral passes
  std::vector<PassRecord> passes;            // what they did (fusions: fuse_epilogue's lines)
  std::vector<Shape> input_shapes;           // graph input order
  std::map<std::string, Tensor> host_values; // initializers and the shape arithmetic's results
  std::map<std::string, TensorDesc> values;  // every value: dtype, shape, and host value where known
  std::vector<bool> host_node;               // per node: shape arithmetic, not placed
  std::vector<std::size_t> placeable;        // the other nodes, in graph order
  std::vector<double> cpu_ms;                // per placeable node: its time in the analysis run (CPU)

  /// Node n's inputs and outputs as the analysis saw them.
  std::vector<TensorDesc> input_descs(std::size_t n) const;
  std::vector<TensorDesc> output_descs(std::size_t n) const;
};

/// Per node of `graph`: whether it is shape arithmetic, which every device evaluates on the host
/// when it plans (Shape of anything, and nodes fed only by initializers and such nodes).
std::vector<bool> shape_arithmetic(const Graph& graph);

/// What analyze_model does after the run that gives every value's shape.
enum class AnalysisDepth {
  kTimed,      // then runs the model as the CPU runner would, timing each node (cpu_node_times)
  kShapesOnly  // no more: cpu_ms is all 0 (enough to cut the model, not to place it)
};

/// Runs the device-neutral passes on a copy of `graph` (unless `optimize` is off) and the result
/// on zeros of `input_shapes` with the CPU executor: once node by node for every value's shape,
/// then (kTimed) as the CPU runner would, timing each node.
ModelAnalysis analyze_model(std::shared_ptr<const Graph> graph, const std::vector<Shape>& input_shapes,
                            bool optimize = true, AnalysisDepth depth = AnalysisDepth::kTimed);

/// Each placed node's time on the CPU (milliseconds, in analysis.placeable's order), timed as the
/// CPU runner runs the model on `feeds`.
std::vector<double> cpu_node_times(const ModelAnalysis& analysis, const std::map<std::string, Tensor>& feeds);

}  // namespace redwood::runtime
