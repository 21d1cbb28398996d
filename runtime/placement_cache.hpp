#pragma once
// The placement cache: where a PlacedRunner (runtime/placed_runner.hpp) put a model it kept whole
// on one device, on disk, so that a restart placing the same model at the same shapes, with the
// same options, on the same machine and build, skips the analysis (the model run on the CPU node
// by node, then timed: about a second for PP-OCRv4 det on a 2-core machine) and the placer, and
// makes that device's runner at once (docs/planner.md, "Plan cache").
//
//   key: graph_hash, input shapes, devices and their profiles' keys (the CPU model, the GPU and its
//        driver), precision, objective, pinned nodes, preferred device, build_stamp()
//   file: <cache>/placements/<XXH64 of the key>.json  {"key": ..., "device": ..., "predicted_ms": ...}
//
// Only whole-device placements are kept: a split model's segments are cut from its analysis, which
// it needs anyway. A kept placement does not follow later changes of the costs it was made from
// (a `redwood plan --profile` pass, a placement that would come out otherwise on a busier CPU):
// deleting the folder places every model again. A file that cannot be read or is for another key
// is ignored (logged at warn) and replaced; one that cannot be written is a warning, once.

#include "core/graph/graph.hpp"
#include "runtime/partition.hpp"

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace redwood::runtime {

/// cache_dir() / "placements".
std::filesystem::path placement_cache_dir();

/// The key of placing `graph` at `input_shapes` with `options`; "" (nothing is cached) when a
/// device's profile has no key (a device kind without one), or the options carry measured costs
/// (`history`) or their own supports() answers.
std::string placement_key(const Graph& graph, const std::vector<Shape>& input_shapes, const PartitionOptions& options);

struct KeptPlacement {
  std::string device;         // the device that runs the whole model
  double predicted_ms = 0;    // what the partitioner predicted for a batch at the key's shapes
};

/// The placement kept under `key` in `dir`, if any.
std::optional<KeptPlacement> read_placement(const std::filesystem::path& dir, const std::string& key);

/// Keeps `placement` under `key` in `dir` (a temporary file renamed over the entry).
void write_placement(const std::filesystem::path& dir, const std::string& key, const KeptPlacement& placement);

}  // namespace redwood::runtime
