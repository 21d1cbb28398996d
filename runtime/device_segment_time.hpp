#pragma once
// An accelerator's segment of a split timed on its device while the split is planned. Its nodes'
// times were measured inside other segments (record_node_times scales them to add up to the
// segment they ran in), so a new cut's short segment, a few kernels, is off by what its own
// launch, its boundary and its device's passes at that cut add: 0.01-0.04 ms, 20-50 % of a segment
// under 0.1 ms on the H200. The device is at hand while planning, so each accelerator segment of a
// cut the planner compares is run by the runner the split will give it, and timed.

#include "core/model_runner.hpp"
#include "runtime/cut_model.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <vector>
#include <string>

namespace redwood::runtime {

/// Whether this process can time segments on `device`: a device runner the registry has (not the
/// host, not a device known only by an injected supports()) and that is usable here.
bool can_time_on(const std::string& device);

/// Accelerator segment `segment` of a cut of `analysis` run by `device`'s runner (`config`: its
/// precision, GPU and options) on sample values of its inputs' shapes in the device's page-locked
/// memory, one batch at a time, as the split runner runs it: `warmup` batches, then `runs` timed.
/// The median batch's compute time as the runner records it (RunnerStats::compute_ms), which is
/// what measure_partition reports for the segment; std::nullopt (logged) when the runner cannot
/// be made or fails, which the split's runner will then report.
std::optional<double> time_device_segment(const ModelAnalysis& analysis, const Segment& segment, const std::string& device,
                                          const RunnerConfig& config, int runs = 10, int warmup = 2);

/// The same at each of `rows` (batches whose inputs have that many rows where the analysis's have
/// its first input's rows), by one runner prepared at each in turn: what a pipeline's batches,
/// formed by timing, meet below the rows it was analysed at. Rows the runner fails at are left
/// out (logged); none at all where it cannot be made.
std::map<std::int64_t, double> time_device_segment_at_rows(const ModelAnalysis& analysis, const Segment& segment,
                                                            const std::string& device, const RunnerConfig& config,
                                                            const std::vector<std::int64_t>& rows, int runs = 10,
                                                            int warmup = 2);

}  // namespace redwood::runtime
