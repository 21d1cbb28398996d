// infer: runs a model (on the CPU or a GPU, see below) on a tensor each frame carries. Frames from every
// stream are batched together (up to max_batch frames, a partial batch waiting at most
// timeout_ms, or less when the latency budget says so): their tensors become the parts of one
// batch, which the model's runner concatenates on dim 0 where it stages them, runs once, and
// splits back. Dim 0 is "items of a frame": 1 for a whole picture, K for K crops from an earlier
// stage (a secondary model), 0 when a frame has none (the frame then gets no output).
//
//   - name: det
//     type: infer
//     model: det
//     input: det_in                       # tensor key feeding the model's (only) input
//     outputs: {sigmoid_0.tmp_0: det_prob} # model output -> tensor key (default: its own name)
//     max_batch: 8                        # frames per batch
//     timeout_ms: 5                       # how long a partial batch waits for more frames
//     latency_budget_ms: 50               # frames read this long ago go at once (0: no budget)
//     batch_sizes: [1, 2, 4, 8]           # rows a batch is padded to (GPU default: powers of two)
//
// The stage is asynchronous: it hands a batch to a runner and is free at once; the runner
// completes it on its own thread and the frames go on from there (core/model_runner.hpp). The
// model runs where its entry under `models:` says (device: cpu | cuda | auto, precision, slots,
// instances, devices): one runner per instance and device, each batch to the least busy.
//
// The input may be a preprocess stage's 8-bit picture (its normalize_on: model, the default where
// the model runs on a GPU): the stage then puts the picture's normalization (TensorSpec::picture)
// on every batch, and the runner writes the model's float input from the pixels
// (core/picture_input.hpp).

#include "core/log.hpp"
#include "core/model_runner.hpp"
#include "runtime/cpu_runner.hpp"
#include "runtime/placed_runner.hpp"
#include "stages/frame_memory.hpp"
#include "stages/stage.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <atomic>
#include <set>
#include <cstring>
#include <future>
#include <mutex>
#include <optional>

namespace redwood {
namespace {

// The model's runners on its configured device: `instances` per device listed. `device: cuda`
// where CUDA is not built or not usable fails at load, naming the model, the config location and
// CUDA's reason; `device: auto` then runs on the CPU and logs why. Where CUDA is usable, `auto`
// and a `cuda` model with ops the GPU lacks get placed runners (the partitioner's choice).
std::vector<std::unique_ptr<ModelRunner>> make_runners(const ModelEntry& model, const std::string& model_name,
                                                       std::string& device) {
  std::vector<std::unique_ptr<ModelRunner>> runners;
  RunnerConfig config;
  config.slots = model.slots;
  config.precision = model.precision;
  const auto on_cpu = [&] {
    device = "cpu";
    config.device_options.clear();  // the CUDA backend's, not the CPU's
    for (int i = 0; i < model.instances; ++i) runners.push_back(make_cpu_runner(model.graph, config));
    return std::move(runners);
  };
  if (model.device == "cpu") return on_cpu();
  config.device_options = model.cuda_options;
  const auto& registry = device_runner_registry();
  const auto it = registry.find("cuda");
  std::string reason = it == registry.end() ? "this Redwood was built without CUDA" : it->second.unavailable();
  if (reason.empty()) {
    const int count = it->second.device_count ? it->second.device_count() : 1;
    for (int d : model.devices) {
      if (d >= count) {
        throw ConfigError(fmt::format("{}: model '{}': devices: GPU {} does not exist (this machine has {})",
                                      model.device_where, model_name, d, count));
      }
    }
    // The partitioner places the model when its shapes are known (runtime/placed_runner.hpp):
    // with `auto`, by cost across the CPU and the GPU; with `cuda`, when the GPU lacks kernels
    // for some of its ops, the GPU running what it can and the CPU the rest.
    const std::vector<std::string> missing = runtime::ops_without_kernel(*model.graph, Device::kCuda);
    if (model.device == "auto" || !missing.empty() || !model.pinned.empty()) {
      runtime::PartitionOptions options;
      options.devices = {"cpu", "cuda"};
      options.pinned = model.pinned;
      if (model.device == "cuda") options.prefer = "cuda";
      for (int d : model.devices) {
        config.device = d;
        for (int i = 0; i < model.instances; ++i) {
          runners.push_back(runtime::make_placed_runner(model.graph, options, config, model_name,
                                                        model.device == "auto" ? model.joint : nullptr));
        }
      }
      if (missing.empty()) {
        log().info("model '{}': placed across the CPU and the GPU {} when its input shapes are known", model_name,
                   model.device == "auto" ? "by cost" : "(the GPU running all but the pinned nodes)");
      } else {
        log().info("model '{}': the GPU has no kernel for {}: it runs split, the GPU running what it can",
                   model_name, fmt::join(missing, ", "));
      }
      device = "cuda";
      return runners;
    }
    try {
      for (int d : model.devices) {
        config.device = d;
        for (int i = 0; i < model.instances; ++i) runners.push_back(it->second.make(model.graph, config));
      }
      log().info("model '{}' runs on {}{}", model_name, runners.front()->description(),
                 runners.size() > 1 ? fmt::format(" ({} runners)", runners.size()) : std::string());
      device = "cuda";
      return runners;
    } catch (const Error& e) {
      runners.clear();
      reason = e.what();
    }
  }
  if (model.device == "auto") {
    log().warn("{}: model '{}': device auto: running on the CPU, CUDA is not usable: {}", model.device_where, model_name, reason);
    return on_cpu();
  }
  throw ConfigError(fmt::format("{}: model '{}': device cuda is not usable: {}", model.device_where, model_name, reason));
}

class InferStage;
struct Dispatch;

// One submission of a dispatch to a runner: the frames it feeds (indices into the dispatch's),
// which item of theirs, when it went, and the batch it hands over. The runner's continuation
// holds only a pointer to it, which std::function keeps in place (no allocation); the runner
// hands the batch back with the result (InferResult::batch), so that its vectors keep their room
// for the submission's next use.
struct Submission {
  InferStage* stage = nullptr;
  Dispatch* dispatch = nullptr;
  std::vector<std::size_t> targets;
  std::size_t item = 0;
  Clock::time_point submitted;
  InferBatch batch;
};

// One process_async call: its frames, the outputs arriving per submission, and the countdown
// that completes the call when the last submission (or the handing over) is done. Dispatches
// are recycled by their stage (a free list) with their vectors' room, so that a call allocates
// nothing once the stage has as many as it ever has in flight.
struct Dispatch {
  std::vector<Frame*> frames;
  // [frame][output][item]: outputs as they arrive (one item per frame for a batched model; one
  // per row for a model of batch 1 fed K rows). Only the first frames.size() are this call's.
  std::vector<std::vector<std::vector<Tensor>>> outputs;
  std::vector<Submission> submissions;  // the first `submitted` are this call's
  std::size_t submitted = 0;
  std::vector<std::size_t> pending, group, rest;  // do_process_async's scratch
  std::atomic<int> countdown{1};  // submissions in flight, plus the handing-over thread's own count
  std::mutex mutex;
  std::exception_ptr error;
  Stage::Completion done;
};

class InferStage final : public Stage {
 public:
  explicit InferStage(StageArgs& args) : Stage(args.name) {
    Params& p = args.params;
    remember_place(p);
    const ModelEntry& model = args.model("model");
    graph_ = model.graph;
    slots_ = model.slots;
    model_name_ = p.get<std::string>("model", "");
    if (graph_->inputs.size() != 1) {
      p.fail("model", fmt::format("has {} inputs; infer feeds models of one input", graph_->inputs.size()));
    }
    input_key_ = p.require<std::string>("input");
    input_where_ = p.origin().where(p.node("input"));
    consume_picture(input_key_);
    max_batch_ = p.get<int>("max_batch", 1);
    batch_where_ = p.origin().where(p.node("max_batch") ? p.node("max_batch") : p.node("model"));
    timeout_ms_ = p.get<double>("timeout_ms", 5.0);
    latency_budget_ms_ = p.get<double>("latency_budget_ms", 0.0);
    if (max_batch_ < 1) p.fail("max_batch", "must be at least 1");
    if (timeout_ms_ < 0) p.fail("timeout_ms", "must be >= 0");
    if (latency_budget_ms_ < 0) p.fail("latency_budget_ms", "must be >= 0 (0: no budget)");
    const YAML::Node outs = p.node("outputs");
    if (outs && !outs.IsNull() && !outs.IsMap()) p.origin().fail(outs, fmt::format("stage '{}': outputs: expected a map from model output to tensor key", name()));
    std::set<std::string> named;
    for (const auto& out : graph_->outputs) {
      std::string key = out.name;
      if (outs && outs[out.name]) key = outs[out.name].as<std::string>();
      named.insert(out.name);
      output_keys_.push_back(key);
      TensorSpec spec;
      for (const auto& d : out.dims) spec.dims.push_back(d.value);
      if (!spec.dims.empty()) spec.dims[0] = -1;
      produce(key, spec);
    }
    if (outs && outs.IsMap()) {
      for (const auto& kv : outs) {
        if (!named.count(kv.first.as<std::string>())) {
          p.origin().fail(kv.first, fmt::format("stage '{}': the model has no output '{}'", name(), kv.first.as<std::string>()));
        }
      }
    }
    const Dim& batch = graph_->inputs[0].dims.empty() ? Dim{} : graph_->inputs[0].dims[0];
    fixed_batch_one_ = batch.known() && batch.value == 1;
    if (batch.known() && batch.value != 1) p.fail("model", fmt::format("input batch is fixed at {}; only 1 or dynamic are fed", batch.value));
    runners_ = make_runners(model, model_name_, device_);
    if (model.device == "auto" && device_ != "cpu") joint_ = model.joint;  // the pipeline places it with the others
    // Preferred batch sizes: rows a batch is padded to, so that a GPU keeps one captured plan per
    // size. Default on a GPU: the next power of two; on the CPU padding only costs, so none.
    if (p.has("batch_sizes")) {
      batch_sizes_ = p.get<std::vector<std::int64_t>>("batch_sizes", {});
      if (batch_sizes_.empty()) p.fail("batch_sizes", "expected a list of row counts, e.g. [1, 2, 4, 8]");
      for (std::size_t i = 0; i < batch_sizes_.size(); ++i) {
        if (batch_sizes_[i] < 1 || (i > 0 && batch_sizes_[i] <= batch_sizes_[i - 1])) {
          p.fail("batch_sizes", "expected increasing row counts of at least 1, e.g. [1, 2, 4, 8]");
        }
      }
      if (fixed_batch_one_ && batch_sizes_ != std::vector<std::int64_t>{1}) {
        p.fail("batch_sizes", "the model's batch is fixed at 1");
      }
      pad_to_power_of_two_ = false;
    } else {
      pad_to_power_of_two_ = device_ != "cpu" && !fixed_batch_one_;
    }
  }

  void check(const TensorSpecs& available) const override {
    Stage::check(available);
    const TensorSpec& spec = available.at(input_key_);
    const ValueInfo& in = graph_->inputs[0];
    const auto cannot = [&](const std::string& why) {
      throw ConfigError(fmt::format("{}: stage '{}': tensor '{}' {} cannot feed input '{}' {} of model '{}': {}",
                                    input_where_, name(), input_key_, spec.description(), in.name, in.description(),
                                    model_name_, why));
    };
    if (in.dtype != DType::kF32) cannot("the model wants " + std::string(dtype_name(in.dtype)) + ", stages make float");
    if (spec.picture) {
      // Pixels [1, H, W, C]: H, W and C must be the model input's, read in the picture's layout.
      if (spec.dims.size() != 4) cannot("a picture is [1, H, W, C]");
      const std::string why = picture_mismatch(in, *spec.picture, spec.dims[1], spec.dims[2]);
      if (!why.empty()) cannot(why);
      picture_ = spec.picture;
    } else {
      if (spec.dtype != DType::kF32) cannot(fmt::format("it is {}, the model takes float", dtype_name(spec.dtype)));
      if (in.has_shape && in.dims.size() != spec.dims.size()) cannot("rank differs");
      for (std::size_t i = 1; in.has_shape && i < in.dims.size(); ++i) {
        if (in.dims[i].known() && spec.dims[i] >= 0 && in.dims[i].value != spec.dims[i]) {
          cannot(fmt::format("dimension {} is {} here, {} in the model", i, spec.dims[i], in.dims[i].value));
        }
      }
      picture_.reset();
    }
    if (joint_) joint_->add_feed({name(), max_batch_, timeout_ms_, spec.dims.empty() ? 1 : spec.dims[0]});
    prepare_batch_sizes(spec);
  }

  // A pipeline that placed the model with the others decides its batch size too.
  int max_batch() const override { return joint_ ? joint_->batch_frames(max_batch_) : max_batch_; }
  double batch_timeout_ms() const override { return timeout_ms_; }
  double latency_budget_ms() const override { return latency_budget_ms_; }
  double expected_batch_ms() const override { return expected_ms_.load(std::memory_order_relaxed); }
  bool asynchronous() const override { return true; }
  // Each runner holds `slots` batches; the batcher's thread waits with one more for a free slot.
  int max_calls_in_flight() const override { return static_cast<int>(runners_.size()) * slots_ + 1; }
  std::string runner_device() const override { return device_; }

  void drain() override {
    for (auto& r : runners_) r->drain();
  }

  // A split model reports each segment's runner (each is busy on its own device), the model's
  // batch sizes on the first (ModelRunner::stats_by_segment); a placed runner's segments carry
  // their measured and predicted times (runtime/placed_runner.hpp).
  std::vector<RunnerStats> runner_stats() const override {
    std::vector<RunnerStats> out;
    for (const auto& r : runners_) {
      std::vector<RunnerStats> parts = r->stats_by_segment();
      for (std::size_t k = 0; k < parts.size(); ++k) {
        RunnerStats& st = parts[k];
        st.description = parts.size() == 1 ? fmt::format("model '{}' on {}", model_name_, r->description())
                                           : fmt::format("model '{}' segment {} of {} on {}", model_name_, k + 1,
                                                         parts.size(), st.description);
        out.push_back(std::move(st));
      }
    }
    return out;
  }

 private:
  // process(): the same work, waited for (single-stage tests, tools).
  void do_process(std::span<Frame* const> frames) override {
    std::promise<void> finished;
    do_process_async(frames, [&finished](std::exception_ptr error) {
      if (error) {
        finished.set_exception(error);
      } else {
        finished.set_value();
      }
    });
    finished.get_future().get();
  }

  void do_process_async(std::span<Frame* const> frames, Completion done) override {
    Dispatch* d = acquire_dispatch();
    d->frames.assign(frames.begin(), frames.end());
    if (d->outputs.size() < frames.size()) d->outputs.resize(frames.size());
    d->done = std::move(done);
    try {
      dispatch(*d, frames);
    } catch (...) {
      fail(*d, std::current_exception());  // completes once what was handed over is done
    }
    release(d);
  }

  void dispatch(Dispatch& dr, std::span<Frame* const> frames) {
    Dispatch* d = &dr;
    // Frames whose item shapes agree share a submission (streams of different sizes cannot).
    std::vector<std::size_t>& pending = d->pending;
    std::size_t most_submissions = 0;
    for (std::size_t i = 0; i < frames.size(); ++i) {
      auto it = frames[i]->tensors.find(input_key_);
      if (it == frames[i]->tensors.end() || !it->second.defined() || it->second.rank() == 0 || it->second.dim(0) == 0) continue;
      pending.push_back(i);
      most_submissions += fixed_batch_one_ ? static_cast<std::size_t>(it->second.dim(0)) : 1;
    }
    // Room for every submission first: the runners' continuations point at them.
    if (d->submissions.size() < most_submissions) d->submissions.resize(most_submissions);
    while (!pending.empty()) {
      const Shape item = item_shape(frames[pending.front()]);
      std::vector<std::size_t>& group = d->group;
      std::vector<std::size_t>& rest = d->rest;
      group.clear();
      rest.clear();
      for (std::size_t i : pending) (item_shape(frames[i]) == item ? group : rest).push_back(i);
      if (fixed_batch_one_) {
        // A model of batch 1: one submission per row, each a view of that row of the frame's tensor.
        for (std::size_t i : group) {
          // The rows are views: the frame keeps the (contiguous) tensor alive until completion.
          Tensor& all = frames[i]->tensors.at(input_key_);
          if (!all.is_contiguous()) all = all.contiguous();
          const std::int64_t k = all.dim(0);
          size_outputs(d->outputs[i], static_cast<std::size_t>(k));
          for (std::int64_t r = 0; r < k; ++r) {
            Submission& sub = next_submission(*d);
            sub.targets.push_back(i);
            sub.item = static_cast<std::size_t>(r);
            sub.batch.inputs[0].push_back(row_of(all, r));
            submit(sub);
          }
        }
      } else {
        Submission& sub = next_submission(*d);
        for (std::size_t i : group) {
          sub.batch.inputs[0].push_back(frames[i]->tensors.at(input_key_));
          size_outputs(d->outputs[i], 1);
          sub.targets.push_back(i);
        }
        sub.item = 0;
        submit(sub);
      }
      pending.swap(rest);
    }
  }

  // A frame's outputs: one vector of `items` per model output, emptied of an earlier call's.
  void size_outputs(std::vector<std::vector<Tensor>>& outputs, std::size_t items) const {
    outputs.resize(output_keys_.size());
    for (auto& per_output : outputs) {
      per_output.clear();
      per_output.resize(items);
    }
  }

  // The dispatch's next submission, its targets and its batch's one input emptied.
  static Submission& next_submission(Dispatch& d) {
    Submission& sub = d.submissions[d.submitted++];
    sub.dispatch = &d;
    sub.targets.clear();
    sub.batch.inputs.resize(1);
    sub.batch.inputs[0].clear();
    return sub;
  }

  Dispatch* acquire_dispatch() {
    {
      std::lock_guard lock(dispatch_mutex_);
      if (!dispatches_made_) {
        dispatches_made_ = true;
        const auto n = static_cast<std::size_t>(max_calls_in_flight());
        idle_dispatches_.reserve(n);
        for (std::size_t i = 0; i < n; ++i) idle_dispatches_.push_back(make_dispatch());
      }
      if (!idle_dispatches_.empty()) {
        Dispatch* d = idle_dispatches_.back().release();
        idle_dispatches_.pop_back();
        return d;
      }
    }
    return make_dispatch().release();
  }

  // A dispatch with the room of a full batch (its first submission's too), so that it does not
  // grow later in the run, when batches happen to fill.
  std::unique_ptr<Dispatch> make_dispatch() const {
    auto d = std::make_unique<Dispatch>();
    const auto full = static_cast<std::size_t>(max_batch());
    d->frames.reserve(full);
    d->pending.reserve(full);
    d->group.reserve(full);
    d->rest.reserve(full);
    d->outputs.resize(full);
    for (auto& outputs : d->outputs) size_outputs(outputs, 1);
    Submission& first = d->submissions.emplace_back();
    first.targets.reserve(full);
    first.batch.inputs.resize(1);
    first.batch.inputs[0].reserve(full);
    return d;
  }

  // Back to the free list, holding nothing of the call (tensors, frames, the continuation).
  void recycle(Dispatch* d) {
    for (std::size_t i = 0; i < d->frames.size(); ++i) {
      for (auto& per_output : d->outputs[i]) per_output.clear();
    }
    for (std::size_t k = 0; k < d->submitted; ++k) {
      d->submissions[k].targets.clear();
      for (auto& parts : d->submissions[k].batch.inputs) parts.clear();
    }
    d->frames.clear();
    d->pending.clear();
    d->group.clear();
    d->rest.clear();
    d->submitted = 0;
    d->countdown.store(1, std::memory_order_relaxed);
    d->error = nullptr;
    d->done = nullptr;
    std::lock_guard lock(dispatch_mutex_);
    idle_dispatches_.emplace_back(d);
  }

  // When the tensor's item shape is known at load, the runners make their plans for the batch
  // sizes the run will use now (on a GPU: tuning and capture, which would otherwise stall the
  // first batch of each size for up to seconds, and back up every stream; on the CPU: oneDNN's
  // primitives and the executor's memory plan, whose making allocates in the middle of a run):
  // every size of an explicit `batch_sizes`, else the row counts a batch runs at up to the rows
  // of a full batch (a GPU's powers of two; on the CPU every count, as the CPU does not pad).
  // Whole pictures are one row a frame; crops, not known, are assumed one a frame: a batch of
  // more rows than prepared runs on the GPU at a new size, on the CPU in prepared pieces
  // (runtime/cpu_runner.cpp).
  void prepare_batch_sizes(const TensorSpec& spec) const {
    if (spec.dims.empty()) return;
    Shape shape(spec.dims.begin(), spec.dims.end());
    for (std::size_t i = 1; i < shape.size(); ++i) {
      if (shape[i] < 0) return;
    }
    if (picture_) shape = picture_model_shape(shape, *picture_);  // the runner plans the float input
    const std::int64_t rows_per_frame = spec.dims[0] > 0 ? spec.dims[0] : 1;
    const std::int64_t most = fixed_batch_one_ ? 1 : run_rows(rows_per_frame * max_batch_);
    std::set<std::int64_t> sizes{most};
    if (!fixed_batch_one_) sizes.insert(batch_sizes_.begin(), batch_sizes_.end());
    for (std::int64_t r = 1; r < most; r = run_rows(r) + 1) sizes.insert(run_rows(r));
    for (std::int64_t rows : sizes) {
      shape[0] = rows;
      try {
        for (const auto& runner : runners_) runner->prepare({shape});
      } catch (const Error& e) {
        // A model that cannot run a batch the stage will form fails here, at load, rather than
        // at its first such batch in the middle of the run.
        throw ConfigError(fmt::format("{}: stage '{}': model '{}' cannot run a batch of {} row(s) ({}; max_batch {}): {}",
                                      batch_where_, name(), model_name_, rows, shape_str(shape), max_batch_, e.what()));
      }
    }
  }

  Shape item_shape(Frame* f) const {
    const Shape& s = f->tensors.at(input_key_).shape();
    return Shape(s.begin() + 1, s.end());
  }

  static Tensor row_of(const Tensor& t, std::int64_t r) {
    Shape shape = t.shape();
    const std::size_t row_bytes = t.nbytes() / static_cast<std::size_t>(shape[0]);
    shape[0] = 1;
    return Tensor::view(static_cast<std::byte*>(t.raw_data()) + row_bytes * static_cast<std::size_t>(r), t.dtype(), shape);
  }

  std::int64_t run_rows(std::int64_t rows) const {
    for (auto size : batch_sizes_) {
      if (size >= rows) return size;
    }
    if (!pad_to_power_of_two_ && batch_sizes_.empty()) return rows;
    std::int64_t p = 1;
    while (p < rows) p *= 2;
    return p;
  }

  ModelRunner& least_busy_runner() {
    if (runners_.size() == 1) return *runners_.front();
    // Ties go round-robin, so that idle runners take turns.
    const std::size_t start = next_runner_.fetch_add(1, std::memory_order_relaxed);
    ModelRunner* best = nullptr;
    int best_load = 0;
    for (std::size_t k = 0; k < runners_.size(); ++k) {
      ModelRunner& r = *runners_[(start + k) % runners_.size()];
      const int load = r.in_flight();
      if (best == nullptr || load < best_load) {
        best = &r;
        best_load = load;
      }
    }
    return *best;
  }

  // Submits the submission's batch (its parts: one per frame in its targets, its item of each)
  // to a runner; the outputs land in the dispatch when the runner completes them.
  void submit(Submission& sub) {
    Dispatch& d = *sub.dispatch;
    sub.stage = this;
    InferBatch& batch = sub.batch;
    std::int64_t rows = 0;
    for (const Tensor& t : batch.inputs[0]) rows += t.dim(0);
    batch.run_rows = fixed_batch_one_ ? 0 : run_rows(rows);
    batch.picture = picture_;
    FrameMemory* memory = d.frames[sub.targets.front()]->memory;
    batch.allocate = [memory](DType dtype, const Shape& shape) { return frame_tensor(memory, dtype, shape); };
    d.countdown.fetch_add(1, std::memory_order_relaxed);
    sub.submitted = Clock::now();
    try {
      Submission* s = &sub;
      least_busy_runner().submit(std::move(batch), [s](InferResult& r) { s->stage->complete(*s, r); });
    } catch (...) {
      fail(d, std::current_exception());
      release(&d);
    }
  }

  void complete(Submission& sub, InferResult& r) {
    sub.batch = std::move(r.batch);  // its vectors' room, for the submission's next batch
    Dispatch* d = sub.dispatch;
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - sub.submitted).count();
    // A moving average of a batch's time from submit to completion: what the batcher plans with.
    const double before = expected_ms_.load(std::memory_order_relaxed);
    expected_ms_.store(before == 0 ? ms : 0.9 * before + 0.1 * ms, std::memory_order_relaxed);
    if (r.error) {
      fail(*d, r.error);
    } else {
      for (std::size_t o = 0; o < r.outputs.size() && o < output_keys_.size(); ++o) {
        for (std::size_t k = 0; k < sub.targets.size(); ++k) d->outputs[sub.targets[k]][o][sub.item] = std::move(r.outputs[o][k]);
      }
    }
    release(d);
  }

  static void fail(Dispatch& d, std::exception_ptr error) {
    std::lock_guard lock(d.mutex);
    if (!d.error) d.error = std::move(error);
  }

  // Drops one count; the last one writes the outputs into the frames, recycles the dispatch and
  // completes the call.
  void release(Dispatch* d) {
    if (d->countdown.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    std::exception_ptr error = d->error;
    if (!error) {
      try {
        for (std::size_t i = 0; i < d->frames.size(); ++i) {
          Frame* f = d->frames[i];
          for (std::size_t o = 0; o < d->outputs[i].size(); ++o) {
            auto& items = d->outputs[i][o];
            if (items.empty()) continue;  // a frame with no rows gets no output
            f->tensors[output_keys_[o]] = items.size() == 1 ? std::move(items[0]) : concat_rows(items, f->memory);
          }
        }
      } catch (...) {
        error = std::current_exception();
      }
    }
    Completion done = std::move(d->done);
    recycle(d);
    done(error);
  }

  static Tensor concat_rows(const std::vector<Tensor>& parts, FrameMemory* memory) {
    Shape shape = parts.front().shape();
    shape[0] = 0;
    for (const auto& t : parts) shape[0] += t.dim(0);
    Tensor out = frame_tensor(memory, parts.front().dtype(), shape);
    gather_rows(parts, out.raw_data(), out.nbytes());
    return out;
  }

  std::shared_ptr<const Graph> graph_;
  std::string model_name_;
  std::string input_key_, input_where_;
  std::string batch_where_;  // where max_batch is written (else the model's key), for errors
  std::vector<std::string> output_keys_;
  // The picture's normalization, when the input is a preprocess stage's 8-bit pixels: learnt from
  // its spec in check(), which runs once at load, before any frame.
  mutable std::optional<PictureInput> picture_;
  int max_batch_ = 1;
  double timeout_ms_ = 5;
  double latency_budget_ms_ = 0;
  bool fixed_batch_one_ = false;
  std::vector<std::int64_t> batch_sizes_;
  bool pad_to_power_of_two_ = false;
  std::string device_ = "cpu";
  std::vector<std::unique_ptr<ModelRunner>> runners_;
  std::shared_ptr<runtime::JointPlacement> joint_;
  std::atomic<std::size_t> next_runner_{0};
  std::atomic<double> expected_ms_{0};
  int slots_ = 1;  // batches in flight per runner (the model's `slots`)
  std::mutex dispatch_mutex_;
  std::vector<std::unique_ptr<Dispatch>> idle_dispatches_;  // recycled by release()
  bool dispatches_made_ = false;  // the first max_calls_in_flight() are in idle_dispatches_
};

}  // namespace

RW_REGISTER_STAGE("infer", InferStage);

}  // namespace redwood
