// redwood_nhwc_bench: the NHWC companion kernels (backends/cuda/kernels/nhwc/nhwc.cpp) at fp16 and
// bf16 against the fp32 NCHW kernels they replace, each pair in the same process, at the batch-32
// shapes of MobileNetV3-Large and ResNet-50 (224×224):
//
//   rw.ToNhwc / rw.ToNchw       vs Transpose (perm 0,2,3,1 / 0,3,1,2; fp32)
//   rw.MaxPoolNhwc              vs MaxPool
//   rw.GlobalAveragePoolNhwc    vs GlobalAveragePool
//   rw.ScaleChannelsNhwc        vs Mul (x · scale[N, C, 1, 1])
//   rw.DepthwiseConvNhwc        vs Conv (group = C; the tiled depthwise kernel)
//
//   redwood_nhwc_bench [--runs 15] [--reps 20] [--warmup 10] [--only SUBSTRING]
//
// Each kernel goes through its CudaKernel (plan, then launch on one stream), as the runner does.
// A sample is `reps` launches back to back between two CUDA events, over copies of the operands
// rotated so that ≥ 256 MiB pass between two reads of one copy (each launch misses the 50 MiB L2,
// as in a network); the figure is the median sample / reps. GB/s counts the bytes each kernel must
// move once (inputs, weights, output). One JSON line per pair on stdout, with the ratio
// (fp32 NCHW ms / NHWC ms), and first the device's own copy rate (cudaMemcpyAsync, read + write)
// for scale.

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_kernel.hpp"
#include "backends/cuda/device_tensor.hpp"
#include "core/error.hpp"

#include "bench_support.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace {

using namespace redwood;
using redwood::cuda::CudaKernel;
using redwood::cuda::DeviceArg;
using Attrs = std::map<std::string, AttributeValue>;
using Ints = std::vector<std::int64_t>;

struct Args {
  int runs = 15, reps = 20, warmup = 10;
  std::string only;
};

constexpr std::size_t kRotateBytes = 256u << 20;

// One planned kernel with `copies` sets of device operands.
struct Op {
  Graph graph;
  Node node;
  std::unique_ptr<Kernel> kernel;
  CudaKernel* cuda = nullptr;
  std::vector<std::vector<Tensor>> in, out;  // [copy][operand]
  std::vector<std::vector<DeviceArg>> in_args, out_args;
  Tensor workspace;
  double bytes = 0;  // moved once per launch
};

std::unique_ptr<Op> make_op(const std::string& type, const Attrs& attrs, const std::vector<Tensor>& host,
                            cuda::Precision precision) {
  auto op = std::make_unique<Op>();
  op->graph.opset = 17;
  op->node.name = type + "_bench";
  op->node.op_type = type;
  op->node.attributes = attrs;
  KernelInfo info;
  info.graph = &op->graph;
  info.opset = 17;
  std::vector<TensorDesc> descs(host.size());
  for (std::size_t i = 0; i < host.size(); ++i) {
    op->node.inputs.push_back(host[i].defined() ? "in" + std::to_string(i) : "");
    info.input_dtypes.push_back(host[i].defined() ? host[i].dtype() : DType::kUndefined);
    info.constant_inputs.push_back(nullptr);
    if (host[i].defined()) {
      descs[i] = {host[i].dtype(), host[i].shape(), nullptr};
      op->bytes += static_cast<double>(host[i].nbytes());
    }
  }
  op->node.outputs = {"out"};
  const KernelEntry* entry = nullptr;
  for (const KernelEntry* e : OpRegistry::instance().candidates(type, Device::kCuda)) {
    if (e->provider == cuda::kCudaProvider) entry = e;
  }
  RW_EXPECTS(entry != nullptr, Unsupported, "no CUDA kernel for {}", type);
  op->kernel = entry->factory(op->node, info);
  op->cuda = dynamic_cast<CudaKernel*>(op->kernel.get());
  RW_EXPECTS(op->cuda != nullptr, Unsupported, "{} is not a CudaKernel", type);
  op->cuda->set_precision(precision);
  const std::vector<TensorDesc> outs = op->cuda->plan(cuda::PlanInfo{op->node, descs, precision, 17});
  double footprint = op->bytes;
  for (const auto& o : outs) footprint += static_cast<double>(shape_numel(o.shape) * dtype_size(o.dtype));
  op->bytes = footprint;
  const auto copies = static_cast<std::size_t>(std::clamp(kRotateBytes / footprint + 1, 1.0, 64.0));
  for (std::size_t c = 0; c < copies; ++c) {
    std::vector<Tensor> in(host.size()), out(outs.size());
    std::vector<DeviceArg> in_args(host.size()), out_args(outs.size());
    for (std::size_t i = 0; i < host.size(); ++i) {
      if (!host[i].defined()) continue;
      in[i] = cuda::to_device(host[i]);
      in_args[i] = {in[i].raw_data(), in[i].dtype(), in[i].shape()};
    }
    for (std::size_t i = 0; i < outs.size(); ++i) {
      out[i] = cuda::device_empty(outs[i].dtype, outs[i].shape);
      out_args[i] = {out[i].raw_data(), outs[i].dtype, outs[i].shape};
    }
    op->in.push_back(std::move(in));
    op->out.push_back(std::move(out));
    op->in_args.push_back(std::move(in_args));
    op->out_args.push_back(std::move(out_args));
  }
  if (op->cuda->workspace_bytes() > 0) {
    op->workspace = cuda::device_empty(DType::kU8, {static_cast<std::int64_t>(op->cuda->workspace_bytes())});
  }
  return op;
}

// Median over `runs` samples of (reps launches) / reps, in ms.
template <typename Launch>
double median_ms(cudaStream_t stream, const Args& a, Launch launch) {
  int k = 0;
  for (int i = 0; i < a.warmup * a.reps; ++i) launch(k++);
  RW_CUDA_CHECK(cudaStreamSynchronize(stream));
  const std::vector<double> ms = bench::event_samples(stream, a.runs, a.reps, [&] { launch(k++); });
  return ms[ms.size() / 2];
}

double time_op(Op& op, cudaStream_t stream, const Args& a) {
  const std::size_t copies = op.in.size();
  return median_ms(stream, a, [&](int k) {
    const std::size_t c = static_cast<std::size_t>(k) % copies;
    op.cuda->launch(cuda::LaunchArgs{op.in_args[c], op.out_args[c], stream,
                                     op.workspace.defined() ? op.workspace.raw_data() : nullptr});
  });
}

struct Pair {
  std::string name;  // the layer
  std::string op;
  Attrs attrs;
  std::vector<Tensor> inputs;  // fp32 NHWC-side operands; activations cast to S below
  std::vector<bool> activation;  // which inputs are S activations
  std::string peer_op;
  Attrs peer_attrs;
  std::vector<Tensor> peer_inputs;  // fp32 NCHW
};

Tensor rsc(std::int64_t r, std::int64_t c) { return bench::random_input({r, r, c}, 5); }

Pair depthwise(std::int64_t c, std::int64_t hw, std::int64_t r, std::int64_t stride, const std::string& act) {
  const std::int64_t pad = r / 2;
  Pair p;
  p.name = fmt::format("dw {}x{} s{} 32x{}x{}x{} {}", r, r, stride, hw, hw, c, act);
  p.op = "rw.DepthwiseConvNhwc";
  p.attrs = {{"strides", Ints{stride, stride}}, {"pads", Ints{pad, pad, pad, pad}}, {"dilations", Ints{1, 1}},
             {"rw.activation", act}};
  p.inputs = {bench::random_input({32, hw, hw, c}, 1), rsc(r, c), bench::random_input({c}, 6)};
  p.activation = {true, false, false};
  p.peer_op = "Conv";
  p.peer_attrs = p.attrs;
  p.peer_attrs["group"] = c;
  p.peer_inputs = {bench::random_input({32, c, hw, hw}, 1), bench::random_input({c, 1, r, r}, 5),
                   bench::random_input({c}, 6)};
  return p;
}

std::vector<Pair> pairs() {
  std::vector<Pair> v;
  {
    Pair p;
    p.name = "ToNhwc 32x3x224x224 -> 8";
    p.op = "rw.ToNhwc";
    p.inputs = {bench::random_input({32, 3, 224, 224}, 1)};
    p.activation = {false};  // fp32 NCHW in
    p.attrs = {{"rw.channels", std::int64_t{8}}};
    p.peer_op = "Transpose";
    p.peer_attrs = {{"perm", Ints{0, 2, 3, 1}}};
    p.peer_inputs = p.inputs;
    v.push_back(p);
  }
  {
    Pair p;
    p.name = "ToNchw 32x112x112x16";
    p.op = "rw.ToNchw";
    p.inputs = {bench::random_input({32, 112, 112, 16}, 1)};
    p.activation = {true};
    p.attrs = {{"rw.channels", std::int64_t{16}}};
    p.peer_op = "Transpose";
    p.peer_attrs = {{"perm", Ints{0, 3, 1, 2}}};
    p.peer_inputs = p.inputs;
    v.push_back(p);
  }
  {
    Pair p;
    p.name = "MaxPool 3x3/2 pad1 32x112x112x64";
    p.op = "rw.MaxPoolNhwc";
    p.attrs = {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}},
               {"dilations", Ints{1, 1}}, {"ceil_mode", std::int64_t{0}}};
    p.inputs = {bench::random_input({32, 112, 112, 64}, 1)};
    p.activation = {true};
    p.peer_op = "MaxPool";
    p.peer_attrs = p.attrs;
    p.peer_inputs = {bench::random_input({32, 64, 112, 112}, 1)};
    v.push_back(p);
  }
  for (const std::int64_t c : {960, 2048}) {
    Pair p;
    p.name = fmt::format("GAP 32x7x7x{}", c);
    p.op = "rw.GlobalAveragePoolNhwc";
    p.inputs = {bench::random_input({32, 7, 7, c}, 1)};
    p.activation = {true};
    p.peer_op = "GlobalAveragePool";
    p.peer_inputs = {bench::random_input({32, c, 7, 7}, 1)};
    v.push_back(p);
  }
  for (const auto& [c, hw] : {std::pair<std::int64_t, std::int64_t>{120, 28}, {960, 7}}) {
    Pair p;
    p.name = fmt::format("ScaleChannels 32x{}x{}x{}", hw, hw, c);
    p.op = "rw.ScaleChannelsNhwc";
    p.inputs = {bench::random_input({32, hw, hw, c}, 1), bench::random_input({32, c, 1, 1}, 2)};
    p.activation = {true, false};
    p.peer_op = "Mul";
    p.peer_inputs = {bench::random_input({32, c, hw, hw}, 1), p.inputs[1]};
    v.push_back(p);
  }
  // MobileNetV3-Large's depthwise layers (expansion channels, input extent, window, stride).
  v.push_back(depthwise(16, 112, 3, 1, "Relu"));
  v.push_back(depthwise(64, 112, 3, 2, "Relu"));
  v.push_back(depthwise(72, 56, 3, 1, "Relu"));
  v.push_back(depthwise(72, 56, 5, 2, "Relu"));
  v.push_back(depthwise(120, 28, 5, 1, "Relu"));
  v.push_back(depthwise(240, 28, 3, 2, "HardSwish"));
  v.push_back(depthwise(480, 14, 3, 1, "HardSwish"));
  v.push_back(depthwise(672, 14, 5, 2, "HardSwish"));
  v.push_back(depthwise(960, 7, 5, 1, "HardSwish"));
  return v;
}

void copy_rate(cudaStream_t stream, const Args& a) {
  const std::size_t bytes = 256u << 20;
  const Tensor src = cuda::device_empty(DType::kU8, {static_cast<std::int64_t>(bytes)});
  const Tensor dst = cuda::device_empty(DType::kU8, {static_cast<std::int64_t>(bytes)});
  Args few = a;
  few.reps = 2;
  const double ms = median_ms(stream, few, [&](int) {
    RW_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), bytes, cudaMemcpyDeviceToDevice, stream));
  });
  std::printf("{\"op\": \"cudaMemcpyAsync D2D\", \"bytes\": %zu, \"ms\": %.4f, \"gbs\": %.0f}\n", bytes, ms,
              2.0 * static_cast<double>(bytes) / (ms * 1e6));
}

int run(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    auto next = [&] { return redwood::bench::option_value(argc, argv, i); };
    if (s == "--runs") a.runs = std::stoi(next());
    else if (s == "--reps") a.reps = std::stoi(next());
    else if (s == "--warmup") a.warmup = std::stoi(next());
    else if (s == "--only") a.only = next();
    else throw InvalidArgument(fmt::format("unknown option '{}' (--runs, --reps, --warmup, --only)", s));
  }
  RW_EXPECTS(a.runs > 0 && a.reps > 0 && a.warmup >= 0, InvalidArgument, "--runs and --reps must be positive");
  cudaStream_t stream = nullptr;
  RW_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  copy_rate(stream, a);
  for (const Pair& p : pairs()) {
    if (!a.only.empty() && p.name.find(a.only) == std::string::npos) continue;
    auto peer = make_op(p.peer_op, p.peer_attrs, p.peer_inputs, cuda::Precision::kFp32);
    const double peer_ms = time_op(*peer, stream, a);
    const double peer_bytes = peer->bytes;
    peer.reset();
    for (const DType s : {DType::kF16, DType::kBF16}) {
      std::vector<Tensor> in = p.inputs;
      for (std::size_t i = 0; i < in.size(); ++i) {
        if (p.activation[i]) in[i] = in[i].cast(s);
      }
      Attrs attrs = p.attrs;
      if (p.op == "rw.ToNhwc") attrs["to"] = std::int64_t{dtype_to_onnx(s)};
      auto op = make_op(p.op, attrs, in, cuda::Precision::kFp16);
      const double ms = time_op(*op, stream, a);
      const std::string variant = op->cuda->variant();
      std::printf("{\"layer\": \"%s\", \"storage\": \"%s\", \"nhwc_ms\": %.4f, \"nhwc_gbs\": %.0f, "
                  "\"peer\": \"%s fp32 NCHW\", \"peer_ms\": %.4f, \"peer_gbs\": %.0f, \"speedup\": %.2f%s%s%s}\n",
                  p.name.c_str(), s == DType::kF16 ? "fp16" : "bf16", ms, op->bytes / (ms * 1e6), p.peer_op.c_str(),
                  peer_ms, peer_bytes / (peer_ms * 1e6), peer_ms / ms, variant.empty() ? "" : ", \"variant\": \"",
                  variant.c_str(), variant.empty() ? "" : "\"");
      std::fflush(stdout);
    }
  }
  cudaStreamDestroy(stream);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return redwood::bench::guarded_main("redwood_nhwc_bench", [&] { return run(argc, argv); });
}
