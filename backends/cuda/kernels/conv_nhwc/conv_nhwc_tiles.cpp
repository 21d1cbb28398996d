// rw.ConvNhwc's tiles (conv_nhwc.hpp): the table, which of them a layer may take, split-K's
// choices and workspace, and the launch, handed to the translation unit of its storage type
// (conv_nhwc_launch.hpp) or to the narrow kernel. Host code only.

#include "backends/cuda/device.hpp"
#include "backends/cuda/kernels/conv_nhwc/conv_nhwc.hpp"
#include "backends/cuda/kernels/conv_nhwc/conv_nhwc_launch.hpp"
#include "backends/cuda/kernels/conv_nhwc/conv_nhwc_narrow.hpp"
#ifdef REDWOOD_HAVE_CONV_WGMMA
#include "backends/cuda/kernels/conv_nhwc/conv_nhwc_wgmma_tma.hpp"
#endif
#include "core/error.hpp"

#include <algorithm>
#include <stdexcept>

namespace redwood::cuda::kernels {

using nhwc_launch::counter_bytes;
using nhwc_launch::kdim_of;
using nhwc_launch::kMmaTiles;
using nhwc_launch::kShortcutTile;
using nhwc_launch::m_total_of;
using nhwc_launch::tiles_of;

namespace {
// K-dim elements of a pipeline stage: bk of a 16-bit type, half as many floats (rows of the same bytes).
int k_tile_of(const NhwcTile& t, NhwcStorage storage) { return storage == NhwcStorage::kF32 ? t.bk / 2 : t.bk; }
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

std::vector<int> nhwc_split_choices(const ConvShape& p, int tile, int multiprocessors, NhwcStorage storage) {
  const NhwcTile& t = nhwc_conv_tiles().at(static_cast<std::size_t>(tile));
  if (t.narrow > 0) return {1};  // the narrow kernel has no split-K
  const long long blocks = tiles_of(p, t);
  const int ktiles = (kdim_of(p) + k_tile_of(t, storage) - 1) / k_tile_of(t, storage);
  std::vector<int> out = {1};
  for (int s = 2; s <= 16 && s <= ktiles / 4 && blocks * s <= 4LL * multiprocessors; s *= 2) out.push_back(s);
  return out;
}

bool nhwc_wgmma_usable() {
#ifdef REDWOOD_HAVE_CONV_WGMMA
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
  return nhwc::conv_nhwc_tma_fits(p, storage == NhwcStorage::kF32 ? 4 : 2);
#else
  (void)p;
  (void)storage;
  return false;
#endif
}

std::vector<NhwcConvConfig> nhwc_conv_candidates(const ConvShape& p, int multiprocessors, NhwcFamilies families,
                                                 NhwcStorage storage) {
  std::vector<NhwcConvConfig> out;
  // Once per layer, not per tile. No shortcut input on the narrow kernel.
  const bool tma = families.wgmma && families.tma && nhwc_tma_fits(p, storage);
  const bool narrow_fits = families.narrow && p.c2 == 0 && conv_nhwc_narrow_fits(p, NhwcStorage::kF16);
  for (int tile = 0; tile < static_cast<int>(nhwc_conv_tiles().size()); ++tile) {
    const NhwcTile& t = nhwc_conv_tiles()[static_cast<std::size_t>(tile)];
    if (t.wgmma >= 0 && !families.wgmma) continue;
    if (t.tma >= 0 && !tma) continue;
    // A shortcut input (p.c2 > 0): the tiles that have its instantiation (kShortcutTile, every wgmma one).
    if (p.c2 > 0 && (t.narrow > 0 || (t.wgmma < 0 && !(tile < kMmaTiles && kShortcutTile[tile])))) continue;
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
  // round_tf32 is fp32 storage's at tf32 only.
  const bool round = round_tf32 && storage == NhwcStorage::kF32 && !split_tf32;
  const nhwc_launch::Request r{p, x, w, y, bias, residual, e, tile, splits, workspace, stream, counters, round, x2};
  if (storage == NhwcStorage::kF16) {
    nhwc_launch::launch_f16(r);
  } else if (storage == NhwcStorage::kBF16) {
    nhwc_launch::launch_bf16(r);
  } else if (!split_tf32) {
    // fp32 storage, tf32 products: the same tiles, each stage row holding half as many elements.
    nhwc_launch::launch_tf32(r);
  } else {
    // fp32 storage, fp32-accurate products from three tf32 ones (MmaTf32x3).
    nhwc_launch::launch_3xtf32(r);
  }
}

}  // namespace redwood::cuda::kernels
