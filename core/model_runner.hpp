#pragma once
// ModelRunner: what the infer stage hands batches to, whatever the device. The contract is
// asynchronous, submit and complete:
//
//   infer stage ──submit(batch, done)──► runner ──► slot: copy in, run, copy out ──► done(result)
//               returns once a slot holds            (a CUDA stream, or a CPU         on the runner's
//               the batch; waits only while          worker thread)                   completion thread,
//               every slot is busy (back-pressure)                                    in submit order
//
// A batch is the row blocks ("parts") of each graph input: one part per frame, concatenated on
// dim 0 where the runner stages them (on the GPU, straight into a slot's device input), run as
// one, and every output is split back into parts of the same rows. A batch may ask to run more
// rows than it has (`run_rows`, a preferred batch size): the extra rows are zeros and their
// outputs are dropped. run() is the synchronous form, for tools and tests.
//
// A batch whose `picture` is set carries graph input 0 as 8-bit pixels [rows, H, W, C]: the runner
// writes the normalized floats into the model's input itself (core/picture_input.hpp), on the GPU
// in a kernel after the copy, so the host neither converts nor copies four bytes per value.
//
// The CPU runner (runtime/cpu_runner.hpp) wraps the CPU executable on a worker thread of its own;
// other devices register a factory here from their backend ("cuda":
// backends/cuda/cuda_model_runner.cpp, a whole-archive link), so stages need no backend's headers
// or libraries, and a build without CUDA simply has no "cuda" entry and says so. make_runner
// (runtime/cpu_runner.hpp) makes either.

#include "core/graph/graph.hpp"
#include "core/kernel_info.hpp"
#include "core/picture_input.hpp"
#include "core/registry.hpp"
#include "core/tensor.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace redwood {

namespace memory {
class MemoryResource;
}

/// Where a runner puts output parts (the frames' pool); empty: Tensor::empty (the heap).
using TensorAllocator = std::function<Tensor(DType, const Shape&)>;

struct InferBatch {
  /// [graph input][part]: part k of every input holds the rows of the k-th frame (dim 0).
  std::vector<std::vector<Tensor>> inputs;
  /// Rows the model runs: 0 for the parts' total, else at least that total; the rows beyond it
  /// are zeros and their outputs are dropped (a size the runner keeps a plan for).
  std::int64_t run_rows = 0;
  TensorAllocator allocate;
  /// Set: graph input 0's parts are 8-bit pixels [rows, H, W, C] that the runner normalizes into
  /// the model's float input (H, W, C those of the input in its layout); padding rows are zeros
  /// of the float input, as for any batch.
  std::optional<PictureInput> picture;
  /// Off: a batch run to ready the runner (a split's prepare, which must run to learn its
  /// segments' shapes), left out of the runner's stats, as a run's batches are what they report.
  bool counted = true;
  /// The rows (and rows run) the batch counts as in the runner's stats, where not its own: a
  /// split's segment runs its batch as one boxed row and counts the split batch's rows
  /// (runtime/split_runner.cpp), so that its times by rows are the model's. 0: its own.
  std::int64_t counted_rows = 0, counted_run_rows = 0;
};

struct InferResult {
  /// [graph output][part], the same rows as the inputs' parts; empty when `error` is set.
  std::vector<std::vector<Tensor>> outputs;
  std::exception_ptr error;
  /// The batch that was submitted, handed back with its parts dropped (each input's vector empty,
  /// its room kept), so that a submitter that keeps it fills the next batch without allocating
  /// (the infer stage does). Empty where a runner does not hand it back.
  InferBatch batch;
};

/// Called once per batch, on the runner's completion thread (never inside submit).
using InferDone = std::function<void(InferResult&)>;

/// What a runner measured of one batch. Times are milliseconds; the phase marks are on the
/// runner's own clock (device events since its epoch on a GPU, the steady clock on the CPU), so
/// that busy time is the union of intervals, not their sum.
struct BatchTiming {
  double wait_ms = 0;  // in submit, waiting for a free slot
  double copy_in_start = 0, compute_start = 0, compute_end = 0, copy_out_end = 0;
  std::size_t bytes_in = 0, bytes_out = 0;
  std::int64_t rows = 0, run_rows = 0;
};

/// A runner's totals since it was made.
struct RunnerStats {
  std::string description;
  int device = -1;    // the GPU's index; -1 for the CPU
  int slots = 0;
  /// Whether copies run beside compute (a GPU with more than one slot): then the device sustains
  /// what its busiest engine allows, else what whole batches allow.
  bool copies_overlap = false;
  std::int64_t batches = 0, rows = 0, run_rows = 0, failed = 0;
  std::map<std::int64_t, std::int64_t> batch_rows;  // rows in a batch -> batches
  /// Batches at one row count, and their times summed.
  struct RowsTimes {
    std::int64_t batches = 0;
    double ms = 0;          // copy in + compute + copy out
    double compute_ms = 0;  // compute alone
  };
  /// Rows a batch ran (padding included) -> its batches' times: what the cost history keeps of a
  /// run (pipelines/pipeline_planner.hpp).
  std::map<std::int64_t, RowsTimes> run_rows_ms;
  double wait_ms = 0;                        // summed over submits
  double copy_in_ms = 0, compute_ms = 0, copy_out_ms = 0;  // summed over batches
  double compute_busy_ms = 0;                // union of compute intervals
  double copy_busy_ms = 0;                   // union of copy intervals (in and out)
  double busy_ms = 0;                        // union of whole batches (copy in to copy out)
  /// Union of the compute intervals of every runner on this runner's GPU, on one clock: the
  /// GPU's busy time whichever models share it (0 on the CPU).
  double device_compute_busy_ms = 0;
  /// Every batch's compute on that GPU summed (every runner's). Over device_compute_busy_ms, it
  /// says how far batches overlapped there: time-sliced with each other, each took that much
  /// longer than it would alone (device_overlap()).
  double device_compute_sum_ms = 0;
  double span_ms = 0;                        // first copy in to last copy out
  /// A split's segment (in SplitRunner::segment_stats()), summed over batches on the host's
  /// clock: from the batch being ready for it (every segment it waits for complete) to its
  /// runner's submit returning, and from then to its completion being called. Less the segment's
  /// copies and compute, their sum is what handing the batch to its runner and back cost.
  double handover_submit_ms = 0, handover_after_ms = 0;
  std::size_t bytes_in = 0, bytes_out = 0;
  double pinned_h2d_gbps = 0, pinned_d2h_gbps = 0;  // the device's measured pinned-copy peak (GPU)

  /// Share of the copy time that ran while compute ran too (0 when nothing was copied).
  double overlap() const;
  /// Bytes per second while copying, in GB/s (0 when nothing was copied).
  double copy_gbps() const;
  /// How many batches ran on this runner's GPU at once, on average while it computed: the summed
  /// compute over the busy time (1 on the CPU, or when nothing overlapped). A batch's time divided
  /// by it is the GPU time the batch cost, which is what it takes alone when the GPU is shared
  /// evenly.
  double device_overlap() const {
    return device_compute_busy_ms > 0 && device_compute_sum_ms > device_compute_busy_ms ? device_compute_sum_ms / device_compute_busy_ms : 1.0;
  }
  /// The time that bounds the runner's throughput: its busiest engine's when copies overlap
  /// compute, else whole batches'.
  double bound_busy_ms() const { return copies_overlap ? std::max(compute_busy_ms, copy_busy_ms) : busy_ms; }
  /// A split's segment: what handing a batch to its runner and back cost, a batch on average
  /// (handover_submit_ms and handover_after_ms less its copies and compute; 0 before a batch).
  double handover_beyond_ms() const {
    if (batches == 0) return 0;
    const double ms = handover_submit_ms + handover_after_ms - copy_in_ms - compute_ms - copy_out_ms;
    return std::max(0.0, ms / static_cast<double>(batches));
  }
};

/// The length of a union of intervals that arrive in any order. The most recent ones are kept
/// merged; the oldest beyond a window are counted and forgotten, and a later interval reaching
/// back behind them counts only its part after them (batches complete nearly in start order, so
/// the window of 256 disjoint pieces is far more than they ever reach back).
class IntervalUnion {
 public:
  IntervalUnion();
  void add(double start, double end);
  double length() const;

 private:
  // (start, end), disjoint, by start: a vector with room for the window, so that adding (once a
  // batch, on every runner) never allocates.
  std::vector<std::pair<double, double>> pieces_;
  double finalized_ = 0;   // length of the pieces forgotten
  double floor_ = -1e300;  // end of the last piece forgotten
};

/// Accumulates BatchTiming into RunnerStats; thread-safe.
class RunnerStatsRecorder {
 public:
  RunnerStatsRecorder(std::string description, int slots, int device = -1, bool copies_overlap = false);
  void record(const BatchTiming& t, bool failed);
  void set_pinned_peak(double h2d_gbps, double d2h_gbps);
  RunnerStats stats() const;

 private:
  mutable std::mutex mutex_;
  RunnerStats stats_;
  IntervalUnion compute_, copy_, busy_;
  double first_start_ = 1e300, last_end_ = -1e300;
};

/// A runner's slots: which are free, and the back-pressure of submit. acquire() hands out the
/// longest-free slot's index, waiting while every slot is busy; release() gives it back once its batch is
/// done; drain() waits until none is in flight. Thread-safe.
class SlotRing {
 public:
  explicit SlotRing(int slots);
  /// A free slot (0 .. slots-1); `waited_ms`, if given, gets the milliseconds spent waiting.
  int acquire(double* waited_ms = nullptr);
  void release(int slot);
  void drain() const;
  int in_flight() const;
  int slots() const { return slots_; }

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable freed_;
  // Free slots, oldest free first (slots are used in turn): a ring over a fixed array, so that
  // taking and giving back a slot (every batch) allocates nothing.
  std::array<int, 4> free_{};
  int first_free_ = 0, free_count_ = 0;
  int slots_;
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;

  /// Hands a batch over; returns once a slot holds it, waiting while every slot is busy. `done`
  /// is called once, on the runner's completion thread, with the outputs or the error. Throws
  /// InvalidArgument, without calling `done`, for a batch that does not fit the model.
  virtual void submit(InferBatch batch, InferDone done) = 0;
  /// Readies the runner for batches of these input shapes (graph input order) before the first
  /// one comes: a GPU runner plans, tunes and captures them on every slot now, so that a run
  /// does not stall when a batch size first appears. What it runs to prepare is not counted in
  /// stats(). Throws what planning throws.
  virtual void prepare(const std::vector<Shape>& input_shapes) {}
  /// Blocks until every batch submitted so far is done.
  virtual void drain() = 0;
  /// Batches submitted and not yet done.
  virtual int in_flight() const = 0;
  /// "cpu", "cuda:0 (NVIDIA H200), fp16, 3 slots": for logs.
  virtual std::string description() const = 0;
  virtual RunnerStats stats() const = 0;
  /// A runner made of others (a model split across devices, runtime/split_runner.hpp): each
  /// one's stats, in order; empty for the others.
  virtual std::vector<RunnerStats> segment_stats() const { return {}; }

  /// Synchronous: every graph input by name (one part each), the graph outputs in the graph's
  /// order; throws what the batch failed with. `counted` off: left out of stats (InferBatch).
  std::vector<Tensor> run(const std::map<std::string, Tensor>& inputs, bool counted = true);

  /// What the runner reports a device at a time: stats(), or for a runner made of others each
  /// segment's, the model's batch sizes (batch_rows) counted once, on the first: the runner's
  /// own, which leave out a batch a later segment failed (its first segment counted it).
  std::vector<RunnerStats> stats_by_segment() const;

 protected:
  /// The graph's inputs, whose names (in order) run() orders the parts by.
  explicit ModelRunner(const Graph& graph);

 private:
  std::vector<std::string> input_names_;
};

/// How many batches a runner keeps in flight, and where.
struct RunnerConfig {
  /// Batches in flight per runner (1-4): on the GPU each slot has its own stream, device buffers
  /// and events, so copy in, compute and copy out of different batches overlap; on the CPU each
  /// is a batch queued for the runner's worker.
  int slots = 3;
  /// The GPU's index (device runners only).
  int device = 0;
  /// The host threads the CPU runner's kernels use (core/host_threads.hpp); 0: the process's
  /// count. The planner sets it per host segment of a split model (Segment::threads).
  int host_threads = 0;
  /// The precision of the convolutions on the GPU ("fp32", "tf32", "fp16", "bf16").
  std::string precision = "fp32";
  /// The device backend's own switches by name, e.g. "wgmma" -> "off" (CUDA:
  /// backends/cuda/cuda_options.hpp); the backend checks them (DeviceRunnerFactory::check_options).
  std::map<std::string, std::string> device_options;
  /// Whether its batches count in its GPU's busy time, the union of every runner's compute there
  /// (RunnerStats::device_compute_busy_ms and device_compute_sum_ms, which a pipeline's summary
  /// and its cost history read). Off for a runner whose work is not a run's: the planner's, timing
  /// a split's segments while a pipeline is built (Partition::segment_timing_config), which would
  /// otherwise count as the pipeline's GPU work. Its own stats count its batches all the same.
  bool device_clock = true;
};

/// Concatenates parts on dim 0 into `out`'s first rows (contiguous, same dtype and trailing
/// dims), zeroing the rows after them; the staging of every runner.
void gather_rows(const std::vector<Tensor>& parts, void* out, std::size_t out_bytes);
/// The rows of every part (a 0-d part is one row) into `rows`, cleared first: callers keep the
/// vector from batch to batch.
void part_rows(const std::vector<Tensor>& parts, std::vector<std::int64_t>& rows);
/// The shape graph input `i` runs at: its parts' with `run_rows` rows, or for a picture (input 0
/// of a batch with `picture`) the model's float shape of its pixels.
Shape batch_input_shape(const InferBatch& batch, std::size_t i, std::int64_t run_rows);
/// The batch's graph inputs as whole tensors of `run_rows` rows, in graph input order: a single
/// part that is the whole batch as it is, else the parts gathered (a picture's normalized) into a
/// tensor from batch.allocate (or the heap), the rows after `total_rows` zeros. Adds the bytes
/// staged to *bytes_in.
std::vector<Tensor> stage_inputs(const InferBatch& batch, std::int64_t total_rows, std::int64_t run_rows,
                                 std::size_t* bytes_in);
/// The same into `staged` (cleared first): a runner keeps the vector from batch to batch.
void stage_inputs(const InferBatch& batch, std::int64_t total_rows, std::int64_t run_rows, std::size_t* bytes_in,
                  std::vector<Tensor>& staged);
/// Throws InvalidArgument naming `what` unless `output` has `rows` rows on dim 0 (a batched model
/// returns one row per item in every output).
void check_output_rows(const Tensor& output, std::int64_t rows, const std::string& what);
/// Splits `whole` (rows on dim 0, `run_rows` of them) into parts of `rows` rows, the first rows
/// first, each a new tensor from `allocate`; the rows past their sum (padding) are dropped. A
/// batch of one part that runs exactly its rows keeps the tensor. Throws InvalidArgument naming
/// `what` when `whole` does not have `run_rows` rows.
std::vector<Tensor> split_rows(const Tensor& whole, const std::vector<std::int64_t>& rows, std::int64_t run_rows,
                               const TensorAllocator& allocate, const std::string& what);
/// The same parts as views of `whole`'s rows, into `parts` (cleared first): nothing is copied,
/// and `whole`'s storage lives while a part does. Throws as split_rows.
void split_rows_as_views(const Tensor& whole, const std::vector<std::int64_t>& rows, std::int64_t run_rows,
                         const std::string& what, std::vector<Tensor>& parts);
/// Checks a batch against the graph's inputs and outputs (counts, dtypes, matching part rows,
/// run_rows, and a picture's pixels against input 0's extents); throws InvalidArgument naming the
/// model and what differs.
void check_batch(const Graph& graph, const InferBatch& batch);

/// A graph's time on a device, node by node (milliseconds, medians of the runs): by the name of
/// the node in the graph the device runs (its own passes may fuse nodes: a fused group counts
/// under the name it keeps), each node run on its own; and the whole graph run as it runs in a
/// runner (on a GPU, one CUDA graph replay), which node times launched one by one overstate.
struct NodeTimes {
  std::map<std::string, double> by_node;
  double whole_ms = 0;
};

/// How a backend other than the CPU makes runners.
struct DeviceMemoryInfo {
  std::int64_t used_bytes = 0, total_bytes = 0;
};

struct DeviceRunnerFactory {
  /// Why this process cannot run models on the device ("" when it can), e.g. CUDA's error for
  /// "no device". Cheap enough to ask once per model at load.
  std::function<std::string()> unavailable;
  /// A runner for `graph`; throws redwood::Error.
  std::function<std::unique_ptr<ModelRunner>(std::shared_ptr<const Graph> graph, const RunnerConfig& config)> make;
  /// Host memory the device copies from and to at full speed (page-locked): the upstream of the
  /// frames' pool while a model runs on this device, so that copies in and out of a slot go
  /// straight from and to the frames' tensors. Process-wide, lives until exit.
  std::function<memory::MemoryResource&()> pinned_memory;
  /// How many devices of this kind the process sees.
  std::function<int()> device_count;
  /// Checks RunnerConfig::device_options: throws InvalidArgument naming an unknown option (and the
  /// known ones) or a bad value. Host only, so a pipeline file is checked where no device is usable.
  std::function<void(const std::map<std::string, std::string>& options)> check_options;
  /// Whether RunnerConfig::device_options' `option` may change what the device runs or how long
  /// it takes: false for one that only changes how the host waits for it (CUDA's
  /// blocking_completion), which the cost history's keys leave out (runtime::cost_precision), so
  /// that times measured with it either way predict both. Empty (no function): every option may.
  std::function<bool(const std::string& option)> option_changes_costs;
  /// Device `index`'s memory: in use (by every process) and in all; zeros when unknown.
  std::function<DeviceMemoryInfo(int index)> memory_info;
  /// Whether the device runs `node`, whose inputs have these dtypes and shapes (and values, where
  /// known on the host), at `precision`: "" when it does, else why not. The partitioner's question
  /// (runtime/partition.hpp); answered on the host, so also where no device is usable.
  std::function<std::string(const Graph& graph, const Node& node, const std::vector<TensorDesc>& inputs,
                            const std::string& precision)>
      supports;
  /// Each node's time on the device for these input shapes, and the whole graph's as it runs
  /// (NodeTimes). The cost model's measurements (`redwood plan --profile`).
  std::function<NodeTimes(std::shared_ptr<const Graph> graph, const std::vector<Shape>& input_shapes,
                          const RunnerConfig& config, int runs)>
      time_nodes;
  /// Starts making device `index` ready (CUDA: its context, a few hundred milliseconds) on a
  /// thread of its own and returns it; the thread is joined when the handle goes. The launcher
  /// holds it while it imports the models that will run there, so that the two overlap. Empty
  /// (no function) where a device has nothing to start.
  std::function<std::jthread(int index)> warm_up;
};

/// Device name ("cuda") -> factory; filled by static registration in the backends ("cpu" is not
/// in it: make_runner makes the CPU runner itself).
Registry<DeviceRunnerFactory>& device_runner_registry();
bool register_device_runner(const std::string& device, DeviceRunnerFactory factory);

}  // namespace redwood
