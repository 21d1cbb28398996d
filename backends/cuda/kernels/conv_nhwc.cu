// The NHWC tensor-core convolution's tiles and launcher (the kernel: conv_nhwc_mma.cuh).

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/conv_nhwc.hpp"
#include "backends/cuda/kernels/conv_nhwc_mma.cuh"

#include <algorithm>
#include <mutex>

namespace redwood::cuda::kernels {
namespace {

using namespace nhwc;

constexpr int kAlign = 256;  // the counters' share of the workspace, rounded

template <typename T> struct Launch {
  void (*kernel)(ConvArgs<T>);
  int smem, threads, bm, bn;
};

template <typename T, int BM, int BN, int WM, int WN, int BK = 32, int STAGES = 4, bool DB = true> Launch<T> entry() {
  using Tl = Tile<BM, BN, WM, WN, BK, STAGES, DB>;
  return {conv_nhwc_mma<T, BM, BN, WM, WN, BK, STAGES, DB>, Tl::kSmemBytes, Tl::kThreads, BM, BN};
}

// One row per NhwcTile of nhwc_conv_tiles(), in that order.
constexpr int kTiles = 16;
template <typename T> const Launch<T>& launch_of(int tile) {
  // 8-warp tiles of 64×32 warp tiles keep 128 registers a thread (2 blocks a multiprocessor)
  // with single-buffered fragments; double-buffered they spill.
  static const Launch<T> table[kTiles] = {
      entry<T, 128, 128, 64, 32, 32, 4, false>(),
      entry<T, 128, 128, 64, 64>(),
      entry<T, 128, 64, 64, 32>(),
      entry<T, 64, 128, 32, 64>(),
      entry<T, 64, 64, 32, 32>(),
      entry<T, 64, 32, 32, 16>(),
      entry<T, 32, 64, 16, 32>(),
      entry<T, 128, 128, 64, 32, 64, 3, false>(),
      entry<T, 128, 64, 64, 32, 64, 3>(),
      entry<T, 64, 64, 32, 32, 64, 4>(),
      entry<T, 256, 64, 64, 32, 32, 4, false>(),
      entry<T, 128, 128, 64, 64, 64, 3>(),
      entry<T, 64, 128, 32, 64, 64, 3>(),
      entry<T, 256, 64, 64, 32, 64, 3>(),
      entry<T, 128, 64, 64, 32, 64, 3, false>(),
      entry<T, 128, 128, 64, 64, 64, 3, false>()};
  // Over 48 KiB of dynamic shared memory needs the kernel's opt-in, once per process.
  static std::once_flag opted_in;
  std::call_once(opted_in, [] {
    for (const Launch<T>& l : table) {
      RW_CUDA_CHECK(cudaFuncSetAttribute(l.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, l.smem));
    }
  });
  return table[tile];
}

long long m_total_of(const ConvShape& p) { return static_cast<long long>(p.n) * p.oh * p.ow; }
int kdim_of(const ConvShape& p) { return p.r * p.s * p.c; }
long long tiles_of(const ConvShape& p, const NhwcTile& t) {
  return ((m_total_of(p) + t.bm - 1) / t.bm) * ((p.k + t.bn - 1) / t.bn);
}
std::size_t counter_bytes(long long tiles) {
  return static_cast<std::size_t>((tiles * 4 + kAlign - 1) / kAlign * kAlign);
}

template <typename T>
void launch_typed(const ConvShape& p, const void* x, const void* w, void* y, const float* bias, const void* residual,
                  const Epilogue& e, int tile, int splits, void* workspace, cudaStream_t stream, int* counters) {
  const Launch<T>& l = launch_of<T>(tile);
  ConvArgs<T> a{};
  a.p = p;
  a.x = static_cast<const T*>(x);
  a.w = static_cast<const T*>(w);
  a.y = static_cast<T*>(y);
  a.residual = static_cast<const T*>(residual);
  a.bias = bias;
  a.act = e.act;
  a.alpha = e.alpha;
  a.beta = e.beta;
  a.m_total = static_cast<int>(m_total_of(p));
  a.kdim = kdim_of(p);
  a.n_tiles = (p.k + l.bn - 1) / l.bn;
  const long long tiles = static_cast<long long>((a.m_total + l.bm - 1) / l.bm) * a.n_tiles;
  if (splits > 1) {
    a.partial = reinterpret_cast<float*>(static_cast<char*>(workspace) + counter_bytes(tiles));
    if (counters != nullptr) {
      a.counters = counters;  // zero between launches: the last block of each tile resets its own
    } else {
      // The workspace is packed with other values by lifetime (graph_runner.cpp), so counters
      // there start at zero only by this memset (a graph node, capturable).
      a.counters = static_cast<int*>(workspace);
      RW_CUDA_CHECK(cudaMemsetAsync(a.counters, 0, static_cast<std::size_t>(tiles) * 4, stream));
    }
  }
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(splits));
  RW_CUDA_CHECK(launch_kernel(l.kernel, grid, dim3(l.threads), static_cast<std::size_t>(l.smem), stream, a));
  RW_CUDA_CHECK_LAUNCH("conv_nhwc_mma");
}

}  // namespace

const std::vector<NhwcTile>& nhwc_conv_tiles() {
  static const std::vector<NhwcTile> tiles = {
      {128, 128, 32, 256, "128x128"},      {128, 128, 32, 128, "128x128w4"},   {128, 64, 32, 128, "128x64"},
      {64, 128, 32, 128, "64x128"},        {64, 64, 32, 128, "64x64"},         {64, 32, 32, 128, "64x32"},
      {32, 64, 32, 128, "32x64"},          {128, 128, 64, 256, "128x128k64"},  {128, 64, 64, 128, "128x64k64"},
      {64, 64, 64, 128, "64x64k64"},       {256, 64, 32, 256, "256x64"},       {128, 128, 64, 128, "128x128w4k64"},
      {64, 128, 64, 128, "64x128k64"},     {256, 64, 64, 256, "256x64k64"},    {128, 64, 64, 128, "128x64k64s"},
      {128, 128, 64, 128, "128x128w4k64s"}};
  return tiles;
}

std::vector<int> nhwc_split_choices(const ConvShape& p, int tile, int multiprocessors) {
  const NhwcTile& t = nhwc_conv_tiles().at(static_cast<std::size_t>(tile));
  const long long blocks = tiles_of(p, t);
  const int ktiles = (kdim_of(p) + t.bk - 1) / t.bk;
  std::vector<int> out = {1};
  for (int s = 2; s <= 16 && s <= ktiles / 4 && blocks * s <= 4LL * multiprocessors; s *= 2) out.push_back(s);
  return out;
}

std::vector<NhwcConvConfig> nhwc_conv_candidates(const ConvShape& p, int multiprocessors) {
  std::vector<NhwcConvConfig> out;
  for (int tile = 0; tile < static_cast<int>(nhwc_conv_tiles().size()); ++tile) {
    for (int s : nhwc_split_choices(p, tile, multiprocessors)) out.push_back({tile, s});
  }
  return out;
}

NhwcConvConfig nhwc_conv_default(const ConvShape& p, int multiprocessors) {
  if (tiles_of(p, nhwc_conv_tiles()[0]) >= multiprocessors) return {0, 1};
  const int tile = 4;  // 64×64
  const long long blocks = tiles_of(p, nhwc_conv_tiles()[tile]);
  const int ktiles = (kdim_of(p) + 31) / 32;
  long long splits = (2LL * multiprocessors + blocks - 1) / blocks;
  splits = std::min<long long>({splits, ktiles / 4, 16});
  // Powers of two, as nhwc_split_choices offers.
  int s = 1;
  while (s * 2 <= splits) s *= 2;
  return {tile, s};
}

long long nhwc_conv_tile_count(const ConvShape& p, NhwcConvConfig cfg) {
  return tiles_of(p, nhwc_conv_tiles().at(static_cast<std::size_t>(cfg.tile)));
}

std::size_t nhwc_conv_workspace_bytes(const ConvShape& p, NhwcConvConfig cfg) {
  if (cfg.splits <= 1) return 0;
  const NhwcTile& t = nhwc_conv_tiles().at(static_cast<std::size_t>(cfg.tile));
  return counter_bytes(tiles_of(p, t)) + static_cast<std::size_t>(cfg.splits) * m_total_of(p) * p.k * sizeof(float);
}

void launch_conv_nhwc(const ConvShape& p, NhwcStorage storage, const void* x, const void* w, void* y,
                      const float* bias, const void* residual, const Epilogue& e, NhwcConvConfig cfg, void* workspace,
                      cudaStream_t stream, int* counters) {
  if (m_total_of(p) == 0 || p.k == 0) return;
  const int tile = cfg.tile >= 0 && cfg.tile < kTiles ? cfg.tile : 0;
  const int splits = cfg.splits > 1 && workspace != nullptr ? std::min(cfg.splits, 65535) : 1;
  if (storage == NhwcStorage::kF16) {
    launch_typed<half>(p, x, w, y, bias, residual, e, tile, splits, workspace, stream, counters);
  } else {
    launch_typed<__nv_bfloat16>(p, x, w, y, bias, residual, e, tile, splits, workspace, stream, counters);
  }
}

}  // namespace redwood::cuda::kernels
