// Kernel selection (core/kernel_select.hpp), on ops of this test's own registered in the global
// registry under names no model uses: providers from the highest priority down, Unsupported
// passing the node on, any other error ending the search, the reference filter, domains.

#include "core/kernel_select.hpp"

#include "core/error.hpp"
#include "core/ops/schema.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <atomic>

namespace redwood {
namespace {

class Accepted final : public Kernel {
 public:
  void run(KernelContext&) override {}
};

std::atomic<int> second_provider_asked{0};

KernelFactory refusing(const char* why) {
  return [why](const Node& node, const KernelInfo&) -> std::unique_ptr<Kernel> {
    throw Unsupported(node.where() + ": " + why);
  };
}

KernelFactory accepting() {
  return [](const Node&, const KernelInfo&) -> std::unique_ptr<Kernel> { return std::make_unique<Accepted>(); };
}

// Redwood's own op types need a schema before a kernel (core/ops/schema.hpp).
RW_OP_SCHEMA(ops::OpSchema{.op_type = "rw.test.FallThrough", .doc = "kernel selection's test op", .variadic_inputs = true});
RW_OP_SCHEMA(ops::OpSchema{.op_type = "rw.test.Refused", .doc = "kernel selection's test op", .variadic_inputs = true});
RW_OP_SCHEMA(ops::OpSchema{.op_type = "rw.test.Wrong", .doc = "kernel selection's test op", .variadic_inputs = true});

// rw.test.FallThrough: "fast" refuses, "steady" accepts, the reference accepts.
RW_REGISTER_PROVIDER_KERNEL("rw.test.FallThrough", Device::kCpu, "fast", 20, refusing("no such shapes"));
RW_REGISTER_PROVIDER_KERNEL("rw.test.FallThrough", Device::kCpu, "steady", 10, accepting());
RW_REGISTER_KERNEL("rw.test.FallThrough", Device::kCpu, accepting());
// rw.test.Refused: every provider refuses.
RW_REGISTER_PROVIDER_KERNEL("rw.test.Refused", Device::kCpu, "fast", 20, refusing("strides over 4"));
RW_REGISTER_KERNEL("rw.test.Refused", Device::kCpu, refusing("a rank-5 input"));
// rw.test.Wrong: the first provider finds the node itself wrong; the second must not be asked.
RW_REGISTER_PROVIDER_KERNEL("rw.test.Wrong", Device::kCpu, "fast", 20,
                            [](const Node& node, const KernelInfo&) -> std::unique_ptr<Kernel> {
                              throw InvalidArgument(node.where() + ": attribute 'axis' is 7 for rank 2");
                            });
RW_REGISTER_KERNEL("rw.test.Wrong", Device::kCpu,
                   [](const Node&, const KernelInfo&) -> std::unique_ptr<Kernel> {
                     ++second_provider_asked;
                     return std::make_unique<Accepted>();
                   });

Node node_of(const std::string& op_type, const std::string& domain = "") {
  Node n = testing::make_node("n1", op_type, {"x"}, {"y"});
  n.domain = domain;
  return n;
}

TEST(KernelSelect, UnsupportedPassesTheNodeToTheNextProvider) {
  const SelectedKernel s = select_kernel(node_of("rw.test.FallThrough"), KernelInfo{}, Device::kCpu);
  EXPECT_EQ(s.provider, "steady");
  ASSERT_NE(s.kernel, nullptr);
  const SelectedKernel ground_truth =
      select_kernel(node_of("rw.test.FallThrough"), KernelInfo{}, Device::kCpu, reference_provider_only);
  EXPECT_EQ(ground_truth.provider, kReferenceProvider);
}

TEST(KernelSelect, WhenEveryProviderRefusesEachReasonIsGivenAndTheNodeNamedOnce) {
  try {
    select_kernel(node_of("rw.test.Refused"), KernelInfo{}, Device::kCpu);
    FAIL() << "selected";
  } catch (const Unsupported& e) {
    const std::string what = e.what();
    EXPECT_EQ(what, "node 'n1' (rw.test.Refused): no cpu kernel accepts it (fast: strides over 4; reference: a rank-5 input)");
  }
  try {
    select_kernel(node_of("rw.test.Refused"), KernelInfo{}, Device::kCpu, reference_provider_only);
    FAIL() << "selected";
  } catch (const Unsupported& e) {
    EXPECT_EQ(std::string(e.what()), "node 'n1' (rw.test.Refused): a rank-5 input") << "one provider: its own words";
  }
}

TEST(KernelSelect, AnyOtherErrorEndsTheSearch) {
  second_provider_asked = 0;
  EXPECT_THROW(select_kernel(node_of("rw.test.Wrong"), KernelInfo{}, Device::kCpu), InvalidArgument);
  EXPECT_EQ(second_provider_asked.load(), 0);
}

TEST(KernelSelect, NoKernelAtAllSaysSoAndForeignDomainsHaveNone) {
  try {
    select_kernel(node_of("rw.test.Nothing"), KernelInfo{}, Device::kCpu);
    FAIL() << "selected";
  } catch (const Unsupported& e) {
    EXPECT_EQ(std::string(e.what()), "node 'n1' (rw.test.Nothing): op rw.test.Nothing has no cpu kernel");
  }
  EXPECT_THROW(select_kernel(node_of("rw.test.FallThrough", "com.microsoft"), KernelInfo{}, Device::kCpu), Unsupported);
  EXPECT_NO_THROW(select_kernel(node_of("rw.test.FallThrough", "ai.onnx"), KernelInfo{}, Device::kCpu));
}

}  // namespace
}  // namespace redwood
