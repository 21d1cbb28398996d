#include "core/model_runner.hpp"

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/thread_name.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <future>
#include <thread>

namespace redwood {

// ---- statistics ----

double RunnerStats::overlap() const {
  const double copy = copy_in_ms + copy_out_ms;
  if (copy <= 0) return 0;
  // Time copies ran, less the time nothing but copies ran: busy = compute ∪ copy, so the copy
  // time hidden under compute is compute_busy + copy_busy - busy.
  const double hidden = std::max(0.0, compute_busy_ms + copy_busy_ms - busy_ms);
  return std::min(1.0, hidden / copy_busy_ms);
}

double RunnerStats::copy_gbps() const {
  const double ms = copy_in_ms + copy_out_ms;
  return ms > 0 ? static_cast<double>(bytes_in + bytes_out) / (ms * 1e6) : 0;
}

RunnerStatsRecorder::RunnerStatsRecorder(std::string description, int slots, int device, bool copies_overlap) {
  stats_.description = std::move(description);
  stats_.slots = slots;
  stats_.device = device;
  stats_.copies_overlap = copies_overlap;
}

namespace {
constexpr std::size_t kUnionWindow = 256;
}  // namespace

IntervalUnion::IntervalUnion() { pieces_.reserve(kUnionWindow + 1); }

void IntervalUnion::add(double start, double end) {
  start = std::max(start, floor_);
  if (end <= start) return;
  // Merge with every piece that touches [start, end]: from the last piece starting at or before
  // `start` (if it reaches it) through the last starting at or before `end`.
  auto first = std::upper_bound(pieces_.begin(), pieces_.end(), start, [](double v, const auto& p) { return v < p.first; });
  if (first != pieces_.begin() && std::prev(first)->second >= start) --first;
  auto last = first;
  while (last != pieces_.end() && last->first <= end) {
    start = std::min(start, last->first);
    end = std::max(end, last->second);
    ++last;
  }
  if (first != last) {
    *first = {start, end};
    pieces_.erase(first + 1, last);
  } else {
    pieces_.insert(first, {start, end});
  }
  if (pieces_.size() > kUnionWindow) {
    const auto& oldest = pieces_.front();
    finalized_ += oldest.second - oldest.first;
    floor_ = oldest.second;
    pieces_.erase(pieces_.begin());
  }
}

double IntervalUnion::length() const {
  double total = finalized_;
  for (const auto& [start, end] : pieces_) total += end - start;
  return total;
}

void RunnerStatsRecorder::record(const BatchTiming& t, bool failed) {
  std::lock_guard lock(mutex_);
  RunnerStats& s = stats_;
  s.wait_ms += t.wait_ms;
  if (failed) {
    ++s.failed;
    return;
  }
  ++s.batches;
  s.rows += t.rows;
  s.run_rows += t.run_rows;
  ++s.batch_rows[t.rows];
  RunnerStats::RowsTimes& ran = s.run_rows_ms[t.run_rows > 0 ? t.run_rows : t.rows];
  ++ran.batches;
  ran.ms += t.copy_out_end - t.copy_in_start;
  ran.compute_ms += t.compute_end - t.compute_start;
  s.copy_in_ms += t.compute_start - t.copy_in_start;
  s.compute_ms += t.compute_end - t.compute_start;
  s.copy_out_ms += t.copy_out_end - t.compute_end;
  s.bytes_in += t.bytes_in;
  s.bytes_out += t.bytes_out;
  compute_.add(t.compute_start, t.compute_end);
  copy_.add(t.copy_in_start, t.compute_start);
  copy_.add(t.compute_end, t.copy_out_end);
  busy_.add(t.copy_in_start, t.copy_out_end);
  s.compute_busy_ms = compute_.length();
  s.copy_busy_ms = copy_.length();
  s.busy_ms = busy_.length();
  first_start_ = std::min(first_start_, t.copy_in_start);
  last_end_ = std::max(last_end_, t.copy_out_end);
  s.span_ms = last_end_ - first_start_;
}

void RunnerStatsRecorder::set_pinned_peak(double h2d_gbps, double d2h_gbps) {
  std::lock_guard lock(mutex_);
  stats_.pinned_h2d_gbps = h2d_gbps;
  stats_.pinned_d2h_gbps = d2h_gbps;
}

RunnerStats RunnerStatsRecorder::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

// ---- slots ----

SlotRing::SlotRing(int slots) : slots_(slots) {
  RW_EXPECTS(slots >= 1 && slots <= static_cast<int>(free_.size()), InvalidArgument, "slots must be from 1 to {}, not {}",
             free_.size(), slots);
  for (int i = 0; i < slots; ++i) free_[static_cast<std::size_t>(i)] = i;
  free_count_ = slots;
}

int SlotRing::acquire(double* waited_ms) {
  const auto asked = std::chrono::steady_clock::now();
  std::unique_lock lock(mutex_);
  freed_.wait(lock, [&] { return free_count_ > 0; });
  const int slot = free_[static_cast<std::size_t>(first_free_)];
  first_free_ = (first_free_ + 1) % slots_;
  --free_count_;
  if (waited_ms != nullptr) *waited_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - asked).count();
  return slot;
}

void SlotRing::release(int slot) {
  {
    std::lock_guard lock(mutex_);
    free_[static_cast<std::size_t>((first_free_ + free_count_) % slots_)] = slot;
    ++free_count_;
  }
  freed_.notify_all();
}

void SlotRing::drain() const {
  std::unique_lock lock(mutex_);
  freed_.wait(lock, [&] { return free_count_ == slots_; });
}

int SlotRing::in_flight() const {
  std::lock_guard lock(mutex_);
  return slots_ - free_count_;
}

// ---- batches ----

namespace {
std::int64_t rows_of(const Tensor& part) { return part.rank() == 0 ? 1 : part.dim(0); }
}  // namespace

void part_rows(const std::vector<Tensor>& parts, std::vector<std::int64_t>& rows) {
  rows.clear();
  for (const Tensor& t : parts) rows.push_back(rows_of(t));
}

void gather_rows(const std::vector<Tensor>& parts, void* out, std::size_t out_bytes) {
  auto* dst = static_cast<std::byte*>(out);
  std::size_t at = 0;
  for (const Tensor& part : parts) {
    const Tensor c = part.contiguous();
    RW_EXPECTS(at + c.nbytes() <= out_bytes, InvalidArgument, "gather_rows: {} bytes of parts for {} bytes", at + c.nbytes(),
               out_bytes);
    if (c.nbytes() > 0) std::memcpy(dst + at, c.raw_data(), c.nbytes());
    at += c.nbytes();
  }
  if (at < out_bytes) std::memset(dst + at, 0, out_bytes - at);
}

void check_batch(const Graph& graph, const InferBatch& batch) {
  // Checked for every batch: nothing here allocates unless it throws.
  const std::string& model = graph.source.empty() ? graph.name : graph.source;
  RW_EXPECTS(batch.inputs.size() == graph.inputs.size(), InvalidArgument, "{}: a batch of {} input(s) for {} graph input(s)",
             model, batch.inputs.size(), graph.inputs.size());
  RW_EXPECTS(!batch.inputs.empty() && !batch.inputs[0].empty(), InvalidArgument, "{}: an empty batch", model);
  const std::vector<Tensor>& first = batch.inputs[0];
  std::int64_t total = 0;
  for (const Tensor& p : first) total += rows_of(p);
  for (std::size_t i = 0; i < batch.inputs.size(); ++i) {
    const ValueInfo& vi = graph.inputs[i];
    const auto& parts = batch.inputs[i];
    bool same_rows = parts.size() == first.size();
    for (std::size_t k = 0; same_rows && k < parts.size(); ++k) same_rows = rows_of(parts[k]) == rows_of(first[k]);
    RW_EXPECTS(same_rows, InvalidArgument, "{}: input '{}' is split into other rows than input '{}'", model, vi.name,
               graph.inputs[0].name);
    const bool picture = i == 0 && batch.picture.has_value();
    for (const Tensor& p : parts) {
      RW_EXPECTS(p.defined() && p.device() == Device::kCpu, InvalidArgument, "{}: input '{}' must be a host tensor", model,
                 vi.name);
      if (picture) {
        RW_EXPECTS(p.dtype() == DType::kU8 && p.rank() == 4 && p.dim(3) == batch.picture->channels, InvalidArgument,
                   "{}: input '{}' takes a picture as 8-bit pixels [rows, H, W, {}], not {}", model, vi.name,
                   batch.picture->channels, p.description());
        const std::string why = picture_mismatch(vi, *batch.picture, p.dim(1), p.dim(2));
        RW_EXPECTS(why.empty(), InvalidArgument, "{}: pixels {} cannot feed input {}: {}", model, p.description(),
                   vi.description(), why);
      }
      RW_EXPECTS(picture || vi.dtype == DType::kUndefined || p.dtype() == vi.dtype, InvalidArgument,
                 "{}: input '{}' is {}, the graph declares {}", model, vi.name, p.description(), vi.description());
      RW_EXPECTS(p.rank() >= 1 && p.rank() == parts[0].rank() &&
                     std::equal(p.shape().begin() + 1, p.shape().end(), parts[0].shape().begin() + 1),
                 InvalidArgument, "{}: the parts of input '{}' differ beyond dim 0 ({} and {})", model, vi.name,
                 p.description(), parts[0].description());
    }
  }
  RW_EXPECTS(batch.run_rows == 0 || batch.run_rows >= total, InvalidArgument, "{}: run_rows {} is below the batch's {} rows",
             model, batch.run_rows, total);
}

Shape batch_input_shape(const InferBatch& batch, std::size_t i, std::int64_t run_rows) {
  Shape shape = batch.inputs[i][0].shape();
  shape[0] = run_rows;
  return i == 0 && batch.picture ? picture_model_shape(shape, *batch.picture) : shape;
}

ModelRunner::ModelRunner(const Graph& graph) {
  for (const auto& vi : graph.inputs) input_names_.push_back(vi.name);
}

std::vector<RunnerStats> ModelRunner::stats_by_segment() const {
  std::vector<RunnerStats> segments = segment_stats();
  if (segments.empty()) return {stats()};
  segments.front().batch_rows = stats().batch_rows;
  for (std::size_t k = 1; k < segments.size(); ++k) segments[k].batch_rows.clear();
  return segments;
}

std::vector<Tensor> ModelRunner::run(const std::map<std::string, Tensor>& inputs, bool counted) {
  InferBatch batch;
  batch.counted = counted;
  for (const auto& name : input_names_) {
    auto it = inputs.find(name);
    RW_EXPECTS(it != inputs.end(), InvalidArgument, "input '{}' is not given", name);
    batch.inputs.push_back({it->second});
  }
  for (const auto& [name, t] : inputs) {
    RW_EXPECTS(std::find(input_names_.begin(), input_names_.end(), name) != input_names_.end(), InvalidArgument,
               "'{}' is not an input of the model (its inputs: {})", name, fmt::join(input_names_, ", "));
  }
  std::promise<InferResult> promise;
  auto future = promise.get_future();
  submit(std::move(batch), [&promise](InferResult& r) { promise.set_value(std::move(r)); });
  InferResult r = future.get();
  if (r.error) std::rethrow_exception(r.error);
  std::vector<Tensor> out;
  for (auto& parts : r.outputs) out.push_back(std::move(parts.at(0)));
  return out;
}


void check_output_rows(const Tensor& output, std::int64_t rows, const std::string& what) {
  RW_EXPECTS(output.rank() >= 1 && output.dim(0) == rows, InvalidArgument,
             "{} is {}, expected {} rows (one per item: every output of a batched model must be)", what,
             output.description(), rows);
}

std::vector<Tensor> split_rows(const Tensor& whole, const std::vector<std::int64_t>& rows, std::int64_t run_rows,
                               const TensorAllocator& allocate, const std::string& what) {
  std::int64_t total = 0;
  for (auto r : rows) total += r;
  check_output_rows(whole, run_rows, what);
  if (rows.size() == 1 && run_rows == total && !allocate) return {whole};
  const Tensor c = whole.contiguous();
  const std::size_t row_bytes = run_rows > 0 ? c.nbytes() / static_cast<std::size_t>(run_rows) : 0;
  std::vector<Tensor> parts;
  parts.reserve(rows.size());
  const auto* src = static_cast<const std::byte*>(c.raw_data());
  for (auto r : rows) {
    Shape shape = c.shape();
    shape[0] = r;
    Tensor part = allocate ? allocate(c.dtype(), shape) : Tensor::empty(c.dtype(), shape);
    if (!part.defined()) part = Tensor::empty(c.dtype(), shape);
    if (part.nbytes() > 0) std::memcpy(part.raw_data(), src, part.nbytes());
    src += row_bytes * static_cast<std::size_t>(r);
    parts.push_back(std::move(part));
  }
  return parts;
}

void split_rows_as_views(const Tensor& whole, const std::vector<std::int64_t>& rows, std::int64_t run_rows,
                         const std::string& what, std::vector<Tensor>& parts) {
  check_output_rows(whole, run_rows, what);
  const Tensor c = whole.contiguous();
  parts.clear();
  std::int64_t begin = 0;
  for (auto r : rows) {
    parts.push_back(c.rows(begin, r));
    begin += r;
  }
}

namespace {

/// Normalizes picture parts (8-bit [rows, H, W, C]) into the float input `in`, one after the
/// other, zeroing the padding rows after them as gather_rows does; returns the pixels' bytes.
std::size_t normalize_parts(const std::vector<Tensor>& parts, const PictureInput& picture, Tensor& in) {
  auto* dst = in.data<float>();
  std::size_t bytes = 0;
  for (const Tensor& part : parts) {
    const Tensor c = part.contiguous();
    normalize_picture(c.data<std::uint8_t>(), c.dim(0), c.dim(1), c.dim(2), picture, dst);
    dst += c.numel();
    bytes += c.nbytes();
  }
  const auto* end = in.data<float>() + in.numel();
  if (dst < end) std::memset(dst, 0, static_cast<std::size_t>(end - dst) * sizeof(float));
  return bytes;
}

}  // namespace

std::vector<Tensor> stage_inputs(const InferBatch& batch, std::int64_t total_rows, std::int64_t run_rows,
                                 std::size_t* bytes_in) {
  std::vector<Tensor> staged;
  stage_inputs(batch, total_rows, run_rows, bytes_in, staged);
  return staged;
}

void stage_inputs(const InferBatch& batch, std::int64_t total_rows, std::int64_t run_rows, std::size_t* bytes_in,
                  std::vector<Tensor>& staged) {
  staged.clear();
  staged.reserve(batch.inputs.size());
  for (std::size_t i = 0; i < batch.inputs.size(); ++i) {
    const auto& parts = batch.inputs[i];
    const bool picture = i == 0 && batch.picture.has_value();
    Tensor in;
    if (parts.size() == 1 && run_rows == total_rows && !picture) {
      in = parts[0];
    } else {
      const Shape shape = batch_input_shape(batch, i, run_rows);
      const DType dtype = picture ? DType::kF32 : parts[0].dtype();
      in = batch.allocate ? batch.allocate(dtype, shape) : Tensor();
      if (!in.defined()) in = Tensor::empty(dtype, shape);
      if (picture) {
        *bytes_in += normalize_parts(parts, *batch.picture, in);
      } else {
        gather_rows(parts, in.raw_data(), in.nbytes());
      }
    }
    if (!picture) *bytes_in += in.nbytes();
    staged.push_back(std::move(in));
  }
}


Registry<DeviceRunnerFactory>& device_runner_registry() {
  static Registry<DeviceRunnerFactory> registry("device runner");
  return registry;
}

bool register_device_runner(const std::string& device, DeviceRunnerFactory factory) {
  return device_runner_registry().add(device, std::move(factory));
}

}  // namespace redwood
