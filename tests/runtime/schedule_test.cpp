// The schedule both executables share (runtime/schedule.hpp): the dataflow's ids and last readers,
// the shape chains, the input validator, and build_schedule with a stand-in device planner (the
// CUDA schedule's own cases, on the shipped models, are in tests/backends/cuda/graph_runner_test.cpp).

#include "runtime/schedule.hpp"

#include "core/error.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace redwood::runtime {
namespace {

using testing::make_node;

Tensor int64s(std::vector<std::int64_t> v) {
  return Tensor::from_vector<std::int64_t>({static_cast<std::int64_t>(v.size())}, v);
}

ValueInfo input(const std::string& name, std::vector<Dim> dims) {
  return ValueInfo{name, DType::kF32, 0, true, std::move(dims)};
}

// y = Reshape(Relu(x), Concat(Unsqueeze(Gather(Shape(Relu(x)), 0)), [-1])) + nothing else: the
// shape chain exporters leave to flatten all but the first dimension.
Graph flatten_by_shape_chain() {
  Graph g;
  g.name = "flatten";
  g.opset = 13;
  g.inputs.push_back(input("x", {Dim{-1, "N"}, Dim{4, ""}, Dim{-1, "W"}}));
  g.initializers["zero"] = Tensor::scalar<std::int64_t>(0);
  g.initializers["axes"] = int64s({0});
  g.initializers["rest"] = int64s({-1});
  Node concat = make_node("concat", "Concat", {"n1", "rest"}, {"target"});
  concat.attributes["axis"] = std::int64_t{0};
  g.nodes = {make_node("relu", "Relu", {"x"}, {"r"}),
             make_node("shape", "Shape", {"r"}, {"s"}),
             make_node("gather", "Gather", {"s", "zero"}, {"n"}),
             make_node("unsqueeze", "Unsqueeze", {"n", "axes"}, {"n1"}),
             concat,
             make_node("reshape", "Reshape", {"r", "target"}, {"y"})};
  g.outputs = {ValueInfo{"y", DType::kF32, 0, false, {}}};
  return g;
}

// a = Relu(x), b = Relu(a), c = Relu(b), y = Concat(b, c) on channels: a is dead once b exists,
// and at batch 1 b and c are written straight into y.
Graph relu_chain_into_concat() {
  Graph g;
  g.name = "chain";
  g.opset = 13;
  g.inputs.push_back(input("x", {Dim{-1, "N"}, Dim{64, ""}, Dim{8, ""}, Dim{8, ""}}));
  Node concat = make_node("concat", "Concat", {"b", "c"}, {"y"});
  concat.attributes["axis"] = std::int64_t{1};
  g.nodes = {make_node("relu_a", "Relu", {"x"}, {"a"}), make_node("relu_b", "Relu", {"a"}, {"b"}),
             make_node("relu_c", "Relu", {"b"}, {"c"}), concat};
  g.outputs = {ValueInfo{"y", DType::kF32, 0, false, {}}};
  return g;
}

class NoRun final : public Kernel {
 public:
  void run(KernelContext&) override { throw Error("a stand-in planner's kernel does not run"); }
};

// A device that plans Relu (same shape), Concat (extents summed on the axis) and Reshape (its
// target, which must be known on the host), with 1 KiB of scratch for Relu; nothing else.
StepPlan stand_in_planner(const Graph&, const Node& node, const std::vector<TensorDesc>& in) {
  StepPlan p;
  p.kernel = std::make_unique<NoRun>();
  p.provider = "stand-in";
  if (node.op_type == "Relu") {
    p.outputs = {in[0]};
    p.outputs[0].host = nullptr;
    p.workspace_bytes = 1024;
  } else if (node.op_type == "Concat") {
    TensorDesc out{in[0].dtype, in[0].shape, nullptr};
    const auto axis = static_cast<std::size_t>(node.attr_int("axis", 0));
    for (std::size_t i = 1; i < in.size(); ++i) out.shape[axis] += in[i].shape[axis];
    p.outputs = {out};
  } else if (node.op_type == "Reshape") {
    if (in[1].host == nullptr) throw Unsupported(node.where() + ": the target is not known on the host");
    const std::int64_t numel = shape_numel(in[0].shape);
    Shape shape(in[1].host->data<std::int64_t>(), in[1].host->data<std::int64_t>() + in[1].host->numel());
    std::int64_t known = 1;
    for (auto d : shape) known *= d > 0 ? d : 1;
    for (auto& d : shape) d = d < 0 ? numel / known : d;
    p.outputs = {TensorDesc{in[0].dtype, shape, nullptr}};
  } else {
    throw Unsupported(node.where() + ": the stand-in device has no " + node.op_type);
  }
  return p;
}

const Schedule::Value& value_named(const Schedule& s, const std::string& name) {
  const auto it = std::find_if(s.values.begin(), s.values.end(), [&](const Schedule::Value& v) { return v.name == name; });
  EXPECT_NE(it, s.values.end()) << name;
  return *it;
}

bool overlap(const Schedule::Value& a, const Schedule::Value& b) {
  return a.offset < b.offset + b.bytes() && b.offset < a.offset + a.bytes();
}

TEST(Dataflow, IdsReadersAndOutputsOfEveryValue) {
  const Graph g = flatten_by_shape_chain();
  const Dataflow f = make_dataflow(g);
  EXPECT_EQ(f.size(), 10u);  // x, three initializers, six node outputs
  EXPECT_EQ(f.names[static_cast<std::size_t>(f.graph_inputs[0])], "x");
  EXPECT_EQ(f.names[static_cast<std::size_t>(f.graph_outputs[0])], "y");
  const auto r = static_cast<std::size_t>(f.ids.at("r"));
  EXPECT_EQ(f.last_use[r], 5) << "r is read by Shape (1) and last by Reshape (5)";
  EXPECT_EQ(f.last_use[static_cast<std::size_t>(f.ids.at("y"))], -1);
  EXPECT_TRUE(f.is_graph_output[static_cast<std::size_t>(f.ids.at("y"))]);
  EXPECT_NE(f.initializers[static_cast<std::size_t>(f.ids.at("zero"))], nullptr);
  EXPECT_EQ(f.initializers[static_cast<std::size_t>(f.ids.at("s"))], nullptr);
  EXPECT_EQ(f.node_inputs[2], (std::vector<int>{f.ids.at("s"), f.ids.at("zero")}));
}

TEST(Dataflow, RefusesAValueNothingProducesNamingTheNode) {
  Graph g = relu_chain_into_concat();
  g.nodes[1].inputs[0] = "nowhere";
  EXPECT_THROWS_SAYING(make_dataflow(g), InvalidArgument, "node 'relu_b'", "'nowhere' is produced by nothing");
  Graph late = relu_chain_into_concat();
  std::swap(late.nodes[0], late.nodes[1]);  // b's producer reads a before a exists
  EXPECT_THROW(make_dataflow(late), InvalidArgument);
  Graph output = relu_chain_into_concat();
  output.outputs[0].name = "missing";
  EXPECT_THROWS_SAYING(make_dataflow(output), InvalidArgument, "graph output 'missing'");
}

TEST(Dataflow, FindsTheShapeChainAndNothingElse) {
  const Graph g = flatten_by_shape_chain();
  const std::vector<bool> chain = shape_determined_nodes(g, make_dataflow(g));
  EXPECT_EQ(chain, (std::vector<bool>{false, true, true, true, true, false}));
  const Graph plain = relu_chain_into_concat();
  const std::vector<bool> none = shape_determined_nodes(plain, make_dataflow(plain));
  EXPECT_EQ(std::count(none.begin(), none.end(), true), 0);
}

TEST(InputChecks, NameTheModelTheInputAndWhatDiffers) {
  Graph g = relu_chain_into_concat();
  g.inputs.push_back(input("z", {Dim{-1, "N"}}));
  EXPECT_NO_THROW(check_input_shapes(g, {{2, 64, 8, 8}, {2}}));
  EXPECT_THROWS_SAYING(check_input_shapes(g, {{2, 64, 8, 8}}), InvalidArgument, "1 input shapes for 2");
  EXPECT_THROWS_SAYING(check_input_shapes(g, {{2, 64, 8}, {2}}), InvalidArgument, "input 'x' expects rank 4");
  EXPECT_THROWS_SAYING(check_input_shapes(g, {{2, 32, 8, 8}, {2}}), InvalidArgument, "dimension 1 differs");
  EXPECT_THROWS_SAYING(check_input_shapes(g, {{2, 64, 8, 8}, {3}}), InvalidArgument,
                          "dimension 'N' of input 'z' is 3 but another input bound it to 2");
  std::map<std::string, Tensor> feeds{{"x", Tensor::zeros(DType::kF32, {1, 64, 8, 8})}};
  EXPECT_THROWS_SAYING(check_inputs(g, feeds, Device::kCpu), InvalidArgument, "input 'z'", "is not given");
  feeds["z"] = Tensor::zeros(DType::kF32, {1});
  EXPECT_NO_THROW(check_inputs(g, feeds, Device::kCpu));
  feeds["w"] = Tensor::zeros(DType::kF32, {1});
  EXPECT_THROWS_SAYING(check_inputs(g, feeds, Device::kCpu), InvalidArgument, "no input named 'w'", "x, z");
  feeds.erase("w");
  feeds["z"] = Tensor::zeros(DType::kI64, {1});
  EXPECT_THROWS_SAYING(check_inputs(g, feeds, Device::kCpu), InvalidArgument, "input 'z' expects");
}

TEST(Schedule, EvaluatesTheShapeChainOnTheHostAndPlansTheRest) {
  const Graph g = flatten_by_shape_chain();
  const Schedule s = build_schedule(g, {{2, 4, 5}}, stand_in_planner);
  EXPECT_EQ(s.host_nodes, 4u) << "Shape, Gather, Unsqueeze and Concat";
  ASSERT_EQ(s.steps.size(), 2u);
  EXPECT_EQ(g.nodes[s.steps[0].node].op_type, "Relu");
  EXPECT_EQ(g.nodes[s.steps[1].node].op_type, "Reshape");
  const Schedule::Value& target = value_named(s, "target");
  EXPECT_EQ(target.kind, Schedule::Kind::kHost);
  EXPECT_TRUE(target.uploaded) << "a device step reads it";
  EXPECT_EQ(std::vector<std::int64_t>(target.host.data<std::int64_t>(), target.host.data<std::int64_t>() + 2),
            (std::vector<std::int64_t>{2, -1}));
  EXPECT_EQ(value_named(s, "y").shape, (Shape{2, 20}));
  EXPECT_EQ(s.steps[0].workspace >= 0, true) << "Relu asked for scratch";
  EXPECT_EQ(s.values[static_cast<std::size_t>(s.steps[0].workspace)].bytes(), 1024u);
}

TEST(Schedule, ValuesThatLiveApartShareBytesAndConcatInputsAreWrittenInPlace) {
  const Graph g = relu_chain_into_concat();
  const Schedule s = build_schedule(g, {{1, 64, 8, 8}}, stand_in_planner);
  const Schedule::Value &x = value_named(s, "x"), &a = value_named(s, "a"), &b = value_named(s, "b"),
                        &c = value_named(s, "c"), &y = value_named(s, "y");
  EXPECT_EQ(x.kind, Schedule::Kind::kGraphInput);
  EXPECT_EQ(b.alias_of, static_cast<int>(&y - s.values.data()));
  EXPECT_EQ(c.alias_of, static_cast<int>(&y - s.values.data()));
  EXPECT_EQ(b.offset, y.offset);
  EXPECT_EQ(c.offset, y.offset + b.bytes());
  EXPECT_FALSE(overlap(a, y)) << "a is read by relu_b, which writes into y";
  EXPECT_GE(s.workspace.workspace_bytes, s.workspace.lower_bound);
  // At batch 2 the channels of a row are not contiguous in y: b and c get places of their own.
  const Schedule two = build_schedule(g, {{2, 64, 8, 8}}, stand_in_planner);
  EXPECT_EQ(value_named(two, "b").alias_of, -1);
  EXPECT_FALSE(overlap(value_named(two, "b"), value_named(two, "y")));
}

TEST(Schedule, ThePlannersRefusalNamesTheNode) {
  Graph g = relu_chain_into_concat();
  g.nodes[2].op_type = "Softsign";
  EXPECT_THROWS_SAYING(build_schedule(g, {{1, 64, 8, 8}}, stand_in_planner), Unsupported, "node 'relu_c'",
                          "no Softsign");
  EXPECT_THROWS_SAYING(build_schedule(g, {{1, 64, 8}}, stand_in_planner), InvalidArgument, "expects rank 4");
}

}  // namespace
}  // namespace redwood::runtime
