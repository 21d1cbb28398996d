// place_throughput_ilp: the placement with the least bottleneck, as a mixed-integer program that
// GLPK solves by branch and cut (runtime/placement.hpp says what the bottleneck is).
//
//   minimize  T
//   x[v][d]   in {0, 1}, for each device d that can run node v; sum over d of x[v][d] = 1
//   w[u][a][b] >= x[u][a] + x[v][b] - 1, for each edge u -> v and devices a != b
//             (u's result crosses from a to b; continuous in [0, 1], integral at the optimum)
//   T >= sum over v of cost[v][d] * x[v][d], for each device d
//   T >= the bytes every crossing, input and output moves over a -> b, for each link a -> b
//
// w is per producer and device pair, not per edge: a result crosses to a device once, however
// many nodes there read it.

#include "runtime/placement.hpp"

#include "core/error.hpp"

#include <glpk.h>

#include <algorithm>
#include <map>
#include <memory>
#include <tuple>

namespace redwood::runtime {

namespace {

struct ProblemDeleter {
  void operator()(glp_prob* p) const { glp_delete_prob(p); }
};

// Rows are added one at a time from sparse (column, coefficient) lists; GLPK indexes from 1.
void add_row(glp_prob* lp, int type, double bound, const std::vector<std::pair<int, double>>& terms) {
  const int row = glp_add_rows(lp, 1);
  glp_set_row_bnds(lp, row, type, bound, bound);
  std::vector<int> cols{0};
  std::vector<double> values{0};
  for (const auto& [c, v] : terms) cols.push_back(c), values.push_back(v);
  glp_set_mat_row(lp, row, static_cast<int>(terms.size()), cols.data(), values.data());
}

}  // namespace

Placement place_throughput_ilp(const PlacementProblem& p, double time_limit_s) {
  p.validate();
  const int n = static_cast<int>(p.nodes.size()), d = static_cast<int>(p.devices.size());
  std::unique_ptr<glp_prob, ProblemDeleter> owner(glp_create_prob());
  glp_prob* lp = owner.get();
  glp_set_obj_dir(lp, GLP_MIN);

  const int t = glp_add_cols(lp, 1);  // the bottleneck
  glp_set_col_bnds(lp, t, GLP_LO, 0, 0);
  glp_set_obj_coef(lp, t, 1);
  std::vector<std::vector<int>> x(static_cast<std::size_t>(n), std::vector<int>(static_cast<std::size_t>(d), 0));
  for (int v = 0; v < n; ++v) {
    std::vector<std::pair<int, double>> one;
    for (int k = 0; k < d; ++k) {
      if (p.nodes[static_cast<std::size_t>(v)].cost_ms[static_cast<std::size_t>(k)] == kUnsupported) continue;
      const int c = glp_add_cols(lp, 1);
      glp_set_col_kind(lp, c, GLP_BV);
      x[static_cast<std::size_t>(v)][static_cast<std::size_t>(k)] = c;
      one.emplace_back(c, 1.0);
    }
    add_row(lp, GLP_FX, 1, one);
  }
  auto col = [&](int v, int k) { return x[static_cast<std::size_t>(v)][static_cast<std::size_t>(k)]; };

  // Crossings: w[u][a][b] for a result that may leave a for b, forced by every edge u -> v.
  const std::vector<double> value = p.result_bytes();
  std::map<std::tuple<int, int, int>, int> w;
  for (const auto& e : p.edges) {
    for (int a = 0; a < d; ++a) {
      for (int b = 0; b < d; ++b) {
        if (a == b || col(e.from, a) == 0 || col(e.to, b) == 0) continue;
        auto [it, fresh] = w.try_emplace({e.from, a, b}, 0);
        if (fresh) {
          it->second = glp_add_cols(lp, 1);
          glp_set_col_bnds(lp, it->second, GLP_DB, 0, 1);
        }
        add_row(lp, GLP_LO, -1, {{it->second, 1.0}, {col(e.from, a), -1.0}, {col(e.to, b), -1.0}});
      }
    }
  }

  // The bottleneck is above every device's load and every link's.
  for (int k = 0; k < d; ++k) {
    std::vector<std::pair<int, double>> load{{t, 1.0}};
    for (int v = 0; v < n; ++v) {
      if (col(v, k)) load.emplace_back(col(v, k), -p.nodes[static_cast<std::size_t>(v)].cost_ms[static_cast<std::size_t>(k)]);
    }
    add_row(lp, GLP_LO, 0, load);
  }
  for (int a = 0; a < d; ++a) {
    for (int b = 0; b < d; ++b) {
      if (a == b) continue;
      std::vector<std::pair<int, double>> load{{t, 1.0}};
      for (const auto& [key, c] : w) {
        const auto [u, from, to] = key;
        if (from == a && to == b) load.emplace_back(c, -p.transfer_ms(a, b, value[static_cast<std::size_t>(u)]));
      }
      for (int v = 0; v < n; ++v) {
        const auto& node = p.nodes[static_cast<std::size_t>(v)];
        if (a == 0 && node.input_bytes > 0 && col(v, b)) load.emplace_back(col(v, b), -p.transfer_ms(0, b, node.input_bytes));
        if (b == 0 && node.output_bytes > 0 && col(v, a)) load.emplace_back(col(v, a), -p.transfer_ms(a, 0, node.output_bytes));
      }
      if (load.size() > 1) add_row(lp, GLP_LO, 0, load);
    }
  }

  glp_iocp options;
  glp_init_iocp(&options);
  options.presolve = GLP_ON;
  options.msg_lev = GLP_MSG_OFF;
  options.tm_lim = static_cast<int>(std::min(time_limit_s, 2e6) * 1000);
  // The search's proven bound as it rises: the least bound over the subproblems still open. Kept
  // for a search the time limit stops, to say how far its best can be from the optimum.
  double bound = 0;
  options.cb_info = &bound;
  options.cb_func = [](glp_tree* tree, void* info) {
    const int open = glp_ios_best_node(tree);
    if (open != 0) {
      double& best = *static_cast<double*>(info);
      best = std::max(best, glp_ios_node_bound(tree, open));
    }
  };
  const int rc = glp_intopt(lp, &options);
  const int status = glp_mip_status(lp);
  RW_EXPECTS((rc == 0 || rc == GLP_ETMLIM) && (status == GLP_OPT || status == GLP_FEAS), Error,
             "GLPK found no placement of {} nodes on {} devices (glp_intopt {}, status {})", n, d, rc, status);
  Placement out;
  out.device.assign(static_cast<std::size_t>(n), 0);
  for (int v = 0; v < n; ++v) {
    for (int k = 0; k < d; ++k) {
      if (col(v, k) && glp_mip_col_val(lp, col(v, k)) > 0.5) out.device[static_cast<std::size_t>(v)] = k;
    }
  }
  out.proven_optimal = rc == 0 && status == GLP_OPT;
  out.makespan_ms = makespan(p, out.device);
  out.bottleneck_ms = bottleneck(p, out.device);
  out.lower_bound_ms = out.proven_optimal ? out.bottleneck_ms : std::min(bound, out.bottleneck_ms);
  return out;
}

}  // namespace redwood::runtime
