// redwood_narrow_bench: rw.ConvNhwc's narrow kernel (conv_nhwc_narrow.cu) against the implicit-GEMM
// tiles (conv_nhwc_mma.cuh, and the wgmma ones where they run) on layers with few channels, in one
// process on the same operands: every candidate the tuner would time for the shape
// (nhwc_conv_candidates) is launched through launch_conv_nhwc and timed alone, and the best of each
// kind is printed with the ratio. fp16 storage (bf16 with --bf16), bias + Relu fused, a residual
// where the layer says so.
//
//   redwood_narrow_bench [--layer N,C,H,W,K,R,S,STRIDE,PAD[,RESIDUAL]]... [--samples 15] [--reps 20]
//                        [--warmup-ms 200] [--bf16]
//
// A sample is --reps launches back to back between two CUDA events (programmatic launch on, as
// in a plan's graph), the median of --samples per candidate. The operands are not rotated: what
// fits in the 50 MB L2 stays there, as a layer's input does in a replay where the kernel before
// just wrote it. GB/s counts what the layer must move once (input, weights, output, residual).
// Without --layer: MobileNetV3-Large's narrow layers at batch 32 (the stem, whose 3 channels are
// padded to 8, and the 1×1 layers of 16 to 120 channels at 112×112 to 28×28) and two at batch 1.
// rel_l2: the best narrow output against the best tile's. One JSON line per layer on stdout.

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_kernel.hpp"
#include "backends/cuda/device_tensor.hpp"
#include "backends/cuda/kernels/conv_nhwc/conv_nhwc.hpp"
#include "backends/cuda/kernels/conv_nhwc/conv_nhwc_narrow.hpp"
#include "core/error.hpp"

#include "bench_support.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace {

using namespace redwood;
using bench::parse_list;
using bench::random_input;
using bench::relative_l2;
using cuda::kernels::ConvShape;
using cuda::kernels::NhwcConvConfig;

struct Layer {
  std::int64_t n, c, h, w, k, r, s, stride, pad;
  bool residual = false;
  std::int64_t oh() const { return (h + 2 * pad - r) / stride + 1; }
  std::int64_t ow() const { return (w + 2 * pad - s) / stride + 1; }
  std::int64_t cp() const { return (c + 7) / 8 * 8; }
  std::string name() const {
    return fmt::format("n{} {}x{}/{} {}->{} @{}{}", n, r, s, stride, c, k, h, residual ? " +res" : "");
  }
};

std::vector<Layer> default_layers() {
  return {{32, 3, 224, 224, 16, 3, 3, 2, 1},         {32, 16, 112, 112, 16, 1, 1, 1, 0, true},
          {32, 16, 112, 112, 64, 1, 1, 1, 0},        {32, 64, 56, 56, 24, 1, 1, 1, 0},
          {32, 24, 56, 56, 72, 1, 1, 1, 0},          {32, 72, 56, 56, 24, 1, 1, 1, 0, true},
          {32, 72, 28, 28, 40, 1, 1, 1, 0},          {32, 40, 28, 28, 120, 1, 1, 1, 0},
          {32, 120, 28, 28, 40, 1, 1, 1, 0, true},   {1, 3, 224, 224, 16, 3, 3, 2, 1},
          {1, 16, 112, 112, 16, 1, 1, 1, 0, true}};
}

struct Timed {
  NhwcConvConfig cfg{-1, 1};
  double ms = 1e30;
};

int run(const std::vector<Layer>& layers, int samples, int reps, float warmup_ms, DType storage_type) {
  cudaStream_t stream = nullptr;
  RW_CUDA_CHECK(cudaStreamCreate(&stream));
  const cuda::kernels::NhwcStorage storage =
      storage_type == DType::kF16 ? cuda::kernels::NhwcStorage::kF16 : cuda::kernels::NhwcStorage::kBF16;
  const int sms = cuda::multiprocessor_count();
  const bool wgmma = cuda::kernels::nhwc_wgmma_usable();
  const auto& tiles = cuda::kernels::nhwc_conv_tiles();
  std::printf("%-28s %10s %8s %-22s %10s %8s %-9s %7s\n", "layer", "tile_ms", "GB/s", "best tile", "narrow_ms", "GB/s",
              "narrow", "ratio");
  for (const Layer& l : layers) {
    const ConvShape p{static_cast<int>(l.n), static_cast<int>(l.cp()), static_cast<int>(l.h), static_cast<int>(l.w),
                      static_cast<int>(l.k), static_cast<int>(l.r), static_cast<int>(l.s), static_cast<int>(l.oh()),
                      static_cast<int>(l.ow()), static_cast<int>(l.stride), static_cast<int>(l.stride),
                      static_cast<int>(l.pad), static_cast<int>(l.pad), 1, 1, 1};
    // Operands: NHWC of the storage type, weights scaled down, bias fp32.
    const Tensor x = cuda::to_device(random_input({l.n, l.h, l.w, l.cp()}, 1).cast(storage_type));
    Tensor w32 = random_input({l.k, l.r, l.s, l.cp()}, 2);
    for (float& v : w32.values<float>()) v *= 0.1f;
    const Tensor w = cuda::to_device(w32.cast(storage_type));
    const Tensor bias = cuda::to_device(random_input({l.k}, 3));
    const Shape out_shape = {l.n, l.oh(), l.ow(), l.k};
    const Tensor res = l.residual ? cuda::to_device(random_input(out_shape, 4).cast(storage_type)) : Tensor();
    const Tensor y = cuda::device_empty(storage_type, out_shape);
    const std::vector<NhwcConvConfig> candidates = cuda::kernels::nhwc_conv_candidates(p, sms, {.wgmma = wgmma, .tma = wgmma, .narrow = true});
    std::size_t ws_bytes = 0;
    for (const NhwcConvConfig& c : candidates) {
      ws_bytes = std::max(ws_bytes, cuda::kernels::nhwc_conv_workspace_bytes(p, c));
    }
    const Tensor ws = ws_bytes > 0 ? cuda::device_empty(DType::kU8, {static_cast<std::int64_t>(ws_bytes)}) : Tensor();
    cuda::kernels::Epilogue e;
    e.act = cuda::kernels::kActRelu;
    auto launch = [&](NhwcConvConfig cfg) {
      cuda::kernels::launch_conv_nhwc(p, storage, x.raw_data(), w.raw_data(), y.raw_data(), bias.data<float>(),
                                      l.residual ? res.raw_data() : nullptr, e, cfg, ws.defined() ? ws.raw_data() : nullptr,
                                      stream);
    };
    // Clocks up first (an idle H200 clocks down).
    for (double spun = 0; spun < warmup_ms;) {
      const auto t = bench::event_samples(stream, 1, 20, [&] { launch(candidates.front()); });
      spun += t[0] * 20;
    }
    Timed best_tile, best_narrow;
    std::string narrow_all;  // every narrow variant's time
    for (const NhwcConvConfig& cfg : candidates) {
      const double ms = bench::event_samples(stream, samples, reps, [&] { launch(cfg); })[samples / 2];
      const bool narrow = tiles[static_cast<std::size_t>(cfg.tile)].narrow > 0;
      Timed& best = narrow ? best_narrow : best_tile;
      if (ms < best.ms) best = {cfg, ms};
      if (narrow) narrow_all += fmt::format("{}{}:{:.4f}", narrow_all.empty() ? "" : " ", tiles[static_cast<std::size_t>(cfg.tile)].name, ms);
    }
    RW_EXPECTS(best_tile.cfg.tile >= 0, Unsupported, "{}: no implicit-GEMM tile among the candidates", l.name());
    launch(best_tile.cfg);
    const Tensor y_tile = cuda::to_host(y, stream);
    const double bytes = 2.0 * (l.n * l.h * l.w * l.cp() + l.k * l.r * l.s * l.cp() +
                                l.n * l.oh() * l.ow() * l.k * (l.residual ? 2 : 1));
    auto tile_name = [&](const Timed& t) {
      return fmt::format("{}/{}", tiles[static_cast<std::size_t>(t.cfg.tile)].name, t.cfg.splits);
    };
    if (best_narrow.cfg.tile < 0) {
      std::printf("%-28s %10.4f %8.0f %-22s %10s (the narrow kernel does not take this shape)\n", l.name().c_str(),
                  best_tile.ms, bytes / best_tile.ms * 1e-6, tile_name(best_tile).c_str(), "-");
      continue;
    }
    launch(best_narrow.cfg);
    const Tensor y_narrow = cuda::to_host(y, stream);
    const double err = relative_l2(y_narrow.cast(DType::kF32), y_tile.cast(DType::kF32));
    std::printf("%-28s %10.4f %8.0f %-22s %10.4f %8.0f %-9s %7.2f\n", l.name().c_str(), best_tile.ms,
                bytes / best_tile.ms * 1e-6, tile_name(best_tile).c_str(), best_narrow.ms,
                bytes / best_narrow.ms * 1e-6, tiles[static_cast<std::size_t>(best_narrow.cfg.tile)].name,
                best_tile.ms / best_narrow.ms);
    std::printf("{\"mode\": \"conv_narrow\", \"layer\": \"%s\", \"dtype\": \"%s\", \"tile_ms\": %.5f, \"tile\": \"%s\", "
                "\"narrow_ms\": %.5f, \"narrow\": \"%s\", \"narrow_gbps\": %.0f, \"speedup\": %.3f, \"rel_l2\": %.3g, "
                "\"narrow_all\": \"%s\"}\n",
                l.name().c_str(), std::string(dtype_name(storage_type)).c_str(), best_tile.ms,
                tile_name(best_tile).c_str(), best_narrow.ms, tiles[static_cast<std::size_t>(best_narrow.cfg.tile)].name,
                bytes / best_narrow.ms * 1e-6, best_tile.ms / best_narrow.ms, err, narrow_all.c_str());
    std::fflush(stdout);
  }
  cudaStreamDestroy(stream);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return redwood::bench::guarded_main("redwood_narrow_bench", [&] {
    std::vector<Layer> layers;
    int samples = 15, reps = 20;
    float warmup_ms = 200;
    DType storage = DType::kF16;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      auto next = [&] { return redwood::bench::option_value(argc, argv, i); };
      if (a == "--layer") {
        const auto v = parse_list(next());
        RW_EXPECTS(v.size() == 9 || v.size() == 10, InvalidArgument,
                   "--layer takes N,C,H,W,K,R,S,STRIDE,PAD[,RESIDUAL], not {} values", v.size());
        layers.push_back({v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v.size() == 10 && v[9] != 0});
      } else if (a == "--samples") {
        samples = std::stoi(next());
      } else if (a == "--reps") {
        reps = std::stoi(next());
      } else if (a == "--warmup-ms") {
        warmup_ms = std::stof(next());
      } else if (a == "--bf16") {
        storage = DType::kBF16;
      } else {
        throw InvalidArgument(fmt::format(
            "unknown argument '{}' (--layer N,C,H,W,K,R,S,STRIDE,PAD[,RESIDUAL], --samples, --reps, --warmup-ms, --bf16)",
            a));
      }
    }
    RW_EXPECTS(samples > 0 && reps > 0 && warmup_ms >= 0, InvalidArgument,
               "--samples and --reps must be positive, --warmup-ms non-negative");
    return run(layers.empty() ? default_layers() : layers, samples, reps, warmup_ms, storage);
  });
}
