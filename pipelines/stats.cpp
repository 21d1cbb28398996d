#include "pipelines/stats.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace redwood {

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::clamp<std::size_t>(rank, 1, v.size()) - 1];
}

std::string status_line(const PipelineStats& now, const PipelineStats& previous) {
  const double window = std::max(1e-3, now.elapsed_s - previous.elapsed_s);
  std::string line = fmt::format("[{:7.1f}s]", now.elapsed_s);
  for (std::size_t i = 0; i < now.streams.size(); ++i) {
    const StreamStats& s = now.streams[i];
    const std::int64_t before = i < previous.streams.size() ? previous.streams[i].delivered : 0;
    const std::size_t from = i < previous.streams.size() ? previous.streams[i].latencies_ms.size() : 0;
    const std::vector<double> recent(s.latencies_ms.begin() + static_cast<std::ptrdiff_t>(std::min(from, s.latencies_ms.size())),
                                     s.latencies_ms.end());
    line += fmt::format("{} {}: {} frames {:.1f} fps p50 {:.0f} ms p99 {:.0f} ms drops {}", i ? " |" : "", s.name,
                        s.delivered, static_cast<double>(s.delivered - before) / window, percentile(recent, 50),
                        percentile(recent, 99), s.dropped);
    if (s.reconnects) line += fmt::format(" reconnects {} outage {:.1f} s", s.reconnects, s.outage_ms / 1000.0);
  }
  return line;
}

std::string summary_text(const PipelineStats& st) {
  std::string out = fmt::format("summary: {:.1f} s\n", st.elapsed_s);
  for (const StreamStats& s : st.streams) {
    out += fmt::format("  stream {}: read {}, delivered {}, dropped {}, {:.2f} fps, latency p50 {:.1f} ms p99 {:.1f} ms, "
                       "max in flight {}{}\n",
                       s.name, s.read, s.delivered, s.dropped, st.elapsed_s > 0 ? s.delivered / st.elapsed_s : 0.0,
                       percentile(s.latencies_ms, 50), percentile(s.latencies_ms, 99), s.max_in_flight,
                       s.reconnects ? fmt::format(", reconnects {}, outage {:.2f} s", s.reconnects, s.outage_ms / 1000.0)
                                    : std::string());
  }
  for (const SinkStats& s : st.sinks) out += fmt::format("  sink {}: written {}, dropped {}\n", s.name, s.written, s.dropped);
  const auto& m = st.memory;
  out += fmt::format("  frame pool: {} frame object(s), {} allocations, in use {}, high water {}, reserved {}, system allocations {} (freed {}){}\n",
                     st.frames_created, m.pool.allocations, memory::format_bytes(m.pool.bytes_in_use), memory::format_bytes(m.pool.high_water_bytes),
                     memory::format_bytes(m.pool.reserved_bytes), m.pool.upstream_allocations, m.pool.upstream_deallocations,
                     m.fallbacks ? fmt::format(", {} buffer(s) from the heap (pool full)", m.fallbacks) : std::string());
  return out;
}

}  // namespace redwood
