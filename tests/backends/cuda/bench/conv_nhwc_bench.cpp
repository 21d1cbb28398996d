// redwood_conv_bench: rw.ConvNhwc (fp16 NHWC activations, conv_nhwc.cpp) against the Conv
// kernel at fp16 precision on fp32 NCHW tensors (conv.cpp, the path it replaces), each layer in
// the same process on the same values, through the op registry as the graph runner uses them:
// plan, tune (each kernel's own tuner, generous budget), then the median of timed launches
// (CUDA events, one launch each). Both fuse bias + Relu as ResNet's layers do.
//
//   redwood_conv_bench [--layer N,C,H,W,K,R,S,STRIDE,PAD]... [--runs 50] [--warmup-ms 200] [--families]
//                      [--tf32] [--residual]
//
// --tf32: the same at precision tf32 instead: rw.ConvNhwc on fp32 NHWC tensors (tf32 products,
// channels padded to 4) against the Conv kernel at tf32 on fp32 NCHW tensors, and with
// --families the fp32-storage candidates (mma.sync tf32 and, where they run, wgmma tf32).
//
// Before each kernel's tuning it runs untimed launches for --warmup-ms of GPU time (and a quarter
// of that again before the timed ones): an idle H200 clocks down, and the host work between
// layers leaves it idle.
//
// Without --layer: ResNet-50 batch-32 layers (3×3 64→64 @56, 3×3 256→256 @14, 1×1 1024→256 @14,
// 1×1 256→1024 @14, 3×3 512→512 @7, the 7×7/2 stem 3→64 @224 whose NHWC input is padded to 8
// channels) and two at batch 1. TFLOP/s counts the layer's own multiply-adds (the stem's 3
// channels, not the 8 the NHWC kernel computes). rel_l2: the NHWC output against the NCHW one.
// One JSON line per layer on stdout.
//
// --residual: only the families, each launch adding a residual of the output's shape (as ResNet's
// 1×1 expansions do).
//
// --families: also, per layer, every (tile, split) candidate of rw.ConvNhwc launched directly
// (launch_conv_nhwc, the same fp16 operands, split-K counters from the pool as the op uses), and
// the fastest of each kernel family side by side: mma.sync (conv_nhwc_mma.cuh) and, on a compute
// capability 9.0 GPU of a build with sm_90, Hopper wgmma (conv_nhwc_wgmma.cuh) and the TMA-fed
// wgmma tiles (conv_nhwc_wgmma_tma.cuh, where the layer fits them). One JSON line ("mode":
// "conv_nhwc_families") per layer.

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_kernel.hpp"
#include "backends/cuda/device_tensor.hpp"
#include "backends/cuda/kernels/conv/conv_kernels.hpp"
#include "backends/cuda/kernels/conv_nhwc/conv_nhwc.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"

#include "bench_support.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

using namespace redwood;
using bench::parse_list;
using bench::random_input;
using bench::relative_l2;

struct Layer {
  std::int64_t n, c, h, w, k, r, s, stride, pad;
  std::int64_t oh() const { return (h + 2 * pad - r) / stride + 1; }
  std::int64_t ow() const { return (w + 2 * pad - s) / stride + 1; }
  double flops() const { return 2.0 * n * oh() * ow() * k * c * r * s; }
  std::string name() const {
    return fmt::format("n{} {}x{}/{} {}->{} @{}x{}", n, r, s, stride, c, k, h, w);
  }
};

std::vector<Layer> default_layers() {
  return {{32, 64, 56, 56, 64, 3, 3, 1, 1},    {32, 256, 14, 14, 256, 3, 3, 1, 1}, {32, 1024, 14, 14, 256, 1, 1, 1, 0},
          {32, 256, 14, 14, 1024, 1, 1, 1, 0}, {32, 512, 7, 7, 512, 3, 3, 1, 1},   {32, 3, 224, 224, 64, 7, 7, 2, 3},
          {1, 512, 7, 7, 512, 3, 3, 1, 1},     {1, 64, 56, 56, 64, 3, 3, 1, 1}};
}

// One kernel from the op registry (provider "cuda"), its node kept alive beside it.
struct Op {
  std::unique_ptr<Node> node;
  std::unique_ptr<Kernel> kernel;
  cuda::CudaKernel* cuda = nullptr;
};

Op make_op(const std::string& op_type, const Layer& l, const std::vector<DType>& dtypes) {
  Op op;
  op.node = std::make_unique<Node>();
  op.node->name = "bench_" + op_type;
  op.node->op_type = op_type;
  op.node->attributes["strides"] = std::vector<std::int64_t>{l.stride, l.stride};
  op.node->attributes["pads"] = std::vector<std::int64_t>{l.pad, l.pad, l.pad, l.pad};
  op.node->attributes["dilations"] = std::vector<std::int64_t>{1, 1};
  op.node->attributes["rw.activation"] = std::string("Relu");
  static Graph graph;
  KernelInfo info;
  info.graph = &graph;
  info.opset = 17;
  for (std::size_t i = 0; i < dtypes.size(); ++i) {
    op.node->inputs.push_back("in" + std::to_string(i));
    info.input_dtypes.push_back(dtypes[i]);
    info.constant_inputs.push_back(nullptr);
  }
  op.node->outputs.push_back("y");
  for (const KernelEntry* e : OpRegistry::instance().candidates(op_type, Device::kCuda)) {
    if (e->provider == std::string(cuda::kCudaProvider)) op.kernel = e->factory(*op.node, info);
  }
  RW_EXPECTS(op.kernel != nullptr, Unsupported, "no cuda kernel for {}", op_type);
  op.cuda = dynamic_cast<cuda::CudaKernel*>(op.kernel.get());
  return op;
}

// Plans, tunes and times `op` on device inputs; returns the median ms and the output (host).
double time_op(Op& op, const std::vector<Tensor>& inputs, cuda::Precision precision, cudaStream_t stream,
               float warmup_ms, int runs, Tensor* out, std::string* variant) {
  std::vector<TensorDesc> descs;
  std::vector<cuda::DeviceArg> args;
  for (const Tensor& t : inputs) {
    descs.push_back({t.dtype(), t.shape(), nullptr});
    args.push_back({t.raw_data(), t.dtype(), t.shape()});
  }
  const auto planned = op.cuda->plan(cuda::PlanInfo{*op.node, descs, precision, 17});
  const Tensor y = cuda::device_empty(planned.at(0).dtype, planned.at(0).shape);
  const std::vector<cuda::DeviceArg> outs = {{y.raw_data(), y.dtype(), y.shape()}};
  const std::size_t ws_bytes = op.cuda->workspace_bytes();
  const Tensor ws = ws_bytes > 0 ? cuda::device_empty(DType::kU8, {static_cast<std::int64_t>(ws_bytes)}) : Tensor();
  const cuda::LaunchArgs la{args, outs, stream, ws.defined() ? ws.raw_data() : nullptr};
  std::vector<cudaEvent_t> ev(2);
  for (auto& e : ev) RW_CUDA_CHECK(cudaEventCreate(&e));
  auto spin = [&](float ms) {
    for (float spun = 0; spun < ms;) {
      RW_CUDA_CHECK(cudaEventRecord(ev[0], stream));
      for (int i = 0; i < 20; ++i) op.cuda->launch(la);
      RW_CUDA_CHECK(cudaEventRecord(ev[1], stream));
      RW_CUDA_CHECK(cudaEventSynchronize(ev[1]));
      float t = 0;
      RW_CUDA_CHECK(cudaEventElapsedTime(&t, ev[0], ev[1]));
      spun += t;
    }
  };
  spin(warmup_ms);  // the tuner's timings at full clocks too
  cuda::TuneBudget budget{10000};
  op.cuda->tune(la, budget);
  *variant = op.cuda->variant();
  spin(warmup_ms / 4);
  for (auto& e : ev) cudaEventDestroy(e);
  const std::vector<double> ms = bench::event_samples(stream, runs, 1, [&] { op.cuda->launch(la); });
  *out = cuda::to_host(y, stream);
  return ms[ms.size() / 2];
}

// The fastest mma.sync and wgmma candidates of one layer (fp16, bias + Relu), each timed as the
// median of `runs` single launches after a few untimed ones.
struct FamilyBest {
  double ms = 0;
  std::string pick = "-";
};
void time_families(const Layer& l, const Tensor& x_nhwc, const Tensor& w_nhwc, const Tensor& bias, float warmup_ms,
                   int runs, cudaStream_t stream, bool residual) {
  // The storage type of the operands: fp16, or fp32 (--tf32: tf32 products).
  namespace k = cuda::kernels;
  const int cp = static_cast<int>(x_nhwc.shape()[3]);
  const k::ConvShape p{static_cast<int>(l.n), cp, static_cast<int>(l.h), static_cast<int>(l.w),
                       static_cast<int>(l.k), static_cast<int>(l.r), static_cast<int>(l.s),
                       static_cast<int>(l.oh()), static_cast<int>(l.ow()), static_cast<int>(l.stride),
                       static_cast<int>(l.stride), static_cast<int>(l.pad), static_cast<int>(l.pad), 1, 1, 1};
  const int sms = cuda::multiprocessor_count();
  const bool wgmma = k::nhwc_wgmma_usable();
  const DType s = x_nhwc.dtype();
  const k::NhwcStorage storage = s == DType::kF32 ? k::NhwcStorage::kF32 : k::NhwcStorage::kF16;
  const auto cands = k::nhwc_conv_candidates(p, sms, {.wgmma = wgmma, .tma = wgmma}, storage);
  std::size_t ws_bytes = 0;
  long long tiles = 0;
  for (const auto& c : cands) {
    ws_bytes = std::max(ws_bytes, k::nhwc_conv_workspace_bytes(p, c));
    tiles = std::max(tiles, k::nhwc_conv_tile_count(p, c));
  }
  const Tensor ws = cuda::device_empty(DType::kU8, {static_cast<std::int64_t>(std::max<std::size_t>(ws_bytes, 256))});
  const k::SplitKCounters counters(static_cast<int>(tiles));
  int* counter_ptr = k::split_k_counter_address(counters);
  const Tensor y = cuda::device_empty(s, {l.n, l.oh(), l.ow(), l.k});
  // --residual: a residual of the output's shape added before the Relu (ResNet's expansions).
  const Tensor r = residual ? cuda::device_empty(s, {l.n, l.oh(), l.ow(), l.k}) : Tensor();
  if (residual) RW_CUDA_CHECK(cudaMemsetAsync(r.raw_data(), 0, r.nbytes(), stream));
  k::Epilogue e;
  e.act = k::kActRelu;
  FamilyBest best[3];  // mma.sync, wgmma, TMA-fed wgmma
  const auto& all = k::nhwc_conv_tiles();
  bool first = true;
  for (const auto& c : cands) {
    auto launch = [&] {
      k::launch_conv_nhwc(p, storage, x_nhwc.raw_data(), w_nhwc.raw_data(), y.raw_data(),
                          bias.data<float>(), residual ? r.raw_data() : nullptr, e, c, ws.raw_data(), stream,
                          counter_ptr);
    };
    // Full clocks before the first, then a few untimed launches of each.
    const int untimed = first ? std::max(3, static_cast<int>(warmup_ms * 10)) : 3;
    first = false;
    for (int i = 0; i < untimed; ++i) launch();
    std::vector<double> ms = bench::event_samples(stream, runs, 1, launch);
    std::sort(ms.begin(), ms.end());
    const double med = ms[ms.size() / 2];
    const k::NhwcTile& t = all[static_cast<std::size_t>(c.tile)];
    FamilyBest& b = best[t.tma >= 0 ? 2 : t.wgmma >= 0 ? 1 : 0];
    if (b.pick == "-" || med < b.ms) b = {med, fmt::format("{}/{}", t.name, c.splits)};
  }
  auto tf = [&](const FamilyBest& b) { return b.ms > 0 ? l.flops() / b.ms * 1e-9 : 0.0; };
  std::printf("  %-26s mma.sync %8.4f ms %6.1f TFLOP/s (%s) | wgmma %8.4f ms %6.1f TFLOP/s (%s) | tma %8.4f ms "
              "%6.1f TFLOP/s (%s)%s\n",
              "families", best[0].ms, tf(best[0]), best[0].pick.c_str(), best[1].ms, tf(best[1]), best[1].pick.c_str(),
              best[2].ms, tf(best[2]), best[2].pick.c_str(), wgmma ? "" : " [wgmma not available here]");
  std::printf("{\"mode\": \"conv_nhwc_families\", \"storage\": \"%s\", \"layer\": \"%s\", \"mma_ms\": %.5f, "
              "\"mma_tflops\": %.1f, \"mma_pick\": \"%s\", \"wgmma_ms\": %.5f, \"wgmma_tflops\": %.1f, "
              "\"wgmma_pick\": \"%s\", \"tma_ms\": %.5f, \"tma_tflops\": %.1f, \"tma_pick\": \"%s\"}\n",
              std::string(dtype_name(s)).c_str(), l.name().c_str(), best[0].ms, tf(best[0]), best[0].pick.c_str(),
              best[1].ms, tf(best[1]), best[1].pick.c_str(), best[2].ms, tf(best[2]), best[2].pick.c_str());
  std::fflush(stdout);
}

int run(const std::vector<Layer>& layers, float warmup_ms, int runs, bool families, bool tf32, bool residual) {
  // fp16 NHWC against NCHW at fp16, or (--tf32) fp32 NHWC against NCHW at tf32.
  const DType s = tf32 ? DType::kF32 : DType::kF16;
  const cuda::Precision precision = tf32 ? cuda::Precision::kTf32 : cuda::Precision::kFp16;
  const std::int64_t chunk = tf32 ? 4 : 8;  // channels of a 16-byte chunk
  cudaStream_t stream = nullptr;
  RW_CUDA_CHECK(cudaStreamCreate(&stream));
  std::printf("%-28s %10s %9s %10s %9s %7s  %s\n", "layer", "nhwc_ms", "TFLOP/s", "nchw_ms", "TFLOP/s", "ratio",
              "nhwc pick | nchw pick");
  for (const Layer& l : layers) {
    const Tensor x = random_input({l.n, l.c, l.h, l.w}, 1);
    Tensor w = random_input({l.k, l.c, l.r, l.s}, 2);
    for (float& v : w.values<float>()) v *= 0.1f;
    const Tensor bias = random_input({l.k}, 3);
    const std::int64_t cp = (l.c + chunk - 1) / chunk * chunk;
    if (residual) {  // the families alone (the ops here take no residual input)
      time_families(l, cuda::to_device(to_channels_last(x, cp, s)), cuda::to_device(to_channels_last(w, cp, s)),
                    cuda::to_device(bias), warmup_ms, runs, stream, true);
      continue;
    }
    // NCHW peer: fp32 tensors, fp16 (or tf32) precision (operands rounded as fragments are read).
    Op nchw = make_op("Conv", l, {DType::kF32, DType::kF32, DType::kF32});
    Tensor y_nchw;
    std::string v_nchw, v_nhwc;
    const double ms_nchw = time_op(nchw, {cuda::to_device(x), cuda::to_device(w), cuda::to_device(bias)},
                                   precision, stream, warmup_ms, runs, &y_nchw, &v_nchw);
    Op nhwc = make_op("rw.ConvNhwc", l, {s, s, DType::kF32});
    Tensor y_nhwc;
    const Tensor x_nhwc = cuda::to_device(to_channels_last(x, cp, s));
    const Tensor w_nhwc = cuda::to_device(to_channels_last(w, cp, s));
    const Tensor bias_d = cuda::to_device(bias);
    const double ms_nhwc = time_op(nhwc, {x_nhwc, w_nhwc, bias_d}, precision, stream, warmup_ms, runs,
                                   &y_nhwc, &v_nhwc);
    const double err = relative_l2(to_channels_first(y_nhwc, y_nhwc.shape()[3]), y_nchw.contiguous());
    const double tf_nhwc = l.flops() / ms_nhwc * 1e-9, tf_nchw = l.flops() / ms_nchw * 1e-9;
    auto pick = [](const std::string& v) { return v.substr(v.find(": ") + 2); };
    std::printf("%-28s %10.4f %9.1f %10.4f %9.1f %7.2f  %s | %s\n", l.name().c_str(), ms_nhwc, tf_nhwc, ms_nchw,
                tf_nchw, ms_nchw / ms_nhwc, pick(v_nhwc).c_str(), pick(v_nchw).c_str());
    std::printf("{\"mode\": \"conv_nhwc\", \"precision\": \"%s\", \"layer\": \"%s\", \"nhwc_ms\": %.5f, "
                "\"nhwc_tflops\": %.1f, \"nchw_ms\": %.5f, \"nchw_tflops\": %.1f, \"speedup\": %.3f, "
                "\"rel_l2\": %.3g}\n",
                tf32 ? "tf32" : "fp16", l.name().c_str(), ms_nhwc, tf_nhwc, ms_nchw, tf_nchw, ms_nchw / ms_nhwc, err);
    std::fflush(stdout);
    if (families) time_families(l, x_nhwc, w_nhwc, bias_d, warmup_ms, runs, stream, false);
  }
  cudaStreamDestroy(stream);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return redwood::bench::guarded_main("redwood_conv_bench", [&] {
    std::vector<Layer> layers;
    int runs = 50;
    float warmup_ms = 200;
    bool families = false, tf32 = false, residual = false;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      auto next = [&] { return redwood::bench::option_value(argc, argv, i); };
      if (a == "--layer") {
        const auto v = parse_list(next());
        RW_EXPECTS(v.size() == 9, InvalidArgument, "--layer takes N,C,H,W,K,R,S,STRIDE,PAD, not {} values", v.size());
        layers.push_back({v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8]});
      } else if (a == "--runs") {
        runs = std::stoi(next());
      } else if (a == "--warmup-ms") {
        warmup_ms = std::stof(next());
      } else if (a == "--families") {
        families = true;
      } else if (a == "--tf32") {
        tf32 = true;
      } else if (a == "--residual") {
        residual = true;
      } else {
        throw InvalidArgument(fmt::format(
            "unknown argument '{}' (--layer N,C,H,W,K,R,S,STRIDE,PAD, --runs, --warmup-ms, --families, --tf32, "
            "--residual)",
            a));
      }
    }
    RW_EXPECTS(runs > 0 && warmup_ms >= 0, InvalidArgument, "--runs must be positive, --warmup-ms non-negative");
    return run(layers.empty() ? default_layers() : layers, warmup_ms, runs, families, tf32, residual);
  });
}
