// Identity: the output is the input (the handle is shared; tensors are immutable once produced).

#include "backends/cpu/reference/kernel_util.hpp"

namespace redwood::cpu {
namespace {

class IdentityKernel final : public Kernel {
 public:
  IdentityKernel(const Node&, const KernelInfo&) {}
  void run(KernelContext& ctx) override { ctx.outputs[0] = ctx.input(0); }
};

}  // namespace

RW_REGISTER_KERNEL("Identity", Device::kCpu, make_factory<IdentityKernel>());

}  // namespace redwood::cpu
