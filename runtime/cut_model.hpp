#pragma once
// A placed model cut into single-device segments (the partitioner's last step,
// runtime/partition.hpp).
//
// Segments form a chain: the nodes in a topological order that stays on one device as long as it
// can, cut where the device changes. A segment's inputs are graph inputs or values of earlier
// segments; its outputs are what later segments read and the model's outputs. Each segment gets
// its own copy of the shape arithmetic chains it reads (runtime/model_analysis.hpp). Its graph
// (for a ModelRunner) takes and returns every value with one extra leading dimension of 1
// ("boxed"): a runner splits a batch by rows on dim 0, and an intermediate value's dim 0 need not
// be the batch (runtime/split_runner.hpp).

#include "core/graph/graph.hpp"
#include "runtime/model_analysis.hpp"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace redwood::runtime {

struct Segment {
  int device = 0;                       // index into the partition's devices
  std::vector<std::size_t> nodes;       // the analysis graph's nodes it runs (shape arithmetic included)
  std::vector<std::string> inputs;      // value names: graph inputs and earlier segments' outputs
  std::vector<std::string> outputs;     // what later segments read and the model's outputs it makes
  std::shared_ptr<const Graph> graph;   // the boxed subgraph a runner runs
  int threads = 0;                      // a host segment's threads (HostThreads), chosen while
                                        // planning; 0: the process's count
};

/// The box's names: segment graphs take `x` as boxed_name(x), of boxed_shape(x's shape).
std::string boxed_name(const std::string& value);
/// [1, ...shape]: a value's shape in its box.
Shape boxed_shape(const Shape& shape);

/// Cuts the analysis graph by `device` (per placeable node, in analysis.placeable's order).
std::vector<Segment> cut_model(const ModelAnalysis& analysis, const std::vector<int>& device);

/// Each value of `graph` by the node that makes it.
std::map<std::string, std::size_t> value_producers(const Graph& graph);

}  // namespace redwood::runtime
