// ArgMax, ArgMin and TopK: what the ONNX node tests leave out: integer types, ties, NaN, TopK's
// k attribute of opset 1 and k = 0, and the error paths.

#include "core/error.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

namespace redwood {
namespace {

using testing::expect_close;
using testing::f32;
using testing::i64;
using testing::Ints;
using testing::make_spec;
using testing::NodeSpec;
using testing::run_node;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<Tensor> run(const std::string& op, std::vector<Tensor> inputs,
                        std::map<std::string, AttributeValue> attrs, std::int64_t opset = 13,
                        std::size_t outputs = 1) {
  NodeSpec spec = make_spec(op, std::move(inputs), std::move(attrs), outputs);
  spec.opset = opset;
  return run_node(spec);
}

std::vector<Tensor> top_k(const Tensor& x, std::int64_t k, std::map<std::string, AttributeValue> attrs = {}) {
  return run("TopK", {x, i64({k})}, std::move(attrs), 11, 2);
}

TEST(ArgMax, IntegersTiesAndNaN) {
  const Tensor x = Tensor::from_vector<std::int32_t>({2, 3}, {4, 9, 9, 7, 7, 1});
  EXPECT_EQ(run("ArgMax", {x}, {{"axis", std::int64_t{1}}})[0].to_int64_vector(), (Ints{1, 0}));
  EXPECT_EQ(run("ArgMax", {x}, {{"axis", std::int64_t{1}}, {"select_last_index", std::int64_t{1}}})[0].to_int64_vector(),
            (Ints{2, 1}));
  const Tensor r = run("ArgMin", {x}, {{"axis", std::int64_t{-1}}, {"keepdims", std::int64_t{0}}})[0];
  EXPECT_EQ(r.dtype(), DType::kI64);
  EXPECT_EQ(shape_str(r.shape()), "[2]");
  EXPECT_EQ(r.to_int64_vector(), (Ints{0, 2}));
  // The first NaN is both the maximum and the minimum, as in numpy.
  const Tensor n = f32({4}, {1, kNaN, 5, kNaN});
  EXPECT_EQ(run("ArgMax", {n}, {})[0].to_int64_vector(), (Ints{1}));
  EXPECT_EQ(run("ArgMin", {n}, {})[0].to_int64_vector(), (Ints{1}));
}

TEST(ArgMax, Rejects) {
  EXPECT_THROWS_SAYING(run("ArgMax", {f32({2, 2}, {1, 2, 3, 4})}, {{"axis", std::int64_t{2}}}), InvalidArgument,
                       "node 'ArgMax_0' (ArgMax)", "axis 2 is out of range for input [2, 2]");
  EXPECT_THROWS_SAYING(run("ArgMin", {Tensor::empty(DType::kF32, {0, 2})}, {}), InvalidArgument, "node 'ArgMin_0'",
                       "axis 0 of data [0, 2] is empty");
}

TEST(TopK, TiesComeInIndexOrder) {
  const Tensor x = f32({1, 5}, {3, 1, 3, 2, 1});
  auto largest = top_k(x, 3);
  expect_close(largest[0], f32({1, 3}, {3, 3, 2}));
  EXPECT_EQ(largest[1].to_int64_vector(), (Ints{0, 2, 3}));
  auto smallest = top_k(x, 3, {{"largest", std::int64_t{0}}});
  expect_close(smallest[0], f32({1, 3}, {1, 1, 2}));
  EXPECT_EQ(smallest[1].to_int64_vector(), (Ints{1, 4, 3}));
}

TEST(TopK, AlongAnOuterAxisWithIntegersAndNaN) {
  const Tensor x = i64({3, 2}, {5, 0, 9, 7, 1, 8});
  auto r = top_k(x, 2, {{"axis", std::int64_t{0}}});
  EXPECT_EQ(r[0].to_int64_vector(), (Ints{9, 8, 5, 7}));
  EXPECT_EQ(r[1].to_int64_vector(), (Ints{1, 2, 0, 1}));
  // NaN ranks above every number.
  auto n = top_k(f32({3}, {1, kNaN, 2}), 2);
  EXPECT_TRUE(std::isnan(n[0].data<float>()[0]));
  EXPECT_EQ(n[1].to_int64_vector(), (Ints{1, 2}));
}

TEST(TopK, KAttributeBeforeOpset10AndKZero) {
  auto r = run("TopK", {f32({4}, {1, 4, 2, 3})}, {{"k", std::int64_t{2}}}, 1, 2);
  expect_close(r[0], f32({2}, {4, 3}));
  EXPECT_EQ(r[1].to_int64_vector(), (Ints{1, 3}));
  auto none = top_k(f32({2, 3}, {1, 2, 3, 4, 5, 6}), 0);
  EXPECT_EQ(shape_str(none[0].shape()), "[2, 0]");
  EXPECT_EQ(shape_str(none[1].shape()), "[2, 0]");
}

TEST(TopK, Rejects) {
  const Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_THROWS_SAYING(top_k(x, 4), InvalidArgument, "node 'TopK_0' (TopK)", "k = 4 is out of range for axis 1");
  EXPECT_THROWS_SAYING(top_k(x, 1, {{"axis", std::int64_t{-3}}}), InvalidArgument, "axis -3 is out of range");
  EXPECT_THROWS_SAYING(run("TopK", {x, i64({1, 2})}, {}, 11, 2), InvalidArgument, "K int64[2] must be one int64 value");
  // Load-time refusals reach the caller as the executor's Unsupported, naming the node.
  EXPECT_THROWS_SAYING(run("TopK", {x}, {}, 1, 2), Unsupported, "node 'TopK_0' (TopK)",
                       "needs a non-negative attribute k");
}

}  // namespace
}  // namespace redwood
