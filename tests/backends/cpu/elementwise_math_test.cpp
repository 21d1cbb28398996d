// Reference kernels of the unary math ops, the activations and Dropout: what ONNX's node tests
// leave out (integer types, Gelu and Mish, extreme values, broadcast slopes, Dropout's modes) and
// the errors, which name the node and the problem.

#include "core/error.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numbers>

namespace redwood {
namespace {

using testing::expect_close;
using testing::f32;
using testing::i64;
using testing::make_spec;
using testing::NodeSpec;
using testing::random_tensor;
using testing::run_node;

// The first output of one `op` node on `inputs` at `opset`.
Tensor run_op(const std::string& op, std::vector<Tensor> inputs,
              std::map<std::string, AttributeValue> attrs = {}, std::int64_t opset = 17) {
  NodeSpec spec = make_spec(op, std::move(inputs), std::move(attrs));
  spec.opset = opset;
  return run_node(spec).at(0);
}

Tensor run_unary(const std::string& op, const Tensor& x,
                 std::map<std::string, AttributeValue> attrs = {}, std::int64_t opset = 17) {
  return run_op(op, {x}, std::move(attrs), opset);
}

// Compares an op with `formula` (evaluated in double) on random inputs in [-8, 8), enough of
// them to run in parallel chunks.
template <typename Fn>
void expect_formula(const std::string& op, std::int64_t opset, Fn formula,
                    std::map<std::string, AttributeValue> attrs = {}) {
  const Tensor x = random_tensor(DType::kF32, {2, 3, 100, 120}, -8, 8, 11);
  std::vector<float> expected;
  for (float v : x.values<float>()) expected.push_back(static_cast<float>(formula(double{v})));
  expect_close(run_unary(op, x, std::move(attrs), opset), f32(x.shape(), std::move(expected)),
               1e-5, 1e-6);
}

TEST(ElementwiseMath, IntegerAbsNegSignWrapLikeNumpy) {
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  const Tensor x = i64({kMin, -7, 0, 5});
  EXPECT_EQ(run_unary("Abs", x).to_int64_vector(), (std::vector<std::int64_t>{kMin, 7, 0, 5}));
  EXPECT_EQ(run_unary("Neg", x).to_int64_vector(), (std::vector<std::int64_t>{kMin, 7, 0, -5}));
  EXPECT_EQ(run_unary("Sign", x).to_int64_vector(), (std::vector<std::int64_t>{-1, -1, 0, 1}));

  const Tensor x32 = Tensor::from_vector<std::int32_t>({3}, {-3, 0, 4});
  const Tensor neg = run_unary("Neg", x32);
  EXPECT_EQ(neg.dtype(), DType::kI32);
  EXPECT_EQ(neg.to_int64_vector(), (std::vector<std::int64_t>{3, 0, -4}));

  const Tensor u8 = Tensor::from_vector<std::uint8_t>({3}, {0, 1, 255});
  EXPECT_EQ(run_unary("Abs", u8).to_int64_vector(), (std::vector<std::int64_t>{0, 1, 255}));
  EXPECT_EQ(run_unary("Sign", u8).to_int64_vector(), (std::vector<std::int64_t>{0, 1, 1}));
}

TEST(ElementwiseMath, SignKeepsNaNAndRoundHalvesToEven) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor s = run_unary("Sign", f32({3}, {nan, -0.5f, 2}));
  EXPECT_TRUE(std::isnan(s.data<float>()[0]));
  expect_close(run_unary("Round", f32({6}, {0.5f, 1.5f, 2.5f, -2.5f, 2.6f, -1.4f})),
               f32({6}, {0, 2, 2, -2, 3, -1}));
}

TEST(ElementwiseMath, LogAndReciprocalOfZeroAndOutOfDomain) {
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor log = run_unary("Log", f32({2}, {0, -1}));
  EXPECT_EQ(log.data<float>()[0], -inf);
  EXPECT_TRUE(std::isnan(log.data<float>()[1]));
  EXPECT_EQ(run_unary("Reciprocal", f32({1}, {0})).data<float>()[0], inf);
  EXPECT_TRUE(std::isnan(run_unary("Acosh", f32({1}, {0.5f})).data<float>()[0]));
}

TEST(ElementwiseMath, PredicatesProduceBool) {
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor x = f32({4}, {inf, -inf, std::numeric_limits<float>::quiet_NaN(), 1});
  const Tensor both = run_unary("IsInf", x);
  EXPECT_EQ(both.dtype(), DType::kBool);
  EXPECT_EQ(both.to_int64_vector(), (std::vector<std::int64_t>{1, 1, 0, 0}));
  EXPECT_EQ(run_unary("IsInf", x, {{"detect_positive", std::int64_t{0}}}).to_int64_vector(),
            (std::vector<std::int64_t>{0, 1, 0, 0}));
  EXPECT_EQ(run_unary("IsNaN", x).to_int64_vector(), (std::vector<std::int64_t>{0, 0, 1, 0}));
  const Tensor b = Tensor::from_vector<bool>({2}, {true, false});
  EXPECT_EQ(run_unary("Not", b).to_int64_vector(), (std::vector<std::int64_t>{0, 1}));
}

TEST(ElementwiseMath, RejectsUnsupportedTypesAtLoad) {
  EXPECT_THROWS_SAYING(run_unary("Exp", i64({1})), Unsupported, "node 'Exp_0' (Exp)",
                       "input of type int64 is not supported");
  EXPECT_THROWS_SAYING(run_unary("Neg", Tensor::from_vector<std::uint8_t>({1}, {1})), Unsupported,
                       "node 'Neg_0' (Neg)", "uint8");
  EXPECT_THROWS_SAYING(run_unary("Not", f32({1}, {1})), Unsupported, "node 'Not_0' (Not)",
                       "supported: bool");
}

TEST(Activations, SoftplusAndMishDoNotOverflow) {
  const Tensor y = run_unary("Softplus", f32({3}, {100, -100, 0}));
  EXPECT_EQ(y.data<float>()[0], 100.0f);
  EXPECT_NEAR(y.data<float>()[1], std::exp(-100.0f), 1e-45);
  EXPECT_NEAR(y.data<float>()[2], std::log(2.0f), 1e-7);
  expect_close(run_unary("Mish", f32({2}, {100, -100}), {}, 18), f32({2}, {100, 0}));
}

TEST(Activations, MishMatchesFormula) {
  expect_formula("Mish", 18, [](double x) { return x * std::tanh(std::log1p(std::exp(x))); });
}

TEST(Activations, GeluExactAndTanhMatchFormulas) {
  expect_formula("Gelu", 20,
                 [](double x) { return 0.5 * x * (1 + std::erf(x / std::numbers::sqrt2)); });
  const double k = std::sqrt(2 / std::numbers::pi);
  expect_formula(
      "Gelu", 20,
      [k](double x) { return 0.5 * x * (1 + std::tanh(k * (x + 0.044715 * x * x * x))); },
      {{"approximate", std::string("tanh")}});
}

TEST(Activations, MalformedAttributesNameTheNode) {
  EXPECT_THROWS_SAYING(
      run_unary("Gelu", f32({1}, {1}), {{"approximate", std::string("fast")}}, 20), Error,
      "node 'Gelu_0' (Gelu)", "approximate must be \"none\" or \"tanh\", got \"fast\"");
  EXPECT_THROWS_SAYING(run_unary("Celu", f32({1}, {1}), {{"alpha", 0.0f}}), Error,
                       "node 'Celu_0' (Celu)", "alpha must not be 0");
  EXPECT_THROWS_SAYING(run_unary("Elu", i64({1})), Unsupported, "node 'Elu_0' (Elu)", "int64");
}

TEST(Activations, PReluSlopePerChannelAndInteger) {
  // X [1, 2, 2, 2], slope [2, 1, 1]: one slope per channel.
  const Tensor x = f32({1, 2, 2, 2}, {-1, 2, -3, 4, -1, 2, -3, 4});
  const Tensor slope = f32({2, 1, 1}, {0.5f, 2});
  expect_close(run_op("PRelu", {x, slope}),
               f32({1, 2, 2, 2}, {-0.5f, 2, -1.5f, 4, -2, 2, -6, 4}));

  const Tensor xi = Tensor::from_vector<std::int32_t>({3}, {-4, 0, 5});
  const Tensor si = Tensor::from_vector<std::int32_t>({1}, {3});
  EXPECT_EQ(run_op("PRelu", {xi, si}).to_int64_vector(),
            (std::vector<std::int64_t>{-12, 0, 5}));
}

TEST(Activations, PReluSlopeMustBroadcastToX) {
  // Multidirectional broadcasting would make [3] and [2, 1] a [2, 3]; PRelu's output is X's shape.
  EXPECT_THROWS_SAYING(run_op("PRelu", {f32({3}, {1, 2, 3}), f32({2, 1}, {1, 2})}),
                       InvalidArgument, "node 'PRelu_0' (PRelu)",
                       "slope of shape [2, 1] does not broadcast to X's shape [3]");
  EXPECT_THROWS_SAYING(run_op("PRelu", {f32({1}, {1}), i64({1})}), Error,
                       "node 'PRelu_0' (PRelu)", "X is float but slope is int64");
}

NodeSpec dropout(Tensor ratio, Tensor training, bool constant, std::size_t outputs = 1) {
  NodeSpec spec = make_spec("Dropout", {f32({2, 2}, {1, -2, 3, -4}), std::move(ratio),
                                        std::move(training)},
                            {{"seed", std::int64_t{3}}}, outputs);
  spec.constant = {false, constant, constant};
  return spec;
}

TEST(Dropout, InferenceIsIdentityWithTrueMask) {
  const auto out = run_node(dropout(Tensor::scalar<float>(0.5f), Tensor::scalar<bool>(false),
                                    true, 2));
  expect_close(out.at(0), f32({2, 2}, {1, -2, 3, -4}));
  EXPECT_EQ(out.at(1).dtype(), DType::kBool);
  EXPECT_EQ(out.at(1).to_int64_vector(), (std::vector<std::int64_t>{1, 1, 1, 1}));
  // Training with ratio 0 drops nothing.
  expect_close(
      run_node(dropout(Tensor::scalar<float>(0), Tensor::scalar<bool>(true), true)).at(0),
      f32({2, 2}, {1, -2, 3, -4}));
}

TEST(Dropout, MaskBeforeOpset10HasTheInputsType) {
  NodeSpec spec = make_spec("Dropout", {f32({3}, {1, 2, 3})}, {{"ratio", 0.3f}}, 2);
  spec.opset = 7;
  const auto out = run_node(spec);
  expect_close(out.at(1), f32({3}, {1, 1, 1}));
}

TEST(Dropout, TrainingModeIsUnsupported) {
  // Constant training_mode and ratio: refused at load.
  EXPECT_THROWS_SAYING(
      run_node(dropout(Tensor::scalar<float>(0.3f), Tensor::scalar<bool>(true), true)),
      Unsupported, "node 'Dropout_0' (Dropout)", "training-mode dropout");
  // training_mode fed at run time (ratio absent: 0.5): refused when the run sees it.
  EXPECT_THROWS_SAYING(run_node(dropout(Tensor(), Tensor::scalar<bool>(true), false)), Error,
                       "node 'Dropout_0' (Dropout)", "training-mode dropout", "ratio 0.5");
  NodeSpec old = make_spec("Dropout", {f32({1}, {1})});
  old.opset = 6;
  EXPECT_THROWS_SAYING(run_node(old), Unsupported, "training-mode dropout", "is_test 0");
  old.attributes["is_test"] = std::int64_t{1};
  expect_close(run_node(old).at(0), f32({1}, {1}));
}

TEST(Dropout, RatioOutsideItsRangeIsMalformed) {
  NodeSpec spec = make_spec("Dropout", {f32({1}, {1})}, {{"ratio", 1.0f}});
  spec.opset = 11;
  EXPECT_THROWS_SAYING(run_node(spec), Error, "node 'Dropout_0' (Dropout)",
                       "ratio must be in [0, 1), got 1");
}

}  // namespace
}  // namespace redwood
