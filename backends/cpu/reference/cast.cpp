// Cast: converts every element to the `to` type: float, float16, bfloat16, int64, int32, uint8
// or bool (other ONNX types are rejected at load, naming the type). Floats convert to integers by
// truncation toward zero, anything nonzero (NaN included) becomes true.
//
// float -> bfloat16 keeps the upper 16 bits (truncation), as ONNX 1.12 defines it in its
// reference (test_cast_FLOAT_to_BFLOAT16) and as ONNX Runtime did then; NaN stays a quiet NaN.
// Newer ONNX specs round to nearest even, which differs by one bfloat16 ulp (2^-8 relative).

#include "backends/cpu/reference/cast.hpp"

#include "backends/cpu/reference/kernel_util.hpp"

#include <cstring>

namespace redwood::cpu {
namespace {

BFloat16 truncate_to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return BFloat16{std::uint16_t((u >> 16) | 0x40u)};
  return BFloat16{std::uint16_t(u >> 16)};
}

class CastKernel final : public Kernel {
 public:
  CastKernel(const Node& node, const KernelInfo&) {
    RW_EXPECTS(node.has_attr("to"), InvalidArgument, "{}: attribute 'to' is required",
               node.where());
    to_ = dtype_attribute(node, "to");
  }

  void run(KernelContext& ctx) override { ctx.outputs[0] = cast_to(ctx, ctx.input(0), to_); }

 private:
  DType to_ = DType::kUndefined;
};

}  // namespace

DType dtype_attribute(const Node& node, const std::string& key) {
  const auto onnx_type = static_cast<int>(node.attr_int(key, 0));
  const DType dtype = dtype_from_onnx(onnx_type);
  RW_EXPECTS(dtype != DType::kUndefined, Unsupported,
             "{}: {} {} is not supported (supported: float, float16, bfloat16, int64, int32, uint8, "
             "bool)",
             node.where(), key, onnx_type_name(onnx_type));
  return dtype;
}

Tensor cast_to(const KernelContext& ctx, const Tensor& x, DType to) {
  if (x.dtype() == to) return x;  // same type: the tensor itself (tensors are immutable)
  if (to == DType::kBF16) {
    const Tensor f = x.dtype() == DType::kF32 ? x.contiguous() : x.cast(DType::kF32);
    Tensor y = ctx.allocate_output(0, DType::kBF16, f.shape());
    const float* in = f.data<float>();
    BFloat16* out = y.data<BFloat16>();
    for (std::int64_t i = 0; i < f.numel(); ++i) out[i] = truncate_to_bf16(in[i]);
    return y;
  }
  return x.cast(to);
}

RW_REGISTER_KERNEL("Cast", Device::kCpu, make_factory<CastKernel>());

}  // namespace redwood::cpu
