// The oneDNN provider against the reference kernels (the ground truth) on random shapes: every
// case builds a one-node graph and runs it once with the reference provider only and once with
// the default providers (oneDNN first), and checks that oneDNN actually took the node.

#include "runtime/executor.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

namespace redwood {
namespace {

using testing::Ints;
using testing::random_tensor;

// inputs: (name, tensor, constant?)
void compare(const std::string& op, const std::vector<std::tuple<std::string, Tensor, bool>>& inputs,
             std::map<std::string, AttributeValue> attrs = {}, std::int64_t opset = 17) {
  auto g = std::make_shared<Graph>();
  g->opset = opset;
  Node n;
  n.name = "n";
  n.op_type = op;
  n.attributes = std::move(attrs);
  std::map<std::string, Tensor> feeds;
  for (const auto& [name, t, constant] : inputs) {
    n.inputs.push_back(name);
    if (name.empty()) continue;
    if (constant) {
      g->initializers[name] = t;
    } else {
      ValueInfo vi;
      vi.name = name;
      vi.dtype = t.dtype();
      g->inputs.push_back(vi);
      feeds[name] = t;
    }
  }
  n.outputs = {"y"};
  g->nodes.push_back(n);
  g->outputs.push_back(ValueInfo{"y", DType::kF32, 0, false, {}});
  ExecutorOptions ref;
  ref.optimize = false;
  ref.reference_only = true;
  ExecutorOptions fast;
  fast.optimize = false;
  Executor r(g, ref), f(g, fast);
  EXPECT_EQ(f.node_providers()[0], "onednn");
  testing::expect_close(f.run(feeds)[0], r.run(feeds)[0], 1e-4, 1e-4);
}

TEST(OneDnn, ConvGroupedDepthwiseDilatedStridedWithPostOps) {
  struct Case { Shape x; Shape w; std::int64_t group; Ints strides, dil, pads; const char* act; bool residual; };
  const Case cases[] = {
      {{1, 3, 17, 19}, {8, 3, 3, 3}, 1, {2, 2}, {1, 1}, {1, 1, 1, 1}, "Relu", false},
      {{2, 8, 12, 12}, {8, 4, 3, 3}, 2, {1, 1}, {2, 2}, {2, 2, 2, 2}, "HardSwish", true},
      {{1, 16, 15, 15}, {16, 1, 5, 5}, 16, {2, 2}, {1, 1}, {2, 2, 2, 2}, "HardSigmoid", false},
      {{1, 16, 10, 10}, {32, 16, 1, 1}, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, "Clip", true},
      {{1, 4, 9, 7}, {6, 4, 3, 2}, 1, {1, 2}, {1, 1}, {0, 1, 1, 0}, "LeakyRelu", false},
      {{1, 4, 9, 9}, {4, 4, 3, 3}, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}, "Sigmoid", true},
  };
  std::uint32_t seed = 1;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.act);
    std::map<std::string, AttributeValue> attrs{{"group", c.group}, {"strides", c.strides}, {"dilations", c.dil},
                                                {"pads", c.pads}, {"rw.activation", std::string(c.act)}};
    if (std::string(c.act) == "Clip") attrs["rw.alpha"] = -0.3f, attrs["rw.beta"] = 0.4f;
    std::vector<std::tuple<std::string, Tensor, bool>> ins{
        {"x", random_tensor(DType::kF32, c.x, -1, 1, seed++), false},
        {"w", random_tensor(DType::kF32, c.w, -1, 1, seed++), true},
        {"b", random_tensor(DType::kF32, {c.w[0]}, -1, 1, seed++), true}};
    if (c.residual) {
      // Output shape via the reference kernel's own arithmetic (same as the pads above).
      const std::int64_t oh = (c.x[2] + c.pads[0] + c.pads[2] - ((c.w[2] - 1) * c.dil[0] + 1)) / c.strides[0] + 1;
      const std::int64_t ow = (c.x[3] + c.pads[1] + c.pads[3] - ((c.w[3] - 1) * c.dil[1] + 1)) / c.strides[1] + 1;
      ins.emplace_back("r", random_tensor(DType::kF32, {c.x[0], c.w[0], oh, ow}, -1, 1, seed++), false);
    }
    compare("Conv", ins, attrs);
  }
}

TEST(OneDnn, ConvTransposeGroupedStrided) {
  compare("ConvTranspose",
          {{"x", random_tensor(DType::kF32, {1, 4, 7, 6}, -1, 1, 3), false},
           {"w", random_tensor(DType::kF32, {4, 3, 2, 2}, -1, 1, 4), true},
           {"b", random_tensor(DType::kF32, {6}, -1, 1, 5), true}},
          {{"group", std::int64_t{2}}, {"strides", Ints{2, 2}}, {"rw.activation", std::string("Relu")}});
  compare("ConvTranspose",
          {{"x", random_tensor(DType::kF32, {2, 3, 5, 5}, -1, 1, 6), false},
           {"w", random_tensor(DType::kF32, {3, 5, 3, 3}, -1, 1, 7), true}},
          {{"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}, {"output_padding", Ints{1, 1}}});
}

TEST(OneDnn, MatMulAndGemmWithPostOps) {
  compare("MatMul", {{"a", random_tensor(DType::kF32, {3, 7, 16}, -1, 1, 1), false},
                     {"b", random_tensor(DType::kF32, {16, 5}, -1, 1, 2), true},
                     {"bias", random_tensor(DType::kF32, {5}, -1, 1, 3), true},
                     {"r", random_tensor(DType::kF32, {3, 7, 5}, -1, 1, 4), false}},
          {{"rw.activation", std::string("Relu")}});
  compare("MatMul", {{"a", random_tensor(DType::kF32, {2, 3, 4, 8}, -1, 1, 5), false},
                     {"b", random_tensor(DType::kF32, {2, 1, 8, 6}, -1, 1, 6), false}});
  compare("Gemm", {{"a", random_tensor(DType::kF32, {8, 5}, -1, 1, 7), false},
                   {"b", random_tensor(DType::kF32, {6, 8}, -1, 1, 8), true},
                   {"c", random_tensor(DType::kF32, {6}, -1, 1, 9), true}},
          {{"transA", std::int64_t{1}}, {"transB", std::int64_t{1}}, {"alpha", 0.5f}, {"beta", 2.0f},
           {"rw.activation", std::string("Sigmoid")}});
}

TEST(OneDnn, Pooling) {
  const Tensor x = random_tensor(DType::kF32, {2, 3, 11, 13}, -1, 1, 11);
  compare("MaxPool", {{"x", x, false}}, {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}});
  compare("MaxPool", {{"x", x, false}}, {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"ceil_mode", std::int64_t{1}}});
  compare("AveragePool", {{"x", x, false}}, {{"kernel_shape", Ints{3, 2}}, {"strides", Ints{2, 1}}, {"pads", Ints{1, 0, 1, 1}}});
  compare("AveragePool", {{"x", x, false}}, {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}, {"count_include_pad", std::int64_t{1}}});
  compare("GlobalAveragePool", {{"x", x, false}});
}

TEST(OneDnn, EltwiseBinaryWithBroadcastAndSoftmax) {
  const Tensor x = random_tensor(DType::kF32, {2, 3, 4, 5}, -4, 4, 21);
  for (const char* op : {"Tanh", "HardSwish", "LeakyRelu"}) compare(op, {{"x", x, false}});
  compare("Sqrt", {{"x", random_tensor(DType::kF32, {7, 3}, 0.1, 4, 22), false}});
  compare("Clip", {{"x", x, false}, {"lo", Tensor::scalar<float>(-1.f), true}, {"hi", Tensor::scalar<float>(2.f), true}});
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
    SCOPED_TRACE(op);
    compare(op, {{"a", x, false}, {"b", random_tensor(DType::kF32, {3, 1, 5}, 0.5, 2, 23), false}});
    compare(op, {{"a", x, false}, {"b", random_tensor(DType::kF32, {2, 3, 4, 5}, 0.5, 2, 24), false}});
  }
  compare("Add", {{"a", random_tensor(DType::kF32, {1, 3, 1, 1}, -1, 1, 25), false}, {"b", x, false}});
  compare("Softmax", {{"x", x, false}}, {{"axis", std::int64_t{1}}});
  compare("Softmax", {{"x", x, false}}, {{"axis", std::int64_t{2}}}, 11);
}

}  // namespace
}  // namespace redwood
