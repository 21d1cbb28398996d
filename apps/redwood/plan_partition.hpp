#pragma once
// `redwood plan MODEL --devices cpu,cuda`: the partitioner's answer for a model (runtime/partition.hpp):
// what each device can run, the placement against its baselines and the exact optimum, the
// segments with their predicted times and transfers, and with --profile what they measure.

#include "core/graph/graph.hpp"

#include <string>
#include <vector>

namespace redwood::app {

struct PartitionArgs {
  std::string model;
  std::vector<std::string> devices;  // "cpu" first
  std::vector<Shape> input_shapes;
  std::string precision = "fp32";
  std::string objective = "latency";  // or "throughput"
  std::vector<std::string> pins;      // "node=device"
  std::vector<std::string> cpu_only;  // op types the accelerators are taken to lack
  std::string dot;                    // a file for Graphviz
  bool profile = false;               // measure node times first, then each segment
  int runs = 20;
  bool verbose = false;
};

int run_partition_plan(std::shared_ptr<const Graph> graph, const PartitionArgs& args);

}  // namespace redwood::app
