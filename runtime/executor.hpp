#pragma once
// Executor: the CPU executable. Runs a Graph node by node with the kernels the op registry holds
// for one device, on the graph's runtime::Dataflow (runtime/schedule.hpp: values and steps by id,
// last readers, the shape chains, and the input validator the CUDA schedule shares).
//
// At construction every node gets its kernel (an unsupported op, attribute or dtype fails here,
// naming the node); run() checks the inputs against the graph's declared dtypes and shapes
// (symbolic dimensions bind per run and must agree across inputs), runs the nodes in
// topological order, and releases each intermediate after its last consumer.
//
// By default the graph is first optimized (core/passes: constant folding, DCE, Conv+BN folding,
// epilogue fusion...) and each node gets the kernel of the highest-priority provider that accepts
// it (oneDNN, then the reference kernels); ExecutorOptions can turn both off. On the CPU an
// fp16/bf16 graph computes in fp32 (passes::compute_in_fp32, first, also without the optimizer):
// its inputs and outputs keep their declared types, casts at the boundary convert.
//
// Memory plan: kernels take their outputs from KernelContext::allocate_output, which the executor
// serves per input-shape signature. The first run with a signature records each output the
// kernels allocate (bytes, the step that makes it, the last step that reads it or any view of it,
// e.g. a Reshape) on the heap; the liveness planner (memory/liveness_planner.hpp) then gives every
// intermediate an offset in one workspace, and later runs with that signature hand out views at
// those offsets: one allocation per signature instead of one per tensor. Graph outputs, and
// intermediates that a graph output views, stay on the heap: they are returned to the caller.
//
// Per-shape folding: the optimizer folds Shape chains whose input shapes are static; a model
// with symbolic dimensions (a batch, a text width) keeps chains that become constant only once
// the input shapes are bound. The executor finds them at load (runtime::shape_determined_nodes: a
// Shape node, and every node whose inputs are all constants or such nodes' outputs), runs them on
// the first run of each signature and keeps copies of their outputs; later runs of that
// signature skip them.
//
// Threads: run() may be called from several threads at once. Plans are shared; a workspace is
// used by one run at a time (a run takes an idle one, or allocates another), so N concurrent
// runs of one signature hold N workspaces. Profiling (last_timings) is for one thread at a time.
//
// Steady state: a run of a signature that has its plan allocates nothing on the executor's side.
// Its scratch (the value slots, the signature, the kernels' argument lists) is taken from idle
// sets kept across runs (one per concurrent run), the plan's first workspace is allocated when the
// plan is recorded, and run_into() writes the outputs into the caller's vector and takes the graph
// outputs' buffers from the caller's allocator (a frame pool) instead of the heap.

#include "core/graph/graph.hpp"
#include "core/lru_map.hpp"
#include "core/op_registry.hpp"
#include "core/passes/pass_manager.hpp"
#include "core/tensor.hpp"
#include "runtime/schedule.hpp"

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace redwood {

struct ExecutorOptions {
  Device device = Device::kCpu;
  /// Run the graph optimizer (core/passes) on a copy of the graph before choosing kernels.
  bool optimize = true;
  /// On the CPU, run an fp16/bf16 graph in fp32 (passes::compute_in_fp32, before the optimizer
  /// and also without it). Off, the graph runs as declared: the kernels that take fp16/bf16 (data
  /// movement, Cast, Min/Max/Mod...) run it and the others refuse it at load, as kernel tests check.
  bool compute_in_fp32 = true;
  /// Use only the reference provider's kernels (the ground truth); otherwise every provider is
  /// tried from the highest priority down (oneDNN before reference on the CPU).
  bool reference_only = false;
  /// Place intermediates in one planned workspace per input-shape signature (see above);
  /// otherwise every output is its own heap allocation.
  bool plan_memory = true;
  /// Per-shape folding (with optimize): nodes whose outputs depend only on the input shapes
  /// (Shape, and every node fed only by such nodes and constants: the Shape/Gather/Concat/...
  /// chains that build Reshape targets) run on the first run of each input-shape signature;
  /// later runs of that signature reuse their values and skip them.
  bool fold_shapes = true;
  /// Input-shape signatures whose memory plan (and folded shape values) are kept; beyond, the
  /// least recently used is dropped and planned again if it comes back.
  std::size_t max_plans = 64;
};

/// The memory plan of one input-shape signature.
struct WorkspaceStats {
  std::size_t workspace_bytes = 0;  // the one workspace's size
  std::size_t lower_bound = 0;      // largest sum of live intermediate bytes at any step
  std::size_t planned_tensors = 0;  // intermediates placed in the workspace
  std::size_t heap_tensors = 0;     // outputs left on the heap (graph outputs and their views)
  std::size_t steps = 0;            // nodes
};


/// Per-node wall time of the last run, when profiling is on. A composite node that times its
/// body (a oneDNN region) reports one timing per body node, named by it, with `region` naming the
/// composite; what the composite spent around its body comes as a timing of its own.
struct NodeTiming {
  std::string node;
  std::string op_type;
  std::string provider;
  double milliseconds = 0;
  std::string region;  // the composite node a body node ran inside, or empty
};

class Executor {
 public:
  Executor(std::shared_ptr<const Graph> graph, ExecutorOptions options = {});
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  /// The graph that runs (the rewritten copy when options.optimize or compute_in_fp32 ran).
  const Graph& graph() const { return *graph_; }
  /// What each pass did (empty when no pass ran).
  const std::vector<PassRecord>& pass_records() const { return pass_records_; }
  /// The provider whose kernel each node of graph() got ("reference", "onednn").
  const std::vector<std::string>& node_providers() const { return providers_; }

  /// Runs the graph. `inputs` maps graph input names to tensors; every graph input must be
  /// given, and no unknown name. Returns the graph outputs in the graph's order; those a run
  /// allocates come from `allocate` when given (else the heap).
  std::vector<Tensor> run(const std::map<std::string, Tensor>& inputs,
                          const std::function<Tensor(DType, const Shape&)>* allocate = nullptr);
  /// Runs the graph on `inputs` in the graph's input order (one each), writing the outputs in
  /// the graph's order into `outputs` (cleared first; a caller keeps it from run to run). The
  /// graph outputs a run allocates come from `allocate` when given (else the heap).
  void run_into(std::span<const Tensor> inputs, std::vector<Tensor>& outputs,
                const std::function<Tensor(DType, const Shape&)>* allocate = nullptr);

  void set_profiling(bool on) { profiling_ = on; }
  const std::vector<NodeTiming>& last_timings() const { return timings_; }

  /// The plan of the most recently planned signature (all zero before one exists).
  WorkspaceStats workspace_stats() const;
  /// Workspaces allocated so far, over all signatures (one per signature for one thread).
  std::uint64_t workspace_allocations() const { return workspace_allocations_.load(); }
  /// Input-shape signatures that have a plan.
  std::size_t planned_signatures() const;
  /// Nodes of graph() folded per input shape (empty unless optimize and fold_shapes).
  const std::vector<std::size_t>& shape_folded_nodes() const { return shape_folded_nodes_; }

 private:
  struct MemoryPlan;
  class OutputPlacer;
  struct Scratch;
  void find_shape_folded_nodes();
  /// Values of the shape-folded nodes' outputs for one signature (heap copies), by slot.
  using ShapeValues = std::vector<std::pair<int, Tensor>>;
  /// run_into() once its inputs are checked.
  void run_checked(std::span<const Tensor> inputs, std::vector<Tensor>& outputs,
                   const std::function<Tensor(DType, const Shape&)>* allocate);
  /// Runs the nodes into `outputs`; with `folded` set, the shape-folded nodes are skipped and
  /// their values taken from it; with `capture` set, their outputs are copied into it.
  void run_nodes(Scratch& scratch, OutputPlacer& placer, std::vector<Tensor>& outputs,
                 const ShapeValues* folded = nullptr, ShapeValues* capture = nullptr);
  void run_signature(Scratch& scratch, OutputPlacer& placer, std::vector<Tensor>& outputs, const ShapeValues* folded,
                     ShapeValues* capture);
  std::shared_ptr<MemoryPlan> record_plan(const OutputPlacer& placer) const;

  std::shared_ptr<const Graph> graph_;
  ExecutorOptions options_;
  std::vector<PassRecord> pass_records_;
  std::vector<std::string> providers_;                    // one per node
  std::vector<std::unique_ptr<Kernel>> kernels_;          // one per node
  runtime::Dataflow flow_;                                // values (slots) and steps by id
  std::vector<std::vector<int>> release_after_;           // slots freed after node i
  std::vector<Tensor> constants_;                         // slot -> initializer (or undefined)
  bool profiling_ = false;
  std::vector<double> body_ms_;  // a composite node's body times while profiling
  std::vector<NodeTiming> timings_;
  mutable std::mutex plans_mutex_;
  LruMap<std::vector<std::int64_t>, std::shared_ptr<MemoryPlan>> plans_{1};  // by signature (options_.max_plans)
  std::shared_ptr<MemoryPlan> last_plan_;
  mutable std::atomic<std::uint64_t> workspace_allocations_{0};  // record_plan (const) counts the first
  std::vector<bool> shape_folded_;                        // node -> folded per input shape
  std::vector<std::size_t> shape_folded_nodes_;
  LruMap<std::vector<std::int64_t>, std::shared_ptr<const ShapeValues>> shape_values_{1};  // by signature
  std::mutex scratch_mutex_;
  std::vector<std::unique_ptr<Scratch>> idle_scratch_;  // one per run at once, kept across runs
};

}  // namespace redwood
