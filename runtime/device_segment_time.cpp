#include "runtime/device_segment_time.hpp"

#include "core/error.hpp"
#include "core/log.hpp"
#include "runtime/cpu_runner.hpp"
#include "runtime/median_time.hpp"
#include "runtime/partition_rows.hpp"
#include "runtime/run_batch.hpp"
#include "runtime/sample_values.hpp"
#include "runtime/value_pool.hpp"

#include <exception>
#include <map>
#include <memory>
#include <vector>

namespace redwood::runtime {

bool can_time_on(const std::string& device) {
  if (device == "cpu") return false;
  const auto& registry = device_runner_registry();
  const auto it = registry.find(device);
  if (it == registry.end() || !it->second.make) return false;
  return !it->second.unavailable || it->second.unavailable().empty();
}

namespace {

// The median batch's compute of `runs` timed after `warmup`, `segment` on `runner` at its inputs'
// analysed shapes with `rows` rows where they had the analysis's (0: as analysed), in
// page-locked memory from `pool`.
double timed_batches(ModelRunner& runner, ValuePool& pool, const ModelAnalysis& analysis, const Segment& segment,
                     std::int64_t rows, int runs, int warmup) {
  const std::int64_t analysed = analysed_rows(analysis);
  std::map<std::string, const TensorDesc*> by_box;
  for (const auto& in : segment.inputs) by_box[boxed_name(in)] = &analysis.values.at(in);
  std::vector<Tensor> inputs;
  std::vector<Shape> shapes;
  for (const auto& gi : segment.graph->inputs) {
    const auto it = by_box.find(gi.name);
    RW_EXPECTS(it != by_box.end(), InvalidArgument, "{}: input '{}' is none of the segment's", segment.graph->name, gi.name);
    const TensorDesc& d = *it->second;
    const Shape shape = rows > 0 ? at_batch({d}, analysed, rows)[0].shape : d.shape;
    inputs.push_back(pool.make(d.dtype, boxed_shape(shape)));
    if (inputs.back().nbytes() > 0) fill_sample_values(inputs.back().raw_data(), d.dtype, inputs.back().nbytes());
    shapes.push_back(inputs.back().shape());
  }
  runner.prepare(shapes);
  for (int i = 0; i < warmup; ++i) run_batch(runner, inputs, pool.allocator());
  // The runner records a batch before it completes it, so its stats after a batch hold it.
  std::vector<double> compute;
  double last = runner.stats().compute_ms;
  for (int i = 0; i < runs; ++i) {
    run_batch(runner, inputs, pool.allocator());
    const double now = runner.stats().compute_ms;
    compute.push_back(now - last);
    last = now;
  }
  return median(compute);
}

}  // namespace

std::optional<double> time_device_segment(const ModelAnalysis& analysis, const Segment& segment, const std::string& device,
                                          const RunnerConfig& config, int runs, int warmup) {
  RW_EXPECTS(runs > 0 && warmup >= 0, InvalidArgument, "timing a segment on {}: {} runs, {} warm-up", device, runs, warmup);
  try {
    auto runner = make_runner(device, segment.graph, config);
    // The inputs in the device's page-locked memory, as the split runner's pool hands them over.
    auto pool = std::make_shared<ValuePool>(accelerator_pinned_memory({device}));
    return timed_batches(*runner, *pool, analysis, segment, 0, runs, warmup);
  } catch (const std::exception& e) {
    log().warn("{}: not timed on {} ({}); its nodes' times stand for it", segment.graph->name, device, e.what());
    return std::nullopt;
  }
}

std::map<std::int64_t, double> time_device_segment_at_rows(const ModelAnalysis& analysis, const Segment& segment,
                                                            const std::string& device, const RunnerConfig& config,
                                                            const std::vector<std::int64_t>& rows, int runs, int warmup) {
  RW_EXPECTS(runs > 0 && warmup >= 0, InvalidArgument, "timing a segment on {}: {} runs, {} warm-up", device, runs, warmup);
  std::map<std::int64_t, double> out;
  std::unique_ptr<ModelRunner> runner;
  std::shared_ptr<ValuePool> pool;
  try {
    runner = make_runner(device, segment.graph, config);
    pool = std::make_shared<ValuePool>(accelerator_pinned_memory({device}));
  } catch (const std::exception& e) {
    log().warn("{}: not timed on {} at other rows ({}); its nodes' times stand for it there", segment.graph->name, device,
               e.what());
    return out;
  }
  for (const std::int64_t r : rows) {
    RW_EXPECTS(r > 0, InvalidArgument, "timing a segment on {} at {} rows", device, r);
    try {
      out[r] = timed_batches(*runner, *pool, analysis, segment, r, runs, warmup);
    } catch (const std::exception& e) {
      log().warn("{}: not timed on {} at {} rows ({}); its nodes' times stand for it there", segment.graph->name, device, r,
                 e.what());
    }
  }
  return out;
}

}  // namespace redwood::runtime
