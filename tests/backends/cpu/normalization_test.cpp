// LayerNormalization, InstanceNormalization, GroupNormalization (opsets 18 and 21, which the ONNX
// node tests here lack), MeanVarianceNormalization, LpNormalization (no node tests either) and
// LRN: hand-computed values and the error paths (what a kernel refuses at load reaches the caller
// as the executor's Unsupported, still naming the node).

#include "core/error.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

namespace redwood {
namespace {

using testing::expect_close;
using testing::f32;
using testing::Ints;
using testing::iota_f32;
using testing::make_spec;
using testing::NodeSpec;
using testing::run_node;

std::vector<Tensor> run(const std::string& op, std::vector<Tensor> inputs,
                        std::map<std::string, AttributeValue> attrs = {}, std::int64_t opset = 17,
                        std::size_t outputs = 1) {
  NodeSpec spec = make_spec(op, std::move(inputs), std::move(attrs), outputs);
  spec.opset = opset;
  return run_node(spec);
}

TEST(LayerNormalization, BroadcastParametersAndStatistics) {
  const Tensor x = f32({2, 3}, {1, 2, 3, 2, 4, 6});
  // Scale [1] and B [3] broadcast to the normalized shape [3].
  const auto r = run("LayerNormalization", {x, f32({1}, {2}), f32({3}, {0, 1, 2})}, {{"epsilon", 0.0f}}, 17, 3);
  const float n = std::sqrt(1.5f);  // (x - mean) * InvStdDev of each row's first element, negated
  expect_close(r[0], f32({2, 3}, {-2 * n, 1, 2 * n + 2, -2 * n, 1, 2 * n + 2}));
  expect_close(r[1], f32({2, 1}, {2, 4}));
  expect_close(r[2], f32({2, 1}, {1 / std::sqrt(2.0f / 3), 1 / std::sqrt(8.0f / 3)}));
  // Without B and without the optional outputs.
  const auto y = run("LayerNormalization", {x, f32({2, 3}, {1, 1, 1, 1, 1, 1}), Tensor()},
                     {{"axis", std::int64_t{0}}, {"epsilon", 0.0f}});
  EXPECT_NEAR(y.at(0).data<float>()[0], (1 - 3.0f) / std::sqrt(8.0f / 3), 1e-5);
}

TEST(LayerNormalization, Rejects) {
  const Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_THROWS_SAYING(run("LayerNormalization", {x, f32({2}, {1, 1})}), InvalidArgument,
                       "node 'LayerNormalization_0' (LayerNormalization)",
                       "Scale [2] does not broadcast to the normalized shape [3]");
  EXPECT_THROWS_SAYING(run("LayerNormalization", {x, f32({3}, {1, 1, 1})}, {{"axis", std::int64_t{2}}}),
                       InvalidArgument, "axis 2 is out of range for input [2, 3]");
  EXPECT_THROWS_SAYING(run("LayerNormalization", {x, f32({3}, {1, 1, 1})}, {{"stash_type", std::int64_t{11}}}),
                       Unsupported, "stash_type 11 is not supported");
}

// Opset 18 scales and shifts per group, opset 21 per channel: X [1, 4, 2] in 2 groups of 2
// channels, each group normalizing to the same four values.
TEST(GroupNormalization, PerGroupInOpset18PerChannelInOpset21) {
  const Tensor x = iota_f32({1, 4, 2});
  const float s = 1 / std::sqrt(1.25f);
  const std::vector<float> norm = {-1.5f * s, -0.5f * s, 0.5f * s, 1.5f * s};
  const std::map<std::string, AttributeValue> attrs{{"num_groups", std::int64_t{2}}, {"epsilon", 0.0f}};
  std::vector<float> want18, want21;
  for (int c = 0; c < 4; ++c) {
    for (int i = 0; i < 2; ++i) {
      const float v = norm[static_cast<std::size_t>(c % 2 * 2 + i)];
      want18.push_back(c < 2 ? 2 * v : 3 * v + 1);
      want21.push_back(float(c + 1) * v + (c < 2 ? 0.0f : 1.0f));
    }
  }
  expect_close(run("GroupNormalization", {x, f32({2}, {2, 3}), f32({2}, {0, 1})}, attrs, 18)[0],
               f32({1, 4, 2}, want18));
  expect_close(run("GroupNormalization", {x, f32({4}, {1, 2, 3, 4}), f32({4}, {0, 0, 1, 1})}, attrs, 21)[0],
               f32({1, 4, 2}, want21));
}

TEST(GroupNormalization, Rejects) {
  const Tensor x = iota_f32({1, 4, 2});
  const Tensor p2 = f32({2}, {1, 1});
  EXPECT_THROWS_SAYING(run("GroupNormalization", {x, p2, p2}, {{"num_groups", std::int64_t{3}}}, 18),
                       InvalidArgument, "node 'GroupNormalization_0' (GroupNormalization)",
                       "the 4 channels of X [1, 4, 2] do not split into 3 groups");
  EXPECT_THROWS_SAYING(run("GroupNormalization", {x, p2, p2}, {}, 18), Unsupported,
                       "num_groups must be given and positive");
  // Opset 21 wants a scale per channel.
  EXPECT_THROWS_SAYING(run("GroupNormalization", {x, p2, p2}, {{"num_groups", std::int64_t{2}}}, 21),
                       InvalidArgument, "scale [2] must be [4] for input [1, 4, 2]");
}

TEST(InstanceNormalization, Rejects) {
  const Tensor x = iota_f32({1, 2, 1, 3});
  EXPECT_THROWS_SAYING(run("InstanceNormalization", {x, f32({3}, {1, 1, 1}), f32({2}, {0, 0})}), InvalidArgument,
                       "node 'InstanceNormalization_0' (InstanceNormalization)",
                       "scale [3] must be [2] for input [1, 2, 1, 3]");
  EXPECT_THROWS_SAYING(run("InstanceNormalization", {iota_f32({2, 2}), f32({2}, {1, 1}), f32({2}, {0, 0})}),
                       InvalidArgument, "input [2, 2] must be [N, C, D1, ...], rank 3 or more");
}

TEST(MeanVarianceNormalization, DefaultAndGivenAxes) {
  expect_close(run("MeanVarianceNormalization", {f32({1, 2, 1, 2}, {1, 3, 2, 6})})[0],
               f32({1, 2, 1, 2}, {-1, 1, -1, 1}));
  expect_close(run("MeanVarianceNormalization", {f32({2, 2}, {1, 2, 3, 6})}, {{"axes", Ints{0}}})[0],
               f32({2, 2}, {-1, -1, 1, 1}));
  EXPECT_THROWS_SAYING(run("MeanVarianceNormalization", {f32({2, 2}, {1, 2, 3, 4})}), InvalidArgument,
                       "node 'MeanVarianceNormalization_0'", "axis 2 is out of range for input [2, 2]");
}

TEST(LpNormalization, L1AndL2AndZeroNorm) {
  expect_close(run("LpNormalization", {f32({2, 2}, {3, 4, 0, 0})})[0], f32({2, 2}, {0.6f, 0.8f, 0, 0}));
  expect_close(run("LpNormalization", {f32({2, 2}, {1, -2, 3, 2})}, {{"axis", std::int64_t{0}}, {"p", std::int64_t{1}}})[0],
               f32({2, 2}, {0.25f, -0.5f, 0.75f, 0.5f}));
  EXPECT_THROWS_SAYING(run("LpNormalization", {f32({2}, {1, 2})}, {{"p", std::int64_t{3}}}), Unsupported,
                       "node 'LpNormalization_0' (LpNormalization)", "p must be 1 or 2, got 3");
}

TEST(LRN, EvenSizeWindowAndEdges) {
  // size 2: channel c sums the squares of channels c and c + 1; alpha / size = 0.5.
  const auto r = run("LRN", {f32({1, 3, 1, 1}, {1, 2, 3})},
                     {{"size", std::int64_t{2}}, {"alpha", 1.0f}, {"beta", 1.0f}, {"bias", 1.0f}});
  expect_close(r[0], f32({1, 3, 1, 1}, {1 / 3.5f, 2 / 7.5f, 3 / 5.5f}));
  EXPECT_THROWS_SAYING(run("LRN", {f32({1, 3, 1, 1}, {1, 2, 3})}), Unsupported, "node 'LRN_0' (LRN)",
                       "size must be given and positive");
  EXPECT_THROWS_SAYING(run("LRN", {f32({1, 3}, {1, 2, 3})}, {{"size", std::int64_t{3}}}), InvalidArgument,
                       "X [1, 3] must be [N, C, D1, ...]");
}

}  // namespace
}  // namespace redwood
