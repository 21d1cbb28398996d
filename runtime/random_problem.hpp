#pragma once
// Synthetic placement problems, the "synthetic DAGs with CPU/GPU cost tables": the
// placers' tests and redwood_placement_bench measure on them. Each node reads one to three of
// the four nodes before it; the host takes 0.2-5 ms a node, each accelerator is 1x to 20x faster
// and lacks one op in ten; values are up to 4 MB; links are PCIe-like (25 GB/s, 10 us a
// transfer); the first node reads the model's input and the last returns its output. The same
// seed gives the same problem on every machine.

#include "runtime/placement.hpp"

#include <cstdint>

namespace redwood::runtime {

PlacementProblem random_problem(std::uint32_t seed, int nodes, int devices = 2);

}  // namespace redwood::runtime
