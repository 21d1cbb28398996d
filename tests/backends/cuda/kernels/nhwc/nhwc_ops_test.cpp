// The NHWC companion kernels (backends/cuda/kernels/nhwc/nhwc.cpp) at fp16, bf16 and fp32 storage
// against the reference kernels of the NCHW ops they replace (MaxPool, GlobalAveragePool, Mul,
// depthwise Conv; CPU, fp32), layouts converted on the host. The reference runs on the S-rounded
// inputs (and S-rounded residual; weights, bias and scale are fp32 in both), so the bound measures
// the kernel, not the storage type: relative L2 ≤ 1e-2 (the contract; 1e-5 at fp32 storage, where
// only the summation order differs), and what is exact is checked
// exactly: rw.ToNhwc is the S rounding of each value (padding channels 0), rw.ToNchw gives it back
// bit for bit, and max pooling of S values is an S value. Shapes: W not a multiple of 4, H·W odd
// and a multiple of 4 (the conversions' two paths), C = 8, 16, 72, 960 and padded 3 → 8 (fp32
// also 3 → 4 and 10 → 12: 4-channel vectors),
// N = 1 and 3, MaxPool 3×3/2 pad 1 and ceil_mode, depthwise 3×3/5×5/7×7 stride 1/2 with
// asymmetric padding, residual, and the direct kernel's shapes. Every variant of the tiled depthwise
// kernel the tuner may pick gives the default's bits, and every plan of the global mean (parts
// added by a second kernel) matches the reference and repeats its bits. Then, host only (no GPU
// needed), the global mean's plans by shape and plan()'s errors naming the node and the problem.

#include "backends/cuda/device_tensor.hpp"
#include "backends/cuda/kernels/nhwc/nhwc.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"
#include "gpu_test_support.hpp"
#include "provider_run.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace redwood::cuda {
namespace {

using redwood::testing::Ints;

using Attrs = std::map<std::string, AttributeValue>;
using redwood::testing::random_tensor;

constexpr DType kStorages[] = {DType::kF16, DType::kBF16, DType::kF32};

/// fp32 [N, C, H, W] → fp32 [N, H, W, cp], channels C..cp-1 zero (core/layout.hpp).
Tensor nchw_to_nhwc(const Tensor& x, std::int64_t cp) { return to_channels_last(x, cp, DType::kF32); }

/// The values of x rounded to S and widened back.
Tensor rounded(const Tensor& x, DType s) { return x.cast(s).cast(DType::kF32); }

Tensor run_cuda(const std::string& op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  return testing::run_with_provider(op, inputs, attrs, Device::kCuda, kCudaProvider, Precision::kFp16).at(0);
}

Tensor run_reference(const std::string& op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  return testing::run_with_provider(op, inputs, attrs, Device::kCpu, kReferenceProvider, Precision::kFp32).at(0);
}

/// Elements of two fp32 tensors of one shape that differ (bitwise after widening; -0 == 0).
std::int64_t mismatches(const Tensor& a, const Tensor& e) {
  EXPECT_EQ(a.shape(), e.shape());
  if (a.shape() != e.shape()) return -1;
  std::int64_t bad = 0;
  const float* ap = a.data<float>();
  const float* ep = e.data<float>();
  for (std::int64_t i = 0; i < e.numel(); ++i) bad += ap[i] != ep[i];
  return bad;
}

const char* name_of(DType s) { return s == DType::kF16 ? "fp16" : s == DType::kBF16 ? "bf16" : "fp32"; }

/// Checks the bound and prints the measured error (for the record).
void expect_within(const std::string& what, DType s, const Tensor& got, const Tensor& expected) {
  const double err = testing::relative_l2(got, expected);
  std::printf("[ measured ] %s %s: relative L2 %.3g\n", what.c_str(), name_of(s), err);
  EXPECT_LE(err, s == DType::kF32 ? 1e-5 : 1e-2) << what << " " << name_of(s);
}

// ---- rw.ToNhwc / rw.ToNchw ----

struct ConvertCase {
  std::int64_t n, c, h, w, cp;
};

TEST(NhwcOps, ToNhwcRoundsAndPadsAndToNchwGivesItBackExactly) {
  RW_SKIP_WITHOUT_GPU();
  // 3 → 8: the image; H·W = 35 (one pixel a thread), 64 (four); 70 → 72 pads within a vector;
  // 960 at N = 3.
  const ConvertCase cases[] = {{1, 3, 5, 7, 8}, {3, 3, 8, 8, 8}, {3, 16, 6, 9, 16}, {1, 70, 3, 5, 72},
                               {2, 8, 1, 1, 8}, {3, 960, 2, 2, 960}, {1, 5, 4, 3, 16}};
  for (const ConvertCase& k : cases) {
    // ±4 with values beyond fp16's normal range at both ends: 1e5 overflows fp16 to inf,
    // 1e-6 is an fp16 subnormal; bf16 keeps both.
    Tensor x = random_tensor(DType::kF32, {k.n, k.c, k.h, k.w}, -4, 4, 7);
    x.data<float>()[0] = 1e5f;
    x.data<float>()[x.numel() - 1] = -1e-6f;
    for (const DType s : kStorages) {
      const std::string what = fmt::format("{}x{}x{}x{} → {} channels", k.n, k.c, k.h, k.w, k.cp);
      SCOPED_TRACE(what + " " + name_of(s));
      const Tensor y = run_cuda("rw.ToNhwc", {x}, {{"to", std::int64_t{dtype_to_onnx(s)}}, {"rw.channels", k.cp}});
      ASSERT_EQ(y.dtype(), s);
      ASSERT_EQ(y.shape(), (Shape{k.n, k.h, k.w, k.cp}));
      const Tensor want = rounded(x, s);
      EXPECT_EQ(mismatches(y.cast(DType::kF32), nchw_to_nhwc(want, k.cp)), 0) << "rw.ToNhwc";
      const Tensor back = run_cuda("rw.ToNchw", {y}, {{"rw.channels", k.c}});
      ASSERT_EQ(back.dtype(), DType::kF32);
      EXPECT_EQ(mismatches(back, want), 0) << "rw.ToNchw";
    }
  }
  // fp32 storage pads to 4 channels (16 bytes): 3 → 4 (the image, one vector a pixel: the lanes
  // kernel), 10 → 12 (three vectors), at H·W odd and a multiple of 4.
  const ConvertCase f32_cases[] = {{1, 3, 5, 7, 4}, {3, 3, 8, 8, 4}, {2, 10, 3, 5, 12}, {1, 12, 4, 4, 12}};
  for (const ConvertCase& k : f32_cases) {
    const Tensor x = random_tensor(DType::kF32, {k.n, k.c, k.h, k.w}, -4, 4, 8);
    SCOPED_TRACE(fmt::format("fp32 {}x{}x{}x{} → {} channels", k.n, k.c, k.h, k.w, k.cp));
    const Tensor y =
        run_cuda("rw.ToNhwc", {x}, {{"to", std::int64_t{dtype_to_onnx(DType::kF32)}}, {"rw.channels", k.cp}});
    ASSERT_EQ(y.dtype(), DType::kF32);
    ASSERT_EQ(y.shape(), (Shape{k.n, k.h, k.w, k.cp}));
    EXPECT_EQ(mismatches(y, nchw_to_nhwc(x, k.cp)), 0) << "rw.ToNhwc";
    const Tensor back = run_cuda("rw.ToNchw", {y}, {{"rw.channels", k.c}});
    EXPECT_EQ(mismatches(back, x), 0) << "rw.ToNchw";
  }
}

// ---- rw.MaxPoolNhwc ----

struct PoolCase {
  std::string name;
  std::int64_t n, c, h, w, k, stride;
  Ints pads;  // top, left, bottom, right
  std::int64_t dil = 1, ceil = 0;
};

TEST(NhwcOps, MaxPoolMatchesTheReferenceExactly) {
  RW_SKIP_WITHOUT_GPU();
  const PoolCase cases[] = {
      {"3x3_s2_pad1_resnet_stem", 3, 8, 15, 13, 3, 2, {1, 1, 1, 1}},
      {"3x3_s2_ceil_mode", 1, 16, 14, 14, 3, 2, {0, 0, 0, 0}, 1, 1},
      {"3x3_s2_ceil_mode_pad1", 3, 72, 10, 11, 3, 2, {1, 1, 1, 1}, 1, 1},
      {"2x2_s2_asymmetric_pads", 1, 72, 9, 11, 2, 2, {0, 1, 1, 0}},
      {"3x3_s1_c960", 3, 960, 4, 5, 3, 1, {1, 1, 1, 1}},
      {"3x3_dilated", 1, 8, 9, 10, 3, 1, {2, 2, 2, 2}, 2},
  };
  for (const PoolCase& k : cases) {
    Attrs onnx = {{"kernel_shape", Ints{k.k, k.k}}, {"strides", Ints{k.stride, k.stride}}, {"pads", k.pads},
                  {"dilations", Ints{k.dil, k.dil}}, {"ceil_mode", k.ceil}};
    for (const DType s : kStorages) {
      SCOPED_TRACE(k.name + " " + name_of(s));
      const Tensor xs = rounded(random_tensor(DType::kF32, {k.n, k.c, k.h, k.w}, -1, 1, 11), s);
      const Tensor expected = run_reference("MaxPool", {xs}, onnx);
      const Tensor got = run_cuda("rw.MaxPoolNhwc", {nchw_to_nhwc(xs, k.c).cast(s)}, onnx);
      ASSERT_EQ(got.dtype(), s);
      const Tensor nchw = to_channels_first(got, k.c);
      expect_within("MaxPool " + k.name, s, nchw, expected);
      EXPECT_EQ(mismatches(nchw, expected), 0) << "the max of S values is an S value";
    }
  }
}

// ---- rw.GlobalAveragePoolNhwc ----

TEST(NhwcOps, GlobalAveragePoolMatchesTheReference) {
  RW_SKIP_WITHOUT_GPU();
  // 960 channels: four blocks of 256 channels per image, the last partly used.
  const ConvertCase cases[] = {{1, 960, 7, 7, 960}, {3, 72, 5, 3, 72}, {3, 8, 1, 1, 8}, {1, 16, 13, 11, 16}};
  for (const ConvertCase& k : cases) {
    for (const DType s : kStorages) {
      const std::string what = fmt::format("GlobalAveragePool {}x{}x{}x{}", k.n, k.c, k.h, k.w);
      SCOPED_TRACE(what + " " + name_of(s));
      const Tensor xs = rounded(random_tensor(DType::kF32, {k.n, k.c, k.h, k.w}, -1, 2, 13), s);
      const Tensor expected = run_reference("GlobalAveragePool", {xs}, {});
      const Tensor got = run_cuda("rw.GlobalAveragePoolNhwc", {nchw_to_nhwc(xs, k.c).cast(s)}, {});
      ASSERT_EQ(got.dtype(), DType::kF32);
      expect_within(what, s, got, expected);
      redwood::testing::expect_close(got, expected, 1e-5, 1e-6);  // fp32 sums: only the order differs
    }
  }
}

// ---- rw.ScaleChannelsNhwc ----

TEST(NhwcOps, ScaleChannelsMatchesTheReferenceMul) {
  RW_SKIP_WITHOUT_GPU();
  const ConvertCase cases[] = {{3, 72, 5, 7, 72}, {1, 960, 7, 7, 960}, {1, 8, 3, 3, 8}, {3, 16, 1, 1, 16}};
  for (const ConvertCase& k : cases) {
    for (const DType s : kStorages) {
      const std::string what = fmt::format("ScaleChannels {}x{}x{}x{}", k.n, k.c, k.h, k.w);
      SCOPED_TRACE(what + " " + name_of(s));
      const Tensor xs = rounded(random_tensor(DType::kF32, {k.n, k.c, k.h, k.w}, -1, 1, 17), s);
      const Tensor scale = random_tensor(DType::kF32, {k.n, k.c, 1, 1}, 0, 1, 18);
      const Tensor expected = run_reference("Mul", {xs, scale}, {});
      const Tensor got = run_cuda("rw.ScaleChannelsNhwc", {nchw_to_nhwc(xs, k.c).cast(s), scale}, {});
      ASSERT_EQ(got.dtype(), s);
      expect_within(what, s, to_channels_first(got, k.c), expected);
    }
  }
}

// ---- rw.DepthwiseConvNhwc ----

struct DwCase {
  std::string name;
  std::int64_t n, c, h, w, r, stride;
  Ints pads;  // top, left, bottom, right
  std::string act;  // "" (none), Relu, HardSwish
  bool bias = true, residual = false;
  std::int64_t dil = 1, stride_w = 0;  // stride_w 0: = stride
};

/// [C, 1, R, S] → [R, S, C] (as [1, C, R, S] → [1, R, S, C]).
Tensor rsc_weights(const Tensor& w) {
  const Shape& s = w.shape();
  return to_channels_last(w.reshaped({1, s[0], s[2], s[3]}), s[0], DType::kF32).reshaped({s[2], s[3], s[0]});
}

// ---- rw.round_tf32 (fp32 storage at precision tf32) ----

/// Elements whose 13 low mantissa bits are not zero (values that are not tf32).
std::int64_t not_tf32(const Tensor& t) {
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    std::uint32_t u;
    std::memcpy(&u, t.data<float>() + i, 4);
    bad += (u & 0x1fffu) != 0;
  }
  return bad;
}

// With rw.round_tf32 (choose_gpu_layout at precision tf32) each kernel that writes an fp32 NHWC
// activation stores it rounded to tf32 (cvt.rna.tf32.f32), as the reference kernel does
// (round_to_tf32): the conversion, the max pool and the scale bit for bit, the depthwise
// convolution to summation order (then a value near a tie may round the other way: one tf32 ulp).
// The inputs are fp32 values with their low bits set, so the rounding is visible.
TEST(NhwcOps, Tf32RoundingAttributeRoundsWhatEachKernelStores) {
  RW_SKIP_WITHOUT_GPU();
  const Tensor x = random_tensor(DType::kF32, {3, 16, 9, 11}, -1, 1, 31);
  const Tensor xn = nchw_to_nhwc(x, 16);
  ASSERT_GT(not_tf32(xn), 0);
  const Attrs round = {{"rw.round_tf32", std::int64_t{1}}};
  auto with_round = [&](Attrs a) {
    a.insert(round.begin(), round.end());
    return a;
  };
  const Attrs to = with_round({{"to", std::int64_t{dtype_to_onnx(DType::kF32)}}, {"rw.channels", std::int64_t{16}}});
  const Tensor cu_to = run_cuda("rw.ToNhwc", {x}, to);
  const Tensor ref_to = run_reference("rw.ToNhwc", {x}, to);
  EXPECT_EQ(not_tf32(ref_to), 0);
  EXPECT_EQ(mismatches(cu_to, ref_to), 0);
  EXPECT_GT(mismatches(ref_to, xn), 0);  // it really rounds

  const Attrs pool = with_round({{"kernel_shape", Ints{3, 3}},
                                 {"strides", Ints{2, 2}},
                                 {"pads", Ints{1, 1, 1, 1}},
                                 {"dilations", Ints{1, 1}},
                                 {"ceil_mode", std::int64_t{0}}});
  const Tensor cu_pool = run_cuda("rw.MaxPoolNhwc", {xn}, pool);
  EXPECT_EQ(not_tf32(cu_pool), 0);
  EXPECT_EQ(mismatches(cu_pool, run_reference("rw.MaxPoolNhwc", {xn}, pool)), 0);

  const Tensor scale = random_tensor(DType::kF32, {3, 16, 1, 1}, 0, 1, 32);
  const Tensor cu_scale = run_cuda("rw.ScaleChannelsNhwc", {xn, scale}, round);
  EXPECT_EQ(not_tf32(cu_scale), 0);
  EXPECT_EQ(mismatches(cu_scale, run_reference("rw.ScaleChannelsNhwc", {xn, scale}, round)), 0);

  const Tensor w = rsc_weights(random_tensor(DType::kF32, {16, 1, 3, 3}, -1, 1, 33));
  const Tensor bias = random_tensor(DType::kF32, {16}, -1, 1, 34);
  for (const std::int64_t stride : {1, 2}) {  // the tiled kernel; a dilation for the direct one
    for (const std::int64_t dil : {1, 2}) {
      SCOPED_TRACE(fmt::format("depthwise stride {} dilation {}", stride, dil));
      const Attrs dw = with_round({{"strides", Ints{stride, stride}},
                                   {"pads", Ints{dil, dil, dil, dil}},
                                   {"dilations", Ints{dil, dil}},
                                   {"rw.activation", std::string("Relu")}});
      const Tensor cu_dw = run_cuda("rw.DepthwiseConvNhwc", {xn, w, bias}, dw);
      const Tensor ref_dw = run_reference("rw.DepthwiseConvNhwc", {xn, w, bias}, dw);
      EXPECT_EQ(not_tf32(cu_dw), 0);
      EXPECT_EQ(not_tf32(ref_dw), 0);
      EXPECT_LE(testing::relative_l2(cu_dw, ref_dw), 1e-4);
    }
  }
  // Without the attribute fp32 storage keeps every bit (the tf32 rounding is the pass's choice).
  const Attrs plain = {{"to", std::int64_t{dtype_to_onnx(DType::kF32)}}, {"rw.channels", std::int64_t{16}}};
  EXPECT_EQ(mismatches(run_cuda("rw.ToNhwc", {x}, plain), xn), 0);
}

TEST(NhwcOps, DepthwiseConvMatchesTheReferenceConv) {
  RW_SKIP_WITHOUT_GPU();
  const DwCase cases[] = {
      {"3x3_s1_c72_hardswish", 3, 72, 15, 22, 3, 1, {1, 1, 1, 1}, "HardSwish"},
      {"3x3_s2_asymmetric_relu", 1, 16, 15, 23, 3, 2, {0, 0, 1, 1}, "Relu"},
      {"3x3_s2_pad1_c8_residual", 3, 8, 14, 14, 3, 2, {1, 1, 1, 1}, "", false, true},
      {"5x5_s1_c960_residual", 1, 960, 7, 7, 5, 1, {2, 2, 2, 2}, "HardSwish", true, true},
      {"5x5_s2_asymmetric_residual", 3, 40, 14, 13, 5, 2, {1, 2, 2, 1}, "", false, true},
      {"5x5_s2_c72_mnv3", 1, 72, 28, 28, 5, 2, {2, 2, 2, 2}, "Relu"},
      {"3x3_s1_one_column", 1, 8, 5, 1, 3, 1, {1, 1, 1, 1}, "Relu", true, true},
      {"7x7_s2_c16", 1, 16, 13, 17, 7, 2, {3, 3, 3, 3}, "HardSwish"},
      {"7x7_s1_c8_valid", 3, 8, 9, 10, 7, 1, {0, 0, 0, 0}, ""},
      {"direct_dilated_3x3", 1, 16, 11, 9, 3, 1, {2, 2, 2, 2}, "Relu", true, false, 2},
      {"direct_stride_2x1", 3, 8, 9, 7, 3, 2, {1, 1, 1, 1}, "HardSwish", true, true, 1, 1},
      {"direct_1x1", 1, 24, 5, 6, 1, 1, {0, 0, 0, 0}, ""},
  };
  for (const DwCase& k : cases) {
    const std::int64_t sw = k.stride_w == 0 ? k.stride : k.stride_w;
    const std::int64_t oh = (k.h + k.pads[0] + k.pads[2] - (k.r - 1) * k.dil - 1) / k.stride + 1;
    const std::int64_t ow = (k.w + k.pads[1] + k.pads[3] - (k.r - 1) * k.dil - 1) / sw + 1;
    Attrs attrs = {{"strides", Ints{k.stride, sw}}, {"pads", k.pads}, {"dilations", Ints{k.dil, k.dil}}};
    if (!k.act.empty()) attrs["rw.activation"] = k.act;
    Attrs conv = attrs;
    conv["group"] = k.c;
    const Tensor w = random_tensor(DType::kF32, {k.c, 1, k.r, k.r}, -1, 1, 21);
    const Tensor bias = k.bias ? random_tensor(DType::kF32, {k.c}, -1, 1, 22) : Tensor();
    for (const DType s : kStorages) {
      SCOPED_TRACE(k.name + " " + name_of(s));
      const Tensor xs = rounded(random_tensor(DType::kF32, {k.n, k.c, k.h, k.w}, -1, 1, 23), s);
      const Tensor res = k.residual ? rounded(random_tensor(DType::kF32, {k.n, k.c, oh, ow}, -1, 1, 24), s) : Tensor();
      std::vector<Tensor> ref_in = {xs, w, bias};
      std::vector<Tensor> in = {nchw_to_nhwc(xs, k.c).cast(s), rsc_weights(w), bias};
      if (k.residual) {
        ref_in.push_back(res);
        in.push_back(nchw_to_nhwc(res, k.c).cast(s));
      }
      const Tensor expected = run_reference("Conv", ref_in, conv);
      ASSERT_EQ(expected.shape(), (Shape{k.n, k.c, oh, ow}));
      const Tensor got = run_cuda("rw.DepthwiseConvNhwc", in, attrs);
      ASSERT_EQ(got.dtype(), s);
      ASSERT_EQ(got.shape(), (Shape{k.n, oh, ow, k.c}));
      expect_within("DepthwiseConv " + k.name, s, to_channels_first(got, k.c), expected);
    }
  }
}

TEST(NhwcOps, DepthwiseVariantByShape) {
  using kernels::depthwise_nhwc_variant;
  using kernels::NhwcDepthwiseParams;
  NhwcDepthwiseParams p{32, 112, 112, 64, 56, 56, 3, 3, 2, 2, 1, 1, 1, 1};
  EXPECT_STREQ(depthwise_nhwc_variant(p), "tiled 3x3/2");
  p.r = p.s = 5;
  p.stride_h = p.stride_w = 1;
  EXPECT_STREQ(depthwise_nhwc_variant(p), "tiled 5x5/1");
  p.dil_h = 2;
  EXPECT_STREQ(depthwise_nhwc_variant(p), "direct");
  p.dil_h = 1;
  p.stride_w = 2;
  EXPECT_STREQ(depthwise_nhwc_variant(p), "direct");
}

// ---- the depthwise variants and the global mean's plans, launched directly ----

kernels::NhwcStorage storage_of(DType s) {
  return s == DType::kF16 ? kernels::NhwcStorage::kF16
                          : s == DType::kBF16 ? kernels::NhwcStorage::kBF16 : kernels::NhwcStorage::kF32;
}

// Every variant the tuner may pick (nhwc.cpp) gives the default's bits, and that is within the
// bound of the reference Conv. Tails: W and H not multiples of the 4 or 2 outputs a thread, C of
// 5 or 9 vectors of 8 (10 or 18 of 4 at fp32), N > 1, padding on every side, residual.
TEST(NhwcOps, DepthwiseEveryVariantGivesTheSameBits) {
  RW_SKIP_WITHOUT_GPU();
  struct Case {
    std::int64_t n, c, h, w, r, stride, pad;
    bool residual;
    int act;
  };
  const Case cases[] = {
      {3, 72, 15, 13, 3, 1, 1, true, kernels::kActHardSwish}, {2, 40, 11, 9, 3, 2, 1, false, kernels::kActRelu},
      {3, 24, 9, 14, 5, 1, 2, true, kernels::kActNone},       {2, 120, 13, 13, 5, 2, 2, false, kernels::kActHardSwish},
      {1, 8, 7, 5, 3, 1, 1, false, kernels::kActRelu},
  };
  for (const Case& k : cases) {
    const std::int64_t oh = (k.h + 2 * k.pad - k.r) / k.stride + 1, ow = (k.w + 2 * k.pad - k.r) / k.stride + 1;
    const std::string what = fmt::format("depthwise {}x{}x{}x{} {}x{}/{}", k.n, k.c, k.h, k.w, k.r, k.r, k.stride);
    const Tensor w = random_tensor(DType::kF32, {k.c, 1, k.r, k.r}, -1, 1, 41);
    const Tensor bias = random_tensor(DType::kF32, {k.c}, -1, 1, 42);
    Attrs conv = {{"strides", Ints{k.stride, k.stride}}, {"pads", Ints{k.pad, k.pad, k.pad, k.pad}},
                  {"dilations", Ints{1, 1}}, {"group", k.c}};
    if (k.act == kernels::kActRelu) conv["rw.activation"] = std::string("Relu");
    if (k.act == kernels::kActHardSwish) conv["rw.activation"] = std::string("HardSwish");
    for (const DType s : kStorages) {
      SCOPED_TRACE(what + " " + name_of(s));
      const Tensor xs = rounded(random_tensor(DType::kF32, {k.n, k.c, k.h, k.w}, -1, 1, 43), s);
      const Tensor res = rounded(random_tensor(DType::kF32, {k.n, k.c, oh, ow}, -1, 1, 44), s);
      std::vector<Tensor> ref_in = {xs, w, bias};
      if (k.residual) ref_in.push_back(res);
      const Tensor expected = run_reference("Conv", ref_in, conv);
      const Tensor dx = to_device(nchw_to_nhwc(xs, k.c).cast(s)), dw = to_device(rsc_weights(w));
      const Tensor db = to_device(bias), dr = to_device(nchw_to_nhwc(res, k.c).cast(s));
      Tensor y = device_empty(s, {k.n, oh, ow, k.c});
      kernels::NhwcDepthwiseParams p{static_cast<int>(k.n), static_cast<int>(k.h), static_cast<int>(k.w),
                                     static_cast<int>(k.c), static_cast<int>(oh),  static_cast<int>(ow),
                                     static_cast<int>(k.r), static_cast<int>(k.r), static_cast<int>(k.stride),
                                     static_cast<int>(k.stride), static_cast<int>(k.pad), static_cast<int>(k.pad),
                                     1, 1};
      kernels::Epilogue e;
      e.act = k.act;
      const auto candidates = kernels::depthwise_nhwc_candidates(storage_of(s), p);
      ASSERT_EQ(candidates.size(), s == DType::kF32 ? 5u : 3u);
      Tensor first;
      bool have_first = false;
      for (const kernels::NhwcDepthwiseVariant& v : candidates) {
        const std::string name = kernels::depthwise_nhwc_variant_name(p, v);
        ASSERT_EQ(cudaMemset(y.raw_data(), 0xff, y.nbytes()), cudaSuccess);  // NaNs where nothing is written
        kernels::launch_depthwise_nhwc(storage_of(s), p, dx.raw_data(), dw.data<float>(), db.data<float>(),
                                       k.residual ? dr.raw_data() : nullptr, y.raw_data(), e, nullptr, v);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << name;
        const Tensor got = to_host(y).cast(DType::kF32);
        if (!have_first) {
          first = got;
          have_first = true;
          expect_within(what + " " + name, s, to_channels_first(got, k.c), expected);
        } else {
          EXPECT_EQ(mismatches(got, first), 0) << name << " differs from " << kernels::depthwise_nhwc_variant_name(p, {});
        }
      }
    }
  }
}

// Every plan of the global mean (one part, the runner's, parts with a second kernel, one vector a
// block) within 1e-5 of the reference, and each the same bits when run again (fixed orders).
TEST(NhwcOps, GlobalAveragePoolEveryPlanMatchesTheReference) {
  RW_SKIP_WITHOUT_GPU();
  const ConvertCase cases[] = {{3, 72, 28, 28, 72}, {2, 120, 13, 11, 120}, {1, 16, 29, 31, 16}, {2, 960, 7, 7, 960}};
  for (const ConvertCase& k : cases) {
    const int n = static_cast<int>(k.n), c = static_cast<int>(k.c), groups = c / kernels::kNhwcVec;
    const long long hw = k.h * k.w;
    const int vecs = std::min(groups, 32);
    const kernels::NhwcGapPlan plans[] = {{}, kernels::global_avg_pool_nhwc_plan(n, hw, c, 132),
                                          {vecs, 256 / vecs, 5}, {1, 64, 3}, {vecs, std::min(256 / vecs, 64), 2}};
    for (const DType s : kStorages) {
      const std::string what = fmt::format("GlobalAveragePool {}x{}x{}x{}", k.n, k.c, k.h, k.w);
      const Tensor xs = rounded(random_tensor(DType::kF32, {k.n, k.c, k.h, k.w}, -1, 2, 45), s);
      const Tensor expected = run_reference("GlobalAveragePool", {xs}, {});
      const Tensor dx = to_device(nchw_to_nhwc(xs, k.c).cast(s));
      Tensor y = device_empty(DType::kF32, {k.n, k.c, 1, 1});
      for (const kernels::NhwcGapPlan& plan : plans) {
        SCOPED_TRACE(fmt::format("{} {} plan {}x{}x{}", what, name_of(s), plan.vecs, plan.slices, plan.parts));
        const std::size_t bytes = kernels::global_avg_pool_nhwc_workspace(plan, n, c);
        EXPECT_EQ(bytes, plan.parts > 1 ? static_cast<std::size_t>(n) * plan.parts * c * sizeof(float) : 0u);
        const Tensor ws = device_empty(DType::kU8, {static_cast<std::int64_t>(std::max<std::size_t>(bytes, 1))});
        Tensor runs[2];
        for (Tensor& got : runs) {
          ASSERT_EQ(cudaMemset(y.raw_data(), 0xff, y.nbytes()), cudaSuccess);
          kernels::launch_global_avg_pool_nhwc(storage_of(s), dx.raw_data(), y.data<float>(), n, hw, c, nullptr, plan,
                                               static_cast<float*>(ws.raw_data()));
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          got = to_host(y);
        }
        redwood::testing::expect_close(runs[0], expected, 1e-5, 1e-6);
        EXPECT_EQ(mismatches(runs[1], runs[0]), 0) << "not deterministic";
      }
    }
  }
}

// Host only: images cut into parts where a thread would add over 8 pixels, never below 2 pixels a
// thread; a block's threads on the vectors there are.
TEST(NhwcOps, GlobalAveragePoolPlanSplitsLargeImages) {
  auto expect_plan = [](kernels::NhwcGapPlan p, int vecs, int slices, int parts) {
    EXPECT_EQ(p.vecs, vecs);
    EXPECT_EQ(p.slices, slices);
    EXPECT_EQ(p.parts, parts);
  };
  expect_plan(kernels::global_avg_pool_nhwc_plan(32, 784, 72, 132), 9, 28, 9);    // 32 blocks → 288
  expect_plan(kernels::global_avg_pool_nhwc_plan(1, 784, 72, 132), 9, 28, 14);    // 2 pixels a thread
  expect_plan(kernels::global_avg_pool_nhwc_plan(32, 196, 672, 132), 32, 8, 3);   // 96 blocks → 288
  expect_plan(kernels::global_avg_pool_nhwc_plan(32, 49, 960, 132), 32, 8, 1);    // 7 pixels a thread
  expect_plan(kernels::global_avg_pool_nhwc_plan(2, 9, 8, 132), 1, 64, 1);
}

// ---- plan() errors (host only: plan() makes no CUDA call) ----

/// Plans `op` with `inputs` (undefined dtype: absent) and returns the error message, "" if none.
std::string plan_error(const std::string& op, const Attrs& attrs, const std::vector<TensorDesc>& inputs) {
  Node node;
  node.name = "nhwc_node";
  node.op_type = op;
  node.attributes = attrs;
  KernelInfo info;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    node.inputs.push_back(inputs[i].defined() ? "in" + std::to_string(i) : "");
    info.input_dtypes.push_back(inputs[i].dtype);
  }
  node.outputs = {"out"};
  const KernelEntry* entry = nullptr;
  for (const KernelEntry* e : OpRegistry::instance().candidates(op, Device::kCuda)) {
    if (e->provider == kCudaProvider) entry = e;
  }
  if (entry == nullptr) return "no CUDA kernel registered for " + op;
  try {
    std::unique_ptr<Kernel> kernel = entry->factory(node, info);
    auto* ck = dynamic_cast<CudaKernel*>(kernel.get());
    if (ck == nullptr) return "not a CudaKernel";
    ck->plan(PlanInfo{node, inputs, Precision::kFp16, 17});
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_plan_error(const std::string& op, const Attrs& attrs, const std::vector<TensorDesc>& inputs,
                       const std::string& says) {
  const std::string msg = plan_error(op, attrs, inputs);
  EXPECT_NE(msg.find("node 'nhwc_node' (" + op + ")"), std::string::npos) << op << ": " << msg;
  EXPECT_NE(msg.find(says), std::string::npos) << op << ": '" << msg << "' should say '" << says << "'";
}

TEST(NhwcOpsPlan, ValidNodesPlanTheContractsOutputs) {
  const Attrs pool = {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}},
                      {"dilations", Ints{1, 1}},   {"ceil_mode", std::int64_t{0}}};
  EXPECT_EQ(plan_error("rw.ToNhwc", {{"to", std::int64_t{16}}, {"rw.channels", std::int64_t{8}}},
                       {{DType::kF32, {32, 3, 224, 224}}}),
            "");
  EXPECT_EQ(plan_error("rw.MaxPoolNhwc", pool, {{DType::kBF16, {32, 112, 112, 64}}}), "");
  EXPECT_EQ(plan_error("rw.ToNhwc", {{"to", std::int64_t{1}}, {"rw.channels", std::int64_t{4}}},
                       {{DType::kF32, {32, 3, 224, 224}}}),
            "");
  EXPECT_EQ(plan_error("rw.ToNchw", {{"rw.channels", std::int64_t{10}}}, {{DType::kF32, {2, 7, 7, 12}}}), "");
  EXPECT_EQ(plan_error("rw.MaxPoolNhwc", pool, {{DType::kF32, {32, 112, 112, 64}}}), "");
  EXPECT_EQ(plan_error("rw.DepthwiseConvNhwc", {{"strides", Ints{2, 2}}, {"pads", Ints{0, 0, 1, 1}}, {"dilations", Ints{1, 1}}},
                       {{DType::kF16, {32, 56, 56, 72}}, {DType::kF32, {5, 5, 72}}, {}, {DType::kF16, {32, 27, 27, 72}}}),
            "");
}

TEST(NhwcOpsPlan, BadNodesGetErrorsNamingTheNodeAndTheProblem) {
  const TensorDesc f16{DType::kF16, {2, 7, 7, 16}};
  expect_plan_error("rw.ToNhwc", {{"to", std::int64_t{10}}, {"rw.channels", std::int64_t{12}}},
                    {{DType::kF32, {1, 3, 8, 8}}}, "multiple of 8");
  expect_plan_error("rw.ToNhwc", {{"to", std::int64_t{10}}, {"rw.channels", std::int64_t{8}}},
                    {{DType::kF32, {1, 9, 8, 8}}}, "at least the input's 9 channels");
  expect_plan_error("rw.ToNhwc", {{"to", std::int64_t{11}}, {"rw.channels", std::int64_t{8}}},
                    {{DType::kF32, {1, 3, 8, 8}}}, "float16 (10), bfloat16 (16) or float (1)");
  expect_plan_error("rw.ToNhwc", {{"to", std::int64_t{1}}, {"rw.channels", std::int64_t{6}}},
                    {{DType::kF32, {1, 3, 8, 8}}}, "multiple of 4 (16 bytes of float)");
  expect_plan_error("rw.ToNchw", {{"rw.channels", std::int64_t{3}}}, {{DType::kF32, {2, 7, 7, 6}}},
                    "not a multiple of 4");
  expect_plan_error("rw.MaxPoolNhwc", {}, {{DType::kF32, {2, 7, 7, 12}}}, "not a multiple of 8");
  expect_plan_error("rw.ToNhwc", {{"to", std::int64_t{10}}}, {{DType::kF32, {1, 3, 8, 8}}}, "rw.channels is required");
  expect_plan_error("rw.ToNchw", {{"rw.channels", std::int64_t{17}}}, {f16}, "rw.channels 17");
  expect_plan_error("rw.ToNchw", {{"rw.channels", std::int64_t{3}}}, {{DType::kI32, {2, 7, 7, 16}}},
                    "float16, bfloat16 or float");
  expect_plan_error("rw.MaxPoolNhwc", {{"kernel_shape", Ints{3, 3}}}, {f16}, "strides is required");
  expect_plan_error("rw.MaxPoolNhwc",
                    {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{1, 1}}, {"pads", Ints{0, 0, 0, 0}},
                     {"dilations", Ints{1, 1}}},
                    {f16}, "ceil_mode is required");
  expect_plan_error("rw.GlobalAveragePoolNhwc", {}, {{DType::kF16, {2, 7, 7, 12}}}, "not a multiple of 8");
  expect_plan_error("rw.GlobalAveragePoolNhwc", {}, {{DType::kF16, {2, 7, 16}}}, "not an NHWC");
  expect_plan_error("rw.ScaleChannelsNhwc", {}, {f16, {DType::kF32, {2, 8, 1, 1}}}, "N·C = 32");
  const Attrs dw = {{"strides", Ints{1, 1}}, {"pads", Ints{1, 1, 1, 1}}, {"dilations", Ints{1, 1}}};
  expect_plan_error("rw.DepthwiseConvNhwc", dw, {f16, {DType::kF32, {3, 3, 8}}}, "[R, S, C] with C = 16");
  expect_plan_error("rw.DepthwiseConvNhwc", dw, {f16, {DType::kF16, {3, 3, 16}}}, "input 1 (W)");
  expect_plan_error("rw.DepthwiseConvNhwc", dw, {f16, {DType::kF32, {3, 3, 16}}, {DType::kF32, {8}}}, "bias");
  expect_plan_error("rw.DepthwiseConvNhwc", dw,
                    {f16, {DType::kF32, {3, 3, 16}}, {}, {DType::kBF16, {2, 7, 7, 16}}}, "residual bfloat16");
  expect_plan_error("rw.DepthwiseConvNhwc", dw, {f16, {DType::kF32, {11, 11, 16}}}, "smaller than the filter");
}

}  // namespace
}  // namespace redwood::cuda
