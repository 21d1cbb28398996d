// The NHWC tensor-core convolution's tiles and launcher (the kernel: conv_nhwc_mma.cuh).

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/device.hpp"
#include "backends/cuda/kernels/conv_nhwc.hpp"
#include "backends/cuda/kernels/conv_nhwc_mma.cuh"
#include "backends/cuda/kernels/conv_nhwc_narrow.hpp"
#ifdef REDWOOD_HAVE_CONV_WGMMA
#include "backends/cuda/kernels/conv_nhwc_wgmma.hpp"
#include "backends/cuda/kernels/conv_nhwc_wgmma_tma.hpp"
#include "backends/cuda/kernels/conv_nhwc_wgmma_ws.hpp"
#endif
#include "core/error.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string_view>
#include <type_traits>

namespace redwood::cuda::kernels {
namespace {

using namespace nhwc;

constexpr int kAlign = 256;  // the counters' share of the workspace, rounded

template <typename T> struct Launch {
  void (*kernel)(ConvArgs<T>);
  int smem, threads, bm, bn;
  bool persistent = false;  // a CTA walks tiles blockIdx.x, + gridDim.x, …: grid min(tiles, multiprocessors)
};

// One row per mma.sync NhwcTile of nhwc_conv_tiles(), in that order.
constexpr int kTiles = 16;
// Which mma.sync tiles also have an instantiation that reads a projection shortcut (SC; input 4 of
// rw.ConvNhwc): the 128×128, 128×64 and the small-M ones (batch 1), not all sixteen, to keep the
// compile time; every wgmma tile has one.
constexpr bool kShortcutTile[kTiles] = {true,  false, true, false, true,  true,  true,  false,
                                        true,  true,  false, false, false, false, false, false};

// Op: the products (conv_nhwc_mma.cuh): MmaOf<T>, or MmaTf32x3 (fp32 storage at precision fp32).
// SC: the shortcut instantiation, where the tile has one (HAS_SC); else an empty row.
template <typename T, typename Op, bool SC, bool HAS_SC, int BM, int BN, int WM, int WN, int BK = 32, int STAGES = 4,
          bool DB = true>
Launch<T> entry() {
  using Tl = Tile<BM, BN, WM, WN, BK, STAGES, DB>;
  if constexpr (SC && !HAS_SC) {
    return {nullptr, 0, 0, BM, BN};
  } else {
    return {conv_nhwc_mma<T, BM, BN, WM, WN, BK, STAGES, DB, Op, SC>, Tl::kSmemBytes, Tl::kThreads, BM, BN};
  }
}

template <typename T, typename Op = MmaOf<T>, bool SC = false> const Launch<T>& launch_of(int tile) {
  // 8-warp tiles of 64×32 warp tiles keep 128 registers a thread (2 blocks a multiprocessor)
  // with single-buffered fragments; double-buffered they spill.
  constexpr const bool* h = kShortcutTile;
  static const Launch<T> table[kTiles] = {
      entry<T, Op, SC, h[0], 128, 128, 64, 32, 32, 4, false>(),
      entry<T, Op, SC, h[1], 128, 128, 64, 64>(),
      entry<T, Op, SC, h[2], 128, 64, 64, 32>(),
      entry<T, Op, SC, h[3], 64, 128, 32, 64>(),
      entry<T, Op, SC, h[4], 64, 64, 32, 32>(),
      entry<T, Op, SC, h[5], 64, 32, 32, 16>(),
      entry<T, Op, SC, h[6], 32, 64, 16, 32>(),
      entry<T, Op, SC, h[7], 128, 128, 64, 32, 64, 3, false>(),
      entry<T, Op, SC, h[8], 128, 64, 64, 32, 64, 3>(),
      entry<T, Op, SC, h[9], 64, 64, 32, 32, 64, 4>(),
      entry<T, Op, SC, h[10], 256, 64, 64, 32, 32, 4, false>(),
      entry<T, Op, SC, h[11], 128, 128, 64, 64, 64, 3>(),
      entry<T, Op, SC, h[12], 64, 128, 32, 64, 64, 3>(),
      entry<T, Op, SC, h[13], 256, 64, 64, 32, 64, 3>(),
      entry<T, Op, SC, h[14], 128, 64, 64, 32, 64, 3, false>(),
      entry<T, Op, SC, h[15], 128, 128, 64, 64, 64, 3, false>()};
  // Over 48 KiB of dynamic shared memory needs the kernel's opt-in, once per process.
  static std::once_flag opted_in;
  std::call_once(opted_in, [] {
    for (const Launch<T>& l : table) {
      if (l.kernel != nullptr) {
        RW_CUDA_CHECK(cudaFuncSetAttribute(l.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, l.smem));
      }
    }
  });
  if (table[tile].kernel == nullptr) {
    throw Unsupported(std::string("rw.ConvNhwc: the tile ") + nhwc_conv_tiles()[static_cast<std::size_t>(tile)].name +
                      " has no instantiation for a shortcut input");
  }
  return table[tile];
}

// The current device's multiprocessors (a persistent kernel's grid).
int multiprocessors_here() { return current_cuda_device().multiprocessors; }

long long m_total_of(const ConvShape& p) { return static_cast<long long>(p.n) * p.oh * p.ow; }
int kdim_of(const ConvShape& p) { return p.r * p.s * p.c + p.c2; }
long long tiles_of(const ConvShape& p, const NhwcTile& t) {
  return ((m_total_of(p) + t.bm - 1) / t.bm) * ((p.k + t.bn - 1) / t.bn);
}
std::size_t counter_bytes(long long tiles) {
  return static_cast<std::size_t>((tiles * 4 + kAlign - 1) / kAlign * kAlign);
}

// The mma.sync kernel of a tile, or its wgmma kernel (conv_nhwc_wgmma.cu): fp16 and bf16 storage,
// and fp32 storage with tf32 products (Op MmaTf32; not 3xTF32's three products).
template <typename T, typename Op = MmaOf<T>, bool SC = false> Launch<T> kernel_of(int tile) {
  const int wg = nhwc_conv_tiles()[static_cast<std::size_t>(tile)].wgmma;
  const int ws = nhwc_conv_tiles()[static_cast<std::size_t>(tile)].ws;
  if (wg < 0 && ws < 0) return launch_of<T, Op, SC>(tile);
#ifdef REDWOOD_HAVE_CONV_WGMMA
  if constexpr (std::is_same_v<Op, MmaOf<T>>) {
    if (ws >= 0) {
      if (SC) throw Unsupported("rw.ConvNhwc: the warp-specialized tiles take no shortcut input");
      const WgmmaLaunch<T>& k = wgmma_ws_launch_of<T>(ws);
      return {k.kernel, k.smem, k.threads, k.bm, k.bn, true};
    }
    const WgmmaLaunch<T>& k = wgmma_launch_of<T, SC>(wg);
    return {k.kernel, k.smem, k.threads, k.bm, k.bn};
  }
#endif
  throw Unsupported(std::string("rw.ConvNhwc: the wgmma tile ") + nhwc_conv_tiles()[static_cast<std::size_t>(tile)].name +
                    " takes fp16, bf16, or fp32 storage at precision tf32 (not fp32's 3xTF32 products)");
}

template <typename T, typename Op = MmaOf<T>>
void launch_typed(const ConvShape& p, const void* x, const void* w, void* y, const float* bias, const void* residual,
                  const Epilogue& e, int tile, int splits, void* workspace, cudaStream_t stream, int* counters,
                  bool round_tf32, const void* x2) {
  const NhwcTile& nt = nhwc_conv_tiles()[static_cast<std::size_t>(tile)];
  Launch<T> l{nullptr, 0, 0, nt.bm, nt.bn};  // a TMA tile's kernel is its launcher's (below)
  if (nt.tma < 0) {
    l = x2 != nullptr ? kernel_of<T, Op, true>(tile) : kernel_of<T, Op, false>(tile);
  } else if (!std::is_same_v<Op, MmaOf<T>> || x2 != nullptr) {
    throw Unsupported(std::string("rw.ConvNhwc: the TMA tile ") + nt.name +
                      " takes fp16, bf16, or fp32 storage at precision tf32 (not fp32's 3xTF32 products), and no "
                      "shortcut input");
  }
  ConvArgs<T> a = conv_args<T>(p, x, w, y, bias, residual, e);
  a.round_tf32 = round_tf32;
  a.x2 = static_cast<const T*>(x2);
  a.n_tiles = (p.k + l.bn - 1) / l.bn;
  const long long tiles = static_cast<long long>((a.m_total + l.bm - 1) / l.bm) * a.n_tiles;
  if (splits > 1 && !l.persistent) {
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
  // Persistent kernels: one CTA a multiprocessor (their shared memory allows no more), each
  // walking tiles; split-K is theirs to ignore (nhwc_split_choices offers them split 1 only).
  const dim3 grid = l.persistent ? dim3(static_cast<unsigned>(std::min<long long>(tiles, multiprocessors_here())))
                                 : dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(splits));
  if (nt.tma >= 0) {
#ifdef REDWOOD_HAVE_CONV_WGMMA
    if constexpr (std::is_same_v<Op, MmaOf<T>>) {
      launch_conv_nhwc_tma<T>(nt.tma, a, grid, stream);
      return;
    }
#endif
    throw Unsupported(std::string("rw.ConvNhwc: this build has no TMA tiles (") + nt.name + ")");
  }
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
      {128, 128, 64, 128, "128x128w4k64s"},
#ifdef REDWOOD_HAVE_CONV_WGMMA
      // Hopper wgmma (conv_nhwc_wgmma.cu), in wgmma_launch_of's order.
      {.bm = 128, .bn = 128, .bk = 64, .threads = 256, .name = "wg128x128", .wgmma = 0},
      {.bm = 128, .bn = 256, .bk = 64, .threads = 256, .name = "wg128x256", .wgmma = 1},
      {.bm = 256, .bn = 128, .bk = 64, .threads = 256, .name = "wg256x128", .wgmma = 2},
      {.bm = 128, .bn = 64, .bk = 64, .threads = 256, .name = "wg128x64", .wgmma = 3},
      {.bm = 64, .bn = 128, .bk = 64, .threads = 128, .name = "wg64x128", .wgmma = 4},
      {.bm = 128, .bn = 128, .bk = 64, .threads = 256, .name = "wg128x128s3", .wgmma = 5},
      {.bm = 128, .bn = 64, .bk = 64, .threads = 256, .name = "wg128x64s3", .wgmma = 6},
      // Warp-specialized persistent wgmma (conv_nhwc_wgmma_ws.cu), in wgmma_ws_launch_of's order.
      {.bm = 128, .bn = 128, .bk = 64, .threads = 384, .name = "ws128x128", .ws = 0},
      {.bm = 128, .bn = 256, .bk = 64, .threads = 384, .name = "ws128x256", .ws = 1},
      {.bm = 128, .bn = 64, .bk = 64, .threads = 384, .name = "ws128x64", .ws = 2},
      {.bm = 128, .bn = 128, .bk = 64, .threads = 384, .name = "ws128x128pp", .ws = 3},
      {.bm = 128, .bn = 64, .bk = 64, .threads = 384, .name = "ws128x64pp", .ws = 4},
      // TMA-fed wgmma (conv_nhwc_wgmma_tma.cu), in its launch_of's order.
      {.bm = 128, .bn = 128, .bk = 64, .threads = 256, .name = "tma128x128", .tma = 0},
      {.bm = 128, .bn = 256, .bk = 64, .threads = 256, .name = "tma128x256", .tma = 1},
      {.bm = 256, .bn = 128, .bk = 64, .threads = 256, .name = "tma256x128", .tma = 2},
      {.bm = 128, .bn = 64, .bk = 64, .threads = 256, .name = "tma128x64s3", .tma = 3},
      {.bm = 64, .bn = 128, .bk = 64, .threads = 128, .name = "tma64x128", .tma = 4},
      {.bm = 128, .bn = 128, .bk = 64, .threads = 256, .name = "tma128x128s3", .tma = 5},
      // … warp-specialized: a producer warp issues the copies (288 threads).
      {.bm = 128, .bn = 128, .bk = 64, .threads = 288, .name = "tmaws128x128", .tma = 6},
      {.bm = 128, .bn = 128, .bk = 64, .threads = 288, .name = "tmaws128x128s3", .tma = 7},
      {.bm = 128, .bn = 64, .bk = 64, .threads = 288, .name = "tmaws128x64", .tma = 8},
      {.bm = 128, .bn = 256, .bk = 64, .threads = 288, .name = "tmaws128x256", .tma = 9},
#endif
      // The narrow kernel (conv_nhwc_narrow.cu) for layers of few channels, narrow_variant()'s order.
      {16, 16, 32, 128, "narrow16", -1, 1}, {16, 32, 32, 128, "narrow32", -1, 2},
      {16, 16, 32, 128, "narrow16p", -1, 3}, {16, 32, 32, 128, "narrow32p", -1, 4},
  };
  return tiles;
}

namespace {
// K-dim elements of a pipeline stage: bk of a 16-bit type, half as many floats (rows of the same bytes).
int k_tile_of(const NhwcTile& t, NhwcStorage storage) { return storage == NhwcStorage::kF32 ? t.bk / 2 : t.bk; }
}  // namespace

std::vector<int> nhwc_split_choices(const ConvShape& p, int tile, int multiprocessors, NhwcStorage storage) {
  const NhwcTile& t = nhwc_conv_tiles().at(static_cast<std::size_t>(tile));
  if (t.narrow > 0 || t.ws >= 0) return {1};  // the narrow and warp-specialized kernels have no split-K
  const long long blocks = tiles_of(p, t);
  const int ktiles = (kdim_of(p) + k_tile_of(t, storage) - 1) / k_tile_of(t, storage);
  std::vector<int> out = {1};
  for (int s = 2; s <= 16 && s <= ktiles / 4 && blocks * s <= 4LL * multiprocessors; s *= 2) out.push_back(s);
  return out;
}

bool nhwc_wgmma_usable() {
#ifdef REDWOOD_HAVE_CONV_WGMMA
  // REDWOOD_CUDA_WGMMA=0 leaves them out (to compare against the mma.sync tiles alone).
  if (const char* v = std::getenv("REDWOOD_CUDA_WGMMA"); v != nullptr && std::string_view(v) == "0") return false;
  try {
    return current_cuda_device().has_wgmma();  // sm_90a code runs on exactly compute capability 9.0
  } catch (const Unsupported&) {
    return false;  // no usable device
  }
#else
  return false;
#endif
}

bool nhwc_tma_fits(const ConvShape& p, NhwcStorage storage) {
#ifdef REDWOOD_HAVE_CONV_WGMMA
  if (const char* v = std::getenv("REDWOOD_CUDA_TMA"); v != nullptr && std::string_view(v) == "0") return false;
  return nhwc::conv_nhwc_tma_fits(p, storage == NhwcStorage::kF32 ? 4 : 2);
#else
  (void)p;
  (void)storage;
  return false;
#endif
}

bool nhwc_wgmma_ws_enabled() {
  // Opt-in: slower than the wgmma tiles on every ResNet-50 layer measured (docs/cuda.md), they
  // would only add candidates to every layer's tuning.
  const char* v = std::getenv("REDWOOD_CUDA_WGMMA_WS");
  return v != nullptr && std::string_view(v) == "1";
}

std::vector<NhwcConvConfig> nhwc_conv_candidates(const ConvShape& p, int multiprocessors, bool wgmma, bool narrow,
                                                 NhwcStorage storage) {
  std::vector<NhwcConvConfig> out;
  // Once per layer, not per tile (the switches read the environment). No shortcut input on the
  // narrow kernel.
  const bool ws = wgmma && nhwc_wgmma_ws_enabled(), tma = wgmma && nhwc_tma_fits(p, storage);
  const bool narrow_fits = narrow && p.c2 == 0 && conv_nhwc_narrow_fits(p, NhwcStorage::kF16);
  for (int tile = 0; tile < static_cast<int>(nhwc_conv_tiles().size()); ++tile) {
    const NhwcTile& t = nhwc_conv_tiles()[static_cast<std::size_t>(tile)];
    if (t.wgmma >= 0 && !wgmma) continue;
    if (t.ws >= 0 && !ws) continue;
    if (t.tma >= 0 && !tma) continue;
    // A shortcut input (p.c2 > 0): the tiles that have its instantiation (kShortcutTile, every wgmma one).
    if (p.c2 > 0 && (t.ws >= 0 || t.narrow > 0 || (t.wgmma < 0 && !(tile < kTiles && kShortcutTile[tile])))) continue;
    if (t.narrow > 0 && !narrow_fits) continue;
    for (int s : nhwc_split_choices(p, tile, multiprocessors, storage)) out.push_back({tile, s});
  }
  return out;
}

NhwcConvConfig nhwc_conv_default(const ConvShape& p, int multiprocessors, NhwcStorage storage) {
  if (tiles_of(p, nhwc_conv_tiles()[0]) >= multiprocessors) return {0, 1};
  const int tile = 4;  // 64×64
  const long long blocks = tiles_of(p, nhwc_conv_tiles()[tile]);
  const int ktiles = (kdim_of(p) + k_tile_of(nhwc_conv_tiles()[tile], storage) - 1) /
                     k_tile_of(nhwc_conv_tiles()[tile], storage);
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
                      cudaStream_t stream, int* counters, bool split_tf32, bool round_tf32, const void* x2) {
  if (m_total_of(p) == 0 || p.k == 0) return;
  const int tile = cfg.tile >= 0 && cfg.tile < static_cast<int>(nhwc_conv_tiles().size()) ? cfg.tile : 0;
  const int splits = cfg.splits > 1 && workspace != nullptr ? std::min(cfg.splits, 65535) : 1;
  if ((p.c2 > 0) != (x2 != nullptr)) {
    throw std::invalid_argument("launch_conv_nhwc: a shortcut input needs its shape (p.c2) and the shape one");
  }
  if (const int narrow = nhwc_conv_tiles()[static_cast<std::size_t>(tile)].narrow; narrow > 0) {
    if (x2 != nullptr) throw std::invalid_argument("launch_conv_nhwc: the narrow kernel takes no shortcut input");
    launch_conv_nhwc_narrow(p, storage, x, w, y, bias, residual, e, narrow - 1, stream);  // throws where it does not fit
    return;
  }
  if (storage == NhwcStorage::kF16) {
    launch_typed<half>(p, x, w, y, bias, residual, e, tile, splits, workspace, stream, counters, false, x2);
  } else if (storage == NhwcStorage::kBF16) {
    launch_typed<__nv_bfloat16>(p, x, w, y, bias, residual, e, tile, splits, workspace, stream, counters, false,
                                x2);
  } else if (!split_tf32) {
    // fp32 storage, tf32 products: the same tiles, each stage row holding half as many elements.
    launch_typed<float>(p, x, w, y, bias, residual, e, tile, splits, workspace, stream, counters, round_tf32, x2);
  } else {
    // fp32 storage, fp32-accurate products from three tf32 ones (MmaTf32x3).
    launch_typed<float, MmaTf32x3>(p, x, w, y, bias, residual, e, tile, splits, workspace, stream, counters, false,
                                   x2);
  }
}

}  // namespace redwood::cuda::kernels
