// Cast (and CastLike) on the GPU between float, float16, int64, int32, uint8 and bool; bfloat16
// and the types Redwood does not hold run on the CPU.

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_kernel.hpp"
#include "backends/cuda/kernels/launchers.hpp"
#include "core/error.hpp"

#include <optional>

namespace redwood::cuda {
namespace {

std::optional<kernels::CastType> cast_type(DType t) {
  switch (t) {
    case DType::kF32: return kernels::CastType::kF32;
    case DType::kF16: return kernels::CastType::kF16;
    case DType::kI64: return kernels::CastType::kI64;
    case DType::kI32: return kernels::CastType::kI32;
    case DType::kU8: return kernels::CastType::kU8;
    case DType::kBool: return kernels::CastType::kBool;
    default: return std::nullopt;
  }
}

kernels::CastType checked_cast_type(const Node& node, DType t, const char* what) {
  const auto c = cast_type(t);
  RW_EXPECTS(c.has_value(), Unsupported, "{}: {} type {} is not cast on the GPU (float, float16, int64, int32, uint8, bool)",
             node.where(), what, dtype_name(t));
  return *c;
}

class CastKernel final : public CudaKernel {
 public:
  CastKernel(const Node& node, const KernelInfo& info) : node_(node), like_(node.op_type == "CastLike") {
    if (!like_) {
      RW_EXPECTS(node.has_attr("to"), InvalidArgument, "{}: attribute 'to' is required", node.where());
      to_ = dtype_from_onnx(static_cast<int>(node.attr_int("to", 0)));
      RW_EXPECTS(to_ != DType::kUndefined, Unsupported, "{}: 'to' {} is not a type Redwood holds", node.where(),
                 onnx_type_name(static_cast<int>(node.attr_int("to", 0))));
      checked_cast_type(node, to_, "the target");
    }
    if (!info.input_dtypes.empty() && info.input_dtypes[0] != DType::kUndefined) {
      checked_cast_type(node, info.input_dtypes[0], "the input");
    }
  }

  std::vector<TensorDesc> plan(const PlanInfo& info) override {
    const TensorDesc& x = info.input(0);
    from_ = checked_cast_type(node_, x.dtype, "the input");
    const DType to = like_ ? info.input(1).dtype : to_;
    out_ = checked_cast_type(node_, to, "the target");
    same_ = x.dtype == to;
    return {{to, x.shape}};
  }

  void launch(const LaunchArgs& a) override {
    const long long n = shape_numel(a.outputs[0].shape);
    if (same_) {
      const std::size_t bytes = static_cast<std::size_t>(n) * dtype_size(a.outputs[0].dtype);
      if (bytes > 0) RW_CUDA_CHECK(cudaMemcpyAsync(a.outputs[0].data, a.inputs[0].data, bytes, cudaMemcpyDeviceToDevice, a.stream));
      return;
    }
    kernels::launch_cast(from_, out_, a.inputs[0].data, a.outputs[0].data, n, a.stream);
  }

 private:
  const Node& node_;
  bool like_;
  DType to_ = DType::kUndefined;
  kernels::CastType from_ = kernels::CastType::kF32, out_ = kernels::CastType::kF32;
  bool same_ = false;
};

}  // namespace

RW_REGISTER_CUDA_KERNEL("Cast", CastKernel);
RW_REGISTER_CUDA_KERNEL("CastLike", CastKernel);

}  // namespace redwood::cuda
