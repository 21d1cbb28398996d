#include "runtime/random_problem.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <random>

namespace redwood::runtime {

PlacementProblem random_problem(std::uint32_t seed, int nodes, int devices) {
  std::mt19937 rng(seed);
  PlacementProblem p;
  for (int d = 0; d < devices; ++d) p.devices.push_back(d == 0 ? std::string("cpu") : fmt::format("cuda:{}", d - 1));
  p.links.assign(static_cast<std::size_t>(devices), std::vector<PlacementProblem::Link>(static_cast<std::size_t>(devices), {25.0, 0.01}));
  std::uniform_real_distribution<double> cpu_ms(0.2, 5.0), speedup(1.0, 20.0), bytes(0, 4e6), unit(0, 1);
  for (int v = 0; v < nodes; ++v) {
    PlacementProblem::Node n{fmt::format("n{}", v), {}, 0, 0};
    const double c = cpu_ms(rng);
    n.cost_ms.push_back(c);
    for (int d = 1; d < devices; ++d) n.cost_ms.push_back(unit(rng) < 0.1 ? kUnsupported : c / speedup(rng));
    if (v == 0) n.input_bytes = bytes(rng);
    p.nodes.push_back(n);
    const int reads = v == 0 ? 0 : 1 + static_cast<int>(unit(rng) * 3);
    for (int k = 0; k < reads; ++k) {
      const int from = std::uniform_int_distribution<int>(std::max(0, v - 4), v - 1)(rng);
      if (std::none_of(p.edges.begin(), p.edges.end(), [&](const auto& e) { return e.from == from && e.to == v; })) {
        p.edges.push_back({from, v, bytes(rng)});
      }
    }
  }
  if (nodes > 0) p.nodes.back().output_bytes = bytes(rng);
  return p;
}

}  // namespace redwood::runtime
