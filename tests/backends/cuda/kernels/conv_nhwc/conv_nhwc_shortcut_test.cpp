// rw.ConvNhwc with a projection shortcut (input 4, passes::fuse_conv_shortcut): a 1×1 stride-1
// convolution whose K-dim goes on over a second input read at a stride. Every (tile, split) the
// tuner may pick for it (the tiles with the shortcut's instantiation; wgmma where it runs) at fp16, bf16, fp32 with tf32 products and fp32 with
// 3xTF32 products, against two reference NCHW Convs on the CPU: y = act(conv(x, W1) + conv(x2, W2)
// at the stride + bias + residual), on shapes where the two inputs' channels do not fill whole
// K tiles (a tile holds chunks of both), odd extents and M tails. Then the op through the registry
// against the CPU reference kernel of rw.ConvNhwc, and the plan's errors (host only).

#include "backends/cuda/device_tensor.hpp"
#include "backends/cuda/graph_runner.hpp"
#include "backends/cuda/kernels/conv_nhwc/conv_nhwc.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"
#include "conv_nhwc_test_support.hpp"
#include "gpu_test_support.hpp"
#include "provider_run.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace redwood::cuda {
namespace {

using kernels::ConvShape;
using kernels::NhwcConvConfig;
using namespace conv_test;

struct ShortcutCase {
  std::string name;
  int n, c, oh, ow, c2, stride2, k;
  bool bias, residual;
  std::string act;
  int h2() const { return (oh - 1) * stride2 + 1 + (stride2 > 1 ? 1 : 0); }  // an even extent at stride 2
  int w2() const { return (ow - 1) * stride2 + 1; }                           // an odd one
};

std::vector<ShortcutCase> cases() {
  return {
      // ResNet's layer-2 entry, small: 64 + 40 channels (a K tile of 64 fp16 holds both at 64…103).
      {"c64_c2_40_stride2_residual", 2, 64, 7, 9, 40, 2, 72, true, true, "Relu"},
      // 40 + 64: x's channels end inside the first K tile; stride 1; no bias, no activation.
      {"c40_c2_64_stride1_plain", 3, 40, 5, 11, 64, 1, 48, false, false, ""},
      // A deep K-dim (256 + 128, several K tiles each) and an M tail.
      {"c256_c2_128_stride2", 1, 256, 13, 13, 128, 2, 128, true, false, "Relu"},
  };
}

struct Operands2 {
  Tensor x, x2, w, bias, residual;  // host NHWC / [K, 1, 1, C + C2] in S; bias fp32
  Tensor expected;                  // fp32 NCHW
};

Operands2 make(const ShortcutCase& c, DType s, bool tf32) {
  using redwood::testing::random_tensor;
  auto operand = [&](const Tensor& t) { return tf32 ? rounded_tf32(rounded(t, s)) : rounded(t, s); };
  const Tensor x = operand(random_tensor(DType::kF32, {c.n, c.c, c.oh, c.ow}, -1, 1, 71));
  const Tensor x2 = operand(random_tensor(DType::kF32, {c.n, c.c2, c.h2(), c.w2()}, -1, 1, 72));
  const Tensor w1 = operand(random_tensor(DType::kF32, {c.k, c.c, 1, 1}, -0.5, 0.5, 73));
  const Tensor w2 = operand(random_tensor(DType::kF32, {c.k, c.c2, 1, 1}, -0.5, 0.5, 74));
  const Tensor bias = c.bias ? random_tensor(DType::kF32, {c.k}, -1, 1, 75) : Tensor();
  const Tensor res = c.residual ? operand(random_tensor(DType::kF32, {c.n, c.k, c.oh, c.ow}, -1, 1, 76)) : Tensor();
  std::map<std::string, AttributeValue> plain;
  plain["strides"] = std::vector<std::int64_t>{1, 1};
  const Tensor main =
      testing::run_with_provider("Conv", {x, w1}, plain, Device::kCpu, kReferenceProvider, Precision::kFp32).at(0);
  Tensor sum = main;
  if (c.residual) {
    sum = main.contiguous().cast(DType::kF32);
    const Tensor r = res.contiguous();
    for (std::int64_t i = 0; i < sum.numel(); ++i) sum.data<float>()[i] += r.data<float>()[i];
  }
  std::map<std::string, AttributeValue> second;
  second["strides"] = std::vector<std::int64_t>{c.stride2, c.stride2};
  if (!c.act.empty()) second["rw.activation"] = c.act;
  Operands2 o;
  o.expected =
      testing::run_with_provider("Conv", {x2, w2, bias, sum}, second, Device::kCpu, kReferenceProvider, Precision::kFp32)
          .at(0);
  o.x = to_channels_last(x, c.c, s);
  o.x2 = to_channels_last(x2, c.c2, s);
  // [K, 1, 1, C + C2]: W1's channels, then W2's.
  Tensor w = Tensor::empty(DType::kF32, {c.k, c.c + c.c2, 1, 1});
  const Tensor w1c = w1.contiguous(), w2c = w2.contiguous();
  for (int k = 0; k < c.k; ++k) {
    for (int i = 0; i < c.c; ++i) w.data<float>()[k * (c.c + c.c2) + i] = w1c.data<float>()[k * c.c + i];
    for (int i = 0; i < c.c2; ++i) w.data<float>()[k * (c.c + c.c2) + c.c + i] = w2c.data<float>()[k * c.c2 + i];
  }
  o.w = to_channels_last(w, c.c + c.c2, s);
  o.bias = bias;
  if (c.residual) o.residual = to_channels_last(res, c.k, s);
  return o;
}

ConvShape shape(const ShortcutCase& c) {
  ConvShape p{c.n, c.c, c.oh, c.ow, c.k, 1, 1, c.oh, c.ow, 1, 1, 0, 0, 1, 1, 1};
  p.c2 = c.c2;
  p.h2 = c.h2();
  p.w2 = c.w2();
  p.stride2 = c.stride2;
  return p;
}

double bound(DType s, bool x3) { return x3 ? 5e-5 : s == DType::kF32 ? 1e-3 : 1e-2; }

TEST(ConvNhwcShortcut, EveryTileAndSplitAgreesWithTwoReferenceConvs) {
  RW_SKIP_WITHOUT_GPU();
  const auto& tiles = kernels::nhwc_conv_tiles();
  for (const ShortcutCase& c : cases()) {
    for (int mode = 0; mode < 4; ++mode) {  // fp16, bf16, fp32 tf32, fp32 3xTF32
      const DType s = mode == 0 ? DType::kF16 : mode == 1 ? DType::kBF16 : DType::kF32;
      const bool x3 = mode == 3;
      const Operands2 o = make(c, s, mode == 2);
      const ConvShape p = shape(c);
      const Tensor x = to_device(o.x), x2 = to_device(o.x2), w = to_device(o.w);
      const Tensor bias = c.bias ? to_device(o.bias) : Tensor();
      const Tensor residual = c.residual ? to_device(o.residual) : Tensor();
      kernels::Epilogue e;
      e.act = act_code(c.act);
      std::size_t ws_bytes = 0;
      for (int t = 0; t < static_cast<int>(tiles.size()); ++t) {
        for (int sp = 1; sp <= 16; sp *= 2) ws_bytes = std::max(ws_bytes, kernels::nhwc_conv_workspace_bytes(p, {t, sp}));
      }
      const Tensor ws = device_empty(DType::kU8, {static_cast<std::int64_t>(std::max<std::size_t>(ws_bytes, 16))});
      cudaGetLastError();
      // What the tuner may pick for a shortcut: the tiles with its instantiation, every split.
      std::vector<NhwcConvConfig> offered =
          kernels::nhwc_conv_candidates(p, 132,
                                        {.wgmma = !x3 && kernels::nhwc_wgmma_usable(),
                                         .tma = !x3 && kernels::nhwc_wgmma_usable(),
                                         .narrow = s != DType::kF32},
                                        storage_of(s));
      ASSERT_FALSE(offered.empty());
      offered.push_back({0, 2});  // and split-K across the two inputs' K ranges (128×128, BK 32) …
      offered.push_back({4, 3});  // … in uneven splits (64×64)
      for (const NhwcConvConfig& cfg : offered) {
        const kernels::NhwcTile& tile = tiles[static_cast<std::size_t>(cfg.tile)];
        EXPECT_EQ(tile.narrow, 0) << "the narrow kernel takes no shortcut";
        EXPECT_LT(tile.tma, 0) << "nor do the TMA tiles";
        Tensor y = device_empty(s, {p.n, p.oh, p.ow, p.k});
        ASSERT_EQ(cudaMemset(y.raw_data(), 0xff, y.nbytes()), cudaSuccess);
        kernels::launch_conv_nhwc(p, storage_of(s), x.raw_data(), w.raw_data(), y.raw_data(),
                                  c.bias ? bias.data<float>() : nullptr, c.residual ? residual.raw_data() : nullptr, e,
                                  cfg, ws.raw_data(), nullptr, nullptr, x3, false, x2.raw_data());
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        const double err = testing::relative_l2(to_channels_first(to_host(y)), o.expected);
        EXPECT_LE(err, bound(s, x3)) << c.name << " " << dtype_name(s) << (x3 ? " 3xtf32" : "") << " tile "
                                     << tile.name << " split " << cfg.splits;
      }
      // A tile without the shortcut's instantiation says so instead of computing without it.
      EXPECT_THROW(kernels::launch_conv_nhwc(p, storage_of(s), x.raw_data(), w.raw_data(), nullptr, nullptr, nullptr, e,
                                             NhwcConvConfig{1, 1}, ws.raw_data(), nullptr, nullptr, x3, false,
                                             x2.raw_data()),
                   Unsupported);
    }
  }
}

std::map<std::string, AttributeValue> shortcut_attrs(const ShortcutCase& c) {
  std::map<std::string, AttributeValue> attrs;
  attrs["strides"] = std::vector<std::int64_t>{1, 1};
  attrs["rw.shortcut_strides"] = std::vector<std::int64_t>{c.stride2, c.stride2};
  if (!c.act.empty()) attrs["rw.activation"] = c.act;
  return attrs;
}

TEST(ConvNhwcShortcut, ThroughTheOpRegistryAgreesWithTheReferenceKernel) {
  RW_SKIP_WITHOUT_GPU();
  for (const ShortcutCase& c : cases()) {
    for (DType s : {DType::kF16, DType::kF32}) {
      const Operands2 o = make(c, s, false);
      const std::vector<Tensor> inputs = {o.x, o.w, o.bias, o.residual, o.x2};
      const Precision precision = s == DType::kF32 ? Precision::kFp32 : Precision::kFp16;
      const Tensor ref = testing::run_with_provider("rw.ConvNhwc", inputs, shortcut_attrs(c), Device::kCpu,
                                                    kReferenceProvider, precision)
                             .at(0);
      EXPECT_LE(testing::relative_l2(to_channels_first(ref), o.expected), s == DType::kF32 ? 1e-6 : 1e-2) << c.name;
      const Tensor gpu = testing::run_with_provider("rw.ConvNhwc", inputs, shortcut_attrs(c), Device::kCuda,
                                                    kCudaProvider, precision)
                             .at(0);
      EXPECT_LE(testing::relative_l2(to_channels_first(gpu), o.expected), bound(s, s == DType::kF32)) << c.name;
    }
  }
}

// ---- plan errors: host only (plan_error, conv_nhwc_test_support.hpp) ----
TEST(ConvNhwcShortcutPlan, AcceptsAndRejectsNamingTheNode) {
  std::map<std::string, AttributeValue> attrs;
  attrs["rw.shortcut_strides"] = std::vector<std::int64_t>{2, 2};
  const TensorDesc none;
  const std::vector<TensorDesc> ok = {{DType::kF16, {2, 7, 7, 64}},
                                      {DType::kF16, {256, 1, 1, 64 + 32}},
                                      {DType::kF32, {256}},
                                      none,
                                      {DType::kF16, {2, 14, 13, 32}}};
  EXPECT_EQ(plan_error(ok, attrs), "");

  std::vector<TensorDesc> bad = ok;
  bad[1] = {DType::kF16, {256, 1, 1, 64}};  // weights without the shortcut's channels
  EXPECT_NE(plan_error(bad, attrs).find("weights [256, 1, 1, 64] for 96 input channels"), std::string::npos)
      << plan_error(bad, attrs);
  bad = ok;
  bad[4] = {DType::kF16, {2, 16, 16, 32}};  // (16 − 1) / 2 + 1 = 8, not 7
  EXPECT_NE(plan_error(bad, attrs).find("conv7"), std::string::npos);
  EXPECT_NE(plan_error(bad, attrs).find("the shortcut input must be"), std::string::npos) << plan_error(bad, attrs);
  bad = ok;
  bad[1] = {DType::kF16, {256, 3, 3, 96}};  // a 3×3 main convolution
  attrs["pads"] = std::vector<std::int64_t>{1, 1, 1, 1};
  EXPECT_NE(plan_error(bad, attrs).find("needs a 1x1 stride-1 convolution without padding"), std::string::npos)
      << plan_error(bad, attrs);
  attrs.erase("pads");
  attrs["rw.shortcut_strides"] = std::vector<std::int64_t>{2, 1};
  EXPECT_NE(plan_error(ok, attrs).find("rw.shortcut_strides must be two equal positive values"), std::string::npos);
}

TEST(ConvNhwcShortcutSwitch, TheRunnersPipelineFusesUnlessTheOptionSaysOff) {
  // Host only: whether the runner's pipeline ends with the fusion (CudaOptions::fuse_conv_shortcuts).
  const auto last_pass = [](const RunnerOptions& o) { return runner_pipeline(o).back().name; };
  RunnerOptions o;
  o.precision = Precision::kFp16;
  EXPECT_EQ(last_pass(o), "fuse_conv_shortcut");
  o.cuda.fuse_conv_shortcuts = false;
  EXPECT_EQ(last_pass(o), "choose_gpu_layout");
  o.cuda.fuse_conv_shortcuts = true;
  o.nhwc = false;  // no NHWC groups: nothing to fuse
  EXPECT_EQ(last_pass(o), "fuse_elementwise");
}

}  // namespace
}  // namespace redwood::cuda
