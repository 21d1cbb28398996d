// redwood_gpu_bench: times one ONNX model on the GPU graph runner, the Redwood side of
// scripts/bench_gpu.py (which runs PyTorch on the same ONNX file and prints the ratios). It links
// no OpenCV, so it bundles small enough for the GPU host.
//
//   redwood_gpu_bench MODEL.onnx --batch 32 --precision fp16 [--shape 3,224,224] [--runs 50]
//                     [--warmup 20] [--check] [--cpu-runs 10] [--verbose]
//
// Prints one JSON line: the median, min and p90 of `runs` CUDA-graph replays timed with CUDA
// events (after `warmup` replays), the plan's FLOPs (convolutions and matrix products) and the
// fewest bytes a forward pass must move (weights, input and output once, at the precision's
// width), and with --check the relative L2 error against the reference executor on one batch.
// Also the median of host-to-host runs (GraphRunner::run: copy in through pinned staging,
// replay, copy out; what the infer stage pays), wall clock, at most 20 of them, and of the host's
// time in the replay's launch call alone (launch_host_us, on an idle stream).
// With --cpu-runs N, the Redwood CPU executor (the default: optimized, oneDNN, all cores) runs the
// same input N times after 2 warm-ups (wall clock): its median and min, and the relative L2
// between its outputs and the GPU's (the same input, so the CPU is a peer in the same run).
// With --verbose (and --profile: every step, not the 15 slowest), the NHWC groups the layout pass made and the tuned variant of each convolution (tile, split-K, how it was picked) goes to
// stderr. With --profile, where the time goes (Plan::time_steps: each step launched alone between
// two events): per op type, the slowest steps, and the launch gaps of a replay, on stderr.
// --no-nhwc keeps fp32 NCHW tensors between kernels at fp16/bf16/tf32 (RunnerOptions::nhwc), for
// comparing with the NHWC activations that are the default there (16-bit; fp32 at tf32).
// --cuda NAME=off (repeatable) sets a CUDA option (backends/cuda/cuda_options.hpp: wgmma, tma,
// pdl, ...), to time a kernel family or rewrite against the defaults.

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/graph_runner.hpp"
#include "core/error.hpp"
#include "runtime/executor.hpp"
#include "core/onnx/onnx_import.hpp"

#include "bench_support.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace redwood;
using bench::parse_list;
using bench::random_input;
using bench::relative_l2;

// FLOPs of one step if it is a convolution or a matrix product (2 per multiply-add), else 0.
double step_flops(const Graph& g, const cuda::Schedule& s, const cuda::Schedule::Step& step) {
  const Node& n = g.nodes[step.node];
  auto shape = [&](int id) { return s.values[static_cast<std::size_t>(id)].shape; };
  if (n.op_type == "Conv" || n.op_type == "ConvTranspose") {
    const Shape w = shape(step.inputs[1]);
    double per = 1;
    for (std::size_t d = 1; d < w.size(); ++d) per *= static_cast<double>(w[d]);
    const double outputs = static_cast<double>(shape_numel(n.op_type == "Conv" ? shape(step.outputs[0]) : shape(step.inputs[0])));
    return 2 * outputs * per;
  }
  if (n.op_type == "rw.ConvNhwc" || n.op_type == "rw.DepthwiseConvNhwc") {  // W [K, R, S, C] or [R, S, C]
    const Shape w = shape(step.inputs[1]);
    const double per = static_cast<double>(n.op_type == "rw.ConvNhwc" ? w[1] * w[2] * w[3] : w[0] * w[1]);
    return 2 * static_cast<double>(shape_numel(shape(step.outputs[0]))) * per;  // padded channels count
  }
  if (n.op_type == "MatMul" || n.op_type == "Gemm") {
    const Shape a = shape(step.inputs[0]);
    const bool ta = n.op_type == "Gemm" && n.attr_int("transA", 0) != 0;
    const double k = static_cast<double>(ta ? a[0] : a.back());
    return 2 * static_cast<double>(shape_numel(shape(step.outputs[0]))) * k;
  }
  return 0;
}

double plan_flops(const Graph& g, const cuda::Schedule& s) {
  double flops = 0;
  for (const auto& step : s.steps) flops += step_flops(g, s, step);
  return flops;
}

// --profile: where a forward pass spends its time (Plan::time_steps), on stderr: per op type,
// then the slowest steps, and the replay's time beyond the kernels' sum (launch gaps).
// all_steps (--verbose): every step, slowest first; else the 15 slowest.
void print_profile(const Graph& g, cuda::Plan& plan, cudaStream_t stream, int runs, double replay_ms, bool all_steps) {
  const cuda::Schedule& s = plan.schedule();
  const std::vector<double> t = plan.time_steps(stream, runs);
  double sum = 0;
  for (double v : t) sum += v;
  struct Op {
    std::string type;
    int steps = 0;
    double ms = 0, flops = 0;
  };
  std::vector<Op> ops;
  for (std::size_t i = 0; i < t.size(); ++i) {
    const Node& n = g.nodes[s.steps[i].node];
    auto it = std::find_if(ops.begin(), ops.end(), [&](const Op& o) { return o.type == n.op_type; });
    if (it == ops.end()) it = ops.insert(ops.end(), Op{n.op_type});
    ++it->steps;
    it->ms += t[i];
    it->flops += step_flops(g, s, s.steps[i]);
  }
  std::sort(ops.begin(), ops.end(), [](const Op& a, const Op& b) { return a.ms > b.ms; });
  std::fprintf(stderr, "profile: %zu steps, kernels %.4f ms (each launched alone, medians of %d), replay %.4f ms, "
                       "launch gaps %.4f ms\n", t.size(), sum, runs, replay_ms, replay_ms - sum);
  std::fprintf(stderr, "  %-24s %6s %10s %7s %10s\n", "op", "steps", "ms", "share", "TFLOP/s");
  for (const Op& o : ops) {
    std::fprintf(stderr, "  %-24s %6d %10.4f %6.1f%% %10.1f\n", o.type.c_str(), o.steps, o.ms, 100 * o.ms / sum,
                 o.flops > 0 && o.ms > 0 ? o.flops / (o.ms * 1e9) : 0.0);
  }
  std::vector<std::size_t> order(t.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return t[a] > t[b]; });
  std::fprintf(stderr, "  slowest steps%s:\n", all_steps ? " (all)" : "");
  for (std::size_t k = 0; k < (all_steps ? order.size() : std::min<std::size_t>(15, order.size())); ++k) {
    const auto& step = s.steps[order[k]];
    const double f = step_flops(g, s, step);
    std::fprintf(stderr, "  %8.4f ms %7.1f TFLOP/s  %s %s [%s] %s\n", t[order[k]], f > 0 ? f / (t[order[k]] * 1e9) : 0.0,
                 g.nodes[step.node].op_type.c_str(), g.nodes[step.node].name.c_str(),
                 shape_str(s.values[static_cast<std::size_t>(step.outputs[0])].shape).c_str(),
                 cuda::cuda_kernel(step).variant().c_str());
  }
}

int run(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: redwood_gpu_bench MODEL.onnx [--batch N] [--precision fp32|tf32|fp16|bf16] "
                         "[--shape C,H,W] [--runs N] [--warmup N] [--check] [--cpu-runs N] [--verbose] [--profile] [--no-nhwc] "
                         "[--cuda NAME=on|off ...]\n");
    return 2;
  }
  std::string model = argv[1], precision = "fp32", dims;
  int batch = 1, runs = 50, warmup = 20, cpu_runs = 0;
  bool check = false, verbose = false, profile = false, nhwc = true;
  cuda::CudaOptions cuda_options;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return redwood::bench::option_value(argc, argv, i); };
    if (a == "--batch") batch = std::stoi(next());
    else if (a == "--precision") precision = next();
    else if (a == "--shape") dims = next();
    else if (a == "--runs") runs = std::stoi(next());
    else if (a == "--warmup") warmup = std::stoi(next());
    else if (a == "--check") check = true;
    else if (a == "--cpu-runs") cpu_runs = std::stoi(next());
    else if (a == "--verbose") verbose = true;
    else if (a == "--profile") profile = true;
    else if (a == "--no-nhwc") nhwc = false;
    else if (a == "--cuda") cuda::set_cuda_option(cuda_options, next());
    else throw InvalidArgument(fmt::format("unknown option '{}'", a));
  }
  auto graph = load_onnx(model);
  RW_EXPECTS(graph->inputs.size() == 1, InvalidArgument, "{}: {} inputs (the bench feeds one)", model, graph->inputs.size());
  Shape shape = {batch};
  if (!dims.empty()) {
    for (std::int64_t d : parse_list(dims)) shape.push_back(d);
  } else {
    const ValueInfo& vi = graph->inputs[0];
    for (std::size_t d = 1; d < vi.dims.size(); ++d) {
      RW_EXPECTS(vi.dims[d].known(), InvalidArgument, "{}: input {} has a free dimension: give --shape", model, vi.description());
      shape.push_back(vi.dims[d].value);
    }
  }
  cuda::RunnerOptions options;
  options.precision = cuda::parse_precision(precision);
  options.nhwc = nhwc;
  options.cuda = cuda_options;
  cuda::GraphRunner runner(graph, options);
  const Tensor x = random_input(shape, 1);
  const std::string input = graph->inputs[0].name;
  double error = -1;
  if (check) {
    const auto got = runner.run({{input, x}});
    ExecutorOptions ref;
    ref.optimize = false;
    ref.reference_only = true;
    Executor reference(graph, ref);
    const auto want = reference.run({{input, x}});
    error = 0;
    for (std::size_t o = 0; o < want.size(); ++o) error = std::max(error, relative_l2(got[o], want[o]));
  } else {
    runner.run({{input, x}});  // plans, uploads weights, captures; the input stays in the workspace
  }
  cuda::Plan& plan = runner.plan_for({shape});
  if (verbose) {  // the layout pass's line and the tuner's picks, on stderr (stdout is the JSON row)
    for (const PassRecord& r : runner.pass_records()) {
      if (r.pass == "choose_gpu_layout") {
        for (const std::string& c : r.changes) std::fprintf(stderr, "layout: %s\n", c.c_str());
      }
    }
    for (const std::string& v : plan.variants()) std::fprintf(stderr, "%s\n", v.c_str());
  }
  cudaStream_t stream = runner.stream();
  for (int i = 0; i < warmup; ++i) plan.enqueue(stream);
  RW_CUDA_CHECK(cudaStreamSynchronize(stream));
  const std::vector<double> ms = bench::event_samples(stream, runs, 1, [&] { plan.enqueue(stream); });
  if (profile) print_profile(runner.graph(), plan, stream, runs, ms[ms.size() / 2], verbose);

  using Clock = std::chrono::steady_clock;
  const auto wall_ms = [](Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); };
  std::vector<double> host_ms;
  std::vector<Tensor> gpu_out;
  for (int i = 0; i < std::min(runs, 20); ++i) {
    const auto t0 = Clock::now();
    gpu_out = runner.run({{input, x}});
    host_ms.push_back(wall_ms(t0));
  }
  std::sort(host_ms.begin(), host_ms.end());
  // The host's side of a replay: the launch call alone, on an idle stream (what a runner's submit
  // spends queueing the plan; the GPU runs it after).
  std::vector<double> launch_us;
  for (int i = 0; i < std::min(runs, 20); ++i) {
    RW_CUDA_CHECK(cudaStreamSynchronize(stream));
    const auto t0 = Clock::now();
    plan.enqueue(stream);
    launch_us.push_back(wall_ms(t0) * 1000);
  }
  RW_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::sort(launch_us.begin(), launch_us.end());

  std::vector<double> cpu_ms;
  double cpu_vs_gpu = -1;
  if (cpu_runs > 0) {
    Executor cpu(graph);  // the CPU path of the infer stage (core/model_runner.cpp)
    std::vector<Tensor> cpu_out;
    for (int i = 0; i < 2; ++i) cpu_out = cpu.run({{input, x}});
    for (int i = 0; i < cpu_runs; ++i) {
      const auto t0 = Clock::now();
      cpu_out = cpu.run({{input, x}});
      cpu_ms.push_back(wall_ms(t0));
    }
    std::sort(cpu_ms.begin(), cpu_ms.end());
    cpu_vs_gpu = 0;
    for (std::size_t o = 0; o < cpu_out.size(); ++o) cpu_vs_gpu = std::max(cpu_vs_gpu, relative_l2(gpu_out[o], cpu_out[o]));
  }
  const cuda::Schedule& s = plan.schedule();
  const std::size_t width = options.precision == cuda::Precision::kFp16 || options.precision == cuda::Precision::kBf16 ? 2 : 4;
  double weights = 0, io = static_cast<double>(shape_numel(shape));
  for (const auto& v : s.values) {
    if (v.kind == cuda::Schedule::Kind::kHost && v.uploaded) weights += static_cast<double>(shape_numel(v.shape));
  }
  for (int id : s.graph_outputs) io += static_cast<double>(shape_numel(s.values[static_cast<std::size_t>(id)].shape));
  std::printf("{\"model\": \"%s\", \"batch\": %d, \"precision\": \"%s\", \"median_ms\": %.4f, \"min_ms\": %.4f, "
              "\"p90_ms\": %.4f, \"flops\": %.6g, \"min_bytes\": %.6g, \"steps\": %zu, \"workspace_mib\": %.1f, "
              "\"rel_l2\": %.3g, \"host_median_ms\": %.4f, \"launch_host_us\": %.1f, \"cpu_median_ms\": %.4f, \"cpu_min_ms\": %.4f, "
              "\"cpu_runs\": %d, \"cpu_threads\": %u, \"cpu_vs_gpu_rel_l2\": %.3g, \"cuda_options\": \"%s\"}\n",
              model.c_str(), batch, precision.c_str(), ms[ms.size() / 2], ms.front(), ms[ms.size() * 9 / 10],
              plan_flops(runner.graph(), s), (weights + io) * static_cast<double>(width), s.steps.size(),
              s.workspace.workspace_bytes / 1048576.0, error, host_ms[host_ms.size() / 2], launch_us[launch_us.size() / 2],
              cpu_ms.empty() ? -1.0 : cpu_ms[cpu_ms.size() / 2], cpu_ms.empty() ? -1.0 : cpu_ms.front(), cpu_runs,
              std::thread::hardware_concurrency(), cpu_vs_gpu, cuda::describe(cuda_options).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return redwood::bench::guarded_main("redwood_gpu_bench", [&] { return run(argc, argv); });
}
