// Transpose: the default (reversed) permutation, every permutation of a 3-d tensor against an
// index loop, non-float dtypes, and invalid perms.

#include "core/error.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

namespace redwood {
namespace {

using testing::iota_f32;
using testing::expect_close;
using testing::NodeSpec;
using testing::make_spec;
using testing::run_node;

TEST(Transpose, DefaultReversesTheDimensions) {
  const Tensor y = run_node(make_spec("Transpose", {iota_f32({2, 3})})).at(0);
  expect_close(y, Tensor::from_vector<float>({3, 2}, {0, 3, 1, 4, 2, 5}));
}

TEST(Transpose, AllPermutationsOf3dMatchIndexLoop) {
  const Shape shape{2, 3, 4};
  const Tensor x = iota_f32(shape);
  std::vector<std::int64_t> perm{0, 1, 2};
  do {
    const Tensor y = run_node(make_spec("Transpose", {x}, {{"perm", perm}})).at(0);
    const Shape out{shape[perm[0]], shape[perm[1]], shape[perm[2]]};
    ASSERT_EQ(y.shape(), out);
    const Strides in_strides = contiguous_strides(shape);
    std::int64_t flat = 0;
    for (std::int64_t i = 0; i < out[0]; ++i)
      for (std::int64_t j = 0; j < out[1]; ++j)
        for (std::int64_t k = 0; k < out[2]; ++k) {
          const std::int64_t src =
              i * in_strides[perm[0]] + j * in_strides[perm[1]] + k * in_strides[perm[2]];
          ASSERT_EQ(y.get_as_double(flat++), static_cast<double>(src));
        }
  } while (std::next_permutation(perm.begin(), perm.end()));
}

TEST(Transpose, NchwToNhwcInt64AndHalf) {
  const Tensor x = iota_f32({1, 2, 2, 3}).cast(DType::kI64);
  const Tensor y =
      run_node(make_spec("Transpose", {x}, {{"perm", std::vector<std::int64_t>{0, 2, 3, 1}}}))
          .at(0);
  EXPECT_EQ(y.dtype(), DType::kI64);
  EXPECT_EQ(y.to_int64_vector(), (std::vector<std::int64_t>{0, 6, 1, 7, 2, 8, 3, 9, 4, 10, 5, 11}));
  const Tensor h = run_node(make_spec("Transpose", {iota_f32({2, 2}).cast(DType::kF16)})).at(0);
  EXPECT_EQ(h.to_float_vector(), (std::vector<float>{0, 2, 1, 3}));
}

TEST(Transpose, LargeTensorTakesParallelPath) {
  const Tensor x = iota_f32({1, 16, 80, 80});
  const Tensor y =
      run_node(make_spec("Transpose", {x}, {{"perm", std::vector<std::int64_t>{0, 2, 3, 1}}}))
          .at(0);
  ASSERT_EQ(y.shape(), (Shape{1, 80, 80, 16}));
  // y[0, h, w, c] == x[0, c, h, w]
  for (std::int64_t h : {0, 17, 79})
    for (std::int64_t w : {0, 41, 79})
      for (std::int64_t c : {0, 5, 15}) {
        EXPECT_EQ(y.get_as_double((h * 80 + w) * 16 + c),
                  static_cast<double>((c * 80 + h) * 80 + w));
      }
}

TEST(Transpose, InvalidPerms) {
  EXPECT_THROW(run_node(make_spec("Transpose", {iota_f32({2, 3})},
                                  {{"perm", std::vector<std::int64_t>{0, 0}}})),
               Unsupported);  // rejected at load
  EXPECT_THROW(run_node(make_spec("Transpose", {iota_f32({2, 3})},
                                  {{"perm", std::vector<std::int64_t>{1, 0, 2}}})),
               InvalidArgument);  // rank mismatch at run
}

}  // namespace
}  // namespace redwood
