#pragma once
// Executor: runs a Graph node by node with the kernels the op registry holds for one device.
//
// At construction every node gets its kernel (an unsupported op, attribute or dtype fails here,
// naming the node); run() checks the inputs against the graph's declared dtypes and shapes
// (symbolic dimensions bind per run and must agree across inputs), runs the nodes in
// topological order, and releases each intermediate after its last consumer.
//
// By default the graph is first optimized (core/passes: constant folding, DCE, Conv+BN folding,
// epilogue fusion...) and each node gets the kernel of the highest-priority provider that accepts
// it (oneDNN, then the reference kernels); ExecutorOptions can turn both off.

#include "core/graph/graph.hpp"
#include "core/op_registry.hpp"
#include "core/passes/pass_manager.hpp"
#include "core/tensor.hpp"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace redwood {

struct ExecutorOptions {
  Device device = Device::kCpu;
  /// Run the graph optimizer (core/passes) on a copy of the graph before choosing kernels.
  bool optimize = true;
  /// Use only the reference provider's kernels (the ground truth); otherwise every provider is
  /// tried from the highest priority down (oneDNN before reference on the CPU).
  bool reference_only = false;
};


/// Per-node wall time of the last run, when profiling is on.
struct NodeTiming {
  std::string node;
  std::string op_type;
  std::string provider;
  double milliseconds = 0;
};

class Executor {
 public:
  Executor(std::shared_ptr<const Graph> graph, ExecutorOptions options = {});
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  /// The graph that runs (the optimized copy when options.optimize).
  const Graph& graph() const { return *graph_; }
  /// What each pass did (empty when not optimizing).
  const std::vector<PassRecord>& pass_records() const { return pass_records_; }
  /// The provider whose kernel each node of graph() got ("reference", "onednn").
  const std::vector<std::string>& node_providers() const { return providers_; }

  /// Runs the graph. `inputs` maps graph input names to tensors; every graph input must be
  /// given, and no unknown name. Returns the graph outputs in the graph's order.
  std::vector<Tensor> run(const std::map<std::string, Tensor>& inputs);

  void set_profiling(bool on) { profiling_ = on; }
  const std::vector<NodeTiming>& last_timings() const { return timings_; }

 private:
  void check_inputs(const std::map<std::string, Tensor>& inputs) const;

  std::shared_ptr<const Graph> graph_;
  ExecutorOptions options_;
  std::vector<PassRecord> pass_records_;
  std::vector<std::string> providers_;                    // one per node
  std::vector<std::unique_ptr<Kernel>> kernels_;          // one per node
  std::map<std::string, int> value_ids_;                  // value name -> slot
  std::vector<std::vector<int>> node_inputs_;             // slots, -1 for absent
  std::vector<std::vector<int>> node_outputs_;            // slots, -1 for unused
  std::vector<std::vector<int>> release_after_;           // slots freed after node i
  std::vector<int> graph_input_slots_, graph_output_slots_;
  std::vector<Tensor> constants_;                         // slot -> initializer (or undefined)
  bool profiling_ = false;
  std::vector<NodeTiming> timings_;
};

}  // namespace redwood
