// MatMul and Gemm (both on the blocked SGEMM): hand-computed values, numpy broadcasting and 1-D
// operands, transposes and C broadcasting against naive products, and the error paths.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/reference/gemm_kernel.hpp"
#include "core/error.hpp"
#include "support/test_support.hpp"

namespace redwood {
namespace {

using testing::f32;
using testing::expect_close;
using testing::NodeSpec;
using testing::random_tensor;
using testing::run_node;

Tensor run_op(const std::string& op, std::vector<Tensor> inputs,
              std::map<std::string, AttributeValue> attrs = {}) {
  NodeSpec spec;
  spec.op_type = op;
  spec.inputs = std::move(inputs);
  spec.attributes = std::move(attrs);
  return run_node(spec).at(0);
}

// numpy.matmul, one output element at a time, in double.
Tensor naive_matmul(const Tensor& a, const Tensor& b) {
  Shape as = a.shape(), bs = b.shape();
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  const std::int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  const std::size_t batch_rank = std::max(as.size(), bs.size()) - 2;
  while (as.size() < batch_rank + 2) as.insert(as.begin(), 1);
  while (bs.size() < batch_rank + 2) bs.insert(bs.begin(), 1);
  Shape batch(batch_rank);
  for (std::size_t i = 0; i < batch_rank; ++i) batch[i] = std::max(as[i], bs[i]);
  Shape full = batch;
  full.push_back(m);
  full.push_back(n);
  const Strides ast = contiguous_strides(as), bst = contiguous_strides(bs), fst = contiguous_strides(full);
  std::vector<float> out(static_cast<std::size_t>(shape_numel(full)));
  for (std::int64_t flat = 0; flat < shape_numel(full); ++flat) {
    std::int64_t a_off = 0, b_off = 0;
    for (std::size_t i = 0; i < batch_rank; ++i) {
      const std::int64_t idx = flat / fst[i] % full[i];
      a_off += (as[i] == 1 ? 0 : idx) * ast[i];
      b_off += (bs[i] == 1 ? 0 : idx) * bst[i];
    }
    const std::int64_t row = flat / n % m, col = flat % n;
    double acc = 0;
    for (std::int64_t p = 0; p < k; ++p) {
      acc += double(a.data<float>()[a_off + row * k + p]) * b.data<float>()[b_off + p * n + col];
    }
    out[flat] = static_cast<float>(acc);
  }
  Shape out_shape = batch;
  if (a.rank() > 1) out_shape.push_back(m);
  if (b.rank() > 1) out_shape.push_back(n);
  return Tensor::from_vector<float>(out_shape, out);
}

void expect_matmul(const Shape& a_shape, const Shape& b_shape, std::uint32_t seed) {
  const Tensor a = random_tensor(DType::kF32, a_shape, -1, 1, seed);
  const Tensor b = random_tensor(DType::kF32, b_shape, -1, 1, seed + 1);
  SCOPED_TRACE(shape_str(a_shape) + " x " + shape_str(b_shape));
  expect_close(run_op("MatMul", {a, b}), naive_matmul(a, b), 1e-4, 1e-5);
}

TEST(MatMul, HandComputed) {
  expect_close(run_op("MatMul", {f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({3, 2}, {7, 8, 9, 10, 11, 12})}),
               f32({2, 2}, {58, 64, 139, 154}));
  // 1-D x 1-D is a dot product with shape [].
  expect_close(run_op("MatMul", {f32({3}, {1, 2, 3}), f32({3}, {4, 5, 6})}), f32({}, {32}));
}

TEST(MatMul, OneDimensionalOperands) {
  expect_matmul({5}, {5, 3}, 1);
  expect_matmul({4, 5}, {5}, 3);
  expect_matmul({5}, {2, 5, 3}, 5);
  expect_matmul({2, 3, 4, 5}, {5}, 7);
}

TEST(MatMul, BatchBroadcasting) {
  expect_matmul({2, 1, 4, 5}, {3, 5, 6}, 11);  // both broadcast
  expect_matmul({3, 4, 5}, {5, 6}, 13);        // B shared: folded into one GEMM
  expect_matmul({4, 5}, {2, 5, 3}, 15);        // A shared
  expect_matmul({2, 3, 4, 5}, {1, 1, 5, 2}, 17);
  expect_matmul({1, 2, 3, 4}, {1, 2, 4, 3}, 19);
}

TEST(MatMul, LargeMatchesNaive) {
  // Several row, column and depth blocks of the GEMM, with ragged edges.
  expect_matmul({1, 203, 301}, {301, 397}, 21);
  expect_matmul({3, 37, 129}, {3, 129, 45}, 23);
}

TEST(MatMul, RejectsBadShapes) {
  EXPECT_THROW(run_op("MatMul", {random_tensor(DType::kF32, {2, 3}), random_tensor(DType::kF32, {4, 2})}),
               InvalidArgument);
  EXPECT_THROW(run_op("MatMul", {random_tensor(DType::kF32, {2, 2, 3}), random_tensor(DType::kF32, {3, 3, 2})}),
               InvalidArgument);
  EXPECT_THROW(run_op("MatMul", {random_tensor(DType::kF32, {2, 3}).cast(DType::kI64),
                                 random_tensor(DType::kF32, {3, 2})}),
               Unsupported);
}

// alpha * op(A) op(B) + beta * C with C broadcast to [M, N], in double.
Tensor naive_gemm(const Tensor& a, const Tensor& b, const Tensor* c, bool ta, bool tb, float alpha,
                  float beta) {
  const std::int64_t m = ta ? a.dim(1) : a.dim(0), k = ta ? a.dim(0) : a.dim(1);
  const std::int64_t n = tb ? b.dim(0) : b.dim(1);
  Tensor y = Tensor::empty(DType::kF32, {m, n});
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (std::int64_t p = 0; p < k; ++p) {
        const double av = a.data<float>()[ta ? p * m + i : i * k + p];
        const double bv = b.data<float>()[tb ? j * k + p : p * n + j];
        acc += av * bv;
      }
      double cv = 0;
      if (c != nullptr) {
        const std::int64_t rows = c->rank() == 2 ? c->dim(0) : 1;
        const std::int64_t cols = c->rank() >= 1 ? c->dim(-1) : 1;
        cv = c->data<float>()[(rows == 1 ? 0 : i) * cols + (cols == 1 ? 0 : j)];
      }
      y.data<float>()[i * n + j] = static_cast<float>(alpha * acc + beta * cv);
    }
  }
  return y;
}

TEST(Gemm, HandComputed) {
  // 0.5 * [1 2; 3 4] [1 0; 0 1] + 2 * [10 20] (C broadcast over rows).
  expect_close(run_op("Gemm", {f32({2, 2}, {1, 2, 3, 4}), f32({2, 2}, {1, 0, 0, 1}), f32({2}, {10, 20})},
                      {{"alpha", 0.5f}, {"beta", 2.0f}}),
               f32({2, 2}, {20.5f, 41, 21.5f, 42}));
}

TEST(Gemm, TransposesAndBiasShapesMatchNaive) {
  const std::int64_t m = 7, k = 9, n = 5;
  std::uint32_t seed = 30;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const Tensor a = random_tensor(DType::kF32, ta ? Shape{k, m} : Shape{m, k}, -1, 1, ++seed);
      const Tensor b = random_tensor(DType::kF32, tb ? Shape{n, k} : Shape{k, n}, -1, 1, ++seed);
      const std::map<std::string, AttributeValue> attrs{{"transA", std::int64_t{ta}},
                                                        {"transB", std::int64_t{tb}},
                                                        {"alpha", 0.75f},
                                                        {"beta", -1.5f}};
      SCOPED_TRACE(fmt::format("transA {} transB {}", ta, tb));
      expect_close(run_op("Gemm", {a, b}, attrs), naive_gemm(a, b, nullptr, ta, tb, 0.75f, -1.5f),
                   1e-4, 1e-5);
      for (const Shape& c_shape : {Shape{}, Shape{1}, Shape{n}, Shape{1, n}, Shape{m, 1}, Shape{m, n}}) {
        SCOPED_TRACE("C " + shape_str(c_shape));
        const Tensor c = random_tensor(DType::kF32, c_shape, -1, 1, ++seed);
        expect_close(run_op("Gemm", {a, b, c}, attrs), naive_gemm(a, b, &c, ta, tb, 0.75f, -1.5f),
                     1e-4, 1e-5);
      }
    }
  }
}

TEST(Gemm, LargeTransposedMatchesNaive) {
  const Tensor a = random_tensor(DType::kF32, {300, 130}, -1, 1, 60);
  const Tensor b = random_tensor(DType::kF32, {410, 300}, -1, 1, 61);
  const Tensor c = random_tensor(DType::kF32, {410}, -1, 1, 62);
  expect_close(run_op("Gemm", {a, b, c}, {{"transA", std::int64_t{1}}, {"transB", std::int64_t{1}}}),
               naive_gemm(a, b, &c, true, true, 1.0f, 1.0f), 1e-4, 1e-5);
}

TEST(Gemm, RejectsBadShapes) {
  const Tensor a = random_tensor(DType::kF32, {3, 4});
  const Tensor b = random_tensor(DType::kF32, {4, 5});
  EXPECT_THROW(run_op("Gemm", {a, b, random_tensor(DType::kF32, {4, 5})}), InvalidArgument);
  EXPECT_THROW(run_op("Gemm", {a, b, random_tensor(DType::kF32, {3})}), InvalidArgument);
  EXPECT_THROW(run_op("Gemm", {a, a}), InvalidArgument);
  EXPECT_THROW(run_op("Gemm", {random_tensor(DType::kF32, {1, 3, 4}), b}), InvalidArgument);
  EXPECT_THROW(run_op("Gemm", {a.cast(DType::kF16), b}), Unsupported);
}

}  // namespace
}  // namespace redwood

namespace redwood {
namespace {

// sgemm itself: general alpha and beta, leading dimensions larger than the extents (a block of
// a bigger matrix), and the edge cases beta = 0 (C not read) and k = 0.
TEST(Sgemm, StridedAlphaBetaMatchesNaive) {
  const std::int64_t m = 70, n = 45, k = 300, ld_pad = 3;
  std::uint32_t seed = 70;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      SCOPED_TRACE(fmt::format("transA {} transB {}", ta, tb));
      const std::int64_t lda = (ta ? m : k) + ld_pad, ldb = (tb ? k : n) + ld_pad, ldc = n + ld_pad;
      const Tensor a = random_tensor(DType::kF32, {ta ? k : m, lda}, -1, 1, ++seed);
      const Tensor b = random_tensor(DType::kF32, {tb ? n : k, ldb}, -1, 1, ++seed);
      const Tensor c0 = random_tensor(DType::kF32, {m, ldc}, -1, 1, ++seed);
      for (float beta : {0.0f, 1.0f, -0.5f}) {
        Tensor c = c0.clone();
        if (beta == 0.0f) {
          for (float& v : c.values<float>()) v = std::numeric_limits<float>::quiet_NaN();
        }
        cpu::sgemm(ta, tb, m, n, k, 1.5f, a.data<float>(), lda, b.data<float>(), ldb, beta,
                   c.data<float>(), ldc);
        for (std::int64_t i = 0; i < m; ++i) {
          for (std::int64_t j = 0; j < ldc; ++j) {
            const float got = c.data<float>()[i * ldc + j];
            if (j >= n) {  // the padding columns are left alone
              if (beta == 0.0f) {
                EXPECT_TRUE(std::isnan(got));
              } else {
                EXPECT_EQ(got, c0.data<float>()[i * ldc + j]);
              }
              continue;
            }
            double acc = 0;
            for (std::int64_t p = 0; p < k; ++p) {
              acc += double(a.data<float>()[ta ? p * lda + i : i * lda + p]) *
                     b.data<float>()[tb ? j * ldb + p : p * ldb + j];
            }
            const double expected = 1.5 * acc + (beta == 0.0f ? 0.0 : beta * c0.data<float>()[i * ldc + j]);
            ASSERT_NEAR(got, expected, 1e-4 * (1 + std::abs(expected))) << "at " << i << ", " << j;
          }
        }
      }
    }
  }
}

TEST(Sgemm, EmptyDepthScalesC) {
  std::vector<float> c{1, 2, 3, 4};
  cpu::sgemm(false, false, 2, 2, 0, 1.0f, nullptr, 1, nullptr, 2, 2.0f, c.data(), 2);
  EXPECT_EQ(c, (std::vector<float>{2, 4, 6, 8}));
  c.assign(4, std::numeric_limits<float>::quiet_NaN());
  cpu::sgemm(false, false, 2, 2, 0, 1.0f, nullptr, 1, nullptr, 2, 0.0f, c.data(), 2);
  EXPECT_EQ(c, (std::vector<float>{0, 0, 0, 0}));
}

}  // namespace
}  // namespace redwood
