#include "runtime/partition_rows.hpp"

#include "core/error.hpp"
#include "runtime/device_segment_time.hpp"
#include "runtime/partition_profile.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

namespace redwood::runtime {

std::vector<TensorDesc> at_batch(std::vector<TensorDesc> descs, std::int64_t from, std::int64_t to) {
  for (TensorDesc& d : descs) {
    if (!d.shape.empty() && d.shape[0] == from) {
      d.shape[0] = to;
      d.host = nullptr;
    }
  }
  return descs;
}

std::int64_t analysed_rows(const ModelAnalysis& analysis) {
  const std::vector<Shape>& shapes = analysis.input_shapes;
  return shapes.empty() || shapes[0].empty() ? 0 : std::max<std::int64_t>(0, shapes[0][0]);
}

std::int64_t analysed_rows(const Partition& partition) { return analysed_rows(partition.analysis); }

PlacementProblem problem_at_rows(const Partition& part, double rows, const CostHistory* history) {
  PlacementProblem p = part.problem;
  const std::int64_t from = analysed_rows(part);
  if (from == 0) return p;
  const double s = rows / static_cast<double>(from);
  const Graph& g = *part.analysis.graph;
  const auto whole = static_cast<std::int64_t>(std::llround(rows));
  const bool look_up = history != nullptr && whole != from && static_cast<double>(whole) == rows;
  std::vector<std::string> precision;  // each device's in the history's keys
  for (std::size_t d = 0; look_up && d < part.profiles.size(); ++d) {
    precision.push_back(cost_precision(static_cast<int>(d), part.precision, part.device_options));
  }
  for (std::size_t i = 0; i < p.nodes.size(); ++i) {
    PlacementProblem::Node& n = p.nodes[i];
    const std::size_t node = part.analysis.placeable[i];
    const auto ins = look_up ? at_batch(part.analysis.input_descs(node), from, whole) : std::vector<TensorDesc>{};
    const auto outs = look_up ? at_batch(part.analysis.output_descs(node), from, whole) : std::vector<TensorDesc>{};
    for (std::size_t d = 0; d < n.cost_ms.size(); ++d) {
      double& c = n.cost_ms[d];
      if (!std::isfinite(c)) continue;
      if (look_up) {
        const auto key = CostHistory::key(part.profiles[d], precision[d], g.nodes[node], ins, outs);
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

std::vector<RowsCurve> segment_curves(const Partition& part, const CostHistory* history) {
  const std::vector<double> at_analysed = predicted_segment_ms(part);
  const std::int64_t from = analysed_rows(part);
  std::vector<RowsCurve> out(part.segments.size());
  if (from == 0) {
    for (std::size_t k = 0; k < out.size(); ++k) out[k].add(1, at_analysed[k]);
    return out;
  }
  // Each analysis node's index among the placed ones (the problem's), or -1: shape arithmetic.
  std::vector<long> placed(part.analysis.graph->nodes.size(), -1);
  for (std::size_t i = 0; i < part.analysis.placeable.size(); ++i) placed[part.analysis.placeable[i]] = static_cast<long>(i);
  // A segment's nodes and its device's segment cost in `p`.
  const auto from_nodes = [&](const PlacementProblem& p, const Segment& s) {
    const auto d = static_cast<std::size_t>(s.device);
    double ms = d < part.segment_ms.size() ? part.segment_ms[d] : 0.0;
    for (std::size_t n : s.nodes) {
      if (placed[n] >= 0) ms += p.nodes[static_cast<std::size_t>(placed[n])].cost_ms[d];
    }
    return ms;
  };
  std::vector<double> base;
  for (const Segment& s : part.segments) base.push_back(from_nodes(part.problem, s));
  std::vector<std::int64_t> rows;
  for (std::int64_t r = 1; r < from; r *= 2) rows.push_back(r);
  for (std::int64_t r : rows) {
    const PlacementProblem p = problem_at_rows(part, static_cast<double>(r), history);
    for (std::size_t k = 0; k < out.size(); ++k) {
      const double scale = base[k] > 0 ? from_nodes(p, part.segments[k]) / base[k] : 1.0;
      out[k].add(static_cast<double>(r), at_analysed[k] * scale);
    }
  }
  for (std::size_t k = 0; k < out.size(); ++k) out[k].add(static_cast<double>(from), at_analysed[k]);
  return with_measured_rows(part, std::move(out), history);
}

namespace {

// `ratios` (rows, measured / predicted), ascending and not empty, at `rows`: between two, along the
// line through them; beyond the ends, the end's.
double ratio_at(const std::vector<std::pair<double, double>>& ratios, double rows) {
  if (rows <= ratios.front().first) return ratios.front().second;
  if (rows >= ratios.back().first) return ratios.back().second;
  const auto hi = std::lower_bound(ratios.begin(), ratios.end(), rows, [](const auto& p, double r) { return p.first < r; });
  const auto lo = std::prev(hi);
  return lo->second + (hi->second - lo->second) * (rows - lo->first) / (hi->first - lo->first);
}

}  // namespace

void time_segments_at_rows(Partition& part, const std::vector<std::int64_t>& rows) {
  const std::int64_t from = analysed_rows(part);
  std::vector<std::int64_t> below;
  for (const std::int64_t r : rows) {
    if (r > 0 && r < from && std::find(below.begin(), below.end(), r) == below.end()) below.push_back(r);
  }
  if (below.empty() || part.segments.size() < 2) return;
  for (const Segment& s : part.segments) {
    if (s.device == 0) continue;
    std::string key = part.cut_key(s);
    // Not timed while planning: nor here; the same work in another segment: timed once.
    if (part.device_times.count(key) == 0 || part.device_row_times.count(key) != 0) continue;
    const auto start = std::chrono::steady_clock::now();
    auto times = time_device_segment_at_rows(part.analysis, s, part.devices[static_cast<std::size_t>(s.device)],
                                             part.segment_timing_config(), below);
    part.timing_spent.device_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!times.empty()) part.device_row_times[std::move(key)] = std::move(times);
  }
}

std::vector<RowsCurve> with_measured_rows(const Partition& part, std::vector<RowsCurve> curves, const CostHistory* history) {
  if ((history == nullptr && part.device_row_times.empty()) || part.profiles.empty() || part.segments.size() < 2) {
    return curves;
  }
  const std::int64_t from = analysed_rows(part);
  for (std::size_t k = 0; k < curves.size() && k < part.segments.size(); ++k) {
    const Partition::SegmentKeys keys = part.segment_keys(part.segments[k]);
    std::map<std::int64_t, double> measured;  // timed while planning, then measured in runs over those
    if (const auto it = part.device_row_times.find(keys.cut); it != part.device_row_times.end()) measured = it->second;
    if (history != nullptr) {
      for (const auto& [rows, ms] : history->segment_rows_times(keys.ran)) measured[rows] = ms;
    }
    if (measured.empty() || curves[k].empty()) continue;
    // Each measured time over the curve's prediction there: how far the prediction missed at those
    // rows. The analysed rows' point stays: it is what the placement was chosen on, timed while
    // planning or measured before.
    std::vector<std::pair<double, double>> ratios;
    for (const auto& [rows, ms] : measured) {
      const double predicted = curves[k].at(static_cast<double>(rows));
      if (predicted > 0) ratios.emplace_back(static_cast<double>(rows), ms / predicted);
    }
    if (from > 0 && measured.count(from) == 0) {
      ratios.emplace_back(static_cast<double>(from), 1.0);
      std::sort(ratios.begin(), ratios.end());
    }
    if (ratios.empty()) continue;
    RowsCurve anchored;
    for (const auto& [rows, ms] : curves[k].points) anchored.add(rows, ms * ratio_at(ratios, rows));
    for (const auto& [rows, ms] : measured) anchored.add(static_cast<double>(rows), ms);
    curves[k] = std::move(anchored);
  }
  return curves;
}

double split_latency_at_rows(const Partition& part, const std::vector<RowsCurve>& curves, double rows,
                             std::optional<double> handover_ms) {
  RW_EXPECTS(curves.size() == part.segments.size(), InvalidArgument, "a split of {} segment(s) with {} curve(s) against rows",
             part.segments.size(), curves.size());
  const std::int64_t from = analysed_rows(part);
  SplitCosts costs = part.split_costs();
  costs.bytes_scale = from > 0 ? rows / static_cast<double>(from) : 1.0;
  if (handover_ms) costs.handover_ms = *handover_ms;
  // split_latency_ms asks for each of part.segments itself, in turn.
  costs.measured = [&](const Segment& s, double) -> std::optional<double> {
    for (std::size_t k = 0; k < part.segments.size(); ++k) {
      if (&part.segments[k] == &s) return curves[k].at(rows);
    }
    return std::nullopt;
  };
  return split_latency_ms(part.analysis, part.problem, part.segments, costs);
}

}  // namespace redwood::runtime
