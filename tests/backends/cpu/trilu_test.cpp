// Trilu beyond the ONNX node tests: float and bool inputs, a k far past the matrix, and the
// error paths.

#include "core/error.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <limits>

namespace redwood {
namespace {

using testing::expect_close;
using testing::f32;
using testing::i64;
using testing::Ints;
using testing::iota_f32;
using testing::make_spec;
using testing::run_node;

Tensor trilu(const Tensor& x, std::int64_t upper, Tensor k = {}) {
  return run_node(make_spec("Trilu", {x, k}, {{"upper", upper}})).at(0);
}

TEST(Trilu, FloatLowerAndUpperWithK) {
  // numpy: np.tril(np.arange(6).reshape(2, 3), -1) and np.triu(..., 1)
  expect_close(trilu(iota_f32({2, 3}), 0, Tensor::scalar<std::int64_t>(-1)), f32({2, 3}, {0, 0, 0, 3, 0, 0}));
  expect_close(trilu(iota_f32({2, 3}), 1, Tensor::scalar<std::int64_t>(1)), f32({2, 3}, {0, 1, 2, 0, 0, 5}));
}

TEST(Trilu, BoolAndExtremeK) {
  const Tensor x = Tensor::from_vector<bool>({2, 2}, {true, true, true, true});
  EXPECT_EQ(trilu(x, 1).to_int64_vector(), (Ints{1, 1, 0, 1}));
  const std::int64_t big = std::numeric_limits<std::int64_t>::max();
  EXPECT_EQ(trilu(x, 0, Tensor::scalar(big)).to_int64_vector(), (Ints{1, 1, 1, 1}));
  EXPECT_EQ(trilu(x, 1, Tensor::scalar(big)).to_int64_vector(), (Ints{0, 0, 0, 0}));
  EXPECT_EQ(trilu(x, 1, Tensor::scalar(-big)).to_int64_vector(), (Ints{1, 1, 1, 1}));
}

TEST(Trilu, Errors) {
  EXPECT_THROWS_SAYING(trilu(iota_f32({3}), 1), InvalidArgument, "node 'Trilu_0' (Trilu)", "rank 2 or more");
  EXPECT_THROWS_SAYING(trilu(iota_f32({2, 2}), 1, i64({1, 2})), InvalidArgument, "node 'Trilu_0'",
                       "k must hold one value");
  EXPECT_THROWS_SAYING(trilu(iota_f32({2, 2}), 1, Tensor::scalar<std::int32_t>(1)), Unsupported, "node 'Trilu_0'",
                       "k of type int32");
}

}  // namespace
}  // namespace redwood
