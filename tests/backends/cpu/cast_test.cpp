// Cast: every target type Redwood holds, float truncation to integers, bool, float16/bfloat16
// bits (bfloat16 as ONNX 1.12 defines it: truncation), and rejected targets.

#include "core/error.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace redwood {
namespace {

using testing::expect_close;
using testing::NodeSpec;
using testing::make_spec;
using testing::run_node;

// ONNX TensorProto.DataType codes.
constexpr std::int64_t kFloat = 1, kUint8 = 2, kInt8 = 3, kInt32 = 6, kInt64 = 7, kString = 8,
                       kBool = 9, kFloat16 = 10, kDouble = 11, kBFloat16 = 16;

Tensor cast(const Tensor& x, std::int64_t to) {
  return run_node(make_spec("Cast", {x}, {{"to", to}})).at(0);
}

TEST(Cast, FloatToIntegersTruncatesTowardZero) {
  const Tensor x = Tensor::from_vector<float>({5}, {-2.7f, -0.5f, 0.5f, 2.7f, 100.0f});
  const Tensor a = cast(x, kInt64);
  EXPECT_EQ(a.dtype(), DType::kI64);
  EXPECT_EQ(a.to_int64_vector(), (std::vector<std::int64_t>{-2, 0, 0, 2, 100}));
  const Tensor b = cast(x, kInt32);
  EXPECT_EQ(b.dtype(), DType::kI32);
  EXPECT_EQ(b.to_int64_vector(), (std::vector<std::int64_t>{-2, 0, 0, 2, 100}));
  const Tensor c = cast(Tensor::from_vector<float>({2}, {3.9f, 255.0f}), kUint8);
  EXPECT_EQ(c.dtype(), DType::kU8);
  EXPECT_EQ(c.to_int64_vector(), (std::vector<std::int64_t>{3, 255}));
}

TEST(Cast, ToAndFromBool) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor b = cast(Tensor::from_vector<float>({4}, {0.0f, -0.0f, 0.1f, nan}), kBool);
  EXPECT_EQ(b.dtype(), DType::kBool);
  EXPECT_EQ(b.to_int64_vector(), (std::vector<std::int64_t>{0, 0, 1, 1}));
  expect_close(cast(Tensor::from_vector<bool>({2}, {true, false}), kFloat),
               Tensor::from_vector<float>({2}, {1, 0}));
  EXPECT_EQ(cast(Tensor::from_vector<std::int64_t>({3}, {0, 5, -1}), kBool).to_int64_vector(),
            (std::vector<std::int64_t>{0, 1, 1}));
}

TEST(Cast, Int64ToFloatAndInt32KeepValues) {
  const Tensor x = Tensor::from_vector<std::int64_t>({3}, {-3, 0, 1 << 20});
  expect_close(cast(x, kFloat), Tensor::from_vector<float>({3}, {-3, 0, 1 << 20}));
  EXPECT_EQ(cast(x, kInt32).to_int64_vector(), (std::vector<std::int64_t>{-3, 0, 1 << 20}));
}

TEST(Cast, Float16RoundTrip) {
  const Tensor x = Tensor::from_vector<float>({4}, {0.5488135f, 1.0f, -65504.0f, 1e-8f});
  const Tensor h = cast(x, kFloat16);
  ASSERT_EQ(h.dtype(), DType::kF16);
  // 0.5488135 -> 0.549 (bits 0x3864): nearest half.
  EXPECT_EQ(h.data<Half>()[0].bits, 0x3864);
  EXPECT_EQ(h.data<Half>()[1].bits, 0x3c00);
  EXPECT_EQ(h.data<Half>()[2].bits, 0xfbff);
  const Tensor back = cast(h, kFloat);
  EXPECT_EQ(back.data<float>()[1], 1.0f);
  EXPECT_EQ(back.data<float>()[2], -65504.0f);
  EXPECT_NEAR(back.data<float>()[0], 0.5488135f, 1e-3);
}

TEST(Cast, FloatToBFloat16TruncatesLikeOnnx112) {
  // Inputs and expected bits from ONNX 1.12's test_cast_FLOAT_to_BFLOAT16.
  const std::vector<float> in{0.47892547f, 0.48033667f, 0.49968487f, 0.81910545f,
                              0.47031248f, 0.816468f,   0.21087195f, 0.7229038f};
  const std::vector<std::uint16_t> expected{16117, 16117, 16127, 16209, 16112, 16209, 15959, 16185};
  const Tensor y = cast(Tensor::from_vector<float>({8}, in), kBFloat16);
  ASSERT_EQ(y.dtype(), DType::kBF16);
  for (std::size_t i = 0; i < in.size(); ++i)
    EXPECT_EQ(y.data<BFloat16>()[i].bits, expected[i]) << i;
  // NaN stays NaN, infinities stay.
  const Tensor s = cast(Tensor::from_vector<float>({2}, {std::numeric_limits<float>::quiet_NaN(),
                                                         -std::numeric_limits<float>::infinity()}),
                        kBFloat16);
  EXPECT_TRUE(std::isnan(bf16_to_float(s.data<BFloat16>()[0])));
  EXPECT_EQ(s.data<BFloat16>()[1].bits, 0xff80);
  // And back: exact.
  expect_close(cast(y, kFloat),
               Tensor::from_vector<float>({8},
                                          [&] {
                                            std::vector<float> v;
                                            for (auto b : expected)
                                              v.push_back(bf16_to_float(BFloat16{b}));
                                            return v;
                                          }()),
               0, 0);
}

TEST(Cast, SameTypeIsTheInput) {
  const Tensor x = Tensor::from_vector<std::int32_t>({2}, {1, 2});
  NodeSpec spec = make_spec("Cast", {x}, {{"to", kInt32}});
  spec.constant = {true};
  EXPECT_EQ(run_node(spec).at(0).raw_data(), x.raw_data());
}

TEST(Cast, UnsupportedTargetsAreRejectedAtLoadNamingTheType) {
  for (std::int64_t to : {kDouble, kString, kInt8}) {
    try {
      cast(Tensor::from_vector<float>({1}, {1}), to);
      ADD_FAILURE() << "cast to " << to << " was accepted";
    } catch (const Unsupported& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(std::string(onnx_type_name(static_cast<int>(to)))), std::string::npos)
          << msg;
    }
  }
}

}  // namespace
}  // namespace redwood
