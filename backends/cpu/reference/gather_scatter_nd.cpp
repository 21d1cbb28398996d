// GatherND and ScatterND: indexing by tuples of leading coordinates.
//
// The last dimension of `indices` (int64; int32 is taken too) holds tuples of m coordinates; each
// tuple addresses the slice data[i0, ..., i(m-1), :, ...] after the batch dimensions. A negative
// coordinate counts from the back; one outside [-extent, extent) is an error.
//
// GatherND (opset 11, 12, 13): with `batch_dims` b (opset 12; default 0) the first b dimensions of
// data and indices are batch dimensions that must agree, and each tuple indexes its own batch's
// data. 1 <= m <= rank(data) - b. The output is indices.shape[:-1] + data.shape[b + m:]. Any dtype:
// slices are copied as bytes.
// ScatterND (opset 11, 13, 16, 18): the output is a copy of the data with each slice of `updates`
// (shape indices.shape[:-1] + data.shape[m:]) written to the slice its tuple addresses, in order;
// `reduction` (opset 16: add, mul; 18: max, min) combines instead (scatter.hpp).

#include "backends/cpu/reference/kernel_util.hpp"
#include "backends/cpu/reference/op_inputs.hpp"
#include "backends/cpu/reference/scatter.hpp"
#include "backends/cpu/reference/shape_copy.hpp"

#include <algorithm>
#include <cstring>

namespace redwood::cpu {
namespace {

// What a set of index tuples addresses in a contiguous tensor of data_shape: the element offset
// where each tuple's slice starts, and the slice's shape.
struct NdSlices {
  std::vector<std::int64_t> offsets;
  Shape slice_shape;  // data.shape[b + m:]
  std::int64_t slice = 1;  // its element count
};

NdSlices nd_slices(const Node& node, const Shape& data_shape, const Tensor& indices,
                   std::int64_t batch_dims) {
  const auto r = static_cast<std::int64_t>(data_shape.size());
  const std::int64_t q = indices.rank(), b = batch_dims;
  RW_EXPECTS(indices.dtype() == DType::kI64 || indices.dtype() == DType::kI32, InvalidArgument,
             "{}: indices must be int64 or int32, got {}", node.where(), indices.description());
  RW_EXPECTS(q >= 1 && b >= 0 && b < std::min(q, r), InvalidArgument,
             "{}: indices {} and data {} do not allow batch_dims {} (it must be below both ranks)",
             node.where(), indices.description(), shape_str(data_shape), b);
  const std::int64_t m = indices.shape()[q - 1];
  RW_EXPECTS(m >= 1 && m <= r - b, InvalidArgument,
             "{}: index tuples of {} coordinates do not fit data {} after {} batch dimensions",
             node.where(), m, shape_str(data_shape), b);
  RW_EXPECTS(std::equal(data_shape.begin(), data_shape.begin() + b, indices.shape().begin()),
             InvalidArgument, "{}: the batch dimensions of indices {} and data {} differ",
             node.where(), indices.description(), shape_str(data_shape));

  NdSlices out;
  out.slice_shape.assign(data_shape.begin() + b + m, data_shape.end());
  out.slice = shape_numel(out.slice_shape);
  const Strides strides = contiguous_strides(data_shape);
  const std::int64_t batch_elems = b == 0 ? shape_numel(data_shape) : strides[b - 1];
  std::int64_t per_batch = 1;  // tuples in one batch
  for (std::int64_t d = b; d < q - 1; ++d) per_batch *= indices.shape()[d];

  const std::vector<std::int64_t> idx = indices.to_int64_vector();
  const auto tuples = static_cast<std::int64_t>(idx.size()) / m;
  out.offsets.resize(static_cast<std::size_t>(tuples));
  for (std::int64_t t = 0; t < tuples; ++t) {
    std::int64_t off = (t / per_batch) * batch_elems;
    for (std::int64_t k = 0; k < m; ++k) {
      const std::int64_t extent = data_shape[b + k];
      const std::int64_t v = idx[static_cast<std::size_t>(t * m + k)];
      RW_EXPECTS(v >= -extent && v < extent, InvalidArgument,
                 "{}: index {} is out of range for axis {} of data {}", node.where(), v, b + k,
                 shape_str(data_shape));
      off += (v < 0 ? v + extent : v) * strides[b + k];
    }
    out.offsets[static_cast<std::size_t>(t)] = off;
  }
  return out;
}

class GatherNDKernel final : public Kernel {
 public:
  GatherNDKernel(const Node& node, const KernelInfo& info)
      : batch_dims_(node.attr_int("batch_dims", 0)) {
    expect_dtype(node, detail::input_dtype(info, 1), {DType::kI64, DType::kI32}, "indices");
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor data = ctx.input(0).contiguous();
    const Tensor& indices = ctx.input(1);
    const NdSlices s = nd_slices(node, data.shape(), indices, batch_dims_);
    Shape out_shape(indices.shape().begin(), indices.shape().end() - 1);
    out_shape.insert(out_shape.end(), s.slice_shape.begin(), s.slice_shape.end());
    Tensor y = ctx.allocate_output(0, data.dtype(), out_shape);
    const auto bytes = s.slice * static_cast<std::int64_t>(dtype_size(data.dtype()));
    const std::byte* src = detail::bytes_of(data);
    std::byte* dst = detail::bytes_of(y);
    const auto tuples = static_cast<std::int64_t>(s.offsets.size());
    const std::int64_t elem = static_cast<std::int64_t>(dtype_size(data.dtype()));
    parallel_for(tuples, std::max<std::int64_t>(1, (std::int64_t{1} << 15) / std::max<std::int64_t>(1, bytes)),
                 [&](std::int64_t begin, std::int64_t end) {
                   for (std::int64_t t = begin; t < end; ++t) {
                     std::memcpy(dst + t * bytes, src + s.offsets[static_cast<std::size_t>(t)] * elem,
                                 static_cast<std::size_t>(bytes));
                   }
                 });
    ctx.outputs[0] = std::move(y);
  }

 private:
  std::int64_t batch_dims_;
};

// ScatterND's addressing: one slice of data.shape[m:] per index tuple.
struct NdTargets {
  explicit NdTargets(const Node&) {}

  detail::ScatterTargets operator()(const Node& node, const Tensor& data, const Tensor& indices,
                                    const Shape& updates) const {
    NdSlices s = nd_slices(node, data.shape(), indices, 0);
    Shape expected(indices.shape().begin(), indices.shape().end() - 1);
    expected.insert(expected.end(), s.slice_shape.begin(), s.slice_shape.end());
    RW_EXPECTS(updates == expected, InvalidArgument, "{}: updates {} must be {} for data {} and indices {}",
               node.where(), shape_str(updates), shape_str(expected), data.description(),
               indices.description());
    return {std::move(s.offsets), s.slice};
  }
};

}  // namespace

RW_REGISTER_KERNEL("GatherND", Device::kCpu, make_factory<GatherNDKernel>());
RW_REGISTER_KERNEL("ScatterND", Device::kCpu, make_factory<detail::ScatterKernel<NdTargets>>());

}  // namespace redwood::cpu
