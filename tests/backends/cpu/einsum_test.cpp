// Einsum: numpy.einsum's answers (computed once, on iota operands) for the equations of ONNX's
// node tests (which use float64, so the conformance suite skips them) and for what they leave out
// (implicit output, broadcast "...", three operands, summing a label one operand holds alone),
// the GEMM path against MatMul on random operands, and the malformed equations.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "support/test_support.hpp"

namespace redwood {
namespace {

using testing::expect_close;
using testing::f32;
using testing::iota_f32;
using testing::make_spec;
using testing::random_tensor;
using testing::run_node;

Tensor einsum(const std::string& equation, std::vector<Tensor> inputs) {
  return run_node(make_spec("Einsum", std::move(inputs), {{"equation", equation}})).at(0);
}

TEST(Einsum, NodeTestEquations) {
  expect_close(einsum("...ii ->...i", {iota_f32({3, 3, 3})}),
               f32({3, 3}, {0, 4, 8, 9, 13, 17, 18, 22, 26}));
  expect_close(einsum("bij, bjk -> bik", {iota_f32({2, 2, 3}), iota_f32({2, 3, 2})}),
               f32({2, 2, 2}, {10, 13, 28, 40, 172, 193, 244, 274}));
  expect_close(einsum("i,i", {iota_f32({5}), iota_f32({5})}), f32({}, {30}));
  expect_close(einsum("ij->i", {iota_f32({3, 4})}), f32({3}, {6, 22, 38}));
  expect_close(einsum("ij->ji", {iota_f32({2, 3})}), f32({3, 2}, {0, 3, 1, 4, 2, 5}));
}

TEST(Einsum, ImplicitOutputIsSortedSingleLabels) {
  expect_close(einsum("ba", {iota_f32({2, 3})}), f32({3, 2}, {0, 3, 1, 4, 2, 5}));
  expect_close(einsum("ii", {iota_f32({3, 3})}), f32({}, {12}));  // a trace
  expect_close(einsum("ij,jk", {iota_f32({2, 3}), iota_f32({3, 2})}),
               f32({2, 2}, {10, 13, 28, 40}));
}

TEST(Einsum, DiagonalsSumsAndOuterProducts) {
  expect_close(einsum("ii->i", {iota_f32({3, 3})}), f32({3}, {0, 4, 8}));
  expect_close(einsum("ij,jk->i", {iota_f32({2, 3}), iota_f32({3, 2})}), f32({2}, {23, 68}));
  expect_close(einsum("i,j", {iota_f32({2}), iota_f32({3}, 1)}), f32({2, 3}, {0, 0, 0, 1, 2, 3}));
  expect_close(einsum("bij,bkj->bik", {iota_f32({2, 2, 3}), iota_f32({2, 2, 3})}),
               f32({2, 2, 2}, {5, 14, 14, 50, 149, 212, 212, 302}));
  expect_close(einsum("ij,jk,kl->il", {iota_f32({2, 3}), iota_f32({3, 2}), iota_f32({2, 2})}),
               f32({2, 2}, {26, 49, 80, 148}));
}

TEST(Einsum, Broadcasting) {
  // "..." axes [2, 1] and [3] broadcast to [2, 3]; a letter of extent 1 broadcasts too.
  expect_close(einsum("...ij,...jk", {iota_f32({2, 1, 2, 3}), iota_f32({3, 3, 2})}),
               f32({2, 3, 2, 2}, {10, 13, 28, 40, 28,  31,  100, 112, 46,  49,  172, 184,
                                  46, 67, 64, 94, 172, 193, 244, 274, 298, 319, 424, 454}));
  expect_close(einsum("ij,ij->ij", {iota_f32({2, 3}), iota_f32({1, 3})}),
               f32({2, 3}, {0, 1, 4, 0, 4, 10}));
}

TEST(Einsum, MatchesMatMul) {
  const Tensor a = random_tensor(DType::kF32, {4, 5, 6}, -1, 1, 1);
  const Tensor b = random_tensor(DType::kF32, {4, 6, 7}, -1, 1, 2);
  const Tensor product = run_node(make_spec("MatMul", {a, b})).at(0);
  expect_close(einsum("bij,bjk->bik", {a, b}), product, 1e-5, 1e-5);
  // The same product with the operands' axes in other orders (packed before the GEMM).
  const Tensor at = run_node(make_spec("Transpose", {a}, {{"perm", testing::Ints{2, 0, 1}}})).at(0);
  expect_close(einsum("jbi,bjk->bik", {at, b}), product, 1e-5, 1e-5);
}

TEST(Einsum, RejectsMalformedEquations) {
  const Tensor m = iota_f32({2, 3});
  // The equation's own faults are found at load, where the executor reports them as Unsupported.
  EXPECT_THROWS_SAYING(einsum("ij,jk->ik", {m}), Unsupported, "node 'Einsum_0' (Einsum)",
                       "2 input terms for 1 inputs");
  EXPECT_THROWS_SAYING(einsum("ij->ii", {m}), Unsupported, "the output repeats 'i'");
  EXPECT_THROWS_SAYING(einsum("ij->k", {m}), Unsupported, "'k' is in no input term");
  EXPECT_THROWS_SAYING(einsum("i.j", {m}), Unsupported, "unexpected '.'");
  EXPECT_THROWS_SAYING(einsum("...i...", {m}), Unsupported, "more than one '...'");
  // The operands' faults are found at run time.
  EXPECT_THROWS_SAYING(einsum("ijk", {m}), InvalidArgument, "input 0 [2, 3] has rank 2",
                       "names 3 axes");
  EXPECT_THROWS_SAYING(einsum("ij,jk", {m, iota_f32({4, 2})}), InvalidArgument,
                       "'j' has extent 4 in input 1");
  EXPECT_THROWS_SAYING(einsum("ii", {m}), InvalidArgument, "repeats 'i' over extents 2 and 3");
  EXPECT_THROWS_SAYING(einsum("...i->i", {m}), InvalidArgument, "must keep with '...'");
  EXPECT_THROWS_SAYING(einsum("i", {testing::i64({1, 2})}), Unsupported, "int64");
}

}  // namespace
}  // namespace redwood
