// The stem by space-to-depth on the GPU (docs/cuda.md, "The stem by space-to-depth"):
// rw.ToNhwc with rw.space_to_depth (kernels/nhwc/nhwc_space_to_depth.cu) against its reference kernel
// bit for bit (it only rounds each value once) at fp16, bf16 and fp32 (also rounded to tf32), for
// even W (float2 reads) and odd extents, 1 to 4 channels, padding channels; then small stem
// networks through the GraphRunner with the rewrite on and off against the CPU reference executor
// on the original graph (the 7x7/2 stem on 224x224 and on 37x33, the 3x3/2 and 5x5/2 stems): at
// fp16 and bf16 within the precision's bound, and at tf32 and fp32 (fp32 storage, where only the
// 7x7 stems are taken) within 1.5 times the plain stem's error. Then, host only, the runner's
// switch (CudaOptions::space_to_depth_stem).

#include "backends/cuda/graph_runner.hpp"
#include "core/error.hpp"
#include "backends/cuda/passes/space_to_depth.hpp"
#include "runtime/executor.hpp"
#include "gpu_test_support.hpp"
#include "provider_run.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace redwood::cuda {
namespace {

using redwood::testing::Ints;

using Attrs = std::map<std::string, AttributeValue>;

const char* name_of(DType s) { return s == DType::kF16 ? "fp16" : s == DType::kBF16 ? "bf16" : "fp32"; }

TEST(SpaceToDepthStem, ConversionEqualsTheReferenceBitForBit) {
  RW_SKIP_WITHOUT_GPU();
  struct Case {
    std::int64_t n, c, h, w;
  };
  // W even (float2 reads) and odd, odd H, 1 to 4 channels.
  const Case cases[] = {{2, 3, 224, 224}, {1, 3, 37, 33}, {2, 1, 9, 10}, {1, 4, 6, 5}, {3, 2, 7, 8}};
  std::uint32_t seed = 70;
  for (const DType s : {DType::kF16, DType::kBF16, DType::kF32}) {
    for (const Case& c : cases) {
      const std::int64_t chunk = s == DType::kF32 ? 4 : 8;
      const std::int64_t need = (4 * c.c + chunk - 1) / chunk * chunk;
      for (const std::int64_t cp : {need, need + 2 * chunk}) {  // and zero channels past the need
        for (const bool round : {false, true}) {
          if (round && s != DType::kF32) continue;
          SCOPED_TRACE(fmt::format("{} [{}, {}, {}, {}] into {} channels{}", name_of(s), c.n, c.c, c.h, c.w, cp,
                                   round ? ", rounded to tf32" : ""));
          const Tensor x = redwood::testing::random_tensor(DType::kF32, {c.n, c.c, c.h, c.w}, -3, 3, ++seed);
          Attrs attrs = {{"to", std::int64_t{dtype_to_onnx(s)}},
                         {"rw.channels", cp},
                         {"rw.space_to_depth", std::int64_t{2}},
                         {"rw.space_to_depth_hw", Ints{c.h, c.w}}};
          if (round) attrs["rw.round_tf32"] = std::int64_t{1};
          const Tensor got =
              testing::run_with_provider("rw.ToNhwc", {x}, attrs, Device::kCuda, kCudaProvider, Precision::kFp16).at(0);
          const Tensor want = testing::run_with_provider("rw.ToNhwc", {x}, attrs, Device::kCpu, kReferenceProvider,
                                                         Precision::kFp32)
                                  .at(0);
          ASSERT_EQ(got.shape(), (Shape{c.n, (c.h + 1) / 2, (c.w + 1) / 2, cp}));
          ASSERT_EQ(got.dtype(), s);
          const Tensor a = got.cast(DType::kF32), e = want.cast(DType::kF32);
          std::int64_t bad = 0;
          for (std::int64_t i = 0; i < e.numel(); ++i) bad += a.data<float>()[i] != e.data<float>()[i];
          EXPECT_EQ(bad, 0);
        }
      }
    }
  }
}

TEST(SpaceToDepthStem, PlanRefusesAnotherInputExtentAndTooFewChannels) {
  RW_SKIP_WITHOUT_GPU();
  const Tensor x = redwood::testing::random_tensor(DType::kF32, {1, 3, 8, 8}, -1, 1, 3);
  Attrs attrs = {{"to", std::int64_t{dtype_to_onnx(DType::kF16)}},
                 {"rw.channels", std::int64_t{16}},
                 {"rw.space_to_depth", std::int64_t{2}},
                 {"rw.space_to_depth_hw", Ints{8, 10}}};
  const auto run = [&](const Attrs& a) {
    testing::run_with_provider("rw.ToNhwc", {x}, a, Device::kCuda, kCudaProvider, Precision::kFp16);
  };
  try {
    run(attrs);
    FAIL() << "an 8x8 input was converted for a stem planned for 8x10";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("planned for a 8x10 input"), std::string::npos) << e.what();
  }
  attrs["rw.space_to_depth_hw"] = Ints{8, 8};
  attrs["rw.channels"] = std::int64_t{8};
  EXPECT_THROW(run(attrs), InvalidArgument);
}

// image [N, c, h, w] -> Conv (window x window / 2, `pads`, 16 channels, bias) -> Relu -> Conv 3x3/1
// (16 channels) -> y, every value's shape known (the batch a symbol), as the ONNX importer leaves it.
std::shared_ptr<Graph> stem_network(std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t window,
                                    const Ints& pads) {
  auto g = std::make_shared<Graph>();
  g->name = "stem";
  g->opset = 17;
  const auto info = redwood::testing::batched_nchw;
  const std::int64_t oh = (h + pads[0] + pads[2] - window) / 2 + 1, ow = (w + pads[1] + pads[3] - window) / 2 + 1;
  g->inputs = {info("image", c, h, w)};
  for (const ValueInfo& v : {g->inputs[0], info("s", 16, oh, ow), info("a", 16, oh, ow), info("y", 16, oh, ow)}) {
    g->value_info[v.name] = v;
  }
  g->outputs = {g->value_info.at("y")};
  g->initializers["stem_w"] = redwood::testing::random_tensor(DType::kF32, {16, c, window, window}, -0.3, 0.3, 81);
  g->initializers["stem_b"] = redwood::testing::random_tensor(DType::kF32, {16}, -0.2, 0.2, 82);
  g->initializers["next_w"] = redwood::testing::random_tensor(DType::kF32, {16, 16, 3, 3}, -0.2, 0.2, 83);
  Node stem = redwood::testing::make_node("stem", "Conv", {"image", "stem_w", "stem_b"}, {"s"});
  stem.attributes["strides"] = Ints{2, 2};
  stem.attributes["pads"] = pads;
  Node relu = redwood::testing::make_node("relu", "Relu", {"s"}, {"a"});
  Node next = redwood::testing::make_node("next", "Conv", {"a", "next_w"}, {"y"});
  next.attributes["pads"] = Ints{1, 1, 1, 1};
  g->nodes = {stem, relu, next};
  return g;
}

bool took_space_to_depth(const GraphRunner& runner) {
  for (const PassRecord& r : runner.pass_records()) {
    for (const std::string& c : r.changes) {
      if (c.find("space-to-depth") != std::string::npos) return true;
    }
  }
  return false;
}

TEST(SpaceToDepthStem, StemNetworksMatchTheReference) {
  RW_SKIP_WITHOUT_GPU();
  struct Case {
    std::int64_t n, c, h, w, window;
    Ints pads;
  };
  const Case cases[] = {{2, 3, 224, 224, 7, {3, 3, 3, 3}},  // the ResNet stem
                        {3, 3, 37, 33, 7, {3, 3, 3, 3}},    // odd extents (and the narrow kernel's K-dim)
                        {2, 3, 37, 33, 3, {1, 1, 1, 1}},    // MobileNet's 3x3/2 stem
                        {2, 3, 30, 31, 5, {2, 2, 2, 2}},
                        {1, 4, 24, 26, 7, {3, 2, 2, 3}}};   // 4 channels, asymmetric pads
  std::uint32_t seed = 90;
  for (const Case& c : cases) {
    auto graph = stem_network(c.c, c.h, c.w, c.window, c.pads);
    ExecutorOptions ref;
    ref.optimize = false;
    ref.reference_only = true;
    Executor reference(graph, ref);
    const Tensor x = redwood::testing::random_tensor(DType::kF32, {c.n, c.c, c.h, c.w}, -1, 1, ++seed);
    const Tensor want = reference.run({{"image", x}}).at(0);
    for (const Precision p : {Precision::kFp16, Precision::kBf16, Precision::kTf32, Precision::kFp32}) {
      // Taken where it shrinks the padded K-dim (the pass's rule): fp32 storage pads channels to 4,
      // so there only the 7x7 kernel over 3 channels gains (196 against 192; over 4 channels 196
      // against 256).
      const bool fp32_storage = p == Precision::kTf32 || p == Precision::kFp32;
      const std::int64_t chunk = fp32_storage ? 4 : 8;
      auto padded = [&](std::int64_t ch) { return (ch + chunk - 1) / chunk * chunk; };
      const auto plan = plan_space_to_depth_conv(c.h, c.w, c.window, c.window, {c.pads[0], c.pads[1], c.pads[2], c.pads[3]});
      const bool taken =
          plan.has_value() && plan->kernel_h * plan->kernel_w * padded(4 * c.c) < c.window * c.window * padded(c.c);
      const std::string what =
          fmt::format("[{}, {}, {}, {}] {}x{}/2 at {}", c.n, c.c, c.h, c.w, c.window, c.window, precision_name(p));
      SCOPED_TRACE(what);
      RunnerOptions on;
      on.precision = p;
      RunnerOptions off = on;
      off.cuda.space_to_depth_stem = false;
      GraphRunner with(graph, on), without(graph, off);
      EXPECT_EQ(took_space_to_depth(with), taken);
      EXPECT_FALSE(took_space_to_depth(without));
      const Tensor got = with.run({{"image", x}}).at(0);
      const Tensor again = with.run({{"image", x}}).at(0);  // a replay of the captured graph
      const Tensor plain = without.run({{"image", x}}).at(0);
      const double err = testing::relative_l2(got, want), err_plain = testing::relative_l2(plain, want);
      std::printf("[ measured ] %s: relative L2 %.3g with space-to-depth, %.3g without\n", what.c_str(), err,
                  err_plain);
      if (fp32_storage) {
        // The same tf32-rounded (or 3xTF32-split) operands in another summation order.
        EXPECT_LE(err, 1.5 * err_plain + 1e-7);
        if (p == Precision::kFp32) {
          EXPECT_LE(err, testing::tolerance(p));
        }
      } else {
        EXPECT_LE(err, testing::tolerance(p));
        EXPECT_LE(err_plain, testing::tolerance(p));
      }
      redwood::testing::expect_close(again, got, 0, 0);
    }
  }
}

TEST(SpaceToDepthStem, TheSwitchFollowsTheOptions) {
  // Host only: which runner options take the stem by space-to-depth.
  RunnerOptions o;
  for (const Precision p : {Precision::kFp16, Precision::kBf16, Precision::kTf32, Precision::kFp32}) {
    o.precision = p;
    EXPECT_TRUE(space_to_depth_stem(o)) << precision_name(p);
    o.nhwc = false;
    EXPECT_FALSE(space_to_depth_stem(o)) << precision_name(p) << " without NHWC groups";
    o.nhwc = true;
    o.cuda.space_to_depth_stem = false;
    EXPECT_FALSE(space_to_depth_stem(o)) << precision_name(p) << " switched off";
    o.cuda.space_to_depth_stem = true;
  }
}

}  // namespace
}  // namespace redwood::cuda
