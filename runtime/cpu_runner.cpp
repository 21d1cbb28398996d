#include "runtime/cpu_runner.hpp"

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/thread_name.hpp"
#include "runtime/executor.hpp"

#include <fmt/format.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace redwood {

namespace {

double ms_since(std::chrono::steady_clock::time_point epoch, std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(t - epoch).count();
}

class CpuRunner final : public ModelRunner {
 public:
  CpuRunner(std::shared_ptr<const Graph> graph, const RunnerConfig& config)
      : ModelRunner(*graph),
        slots_(config.slots),
        executor_(std::move(graph)),
        recorder_(fmt::format("cpu, {} slot(s)", config.slots), config.slots) {
    worker_ = std::thread([this] { work(); });
  }

  ~CpuRunner() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    work_cv_.notify_all();
    worker_.join();
  }

  void submit(InferBatch batch, InferDone done) override {
    check_batch(executor_.graph(), batch);
    double waited = 0;
    const int slot = slots_.acquire(&waited);
    {
      std::lock_guard lock(mutex_);
      queue_.push_back({std::move(batch), std::move(done), waited, slot});
    }
    work_cv_.notify_one();
  }

  void drain() override { slots_.drain(); }
  int in_flight() const override { return slots_.in_flight(); }
  std::string description() const override { return fmt::format("cpu, {} slot(s)", slots_.slots()); }
  RunnerStats stats() const override { return recorder_.stats(); }

 private:
  struct Job {
    InferBatch batch;
    InferDone done;
    double wait_ms = 0;
    int slot = 0;
  };

  void work() {
    set_thread_name("rw-cpu-infer");
    for (;;) {
      Job job;
      {
        std::unique_lock lock(mutex_);
        work_cv_.wait(lock, [&] { return !queue_.empty() || stopping_; });
        if (queue_.empty()) return;
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      InferResult result;
      BatchTiming timing;
      timing.wait_ms = job.wait_ms;
      try {
        result.outputs = run_batch(job.batch, timing);
      } catch (...) {
        result.outputs.clear();
        result.error = std::current_exception();
      }
      recorder_.record(timing, result.error != nullptr);
      try {
        job.done(result);
      } catch (const std::exception& e) {
        // A continuation must handle its own errors; this thread must not die of one.
        log().error("cpu runner: a batch's completion threw: {}", e.what());
      }
      const int slot = job.slot;
      job = Job{};  // the batch's tensors go back to their pool before the slot does
      slots_.release(slot);
    }
  }

  std::vector<std::vector<Tensor>> run_batch(const InferBatch& batch, BatchTiming& timing) {
    const Graph& graph = executor_.graph();
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::int64_t>& rows = rows_;  // reused from batch to batch: no allocation each
    part_rows(batch.inputs[0], rows);
    std::int64_t total = 0;
    for (auto r : rows) total += r;
    const std::int64_t run_rows = batch.run_rows > 0 ? batch.run_rows : total;
    std::vector<Tensor> staged = stage_inputs(batch, total, run_rows, &timing.bytes_in);
    std::map<std::string, Tensor> feeds;
    for (std::size_t i = 0; i < staged.size(); ++i) feeds.emplace(graph.inputs[i].name, std::move(staged[i]));
    const auto t1 = std::chrono::steady_clock::now();
    std::vector<Tensor> outs = executor_.run(feeds);
    feeds.clear();
    const auto t2 = std::chrono::steady_clock::now();
    std::vector<std::vector<Tensor>> parts;
    for (std::size_t o = 0; o < outs.size(); ++o) {
      timing.bytes_out += outs[o].nbytes();
      parts.push_back(split_rows(outs[o], rows, run_rows, batch.allocate, fmt::format("output '{}'", graph.outputs[o].name)));
    }
    const auto t3 = std::chrono::steady_clock::now();
    timing.copy_in_start = ms_since(epoch_, t0);
    timing.compute_start = ms_since(epoch_, t1);
    timing.compute_end = ms_since(epoch_, t2);
    timing.copy_out_end = ms_since(epoch_, t3);
    timing.rows = total;
    timing.run_rows = run_rows;
    return parts;
  }

  SlotRing slots_;  // first: a bad slot count fails before the executor is built
  Executor executor_;
  std::vector<std::int64_t> rows_;  // the batch's rows per part (the worker's scratch)
  RunnerStatsRecorder recorder_;
  const std::chrono::steady_clock::time_point epoch_ = std::chrono::steady_clock::now();
  std::mutex mutex_;
  std::condition_variable work_cv_;
  std::deque<Job> queue_;
  bool stopping_ = false;
  std::thread worker_;  // last: starts once everything above exists
};

}  // namespace

std::unique_ptr<ModelRunner> make_cpu_runner(std::shared_ptr<const Graph> graph, const RunnerConfig& config) {
  return std::make_unique<CpuRunner>(std::move(graph), config);
}

std::unique_ptr<ModelRunner> make_runner(const std::string& device, std::shared_ptr<const Graph> graph,
                                         const RunnerConfig& config) {
  if (device == "cpu") return make_cpu_runner(std::move(graph), config);
  const auto it = device_runner_registry().find(device);
  RW_EXPECTS(it != device_runner_registry().end(), Unsupported, "{}: this Redwood has no '{}' device",
             graph ? graph->name : std::string("model"), device);
  return it->second.make(std::move(graph), config);
}

std::jthread warm_up_device(const std::string& device, int index) {
  const auto it = device_runner_registry().find(device);
  if (it == device_runner_registry().end() || !it->second.warm_up) return {};
  return it->second.warm_up(index);
}

}  // namespace redwood
