// rw.ConvNhwc (conv_nhwc.cpp, conv_nhwc_mma.cuh): every tile and split-K count at fp16, bf16 and
// fp32 storage (tf32 products) against the reference NCHW Conv (CPU) on odd shapes: 1×1, 3×3, a
// 7×7 stride-2 stem whose 3 channels are zero-padded to 8 (fp32: to 4), stride 2, symmetric and
// uneven padding, dilation, residual,
// bias or none, Relu/HardSwish/none, batch 1 and 2, K and M that are not multiples of any tile.
// The reference runs on the inputs, weights and residual already rounded to the storage type (the
// bias stays fp32, as the op takes it), so the bound (relative L2 ≤ 1e-2) measures the kernel:
// its fp32 accumulation and the one rounding of the output. At fp32 storage the reference is the
// exact fp32 convolution and the bound is tf32's (1e-3): the kernel rounds x and w to
// tf32 inside; a kernel that mixed up fragments or chunks would be off by about 1. With 3xTF32
// products (fp32 storage at precision fp32, "_3xtf32") the bound is 5e-5 (bound() below). Layouts
// are converted on the host.
// Then: split-K gives the same bits launch after launch (deterministic) and in a captured, replayed
// CUDA graph, the kernel through the op registry (plan, default pick, launch), and the plan's
// errors (host only, no GPU needed).

#include "backends/cuda/device_tensor.hpp"
#include "backends/cuda/kernels/conv_nhwc/conv_nhwc.hpp"
#include "backends/cuda/kernels/conv_nhwc/conv_nhwc_narrow.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"
#include "conv_nhwc_test_support.hpp"
#include "gpu_test_support.hpp"
#include "provider_run.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <limits>

namespace redwood::cuda {
namespace {

using kernels::ConvShape;
using kernels::NhwcConvConfig;
using namespace conv_test;  // NhwcCase, shape_of, make_operands, … (conv_nhwc_test_support.hpp)

std::vector<NhwcCase> nhwc_cases() {
  return {
      {"1x1_k72_m126", 2, 64, 7, 9, 72, 1, 1},                                       // K, M off every tile
      {"3x3_pad1_residual", 2, 32, 11, 13, 40, 3, 3, 1, {1, 1, 1, 1}, 1, true, true},
      {"3x3_stride2_hardswish", 1, 24, 15, 17, 48, 3, 3, 2, {1, 1, 1, 1}, 1, true, false, "HardSwish"},
      {"7x7_stem_stride2_c3", 2, 3, 23, 21, 64, 7, 7, 2, {3, 3, 3, 3}},             // C 3 → 8
      {"1x1_stride2_no_bias_no_act", 2, 64, 9, 9, 128, 1, 1, 2, {0, 0, 0, 0}, 1, false, false, ""},
      {"3x3_batch1_7x7_deep_k", 1, 256, 7, 7, 64, 3, 3, 1, {1, 1, 1, 1}, 1, true, true},  // 72 K tiles
      {"3x3_uneven_pads_dilated", 1, 16, 10, 12, 24, 3, 3, 1, {0, 2, 2, 1}, 2, false, true, "HardSwish"},
  };
}

// The bound on relative L2 against the reference: the contract's 1e-2 at 16-bit storage, tf32's
// 1e-3 at fp32 storage, and with 3xTF32 products (precision fp32) 5e-5, which one tf32 product a
// term (2.3e-4 to 2.9e-4 on these cases) does not meet. Measured on the H200 (2026-11-29): 4e-7
// to 1.8e-6, and 1.43e-5 for the K-dim of 2304 in one range (split-K 1, every tile alike: the
// tensor cores' fp32 accumulation over 864 mma steps into one accumulator; split-K 2-8 stay
// under 1e-5). The models' end-to-end bound at fp32 stays the exact path's 1e-4.
double bound(DType s, bool split_tf32 = false) { return split_tf32 ? 5e-5 : s == DType::kF32 ? 1e-3 : 1e-2; }

struct NhwcParam {
  NhwcCase conv;
  DType storage;
  bool split_tf32 = false;  // fp32 storage at precision fp32: 3xTF32 products
};
std::string param_name(const NhwcParam& p) {
  return p.conv.name + "_" + std::string(dtype_name(p.storage)) + (p.split_tf32 ? "_3xtf32" : "");
}
void PrintTo(const NhwcParam& p, std::ostream* os) { *os << param_name(p); }

class ConvNhwcVsReference : public ::testing::TestWithParam<NhwcParam> {};

TEST_P(ConvNhwcVsReference, EveryTileAndSplitAgrees) {
  RW_SKIP_WITHOUT_GPU();
  const NhwcCase& c = GetParam().conv;
  const DType s = GetParam().storage;
  const bool x3 = GetParam().split_tf32;
  const DeviceCase d = device_case(c, s, 31);
  const ConvShape& p = d.p;
  const std::vector<int> splits = {1, 2, 3, 8};
  const auto& tiles = kernels::nhwc_conv_tiles();
  std::size_t ws_bytes = 0;
  for (int t = 0; t < static_cast<int>(tiles.size()); ++t) {
    for (int sp : splits) ws_bytes = std::max(ws_bytes, kernels::nhwc_conv_workspace_bytes(p, {t, sp}));
  }
  const Tensor ws = device_empty(DType::kU8, {static_cast<std::int64_t>(ws_bytes)});
  cudaGetLastError();  // an earlier test's deliberate failure stays here: clear it
  // Garbage in the workspace, as the runner's (packed with other values) may hold: the counters
  // must not depend on what was there.
  ASSERT_EQ(cudaMemset(ws.raw_data(), 0x5a, ws_bytes), cudaSuccess);
  const kernels::NhwcStorage storage = storage_of(s);
  for (int t = 0; t < static_cast<int>(tiles.size()); ++t) {
    // The narrow kernel's tiles where they fit (few channels, 16-bit storage; conv_nhwc_narrow_test.cpp).
    if (tiles[static_cast<std::size_t>(t)].narrow > 0 && !kernels::conv_nhwc_narrow_fits(p, storage)) continue;
    // The wgmma tiles where they run (compute capability 9.0; 16-bit storage, or fp32 at tf32, not
    // 3xTF32; conv_nhwc_wgmma_test.cpp).
    const kernels::NhwcTile& tile = tiles[static_cast<std::size_t>(t)];
    const bool hopper = tile.wgmma >= 0 || tile.tma >= 0;
    if (hopper && (x3 || !kernels::nhwc_wgmma_usable())) continue;
    // The TMA tiles where they take the layer (conv_nhwc_wgmma_tma_test.cpp).
    if (tile.tma >= 0 && !kernels::nhwc_tma_fits(p, storage)) continue;
    for (int sp : splits) {
      const Tensor out = d.output(s, NhwcConvConfig{t, sp}, ws.raw_data(), x3);
      ASSERT_TRUE(out.defined());
      const Tensor got = to_channels_first(out);
      const double err = testing::relative_l2(got, d.o.expected);
      if (s == DType::kF32 && sp == 1 && (t == 0 || tiles[static_cast<std::size_t>(t)].wgmma == 0)) {
        std::printf("[ measured ] %s fp32/%s %s: relative L2 %.3g\n", c.name.c_str(), x3 ? "3xtf32" : "tf32",
                    tiles[static_cast<std::size_t>(t)].name, err);
      }
      EXPECT_LE(err, bound(s, x3)) << param_name(GetParam()) << " tile " << tiles[static_cast<std::size_t>(t)].name
                                   << " split-K " << sp;
    }
  }
}

std::vector<NhwcParam> nhwc_params() {
  std::vector<NhwcParam> out;
  for (const NhwcCase& c : nhwc_cases()) {
    for (DType s : {DType::kF16, DType::kBF16, DType::kF32}) out.push_back({c, s});
    out.push_back({c, DType::kF32, true});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Tiles, ConvNhwcVsReference, ::testing::ValuesIn(nhwc_params()),
                         [](const ::testing::TestParamInfo<NhwcParam>& info) { return param_name(info.param); });

// conv_epilogue's two single-split paths give the same values: the batched one
// (conv_epilogue_rows: Relu or no activation) against the loop, reached with an activation that
// computes the same function (LeakyRelu with slope 0 for Relu, Clip to ±inf for none). Both add
// bias then residual to the same fp32 sums and round once, so they agree exactly (a -0 against
// a +0 compares equal). Every tile at split 1, on M and N tails (rows past the last pixel and
// channels past K left alone), with and without a residual or bias, at every storage type.
struct EpiloguePair {
  const char* name;
  int batched_act, loop_act;
  float loop_alpha, loop_beta;
};

class ConvNhwcEpilogue : public ::testing::TestWithParam<CaseAt> {};

TEST_P(ConvNhwcEpilogue, BatchedRowsEqualTheLoop) {
  RW_SKIP_WITHOUT_GPU();
  const NhwcCase& c = GetParam().conv;
  const DType s = GetParam().storage;
  DeviceCase d = device_case(c, s, 53);
  const ConvShape& p = d.p;
  const kernels::NhwcStorage storage = storage_of(s);
  const auto& tiles = kernels::nhwc_conv_tiles();
  std::size_t ws_bytes = 256;
  for (int t = 0; t < static_cast<int>(tiles.size()); ++t) {
    ws_bytes = std::max(ws_bytes, kernels::nhwc_conv_workspace_bytes(p, {t, 1}));
  }
  const Tensor ws = device_empty(DType::kU8, {static_cast<std::int64_t>(ws_bytes)});
  const float inf = std::numeric_limits<float>::infinity();
  const EpiloguePair pairs[] = {{"relu", kernels::kActRelu, kernels::kActLeakyRelu, 0.f, 0.f},
                                {"none", kernels::kActNone, kernels::kActClip, -inf, inf}};
  auto run = [&](int tile, int act, float alpha, float beta) {
    d.e.act = act;
    d.e.alpha = alpha;
    d.e.beta = beta;
    const Tensor y = d.output(s, NhwcConvConfig{tile, 1}, ws.raw_data());
    return y.defined() ? y.to_float_vector() : std::vector<float>();
  };
  int compared = 0;
  for (int t = 0; t < static_cast<int>(tiles.size()); ++t) {
    const kernels::NhwcTile& tile = tiles[static_cast<std::size_t>(t)];
    if (tile.narrow > 0) continue;  // the narrow kernel has its own epilogue
    if ((tile.wgmma >= 0 || tile.tma >= 0) && !kernels::nhwc_wgmma_usable()) continue;
    if (tile.tma >= 0 && !kernels::nhwc_tma_fits(p, storage)) continue;
    for (const EpiloguePair& e : pairs) {
      const std::vector<float> a = run(t, e.batched_act, 0.f, 0.f);
      const std::vector<float> b = run(t, e.loop_act, e.loop_alpha, e.loop_beta);
      ASSERT_EQ(a.size(), b.size());
      std::int64_t differ = 0, first = -1;
      for (std::size_t i = 0; i < a.size(); ++i) {
        if (!(a[i] == b[i])) {  // also a NaN: an element one path left unwritten
          if (first < 0) first = static_cast<std::int64_t>(i);
          ++differ;
        }
      }
      EXPECT_EQ(differ, 0) << c.name << " " << dtype_name(s) << " tile " << tile.name << " (" << e.name
                           << "): " << differ << " differ, the first at " << first << ": "
                           << (first >= 0 ? a[static_cast<std::size_t>(first)] : 0.f) << " against "
                           << (first >= 0 ? b[static_cast<std::size_t>(first)] : 0.f);
      ++compared;
    }
  }
  EXPECT_GT(compared, 0);
}

std::vector<NhwcCase> epilogue_cases() {
  return {
      // M 2·11·13 = 286 and K 40: tails in both for every tile; bias and residual.
      {"3x3_tails_residual", 2, 32, 11, 13, 40, 3, 3, 1, {1, 1, 1, 1}, 1, true, true},
      // C 64 (the TMA tiles take it), K 200: N tails of BN 64, 128 and 256; residual, no bias.
      {"1x1_c64_k200_residual_no_bias", 3, 64, 9, 7, 200, 1, 1, 1, {0, 0, 0, 0}, 1, false, true},
      // Neither bias nor residual.
      {"1x1_c64_k72_plain", 2, 64, 7, 9, 72, 1, 1, 1, {0, 0, 0, 0}, 1, false, false},
  };
}

INSTANTIATE_TEST_SUITE_P(Paths, ConvNhwcEpilogue, ::testing::ValuesIn(at_every_storage(epilogue_cases())),
                         case_at_name);

TEST(ConvNhwc, SplitKIsDeterministic) {
  RW_SKIP_WITHOUT_GPU();
  const NhwcCase c = nhwc_cases()[5];  // batch 1, 7×7, deep K
  const ConvShape p = shape_of(c, DType::kF16);
  const Operands o = make_operands(c, DType::kF16, 31);
  const Tensor x = to_device(o.x), w = to_device(o.w), bias = to_device(o.bias), res = to_device(o.residual);
  const NhwcConvConfig cfg{6, 8};  // 32×64, 8 splits: 16 tiles, each summed by its last split
  const Tensor ws = device_empty(DType::kU8, {static_cast<std::int64_t>(kernels::nhwc_conv_workspace_bytes(p, cfg))});
  kernels::Epilogue e;
  e.act = kernels::kActRelu;
  std::vector<Tensor> outs;
  for (int i = 0; i < 4; ++i) {
    Tensor y = device_empty(DType::kF16, {p.n, p.oh, p.ow, p.k});
    kernels::launch_conv_nhwc(p, kernels::NhwcStorage::kF16, x.raw_data(), w.raw_data(), y.raw_data(),
                              bias.data<float>(), res.raw_data(), e, cfg, ws.raw_data(), nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    outs.push_back(to_host(y));
  }
  for (int i = 1; i < 4; ++i) {
    EXPECT_EQ(std::memcmp(outs[0].raw_data(), outs[static_cast<std::size_t>(i)].raw_data(), outs[0].nbytes()), 0)
        << "launch " << i << " differs from launch 0";
  }
}

TEST(ConvNhwc, SplitKInACapturedGraph) {
  RW_SKIP_WITHOUT_GPU();
  // The split-K launch (a memset of the tile counters, then the kernel with the programmatic-launch
  // attribute) captured into a CUDA graph and replayed twice gives the eager launch's bits.
  const NhwcCase c = nhwc_cases()[5];
  const ConvShape p = shape_of(c, DType::kBF16);
  const Operands o = make_operands(c, DType::kBF16, 31);
  const Tensor x = to_device(o.x), w = to_device(o.w), bias = to_device(o.bias), res = to_device(o.residual);
  const NhwcConvConfig cfg{4, 8};  // 64×64, 8 splits
  const Tensor ws = device_empty(DType::kU8, {static_cast<std::int64_t>(kernels::nhwc_conv_workspace_bytes(p, cfg))});
  kernels::Epilogue e;
  e.act = kernels::kActRelu;
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  auto enqueue = [&](const Tensor& y) {
    kernels::launch_conv_nhwc(p, kernels::NhwcStorage::kBF16, x.raw_data(), w.raw_data(), y.raw_data(),
                              bias.data<float>(), res.raw_data(), e, cfg, ws.raw_data(), stream);
  };
  const Tensor eager = device_empty(DType::kBF16, {p.n, p.oh, p.ow, p.k});
  enqueue(eager);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  const Tensor replayed = device_empty(DType::kBF16, {p.n, p.oh, p.ow, p.k});
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  enqueue(replayed);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaMemset(ws.raw_data(), 0x5a, ws.nbytes()), cudaSuccess);  // garbage between replays too
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    const Tensor a = to_host(eager), b = to_host(replayed);
    EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()), 0) << "replay " << i;
    EXPECT_LE(testing::relative_l2(to_channels_first(b), o.expected), 1e-2);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

TEST(ConvNhwc, ThroughTheOpRegistry) {
  RW_SKIP_WITHOUT_GPU();
  // CudaKernel::run: plan (dtype and shape checks, the default pick), then launch.
  for (const NhwcCase& c : {nhwc_cases()[1], nhwc_cases()[3], nhwc_cases()[5]}) {
    for (DType s : {DType::kF16, DType::kBF16, DType::kF32}) {
      const Operands o = make_operands(c, s, 31);
      std::vector<Tensor> inputs = {o.x, o.w, o.bias};
      if (c.residual) inputs.push_back(o.residual);
      const Tensor y = testing::run_with_provider("rw.ConvNhwc", inputs, conv_attrs(c), Device::kCuda, kCudaProvider,
                                                  s == DType::kF32 ? Precision::kTf32 : Precision::kFp16)
                           .at(0);
      ASSERT_EQ(y.dtype(), s);
      EXPECT_LE(testing::relative_l2(to_channels_first(y), o.expected), bound(s)) << c.name << " " << dtype_name(s);
      if (s == DType::kF32) {  // at precision fp32: 3xTF32, fp32-accurate
        const Tensor exact = testing::run_with_provider("rw.ConvNhwc", inputs, conv_attrs(c), Device::kCuda,
                                                        kCudaProvider, Precision::kFp32)
                                 .at(0);
        EXPECT_LE(testing::relative_l2(to_channels_first(exact), o.expected), bound(s, true)) << c.name << " 3xtf32";
      }
    }
  }
}

// ---- plan errors: host only (plan() makes no CUDA call), so these run without a GPU too ----

TEST(ConvNhwcPlan, AcceptsTheContractsOperands) {
  const std::vector<TensorDesc> ok = {{DType::kBF16, {2, 9, 9, 16}},
                                      {DType::kBF16, {24, 3, 3, 16}},
                                      {DType::kF32, {24}},
                                      {DType::kBF16, {2, 5, 5, 24}}};
  std::map<std::string, AttributeValue> attrs;
  attrs["strides"] = std::vector<std::int64_t>{2, 2};
  attrs["pads"] = std::vector<std::int64_t>{1, 1, 1, 1};
  attrs["dilations"] = std::vector<std::int64_t>{1, 1};
  EXPECT_EQ(plan_error(ok, attrs), "");
}

TEST(ConvNhwcCandidates, Fp32StorageCountsItsKTilesInFloats) {
  // A 1×1 layer of 512 channels at batch 1 on 7×7 (ResNet-50's last stage): 512 of K-dim is 16 K
  // tiles of 32 16-bit elements but 32 of 16 floats, so fp32 storage may split 8 ways, 16-bit 4.
  const ConvShape p{1, 512, 7, 7, 2048, 1, 1, 7, 7, 1, 1, 0, 0, 1, 1, 1};
  const int tile = 6;  // 32×64, BK 32 (16-bit elements)
  ASSERT_EQ(kernels::nhwc_conv_tiles()[tile].bk, 32);
  EXPECT_EQ(kernels::nhwc_split_choices(p, tile, 132, kernels::NhwcStorage::kF16), (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(kernels::nhwc_split_choices(p, tile, 132, kernels::NhwcStorage::kF32), (std::vector<int>{1, 2, 4, 8}));
  EXPECT_GT(kernels::nhwc_conv_candidates(p, 132, {}, kernels::NhwcStorage::kF32).size(),
            kernels::nhwc_conv_candidates(p, 132, {}, kernels::NhwcStorage::kF16).size());
}

TEST(ConvNhwcPlan, TakesFp32StorageAtTf32AndFp32Only) {
  // fp32 storage multiplies on the tf32 tensor cores: planned at precision tf32 (tf32 products)
  // and fp32 (3xTF32), refused at fp16 and bf16, naming the node and the precision. C a multiple
  // of 4 (16 bytes of fp32) is enough there.
  const std::vector<TensorDesc> f32 = {{DType::kF32, {2, 9, 9, 12}}, {DType::kF32, {24, 3, 3, 12}},
                                       {DType::kF32, {24}}, {DType::kF32, {2, 9, 9, 24}}};
  std::map<std::string, AttributeValue> attrs;
  attrs["pads"] = std::vector<std::int64_t>{1, 1, 1, 1};
  EXPECT_EQ(plan_error(f32, attrs, Precision::kTf32), "");
  EXPECT_EQ(plan_error(f32, attrs, Precision::kFp32), "");
  for (Precision p : {Precision::kFp16, Precision::kBf16}) {
    const std::string e = plan_error(f32, attrs, p);
    EXPECT_NE(e.find("conv7"), std::string::npos) << e;
    EXPECT_NE(e.find("not at precision " + std::string(precision_name(p))), std::string::npos) << e;
  }
  const std::string c6 = plan_error({{DType::kF32, {1, 8, 8, 6}}, {DType::kF32, {8, 3, 3, 6}}}, {}, Precision::kTf32);
  EXPECT_NE(c6.find("C a multiple of 4"), std::string::npos) << c6;
  const std::string k12 =
      plan_error({{DType::kF32, {1, 8, 8, 4}}, {DType::kF32, {12, 3, 3, 4}}}, {}, Precision::kTf32);
  EXPECT_NE(k12.find("K of 8"), std::string::npos) << k12;
  const std::string res =
      plan_error({{DType::kF32, {1, 8, 8, 4}}, {DType::kF32, {8, 1, 1, 4}}, {}, {DType::kF16, {1, 8, 8, 8}}}, {},
                 Precision::kTf32);
  EXPECT_NE(res.find("residual must be float"), std::string::npos) << res;
}

TEST(ConvNhwcPlan, RejectsWrongDtypesNamingTheNode) {
  const std::string i32 = plan_error({{DType::kI32, {1, 8, 8, 16}}, {DType::kI32, {8, 1, 1, 16}}}, {});
  EXPECT_NE(i32.find("conv7"), std::string::npos) << i32;
  EXPECT_NE(i32.find("fp16, bf16 or fp32"), std::string::npos) << i32;
  const std::string mixed = plan_error({{DType::kF16, {1, 8, 8, 16}}, {DType::kBF16, {8, 1, 1, 16}}}, {});
  EXPECT_NE(mixed.find("conv7"), std::string::npos) << mixed;
  EXPECT_NE(mixed.find("one storage type"), std::string::npos) << mixed;
  const std::string bias = plan_error(
      {{DType::kF16, {1, 8, 8, 16}}, {DType::kF16, {8, 1, 1, 16}}, {DType::kF16, {8}}}, {});
  EXPECT_NE(bias.find("bias must be fp32"), std::string::npos) << bias;
  const std::string res = plan_error({{DType::kF16, {1, 8, 8, 16}},
                                      {DType::kF16, {8, 1, 1, 16}},
                                      {},
                                      {DType::kF16, {1, 8, 8, 16}}},
                                     {});
  EXPECT_NE(res.find("residual"), std::string::npos) << res;
}

TEST(ConvNhwcPlan, RejectsChannelsNotMultipleOf8) {
  const std::string c12 = plan_error({{DType::kF16, {1, 8, 8, 12}}, {DType::kF16, {8, 3, 3, 12}}}, {});
  EXPECT_NE(c12.find("conv7"), std::string::npos) << c12;
  EXPECT_NE(c12.find("C a multiple of 8"), std::string::npos) << c12;
  const std::string k12 = plan_error({{DType::kF16, {1, 8, 8, 16}}, {DType::kF16, {12, 3, 3, 16}}}, {});
  EXPECT_NE(k12.find("K of 8"), std::string::npos) << k12;
  const std::string wc = plan_error({{DType::kF16, {1, 8, 8, 16}}, {DType::kF16, {8, 3, 3, 24}}}, {});
  EXPECT_NE(wc.find("16 input channels"), std::string::npos) << wc;
}

TEST(ConvNhwcPlan, RejectsGroups) {
  std::map<std::string, AttributeValue> attrs;
  attrs["group"] = std::int64_t{2};
  const std::string g = plan_error({{DType::kF16, {1, 8, 8, 16}}, {DType::kF16, {16, 3, 3, 8}}}, attrs);
  EXPECT_NE(g.find("conv7"), std::string::npos) << g;
  EXPECT_NE(g.find("group 2"), std::string::npos) << g;
}

}  // namespace
}  // namespace redwood::cuda
