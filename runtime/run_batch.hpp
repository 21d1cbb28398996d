#pragma once
// One batch through a runner, waited for: how the planner's timings run a segment or a split
// (measure_partition, time_device_segment), one batch at a time.

#include "core/model_runner.hpp"

#include <exception>
#include <future>
#include <utility>
#include <vector>

namespace redwood::runtime {

/// Runs `inputs` (one part each, in graph input order) through `runner` as one batch, its outputs
/// from `allocate`, and waits for it; throws what the batch failed with.
inline InferResult run_batch(ModelRunner& runner, const std::vector<Tensor>& inputs, TensorAllocator allocate) {
  InferBatch batch;
  for (const Tensor& t : inputs) batch.inputs.push_back({t});
  batch.allocate = std::move(allocate);
  std::promise<InferResult> done;
  auto result = done.get_future();
  runner.submit(std::move(batch), [&done](InferResult& r) { done.set_value(std::move(r)); });
  InferResult r = result.get();
  if (r.error) std::rethrow_exception(r.error);
  return r;
}

}  // namespace redwood::runtime
