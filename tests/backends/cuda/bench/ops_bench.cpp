// redwood_ops_bench: the GPU's elementwise-chain and tensor-core matrix-product kernels against
// the paths they replace, each pair in the same process on the same data.
//
//   redwood_ops_bench chains MODEL.onnx --shape N,C,H,W [--precision fp32] [--runs 50] [--warmup 20]
//       The model through the GPU runner twice: its graph optimized without fuse_elementwise
//       (default_pipeline(false): one kernel per elementwise node, the peer) and with it
//       (gpu_pipeline(): one kernel per chain). The same tuned convolutions (the tuner's cache is
//       per process), the same input. Median CUDA-graph replay of each (CUDA events), the ratio,
//       steps and chains, and the relative L2 between the two outputs.
//   redwood_ops_bench matmul [--mnk B,M,N,K]... [--runs 50] [--warmup 20]
//       launch_gemm on row-major [B,M,K]·[K,N] at exact fp32 (CUDA cores, the peer) and at tf32,
//       fp16, bf16 (tensor cores): median ms, TFLOP/s and speed-up over fp32 per shape.
//   redwood_ops_bench shapes MODEL.onnx --shape N,C,H,W
//       Host only: the chains fuse_elementwise makes and the MatMul/Gemm operand shapes of the
//       model's schedule (to pick matmul shapes).
//
// One JSON line per measurement on stdout.

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/graph_runner.hpp"
#include "backends/cuda/kernels/matmul/matmul.hpp"
#include "backends/cuda/passes/gpu_pipeline.hpp"
#include "core/error.hpp"
#include "core/onnx/onnx_import.hpp"
#include "core/passes/pass_manager.hpp"

#include "bench_support.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace redwood;
using bench::parse_list;
using bench::random_input;
using bench::relative_l2;

struct Args {
  std::string mode, model, precision = "fp32";
  std::vector<std::int64_t> shape;
  std::vector<std::vector<std::int64_t>> mnk;
  int runs = 50, warmup = 20;
};

// Median of `runs` timings of enqueue(stream) after `warmup` untimed ones, CUDA events.
template <typename Enqueue>
double median_ms(cudaStream_t stream, int warmup, int runs, Enqueue enqueue) {
  for (int i = 0; i < warmup; ++i) enqueue();
  RW_CUDA_CHECK(cudaStreamSynchronize(stream));
  const std::vector<double> ms = bench::event_samples(stream, runs, 1, enqueue);
  return ms[ms.size() / 2];
}

std::shared_ptr<Graph> optimized(const Graph& g, const std::vector<passes::NamedPass>& pipeline) {
  auto copy = std::make_shared<Graph>(g);
  passes::optimize(*copy, pipeline);
  return copy;
}

std::size_t count_op(const Graph& g, const std::string& op) {
  return static_cast<std::size_t>(std::count_if(g.nodes.begin(), g.nodes.end(), [&](const Node& n) { return n.op_type == op; }));
}

int chains(const Args& args) {
  auto graph = load_onnx(args.model);
  RW_EXPECTS(graph->inputs.size() == 1, InvalidArgument, "{}: {} inputs (the bench feeds one)", args.model,
             graph->inputs.size());
  const Shape shape(args.shape.begin(), args.shape.end());
  const Tensor x = random_input(shape, 1);
  const std::string input = graph->inputs[0].name;
  struct Side {
    const char* name = "";
    std::shared_ptr<Graph> graph;
    double ms = 0;
    std::size_t steps = 0;
    std::vector<Tensor> out;
  };
  Side sides[2];
  sides[0].name = "separate";
  sides[0].graph = optimized(*graph, passes::default_pipeline(false));
  sides[1].name = "chains";
  sides[1].graph = optimized(*graph, passes::gpu_pipeline());
  for (Side& side : sides) {
    cuda::RunnerOptions options;
    options.precision = cuda::parse_precision(args.precision);
    options.optimize = false;  // optimized above, with or without the chains
    cuda::GraphRunner runner(side.graph, options);
    side.out = runner.run({{input, x}});
    cuda::Plan& plan = runner.plan_for({shape});
    side.steps = plan.schedule().steps.size();
    side.ms = median_ms(runner.stream(), args.warmup, args.runs, [&] { plan.enqueue(runner.stream()); });
  }
  double diff = 0;
  for (std::size_t o = 0; o < sides[0].out.size(); ++o) diff = std::max(diff, relative_l2(sides[1].out[o], sides[0].out[o]));
  std::printf("{\"mode\": \"chains\", \"model\": \"%s\", \"shape\": \"%s\", \"precision\": \"%s\", "
              "\"separate_ms\": %.4f, \"chains_ms\": %.4f, \"speedup\": %.3f, \"separate_steps\": %zu, "
              "\"chain_steps\": %zu, \"chains\": %zu, \"fused_nodes\": %zu, \"rel_l2\": %.3g}\n",
              args.model.c_str(), shape_str(shape).c_str(), args.precision.c_str(), sides[0].ms, sides[1].ms,
              sides[0].ms / sides[1].ms, sides[0].steps, sides[1].steps, count_op(*sides[1].graph, "rw.ElementwiseChain"),
              sides[0].steps - sides[1].steps + count_op(*sides[1].graph, "rw.ElementwiseChain"), diff);
  return 0;
}

int shapes(const Args& args) {
  auto graph = std::make_shared<Graph>(*load_onnx(args.model));
  for (const PassRecord& r : passes::optimize(*graph, passes::gpu_pipeline())) {
    if (r.pass != "fuse_elementwise") continue;
    for (const std::string& line : r.changes) std::printf("{\"mode\": \"shapes\", \"chain\": \"%s\"}\n", line.c_str());
  }
  const Shape shape(args.shape.begin(), args.shape.end());
  const cuda::Schedule s = cuda::build_schedule(*graph, {shape}, cuda::Precision::kFp32);
  for (const auto& step : s.steps) {
    const Node& n = graph->nodes[step.node];
    if (n.op_type != "MatMul" && n.op_type != "Gemm") continue;
    std::string ins;
    for (int id : step.inputs) ins += id < 0 ? "- " : shape_str(s.values[static_cast<std::size_t>(id)].shape) + " ";
    std::printf("{\"mode\": \"shapes\", \"node\": \"%s\", \"op\": \"%s\", \"inputs\": \"%s\"}\n", n.name.c_str(),
                n.op_type.c_str(), ins.c_str());
  }
  return 0;
}

int matmul(const Args& args) {
  using cuda::kernels::MmaType;
  std::vector<std::vector<std::int64_t>> shapes = args.mnk;
  if (shapes.empty()) shapes = {{1, 4096, 4096, 4096}, {1, 1024, 1024, 1024}, {8, 256, 256, 64}};
  cudaStream_t stream = nullptr;
  RW_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (const auto& d : shapes) {
    RW_EXPECTS(d.size() == 4, InvalidArgument, "--mnk takes B,M,N,K");
    const std::int64_t b = d[0], m = d[1], n = d[2], k = d[3];
    const Tensor a = random_input({b, m, k}, 1), w = random_input({k, n}, 2);
    float *da = nullptr, *dw = nullptr, *dy = nullptr;
    RW_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&da), a.nbytes()));
    RW_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&dw), w.nbytes()));
    RW_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&dy), static_cast<std::size_t>(b * m * n) * sizeof(float)));
    RW_CUDA_CHECK(cudaMemcpy(da, a.raw_data(), a.nbytes(), cudaMemcpyHostToDevice));
    RW_CUDA_CHECK(cudaMemcpy(dw, w.raw_data(), w.nbytes(), cudaMemcpyHostToDevice));
    cuda::kernels::GemmParams p{};
    p.batch = static_cast<int>(b);
    p.m = static_cast<int>(m);
    p.n = static_cast<int>(n);
    p.k = static_cast<int>(k);
    p.a_batch = m * k;
    p.a_m = k;
    p.a_k = 1;
    p.b_batch = 0;
    p.b_k = n;
    p.b_n = 1;
    const double flops = 2.0 * static_cast<double>(b * m * n * k);
    double exact_ms = 0;
    for (MmaType t : {MmaType::kFp32, MmaType::kTf32, MmaType::kFp16, MmaType::kBf16}) {
      const double ms = median_ms(stream, args.warmup, args.runs,
                                  [&] { cuda::kernels::launch_gemm(t, p, cuda::kernels::GemmBatches{}, da, dw, dy, stream); });
      if (t == MmaType::kFp32) exact_ms = ms;
      static const char* names[] = {"fp32", "tf32", "fp16", "bf16"};
      std::printf("{\"mode\": \"matmul\", \"b\": %lld, \"m\": %lld, \"n\": %lld, \"k\": %lld, \"precision\": \"%s\", "
                  "\"median_ms\": %.4f, \"tflops\": %.2f, \"speedup_vs_fp32\": %.2f}\n",
                  static_cast<long long>(b), static_cast<long long>(m), static_cast<long long>(n),
                  static_cast<long long>(k), names[static_cast<int>(t)], ms, flops / (ms * 1e-3) / 1e12, exact_ms / ms);
    }
    cudaFree(da);
    cudaFree(dw);
    cudaFree(dy);
  }
  cudaStreamDestroy(stream);
  return 0;
}

int run(int argc, char** argv) {
  Args args;
  RW_EXPECTS(argc >= 2, InvalidArgument,
             "usage: redwood_ops_bench chains|shapes MODEL.onnx --shape N,C,H,W [--precision P] | matmul [--mnk B,M,N,K]... "
             "[--runs N] [--warmup N]");
  args.mode = argv[1];
  int i = 2;
  if (args.mode != "matmul") {
    RW_EXPECTS(argc >= 3, InvalidArgument, "{}: give the model file", args.mode);
    args.model = argv[i++];
  }
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return redwood::bench::option_value(argc, argv, i); };
    if (a == "--shape") args.shape = parse_list(next());
    else if (a == "--precision") args.precision = next();
    else if (a == "--mnk") args.mnk.push_back(parse_list(next()));
    else if (a == "--runs") args.runs = std::stoi(next());
    else if (a == "--warmup") args.warmup = std::stoi(next());
    else throw InvalidArgument(fmt::format("unknown option '{}'", a));
  }
  if (args.mode == "chains" || args.mode == "shapes") {
    RW_EXPECTS(!args.shape.empty(), InvalidArgument, "{}: give --shape", args.mode);
    return args.mode == "chains" ? chains(args) : shapes(args);
  }
  RW_EXPECTS(args.mode == "matmul", InvalidArgument, "unknown mode '{}' (chains, matmul, shapes)", args.mode);
  return matmul(args);
}

}  // namespace

int main(int argc, char** argv) {
  return redwood::bench::guarded_main("redwood_ops_bench", [&] { return run(argc, argv); });
}
