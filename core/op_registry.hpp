#pragma once
// The op registry maps (op type, device) to kernel factories from one or more providers. Backends
// register what they support at the bottom of the file that defines the kernel
// (RW_REGISTER_KERNEL for the reference kernels, RW_REGISTER_PROVIDER_KERNEL for the others); the
// executor and, later, the partitioner ask the registry and nothing else.
//
// Providers: several kernels may serve one (op, device), each from a named provider
// ("reference", "onednn") with a priority. The executor tries them from the highest priority down
// and takes the first whose factory does not throw Unsupported, so a fast provider only has to
// accept the cases it handles well; the reference provider (priority 0) accepts everything Redwood
// supports and stays the ground truth the others are tested against.
//
// A factory runs at load time: it reads and checks the node's attributes and the dtypes of its
// inputs, and throws Unsupported (with the reason) for what the kernel cannot do, so that a model
// Redwood cannot run fails at load, naming the node, never at frame 10 000.

#include "core/graph/graph.hpp"
#include "core/tensor.hpp"

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace redwood {

/// What a factory knows about a node besides its attributes.
struct KernelInfo {
  const Graph* graph = nullptr;
  /// dtype of each input (kUndefined when absent or unknown before the run).
  std::vector<DType> input_dtypes;
  /// The constant value of each input that is an initializer (nullptr otherwise).
  std::vector<const Tensor*> constant_inputs;
  std::int64_t opset = 0;
};

/// Where KernelContext::allocate_output puts a node's outputs. The executor serves it from one
/// planned workspace per input shape (runtime/executor.hpp); without one, outputs go to the heap.
class OutputAllocator {
 public:
  virtual ~OutputAllocator() = default;
  /// A contiguous, uninitialized tensor for output `output` of the running node.
  virtual Tensor allocate(std::size_t output, DType dtype, Shape shape) = 0;
};

/// One run of a kernel: inputs as given (an absent optional input is an undefined Tensor), and
/// outputs the kernel allocates and fills (one per node output).
struct KernelContext {
  KernelContext(std::span<const Tensor> inputs_, std::span<Tensor> outputs_, const Node& node_,
                OutputAllocator* allocator_ = nullptr)
      : inputs(inputs_), outputs(outputs_), node(node_), allocator(allocator_) {}

  std::span<const Tensor> inputs;
  std::span<Tensor> outputs;
  const Node& node;
  /// Set by the executor; null (a constant-folding pass, a fused region's inner nodes): heap.
  OutputAllocator* allocator = nullptr;
  /// Set by the executor while it profiles (else null), sized to Node::body and zeroed: a kernel
  /// that runs a body of nodes (a oneDNN region) adds each body node's milliseconds at its index.
  std::vector<double>* body_ms = nullptr;

  const Tensor& input(std::size_t i) const;  // throws InvalidArgument if absent
  bool has_input(std::size_t i) const { return i < inputs.size() && inputs[i].defined(); }
  std::size_t num_outputs() const { return outputs.size(); }
  /// The memory for output `i` (contiguous, uninitialized): kernels write their result into it
  /// and store it in outputs[i]. The executor may hand out a view into its planned workspace,
  /// so a kernel must not keep the tensor past run(); an output that is a view of an input
  /// (Reshape) or a tensor the kernel made otherwise (Tensor::empty) works too, unplanned.
  Tensor allocate_output(std::size_t i, DType dtype, Shape shape) const {
    return allocator != nullptr ? allocator->allocate(i, dtype, std::move(shape))
                                : Tensor::empty(dtype, std::move(shape));
  }
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  /// Computes the node's outputs for the given inputs. Shapes are resolved here, per run.
  virtual void run(KernelContext& ctx) = 0;
};

using KernelFactory = std::function<std::unique_ptr<Kernel>(const Node&, const KernelInfo&)>;

/// The provider of the reference kernels: every supported op, the ground truth.
inline constexpr const char* kReferenceProvider = "reference";

/// One registered kernel factory.
struct KernelEntry {
  std::string op_type;
  Device device = Device::kCpu;
  std::string provider;  // "reference", "onednn", ...
  int priority = 0;      // higher is tried first
  KernelFactory factory;
};

class OpRegistry {
 public:
  static OpRegistry& instance();

  /// Registers a factory of the reference provider (priority 0).
  void add(const std::string& op_type, Device device, KernelFactory factory);
  /// Registers a factory of `provider`; a second registration for the same (op, device,
  /// provider) throws, so two kernels of one provider never silently compete.
  void add(const std::string& op_type, Device device, const std::string& provider, int priority,
           KernelFactory factory);
  /// The highest-priority factory for (op, device), or nullptr.
  const KernelFactory* find(const std::string& op_type, Device device) const;
  /// Every entry for (op, device), highest priority first (ties: registration order).
  std::vector<const KernelEntry*> candidates(const std::string& op_type, Device device) const;
  /// Sorted op types a device has kernels for (from any provider).
  std::vector<std::string> ops(Device device) const;

 private:
  std::vector<KernelEntry> entries_;
};

namespace detail {
struct KernelRegistrar {
  KernelRegistrar(const char* op_type, Device device, KernelFactory factory) {
    OpRegistry::instance().add(op_type, device, std::move(factory));
  }
  KernelRegistrar(const char* op_type, Device device, const char* provider, int priority,
                  KernelFactory factory) {
    OpRegistry::instance().add(op_type, device, provider, priority, std::move(factory));
  }
};
}  // namespace detail

/// Helper for the common case: a kernel type constructible from (const Node&, const KernelInfo&).
template <typename K>
KernelFactory make_factory() {
  return [](const Node& node, const KernelInfo& info) -> std::unique_ptr<Kernel> {
    return std::make_unique<K>(node, info);
  };
}

/// Throws Unsupported naming the node unless `dtype` is one of `allowed` (kUndefined passes: the
/// type is checked again at run time).
void expect_dtype(const Node& node, DType dtype, std::initializer_list<DType> allowed,
                  const char* what = "input");

}  // namespace redwood

#define RW_CONCAT_INNER(a, b) a##b
#define RW_CONCAT(a, b) RW_CONCAT_INNER(a, b)
/// RW_REGISTER_KERNEL("Conv", redwood::Device::kCpu, factory): at the bottom of the kernel's file.
#define RW_REGISTER_KERNEL(op_type, device, factory)                                   \
  static const ::redwood::detail::KernelRegistrar RW_CONCAT(rw_kernel_registrar_, __LINE__)( \
      op_type, device, factory)
/// RW_REGISTER_PROVIDER_KERNEL("Conv", Device::kCpu, "onednn", 10, factory): a kernel of a
/// provider other than the reference one.
#define RW_REGISTER_PROVIDER_KERNEL(op_type, device, provider, priority, factory)          \
  static const ::redwood::detail::KernelRegistrar RW_CONCAT(rw_kernel_registrar_, __LINE__)( \
      op_type, device, provider, priority, factory)
