// The "cuda" model runner: the infer stage's engine when a model says `device: cuda` (see
// core/model_runner.hpp). A GraphRunner (the optimized graph, the weights) on one GPU, and a ring
// of slots, each with its own stream, events, plans and pinned staging:
//
//   submit (the batcher's thread)                       completion thread
//   ─────────────────────────────                       ─────────────────
//   take a free slot (wait while all are busy)          take the oldest slot in flight
//   on its stream: copy every part in (straight from    wait for its last event (sleeping)
//     pinned memory, else through the slot's staging),  copy staged outputs into their parts
//     zero the padding rows, [normalize a picture],     read the events' times
//     replay the plan's CUDA graph, copy every output   done(result), free the slot
//     part out
//   queue the slot for completion, return
//
// The completion thread sleeps on the event by default (the driver wakes it); with the CUDA
// option blocking_completion off it polls the event instead, a core busy while batches are in
// flight, and notices a batch's end sooner (what a split's segments hand over to each other).
//
// A batch with a `picture` (core/picture_input.hpp) brings input 0 as 8-bit pixels: they are
// copied into the slot's pixel buffer, and a kernel (kernels/data/picture_normalize.cu) writes the
// model's fp32 input from them, outside the captured graph, just before its replay.
//
// With three slots, batch n+1's copy in, batch n's compute and batch n-1's copy out run at once
// on the GPU's copy and compute engines. A slot keeps one plan (workspace, captured graph) per
// batch shape, made on the first batch of that shape; preferred batch sizes (the infer stage's
// padding) keep their number small. Registered from a static initializer, so binaries link
// redwood::backend_cuda with redwood_link_registered().

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/device.hpp"
#include "backends/cuda/device_arch.hpp"
#include "backends/cuda/device_memory.hpp"
#include "backends/cuda/device_probe.hpp"
#include "backends/cuda/graph_runner.hpp"
#include "backends/cuda/kernel_select.hpp"
#include "backends/cuda/kernels/launchers.hpp"
#include "core/log.hpp"
#include "core/thread_name.hpp"
#include "core/model_runner.hpp"
#include "core/ring_queue.hpp"
#include "runtime/sample_values.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

namespace redwood::cuda {
namespace {

std::size_t align_up(std::size_t n) { return (n + 255) / 256 * 256; }

// A model runner's graph runner options: the config's precision and CUDA options.
RunnerOptions runner_options(const RunnerConfig& config) {
  RunnerOptions options;
  options.precision = parse_precision(config.precision);
  options.cuda = cuda_options_from(config.device_options);
  return options;
}

// ", wgmma=off" for a runner's description where its options are not the defaults.
std::string options_note(const CudaOptions& options) {
  return options == CudaOptions{} ? std::string() : ", " + describe(options);
}

void check_options(const std::map<std::string, std::string>& options) { (void)cuda_options_from(options); }

// An option that changes no plan changes no kernel's time either (blocking_completion: how the
// completion thread waits); an unknown name is not this backend's to judge.
bool option_changes_costs(const std::string& option) {
  const CudaOptionField* f = find_cuda_option(option);
  return f == nullptr || f->changes_plan;
}

// The most bytes of one output's consecutive parts that come back in one copy, into one tensor:
// one 8 MiB block of the frame pool, where a copy is long enough to run near the pinned peak.
constexpr std::size_t kOutputGroupBytes = 8ull << 20;

/// Page-locked host memory (a frame pool over pinned_upstream(), a cudaHostAlloc'ed buffer):
/// the copy engines read and write it directly.
bool is_pinned(const void* p) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return attributes.type == cudaMemoryTypeHost;
}

/// Pinned host memory from pinned_pool(), grown on demand (never shrinks).
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer() { release(); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  std::byte* reserve(std::size_t bytes) {
    if (bytes > bytes_) {
      release();
      bytes_ = align_up(bytes);
      data_ = static_cast<std::byte*>(pinned_pool().allocate(bytes_));
    }
    return data_;
  }
  std::byte* data() const { return data_; }

 private:
  void release() {
    if (data_ != nullptr) pinned_pool().deallocate(data_, bytes_);
    data_ = nullptr;
    bytes_ = 0;
  }
  std::byte* data_ = nullptr;
  std::size_t bytes_ = 0;
};

/// The clock every runner of one GPU reads its events against (an event recorded once), and the
/// union of all their compute intervals on it: the GPU's busy time, whichever models share it.
struct DeviceClock {
  Event epoch{true};
  std::mutex mutex;
  IntervalUnion compute;
  double compute_sum_ms = 0;  // every batch's compute, summed (overlapping ones each in full)
};

DeviceClock& device_clock(int device) {
  static std::mutex mutex;
  static std::map<int, DeviceClock*> clocks;
  std::lock_guard lock(mutex);
  DeviceClock*& c = clocks[device];
  if (c == nullptr) {
    RW_CUDA_CHECK(cudaSetDevice(device));
    c = new DeviceClock();  // process-wide, never freed (CUDA may be unloading at exit)
    c->epoch.record(nullptr);
    c->epoch.synchronize();
  }
  return *c;
}

/// The device's pinned-copy peak, measured once per device: 64 MiB each way, best of three.
std::pair<double, double> pinned_peak_gbps(int device, cudaStream_t stream) {
  static std::mutex mutex;
  static std::map<int, std::pair<double, double>> measured;
  std::lock_guard lock(mutex);
  if (auto it = measured.find(device); it != measured.end()) return it->second;
  constexpr std::size_t kBytes = 64ull << 20;
  PinnedBuffer host;
  std::byte* h = host.reserve(kBytes);
  std::memset(h, 1, kBytes);
  DeviceBuffer d(device_pool(device), kBytes, stream);
  Event start(true), end(true);
  double best[2] = {0, 0};
  for (int dir = 0; dir < 2; ++dir) {
    for (int rep = 0; rep < 3; ++rep) {
      start.record(stream);
      if (dir == 0) {
        RW_CUDA_CHECK(cudaMemcpyAsync(d.data(), h, kBytes, cudaMemcpyHostToDevice, stream));
      } else {
        RW_CUDA_CHECK(cudaMemcpyAsync(h, d.data(), kBytes, cudaMemcpyDeviceToHost, stream));
      }
      end.record(stream);
      end.synchronize();
      best[dir] = std::max(best[dir], static_cast<double>(kBytes) / (end.elapsed_ms_since(start) * 1e6));
    }
  }
  return measured[device] = {best[0], best[1]};
}

class CudaModelRunner final : public ModelRunner {
 public:
  CudaModelRunner(std::shared_ptr<const Graph> graph, const RunnerConfig& config, std::string device_name)
      : ModelRunner(*graph),
        device_(config.device),
        ring_(config.slots),
        runner_(set_device(config.device, std::move(graph)), runner_options(config)),
        description_(fmt::format("cuda:{} ({}), {}, {} slot(s){}", config.device, device_name, config.precision,
                                 config.slots, options_note(runner_.options().cuda))),
        recorder_(description_, config.slots, config.device, config.slots > 1),
        clock_(device_clock(config.device)),
        on_clock_(config.device_clock),
        in_order_(static_cast<std::size_t>(config.slots)) {
    for (int i = 0; i < ring_.slots(); ++i) slots_.push_back(std::make_unique<Slot>(runner_.options().max_plans));
    // A model whose input shapes are all fixed is planned now, on every slot, so that an op
    // without a CUDA kernel fails at load rather than on the first frame.
    std::vector<Shape> shapes;
    bool fixed = true;
    for (const ValueInfo& in : runner_.graph().inputs) {
      Shape s;
      for (const Dim& d : in.dims) {
        if (!d.known()) fixed = false;
        s.push_back(d.value);
      }
      fixed = fixed && in.has_shape;
      shapes.push_back(std::move(s));
    }
    const auto start = std::chrono::steady_clock::now();
    if (fixed) {
      for (auto& slot : slots_) plan_on(*slot, shapes);
    }
    const auto planned = std::chrono::steady_clock::now();
    const auto [h2d, d2h] = pinned_peak_gbps(device_, slots_[0]->stream.get());
    recorder_.set_pinned_peak(h2d, d2h);
    using Ms = std::chrono::duration<double, std::milli>;
    log().debug("{}: {} in {:.1f} ms, pinned peak in {:.1f} ms", description_,
                fixed ? "planned at load" : "not planned at load (shapes vary)", Ms(planned - start).count(),
                Ms(std::chrono::steady_clock::now() - planned).count());
    completion_ = std::thread([this] { complete_loop(); });
  }

  ~CudaModelRunner() override {
    drain();
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    completion_cv_.notify_all();
    completion_.join();
    for (auto& slot : slots_) cudaStreamSynchronize(slot->stream.get());
  }

  void submit(InferBatch batch, InferDone done) override {
    check_batch(runner_.graph(), batch);
    RW_CUDA_CHECK(cudaSetDevice(device_));
    double waited = 0;
    const int index = ring_.acquire(&waited);
    Slot& slot = *slots_[static_cast<std::size_t>(index)];
    slot.timing = BatchTiming{};
    slot.timing.wait_ms = waited;
    try {
      enqueue(slot, batch);
    } catch (...) {
      // Nothing of this batch is in flight on the device after a failed enqueue, but its stream
      // may hold copies: wait for them before the slot is reused.
      cudaStreamSynchronize(slot.stream.get());
      cudaGetLastError();
      slot.clear();
      ring_.release(index);
      throw;
    }
    slot.batch = std::move(batch);
    slot.done = std::move(done);
    {
      std::lock_guard lock(mutex_);
      in_order_.push_back(index);
    }
    completion_cv_.notify_one();
  }

  void prepare(const std::vector<Shape>& input_shapes) override {
    // Only while nothing is in flight: plans are made on the slots' streams.
    drain();
    RW_CUDA_CHECK(cudaSetDevice(device_));
    for (auto& slot : slots_) plan_on(*slot, input_shapes);
  }

  void drain() override { ring_.drain(); }
  int in_flight() const override { return ring_.in_flight(); }

  std::string description() const override { return description_; }
  RunnerStats stats() const override {
    RunnerStats s = recorder_.stats();
    std::lock_guard lock(clock_.mutex);
    s.device_compute_busy_ms = clock_.compute.length();
    s.device_compute_sum_ms = clock_.compute_sum_ms;
    return s;
  }

 private:
  struct Slot {
    Stream stream;
    Event copy_in_start{true}, compute_start{true}, compute_end{true}, copy_out_end{true, true};
    explicit Slot(std::size_t max_plans) : plans(max_plans) {}
    LruMap<std::vector<Shape>, std::unique_ptr<Plan>> plans;  // RunnerOptions::max_plans, least recently used out
    PinnedBuffer staging_in, staging_out;
    DeviceBuffer pixels;  // a picture's 8-bit input, grown on demand (never shrinks)
    // The batch in flight.
    InferBatch batch;
    InferDone done;
    std::vector<std::vector<Tensor>> outputs;  // [output][part]: rows of one tensor per output
    // What done() gets: the slot's, its vectors swapped with `outputs` and kept between batches.
    InferResult result;
    struct Group {
      std::size_t output;
      std::size_t offset;  // of its first row in the model's output, bytes
      Tensor tensor;
    };
    std::vector<Group> output_groups;  // those tensors, while the batch is being set up
    struct Staged {
      void* part;  // a group's tensor
      std::size_t offset, bytes;
    };
    std::vector<Staged> staged_out;  // outputs copied into staging_out, to copy into their tensors
    struct Copy {
      void* dst;
      const void* src;
      std::size_t bytes;
    };
    struct Pad {
      void* dst;
      std::size_t bytes;
    };
    std::vector<Copy> copies_in, copies_out;  // kept between batches: no allocation per batch
    std::vector<std::int64_t> rows;           // the batch's rows per part
    std::vector<Shape> shapes;                // the shapes its inputs run at
    std::vector<Pad> pads;
    BatchTiming timing;

    // The batch's tensors go; the vectors keep their room.
    void clear() {
      batch = InferBatch{};
      done = nullptr;
      for (auto& parts : outputs) parts.clear();
      staged_out.clear();
    }
    ~Slot() {
      // Plans (their graphs and buffers) go while their stream is idle.
      cudaStreamSynchronize(stream.get());
      plans.clear();
    }
  };

  static std::shared_ptr<const Graph> set_device(int device, std::shared_ptr<const Graph> graph) {
    const auto start = std::chrono::steady_clock::now();
    RW_CUDA_CHECK(cudaSetDevice(device));
    // The device's context now (CUDA makes it at the first call that needs one), so that the log
    // says what it cost: the part of a start no cache takes away (docs/planner.md, "Plan cache").
    RW_CUDA_CHECK(cudaFree(nullptr));
    log().debug("cuda:{}: context ready in {:.1f} ms",
                device, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    return graph;
  }

  Plan& plan_on(Slot& slot, const std::vector<Shape>& shapes) {
    // Submits from several threads may plan at once; the GraphRunner (weights, its stream) is
    // used by one of them at a time.
    std::lock_guard lock(plan_mutex_);
    if (auto* plan = slot.plans.find(shapes)) return **plan;
    // The slot is free, its last batch complete; an evicted plan goes while nothing of it runs.
    if (slot.plans.size() >= slot.plans.capacity()) RW_CUDA_CHECK(cudaStreamSynchronize(slot.stream.get()));
    slot.plans.insert(shapes, runner_.make_plan(shapes, slot.stream.get()));
    return **slot.plans.find(shapes);
  }

  // Queues the batch's copies in, the replay and the copies out on the slot's stream.
  void enqueue(Slot& slot, const InferBatch& batch) {
    const Graph& graph = runner_.graph();
    std::vector<std::int64_t>& rows = slot.rows;  // the slot's, reused: no allocation per batch
    part_rows(batch.inputs[0], rows);
    std::int64_t total = 0;
    for (auto r : rows) total += r;
    const std::int64_t run_rows = batch.run_rows > 0 ? batch.run_rows : total;
    std::vector<Shape>& shapes = slot.shapes;
    shapes.clear();
    for (std::size_t i = 0; i < batch.inputs.size(); ++i) shapes.push_back(batch_input_shape(batch, i, run_rows));
    Plan& plan = plan_on(slot, shapes);
    const Schedule& s = plan.schedule();
    const bool picture = batch.picture.has_value();
    if (picture) {
      const DType dtype = s.values[static_cast<std::size_t>(s.graph_inputs[0])].dtype;
      RW_EXPECTS(dtype == DType::kF32, Unsupported, "{}: input '{}' is {} on the GPU; a picture is normalized into fp32 only",
                 graph.name, graph.inputs[0].name, dtype_name(dtype));
    }
    // Every output must have a row per input row, to be split back into the parts.
    for (std::size_t o = 0; o < s.graph_outputs.size(); ++o) {
      const auto& v = s.values[static_cast<std::size_t>(s.graph_outputs[o])];
      RW_EXPECTS(!v.shape.empty() && v.shape[0] == run_rows, InvalidArgument,
                 "{}: output '{}' is {} for a batch of {} rows; a batched model needs one output row per input row",
                 graph.name, graph.outputs[o].name, shape_str(v.shape), run_rows);
    }
    cudaStream_t stream = slot.stream.get();

    // Everything the host does first (which parts are pinned, staging the others, the output
    // parts), then the copies back to back: the copy engine is not kept waiting between them.
    using Copy = Slot::Copy;
    std::vector<Copy>& ins = slot.copies_in;
    std::vector<Copy>& outs = slot.copies_out;
    ins.clear();
    outs.clear();
    std::size_t staged = 0;
    for (const auto& parts : batch.inputs) {
      for (const Tensor& p : parts) {
        if (p.nbytes() > 0 && (!p.is_contiguous() || !is_pinned(p.raw_data()))) staged += align_up(p.nbytes());
      }
    }
    std::byte* staging = staged > 0 ? slot.staging_in.reserve(staged) : nullptr;
    std::size_t staging_at = 0;
    std::byte* pixels = nullptr;
    if (picture) {
      std::size_t bytes = 0;
      for (const Tensor& p : batch.inputs[0]) bytes += p.nbytes();
      // Not stream-ordered: it is freed only while the slot is idle (here, or after ~Slot's
      // synchronize), and the pool's per-thread cache would keep the slot's stream past its end.
      if (slot.pixels.bytes() < bytes) slot.pixels = DeviceBuffer(device_pool(device_), align_up(bytes));
      pixels = static_cast<std::byte*>(slot.pixels.data());
    }
    std::vector<Slot::Pad>& pads = slot.pads;
    pads.clear();
    for (std::size_t i = 0; i < batch.inputs.size(); ++i) {
      auto* dst = i == 0 && picture ? pixels : static_cast<std::byte*>(plan.input(i));
      std::size_t at = 0;
      for (const Tensor& part : batch.inputs[i]) {
        const std::size_t bytes = part.nbytes();
        if (bytes == 0) continue;
        const void* src = part.raw_data();
        if (!part.is_contiguous() || !is_pinned(src)) {
          const Tensor c = part.contiguous();
          std::memcpy(staging + staging_at, c.raw_data(), bytes);
          src = staging + staging_at;
          staging_at += align_up(bytes);
        }
        ins.push_back({dst + at, src, bytes});
        at += bytes;
      }
      const auto& v = s.values[static_cast<std::size_t>(s.graph_inputs[i])];
      if (i == 0 && picture) {
        // The padding rows are zeros of the float input, as for any batch; the kernel writes the rest.
        dst = static_cast<std::byte*>(plan.input(0));
        at = run_rows > 0 ? v.bytes() / static_cast<std::size_t>(run_rows) * static_cast<std::size_t>(total) : 0;
      }
      if (v.bytes() > at) pads.push_back({dst + at, v.bytes() - at});
    }
    // An output comes back in few copies: its parts are views of rows of a few tensors, each
    // holding consecutive parts up to kOutputGroupBytes (one pool block, so that a batch of 64
    // rows does not round up to one huge block), and each tensor is one copy.
    slot.outputs.assign(s.graph_outputs.size(), {});
    std::vector<Slot::Group>& groups = slot.output_groups;
    groups.clear();
    std::size_t out_staged = 0;
    for (std::size_t o = 0; o < s.graph_outputs.size(); ++o) {
      const auto& v = s.values[static_cast<std::size_t>(s.graph_outputs[o])];
      const std::size_t row_bytes = run_rows > 0 ? v.bytes() / static_cast<std::size_t>(run_rows) : 0;
      std::size_t at = 0;  // the group's first byte in the output
      for (std::size_t first = 0; first < rows.size();) {
        std::size_t end = first + 1;
        std::int64_t group_rows = rows[first];
        while (end < rows.size() && static_cast<std::size_t>(group_rows + rows[end]) * row_bytes <= kOutputGroupBytes) {
          group_rows += rows[end++];
        }
        Shape shape = v.shape;
        shape[0] = group_rows;
        Tensor whole = batch.allocate ? batch.allocate(v.dtype, shape) : Tensor();
        if (!whole.defined()) whole = Tensor::empty(v.dtype, shape);
        if (whole.nbytes() > 0 && !is_pinned(whole.raw_data())) out_staged += align_up(whole.nbytes());
        std::int64_t r = 0;
        for (std::size_t k = first; k < end; r += rows[k++]) slot.outputs[o].push_back(whole.rows(r, rows[k]));
        groups.push_back({o, at, std::move(whole)});
        at += groups.back().tensor.nbytes();
        first = end;
      }
    }
    std::byte* out_staging = out_staged > 0 ? slot.staging_out.reserve(out_staged) : nullptr;
    std::size_t out_at = 0;
    for (Slot::Group& g : groups) {
      const auto& v = s.values[static_cast<std::size_t>(s.graph_outputs[g.output])];
      const std::size_t bytes = g.tensor.nbytes();
      if (bytes == 0) continue;
      if (v.kind == Schedule::Kind::kHost) {
        std::memcpy(g.tensor.raw_data(), static_cast<const std::byte*>(v.host.raw_data()) + g.offset, bytes);  // computed at plan time
        continue;
      }
      const auto* src = static_cast<const std::byte*>(plan.output(g.output)) + g.offset;
      if (is_pinned(g.tensor.raw_data())) {
        outs.push_back({g.tensor.raw_data(), src, bytes});
      } else {
        outs.push_back({out_staging + out_at, src, bytes});
        slot.staged_out.push_back({g.tensor.raw_data(), out_at, bytes});
        out_at += align_up(bytes);
      }
    }
    groups.clear();  // the parts hold the tensors now

    // Copy in (the padding rows zeroed), replay, copy out.
    slot.copy_in_start.record(stream);
    for (const Copy& c : ins) {
      RW_CUDA_CHECK(cudaMemcpyAsync(c.dst, c.src, c.bytes, cudaMemcpyHostToDevice, stream));
      slot.timing.bytes_in += c.bytes;
    }
    for (const Slot::Pad& p : pads) RW_CUDA_CHECK(cudaMemsetAsync(p.dst, 0, p.bytes, stream));
    slot.compute_start.record(stream);
    if (picture) normalize_picture_on(*batch.picture, batch.inputs[0], total, pixels, plan.input(0), stream);
    plan.enqueue(stream);
    slot.compute_end.record(stream);
    for (const Copy& c : outs) {
      RW_CUDA_CHECK(cudaMemcpyAsync(c.dst, c.src, c.bytes, cudaMemcpyDeviceToHost, stream));
      slot.timing.bytes_out += c.bytes;
    }
    slot.copy_out_end.record(stream);
    slot.timing.rows = batch.counted_rows > 0 ? batch.counted_rows : total;
    slot.timing.run_rows = batch.counted_run_rows > 0 ? batch.counted_run_rows : run_rows;
  }

  // The pixels of `total` rows, in the slot's buffer, into the model's fp32 input.
  static void normalize_picture_on(const PictureInput& picture, const std::vector<Tensor>& parts, std::int64_t total,
                                   const std::byte* pixels, void* input, cudaStream_t stream) {
    kernels::PictureNormalize p;
    p.rows = total;
    p.height = static_cast<int>(parts[0].dim(1));
    p.width = static_cast<int>(parts[0].dim(2));
    p.channels = picture.channels;
    p.nchw = picture.nchw;
    for (int c = 0; c < 3; ++c) {
      p.alpha[c] = picture.alpha[static_cast<std::size_t>(c)];
      p.beta[c] = picture.beta[static_cast<std::size_t>(c)];
    }
    kernels::launch_picture_normalize(p, reinterpret_cast<const std::uint8_t*>(pixels), static_cast<float*>(input), stream);
  }

  // Until the slot's batch has run: asleep on its last event, or polling it (CudaOptions::blocking_completion).
  void wait_for_end(const Slot& slot) const {
    if (runner_.options().cuda.blocking_completion) {
      slot.copy_out_end.synchronize();
      return;
    }
    while (!slot.copy_out_end.query()) std::this_thread::yield();
  }

  void complete_loop() {
    set_thread_name("rw-cuda-done");
    cudaSetDevice(device_);
    for (;;) {
      int index = -1;
      {
        std::unique_lock lock(mutex_);
        completion_cv_.wait(lock, [&] { return !in_order_.empty() || stopping_; });
        if (in_order_.empty()) return;
        index = in_order_.front();
        in_order_.pop_front();
      }
      Slot& slot = *slots_[static_cast<std::size_t>(index)];
      InferResult& result = slot.result;
      try {
        wait_for_end(slot);
        for (const auto& st : slot.staged_out) {
          std::memcpy(st.part, slot.staging_out.data() + st.offset, st.bytes);
        }
        BatchTiming& t = slot.timing;
        t.copy_in_start = slot.copy_in_start.elapsed_ms_since(clock_.epoch);
        t.compute_start = slot.compute_start.elapsed_ms_since(clock_.epoch);
        t.compute_end = slot.compute_end.elapsed_ms_since(clock_.epoch);
        t.copy_out_end = slot.copy_out_end.elapsed_ms_since(clock_.epoch);
        if (slot.batch.counted && on_clock_) {
          std::lock_guard lock(clock_.mutex);
          clock_.compute.add(t.compute_start, t.compute_end);
          clock_.compute_sum_ms += t.compute_end - t.compute_start;
        }
        std::swap(result.outputs, slot.outputs);
      } catch (...) {
        result.outputs.clear();
        result.error = std::current_exception();
      }
      if (slot.batch.counted) recorder_.record(slot.timing, result.error != nullptr);
      // The batch goes back to its submitter, its parts (the frames' tensors) dropped.
      for (auto& parts : slot.batch.inputs) parts.clear();
      result.batch = std::move(slot.batch);
      try {
        slot.done(result);
      } catch (const std::exception& e) {
        log().error("{}: a batch's completion threw: {}", description_, e.what());
      }
      for (auto& parts : result.outputs) parts.clear();  // what the continuation left goes now
      result.error = nullptr;
      result.batch = InferBatch{};
      slot.clear();  // the batch's tensors go back to their pool before the slot is reused
      ring_.release(index);
    }
  }

  int device_;
  SlotRing ring_;  // before runner_: a bad slot count fails before the model is loaded
  GraphRunner runner_;
  std::string description_;
  RunnerStatsRecorder recorder_;
  std::vector<std::unique_ptr<Slot>> slots_;  // after runner_: their plans go first
  DeviceClock& clock_;
  bool on_clock_;  // RunnerConfig::device_clock
  std::mutex plan_mutex_;
  std::mutex mutex_;  // guards in_order_ and stopping_
  std::condition_variable completion_cv_;
  RingQueue<int> in_order_;  // submitted slots, oldest first (a ring of one place per slot)
  bool stopping_ = false;
  std::thread completion_;
};

// Why GPU `device` cannot run models, or "": no device (CUDA's reason), or a device this build
// carries no code for (device_arch.hpp), which would otherwise fail at the first kernel launch.
std::string unavailable_reason(const ProbeResult& probe, int device = 0) {
  if (probe.devices.empty()) {
    return fmt::format("{} (CUDA runtime {}, driver {})", probe.error.empty() ? "no CUDA device found" : probe.error,
                       probe.runtime_version, probe.driver_version);
  }
  if (device < 0 || static_cast<std::size_t>(device) >= probe.devices.size()) {
    return fmt::format("GPU {} does not exist (this machine has {})", device, probe.devices.size());
  }
  return architecture_problem(probe.devices[static_cast<std::size_t>(device)]);
}

std::string cuda_unavailable() { return unavailable_reason(cuda_devices()); }

std::unique_ptr<ModelRunner> make_cuda_runner(std::shared_ptr<const Graph> graph, const RunnerConfig& config) {
  const ProbeResult& probe = cuda_devices();
  const std::string why = unavailable_reason(probe, config.device);
  RW_EXPECTS(why.empty(), Unsupported, "no usable CUDA device: {}", why);
  return std::make_unique<CudaModelRunner>(std::move(graph), config, probe.devices[static_cast<std::size_t>(config.device)].name);
}

int cuda_device_count() { return static_cast<int>(cuda_devices().devices.size()); }

memory::MemoryResource& pinned_memory() { return pinned_upstream(); }

// The whole GPU's memory in use (every process's) and its size; {0, 0} when CUDA cannot say.
DeviceMemoryInfo cuda_memory_info(int device) {
  std::size_t free = 0, total = 0;
  if (cudaSetDevice(device) != cudaSuccess || cudaMemGetInfo(&free, &total) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error state for the next call
    return {};
  }
  return {static_cast<std::int64_t>(total - free), static_cast<std::int64_t>(total)};
}

std::string supports(const Graph& graph, const Node& node, const std::vector<TensorDesc>& inputs,
                     const std::string& precision) {
  return cuda_supports(graph, node, inputs, parse_precision(precision));
}

NodeTimes time_nodes(std::shared_ptr<const Graph> graph, const std::vector<Shape>& input_shapes,
                     const RunnerConfig& config, int runs) {
  const ProbeResult& probe = cuda_devices();
  const std::string why = unavailable_reason(probe, config.device);
  RW_EXPECTS(why.empty(), Unsupported, "no usable CUDA device: {}", why);
  RW_CUDA_CHECK(cudaSetDevice(config.device));
  GraphRunner runner(std::move(graph), runner_options(config));
  Plan& plan = runner.plan_for(input_shapes);
  cudaStream_t stream = runner.stream();
  // Sample values in the inputs (as measure_partition's batches carry), not what the memory held.
  const Schedule& schedule = plan.schedule();
  for (std::size_t i = 0; i < schedule.graph_inputs.size(); ++i) {
    const auto& v = schedule.values[static_cast<std::size_t>(schedule.graph_inputs[i])];
    if (v.kind == Schedule::Kind::kHost || v.bytes() == 0) continue;
    std::vector<std::byte> host(v.bytes());
    runtime::fill_sample_values(host.data(), v.dtype, host.size());
    RW_CUDA_CHECK(cudaMemcpy(plan.input(i), host.data(), host.size(), cudaMemcpyHostToDevice));
  }
  // Replays for about 20 ms first: an idle GPU raises its clocks over the first milliseconds.
  const auto warm_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
  for (int i = 0; i < 200 && std::chrono::steady_clock::now() < warm_until; ++i) {
    plan.enqueue(stream);
    RW_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  const std::vector<double> ms = plan.time_steps(stream, runs);
  NodeTimes times;
  for (std::size_t i = 0; i < ms.size(); ++i) times.by_node[runner.graph().nodes[plan.schedule().steps[i].node].name] += ms[i];
  // The whole plan as a runner replays it, between two events.
  Event start(true), stop(true);
  std::vector<float> whole;
  for (int r = 0; r < runs; ++r) {
    start.record(stream);
    plan.enqueue(stream);
    stop.record(stream);
    stop.synchronize();
    float elapsed = 0;
    RW_CUDA_CHECK(cudaEventElapsedTime(&elapsed, start.get(), stop.get()));
    whole.push_back(elapsed);
  }
  std::sort(whole.begin(), whole.end());
  times.whole_ms = whole.empty() ? 0.0 : whole[whole.size() / 2];
  return times;
}

// The driver's context of `device`, made on a thread of its own (CUDA makes a device's primary
// context once per process, and a thread that needs it meanwhile waits for the one being made),
// then the pinned-copy peak that runners report their copies against (measured once per device
// and process): both off the path of a start, while the models are read.
std::jthread warm_up(int device) {
  return std::jthread([device] {
    set_thread_name("rw-cuda-init");
    const auto start = std::chrono::steady_clock::now();
    if (cudaSetDevice(device) != cudaSuccess || cudaFree(nullptr) != cudaSuccess) {
      cudaGetLastError();  // the runner, made later, reports the device's problem itself
      return;
    }
    const auto made = std::chrono::steady_clock::now();
    try {
      Stream stream;
      pinned_peak_gbps(device, stream.get());
    } catch (const Error& e) {
      log().debug("cuda:{}: pinned peak not measured while warming up: {}", device, e.what());
    }
    using Ms = std::chrono::duration<double, std::milli>;
    log().debug("cuda:{}: context made in {:.1f} ms, pinned peak measured in {:.1f} ms (on rw-cuda-init)", device,
                Ms(made - start).count(), Ms(std::chrono::steady_clock::now() - made).count());
  });
}

[[maybe_unused]] const bool registered =
    register_device_runner("cuda", {.unavailable = cuda_unavailable,
                                    .make = make_cuda_runner,
                                    .pinned_memory = pinned_memory,
                                    .device_count = cuda_device_count,
                                    .check_options = check_options,
                                    .option_changes_costs = option_changes_costs,
                                    .memory_info = cuda_memory_info,
                                    .supports = supports,
                                    .time_nodes = time_nodes,
                                    .warm_up = warm_up});

}  // namespace
}  // namespace redwood::cuda
