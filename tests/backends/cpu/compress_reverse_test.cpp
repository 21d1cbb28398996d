// Compress and ReverseSequence beyond the ONNX node tests: all-false and integer conditions, a
// condition longer than the axis, a 3-D ReverseSequence with zero lengths, and the errors.

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
using testing::run_node;

Tensor bools(std::vector<bool> v) {
  return Tensor::from_vector<bool>({static_cast<std::int64_t>(v.size())}, v);
}
Tensor compress(const Tensor& x, const Tensor& condition, std::map<std::string, AttributeValue> attrs = {}) {
  return run_node(make_spec("Compress", {x, condition}, std::move(attrs))).at(0);
}

TEST(Compress, AllFalseInt64AndLongerFalseCondition) {
  EXPECT_EQ(compress(iota_f32({2, 3}), bools({false, false}), {{"axis", std::int64_t{0}}}).shape(), (Shape{0, 3}));
  const Tensor y = compress(i64({2, 2}, {1, 2, 3, 4}), bools({false, true, false}), {{"axis", std::int64_t{1}}});
  EXPECT_EQ(y.shape(), (Shape{2, 1}));
  EXPECT_EQ(y.to_int64_vector(), (Ints{2, 4}));
}

TEST(ReverseSequence, ThreeDimensionsAndZeroLength) {
  // time_axis 0, batch_axis 1: batch 0 reverses its first 3 steps, batch 1 none.
  const Tensor x = iota_f32({3, 2, 2});
  const Tensor y = run_node(make_spec("ReverseSequence", {x, i64({3, 0})})).at(0);
  expect_close(y, f32({3, 2, 2}, {8, 9, 2, 3, 4, 5, 6, 7, 0, 1, 10, 11}));
}

TEST(CompressReverseSequence, Errors) {
  EXPECT_THROWS_SAYING(compress(iota_f32({2}), bools({false, false, true}), {{"axis", std::int64_t{0}}}),
                       InvalidArgument, "node 'Compress_0' (Compress)", "condition is true at 2, past the extent 2");
  EXPECT_THROWS_SAYING(compress(iota_f32({2}), bools({true}), {{"axis", std::int64_t{1}}}), InvalidArgument,
                       "node 'Compress_0'", "axis 1 is out of range for rank 1");
  EXPECT_THROWS_SAYING(compress(iota_f32({2}), i64({1})), Unsupported, "node 'Compress_0'", "condition");
  auto reverse = [](const Tensor& lens) { return run_node(make_spec("ReverseSequence", {iota_f32({3, 2}), lens})); };
  EXPECT_THROWS_SAYING(reverse(i64({4, 1})), InvalidArgument, "node 'ReverseSequence_0' (ReverseSequence)",
                       "sequence length 4 is outside [0, 3]");
  EXPECT_THROWS_SAYING(reverse(i64({1})), InvalidArgument, "sequence_lens must be int64[2]");
  EXPECT_THROWS_SAYING(run_node(make_spec("ReverseSequence", {iota_f32({3, 2}), i64({1, 1})},
                                          {{"batch_axis", std::int64_t{0}}, {"time_axis", std::int64_t{0}}})),
                       Unsupported, "batch_axis 0 and time_axis 0 must be 0 and 1");
}

}  // namespace
}  // namespace redwood
