// The narrow kernel of rw.ConvNhwc (conv_nhwc_narrow.cu), forced through launch_conv_nhwc with
// each of its variants' tiles (narrow16, narrow32, and the pipelined narrow16p, narrow32p), at
// fp16 and bf16, against the reference NCHW Conv
// (CPU) on the inputs, weights and residual already rounded to the storage type (bias fp32), so
// the bound measures the kernel: fp32 accumulation and one rounding of the output. The shapes
// cover what its index math and masks must get right: MobileNetV3's stem (3 channels padded to
// 8, 3×3 stride 2, padding), 1×1 layers of 16 to 120 channels with a residual, K of 8, 24, 40, 72
// and 120 (lanes and channel groups past K), K-dims that end inside a 32-chunk (24, 48, 72, 120),
// uneven padding with dilation and stride, and M that no warp's 16·MT rows divide (down to 9
// pixels). Each output has a guard region after it that must stay untouched, and starts as NaNs
// (every pixel must be written). Then host-only checks of the tuner's candidate list and of the
// launcher's errors (no GPU needed).

#include "backends/cuda/device_tensor.hpp"
#include "backends/cuda/kernels/conv_nhwc/conv_nhwc.hpp"
#include "backends/cuda/kernels/conv_nhwc/conv_nhwc_narrow.hpp"
#include "core/layout.hpp"
#include "conv_nhwc_test_support.hpp"
#include "gpu_test_support.hpp"
#include "provider_run.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace redwood::cuda {
namespace {

using kernels::ConvShape;
using kernels::NhwcConvConfig;
using kernels::NhwcStorage;
using namespace conv_test;  // NhwcCase, shape_of, make_operands, tile_index, … (conv_nhwc_test_support.hpp)

std::vector<NhwcCase> narrow_cases() {
  return {
      {"stem_3x3_s2_c3_k16", 2, 3, 23, 21, 16, 3, 3, 2, {1, 1, 1, 1}, 1, true, false, "HardSwish"},
      {"1x1_c16_k16_residual", 3, 16, 9, 7, 16, 1, 1, 1, {0, 0, 0, 0}, 1, true, true},
      {"1x1_c16_k64", 2, 16, 11, 10, 64, 1, 1},
      {"1x1_c64_k24_residual_hardswish", 1, 64, 13, 5, 24, 1, 1, 1, {0, 0, 0, 0}, 1, true, true, "HardSwish"},
      {"1x1_c24_k72", 2, 24, 7, 9, 72, 1, 1},
      {"1x1_c120_k40_residual", 2, 120, 6, 7, 40, 1, 1, 1, {0, 0, 0, 0}, 1, true, true},
      {"1x1_c40_k120_no_bias_no_act", 1, 40, 9, 9, 120, 1, 1, 1, {0, 0, 0, 0}, 1, false, false, ""},
      {"3x3_c8_k40_s2_uneven_pads_dilated", 2, 8, 14, 11, 40, 3, 3, 2, {0, 2, 1, 1}, 2, false, true, "HardSwish"},
      {"1x3_c16_k8_pad_w", 3, 16, 5, 6, 8, 1, 3, 1, {0, 1, 0, 1}},
      {"1x1_c8_k16_nine_pixels", 1, 8, 3, 3, 16, 1, 1},
      {"1x1_c128_k128_limits", 1, 128, 4, 5, 128, 1, 1, 1, {0, 0, 0, 0}, 1, true, true},
  };
}

struct NarrowParam {
  NhwcCase conv;
  DType storage;
};
void PrintTo(const NarrowParam& p, std::ostream* os) { *os << p.conv.name << "_" << dtype_name(p.storage); }

class ConvNhwcNarrowVsReference : public ::testing::TestWithParam<NarrowParam> {};

const std::vector<const char*>& narrow_tiles() {
  static const std::vector<const char*> names = {"narrow16", "narrow32", "narrow16p", "narrow32p"};
  return names;
}

TEST_P(ConvNhwcNarrowVsReference, EveryVariantAgrees) {
  RW_SKIP_WITHOUT_GPU();
  const NhwcCase& c = GetParam().conv;
  const DType s = GetParam().storage;
  const ConvShape p = shape_of(c, s);
  ASSERT_TRUE(kernels::conv_nhwc_narrow_fits(p, storage_of(s)));
  const Operands o = make_operands(c, s, 41);
  const Tensor& expected = o.expected;
  const Tensor dx = to_device(o.x), dw = to_device(o.w);
  const Tensor dbias = c.bias ? to_device(o.bias) : Tensor();
  const Tensor dres = c.residual ? to_device(o.residual) : Tensor();
  kernels::Epilogue e;
  e.act = act_code(c.act);
  const NhwcStorage storage = storage_of(s);
  const std::int64_t out_elems = static_cast<std::int64_t>(p.n) * p.oh * p.ow * p.k;
  constexpr std::int64_t kGuard = 256;  // elements after the output that must stay as they were
  cudaGetLastError();                   // an earlier test's deliberate failure stays here: clear it
  for (const char* name : narrow_tiles()) {
    const int tile = tile_index(name);
    ASSERT_GE(tile, 0) << name << " is not among nhwc_conv_tiles()";
    Tensor y = device_empty(s, {out_elems + kGuard});
    ASSERT_EQ(cudaMemset(y.raw_data(), 0xff, y.nbytes()), cudaSuccess);  // NaNs where nothing is written
    kernels::launch_conv_nhwc(p, storage, dx.raw_data(), dw.raw_data(), y.raw_data(),
                              c.bias ? dbias.data<float>() : nullptr, c.residual ? dres.raw_data() : nullptr, e,
                              NhwcConvConfig{tile, 1}, nullptr, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << name;
    const Tensor all = to_host(y);
    Tensor got = Tensor::empty(s, {p.n, p.oh, p.ow, p.k});
    std::memcpy(got.raw_data(), all.raw_data(), got.nbytes());
    const double err = testing::relative_l2(to_channels_first(got, p.k), expected);
    EXPECT_LE(err, s == DType::kF16 ? 3e-3 : 1e-2) << c.name << " " << name << " at " << dtype_name(s);
    const auto* guard = static_cast<const unsigned char*>(all.raw_data()) + got.nbytes();
    EXPECT_TRUE(std::all_of(guard, guard + kGuard * 2, [](unsigned char b) { return b == 0xff; }))
        << c.name << " " << name << " wrote past the output";
  }
}

std::vector<NarrowParam> narrow_params() {
  std::vector<NarrowParam> out;
  for (const NhwcCase& c : narrow_cases()) {
    for (DType s : {DType::kF16, DType::kBF16}) out.push_back({c, s});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Shapes, ConvNhwcNarrowVsReference, ::testing::ValuesIn(narrow_params()),
                         [](const ::testing::TestParamInfo<NarrowParam>& info) {
                           return info.param.conv.name + "_" + std::string(dtype_name(info.param.storage));
                         });

// ---- host only: the candidates and the launcher's errors (no CUDA call), so these run without a GPU ----

ConvShape shape(int n, int c, int hw, int k, int rs, int stride, int pad) {
  const int o = (hw + 2 * pad - rs) / stride + 1;
  return ConvShape{n, c, hw, hw, k, rs, rs, o, o, stride, stride, pad, pad, 1, 1, 1};
}

// The narrow tiles among the candidates, each with its split count.
std::vector<NhwcConvConfig> narrow_candidates(const ConvShape& p, bool narrow) {
  std::vector<NhwcConvConfig> out;
  for (const NhwcConvConfig& cfg : kernels::nhwc_conv_candidates(p, 132, {.narrow = narrow})) {
    if (kernels::nhwc_conv_tiles()[static_cast<std::size_t>(cfg.tile)].narrow > 0) out.push_back(cfg);
  }
  return out;
}

TEST(ConvNhwcNarrowCandidates, OfferedForFewChannelsOnly) {
  const ConvShape stem = shape(32, 8, 224, 16, 3, 2, 1);  // MobileNetV3's stem: K-dim 72, K 16
  std::vector<NhwcConvConfig> want;
  for (const char* name : narrow_tiles()) want.push_back({tile_index(name), 1});
  EXPECT_EQ(narrow_candidates(stem, true), want);
  EXPECT_TRUE(narrow_candidates(stem, false).empty()) << "offered without `narrow` (fp32 storage)";
  // The mma tiles stay candidates beside them.
  EXPECT_GT(kernels::nhwc_conv_candidates(stem, 132, {.narrow = true}).size(), want.size());
  EXPECT_EQ(narrow_candidates(shape(32, 128, 14, 128, 1, 1, 0), true), want) << "K-dim 128 and K 128: the limits";
  EXPECT_TRUE(narrow_candidates(shape(32, 136, 14, 16, 1, 1, 0), true).empty()) << "K-dim 136";
  EXPECT_TRUE(narrow_candidates(shape(32, 16, 14, 136, 1, 1, 0), true).empty()) << "K 136";
  EXPECT_TRUE(narrow_candidates(shape(32, 16, 56, 64, 3, 1, 1), true).empty()) << "3x3 of 16 channels: K-dim 144";
  EXPECT_TRUE(narrow_candidates(shape(32, 256, 14, 256, 1, 1, 0), true).empty()) << "a wide layer";
}

TEST(ConvNhwcNarrowCandidates, NoSplitKNoWorkspace) {
  const ConvShape p = shape(1, 64, 7, 24, 1, 1, 0);  // small M, where the mma tiles get split-K
  for (int v = 0; v < kernels::kNarrowVariants; ++v) {
    const char* name = narrow_tiles()[static_cast<std::size_t>(v)];
    const int tile = tile_index(name);
    ASSERT_GE(tile, 0) << name;
    // The tile names its variant, and the launcher runs that one.
    EXPECT_EQ(kernels::nhwc_conv_tiles()[static_cast<std::size_t>(tile)].narrow, v + 1) << name;
    EXPECT_STREQ(kernels::narrow_variant(v).name, name);
    EXPECT_EQ(kernels::nhwc_split_choices(p, tile, 132), std::vector<int>{1}) << name;
    EXPECT_EQ(kernels::nhwc_conv_workspace_bytes(p, {tile, 1}), 0u) << name;
  }
}

TEST(ConvNhwcNarrowFits, SixteenBitStorageAndTheLimits) {
  const ConvShape p = shape(2, 16, 56, 24, 1, 1, 0);
  EXPECT_TRUE(kernels::conv_nhwc_narrow_fits(p, NhwcStorage::kF16));
  EXPECT_TRUE(kernels::conv_nhwc_narrow_fits(p, NhwcStorage::kBF16));
  EXPECT_FALSE(kernels::conv_nhwc_narrow_fits(p, NhwcStorage::kF32));
  ConvShape grouped = p;
  grouped.groups = 2;
  EXPECT_FALSE(kernels::conv_nhwc_narrow_fits(grouped, NhwcStorage::kF16));
  EXPECT_FALSE(kernels::conv_nhwc_narrow_fits(shape(2, 16, 56, 12, 1, 1, 0), NhwcStorage::kF16)) << "K 12";
}

TEST(ConvNhwcNarrowLaunch, RejectsWhatDoesNotFitBeforeAnyCudaCall) {
  const kernels::Epilogue e;
  const ConvShape wide = shape(1, 64, 8, 256, 3, 1, 1);  // K-dim 576, K 256
  try {
    kernels::launch_conv_nhwc_narrow(wide, NhwcStorage::kF16, nullptr, nullptr, nullptr, nullptr, nullptr, e, 0,
                                     nullptr);
    FAIL() << "no error for K 256, K-dim 576";
  } catch (const std::invalid_argument& err) {
    EXPECT_NE(std::string(err.what()).find("K 256"), std::string::npos) << err.what();
    EXPECT_NE(std::string(err.what()).find("R*S*C 576"), std::string::npos) << err.what();
  }
  const ConvShape ok = shape(1, 16, 8, 16, 1, 1, 0);
  EXPECT_THROW(kernels::launch_conv_nhwc_narrow(ok, NhwcStorage::kF16, nullptr, nullptr, nullptr, nullptr, nullptr, e,
                                                kernels::kNarrowVariants, nullptr),
               std::invalid_argument)
      << "no such variant";
  EXPECT_THROW(kernels::launch_conv_nhwc_narrow(ok, NhwcStorage::kF32, nullptr, nullptr, nullptr, nullptr, nullptr, e,
                                                0, nullptr),
               std::invalid_argument)
      << "fp32 storage";
}

}  // namespace
}  // namespace redwood::cuda
