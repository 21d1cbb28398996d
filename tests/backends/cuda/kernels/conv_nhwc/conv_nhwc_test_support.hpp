#pragma once
// What the tests of rw.ConvNhwc's kernels share (conv_nhwc_test.cpp, conv_nhwc_wgmma_test.cpp,
// conv_nhwc_wgmma_tma_test.cpp, conv_nhwc_narrow_test.cpp): a convolution case, its ConvShape at a
// storage type, its attributes, and its operands with the reference's expected output, computed on the CPU (the reference NCHW
// Conv) from the inputs, weights and residual already rounded to the storage type (bias fp32),
// so the bounds measure the kernel: fp32 accumulation and one rounding of the output.

#include "backends/cuda/cuda_kernel.hpp"
#include "backends/cuda/device_tensor.hpp"
#include "backends/cuda/kernels/conv_nhwc/conv_nhwc.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"
#include "core/ops/tf32.hpp"
#include "gpu_test_support.hpp"
#include "provider_run.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace redwood::cuda::conv_test {

struct NhwcCase {
  std::string name;
  int n, c, h, w, k, r, s;
  int stride = 1;
  std::array<int, 4> pads = {0, 0, 0, 0};  // top, left, bottom, right
  int dil = 1;
  bool bias = true, residual = false;
  std::string act = "Relu";
};

// Channels of a 16-byte chunk: 8 of a 16-bit type, 4 of fp32 (the kernels' channel padding).
inline int padded(int c, DType s) {
  const int chunk = s == DType::kF32 ? 4 : 8;
  return (c + chunk - 1) / chunk * chunk;
}

inline kernels::NhwcStorage storage_of(DType s) {
  return s == DType::kF16    ? kernels::NhwcStorage::kF16
         : s == DType::kBF16 ? kernels::NhwcStorage::kBF16
                             : kernels::NhwcStorage::kF32;
}

inline kernels::ConvShape shape_of(const NhwcCase& c, DType s) {
  const int oh = (c.h + c.pads[0] + c.pads[2] - (c.r - 1) * c.dil - 1) / c.stride + 1;
  const int ow = (c.w + c.pads[1] + c.pads[3] - (c.s - 1) * c.dil - 1) / c.stride + 1;
  return kernels::ConvShape{c.n,      padded(c.c, s), c.h,       c.w,   c.k,   c.r, c.s, oh, ow, c.stride,
                            c.stride, c.pads[0],      c.pads[1], c.dil, c.dil, 1};
}

inline std::map<std::string, AttributeValue> conv_attrs(const NhwcCase& c) {
  std::map<std::string, AttributeValue> attrs;
  attrs["strides"] = std::vector<std::int64_t>{c.stride, c.stride};
  attrs["pads"] = std::vector<std::int64_t>{c.pads[0], c.pads[1], c.pads[2], c.pads[3]};
  attrs["dilations"] = std::vector<std::int64_t>{c.dil, c.dil};
  if (!c.act.empty()) attrs["rw.activation"] = c.act;
  return attrs;
}

inline int act_code(const std::string& act) {
  if (act == "Relu") return kernels::kActRelu;
  if (act == "HardSwish") return kernels::kActHardSwish;
  return kernels::kActNone;
}

inline Tensor rounded(const Tensor& t, DType s) { return t.cast(s).cast(DType::kF32); }

/// fp32 values rounded to tf32 (round_to_tf32): the operands choose_gpu_layout leaves at precision tf32.
inline Tensor rounded_tf32(Tensor t) {
  t = t.cast(DType::kF32);  // a copy, not a view of the caller's tensor
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = round_to_tf32(t.data<float>()[i]);
  return t;
}

// NHWC → NCHW (core/layout.hpp), the channels from the last dimension.
inline Tensor to_channels_first(const Tensor& t) { return redwood::to_channels_first(t, t.shape()[3]); }

/// One case's operands: the NHWC ones the kernels take and the reference's expected output.
struct Operands {
  Tensor x, w, bias, residual;  // host: S NHWC, S [K,R,S,Cp], fp32 [K], S NHWC
  Tensor expected;              // fp32 NCHW
};

/// Random operands (seeds seed … seed + 3 for x, w, bias, residual) rounded to S, and the
/// reference output on them. `tf32` (fp32 S): x, w and the residual rounded to tf32 too.
inline Operands make_operands(const NhwcCase& c, DType s, std::uint32_t seed, bool tf32 = false) {
  using redwood::testing::random_tensor;
  const kernels::ConvShape p = shape_of(c, s);
  auto operand = [&](const Tensor& t) { return tf32 ? rounded_tf32(rounded(t, s)) : rounded(t, s); };
  const Tensor x = operand(random_tensor(DType::kF32, {c.n, c.c, c.h, c.w}, -1, 1, seed));
  const Tensor w = operand(random_tensor(DType::kF32, {c.k, c.c, c.r, c.s}, -0.5, 0.5, seed + 1));
  const Tensor bias = c.bias ? random_tensor(DType::kF32, {c.k}, -1, 1, seed + 2) : Tensor();
  const Tensor residual =
      c.residual ? operand(random_tensor(DType::kF32, {p.n, p.k, p.oh, p.ow}, -1, 1, seed + 3)) : Tensor();
  std::vector<Tensor> ref_inputs = {x, w, bias};
  if (c.residual) ref_inputs.push_back(residual);
  Operands o;
  o.expected = testing::run_with_provider("Conv", ref_inputs, conv_attrs(c), Device::kCpu, kReferenceProvider,
                                          Precision::kFp32)
                   .at(0);
  o.x = to_channels_last(x, p.c, s);
  o.w = to_channels_last(w, p.c, s);
  o.bias = bias;
  if (c.residual) o.residual = to_channels_last(residual, p.k, s);
  return o;
}

/// The index of the tile named `name` in nhwc_conv_tiles(), or −1.
inline int tile_index(const char* name) {
  const auto& tiles = kernels::nhwc_conv_tiles();
  for (std::size_t i = 0; i < tiles.size(); ++i) {
    if (std::string(tiles[i].name) == name) return static_cast<int>(i);
  }
  return -1;
}

/// The tiles of nhwc_conv_tiles() whose entry satisfies `in`, in the list's order.
template <typename Pred> std::vector<int> tiles_where(Pred in) {
  std::vector<int> out;
  const auto& tiles = kernels::nhwc_conv_tiles();
  for (int t = 0; t < static_cast<int>(tiles.size()); ++t) {
    if (in(tiles[static_cast<std::size_t>(t)])) out.push_back(t);
  }
  return out;
}
// The Hopper families (none in a build without sm_90): the wgmma tiles and the TMA-fed ones.
inline std::vector<int> wgmma_tiles() { return tiles_where([](const kernels::NhwcTile& t) { return t.wgmma >= 0; }); }
inline std::vector<int> tma_tiles() { return tiles_where([](const kernels::NhwcTile& t) { return t.tma >= 0; }); }

/// Empty when the Hopper `tiles` (wgmma_tiles() or tma_tiles()) can run here, else why not.
inline std::string hopper_unavailable(const std::vector<int>& tiles) {
  if (const std::string why = testing::gpu_unavailable(); !why.empty()) return why;
  if (tiles.empty()) return "this build has no wgmma tiles (sm_90 is not among CMAKE_CUDA_ARCHITECTURES)";
  if (!kernels::nhwc_wgmma_usable()) return "the GPU is not compute capability 9.0 (the wgmma tiles are sm_90a code)";
  return "";
}

/// A case at a storage type: the parameter of the Hopper tile tests, each case at fp16, bf16 and
/// fp32 (tf32 products), named "<case>_<dtype>".
struct CaseAt {
  NhwcCase conv;
  DType storage;
};
inline void PrintTo(const CaseAt& p, std::ostream* os) { *os << p.conv.name << "_" << dtype_name(p.storage); }
inline std::vector<CaseAt> at_every_storage(const std::vector<NhwcCase>& cases) {
  std::vector<CaseAt> out;
  for (const NhwcCase& c : cases) {
    for (DType s : {DType::kF16, DType::kBF16, DType::kF32}) out.push_back({c, s});
  }
  return out;
}
inline std::string case_at_name(const ::testing::TestParamInfo<CaseAt>& info) {
  return info.param.conv.name + "_" + std::string(dtype_name(info.param.storage));
}

/// A case on the device: its shape, host operands and reference output (o), the operands on the
/// device (bias and residual only where the case has them) and its epilogue. What the per-tile
/// tests launch over and over.
struct DeviceCase {
  kernels::ConvShape p;
  Operands o;
  Tensor x, w, bias, residual;
  kernels::Epilogue e;
  /// launch_conv_nhwc of the case into y (device, NHWC) with `cfg` (no counters from a pool).
  void launch(kernels::NhwcStorage storage, void* y, kernels::NhwcConvConfig cfg, void* workspace,
              bool split_tf32 = false, bool round_tf32 = false) const {
    kernels::launch_conv_nhwc(p, storage, x.raw_data(), w.raw_data(), y, bias.defined() ? bias.data<float>() : nullptr,
                              residual.defined() ? residual.raw_data() : nullptr, e, cfg, workspace, nullptr, nullptr,
                              split_tf32, round_tf32);
  }
  /// launch() into a fresh output that starts as NaNs (where nothing is written), then waits: the
  /// output on the host, NHWC; undefined, with the failing CUDA call added as a test failure,
  /// where one fails (the caller asserts it is defined and names the tile).
  Tensor output(DType s, kernels::NhwcConvConfig cfg, void* workspace, bool split_tf32 = false) const {
    Tensor y = device_empty(s, {p.n, p.oh, p.ow, p.k});
    const cudaError_t filled = cudaMemset(y.raw_data(), 0xff, y.nbytes());
    EXPECT_EQ(filled, cudaSuccess);
    if (filled != cudaSuccess) return Tensor();
    launch(storage_of(s), y.raw_data(), cfg, workspace, split_tf32);
    const cudaError_t done = cudaDeviceSynchronize();
    EXPECT_EQ(done, cudaSuccess);
    if (done != cudaSuccess) return Tensor();
    return to_host(y);
  }
};
/// make_operands(c, s, seed, tf32), uploaded, with c's activation.
inline DeviceCase device_case(const NhwcCase& c, DType s, std::uint32_t seed, bool tf32 = false) {
  DeviceCase d;
  d.p = shape_of(c, s);
  d.o = make_operands(c, s, seed, tf32);
  d.x = to_device(d.o.x);
  d.w = to_device(d.o.w);
  if (c.bias) d.bias = to_device(d.o.bias);
  if (c.residual) d.residual = to_device(d.o.residual);
  d.e.act = act_code(c.act);
  return d;
}

/// What rw.ConvNhwc's CUDA plan() throws for these inputs (an undefined one is absent) and
/// attributes, on a node named conv7, or "" when it plans. Host only: plan() makes no CUDA call.
inline std::string plan_error(const std::vector<TensorDesc>& inputs, const std::map<std::string, AttributeValue>& attrs,
                       Precision precision = Precision::kFp16) {
  Graph graph;
  Node node;
  node.name = "conv7";
  node.op_type = "rw.ConvNhwc";
  node.attributes = attrs;
  KernelInfo info;
  info.graph = &graph;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    node.inputs.push_back(inputs[i].defined() ? "in" + std::to_string(i) : "");
    info.input_dtypes.push_back(inputs[i].dtype);
    info.constant_inputs.push_back(nullptr);
  }
  node.outputs.push_back("y");
  const KernelEntry* entry = nullptr;
  for (const KernelEntry* e : OpRegistry::instance().candidates("rw.ConvNhwc", Device::kCuda)) {
    if (e->provider == std::string(kCudaProvider)) entry = e;
  }
  if (entry == nullptr) return "no cuda kernel for rw.ConvNhwc";
  auto kernel = entry->factory(node, info);
  auto* ck = dynamic_cast<CudaKernel*>(kernel.get());
  if (ck == nullptr) return "not a CudaKernel";
  try {
    ck->plan(PlanInfo{node, inputs, precision, 17});
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace redwood::cuda::conv_test
