// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss: hand-computed losses for each reduction
// with weight and ignore_index (a mean divides by the weights of the targets kept), int32 classes,
// SoftmaxCrossEntropyLoss against LogSoftmax followed by NegativeLogLikelihoodLoss, and the error
// paths (a class out of range names the node and the position).

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/error.hpp"
#include "support/test_support.hpp"

namespace redwood {
namespace {

using testing::expect_close;
using testing::f32;
using testing::i64;
using testing::make_spec;
using testing::random_tensor;
using testing::run_node;

using Attrs = std::map<std::string, AttributeValue>;

Tensor nll(std::vector<Tensor> inputs, Attrs attrs) {
  return run_node(make_spec("NegativeLogLikelihoodLoss", std::move(inputs), std::move(attrs)))
      .at(0);
}

TEST(NegativeLogLikelihoodLoss, ReductionsWithWeightAndIgnoreIndex) {
  const Tensor x = f32({3, 2}, {-1, -2, -3, -4, -5, -6});
  const Tensor target = i64({0, 1, 0});
  const Tensor weight = f32({2}, {2, 3});
  expect_close(nll({x, target}, {{"reduction", std::string("none")}}), f32({3}, {1, 4, 5}));
  expect_close(nll({x, target}, {{"reduction", std::string("sum")}}), f32({}, {10}));
  expect_close(nll({x, target}, {}), f32({}, {10.0f / 3}));  // mean by default
  expect_close(nll({x, target, weight}, {}), f32({}, {(2 + 12 + 10) / 7.0f}));
  // Class 1 ignored: its loss and its weight drop out of the mean.
  const Attrs ignore_1{{"ignore_index", std::int64_t{1}}};
  expect_close(nll({x, target, weight}, ignore_1), f32({}, {12.0f / 4}));
  expect_close(nll({x, target}, ignore_1), f32({}, {6.0f / 2}));
  expect_close(nll({x, target, weight},
                   {{"ignore_index", std::int64_t{1}}, {"reduction", std::string("none")}}),
               f32({3}, {2, 0, 10}));
}

TEST(NegativeLogLikelihoodLoss, EveryTargetIgnoredGivesNaN) {
  const Tensor loss =
      nll({f32({2, 2}, {-1, -2, -3, -4}), i64({-1, -1})}, {{"ignore_index", std::int64_t{-1}}});
  EXPECT_TRUE(std::isnan(loss.data<float>()[0]));
}

TEST(NegativeLogLikelihoodLoss, Int32ClassesOverExtraAxes) {
  // input [1, 3, 2], target [1, 2]: position d picks input[0, target[d], d].
  const Tensor x = f32({1, 3, 2}, {-1, -2, -3, -4, -5, -6});
  const Tensor target = Tensor::from_vector<std::int32_t>({1, 2}, {2, 0});
  expect_close(nll({x, target}, {{"reduction", std::string("none")}}), f32({1, 2}, {5, 2}));
}

TEST(SoftmaxCrossEntropyLoss, IsLogSoftmaxThenNegativeLogLikelihood) {
  const Tensor x = random_tensor(DType::kF32, {3, 4, 5}, -3, 3, 7);
  const Tensor target = i64({3, 5}, {0, 1, 2, 3, 1, 3, 2, 1, 0, 0, 2, 2, 1, 3, 3});
  const Tensor weight = f32({4}, {0.5f, 1, 2, 0.25f});
  const Tensor log_prob = run_node(make_spec("LogSoftmax", {x}, {{"axis", std::int64_t{1}}})).at(0);
  const Attrs attrs{{"ignore_index", std::int64_t{2}}};
  const std::vector<Tensor> sce =
      run_node(make_spec("SoftmaxCrossEntropyLoss", {x, target, weight}, attrs, 2));
  expect_close(sce.at(1), log_prob);
  expect_close(sce.at(0), nll({log_prob, target, weight}, attrs));
  // Opset 12 (the first), one output.
  auto spec =
      make_spec("SoftmaxCrossEntropyLoss", {x, target}, {{"reduction", std::string("sum")}});
  spec.opset = 12;
  expect_close(run_node(spec).at(0), nll({log_prob, target}, {{"reduction", std::string("sum")}}));
}

TEST(Losses, Reject) {
  const Tensor x = f32({2, 3}, {-1, -2, -3, -4, -5, -6});
  EXPECT_THROWS_SAYING(nll({x, i64({0, 3})}, {}), InvalidArgument,
                       "node 'NegativeLogLikelihoodLoss_0' (NegativeLogLikelihoodLoss)",
                       "target 3 at position 1 is outside [0, 3)");
  EXPECT_THROWS_SAYING(nll({x, i64({-1, 0})}, {{"ignore_index", std::int64_t{5}}}), InvalidArgument,
                       "target -1 at position 0");
  // Found at load, where the executor reports it as Unsupported.
  EXPECT_THROWS_SAYING(nll({x, i64({0, 1})}, {{"reduction", std::string("avg")}}), Unsupported,
                       "reduction 'avg' is not one of none, sum, mean");
  EXPECT_THROWS_SAYING(nll({x, i64({0, 1, 2})}, {}), InvalidArgument,
                       "target [3] does not match input [2, 3]");
  EXPECT_THROWS_SAYING(nll({x, i64({0, 1}), f32({2}, {1, 1})}, {}), InvalidArgument,
                       "weight [2] must be [C] = [3]");
  EXPECT_THROWS_SAYING(nll({f32({3}, {1, 2, 3}), i64({0})}, {}), InvalidArgument, "[N, C]");
  EXPECT_THROWS_SAYING(nll({x.cast(DType::kF16), i64({0, 1})}, {}), Unsupported, "float16");
  EXPECT_THROWS_SAYING(run_node(make_spec("SoftmaxCrossEntropyLoss", {x, x}, {})), Unsupported,
                       "node 'SoftmaxCrossEntropyLoss_0' (SoftmaxCrossEntropyLoss)",
                       "labels of type float");
}

}  // namespace
}  // namespace redwood
