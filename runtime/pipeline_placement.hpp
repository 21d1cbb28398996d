#pragma once
// Pipeline placement: where each `device: auto` model of a pipeline runs and at what batch size,
// chosen together for the pipeline's throughput under a latency limit. The problem is stated on
// cost tables alone (pipelines/pipeline_planner.hpp builds them from the partitioner), so that it
// is solved and tested the same wherever the costs come from.
//
//   resources  the CPU (its cores as one capacity), the GPU, and each copy direction (host -> GPU,
//              GPU -> host: one copy engine each). CPU inference occupies every core of the arena
//              for its wall time (oneDNN), so a CPU batch's busy time on the CPU is its wall time.
//   fixed load per resource, what the pipeline's other stages take a frame (the CPU stages' core-ms
//              a frame divided by the cores), and their time along the path a frame (latency)
//   models     each with its rows a frame (1 for a model fed once per frame; crops: several) and
//              options: a placement (whole on the CPU, whole on the GPU, the partitioner's split)
//              at a batch size, each with its busy time a batch on every resource and the time one
//              batch takes alone
//
// A choice (one option per model) loads each resource, per frame, with
//   load[r] = fixed[r] + sum over models of rows_per_frame / rows_per_batch * busy[r]   (ms a frame)
// and at `frames_per_s` (every stream's frames together) its utilization is
//   u[r] = frames_per_s * load[r] / 1000.
// The objective is the least peak load (equivalently the least peak utilization: the most
// headroom); the pipeline sustains 1000 / peak load frames a second. Ties go to the shorter
// latency.
//
// The latency model (a bound on a frame's time through the path, taken as its p99):
//   per model   fill + batch / (1 - u)
//     fill      the wait for the rest of a batch: (rows_per_batch - rows_per_frame) rows at
//               frames_per_s * rows_per_frame rows a second, capped by the stage's timeout
//     batch     the option's time for one batch alone
//     u         the utilization of the busiest resource the option uses (queueing behind the
//               other models' batches); u >= 1: unbounded
//   the path    the sum over the models, plus the other stages' time a frame
// With no pace (files read as fast as they go: frames_per_s 0) the pipeline runs at its
// bottleneck: a batch fills at the sustainable rate and queueing is bounded by the frames in
// flight, not by 1 / (1 - u), so a model's latency is fill + batch.
//
// The search: every combination when there are at most `exhaustive_limit` (exact; real pipelines
// have a few models), else a local search from the baseline: the best change of one model's
// option, else of two models' together, while the choice gets better. The baseline is what each
// model gets placed alone, for the latency of its own batch: at its largest batch (the stage's
// max_batch), the option of the least batch time.

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace redwood::runtime {

enum PipelineResource : int { kCpuCores = 0, kGpu = 1, kHostToGpu = 2, kGpuToHost = 3, kPipelineResources = 4 };
/// "cpu", "gpu", "host->gpu", "gpu->host".
const char* pipeline_resource_name(int resource);

using ResourceTimes = std::array<double, kPipelineResources>;

struct PipelineOption {
  std::string placement;  // "cpu", "cuda" (whole) or "split"
  double rows = 1;        // rows a batch
  int frames = 1;         // frames a batch (rows / rows_per_frame, as the stage counts its batch)
  ResourceTimes busy_ms{};  // per batch, on each resource
  double batch_ms = 0;    // one batch alone
  bool measured = false;  // batch_ms from batch times runs measured (the cost history), not node costs
};

/// A batch's time against its rows, through `points` (rows, ms): between two points the line
/// c(r) = f + slope * r through them; outside, the line through the nearest two, its slope at
/// least 0 and its time at least 0 (a launch does not get cheaper with rows); one point: that time.
struct RowsCurve {
  std::vector<std::pair<double, double>> points;  // by rows, ascending, distinct
  /// Adds (rows, ms), replacing a point at the same rows.
  void add(double rows, double ms);
  double at(double rows) const;
  bool empty() const { return points.empty(); }
};

struct PipelineModel {
  std::string name;
  double rows_per_frame = 1;
  double timeout_ms = 0;  // how long the stage lets a partial batch wait
  std::vector<PipelineOption> options;
};

struct PipelineProblem {
  double frames_per_s = 0;       // every stream's frames together; 0: unpaced (throughput alone)
  ResourceTimes fixed_ms{};      // the other stages' load a frame on each resource
  double fixed_latency_ms = 0;   // the other stages' time along the path a frame
  double latency_limit_ms = 0;   // on the path (0: none)
  std::vector<PipelineModel> models;
  std::uint64_t exhaustive_limit = 1u << 20;

  /// Throws InvalidArgument naming what is wrong: a model with no option (by name), a negative
  /// time, a batch of no rows, rows a frame not above 0, a negative rate or limit.
  void validate() const;
};

/// One option per model and what it gives.
struct PipelineChoice {
  std::vector<int> option;      // per model, an index into its options
  ResourceTimes load_ms{};      // per frame on each resource
  ResourceTimes utilization{};  // at frames_per_s (unpaced: at the sustainable rate, the peak 1)
  double peak_load_ms = 0;      // the busiest resource's load a frame
  int bottleneck = 0;           // that resource
  double peak_utilization = 0;  // paced: > 1 is overloaded
  double sustainable_fps = 0;   // 1000 / peak_load_ms
  std::vector<double> model_latency_ms;
  double latency_ms = 0;        // the path (infinite when a resource it uses is overloaded)
  bool overloaded = false;      // paced, and peak_utilization > 1: the demand is peak_utilization x what it carries
  bool meets_limit = true;
};

struct PipelinePlacementResult {
  PipelineChoice best;
  PipelineChoice alone;     // the baseline: each model placed alone for its batch's latency
  bool exact = false;       // every combination tried
  std::uint64_t evaluated = 0;
  std::string method;       // "exhaustive" or "local search"
};

/// What `option` (one index per model) gives on `problem` (validated).
PipelineChoice evaluate_pipeline(const PipelineProblem& problem, const std::vector<int>& option);

/// The choice with the least peak load among those within the latency limit. When none is within
/// it, the least-bad: the shortest latency among the choices that are not overloaded, else the
/// least peak load (overloaded says by how much).
PipelinePlacementResult place_pipeline(const PipelineProblem& problem);

/// The baseline's option per model (each alone at its largest batch, the least batch time).
std::vector<int> placed_alone(const PipelineProblem& problem);

/// "cpu 42 %, gpu 71 %, host->gpu 3 %, gpu->host 1 %".
std::string utilization_text(const PipelineChoice& choice);

}  // namespace redwood::runtime
