#include "core/error.hpp"
#include "runtime/executor.hpp"
#include "core/onnx/onnx_import.hpp"
#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>

namespace redwood {
namespace {

using testing::OnnxBuilder;
constexpr int kFloat = onnx::TensorProto::FLOAT;

// y = Relu(x + bias), with x: [N, 4] (N symbolic) and a constant bias from a Constant node.
OnnxBuilder add_relu_model() {
  OnnxBuilder b(13);
  b.input("x", kFloat, {-1, 4}, {"N"});
  b.initializer("bias", Tensor::from_vector<float>({4}, {1.f, -1.f, 0.5f, -0.5f}));
  b.node("Add", {"x", "bias"}, {"sum"}, "add");
  b.node("Relu", {"sum"}, {"y"});  // unnamed: the importer names it
  b.output("y", kFloat, {-1, 4}, {"N"});
  return b;
}

TEST(OnnxImport, BuildsTheIr) {
  auto graph = load_onnx_bytes(add_relu_model().bytes(), "add_relu.onnx");
  EXPECT_EQ(graph->opset, 13);
  ASSERT_EQ(graph->inputs.size(), 1u);
  EXPECT_EQ(graph->inputs[0].description(), "float[N, 4]");
  ASSERT_EQ(graph->nodes.size(), 2u);
  EXPECT_EQ(graph->nodes[0].name, "add");
  EXPECT_EQ(graph->nodes[1].name, "Relu_1");
  ASSERT_TRUE(graph->find_initializer("bias"));
  // shape inference gave the intermediate a type and shape
  const ValueInfo* sum = graph->find_value("sum");
  ASSERT_NE(sum, nullptr);
  EXPECT_EQ(sum->dtype, DType::kF32);
  EXPECT_EQ(sum->description(), "float[N, 4]");
}

TEST(OnnxImport, RunsWithDynamicBatch) {
  Executor exec(load_onnx_bytes(add_relu_model().bytes(), "add_relu.onnx"));
  for (std::int64_t n : {1, 3}) {
    Tensor x = testing::random_tensor(DType::kF32, {n, 4}, -2, 2, 7);
    auto out = exec.run({{"x", x}});
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(out[0].shape(), (Shape{n, 4}));
    const float bias[4] = {1.f, -1.f, 0.5f, -0.5f};
    for (std::int64_t i = 0; i < x.numel(); ++i) {
      const double expected = std::max(0.0, x.get_as_double(i) + bias[i % 4]);
      EXPECT_NEAR(out[0].get_as_double(i), expected, 1e-6);
    }
  }
}

TEST(OnnxImport, ConstantNodesBecomeInitializers) {
  OnnxBuilder b(13);
  b.input("x", kFloat, {2});
  auto& c = b.node("Constant", {}, {"k"}, "const");
  auto* attr = c.add_attribute();
  attr->set_name("value_floats");
  attr->set_type(onnx::AttributeProto::FLOATS);
  attr->add_floats(2.f);
  attr->add_floats(3.f);
  b.node("Mul", {"x", "k"}, {"y"}, "mul");
  b.output("y", kFloat, {2});
  auto graph = load_onnx_bytes(b.bytes(), "const.onnx");
  EXPECT_EQ(graph->nodes.size(), 1u);
  ASSERT_TRUE(graph->find_initializer("k"));
  Executor exec(graph);
  auto out = exec.run({{"x", Tensor::from_vector<float>({2}, {1.f, 2.f})}});
  EXPECT_EQ(out[0].to_float_vector(), (std::vector<float>{2.f, 6.f}));
}

// ONNX's shape inference divides by a convolution's or a pool's stride: a stride of 0 stopped the
// process with SIGFPE inside libonnx (the fuzzer's find). Now a clear error naming the node, also
// for dilations and kernel_shape, also in a subgraph.
TEST(OnnxImport, ZeroStridesAndKernelsAreErrorsBeforeShapeInference) {
  for (const char* attribute : {"strides", "dilations", "kernel_shape"}) {
    OnnxBuilder b(13);
    b.input("x", kFloat, {1, 1, 8, 8});
    auto& pool = b.node("MaxPool", {"x"}, {"y"}, "pool");
    OnnxBuilder::set_attr(pool, "kernel_shape", std::vector<std::int64_t>{2, 2});
    OnnxBuilder::set_attr(pool, attribute, std::vector<std::int64_t>{0, 2});
    b.output("y", kFloat, {1, 1, 4, 4});
    try {
      load_onnx_bytes(b.bytes(), "pool.onnx");
      ADD_FAILURE() << attribute << " 0 was accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(fmt::format("pool.onnx: node 'pool' (MaxPool): {} must be positive, not 0",
                                                       attribute)),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(OnnxImport, MissingFileIsAnIoError) {
  try {
    load_onnx("/nonexistent/model.onnx");
    FAIL() << "no exception";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/model.onnx: no such file"), std::string::npos) << e.what();
  }
}

TEST(OnnxImport, TruncatedFileIsRejected) {
  OnnxBuilder b = add_relu_model();
  b.initializer("big", testing::random_tensor(DType::kF32, {256}));
  const std::string bytes = b.bytes();
  const auto dir = testing::temp_dir("truncated");
  const auto file = dir / "truncated.onnx";
  std::ofstream(file, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  try {
    load_onnx(file);
    FAIL() << "no exception";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not a valid ONNX model"), std::string::npos) << e.what();
  }
}

TEST(OnnxImport, GarbageAndEmptyAreRejected) {
  EXPECT_THROW(load_onnx_bytes("this is not a protobuf at all \xff\xff\xff", "garbage.onnx"), InvalidArgument);
  EXPECT_THROW(load_onnx_bytes("", "empty.onnx"), InvalidArgument);
}

TEST(OnnxImport, CheckerErrorsNameTheModel) {
  OnnxBuilder b(13);
  b.input("x", kFloat, {2});
  b.node("Relu", {"x", "x", "x"}, {"y"}, "relu");  // Relu takes one input
  b.output("y", kFloat, {2});
  try {
    load_onnx_bytes(b.bytes(), "bad_arity.onnx");
    FAIL() << "no exception";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("bad_arity.onnx"), std::string::npos) << e.what();
  }
}

TEST(OnnxImport, SubgraphsAreUnsupportedAndNamed) {
  OnnxBuilder b(13);
  b.input("cond", onnx::TensorProto::BOOL, {});
  auto& n = b.node("If", {"cond"}, {"y"}, "branch");
  for (const char* key : {"then_branch", "else_branch"}) {
    auto* a = n.add_attribute();
    a->set_name(key);
    a->set_type(onnx::AttributeProto::GRAPH);
    auto* g = a->mutable_g();
    g->set_name(key);
    auto* out = g->add_output();
    out->set_name(std::string(key) + "_out");
    out->mutable_type()->mutable_tensor_type()->set_elem_type(kFloat);
    out->mutable_type()->mutable_tensor_type()->mutable_shape();
    auto* c = g->add_node();
    c->set_op_type("Constant");
    c->add_output(std::string(key) + "_out");
    auto* v = c->add_attribute();
    v->set_name("value_float");
    v->set_type(onnx::AttributeProto::FLOAT);
    v->set_f(1.f);
  }
  b.output("y", kFloat, {2});
  try {
    load_onnx_bytes(b.bytes(), "if.onnx");
    FAIL() << "no exception";
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("node 'branch' (If)"), std::string::npos) << e.what();
  }
}

TEST(OnnxImport, UnsupportedElementTypeIsNamed) {
  OnnxBuilder b(13);
  b.input("x", onnx::TensorProto::DOUBLE, {2});
  b.node("Relu", {"x"}, {"y"}, "relu");
  b.output("y", onnx::TensorProto::DOUBLE, {2});
  try {
    load_onnx_bytes(b.bytes(), "double.onnx");
    FAIL() << "no exception";
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("input 'x' has element type double"), std::string::npos) << e.what();
  }
}

// y = Gather(table, i): a float32[2, 2] initializer "table" that the tests below reshape.
OnnxBuilder gather_model() {
  OnnxBuilder b(13);
  b.input("i", onnx::TensorProto::INT64, {1});
  b.initializer("table", Tensor::zeros(DType::kF32, {2, 2}));
  b.node("Gather", {"table", "i"}, {"y"}, "gather");
  b.output("y", kFloat, {1, 2});
  return b;
}

// An initializer whose dims' product wraps around 64 bits ([2^62+1, 4] is 4 elements modulo 2^64)
// with 16 bytes of data: the load refuses it naming the tensor, where the wrapped count once
// matched the data and constant folding through Gather read far past it.
TEST(OnnxImport, InitializerDimsWhoseProductOverflowsAreRefused) {
  OnnxBuilder b = gather_model();
  onnx::TensorProto& table = *b.model().mutable_graph()->mutable_initializer(0);
  table.clear_dims();
  table.add_dims((std::int64_t{1} << 62) + 1);
  table.add_dims(4);
  table.set_raw_data(std::string(16, '\0'));
  table.clear_float_data();
  try {
    load_onnx_bytes(b.bytes(), "wrap.onnx");
    FAIL() << "no exception";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'table': shape [4611686018427387905, 4] has more than 2^56 elements"),
              std::string::npos)
        << e.what();
  }
}

// An initializer whose dims ask for far more than the data it holds ([2^20, 2^20] floats, 4 TiB,
// with 16 bytes): refused for its data before anything is allocated (it was allocated first, and
// refused only when the allocation failed, if it failed).
TEST(OnnxImport, InitializerDataIsCheckedBeforeItsSizeIsAllocated) {
  for (const bool raw : {true, false}) {
    OnnxBuilder b = gather_model();
    onnx::TensorProto& table = *b.model().mutable_graph()->mutable_initializer(0);
    table.clear_dims();
    table.add_dims(std::int64_t{1} << 20);
    table.add_dims(std::int64_t{1} << 20);
    table.clear_raw_data();
    table.clear_float_data();
    if (raw) {
      table.set_raw_data(std::string(16, '\0'));
    } else {
      for (int k = 0; k < 4; ++k) table.add_float_data(0.f);
    }
    try {
      load_onnx_bytes(b.bytes(), "huge.onnx");
      FAIL() << "no exception";
    } catch (const InvalidArgument& e) {
      const std::string want = raw ? "tensor 'table' holds 16 bytes of raw data but float[1048576, 1048576] needs"
                                   : "tensor 'table' holds 4 values but float[1048576, 1048576] needs";
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  }
}

TEST(OnnxImport, OpWithoutKernelFailsAtLoadNamingTheNode) {
  OnnxBuilder b(13);
  b.input("x", kFloat, {2});
  b.node("RandomNormalLike", {"x"}, {"y"}, "noise_1");  // a valid ONNX op Redwood has no kernel for
  b.output("y", kFloat, {2});
  try {
    Executor exec(load_onnx_bytes(b.bytes(), "noise.onnx"));
    FAIL() << "no exception";
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("node 'noise_1' (RandomNormalLike): op RandomNormalLike has no cpu kernel"),
              std::string::npos)
        << e.what();
  }
}

TEST(Executor, RejectsWrongInputs) {
  Executor exec(load_onnx_bytes(add_relu_model().bytes(), "add_relu.onnx"));
  auto message = [&](const std::map<std::string, Tensor>& feeds) -> std::string {
    try {
      exec.run(feeds);
    } catch (const InvalidArgument& e) {
      return e.what();
    }
    return "no exception";
  };
  EXPECT_NE(message({}).find("input 'x' (float[N, 4]) is not given"), std::string::npos);
  EXPECT_NE(message({{"x", Tensor::zeros(DType::kF32, {2, 5})}}).find("dimension 1 differs"), std::string::npos);
  EXPECT_NE(message({{"x", Tensor::zeros(DType::kF32, {4})}}).find("expects rank 2"), std::string::npos);
  EXPECT_NE(message({{"x", Tensor::zeros(DType::kI64, {2, 4})}}).find("expects float[N, 4] but was given int64[2, 4]"),
            std::string::npos);
  EXPECT_NE(message({{"x", Tensor::zeros(DType::kF32, {2, 4})}, {"z", Tensor::zeros(DType::kF32, {1})}})
                .find("no input named 'z'"),
            std::string::npos);
}

TEST(Executor, SymbolicDimensionsMustAgreeAcrossInputs) {
  OnnxBuilder b(13);
  b.input("a", kFloat, {-1, 2}, {"N"});
  b.input("b", kFloat, {-1, 2}, {"N"});
  b.node("Add", {"a", "b"}, {"y"}, "add");
  b.output("y", kFloat, {-1, 2}, {"N"});
  Executor exec(load_onnx_bytes(b.bytes(), "two_inputs.onnx"));
  EXPECT_NO_THROW(exec.run({{"a", Tensor::zeros(DType::kF32, {3, 2})}, {"b", Tensor::zeros(DType::kF32, {3, 2})}}));
  EXPECT_THROW(exec.run({{"a", Tensor::zeros(DType::kF32, {3, 2})}, {"b", Tensor::zeros(DType::kF32, {1, 2})}}),
               InvalidArgument);
}

TEST(Executor, ProfilingTimesEveryNode) {
  ExecutorOptions options;
  options.optimize = false;  // optimized, Add and Relu would be one oneDNN region (one node)
  Executor exec(load_onnx_bytes(add_relu_model().bytes(), "add_relu.onnx"), options);
  exec.set_profiling(true);
  exec.run({{"x", Tensor::zeros(DType::kF32, {1, 4})}});
  ASSERT_EQ(exec.last_timings().size(), 2u);
  EXPECT_EQ(exec.last_timings()[0].op_type, "Add");
  EXPECT_EQ(exec.last_timings()[1].op_type, "Relu");
}

TEST(OnnxTensor, ReadsSerializedTensorProto) {
  onnx::TensorProto proto;
  proto.set_data_type(onnx::TensorProto::INT64);
  proto.add_dims(3);
  for (std::int64_t v : {4, -5, 6}) proto.add_int64_data(v);
  const auto file = testing::temp_dir("tensorproto") / "t.pb";
  std::ofstream(file, std::ios::binary) << proto.SerializeAsString();
  Tensor t = load_onnx_tensor(file);
  EXPECT_EQ(t.to_int64_vector(), (std::vector<std::int64_t>{4, -5, 6}));
  proto.add_int64_data(7);  // 4 values for 3 elements
  std::ofstream(file, std::ios::binary | std::ios::trunc) << proto.SerializeAsString();
  EXPECT_THROW(load_onnx_tensor(file), InvalidArgument);
}

}  // namespace
}  // namespace redwood
