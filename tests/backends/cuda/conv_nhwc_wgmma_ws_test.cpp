// rw.ConvNhwc's warp-specialized persistent wgmma tiles (conv_nhwc_wgmma_ws.cuh): each tile at
// fp16, bf16 and fp32 storage (tf32 products; tf32's bound 1e-3, the 16-bit types' 1e-2) against
// the reference NCHW Conv (CPU), on the wgmma tests' shapes (M, N and K-dim tails, stride,
// padding, bias/residual/activation, the 8-channel stem) and on layers of more output tiles than
// the GPU has multiprocessors, so each CTA of the persistent grid does several tiles and the
// ring's stages wrap their mbarrier phases across tiles (one K tile a tile, and 4.5 of them). The
// shapes of conv_nhwc_test.cpp run on these tiles too (EveryTileAndSplitAgrees). Then the host-only
// checks: the tile list, split 1 only, and that only REDWOOD_CUDA_WGMMA_WS=1 offers them. The GPU cases
// skip, saying why, without a compute capability 9.0 device or a build without sm_90.

#include "backends/cuda/cuda_kernel.hpp"
#include "backends/cuda/device_tensor.hpp"
#include "backends/cuda/kernels/conv_nhwc.hpp"
#include "conv_nhwc_test_support.hpp"
#include "gpu_test_support.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace redwood::cuda {
namespace {

using kernels::ConvShape;
using kernels::NhwcConvConfig;
using namespace conv_test;

std::vector<NhwcCase> ws_cases() {
  return {
      // conv_nhwc_wgmma_test.cpp's wg_cases(): deep K-dim with a residual, K-dim/M/N tails at
      // stride 2, a plain 1×1 with no bias or activation, the stem (K tiles spanning window positions).
      {"3x3_c64_k256_residual", 2, 64, 20, 18, 256, 3, 3, 1, {1, 1, 1, 1}, 1, true, true, "Relu"},
      {"3x3_c40_k200_stride2", 3, 40, 23, 19, 200, 3, 3, 2, {1, 1, 1, 1}, 1, true, false, "HardSwish"},
      {"1x1_c512_k72_plain", 1, 512, 9, 11, 72, 1, 1, 1, {0, 0, 0, 0}, 1, false, true, ""},
      {"7x7_stem_c3_stride2", 2, 3, 37, 33, 64, 7, 7, 2, {3, 3, 3, 3}, 1, true, false, "Relu"},
      // More tiles than multiprocessors for every ws tile (132 on an H200): M 3·54·54 = 8748 (69
      // 128-row tiles, the last of 44), K 264 (2 tiles of 256, 3 of 128, 5 of 64: N tails). A 1×1
      // of one K tile a tile (16-bit; fp32: 2), and a 3×3 of K-dim 216 (3.4 tiles of 64), residual.
      {"1x1_c64_k264_many_tiles", 3, 64, 54, 54, 264, 1, 1, 1, {0, 0, 0, 0}, 1, true, true, "Relu"},
      {"3x3_c24_k264_many_tiles", 3, 24, 54, 54, 264, 3, 3, 1, {1, 1, 1, 1}, 1, true, true, "Relu"},
  };
}

class ConvNhwcWgmmaWs : public ::testing::TestWithParam<CaseAt> {};

TEST_P(ConvNhwcWgmmaWs, EveryWsTileAgrees) {
  if (const std::string why = hopper_unavailable(ws_tiles()); !why.empty()) GTEST_SKIP() << why;
  const NhwcCase& c = GetParam().conv;
  const DType s = GetParam().storage;
  const DeviceCase d = device_case(c, s, 53);
  const ConvShape& p = d.p;
  const double bound = s == DType::kF32 ? 1e-3 : 1e-2;
  cudaGetLastError();
  for (int t : ws_tiles()) {
    const char* name = kernels::nhwc_conv_tiles()[static_cast<std::size_t>(t)].name;
    // Split 2 is asked for and ignored (no workspace needed): the tiles run unsplit.
    for (int sp : {1, 2}) {
      const Tensor out = d.output(s, NhwcConvConfig{t, sp}, nullptr);
      ASSERT_TRUE(out.defined()) << name;
      const double err = testing::relative_l2(redwood::to_channels_first(out, p.k), d.o.expected);
      const long long tiles = kernels::nhwc_conv_tile_count(p, {t, 1});
      if (sp == 1) {
        std::printf("[ measured ] %s %s %s: %lld tiles on %d multiprocessors, relative L2 %.3g\n", c.name.c_str(),
                    std::string(dtype_name(s)).c_str(), name, tiles, multiprocessor_count(), err);
        std::fflush(stdout);  // a hang (an mbarrier mistake) shows after which tile
      }
      EXPECT_LE(err, bound) << c.name << " tile " << name << " split " << sp << " at " << dtype_name(s);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tiles, ConvNhwcWgmmaWs, ::testing::ValuesIn(at_every_storage(ws_cases())),
                         case_at_name);

TEST(ConvNhwcWgmmaWsRun, ManyTileCasesGiveEachCtaSeveralTiles) {
  if (const std::string why = hopper_unavailable(ws_tiles()); !why.empty()) GTEST_SKIP() << why;
  // What the many-tile cases are for: on this GPU every ws tile has more tiles than the
  // persistent grid has CTAs (one a multiprocessor), so CTAs go round the ring across tiles.
  for (const NhwcCase& c : ws_cases()) {
    if (c.name.find("many_tiles") == std::string::npos) continue;
    for (int t : ws_tiles()) {
      EXPECT_GT(kernels::nhwc_conv_tile_count(shape_of(c, DType::kF16), {t, 1}), multiprocessor_count())
          << c.name << " " << kernels::nhwc_conv_tiles()[static_cast<std::size_t>(t)].name;
    }
  }
}

// The same launch twice gives the same bits (no arrival-order dependence in the persistent walk).
TEST(ConvNhwcWgmmaWsRun, RepeatsBitForBit) {
  if (const std::string why = hopper_unavailable(ws_tiles()); !why.empty()) GTEST_SKIP() << why;
  const NhwcCase c = ws_cases()[5];
  const ConvShape p = shape_of(c, DType::kF16);
  const Operands o = make_operands(c, DType::kF16, 59);
  const Tensor x = to_device(o.x), w = to_device(o.w), bias = to_device(o.bias), res = to_device(o.residual);
  kernels::Epilogue e;
  e.act = kernels::kActRelu;
  for (int t : ws_tiles()) {
    Tensor out[2];
    for (Tensor& y : out) {
      y = device_empty(DType::kF16, {p.n, p.oh, p.ow, p.k});
      kernels::launch_conv_nhwc(p, kernels::NhwcStorage::kF16, x.raw_data(), w.raw_data(), y.raw_data(),
                                bias.data<float>(), res.raw_data(), e, NhwcConvConfig{t, 1}, nullptr, nullptr);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      y = to_host(y);
    }
    EXPECT_EQ(std::memcmp(out[0].raw_data(), out[1].raw_data(), out[0].nbytes()), 0)
        << kernels::nhwc_conv_tiles()[static_cast<std::size_t>(t)].name;
    std::printf("[ measured ] %s repeats\n", kernels::nhwc_conv_tiles()[static_cast<std::size_t>(t)].name);
    std::fflush(stdout);  // a hang (an mbarrier mistake) shows after which tile
  }
}

// ---- host only: the tile list, split choices, and the switch ----

TEST(ConvNhwcWgmmaWsTiles, AreListedInKernelOrderWithSplitOneOnly) {
  if (ws_tiles().empty()) GTEST_SKIP() << "this build has no wgmma tiles (sm_90 is not among its architectures)";
  const ConvShape small{1, 512, 7, 7, 512, 3, 3, 7, 7, 1, 1, 1, 1, 1, 1, 1};
  int index = 0;
  for (int t : ws_tiles()) {
    const kernels::NhwcTile& tile = kernels::nhwc_conv_tiles()[static_cast<std::size_t>(t)];
    EXPECT_EQ(tile.ws, index++) << tile.name << ": in the order of the ws kernels";
    EXPECT_EQ(tile.wgmma, -1) << tile.name;
    EXPECT_EQ(tile.threads, 384) << tile.name << ": a producer and two consumer warpgroups";
    EXPECT_EQ(tile.bm, 128) << tile.name << ": two consumer warpgroups of m64";
    EXPECT_EQ(tile.bk, 64) << tile.name;
    EXPECT_EQ(std::string(tile.name).rfind("ws", 0), 0u) << tile.name;
    // Batch 1 at 7×7 would split the other tiles; these have no split-K.
    EXPECT_EQ(kernels::nhwc_split_choices(small, t, 132), std::vector<int>{1}) << tile.name;
    EXPECT_EQ(kernels::nhwc_split_choices(small, t, 132, kernels::NhwcStorage::kF32), std::vector<int>{1})
        << tile.name;
  }
  EXPECT_EQ(index, 5);  // kWgmmaWsKernels (conv_nhwc_wgmma_ws.hpp)
}

TEST(ConvNhwcWgmmaWsTiles, OfferedWithTheWgmmaTilesOnlyWhenSwitchedOn) {
  if (ws_tiles().empty()) GTEST_SKIP() << "this build has no wgmma tiles (sm_90 is not among its architectures)";
  const ConvShape big{32, 256, 14, 14, 256, 3, 3, 14, 14, 1, 1, 1, 1, 1, 1, 1};
  auto count_ws = [](const std::vector<NhwcConvConfig>& cands) {
    return std::count_if(cands.begin(), cands.end(), [](const NhwcConvConfig& c) {
      return kernels::nhwc_conv_tiles()[static_cast<std::size_t>(c.tile)].ws >= 0;
    });
  };
  const redwood::testing::ScopedEnv env("REDWOOD_CUDA_WGMMA_WS", "1");
  EXPECT_TRUE(kernels::nhwc_wgmma_ws_enabled());
  EXPECT_EQ(count_ws(kernels::nhwc_conv_candidates(big, 132, true)), static_cast<long>(ws_tiles().size()));
  EXPECT_EQ(count_ws(kernels::nhwc_conv_candidates(big, 132, false)), 0) << "only where the wgmma tiles run";
  for (const char* off : {"0", ""}) {  // and by default (unset) they are not offered
    env.set(*off != 0 ? off : nullptr);
    EXPECT_FALSE(kernels::nhwc_wgmma_ws_enabled()) << "REDWOOD_CUDA_WGMMA_WS='" << off << "'";
  }
  const auto without = kernels::nhwc_conv_candidates(big, 132, true);
  EXPECT_EQ(count_ws(without), 0);
  // Everything else stays offered: the first wgmma tile among them.
  EXPECT_NE(std::find(without.begin(), without.end(), NhwcConvConfig{wgmma_tiles().front(), 1}), without.end());
}

}  // namespace
}  // namespace redwood::cuda
