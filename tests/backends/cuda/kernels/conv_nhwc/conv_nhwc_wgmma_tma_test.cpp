// rw.ConvNhwc's TMA-fed wgmma tiles (conv_nhwc_wgmma_tma.cuh), both schedules (one thread
// issuing inside the loop; a producer warp with empty/full mbarriers): each tile at fp16, bf16 and fp32
// storage (tf32 products; tf32's bound 1e-3, the 16-bit types' 1e-2), split-K 1 and 2, against
// the reference NCHW Conv (CPU), on what the im2col copies must get right: padding on every side
// (the box corners), stride 2 (the traversal stride), dilation (the filter offsets), M tails that
// run past the last image (zeros), tiles whose pixels cross rows and images, N tails (the weights'
// box past K), deep K-dims through the stage ring (its mbarrier phases), and bias, residual and
// activations. The shapes of conv_nhwc_test.cpp run on these tiles too where they fit. Then the
// host-only checks: which layers they take, and that they are offered only when asked
// (CudaOptions::tma). The GPU cases skip, saying why, without a compute capability 9.0 device or a
// build without sm_90.

#include "backends/cuda/device_tensor.hpp"
#include "backends/cuda/kernels/conv_nhwc/conv_nhwc.hpp"
#include "core/error.hpp"
#include "conv_nhwc_test_support.hpp"
#include "gpu_test_support.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace redwood::cuda {
namespace {

using kernels::ConvShape;
using kernels::NhwcConvConfig;
using namespace conv_test;

std::vector<NhwcCase> tma_cases() {
  return {
      // ResNet's 3×3: pad 1 all round, M 2·20·18 = 720 (tails of 80 and 208 rows), K 256, K-dim 576.
      {"3x3_c64_k256_residual", 2, 64, 20, 18, 256, 3, 3, 1, {1, 1, 1, 1}, 1, true, true, "Relu"},
      // Stride 2 over an odd image (23×19 → 12×10), K 200 (N tails of every BN), K-dim 1152.
      {"3x3_c128_k200_stride2", 3, 128, 23, 19, 200, 3, 3, 2, {1, 1, 1, 1}, 1, true, false, "HardSwish"},
      // Dilation 2 with padding 2: filter offsets of 0, 2 and 4.
      {"3x3_c64_k64_dilation2", 2, 64, 15, 17, 64, 3, 3, 1, {2, 2, 2, 2}, 2, true, true, "Relu"},
      // A 1×1 without padding (the expansions), 5 images of 7×7 (tiles cross images), deep K-dim.
      {"1x1_c512_k136_plain", 5, 512, 7, 7, 136, 1, 1, 1, {0, 0, 0, 0}, 1, false, true, ""},
      // A 1×1 at stride 2 (a downsample), and a 5×5 with padding 2 (MobileNet's kernels).
      {"1x1_c64_k128_stride2", 2, 64, 28, 28, 128, 1, 1, 2, {0, 0, 0, 0}, 1, true, false, "Relu"},
      {"5x5_c64_k96_pad2", 1, 64, 14, 14, 96, 5, 5, 1, {2, 2, 2, 2}, 1, true, false, "Relu"},
  };
}

class ConvNhwcWgmmaTma : public ::testing::TestWithParam<CaseAt> {};

TEST_P(ConvNhwcWgmmaTma, EveryTmaTileAndSplitAgrees) {
  if (const std::string why = hopper_unavailable(tma_tiles()); !why.empty()) GTEST_SKIP() << why;
  const NhwcCase& c = GetParam().conv;
  const DType s = GetParam().storage;
  const DeviceCase d = device_case(c, s, 67);
  const ConvShape& p = d.p;
  ASSERT_TRUE(kernels::nhwc_tma_fits(p, storage_of(s))) << c.name;
  const double bound = s == DType::kF32 ? 1e-3 : 1e-2;
  std::size_t ws_bytes = 256;
  for (int t : tma_tiles()) ws_bytes = std::max(ws_bytes, kernels::nhwc_conv_workspace_bytes(p, {t, 2}));
  const Tensor ws = device_empty(DType::kU8, {static_cast<std::int64_t>(ws_bytes)});
  cudaGetLastError();
  for (int t : tma_tiles()) {
    const char* name = kernels::nhwc_conv_tiles()[static_cast<std::size_t>(t)].name;
    for (int sp : {1, 2}) {
      const Tensor out = d.output(s, NhwcConvConfig{t, sp}, ws.raw_data());
      ASSERT_TRUE(out.defined()) << name;
      const double err = testing::relative_l2(redwood::to_channels_first(out, p.k), d.o.expected);
      if (sp == 1) {
        std::printf("[ measured ] %s %s %s: relative L2 %.3g\n", c.name.c_str(), std::string(dtype_name(s)).c_str(),
                    name, err);
        std::fflush(stdout);  // a hang (an mbarrier or map mistake) shows after which tile
      }
      EXPECT_LE(err, bound) << c.name << " tile " << name << " split " << sp << " at " << dtype_name(s);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tiles, ConvNhwcWgmmaTma, ::testing::ValuesIn(at_every_storage(tma_cases())),
                         case_at_name);

// ---- host only ----

TEST(ConvNhwcWgmmaTmaTiles, TakeWholeChannelRowsSquareGeometryAndNoShortcut) {
  if (tma_tiles().empty()) GTEST_SKIP() << "this build has no wgmma tiles (sm_90 is not among its architectures)";
  const auto f16 = kernels::NhwcStorage::kF16, f32 = kernels::NhwcStorage::kF32;
  const ConvShape resnet3x3{32, 64, 56, 56, 64, 3, 3, 56, 56, 1, 1, 1, 1, 1, 1, 1};
  EXPECT_TRUE(kernels::nhwc_tma_fits(resnet3x3, f16));
  EXPECT_TRUE(kernels::nhwc_tma_fits(resnet3x3, f32));  // 64 channels: two rows of 32 floats
  ConvShape c40 = resnet3x3;
  c40.c = 40;  // a K tile would straddle filter taps
  EXPECT_FALSE(kernels::nhwc_tma_fits(c40, f16));
  ConvShape c32 = resnet3x3;
  c32.c = 32;  // a row of 32 floats, half a 16-bit row
  EXPECT_FALSE(kernels::nhwc_tma_fits(c32, f16));
  EXPECT_TRUE(kernels::nhwc_tma_fits(c32, f32));
  ConvShape oblong = resnet3x3;
  oblong.stride_w = 2;
  EXPECT_FALSE(kernels::nhwc_tma_fits(oblong, f16));
  ConvShape shortcut = resnet3x3;
  shortcut.r = shortcut.s = 1;
  shortcut.pad_h = shortcut.pad_w = 0;
  EXPECT_TRUE(kernels::nhwc_tma_fits(shortcut, f16));
  shortcut.c2 = 256;  // a projection shortcut's second input: the cp.async tiles' (ConvLoader's SC)
  EXPECT_FALSE(kernels::nhwc_tma_fits(shortcut, f16));
}

TEST(ConvNhwcWgmmaTmaTiles, OfferedWhereTheyFitWhenAsked) {
  if (tma_tiles().empty()) GTEST_SKIP() << "this build has no wgmma tiles (sm_90 is not among its architectures)";
  const ConvShape p{32, 256, 14, 14, 256, 3, 3, 14, 14, 1, 1, 1, 1, 1, 1, 1};
  auto count_tma = [](const std::vector<NhwcConvConfig>& cands) {
    return std::count_if(cands.begin(), cands.end(), [](const NhwcConvConfig& c) {
      return kernels::nhwc_conv_tiles()[static_cast<std::size_t>(c.tile)].tma >= 0;
    });
  };
  // Only with the wgmma tiles.
  EXPECT_EQ(count_tma(kernels::nhwc_conv_candidates(p, 132, {.wgmma = false, .tma = true})), 0);
  const auto with = kernels::nhwc_conv_candidates(p, 132, {.wgmma = true, .tma = true});
  for (int t : tma_tiles()) {
    for (int sp : kernels::nhwc_split_choices(p, t, 132)) {
      EXPECT_NE(std::find(with.begin(), with.end(), NhwcConvConfig{t, sp}), with.end())
          << kernels::nhwc_conv_tiles()[static_cast<std::size_t>(t)].name << " split " << sp;
    }
  }
  EXPECT_EQ(count_tma(kernels::nhwc_conv_candidates(p, 132, {.wgmma = true, .tma = false})), 0);
}

TEST(ConvNhwcWgmmaTmaTiles, ThreeTf32ProductsAreRefusedClearly) {
  if (tma_tiles().empty()) GTEST_SKIP() << "this build has no wgmma tiles (sm_90 is not among its architectures)";
  const ConvShape p{1, 64, 4, 4, 8, 1, 1, 4, 4, 1, 1, 0, 0, 1, 1, 1};
  try {
    kernels::launch_conv_nhwc(p, kernels::NhwcStorage::kF32, nullptr, nullptr, nullptr, nullptr, nullptr,
                              kernels::Epilogue{}, NhwcConvConfig{tma_tiles().front(), 1}, nullptr, nullptr, nullptr,
                              true);
    ADD_FAILURE() << "no error";
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("tma"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("3xTF32"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace redwood::cuda
