// runtime/placement: the time one batch takes under a placement (checked against schedules worked
// out by hand), HEFT and exhaustive placement, and HEFT's gap to the exhaustive optimum on random
// graphs of up to 14 nodes (printed: the baseline the partitioner is measured against); the
// bottleneck between batches, and GLPK's placement for it against the exhaustive one.

#include "runtime/placement.hpp"
#include "runtime/random_problem.hpp"

#include "core/error.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>

namespace redwood::runtime {
namespace {

using Node = PlacementProblem::Node;
using Edge = PlacementProblem::Edge;

// The host and one GPU over a link of 1 GB/s (1 ms a MB) with 0.1 ms a transfer, both ways.
PlacementProblem host_and_gpu() {
  PlacementProblem p;
  p.devices = {"cpu", "cuda:0"};
  p.links = {{{}, {1.0, 0.1}}, {{1.0, 0.1}, {}}};
  return p;
}

TEST(Placement, TransfersCostLatencyPlusBytesOverBandwidth) {
  const PlacementProblem p = host_and_gpu();
  EXPECT_DOUBLE_EQ(p.transfer_ms(0, 1, 2e6), 2.1);
  EXPECT_DOUBLE_EQ(p.transfer_ms(1, 0, 0), 0.1);
  EXPECT_DOUBLE_EQ(p.transfer_ms(1, 1, 5e6), 0);
}

// a -> b, 1 MB between them; a reads 1 MB of the model's input, b returns 0.5 MB.
TEST(Placement, MakespanOfAChainMatchesTheScheduleByHand) {
  PlacementProblem p = host_and_gpu();
  p.nodes = {Node{"a", {4, 1}, 1e6, 0}, Node{"b", {6, 2}, 0, 5e5}};
  p.edges = {Edge{0, 1, 1e6}};
  EXPECT_DOUBLE_EQ(makespan(p, {0, 0}), 10);  // all on the host: nothing moves
  // a on the host (4), the 1 MB to the GPU (1.1), b there (2), 0.5 MB back (0.6).
  EXPECT_DOUBLE_EQ(makespan(p, {0, 1}), 4 + 1.1 + 2 + 0.6);
  // the input to the GPU (1.1), a (1), b (2), back (0.6).
  EXPECT_DOUBLE_EQ(makespan(p, {1, 1}), 1.1 + 1 + 2 + 0.6);
  EXPECT_DOUBLE_EQ(place_exhaustive(p).makespan_ms, 4.7);
  EXPECT_EQ(place_exhaustive(p).device, (std::vector<int>{1, 1}));
}

// a -> {b, c} -> d: b on the host and c on the GPU run at the same time; a's result crosses to
// the GPU once although only c reads it there.
TEST(Placement, BranchesOnTwoDevicesOverlap) {
  PlacementProblem p = host_and_gpu();
  p.nodes = {Node{"a", {1, 1}}, Node{"b", {5, 5}}, Node{"c", {5, 3}}, Node{"d", {1, 1}}};
  p.edges = {Edge{0, 1, 0}, Edge{0, 2, 1e6}, Edge{1, 3, 0}, Edge{2, 3, 1e6}};
  // a (1); b on the host 1..6; a's 1 MB to the GPU 1..2.1, c 2.1..5.1, its 1 MB back 5.1..6.2;
  // d on the host from 6.2.
  EXPECT_DOUBLE_EQ(makespan(p, {0, 0, 1, 0}), 7.2);
  EXPECT_DOUBLE_EQ(makespan(p, {0, 0, 0, 0}), 12);
}

TEST(Placement, AValueCrossesToADeviceOnceForAllItsReaders) {
  PlacementProblem p = host_and_gpu();
  p.nodes = {Node{"a", {1, 1}}, Node{"b", {1, 1}}, Node{"c", {1, 1}}};
  p.edges = {Edge{0, 1, 2e6}, Edge{0, 2, 2e6}};
  // a on the host (1), one 2 MB transfer (2.1), b and c one after the other on the GPU (2).
  EXPECT_DOUBLE_EQ(makespan(p, {0, 1, 1}), 1 + 2.1 + 2);
}

TEST(Placement, ANodeTheGpuLacksStaysOnTheHost) {
  PlacementProblem p = host_and_gpu();
  p.nodes = {Node{"conv", {10, 1}}, Node{"nms", {2, kUnsupported}}, Node{"conv2", {10, 1}}};
  p.edges = {Edge{0, 1, 1e5}, Edge{1, 2, 1e5}};
  for (const Placement& placed : {place_heft(p), place_exhaustive(p)}) {
    EXPECT_EQ(placed.device[1], 0);
    EXPECT_EQ(placed.device[0], 1);
    EXPECT_EQ(placed.device[2], 1);
  }
  try {
    makespan(p, {1, 1, 1});
    FAIL() << "a node on a device that cannot run it";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'nms'"), std::string::npos) << e.what();
  }
}

TEST(Placement, BadProblemsAreRefusedByName) {
  PlacementProblem p = host_and_gpu();
  p.nodes = {Node{"custom_op", {kUnsupported, kUnsupported}}};
  try {
    place_heft(p);
    FAIL() << "no device can run the node";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'custom_op': no device can run it"), std::string::npos) << e.what();
  }
  p.nodes = {Node{"a", {1, 1}}, Node{"b", {1}}};
  EXPECT_THROW(place_heft(p), InvalidArgument);  // one cost for two devices
  p.nodes = {Node{"a", {1, 1}}, Node{"b", {1, 1}}};
  p.edges = {Edge{1, 0, 1}};
  EXPECT_THROW(place_heft(p), InvalidArgument);  // an edge against the order
  p.edges.clear();
  p.links[0][1].gbps = 0;
  EXPECT_THROW(place_heft(p), InvalidArgument);
}

TEST(Placement, RankOrderIsTopological) {
  std::mt19937 rng(7);
  for (int t = 0; t < 50; ++t) {
    const PlacementProblem p = random_problem(rng(), 12);
    const std::vector<int> order = rank_order(p);
    std::vector<int> at(order.size());
    for (std::size_t i = 0; i < order.size(); ++i) at[static_cast<std::size_t>(order[i])] = static_cast<int>(i);
    for (const Edge& e : p.edges) EXPECT_LT(at[static_cast<std::size_t>(e.from)], at[static_cast<std::size_t>(e.to)]);
  }
}

// The exhaustive search against every placement tried one by one through makespan(), and HEFT
// never better than it.
TEST(Placement, ExhaustiveFindsTheBestPlacement) {
  std::mt19937 rng(11);
  for (int t = 0; t < 20; ++t) {
    const PlacementProblem p = random_problem(rng(), 7, t % 2 == 0 ? 2 : 3);
    const Placement best = place_exhaustive(p);
    EXPECT_DOUBLE_EQ(makespan(p, best.device), best.makespan_ms);
    const int d = static_cast<int>(p.devices.size());
    double brute = kUnsupported;
    std::vector<int> device(p.nodes.size(), 0);
    for (;;) {
      bool runs = true;
      for (std::size_t v = 0; v < device.size(); ++v) runs = runs && p.nodes[v].cost_ms[static_cast<std::size_t>(device[v])] != kUnsupported;
      if (runs) brute = std::min(brute, makespan(p, device));
      std::size_t v = 0;
      while (v < device.size() && ++device[v] == d) device[v++] = 0;
      if (v == device.size()) break;
    }
    EXPECT_DOUBLE_EQ(best.makespan_ms, brute) << "case " << t;
    EXPECT_LE(best.makespan_ms, place_heft(p).makespan_ms + 1e-9) << "case " << t;
  }
}

TEST(Placement, HeftAgainstTheExhaustiveOptimumOnRandomGraphs) {
  std::mt19937 rng(2026);
  double sum = 0, worst = 0, local_sum = 0, local_worst = 0;
  int optimal = 0, local_optimal = 0, cases = 0;
  for (int nodes : {10, 12, 14}) {
    for (int t = 0; t < 20; ++t, ++cases) {
      const PlacementProblem p = random_problem(rng(), nodes);
      const double best = place_exhaustive(p).makespan_ms, heft = place_heft(p).makespan_ms,
                   local = place_latency(p).makespan_ms;
      ASSERT_LE(best, heft + 1e-9);
      ASSERT_LE(local, heft + 1e-9) << "local search starts from HEFT and only improves";
      ASSERT_LE(best, local + 1e-9);
      const double gap = heft / best - 1, local_gap = local / best - 1;
      sum += gap;
      worst = std::max(worst, gap);
      optimal += gap < 1e-9;
      local_sum += local_gap;
      local_worst = std::max(local_worst, local_gap);
      local_optimal += local_gap < 1e-9;
    }
  }
  std::printf("[ measured ] on %d random graphs of 10-14 nodes, host and GPU, against the exhaustive optimum: HEFT optimal on %d, "
              "mean gap %.1f %%, worst %.1f %%; HEFT with local search optimal on %d, mean gap %.2f %%, worst %.1f %%\n",
              cases, optimal, 100 * sum / cases, 100 * worst, local_optimal, 100 * local_sum / cases, 100 * local_worst);
  RecordProperty("heft_mean_gap_percent", std::to_string(100 * sum / cases));
  // The bar for the partitioner on graphs this size: within 5 % of the optimum on every case.
  EXPECT_LE(local_worst, 0.05);
}

// Per batch: the host runs a (4) and c (3), the GPU b (1); a's 1 MB goes up (1.1), b's 2 MB
// comes back (2.1), b's 0.5 MB of output too (0.6): the host is the busiest at 7.
TEST(Placement, BottleneckIsTheBusiestDeviceOrLink) {
  PlacementProblem p = host_and_gpu();
  p.nodes = {Node{"a", {4, 1}}, Node{"b", {8, 1}, 0, 5e5}, Node{"c", {3, 2}}};
  p.edges = {Edge{0, 1, 1e6}, Edge{1, 2, 2e6}};
  EXPECT_DOUBLE_EQ(bottleneck(p, {0, 1, 0}), 7);
  EXPECT_DOUBLE_EQ(bottleneck(p, {0, 0, 0}), 15);
  // All on the GPU: 4 there; nothing crosses but b's output (0.6).
  EXPECT_DOUBLE_EQ(bottleneck(p, {1, 1, 1}), 4);
  // a on the GPU, b and c on the host: a's result down once although b alone reads it (1.1).
  EXPECT_DOUBLE_EQ(bottleneck(p, {1, 0, 0}), 11);
  // Best: a and b on the GPU (2), c on the host (3), b's 2 MB and 0.5 MB down (2.7).
  EXPECT_DOUBLE_EQ(bottleneck(p, {1, 1, 0}), 3);
  const Placement best = place_throughput_ilp(p);
  EXPECT_TRUE(best.proven_optimal);
  EXPECT_DOUBLE_EQ(best.bottleneck_ms, 3);
  EXPECT_EQ(best.device, (std::vector<int>{1, 1, 0}));
  EXPECT_EQ(place_throughput_exhaustive(p).device, best.device);
}

// In a pipeline two devices share the work: with a GPU 2x faster than the host, the best split
// gives the host a third, where one batch alone would put everything on the GPU.
TEST(Placement, ForThroughputTheHostTakesAShare) {
  PlacementProblem p = host_and_gpu();
  for (int v = 0; v < 6; ++v) p.nodes.push_back(Node{"n" + std::to_string(v), {2, 1}});  // six independent nodes
  EXPECT_EQ(place_exhaustive(p).makespan_ms, 4);             // four on the GPU, two on the host, at once
  const Placement ilp = place_throughput_ilp(p), all = place_throughput_exhaustive(p);
  EXPECT_DOUBLE_EQ(ilp.bottleneck_ms, 4);
  EXPECT_DOUBLE_EQ(all.bottleneck_ms, 4);
  EXPECT_EQ(std::count(ilp.device.begin(), ilp.device.end(), 0), 2);
}

TEST(Placement, TheIlpMatchesTheExhaustiveBottleneckOnRandomGraphs) {
  std::mt19937 rng(99);
  double heft_gap = 0;
  int cases = 0;
  for (int nodes : {6, 10, 14}) {
    for (int t = 0; t < 8; ++t, ++cases) {
      const PlacementProblem p = random_problem(rng(), nodes, nodes == 6 ? 3 : 2);
      const Placement all = place_throughput_exhaustive(p), ilp = place_throughput_ilp(p);
      ASSERT_TRUE(ilp.proven_optimal) << "case " << cases;
      EXPECT_NEAR(ilp.bottleneck_ms, all.bottleneck_ms, 1e-6 * all.bottleneck_ms) << "case " << cases;
      EXPECT_DOUBLE_EQ(ilp.lower_bound_ms, ilp.bottleneck_ms) << "case " << cases;  // proven: the bound is it
      EXPECT_DOUBLE_EQ(bottleneck(p, ilp.device), ilp.bottleneck_ms);
      heft_gap += place_heft(p).bottleneck_ms / all.bottleneck_ms - 1;
    }
  }
  std::printf("[ measured ] bottleneck on %d random graphs: GLPK's placement = the exhaustive optimum on all; HEFT's (placed "
              "for one batch) %.0f %% above it on average\n",
              cases, 100 * heft_gap / cases);
}

// Past what exhaustive search can try, the ILP still places a graph of 40 nodes.
TEST(Placement, TheIlpPlacesGraphsTooLargeToEnumerate) {
  std::mt19937 rng(5);
  const PlacementProblem p = random_problem(rng(), 40);
  const Placement ilp = place_throughput_ilp(p, 30);
  EXPECT_EQ(ilp.device.size(), 40u);
  EXPECT_LE(ilp.bottleneck_ms, place_heft(p).bottleneck_ms + 1e-9);
  EXPECT_LE(ilp.bottleneck_ms, bottleneck(p, std::vector<int>(40, 0)) + 1e-9);  // all on the host is a placement too
}

// Stopped by its time limit, the ILP still proves how far its best can be from the optimum: a
// bound that no placement beats (here, none of the ones at hand).
TEST(Placement, AnIlpStoppedByItsTimeLimitBoundsTheOptimum) {
  std::mt19937 rng(5);
  const PlacementProblem p = random_problem(rng(), 150, 3);
  const Placement stopped = place_throughput_ilp(p, 1.0);
  if (stopped.proven_optimal) GTEST_SKIP() << "GLPK proved 150 nodes on 3 devices optimal within 1 s: nothing left unproven";
  EXPECT_GT(stopped.lower_bound_ms, 0.0);
  EXPECT_LE(stopped.lower_bound_ms, stopped.bottleneck_ms);
  EXPECT_LE(stopped.lower_bound_ms, place_heft(p).bottleneck_ms);
  for (int d = 0; d < 3; ++d) {
    std::vector<int> all(p.nodes.size(), d);
    bool runs = true;
    for (const auto& n : p.nodes) runs = runs && n.cost_ms[static_cast<std::size_t>(d)] != kUnsupported;
    if (runs) EXPECT_LE(stopped.lower_bound_ms, bottleneck(p, all)) << "all on device " << d;
  }
  std::printf("[ measured ] 150 nodes on 3 devices, GLPK stopped at 1 s: its placement %.3f ms, within %.1f %% of the "
              "optimum by its bound (%.3f ms)\n",
              stopped.bottleneck_ms, 100 * (stopped.bottleneck_ms / stopped.lower_bound_ms - 1), stopped.lower_bound_ms);
}

TEST(Placement, ExhaustiveSearchRefusesWhatItCannotFinish) {
  std::mt19937 rng(3);
  const PlacementProblem p = random_problem(rng(), 40);
  EXPECT_THROW(place_exhaustive(p), InvalidArgument);
  EXPECT_NO_THROW(place_heft(p));
}

}  // namespace
}  // namespace redwood::runtime
