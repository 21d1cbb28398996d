// Indexing ops on the GPU, for any dtype (elements move as bytes) with int64 or int32 indices:
//   Gather                      slices along `axis` (negative indices count from the back)
//   GatherElements              elements along `axis`
//   GatherND                    slices addressed by index tuples, with batch_dims
//   ScatterElements, Scatter    a copy of data, then the updates written along `axis`
//   ScatterND                   a copy of data, then the slices of updates written per tuple
// The scatters run reduction "none" only; the others (add, mul, max, min) are Unsupported at plan
// time, so such a node runs on the CPU. With duplicate indices one of an element's updates wins,
// which one is not determined (ONNX leaves it unspecified; the reference kernel applies them in
// order, so the last wins there): a model that relies on it runs differently on the two devices.
// Index ranges: indices known on the host at plan time are checked as the reference kernel
// checks them (InvalidArgument); on the device an out-of-range index gathers zeros or writes
// nothing (gather_scatter.cu).
// Shapes and attributes are checked as the reference kernels check them
// (backends/cpu/reference/gather.cpp, gather_scatter_elements.cpp, gather_scatter_nd.cpp).

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_kernel.hpp"
#include "backends/cuda/kernels/launchers.hpp"
#include "core/error.hpp"

#include <algorithm>
#include <functional>
#include <string>

namespace redwood::cuda {
namespace {

/// Throws Unsupported naming the node unless indices are int64 or int32 (kUndefined passes: not
/// known yet); returns whether they are int64.
bool check_index_dtype(const Node& node, DType t) {
  RW_EXPECTS(t == DType::kI64 || t == DType::kI32 || t == DType::kUndefined, Unsupported,
             "{}: indices are {}; the CUDA kernel takes int64 or int32", node.where(), dtype_name(t));
  return t != DType::kI32;
}

DType input_dtype(const KernelInfo& info, std::size_t i) {
  return i < info.input_dtypes.size() ? info.input_dtypes[i] : DType::kUndefined;
}

void check_rank(const Node& node, const Shape& s, const char* what) {
  RW_EXPECTS(s.size() <= static_cast<std::size_t>(kernels::kMaxDims), Unsupported,
             "{}: {} {} has rank over {}", node.where(), what, shape_str(s), kernels::kMaxDims);
}

/// When the indices (input 1) are known on the host, checks each against the extent that
/// extent_of(flat position) gives, as the reference kernels do.
void check_host_indices(const Node& node, const PlanInfo& info, const Shape& data,
                        const std::function<std::int64_t(std::int64_t)>& extent_of) {
  const Tensor* host = info.input(1).host;
  if (host == nullptr) return;
  const std::vector<std::int64_t> idx = host->to_int64_vector();
  for (std::size_t i = 0; i < idx.size(); ++i) {
    const std::int64_t extent = extent_of(static_cast<std::int64_t>(i));
    RW_EXPECTS(idx[i] >= -extent && idx[i] < extent, InvalidArgument,
               "{}: index {} is out of range (extent {}) for data {}", node.where(), idx[i], extent, shape_str(data));
  }
}

/// reduction "none" (or absent), else Unsupported so that the node runs on the CPU.
void expect_no_reduction(const Node& node) {
  const std::string r = node.attr_string("reduction", "none");
  RW_EXPECTS(r == "none", Unsupported, "{}: {} with reduction '{}' runs on the CPU (the CUDA kernel does 'none')",
             node.where(), node.op_type, r);
}

/// Output 0 := a copy of input 0, unless the two are one buffer.
void copy_data(const LaunchArgs& a) {
  const std::size_t bytes = static_cast<std::size_t>(shape_numel(a.outputs[0].shape)) * dtype_size(a.outputs[0].dtype);
  if (bytes > 0 && a.outputs[0].data != a.inputs[0].data) {
    RW_CUDA_CHECK(cudaMemcpyAsync(a.outputs[0].data, a.inputs[0].data, bytes, cudaMemcpyDeviceToDevice, a.stream));
  }
}

class GatherKernel final : public CudaKernel {
 public:
  GatherKernel(const Node& node, const KernelInfo& info) : node_(node), axis_(node.attr_int("axis", 0)) {
    check_index_dtype(node, input_dtype(info, 1));
  }

  std::vector<TensorDesc> plan(const PlanInfo& info) override {
    const TensorDesc& data = info.input(0);
    const TensorDesc& indices = info.input(1);
    i64_ = check_index_dtype(node_, indices.dtype);
    const Shape& x = data.shape;
    RW_EXPECTS(!x.empty(), InvalidArgument, "{}: cannot gather from a scalar", node_.where());
    const auto axis = static_cast<std::size_t>(normalize_axis(axis_, static_cast<std::int64_t>(x.size())));
    extent_ = x[axis];
    check_host_indices(node_, info, x, [&](std::int64_t) { return extent_; });
    Shape y(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(axis));
    y.insert(y.end(), indices.shape.begin(), indices.shape.end());
    y.insert(y.end(), x.begin() + static_cast<std::ptrdiff_t>(axis) + 1, x.end());
    outer_ = 1;
    inner_ = 1;
    for (std::size_t d = 0; d < axis; ++d) outer_ *= x[d];
    for (std::size_t d = axis + 1; d < x.size(); ++d) inner_ *= x[d];
    count_ = shape_numel(indices.shape);
    return {{data.dtype, y}};
  }

  void launch(const LaunchArgs& a) override {
    kernels::launch_gather(a.inputs[0].data, a.inputs[1].data, i64_, a.outputs[0].data, dtype_size(a.outputs[0].dtype),
                           outer_, extent_, count_, inner_, a.stream);
  }

 private:
  const Node& node_;
  std::int64_t axis_;
  bool i64_ = true;
  long long outer_ = 1, extent_ = 0, count_ = 0, inner_ = 1;
};

/// GatherElements' and ScatterElements' addressing for data and indices of these shapes.
kernels::ElementIndexing element_indexing(const Node& node, const PlanInfo& info, std::int64_t axis_attr) {
  const Shape& x = info.input(0).shape;
  const Shape& q = info.input(1).shape;
  const auto rank = static_cast<std::int64_t>(x.size());
  RW_EXPECTS(rank > 0, InvalidArgument, "{}: data is a scalar", node.where());
  check_rank(node, x, "data");
  const std::int64_t axis = normalize_axis(axis_attr, rank);
  RW_EXPECTS(static_cast<std::int64_t>(q.size()) == rank, InvalidArgument, "{}: indices {} and data {} differ in rank",
             node.where(), shape_str(q), shape_str(x));
  for (std::int64_t d = 0; d < rank; ++d) {
    const auto du = static_cast<std::size_t>(d);
    RW_EXPECTS(d == axis || q[du] <= x[du], InvalidArgument, "{}: indices {} are larger than data {} along axis {}",
               node.where(), shape_str(q), shape_str(x), d);
  }
  kernels::ElementIndexing p;
  p.rank = static_cast<int>(rank);
  p.axis = static_cast<int>(axis);
  p.extent = x[static_cast<std::size_t>(axis)];
  const Strides st = contiguous_strides(x);
  for (std::size_t d = 0; d < x.size(); ++d) {
    p.dims[d] = q[d];
    p.data_strides[d] = st[d];
  }
  check_host_indices(node, info, x, [&](std::int64_t) { return p.extent; });
  return p;
}

/// A scatter's updates (input 2): data's dtype and the shape `expected`.
void check_updates(const Node& node, const PlanInfo& info, const Shape& expected) {
  const TensorDesc& data = info.input(0);
  const TensorDesc& updates = info.input(2);
  RW_EXPECTS(updates.dtype == data.dtype, InvalidArgument, "{}: updates are {} and data {}", node.where(),
             dtype_name(updates.dtype), dtype_name(data.dtype));
  RW_EXPECTS(updates.shape == expected, InvalidArgument, "{}: updates {} must be {} for data {} and indices {}",
             node.where(), shape_str(updates.shape), shape_str(expected), shape_str(data.shape),
             shape_str(info.input(1).shape));
}

/// GatherElements, and (scatter) ScatterElements / Scatter.
class ElementsKernel final : public CudaKernel {
 public:
  ElementsKernel(const Node& node, const KernelInfo& info)
      : node_(node), axis_(node.attr_int("axis", 0)), scatter_(node.op_type != "GatherElements") {
    check_index_dtype(node, input_dtype(info, 1));
    if (scatter_) expect_no_reduction(node);
  }

  std::vector<TensorDesc> plan(const PlanInfo& info) override {
    i64_ = check_index_dtype(node_, info.input(1).dtype);
    if (scatter_) check_updates(node_, info, info.input(1).shape);
    p_ = element_indexing(node_, info, axis_);
    return {{info.input(0).dtype, scatter_ ? info.input(0).shape : info.input(1).shape}};
  }

  void launch(const LaunchArgs& a) override {
    const std::size_t elem = dtype_size(a.outputs[0].dtype);
    const long long n = shape_numel(a.inputs[1].shape);
    if (scatter_) {
      copy_data(a);
      kernels::launch_scatter_elements(a.inputs[1].data, i64_, a.inputs[2].data, a.outputs[0].data, elem, n, p_,
                                       a.stream);
    } else {
      kernels::launch_gather_elements(a.inputs[0].data, a.inputs[1].data, i64_, a.outputs[0].data, elem, n, p_,
                                      a.stream);
    }
  }

 private:
  const Node& node_;
  std::int64_t axis_;
  bool scatter_;
  bool i64_ = true;
  kernels::ElementIndexing p_;
};

/// GatherND's and ScatterND's addressing (batch_dims b) for data and indices of these shapes;
/// `slice_shape` receives data.shape[b + m:].
kernels::NdIndexing nd_indexing(const Node& node, const PlanInfo& info, std::int64_t b, Shape& slice_shape) {
  const Shape& x = info.input(0).shape;
  const Shape& q = info.input(1).shape;
  const auto r = static_cast<std::int64_t>(x.size()), qr = static_cast<std::int64_t>(q.size());
  check_rank(node, x, "data");
  RW_EXPECTS(qr >= 1 && b >= 0 && b < std::min(qr, r), InvalidArgument,
             "{}: indices {} and data {} do not allow batch_dims {} (it must be below both ranks)", node.where(),
             shape_str(q), shape_str(x), b);
  const std::int64_t m = q.back();
  RW_EXPECTS(m >= 1 && m <= r - b, InvalidArgument,
             "{}: index tuples of {} coordinates do not fit data {} after {} batch dimensions", node.where(), m,
             shape_str(x), b);
  RW_EXPECTS(std::equal(x.begin(), x.begin() + b, q.begin()), InvalidArgument,
             "{}: the batch dimensions of indices {} and data {} differ", node.where(), shape_str(q), shape_str(x));
  const Strides st = contiguous_strides(x);
  kernels::NdIndexing p;
  p.m = static_cast<int>(m);
  for (std::int64_t k = 0; k < m; ++k) {
    p.extents[k] = x[static_cast<std::size_t>(b + k)];
    p.strides[k] = st[static_cast<std::size_t>(b + k)];
  }
  slice_shape.assign(x.begin() + b + m, x.end());
  p.slice = std::max<std::int64_t>(1, shape_numel(slice_shape));
  std::int64_t per_batch = 1;
  for (std::int64_t d = b; d < qr - 1; ++d) per_batch *= q[static_cast<std::size_t>(d)];
  p.per_batch = std::max<std::int64_t>(1, per_batch);
  p.batch_elems = b == 0 ? 0 : st[static_cast<std::size_t>(b - 1)];
  check_host_indices(node, info, x, [&](std::int64_t i) { return p.extents[i % m]; });
  return p;
}

/// GatherND, and (scatter) ScatterND.
class NdKernel final : public CudaKernel {
 public:
  NdKernel(const Node& node, const KernelInfo& info)
      : node_(node), batch_dims_(node.attr_int("batch_dims", 0)), scatter_(node.op_type == "ScatterND") {
    check_index_dtype(node, input_dtype(info, 1));
    if (scatter_) expect_no_reduction(node);
  }

  std::vector<TensorDesc> plan(const PlanInfo& info) override {
    i64_ = check_index_dtype(node_, info.input(1).dtype);
    Shape slice;
    p_ = nd_indexing(node_, info, scatter_ ? 0 : batch_dims_, slice);
    const Shape& q = info.input(1).shape;
    Shape y(q.begin(), q.end() - 1);  // a gather's output, a scatter's updates
    y.insert(y.end(), slice.begin(), slice.end());
    if (!scatter_) return {{info.input(0).dtype, y}};
    check_updates(node_, info, y);
    return {{info.input(0).dtype, info.input(0).shape}};
  }

  void launch(const LaunchArgs& a) override {
    const std::size_t elem = dtype_size(a.outputs[0].dtype);
    if (scatter_) {
      copy_data(a);
      kernels::launch_scatter_nd(a.inputs[1].data, i64_, a.inputs[2].data, a.outputs[0].data, elem,
                                 shape_numel(a.inputs[2].shape), p_, a.stream);
    } else {
      kernels::launch_gather_nd(a.inputs[0].data, a.inputs[1].data, i64_, a.outputs[0].data, elem,
                                shape_numel(a.outputs[0].shape), p_, a.stream);
    }
  }

 private:
  const Node& node_;
  std::int64_t batch_dims_;
  bool scatter_;
  bool i64_ = true;
  kernels::NdIndexing p_;
};

}  // namespace

RW_REGISTER_CUDA_KERNEL("Gather", GatherKernel);
RW_REGISTER_CUDA_KERNEL("GatherElements", ElementsKernel);
RW_REGISTER_CUDA_KERNEL("GatherND", NdKernel);
RW_REGISTER_CUDA_KERNEL("ScatterElements", ElementsKernel);
RW_REGISTER_CUDA_KERNEL("Scatter", ElementsKernel);
RW_REGISTER_CUDA_KERNEL("ScatterND", NdKernel);

}  // namespace redwood::cuda
