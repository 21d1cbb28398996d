// GatherND and ScatterND beyond the ONNX node tests: negative coordinates, batch_dims with float
// data and whole-slice tuples, ScatterND's max (opset 18) and duplicate adds, and the errors.

#include "core/error.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

namespace redwood {
namespace {

using testing::expect_close;
using testing::f32;
using testing::i64;
using testing::iota_f32;
using testing::make_spec;
using testing::NodeSpec;
using testing::run_node;

Tensor run(const std::string& op, std::vector<Tensor> inputs, std::map<std::string, AttributeValue> attrs = {}) {
  NodeSpec spec = make_spec(op, std::move(inputs), std::move(attrs));
  spec.opset = 18;
  return run_node(spec).at(0);
}

TEST(GatherND, NegativeCoordinatesAndBatchDims) {
  // data [[0, 1], [2, 3]]: the tuple (-1, 0) is element 2; the tuple (-2,) the row [0, 1].
  expect_close(run("GatherND", {iota_f32({2, 2}), i64({1, 2}, {-1, 0})}), f32({1}, {2}));
  expect_close(run("GatherND", {iota_f32({2, 2}), i64({1, 1}, {-2})}), f32({1, 2}, {0, 1}));
  // batch_dims 1: batch b picks row indices[b] of data[b] (data [2, 3, 2]).
  expect_close(run("GatherND", {iota_f32({2, 3, 2}), i64({2, 1}, {2, 0})}, {{"batch_dims", std::int64_t{1}}}),
               f32({2, 2}, {4, 5, 6, 7}));
}

TEST(ScatterND, MaxAndDuplicateAdds) {
  const Tensor data = f32({2, 2}, {1, 5, 3, 4});
  const Tensor idx = i64({2, 1}, {0, 0});
  const Tensor upd = f32({2, 2}, {2, 2, 4, 1});
  expect_close(run("ScatterND", {data, idx, upd}, {{"reduction", std::string("max")}}), f32({2, 2}, {4, 5, 3, 4}));
  expect_close(run("ScatterND", {data, idx, upd}, {{"reduction", std::string("add")}}), f32({2, 2}, {7, 8, 3, 4}));
  expect_close(run("ScatterND", {data, i64({1, 2}, {-1, 1}), f32({1}, {9})}), f32({2, 2}, {1, 5, 3, 9}));
}

TEST(GatherScatterND, Errors) {
  EXPECT_THROWS_SAYING(run("GatherND", {iota_f32({2, 2}), i64({1, 2}, {0, 2})}), InvalidArgument,
                       "node 'GatherND_0' (GatherND)", "index 2 is out of range for axis 1");
  EXPECT_THROWS_SAYING(run("GatherND", {iota_f32({2, 2}), i64({1, 3}, {0, 0, 0})}), InvalidArgument,
                       "node 'GatherND_0'", "tuples of 3 coordinates do not fit data [2, 2]");
  EXPECT_THROWS_SAYING(run("GatherND", {iota_f32({2, 2}), i64({3, 1}, {0, 0, 0})}, {{"batch_dims", std::int64_t{1}}}),
                       InvalidArgument, "node 'GatherND_0'", "batch dimensions of indices int64[3, 1] and data [2, 2] differ");
  EXPECT_THROWS_SAYING(run("ScatterND", {iota_f32({2, 2}), i64({1, 1}, {0}), f32({1, 3}, {1, 2, 3})}), InvalidArgument,
                       "node 'ScatterND_0' (ScatterND)", "updates [1, 3] must be [1, 2]");
  EXPECT_THROWS_SAYING(run("ScatterND", {iota_f32({2}), i64({1, 1}, {0}), i64({1}, {1})}), InvalidArgument,
                       "node 'ScatterND_0'", "updates int64[1] and data float[2] differ in type");
  EXPECT_THROWS_SAYING(run("ScatterND", {iota_f32({2}), i64({1, 1}, {-3}), f32({1}, {1})}), InvalidArgument,
                       "node 'ScatterND_0'", "index -3 is out of range for axis 0");
}

}  // namespace
}  // namespace redwood
