// redwood plan MODEL: what the graph optimizer did to a model, pass by pass, and which provider
// (oneDNN or the reference kernels) each node of the optimized graph got.
//
//   redwood plan assets/models/ch_PP-OCRv4_det_infer.onnx [--verbose] [--reference]

#include "apps/redwood/commands.hpp"
#include "core/executor.hpp"
#include "core/onnx/onnx_import.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>

namespace redwood::app {
namespace {

struct PlanArgs {
  std::string model;
  bool verbose = false;
  bool reference = false;
};

int run_plan(const PlanArgs& args) {
  std::shared_ptr<Graph> graph = load_onnx(args.model);
  ExecutorOptions options;
  options.reference_only = args.reference;
  Executor executor(graph, options);
  const Graph& g = executor.graph();
  fmt::print("model: {} (opset {}): {} nodes, {} after optimization\n", args.model, graph->opset,
             graph->nodes.size(), g.nodes.size());
  fmt::print("\npasses:\n");
  for (const auto& r : executor.pass_records()) {
    std::map<std::string, int> kinds;  // first word(s) of each change, counted
    for (const auto& c : r.changes) {
      const auto cut = c.find(" node '");
      kinds[cut == std::string::npos ? c : c.substr(0, cut)]++;
    }
    fmt::print("  {:22s} {:4d} rewrite(s)\n", r.pass, r.changes.size());
    if (args.verbose) {
      for (const auto& c : r.changes) fmt::print("      {}\n", c);
    } else {
      for (const auto& [k, n] : kinds) fmt::print("      {:4d} x {}\n", n, k);
    }
  }
  std::map<std::string, std::map<std::string, int>> per_op;  // op -> provider -> count
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    std::string op = g.nodes[i].op_type;
    if (g.nodes[i].has_attr("rw.activation")) op += "+" + g.nodes[i].attr_string("rw.activation", "");
    if (g.nodes[i].has_input(3)) op += "+residual";
    per_op[op][executor.node_providers()[i]]++;
  }
  fmt::print("\nnodes of the optimized graph, by op and provider:\n");
  for (const auto& [op, providers] : per_op) {
    for (const auto& [p, n] : providers) fmt::print("  {:36s} {:10s} {:4d}\n", op, p, n);
  }
  if (args.verbose) {
    fmt::print("\noptimized graph:\n");
    for (std::size_t i = 0; i < g.nodes.size(); ++i) {
      fmt::print("  {:4d} {:40s} {:10s} {}\n", i, g.nodes[i].where(), executor.node_providers()[i],
                 fmt::join(g.nodes[i].inputs, ", "));
    }
  }
  return 0;
}

}  // namespace

Command make_plan_command() {
  auto args = std::make_shared<PlanArgs>();
  Command c;
  c.attach_fn = [args](CLI::App& app) {
    CLI::App* sub = app.add_subcommand("plan", "Show what the optimizer does to a model and which kernels run it");
    sub->add_option("model", args->model, "ONNX model")->required()->check(CLI::ExistingFile);
    sub->add_flag("--verbose,-v", args->verbose, "List every rewrite and node");
    sub->add_flag("--reference", args->reference, "Place nodes on the reference kernels only");
    return sub;
  };
  c.run = [args] { return run_plan(*args); };
  return c;
}

}  // namespace redwood::app
