#include "core/shape.hpp"

#include "core/error.hpp"

#include <algorithm>

namespace redwood {

std::int64_t shape_numel(const Shape& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

Strides contiguous_strides(const Shape& shape) {
  Strides s(shape.size());
  std::int64_t acc = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    s[i] = acc;
    acc *= std::max<std::int64_t>(shape[i], 1);
  }
  return s;
}

std::string shape_str(const Shape& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  const std::size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    const std::int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const std::int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    RW_EXPECTS(da == db || da == 1 || db == 1, InvalidArgument,
               "shapes {} and {} do not broadcast", shape_str(a), shape_str(b));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::int64_t normalize_axis(std::int64_t axis, std::int64_t rank) {
  RW_EXPECTS(axis >= -rank && axis < std::max<std::int64_t>(rank, 1), InvalidArgument,
             "axis {} is out of range for rank {}", axis, rank);
  return axis < 0 ? axis + rank : axis;
}

}  // namespace redwood
