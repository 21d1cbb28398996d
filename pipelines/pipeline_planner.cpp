#include "pipelines/pipeline_planner.hpp"

#include "core/error.hpp"
#include "core/log.hpp"
#include "runtime/placed_runner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

namespace redwood {
namespace {

using runtime::PipelineOption;

// Descriptions with dim 0 changed from `from` rows (the analysis's batch) to `to` where it was that.
std::vector<TensorDesc> at_batch(std::vector<TensorDesc> descs, std::int64_t from, std::int64_t to) {
  for (TensorDesc& d : descs) {
    if (!d.shape.empty() && d.shape[0] == from) {
      d.shape[0] = to;
      d.host = nullptr;
    }
  }
  return descs;
}

// The partition's problem at `rows` rows (it was analysed at `from`); see the header.
runtime::PlacementProblem at_rows(const runtime::Partition& part, std::int64_t from, double rows, const std::string& precision,
                                  const runtime::CostHistory* history) {
  runtime::PlacementProblem p = part.problem;
  const double s = rows / static_cast<double>(from);
  const Graph& g = *part.analysis.graph;
  const auto whole = static_cast<std::int64_t>(std::llround(rows));
  const bool look_up = history != nullptr && whole != from && static_cast<double>(whole) == rows;
  for (std::size_t i = 0; i < p.nodes.size(); ++i) {
    runtime::PlacementProblem::Node& n = p.nodes[i];
    const std::size_t node = part.analysis.placeable[i];
    for (std::size_t d = 0; d < n.cost_ms.size(); ++d) {
      double& c = n.cost_ms[d];
      if (!std::isfinite(c)) continue;
      if (look_up) {
        const auto ins = at_batch(part.analysis.input_descs(node), from, whole);
        const auto outs = at_batch(part.analysis.output_descs(node), from, whole);
        const auto key = runtime::CostHistory::key(part.profiles[d], d == 0 ? "fp32" : precision, g.nodes[node], ins, outs);
        if (const auto ms = history->find(key)) {
          c = *ms;
          continue;
        }
      }
      const double fixed = std::min(c, std::max(0.0, part.profiles[d].launch_ms));
      c = fixed + (c - fixed) * s;
    }
    n.input_bytes *= s;
    n.output_bytes *= s;
  }
  for (auto& e : p.edges) e.bytes *= s;
  return p;
}

// Maps the partitioner's devices ({host, accelerator}) and links onto the pipeline's resources.
runtime::ResourceTimes to_resources(const std::vector<double>& loads, std::size_t devices) {
  runtime::ResourceTimes r{};
  r[runtime::kCpuCores] = loads[0];
  if (devices > 1) {
    r[runtime::kGpu] = loads[1];
    r[runtime::kHostToGpu] = loads[devices + 0 * devices + 1];
    r[runtime::kGpuToHost] = loads[devices + 1 * devices + 0];
  }
  return r;
}

// Segments per device of a placement, in the order the cut makes them.
std::vector<int> segments_per_device(const std::vector<int>& device, std::size_t devices) {
  std::vector<int> count(devices, 0);
  for (std::size_t i = 0; i < device.size(); ++i) {
    if (i == 0 || device[i] != device[i - 1]) ++count[static_cast<std::size_t>(device[i])];
  }
  return count;
}

std::string option_text(const std::string& accelerator, const PipelineOption& o) {
  const std::string where = o.placement == "split" ? "split cpu+" + accelerator : o.placement;
  return fmt::format("{}, batch {} ({} rows), {:.3f} ms a batch", where, o.frames, o.rows, o.batch_ms);
}

}  // namespace

std::vector<int> batch_candidates(int max_batch) {
  std::vector<int> out;
  for (int b = 1; b < max_batch; b *= 2) out.push_back(b);
  out.push_back(std::max(1, max_batch));
  return out;
}

std::vector<PipelineOption> pipeline_options(const runtime::Partition& part, const std::vector<int>& frames,
                                             double rows_per_frame, bool fixed_one, const std::string& precision,
                                             const runtime::CostHistory* history) {
  const std::vector<Shape>& shapes = part.analysis.input_shapes;
  RW_EXPECTS(!shapes.empty() && !shapes[0].empty() && shapes[0][0] > 0, InvalidArgument,
             "pipeline placement: the model was analysed without a batch dimension");
  const std::int64_t from = shapes[0][0];
  const std::size_t devices = part.devices.size();
  // The placements: each device alone where it runs every node, and the partitioner's split.
  std::vector<std::pair<std::string, std::vector<int>>> placements;
  for (std::size_t d = 0; d < devices; ++d) {
    const bool runs_all = std::all_of(part.problem.nodes.begin(), part.problem.nodes.end(),
                                      [&](const auto& n) { return std::isfinite(n.cost_ms[d]); });
    if (runs_all) placements.emplace_back(part.devices[d], std::vector<int>(part.problem.nodes.size(), static_cast<int>(d)));
  }
  if (!part.single_device()) placements.emplace_back("split", part.placement.device);
  std::vector<PipelineOption> out;
  for (const auto& [name, device] : placements) {
    const std::vector<int> count = segments_per_device(device, devices);
    for (int f : fixed_one ? std::vector<int>{frames.back()} : frames) {
      PipelineOption o;
      o.placement = name;
      o.frames = f;
      o.rows = fixed_one ? 1.0 : std::max(1.0, std::ceil(f * rows_per_frame));
      const runtime::PlacementProblem p = at_rows(part, from, o.rows, precision, history);
      std::vector<double> loads = runtime::resource_loads(p, device);
      o.batch_ms = runtime::makespan(p, device);
      for (std::size_t d = 0; d < devices && d < part.segment_ms.size(); ++d) {
        loads[d] += count[d] * part.segment_ms[d];
        o.batch_ms += count[d] * part.segment_ms[d];
      }
      o.busy_ms = to_resources(loads, devices);
      out.push_back(o);
    }
  }
  return out;
}

std::vector<std::string> PipelinePlan::lines() const {
  std::vector<std::string> out;
  const auto& best = result.best;
  const auto& alone = result.alone;
  const std::string demand = problem.frames_per_s > 0 ? fmt::format("{:.1f} frames/s", problem.frames_per_s)
                                                      : std::string("unpaced (the bottleneck a frame)");
  out.push_back(fmt::format("pipeline placement of {} model(s), demand {}, latency limit {}: {} ({} choices evaluated{})",
                            models.size(), demand,
                            problem.latency_limit_ms > 0 ? fmt::format("{:.1f} ms", problem.latency_limit_ms) : std::string("none"),
                            result.method, result.evaluated, result.exact ? ", exact" : ""));
  const std::string accelerator = "gpu";
  for (std::size_t m = 0; m < models.size(); ++m) {
    const auto& options = problem.models[m].options;
    const PipelineOption& o = options[static_cast<std::size_t>(best.option[m])];
    const PipelineOption& a = options[static_cast<std::size_t>(alone.option[m])];
    out.push_back(fmt::format("  model '{}': {}; predicted {:.2f} ms on the path (placed alone: {})", models[m],
                              option_text(accelerator, o), best.model_latency_ms[m], option_text(accelerator, a)));
  }
  const auto figures = [&](const runtime::PipelineChoice& c) {
    return fmt::format("utilization {}; bottleneck {} ({:.3f} ms a frame: {:.1f} frames/s sustainable); path {:.2f} ms{}{}",
                       runtime::utilization_text(c), runtime::pipeline_resource_name(c.bottleneck), c.peak_load_ms,
                       c.sustainable_fps, c.latency_ms, c.meets_limit ? "" : ", above the limit",
                       c.overloaded ? fmt::format(", OVERLOADED: the demand is {:.2f}x what it carries", c.peak_utilization) : "");
  };
  out.push_back("  chosen: " + figures(best));
  out.push_back("  each placed alone: " + figures(alone));
  for (const auto& why : this->alone) out.push_back("  " + why);
  return out;
}

std::optional<PipelinePlan> place_auto_models(const ModelTable& models, double frames_per_s,
                                              const PipelinePlacementSettings& settings,
                                              const runtime::PartitionOptions& base) {
  PipelinePlan plan;
  plan.problem.frames_per_s = frames_per_s;
  plan.problem.latency_limit_ms = settings.latency_limit_ms;
  plan.problem.fixed_latency_ms = settings.cpu_stage_ms;
  std::vector<std::shared_ptr<runtime::JointPlacement>> joints;
  std::vector<std::shared_ptr<const runtime::Partition>> partitions;
  std::vector<std::shared_ptr<runtime::JointPlacement>> left;  // told to place alone
  // Per model, its options' batch time at any rows, for the summary's prediction at the rows the
  // batches had: from the partition's costs scaled as above, without the cost history (read for
  // the load only; the runners outlive it).
  std::vector<std::function<double(const std::string&, double)>> predict_at;
  int cores = 0;
  for (const auto& [name, entry] : models) {
    if (!entry.joint) continue;
    const auto feeds = entry.joint->feeds();
    if (feeds.empty()) continue;  // no runner waits (CUDA not usable, or no stage runs it)
    const std::vector<Shape> shapes = entry.joint->largest_shapes();
    const auto skip = [&](const std::string& why) {
      plan.alone.push_back(fmt::format("model '{}': placed alone: {}", name, why));
      left.push_back(entry.joint);
    };
    if (feeds.size() > 1) {
      skip(fmt::format("{} stages feed it", feeds.size()));
      continue;
    }
    if (shapes.empty()) {
      skip(fmt::format("stage '{}' does not know its input's shape at load", feeds[0].stage));
      continue;
    }
    const auto& feed = feeds[0];
    const bool fixed_one = !entry.graph->inputs.empty() && !entry.graph->inputs[0].dims.empty() &&
                           entry.graph->inputs[0].dims[0].known() && entry.graph->inputs[0].dims[0].value == 1;
    const double rows_per_frame = feed.rows_per_frame > 0 ? static_cast<double>(feed.rows_per_frame)
                                  : entry.rows_per_frame > 0 ? entry.rows_per_frame
                                                             : settings.crop_rows_per_frame;
    runtime::PartitionOptions options = base;
    options.pinned = entry.pinned;
    options.precision = entry.precision;
    std::shared_ptr<const runtime::Partition> part;
    try {
      part = std::make_shared<const runtime::Partition>(runtime::partition_model(entry.graph, shapes, options));
    } catch (const Error& e) {
      skip(fmt::format("the partitioner failed: {}", e.what()));
      continue;
    }
    runtime::PipelineModel model;
    model.name = name;
    model.rows_per_frame = fixed_one ? 1.0 : rows_per_frame;
    model.timeout_ms = feed.timeout_ms;
    model.options = pipeline_options(*part, batch_candidates(feed.max_batch), rows_per_frame, fixed_one, entry.precision, base.history);
    if (model.options.empty()) {
      skip("no device runs every node and there is no split");
      continue;
    }
    predict_at.push_back([part, fixed_one, precision = entry.precision](const std::string& placement, double rows) {
      for (const runtime::PipelineOption& o : pipeline_options(*part, {1}, rows, fixed_one, precision, nullptr)) {
        if (o.placement == placement) return o.batch_ms;
      }
      return 0.0;
    });
    cores = std::max(cores, part->profiles[0].cores);
    plan.problem.models.push_back(std::move(model));
    plan.models.push_back(name);
    joints.push_back(entry.joint);
    partitions.push_back(part);
  }
  for (const auto& j : left) j->decide({.alone = true});
  if (plan.models.empty()) {
    if (plan.alone.empty()) return std::nullopt;
    return plan;
  }
  plan.problem.fixed_ms[runtime::kCpuCores] = settings.cpu_stage_ms / std::max(1, cores);
  plan.result = runtime::place_pipeline(plan.problem);
  for (std::size_t m = 0; m < joints.size(); ++m) {
    const PipelineOption& o = plan.problem.models[m].options[static_cast<std::size_t>(plan.result.best.option[m])];
    runtime::PlacementDecision d;
    d.partition = partitions[m];
    d.device = o.placement == "split" ? std::string() : o.placement;
    d.batch_frames = o.frames;
    d.batch_rows = o.rows;
    d.predicted_batch_ms = o.batch_ms;
    d.predicted_ms_at = [f = predict_at[m], placement = o.placement](double rows) { return f(placement, rows); };
    // The runner's line in the run's summary: its part, and the pipeline's predicted utilization.
    d.note = fmt::format("pipeline placement: {}, batch {} frame(s) of {} rows, predicted {:.3f} ms a batch; the pipeline's "
                         "predicted utilization: {}",
                         o.placement == "split" ? "split" : "whole", o.frames, o.rows, o.batch_ms,
                         runtime::utilization_text(plan.result.best));
    joints[m]->decide(std::move(d));
  }
  return plan;
}

}  // namespace redwood
