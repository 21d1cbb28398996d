#include "pipelines/pipeline_planner.hpp"

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/cache_dir.hpp"
#include "core/graph/graph_hash.hpp"
#include "runtime/partition_profile.hpp"
#include "runtime/partition_rows.hpp"
#include "runtime/placed_runner.hpp"
#include "runtime/placement_cache.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <ranges>
#include <set>

namespace redwood {
namespace {

using runtime::JointPlacement;
using runtime::PipelineOption;
using runtime::device_cache_key;

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
  return fmt::format("{}, batch {} ({} rows), {:.3f} ms a batch{}", where, o.frames, o.rows, o.batch_ms,
                     o.measured ? " (measured)" : "");
}

// A `device: auto` model that takes part in the pipeline placement, before its analysis.
struct Candidate {
  std::string name;
  const ModelEntry* entry = nullptr;
  std::vector<Shape> shapes;  // the largest batch its runners were prepared at
  JointPlacement::Feed feed;
  bool fixed_one = false;
  double rows_per_frame = 1;
  std::uint64_t hash = 0;            // graph_hash of the model as imported
  std::vector<TensorDesc> inputs;    // its inputs at `shapes`
  std::int64_t batch_rows = 1;       // dim 0 of `shapes`' first
  MeasuredCurves measured;           // batch times runs measured whole on a device
};

// The decision that tells a model's runners to place alone, as without a pipeline.
runtime::PlacementDecision alone_decision() {
  runtime::PlacementDecision d;
  d.alone = true;
  return d;
}

std::string device_precision(const Candidate& c, std::size_t device) {
  return runtime::cost_precision(static_cast<int>(device), c.entry->precision, c.entry->cuda_options);
}

// The cost history's key of a batch of the model on `where` (a device's history name, or a
// split's) in `precision`, at any rows.
std::function<std::string(std::int64_t)> batch_key(const Candidate& c, std::string where, std::string precision) {
  return [hash = c.hash, where = std::move(where), precision = std::move(precision), inputs = c.inputs,
          from = c.batch_rows](std::int64_t rows) {
    return runtime::CostHistory::model_key(hash, where, precision, runtime::at_batch(inputs, from, rows));
  };
}

// The cost history's key of a batch of the model whole on `device`, at any rows.
std::function<std::string(std::int64_t)> history_key(const Candidate& c, const runtime::PartitionOptions& base,
                                                     const std::vector<std::string>& history_devices, const std::string& device) {
  const auto it = std::find(base.devices.begin(), base.devices.end(), device);
  if (it == base.devices.end()) return {};
  const auto d = static_cast<std::size_t>(it - base.devices.begin());
  if (history_devices[d].empty()) return {};
  return batch_key(c, history_devices[d], device_precision(c, d));
}

// A split's name in the history's whole-model keys: "split <XXH64 of the devices' history names
// and each placed node's device>", so that only the same cut on the same machines shares its
// batch times; "" when a device has no history name. Its host segments' threads are not in it:
// each placement times them anew (as the segments' own keys leave them out).
std::string split_history_device(const std::vector<std::string>& history_devices, const std::vector<std::string>& nodes) {
  if (nodes.empty() || std::any_of(history_devices.begin(), history_devices.end(), [](const std::string& d) { return d.empty(); })) {
    return "";
  }
  const std::string text = fmt::format("{}\n{}", fmt::join(history_devices, ","), fmt::join(nodes, ","));
  return fmt::format("split {}", hash_hex(xxh64(text.data(), text.size())));
}

// A split's precision in those keys: its accelerator's (its host segments compute fp32).
std::string split_precision(const Candidate& c, std::size_t devices) { return device_precision(c, devices > 1 ? 1 : 0); }

// The batch times runs measured of the model on `where` in `precision`, against rows.
runtime::RowsCurve measured_curve(const Candidate& c, const runtime::CostHistory* history, const std::string& where,
                                  const std::string& precision) {
  runtime::RowsCurve curve;
  if (history == nullptr || where.empty()) return curve;
  for (const auto& [rows, ms] : history->model_times(c.hash, where, precision, c.inputs, c.batch_rows)) {
    curve.add(static_cast<double>(rows), ms);
  }
  return curve;
}

// The rows of the batch sizes tried (pipeline_options).
std::vector<double> rows_tried(const Candidate& c) {
  std::vector<double> out;
  for (int f : batch_candidates(c.feed.max_batch)) out.push_back(c.fixed_one ? 1.0 : std::max(1.0, std::ceil(f * c.rows_per_frame)));
  return out;
}

// Per device with measured batch times, their time at each batch size tried: what a kept
// placement is checked by.
std::map<std::string, std::vector<std::pair<double, double>>> measured_at(const Candidate& c) {
  std::map<std::string, std::vector<std::pair<double, double>>> out;
  for (const auto& [device, curve] : c.measured) {
    for (double rows : rows_tried(c)) out[device].emplace_back(rows, curve.at(rows));
  }
  return out;
}

// The partitioner's options for one model: the pipeline's, with the model's pins, precision, CUDA
// options and first GPU.
runtime::PartitionOptions model_options(const ModelEntry& entry, const runtime::PartitionOptions& base) {
  runtime::PartitionOptions options = base;
  options.pinned = entry.pinned;
  options.precision = entry.precision;
  options.device_options = entry.cuda_options;
  options.device_index = entry.devices.empty() ? 0 : entry.devices.front();
  return options;
}

// Why a kept placement may not stand for this history, or "" when it may: a device that gained
// or lost measured batch times for a model, or whose time at a batch size tried moved by more
// than 10 %.
std::string kept_is_stale(const runtime::KeptPipelinePlacement& kept, const std::vector<Candidate>& candidates,
                          const std::vector<std::string>& devices) {
  constexpr double kTolerance = 0.10;
  if (kept.models.size() != candidates.size()) return "another set of models";
  for (std::size_t m = 0; m < candidates.size(); ++m) {
    const runtime::KeptPipelineModel& k = kept.models[m];
    const Candidate& c = candidates[m];
    if (k.name != c.name) return fmt::format("model '{}' where '{}' was", c.name, k.name);
    // Whole on a device, or split over some: each must be one of this placement's.
    for (const std::string& device : k.nodes.empty() ? std::vector<std::string>{k.decision.device} : k.nodes) {
      if (std::find(devices.begin(), devices.end(), device) == devices.end()) {
        return fmt::format("model '{}' on '{}', not a device of this placement", k.name, device);
      }
    }
    std::set<std::string> measured;
    for (const auto& [device, curve] : c.measured) measured.insert(device);
    for (const auto& [device, points] : k.measured_ms) measured.insert(device);
    for (const std::string& device : measured) {
      const auto then = k.measured_ms.find(device);
      const auto now = c.measured.find(device);
      if (then == k.measured_ms.end()) return fmt::format("model '{}' on {}: measured batch times now, none then", k.name, device);
      if (now == c.measured.end()) return fmt::format("model '{}' on {}: measured batch times then, none now", k.name, device);
      for (const auto& [rows, ms] : then->second) {
        const double here = now->second.at(rows);
        if (std::abs(here - ms) > kTolerance * ms) {
          return fmt::format("model '{}' on {} at {} rows: {:.3f} ms measured then, {:.3f} now", k.name, device, rows, ms, here);
        }
      }
    }
  }
  return "";
}

// The pipeline placement's cache key (place_auto_models says what it holds); "" when a device has
// no profile key.
std::string pipeline_key(const std::vector<Candidate>& candidates, double frames_per_s, const PipelinePlacementSettings& settings,
                         const runtime::PartitionOptions& base) {
  std::vector<std::string> devices;
  try {
    for (std::size_t d = 0; d < base.devices.size(); ++d) {
      const std::string key = device_cache_key(base, d);
      if (key.empty()) return "";
      devices.push_back(fmt::format("{}: {}", base.devices[d], key));
    }
  } catch (const Error&) {
    return "";
  }
  std::string text = fmt::format(
      "pipeline placement; demand {} frames/s; latency limit {} ms; cpu stages {} core-ms; crops {} rows a frame; "
      "devices {}; analysis times {}; node costs {}; {}",
      frames_per_s, settings.latency_limit_ms, settings.cpu_stage_ms, settings.crop_rows_per_frame, fmt::join(devices, " | "),
      base.use_analysis_times ? "on" : "off",
      hash_hex(base.history != nullptr ? base.history->node_entries_hash() : 0), build_stamp());
  for (const Candidate& c : candidates) {
    std::vector<std::string> shapes;
    for (const Shape& s : c.shapes) shapes.push_back(shape_str(s));
    std::vector<std::string> pinned, cuda;
    for (const auto& [node, device] : c.entry->pinned) pinned.push_back(node + "=" + device);
    for (const auto& [option, value] : c.entry->cuda_options) cuda.push_back(option + "=" + value);
    text += fmt::format(
        "; model '{}' {} shapes {} max_batch {} timeout {} ms rows a frame {}{} precision {} pinned {} cuda {} slots {} "
        "instances {} devices {}",
        c.name, hash_hex(c.hash), fmt::join(shapes, " "), c.feed.max_batch, c.feed.timeout_ms, c.rows_per_frame,
        c.fixed_one ? " (one a run)" : "", c.entry->precision, fmt::join(pinned, ","), fmt::join(cuda, ","), c.entry->slots,
        c.entry->instances, fmt::join(c.entry->devices, ","));
  }
  return text;
}

// The plan's lines from its problem and result (PipelinePlan::lines, the models placed alone left out).
std::vector<std::string> placement_lines(const PipelinePlan& plan) {
  std::vector<std::string> out;
  const auto& problem = plan.problem;
  const auto& result = plan.result;
  const auto& best = result.best;
  const auto& alone = result.alone;
  const std::string demand = problem.frames_per_s > 0 ? fmt::format("{:.1f} frames/s", problem.frames_per_s)
                                                      : std::string("unpaced (the bottleneck a frame)");
  out.push_back(fmt::format("pipeline placement of {} model(s), demand {}, latency limit {}: {} ({} choices evaluated{})",
                            plan.models.size(), demand,
                            problem.latency_limit_ms > 0 ? fmt::format("{:.1f} ms", problem.latency_limit_ms) : std::string("none"),
                            result.method, result.evaluated, result.exact ? ", exact" : ""));
  const std::string accelerator = "gpu";
  for (std::size_t m = 0; m < plan.models.size(); ++m) {
    const auto& options = problem.models[m].options;
    const PipelineOption& o = options[static_cast<std::size_t>(best.option[m])];
    const PipelineOption& a = options[static_cast<std::size_t>(alone.option[m])];
    out.push_back(fmt::format("  model '{}': {}; predicted {:.2f} ms on the path (placed alone: {})", plan.models[m],
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
  return out;
}

// A split's hand-over a segment as pipelines' runs on this host measured it (record_batch_times),
// if they did; a split's batches not measured are costed with it in place of the partition's
// (learned one batch at a time).
std::optional<double> pipeline_handover(const runtime::Partition& part, const runtime::CostHistory* history) {
  if (history == nullptr || part.profiles.empty()) return std::nullopt;
  return history->find(runtime::CostHistory::pipeline_handover_key(part.profiles[0]));
}

}  // namespace

std::string history_device(const runtime::PartitionOptions& base, std::size_t d) {
  const std::string key = device_cache_key(base, d);
  return key.empty() ? std::string() : fmt::format("{} {}", base.devices.at(d), hash_hex(xxh64(key.data(), key.size())));
}

std::vector<int> batch_candidates(int max_batch) {
  std::vector<int> out;
  for (int b = 1; b < max_batch; b *= 2) out.push_back(b);
  out.push_back(std::max(1, max_batch));
  return out;
}

std::vector<PipelineOption> pipeline_options(const runtime::Partition& part, const std::vector<int>& frames,
                                             double rows_per_frame, bool fixed_one,
                                             const runtime::CostHistory* history, const MeasuredCurves& measured) {
  RW_EXPECTS(runtime::analysed_rows(part) > 0, InvalidArgument, "pipeline placement: the model was analysed without a batch dimension");
  const std::size_t devices = part.devices.size();
  // The placements: each device alone where it runs every node, and the partitioner's split.
  std::vector<std::pair<std::string, std::vector<int>>> placements;
  for (std::size_t d = 0; d < devices; ++d) {
    const bool runs_all = std::all_of(part.problem.nodes.begin(), part.problem.nodes.end(),
                                      [&](const auto& n) { return std::isfinite(n.cost_ms[d]); });
    if (runs_all) placements.emplace_back(part.devices[d], std::vector<int>(part.problem.nodes.size(), static_cast<int>(d)));
  }
  if (!part.single_device()) placements.emplace_back("split", part.placement.device);
  // The split's segments against rows: its batch time is theirs as the split runner runs them.
  const std::vector<runtime::RowsCurve> curves =
      part.single_device() ? std::vector<runtime::RowsCurve>{} : runtime::segment_curves(part, history);
  const std::optional<double> handover = pipeline_handover(part, history);
  std::vector<PipelineOption> out;
  for (const auto& [name, device] : placements) {
    const std::vector<int> count = segments_per_device(device, devices);
    // A batch of `rows` from the node costs: its time alone and its busy time on each resource.
    // Whole on a device, the batch runs node by node there (the list schedule); split, segment by
    // segment, each value crossing through the host, each segment handed over (split_latency_ms).
    const auto from_nodes = [&](double rows) {
      const runtime::PlacementProblem p = runtime::problem_at_rows(part, rows, history);
      std::vector<double> loads = runtime::resource_loads(p, device);
      double segments_ms = 0;
      for (std::size_t d = 0; d < devices && d < part.segment_ms.size(); ++d) {
        loads[d] += count[d] * part.segment_ms[d];
        segments_ms += count[d] * part.segment_ms[d];
      }
      const double batch_ms = name == "split" ? runtime::split_latency_at_rows(part, curves, rows, handover)
                                              : runtime::makespan(p, device) + segments_ms;
      return std::pair{batch_ms, to_resources(loads, devices)};
    };
    const auto m = measured.find(name);
    const runtime::RowsCurve* curve = m != measured.end() && !m->second.empty() ? &m->second : nullptr;
    for (int f : fixed_one ? std::vector<int>{frames.back()} : frames) {
      PipelineOption o;
      o.placement = name;
      o.frames = f;
      o.rows = fixed_one ? 1.0 : std::max(1.0, std::ceil(f * rows_per_frame));
      std::tie(o.batch_ms, o.busy_ms) = from_nodes(o.rows);
      if (curve != nullptr) {
        // Measured batches come first. One point scales the node costs' form to it. Whole on a
        // device, the busy times scale with the batch (copies and compute split as the nodes
        // predict); a split's batch also waits between its segments, which keeps no device
        // busy, so its busy times stay what its segments' node costs give.
        const auto& [r1, t1] = curve->points.front();
        const double nodes_at_r1 = curve->points.size() == 1 ? from_nodes(r1).first : 0.0;
        const double t = curve->points.size() > 1 ? curve->at(o.rows) : nodes_at_r1 > 0 ? t1 * o.batch_ms / nodes_at_r1 : t1;
        if (name != "split" && o.batch_ms > 0) {
          for (double& busy : o.busy_ms) busy *= t / o.batch_ms;
        } else if (name != "split") {
          o.busy_ms[name == part.devices[0] ? runtime::kCpuCores : runtime::kGpu] = t;
        }
        o.batch_ms = t;
        o.measured = true;
      }
      out.push_back(o);
    }
  }
  return out;
}

std::vector<std::string> PipelinePlan::lines() const {
  std::vector<std::string> out;
  if (from_cache) {
    out.push_back(fmt::format("pipeline placement read from the placement cache ({})", cache_file));
    out.insert(out.end(), kept_lines.begin(), kept_lines.end());
  } else if (!models.empty()) {
    out = placement_lines(*this);
  }
  for (const auto& why : alone) out.push_back("  " + why);
  return out;
}

std::optional<PipelinePlan> place_auto_models(const ModelTable& models, double frames_per_s,
                                              const PipelinePlacementSettings& settings,
                                              const runtime::PartitionOptions& base) {
  PipelinePlan plan;
  std::vector<std::shared_ptr<runtime::JointPlacement>> left;  // told to place alone
  std::vector<Candidate> candidates;
  for (const auto& [name, entry] : models) {
    if (!entry.joint) continue;
    const auto feeds = entry.joint->feeds();
    if (feeds.empty()) continue;  // no runner waits (CUDA not usable, or no stage runs it)
    Candidate c;
    c.name = name;
    c.entry = &entry;
    c.shapes = entry.joint->largest_shapes();
    if (feeds.size() > 1) {
      plan.alone.push_back(fmt::format("model '{}': placed alone: {} stages feed it", name, feeds.size()));
      left.push_back(entry.joint);
      continue;
    }
    if (c.shapes.empty()) {
      plan.alone.push_back(
          fmt::format("model '{}': placed alone: stage '{}' does not know its input's shape at load", name, feeds[0].stage));
      left.push_back(entry.joint);
      continue;
    }
    c.feed = feeds[0];
    c.fixed_one = !entry.graph->inputs.empty() && !entry.graph->inputs[0].dims.empty() &&
                  entry.graph->inputs[0].dims[0].known() && entry.graph->inputs[0].dims[0].value == 1;
    c.rows_per_frame = c.feed.rows_per_frame > 0 ? static_cast<double>(c.feed.rows_per_frame)
                       : entry.rows_per_frame > 0 ? entry.rows_per_frame
                                                  : settings.crop_rows_per_frame;
    c.hash = graph_hash(*entry.graph);
    for (std::size_t i = 0; i < c.shapes.size(); ++i) {
      const DType dtype = i < entry.graph->inputs.size() ? entry.graph->inputs[i].dtype : DType::kUndefined;
      c.inputs.push_back(TensorDesc{dtype, c.shapes[i]});
    }
    c.batch_rows = c.shapes[0].empty() ? 1 : c.shapes[0][0];
    candidates.push_back(std::move(c));
  }
  for (const auto& j : left) j->decide(alone_decision());
  if (candidates.empty()) {
    if (plan.alone.empty()) return std::nullopt;
    return plan;
  }

  // Each device's name in the history's whole-model keys, and the batch times runs measured.
  std::vector<std::string> history_devices;
  try {
    for (std::size_t d = 0; d < base.devices.size(); ++d) history_devices.push_back(history_device(base, d));
  } catch (const Error& e) {  // a device whose profile key cannot be made: no measured times, nothing kept
    log().debug("pipeline placement: no device keys: {}", e.what());
    history_devices.assign(base.devices.size(), std::string());
  }
  for (Candidate& c : candidates) {
    for (std::size_t d = 0; d < base.devices.size(); ++d) {
      runtime::RowsCurve curve = measured_curve(c, base.history, history_devices[d], device_precision(c, d));
      if (!curve.empty()) c.measured[base.devices[d]] = std::move(curve);
    }
  }
  // A split's batch times, where runs measured that split (this cut), and none of another's.
  const auto measure_split = [&](Candidate& c, const std::vector<std::string>& nodes) {
    runtime::RowsCurve curve = measured_curve(c, base.history, split_history_device(history_devices, nodes),
                                              split_precision(c, base.devices.size()));
    c.measured.erase("split");
    if (!curve.empty()) c.measured["split"] = std::move(curve);
  };
  // The history key of a split's batches (empty where a device has no history name).
  const auto split_history_key = [&](const Candidate& c, const std::vector<std::string>& nodes) {
    const std::string where = split_history_device(history_devices, nodes);
    return where.empty() ? std::function<std::string(std::int64_t)>{} : batch_key(c, where, split_precision(c, base.devices.size()));
  };

  const std::string key = pipeline_key(candidates, frames_per_s, settings, base);
  const std::filesystem::path dir = runtime::placement_cache_dir();
  if (!key.empty()) {
    if (const auto kept = runtime::read_pipeline_placement(dir, key)) {
      for (std::size_t m = 0; m < candidates.size() && m < kept->models.size(); ++m) {
        if (!kept->models[m].nodes.empty()) measure_split(candidates[m], kept->models[m].nodes);
      }
      std::string stale = kept_is_stale(*kept, candidates, base.devices);
      std::vector<runtime::PlacementDecision> decisions;
      for (std::size_t m = 0; m < candidates.size() && stale.empty(); ++m) {
        const runtime::KeptPipelineModel& k = kept->models[m];
        runtime::PlacementDecision d = k.decision;
        if (d.device.empty()) {
          // A split: cut again where it was placed, from one run for the values' shapes (no
          // timing, no placer), as the placed runner cuts a split it kept.
          try {
            d.partition = std::make_shared<const runtime::Partition>(runtime::partition_as_placed(
                candidates[m].entry->graph, candidates[m].shapes, model_options(*candidates[m].entry, base), k.nodes, k.threads));
            runtime::check_kept_predictions(*d.partition, d.segment_ms, d.segment_at);
          } catch (const Error& e) {
            stale = fmt::format("model '{}': its split does not fit the model: {}", k.name, e.what());
            break;
          }
          d.segment_at = runtime::with_measured_rows(*d.partition, std::move(d.segment_at), base.history);
          d.history_key = split_history_key(candidates[m], k.nodes);
        } else {
          d.history_key = history_key(candidates[m], base, history_devices, d.device);
        }
        decisions.push_back(std::move(d));
      }
      if (stale.empty()) {
        plan.from_cache = true;
        plan.cache_file = runtime::pipeline_placement_file(dir, key).string();
        plan.kept_lines = kept->lines;
        for (std::size_t m = 0; m < candidates.size(); ++m) {
          plan.models.push_back(kept->models[m].name);
          candidates[m].entry->joint->decide(std::move(decisions[m]));
        }
        return plan;
      }
      log().info("pipeline placement: the placement cache's entry {} does not stand ({}); placing again",
                 runtime::pipeline_placement_file(dir, key).string(), stale);
    }
  }

  plan.problem.frames_per_s = frames_per_s;
  plan.problem.latency_limit_ms = settings.latency_limit_ms;
  plan.problem.fixed_latency_ms = settings.cpu_stage_ms;
  std::vector<const Candidate*> placed;
  std::vector<std::shared_ptr<const runtime::Partition>> partitions;
  bool keep = !key.empty();
  int cores = 0;
  for (Candidate& c : candidates) {
    const ModelEntry& entry = *c.entry;
    const auto skip = [&](const std::string& why) {
      plan.alone.push_back(fmt::format("model '{}': placed alone: {}", c.name, why));
      entry.joint->decide(alone_decision());
      keep = false;
    };
    std::shared_ptr<const runtime::Partition> part;
    try {
      runtime::Partition made = runtime::partition_model(entry.graph, c.shapes, model_options(entry, base));
      // A split's accelerator segments timed at the rows of the batches it may run: the curves
      // its options are costed on (runtime/partition_rows.hpp).
      if (!made.single_device() && !c.fixed_one) {
        std::vector<std::int64_t> rows;
        for (int f : batch_candidates(c.feed.max_batch)) {
          rows.push_back(static_cast<std::int64_t>(std::ceil(f * c.rows_per_frame)));
        }
        const double before = made.timing_spent.device_s;
        runtime::time_segments_at_rows(made, rows);
        if (!made.device_row_times.empty()) {
          log().info("model '{}': its split's accelerator segments timed at {} rows, below the {} it was placed at, in {:.2f} s",
                     c.name,
                     fmt::join(made.device_row_times.begin()->second | std::views::keys, ", "),
                     runtime::analysed_rows(made), made.timing_spent.device_s - before);
        }
      }
      part = std::make_shared<const runtime::Partition>(std::move(made));
    } catch (const Error& e) {
      skip(fmt::format("the partitioner failed: {}", e.what()));
      continue;
    }
    if (part->single_device()) {
      c.measured.erase("split");  // a kept split's, which this placement does not offer
    } else {
      measure_split(c, part->node_devices());
    }
    runtime::PipelineModel model;
    model.name = c.name;
    model.rows_per_frame = c.fixed_one ? 1.0 : c.rows_per_frame;
    model.timeout_ms = c.feed.timeout_ms;
    model.options = pipeline_options(*part, batch_candidates(c.feed.max_batch), c.rows_per_frame, c.fixed_one,
                                     base.history, c.measured);
    if (model.options.empty()) {
      skip("no device runs every node and there is no split");
      continue;
    }
    cores = std::max(cores, part->profiles[0].cores);
    plan.problem.models.push_back(std::move(model));
    plan.models.push_back(c.name);
    placed.push_back(&c);
    partitions.push_back(part);
  }
  if (plan.models.empty()) return plan;
  plan.problem.fixed_ms[runtime::kCpuCores] = settings.cpu_stage_ms / std::max(1, cores);
  plan.result = runtime::place_pipeline(plan.problem);
  runtime::KeptPipelinePlacement kept;
  for (std::size_t m = 0; m < placed.size(); ++m) {
    const Candidate& c = *placed[m];
    const auto& options = plan.problem.models[m].options;
    const PipelineOption& o = options[static_cast<std::size_t>(plan.result.best.option[m])];
    runtime::PlacementDecision d;
    d.partition = partitions[m];
    d.device = o.placement == "split" ? std::string() : o.placement;
    d.batch_frames = o.frames;
    d.batch_rows = o.rows;
    d.predicted_batch_ms = o.batch_ms;
    d.measured = o.measured;
    // The batch time against its rows for the summary: the option's at every batch size tried,
    // and the measured points themselves.
    for (const PipelineOption& other : options) {
      if (other.placement == o.placement) d.predicted_at.add(other.rows, other.batch_ms);
    }
    if (const auto it = c.measured.find(o.placement); o.measured && it != c.measured.end()) {
      for (const auto& [rows, ms] : it->second.points) d.predicted_at.add(rows, ms);
    }
    const bool split = d.device.empty();
    if (split) {
      d.segment_ms = runtime::predicted_segment_ms(*partitions[m]);
      d.segment_at = runtime::segment_curves(*partitions[m], base.history);
      d.history_key = split_history_key(c, partitions[m]->node_devices());
    } else {
      d.history_key = history_key(c, base, history_devices, d.device);
    }
    // The runner's line in the run's summary: its part, and the pipeline's predicted utilization.
    // A split no batch measured: which hand-over costed it, the pipeline's or the profiles'.
    std::string source = o.measured ? " (from measured batches)" : "";
    const runtime::Partition& part = *partitions[m];
    const auto handover = pipeline_handover(part, base.history);
    const bool profiled = !handover && !part.handover_learned && part.handover_ms > 0;
    if (split && !o.measured && (handover || profiled)) {
      source = fmt::format(" (its segments handed over in {:.3f} ms each, as {} measured)", handover.value_or(part.handover_ms),
                           handover ? "runs in a pipeline" : "the devices' runner round trips");
    }
    d.note = fmt::format("pipeline placement: {}, batch {} frame(s) of {} rows, predicted {:.3f} ms a batch{}; the pipeline's "
                         "predicted utilization: {}",
                         o.placement == "split" ? "split" : "whole", o.frames, o.rows, o.batch_ms, source,
                         runtime::utilization_text(plan.result.best));
    // A split's measured batches are kept for the split chosen (the one a later start finds
    // them for again), not for one the model's partition offered and the placement left.
    auto measured = measured_at(c);
    if (!split) measured.erase("split");
    kept.models.push_back({c.name, d, split ? partitions[m]->node_devices() : std::vector<std::string>{},
                           split ? partitions[m]->host_segment_threads() : std::vector<int>{}, std::move(measured)});
    c.entry->joint->decide(std::move(d));
  }
  if (keep) {
    kept.lines = placement_lines(plan);
    runtime::write_pipeline_placement(dir, key, kept);
  }
  return plan;
}

namespace {

// Batches by the rows they ran, and their times summed.
using RanByRows = std::map<std::int64_t, std::pair<std::int64_t, double>>;

// `st`'s batches into `ran`: each row count's batches, and their whole times (or compute alone)
// over `overlap`.
void add_ran(RanByRows& ran, const RunnerStats& st, bool compute_only, double overlap) {
  for (const auto& [rows, times] : st.run_rows_ms) {
    ran[rows].first += times.batches;
    ran[rows].second += (compute_only ? times.compute_ms : times.ms) / overlap;
  }
}

// Each row count's mean into `history` under key(rows), where enough batches ran it.
std::size_t record_means(const RanByRows& ran, const std::function<std::string(std::int64_t)>& key,
                         runtime::CostHistory& history) {
  std::size_t recorded = 0;
  for (const auto& [rows, times] : ran) {
    if (rows <= 0 || times.first < kMinBatchesRecorded) continue;
    history.record(key(rows), times.second / static_cast<double>(times.first));
    ++recorded;
  }
  return recorded;
}

// A split's batches (`batches`, of the runners that ran its segments) beyond their segments'
// compute (`segments`, each one's) and their inputs' crossings, per segment: its hand-over in this
// pipeline, one sample per row count at which the batches and every segment ran
// (kMinBatchesRecorded batches). None for a split read back from the placement cache, whose
// crossings were not costed (Partition::has_costs).
void record_pipeline_handover(const runtime::Partition& part, const RanByRows& batches, const std::vector<RanByRows>& segments,
                              runtime::CostHistory& history) {
  if (!part.has_costs()) return;
  for (const auto& [rows, batch] : batches) {
    if (rows <= 0 || batch.first < kMinBatchesRecorded) continue;
    std::vector<runtime::RowsCurve> compute(segments.size());
    for (std::size_t k = 0; k < segments.size(); ++k) {
      const auto it = segments[k].find(rows);
      if (it == segments[k].end() || it->second.first == 0) break;
      compute[k].add(static_cast<double>(rows), it->second.second / static_cast<double>(it->second.first));
    }
    if (std::any_of(compute.begin(), compute.end(), [](const runtime::RowsCurve& c) { return c.empty(); })) continue;
    const double rest = batch.second / static_cast<double>(batch.first) -
                        runtime::split_latency_at_rows(part, compute, static_cast<double>(rows), 0.0);
    history.record(runtime::CostHistory::pipeline_handover_key(part.profiles[0]),
                   std::max(0.0, rest) / static_cast<double>(segments.size()));
  }
}

}  // namespace

std::size_t record_batch_times(const ModelTable& models, runtime::CostHistory& history) {
  std::size_t recorded = 0;
  for (const auto& [name, entry] : models) {
    if (!entry.joint) continue;
    const auto d = entry.joint->decision();
    if (!d || d->alone) continue;
    // Every runner of the model that runs as decided (one that placed alone before the decision
    // ran another placement): batches by the rows they ran, each batch's time as the GPU time
    // it cost. Where batches overlapped on a shared GPU (this model's slots, other models), each
    // took longer than alone by how far they overlapped; the history keeps a batch's cost alone,
    // as `redwood plan --profile` measures it, and the pipeline placement adds the sharing back
    // through the devices' utilization. A split's batch, segment to segment across its devices,
    // is kept as it ran.
    const std::vector<JointPlacement::Report> reports = entry.joint->runner_reports();
    if (d->history_key) {
      RanByRows ran;
      for (const JointPlacement::Report& r : reports) add_ran(ran, r.model, false, d->device.empty() ? 1.0 : r.model.device_overlap());
      recorded += record_means(ran, d->history_key, history);
    }
    // A split's segments: each one's compute by the rows of the batches it ran, the same way,
    // under its key (Partition::ran_key) at those rows (runtime/partition_rows.hpp reads them back).
    const runtime::Partition* part = d->device.empty() ? d->partition.get() : nullptr;
    if (part == nullptr || part->profiles.empty() || part->segments.size() < 2) continue;
    // The runners that ran its segments: their split batches whole, and each segment's.
    RanByRows split_batches;
    std::vector<RanByRows> segment_batches(part->segments.size());
    for (const JointPlacement::Report& r : reports) {
      if (r.segments.size() != part->segments.size()) continue;
      add_ran(split_batches, r.model, false, 1.0);
      for (std::size_t k = 0; k < r.segments.size(); ++k) add_ran(segment_batches[k], r.segments[k], true, r.segments[k].device_overlap());
    }
    for (std::size_t k = 0; k < part->segments.size(); ++k) {
      const runtime::Segment& s = part->segments[k];
      const runtime::Partition::SegmentKeys keys = part->segment_keys(s);
      const std::size_t times = record_means(
          segment_batches[k], [&keys](std::int64_t rows) { return runtime::CostHistory::segment_rows_key(keys.ran, rows); },
          history);
      recorded += times;
      // And a host segment's threads, as `redwood plan --profile` keeps them: the next placement
      // runs the segment there (partition_model takes them from the history) instead of timing
      // its thread counts anew, so that the times just recorded stand for the threads it runs on.
      // Only where the history holds another count: its node entries key the pipeline's kept
      // placement, which a sample added every run would never let stand.
      const std::string threads_key = runtime::CostHistory::host_threads_key(keys.cut);
      if (times > 0 && s.device == 0 && s.threads > 0 && history.find(threads_key) != static_cast<double>(s.threads)) {
        history.record(threads_key, s.threads);
      }
    }
    record_pipeline_handover(*part, split_batches, segment_batches, history);
  }
  return recorded;
}

}  // namespace redwood
