// The implicit-GEMM convolution's tile configurations, each one (not only the tuner's pick)
// against the reference Conv kernel at every precision on odd shapes: padding, stride 2, groups,
// dilation, channel counts that are not multiples of any tile, 1×1 convolutions on the vector
// load paths, float4 and scalar epilogues, a 7×7 stem, a window too large for the tensor-core
// kernel (it runs exact fp32 instead), and split-K (including more splits than K tiles, whose
// empty splits add zeros). Split-K on the tensor cores runs both ways, the splits added by a
// separate kernel and inside the convolution kernel (SplitKCounters), which must give the same
// bits, also at a second launch (the counters are back at zero).
// Bounds: relative L2 ≤ 1e-4 (fp32), 1e-3 (tf32), 1e-2 (fp16, bf16). Then the tuner: a shape it
// timed once is reused, not timed again, by a second identical layer and by a second plan.

#include "backends/cuda/device_tensor.hpp"
#include "backends/cuda/graph_runner.hpp"
#include "backends/cuda/kernels/conv/conv_kernels.hpp"
#include "backends/cuda/kernels/conv/conv_tuning.hpp"
#include "core/error.hpp"
#include "gpu_test_support.hpp"
#include "provider_run.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstring>
#include <set>

namespace redwood::cuda {
namespace {

using kernels::ConvConfig;
using kernels::ConvShape;
using kernels::MmaType;
using redwood::testing::random_tensor;

struct ConvCase {
  std::string name;
  int n, c, h, w, k, r, s;
  int stride = 1, pad_h = 0, pad_w = 0, dil = 1, groups = 1;
  bool bias = true, residual = false;
  std::string act = "Relu";
};

std::vector<ConvCase> conv_cases() {
  return {
      {"3x3_pad1_odd_channels", 2, 13, 11, 9, 37, 3, 3, 1, 1, 1},
      {"3x3_stride2_residual", 1, 20, 15, 17, 70, 3, 3, 2, 1, 1, 1, 1, true, true, "HardSwish"},
      {"grouped_3x3", 2, 16, 7, 7, 24, 3, 3, 1, 1, 1, 1, 4},
      {"1x1_vector_pixels_odd_k", 2, 33, 6, 10, 130, 1, 1},  // OH·OW = 60: 16-byte A loads, Kdim 33: 4-byte B
      {"1x1_vector_both", 3, 64, 4, 5, 48, 1, 1, 1, 0, 0, 1, 1, false, true, ""},
      {"1x1_odd_pixels", 1, 40, 5, 7, 72, 1, 1},              // OH·OW = 35: 4-byte A loads
      {"1x1_stride2_downsample", 2, 32, 9, 9, 64, 1, 1, 2},
      {"deep_k_3x3", 1, 96, 5, 5, 40, 3, 3, 1, 1, 1},          // Kdim 864: 27 K tiles to split
      {"5x5_dilated_uneven_pads", 1, 5, 14, 13, 7, 5, 5, 1, 2, 1, 2},
      {"7x7_stride2_stem", 2, 3, 19, 17, 20, 7, 7, 2, 3, 3},    // 49 window positions, Kdim 147
      {"9x9_window_on_cuda_cores", 1, 2, 12, 12, 5, 9, 9, 1, 4, 4},  // 81 > 64 positions: conv_engine → fp32
  };
}

ConvShape shape_of(const ConvCase& c) {
  const int oh = (c.h + 2 * c.pad_h - (c.r - 1) * c.dil - 1) / c.stride + 1;
  const int ow = (c.w + 2 * c.pad_w - (c.s - 1) * c.dil - 1) / c.stride + 1;
  return ConvShape{c.n, c.c, c.h, c.w, c.k, c.r, c.s, oh, ow, c.stride, c.stride, c.pad_h, c.pad_w,
                   c.dil, c.dil, c.groups};
}

// The reference Conv kernel (CPU) with the same fused epilogue attributes.
Tensor reference_conv(const ConvCase& c, const std::vector<Tensor>& inputs) {
  std::map<std::string, AttributeValue> attrs;
  attrs["strides"] = std::vector<std::int64_t>{c.stride, c.stride};
  attrs["pads"] = std::vector<std::int64_t>{c.pad_h, c.pad_w, c.pad_h, c.pad_w};
  attrs["dilations"] = std::vector<std::int64_t>{c.dil, c.dil};
  attrs["group"] = std::int64_t{c.groups};
  if (!c.act.empty()) attrs["rw.activation"] = c.act;
  return testing::run_with_provider("Conv", inputs, attrs, Device::kCpu, kReferenceProvider, Precision::kFp32).at(0);
}

int act_code(const std::string& act) {
  if (act == "Relu") return kernels::kActRelu;
  if (act == "HardSwish") return kernels::kActHardSwish;
  return kernels::kActNone;
}

struct TileParam {
  ConvCase conv;
  Precision precision;
};
void PrintTo(const TileParam& p, std::ostream* os) { *os << p.conv.name << "_" << precision_name(p.precision); }

MmaType mma_of(Precision p) {
  switch (p) {
    case Precision::kTf32: return MmaType::kTf32;
    case Precision::kFp16: return MmaType::kFp16;
    case Precision::kBf16: return MmaType::kBf16;
    default: return MmaType::kFp32;
  }
}

class ConvTileVsReference : public ::testing::TestWithParam<TileParam> {};

TEST_P(ConvTileVsReference, EveryTileAndSplitAgrees) {
  RW_SKIP_WITHOUT_GPU();
  const ConvCase& c = GetParam().conv;
  const Precision precision = GetParam().precision;
  const MmaType type = mma_of(precision);
  const ConvShape p = shape_of(c);
  const Shape y_shape = {p.n, p.k, p.oh, p.ow};
  std::vector<Tensor> inputs = {random_tensor(DType::kF32, {c.n, c.c, c.h, c.w}, -1, 1, 11),
                                random_tensor(DType::kF32, {c.k, c.c / c.groups, c.r, c.s}, -1, 1, 12)};
  inputs.push_back(c.bias ? random_tensor(DType::kF32, {c.k}, -1, 1, 13) : Tensor());
  if (c.residual) inputs.push_back(random_tensor(DType::kF32, y_shape, -1, 1, 14));
  const Tensor expected = reference_conv(c, inputs);
  ASSERT_EQ(expected.shape(), y_shape);

  const Tensor x = to_device(inputs[0]), w = to_device(inputs[1]);
  const Tensor bias = c.bias ? to_device(inputs[2]) : Tensor();
  const Tensor residual = c.residual ? to_device(inputs[3]) : Tensor();
  kernels::Epilogue e;
  e.act = act_code(c.act);
  if (c.bias) e.bias = bias.data<float>();
  if (c.residual) e.residual = residual.data<float>();
  cudaGetLastError();  // an earlier test's deliberate failure (a bad device ordinal) stays here: clear it
  const std::vector<int> splits = {1, 3, 8};
  const Tensor partial = device_empty(DType::kF32, {static_cast<std::int64_t>(8) * shape_numel(y_shape)});
  const auto& tiles = kernels::conv_tiles(type);
  ASSERT_EQ(tiles.size(), type == MmaType::kFp32 ? 1u : 8u);
  for (int tile = 0; tile < static_cast<int>(tiles.size()); ++tile) {
    const kernels::SplitKCounters counters(kernels::conv_split_tiles(p, type, tile));
    ASSERT_GE(counters.base(), 0) << "the counter pool has room";
    for (int s : splits) {
      Tensor y = device_empty(DType::kF32, y_shape);
      kernels::launch_conv_implicit_gemm(p, x.data<float>(), w.data<float>(), y.data<float>(), e, type,
                                         ConvConfig{tile, s}, partial.data<float>(), nullptr);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const Tensor got = to_host(y);
      const double err = testing::relative_l2(got, expected);
      const std::string what = fmt::format("{} tile {} split-K {} at {}", c.name,
                                           tiles[static_cast<std::size_t>(tile)].name, s, precision_name(precision));
      EXPECT_LE(err, testing::tolerance(precision)) << what;
      if (precision == Precision::kFp32) redwood::testing::expect_close(got, expected, 1e-4, 1e-5);
      if (s == 1) continue;
      for (int launch = 0; launch < 2; ++launch) {
        Tensor y2 = device_empty(DType::kF32, y_shape);
        kernels::launch_conv_implicit_gemm(p, x.data<float>(), w.data<float>(), y2.data<float>(), e, type,
                                           ConvConfig{tile, s, true}, partial.data<float>(), nullptr, false, &counters);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        const Tensor got2 = to_host(y2);
        EXPECT_EQ(std::memcmp(got2.data<float>(), got.data<float>(), got.nbytes()), 0)
            << what << ": the in-kernel reduction, launch " << launch + 1 << ", differs from the separate one";
      }
    }
  }
}

std::vector<TileParam> tile_params() {
  std::vector<TileParam> out;
  for (const ConvCase& c : conv_cases()) {
    for (Precision p : {Precision::kFp32, Precision::kTf32, Precision::kFp16, Precision::kBf16}) out.push_back({c, p});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Tiles, ConvTileVsReference, ::testing::ValuesIn(tile_params()),
                         [](const ::testing::TestParamInfo<TileParam>& info) {
                           return info.param.conv.name + "_" + std::string(precision_name(info.param.precision));
                         });

TEST(ConvTileChoices, CandidatesCoverEveryTileAndBoundTheSplits) {
  // Host only: the candidate list is what the tuner may pick from.
  const ConvShape small{1, 512, 7, 7, 512, 3, 3, 7, 7, 1, 1, 1, 1, 1, 1, 1};  // few pixels, deep K
  const auto cands = kernels::conv_candidates(small, MmaType::kFp16, 132);
  std::set<int> tiles;
  for (const ConvConfig& c : cands) {
    tiles.insert(c.tile);
    EXPECT_GE(c.splits, 1);
    EXPECT_LE(c.splits, 16);
  }
  EXPECT_EQ(tiles.size(), kernels::conv_tiles(MmaType::kFp16).size());
  EXPECT_GT(cands.size(), tiles.size()) << "a 7×7 layer with Kdim 4608 gets split-K choices";
  const ConvShape big{32, 64, 56, 56, 256, 1, 1, 56, 56, 1, 1, 0, 0, 1, 1, 1};  // 100k pixels: no split
  for (const ConvConfig& c : kernels::conv_candidates(big, MmaType::kFp16, 132)) EXPECT_EQ(c.splits, 1);
}

// x → Conv(w1) → Conv(w2) → y: two layers of one shape (16 → 16 channels, 3×3, pad 1).
std::shared_ptr<Graph> two_identical_convs(int channels) {
  auto graph = redwood::testing::make_x_to_y_graph("two_convs");
  const std::int64_t ch = channels;
  graph->initializers["w1"] = random_tensor(DType::kF32, {ch, ch, 3, 3}, -0.2, 0.2, 21);
  graph->initializers["w2"] = random_tensor(DType::kF32, {ch, ch, 3, 3}, -0.2, 0.2, 22);
  for (int i = 0; i < 2; ++i) {
    Node n = redwood::testing::make_node(fmt::format("conv{}", i + 1), "Conv",
                                         {i == 0 ? "x" : "mid", i == 0 ? "w1" : "w2"}, {i == 0 ? "mid" : "y"});
    n.attributes["pads"] = std::vector<std::int64_t>{1, 1, 1, 1};
    graph->nodes.push_back(n);
  }
  return graph;
}

TEST(ConvTuner, ReusesItsPickForAnIdenticalShape) {
  RW_SKIP_WITHOUT_GPU();
  // 19 channels at 13×11: a shape no other test plans, so this test's first layer is timed.
  auto graph = two_identical_convs(19);
  RunnerOptions options;
  options.precision = Precision::kFp16;
  options.optimize = false;
  const Shape input = {1, 19, 13, 11};
  const ConvTuningStats before = conv_tuning_stats();
  GraphRunner first(graph, options);
  const std::vector<std::string> v1 = first.plan_for({input}).variants();
  const ConvTuningStats after_first = conv_tuning_stats();
  ASSERT_EQ(v1.size(), 2u);
  EXPECT_EQ(after_first.measured - before.measured, 1) << "the first layer is timed";
  EXPECT_EQ(after_first.reused - before.reused, 1) << "the second, identical layer reuses the pick";
  EXPECT_NE(v1[0].find("measured"), std::string::npos) << v1[0];
  EXPECT_NE(v1[1].find("cached"), std::string::npos) << v1[1];
  // Both layers run the same tile and split (the text after the node's name, before how).
  auto pick = [](const std::string& v) {
    const std::size_t at = v.find("mma.sync");
    return at == std::string::npos ? v : v.substr(at, v.find(" (", at) - at);
  };
  EXPECT_EQ(pick(v1[0]), pick(v1[1]));

  ConvConfig cached;
  const ConvShape shape{1, 19, 13, 11, 19, 3, 3, 13, 11, 1, 1, 1, 1, 1, 1, 1};
  ASSERT_TRUE(conv_tuned_config(shape, MmaType::kFp16, &cached));
  EXPECT_NE(pick(v1[0]).find(kernels::conv_tiles(MmaType::kFp16)[static_cast<std::size_t>(cached.tile)].name),
            std::string::npos);

  // A second runner (a second plan) times nothing and runs the same picks.
  GraphRunner second(graph, options);
  const std::vector<std::string> v2 = second.plan_for({input}).variants();
  const ConvTuningStats after_second = conv_tuning_stats();
  EXPECT_EQ(after_second.measured, after_first.measured);
  EXPECT_EQ(after_second.reused - after_first.reused, 2);
  ASSERT_EQ(v2.size(), 2u);
  EXPECT_EQ(pick(v2[0]), pick(v1[0]));

  // And the tuned plan computes what the reference executor does.
  const Tensor xin = random_tensor(DType::kF32, input, -1, 1, 23);
  const auto got = first.run({{"x", xin}});
  const auto again = second.run({{"x", xin}});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(testing::relative_l2(again[0], got[0]), 0.0) << "the same picks give the same bits";
}

TEST(ConvTuner, NoBudgetKeepsTheDefault) {
  RW_SKIP_WITHOUT_GPU();
  auto graph = two_identical_convs(23);
  RunnerOptions options;
  options.precision = Precision::kTf32;
  options.optimize = false;
  options.tune_budget_ms = 0;
  const ConvTuningStats before = conv_tuning_stats();
  GraphRunner runner(graph, options);
  const std::vector<std::string> v = runner.plan_for({{2, 23, 9, 9}}).variants();
  ASSERT_EQ(v.size(), 2u);
  for (const auto& line : v) EXPECT_NE(line.find("(default)"), std::string::npos) << line;
  EXPECT_EQ(conv_tuning_stats().measured, before.measured);
}

}  // namespace
}  // namespace redwood::cuda
