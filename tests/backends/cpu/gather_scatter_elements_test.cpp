// GatherElements, ScatterElements and Scatter beyond the ONNX node tests: int32 indices, an index
// tensor smaller than the data, opset 18's max/min reductions and mul, other dtypes, and the errors.

#include "core/error.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

namespace redwood {
namespace {

using testing::expect_close;
using testing::f32;
using testing::i64;
using testing::Ints;
using testing::iota_f32;
using testing::make_spec;
using testing::NodeSpec;
using testing::run_node;

Tensor run(const std::string& op, std::vector<Tensor> inputs, std::map<std::string, AttributeValue> attrs,
           std::int64_t opset = 18) {
  NodeSpec spec = make_spec(op, std::move(inputs), std::move(attrs));
  spec.opset = opset;
  return run_node(spec).at(0);
}

TEST(GatherElements, Int32IndicesSmallerThanTheData) {
  // numpy: np.take_along_axis(np.arange(12).reshape(3, 4), [[3, 0], [-1, 1]], axis=1)
  const Tensor idx = Tensor::from_vector<std::int32_t>({2, 2}, {3, 0, -1, 1});
  expect_close(run("GatherElements", {iota_f32({3, 4}), idx}, {{"axis", std::int64_t{1}}}),
               f32({2, 2}, {3, 0, 7, 5}));
}

TEST(ScatterElements, Reductions) {
  const Tensor data = f32({1, 4}, {1, 2, 3, 4});
  const Tensor idx = i64({1, 3}, {1, 1, 3});
  const Tensor upd = f32({1, 3}, {5, -1, 0.5f});
  auto scatter = [&](const char* reduction) {
    return run("ScatterElements", {data, idx, upd}, {{"axis", std::int64_t{1}}, {"reduction", std::string(reduction)}});
  };
  expect_close(scatter("none"), f32({1, 4}, {1, -1, 3, 0.5f}));  // the last update wins
  expect_close(scatter("mul"), f32({1, 4}, {1, -10, 3, 2}));
  expect_close(scatter("max"), f32({1, 4}, {1, 5, 3, 4}));
  expect_close(scatter("min"), f32({1, 4}, {1, -1, 3, 0.5f}));
}

TEST(ScatterElements, Int64AddAndBoolCopy) {
  const Tensor y = run("ScatterElements", {i64({4}, {1, 2, 3, 4}), i64({2}, {0, 0}), i64({2}, {10, 20})},
                       {{"reduction", std::string("add")}});
  EXPECT_EQ(y.to_int64_vector(), (Ints{31, 2, 3, 4}));
  const Tensor b = run("Scatter", {Tensor::from_vector<bool>({3}, {false, false, false}), i64({1}, {2}),
                                   Tensor::from_vector<bool>({1}, {true})},
                       {}, 9);
  EXPECT_EQ(b.to_int64_vector(), (Ints{0, 0, 1}));
}

TEST(GatherScatterElements, Errors) {
  EXPECT_THROWS_SAYING(run("GatherElements", {iota_f32({2, 2}), i64({2, 1}, {0, 2})}, {{"axis", std::int64_t{1}}}),
                       InvalidArgument, "node 'GatherElements_0' (GatherElements)", "index 2 is out of range for axis 1");
  EXPECT_THROWS_SAYING(run("GatherElements", {iota_f32({2, 2}), i64({3, 1}, {0, 0, 0})}, {{"axis", std::int64_t{1}}}),
                       InvalidArgument, "node 'GatherElements_0'", "larger than data [2, 2] along axis 0");
  EXPECT_THROWS_SAYING(run("GatherElements", {iota_f32({2, 2}), i64({2}, {0, 0})}, {}), InvalidArgument,
                       "differ in rank");
  EXPECT_THROWS_SAYING(run("ScatterElements", {iota_f32({3}), i64({1}, {-4}), f32({1}, {1})}, {}), InvalidArgument,
                       "node 'ScatterElements_0' (ScatterElements)", "index -4 is out of range");
  EXPECT_THROWS_SAYING(run("ScatterElements", {iota_f32({3}), i64({1}, {0}), f32({2}, {1, 2})}, {}), InvalidArgument,
                       "node 'ScatterElements_0'", "updates [2] must have the shape of indices int64[1]");
  EXPECT_THROWS_SAYING(
      run("ScatterElements", {iota_f32({3}), i64({1}, {0}), f32({1}, {1})}, {{"reduction", std::string("max")}}, 16),
      Unsupported, "node 'ScatterElements_0'", "reduction 'max' needs opset 18, the model has 16");  // at load
  EXPECT_THROWS_SAYING(run("ScatterElements",
                           {Tensor::from_vector<bool>({1}, {false}), i64({1}, {0}), Tensor::from_vector<bool>({1}, {true})},
                           {{"reduction", std::string("add")}}),
                       Unsupported, "node 'ScatterElements_0'", "type bool is not supported");
}

}  // namespace
}  // namespace redwood
