#include "runtime/placement.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <cmath>

namespace redwood::runtime {

double PlacementProblem::transfer_ms(int a, int b, double bytes) const {
  if (a == b) return 0;
  const Link& l = links[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)];
  return l.latency_ms + bytes / (l.gbps * 1e6);
}

std::vector<double> PlacementProblem::result_bytes() const {
  std::vector<double> bytes(nodes.size(), 0.0);
  for (const Edge& e : edges) bytes[static_cast<std::size_t>(e.from)] = std::max(bytes[static_cast<std::size_t>(e.from)], e.bytes);
  return bytes;
}

void PlacementProblem::validate() const {
  const std::size_t d = devices.size();
  RW_EXPECTS(d >= 1, InvalidArgument, "a placement needs at least one device (the host)");
  RW_EXPECTS(links.size() == d, InvalidArgument, "links: {} rows for {} devices", links.size(), d);
  for (std::size_t a = 0; a < d; ++a) {
    RW_EXPECTS(links[a].size() == d, InvalidArgument, "links from {}: {} entries for {} devices", devices[a], links[a].size(), d);
    for (std::size_t b = 0; b < d; ++b) {
      RW_EXPECTS(a == b || (links[a][b].gbps > 0 && links[a][b].latency_ms >= 0), InvalidArgument,
                 "the link from {} to {} has no bandwidth", devices[a], devices[b]);
    }
  }
  for (const Node& n : nodes) {
    RW_EXPECTS(n.cost_ms.size() == d, InvalidArgument, "node '{}': {} costs for {} devices", n.name, n.cost_ms.size(), d);
    bool runs = false;
    for (double c : n.cost_ms) {
      RW_EXPECTS(c >= 0, InvalidArgument, "node '{}': a negative cost", n.name);
      runs = runs || c != kUnsupported;
    }
    RW_EXPECTS(runs, InvalidArgument, "node '{}': no device can run it", n.name);
  }
  for (const Edge& e : edges) {
    RW_EXPECTS(e.from >= 0 && e.from < e.to && e.to < static_cast<int>(nodes.size()) && e.bytes >= 0, InvalidArgument,
               "edge {} -> {}: nodes out of range or out of topological order", e.from, e.to);
  }
}

namespace {

// A list schedule in progress: when each device and each link direction is next free, when each
// node finished, and when each node's result has reached each device (negative: not yet sent).
class ListSchedule {
 public:
  explicit ListSchedule(const PlacementProblem& p)
      : p_(p),
        d_(p.devices.size()),
        device_free_(d_, 0.0),
        link_free_(d_ * d_, 0.0),
        finish_(p.nodes.size(), 0.0),
        arrived_(p.nodes.size() * d_, -1.0),
        inputs_(p.nodes.size()) {
    for (const auto& e : p.edges) inputs_[static_cast<std::size_t>(e.to)].push_back(&e);
  }

  /// When node v would finish on device d, with its producers where `device` puts them.
  double finish_if(int v, int d, const std::vector<int>& device) {
    scratch_ = link_free_;
    return start(v, d, device, scratch_, nullptr) + cost(v, d);
  }

  /// Places node v on device d: its input transfers take their links, and it takes the device.
  void place(int v, int d, const std::vector<int>& device) {
    const double s = start(v, d, device, link_free_, &arrived_);
    finish_[static_cast<std::size_t>(v)] = s + cost(v, d);
    device_free_[static_cast<std::size_t>(d)] = finish_[static_cast<std::size_t>(v)];
  }

  /// When the last result is back on the host, every node placed.
  double end(const std::vector<int>& device) {
    double end = 0;
    for (std::size_t v = 0; v < p_.nodes.size(); ++v) {
      end = std::max(end, finish_[v]);
      const double out = p_.nodes[v].output_bytes;
      const int d = device[v];
      if (out > 0 && d != 0) {
        double& link = link_free_[static_cast<std::size_t>(d) * d_];
        link = std::max(link, finish_[v]) + p_.transfer_ms(d, 0, out);
        end = std::max(end, link);
      }
    }
    return end;
  }

 private:
  double cost(int v, int d) const { return p_.nodes[static_cast<std::size_t>(v)].cost_ms[static_cast<std::size_t>(d)]; }

  // The node's start on d: its device free and its inputs there, transfers queued on `links`;
  // with `arrived`, transfers are recorded so that another reader on d does not send them again.
  double start(int v, int d, const std::vector<int>& device, std::vector<double>& links, std::vector<double>* arrived) {
    const auto dd = static_cast<std::size_t>(d);
    double ready = device_free_[dd];
    const double from_host = p_.nodes[static_cast<std::size_t>(v)].input_bytes;
    if (from_host > 0 && d != 0) {
      double& link = links[dd];  // host -> d
      link += p_.transfer_ms(0, d, from_host);
      ready = std::max(ready, link);
    }
    for (const PlacementProblem::Edge* e : inputs_[static_cast<std::size_t>(v)]) {
      const auto u = static_cast<std::size_t>(e->from);
      const int du = device[u];
      if (du == d) {
        ready = std::max(ready, finish_[u]);
        continue;
      }
      const double there = arrived_[u * d_ + dd];
      if (there >= 0) {
        ready = std::max(ready, there);
        continue;
      }
      double& link = links[static_cast<std::size_t>(du) * d_ + dd];
      link = std::max(link, finish_[u]) + p_.transfer_ms(du, d, e->bytes);
      if (arrived) (*arrived)[u * d_ + dd] = link;
      ready = std::max(ready, link);
    }
    return ready;
  }

  const PlacementProblem& p_;
  std::size_t d_;
  std::vector<double> device_free_, link_free_, finish_, arrived_, scratch_;
  std::vector<std::vector<const PlacementProblem::Edge*>> inputs_;
};

double mean_cost(const PlacementProblem::Node& n) {
  double sum = 0;
  int k = 0;
  for (double c : n.cost_ms) {
    if (c != kUnsupported) sum += c, ++k;
  }
  return sum / k;
}

}  // namespace

std::vector<int> rank_order(const PlacementProblem& p) {
  p.validate();
  const std::size_t n = p.nodes.size(), d = p.devices.size();
  // The mean transfer time of an edge over every (producer, consumer) device pair.
  auto mean_transfer = [&](double bytes) {
    double sum = 0;
    for (std::size_t a = 0; a < d; ++a) {
      for (std::size_t b = 0; b < d; ++b) sum += p.transfer_ms(static_cast<int>(a), static_cast<int>(b), bytes);
    }
    return sum / static_cast<double>(d * d);
  };
  std::vector<std::vector<const PlacementProblem::Edge*>> out(n);
  for (const auto& e : p.edges) out[static_cast<std::size_t>(e.from)].push_back(&e);
  // Edges lead to later nodes: from the last node back, every successor's rank is final.
  std::vector<double> rank(n, 0.0);
  for (std::size_t v = n; v-- > 0;) {
    double tail = 0;  // the longest mean path after v
    for (const auto* e : out[v]) tail = std::max(tail, mean_transfer(e->bytes) + rank[static_cast<std::size_t>(e->to)]);
    rank[v] = mean_cost(p.nodes[v]) + tail;
  }
  std::vector<int> order(n);
  for (std::size_t v = 0; v < n; ++v) order[v] = static_cast<int>(v);
  // A producer's rank is at least each consumer's (costs are not negative), and equal ranks go
  // by index, producers first: the order is topological.
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    const double ra = rank[static_cast<std::size_t>(a)], rb = rank[static_cast<std::size_t>(b)];
    return ra > rb || (ra == rb && a < b);
  });
  return order;
}

namespace {

void check_placement(const PlacementProblem& p, const std::vector<int>& device) {
  RW_EXPECTS(device.size() == p.nodes.size(), InvalidArgument, "a placement of {} nodes for {}", device.size(), p.nodes.size());
  for (std::size_t v = 0; v < device.size(); ++v) {
    RW_EXPECTS(device[v] >= 0 && device[v] < static_cast<int>(p.devices.size()) &&
                   p.nodes[v].cost_ms[static_cast<std::size_t>(device[v])] != kUnsupported,
               InvalidArgument, "node '{}' cannot run on device {}", p.nodes[v].name, device[v]);
  }
}

double makespan_in(const PlacementProblem& p, const std::vector<int>& order, const std::vector<int>& device) {
  ListSchedule s(p);
  for (int v : order) s.place(v, device[static_cast<std::size_t>(v)], device);
  return s.end(device);
}

std::vector<double> loads_in(const PlacementProblem& p, const std::vector<double>& values, const std::vector<int>& device) {
  const std::size_t d = p.devices.size();
  std::vector<double> load(d + d * d, 0.0);  // devices, then links a -> b at d + a * d + b
  auto link = [&](int a, int b) -> double& { return load[d + static_cast<std::size_t>(a) * d + static_cast<std::size_t>(b)]; };
  for (std::size_t v = 0; v < p.nodes.size(); ++v) {
    const PlacementProblem::Node& n = p.nodes[v];
    const int dv = device[v];
    load[static_cast<std::size_t>(dv)] += n.cost_ms[static_cast<std::size_t>(dv)];
    if (dv != 0 && n.input_bytes > 0) link(0, dv) += p.transfer_ms(0, dv, n.input_bytes);
    if (dv != 0 && n.output_bytes > 0) link(dv, 0) += p.transfer_ms(dv, 0, n.output_bytes);
  }
  // Each result crosses once to every other device that reads it.
  std::vector<int> sent(p.nodes.size() * d, 0);
  for (const auto& e : p.edges) {
    const int a = device[static_cast<std::size_t>(e.from)], b = device[static_cast<std::size_t>(e.to)];
    int& once = sent[static_cast<std::size_t>(e.from) * d + static_cast<std::size_t>(b)];
    if (a == b || once) continue;
    once = 1;
    link(a, b) += p.transfer_ms(a, b, values[static_cast<std::size_t>(e.from)]);
  }
  return load;
}

double bottleneck_in(const PlacementProblem& p, const std::vector<double>& values, const std::vector<int>& device) {
  const std::vector<double> load = loads_in(p, values, device);
  return *std::max_element(load.begin(), load.end());
}

// Every placement (each node on each device that can run it), the one `objective` rates lowest.
template <typename Objective>
Placement search_all(const PlacementProblem& p, std::uint64_t max_placements, Objective objective) {
  const std::size_t n = p.nodes.size();
  std::vector<std::vector<int>> choices(n);
  std::uint64_t total = 1;
  for (std::size_t v = 0; v < n; ++v) {
    for (std::size_t d = 0; d < p.devices.size(); ++d) {
      if (p.nodes[v].cost_ms[d] != kUnsupported) choices[v].push_back(static_cast<int>(d));
    }
    RW_EXPECTS(total <= max_placements / choices[v].size(), InvalidArgument,
               "{} nodes on {} devices: more than {} placements to try exhaustively", n, p.devices.size(), max_placements);
    total *= choices[v].size();
  }
  std::vector<int> best;
  double best_value = 0;
  std::vector<std::size_t> pick(n, 0);
  std::vector<int> device(n);
  for (std::uint64_t k = 0; k < total; ++k) {
    for (std::size_t v = 0; v < n; ++v) device[v] = choices[v][pick[v]];
    const double value = objective(device);
    if (best.empty() || value < best_value) best = device, best_value = value;
    for (std::size_t v = 0; v < n && ++pick[v] == choices[v].size(); ++v) pick[v] = 0;  // the next placement
  }
  Placement out;
  out.device = best;
  out.proven_optimal = true;
  return out;
}

}  // namespace

double makespan(const PlacementProblem& p, const std::vector<int>& device) {
  const std::vector<int> order = rank_order(p);
  check_placement(p, device);
  return makespan_in(p, order, device);
}

std::vector<double> resource_loads(const PlacementProblem& p, const std::vector<int>& device) {
  p.validate();
  check_placement(p, device);
  return loads_in(p, p.result_bytes(), device);
}

double bottleneck(const PlacementProblem& p, const std::vector<int>& device) {
  p.validate();
  check_placement(p, device);
  return bottleneck_in(p, p.result_bytes(), device);
}

Placement place_heft(const PlacementProblem& p) {
  const std::vector<int> order = rank_order(p);
  Placement out;
  out.device.assign(p.nodes.size(), 0);
  ListSchedule s(p);
  for (int v : order) {
    const auto& costs = p.nodes[static_cast<std::size_t>(v)].cost_ms;
    int best = -1;
    double best_finish = 0;
    for (std::size_t d = 0; d < costs.size(); ++d) {
      if (costs[d] == kUnsupported) continue;
      const double f = s.finish_if(v, static_cast<int>(d), out.device);
      if (best < 0 || f < best_finish) best = static_cast<int>(d), best_finish = f;
    }
    out.device[static_cast<std::size_t>(v)] = best;
    s.place(v, best, out.device);
  }
  out.makespan_ms = s.end(out.device);
  out.bottleneck_ms = bottleneck_in(p, p.result_bytes(), out.device);
  return out;
}

namespace {

// Local search from `start`: a node moved to another device, or two adjacent nodes moved together,
// while that shortens the batch. Every pass that improves starts over; each improvement shortens
// the batch, so it ends.
std::vector<int> improve_locally(const PlacementProblem& p, const std::vector<int>& order, std::vector<int> device,
                                 double& current) {
  const int devices = static_cast<int>(p.devices.size());
  auto runs = [&](std::size_t v, int d) { return p.nodes[v].cost_ms[static_cast<std::size_t>(d)] != kUnsupported; };
  current = makespan_in(p, order, device);
  // Tries `moved`; keeps it when the batch gets shorter.
  auto keep_if_shorter = [&](std::vector<int>& moved) {
    const double m = makespan_in(p, order, moved);
    if (m < current - 1e-12) {
      device = moved;
      current = m;
      return true;
    }
    return false;
  };
  for (bool improved = true; improved;) {
    improved = false;
    std::vector<int> moved = device;
    for (std::size_t v = 0; v < device.size() && !improved; ++v) {
      for (int d = 0; d < devices && !improved; ++d) {
        if (d == device[v] || !runs(v, d)) continue;
        moved = device;
        moved[v] = d;
        improved = keep_if_shorter(moved);
      }
    }
    // A single move may not pay where moving a producer with its consumer does (the transfer
    // between them disappears).
    for (const auto& e : p.edges) {
      if (improved) break;
      const auto u = static_cast<std::size_t>(e.from), v = static_cast<std::size_t>(e.to);
      for (int d = 0; d < devices && !improved; ++d) {
        if ((d == device[u] && d == device[v]) || !runs(u, d) || !runs(v, d)) continue;
        moved = device;
        moved[u] = moved[v] = d;
        improved = keep_if_shorter(moved);
      }
    }
  }
  return device;
}

}  // namespace

Placement place_latency(const PlacementProblem& p) {
  const std::vector<int> order = rank_order(p);
  // Starts: HEFT's placement; each node on its cheapest device; each device alone where it runs
  // every node. One- and two-node moves cannot leave a placement whose every neighbour is worse
  // (HEFT putting a model's first layers on the host, where the input already is, and a GPU
  // that is faster for all of them but for the input's transfer), so several starts are tried
  // and the shortest result is kept.
  std::vector<std::vector<int>> starts{place_heft(p).device};
  std::vector<int> cheapest;
  for (const auto& node : p.nodes) {
    cheapest.push_back(static_cast<int>(std::min_element(node.cost_ms.begin(), node.cost_ms.end()) - node.cost_ms.begin()));
  }
  starts.push_back(cheapest);
  for (std::size_t d = 0; d < p.devices.size(); ++d) {
    if (std::all_of(p.nodes.begin(), p.nodes.end(), [&](const auto& n) { return n.cost_ms[d] != kUnsupported; })) {
      starts.emplace_back(p.nodes.size(), static_cast<int>(d));
    }
  }
  Placement best;
  double best_ms = kUnsupported;
  for (const auto& start : starts) {
    double ms = 0;
    std::vector<int> device = improve_locally(p, order, start, ms);
    if (ms < best_ms - 1e-12) {
      best_ms = ms;
      best.device = std::move(device);
    }
  }
  best.makespan_ms = best_ms;
  best.bottleneck_ms = bottleneck_in(p, p.result_bytes(), best.device);
  return best;
}

Placement place_exhaustive(const PlacementProblem& p, std::uint64_t max_placements) {
  const std::vector<int> order = rank_order(p);
  Placement best = search_all(p, max_placements, [&](const std::vector<int>& device) { return makespan_in(p, order, device); });
  best.makespan_ms = makespan_in(p, order, best.device);
  best.bottleneck_ms = bottleneck_in(p, p.result_bytes(), best.device);
  return best;
}

Placement place_throughput_exhaustive(const PlacementProblem& p, std::uint64_t max_placements) {
  const std::vector<int> order = rank_order(p);
  const std::vector<double> values = p.result_bytes();
  Placement best = search_all(p, max_placements, [&](const std::vector<int>& device) { return bottleneck_in(p, values, device); });
  best.makespan_ms = makespan_in(p, order, best.device);
  best.bottleneck_ms = bottleneck_in(p, values, best.device);
  return best;
}

}  // namespace redwood::runtime
