#include "runtime/split_runner.hpp"

#include "core/error.hpp"
#include "core/log.hpp"
#include "runtime/cpu_runner.hpp"
#include "runtime/value_pool.hpp"

#include <fmt/format.h>

#include <chrono>
#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>

namespace redwood::runtime {
namespace {

Tensor box(const Tensor& t) { return t.contiguous().reshaped(boxed_shape(t.shape())); }

Tensor unbox(const Tensor& t) {
  RW_EXPECTS(t.rank() >= 1 && t.dim(0) == 1, InvalidArgument, "a segment returned {}, expected one boxed value",
             t.description());
  return t.reshaped(Shape(t.shape().begin() + 1, t.shape().end()));
}

class SplitRunner final : public ModelRunner {
 public:
  SplitRunner(const Partition& partition, const RunnerConfig& config)
      : ModelRunner(*partition.analysis.graph),
        graph_(partition.analysis.graph),
        segments_(partition.segments),
        recorder_(describe(partition, config), config.slots, config.device, true) {
    RW_EXPECTS(!segments_.empty(), InvalidArgument, "{}: nothing to run (no segment)", graph_->name);
    std::vector<std::string> devices;  // each segment's
    for (const Segment& s : segments_) devices.push_back(partition.devices[static_cast<std::size_t>(s.device)]);
    values_ = std::make_shared<ValuePool>(accelerator_pinned_memory(devices));
    for (const auto& vi : graph_->outputs) output_what_.push_back(fmt::format("output '{}'", vi.name));
    for (std::size_t k = 0; k < segments_.size(); ++k) {
      RunnerConfig own = config;
      own.host_threads = segments_[k].threads;  // a host segment's runner, on the threads chosen for it
      runners_.push_back(make_runner(devices[k], segments_[k].graph, own));
    }
    // Which segments each one waits for: those that make its inputs.
    std::map<std::string, std::size_t> maker;
    for (std::size_t k = 0; k < segments_.size(); ++k) {
      for (const auto& out : segments_[k].outputs) maker[out] = k;
    }
    waits_for_.resize(segments_.size());
    next_.resize(segments_.size());
    for (std::size_t k = 0; k < segments_.size(); ++k) {
      std::set<std::size_t> from;
      for (const auto& in : segments_[k].inputs) {
        if (auto it = maker.find(in); it != maker.end()) from.insert(it->second);
      }
      waits_for_[k] = static_cast<int>(from.size());
      for (std::size_t f : from) next_[f].push_back(k);
    }
  }

  ~SplitRunner() override {
    drain();
    runners_.clear();  // each waits for its own batches, first to last
  }

  void submit(InferBatch batch, InferDone done) override {
    check_batch(*graph_, batch);
    auto job = std::make_shared<Job>();
    job->start = Clock::now();
    part_rows(batch.inputs[0], job->rows);
    std::int64_t total = 0;
    for (auto r : job->rows) total += r;
    job->run_rows = batch.run_rows > 0 ? batch.run_rows : total;
    job->total = total;
    job->counted = batch.counted;
    job->on_done = std::move(done);
    // The parts are gathered into whole values from this runner's pool (an accelerator's pinned
    // memory), whatever the caller's: a segment on a GPU then copies them in straight from it.
    batch.allocate = values_->allocator();
    std::vector<Tensor> staged = stage_inputs(batch, total, job->run_rows, &job->bytes_in);
    for (std::size_t i = 0; i < staged.size(); ++i) job->values[graph_->inputs[i].name] = std::move(staged[i]);
    job->waiting = waits_for_;
    job->times.resize(segments_.size());
    job->staged = Clock::now();
    {
      std::lock_guard lock(mutex_);
      ++in_flight_;
      job->sequence = submitted_++;
    }
    // The segments that read only the model's inputs start now; each completion starts those it
    // was the last to wait for.
    std::vector<std::size_t> roots;
    for (std::size_t k = 0; k < segments_.size(); ++k) {
      if (waits_for_[k] == 0) roots.push_back(k);
    }
    job->outstanding = static_cast<int>(roots.size());
    if (launch(job, roots)) end(job);
  }

  // Runs one batch of zeros at these shapes, which tells each segment the shapes its inputs take
  // (only running does), then has each segment's runner prepare those shapes: a runner with slots
  // plans every slot, not only the one the batch went through, so that no later batch tunes or
  // captures a plan inside its submit. The batch is not counted, here or by the segments'
  // runners: their stats are the run's batches (a pipeline prepares every batch size it may form,
  // up to its largest). Not while batches are in flight.
  void prepare(const std::vector<Shape>& input_shapes) override {
    RW_EXPECTS(input_shapes.size() == graph_->inputs.size(), InvalidArgument, "{}: {} shapes for {} inputs",
               graph_->name, input_shapes.size(), graph_->inputs.size());
    std::map<std::string, Tensor> zeros;
    for (std::size_t i = 0; i < input_shapes.size(); ++i) {
      const DType dtype = graph_->inputs[i].dtype == DType::kUndefined ? DType::kF32 : graph_->inputs[i].dtype;
      zeros[graph_->inputs[i].name] = Tensor::zeros(dtype, input_shapes[i]);
    }
    {
      std::lock_guard lock(mutex_);
      prepared_shapes_.assign(segments_.size(), {});
      preparing_ = true;
    }
    std::vector<std::vector<Shape>> shapes;
    try {
      run(zeros, false);
    } catch (...) {
      std::lock_guard lock(mutex_);
      preparing_ = false;
      throw;
    }
    {
      std::lock_guard lock(mutex_);
      preparing_ = false;
      shapes = std::move(prepared_shapes_);
    }
    for (std::size_t k = 0; k < runners_.size(); ++k) {
      if (!shapes[k].empty()) runners_[k]->prepare(shapes[k]);
    }
  }

  void drain() override {
    std::unique_lock lock(mutex_);
    idle_.wait(lock, [&] { return in_flight_ == 0; });
  }

  int in_flight() const override {
    std::lock_guard lock(mutex_);
    return in_flight_;
  }

  std::string description() const override { return recorder_.stats().description; }

  RunnerStats stats() const override { return recorder_.stats(); }

  std::vector<RunnerStats> segment_stats() const override {
    std::vector<RunnerStats> out;
    for (const auto& r : runners_) out.push_back(r->stats());
    std::lock_guard lock(mutex_);
    for (std::size_t k = 0; k < out.size(); ++k) {
      out[k].handover_submit_ms = handover_[k].submit_ms;
      out[k].handover_after_ms = handover_[k].after_ms;
    }
    return out;
  }

 private:
  using Clock = std::chrono::steady_clock;

  struct Job {
    // values, waiting, outstanding, error, the times: segments complete on their own threads
    std::mutex mutex;
    std::map<std::string, Tensor> values;  // whole-batch values by name
    std::vector<int> waiting;              // per segment: segments it still waits for
    int outstanding = 0;                   // segments submitted and not complete
    std::size_t completed = 0;
    std::exception_ptr error;
    std::uint64_t sequence = 0;
    std::vector<std::int64_t> rows;
    std::int64_t total = 0, run_rows = 0;
    std::size_t bytes_in = 0;
    bool counted = true;  // InferBatch::counted, passed on to every segment's batch
    InferDone on_done;
    // When the batch began, its inputs were staged; per segment, when it was ready (launched),
    // its runner's submit returned, its completion came.
    Clock::time_point start, staged;
    struct SegmentTimes {
      Clock::time_point ready, submitted, done;
    };
    std::vector<SegmentTimes> times;
  };

  // A segment's hand-overs, summed over counted batches (RunnerStats::handover_submit_ms).
  struct Handover {
    double submit_ms = 0, after_ms = 0;
  };

  static std::string describe(const Partition& p, const RunnerConfig& config) {
    std::string parts;
    for (std::size_t k = 0; k < p.segments.size(); ++k) {
      const std::string& d = p.devices[static_cast<std::size_t>(p.segments[k].device)];
      const int threads = p.segments[k].threads;
      parts += fmt::format("{}{}", k == 0 ? "" : " -> ",
                           d != "cpu"    ? fmt::format("{}:{}", d, config.device)
                           : threads > 0 ? fmt::format("cpu ({} thread(s))", threads)
                                         : d);
    }
    return fmt::format("split in {} segments: {}", p.segments.size(), parts);
  }

  // Submits segments `ks` of the batch to their runners (counted in `outstanding` already). A
  // segment's refusal (check_batch passed the batch, so a segment should not refuse it) fails the
  // batch, and the segments not submitted are no longer waited for. Returns whether the batch
  // has nothing outstanding any more: then the caller ends it.
  bool launch(const std::shared_ptr<Job>& job, const std::vector<std::size_t>& ks) {
    for (std::size_t i = 0; i < ks.size(); ++i) {
      const std::size_t k = ks[i];
      try {
        InferBatch b;
        {
          std::lock_guard lock(job->mutex);
          job->times[k].ready = Clock::now();
          for (const auto& in : segments_[k].inputs) b.inputs.push_back({box(job->values.at(in))});
        }
        if (!job->counted) remember_prepared(k, b);
        b.allocate = values_->allocator();
        b.counted = job->counted;
        b.counted_rows = job->total;  // in the segment's stats, the split batch's rows
        b.counted_run_rows = job->run_rows;
        runners_[k]->submit(std::move(b), [this, job, k](InferResult& r) { completed(job, k, r); });
        std::lock_guard lock(job->mutex);
        // Its completion may have come first, and set it.
        if (job->times[k].submitted == Clock::time_point{}) job->times[k].submitted = Clock::now();
      } catch (...) {
        std::lock_guard lock(job->mutex);
        if (!job->error) job->error = std::current_exception();
        job->outstanding -= static_cast<int>(ks.size() - i);
        return job->outstanding == 0;
      }
    }
    return false;
  }

  // While prepare() runs its batch: the shapes segment k's batch brings.
  void remember_prepared(std::size_t k, const InferBatch& b) {
    std::lock_guard lock(mutex_);
    if (!preparing_) return;
    std::vector<Shape>& shapes = prepared_shapes_[k];
    shapes.clear();
    for (const auto& parts : b.inputs) shapes.push_back(parts.at(0).shape());
  }

  void end(const std::shared_ptr<Job>& job) {
    if (job->error) {
      fail(job, job->error);
    } else {
      finish(job);
    }
  }

  void completed(const std::shared_ptr<Job>& job, std::size_t k, InferResult& r) {
    std::vector<std::size_t> ready;
    bool last = false;
    {
      std::lock_guard lock(job->mutex);
      Job::SegmentTimes& t = job->times[k];
      t.done = Clock::now();
      // A completion before its submit returned: the batch's time in the segment was all in its
      // submit (and the submitting thread must not write the time once the batch may be over).
      if (t.submitted == Clock::time_point{}) t.submitted = t.done;
      --job->outstanding;
      ++job->completed;
      if (r.error && !job->error) job->error = r.error;
      if (!job->error) {
        try {
          const Segment& seg = segments_[k];
          for (std::size_t o = 0; o < seg.outputs.size(); ++o) job->values[seg.outputs[o]] = unbox(r.outputs[o][0]);
        } catch (...) {
          job->error = std::current_exception();
        }
      }
      if (!job->error) {
        for (std::size_t n : next_[k]) {
          if (--job->waiting[n] == 0) ready.push_back(n);
        }
        job->outstanding += static_cast<int>(ready.size());
      }
      last = job->outstanding == 0;
    }
    if (!ready.empty()) last = launch(job, ready);
    if (last) end(job);
  }

  void finish(const std::shared_ptr<Job>& job) {
    InferResult result;
    BatchTiming timing;
    try {
      result.outputs.resize(graph_->outputs.size());
      for (std::size_t o = 0; o < graph_->outputs.size(); ++o) {
        // Views of the last segments' values: their blocks go back to the split's pool when the
        // batch's last part of them is dropped.
        split_rows_as_views(job->values.at(graph_->outputs[o].name), job->rows, job->run_rows, output_what_[o],
                            result.outputs[o]);
      }
    } catch (...) {
      fail(job, std::current_exception());
      return;
    }
    // The split's own copies: its inputs staged into whole values before the first segment (its
    // outputs are views, not copies); between them, its segments.
    Clock::time_point last_done = job->staged;
    for (const Job::SegmentTimes& t : job->times) last_done = std::max(last_done, t.done);
    timing.copy_in_start = ms_since_epoch(job->start);
    timing.compute_start = ms_since_epoch(job->staged);
    timing.compute_end = ms_since_epoch(last_done);
    timing.copy_out_end = ms_since_epoch(Clock::now());
    timing.bytes_in = job->bytes_in;
    timing.rows = job->total;
    timing.run_rows = job->run_rows;
    if (job->counted) {
      recorder_.record(timing, false);
      std::lock_guard lock(mutex_);
      for (std::size_t k = 0; k < segments_.size(); ++k) {
        const Job::SegmentTimes& t = job->times[k];
        handover_[k].submit_ms += ms_between(t.ready, t.submitted);
        handover_[k].after_ms += ms_between(t.submitted, t.done);
      }
    }
    job->values.clear();
    deliver(job, result);
  }

  void fail(const std::shared_ptr<Job>& job, std::exception_ptr error) {
    InferResult result;
    result.error = std::move(error);
    job->values.clear();
    if (job->counted) recorder_.record(BatchTiming{}, true);
    deliver(job, result);
  }

  // Hands results over in submit order: segments on different devices may finish a later batch
  // first. Whichever thread finds the next batch ready delivers every ready one in turn.
  void deliver(const std::shared_ptr<Job>& job, InferResult& result) {
    std::unique_lock lock(mutex_);
    ready_.emplace(job->sequence, Ready{job, std::move(result)});
    if (delivering_) return;
    delivering_ = true;
    while (!ready_.empty() && ready_.begin()->first == delivered_) {
      Ready r = std::move(ready_.begin()->second);
      ready_.erase(ready_.begin());
      ++delivered_;
      lock.unlock();
      try {
        r.job->on_done(r.result);
      } catch (const std::exception& e) {
        log().error("{}: a batch's completion threw: {}", graph_->name, e.what());
      }
      r.job->on_done = nullptr;
      r.job->values.clear();
      lock.lock();
      --in_flight_;
      idle_.notify_all();
    }
    delivering_ = false;
  }

  double ms_since_epoch(Clock::time_point t) const { return ms_between(epoch_, t); }
  static double ms_between(Clock::time_point from, Clock::time_point to) {
    return std::chrono::duration<double, std::milli>(to - from).count();
  }

  std::shared_ptr<const Graph> graph_;
  std::vector<Segment> segments_;
  std::shared_ptr<ValuePool> values_;
  std::vector<std::string> output_what_;         // "output 'NAME'" per graph output, for messages
  std::vector<int> waits_for_;                   // per segment: how many segments make its inputs
  std::vector<std::vector<std::size_t>> next_;   // per segment: the segments that read its outputs
  RunnerStatsRecorder recorder_;
  const Clock::time_point epoch_ = Clock::now();
  mutable std::mutex mutex_;  // the order of delivery, in_flight_, handover_, preparing_, prepared_shapes_
  bool preparing_ = false;    // prepare()'s batch is running
  std::vector<std::vector<Shape>> prepared_shapes_;  // per segment: its input shapes in that batch
  std::condition_variable idle_;
  int in_flight_ = 0;
  struct Ready {
    std::shared_ptr<Job> job;
    InferResult result;
  };
  std::uint64_t submitted_ = 0, delivered_ = 0;
  std::map<std::uint64_t, Ready> ready_;  // finished batches waiting for an earlier one
  bool delivering_ = false;
  std::vector<Handover> handover_ = std::vector<Handover>(segments_.size());  // per segment
  std::vector<std::unique_ptr<ModelRunner>> runners_;  // last: they go first, while the rest exists
};

}  // namespace

std::unique_ptr<ModelRunner> make_split_runner(const Partition& partition, const RunnerConfig& config) {
  return std::make_unique<SplitRunner>(partition, config);
}

}  // namespace redwood::runtime
