#pragma once
// The partitioner: which device runs each node of a model, and the model cut into single-device
// subgraphs with explicit transfers between them.
//
//   Graph ─device-neutral passes─► analysis ─supports, costs─► PlacementProblem ─placer─► Placement
//                                  one run on zeros on the CPU:     (runtime/placement.hpp)      │
//                                  every value's dtype and shape,                       cut_model│
//                                  the shape arithmetic found                                    ▼
//                                                                         segments: subgraphs, each on one device
//
// The analysis (runtime/model_analysis.hpp) leaves shape arithmetic out of the placement; the
// cut (runtime/cut_model.hpp) makes the segments a split runner runs.

#include "core/graph/graph.hpp"
#include "core/kernel_info.hpp"
#include "core/model_runner.hpp"
#include "core/passes/pass_manager.hpp"
#include "runtime/cost_model.hpp"
#include "runtime/cut_model.hpp"
#include "runtime/model_analysis.hpp"
#include "runtime/placement.hpp"

#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace redwood::runtime {

struct Partition;

/// "" when `device` runs the node at these inputs, else why not.
using SupportFn = std::function<std::string(const Graph& graph, const Node& node, const std::vector<TensorDesc>& inputs)>;

struct PartitionOptions {
  /// The devices to place on; the first is the host ("cpu"). Others are device runner names
  /// ("cuda"), whose supports() the registry answers unless `supports` has them.
  std::vector<std::string> devices = {"cpu", "cuda"};
  std::string precision = "fp32";
  /// The accelerators' runners' own switches and GPU (RunnerConfig::device_options, e.g. CUDA's
  /// `wgmma: off`, and RunnerConfig::device): their segments are timed with them while planning,
  /// as the split's runners run them.
  std::map<std::string, std::string> device_options;
  int device_index = 0;
  enum class Objective { kLatency, kThroughput };
  /// kLatency: the shortest batch (HEFT and local search); kThroughput: the least busy bottleneck
  /// between batches (the ILP, HEFT where it finds nothing in time).
  Objective objective = Objective::kLatency;
  /// Node name -> device name: the node runs there whatever it costs (an error if it cannot).
  std::map<std::string, std::string> pinned;
  /// A device name, or empty: every node this device can run goes there whatever the costs say
  /// (`device: cuda` in a pipeline: the GPU runs what it can, the host the rest).
  std::string prefer;
  /// Per device; empty: runtime::device_profile() of each ("cuda" is "cuda:<device_index>").
  std::vector<DeviceProfile> profiles;
  /// Measured node times (may be null): used before the roofline, and to calibrate it.
  const CostHistory* history = nullptr;
  /// Per device name, overriding the registry's answer (tests; devices the registry lacks).
  std::map<std::string, SupportFn> supports;
  /// The analysis run's CPU times count as measured CPU costs (and calibrate its roofline), and
  /// the segments of the cuts compared are timed: the host's on this host (time_host_segment),
  /// each at the thread count it runs best on (choose_host_threads) unless one was chosen before;
  /// an accelerator's on its device (time_device_segment) where this process can run it
  /// (can_time_on), else its nodes' costs stand for it.
  bool use_analysis_times = true;
  double ilp_time_limit_s = 5;
  /// The exact reference (exhaustive search for the objective) runs when there are at most this
  /// many placements to try.
  std::uint64_t exhaustive_limit = 1ull << 20;
  /// A partition made before in this process (may be null): the segments it timed alone and the
  /// thread counts it chose are kept, not timed again (`redwood plan --profile` places twice,
  /// before and after measuring its node times). A segment's timing does not depend on the node
  /// costs, and its cut key names its nodes' work, shapes, edges, device and precision.
  const Partition* timed_before = nullptr;
};

/// A segment's time as measured before, if it was. `host_idle_ms`: for a host segment, how long the
/// host's kernels were idle before it in the batch (split_latency_ms); a host segment's time
/// depends on it (kShortIdleMs).
using MeasuredSegmentFn = std::function<std::optional<double>(const Segment& segment, double host_idle_ms)>;
/// An idle time past any that matters (an accelerator's segment; a timing with no idle given).
inline constexpr double kLongIdle = std::numeric_limits<double>::infinity();

/// What a cut costs beyond its placed nodes (split_latency_ms).
struct SplitCosts {
  /// Per device (may be empty): what a segment costs there beyond its nodes.
  std::vector<double> segment_ms;
  /// The host's memory bandwidth (bytes read + written; 0: free) at which a host segment converts
  /// the values crossing its edges: the analysis timed its nodes inside the whole model, where
  /// oneDNN kept its blocked layouts between them, while a segment takes its inputs plain from the
  /// accelerator and writes its outputs plain (a read and a write of each). Graph inputs and
  /// outputs are not counted: the whole model converted them too.
  double host_layout_gbps = 0;
  /// Per segment of a batch: what passes between its inputs being ready and its runner starting
  /// it, and after it ends (the split runner's hand-over to the segment's runner, the runner's
  /// staging and completion), beyond its compute and its inputs' crossing.
  double handover_ms = 0;
  /// May be empty: a segment's compute as measured before, which then stands for its nodes, its
  /// segment cost and its edges' layouts.
  MeasuredSegmentFn measured;
  /// The crossing values' bytes over the analysis's: r / R for a batch of r rows of a model
  /// analysed at R (partition_rows.hpp).
  double bytes_scale = 1;
};

struct Partition {
  ModelAnalysis analysis;
  std::vector<std::string> devices;
  PlacementProblem problem;                       // its nodes are analysis.placeable
  PlacementProblem open;                          // the same but for `prefer`: where the baselines are placed
  std::vector<std::vector<CostEstimate>> costs;   // [node][device]; kUnsupported where it cannot run
  std::vector<std::vector<std::string>> why_not;  // [node][device]: "" or why the device cannot run it
  std::vector<double> segment_ms;                 // per device: a segment's cost beyond its nodes (learned)
  std::vector<DeviceProfile> profiles;            // per device
  double host_layout_gbps = 0;                    // the host's memory bandwidth (SplitCosts)
  double handover_ms = 0;                         // per segment of a batch (SplitCosts): learned, else
                                                  // the devices' runner round trips (their mean)
  bool handover_learned = false;                  // whether handover_ms came from measured batches
  std::string precision = "fp32";                 // what the accelerators compute in (the CPU: fp32)
  std::map<std::string, std::string> device_options;  // the accelerators' runners' (PartitionOptions)
  int device_index = 0;                           // the accelerator's GPU (PartitionOptions)
  std::map<std::string, double> cut_times;        // segments measured before: ran_key -> ms
  std::map<std::string, double> host_times;       // host segments timed while planning: cut_key -> ms,
                                                  // after a long idle
  std::map<std::string, double> host_woken_times; // the same with their threads woken just before: what
                                                  // a segment meets after a short idle (kShortIdleMs)
  std::map<std::string, double> device_times;     // accelerator segments timed on their device while
                                                  // planning: cut_key -> ms (time_device_segment)
  std::map<std::string, std::map<std::int64_t, double>> device_row_times;  // the same at other rows, for a
                                                  // pipeline's batches: cut_key -> rows -> ms
                                                  // (time_segments_at_rows)
  std::map<std::string, int> host_threads;        // host segments' threads: cut_key -> count, chosen
                                                  // while planning (choose_host_threads) or before
                                                  // (CostHistory::host_threads_key)
  /// What timing segments alone cost this plan (wall time, failed attempts included) and how many
  /// it timed; a segment kept from PartitionOptions::timed_before is not timed again.
  struct TimingSpent {
    int host_segments = 0;
    double host_s = 0;
    int device_segments = 0;
    double device_s = 0;
  } timing_spent;
  Placement placement;                            // the chosen one
  Placement placer;                               // the placer's own (before comparing cuts as run)
  Placement heft;                                 // the baseline list scheduler's
  std::optional<Placement> naive;                 // the first unsupported node and all after it on the host
                                                  // (objectives on `open`)
  std::optional<Placement> optimum;               // the exact reference, when it was computed
  std::vector<Segment> segments;
  PartitionOptions::Objective objective = PartitionOptions::Objective::kLatency;

  /// What its cuts cost beyond their nodes: segment_ms, host_layout_gbps and handover_ms (no
  /// measured segments).
  SplitCosts split_costs() const;
  /// The objective's value of a placement (makespan or bottleneck, milliseconds).
  double objective_ms(const Placement& p) const;
  /// One batch's time under `device` as the split runner runs it (split_latency_ms of its cut, each
  /// segment measured before at its measured time, else each host segment timed while planning
  /// at that time).
  double run_latency_ms(const std::vector<int>& device) const;
  /// `device`'s cut (cut_model) with each host segment on the threads chosen for it while
  /// planning, where one was: what a split runner of that placement runs, as run_latency_ms
  /// predicts it (a baseline measured against the placement runs so).
  std::vector<Segment> cut(const std::vector<int>& device) const;
  /// The key of segment `s`'s work: its nodes' ops, dtypes and shapes and the values crossing its
  /// edges. Segments of the same work share it, as they share its timings alone (host_times,
  /// device_times, ...) and its thread count: timed alone, the same work takes the same time.
  std::string cut_key(const Segment& s) const;
  /// The key segment `s`'s measured times are kept under in the cost history (cut_times, the
  /// times by rows a pipeline's runs record): its cut_key's work and which nodes they are (their
  /// names). Two segments of the same work at different places in a split run at different
  /// speeds (what runs before each, how long the host's threads slept), so each keeps its own.
  std::string ran_key(const Segment& s) const;
  /// Both keys of segment `s`, its nodes' keys made once for the two (where a caller needs both).
  struct SegmentKeys {
    std::string cut;  // cut_key
    std::string ran;  // ran_key
  };
  SegmentKeys segment_keys(const Segment& s) const;
  /// Segment `s`'s time as measured before (cut_times), if it was.
  std::optional<double> measured_segment_ms(const Segment& s) const;
  /// Segment `s`'s time as timed alone while planning, if it was: a host segment's from
  /// host_woken_times where its kernels were idle before it for less than kShortIdleMs
  /// (`host_idle_ms`, as split_latency_ms gives it), else from host_times; an accelerator
  /// segment's from device_times.
  std::optional<double> timed_segment_ms(const Segment& s, double host_idle_ms = kLongIdle) const;
  /// The timing alone that timed_segment_ms gives host segment `s` after `host_idle_ms`, and
  /// whether it is the woken one.
  std::optional<std::pair<double, bool>> host_timing(const Segment& s, double host_idle_ms) const;
  /// Whether every placeable node is on one device (then no split is needed).
  bool single_device() const;
  /// Each placed node's device by name (analysis.placeable's order): what a placement cache keeps
  /// of a split, for partition_as_placed.
  std::vector<std::string> node_devices() const;
  /// The threads of each host segment of a split (Segment::threads), in segment order: what a
  /// placement cache keeps beside node_devices().
  std::vector<int> host_segment_threads() const;
  /// The runner config an accelerator segment is timed with while planning: one batch at a time,
  /// the plan's precision, the model's device options and GPU, as the split's runner runs it, off
  /// the GPU's busy time (RunnerConfig::device_clock).
  RunnerConfig segment_timing_config() const;
  /// Whether it carries costs to predict from (partition_as_placed's cut carries none).
  bool has_costs() const { return !problem.nodes.empty(); }
  /// With single_device(): that device's name ("cpu" for a model with no node to place).
  const std::string& whole_device() const;
  /// The partition as Graphviz: nodes coloured by device, transfers as bold edges.
  std::string dot() const;
};

/// What one batch takes through `segments` as the split runner runs them: a segment starts once
/// every segment it reads from is done and its inputs have crossed, and every value crosses
/// through host memory (an accelerator's result comes back to the host and goes out again, even
/// to a later segment on the same device); the model's outputs end on the host. Per segment, its
/// compute (its placed nodes' costs on its device, from `problem`, and what `costs` adds) and its
/// inputs' crossing time go to `compute` and `transfer_in` when given. The list schedule
/// (makespan()) keeps values on the device between nodes there; this is the figure a cut is
/// measured against.
/// Per host segment, `host_idle` gets how long the host's kernels were idle before it: the time
/// from the end of the host segment before it in the batch (the batch's start for the first: its
/// inputs were made on the host just before) to its start, less the hand-overs between; kLongIdle
/// for the accelerators' segments.
double split_latency_ms(const ModelAnalysis& analysis, const PlacementProblem& problem, const std::vector<Segment>& segments,
                        const SplitCosts& costs = {}, std::vector<double>* compute = nullptr,
                        std::vector<double>* transfer_in = nullptr, std::vector<double>* host_idle = nullptr);

/// Analyzes, costs, places and cuts `graph` at `input_shapes`. For the latency objective, the
/// placement kept is the one whose cut runs fastest (split_latency_ms) among the placer's, HEFT's,
/// the exact optimum, the naive split and each device alone.
Partition partition_model(std::shared_ptr<const Graph> graph, const std::vector<Shape>& input_shapes,
                          const PartitionOptions& options);
/// The same from an analysis already made.
Partition partition_analysis(ModelAnalysis analysis, const PartitionOptions& options);

/// The partition of a placement made before (a split the placement cache kept): `device` names
/// each placed node's device (analysis.placeable's order), and the model is cut there; nothing is
/// costed or placed (the placement, segments and the devices' profiles, which its segments' keys
/// in the cost history name, are set; the costs, baselines and problem are not). Throws
/// InvalidArgument naming what does not fit this analysis and these options: another count of
/// nodes, a device not among options.devices, a node its device cannot run, a pinned node
/// elsewhere. `threads`, when given, are its host segments' threads in segment order
/// (host_segment_threads()); a count that does not match is InvalidArgument too.
Partition partition_as_placed(ModelAnalysis analysis, const PartitionOptions& options,
                              const std::vector<std::string>& device, const std::vector<int>& threads = {});
/// The same from the model itself: one run for its values' shapes at `input_shapes`
/// (AnalysisDepth::kShapesOnly: nothing timed), then the cut.
Partition partition_as_placed(std::shared_ptr<const Graph> graph, const std::vector<Shape>& input_shapes,
                              const PartitionOptions& options, const std::vector<std::string>& device,
                              const std::vector<int>& threads = {});

/// The naive split peers use: every node on the accelerator (device 1) up to the first it cannot
/// run, that one and every later node on the host. std::nullopt when device 1 runs every node, or
/// when a later node cannot run on the host (pinned to device 1).
std::optional<Placement> place_naive(const PlacementProblem& problem);

}  // namespace redwood::runtime
