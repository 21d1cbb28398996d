#include "runtime/pipeline_placement.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace redwood::runtime {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
// Loads and latencies within this (relative) are equal: the shorter latency or the first found wins.
constexpr double kTie = 1e-9;

bool less(double a, double b) { return a < b - kTie * std::max(std::abs(a), std::abs(b)); }

// Whether choice a is better than b (place_pipeline's order).
bool better(const PipelineChoice& a, const PipelineChoice& b) {
  if (a.meets_limit != b.meets_limit) return a.meets_limit;
  if (!a.meets_limit && a.overloaded != b.overloaded) return !a.overloaded;
  const bool latency_first = !a.meets_limit && !a.overloaded;
  const auto key = [&](const PipelineChoice& c) {
    return latency_first ? std::pair{c.latency_ms, c.peak_load_ms} : std::pair{c.peak_load_ms, c.latency_ms};
  };
  const auto [a1, a2] = key(a);
  const auto [b1, b2] = key(b);
  if (less(a1, b1)) return true;
  if (less(b1, a1)) return false;
  return less(a2, b2);
}

std::uint64_t combinations(const PipelineProblem& p) {
  std::uint64_t n = 1;
  for (const auto& m : p.models) {
    const std::uint64_t k = m.options.size();
    if (n > std::numeric_limits<std::uint64_t>::max() / k) return std::numeric_limits<std::uint64_t>::max();
    n *= k;
  }
  return n;
}

}  // namespace

void RowsCurve::add(double rows, double ms) {
  const auto it = std::lower_bound(points.begin(), points.end(), rows, [](const auto& p, double r) { return p.first < r; });
  if (it != points.end() && it->first == rows) {
    it->second = ms;
  } else {
    points.insert(it, {rows, ms});
  }
}

double RowsCurve::at(double rows) const {
  if (points.empty()) return 0;
  if (points.size() == 1) return points[0].second;
  // The piece that holds `rows`, else the nearest one.
  auto hi = std::lower_bound(points.begin(), points.end(), rows, [](const auto& p, double r) { return p.first < r; });
  if (hi != points.end() && hi->first == rows) return hi->second;
  const bool inside = hi != points.begin() && hi != points.end();
  if (hi == points.begin()) ++hi;
  if (hi == points.end()) --hi;
  const auto lo = std::prev(hi);
  double slope = (hi->second - lo->second) / (hi->first - lo->first);
  if (!inside) slope = std::max(0.0, slope);
  const auto& from = rows < lo->first ? *lo : rows > hi->first ? *hi : *lo;
  return std::max(0.0, from.second + slope * (rows - from.first));
}

const char* pipeline_resource_name(int resource) {
  static const char* const names[] = {"cpu", "gpu", "host->gpu", "gpu->host"};
  return resource >= 0 && resource < kPipelineResources ? names[resource] : "?";
}

void PipelineProblem::validate() const {
  RW_EXPECTS(frames_per_s >= 0 && std::isfinite(frames_per_s), InvalidArgument,
             "pipeline placement: frames_per_s must be >= 0 (0: unpaced), not {}", frames_per_s);
  RW_EXPECTS(latency_limit_ms >= 0, InvalidArgument, "pipeline placement: latency limit must be >= 0 (0: none), not {}",
             latency_limit_ms);
  RW_EXPECTS(fixed_latency_ms >= 0, InvalidArgument, "pipeline placement: the other stages' latency must be >= 0, not {}",
             fixed_latency_ms);
  for (int r = 0; r < kPipelineResources; ++r) {
    RW_EXPECTS(fixed_ms[r] >= 0, InvalidArgument, "pipeline placement: fixed load on {} must be >= 0, not {}",
               pipeline_resource_name(r), fixed_ms[r]);
  }
  RW_EXPECTS(!models.empty(), InvalidArgument, "pipeline placement: no model to place");
  for (const PipelineModel& m : models) {
    RW_EXPECTS(!m.options.empty(), InvalidArgument, "pipeline placement: model '{}' has no option (no placement at any batch size)",
               m.name);
    RW_EXPECTS(m.rows_per_frame > 0, InvalidArgument, "pipeline placement: model '{}': rows a frame must be above 0, not {}",
               m.name, m.rows_per_frame);
    RW_EXPECTS(m.timeout_ms >= 0, InvalidArgument, "pipeline placement: model '{}': timeout must be >= 0, not {}", m.name,
               m.timeout_ms);
    for (const PipelineOption& o : m.options) {
      RW_EXPECTS(o.rows > 0 && o.frames >= 1, InvalidArgument,
                 "pipeline placement: model '{}': option '{}' has a batch of {} rows, {} frames (at least 1 of each)", m.name,
                 o.placement, o.rows, o.frames);
      RW_EXPECTS(o.batch_ms >= 0, InvalidArgument, "pipeline placement: model '{}': option '{}' at {} rows: negative batch time",
                 m.name, o.placement, o.rows);
      for (int r = 0; r < kPipelineResources; ++r) {
        RW_EXPECTS(o.busy_ms[r] >= 0, InvalidArgument,
                   "pipeline placement: model '{}': option '{}' at {} rows: negative busy time on {}", m.name, o.placement,
                   o.rows, pipeline_resource_name(r));
      }
    }
  }
}

PipelineChoice evaluate_pipeline(const PipelineProblem& p, const std::vector<int>& option) {
  p.validate();
  RW_EXPECTS(option.size() == p.models.size(), InvalidArgument, "pipeline placement: {} options for {} models", option.size(),
             p.models.size());
  PipelineChoice c;
  c.option = option;
  c.load_ms = p.fixed_ms;
  std::vector<const PipelineOption*> chosen;
  for (std::size_t m = 0; m < p.models.size(); ++m) {
    const PipelineModel& model = p.models[m];
    RW_EXPECTS(option[m] >= 0 && static_cast<std::size_t>(option[m]) < model.options.size(), InvalidArgument,
               "pipeline placement: model '{}' has no option {}", model.name, option[m]);
    const PipelineOption& o = model.options[static_cast<std::size_t>(option[m])];
    chosen.push_back(&o);
    for (int r = 0; r < kPipelineResources; ++r) c.load_ms[r] += model.rows_per_frame / o.rows * o.busy_ms[r];
  }
  c.bottleneck = static_cast<int>(std::max_element(c.load_ms.begin(), c.load_ms.end()) - c.load_ms.begin());
  c.peak_load_ms = c.load_ms[c.bottleneck];
  c.sustainable_fps = c.peak_load_ms > 0 ? 1000.0 / c.peak_load_ms : kInfinity;
  const bool paced = p.frames_per_s > 0;
  // Unpaced, the pipeline runs at its sustainable rate.
  const double fps = paced ? p.frames_per_s : c.sustainable_fps;
  for (int r = 0; r < kPipelineResources; ++r) {
    c.utilization[r] = paced ? p.frames_per_s * c.load_ms[r] / 1000.0 : (c.peak_load_ms > 0 ? c.load_ms[r] / c.peak_load_ms : 0.0);
  }
  c.peak_utilization = c.utilization[c.bottleneck];
  c.overloaded = paced && c.peak_utilization > 1;
  c.latency_ms = p.fixed_latency_ms;
  for (std::size_t m = 0; m < p.models.size(); ++m) {
    const PipelineModel& model = p.models[m];
    const PipelineOption& o = *chosen[m];
    const double rows_per_s = fps * model.rows_per_frame;
    const double missing = std::max(0.0, o.rows - model.rows_per_frame);
    const double fill = missing > 0 ? std::min(model.timeout_ms, std::isfinite(rows_per_s) && rows_per_s > 0 ? 1000.0 * missing / rows_per_s : 0.0)
                                    : 0.0;
    double u = 0;
    for (int r = 0; r < kPipelineResources; ++r) {
      if (o.busy_ms[r] > 0) u = std::max(u, c.utilization[r]);
    }
    double ms = fill + o.batch_ms;
    if (paced) ms = u < 1 ? fill + o.batch_ms / (1 - u) : kInfinity;
    c.model_latency_ms.push_back(ms);
    c.latency_ms += ms;
  }
  c.meets_limit = p.latency_limit_ms <= 0 || c.latency_ms <= p.latency_limit_ms;
  return c;
}

std::vector<int> placed_alone(const PipelineProblem& p) {
  p.validate();
  std::vector<int> option;
  for (const PipelineModel& m : p.models) {
    double most = 0;
    for (const auto& o : m.options) most = std::max(most, o.rows);
    int best = -1;
    for (std::size_t k = 0; k < m.options.size(); ++k) {
      const PipelineOption& o = m.options[k];
      if (o.rows == most && (best < 0 || less(o.batch_ms, m.options[static_cast<std::size_t>(best)].batch_ms))) {
        best = static_cast<int>(k);
      }
    }
    option.push_back(best);
  }
  return option;
}

PipelinePlacementResult place_pipeline(const PipelineProblem& p) {
  PipelinePlacementResult out;
  out.alone = evaluate_pipeline(p, placed_alone(p));
  out.best = out.alone;
  out.evaluated = 1;
  const std::uint64_t total = combinations(p);
  if (total <= p.exhaustive_limit) {
    out.exact = true;
    out.method = "exhaustive";
    std::vector<int> option(p.models.size(), 0);
    for (std::uint64_t n = 0; n < total; ++n) {
      const PipelineChoice c = evaluate_pipeline(p, option);
      ++out.evaluated;
      if (better(c, out.best)) out.best = c;
      for (std::size_t m = 0; m < option.size(); ++m) {  // the next combination, as an odometer
        if (++option[m] < static_cast<int>(p.models[m].options.size())) break;
        option[m] = 0;
      }
    }
    return out;
  }
  // Local search: the best change of one model's option, else of two models' together (a model
  // leaving the bottleneck may only pay once another makes room elsewhere), while one improves.
  out.method = "local search";
  const auto step = [&](std::size_t group) {
    PipelineChoice round = out.best;
    const std::size_t n = p.models.size();
    for (std::size_t a = 0; a < n; ++a) {
      for (std::size_t b = group == 1 ? a : a + 1; b < n; ++b) {
        std::vector<int> option = out.best.option;
        const int ka_end = static_cast<int>(p.models[a].options.size());
        const int kb_end = group == 1 ? 1 : static_cast<int>(p.models[b].options.size());
        for (int ka = 0; ka < ka_end; ++ka) {
          for (int kb = 0; kb < kb_end; ++kb) {
            option[a] = ka;
            if (group == 2) option[b] = kb;
            if (option == out.best.option) continue;
            const PipelineChoice c = evaluate_pipeline(p, option);
            ++out.evaluated;
            if (better(c, round)) round = c;
          }
        }
      }
    }
    if (!better(round, out.best)) return false;
    out.best = std::move(round);
    return true;
  };
  while (step(1) || step(2)) {
  }
  return out;
}

std::string utilization_text(const PipelineChoice& c) {
  std::string out;
  for (int r = 0; r < kPipelineResources; ++r) {
    out += fmt::format("{}{} {:.0f} %", r ? ", " : "", pipeline_resource_name(r), 100.0 * c.utilization[r]);
  }
  return out;
}

}  // namespace redwood::runtime
