#include "backends/cpu/reference/space_to_depth.hpp"

#include "backends/cpu/reference/shape_copy.hpp"
#include "core/error.hpp"

#include <cstring>

namespace redwood {

Tensor space_to_depth(const Tensor& x) {
  RW_EXPECTS(x.shape().size() == 4 && is_floating(x.dtype()), InvalidArgument,
             "space_to_depth takes an [N, C, H, W] tensor, not {}", x.description());
  Tensor in = x.cast(DType::kF32).contiguous();
  const std::int64_t n = in.shape()[0], c = in.shape()[1], h = in.shape()[2], w = in.shape()[3];
  const std::int64_t oh = (h + 1) / 2, ow = (w + 1) / 2;
  if (h % 2 != 0 || w % 2 != 0) {  // pad to even extents with zeros
    Tensor even = Tensor::zeros(DType::kF32, {n, c, 2 * oh, 2 * ow});
    for (std::int64_t row = 0; row < n * c * h; ++row) {
      std::memcpy(even.data<float>() + ((row / h) * 2 * oh + row % h) * 2 * ow, in.data<float>() + row * w,
                  static_cast<std::size_t>(w) * sizeof(float));
    }
    in = std::move(even);
  }
  Tensor out = Tensor::empty(DType::kF32, {n, 4 * c, oh, ow});
  space_to_depth(in, 2, out);
  return out;
}

void space_to_depth(const Tensor& x, std::int64_t block, Tensor& y) {
  RW_EXPECTS(x.rank() == 4 && block > 0 && x.shape()[2] % block == 0 && x.shape()[3] % block == 0,
             InvalidArgument, "space_to_depth: {} is not [N, C, H, W] with H and W multiples of {}",
             x.description(), block);
  const Shape& s = x.shape();
  const Strides& st = x.strides();
  const Shape y_shape{s[0], s[1] * block * block, s[2] / block, s[3] / block};
  RW_EXPECTS(y.dtype() == x.dtype() && y.shape() == y_shape && y.is_contiguous(), InvalidArgument,
             "space_to_depth: the output of {} with block {} is {}{}, not {}", x.description(),
             block, dtype_name(x.dtype()), shape_str(y_shape), y.description());
  // y read as [N, dy, dx, C, Y, X] from x[n, c, b·Y + dy, b·X + dx].
  cpu::detail::copy_strided(cpu::detail::bytes_of(x), {s[0], block, block, s[1], s[2] / block, s[3] / block},
                            {st[0], st[2], st[3], st[1], block * st[2], block * st[3]}, dtype_size(x.dtype()),
                            cpu::detail::bytes_of(y));
}

}  // namespace redwood
