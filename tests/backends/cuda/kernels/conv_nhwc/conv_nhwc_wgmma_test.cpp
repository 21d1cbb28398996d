// rw.ConvNhwc's Hopper wgmma tiles (conv_nhwc_wgmma.cuh): each forced tile at fp16, bf16 and fp32
// storage (tf32 products; bound tf32's 1e-3, the 16-bit types' 1e-2), with split-K 1, 2 and 3,
// against the reference NCHW Conv (CPU) on shapes that exercise what the
// wgmma kernel adds: many K tiles through the 4-stage pipeline (deep K-dim), K-dim tails (a
// 64-wide K tile half empty), M tails (odd pixel counts), N tails (K not a multiple of 64, 128 or
// 256), stride, padding, bias/residual/activation, and an 8-channel stem whose K tiles straddle
// window positions. The shapes of conv_nhwc_test.cpp run on every tile, wgmma included, too.
// Then: split-K bits repeat launch after launch, and the tile list and candidates (host only).
// The GPU cases skip, saying why, without a compute capability 9.0 device or a build without
// sm_90 (the tiles are sm_90a code).

#include "backends/cuda/device_tensor.hpp"
#include "backends/cuda/kernels/conv_nhwc/conv_nhwc.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"
#include "conv_nhwc_test_support.hpp"
#include "gpu_test_support.hpp"
#include "provider_run.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace redwood::cuda {
namespace {

using kernels::ConvShape;
using kernels::NhwcConvConfig;
using namespace conv_test;  // NhwcCase, shape_of, make_operands, wgmma_tiles, … (conv_nhwc_test_support.hpp)

std::vector<NhwcCase> wg_cases() {
  return {
      // K-dim 576 = 9 K tiles; M 720 (a 128-row tail of 80; 256: of 208); K 256.
      {"3x3_c64_k256_residual", 2, 64, 20, 18, 256, 3, 3, 1, {1, 1, 1, 1}, 1, true, true, "Relu"},
      // K-dim 360 (a tail of 40), M 3·12·10 = 360, K 200 (tails of every BN), stride 2.
      {"3x3_c40_k200_stride2", 3, 40, 23, 19, 200, 3, 3, 2, {1, 1, 1, 1}, 1, true, false, "HardSwish"},
      // 1×1, K-dim 512 (8 K tiles: split 3 leaves a split of 2), K 72, no bias, no activation.
      {"1x1_c512_k72_plain", 1, 512, 9, 11, 72, 1, 1, 1, {0, 0, 0, 0}, 1, false, true, ""},
      // The stem: 3 channels padded to 8 (fp32: 4), so a K tile of 64 (32 floats) spans 8 window
      // positions.
      {"7x7_stem_c3_stride2", 2, 3, 37, 33, 64, 7, 7, 2, {3, 3, 3, 3}, 1, true, false, "Relu"},
  };
}

#define RW_SKIP_WITHOUT_WGMMA()                                \
  do {                                                         \
    if (const std::string why = hopper_unavailable(wgmma_tiles()); !why.empty()) \
      GTEST_SKIP() << why;                                     \
  } while (0)

class ConvNhwcWgmma : public ::testing::TestWithParam<CaseAt> {};

TEST_P(ConvNhwcWgmma, EveryWgmmaTileAndSplitAgrees) {
  RW_SKIP_WITHOUT_WGMMA();
  const NhwcCase& c = GetParam().conv;
  const DType s = GetParam().storage;
  const DeviceCase d = device_case(c, s, 41);
  const ConvShape& p = d.p;
  const auto& tiles = kernels::nhwc_conv_tiles();
  const std::vector<int> splits = {1, 2, 3};
  std::size_t ws_bytes = 0;
  for (int t : wgmma_tiles()) {
    for (int sp : splits) ws_bytes = std::max(ws_bytes, kernels::nhwc_conv_workspace_bytes(p, {t, sp}));
  }
  const Tensor ws = device_empty(DType::kU8, {static_cast<std::int64_t>(ws_bytes)});
  cudaGetLastError();
  ASSERT_EQ(cudaMemset(ws.raw_data(), 0x5a, ws_bytes), cudaSuccess);  // garbage counters must not matter
  // fp32 storage: the tensor cores take tf32 from the fp32 bits (truncated, not rounded: the
  // mma.sync kernel rounds), so the bound is tf32's.
  const double bound = s == DType::kF32 ? 1e-3 : 1e-2;
  for (int t : wgmma_tiles()) {
    for (int sp : splits) {
      const Tensor out = d.output(s, NhwcConvConfig{t, sp}, ws.raw_data());
      ASSERT_TRUE(out.defined()) << tiles[static_cast<std::size_t>(t)].name;
      const Tensor got = redwood::to_channels_first(out, p.k);
      const double err = testing::relative_l2(got, d.o.expected);
      if (s == DType::kF32 && sp == 1) {
        std::printf("[ measured ] %s fp32/tf32 %s: relative L2 %.3g\n", c.name.c_str(),
                    tiles[static_cast<std::size_t>(t)].name, err);
      }
      EXPECT_LE(err, bound)
          << c.name << " tile " << tiles[static_cast<std::size_t>(t)].name << " split-K " << sp << " at "
          << dtype_name(s);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tiles, ConvNhwcWgmma, ::testing::ValuesIn(at_every_storage(wg_cases())),
                         case_at_name);

// Precision tf32 as the graph runner sets it up (choose_gpu_layout's round_tf32): x, w and the
// residual arrive already rounded to tf32 (the pass rounds the weights, every NHWC kernel its
// stored activations), so wgmma's truncation of the fp32 bits drops nothing and mma.sync's cvt.rna
// changes nothing: every tile, the mma.sync one too, matches an fp32 convolution of the same
// operands to summation order (on unrounded operands the wgmma tiles measured 6-7.7e-4 against
// the reference, EveryWgmmaTileAndSplitAgrees). With round_tf32 the kernel stores y rounded to
// tf32, bit for bit what round_to_tf32 makes of the unrounded store of the same tile.
TEST(ConvNhwcWgmmaRun, Tf32OperandsRoundedOnceMultiplyExactly) {
  RW_SKIP_WITHOUT_WGMMA();
  std::vector<int> tiles = wgmma_tiles();
  tiles.push_back(tile_index("128x128"));  // an mma.sync tile
  ASSERT_GE(tiles.back(), 0);
  for (const NhwcCase& c : wg_cases()) {
    const DeviceCase d = device_case(c, DType::kF32, 47, /*tf32=*/true);
    const ConvShape& p = d.p;
    for (int t : tiles) {
      const char* name = kernels::nhwc_conv_tiles()[static_cast<std::size_t>(t)].name;
      Tensor y[2];
      for (int round = 0; round < 2; ++round) {
        y[round] = device_empty(DType::kF32, {p.n, p.oh, p.ow, p.k});
        d.launch(kernels::NhwcStorage::kF32, y[round].raw_data(), NhwcConvConfig{t, 1}, nullptr, false, round == 1);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << name;
        y[round] = to_host(y[round]);
      }
      const double err = testing::relative_l2(redwood::to_channels_first(y[0], p.k), d.o.expected);
      std::printf("[ measured ] %s tf32 operands %s: relative L2 %.3g\n", c.name.c_str(), name, err);
      EXPECT_LE(err, 1e-5) << c.name << " tile " << name;
      const Tensor want = rounded_tf32(y[0]);
      EXPECT_EQ(std::memcmp(want.raw_data(), y[1].raw_data(), want.nbytes()), 0) << c.name << " tile " << name;
    }
  }
}

TEST(ConvNhwcWgmmaRun, SplitKIsDeterministic) {
  RW_SKIP_WITHOUT_WGMMA();
  const NhwcCase c = wg_cases()[0];
  const ConvShape p = shape_of(c, DType::kBF16);
  const Operands o = make_operands(c, DType::kBF16, 41);
  const Tensor x = to_device(o.x), w = to_device(o.w), bias = to_device(o.bias), res = to_device(o.residual);
  const NhwcConvConfig cfg{wgmma_tiles().front(), 3};
  const Tensor ws = device_empty(DType::kU8, {static_cast<std::int64_t>(kernels::nhwc_conv_workspace_bytes(p, cfg))});
  kernels::Epilogue e;
  e.act = kernels::kActRelu;
  std::vector<Tensor> outs;
  for (int i = 0; i < 3; ++i) {
    Tensor y = device_empty(DType::kBF16, {p.n, p.oh, p.ow, p.k});
    kernels::launch_conv_nhwc(p, kernels::NhwcStorage::kBF16, x.raw_data(), w.raw_data(), y.raw_data(),
                              bias.data<float>(), res.raw_data(), e, cfg, ws.raw_data(), nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    outs.push_back(to_host(y));
  }
  for (int i = 1; i < 3; ++i) {
    EXPECT_EQ(std::memcmp(outs[0].raw_data(), outs[static_cast<std::size_t>(i)].raw_data(), outs[0].nbytes()), 0)
        << "launch " << i << " differs from launch 0";
  }
}

TEST(ConvNhwcWgmmaRun, TheTunerOffersThemOnHopper) {
  RW_SKIP_WITHOUT_WGMMA();
  // What rw.ConvNhwc's plan asks for on this device: every wgmma tile is a candidate.
  const ConvShape p = shape_of(wg_cases()[0], DType::kF16);
  const auto cands = kernels::nhwc_conv_candidates(p, 132, {.wgmma = kernels::nhwc_wgmma_usable()});
  for (int t : wgmma_tiles()) {
    EXPECT_NE(std::find(cands.begin(), cands.end(), NhwcConvConfig{t, 1}), cands.end())
        << kernels::nhwc_conv_tiles()[static_cast<std::size_t>(t)].name;
  }
}

// ---- host only: the tile list and the candidates ----

TEST(ConvNhwcWgmmaTiles, AreBk64TilesOfWholeWarpgroups) {
  if (wgmma_tiles().empty()) GTEST_SKIP() << "this build has no wgmma tiles (sm_90 is not among its architectures)";
  const auto& tiles = kernels::nhwc_conv_tiles();
  int index = 0;
  for (int t : wgmma_tiles()) {
    const kernels::NhwcTile& tile = tiles[static_cast<std::size_t>(t)];
    EXPECT_EQ(tile.wgmma, index++) << tile.name << ": in the order of the wgmma kernels";
    EXPECT_EQ(tile.bk, 64) << tile.name << ": the 128-byte swizzle needs rows of 64 16-bit elements (32 floats)";
    EXPECT_EQ(tile.threads % 128, 0) << tile.name;
    EXPECT_EQ(tile.bm % (64 * (tile.threads / 128)), 0) << tile.name << ": m64 per warpgroup instruction";
    EXPECT_EQ(std::string(tile.name).rfind("wg", 0), 0u) << tile.name;
  }
  EXPECT_EQ(index, 7);  // kWgmmaKernels (conv_nhwc_wgmma.hpp)
}

TEST(ConvNhwcWgmmaTiles, CandidatesOnlyWhenAsked) {
  if (wgmma_tiles().empty()) GTEST_SKIP() << "this build has no wgmma tiles (sm_90 is not among its architectures)";
  const ConvShape big{32, 256, 14, 14, 256, 3, 3, 14, 14, 1, 1, 1, 1, 1, 1, 1};
  const ConvShape small{1, 512, 7, 7, 512, 3, 3, 7, 7, 1, 1, 1, 1, 1, 1, 1};
  for (const ConvShape& p : {big, small}) {
    auto is_wgmma = [](const NhwcConvConfig& c) {  // any wgmma family (the TMA ones too)
      const kernels::NhwcTile& t = kernels::nhwc_conv_tiles()[static_cast<std::size_t>(c.tile)];
      return t.wgmma >= 0 || t.tma >= 0;
    };
    const auto without = kernels::nhwc_conv_candidates(p, 132, {});
    EXPECT_EQ(std::count_if(without.begin(), without.end(), is_wgmma), 0);
    const auto with = kernels::nhwc_conv_candidates(p, 132, {.wgmma = true, .tma = true});
    for (int t : wgmma_tiles()) {
      // Each wgmma tile with every split count its K-dim and grid allow (1 always).
      for (int sp : kernels::nhwc_split_choices(p, t, 132)) {
        EXPECT_NE(std::find(with.begin(), with.end(), NhwcConvConfig{t, sp}), with.end())
            << kernels::nhwc_conv_tiles()[static_cast<std::size_t>(t)].name << " split " << sp;
      }
    }
    // The mma.sync candidates are the same either way.
    std::vector<NhwcConvConfig> rest;
    std::copy_if(with.begin(), with.end(), std::back_inserter(rest), [&](const NhwcConvConfig& c) { return !is_wgmma(c); });
    EXPECT_EQ(rest, without);
  }
  // Batch 1 at 7×7 (49 pixels, 36 K tiles): split-K is offered for the wgmma tiles as well.
  EXPECT_GT(kernels::nhwc_split_choices(small, wgmma_tiles().front(), 132).size(), 1u);
}

TEST(ConvNhwcWgmmaTiles, CandidatesAtFp32StorageCountK32Floats) {
  if (wgmma_tiles().empty()) GTEST_SKIP() << "this build has no wgmma tiles (sm_90 is not among its architectures)";
  // fp32 storage at tf32: every wgmma tile with the split counts of its 32-float K tiles (twice
  // as many K tiles as at 16-bit storage, so batch 1 at 7×7 splits further); the mma.sync
  // candidates are the same with and without them.
  const ConvShape small{1, 512, 7, 7, 512, 3, 3, 7, 7, 1, 1, 1, 1, 1, 1, 1};
  const auto f32 = kernels::NhwcStorage::kF32;
  const auto without = kernels::nhwc_conv_candidates(small, 132, {}, f32);
  const auto with = kernels::nhwc_conv_candidates(small, 132, {.wgmma = true, .tma = true}, f32);
  for (int t : wgmma_tiles()) {
    const std::vector<int> splits = kernels::nhwc_split_choices(small, t, 132, f32);
    EXPECT_GE(splits.size(), kernels::nhwc_split_choices(small, t, 132).size());
    for (int sp : splits) {
      EXPECT_NE(std::find(with.begin(), with.end(), NhwcConvConfig{t, sp}), with.end())
          << kernels::nhwc_conv_tiles()[static_cast<std::size_t>(t)].name << " split " << sp;
    }
  }
  std::vector<NhwcConvConfig> rest;
  std::copy_if(with.begin(), with.end(), std::back_inserter(rest), [](const NhwcConvConfig& c) {
    const kernels::NhwcTile& t = kernels::nhwc_conv_tiles()[static_cast<std::size_t>(c.tile)];
    return t.wgmma < 0 && t.tma < 0;
  });
  EXPECT_EQ(rest, without);
  EXPECT_GT(with.size(), without.size());
}

TEST(ConvNhwcWgmmaTiles, ThreeTf32ProductsAreRefusedClearly) {
  if (wgmma_tiles().empty()) GTEST_SKIP() << "this build has no wgmma tiles (sm_90 is not among its architectures)";
  // The wgmma tiles multiply fp16, bf16 or tf32 once; fp32 storage at precision fp32 (3xTF32:
  // three products of split operands) is an error naming the tile, raised before anything reaches
  // the GPU.
  const ConvShape p{1, 8, 4, 4, 8, 1, 1, 4, 4, 1, 1, 0, 0, 1, 1, 1};
  const int t = wgmma_tiles().front();
  try {
    kernels::launch_conv_nhwc(p, kernels::NhwcStorage::kF32, nullptr, nullptr, nullptr, nullptr, nullptr,
                              kernels::Epilogue{}, NhwcConvConfig{t, 1}, nullptr, nullptr, nullptr, true);
    ADD_FAILURE() << "no error";
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("wg"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("3xTF32"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace redwood::cuda
