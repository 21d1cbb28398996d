// MatMul and Gemm on the GPU at every precision against the reference kernels: exact fp32 on CUDA
// cores (relative L2 ≤ 1e-4 and element-wise), tf32 ≤ 1e-3, fp16/bf16 ≤ 1e-2 on the tensor cores.
// Odd extents (edge tiles, the 4-byte staging path), extents that take the 16-byte path, numpy
// batch broadcasting, vectors, transA/transB, Gemm's alpha/beta/C, and the fused epilogue. K is
// over 16 in each case (K ≤ 16 computes exactly at every precision, tested below). Products of at
// most 8 rows take the matrix-vector kernel, exact at every precision (below; gemv_test.cpp has
// the rest).

#include "gpu_test_support.hpp"
#include "provider_run.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

namespace redwood::cuda {
namespace {

using Attrs = std::map<std::string, AttributeValue>;

struct MatCase {
  std::string name;
  std::string op;
  std::vector<Tensor> inputs;
  Attrs attributes;
};

Tensor r(Shape s, std::uint32_t seed, double lo = -1, double hi = 1) {
  return redwood::testing::random_tensor(DType::kF32, std::move(s), lo, hi, seed);
}
Attrs act(const std::string& a, float alpha = 0, float beta = 0) {
  return {{"rw.activation", a}, {"rw.alpha", alpha}, {"rw.beta", beta}};
}

std::vector<MatCase> cases() {
  const Tensor none;
  std::vector<MatCase> c;
  c.push_back({"matmul_odd_batched", "MatMul", {r({2, 3, 20, 33}, 1), r({33, 17}, 2)}, {}});
  c.push_back({"matmul_aligned_batches", "MatMul", {r({4, 37, 64}, 3), r({4, 64, 72}, 4)}, {}});
  c.push_back({"matmul_many_tiles", "MatMul", {r({1, 130, 256}, 5), r({256, 200}, 6)}, {}});
  c.push_back({"matmul_broadcast_both", "MatMul", {r({2, 1, 9, 20}, 7), r({1, 3, 20, 10}, 8)}, {}});
  c.push_back({"matmul_broadcast_inner", "MatMul", {r({5, 16, 24}, 9), r({2, 1, 24, 24}, 10)}, {}});
  c.push_back({"matmul_vector_left", "MatMul", {r({20}, 11), r({3, 20, 4}, 12)}, {}});
  c.push_back({"matmul_vector_right", "MatMul", {r({3, 5, 36}, 13), r({36}, 14)}, {}});
  c.push_back({"matmul_bias_relu", "MatMul", {r({5, 40}, 15), r({40, 70}, 16), r({70}, 17)}, act("Relu")});
  c.push_back({"matmul_bias_residual_hardswish", "MatMul",
               {r({2, 33, 48}, 18), r({48, 96}, 19), r({96}, 20), r({2, 33, 96}, 21)}, act("HardSwish")});
  c.push_back({"matmul_residual_only_clip", "MatMul", {r({7, 21}, 22), r({21, 9}, 23), none, r({7, 9}, 24)},
               act("Clip", -0.5f, 0.5f)});
  c.push_back({"gemm_transB_bias", "Gemm", {r({3, 100}, 30), r({65, 100}, 31), r({65}, 32)},
               {{"transB", std::int64_t{1}}, {"alpha", 0.5f}, {"beta", 2.0f}}});
  c.push_back({"gemm_transA_column_c", "Gemm", {r({19, 4}, 33), r({19, 6}, 34), r({4, 1}, 35)},
               {{"transA", std::int64_t{1}}}});
  c.push_back({"gemm_transA_transB_scalar_c", "Gemm", {r({40, 70}, 36), r({50, 40}, 37), r({}, 38)},
               {{"transA", std::int64_t{1}}, {"transB", std::int64_t{1}}, {"beta", 0.5f}}});
  c.push_back({"gemm_fc_transB_residual_sigmoid", "Gemm",
               {r({128, 512}, 39), r({256, 512}, 40), r({256}, 41), r({128, 256}, 42)},
               [] {
                 Attrs a = act("Sigmoid");
                 a["transB"] = std::int64_t{1};
                 return a;
               }()});
  c.push_back({"gemm_unaligned_full_c_leaky", "Gemm", {r({33, 70}, 43), r({70, 45}, 44), r({33, 45}, 45)},
               [] {
                 Attrs a = act("LeakyRelu", 0.1f);
                 a["alpha"] = 1.5f;
                 return a;
               }()});
  c.push_back({"gemv_rows1_fc_transB", "Gemm", {r({1, 512}, 46), r({300, 512}, 47, -0.1, 0.1), r({300}, 48)},
               {{"transB", std::int64_t{1}}}});
  c.push_back({"gemv_rows8_bias_residual_relu", "MatMul",
               {r({8, 100}, 49), r({100, 50}, 60), r({50}, 61), r({8, 50}, 62)}, act("Relu")});
  return c;
}

struct Param {
  MatCase c;
  Precision precision;
};
void PrintTo(const Param& p, std::ostream* os) { *os << p.c.name << "_" << precision_name(p.precision); }

std::vector<Param> params() {
  std::vector<Param> out;
  for (const MatCase& c : cases()) {
    for (Precision p : {Precision::kFp32, Precision::kTf32, Precision::kFp16, Precision::kBf16}) out.push_back({c, p});
  }
  return out;
}

class MatMulOnGpu : public ::testing::TestWithParam<Param> {};

TEST_P(MatMulOnGpu, AgreesWithTheReferenceWithinThePrecisionsBound) {
  RW_SKIP_WITHOUT_GPU();
  const Param& p = GetParam();
  const Tensor want = testing::run_with_provider(p.c.op, p.c.inputs, p.c.attributes, Device::kCpu, kReferenceProvider,
                                                 Precision::kFp32)
                          .at(0);
  const Tensor got =
      testing::run_with_provider(p.c.op, p.c.inputs, p.c.attributes, Device::kCuda, kCudaProvider, p.precision).at(0);
  ASSERT_EQ(got.shape(), want.shape());
  const double err = testing::relative_l2(got, want);
  std::printf("%s at %s: relative L2 %.2e\n", p.c.name.c_str(), std::string(precision_name(p.precision)).c_str(), err);
  EXPECT_LE(err, testing::tolerance(p.precision)) << p.c.name << " at " << precision_name(p.precision);
  if (p.precision == Precision::kFp32) redwood::testing::expect_close(got, want, 1e-4, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Matrices, MatMulOnGpu, ::testing::ValuesIn(params()), [](const auto& info) {
  return info.param.c.name + "_" + std::string(precision_name(info.param.precision));
});

// The precision reaches the kernel: the tensor-core results are not the exact fp32 ones (and
// fp16 and bf16 round differently), but each is close.
TEST(MatMulPrecision, ReducedPrecisionsRunOnTheTensorCores) {
  RW_SKIP_WITHOUT_GPU();
  const std::vector<Tensor> in = {r({64, 256}, 50), r({256, 64}, 51)};
  auto at = [&](Precision p) {
    return testing::run_with_provider("MatMul", in, {}, Device::kCuda, kCudaProvider, p).at(0);
  };
  const Tensor exact = at(Precision::kFp32), tf32 = at(Precision::kTf32), fp16 = at(Precision::kFp16),
               bf16 = at(Precision::kBf16);
  for (const auto& [name, t] : {std::pair{"tf32", &tf32}, std::pair{"fp16", &fp16}, std::pair{"bf16", &bf16}}) {
    const double d = testing::relative_l2(*t, exact);
    EXPECT_GT(d, 1e-7) << name << " equals the exact result: the operands were not rounded";
    EXPECT_LT(d, 1e-2) << name;
  }
  EXPECT_GT(testing::relative_l2(fp16, bf16), 1e-7);
  // bf16 keeps 8 bits of mantissa, fp16 11, tf32 11: bf16 is the furthest from exact.
  EXPECT_GT(testing::relative_l2(bf16, exact), testing::relative_l2(fp16, exact));
}

// One k-tile or less (K ≤ 16) runs on the CUDA cores at every precision: exact, and faster there.
TEST(MatMulPrecision, SmallKIsExactAtEveryPrecision) {
  RW_SKIP_WITHOUT_GPU();
  const std::vector<Tensor> in = {r({16, 40, 15}, 52), r({16, 15, 40}, 53)};
  const Tensor exact =
      testing::run_with_provider("MatMul", in, {}, Device::kCuda, kCudaProvider, Precision::kFp32).at(0);
  for (Precision p : {Precision::kTf32, Precision::kFp16, Precision::kBf16}) {
    const Tensor got = testing::run_with_provider("MatMul", in, {}, Device::kCuda, kCudaProvider, p).at(0);
    redwood::testing::expect_close(got, exact, 0, 0);
  }
}

// At most 8 rows (a classifier at batch 1) take the matrix-vector kernel, exact fp32 at every
// precision: it is bound by reading the weights, so rounding them would buy nothing.
TEST(MatMulPrecision, FewRowsAreExactAtEveryPrecision) {
  RW_SKIP_WITHOUT_GPU();
  const std::vector<Tensor> in = {r({2, 256}, 54), r({40, 256}, 55), r({40}, 56)};
  const std::map<std::string, AttributeValue> attrs = {{"transB", std::int64_t{1}}};
  const Tensor exact =
      testing::run_with_provider("Gemm", in, attrs, Device::kCuda, kCudaProvider, Precision::kFp32).at(0);
  const Tensor want =
      testing::run_with_provider("Gemm", in, attrs, Device::kCpu, kReferenceProvider, Precision::kFp32).at(0);
  redwood::testing::expect_close(exact, want, 1e-4, 1e-5);
  for (Precision p : {Precision::kTf32, Precision::kFp16, Precision::kBf16}) {
    const Tensor got = testing::run_with_provider("Gemm", in, attrs, Device::kCuda, kCudaProvider, p).at(0);
    redwood::testing::expect_close(got, exact, 0, 0);
  }
}

}  // namespace
}  // namespace redwood::cuda
