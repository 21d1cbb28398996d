#pragma once
// The cost model: what a node costs on a device, and a value to move between devices, for the
// partitioner (runtime/partition.hpp). Two sources, the better first:
//
//   measured   a history of node times keyed by device, op, input and output shapes and dtypes,
//              and precision with the device's own switches (CostHistory, cost_precision; filled
//              by `redwood plan --profile`, kept on disk; it also keeps whole models' batch times
//              that pipeline runs measured, for the pipeline placement: pipelines/pipeline_planner.hpp)
//   estimated  a roofline from the device's profile (runtime/device_profile.hpp):
//              launch + max(flops / peak rate, bytes / memory bandwidth), scaled by the device's
//              calibration: the median ratio of measured to roofline time over the nodes the
//              history has for that device (1 without any), since no kernel reaches the peak
//
// Transfers cost latency + bytes / bandwidth, at the profile's pinned rates: a split model's values
// cross between devices through page-locked host tensors (the split runner's pool, a pipeline's
// frame pool on a GPU machine).

#include "core/graph/graph.hpp"
#include "core/kernel_info.hpp"
#include "runtime/device_profile.hpp"
#include "runtime/placement.hpp"

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace redwood::runtime {

/// What one node does at given shapes: floating-point operations (a multiply-add is two) and the
/// bytes it reads and writes (weights included).
struct NodeWork {
  double flops = 0;
  double bytes = 0;
};
NodeWork node_work(const Node& node, const std::vector<TensorDesc>& inputs, const std::vector<TensorDesc>& outputs);

/// What a device's measured times are kept under in CostHistory's keys beside its profile: the
/// precision it computes in, "fp32" on the host (device 0, whatever the model's precision), and
/// on an accelerator its runner's own switches after it (RunnerConfig::device_options, e.g.
/// "fp16 wgmma=off"), since a time measured with a switch set predicts only runs with it set;
/// a switch that a registered device says changes no cost (DeviceRunnerFactory::
/// option_changes_costs) is left out.
std::string cost_precision(int device, const std::string& precision,
                           const std::map<std::string, std::string>& device_options = {});

/// Measured times, by key: a node's (CostHistory::key), a segment's overhead (segment_key), a
/// batch's hand-over per segment (handover_key), a segment's whole time (cut_key), a whole model's
/// batch (model_key). Thread-safe. A sample updates the entry's running median estimate (the median
/// of the samples kept, at most 16).
class CostHistory {
 public:
  /// "cuda:0 NVIDIA H200|fp16|Conv|f32[1,3,640,640],f32[16,3,3,3]->f32[1,16,320,320]"
  static std::string key(const DeviceProfile& device, const std::string& precision, const Node& node,
                         const std::vector<TensorDesc>& inputs, const std::vector<TensorDesc>& outputs);
  /// The key of what one segment costs on a device beyond its nodes' times (launching its replay,
  /// waking the CPU's threads), learned from measured segments.
  static std::string segment_key(const DeviceProfile& device);
  /// The key of what a batch takes per segment on this host beyond its segments' compute and
  /// their inputs' crossings (the runners' hand-overs, staging and completion), learned from
  /// measured batches: "<host device> <name>|handover".
  static std::string handover_key(const DeviceProfile& host);
  /// The same in a pipeline: what a split's batch takes per segment beyond its segments' compute
  /// and their inputs' crossings as a pipeline's runs measured it, where its batches wait on the
  /// other stages' threads and on the models sharing the GPU as a batch profiled alone does not:
  /// "ran <host device> <name>|handover in a pipeline" (a run's sample: outside node_entries_hash).
  static std::string pipeline_handover_key(const DeviceProfile& host);
  /// What the key of the threads chosen for a host segment starts with, before its cut_key: the
  /// count it was measured at (Segment::threads), kept so that the next plan runs it there.
  static constexpr const char* host_threads_prefix = "threads ";
  static std::string host_threads_key(const std::string& cut_key) { return host_threads_prefix + cut_key; }
  /// The key of one segment's whole time on a device (its compute as its runner measured it in a
  /// split run), by the keys of the nodes it runs and of its edges: "cut <device>|<precision>|<XXH64
  /// of the keys>|<count> nodes" (Partition::cut_key for its work, Partition::ran_key for that
  /// segment, its nodes named). A segment's nodes cost other than the same nodes inside the whole
  /// model (layouts converted at its edges, fusions it cuts), so a segment measured before is
  /// predicted from its own time.
  static std::string cut_key(const DeviceProfile& device, const std::string& precision,
                             const std::vector<std::string>& node_keys);
  /// The key of a whole model's batch time on a device, as a run measured it (copy in, compute,
  /// copy out): "model <graph_hash>|<device>|<precision>|float[29, 3, 320, 416]". `device` names the
  /// device and its profile's key (pipelines/pipeline_planner.cpp); `inputs` are at the batch's rows.
  static std::string model_key(std::uint64_t graph_hash, const std::string& device, const std::string& precision,
                               const std::vector<TensorDesc>& inputs);
  /// The key of a split segment's compute a batch at one row count as a pipeline's run measured
  /// it (its runner's batches that ran those rows, padding included): "ran <cut_key>|<rows> rows",
  /// with the key of the segment at the rows its partition was analysed at (Partition::ran_key).
  /// A run at small batches costs other than the analysed rows scaled (a kernel's launch, the
  /// CPU's threads waking), so a segment measured at those rows is predicted from its own time
  /// there.
  static std::string segment_rows_key(const std::string& cut_key, std::int64_t rows);
  /// The medians held under segment_rows_key(cut_key, rows), by rows.
  std::map<std::int64_t, double> segment_rows_times(const std::string& cut_key) const;
  /// The medians of the whole-model batch times held for that model, device and precision at
  /// `inputs` with dim 0 at any rows (dim 0 of each input that is `batch_rows` in `inputs`), by rows.
  std::map<std::int64_t, double> model_times(std::uint64_t graph_hash, const std::string& device, const std::string& precision,
                                             const std::vector<TensorDesc>& inputs, std::int64_t batch_rows) const;
  /// XXH64 over every entry that is not a time a pipeline's run measured (whole-model batches,
  /// segments at a row count): the node and segment times a `redwood plan --profile` pass fills,
  /// their samples included; 0 for none.
  std::uint64_t node_entries_hash() const;
  std::optional<double> find(const std::string& key) const;
  void record(const std::string& key, double ms);
  std::size_t size() const;
  /// Every key with its median, sorted by key.
  std::map<std::string, double> entries() const;
  /// The medians of the entries whose keys start with `prefix`.
  std::map<std::string, double> entries(const std::string& prefix) const;

  /// Reads a history file; a missing file is an empty history, a corrupt one is logged and
  /// ignored (never trusted). Writes atomically (a temporary file, then rename).
  void load(const std::string& path);
  void save(const std::string& path) const;
  /// `<cache dir>/history/costs.json` (the cache dir of runtime/device_profile.hpp).
  static std::string default_path();

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::vector<double>> samples_;
};

/// A node's cost on one device, and where it came from.
struct CostEstimate {
  double ms = 0;
  bool measured = false;  // from the history; else the calibrated roofline
};

class CostModel {
 public:
  /// `profiles[i]` describes device i of the placement (profiles[0] the host CPU); `precision` is
  /// what the accelerators compute in ("fp32", "tf32", "fp16", "bf16"; the CPU computes fp32), and
  /// `device_options` their runners' switches (what the history's keys name: cost_precision).
  CostModel(std::vector<DeviceProfile> profiles, std::string precision, const CostHistory* history = nullptr,
            const std::map<std::string, std::string>& device_options = {});

  const std::vector<DeviceProfile>& profiles() const { return profiles_; }
  const std::string& precision() const { return precision_; }

  /// The roofline alone, uncalibrated.
  double roofline_ms(int device, const NodeWork& work) const;
  CostEstimate node_ms(int device, const Node& node, const std::vector<TensorDesc>& inputs,
                       const std::vector<TensorDesc>& outputs) const;
  /// Scales each device's roofline by the median measured/roofline ratio over `samples`
  /// (device, roofline ms, measured ms); devices without samples keep 1.
  void calibrate(const std::vector<std::tuple<int, double, double>>& samples);
  double calibration(int device) const { return scale_[static_cast<std::size_t>(device)]; }
  /// The link from device a to device b (pinned host<->device rates; between two accelerators,
  /// through the host: the slower of the two hops, latencies added).
  PlacementProblem::Link link(int a, int b) const;
  /// The precision device i computes in ("fp32" on the CPU).
  std::string device_precision(int device) const;

 private:
  std::vector<DeviceProfile> profiles_;
  std::string precision_;
  std::vector<std::string> key_precision_;  // per device: cost_precision, what the history's keys name
  const CostHistory* history_;
  std::vector<double> scale_;
};

}  // namespace redwood::runtime
