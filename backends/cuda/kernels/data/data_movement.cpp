// Data movement on the GPU, for any dtype:
//   Reshape, Flatten, Squeeze, Unsqueeze, Identity   same bytes, new shape: one device copy. The
//                                                    output shape comes from the reference kernel
//                                                    run on a data-less view at plan time, so the
//                                                    two backends cannot disagree on it.
//   Transpose, Slice, Expand                          one strided gather (data_movement.cu)
//   Concat, Split                                     2-D copies into / out of column offsets (a
//                                                    Concat input the schedule placed in the
//                                                    output, graph_runner.cpp, is not copied)

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_kernel.hpp"
#include "backends/cuda/kernels/launchers.hpp"
#include "core/error.hpp"

#include <algorithm>
#include <limits>

namespace redwood::cuda {
namespace {

class ViewKernel final : public CudaKernel {
 public:
  ViewKernel(const Node& node, const KernelInfo& info) : node_(node), info_(info) {
    for (const KernelEntry* e : OpRegistry::instance().candidates(node.op_type, Device::kCpu)) {
      if (e->provider == kReferenceProvider) reference_ = e;
    }
    RW_EXPECTS(reference_ != nullptr, Unsupported, "{}: the CUDA {} plans its shape with the reference kernel, "
               "which is not linked", node.where(), node.op_type);
  }

  std::vector<TensorDesc> plan(const PlanInfo& info) override {
    // The reference kernel sees a data-less view of input 0: it only computes the output's shape
    // and views its input (Reshape family), so it reads no element; the address only lets us check
    // that the output is such a view.
    static unsigned char shape_only[16];
    std::vector<Tensor> inputs(info.inputs.size());
    for (std::size_t i = 0; i < info.inputs.size(); ++i) {
      if (!info.has_input(i)) continue;
      inputs[i] = i == 0 ? Tensor::view(shape_only, info.input(0).dtype, info.input(0).shape)
                         : info.host_input(i, "this input");
    }
    KernelInfo ki = info_;
    ki.constant_inputs.assign(inputs.size(), nullptr);
    for (std::size_t i = 1; i < inputs.size(); ++i) ki.constant_inputs[i] = inputs[i].defined() ? &inputs[i] : nullptr;
    std::unique_ptr<Kernel> reference = reference_->factory(node_, ki);
    std::vector<Tensor> outputs(node_.outputs.size());
    KernelContext ctx{inputs, outputs, node_};
    reference->run(ctx);
    RW_EXPECTS(outputs.size() == 1 && outputs[0].raw_data() == shape_only, Unsupported,
               "{}: the reference kernel did not view its input", node_.where());
    return {{outputs[0].dtype(), outputs[0].shape()}};
  }

  void launch(const LaunchArgs& a) override {
    const std::size_t bytes = static_cast<std::size_t>(shape_numel(a.outputs[0].shape)) * dtype_size(a.outputs[0].dtype);
    if (bytes > 0 && a.outputs[0].data != a.inputs[0].data) {
      RW_CUDA_CHECK(cudaMemcpyAsync(a.outputs[0].data, a.inputs[0].data, bytes, cudaMemcpyDeviceToDevice, a.stream));
    }
  }

 private:
  const Node& node_;
  KernelInfo info_;
  const KernelEntry* reference_ = nullptr;
};

// Shared by the gather kernels: output shape and the StridedCopy that fills it.
class GatherBase : public CudaKernel {
 public:
  void launch(const LaunchArgs& a) override {
    kernels::launch_strided_copy(a.inputs[0].data, a.outputs[0].data, dtype_size(a.outputs[0].dtype),
                                 shape_numel(a.outputs[0].shape), copy_, a.stream);
  }

 protected:
  void set_dims(const Node& node, const Shape& y) {
    RW_EXPECTS(y.size() <= static_cast<std::size_t>(kernels::kMaxDims), Unsupported, "{}: rank {} is over {}",
               node.where(), y.size(), kernels::kMaxDims);
    copy_ = {};
    copy_.rank = static_cast<int>(y.size());
    for (std::size_t d = 0; d < y.size(); ++d) copy_.dims[d] = y[d];
  }
  kernels::StridedCopy copy_;
};

class TransposeKernel final : public GatherBase {
 public:
  TransposeKernel(const Node& node, const KernelInfo&) : node_(node) {}

  std::vector<TensorDesc> plan(const PlanInfo& info) override {
    const Shape& x = info.input(0).shape;
    const auto rank = static_cast<std::int64_t>(x.size());
    std::vector<std::int64_t> perm = node_.attr_ints("perm", {});
    if (perm.empty()) {
      for (std::int64_t d = rank - 1; d >= 0; --d) perm.push_back(d);
    }
    RW_EXPECTS(static_cast<std::int64_t>(perm.size()) == rank, InvalidArgument, "{}: perm has {} entries for rank {}",
               node_.where(), perm.size(), rank);
    const Strides st = contiguous_strides(x);
    Shape y;
    std::vector<bool> seen(x.size(), false);
    for (auto p : perm) {
      const auto axis = static_cast<std::size_t>(normalize_axis(p, rank));
      RW_EXPECTS(!seen[axis], InvalidArgument, "{}: perm repeats axis {}", node_.where(), p);
      seen[axis] = true;
      y.push_back(x[axis]);
    }
    set_dims(node_, y);
    for (std::size_t d = 0; d < perm.size(); ++d) copy_.strides[d] = st[static_cast<std::size_t>(normalize_axis(perm[d], rank))];
    return {{info.input(0).dtype, y}};
  }

 private:
  const Node& node_;
};

class SliceKernel final : public GatherBase {
 public:
  SliceKernel(const Node& node, const KernelInfo& info) : node_(node), from_inputs_(info.opset >= 10) {}

  std::vector<TensorDesc> plan(const PlanInfo& info) override {
    const Shape& x = info.input(0).shape;
    const auto rank = static_cast<std::int64_t>(x.size());
    std::vector<std::int64_t> starts, ends, axes, steps;
    if (from_inputs_) {
      starts = info.host_input(1, "Slice's starts").to_int64_vector();
      ends = info.host_input(2, "Slice's ends").to_int64_vector();
      if (info.has_input(3)) axes = info.host_input(3, "Slice's axes").to_int64_vector();
      if (info.has_input(4)) steps = info.host_input(4, "Slice's steps").to_int64_vector();
    } else {
      starts = node_.attr_ints("starts");
      ends = node_.attr_ints("ends");
      axes = node_.attr_ints("axes", {});
    }
    if (axes.empty()) {
      for (std::size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<std::int64_t>(i));
    }
    if (steps.empty()) steps.assign(starts.size(), 1);
    RW_EXPECTS(ends.size() == starts.size() && axes.size() == starts.size() && steps.size() == starts.size(),
               InvalidArgument, "{}: starts, ends, axes and steps differ in length", node_.where());
    const Strides st = contiguous_strides(x);
    Shape y = x;
    set_dims(node_, x);
    for (std::size_t d = 0; d < x.size(); ++d) copy_.strides[d] = st[d];
    for (std::size_t i = 0; i < starts.size(); ++i) {
      const auto axis = static_cast<std::size_t>(normalize_axis(axes[i], rank));
      const std::int64_t dim = x[axis], step = steps[i];
      RW_EXPECTS(step != 0, InvalidArgument, "{}: a step of 0", node_.where());
      std::int64_t s = starts[i], e = ends[i];
      if (s < 0) s += dim;
      if (e < 0 && e > std::numeric_limits<std::int64_t>::min() + dim) e += dim;
      if (step > 0) {
        s = std::clamp<std::int64_t>(s, 0, dim);
        e = std::clamp<std::int64_t>(e, 0, dim);
      } else {
        s = std::clamp<std::int64_t>(s, 0, dim - 1);
        e = std::clamp<std::int64_t>(e, -1, dim - 1);
      }
      const std::int64_t count = step > 0 ? std::max<std::int64_t>(0, ceil_div(e - s, step))
                                          : std::max<std::int64_t>(0, ceil_div(s - e, -step));
      y[axis] = count;
      copy_.dims[axis] = count;
      copy_.base += s * st[axis];
      copy_.strides[axis] = st[axis] * step;
    }
    return {{info.input(0).dtype, y}};
  }

 private:
  const Node& node_;
  bool from_inputs_;
};

class ExpandKernel final : public GatherBase {
 public:
  ExpandKernel(const Node& node, const KernelInfo&) : node_(node) {}

  std::vector<TensorDesc> plan(const PlanInfo& info) override {
    const Shape& x = info.input(0).shape;
    const Shape target = info.host_input(1, "Expand's shape").to_int64_vector();
    const Shape y = broadcast_shapes(x, target);
    set_dims(node_, y);
    const Strides st = contiguous_strides(x);
    const std::size_t off = y.size() - x.size();
    for (std::size_t d = 0; d < x.size(); ++d) copy_.strides[off + d] = x[d] == 1 ? 0 : st[d];
    return {{info.input(0).dtype, y}};
  }

 private:
  const Node& node_;
};

// Concat and Split see every tensor as [outer, extent along axis × inner]: each part is a block of
// columns, moved with one 2-D copy.
class ConcatKernel final : public CudaKernel {
 public:
  ConcatKernel(const Node& node, const KernelInfo&) : node_(node) {}

  std::vector<TensorDesc> plan(const PlanInfo& info) override {
    RW_EXPECTS(info.has_input(0), InvalidArgument, "{}: no inputs", node_.where());
    const Shape& first = info.input(0).shape;
    const auto rank = static_cast<std::int64_t>(first.size());
    const auto axis = static_cast<std::size_t>(normalize_axis(node_.attr_int("axis", 0), rank));
    Shape y = first;
    y[axis] = 0;
    for (std::size_t i = 0; i < info.inputs.size(); ++i) {
      const Shape& s = info.input(i).shape;
      RW_EXPECTS(info.input(i).dtype == info.input(0).dtype && s.size() == first.size(), InvalidArgument,
                 "{}: input {} is {} {}, input 0 {} {}", node_.where(), i, dtype_name(info.input(i).dtype), shape_str(s),
                 dtype_name(info.input(0).dtype), shape_str(first));
      for (std::size_t d = 0; d < s.size(); ++d) {
        RW_EXPECTS(d == axis || s[d] == first[d], InvalidArgument, "{}: input {} {} does not match input 0 {} off axis {}",
                   node_.where(), i, shape_str(s), shape_str(first), axis);
      }
      y[axis] += s[axis];
    }
    outer_ = 1;
    for (std::size_t d = 0; d < axis; ++d) outer_ *= first[d];
    return {{info.input(0).dtype, y}};
  }

  void launch(const LaunchArgs& a) override {
    const std::size_t elem = dtype_size(a.outputs[0].dtype);
    const std::int64_t out_cols = outer_ == 0 ? 0 : shape_numel(a.outputs[0].shape) / outer_;
    std::int64_t col = 0;
    for (const DeviceArg& in : a.inputs) {
      const std::int64_t cols = outer_ == 0 ? 0 : shape_numel(in.shape) / outer_;
      char* dst = static_cast<char*>(a.outputs[0].data) + col * elem;
      // An input its producer already wrote in place (the runner's schedule placed it there).
      const bool in_place = outer_ == 1 && in.data == dst;
      if (cols > 0 && !in_place) {
        RW_CUDA_CHECK(cudaMemcpy2DAsync(dst, out_cols * elem, in.data,
                                        cols * elem, cols * elem, outer_, cudaMemcpyDeviceToDevice, a.stream));
      }
      col += cols;
    }
  }

 private:
  const Node& node_;
  std::int64_t outer_ = 1;
};

class SplitKernel final : public CudaKernel {
 public:
  SplitKernel(const Node& node, const KernelInfo&) : node_(node) {}

  std::vector<TensorDesc> plan(const PlanInfo& info) override {
    const Shape& x = info.input(0).shape;
    const auto rank = static_cast<std::int64_t>(x.size());
    const auto axis = static_cast<std::size_t>(normalize_axis(node_.attr_int("axis", 0), rank));
    std::vector<std::int64_t> split = node_.attr_ints("split", {});
    if (info.has_input(1)) split = info.host_input(1, "Split's sizes").to_int64_vector();
    const auto parts = static_cast<std::int64_t>(node_.outputs.size());
    if (split.empty()) {
      const std::int64_t each = ceil_div(x[axis], parts);  // opset 18: the last part may be smaller
      for (std::int64_t i = 0; i < parts; ++i) split.push_back(std::min(each, x[axis] - i * each));
    }
    std::int64_t total = 0;
    for (auto s : split) total += s;
    RW_EXPECTS(static_cast<std::int64_t>(split.size()) == parts && total == x[axis], InvalidArgument,
               "{}: split sizes do not add up to the axis extent {}", node_.where(), x[axis]);
    outer_ = 1;
    for (std::size_t d = 0; d < axis; ++d) outer_ *= x[d];
    std::vector<TensorDesc> outs;
    for (auto s : split) {
      Shape y = x;
      y[axis] = s;
      outs.push_back({info.input(0).dtype, y});
    }
    return outs;
  }

  void launch(const LaunchArgs& a) override {
    const std::size_t elem = dtype_size(a.inputs[0].dtype);
    const std::int64_t in_cols = outer_ == 0 ? 0 : shape_numel(a.inputs[0].shape) / outer_;
    std::int64_t col = 0;
    for (const DeviceArg& out : a.outputs) {
      const std::int64_t cols = outer_ == 0 ? 0 : shape_numel(out.shape) / outer_;
      if (cols > 0 && out.data != nullptr) {
        RW_CUDA_CHECK(cudaMemcpy2DAsync(out.data, cols * elem, static_cast<const char*>(a.inputs[0].data) + col * elem,
                                        in_cols * elem, cols * elem, outer_, cudaMemcpyDeviceToDevice, a.stream));
      }
      col += cols;
    }
  }

 private:
  const Node& node_;
  std::int64_t outer_ = 1;
};

}  // namespace

RW_REGISTER_CUDA_KERNEL("Reshape", ViewKernel);
RW_REGISTER_CUDA_KERNEL("Flatten", ViewKernel);
RW_REGISTER_CUDA_KERNEL("Squeeze", ViewKernel);
RW_REGISTER_CUDA_KERNEL("Unsqueeze", ViewKernel);
RW_REGISTER_CUDA_KERNEL("Identity", ViewKernel);
RW_REGISTER_CUDA_KERNEL("Transpose", TransposeKernel);
RW_REGISTER_CUDA_KERNEL("Slice", SliceKernel);
RW_REGISTER_CUDA_KERNEL("Expand", ExpandKernel);
RW_REGISTER_CUDA_KERNEL("Concat", ConcatKernel);
RW_REGISTER_CUDA_KERNEL("Split", SplitKernel);

}  // namespace redwood::cuda
