// The schema of Redwood's own ops (core/ops/schema.hpp): every "rw." op a kernel is registered for
// has one, a kernel for an undeclared one is refused, and check_node holds nodes to their schema.

#include "core/ops/schema.hpp"

#include "core/error.hpp"
#include "core/op_registry.hpp"
#include "core/ops/names.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

namespace redwood {
namespace {

Node node_of(const std::string& op, std::vector<std::string> inputs, std::map<std::string, AttributeValue> attrs) {
  Node n;
  n.name = "n";
  n.op_type = op;
  n.inputs = std::move(inputs);
  n.outputs = {"y"};
  n.attributes = std::move(attrs);
  return n;
}

TEST(OpSchema, EveryRedwoodOpWithAKernelIsDeclared) {
  int redwood_ops = 0;
  for (Device d : {Device::kCpu, Device::kCuda}) {
    for (const std::string& op : OpRegistry::instance().ops(d)) {
      if (!ops::is_redwood_op(op)) continue;
      ++redwood_ops;
      const ops::OpSchema* s = ops::find_schema(op);
      ASSERT_NE(s, nullptr) << op;
      EXPECT_FALSE(s->doc.empty()) << op;
      for (const ops::AttrSchema& a : s->attributes) EXPECT_FALSE(a.doc.empty()) << op << " " << a.name;
    }
  }
  EXPECT_GE(redwood_ops, 9);  // the seven NHWC ops, the chain and the oneDNN region (reference kernels)
}

TEST(OpSchema, AKernelForAnUndeclaredOpIsRefused) {
  EXPECT_THROWS_SAYING(OpRegistry::instance().add("rw.test.Undeclared", Device::kCpu, KernelFactory{}), Error,
                       "has no schema", "core/ops/schema.cpp");
}

TEST(OpSchema, DeclaredOnceAndOnlyForRedwoodOps) {
  EXPECT_THROWS_SAYING(ops::register_schema({.op_type = ops::kConvNhwc, .doc = "again"}), Error, "declared twice");
  EXPECT_THROWS_SAYING(ops::register_schema({.op_type = "Conv", .doc = "not ours"}), Error, "start with \"rw.\"");
}

TEST(OpSchema, CheckNodeAcceptsWhatThePassesMake) {
  ops::check_node(node_of(ops::kToNhwc, {"x"},
                          {{"to", std::int64_t{10}}, {ops::attr::kChannels, std::int64_t{8}},
                           {ops::attr::kSpaceToDepth, std::int64_t{2}},
                           {ops::attr::kSpaceToDepthHw, std::vector<std::int64_t>{224, 224}}}));
  ops::check_node(node_of(ops::kConvNhwc, {"x", "w", "b", "", "x2"},
                          {{"strides", std::vector<std::int64_t>{1, 1}},  // ONNX's own, as the Conv had
                           {ops::attr::kActivation, std::string("Relu")},
                           {ops::attr::kShortcutStrides, std::vector<std::int64_t>{2, 2}}}));
  ops::check_node(node_of(ops::kElementwiseChain, {"x", "c0", "c1"},
                          {{ops::attr::kSteps, std::vector<std::string>{"Add", "Mul"}},
                           {ops::attr::kStepAlpha, std::vector<float>{0, 0}},
                           {ops::attr::kStepBeta, std::vector<float>{0, 0}},
                           {ops::attr::kStepOperand, std::vector<std::int64_t>{1, 2}},
                           {ops::attr::kStepSwapped, std::vector<std::int64_t>{0, 0}}}));
  // An ONNX op with the fused epilogue's attributes.
  ops::check_node(node_of("Conv", {"x", "w"}, {{ops::attr::kActivation, std::string("Relu")}}));
}

TEST(OpSchema, CheckNodeNamesWhatIsWrong) {
  const std::map<std::string, AttributeValue> to_nhwc{{"to", std::int64_t{10}}, {ops::attr::kChannels, std::int64_t{8}}};
  EXPECT_THROWS_SAYING(ops::check_node(node_of(ops::kToNhwc, {"x"}, {{"to", std::int64_t{10}}})), InvalidArgument,
                       "node 'n'", "'rw.channels' is required");
  auto wrong_type = to_nhwc;
  wrong_type[ops::attr::kChannels] = 8.f;
  EXPECT_THROWS_SAYING(ops::check_node(node_of(ops::kToNhwc, {"x"}, wrong_type)), InvalidArgument,
                       "'rw.channels' must be int, not float");
  auto unknown = to_nhwc;
  unknown["rw.chanels"] = std::int64_t{8};
  EXPECT_THROWS_SAYING(ops::check_node(node_of(ops::kToNhwc, {"x"}, unknown)), InvalidArgument,
                       "attribute 'rw.chanels' is not one of rw.ToNhwc's");
  auto onnx = to_nhwc;
  onnx["axis"] = std::int64_t{1};  // rw.ToNhwc takes no ONNX attributes
  EXPECT_THROWS_SAYING(ops::check_node(node_of(ops::kToNhwc, {"x"}, onnx)), InvalidArgument, "'axis'");
  EXPECT_THROWS_SAYING(ops::check_node(node_of(ops::kToNhwc, {"x", "extra"}, to_nhwc)), InvalidArgument,
                       "at most 1 inputs, not 2");
  EXPECT_THROWS_SAYING(ops::check_node(node_of(ops::kConvNhwc, {"x", ""}, {})), InvalidArgument,
                       "input 1 (W) is required");
  EXPECT_THROWS_SAYING(ops::check_node(node_of("rw.NoSuchOp", {"x"}, {})), InvalidArgument,
                       "rw.NoSuchOp is not an op Redwood declares");
  EXPECT_THROWS_SAYING(ops::check_node(node_of("Conv", {"x", "w"}, {{ops::attr::kActivation, std::int64_t{1}}})),
                       InvalidArgument, "'rw.activation' must be string, not int");
  EXPECT_THROWS_SAYING(ops::check_node(node_of("Conv", {"x", "w"}, {{"rw.activaton", std::string("Relu")}})),
                       InvalidArgument, "'rw.activaton' is not one of Conv's");
}

}  // namespace
}  // namespace redwood
