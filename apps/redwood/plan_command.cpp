// redwood plan MODEL: what the graph optimizer did to a model, pass by pass, and which provider
// (oneDNN or the reference kernels) each node of the optimized graph got. With --memory, the
// executor's memory plan for one input shape: the one workspace against the lower bound. With
// --devices (or --profile, --dot, --pin), the partitioner's placement across devices instead
// (apps/redwood/plan_partition.cpp).
//
//   redwood plan assets/models/ch_PP-OCRv4_det_infer.onnx [--verbose] [--reference]
//   redwood plan assets/models/ch_PP-OCRv4_det_infer.onnx --memory --shape 1x3x640x640
//   redwood plan assets/models/ch_PP-OCRv4_det_infer.onnx --devices cpu,cuda --batch 8 --precision fp16 --profile
//   redwood plan --cache-info [MODEL]

#include "apps/redwood/commands.hpp"
#include "apps/redwood/plan_cache_info.hpp"
#include "apps/redwood/plan_partition.hpp"
#include "core/error.hpp"
#include "core/ops/names.hpp"
#include "runtime/executor.hpp"
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
  bool memory = false;
  std::string shape;  // NxCxHxW for a model whose input has dynamic extents
  std::int64_t batch = 1;
  std::string devices = "cpu";
  PartitionArgs partition;
  CLI::App* command = nullptr;  // to ask which options were given
  bool cache_info = false;
};

std::string mib(std::size_t bytes) { return fmt::format("{:.2f} MiB", static_cast<double>(bytes) / (1 << 20)); }

/// The shapes the model runs at: each input's declared extents, a symbolic first one (the batch)
/// from --batch, and every extent from --shape when given (which then applies to every input).
std::vector<Shape> input_shapes(const PlanArgs& args, const Graph& graph) {
  Shape given;
  if (!args.shape.empty()) {
    std::size_t pos = 0;
    while (pos <= args.shape.size()) {
      const std::size_t x = std::min(args.shape.find('x', pos), args.shape.size());
      const std::string part = args.shape.substr(pos, x - pos);
      RW_EXPECTS(!part.empty() && part.find_first_not_of("0123456789") == std::string::npos, InvalidArgument,
                 "--shape '{}': expected extents separated by 'x', e.g. 1x3x640x640", args.shape);
      given.push_back(std::stoll(part));
      pos = x + 1;
    }
  }
  RW_EXPECTS(args.batch > 0, InvalidArgument, "--batch {}: expected a positive number of rows", args.batch);
  std::vector<Shape> shapes;
  for (const auto& vi : graph.inputs) {
    if (!given.empty()) {
      shapes.push_back(given);
      continue;
    }
    Shape shape;
    for (std::size_t d = 0; d < vi.dims.size(); ++d) {
      const bool batch = d == 0 && !vi.dims[d].known();
      RW_EXPECTS(vi.has_shape && (vi.dims[d].known() || batch), InvalidArgument,
                 "{}: input '{}' is {}: give its shape with --shape", args.model, vi.name, vi.description());
      shape.push_back(batch ? args.batch : vi.dims[d].value);
    }
    RW_EXPECTS(vi.has_shape, InvalidArgument, "{}: input '{}' has no declared shape: give it with --shape", args.model,
               vi.name);
    shapes.push_back(shape);
  }
  return shapes;
}

/// Runs the model twice on zeros (the first run records, the second uses the plan) and prints
/// the plan's figures.
void print_memory_plan(const PlanArgs& args, Executor& executor, const Graph& original) {
  const std::vector<Shape> shapes = input_shapes(args, original);
  std::map<std::string, Tensor> inputs;
  for (std::size_t i = 0; i < original.inputs.size(); ++i) {
    const ValueInfo& vi = original.inputs[i];
    inputs[vi.name] = Tensor::zeros(vi.dtype == DType::kUndefined ? DType::kF32 : vi.dtype, shapes[i]);
  }
  executor.run(inputs);
  executor.run(inputs);
  const WorkspaceStats st = executor.workspace_stats();
  std::string what;
  for (const auto& [name, t] : inputs) what += (what.empty() ? "" : ", ") + name + " " + t.description();
  fmt::print("\nmemory plan for {}:\n", what);
  fmt::print("  workspace            {} (one allocation; {} workspace(s) allocated)\n", mib(st.workspace_bytes),
             executor.workspace_allocations());
  fmt::print("  lower bound          {} (largest sum of live intermediates at any step)\n", mib(st.lower_bound));
  fmt::print("  workspace / bound    {:.3f}\n",
             st.lower_bound == 0 ? 1.0 : static_cast<double>(st.workspace_bytes) / static_cast<double>(st.lower_bound));
  fmt::print("  intermediates        {} in the workspace, {} on the heap (graph outputs and their views)\n",
             st.planned_tensors, st.heap_tensors);
}

int run_plan(PlanArgs& args) {
  if (args.cache_info) return print_plan_cache_info(args.model);
  RW_EXPECTS(!args.model.empty(), InvalidArgument, "plan: which model? (redwood plan MODEL; --cache-info alone lists the plan cache)");
  std::shared_ptr<Graph> graph = load_onnx(args.model, OnnxImportOptions{.cache = true});
  // More than the CPU, a profile or a drawing: the partitioner's view.
  PartitionArgs& part = args.partition;
  bool placing = false;
  for (const char* option : {"--devices", "--precision", "--objective", "--pin", "--cpu-only", "--dot", "--profile", "--runs"}) {
    placing = placing || args.command->count(option) > 0;
  }
  if (placing) {
    part.model = args.model;
    part.verbose = args.verbose;
    part.devices.clear();
    std::size_t pos = 0;
    while (pos <= args.devices.size()) {
      const std::size_t comma = std::min(args.devices.find(',', pos), args.devices.size());
      part.devices.push_back(args.devices.substr(pos, comma - pos));
      pos = comma + 1;
    }
    part.input_shapes = input_shapes(args, *graph);
    return run_partition_plan(graph, part);
  }
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
    if (args.verbose || r.pass == "form_regions") {  // regions: one line each, always
      for (const auto& c : r.changes) fmt::print("      {}\n", c);
    } else {
      for (const auto& [k, n] : kinds) fmt::print("      {:4d} x {}\n", n, k);
    }
  }
  // Chains that become constant once the input shapes are bound (runtime/executor.hpp).
  if (!executor.shape_folded_nodes().empty()) {
    std::map<std::string, int> ops;
    for (std::size_t i : executor.shape_folded_nodes()) ops[g.nodes[i].op_type]++;
    fmt::print("  {:22s} {:4d} node(s) run once per input shape, then reused:", "fold_per_shape",
               executor.shape_folded_nodes().size());
    for (const auto& [op, n] : ops) fmt::print(" {} {}", n, op);
    fmt::print("\n");
    if (args.verbose) {
      for (std::size_t i : executor.shape_folded_nodes()) fmt::print("      {}\n", g.nodes[i].where());
    }
  }
  // "Conv+HardSwish+residual": the op with its fused epilogue (core/ops/epilogue.hpp).
  auto label = [](const Node& n) {
    std::string op = n.op_type;
    if (n.has_attr(ops::attr::kActivation)) op += "+" + n.attr_string(ops::attr::kActivation, "");
    const bool epilogue = op.rfind("Conv", 0) == 0 || n.op_type == "Gemm" || n.op_type == "MatMul";
    if (epilogue && n.has_input(3)) op += "+residual";
    return op;
  };
  std::map<std::string, std::map<std::string, int>> per_op;  // op -> provider -> count
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    per_op[label(g.nodes[i])][executor.node_providers()[i]]++;
    // A region's nodes, counted as "<provider> region" (one kernel runs them all).
    for (const Node& n : g.nodes[i].body) per_op[label(n)][executor.node_providers()[i] + " region"]++;
  }
  fmt::print("\nnodes of the optimized graph, by op and provider (a region counts as one node, its members\n"
             "as '<provider> region'):\n");
  for (const auto& [op, providers] : per_op) {
    for (const auto& [p, n] : providers) fmt::print("  {:36s} {:16s} {:4d}\n", op, p, n);
  }
  if (args.memory) print_memory_plan(args, executor, *graph);
  if (args.verbose) {
    fmt::print("\noptimized graph:\n");
    for (std::size_t i = 0; i < g.nodes.size(); ++i) {
      // Inputs that are not initializers (weights are counted, not listed).
      std::vector<std::string> ins;
      std::size_t constants = 0;
      for (const auto& in : g.nodes[i].inputs) {
        if (!in.empty() && g.find_initializer(in)) ++constants;
        else ins.push_back(in);
      }
      fmt::print("  {:4d} {:40s} {:10s} {}{}\n", i, g.nodes[i].where(), executor.node_providers()[i],
                 fmt::join(ins, ", "), constants ? fmt::format(" (+{} constant(s))", constants) : "");
      for (const Node& n : g.nodes[i].body) {
        fmt::print("         | {:40s} {}\n", n.where(), fmt::join(n.inputs, ", "));
      }
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
    args->command = sub;
    sub->add_option("model", args->model, "ONNX model")->check(CLI::ExistingFile);
    sub->add_flag("--cache-info", args->cache_info,
                  "List the plan cache (tuned GPU plans kept on disk); with MODEL, its entries and whether they are valid here");
    sub->add_flag("--verbose,-v", args->verbose, "List every rewrite and node");
    sub->add_flag("--reference", args->reference, "Place nodes on the reference kernels only");
    sub->add_flag("--memory", args->memory, "Run the model on zeros and print its memory plan (workspace against the lower bound)");
    sub->add_option("--shape", args->shape, "Input shape, e.g. 1x3x640x640 (needed for inputs with dynamic extents beyond the batch)");
    sub->add_option("--batch", args->batch, "Rows of a dynamic first dimension (default 1)");
    sub->add_option("--devices", args->devices,
                    "Place the model's nodes across these devices, cpu first, e.g. cpu,cuda: prints the placement, "
                    "its baselines and segments");
    sub->add_option("--precision", args->partition.precision, "What the accelerators compute in: fp32, tf32, fp16, bf16");
    sub->add_option("--objective", args->partition.objective,
                    "latency (one batch's time) or throughput (the busiest device per batch)");
    sub->add_option("--pin", args->partition.pins, "NODE=DEVICE: run that node there whatever it costs (repeatable)");
    sub->add_option("--cpu-only", args->partition.cpu_only,
                    "OP: place as if the accelerators had no kernel for this op type (repeatable)");
    sub->add_option("--dot", args->partition.dot, "Write the placement as a Graphviz graph to this file");
    sub->add_flag("--profile", args->partition.profile,
                  "Measure every node on its device first (kept in the cost history), then each segment: predicted "
                  "against measured");
    sub->add_option("--runs", args->partition.runs, "Batches timed by --profile (default 20)");
    return sub;
  };
  c.run = [args] { return run_plan(*args); };
  return c;
}

}  // namespace redwood::app
