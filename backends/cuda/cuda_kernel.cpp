#include "backends/cuda/cuda_kernel.hpp"

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/device.hpp"
#include "backends/cuda/device_tensor.hpp"
#include "backends/cuda/stream.hpp"
#include "core/error.hpp"

namespace redwood::cuda {

std::string_view precision_name(Precision p) {
  switch (p) {
    case Precision::kFp32: return "fp32";
    case Precision::kTf32: return "tf32";
    case Precision::kFp16: return "fp16";
    case Precision::kBf16: return "bf16";
  }
  return "?";
}

Precision parse_precision(std::string_view name) {
  if (name == "fp32") return Precision::kFp32;
  if (name == "tf32") return Precision::kTf32;
  if (name == "fp16") return Precision::kFp16;
  if (name == "bf16") return Precision::kBf16;
  throw InvalidArgument(fmt::format("precision '{}' is not one of fp32, tf32, fp16, bf16", name));
}

const TensorDesc& PlanInfo::input(std::size_t i) const {
  RW_EXPECTS(has_input(i), InvalidArgument, "{}: input {} is missing", node.where(), i);
  return inputs[i];
}

const Tensor& PlanInfo::host_input(std::size_t i, const char* what) const {
  const TensorDesc& d = input(i);
  RW_EXPECTS(d.host != nullptr, Unsupported,
             "{}: the CUDA kernel needs {} (input {}) at plan time, but it is computed on the device",
             node.where(), what, i);
  return *d.host;
}

int multiprocessor_count() { return planning_device().multiprocessors; }

void expect_f32(const Node& node, DType dtype, const char* what) {
  RW_EXPECTS(dtype == DType::kF32 || dtype == DType::kUndefined, Unsupported,
             "{}: the CUDA kernel takes float {}, not {}", node.where(), what, dtype_name(dtype));
}

void CudaKernel::run(KernelContext& ctx) {
  std::vector<Tensor> device_inputs(ctx.inputs.size());
  std::vector<TensorDesc> descs(ctx.inputs.size());
  std::vector<DeviceArg> in_args(ctx.inputs.size());
  Stream stream;
  for (std::size_t i = 0; i < ctx.inputs.size(); ++i) {
    const Tensor& t = ctx.inputs[i];
    if (!t.defined()) continue;
    descs[i] = {t.dtype(), t.shape(), t.device() == Device::kCpu ? &t : nullptr};
    device_inputs[i] = t.device() == Device::kCuda ? t : to_device(t, stream.get());
    in_args[i] = {device_inputs[i].raw_data(), t.dtype(), t.shape()};
  }
  const PlanInfo info{ctx.node, descs, precision_, 0, options_};
  const std::vector<TensorDesc> out_descs = plan(info);
  RW_EXPECTS(out_descs.size() == ctx.outputs.size(), InvalidArgument, "{}: planned {} outputs, the node has {}",
             ctx.node.where(), out_descs.size(), ctx.outputs.size());
  std::vector<Tensor> device_outputs(out_descs.size());
  std::vector<DeviceArg> out_args(out_descs.size());
  for (std::size_t i = 0; i < out_descs.size(); ++i) {
    device_outputs[i] = device_empty(out_descs[i].dtype, out_descs[i].shape);
    out_args[i] = {device_outputs[i].raw_data(), out_descs[i].dtype, out_descs[i].shape};
  }
  Tensor scratch;
  if (workspace_bytes() > 0) scratch = device_empty(DType::kU8, {static_cast<std::int64_t>(workspace_bytes())});
  cudaGetLastError();  // a stale error from an earlier call is not this kernel's
  launch(LaunchArgs{in_args, out_args, stream.get(), scratch.defined() ? scratch.raw_data() : nullptr});
  stream.synchronize();
  for (std::size_t i = 0; i < out_descs.size(); ++i) ctx.outputs[i] = to_host(device_outputs[i], stream.get());
}

}  // namespace redwood::cuda
