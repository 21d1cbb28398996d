#include "runtime/partition.hpp"

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/model_runner.hpp"
#include "runtime/device_segment_time.hpp"
#include "runtime/host_segment_time.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <set>

namespace redwood::runtime {
namespace {

// The devices' supports() answers: the overrides, else the registry's (bound to the precision).
std::vector<SupportFn> support_functions(const PartitionOptions& options) {
  std::vector<SupportFn> fns;
  for (std::size_t d = 0; d < options.devices.size(); ++d) {
    const std::string& name = options.devices[d];
    if (auto it = options.supports.find(name); it != options.supports.end()) {
      fns.push_back(it->second);
      continue;
    }
    if (d == 0) {  // the host: the analysis ran every node there
      fns.push_back([](const Graph&, const Node&, const std::vector<TensorDesc>&) { return std::string(); });
      continue;
    }
    const auto& registry = device_runner_registry();
    const auto it = registry.find(name);
    if (it == registry.end() || !it->second.supports) {
      const std::string why = fmt::format("this Redwood has no '{}' device", name);
      fns.push_back([why](const Graph&, const Node&, const std::vector<TensorDesc>&) { return why; });
      continue;
    }
    fns.push_back([fn = it->second.supports, precision = options.precision](
                      const Graph& g, const Node& node, const std::vector<TensorDesc>& inputs) {
      return fn(g, node, inputs, precision);
    });
  }
  return fns;
}

std::uint64_t placements_to_try(const PlacementProblem& p) {
  std::uint64_t count = 1;
  for (const auto& node : p.nodes) {
    std::uint64_t options = 0;
    for (double c : node.cost_ms) options += c != kUnsupported ? 1 : 0;
    if (options > 1 && count > (std::uint64_t{1} << 62) / options) return std::uint64_t{1} << 62;
    count *= std::max<std::uint64_t>(options, 1);
  }
  return count;
}

void fill_objectives(const PlacementProblem& p, Placement& placement) {
  placement.makespan_ms = makespan(p, placement.device);
  placement.bottleneck_ms = bottleneck(p, placement.device);
}

const char* kColors[] = {"lightblue", "palegreen", "khaki", "plum"};

}  // namespace

std::optional<Placement> place_naive(const PlacementProblem& p) {
  if (p.devices.size() < 2) return std::nullopt;
  Placement placement;
  bool host = false;
  for (const auto& node : p.nodes) {
    host = host || node.cost_ms[1] == kUnsupported;
    if (host && node.cost_ms[0] == kUnsupported) return std::nullopt;  // pinned to the accelerator after the cut
    placement.device.push_back(host ? 0 : 1);
  }
  if (!host) return std::nullopt;
  fill_objectives(p, placement);
  return placement;
}

double split_latency_ms(const ModelAnalysis& a, const PlacementProblem& p, const std::vector<Segment>& segments,
                        const SplitCosts& costs, std::vector<double>* compute, std::vector<double>* transfer_in,
                        std::vector<double>* host_idle) {
  const std::vector<double>& segment_ms = costs.segment_ms;
  const double host_layout_gbps = costs.host_layout_gbps;
  std::map<std::size_t, std::size_t> slot;  // graph node -> placeable index
  for (std::size_t i = 0; i < a.placeable.size(); ++i) slot[a.placeable[i]] = i;
  std::set<std::string> outputs, inputs;
  for (const auto& vi : a.graph->outputs) outputs.insert(vi.name);
  for (const auto& vi : a.graph->inputs) inputs.insert(vi.name);
  auto bytes = [&](const std::string& v) {
    const TensorDesc& d = a.values.at(v);
    return static_cast<double>(shape_numel(d.shape)) * static_cast<double>(dtype_size(d.dtype)) * costs.bytes_scale;
  };
  // Through the host: down from the producer's device, up to the consumer's.
  auto cross = [&](int from, int to, double b) {
    return (from != 0 ? p.transfer_ms(from, 0, b) : 0.0) + (to != 0 ? p.transfer_ms(0, to, b) : 0.0);
  };
  std::map<std::string, std::pair<int, double>> made;  // value -> (device, when it is on the host side)
  double latency = 0;
  if (compute) compute->assign(segments.size(), 0.0);
  if (transfer_in) transfer_in->assign(segments.size(), 0.0);
  if (host_idle) host_idle->assign(segments.size(), kLongIdle);
  // When the host's last work ended: at first the batch's start, its inputs made on the host just
  // before (a pipeline's preprocessing, the batch before's outputs).
  double host_free = 0;
  double handovers = 0;  // hand-overs since then
  for (std::size_t k = 0; k < segments.size(); ++k) {
    const Segment& s = segments[k];
    double ready = 0, crossing = 0, work = 0;
    for (const auto& in : s.inputs) {
      const auto it = made.find(in);
      const int from = it != made.end() ? it->second.first : 0;
      ready = std::max(ready, it != made.end() ? it->second.second : 0.0);
      crossing += cross(from, s.device, bytes(in));
    }
    for (std::size_t n : s.nodes) {
      if (auto it = slot.find(n); it != slot.end()) work += p.nodes[it->second].cost_ms[static_cast<std::size_t>(s.device)];
    }
    if (static_cast<std::size_t>(s.device) < segment_ms.size()) work += segment_ms[static_cast<std::size_t>(s.device)];
    if (s.device == 0 && segments.size() > 1 && host_layout_gbps > 0) {
      // Its edges' layout conversions: each value read and written once.
      double edge_bytes = 0;
      for (const auto& in : s.inputs) edge_bytes += inputs.count(in) != 0 ? 0.0 : bytes(in);
      for (const auto& out : s.outputs) edge_bytes += outputs.count(out) != 0 ? 0.0 : bytes(out);
      work += 2 * edge_bytes / (host_layout_gbps * 1e6);
    }
    const double idle = s.device == 0 ? std::max(0.0, ready + crossing - host_free - handovers) : kLongIdle;
    if (costs.measured) {
      if (const auto ms = costs.measured(s, idle)) work = *ms;
    }
    const double done = ready + costs.handover_ms + crossing + work;
    handovers += costs.handover_ms;
    if (s.device == 0) {
      host_free = done;
      handovers = 0;
    }
    if (host_idle && s.device == 0) (*host_idle)[k] = idle;
    for (const auto& out : s.outputs) {
      made[out] = {s.device, done};
      if (outputs.count(out) != 0) latency = std::max(latency, done + cross(s.device, 0, bytes(out)));
    }
    latency = std::max(latency, done);
    if (compute) (*compute)[k] = work;
    if (transfer_in) (*transfer_in)[k] = crossing;
  }
  return latency;
}

namespace {

std::optional<double> find_ms(const std::map<std::string, double>& times, const std::string& key) {
  const auto it = times.find(key);
  return it != times.end() ? std::optional<double>(it->second) : std::nullopt;
}

// A host segment's timing alone under `key` for a segment whose kernels were idle for
// `idle_ms` before it, and whether it is the one with its threads woken.
std::optional<std::pair<double, bool>> host_timing_at(const Partition& p, const std::string& key, double idle_ms) {
  if (idle_ms < kShortIdleMs) {
    if (const auto woken = find_ms(p.host_woken_times, key)) return std::pair{*woken, true};
  }
  const auto timed = find_ms(p.host_times, key);
  return timed ? std::optional<std::pair<double, bool>>(std::pair{*timed, false}) : std::nullopt;
}

// The timings alone that segment `s` may be among: the host's or the accelerators'.
const std::map<std::string, double>& timed_times(const Partition& p, const Segment& s) {
  return s.device == 0 ? p.host_times : p.device_times;
}

// Segment `s`'s time as timed alone while planning (Partition::timed_segment_ms) under `key`.
std::optional<double> timed_ms(const Partition& p, const Segment& s, const std::string& key, double idle_ms) {
  if (s.device != 0) return find_ms(p.device_times, key);
  const auto timed = host_timing_at(p, key, idle_ms);
  return timed ? std::optional<double>(timed->first) : std::nullopt;
}

// Segment `s`'s time as measured before, else as timed while planning: its keys made once for
// both (and not at all when nothing is known).
std::optional<double> known_segment_ms(const Partition& p, const Segment& s, double idle_ms) {
  if (p.cut_times.empty() && timed_times(p, s).empty()) return std::nullopt;
  const Partition::SegmentKeys keys = p.segment_keys(s);
  if (const auto ms = find_ms(p.cut_times, keys.ran)) return ms;
  return timed_ms(p, s, keys.cut, idle_ms);
}

double cut_latency_ms(const Partition& p, const std::vector<Segment>& segments) {
  SplitCosts costs = p.split_costs();
  costs.measured = [&p](const Segment& s, double idle_ms) { return known_segment_ms(p, s, idle_ms); };
  return split_latency_ms(p.analysis, p.open, segments, costs);
}

// Times the segments of a cut (a split's: a model wholly on one device is what its nodes' times
// describe) that were neither measured before nor timed already. A host segment at the thread
// count chosen for it before, else at each count, choosing one; an accelerator's on its device
// where this process can run it. `tried` holds the keys timed (or that failed to run) before, so
// a segment several cuts share, and the same work in two segments, is run once.
void time_segments(Partition& part, const std::vector<Segment>& segments, std::set<std::string>& tried) {
  if (segments.size() < 2) return;
  for (const Segment& s : segments) {
    Partition::SegmentKeys keys = part.segment_keys(s);
    std::string& key = keys.cut;
    if (part.cut_times.count(keys.ran) != 0 || part.host_times.count(key) != 0 || part.device_times.count(key) != 0 ||
        !tried.insert(key).second) {
      continue;
    }
    const std::string& device = part.devices[static_cast<std::size_t>(s.device)];
    if (s.device != 0 && !can_time_on(device)) continue;
    const auto start = std::chrono::steady_clock::now();
    bool timed = false;
    if (s.device != 0) {
      const auto ms = time_device_segment(part.analysis, s, device, part.segment_timing_config());
      if ((timed = ms.has_value())) part.device_times[std::move(key)] = *ms;
    } else {
      const auto chosen = part.host_threads.find(key);
      const auto choice = chosen != part.host_threads.end() ? time_host_segment(part.analysis, s, 5, chosen->second)
                                                            : choose_host_threads(part.analysis, s);
      if ((timed = choice.has_value())) {
        part.host_times[key] = choice->ms;
        part.host_woken_times[key] = choice->woken_ms;
        part.host_threads[std::move(key)] = choice->threads;
      }
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    Partition::TimingSpent& t = part.timing_spent;
    (s.device != 0 ? t.device_s : t.host_s) += seconds;
    (s.device != 0 ? t.device_segments : t.host_segments) += timed ? 1 : 0;
  }
}

// A split's host segments run on the threads chosen for them (none: the process's count).
void set_host_threads(const Partition& part, std::vector<Segment>& segments) {
  if (segments.size() < 2 || part.host_threads.empty()) return;
  for (Segment& s : segments) {
    if (s.device != 0) continue;
    const auto it = part.host_threads.find(part.cut_key(s));
    if (it != part.host_threads.end()) s.threads = it->second;
  }
}

}  // namespace

SplitCosts Partition::split_costs() const {
  SplitCosts costs;
  costs.segment_ms = segment_ms;
  costs.host_layout_gbps = host_layout_gbps;
  costs.handover_ms = handover_ms;
  return costs;
}

double Partition::run_latency_ms(const std::vector<int>& device) const {
  return cut_latency_ms(*this, cut_model(analysis, device));
}

std::vector<Segment> Partition::cut(const std::vector<int>& device) const {
  std::vector<Segment> segments = cut_model(analysis, device);
  set_host_threads(*this, segments);
  return segments;
}

Partition::SegmentKeys Partition::segment_keys(const Segment& s) const {
  const Graph& g = *analysis.graph;
  const DeviceProfile& profile = profiles.at(static_cast<std::size_t>(s.device));
  const std::string device_precision = cost_precision(s.device, precision, device_options);
  std::vector<std::string> work, named;  // each node's key; the same after its name
  for (std::size_t n : s.nodes) {
    if (analysis.host_node[n]) continue;
    work.push_back(CostHistory::key(profile, device_precision, g.nodes[n], analysis.input_descs(n), analysis.output_descs(n)));
    named.push_back(fmt::format("{} {}", g.nodes[n].name, work.back()));
  }
  // Which values cross its edges: the same nodes cut elsewhere convert other tensors.
  auto edge = [&](const char* what, const std::string& v) {
    const TensorDesc& d = analysis.values.at(v);
    return fmt::format("{} {}{}", what, dtype_name(d.dtype), shape_str(d.shape));
  };
  for (const auto& v : s.inputs) work.push_back(edge("in", v));
  for (const auto& v : s.outputs) work.push_back(edge("out", v));
  named.insert(named.end(), work.begin() + static_cast<std::ptrdiff_t>(named.size()), work.end());  // the edges
  return {CostHistory::cut_key(profile, device_precision, work), CostHistory::cut_key(profile, device_precision, named)};
}

std::string Partition::cut_key(const Segment& s) const { return segment_keys(s).cut; }

std::string Partition::ran_key(const Segment& s) const { return segment_keys(s).ran; }

std::optional<double> Partition::measured_segment_ms(const Segment& s) const {
  return cut_times.empty() ? std::nullopt : find_ms(cut_times, ran_key(s));
}

std::optional<double> Partition::timed_segment_ms(const Segment& s, double host_idle_ms) const {
  if (timed_times(*this, s).empty()) return std::nullopt;
  return timed_ms(*this, s, cut_key(s), host_idle_ms);
}

std::optional<std::pair<double, bool>> Partition::host_timing(const Segment& s, double host_idle_ms) const {
  if (s.device != 0 || host_times.empty()) return std::nullopt;
  return host_timing_at(*this, cut_key(s), host_idle_ms);
}

RunnerConfig Partition::segment_timing_config() const {
  RunnerConfig config;
  config.slots = 1;
  config.precision = precision;
  config.device_options = device_options;
  config.device = device_index;
  config.device_clock = false;  // the planner's work, not a run's
  return config;
}

std::vector<int> Partition::host_segment_threads() const {
  std::vector<int> threads;
  if (segments.size() < 2) return threads;
  for (const Segment& s : segments) {
    if (s.device == 0) threads.push_back(s.threads);
  }
  return threads;
}

std::vector<std::string> Partition::node_devices() const {
  std::vector<std::string> names;
  names.reserve(placement.device.size());
  for (int d : placement.device) names.push_back(devices[static_cast<std::size_t>(d)]);
  return names;
}

double Partition::objective_ms(const Placement& p) const {
  return objective == PartitionOptions::Objective::kLatency ? p.makespan_ms : p.bottleneck_ms;
}

bool Partition::single_device() const { return segments.size() <= 1; }

const std::string& Partition::whole_device() const {
  return devices[segments.empty() ? 0 : static_cast<std::size_t>(segments.front().device)];
}

std::string Partition::dot() const {
  const Graph& g = *analysis.graph;
  std::string out = fmt::format("digraph \"{}\" {{\n  rankdir=TB;\n  node [shape=box, style=filled, fontsize=10];\n", g.name);
  for (std::size_t d = 0; d < devices.size(); ++d) {
    out += fmt::format("  \"legend {}\" [label=\"{}\", fillcolor={}];\n", devices[d], devices[d], kColors[d % 4]);
  }
  std::vector<int> where(g.nodes.size(), -1);
  for (std::size_t i = 0; i < analysis.placeable.size(); ++i) where[analysis.placeable[i]] = placement.device[i];
  for (std::size_t n = 0; n < g.nodes.size(); ++n) {
    const Node& node = g.nodes[n];
    if (where[n] < 0) {
      out += fmt::format("  n{} [label=\"{}\", fillcolor=white, style=dashed];\n", n, node.op_type);
    } else {
      out += fmt::format("  n{} [label=\"{}\\n{}\", fillcolor={}];\n", n, node.op_type, node.name, kColors[where[n] % 4]);
    }
  }
  const auto producer = value_producers(g);
  for (std::size_t n = 0; n < g.nodes.size(); ++n) {
    for (const auto& in : g.nodes[n].inputs) {
      const auto it = in.empty() ? producer.end() : producer.find(in);
      if (it == producer.end()) continue;
      const bool crosses = where[it->second] >= 0 && where[n] >= 0 && where[it->second] != where[n];
      const TensorDesc& d = analysis.values.at(in);
      const double bytes = static_cast<double>(shape_numel(d.shape)) * static_cast<double>(dtype_size(d.dtype));
      out += crosses ? fmt::format("  n{} -> n{} [penwidth=3, color=red, label=\"{:.2f} MB\"];\n", it->second, n, bytes / 1e6)
                     : fmt::format("  n{} -> n{};\n", it->second, n);
    }
  }
  return out + "}\n";
}

Partition partition_model(std::shared_ptr<const Graph> graph, const std::vector<Shape>& input_shapes,
                          const PartitionOptions& options) {
  return partition_analysis(analyze_model(std::move(graph), input_shapes), options);
}

namespace {
std::vector<DeviceProfile> device_profiles(const PartitionOptions& options);
}  // namespace

Partition partition_as_placed(ModelAnalysis analysis, const PartitionOptions& options,
                              const std::vector<std::string>& device, const std::vector<int>& threads) {
  Partition part;
  part.profiles = device_profiles(options);
  part.analysis = std::move(analysis);
  part.devices = options.devices;
  part.objective = options.objective;
  part.precision = options.precision;
  part.device_options = options.device_options;
  part.device_index = options.device_index;
  const ModelAnalysis& a = part.analysis;
  const Graph& g = *a.graph;
  RW_EXPECTS(device.size() == a.placeable.size(), InvalidArgument, "{}: {} placed nodes given, the model has {}", g.name,
             device.size(), a.placeable.size());
  const std::vector<SupportFn> supports = support_functions(options);
  part.placement.device.reserve(device.size());
  for (std::size_t i = 0; i < device.size(); ++i) {
    const Node& node = g.nodes[a.placeable[i]];
    const auto it = std::find(options.devices.begin(), options.devices.end(), device[i]);
    RW_EXPECTS(it != options.devices.end(), InvalidArgument, "{}: placed on '{}', which is not one of the devices ({})",
               node.where(), device[i], fmt::join(options.devices, ", "));
    const auto d = static_cast<std::size_t>(it - options.devices.begin());
    const std::string why = supports[d](g, node, a.input_descs(a.placeable[i]));
    RW_EXPECTS(why.empty(), InvalidArgument, "{}: placed on '{}', which cannot run it: {}", node.where(), device[i], why);
    if (const auto pin = options.pinned.find(node.name); pin != options.pinned.end()) {
      RW_EXPECTS(pin->second == device[i], InvalidArgument, "{}: placed on '{}', pinned to '{}'", node.where(), device[i],
                 pin->second);
    }
    part.placement.device.push_back(static_cast<int>(d));
  }
  part.placer = part.heft = part.placement;
  part.segments = cut_model(a, part.placement.device);
  if (!threads.empty()) {
    std::vector<Segment*> host;
    for (Segment& s : part.segments) {
      if (s.device == 0) host.push_back(&s);
    }
    RW_EXPECTS(threads.size() == host.size() && part.segments.size() > 1, InvalidArgument,
               "{}: thread counts for {} host segments given, the cut has {}", g.name, threads.size(),
               part.segments.size() > 1 ? host.size() : 0);
    for (std::size_t k = 0; k < host.size(); ++k) host[k]->threads = std::max(threads[k], 0);
  }
  return part;
}

Partition partition_as_placed(std::shared_ptr<const Graph> graph, const std::vector<Shape>& input_shapes,
                              const PartitionOptions& options, const std::vector<std::string>& device,
                              const std::vector<int>& threads) {
  return partition_as_placed(analyze_model(std::move(graph), input_shapes, true, AnalysisDepth::kShapesOnly), options, device,
                             threads);
}

namespace {

// The devices' profiles: the options', else each device's own.
std::vector<DeviceProfile> device_profiles(const PartitionOptions& options) {
  std::vector<DeviceProfile> profiles = options.profiles;
  if (profiles.empty()) {
    for (const auto& d : options.devices) {
      profiles.push_back(device_profile(d == "cuda" ? fmt::format("cuda:{}", options.device_index) : d));
    }
  }
  RW_EXPECTS(profiles.size() == options.devices.size(), InvalidArgument, "partition: {} profiles for {} devices",
             profiles.size(), options.devices.size());
  return profiles;
}

// What the partition keeps of the options, and what it learned before: segments measured and
// timed, each device's segment cost, the hand-over, the host-timing scale, host threads chosen.
void keep_what_is_known(Partition& part, const PartitionOptions& options) {
  part.host_layout_gbps = part.profiles[0].memory_gbps;
  part.precision = options.precision;
  part.device_options = options.device_options;
  part.device_index = options.device_index;
  if (options.history) part.cut_times = options.history->entries("cut ");
  for (const DeviceProfile& prof : part.profiles) {
    const auto learned = options.history ? options.history->find(CostHistory::segment_key(prof)) : std::nullopt;
    part.segment_ms.push_back(learned.value_or(0.0));
  }
  if (options.timed_before) {
    part.host_times = options.timed_before->host_times;
    part.host_woken_times = options.timed_before->host_woken_times;
    part.device_times = options.timed_before->device_times;
    part.host_threads = options.timed_before->host_threads;
  }
  // A segment's hand-over: learned from a split's batches measured on this host, else what a
  // batch spends in a device's runner beyond its copies and compute, as the profiles measured it;
  // their mean, a batch going from one device's segment to another's.
  double roundtrip = 0;
  for (const DeviceProfile& prof : part.profiles) roundtrip += prof.runner_roundtrip_ms;
  roundtrip /= static_cast<double>(part.profiles.size());
  const auto learned = options.history ? options.history->find(CostHistory::handover_key(part.profiles[0])) : std::nullopt;
  part.handover_ms = learned.value_or(roundtrip);
  part.handover_learned = learned.has_value();
  if (options.history) {
    for (const auto& [key, threads] : options.history->entries(CostHistory::host_threads_prefix)) {
      part.host_threads[key.substr(std::strlen(CostHistory::host_threads_prefix))] = static_cast<int>(std::lround(threads));
    }
  }
}

// What each device can run (part.why_not), and the measurements that calibrate each roofline.
void ask_devices(Partition& part, CostModel& costs, const PartitionOptions& options) {
  const ModelAnalysis& a = part.analysis;
  const Graph& g = *a.graph;
  const std::size_t devices = part.devices.size();
  const std::vector<SupportFn> supports = support_functions(options);
  part.why_not.assign(a.placeable.size(), std::vector<std::string>(devices));
  std::vector<std::tuple<int, double, double>> samples;
  for (std::size_t i = 0; i < a.placeable.size(); ++i) {
    const std::size_t n = a.placeable[i];
    const auto ins = a.input_descs(n), outs = a.output_descs(n);
    for (std::size_t d = 0; d < devices; ++d) {
      part.why_not[i][d] = supports[d](g, g.nodes[n], ins);
      const double roofline = costs.roofline_ms(static_cast<int>(d), node_work(g.nodes[n], ins, outs));
      const CostEstimate e = costs.node_ms(static_cast<int>(d), g.nodes[n], ins, outs);
      if (e.measured) samples.emplace_back(static_cast<int>(d), roofline, e.ms);
      if (d == 0 && options.use_analysis_times && a.cpu_ms[i] > 0 && !e.measured) {
        samples.emplace_back(0, roofline, a.cpu_ms[i]);
      }
    }
  }
  costs.calibrate(samples);
}

// `name`'s index among the options' devices; `what` names it in the error when it is not one.
std::size_t device_named(const PartitionOptions& options, const std::string& name, const std::string& what) {
  const auto it = std::find(options.devices.begin(), options.devices.end(), name);
  RW_EXPECTS(it != options.devices.end(), InvalidArgument, "{} '{}', which is not one of the devices ({})", what, name,
             fmt::join(options.devices, ", "));
  return static_cast<std::size_t>(it - options.devices.begin());
}

// The placement problem (part.problem, part.open) and each node's cost on each device
// (part.costs): unsupported where the device cannot run the node, or where a pin or the
// preferred device sends it elsewhere (`open` keeps the preference out: the baselines' problem).
void state_problem(Partition& part, const CostModel& costs, const PartitionOptions& options) {
  const ModelAnalysis& a = part.analysis;
  const Graph& g = *a.graph;
  const std::size_t devices = part.devices.size();
  PlacementProblem& p = part.problem;
  p.devices = options.devices;
  p.links.assign(devices, std::vector<PlacementProblem::Link>(devices));
  for (std::size_t x = 0; x < devices; ++x) {
    for (std::size_t y = 0; y < devices; ++y) {
      if (x != y) p.links[x][y] = costs.link(static_cast<int>(x), static_cast<int>(y));
    }
  }
  std::set<std::string> graph_inputs, graph_outputs;
  for (const auto& vi : g.inputs) graph_inputs.insert(vi.name);
  for (const auto& vi : g.outputs) graph_outputs.insert(vi.name);
  std::map<std::string, int> placed_producer;
  std::map<std::pair<int, int>, double> edge_bytes;
  part.costs.assign(a.placeable.size(), std::vector<CostEstimate>(devices));
  std::vector<int> pinned_to(a.placeable.size(), -1);
  auto bytes_of = [&](const std::string& v) {
    const TensorDesc& d = a.values.at(v);
    return static_cast<double>(shape_numel(d.shape)) * static_cast<double>(dtype_size(d.dtype));
  };
  for (std::size_t i = 0; i < a.placeable.size(); ++i) {
    const std::size_t n = a.placeable[i];
    const Node& node = g.nodes[n];
    PlacementProblem::Node pn;
    pn.name = node.name;
    const auto ins = a.input_descs(n), outs = a.output_descs(n);
    for (std::size_t d = 0; d < devices; ++d) {
      CostEstimate e = costs.node_ms(static_cast<int>(d), node, ins, outs);
      if (d == 0 && options.use_analysis_times && !e.measured && a.cpu_ms[i] > 0) e = {a.cpu_ms[i], true};
      if (!part.why_not[i][d].empty()) e.ms = kUnsupported;
      part.costs[i][d] = e;
      pn.cost_ms.push_back(e.ms);
    }
    if (!options.prefer.empty()) {
      const std::size_t d = device_named(options, options.prefer, "partition: preferred device");
      if (part.why_not[i][d].empty()) {
        for (std::size_t o = 0; o < devices; ++o) {
          if (o != d) pn.cost_ms[o] = kUnsupported;
        }
      }
    }
    if (auto pin = options.pinned.find(node.name); pin != options.pinned.end()) {
      const std::size_t d = device_named(options, pin->second, fmt::format("{}: pinned to", node.where()));
      pinned_to[i] = static_cast<int>(d);
      RW_EXPECTS(part.why_not[i][d].empty(), Unsupported, "{}: pinned to '{}', which cannot run it: {}", node.where(),
                 pin->second, part.why_not[i][d]);
      for (std::size_t o = 0; o < devices; ++o) pn.cost_ms[o] = o == d ? part.costs[i][d].ms : kUnsupported;
    }
    for (const auto& in : node.inputs) {
      if (in.empty()) continue;
      if (graph_inputs.count(in) != 0) pn.input_bytes += bytes_of(in);
      if (auto it = placed_producer.find(in); it != placed_producer.end()) {
        edge_bytes[{it->second, static_cast<int>(i)}] += bytes_of(in);
      }
    }
    for (const auto& out : node.outputs) {
      if (out.empty()) continue;
      placed_producer[out] = static_cast<int>(i);
      if (graph_outputs.count(out) != 0) pn.output_bytes += bytes_of(out);
    }
    p.nodes.push_back(std::move(pn));
  }
  for (const auto& [ends, bytes] : edge_bytes) p.edges.push_back({ends.first, ends.second, bytes});
  part.open = p;
  for (std::size_t i = 0; i < p.nodes.size(); ++i) {
    for (std::size_t d = 0; d < devices; ++d) {
      const bool pinned_elsewhere = pinned_to[i] >= 0 && pinned_to[i] != static_cast<int>(d);
      part.open.nodes[i].cost_ms[d] = pinned_elsewhere ? kUnsupported : part.costs[i][d].ms;
    }
  }
  for (const auto& pin : options.pinned) {
    RW_EXPECTS(std::any_of(g.nodes.begin(), g.nodes.end(), [&](const Node& n) { return n.name == pin.first; }),
               InvalidArgument, "{}: no node '{}' to pin (node names after the optimizer's passes: `redwood plan -v`)",
               g.name, pin.first);
  }
  p.validate();
}

// Place: the objective's placer, HEFT as the baseline, the exact reference when small enough.
void place(Partition& part, const PartitionOptions& options) {
  const PlacementProblem& p = part.problem;
  part.heft = place_heft(p);
  const bool small = placements_to_try(p) <= options.exhaustive_limit;
  if (options.objective == PartitionOptions::Objective::kLatency) {
    part.placement = place_latency(p);
    if (small) part.optimum = place_exhaustive(p, options.exhaustive_limit);
  } else {
    try {
      part.placement = place_throughput_ilp(p, options.ilp_time_limit_s);
      if (part.placement.proven_optimal) part.optimum = part.placement;
    } catch (const Error& e) {
      log().warn("{}: the throughput ILP found no placement ({}); using HEFT's", part.analysis.graph->name, e.what());
      part.placement = part.heft;
    }
    if (small && !part.optimum) part.optimum = place_throughput_exhaustive(p, options.exhaustive_limit);
  }
  // An exact optimum is at least as good as the heuristic: take it.
  if (part.optimum && part.objective_ms(*part.optimum) < part.objective_ms(part.placement)) part.placement = *part.optimum;
  part.naive = place_naive(part.open);
  part.placer = part.placement;
}

// The list schedule keeps a value on its device between two nodes there; a cut sends every value
// between segments through the host. Among the candidates (the placer's, HEFT's, the naive split,
// each device alone), keep the one whose cut runs fastest (ties: the earlier), so a split must pay
// for its crossings. `tried`: the segments timed while planning (time_segments).
void choose_cut_as_run(Partition& part, const PartitionOptions& options, std::set<std::string>& tried) {
  const PlacementProblem& p = part.problem;
  std::vector<std::vector<int>> candidates{part.placement.device, part.heft.device};
  if (part.naive) candidates.push_back(part.naive->device);
  for (std::size_t d = 0; d < part.devices.size(); ++d) {
    if (std::all_of(p.nodes.begin(), p.nodes.end(), [&](const auto& n) { return n.cost_ms[d] != kUnsupported; })) {
      candidates.emplace_back(p.nodes.size(), static_cast<int>(d));
    }
  }
  double best = kUnsupported;
  for (const auto& device : candidates) {
    bool allowed = true;  // within the pins and the preference
    for (std::size_t i = 0; i < device.size(); ++i) allowed = allowed && p.nodes[i].cost_ms[static_cast<std::size_t>(device[i])] != kUnsupported;
    double ms = kUnsupported;
    if (allowed) {
      const std::vector<Segment> cut = cut_model(part.analysis, device);
      if (options.use_analysis_times) time_segments(part, cut, tried);
      ms = cut_latency_ms(part, cut);
    }
    if (ms < best - 1e-12) {
      best = ms;
      if (device != part.placement.device) {
        part.placement = Placement{device, 0, 0, false};
      }
    }
  }
}

}  // namespace

Partition partition_analysis(ModelAnalysis analysis, const PartitionOptions& options) {
  RW_EXPECTS(!options.devices.empty() && options.devices[0] == "cpu", InvalidArgument,
             "partition: the first device must be the host, 'cpu' (given: {})", fmt::join(options.devices, ", "));
  Partition part;
  part.analysis = std::move(analysis);
  part.devices = options.devices;
  part.objective = options.objective;
  part.profiles = device_profiles(options);
  keep_what_is_known(part, options);
  CostModel costs(part.profiles, options.precision, options.history, options.device_options);
  ask_devices(part, costs, options);
  state_problem(part, costs, options);
  place(part, options);
  std::set<std::string> tried;  // the segments timed while planning (time_segments)
  if (options.objective == PartitionOptions::Objective::kLatency) choose_cut_as_run(part, options, tried);
  const PlacementProblem& p = part.problem;
  fill_objectives(p, part.heft);
  fill_objectives(p, part.placement);
  fill_objectives(p, part.placer);
  if (part.optimum) fill_objectives(p, *part.optimum);
  part.segments = cut_model(part.analysis, part.placement.device);
  if (options.use_analysis_times) time_segments(part, part.segments, tried);
  set_host_threads(part, part.segments);
  return part;
}

}  // namespace redwood::runtime
