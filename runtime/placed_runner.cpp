#include "runtime/placed_runner.hpp"

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/op_registry.hpp"
#include "core/passes/pass_manager.hpp"
#include "runtime/cpu_runner.hpp"
#include "runtime/placement_cache.hpp"
#include "runtime/split_runner.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <mutex>
#include <set>

namespace redwood::runtime {
namespace {

class PlacedRunner final : public ModelRunner {
 public:
  PlacedRunner(std::shared_ptr<const Graph> graph, PartitionOptions options, const RunnerConfig& config, std::string name)
      : ModelRunner(*graph),
        graph_(std::move(graph)),
        options_(std::move(options)),
        config_(config),
        name_(std::move(name)) {}

  void submit(InferBatch batch, InferDone done) override {
    if (ModelRunner* r = chosen()) {  // placed: straight through, nothing added per batch
      r->submit(std::move(batch), std::move(done));
      return;
    }
    check_batch(*graph_, batch);
    std::int64_t total = 0;
    std::vector<std::int64_t> rows;
    part_rows(batch.inputs[0], rows);
    for (auto r : rows) total += r;
    const std::int64_t run_rows = batch.run_rows > 0 ? batch.run_rows : total;
    std::vector<Shape> shapes;
    for (std::size_t i = 0; i < batch.inputs.size(); ++i) shapes.push_back(batch_input_shape(batch, i, run_rows));
    runner(shapes).submit(std::move(batch), std::move(done));
  }

  void prepare(const std::vector<Shape>& input_shapes) override { runner(input_shapes).prepare(input_shapes); }

  void drain() override {
    if (ModelRunner* r = chosen()) r->drain();
  }
  int in_flight() const override {
    const ModelRunner* r = chosen();
    return r != nullptr ? r->in_flight() : 0;
  }
  std::string description() const override {
    const ModelRunner* r = chosen();
    return r != nullptr ? r->description() : fmt::format("placed on {} when its shapes are known", fmt::join(options_.devices, ", "));
  }
  RunnerStats stats() const override {
    const ModelRunner* r = chosen();
    return r != nullptr ? r->stats() : RunnerStats{};
  }
  std::vector<RunnerStats> segment_stats() const override {
    const ModelRunner* r = chosen();
    return r != nullptr ? r->segment_stats() : std::vector<RunnerStats>{};
  }

  const Partition* partition() const {
    std::lock_guard lock(mutex_);
    return partition_ ? &*partition_ : nullptr;
  }

 private:
  ModelRunner* chosen() const {
    std::lock_guard lock(mutex_);
    return inner_.get();
  }

  ModelRunner& runner(const std::vector<Shape>& shapes) {
    std::lock_guard lock(mutex_);
    if (inner_) return *inner_;
    std::string key;
    try {
      key = placement_key(*graph_, shapes, options_);
    } catch (const Error& e) {  // a device whose profile key cannot be made: placed, not cached
      log().debug("model '{}': placement not cached: {}", name_, e.what());
    }
    if (const std::optional<KeptPlacement> kept = read_placement(placement_cache_dir(), key)) {
      inner_ = make_runner(kept->device, graph_, config_);
      log().info("model '{}': placed at {} whole on {} (kept in the placement cache; predicted {:.3f} ms a batch); "
                 "runs on {}",
                 name_, shape_str(shapes.empty() ? Shape{} : shapes[0]), kept->device, kept->predicted_ms,
                 inner_->description());
      return *inner_;
    }
    Partition p = partition_model(graph_, shapes, options_);
    std::map<std::string, int> count;
    for (int d : p.placement.device) count[p.devices[static_cast<std::size_t>(d)]]++;
    std::string where;
    for (const auto& [device, n] : count) where += fmt::format("{}{} nodes on {}", where.empty() ? "" : ", ", n, device);
    if (p.single_device()) {
      inner_ = make_runner(p.whole_device(), graph_, config_);
      write_placement(placement_cache_dir(), key, {p.whole_device(), p.run_latency_ms(p.placement.device)});
    } else {
      inner_ = make_split_runner(p, config_);
    }
    log().info("model '{}': placed at {}: {}; {} segment(s); predicted {:.3f} ms a batch (HEFT's placement {:.3f}{}); "
               "runs on {}",
               name_, shape_str(shapes.empty() ? Shape{} : shapes[0]), where, p.segments.size(),
               p.run_latency_ms(p.placement.device), p.run_latency_ms(p.heft.device),
               p.naive ? fmt::format(", the naive split {:.3f}", p.run_latency_ms(p.naive->device)) : std::string(),
               inner_->description());
    partition_ = std::move(p);
    return *inner_;
  }

  std::shared_ptr<const Graph> graph_;
  PartitionOptions options_;
  RunnerConfig config_;
  std::string name_;
  mutable std::mutex mutex_;
  std::optional<Partition> partition_;
  std::unique_ptr<ModelRunner> inner_;
};

}  // namespace

std::unique_ptr<ModelRunner> make_placed_runner(std::shared_ptr<const Graph> graph, PartitionOptions options,
                                                const RunnerConfig& config, std::string model_name) {
  RW_EXPECTS(graph != nullptr, InvalidArgument, "make_placed_runner: no graph");
  options.precision = config.precision;
  return std::make_unique<PlacedRunner>(std::move(graph), std::move(options), config, std::move(model_name));
}

const Partition* placed_partition(const ModelRunner& runner) {
  const auto* placed = dynamic_cast<const PlacedRunner*>(&runner);
  return placed != nullptr ? placed->partition() : nullptr;
}

std::vector<std::string> ops_without_kernel(const Graph& graph, Device device) {
  // On the graph the devices start from: ops the passes fold away (BatchNormalization into a
  // convolution) need no kernel.
  Graph g = graph;
  passes::optimize(g, passes::default_pipeline(false));
  // Shape arithmetic is evaluated on the host whatever the device (a GPU needs no Shape kernel).
  const std::vector<bool> host = shape_arithmetic(g);
  std::set<std::string> missing;
  for (std::size_t n = 0; n < g.nodes.size(); ++n) {
    const Node& node = g.nodes[n];
    if (!host[n] && OpRegistry::instance().candidates(node.op_type, device).empty()) missing.insert(node.op_type);
  }
  return {missing.begin(), missing.end()};
}

}  // namespace redwood::runtime
