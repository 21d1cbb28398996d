#pragma once
// GraphRunner: runs a whole graph on one GPU with Redwood's CUDA kernels.
//
//   Graph ─optimize (core/passes)─► schedule per input shapes ─► plan on the device ─► replay
//                                   host: which node runs where,   one workspace,      one CUDA
//                                   output shapes, liveness        weights uploaded,   graph per
//                                   offsets (memory/)              CUDA graph capture  batch
//
// Scheduling is runtime::build_schedule (runtime/schedule.hpp; host only, no CUDA call, so it is
// tested where there is no GPU): every node whose inputs are all known on the host (initializers,
// Shape of a planned value, and what is computed from those: the shape arithmetic exporters leave
// behind) is evaluated once on the host with the reference kernels; every other node gets the
// highest-priority CUDA kernel that accepts it, which plans its outputs. Device values (graph
// inputs, intermediates, outputs) get offsets in one workspace from the liveness planner.
// Weights are uploaded once per runner and shared by plans.
//
// A plan is built once per distinct set of input shapes and cached; run() copies the inputs in
// through pinned staging, replays the plan's CUDA graph (or launches the kernels one by one when
// cuda_graph is off) and copies the outputs back. The streaming runner (cuda_model_runner.cpp)
// makes plans of its own with make_plan(), one per slot and batch size, each captured on its
// slot's stream. Memory: the weights live in one arena per runner, each plan's workspace and
// constants in one arena per plan (backends/cuda/device_memory.hpp): nothing is allocated per run.

#include "backends/cuda/cuda_kernel.hpp"
#include "backends/cuda/device_tensor.hpp"
#include "backends/cuda/stream.hpp"
#include "core/graph/graph.hpp"
#include "core/lru_map.hpp"
#include "core/passes/pass_manager.hpp"
#include "memory/arena.hpp"
#include "runtime/schedule.hpp"

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace redwood::cuda {

class RunnerPlanCache;

struct RunnerOptions {
  Precision precision = Precision::kFp32;
  /// Run the graph optimizer (core/passes: folding, Conv+BN, epilogue fusion) first.
  bool optimize = true;
  /// Capture each plan into a CUDA graph and replay it (otherwise launch kernel by kernel).
  bool cuda_graph = true;
  /// Time the kernels' variants (the convolutions' tiles and split-K counts) when a plan is made,
  /// before capture, within this much time per plan; 0 keeps every kernel's untimed default.
  /// Picks are cached per process by shape and precision, so only new shapes are timed.
  double tune_budget_ms = 3000;
  /// With optimize: keep activations NHWC between the convolutions (passes::choose_gpu_layout)
  /// instead of NCHW: in that 16-bit type at fp16/bf16, in fp32 at tf32 (the convolutions round
  /// their operands to tf32) and at fp32 (the convolutions multiply split operands as three tf32
  /// products, "3xTF32": fp32-accurate, though not fp32 FMAs). Off: every kernel reads and writes
  /// fp32 NCHW, only the matrix operands are rounded (exact fp32 on CUDA cores at fp32).
  bool nhwc = true;
  /// The backend's switches: kernel families the tuners may pick from, programmatic launch, and
  /// the NHWC rewrites (the stem by space-to-depth, fused projection shortcuts); cuda_options.hpp.
  CudaOptions cuda{};
  /// Plans kept per runner (and per slot of a model runner), one per set of input shapes: beyond,
  /// the least recently used goes (its CUDA graph and workspace freed, its stream idle), so a
  /// stream of ever-new shapes cannot take the GPU's memory. Enough for every batch size of a
  /// pipeline's model (batch_sizes), which are the shapes it sees.
  std::size_t max_plans = 32;
  /// With a tuning budget: keep the tuners' picks on disk between runs, one entry per model (by
  /// content), GPU, driver, Redwood version and these options (backends/cuda/plan_cache.hpp;
  /// docs/planner.md, "Plan cache"), so that a restart times nothing it timed before.
  bool plan_cache = true;
  /// Where the entries live; empty: runtime::plan_cache_dir() ($REDWOOD_CACHE_DIR/plans, else
  /// $XDG_CACHE_HOME/redwood/plans, else ~/.cache/redwood/plans).
  std::filesystem::path plan_cache_dir{};
};

/// The NHWC storage type of activations between convolutions under these options: kF16 or
/// kBF16 at those precisions, kF32 at tf32 and fp32, when nhwc is on; std::nullopt (fp32 NCHW)
/// when it is off.
std::optional<DType> nhwc_storage(const RunnerOptions& options);

/// Whether the runner's layout pass takes the stem by space-to-depth under these options: with the
/// NHWC groups and CudaOptions::space_to_depth_stem.
bool space_to_depth_stem(const RunnerOptions& options);

/// The optimizer's pipeline of a runner with these options (passes/gpu_pipeline.hpp): the NHWC
/// groups in nhwc_storage(options), tf32 rounding at precision tf32, and the CUDA options' rewrites.
std::vector<passes::NamedPass> runner_pipeline(const RunnerOptions& options);

/// Where each node of a graph runs and where each device value lives, for one set of input
/// shapes (runtime/schedule.hpp): each step's kernel is a CudaKernel.
using Schedule = runtime::Schedule;

/// Builds the schedule of `graph` for the given input shapes (the graph's input order), each
/// device step the highest-priority CUDA kernel that accepts it (select_cuda_kernel), planned at
/// `precision` with `options`. Throws Unsupported naming the node that no CUDA kernel accepts,
/// InvalidArgument for bad shapes.
Schedule build_schedule(const Graph& graph, const std::vector<Shape>& input_shapes, Precision precision,
                        const CudaOptions& options = {});

/// A step's kernel as the CUDA kernel the CUDA schedule gave it.
CudaKernel& cuda_kernel(const Schedule::Step& step);

/// A schedule made real on the device: workspace, constants, kernel arguments, CUDA graph.
class Plan {
 public:
  ~Plan();
  const Schedule& schedule() const { return schedule_; }
  /// Device address of graph input / output i in the workspace.
  void* input(std::size_t i) const;
  void* output(std::size_t i) const;
  /// Queues one forward pass on `stream` (a CUDA graph replay when captured).
  void enqueue(cudaStream_t stream);
  bool captured() const { return exec_ != nullptr; }
  /// CudaKernel::variant() of each step whose kernel has several ways to run ("node ...: tile,
  /// split-K, how it was picked").
  std::vector<std::string> variants() const;
  /// Where a forward pass spends its time: each step launched on its own (no CUDA graph) between
  /// two events, `runs` times after one warm-up pass; the median milliseconds per step, in
  /// schedule order. Synchronizes `stream`. The sum is the kernels' time; a replay's time beyond
  /// it is launch gaps.
  std::vector<double> time_steps(cudaStream_t stream, int runs);

 private:
  friend class GraphRunner;
  Plan() = default;
  void launch_steps(cudaStream_t stream);
  Schedule schedule_;
  bool pdl_ = true;  // CudaOptions::pdl: launches may ask for programmatic dependent launch
  std::unique_ptr<memory::ArenaResource> arena_;  // before the buffers: it outlives them
  DeviceBuffer workspace_;
  DeviceBuffer constants_;  // host-computed values that device steps read
  std::vector<std::vector<DeviceArg>> step_inputs_, step_outputs_;
  std::vector<void*> step_workspaces_;
  cudaGraphExec_t exec_ = nullptr;
};

class GraphRunner {
 public:
  explicit GraphRunner(std::shared_ptr<const Graph> graph, RunnerOptions options = {});
  ~GraphRunner();
  GraphRunner(const GraphRunner&) = delete;
  GraphRunner& operator=(const GraphRunner&) = delete;

  const Graph& graph() const { return *graph_; }
  const RunnerOptions& options() const { return options_; }
  const std::vector<PassRecord>& pass_records() const { return pass_records_; }

  /// Host tensors in (every graph input by name), host tensors out (the graph's outputs in order).
  std::vector<Tensor> run(const std::map<std::string, Tensor>& inputs);
  /// The plan for these input shapes (graph input order), built on first use.
  Plan& plan_for(const std::vector<Shape>& input_shapes);
  /// A new plan for these input shapes, tuned and captured on `stream` (whose work it then
  /// belongs to), sharing this runner's weights. Not cached: the caller owns it and must destroy
  /// it, its stream idle, before this runner.
  std::unique_ptr<Plan> make_plan(const std::vector<Shape>& input_shapes, cudaStream_t stream);
  cudaStream_t stream() const { return stream_.get(); }
  std::size_t plan_count() const { return plans_.size(); }
  /// Plans dropped to stay within RunnerOptions::max_plans.
  std::uint64_t plan_evictions() const { return plans_.evictions(); }
  /// The GPU this runner's memory and plans are on.
  int device() const { return device_; }
  /// Device bytes of the weights arena (reserved when the first plan is made).
  std::size_t weight_bytes() const { return weights_arena_ ? weights_arena_->capacity() : 0; }
  /// This runner's plan cache entry; null when RunnerOptions::plan_cache is off or nothing is tuned.
  const RunnerPlanCache* plan_cache() const { return plan_cache_.get(); }

 private:
  const void* upload_initializer(const std::string& name, const Tensor& value);

  std::shared_ptr<const Graph> graph_;
  RunnerOptions options_;
  std::vector<PassRecord> pass_records_;
  int device_ = 0;
  Stream stream_;
  PinnedStaging staging_;
  std::unique_ptr<memory::ArenaResource> weights_arena_;  // before weights_: it outlives them
  std::map<std::string, DeviceBuffer> weights_;
  LruMap<std::vector<Shape>, std::unique_ptr<Plan>> plans_;
  std::unique_ptr<RunnerPlanCache> plan_cache_;
};

}  // namespace redwood::cuda
