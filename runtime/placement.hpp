#pragma once
// Placement: which device runs each node of a model, and what that costs for one batch. The
// partitioner's problem, stated on costs alone, so that it is solved and tested the same whether
// the costs come from the cost model, from measurements or from a test's table:
//
//   devices  0 = the host (CPU), 1.. = accelerators; a link between two devices moves bytes at
//            latency + bytes / bandwidth, one transfer at a time per direction (a copy engine)
//   nodes    in a topological order, each with its time on every device (infinite: the device
//            cannot run it), the bytes it reads from the model's inputs (which sit on the host)
//            and the bytes of its results the model returns (which go back to the host)
//   edges    producer -> consumer with the bytes that flow; a value crosses to another device
//            once, however many nodes there read it
//
// Two objectives. makespan() is the time one batch takes under a placement: a list schedule in which each device
// runs one node at a time, in order of HEFT's upward rank (the longest path to the end), a node
// starting once its device is free and its inputs have arrived. place_heft() is the HEFT list
// scheduler (each node, by rank, on the device where it finishes first); place_exhaustive() tries
// every placement (every node on every device that can run it) under the same schedule and keeps
// the fastest: exact for this model of execution, for small graphs, and the reference the other
// placers are measured against.
//
// bottleneck() is the time between batches when batches follow one another as in a pipeline:
// each device and each link direction is busy for the sum of what it does per batch (a node's
// result crosses to a device once, as its largest out-edge's bytes; the model's inputs leave the
// host and its outputs return to it), and the busiest sets the rate. place_throughput_ilp()
// minimizes it exactly as a mixed-integer program solved by GLPK (a binary per node and device it
// can run on; a crossing per edge and device pair, forced by the two ends; the bottleneck above
// every device's and link's load), for graphs of any size within a time limit;
// place_throughput_exhaustive() is its reference on small graphs.

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace redwood::runtime {

inline constexpr double kUnsupported = std::numeric_limits<double>::infinity();

struct PlacementProblem {
  struct Node {
    std::string name;
    std::vector<double> cost_ms;  // per device; kUnsupported where that device cannot run it
    double input_bytes = 0;       // read from the model's inputs, on the host
    double output_bytes = 0;      // returned to the host as the model's outputs
  };
  struct Edge {
    int from = 0, to = 0;  // node indices, from < to
    double bytes = 0;
  };
  struct Link {
    double gbps = 0;        // GB/s (1e9 bytes a second)
    double latency_ms = 0;  // per transfer
  };

  std::vector<std::string> devices;     // devices[0] is the host
  std::vector<std::vector<Link>> links;  // links[a][b], a != b: from device a to device b
  std::vector<Node> nodes;               // topologically ordered
  std::vector<Edge> edges;

  /// Milliseconds to move `bytes` from device a to device b (0 on the same device).
  double transfer_ms(int a, int b, double bytes) const;
  /// Per node, its result as it crosses to another device: its largest out-edge's bytes.
  std::vector<double> result_bytes() const;
  /// Throws InvalidArgument naming what is wrong: a node no device can run (by name), a cost
  /// table of the wrong length, an edge out of order, a missing or zero-bandwidth link.
  void validate() const;
};

struct Placement {
  std::vector<int> device;  // per node
  double makespan_ms = 0;   // one batch alone
  double bottleneck_ms = 0; // between batches, in a pipeline
  bool proven_optimal = false;  // for the placer's objective (exhaustive; the ILP within its limit)
  double lower_bound_ms = 0;    // no placement does better on the objective (the ILP's proof); 0: unknown
};

/// The nodes in the order the list schedule takes them: by HEFT's upward rank (a node's mean
/// cost over the devices that can run it plus the longest mean-cost path after it), ties by index.
/// Always a topological order.
std::vector<int> rank_order(const PlacementProblem& p);

/// The time one batch takes with node i on device[i] (validated; throws InvalidArgument for a node
/// on a device that cannot run it).
double makespan(const PlacementProblem& p, const std::vector<int>& device);

/// The busiest device's or link direction's time per batch under the placement (validated as
/// makespan() does).
double bottleneck(const PlacementProblem& p, const std::vector<int>& device);

/// What bottleneck() takes the maximum of: each device's busy time per batch (devices' order),
/// then each link direction's, a -> b at devices.size() + a * devices.size() + b (validated as
/// makespan() does).
std::vector<double> resource_loads(const PlacementProblem& p, const std::vector<int>& device);

/// HEFT: in rank order, each node on the device where it would finish first.
Placement place_heft(const PlacementProblem& p);

/// Local search (a node moved to another device, or two adjacent nodes moved together, while that
/// shortens the batch) from several starts: HEFT's placement, each node on its cheapest device,
/// and each device alone where it runs every node; the shortest kept. The placer for one batch
/// at any size.
Placement place_latency(const PlacementProblem& p);

/// Every placement, the fastest kept (ties: the first found). Throws InvalidArgument when there are
/// more than `max_placements` to try.
Placement place_exhaustive(const PlacementProblem& p, std::uint64_t max_placements = 1ull << 22);

/// The placement with the least bottleneck(), trying every one (as place_exhaustive).
Placement place_throughput_exhaustive(const PlacementProblem& p, std::uint64_t max_placements = 1ull << 22);

/// The placement with the least bottleneck(), from GLPK's branch and cut; proven_optimal is false
/// when `time_limit_s` ran out first (the best placement found is returned, and lower_bound_ms is
/// the best bound the search had proven: the optimum is at least that). Throws Error when GLPK
/// fails or finds no placement in time.
Placement place_throughput_ilp(const PlacementProblem& p, double time_limit_s = 10);

}  // namespace redwood::runtime
