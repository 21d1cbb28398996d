#include "runtime/runner_roundtrip.hpp"

#include "core/error.hpp"
#include "core/graph/graph.hpp"
#include "runtime/cpu_profile.hpp"
#include "runtime/cpu_runner.hpp"
#include "runtime/median_time.hpp"
#include "runtime/value_pool.hpp"

#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <thread>
#include <vector>

namespace redwood::runtime {
namespace {

double batch_ms(const RunnerStats& s) { return s.copy_in_ms + s.compute_ms + s.copy_out_ms; }

}  // namespace

double measure_runner_roundtrip(const std::string& kind, int index, int batches) {
  RW_EXPECTS(batches > 0, InvalidArgument, "runner round trip: {} batches", batches);
  RunnerConfig config;
  config.slots = 2;  // a batch's submit never waits for the one before to free its slot
  config.device = index;
  config.device_clock = false;  // a profile's measurement, not a run's work
  auto runner = make_runner(kind, tanh_chain(1), config);  // one Tanh: every device has it
  // The input and outputs in the pool a split keeps its values in (page-locked where the device
  // has such memory), as a segment's are.
  auto pool = std::make_shared<ValuePool>(accelerator_pinned_memory({kind}));
  const Tensor x = pool->make(DType::kF32, {1, 64});
  std::memset(x.raw_data(), 0, x.nbytes());
  runner->prepare({{1, 64}});
  using Clock = std::chrono::steady_clock;
  // One batch, from its submit to its completion being called (on the runner's thread, as a
  // split's next segment is submitted from there); its result waited for after that.
  auto once = [&] {
    InferBatch batch;
    batch.inputs = {{x}};
    batch.allocate = pool->allocator();
    std::promise<std::pair<Clock::time_point, std::exception_ptr>> done;
    auto result = done.get_future();
    const Clock::time_point start = Clock::now();
    runner->submit(std::move(batch), [&done](InferResult& r) { done.set_value({Clock::now(), r.error}); });
    const auto [end, error] = result.get();
    if (error) std::rethrow_exception(error);
    return std::chrono::duration<double, std::milli>(end - start).count();
  };
  for (int i = 0; i < 3; ++i) once();
  std::vector<double> beyond;
  for (int i = 0; i < batches; ++i) {
    // A pause first, as a split's segment waits while the others run: the runner's threads have
    // gone to sleep, and the batch pays their wake as it does there.
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const double before = batch_ms(runner->stats());
    const double ms = once();
    // The runner records a batch before it calls its completion, so its stats now hold it.
    beyond.push_back(std::max(0.0, ms - (batch_ms(runner->stats()) - before)));
  }
  return median(beyond);
}

}  // namespace redwood::runtime
