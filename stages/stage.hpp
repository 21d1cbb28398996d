#pragma once
// Stage: one box of a pipeline (preprocess, infer, postprocess). Like MediaPipe's calculators, a
// stage declares its contract when it is made (the tensor keys it reads and those it writes, with
// what is known of their shapes), and the pipeline checks the chain before any frame runs: a
// stage reading a key nobody writes, or a model input a tensor cannot feed, fails at load with
// the file, line and column.
//
// process() is the public shell (timing, counting); do_process() computes. A stage gets frames
// in batches: infer stages batch across streams up to max_batch(); the others get one at a time.
// An asynchronous stage (infer) takes frames with process_async() and completes them later, on
// another thread (its runner's), so that no thread of the pipeline waits on a device.
// Stages register by type name at the bottom of their file (RW_REGISTER_STAGE).

#include "core/free_list.hpp"
#include "core/graph/graph.hpp"
#include "core/latency_histogram.hpp"
#include "core/model_runner.hpp"
#include "core/registry.hpp"
#include "stages/frame.hpp"
#include "stages/params.hpp"

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace redwood {

namespace runtime {
class JointPlacement;  // runtime/placed_runner.hpp
}

/// What is known at load of a tensor a stage writes: dims (-1 when it varies) and dtype. Dim 0
/// counts the items of one frame (1 for a whole picture, the crops for crops); batching
/// concatenates on it.
struct TensorSpec {
  std::vector<std::int64_t> dims;
  DType dtype = DType::kF32;
  /// A preprocess stage's output: each frame also carries the picture -> tensor mapping under
  /// this key (Frame::transforms), which decoders name as their `transform`.
  bool maps_picture = false;
  /// Set when the tensor is the 8-bit picture [1, H, W, C] (dtype kU8) whose normalization into
  /// the model's float input is left to the model's runner (preprocess `normalize_on: model`):
  /// only a stage that consume_picture()s the key may read it.
  std::optional<PictureInput> picture{};
  /// "[1, 3, 320, 416]", "[1, 320, 416, 3] u8 picture".
  std::string description() const;
};
using TensorSpecs = std::map<std::string, TensorSpec>;

/// A count a stage keeps over the run (tracks started, objects that crossed a line), for the
/// run's summary and the metrics endpoint. `labels` qualify it ({"stream", "cam0"}, {"line",
/// "door"}); a gauge is a level now (a zone's occupancy), the others only grow.
struct StageCounter {
  std::string name;  // lower_snake_case: "tracks_started", "line_crossings"
  std::vector<std::pair<std::string, std::string>> labels;
  double value = 0;
  bool gauge = false;
  std::string help;  // one sentence, for the metrics endpoint
};

/// The models a pipeline file names, loaded once, shared by its stages.
struct ModelEntry {
  std::shared_ptr<const Graph> graph;
  std::filesystem::path path;
  /// Where the infer stage runs it: "cpu" (default), "cuda", or "auto" (CUDA when usable, else
  /// the CPU with a log line); and the precision of its convolutions on the GPU ("fp32", "tf32",
  /// "fp16", "bf16"). See docs/pipelines.md, docs/cuda.md.
  std::string device = "cpu";
  std::string precision = "fp32";
  std::string device_where;  // "file:line:col" of `device:` (or of the model), for errors
  /// Batches in flight per runner (1-4; core/model_runner.hpp, RunnerConfig::slots), runners per
  /// device, and the GPUs (by index) that run the model.
  int slots = 3;
  int instances = 1;
  std::vector<int> devices{0};
  /// `nodes: {NAME: cpu|cuda}`: nodes pinned to a device whatever the partitioner's costs say
  /// (device cuda or auto; docs/planner.md).
  std::map<std::string, std::string> pinned;
  /// `cuda: {NAME: on|off}`: the CUDA backend's switches for this model's GPU runners
  /// (RunnerConfig::device_options; docs/cuda.md, "Options").
  std::map<std::string, std::string> cuda_options;
  /// `device: auto` where CUDA is usable: the pipeline places its auto models together
  /// (pipelines/pipeline_planner.hpp) and hands the decision to the model's runners through this.
  std::shared_ptr<runtime::JointPlacement> joint;
  /// `rows_per_frame`: rows a frame the model is fed where the feeding tensor's rows vary (crops),
  /// for the pipeline's placement (0: the planner's default).
  double rows_per_frame = 0;
};
using ModelTable = std::map<std::string, ModelEntry>;

struct StageArgs {
  std::string name;  // the stage's name in the file
  Params& params;
  const ModelTable& models;
  /// Looks a model up by the name at params[key]; an unknown name fails at that key.
  const ModelEntry& model(const std::string& key) const;
};

class Stage {
 public:
  explicit Stage(std::string name) : name_(std::move(name)) {}
  virtual ~Stage();
  Stage(const Stage&) = delete;
  Stage& operator=(const Stage&) = delete;

  const std::string& name() const { return name_; }
  const std::vector<std::string>& consumes() const { return consumes_; }
  const TensorSpecs& produces() const { return produces_; }

  /// Checks what this stage reads against what earlier stages write (shapes, model inputs);
  /// throws ConfigError. The default asks that every consumed key exists, that a transform comes
  /// from a preprocess stage, and that an 8-bit picture reaches only a stage that takes one.
  virtual void check(const TensorSpecs& available) const;
  /// Frames handled in one call (> 1 only for stages that batch across streams).
  virtual int max_batch() const { return 1; }
  /// How long a partial batch waits for more frames.
  virtual double batch_timeout_ms() const { return 0; }
  /// True when frames must go through one at a time (the stage holds per-call state).
  virtual bool serial() const { return false; }
  /// True when each stream's frames must reach the stage one at a time in read order (a
  /// tracker, analytics): the pipeline puts them back in order before the stage, which then runs
  /// one frame at a time. Other stages see frames in any order, several at once.
  virtual bool ordered() const { return false; }
  /// True when the stage completes frames later, on a thread of its own (process_async).
  virtual bool asynchronous() const { return false; }
  /// How a batching stage waits for a fuller batch: the most a batch's frames may have aged
  /// (since read) when the batch completes (0: no budget), and the time the stage expects a
  /// batch to take, so that the batcher sends one early enough.
  virtual double latency_budget_ms() const { return 0; }
  virtual double expected_batch_ms() const { return 0; }
  /// For an asynchronous stage: the most process_async calls in flight at once (its runners'
  /// slots, and one more waiting for a slot). The stage and the pipeline make that many of their
  /// per-call records before the first call, so that none is made later in the run, when the
  /// runners first happen to be full.
  virtual int max_calls_in_flight() const { return 1; }

  /// Runs the stage on frames (the shell: do_process, then times and counts, and marks each
  /// frame's stage_done with this stage's name and the time it finished).
  void process(std::span<Frame* const> frames);
  /// Called once every frame of a process_async call is complete: nullptr, or the error that
  /// failed them (the frames then carry no output of this stage).
  using Completion = std::function<void(std::exception_ptr)>;
  /// Hands frames over and returns (waiting only for room, e.g. a free slot of a runner);
  /// `done` runs once they are complete, possibly on another thread, possibly before this
  /// returns. The frames must stay alive until then. Stages that are not asynchronous run
  /// process() and call `done` at once. An error while handing over also reaches `done`.
  void process_async(std::span<Frame* const> frames, Completion done);
  /// Waits until every frame handed over has completed (the end of a run).
  virtual void drain() {}
  /// The stage's own counts so far (see StageCounter); called from any thread while frames run.
  virtual std::vector<StageCounter> counters() const { return {}; }
  /// The model runners of this stage (infer), for the run's summary.
  virtual std::vector<RunnerStats> runner_stats() const { return {}; }
  /// Where the stage's runners run ("cpu", "cuda"): a pipeline with a model on a GPU takes the
  /// frames' buffers from page-locked memory, so that copies to and from the GPU need no staging.
  virtual std::string runner_device() const { return "cpu"; }

  std::int64_t calls() const { return calls_.load(); }
  /// Frames handed to the stage.
  std::int64_t frames() const { return frames_.load(); }
  /// Time spent in do_process (for an asynchronous stage: handing frames over, not waiting).
  double busy_ms() const { return busy_us_.load() / 1000.0; }
  /// CPU time the calling threads spent in do_process (their own clock): busy_ms less the time
  /// they waited or were preempted, i.e. what the stage costs the cores.
  double cpu_ms() const { return cpu_us_.load() / 1000.0; }
  /// How long each call took, start to finish: for an asynchronous stage from handing the
  /// frames over to their completion (the device's queueing and work included).
  LatencyHistogram call_latency() const;

 protected:
  /// Throws ConfigError at where_ (the stage's place in the file) with the stage's name.
  [[noreturn]] void fail_config(const std::string& message) const;
  void consume(std::string key) { consume(std::move(key), Reads::kTensor); }
  /// Reads the key's tensor, which may also be an 8-bit picture (TensorSpec::picture): the infer
  /// stage, whose runner normalizes it.
  void consume_picture(std::string key) { consume(std::move(key), Reads::kPicture); }
  /// Reads only the picture -> tensor mapping a preprocess stage writes under the key
  /// (Frame::transforms), not its tensor: decoders' `transform`.
  void consume_transform(std::string key) { consume(std::move(key), Reads::kTransform); }
  void produce(std::string key, TensorSpec spec) { produces_[std::move(key)] = std::move(spec); }
  void remember_place(const Params& params);

 private:
  virtual void do_process(std::span<Frame* const> frames) = 0;
  /// For asynchronous stages: hands frames over, calls `done` once all are complete.
  virtual void do_process_async(std::span<Frame* const> frames, Completion done);

  enum class Reads { kTensor, kPicture, kTransform };
  void consume(std::string key, Reads reads);

  std::string name_;
  std::vector<std::string> consumes_;
  std::vector<Reads> reads_;  // what is read of each of consumes_
  TensorSpecs produces_;
  std::shared_ptr<const ConfigOrigin> origin_;
  YAML::Node where_;
  std::atomic<std::int64_t> calls_{0};
  std::atomic<std::int64_t> cpu_us_{0};
  std::atomic<std::int64_t> frames_{0};
  std::atomic<std::int64_t> busy_us_{0};
  mutable std::mutex latency_mutex_;
  LatencyHistogram call_latency_;
  // One process_async call: the frames to mark when it completes (a copy: the caller's span may
  // be gone by then), when it started, and the caller's continuation. The continuation handed to
  // do_process_async holds only a pointer to it, which std::function keeps in place. Recycled
  // through a free list, max_calls_in_flight() of them made before the first call, so that a call
  // allocates nothing.
  struct AsyncCall {
    Stage* stage = nullptr;
    Clock::time_point start;
    std::vector<Frame*> marked;
    Completion done;
  };
  void complete_async(AsyncCall* call, std::exception_ptr error);
  FreeList<AsyncCall> async_calls_;
  std::once_flag calls_made_;  // the first max_calls_in_flight() made
};

using StageFactory = std::function<std::unique_ptr<Stage>(StageArgs&)>;

/// Type name -> factory; filled by static registration, read at load.
Registry<StageFactory>& stage_registry();
bool register_stage(const std::string& type, StageFactory factory);

}  // namespace redwood

#define RW_REGISTER_STAGE(type, Class)                                                            \
  [[maybe_unused]] static const bool rw_stage_registered_##Class =                                \
      ::redwood::register_stage(type, [](::redwood::StageArgs& args) -> std::unique_ptr<::redwood::Stage> { \
        return std::make_unique<Class>(args);                                                     \
      })
