// Every CUDA kernel against the reference kernel on random inputs: one node, the same inputs and
// attributes through both providers, relative L2 error within the precision's bound (fp32 1e-4,
// tf32 1e-3, fp16/bf16 1e-2). Convolutions run at every precision; the other kernels compute in
// fp32 whatever the precision, so they run once. ONNX's node tests (gpu_conformance_test.cpp) check
// every op again on the tests' own small inputs; the cases here add sizes and broadcasts they lack
// (rows longer than a block, bool and int64 outputs, three-way broadcasts).

#include "backends/cuda/kernels/launchers.hpp"
#include "core/error.hpp"
#include "gpu_test_support.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace redwood::cuda {
namespace {

using redwood::testing::random_tensor;

struct OpCase {
  std::string name;
  std::string op;
  std::vector<Tensor> inputs;
  std::map<std::string, AttributeValue> attributes;
  std::int64_t opset = 17;
  std::size_t outputs = 1;
  bool all_precisions = false;
};

std::vector<Tensor> run_provider(const OpCase& c, Device device, const std::string& provider, Precision precision) {
  Graph graph;
  graph.opset = c.opset;
  Node node;
  node.name = c.name;
  node.op_type = c.op;
  node.attributes = c.attributes;
  KernelInfo info;
  info.graph = &graph;
  info.opset = c.opset;
  for (std::size_t i = 0; i < c.inputs.size(); ++i) {
    node.inputs.push_back(c.inputs[i].defined() ? "in" + std::to_string(i) : "");
    info.input_dtypes.push_back(c.inputs[i].defined() ? c.inputs[i].dtype() : DType::kUndefined);
    info.constant_inputs.push_back(c.inputs[i].defined() && c.inputs[i].dtype() == DType::kI64 ? &c.inputs[i] : nullptr);
  }
  for (std::size_t o = 0; o < c.outputs; ++o) node.outputs.push_back("out" + std::to_string(o));
  const KernelEntry* entry = nullptr;
  for (const KernelEntry* e : OpRegistry::instance().candidates(c.op, device)) {
    if (e->provider == provider) entry = e;
  }
  if (entry == nullptr) throw Unsupported(fmt::format("no {} kernel for {}", provider, c.op));
  std::unique_ptr<Kernel> kernel = entry->factory(node, info);
  if (auto* ck = dynamic_cast<CudaKernel*>(kernel.get())) ck->set_precision(precision);
  std::vector<Tensor> outputs(c.outputs);
  KernelContext ctx{c.inputs, outputs, node};
  kernel->run(ctx);
  for (auto& t : outputs) t = t.contiguous();
  return outputs;
}

Tensor r(Shape s, std::uint32_t seed, double lo = -1, double hi = 1) { return random_tensor(DType::kF32, std::move(s), lo, hi, seed); }
Tensor ints(std::vector<std::int64_t> v) { return Tensor::from_vector<std::int64_t>({static_cast<std::int64_t>(v.size())}, v); }
Tensor scalar(float v) { return Tensor::scalar<float>(v); }
Tensor bools(std::vector<int> v, Shape s) {
  Tensor t = Tensor::empty(DType::kBool, std::move(s));
  bool* p = t.data<bool>();
  for (std::size_t i = 0; i < v.size(); ++i) p[i] = v[i] != 0;
  return t;
}
using Attrs = std::map<std::string, AttributeValue>;
using I = std::vector<std::int64_t>;

/// `count` indices in [-extent, extent) from a fixed generator, as int64 (or int32) of `shape`.
Tensor random_indices(Shape shape, std::int64_t extent, std::uint32_t seed, bool i32 = false) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(shape_numel(shape)));
  std::uint64_t state = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  for (auto& x : v) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    x = static_cast<std::int64_t>((state >> 33) % static_cast<std::uint64_t>(2 * extent)) - extent;
  }
  if (!i32) return Tensor::from_vector<std::int64_t>(std::move(shape), v);
  return Tensor::from_vector<std::int32_t>(std::move(shape), std::vector<std::int32_t>(v.begin(), v.end()));
}
/// Values rounded to multiples of 1/4, so that a row holds many equal values (TopK's ties).
Tensor quantized(Shape s, std::uint32_t seed) {
  Tensor t = r(std::move(s), seed, -2, 2);
  float* p = t.data<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = std::round(p[i] * 4.0f) / 4.0f;
  return t;
}

std::vector<OpCase> cases() {
  std::vector<OpCase> c;
  auto conv = [&](std::string name, std::vector<Tensor> in, Attrs a) {
    c.push_back({std::move(name), "Conv", std::move(in), std::move(a), 17, 1, true});
  };
  conv("conv3x3_bias_relu", {r({2, 8, 12, 10}, 1), r({16, 8, 3, 3}, 2), r({16}, 3)},
       {{"pads", I{1, 1, 1, 1}}, {"rw.activation", std::string("Relu")}});
  conv("conv1x1_wide", {r({1, 64, 7, 9}, 4), r({96, 64, 1, 1}, 5)}, {});
  conv("conv3x3_stride2_hardswish", {r({2, 3, 33, 31}, 6), r({32, 3, 3, 3}, 7), r({32}, 8)},
       {{"strides", I{2, 2}}, {"pads", I{1, 1, 1, 1}}, {"rw.activation", std::string("HardSwish")}});
  conv("conv_grouped", {r({1, 16, 9, 9}, 9), r({32, 4, 3, 3}, 10)}, {{"group", std::int64_t{4}}, {"pads", I{1, 1, 1, 1}}});
  conv("conv_depthwise_residual_clip",
       {r({2, 24, 10, 10}, 11), r({24, 1, 3, 3}, 12), r({24}, 13), r({2, 24, 5, 5}, 14)},
       {{"group", std::int64_t{24}}, {"strides", I{2, 2}}, {"pads", I{1, 1, 1, 1}}, {"rw.activation", std::string("Clip")},
        {"rw.alpha", 0.0f}, {"rw.beta", 1.5f}});
  conv("conv_dilated_asymmetric_pads", {r({1, 5, 14, 13}, 15), r({7, 5, 3, 3}, 16)},
       {{"dilations", I{2, 2}}, {"pads", I{1, 0, 2, 1}}});
  conv("conv5x5_residual_leaky", {r({1, 6, 11, 12}, 17), r({70, 6, 5, 5}, 18), r({70}, 19), r({1, 70, 11, 12}, 20)},
       {{"pads", I{2, 2, 2, 2}}, {"rw.activation", std::string("LeakyRelu")}, {"rw.alpha", 0.1f}});
  conv("conv_deep_k", {r({1, 256, 8, 8}, 21), r({128, 256, 3, 3}, 22)}, {{"pads", I{1, 1, 1, 1}}});
  conv("conv_same_upper", {r({1, 4, 9, 8}, 23), r({8, 4, 3, 3}, 24)}, {{"auto_pad", std::string("SAME_UPPER")}, {"strides", I{2, 2}}});
  conv("conv1d", {r({2, 4, 20}, 25), r({6, 4, 3}, 26), r({6}, 27)}, {{"pads", I{1, 1}}});
  conv("conv_sigmoid_hardsigmoid", {r({1, 8, 6, 6}, 28), r({8, 8, 1, 1}, 29)},
       {{"rw.activation", std::string("HardSigmoid")}, {"rw.alpha", 0.2f}, {"rw.beta", 0.5f}});

  c.push_back({"convtranspose_2x2_s2", "ConvTranspose", {r({1, 16, 10, 12}, 30), r({16, 8, 2, 2}, 31), r({8}, 32)},
               {{"strides", I{2, 2}}}});
  // Kernel = stride, no padding: conv_transpose_blocks, with 16, 32 and 64 channels in registers
  // and output channels in several blocks of eight (the DB detectors' heads).
  c.push_back({"convtranspose_blocks_c24_k24", "ConvTranspose", {r({2, 24, 7, 9}, 35), r({24, 24, 2, 2}, 36), r({24}, 37)},
               {{"strides", I{2, 2}}}});
  c.push_back({"convtranspose_blocks_c40_k12", "ConvTranspose", {r({1, 40, 6, 5}, 38), r({40, 12, 2, 2}, 39), r({12}, 43)},
               {{"strides", I{2, 2}}, {"rw.activation", std::string("Relu")}}});
  c.push_back({"convtranspose_blocks_3x3_s3_k1", "ConvTranspose", {r({1, 24, 5, 6}, 44), r({24, 1, 3, 3}, 45)},
               {{"strides", I{3, 3}}}});
  c.push_back({"convtranspose_grouped_outpad", "ConvTranspose", {r({2, 4, 5, 6}, 33), r({4, 3, 3, 3}, 34)},
               {{"strides", I{2, 2}}, {"pads", I{1, 1, 1, 1}}, {"output_padding", I{1, 1}}, {"group", std::int64_t{2}}}});

  for (const char* op : {"Relu", "Sigmoid", "Tanh", "HardSwish"}) {
    c.push_back({std::string("unary_") + op, op, {r({2, 3, 17, 5}, 40, -3, 3)}, {}});
  }
  c.push_back({"unary_Sqrt", "Sqrt", {r({1000}, 41, 0.01, 4)}, {}});
  c.push_back({"unary_HardSigmoid", "HardSigmoid", {r({3, 50}, 42, -4, 4)}, {{"alpha", 0.3f}, {"beta", 0.4f}}});
  c.push_back({"unary_LeakyRelu", "LeakyRelu", {r({3, 50}, 43)}, {{"alpha", 0.2f}}});
  c.push_back({"unary_Clip_inputs", "Clip", {r({4, 40}, 44, -2, 2), scalar(-0.5f), scalar(0.75f)}, {}, 13});
  c.push_back({"binary_Add_same", "Add", {r({2, 3, 4, 5}, 50), r({2, 3, 4, 5}, 51)}, {}});
  c.push_back({"binary_Mul_channel", "Mul", {r({2, 3, 4, 5}, 52), r({3, 1, 1}, 53)}, {}});
  c.push_back({"binary_Div_row", "Div", {r({2, 3, 4, 5}, 54), r({5}, 55, 0.5, 2)}, {}});
  c.push_back({"binary_Sub_scalar", "Sub", {scalar(0.25f), r({7, 9}, 56)}, {}});
  c.push_back({"binary_Pow", "Pow", {r({6, 7}, 57, 0.1, 3), r({6, 1}, 58, -2, 2)}, {}});
  // Same shapes in fours (16-byte loads) and not; broadcasts that collapse to [N·C, H·W], to three
  // dims, and both operands broadcasting.
  c.push_back({"binary_Mul_same_odd", "Mul", {r({3, 7, 11}, 59), r({3, 7, 11}, 60)}, {}});
  c.push_back({"binary_Mul_per_image_channel", "Mul", {r({2, 16, 9, 13}, 61), r({2, 16, 1, 1}, 62)}, {}});
  c.push_back({"binary_Add_middle", "Add", {r({2, 6, 4, 5}, 63), r({1, 6, 4, 1}, 64)}, {}});
  c.push_back({"binary_Sub_both", "Sub", {r({5, 1, 3}, 65), r({1, 4, 1}, 66)}, {}});
  c.push_back({"batchnorm", "BatchNormalization",
               {r({2, 6, 5, 4}, 60), r({6}, 61), r({6}, 62), r({6}, 63), r({6}, 64, 0.5, 2)}, {{"epsilon", 1e-3f}}});
  c.push_back({"maxpool_3x3_s2_p1", "MaxPool", {r({2, 4, 13, 12}, 70)},
               {{"kernel_shape", I{3, 3}}, {"strides", I{2, 2}}, {"pads", I{1, 1, 1, 1}}}});
  c.push_back({"maxpool_ceil", "MaxPool", {r({1, 3, 9, 9}, 71)}, {{"kernel_shape", I{2, 2}}, {"strides", I{2, 2}}, {"ceil_mode", std::int64_t{1}}}});
  c.push_back({"avgpool_3x2", "AveragePool", {r({1, 8, 9, 20}, 72)}, {{"kernel_shape", I{3, 2}}, {"strides", I{3, 2}}}});
  c.push_back({"avgpool_pads_include", "AveragePool", {r({1, 2, 7, 7}, 73)},
               {{"kernel_shape", I{3, 3}}, {"pads", I{1, 1, 1, 1}}, {"count_include_pad", std::int64_t{1}}}});
  c.push_back({"avgpool_pads_exclude", "AveragePool", {r({1, 2, 7, 7}, 74)},
               {{"kernel_shape", I{3, 3}}, {"strides", I{2, 2}}, {"pads", I{1, 1, 1, 1}}}});
  c.push_back({"global_avgpool", "GlobalAveragePool", {r({3, 40, 7, 9}, 75)}, {}});
  c.push_back({"resize_nearest_x2", "Resize", {r({1, 3, 5, 7}, 80), Tensor(), Tensor::from_vector<float>({4}, {1, 1, 2, 2})},
               {{"mode", std::string("nearest")}, {"coordinate_transformation_mode", std::string("asymmetric")},
                {"nearest_mode", std::string("floor")}}, 11});
  // Whole factors: the block kernel (x2 with paired stores, x4 x3); half_pixel with
  // round_prefer_floor takes o / factor too; asymmetric round_prefer_ceil does not (the general
  // kernel).
  c.push_back({"resize_nearest_x4_x3_half_pixel", "Resize", {r({2, 3, 5, 7}, 83), Tensor(), Tensor::from_vector<float>({4}, {1, 1, 4, 3})},
               {{"mode", std::string("nearest")}}, 13});
  c.push_back({"resize_nearest_x2_odd_width", "Resize", {r({1, 2, 6, 9}, 84), Tensor(), Tensor::from_vector<float>({4}, {1, 1, 2, 2})},
               {{"mode", std::string("nearest")}, {"coordinate_transformation_mode", std::string("asymmetric")},
                {"nearest_mode", std::string("floor")}}, 13});
  c.push_back({"resize_nearest_x2_prefer_ceil", "Resize", {r({1, 2, 4, 5}, 85), Tensor(), Tensor::from_vector<float>({4}, {1, 1, 2, 2})},
               {{"mode", std::string("nearest")}, {"coordinate_transformation_mode", std::string("asymmetric")},
                {"nearest_mode", std::string("round_prefer_ceil")}}, 13});
  c.push_back({"resize_linear_sizes", "Resize", {r({2, 2, 6, 5}, 81), Tensor(), Tensor(), ints({2, 2, 9, 13})},
               {{"mode", std::string("linear")}}, 13});
  c.push_back({"resize_linear_align_corners_down", "Resize", {r({1, 2, 12, 10}, 82), Tensor(), Tensor(), ints({1, 2, 5, 4})},
               {{"mode", std::string("linear")}, {"coordinate_transformation_mode", std::string("align_corners")}}, 13});
  c.push_back({"softmax_last", "Softmax", {r({4, 3, 37}, 90, -5, 5)}, {}, 13});
  c.push_back({"softmax_axis1_inner", "Softmax", {r({2, 6, 4, 5}, 91, -5, 5)}, {{"axis", std::int64_t{1}}}, 13});
  c.push_back({"softmax_coerced_opset11", "Softmax", {r({2, 3, 4}, 92, -5, 5)}, {{"axis", std::int64_t{1}}}, 11});
  c.push_back({"reducemean_last", "ReduceMean", {r({2, 25, 120}, 100)}, {{"axes", I{-1}}}, 13});
  c.push_back({"matmul_batched", "MatMul", {r({2, 3, 20, 33}, 110), r({33, 17}, 111)}, {}});
  c.push_back({"matmul_bias_relu", "MatMul", {r({5, 40}, 112), r({40, 70}, 113), r({70}, 114)},
               {{"rw.activation", std::string("Relu")}}});
  c.push_back({"matmul_batch_both", "MatMul", {r({4, 5, 6}, 115), r({4, 6, 7}, 116)}, {}});
  c.push_back({"matmul_vector", "MatMul", {r({6}, 117), r({3, 6, 4}, 118)}, {}});
  c.push_back({"gemm_transB_bias", "Gemm", {r({3, 100}, 120), r({65, 100}, 121), r({65}, 122)},
               {{"transB", std::int64_t{1}}, {"alpha", 0.5f}, {"beta", 2.0f}}});
  c.push_back({"gemm_transA_column_c", "Gemm", {r({9, 4}, 123), r({9, 6}, 124), r({4, 1}, 125)}, {{"transA", std::int64_t{1}}}});
  c.push_back({"transpose_nhwc_nchw", "Transpose", {r({2, 6, 7, 3}, 130)}, {{"perm", I{0, 3, 1, 2}}}});
  c.push_back({"transpose_default", "Transpose", {r({3, 4, 5}, 131)}, {}});
  c.push_back({"slice_steps", "Slice", {r({5, 10, 6}, 132), ints({4, 1}), ints({-100, 9}), ints({0, 1}), ints({-2, 3})}, {}, 13});
  c.push_back({"slice_opset9_attrs", "Slice", {r({4, 7}, 133)}, {{"starts", I{1}}, {"ends", I{1000}}, {"axes", I{1}}}, 9});
  c.push_back({"concat_axis1", "Concat", {r({2, 3, 4}, 134), r({2, 5, 4}, 135), r({2, 1, 4}, 136)}, {{"axis", std::int64_t{1}}}});
  c.push_back({"split_axis2", "Split", {r({2, 3, 5}, 137), ints({2, 3})}, {{"axis", std::int64_t{2}}}, 13, 2});
  c.push_back({"reshape_infer", "Reshape", {r({2, 3, 4}, 139), ints({0, -1})}, {}, 14});
  c.push_back({"flatten_axis2", "Flatten", {r({2, 3, 4, 5}, 140)}, {{"axis", std::int64_t{2}}}});
  c.push_back({"unsqueeze", "Unsqueeze", {r({3, 4}, 141), ints({0, 3})}, {}, 13});
  c.push_back({"squeeze", "Squeeze", {r({3, 1, 4, 1}, 142), ints({1})}, {}, 13});

  for (const char* op : {"Exp", "Neg", "Abs", "Floor", "Sign", "Round", "Sin", "Atan", "Softsign", "Softplus", "Mish", "Erf"}) {
    c.push_back({std::string("unary_") + op, op, {r({3, 7, 29}, 150, -3, 3)}, {}});
  }
  c.push_back({"unary_Log", "Log", {r({500}, 151, 0.01, 9)}, {}});
  c.push_back({"unary_Elu", "Elu", {r({4, 60}, 152, -3, 3)}, {{"alpha", 0.7f}}});
  c.push_back({"unary_Selu", "Selu", {r({4, 60}, 153, -3, 3)}, {{"alpha", 1.5f}, {"gamma", 1.2f}}});
  c.push_back({"unary_Celu", "Celu", {r({4, 60}, 154, -3, 3)}, {{"alpha", 2.0f}}});
  c.push_back({"unary_ThresholdedRelu", "ThresholdedRelu", {r({4, 60}, 155, -3, 3)}, {{"alpha", 0.5f}}});
  c.push_back({"unary_Shrink", "Shrink", {r({4, 60}, 156, -3, 3)}, {{"bias", 0.25f}, {"lambd", 1.0f}}});
  c.push_back({"unary_Gelu_tanh", "Gelu", {r({4, 60}, 157, -4, 4)}, {{"approximate", std::string("tanh")}}, 20});
  c.push_back({"binary_PRelu_channel", "PRelu", {r({2, 5, 6, 7}, 158), r({5, 1, 1}, 159, 0, 0.5)}, {}});
  c.push_back({"binary_Mean_broadcast", "Mean", {r({3, 1, 8}, 160), r({4, 1}, 161)}, {}});
  c.push_back({"binary_Mod_fmod", "Mod", {r({5, 40}, 162, -9, 9), r({40}, 163, 0.5, 3)}, {{"fmod", std::int64_t{1}}}});
  c.push_back({"compare_Greater_broadcast", "Greater", {r({2, 3, 40}, 164), r({3, 1}, 165)}, {}});
  c.push_back({"compare_LessOrEqual_int64", "LessOrEqual", {ints({1, -5, 7, 2, 9, 0}), ints({2, -5, 6, 2, 10, -1})}, {}});
  c.push_back({"where_three_way", "Where", {bools({1, 0, 1, 1, 0, 0}, {2, 1, 3}), r({1, 4, 3}, 166), r({2, 4, 1}, 167)}, {}});
  c.push_back({"reduce_logsumexp_middle", "ReduceLogSumExp", {r({3, 70, 9}, 168, -20, 20)}, {{"axes", I{1}}}, 13});
  c.push_back({"reduce_l1_all", "ReduceL1", {r({4, 5, 6}, 169)}, {{"keepdims", std::int64_t{0}}}, 13});
  c.push_back({"reduce_prod_last", "ReduceProd", {r({6, 9}, 170, 0.5, 1.5)}, {{"axes", I{-1}}}, 13});
  c.push_back({"argmax_axis1_last", "ArgMax", {r({3, 50, 7}, 171)}, {{"axis", std::int64_t{1}}, {"select_last_index", std::int64_t{1}}}, 13});
  c.push_back({"argmin_no_keepdims", "ArgMin", {r({4, 33}, 172)}, {{"axis", std::int64_t{-1}}, {"keepdims", std::int64_t{0}}}, 13});
  // Rows longer than one block of 256 threads, and the optional statistics outputs.
  c.push_back({"layernorm_long_rows", "LayerNormalization", {r({3, 1000}, 173, -4, 6), r({1000}, 174), r({1000}, 175)},
               {{"epsilon", 1e-4f}}, 17, 3});
  c.push_back({"layernorm_axis1", "LayerNormalization", {r({2, 5, 30}, 176), r({5, 30}, 177)}, {{"axis", std::int64_t{1}}}, 17});
  c.push_back({"instancenorm", "InstanceNormalization", {r({2, 4, 33, 17}, 178, -2, 5), r({4}, 179), r({4}, 180)}, {}});
  // Indexing: negative indices, int32 indices, indices smaller than the data off the axis,
  // batch_dims, 8-byte (int64) data. Scatter targets are distinct (duplicates leave the result
  // open on the GPU).
  c.push_back({"gather_axis1_negative", "Gather", {r({3, 7, 4}, 181), random_indices({2, 3}, 7, 182)}, {{"axis", std::int64_t{1}}}, 13});
  c.push_back({"gather_int32_scalar_index", "Gather", {r({5, 6}, 183), Tensor::scalar<std::int32_t>(-2)}, {}, 13});
  c.push_back({"gather_int64_data_last_axis", "Gather", {random_indices({4, 9}, 50, 184), random_indices({5}, 9, 185)},
               {{"axis", std::int64_t{-1}}}, 13});
  c.push_back({"gather_elements_axis1", "GatherElements", {r({3, 5, 4}, 186), random_indices({2, 6, 3}, 5, 187)},
               {{"axis", std::int64_t{1}}}, 13});
  c.push_back({"gather_elements_int32_last", "GatherElements", {r({4, 7}, 188), random_indices({4, 3}, 7, 189, true)},
               {{"axis", std::int64_t{-1}}}, 13});
  c.push_back({"gather_nd_batch_dims1", "GatherND", {r({2, 5, 4, 3}, 190),
               Tensor::from_vector<std::int64_t>({2, 3, 2}, {0, 1, -1, 3, 4, -4, 2, 0, -5, 2, 1, 1})},
               {{"batch_dims", std::int64_t{1}}}, 13});
  c.push_back({"gather_nd_full_tuples", "GatherND", {r({4, 3, 2}, 191),
               Tensor::from_vector<std::int64_t>({5, 3}, {0, 0, 0, 3, 2, 1, -1, -1, -2, 1, 0, 1, 2, 1, 0})}, {}, 13});
  c.push_back({"scatter_elements_axis0", "ScatterElements", {r({6, 5}, 192),
               Tensor::from_vector<std::int64_t>({3, 5}, {0, 5, -1, 2, 3, -5, 1, 4, -3, 2, 4, -2, 0, 1, 5}), r({3, 5}, 193)},
               {{"axis", std::int64_t{0}}}, 13});
  c.push_back({"scatter_elements_int32_last_opset16", "ScatterElements", {r({3, 8}, 194),
               Tensor::from_vector<std::int32_t>({2, 3}, {7, 0, -3, 1, 2, 3}), r({2, 3}, 195)},
               {{"axis", std::int64_t{-1}}, {"reduction", std::string("none")}}, 16});
  c.push_back({"scatter_nd_rows", "ScatterND", {r({8, 4, 3}, 196), Tensor::from_vector<std::int64_t>({3, 1}, {5, -1, 0}),
               r({3, 4, 3}, 197)}, {}, 13});
  c.push_back({"scatter_nd_elements", "ScatterND", {r({4, 5}, 198),
               Tensor::from_vector<std::int64_t>({6, 2}, {0, 0, 3, 4, -1, 0, 1, -2, 2, 2, 0, 4}), r({6}, 199)}, {}, 13});
  // TopK: k up to the whole row, long rows (several passes of the block), ties in the order of
  // their indices, the smallest, an inner axis, k as the opset-1 attribute.
  c.push_back({"topk_largest_last", "TopK", {r({4, 300}, 200), ints({7})}, {}, 11, 2});
  c.push_back({"topk_smallest_axis1_ties", "TopK", {quantized({2, 50, 3}, 201), ints({20})},
               {{"axis", std::int64_t{1}}, {"largest", std::int64_t{0}}}, 11, 2});
  c.push_back({"topk_largest_ties_whole_row", "TopK", {quantized({3, 40}, 202), ints({40})}, {}, 11, 2});
  c.push_back({"topk_long_row_k1000", "TopK", {r({2, 5000}, 203), ints({1000})}, {}, 11, 2});
  c.push_back({"topk_attr_opset9", "TopK", {r({3, 10}, 204)}, {{"k", std::int64_t{3}}}, 9, 2});
  // GridSample: every mode with every padding, both align_corners, locations past the edges.
  {
    std::uint32_t seed = 210;
    for (const char* mode : {"bilinear", "nearest", "bicubic"}) {
      for (const char* padding : {"zeros", "border", "reflection"}) {
        for (std::int64_t align : {0, 1}) {
          c.push_back({std::string("gridsample_") + mode + "_" + padding + (align ? "_align" : ""), "GridSample",
                       {r({2, 3, 7, 9}, seed), r({2, 5, 6, 2}, seed + 1, -1.4, 1.4)},
                       {{"mode", std::string(mode)}, {"padding_mode", std::string(padding)}, {"align_corners", align}}, 16});
          seed += 2;
        }
      }
    }
  }
  // Pad: every mode, pads larger than the extent (reflect repeats periodically), a crop, opset 2.
  c.push_back({"pad_constant", "Pad", {r({2, 3, 7, 5}, 300), ints({0, 0, 1, 2, 0, 0, 3, 1}), scalar(0.5f)},
               {{"mode", std::string("constant")}}, 13});
  c.push_back({"pad_reflect_past_extent", "Pad", {r({1, 2, 3, 4}, 301), ints({0, 0, 4, 5, 0, 0, 2, 6})},
               {{"mode", std::string("reflect")}}, 13});
  c.push_back({"pad_edge_with_crop", "Pad", {r({2, 2, 6, 6}, 302), ints({0, 0, -2, 3, 0, 0, 1, -1})},
               {{"mode", std::string("edge")}}, 13});
  c.push_back({"pad_opset2_attributes", "Pad", {r({1, 3, 4, 4}, 303)},
               {{"pads", I{0, 0, 1, 1, 0, 0, 1, 1}}, {"value", 1.5f}}, 2});
  // Cast between the types the GPU holds (floats truncate toward zero; to bool is != 0).
  c.push_back({"cast_f32_to_i64", "Cast", {r({4, 33}, 310, -50, 50)}, {{"to", std::int64_t{7}}}, 13});
  c.push_back({"cast_f32_to_f16", "Cast", {r({4, 33}, 311, -50, 50)}, {{"to", std::int64_t{10}}}, 13});
  c.push_back({"cast_bool_to_f32", "Cast", {bools({1, 0, 0, 1, 1, 0}, {2, 3})}, {{"to", std::int64_t{1}}}, 13});
  c.push_back({"cast_f32_to_bool", "Cast", {r({3, 11}, 312, -1, 1)}, {{"to", std::int64_t{9}}}, 13});
  c.push_back({"cast_i64_to_f32", "Cast", {ints({-7, 0, 3, 1 << 20, 12})}, {{"to", std::int64_t{1}}}, 13});
  return c;
}

struct Param {
  OpCase op;
  Precision precision;
};
void PrintTo(const Param& p, std::ostream* os) { *os << p.op.name << "_" << precision_name(p.precision); }

std::vector<Param> params() {
  std::vector<Param> out;
  for (const OpCase& c : cases()) {
    if (c.all_precisions) {
      for (Precision p : {Precision::kFp32, Precision::kTf32, Precision::kFp16, Precision::kBf16}) out.push_back({c, p});
    } else {
      out.push_back({c, Precision::kFp32});
    }
  }
  return out;
}

class CudaKernelVsReference : public ::testing::TestWithParam<Param> {};

TEST_P(CudaKernelVsReference, AgreesWithinThePrecisionsBound) {
  RW_SKIP_WITHOUT_GPU();
  const Param& p = GetParam();
  const std::vector<Tensor> expected = run_provider(p.op, Device::kCpu, kReferenceProvider, Precision::kFp32);
  const std::vector<Tensor> actual = run_provider(p.op, Device::kCuda, kCudaProvider, p.precision);
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i) {
    ASSERT_EQ(actual[i].shape(), expected[i].shape()) << "output " << i;
    ASSERT_EQ(actual[i].dtype(), expected[i].dtype()) << "output " << i;
    const double err = testing::relative_l2(actual[i], expected[i]);
    EXPECT_LE(err, testing::tolerance(p.precision)) << p.op.name << " output " << i << " at " << precision_name(p.precision);
    if (p.precision == Precision::kFp32) {
      redwood::testing::expect_close(actual[i], expected[i], 1e-4, 1e-5);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, CudaKernelVsReference, ::testing::ValuesIn(params()),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           return info.param.op.name + "_" + std::string(precision_name(info.param.precision));
                         });

TEST(CudaKernelPlan, RejectsWhatItCannotRunWithTheNodesName) {
  // Host-only: plan() runs without a device.
  Graph graph;
  graph.opset = 17;
  Node node;
  node.name = "conv3d";
  node.op_type = "Conv";
  node.inputs = {"x", "w"};
  node.outputs = {"y"};
  KernelInfo info;
  info.graph = &graph;
  info.opset = 17;
  info.input_dtypes = {DType::kF32, DType::kF32};
  info.constant_inputs = {nullptr, nullptr};
  const KernelEntry* entry = OpRegistry::instance().candidates("Conv", Device::kCuda).at(0);
  auto kernel = entry->factory(node, info);
  auto* ck = dynamic_cast<CudaKernel*>(kernel.get());
  ASSERT_NE(ck, nullptr);
  std::vector<TensorDesc> in = {{DType::kF32, {1, 2, 4, 4, 4}}, {DType::kF32, {3, 2, 1, 1, 1}}};
  try {
    ck->plan(PlanInfo{node, in, Precision::kFp32, 17});
    FAIL() << "a 3-D convolution was planned";
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("conv3d"), std::string::npos) << e.what();
  }
  info.input_dtypes = {DType::kI64, DType::kF32};
  EXPECT_THROW(entry->factory(node, info), Unsupported);
}

TEST(CudaKernelPlan, SendsWhatItDoesNotRunToTheCpu) {
  // Host-only: factories and plan() run without a device.
  Graph graph;
  graph.opset = 18;
  auto make = [&](const std::string& op, std::vector<DType> dtypes, Attrs attrs) {
    Node node;
    node.name = "n_" + op;
    node.op_type = op;
    node.attributes = std::move(attrs);
    for (std::size_t i = 0; i < dtypes.size(); ++i) node.inputs.push_back("in" + std::to_string(i));
    node.outputs = op == "TopK" ? std::vector<std::string>{"v", "i"} : std::vector<std::string>{"y"};
    return node;
  };
  auto factory = [&](const Node& node, std::vector<DType> dtypes) {
    KernelInfo info;
    info.graph = &graph;
    info.opset = 18;
    info.input_dtypes = std::move(dtypes);
    info.constant_inputs.assign(info.input_dtypes.size(), nullptr);
    return OpRegistry::instance().candidates(node.op_type, Device::kCuda).at(0)->factory(node, info);
  };
  // Scatter reductions other than none.
  for (const char* op : {"ScatterElements", "ScatterND"}) {
    const Node node = make(op, {DType::kF32, DType::kI64, DType::kF32}, {{"reduction", std::string("add")}});
    EXPECT_THROW(factory(node, {DType::kF32, DType::kI64, DType::kF32}), Unsupported) << op;
  }
  // TopK: k over the kernel's limit, and K known only on the device.
  const Node topk = make("TopK", {DType::kF32, DType::kI64}, {});
  auto kernel = factory(topk, {DType::kF32, DType::kI64});
  auto* ck = dynamic_cast<CudaKernel*>(kernel.get());
  ASSERT_NE(ck, nullptr);
  const Tensor big_k = Tensor::from_vector<std::int64_t>({1}, {kernels::kTopKMaxK + 1});
  std::vector<TensorDesc> in = {{DType::kF32, {2, 10000}}, {DType::kI64, {1}, &big_k}};
  EXPECT_THROW(ck->plan(PlanInfo{topk, in, Precision::kFp32, 18}), Unsupported);
  in[1].host = nullptr;
  EXPECT_THROW(ck->plan(PlanInfo{topk, in, Precision::kFp32, 18}), Unsupported);
  const Tensor k = Tensor::from_vector<std::int64_t>({1}, {5});
  in[1].host = &k;
  const std::vector<TensorDesc> out = ck->plan(PlanInfo{topk, in, Precision::kFp32, 18});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].shape, (Shape{2, 5}));
  EXPECT_EQ(out[1].dtype, DType::kI64);
  // Gather: indices known on the host are checked as the reference kernel checks them.
  const Node gather = make("Gather", {DType::kF32, DType::kI64}, {});
  auto gk = factory(gather, {DType::kF32, DType::kI64});
  const Tensor bad = Tensor::from_vector<std::int64_t>({2}, {1, -4});
  std::vector<TensorDesc> gin = {{DType::kF32, {3, 2}}, {DType::kI64, {2}, &bad}};
  EXPECT_THROW(dynamic_cast<CudaKernel&>(*gk).plan(PlanInfo{gather, gin, Precision::kFp32, 18}), InvalidArgument);
  const Tensor good = Tensor::from_vector<std::int64_t>({2}, {1, -3});
  gin[1].host = &good;
  EXPECT_EQ(dynamic_cast<CudaKernel&>(*gk).plan(PlanInfo{gather, gin, Precision::kFp32, 18}).at(0).shape, (Shape{2, 2}));
}

}  // namespace
}  // namespace redwood::cuda
