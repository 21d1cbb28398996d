#include "stages/stage.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>

namespace redwood {

std::string TensorSpec::description() const {
  std::vector<std::string> parts;
  for (auto d : dims) parts.push_back(d < 0 ? "?" : std::to_string(d));
  const std::string shape = fmt::format("[{}]", fmt::join(parts, ", "));
  if (picture) return shape + " u8 picture";
  return dtype == DType::kF32 ? shape : fmt::format("{} {}", shape, dtype_name(dtype));
}

const ModelEntry& StageArgs::model(const std::string& key) const {
  const auto model_name = params.require<std::string>(key);
  const auto it = models.find(model_name);
  if (it == models.end()) {
    std::vector<std::string> names;
    for (const auto& [n, _] : models) names.push_back(n);
    params.fail(key, fmt::format("no model named '{}' under models: (known: {})", model_name, fmt::join(names, ", ")));
  }
  return it->second;
}

void Stage::remember_place(const Params& params) {
  origin_ = std::make_shared<ConfigOrigin>(params.origin());
  where_ = params.self();
}

void Stage::fail_config(const std::string& message) const {
  const std::string text = fmt::format("stage '{}': {}", name_, message);
  if (origin_) origin_->fail(where_, text);
  throw ConfigError(text);
}

void Stage::consume(std::string key, Reads reads) {
  consumes_.push_back(std::move(key));
  reads_.push_back(reads);
}

void Stage::check(const TensorSpecs& available) const {
  for (std::size_t i = 0; i < consumes_.size(); ++i) {
    const std::string& key = consumes_[i];
    const auto it = available.find(key);
    if (it == available.end()) {
      std::vector<std::string> keys;
      for (const auto& [k, _] : available) keys.push_back(k);
      fail_config(fmt::format("reads tensor '{}' but no earlier stage writes it (written so far: {})", key,
                              keys.empty() ? std::string("none") : fmt::format("{}", fmt::join(keys, ", "))));
    }
    if (reads_[i] == Reads::kTransform && !it->second.maps_picture) {
      fail_config(fmt::format("transform '{}' is not a preprocess stage's output: no picture mapping comes with it", key));
    }
    if (reads_[i] == Reads::kTensor && it->second.picture) {
      fail_config(fmt::format("reads tensor '{}' {}, pixels left for its model's runner to normalize (preprocess "
                              "normalize_on: model, or auto with the model on a GPU): only an infer stage reads them; "
                              "give the preprocess stage normalize_on: stage for a float tensor",
                              key, it->second.description()));
    }
  }
}

namespace {

// The calling thread's CPU time in microseconds (CLOCK_THREAD_CPUTIME_ID).
std::int64_t thread_cpu_us() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<std::int64_t>(t.tv_sec) * 1000000 + t.tv_nsec / 1000;
}

}  // namespace

void Stage::process(std::span<Frame* const> frames) {
  const auto start = Clock::now();
  const std::int64_t cpu_start = thread_cpu_us();
  do_process(frames);
  cpu_us_ += thread_cpu_us() - cpu_start;
  const auto done = Clock::now();
  for (Frame* f : frames) f->stage_done.push_back({name_, done});
  busy_us_ += std::chrono::duration_cast<std::chrono::microseconds>(done - start).count();
  {
    std::lock_guard lock(latency_mutex_);
    call_latency_.add(std::chrono::duration<double, std::milli>(done - start).count());
  }
  ++calls_;
  frames_ += static_cast<std::int64_t>(frames.size());
}

Stage::~Stage() = default;

void Stage::process_async(std::span<Frame* const> frames, Completion done) {
  std::call_once(calls_made_, [this] {
    async_calls_.fill(static_cast<std::size_t>(std::max(max_calls_in_flight(), 1)),
                [this](AsyncCall& call) { call.marked.reserve(static_cast<std::size_t>(std::max(max_batch(), 1))); });
  });
  AsyncCall* call = async_calls_.acquire();  // back to async_calls_ in complete_async
  call->stage = this;
  call->start = Clock::now();
  call->marked.assign(frames.begin(), frames.end());
  call->done = std::move(done);
  const Completion completion = [call](std::exception_ptr error) { call->stage->complete_async(call, error); };
  // do_process_async reports errors through `done` once it has handed anything over; an
  // exception out of it means nothing was handed over, so `done` gets it here.
  std::exception_ptr error;
  const auto start = call->start;
  const std::int64_t cpu_start = thread_cpu_us();
  try {
    do_process_async(frames, completion);
  } catch (...) {
    error = std::current_exception();
  }
  cpu_us_ += thread_cpu_us() - cpu_start;
  busy_us_ += std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
  ++calls_;
  frames_ += static_cast<std::int64_t>(frames.size());
  if (error) completion(error);
}

void Stage::complete_async(AsyncCall* call, std::exception_ptr error) {
  const auto at = Clock::now();
  for (Frame* f : call->marked) f->stage_done.push_back({name_, at});
  {
    std::lock_guard lock(latency_mutex_);
    call_latency_.add(std::chrono::duration<double, std::milli>(at - call->start).count());
  }
  Completion done = std::move(call->done);
  call->done = nullptr;
  call->marked.clear();
  async_calls_.release(call);
  done(error);
}

LatencyHistogram Stage::call_latency() const {
  std::lock_guard lock(latency_mutex_);
  return call_latency_;
}

void Stage::do_process_async(std::span<Frame* const> frames, Completion done) {
  std::exception_ptr error;
  try {
    do_process(frames);
  } catch (...) {
    error = std::current_exception();
  }
  done(error);
}

Registry<StageFactory>& stage_registry() {
  static Registry<StageFactory> registry("stage type");
  return registry;
}

bool register_stage(const std::string& type, StageFactory factory) {
  return stage_registry().add(type, std::move(factory));
}

}  // namespace redwood
