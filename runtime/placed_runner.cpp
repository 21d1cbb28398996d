#include "runtime/placed_runner.hpp"

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/op_registry.hpp"
#include "core/passes/pass_manager.hpp"
#include "runtime/cpu_runner.hpp"
#include "runtime/partition_profile.hpp"
#include "runtime/partition_rows.hpp"
#include "runtime/placement_cache.hpp"
#include "runtime/split_runner.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <mutex>
#include <set>

namespace redwood::runtime {
namespace {

// " (0.412 of the GPU's time: batches ran 2.31 at once there)": on a GPU where batches
// overlapped (this runner's slots, other models), what a batch's `ms` cost of the GPU's time
// (its time over the overlap), which is what a prediction, a batch alone, is to be read against.
// Empty where they hardly overlapped (within 5 %) and on the CPU.
std::string gpu_share(double ms, const RunnerStats& st) {
  const double overlap = st.device_overlap();
  return overlap > 1.05 ? fmt::format(" ({:.3f} of the GPU's time: batches ran {:.2f} at once there)", ms / overlap, overlap)
                        : std::string();
}

class PlacedRunner final : public ModelRunner {
 public:
  PlacedRunner(std::shared_ptr<const Graph> graph, PartitionOptions options, const RunnerConfig& config, std::string name,
               std::shared_ptr<JointPlacement> joint)
      : ModelRunner(*graph),
        graph_(std::move(graph)),
        options_(std::move(options)),
        config_(config),
        name_(std::move(name)),
        joint_(std::move(joint)) {
    if (joint_) {
      joint_id_ = joint_->attach([this](std::shared_ptr<const PlacementDecision> d) { apply(std::move(d)); },
                                 [this] {
                                   // One that placed alone before the decision ran another placement.
                                   const ModelRunner* r = decided_runner();
                                   return r != nullptr ? JointPlacement::Report{r->stats(), r->segment_stats()}
                                                       : JointPlacement::Report{};
                                 });
    }
  }
  ~PlacedRunner() override {
    if (joint_) joint_->detach(joint_id_);
  }

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

  void prepare(const std::vector<Shape>& input_shapes) override {
    {
      // The pipeline has yet to decide: its planner reads the shapes, and the decided runner is
      // prepared at them (apply).
      std::lock_guard lock(mutex_);
      if (!inner_ && joint_ && !joint_->decision()) {
        pending_.push_back(input_shapes);
        joint_->record(input_shapes);
        return;
      }
    }
    runner(input_shapes).prepare(input_shapes);
  }

  void drain() override {
    if (ModelRunner* r = chosen()) r->drain();
  }
  int in_flight() const override {
    const ModelRunner* r = chosen();
    return r != nullptr ? r->in_flight() : 0;
  }
  std::string description() const override {
    const ModelRunner* r = chosen();
    if (r == nullptr) return fmt::format("placed on {} when its shapes are known", fmt::join(options_.devices, ", "));
    return decision_ ? fmt::format("{} ({}{})", r->description(), decision_->note, measured(r->stats())) : r->description();
  }
  RunnerStats stats() const override {
    const ModelRunner* r = chosen();
    return r != nullptr ? r->stats() : RunnerStats{};
  }
  std::vector<RunnerStats> segment_stats() const override {
    const ModelRunner* r = chosen();
    std::vector<RunnerStats> out = r != nullptr ? r->segment_stats() : std::vector<RunnerStats>{};
    if (!out.empty() && decision_) {
      const RunnerStats whole = r->stats();
      out[0].description += fmt::format(" ({}{}{})", decision_->note, measured(whole), between_segments(whole, out));
    }
    // Each segment's compute a batch (and its share of the GPU's time where batches overlapped
    // there) beside the time predicted for it where it was placed, and at the rows the split's
    // batches had.
    const std::optional<SegmentPredictions> predicted = segment_predictions();
    const double rows = r != nullptr ? mean_rows(r->stats()) : 0.0;
    for (std::size_t k = 0; predicted && k < out.size() && k < predicted->ms.size(); ++k) {
      if (out[k].batches == 0) continue;
      const std::string at_rows = rows > 0 && k < predicted->at_rows.size()
                                      ? fmt::format(" and {:.3f} at the batches' {:.1f} rows", predicted->at_rows[k].at(rows), rows)
                                      : std::string();
      const double ms = out[k].compute_ms / static_cast<double>(out[k].batches);
      out[k].description += fmt::format("; {:.3f} ms a batch{}, predicted {:.3f} at {}{}", ms, gpu_share(ms, out[k]),
                                        predicted->ms[k], predicted->at, at_rows);
    }
    return out;
  }

  const Partition* partition() const {
    std::lock_guard lock(mutex_);
    return partition_ ? &*partition_ : nullptr;
  }

  std::optional<SegmentPredictions> segment_predictions() const {
    std::lock_guard lock(mutex_);
    return segments_;
  }

 private:
  ModelRunner* chosen() const {
    std::lock_guard lock(mutex_);
    return inner_.get();
  }

  // The runner the pipeline's decision made; null before it, and for a runner that placed alone
  // before it (and keeps its own).
  ModelRunner* decided_runner() const {
    std::lock_guard lock(mutex_);
    return decision_ ? inner_.get() : nullptr;
  }

  // The rows a batch had on average (padding included), 0 before any batch.
  static double mean_rows(const RunnerStats& st) {
    return st.batches == 0 ? 0.0 : static_cast<double>(st.run_rows > 0 ? st.run_rows : st.rows) / static_cast<double>(st.batches);
  }

  // ", measured 3.412 ms a batch of 27.1 rows on average, predicted 3.050 at those rows": what a
  // batch took, copies and compute, against the prediction at the rows the batches had (they
  // form by timing, mostly below the decided size; padding included on a GPU), and whether that
  // prediction came from earlier runs' measured batches.
  std::string measured(const RunnerStats& st) const {
    if (st.batches == 0) return "";
    const double batches = static_cast<double>(st.batches);
    const double rows = mean_rows(st);
    std::string predicted;
    if (!decision_->predicted_at.empty()) {
      predicted = fmt::format(", predicted {:.3f} at those rows{}", decision_->predicted_at.at(rows),
                              decision_->measured ? " (from measured batches)" : "");
    }
    const double ms = (st.copy_in_ms + st.compute_ms + st.copy_out_ms) / batches;
    return fmt::format(", measured {:.3f} ms a batch of {:.1f} rows on average{}{}", ms, rows, gpu_share(ms, st), predicted);
  }

  // "; 2.670 ms of it between its segments (0.534 a segment: 0.150 staging its inputs, 2.300 in
  // the segments' runners beyond their copies and compute, 0.410 of it in their submits, 0.200
  // from one segment to the next, 0.020 its outputs)": a split's batch beyond its segments'
  // copies and compute, each a batch on average (the pipeline's placement learns its hand-over
  // the same way, with the crossings as predicted instead of the copies as measured), and where
  // it went on the host's clock. The parts add up for a chain of segments; segments that run at
  // once (branches) overlap, and nothing is left for the hops.
  static std::string between_segments(const RunnerStats& whole, const std::vector<RunnerStats>& segments) {
    if (whole.batches == 0 || segments.empty()) return "";
    double segments_ms = 0, beyond_ms = 0, submits_ms = 0;
    for (const RunnerStats& s : segments) {
      if (s.batches == 0) return "";
      const double b = static_cast<double>(s.batches);
      segments_ms += (s.copy_in_ms + s.compute_ms + s.copy_out_ms) / b;
      beyond_ms += s.handover_beyond_ms();
      submits_ms += s.handover_submit_ms / b;
    }
    const double b = static_cast<double>(whole.batches);
    const double batch_ms = (whole.copy_in_ms + whole.compute_ms + whole.copy_out_ms) / b;
    const double between = std::max(0.0, batch_ms - segments_ms);
    const double staging_ms = whole.copy_in_ms / b, outputs_ms = whole.copy_out_ms / b;
    const double hops_ms = std::max(0.0, between - staging_ms - beyond_ms - outputs_ms);
    return fmt::format(
        "; {:.3f} ms of it between its segments ({:.3f} a segment: {:.3f} staging its inputs, {:.3f} in the segments' "
        "runners beyond their copies and compute, {:.3f} of it in their submits, {:.3f} from one segment to the next, "
        "{:.3f} its outputs)",
        between, between / static_cast<double>(segments.size()), staging_ms, beyond_ms, std::min(submits_ms, beyond_ms), hops_ms,
        outputs_ms);
  }

  // The pipeline's decision: this runner's own runner made as decided, prepared at the shapes
  // recorded so far. A runner that placed alone already (a batch came first) keeps its placement.
  void apply(std::shared_ptr<const PlacementDecision> d) {
    std::vector<std::vector<Shape>> pending;
    if (d->alone) {
      {
        std::lock_guard lock(mutex_);
        pending.swap(pending_);
      }
      for (const auto& shapes : pending) runner(shapes).prepare(shapes);
      return;
    }
    {
      std::lock_guard lock(mutex_);
      if (inner_) {
        log().warn("model '{}': placed alone before the pipeline decided; keeps that placement", name_);
        return;
      }
      if (d->device.empty()) {
        RW_EXPECTS(d->partition != nullptr, InvalidArgument, "model '{}': a split decision without its partition", name_);
        inner_ = make_split_runner(*d->partition, config_);
      } else {
        RunnerConfig config = config_;
        if (d->device == "cpu") config.device_options.clear();  // the accelerator's, not the CPU's
        inner_ = make_runner(d->device, graph_, config);
      }
      // The summary predicts a split's segments from a placed partition's costs, or from what a
      // kept placement kept of them (a split cut again where it was placed has no costs).
      if (d->partition && d->partition->has_costs()) partition_ = *d->partition;
      if (d->device.empty()) keep_predictions(*d->partition, d->segment_ms, d->segment_at);
      decision_ = std::move(d);
      pending.swap(pending_);
    }
    for (const auto& shapes : pending) inner_->prepare(shapes);
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
    const std::string at = shape_str(shapes.empty() ? Shape{} : shapes[0]);
    if (const std::optional<KeptPlacement> kept = read_placement(placement_cache_dir(), key)) {
      if (kept->nodes.empty()) {
        inner_ = make_runner(kept->device, graph_, config_);
        log().info("model '{}': placed at {} whole on {} (kept in the placement cache; predicted {:.3f} ms a batch); "
                   "runs on {}",
                   name_, at, kept->device, kept->predicted_ms, inner_->description());
        return *inner_;
      }
      // A split: cut where it was placed, from one run for the values' shapes (no timing, no placer).
      try {
        const Partition p = partition_as_placed(graph_, shapes, options_, kept->nodes, kept->threads);
        check_kept_predictions(p, kept->segment_ms, kept->segment_at);
        inner_ = make_split_runner(p, config_);
        keep_predictions(p, kept->segment_ms, kept->segment_at);
        log().info("model '{}': placed at {} as kept in the placement cache ({} segment(s); predicted {:.3f} ms a "
                   "batch); runs on {}",
                   name_, at, p.segments.size(), kept->predicted_ms, inner_->description());
        return *inner_;
      } catch (const Error& e) {
        log().warn("model '{}': the placement cache's split placement at {} does not fit the model ({}); placing again",
                   name_, at, e.what());
      }
    }
    Partition p = partition_model(graph_, shapes, options_);
    std::map<std::string, int> count;
    for (int d : p.placement.device) count[p.devices[static_cast<std::size_t>(d)]]++;
    std::string where;
    for (const auto& [device, n] : count) where += fmt::format("{}{} nodes on {}", where.empty() ? "" : ", ", n, device);
    if (p.single_device()) {
      inner_ = make_runner(p.whole_device(), graph_, config_);
      write_placement(placement_cache_dir(), key, {p.whole_device(), p.run_latency_ms(p.placement.device), {}, {}, {}, {}});
    } else {
      inner_ = make_split_runner(p, config_);
      std::vector<double> segment_ms = predicted_segment_ms(p);
      std::vector<RowsCurve> segment_at = segment_curves(p, options_.history);
      write_placement(placement_cache_dir(), key,
                      {"", p.run_latency_ms(p.placement.device), p.node_devices(), p.host_segment_threads(), segment_ms,
                       segment_at});
      keep_predictions(p, std::move(segment_ms), std::move(segment_at));
    }
    log().info("model '{}': placed at {}: {}; {} segment(s); predicted {:.3f} ms a batch (HEFT's placement {:.3f}{}); "
               "runs on {}",
               name_, at, where, p.segments.size(),
               p.run_latency_ms(p.placement.device), p.run_latency_ms(p.heft.device),
               p.naive ? fmt::format(", the naive split {:.3f}", p.run_latency_ms(p.naive->device)) : std::string(),
               inner_->description());
    partition_ = std::move(p);
    return *inner_;
  }

  // Under mutex_.
  void keep_predictions(const Partition& p, std::vector<double> ms, std::vector<RowsCurve> at_rows) {
    if (ms.size() != p.segments.size()) return;
    segments_ = SegmentPredictions{std::move(ms), shape_str(p.analysis.input_shapes.at(0)), std::move(at_rows)};
  }

  std::shared_ptr<const Graph> graph_;
  PartitionOptions options_;
  RunnerConfig config_;
  std::string name_;
  mutable std::mutex mutex_;
  std::optional<Partition> partition_;
  std::optional<SegmentPredictions> segments_;  // a split's
  std::unique_ptr<ModelRunner> inner_;
  std::shared_ptr<JointPlacement> joint_;
  int joint_id_ = -1;
  std::vector<std::vector<Shape>> pending_;  // prepared before the pipeline's decision
  std::shared_ptr<const PlacementDecision> decision_;
};

}  // namespace

void JointPlacement::add_feed(Feed feed) {
  std::lock_guard lock(mutex_);
  feeds_.push_back(std::move(feed));
}

std::vector<JointPlacement::Feed> JointPlacement::feeds() const {
  std::lock_guard lock(mutex_);
  return feeds_;
}

std::vector<Shape> JointPlacement::largest_shapes() const {
  std::lock_guard lock(mutex_);
  return largest_;
}

void JointPlacement::record(const std::vector<Shape>& shapes) {
  std::lock_guard lock(mutex_);
  const auto rows = [](const std::vector<Shape>& s) { return s.empty() || s[0].empty() ? std::int64_t{0} : s[0][0]; };
  if (largest_.empty() || rows(shapes) > rows(largest_)) largest_ = shapes;
}

int JointPlacement::attach(Apply apply, Stats stats) {
  std::lock_guard lock(mutex_);
  runners_.emplace(next_id_, std::pair{std::move(apply), std::move(stats)});
  return next_id_++;
}

std::vector<JointPlacement::Report> JointPlacement::runner_reports() const {
  std::vector<Stats> runners;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [id, runner] : runners_) runners.push_back(runner.second);
  }
  std::vector<Report> out;  // outside the lock: each runner takes its own
  for (const Stats& stats : runners) out.push_back(stats());
  return out;
}

void JointPlacement::detach(int id) {
  std::lock_guard lock(mutex_);
  runners_.erase(id);
}

void JointPlacement::decide(PlacementDecision decision) {
  std::vector<Apply> runners;
  std::shared_ptr<const PlacementDecision> d;
  {
    std::lock_guard lock(mutex_);
    RW_EXPECTS(!decision_, Error, "a model's pipeline placement was decided twice");
    decision_ = d = std::make_shared<const PlacementDecision>(std::move(decision));
    for (const auto& [id, runner] : runners_) runners.push_back(runner.first);
  }
  // Outside the lock: each runner prepares its new runner, which may take seconds on a GPU.
  for (const Apply& apply : runners) apply(d);
}

std::shared_ptr<const PlacementDecision> JointPlacement::decision() const {
  std::lock_guard lock(mutex_);
  return decision_;
}

int JointPlacement::batch_frames(int max_batch) const {
  std::lock_guard lock(mutex_);
  return decision_ && !decision_->alone ? std::min(max_batch, std::max(1, decision_->batch_frames)) : max_batch;
}

std::unique_ptr<ModelRunner> make_placed_runner(std::shared_ptr<const Graph> graph, PartitionOptions options,
                                                const RunnerConfig& config, std::string model_name,
                                                std::shared_ptr<JointPlacement> joint) {
  RW_EXPECTS(graph != nullptr, InvalidArgument, "make_placed_runner: no graph");
  options.precision = config.precision;
  options.device_options = config.device_options;
  options.device_index = config.device;
  return std::make_unique<PlacedRunner>(std::move(graph), std::move(options), config, std::move(model_name), std::move(joint));
}

const Partition* placed_partition(const ModelRunner& runner) {
  const auto* placed = dynamic_cast<const PlacedRunner*>(&runner);
  return placed != nullptr ? placed->partition() : nullptr;
}

std::optional<SegmentPredictions> placed_segment_predictions(const ModelRunner& runner) {
  const auto* placed = dynamic_cast<const PlacedRunner*>(&runner);
  return placed != nullptr ? placed->segment_predictions() : std::nullopt;
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
