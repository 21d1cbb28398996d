// Pipeline::run: the flow graph, the source threads, the sequencer and the run lifecycle
// (pipelines/pipeline.hpp has the picture and the invariants).

#include "core/free_list.hpp"
#include "core/log.hpp"
#include "core/thread_name.hpp"
#include "pipelines/batcher.hpp"
#include "pipelines/frame_gate.hpp"
#include "pipelines/frame_pool.hpp"
#include "pipelines/pipeline.hpp"

#include <fmt/format.h>
#include <oneapi/tbb/flow_graph.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>

#include <array>
#include <map>
#include <optional>
#include <span>
#include <thread>

namespace redwood {

namespace flow = oneapi::tbb::flow;

namespace {

/// Puts one stream's frames back in admission order (`admitted` is gapless per stream). At most
/// `window` (service.max_in_flight) frames of a stream are in flight, each holding a token until
/// the sequencer delivers it, and those waiting here are among them, after the one whose turn it
/// is: so a frame's place is its number modulo the window, a fixed ring that allocates nothing
/// per frame. Used from one serial node (an ordered stage's, or the sequencer), so unlocked.
class AdmissionOrder {
 public:
  explicit AdmissionOrder(int window) : waiting_(static_cast<std::size_t>(window)) {}
  /// Holds `f` until its turn; calls `ready` with every frame whose turn has come, in order.
  /// The token limiter's bound keeps a frame's place free. A frame outside the window would
  /// overwrite another: it is passed on at once, marked failed (so its token comes back), and
  /// the returned message says what happened, for the caller to fail the run with.
  template <typename Ready>
  std::optional<std::string> push(FramePtr f, Ready&& ready) {
    const bool in_window = f->admitted >= next_ && f->admitted - next_ < static_cast<std::int64_t>(waiting_.size());
    if (!in_window || at(f->admitted)) {
      std::string what = fmt::format("frame {} of stream '{}' reached the reordering outside its window of {} (next due: {})",
                                     f->admitted, f->stream_name, waiting_.size(), next_);
      f->failed = true;
      ready(std::move(f));
      return what;
    }
    at(f->admitted) = std::move(f);
    for (FramePtr* next = &at(next_); *next; next = &at(next_)) {
      FramePtr frame = std::move(*next);
      ++next_;
      ready(std::move(frame));
    }
    return std::nullopt;
  }

 private:
  FramePtr& at(std::int64_t admitted) { return waiting_[static_cast<std::size_t>(admitted) % waiting_.size()]; }
  std::vector<FramePtr> waiting_;
  std::int64_t next_ = 0;  // the admitted number whose turn it is
};

/// Per-stream run state: the queue and token limiter between source and graph, the sequencer's
/// reorder buffer, and the counters.
struct StreamRun {
  StreamRun(int queue, bool live, int tokens)
      : queue(static_cast<std::size_t>(queue), live), limiter(tokens), delivery(tokens) {}
  FrameQueue<FramePtr> queue;
  TokenLimiter limiter;
  AdmissionOrder delivery;  // the sequencer's: frames wait here until their turn
  std::thread reader, pump;
};

class Run {
 public:
  Run(const std::string& pipeline, std::vector<Pipeline::Stream>& streams, std::vector<std::unique_ptr<Stage>>& stages,
      std::vector<Pipeline::NamedSink>& sinks, const ServiceSettings& service, const PipelineOptions& pipeline_options,
      const RunOptions& options, FrameMemory& memory)
      : streams_(streams), stages_(stages), sinks_(sinks), service_(service), pipeline_options_(pipeline_options),
        options_(options), memory_(memory) {
    const bool paced = pipeline_options.realtime || pipeline_options.fps > 0;
    for (const auto& s : streams) {
      stats_.streams.push_back({});
      stats_.streams.back().name = s.name;
      // A file read in real time behaves as a camera: it drops its oldest frames when behind.
      runs_.push_back(std::make_unique<StreamRun>(service.queue, s.source->live() || paced, service.max_in_flight));
      if (paced && pace_fps(s) <= 0) {
        throw InvalidArgument(fmt::format("--realtime: source '{}' has no frame rate to pace it at; give --fps", s.name));
      }
    }
    for (const auto& s : sinks) stats_.sinks.push_back({s.name, 0, 0});
  }

  PipelineStats execute() {
    build_graph();
    // Sources start their slow part first (decoders opened, the seeks of --streams copies), all
    // at once: the clock starts after, so a paced file's first frame is not already late.
    // A replayable stream that a durable sink already holds part of (an earlier run of this
    // worker, or of the worker that owned the stream before a re-shard) starts after that part.
    for (std::size_t i = 0; i < streams_.size(); ++i) stats_.streams[i].resumed_at = resume_point(i);
    oneapi::tbb::parallel_for(std::size_t{0}, streams_.size(), [this](std::size_t i) {
      streams_[i].source->prepare();
      skip_frames(i);
    });
    start_ = Clock::now();
    cpu_start_s_ = process_cpu_seconds();
    for (std::size_t i = 0; i < streams_.size(); ++i) {
      runs_[i]->reader = std::thread([this, i] { read_loop(i); });
      runs_[i]->pump = std::thread([this, i] { pump_loop(i); });
    }
    auto last_status = start_;
    PipelineStats previous = snapshot();
    bool stopping = false;
    while (pumps_done_ < streams_.size() || in_flight_ > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (!stopping && ((options_.stop && options_.stop->load()) || failed_.load())) {
        stopping = true;
        stop_readers_ = true;
        if (failed_) {
          // Nothing more enters; frames in flight drain (skipping the sinks).
          for (auto& r : runs_) {
            r->queue.close();
            r->limiter.cancel();
          }
        }
      }
      if (options_.on_status && Clock::now() - last_status >= std::chrono::duration<double>(service_.status_interval_s)) {
        last_status = Clock::now();
        PipelineStats now = snapshot();
        options_.on_status(now);  // the callback compares with what it saw before
        previous = std::move(now);
      }
    }
    graph_.wait_for_all();
    for (auto& b : batchers_) {
      if (b) b->finish();
    }
    for (auto& stage : stages_) stage->drain();
    graph_.wait_for_all();
    for (auto& r : runs_) {
      r->reader.join();
      r->pump.join();
    }
    for (auto& s : sinks_) {
      try {
        s.sink->close();
      } catch (const std::exception& e) {
        fail(fmt::format("sink '{}' failed: {}", s.name, e.what()));
      }
    }
    if (failed_) throw RunError(error_message_, snapshot());
    if (!source_error_.empty()) throw RunError(source_error_, snapshot());
    return snapshot();
  }

 private:
  void build_graph() {
    deliver_ = std::make_unique<flow::function_node<FramePtr, flow::continue_msg>>(
        graph_, flow::serial, [this](FramePtr f) { deliver(std::move(f)); return flow::continue_msg(); });
    flow::receiver<FramePtr>* next = deliver_.get();
    batchers_.resize(stages_.size());
    std::size_t batches_in_flight = 0, full_batch = 1;  // of the batching stages, for batches_
    for (std::size_t i = stages_.size(); i-- > 0;) {
      Stage* stage = stages_[i].get();
      if (stage->max_batch() > 1 || stage->asynchronous()) {
        // Batches, and stages that complete frames later, run from a batcher's own thread: no
        // oneTBB worker waits for a batch to fill or for a device.
        BatchPolicy policy;
        policy.max_batch = stage->max_batch();
        policy.timeout_ms = stage->batch_timeout_ms();
        policy.latency_budget_ms = stage->latency_budget_ms();
        policy.expected_batch_ms = [stage] { return stage->expected_batch_ms(); };
        batchers_[i] = std::make_unique<Batcher>(std::move(policy), [this, stage, next](std::vector<FramePtr>& batch) {
          run_stage_async(*stage, batch, next);
        });
        batches_in_flight += static_cast<std::size_t>(stage->max_calls_in_flight());
        full_batch = std::max(full_batch, static_cast<std::size_t>(stage->max_batch()));
        Batcher* batcher = batchers_[i].get();
        auto node = std::make_unique<flow::function_node<FramePtr, flow::continue_msg>>(
            graph_, flow::unlimited, [batcher](FramePtr f) { batcher->push(std::move(f)); return flow::continue_msg(); });
        next = node.get();
        sink_nodes_.push_back(std::move(node));
      } else if (stage->ordered()) {
        // One serial node puts each stream's frames back in admission order and runs the stage
        // on them one at a time (a tracker must see a stream's frames in order; the stages before
        // it may finish them in any order).
        auto order = std::make_shared<std::vector<AdmissionOrder>>(streams_.size(), AdmissionOrder(service_.max_in_flight));
        auto node = std::make_unique<flow::function_node<FramePtr, flow::continue_msg>>(
            graph_, flow::serial, [this, stage, order, next](FramePtr f) {
              const auto stream = static_cast<std::size_t>(f->stream);
              const auto error = (*order)[stream].push(std::move(f), [&](FramePtr ready) {
                run_stage(*stage, std::span<FramePtr>(&ready, 1));
                next->try_put(std::move(ready));
              });
              if (error) fail(fmt::format("stage '{}': {}", stage->name(), *error));
              return flow::continue_msg();
            });
        next = node.get();
        sink_nodes_.push_back(std::move(node));
      } else {
        auto node = std::make_unique<flow::function_node<FramePtr, FramePtr>>(
            graph_, stage->serial() ? flow::serial : flow::unlimited, [this, stage](FramePtr f) {
              run_stage(*stage, std::span<FramePtr>(&f, 1));
              return f;
            });
        flow::make_edge(*node, *next);
        next = node.get();
        stage_nodes_.push_back(std::move(node));
      }
    }
    entry_ = next;
    // The records of as many batches as the asynchronous stages can have in flight, made now
    // (the free list is shared, so each has the room of the largest batch).
    batches_.fill(batches_in_flight, [full_batch](AsyncBatch& batch) {
      batch.frames.reserve(full_batch);
      batch.live.reserve(full_batch);
    });
  }

  /// Runs a stage on the frames that have not failed; an exception fails them and stops the run.
  void run_stage(Stage& stage, std::span<FramePtr> frames) {
    // The live frames' pointers on the stack (a stage runs on every frame), on the heap only for
    // a batch of more than a few.
    std::array<Frame*, 8> on_stack;
    std::vector<Frame*> on_heap;
    std::size_t count = 0;
    for (auto& f : frames) {
      if (failed_) f->failed = true;
      if (f->failed) continue;
      if (count < on_stack.size()) {
        on_stack[count] = f.get();
      } else {
        if (on_heap.empty()) on_heap.assign(on_stack.begin(), on_stack.end());
        on_heap.push_back(f.get());
      }
      ++count;
    }
    if (count == 0) return;
    const std::span<Frame* const> live = count <= on_stack.size() ? std::span<Frame* const>(on_stack.data(), count)
                                                                  : std::span<Frame* const>(on_heap);
    try {
      stage.process(live);
    } catch (const std::exception& e) {
      fail(fmt::format("stage '{}' failed on frame {} of stream '{}': {}", stage.name(), live.front()->seq,
                       live.front()->stream_name, e.what()));
      for (Frame* f : live) f->failed = true;
    }
  }

  /// One batch handed to an asynchronous stage: its frames (the batch's references, until they
  /// go on), those of them that had not failed, and where they go when complete. Recycled through
  /// a free list, as the stage's own calls are (Stage::process_async), so that a batch allocates
  /// nothing once as many are in flight as ever were; the stage's continuation holds only a
  /// pointer to it, which std::function keeps in place.
  struct AsyncBatch {
    Stage* stage = nullptr;
    flow::receiver<FramePtr>* next = nullptr;
    std::vector<FramePtr> frames;
    std::vector<Frame*> live;
  };

  /// Hands frames to a stage that completes them later (or at once), taking them from `frames`;
  /// they go on to `next` when complete. An error fails them and stops the run, as in run_stage.
  void run_stage_async(Stage& stage, std::vector<FramePtr>& frames, flow::receiver<FramePtr>* next) {
    AsyncBatch* batch = batches_.acquire();  // back to batches_ in complete_async
    batch->stage = &stage;
    batch->next = next;
    for (auto& f : frames) {
      if (failed_) f->failed = true;
      if (!f->failed) batch->live.push_back(f.get());
      batch->frames.push_back(std::move(f));
    }
    if (batch->live.empty()) {
      complete_async(batch, nullptr);
      return;
    }
    stage.process_async(batch->live, [this, batch](std::exception_ptr error) { complete_async(batch, error); });
  }

  /// An asynchronous stage's batch is complete: its frames go on (failed, with the run, if the
  /// stage failed them), and the batch back to the free list.
  void complete_async(AsyncBatch* batch, std::exception_ptr error) {
    if (error) {
      std::vector<Frame*> failed;
      for (auto& f : batch->frames) {
        if (!f->failed) failed.push_back(f.get());
      }
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        fail(fmt::format("stage '{}' failed on frame {} of stream '{}': {}", batch->stage->name(),
                         failed.empty() ? 0 : failed.front()->seq, failed.empty() ? "" : failed.front()->stream_name,
                         e.what()));
      } catch (...) {
        fail(fmt::format("stage '{}' failed with an unknown exception", batch->stage->name()));
      }
      for (Frame* f : failed) f->failed = true;
    }
    for (const auto& f : batch->frames) batch->next->try_put(f);
    batch->frames.clear();
    batch->live.clear();
    batches_.release(batch);
  }

  void fail(std::string message) {
    std::lock_guard lock(error_mutex_);
    if (failed_) return;
    error_message_ = std::move(message);
    log().error("{}", error_message_);
    failed_ = true;
  }

  void source_failed(std::string message) {
    {
      std::lock_guard lock(error_mutex_);
      if (source_error_.empty()) source_error_ = std::move(message);
      log().error("{}", source_error_);
    }
    stop_readers_ = true;
  }

  /// The first seq of stream i: the lowest point any durable sink asks for (a sink that holds
  /// less must still get the frames after what it holds); 0 when none answers or for a live source.
  std::int64_t resume_point(std::size_t i) {
    if (streams_[i].source->live()) return 0;
    std::optional<std::int64_t> first;
    for (auto& s : sinks_) {
      if (const auto at = s.sink->resume_at(i)) first = first ? std::min(*first, *at) : *at;
    }
    if (first && *first > 0) log().info("stream '{}': resuming at frame {} (the sinks hold the frames before it)", streams_[i].name, *first);
    return first.value_or(0);
  }

  /// Reads and discards the frames before the stream's resume point (decoding, no inference).
  /// A source that ends first leaves the stream with nothing to read.
  void skip_frames(std::size_t i) {
    auto& first = stats_.streams[i].resumed_at;
    Source& source = *streams_[i].source;
    Picture scratch;
    double pts_ms = 0;
    for (std::int64_t n = 0; n < first; ++n) {
      try {
        ReadStatus status = source.read(scratch, pts_ms, nullptr, stop_readers_);
        if (status != ReadStatus::kFrame && pipeline_options_.loop && n > 0 && source.rewind()) {
          status = source.read(scratch, pts_ms, nullptr, stop_readers_);
        }
        if (status != ReadStatus::kFrame) {
          first = n;
          return;
        }
      } catch (const std::exception&) {
        first = n;  // the reader's first read() meets the same failure and reports it
        return;
      }
    }
  }

  double pace_fps(const Pipeline::Stream& s) const {
    return pipeline_options_.fps > 0 ? pipeline_options_.fps : s.source->frame_rate();
  }

  void read_loop(std::size_t i) {
    set_thread_name("rw-read");  // and FFmpeg's decoder threads, started from here
    StreamRun& r = *runs_[i];
    Source& source = *streams_[i].source;
    const std::int64_t first = stats_.streams[i].resumed_at;  // frames before it were skipped
    std::int64_t seq = first;
    // Realtime: frame n is due at start + (phase + n) / fps, as a camera would deliver it; its
    // latency counts from then (what the reader does after that, decoding too, is the pipeline's).
    const bool paced = pipeline_options_.realtime || pipeline_options_.fps > 0;
    const double fps = paced ? pace_fps(streams_[i]) : 0;
    const auto period = std::chrono::duration<double>(fps > 0 ? 1.0 / fps : 0.0);
    while (!stop_readers_ && (options_.max_frames <= 0 || seq < options_.max_frames)) {
      FramePtr f = frames_.acquire();  // a recycled Frame once warmed up
      // The frame's buffers come from the frame pool: the picture the source reads, then what
      // the stages add.
      f->memory = &memory_;
      Clock::time_point due{};
      if (paced) {
        due = start_ + std::chrono::duration_cast<Clock::duration>(period * (streams_[i].start_phase + static_cast<double>(seq - first)));
        sleep_until(due);
        if (stop_readers_) break;
      }
      try {
        ReadStatus status = source.read(f->image, f->pts_ms, f->memory, stop_readers_);
        if (status != ReadStatus::kFrame && pipeline_options_.loop && !stop_readers_ && seq > 0 && source.rewind()) {
          status = source.read(f->image, f->pts_ms, f->memory, stop_readers_);
        }
        if (status != ReadStatus::kFrame) break;
      } catch (const std::exception& e) {
        // A source's exception (OpenCV's, say) must not end a reader thread with terminate().
        // The frames it read are good: stop every source and drain them through the sinks, then
        // report the error (unlike a stage's failure, which spoils the frames in flight).
        source_failed(fmt::format("source '{}' failed after {} frame(s): {}", streams_[i].name, seq, e.what()));
        break;
      }
      f->stream = static_cast<int>(i);
      f->stream_name = streams_[i].name;
      f->priority = streams_[i].priority;
      f->seq = seq++;
      f->read_at = paced ? due : Clock::now();
      f->captured = std::chrono::system_clock::now();
      {
        std::lock_guard lock(stats_mutex_);
        ++stats_.streams[i].read;
      }
      if (r.queue.push(std::move(f))) {
        std::lock_guard lock(stats_mutex_);
        ++stats_.streams[i].dropped;
      }
    }
    r.queue.finish();
  }

  void pump_loop(std::size_t i) {
    set_thread_name("rw-pump");
    StreamRun& r = *runs_[i];
    std::int64_t admitted = 0;
    // Token first, then the frame: a live source's frame waits in its queue (where newer frames
    // can replace it), not in the pump's hand.
    while (r.limiter.acquire()) {
      auto f = r.queue.pop();
      if (!f) {
        r.limiter.release();
        break;
      }
      (*f)->admitted = admitted++;
      (*f)->admitted_at = Clock::now();
      {
        std::lock_guard lock(stats_mutex_);
        auto& s = stats_.streams[i];
        s.max_in_flight = std::max(s.max_in_flight, ++s.in_flight);
      }
      ++in_flight_;
      entry_->try_put(*f);
    }
    ++pumps_done_;
  }

  /// Sleeps until `t`, waking early when the readers are told to stop.
  void sleep_until(Clock::time_point t) {
    while (!stop_readers_) {
      const auto now = Clock::now();
      if (now >= t) return;
      std::this_thread::sleep_for(std::min<Clock::duration>(t - now, std::chrono::milliseconds(50)));
    }
  }

  /// The sequencer: frames of a stream reach the sinks in admission (= read) order.
  void deliver(FramePtr f) {
    StreamRun& r = *runs_[static_cast<std::size_t>(f->stream)];
    const auto error = r.delivery.push(std::move(f), [&](FramePtr frame) {
      const double latency = std::chrono::duration<double, std::milli>(Clock::now() - frame->read_at).count();
      const bool ok = !frame->failed && !failed_;
      for (std::size_t k = 0; ok && k < sinks_.size(); ++k) {
        try {
          sinks_[k].sink->write(*frame, latency);
        } catch (const std::exception& e) {
          fail(fmt::format("sink '{}' failed on frame {} of stream '{}': {}", sinks_[k].name, frame->seq, frame->stream_name, e.what()));
        }
      }
      {
        std::lock_guard lock(stats_mutex_);
        auto& s = stats_.streams[static_cast<std::size_t>(frame->stream)];
        --s.in_flight;
        if (ok) {
          ++s.delivered;
          s.latency.add(latency);
          if (stats_.first_result_s < 0) stats_.first_result_s = std::chrono::duration<double>(Clock::now() - start_).count();
        }
      }
      r.limiter.release();
      --in_flight_;
    });
    if (error) fail(fmt::format("the sequencer: {}", *error));
  }

  PipelineStats snapshot() {
    std::lock_guard lock(stats_mutex_);
    PipelineStats s = stats_;
    s.elapsed_s = std::chrono::duration<double>(Clock::now() - start_).count();
    s.cpu_s = process_cpu_seconds() - cpu_start_s_;
    s.host_cores = host_cores();
    s.memory = memory_.stats();
    s.frames_created = frames_.created();
    for (std::size_t i = 0; i < streams_.size(); ++i) {
      s.streams[i].reconnects = streams_[i].source->reconnects();
      s.streams[i].outage_ms = streams_[i].source->outage_ms();
      s.streams[i].connected = streams_[i].source->connected();
      s.streams[i].queued = static_cast<std::int64_t>(runs_[i]->queue.size());
    }
    for (std::size_t k = 0; k < sinks_.size(); ++k) {
      s.sinks[k].written = sinks_[k].sink->written();
      s.sinks[k].dropped = sinks_[k].sink->dropped();
      s.sinks[k].failed = sinks_[k].sink->failed();
    }
    const int threads = service_.threads > 0 ? service_.threads : oneapi::tbb::this_task_arena::max_concurrency();
    std::map<int, DeviceStats> devices;
    for (const auto& stage : stages_) {
      StageStats st;
      st.name = stage->name();
      st.calls = stage->calls();
      st.frames = stage->frames();
      st.busy_ms = stage->busy_ms();
      st.cpu_ms = stage->cpu_ms();
      st.latency = stage->call_latency();
      st.counters = stage->counters();
      const bool own_thread = stage->max_batch() > 1 || stage->asynchronous();
      st.parallelism = own_thread || stage->serial() || stage->ordered() ? 1 : threads;
      if (st.busy_ms > 0) st.bound_fps = 1000.0 * static_cast<double>(st.frames) * st.parallelism / st.busy_ms;
      // A model's device: the frames over the busiest device's time (runners on one GPU share it;
      // each CPU runner is a worker of its own).
      std::map<int, double> device_ms;
      int cpu_runner = -1000;
      for (RunnerStats& r : stage->runner_stats()) {
        for (const auto& [rows, batches] : r.batch_rows) st.batch_rows[rows] += batches;
        device_ms[r.device >= 0 ? r.device : cpu_runner--] += r.bound_busy_ms();
        if (r.device >= 0) {
          DeviceStats& d = devices[r.device];
          d.name = fmt::format("cuda:{}", r.device);
          d.frames = std::max(d.frames, st.frames);
          d.compute_busy_ms = std::max(d.compute_busy_ms, r.device_compute_busy_ms);
        }
        s.runners.push_back(std::move(r));
      }
      double busiest = 0;
      for (const auto& [d, ms] : device_ms) busiest = std::max(busiest, ms);
      if (busiest > 0) {
        const double device_fps = 1000.0 * static_cast<double>(st.frames) / busiest;
        st.bound_fps = st.bound_fps > 0 ? std::min(st.bound_fps, device_fps) : device_fps;
      }
      s.stages.push_back(std::move(st));
    }
    const auto cuda = device_runner_registry().find("cuda");
    for (auto& [index, d] : devices) {
      if (d.compute_busy_ms > 0) d.bound_fps = 1000.0 * static_cast<double>(d.frames) / d.compute_busy_ms;
      if (cuda != device_runner_registry().end() && cuda->second.memory_info) {
        const DeviceMemoryInfo m = cuda->second.memory_info(index);
        d.memory_used_bytes = m.used_bytes;
        d.memory_total_bytes = m.total_bytes;
      }
      s.devices.push_back(d);
    }
    return s;
  }

  std::vector<Pipeline::Stream>& streams_;
  std::vector<std::unique_ptr<Stage>>& stages_;
  std::vector<Pipeline::NamedSink>& sinks_;
  const ServiceSettings& service_;
  const PipelineOptions& pipeline_options_;
  const RunOptions& options_;
  FrameMemory& memory_;
  FramePool frames_;

  // Declared before the nodes and batchers so that they are destroyed after them.
  flow::graph graph_;
  std::unique_ptr<flow::function_node<FramePtr, flow::continue_msg>> deliver_;
  std::vector<std::unique_ptr<flow::function_node<FramePtr, FramePtr>>> stage_nodes_;
  std::vector<std::unique_ptr<flow::function_node<FramePtr, flow::continue_msg>>> sink_nodes_;
  std::vector<std::unique_ptr<Batcher>> batchers_;
  flow::receiver<FramePtr>* entry_ = nullptr;
  FreeList<AsyncBatch> batches_;  // run_stage_async's records, recycled

  std::vector<std::unique_ptr<StreamRun>> runs_;
  std::atomic<bool> stop_readers_{false};
  std::atomic<bool> failed_{false};
  std::atomic<std::size_t> pumps_done_{0};
  std::atomic<std::int64_t> in_flight_{0};
  std::mutex error_mutex_;
  std::string error_message_;
  std::string source_error_;  // a source that could not go on (its frames still drain)
  std::mutex stats_mutex_;
  PipelineStats stats_;
  Clock::time_point start_ = Clock::now();
  double cpu_start_s_ = 0;
};

}  // namespace

PipelineStats Pipeline::run(const RunOptions& options) {
  // However the run ends (sources done, stopped, failed), what the placed models measured is kept.
  struct RecordAtEnd {
    Pipeline* pipeline;
    ~RecordAtEnd() { pipeline->record_batch_times(); }
  } record_at_end{this};
  std::optional<oneapi::tbb::global_control> threads;
  if (thread_limit() > 0) threads.emplace(oneapi::tbb::global_control::max_allowed_parallelism, thread_limit());
  if (!shard_) {
    Run run(name_, streams_, stages_, sinks_, service_, options_, options, *memory_);
    return run.execute();
  }
  // Sharded: every snapshot (status, metrics, the summary, an error's) says what this worker owns.
  const auto with_shard = [this](PipelineStats s) {
    s.shard = shard_;
    return s;
  };
  RunOptions sharded = options;
  if (options.on_status) sharded.on_status = [&options, &with_shard](const PipelineStats& s) { options.on_status(with_shard(s)); };
  if (streams_.empty()) return idle(sharded, with_shard);
  Run run(name_, streams_, stages_, sinks_, service_, options_, sharded, *memory_);
  try {
    return with_shard(run.execute());
  } catch (const RunError& e) {
    throw RunError(e.what(), with_shard(e.stats()));
  }
}

PipelineStats Pipeline::idle(const RunOptions& options, const std::function<PipelineStats(PipelineStats)>& with_shard) {
  // A worker that owns no stream (more workers than streams, or hashing gave it none) waits for
  // the stop flag instead of ending: a StatefulSet restarts a pod whose process exits, forever.
  // Status callbacks go on (the launcher's metrics endpoint keeps answering; --duration works).
  log().info("pipeline {}: this worker ({}) owns no stream; idle until stopped", name_, shard_line(*shard_));
  const auto start = Clock::now();
  const auto snapshot = [&] {
    PipelineStats s;
    s.elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
    s.host_cores = host_cores();
    s.memory = memory_->stats();
    for (const auto& sink : sinks_) s.sinks.push_back({sink.name, sink.sink->written(), sink.sink->dropped(), sink.sink->failed()});
    return with_shard(std::move(s));
  };
  // The first status at once: nothing is to start, so the endpoint is ready now.
  if (options.on_status) options.on_status(snapshot());
  auto last_status = start;
  while (!(options.stop && options.stop->load())) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (options.on_status && Clock::now() - last_status >= std::chrono::duration<double>(service_.status_interval_s)) {
      last_status = Clock::now();
      options.on_status(snapshot());
    }
  }
  for (auto& sink : sinks_) sink.sink->close();
  return snapshot();
}

}  // namespace redwood
