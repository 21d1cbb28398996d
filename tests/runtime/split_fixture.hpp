#pragma once
// The model and options the partitioner's tests share (partition_test.cpp,
// partition_profile_test.cpp): a stand-in accelerator (stand_in_accelerator.hpp) that lacks
// Softmax, and a small model with a Softmax between two convolutions and shape arithmetic after.

#include "core/onnx/onnx_import.hpp"
#include "runtime/partition.hpp"
#include "runtime/stand_in_accelerator.hpp"
#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace redwood::runtime::split_fixture {

using redwood::testing::run_batch;
using redwood::testing::stand_in_profile;

/// The stand-in accelerator's device name (registered on first use).
inline const char* const kAccel = testing::stand_in_accelerator();

/// The CPU and the stand-in accelerator at `accel_gflops`, costed by the roofline alone:
/// placements that do not depend on this machine.
inline PartitionOptions options(double accel_gflops = 10000) {
  PartitionOptions o;
  o.devices = {"cpu", kAccel};
  o.profiles = {stand_in_profile("cpu", 10, 10), stand_in_profile(kAccel, accel_gflops, 1000)};
  o.use_analysis_times = false;
  return o;
}

/// x [N,4,8,8] -> Conv -> Softmax(channels) -> Conv -> y = reshape to [N, 512] (by shape
/// arithmetic on the conv's output), and z = conv1 + conv2.
inline std::shared_ptr<const Graph> model() {
  const auto dir = testing::temp_dir("partition");
  testing::OnnxBuilder b(13);
  b.input("x", onnx::TensorProto::FLOAT, {-1, 4, 8, 8}, {"N"});
  b.initializer("w1", testing::random_tensor(DType::kF32, {8, 4, 3, 3}, -0.5, 0.5, 1));
  b.initializer("b1", testing::random_tensor(DType::kF32, {8}, -0.5, 0.5, 2));
  b.initializer("w2", testing::random_tensor(DType::kF32, {8, 8, 3, 3}, -0.5, 0.5, 3));
  b.initializer("b2", testing::random_tensor(DType::kF32, {8}, -0.5, 0.5, 4));
  b.initializer("zero", Tensor::from_vector<std::int64_t>({}, {0}));
  b.initializer("axes", Tensor::from_vector<std::int64_t>({1}, {0}));
  b.initializer("minus_one", Tensor::from_vector<std::int64_t>({1}, {-1}));
  auto& c1 = b.node("Conv", {"x", "w1", "b1"}, {"c1"}, "conv1");
  testing::OnnxBuilder::set_attr(c1, "pads", std::vector<std::int64_t>{1, 1, 1, 1});
  auto& sm = b.node("Softmax", {"c1"}, {"p"}, "softmax");
  testing::OnnxBuilder::set_attr(sm, "axis", std::int64_t{1});
  auto& c2 = b.node("Conv", {"p", "w2", "b2"}, {"c2"}, "conv2");
  testing::OnnxBuilder::set_attr(c2, "pads", std::vector<std::int64_t>{1, 1, 1, 1});
  b.node("Shape", {"c2"}, {"shape"}, "shape");
  b.node("Gather", {"shape", "zero"}, {"n"}, "gather");
  b.node("Unsqueeze", {"n", "axes"}, {"n1"}, "unsqueeze");
  auto& cat = b.node("Concat", {"n1", "minus_one"}, {"target"}, "concat");
  testing::OnnxBuilder::set_attr(cat, "axis", std::int64_t{0});
  b.node("Reshape", {"c2", "target"}, {"y"}, "reshape");
  b.node("Add", {"c1", "c2"}, {"z"}, "add");
  b.output("y", onnx::TensorProto::FLOAT, {-1, 512}, {"N"});
  b.output("z", onnx::TensorProto::FLOAT, {-1, 8, 8, 8}, {"N"});
  b.save(dir / "split.onnx");
  return load_onnx(dir / "split.onnx");
}

/// The device of the first placed node of type `op`; "" when there is none.
inline std::string device_of(const Partition& p, const std::string& op) {
  const Graph& g = *p.analysis.graph;
  for (std::size_t i = 0; i < p.analysis.placeable.size(); ++i) {
    if (g.nodes[p.analysis.placeable[i]].op_type == op) return p.devices[static_cast<std::size_t>(p.placement.device[i])];
  }
  return "";
}

inline void expect_near(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.shape(), b.shape());
  const auto x = a.to_float_vector(), y = b.to_float_vector();
  for (std::size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], y[i], 1e-5) << "at " << i;
}

}  // namespace redwood::runtime::split_fixture
