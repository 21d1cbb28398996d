// The matrix-vector kernels (backends/cuda/kernels/matmul/gemv.cu) behind MatMul/Gemm of at most
// kGemvMaxRows (32) rows and 1×1 convolutions of at most 32 output pixels: which nodes take them
// (host-only plan checks, they run in CI too), and their results against the reference kernels on
// a GPU. Every row count 1..8 (a warp a column), 9, 16, 31 and 32 (x in registers for several
// columns, rows rounded up to 16 or 32), K and N that are multiples of 4 (16-byte weight loads)
// and odd ones (4-byte loads), W contiguous along k (Conv, Gemm transB) and along n (MatMul, Gemm),
// k in one slice of 128 or several per warp, a last block of fewer columns, the fused bias,
// residual and activations, Gemm's alpha/beta/C and transA, batches folded into rows, 1-D
// convolutions and spatial inputs; ResNet-50's and MobileNetV3's classifiers and squeeze-excite
// layers at batch 32. fp32: relative L2 ≤ 1e-5 and element-wise 1e-4/1e-5; the kernel is exact
// fp32 at every precision, so a tf32/fp16/bf16 plan gives the very same bits.

#include "backends/cuda/graph_runner.hpp"
#include "runtime/executor.hpp"
#include "gpu_test_support.hpp"
#include "provider_run.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <memory>

namespace redwood::cuda {
namespace {

using Attrs = std::map<std::string, AttributeValue>;
using I = std::vector<std::int64_t>;

Tensor r(Shape s, std::uint32_t seed, double lo = -1, double hi = 1) {
  return redwood::testing::random_tensor(DType::kF32, std::move(s), lo, hi, seed);
}
Attrs act(const std::string& a, float alpha = 0, float beta = 0) {
  return {{"rw.activation", a}, {"rw.alpha", alpha}, {"rw.beta", beta}};
}
Attrs with(Attrs a, const std::string& key, AttributeValue v) {
  a[key] = std::move(v);
  return a;
}

struct GemvCase {
  std::string name;
  std::string op;
  std::vector<Tensor> inputs;  // an undefined tensor is an absent input
  Attrs attributes;
  bool gemv;  // whether the node should take the matrix-vector kernel
};
void PrintTo(const GemvCase& c, std::ostream* os) { *os << c.name; }

// A CUDA kernel built for one node (the kernel keeps a reference to the node: heap, not moved).
struct Built {
  Graph graph;
  Node node;
  std::unique_ptr<Kernel> kernel;
  CudaKernel* cuda = nullptr;
};

std::unique_ptr<Built> build(const GemvCase& c) {
  auto b = std::make_unique<Built>();
  b->graph.opset = 17;
  b->node.name = c.name;
  b->node.op_type = c.op;
  b->node.attributes = c.attributes;
  b->node.outputs = {"y"};
  KernelInfo info;
  info.graph = &b->graph;
  info.opset = 17;
  for (std::size_t i = 0; i < c.inputs.size(); ++i) {
    b->node.inputs.push_back(c.inputs[i].defined() ? "in" + std::to_string(i) : "");
    info.input_dtypes.push_back(c.inputs[i].defined() ? c.inputs[i].dtype() : DType::kUndefined);
    info.constant_inputs.push_back(nullptr);
  }
  const KernelEntry* entry = nullptr;
  for (const KernelEntry* e : OpRegistry::instance().candidates(c.op, Device::kCuda)) {
    if (e->provider == kCudaProvider) entry = e;
  }
  if (entry == nullptr) throw Unsupported("no CUDA kernel for " + c.op);
  b->kernel = entry->factory(b->node, info);
  b->cuda = dynamic_cast<CudaKernel*>(b->kernel.get());
  if (b->cuda == nullptr) throw Unsupported("the CUDA kernel for " + c.op + " is no CudaKernel");
  return b;
}

// plan() alone (host only, no CUDA call) and the variant it picked.
std::string planned_variant(const GemvCase& c, Precision precision) {
  auto b = build(c);
  std::vector<TensorDesc> in(c.inputs.size());
  for (std::size_t i = 0; i < c.inputs.size(); ++i) {
    if (c.inputs[i].defined()) in[i] = {c.inputs[i].dtype(), c.inputs[i].shape(), nullptr};
  }
  b->cuda->plan(PlanInfo{b->node, in, precision, 17});
  return b->cuda->variant();
}

std::vector<GemvCase> cases() {
  const Tensor none;
  std::vector<GemvCase> c;
  // Gemm with transB (W contiguous along k): every row count of the warp-a-column kernel, and the
  // wide kernel's 9..16 (rounded to 16) and 17..32 (rounded to 32); K a multiple of 4 and not.
  for (std::int64_t m : {1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 31, 32}) {
    c.push_back({"gemm_transB_k128_rows" + std::to_string(m), "Gemm",
                 {r({m, 128}, 100 + m), r({33, 128}, 110 + m), r({33}, 120 + m)}, {{"transB", std::int64_t{1}}}, true});
    c.push_back({"gemm_transB_k131_rows" + std::to_string(m), "Gemm",
                 {r({m, 131}, 130 + m), r({20, 131}, 140 + m), r({20}, 150 + m)},
                 with(act("Relu"), "transB", std::int64_t{1}), true});
  }
  // MatMul (W contiguous along n): every row count, odd extents.
  for (std::int64_t m : {1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 31, 32}) {
    c.push_back({"matmul_k37_n19_rows" + std::to_string(m), "MatMul", {r({m, 37}, 160 + m), r({37, 19}, 170 + m)}, {},
                 true});
  }
  // ResNet-50's classifier at batch 1, weights at the scale of a trained layer.
  c.push_back({"gemm_resnet_fc", "Gemm", {r({1, 2048}, 200, 0, 2), r({1000, 2048}, 201, -0.05, 0.05), r({1000}, 202)},
               {{"transB", std::int64_t{1}}}, true});
  c.push_back({"matmul_fc_k2048_n1000", "MatMul", {r({1, 2048}, 203), r({2048, 1000}, 204, -0.05, 0.05)}, {}, true});
  c.push_back({"matmul_bias_residual_hardswish", "MatMul", {r({4, 64}, 205), r({64, 48}, 206), r({48}, 207), r({4, 48}, 208)},
               act("HardSwish"), true});
  c.push_back({"matmul_residual_only_leaky", "MatMul", {r({3, 40}, 209), r({40, 12}, 210), none, r({3, 12}, 211)},
               act("LeakyRelu", 0.1f), true});
  c.push_back({"matmul_batches_fold_into_rows", "MatMul", {r({2, 3, 40}, 212), r({40, 12}, 213)}, {}, true});
  c.push_back({"matmul_vector_left", "MatMul", {r({20}, 214), r({20, 7}, 215)}, {}, true});
  c.push_back({"matmul_vector_right", "MatMul", {r({2, 36}, 216), r({36}, 217)}, {}, true});
  c.push_back({"gemm_transA_alpha_beta_c", "Gemm", {r({40, 3}, 218), r({40, 10}, 219), r({3, 10}, 220)},
               {{"transA", std::int64_t{1}}, {"alpha", 0.5f}, {"beta", 2.0f}}, true});
  c.push_back({"gemm_transA_transB_row_c", "Gemm", {r({52, 5}, 221), r({9, 52}, 222), r({1, 9}, 223)},
               {{"transA", std::int64_t{1}}, {"transB", std::int64_t{1}}}, true});
  c.push_back({"gemm_transB_residual_sigmoid", "Gemm",
               {r({2, 64}, 224), r({30, 64}, 225), r({30}, 226), r({2, 30}, 227)},
               with(act("Sigmoid"), "transB", std::int64_t{1}), true});
  c.push_back({"gemm_no_c", "Gemm", {r({6, 24}, 228), r({24, 17}, 229)}, {}, true});
  // Batch 32 (the wide kernel): the classifiers of ResNet-50 (2048 → 1000: 16 slices of k, two a
  // warp) and MobileNetV3-Large (960 → 1280 → 1000: 8 columns a block), weights at the scale of a
  // trained layer; 1001 columns (a last block of one column) over 260 = 2·128 + 4 k (a last slice
  // of one lane); transA (A strided along k: 4-byte loads of x, 16-byte loads of W); C, alpha,
  // beta, residual and activation; MatMul's fused bias and residual; batches folded into 32 rows.
  c.push_back({"gemm_resnet_fc_batch32", "Gemm",
               {r({32, 2048}, 240, 0, 2), r({1000, 2048}, 241, -0.05, 0.05), r({1000}, 242)},
               {{"transB", std::int64_t{1}}}, true});
  c.push_back({"gemm_mobilenet_fc1_batch32_hardswish", "Gemm",
               {r({32, 960}, 243, 0, 2), r({1280, 960}, 244, -0.05, 0.05), r({1280}, 245)},
               with(act("HardSwish"), "transB", std::int64_t{1}), true});
  c.push_back({"gemm_mobilenet_fc2_batch32", "Gemm",
               {r({32, 1280}, 246), r({1000, 1280}, 247, -0.05, 0.05), r({1000}, 248)},
               {{"transB", std::int64_t{1}}}, true});
  c.push_back({"gemm_transB_rows24_n1001_k260", "Gemm", {r({24, 260}, 249), r({1001, 260}, 250), r({1001}, 251)},
               {{"transB", std::int64_t{1}}}, true});
  c.push_back({"gemm_transA_transB_rows24", "Gemm", {r({300, 24}, 252), r({208, 300}, 253), r({208}, 254)},
               {{"transA", std::int64_t{1}}, {"transB", std::int64_t{1}}}, true});
  c.push_back({"gemm_transB_rows20_c_alpha_beta_residual_sigmoid", "Gemm",
               {r({20, 64}, 255), r({30, 64}, 256), r({20, 30}, 257), r({20, 30}, 258)},
               with(with(with(act("Sigmoid"), "transB", std::int64_t{1}), "alpha", 0.5f), "beta", 2.0f), true});
  c.push_back({"matmul_rows32_bias_residual_hardswish", "MatMul",
               {r({32, 64}, 259), r({64, 48}, 260), r({48}, 261), r({32, 48}, 262)}, act("HardSwish"), true});
  c.push_back({"matmul_fc_rows32_k1280_n1000", "MatMul", {r({32, 1280}, 263), r({1280, 1000}, 264, -0.05, 0.05)}, {},
               true});
  c.push_back({"matmul_batches_fold_into_32_rows", "MatMul", {r({4, 8, 40}, 265), r({40, 12}, 266)}, {}, true});
  // More rows (33), or a B with batches: the tiles, as before.
  c.push_back({"matmul_33_rows_tiles", "MatMul", {r({3, 11, 40}, 230), r({40, 12}, 231)}, {}, false});
  c.push_back({"matmul_batched_b_tiles", "MatMul", {r({2, 1, 24}, 232), r({2, 24, 8}, 233)}, {}, false});
  c.push_back({"gemm_33_rows_tiles", "Gemm", {r({33, 30}, 234), r({30, 11}, 235)}, {}, false});
  c.push_back({"gemm_transB_33_rows_tiles", "Gemm", {r({33, 128}, 236), r({20, 128}, 237)},
               {{"transB", std::int64_t{1}}}, false});

  // Conv: the squeeze-excite layers of MobileNetV3 (1×1 input), batches 1..8, 9, 16, 31, 32.
  c.push_back({"conv_se_fc1_relu", "Conv", {r({1, 240, 1, 1}, 300, 0, 2), r({64, 240, 1, 1}, 301), r({64}, 302)},
               act("Relu"), true});
  c.push_back({"conv_se_fc2_hardsigmoid", "Conv", {r({1, 64, 1, 1}, 303, 0, 2), r({240, 64, 1, 1}, 304), r({240}, 305)},
               act("HardSigmoid", 1.f / 6, 0.5f), true});
  c.push_back({"conv_se_fc1_batch32_relu", "Conv",
               {r({32, 960, 1, 1}, 306, 0, 2), r({240, 960, 1, 1}, 307, -0.1, 0.1), r({240}, 308)}, act("Relu"), true});
  c.push_back({"conv_se_fc2_batch32_hardsigmoid", "Conv",
               {r({32, 240, 1, 1}, 309, 0, 2), r({960, 240, 1, 1}, 390, -0.1, 0.1), r({960}, 391)},
               act("HardSigmoid", 1.f / 6, 0.5f), true});
  c.push_back({"conv_se_fc1_batch32_k72", "Conv", {r({32, 72, 1, 1}, 392, 0, 2), r({24, 72, 1, 1}, 393), r({24}, 394)},
               act("Relu"), true});
  for (std::int64_t n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 31, 32}) {
    c.push_back({"conv_1x1_odd_batch" + std::to_string(n), "Conv",
                 {r({n, 37, 1, 1}, 310 + n), r({20, 37, 1, 1}, 320 + n), r({20}, 330 + n)}, act("HardSwish"), true});
    c.push_back({"conv_1x1_aligned_batch" + std::to_string(n), "Conv",
                 {r({n, 32, 1, 1}, 340 + n), r({12, 32, 1, 1}, 350 + n)}, {}, true});
  }
  // Spatial inputs of at most 8 pixels in all: rows are (image, pixel), x read with stride H·W
  // (16-byte loads of W, 4-byte loads of x).
  for (std::int64_t w = 2; w <= 8; ++w) {
    c.push_back({"conv_1x" + std::to_string(w) + "_strided_rows", "Conv",
                 {r({1, 20, 1, w}, 500 + w), r({9, 20, 1, 1}, 510 + w), r({9}, 520 + w)}, act("Relu"), true});
  }
  c.push_back({"conv_2x2_batch2_bias_residual_clip", "Conv",
               {r({2, 16, 2, 2}, 360), r({24, 16, 1, 1}, 361), r({24}, 362), r({2, 24, 2, 2}, 363)},
               act("Clip", -0.5f, 0.5f), true});
  c.push_back({"conv_1x3_sigmoid", "Conv", {r({1, 12, 1, 3}, 364), r({5, 12, 1, 1}, 365)}, act("Sigmoid"), true});
  c.push_back({"conv_1d_batch2", "Conv", {r({2, 8, 3}, 366), r({4, 8, 1}, 367), r({4}, 368)}, {}, true});
  c.push_back({"conv_same_upper_1x1", "Conv", {r({1, 9, 2, 2}, 369), r({7, 9, 1, 1}, 370)},
               {{"auto_pad", std::string("SAME_UPPER")}}, true});
  // Spatial inputs of 9..32 pixels in all (the wide kernel; x strided along the channels).
  c.push_back({"conv_3x3_pixels_9_rows", "Conv", {r({1, 8, 3, 3}, 381), r({8, 8, 1, 1}, 382)}, {}, true});
  c.push_back({"conv_2x2_batch8_32_rows_residual_clip", "Conv",
               {r({8, 16, 2, 2}, 383), r({24, 16, 1, 1}, 384), r({24}, 385), r({8, 24, 2, 2}, 386)},
               act("Clip", -0.5f, 0.5f), true});
  c.push_back({"conv_1d_31_rows_odd_channels", "Conv", {r({1, 13, 31}, 387), r({5, 13, 1}, 388)}, {}, true});
  // Not matrix-vector: more pixels (33), a wider kernel, groups, a stride, padding.
  c.push_back({"conv_3x11_pixels_tiles", "Conv", {r({1, 8, 3, 11}, 371), r({8, 8, 1, 1}, 372)}, {}, false});
  c.push_back({"conv_1x1_batch33_tiles", "Conv", {r({33, 32, 1, 1}, 395), r({12, 32, 1, 1}, 396)}, {}, false});
  c.push_back({"conv_3x3_kernel_tiles", "Conv", {r({1, 8, 1, 1}, 373), r({8, 8, 3, 3}, 374)},
               {{"pads", I{1, 1, 1, 1}}}, false});
  c.push_back({"conv_grouped_tiles", "Conv", {r({1, 8, 1, 1}, 375), r({8, 4, 1, 1}, 376)}, {{"group", std::int64_t{2}}},
               false});
  c.push_back({"conv_stride2_tiles", "Conv", {r({1, 8, 3, 3}, 377), r({6, 8, 1, 1}, 378)}, {{"strides", I{2, 2}}},
               false});
  c.push_back({"conv_padded_tiles", "Conv", {r({1, 8, 1, 1}, 379), r({6, 8, 1, 1}, 380)}, {{"pads", I{1, 1, 1, 1}}},
               false});
  return c;
}

class GemvPlan : public ::testing::TestWithParam<GemvCase> {};

// Host only: which nodes plan the matrix-vector kernel, at every precision.
TEST_P(GemvPlan, TakesTheMatrixVectorKernelExactlyForFewRows) {
  const GemvCase& c = GetParam();
  for (Precision p : {Precision::kFp32, Precision::kTf32, Precision::kFp16, Precision::kBf16}) {
    const std::string v = planned_variant(c, p);
    EXPECT_EQ(v.find("gemv") != std::string::npos, c.gemv) << c.name << " at " << precision_name(p) << ": " << v;
    EXPECT_NE(v.find(c.name), std::string::npos) << "the variant names the node: " << v;
  }
}

class GemvOnGpu : public ::testing::TestWithParam<GemvCase> {};

TEST_P(GemvOnGpu, AgreesWithTheReferenceAndIsExactAtEveryPrecision) {
  RW_SKIP_WITHOUT_GPU();
  const GemvCase& c = GetParam();
  const Tensor want =
      testing::run_with_provider(c.op, c.inputs, c.attributes, Device::kCpu, kReferenceProvider, Precision::kFp32).at(0);
  auto run_at = [&](Precision p, std::string* variant) {
    auto b = build(c);
    b->cuda->set_precision(p);
    std::vector<Tensor> out(1);
    KernelContext ctx{c.inputs, out, b->node};
    b->kernel->run(ctx);
    *variant = b->cuda->variant();
    return out[0].contiguous();
  };
  std::string variant;
  const Tensor got = run_at(Precision::kFp32, &variant);
  EXPECT_EQ(variant.find("gemv") != std::string::npos, c.gemv) << variant;
  ASSERT_EQ(got.shape(), want.shape());
  const double err = testing::relative_l2(got, want);
  std::printf("%s (%s): relative L2 %.2e\n", c.name.c_str(), variant.c_str(), err);
  EXPECT_LE(err, 1e-5) << c.name;
  redwood::testing::expect_close(got, want, 1e-4, 1e-5);
  if (!c.gemv) return;
  for (Precision p : {Precision::kTf32, Precision::kFp16, Precision::kBf16}) {
    std::string v;
    const Tensor reduced = run_at(p, &v);
    EXPECT_NE(v.find("gemv"), std::string::npos) << v;
    redwood::testing::expect_close(reduced, got, 0, 0);  // exact fp32 whatever the precision
  }
}

std::string case_name(const ::testing::TestParamInfo<GemvCase>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(Products, GemvPlan, ::testing::ValuesIn(cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Products, GemvOnGpu, ::testing::ValuesIn(cases()), case_name);

// A squeeze-excite block and a classifier as a model: x → Conv 1×1 (Relu) → Conv 1×1
// (HardSigmoid) → Mul x → Flatten → Gemm, through the GraphRunner (optimized, so the activations
// go into the convolutions' epilogues; captured into a CUDA graph and replayed) at fp16: all three
// products take the matrix-vector kernel, and the results match the reference executor's.
std::shared_ptr<Graph> squeeze_excite_classifier() {
  using redwood::testing::make_node;
  using redwood::testing::random_tensor;
  auto graph = redwood::testing::make_x_to_y_graph("se_classifier");
  graph->initializers["w1"] = random_tensor(DType::kF32, {8, 16, 1, 1}, -1, 1, 400);
  graph->initializers["b1"] = random_tensor(DType::kF32, {8}, -1, 1, 401);
  graph->initializers["w2"] = random_tensor(DType::kF32, {16, 8, 1, 1}, -1, 1, 402);
  graph->initializers["b2"] = random_tensor(DType::kF32, {16}, -1, 1, 403);
  graph->initializers["wfc"] = random_tensor(DType::kF32, {10, 16}, -1, 1, 404);
  graph->initializers["bfc"] = random_tensor(DType::kF32, {10}, -1, 1, 405);
  graph->nodes.push_back(make_node("se_fc1", "Conv", {"x", "w1", "b1"}, {"s1"}));
  graph->nodes.push_back(make_node("se_relu", "Relu", {"s1"}, {"s2"}));
  graph->nodes.push_back(make_node("se_fc2", "Conv", {"s2", "w2", "b2"}, {"s3"}));
  graph->nodes.push_back(make_node("se_gate", "HardSigmoid", {"s3"}, {"s4"}));
  graph->nodes.push_back(make_node("se_scale", "Mul", {"x", "s4"}, {"s5"}));
  graph->nodes.push_back(make_node("flat", "Flatten", {"s5"}, {"s6"}));
  graph->nodes.push_back(make_node("fc", "Gemm", {"s6", "wfc", "bfc"}, {"y"}));
  graph->nodes.back().attributes["transB"] = std::int64_t{1};
  return graph;
}

// Batch 2 (a warp a column) and batch 32 (the wide kernel, 32 rows).
class GemvInARunner : public ::testing::TestWithParam<std::int64_t> {};

TEST_P(GemvInARunner, SqueezeExciteAndClassifierTakeItAndMatchTheReference) {
  RW_SKIP_WITHOUT_GPU();
  auto graph = squeeze_excite_classifier();
  const Shape input = {GetParam(), 16, 1, 1};
  ExecutorOptions ref_options;
  ref_options.optimize = false;
  ref_options.reference_only = true;
  Executor reference(graph, ref_options);
  std::vector<Tensor> xs, wants;  // computed before the runner optimizes its graph
  for (std::uint32_t seed : {410u, 411u}) {
    xs.push_back(redwood::testing::random_tensor(DType::kF32, input, -1, 1, seed));
    const std::vector<Tensor> want = reference.run({{"x", xs.back()}});
    ASSERT_EQ(want.size(), 1u);
    wants.push_back(want[0]);
  }
  RunnerOptions options;
  options.precision = Precision::kFp16;
  GraphRunner runner(graph, options);
  const std::vector<std::string> v = runner.plan_for({input}).variants();
  int gemv = 0;
  for (const std::string& line : v) gemv += line.find("gemv") != std::string::npos ? 1 : 0;
  EXPECT_EQ(gemv, 3) << "se_fc1, se_fc2 and fc";
  for (std::size_t i = 0; i < xs.size(); ++i) {  // the second run replays the captured graph
    const std::vector<Tensor> got = runner.run({{"x", xs[i]}});
    ASSERT_EQ(got.size(), 1u);
    EXPECT_LE(testing::relative_l2(got[0], wants[i]), 1e-5);
    redwood::testing::expect_close(got[0], wants[i], 1e-4, 1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(Batches, GemvInARunner, ::testing::Values(std::int64_t{2}, std::int64_t{32}),
                         [](const ::testing::TestParamInfo<std::int64_t>& info) {
                           return "batch" + std::to_string(info.param);
                         });

}  // namespace
}  // namespace redwood::cuda
