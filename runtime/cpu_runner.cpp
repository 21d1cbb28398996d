#include "runtime/cpu_runner.hpp"

#include "core/error.hpp"
#include "core/host_threads.hpp"
#include "core/log.hpp"
#include "core/thread_name.hpp"
#include "runtime/executor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

namespace redwood {

namespace {

double ms_since(std::chrono::steady_clock::time_point epoch, std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(t - epoch).count();
}

// Steady state: a batch allocates nothing on the runner's side. Jobs wait in a ring of one place
// per slot (submit holds a slot, so it never overflows), the staging, output and result vectors
// are the worker's and keep their room from batch to batch, the batch goes back to its submitter
// with the result (InferResult::batch) for its vectors to be filled again, the executor writes
// the graph outputs into the batch's allocator (the frames' pool), and each frame's output part
// is a view of its rows. A batch of a row count the executor has no plan for would plan it
// (oneDNN primitives, a workspace) in the middle of a run: prepare() plans the row counts the
// infer stage expects (1 to its full batch), and a batch of more rows than the most prepared
// runs in pieces of prepared row counts, the largest first.
class CpuRunner final : public ModelRunner {
 public:
  CpuRunner(std::shared_ptr<const Graph> graph, const RunnerConfig& config)
      : ModelRunner(*graph),
        slots_(config.slots),
        executor_(std::move(graph)),
        threads_(config.host_threads),
        recorder_(describe(config.slots, config.host_threads), config.slots),
        ring_(static_cast<std::size_t>(config.slots)) {
    for (std::size_t o = 0; o < executor_.graph().outputs.size(); ++o) {
      output_what_.push_back(fmt::format("output '{}'", executor_.graph().outputs[o].name));
    }
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
      ring_[(head_ + queued_) % ring_.size()] = Job{std::move(batch), std::move(done), waited, slot};
      ++queued_;
    }
    work_cv_.notify_one();
  }

  // Runs the graph once on zeros of these shapes (on the calling thread, between batches), so
  // that the executor and its kernels hold the plan of this row count before a batch needs it.
  void prepare(const std::vector<Shape>& input_shapes) override {
    const Graph& graph = executor_.graph();
    RW_EXPECTS(input_shapes.size() == graph.inputs.size(), InvalidArgument, "{}: {} input shapes to prepare for {} graph inputs",
               graph.source.empty() ? graph.name : graph.source, input_shapes.size(), graph.inputs.size());
    std::vector<Tensor> zeros;
    for (std::size_t i = 0; i < input_shapes.size(); ++i) {
      const DType dtype = graph.inputs[i].dtype == DType::kUndefined ? DType::kF32 : graph.inputs[i].dtype;
      zeros.push_back(Tensor::zeros(dtype, input_shapes[i]));
    }
    std::vector<Tensor> outputs;
    std::lock_guard run(run_mutex_);
    threads_.run([&] { executor_.run_into(zeros, outputs); });  // its primitives made for the runner's threads
    if (input_shapes.empty() || input_shapes[0].empty()) return;
    const std::int64_t rows = input_shapes[0][0];
    auto at = std::lower_bound(prepared_rows_.begin(), prepared_rows_.end(), rows);
    if (at == prepared_rows_.end() || *at != rows) prepared_rows_.insert(at, rows);
  }

  void drain() override { slots_.drain(); }
  int in_flight() const override { return slots_.in_flight(); }
  std::string description() const override { return describe(slots_.slots(), threads_.threads()); }
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
        work_cv_.wait(lock, [&] { return queued_ > 0 || stopping_; });
        if (queued_ == 0) return;
        job = std::move(ring_[head_]);
        ring_[head_] = Job{};
        head_ = (head_ + 1) % ring_.size();
        --queued_;
      }
      InferResult& result = result_;  // the worker's: its vectors keep their room
      result.error = nullptr;
      BatchTiming timing;
      timing.wait_ms = job.wait_ms;
      try {
        run_batch(job.batch, timing, result);
      } catch (...) {
        result.outputs.clear();
        result.error = std::current_exception();
      }
      if (job.batch.counted) recorder_.record(timing, result.error != nullptr);
      // The batch goes back to its submitter, its parts (the frames' tensors) dropped.
      for (auto& parts : job.batch.inputs) parts.clear();
      result.batch = std::move(job.batch);
      try {
        job.done(result);
      } catch (const std::exception& e) {
        // A continuation must handle its own errors; this thread must not die of one.
        log().error("cpu runner: a batch's completion threw: {}", e.what());
      }
      for (auto& parts : result.outputs) parts.clear();  // what the continuation left goes now
      result.error = nullptr;
      result.batch = InferBatch{};
      const int slot = job.slot;
      job = Job{};  // the batch's tensors go back to their pool before the slot does
      slots_.release(slot);
    }
  }

  // The rows of the next piece of a batch with `rows` left: all of them when that row count is
  // prepared (or nothing is), else the most prepared that fit.
  std::int64_t piece_rows(std::int64_t rows) const {
    if (prepared_rows_.empty() || std::binary_search(prepared_rows_.begin(), prepared_rows_.end(), rows)) return rows;
    const auto above = std::upper_bound(prepared_rows_.begin(), prepared_rows_.end(), rows);
    return above == prepared_rows_.begin() ? rows : *std::prev(above);
  }

  void run_batch(const InferBatch& batch, BatchTiming& timing, InferResult& result) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::int64_t>& rows = rows_;  // reused from batch to batch: no allocation each
    part_rows(batch.inputs[0], rows);
    std::int64_t total = 0;
    for (auto r : rows) total += r;
    const std::int64_t run_rows = batch.run_rows > 0 ? batch.run_rows : total;
    stage_inputs(batch, total, run_rows, &timing.bytes_in, staged_);
    const TensorAllocator* allocate = batch.allocate ? &batch.allocate : nullptr;
    const auto t1 = std::chrono::steady_clock::now();
    {
      std::lock_guard run(run_mutex_);
      const std::int64_t first = staged_.empty() || staged_[0].rank() == 0 ? run_rows : piece_rows(run_rows);
      threads_.run([&] {
        if (first == run_rows) {
          executor_.run_into(staged_, outs_, allocate);
        } else {
          run_in_pieces(run_rows, allocate);
        }
      });
    }
    staged_.clear();
    const auto t2 = std::chrono::steady_clock::now();
    result.outputs.resize(outs_.size());
    for (std::size_t o = 0; o < outs_.size(); ++o) {
      timing.bytes_out += outs_[o].nbytes();
      split_rows_as_views(outs_[o], rows, run_rows, output_what_[o], result.outputs[o]);
    }
    outs_.clear();
    const auto t3 = std::chrono::steady_clock::now();
    timing.copy_in_start = ms_since(epoch_, t0);
    timing.compute_start = ms_since(epoch_, t1);
    timing.compute_end = ms_since(epoch_, t2);
    timing.copy_out_end = ms_since(epoch_, t3);
    timing.rows = batch.counted_rows > 0 ? batch.counted_rows : total;
    timing.run_rows = batch.counted_run_rows > 0 ? batch.counted_run_rows : run_rows;
  }

  // A batch beyond the prepared row counts: pieces of prepared counts, each a view of the staged
  // rows, their outputs gathered into whole outputs of all the rows.
  void run_in_pieces(std::int64_t run_rows, const TensorAllocator* allocate) {
    outs_.clear();
    for (std::int64_t begin = 0; begin < run_rows;) {
      const std::int64_t n = piece_rows(run_rows - begin);
      piece_in_.clear();
      for (const Tensor& t : staged_) piece_in_.push_back(t.rows(begin, n));
      executor_.run_into(piece_in_, piece_out_, allocate);
      for (std::size_t o = 0; o < piece_out_.size(); ++o) {
        const Tensor part = piece_out_[o].contiguous();
        check_output_rows(part, n, output_what_[o]);
        if (begin == 0) {
          Shape shape = part.shape();
          shape[0] = run_rows;
          Tensor whole = allocate ? (*allocate)(part.dtype(), shape) : Tensor();
          outs_.push_back(whole.defined() ? whole : Tensor::empty(part.dtype(), shape));
        }
        const std::size_t row_bytes = part.nbytes() / static_cast<std::size_t>(n);
        if (part.nbytes() > 0) {
          std::memcpy(static_cast<std::byte*>(outs_[o].raw_data()) + row_bytes * static_cast<std::size_t>(begin), part.raw_data(),
                      part.nbytes());
        }
      }
      piece_out_.clear();
      begin += n;
    }
    piece_in_.clear();
  }

  static std::string describe(int slots, int threads) {
    return threads > 0 ? fmt::format("cpu, {} slot(s), {} thread(s)", slots, threads) : fmt::format("cpu, {} slot(s)", slots);
  }

  SlotRing slots_;  // first: a bad slot count fails before the executor is built
  Executor executor_;
  HostThreads threads_;                    // what the executor's kernels run on
  std::mutex run_mutex_;                   // the executor runs one batch (or prepare) at a time
  std::vector<std::int64_t> prepared_rows_;  // row counts prepare() planned, ascending
  std::vector<std::string> output_what_;   // "output 'NAME'" per graph output, for messages
  // The worker's scratch, kept from batch to batch.
  std::vector<std::int64_t> rows_;  // the batch's rows per part
  std::vector<Tensor> staged_, outs_, piece_in_, piece_out_;
  InferResult result_;
  RunnerStatsRecorder recorder_;
  const std::chrono::steady_clock::time_point epoch_ = std::chrono::steady_clock::now();
  std::mutex mutex_;
  std::condition_variable work_cv_;
  std::vector<Job> ring_;  // jobs waiting: one place per slot
  std::size_t head_ = 0, queued_ = 0;
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
