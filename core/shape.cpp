#include "core/shape.hpp"

#include "core/error.hpp"

#include <algorithm>

namespace redwood {

std::int64_t& Shape::at(size_type i) {
  RW_EXPECTS(i < size_, InvalidArgument, "shape index {} is past its {} extents", i, size_);
  return data_[i];
}

const std::int64_t& Shape::at(size_type i) const {
  RW_EXPECTS(i < size_, InvalidArgument, "shape index {} is past its {} extents", i, size_);
  return data_[i];
}

void Shape::grow(size_type n) {
  n = std::max<size_type>(n, kInline);
  auto* bigger = new std::int64_t[n];
  std::copy(data_, data_ + size_, bigger);
  const std::uint32_t size = size_;
  free_heap();
  data_ = bigger;
  capacity_ = static_cast<std::uint32_t>(n);
  size_ = size;
}

void Shape::open_gap(size_type at, size_type count) {
  reserve(size_ + count);
  std::copy_backward(data_ + at, data_ + size_, data_ + size_ + count);
  size_ += static_cast<std::uint32_t>(count);
}

Shape::iterator Shape::insert(const_iterator pos, size_type count, std::int64_t value) {
  const auto at = static_cast<size_type>(pos - data_);
  open_gap(at, count);
  std::fill(data_ + at, data_ + at + count, value);
  return data_ + at;
}

Shape::iterator Shape::erase(const_iterator first, const_iterator last) {
  const auto at = static_cast<size_type>(first - data_);
  const auto n = static_cast<size_type>(last - first);
  std::copy(data_ + at + n, data_ + size_, data_ + at);
  size_ -= static_cast<std::uint32_t>(n);
  return data_ + at;
}

std::int64_t shape_numel(const Shape& shape) {
  // Dims come from files (models, .npy, configs, the command line): a product that wraps would
  // size a buffer far smaller than the loops that walk the dims, so it is checked here, where
  // every size is computed.
  std::int64_t n = 1;
  for (auto d : shape) {
    if (__builtin_mul_overflow(n, d, &n) || n > kMaxElements || n < -kMaxElements) {
      throw InvalidArgument(fmt::format("shape {} has more than 2^56 elements, more than Redwood can hold",
                                        shape_str(shape)));
    }
  }
  return n;
}

Strides contiguous_strides(const Shape& shape) {
  Strides s(shape.size());
  std::int64_t acc = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    s[i] = acc;
    // An empty tensor passes shape_numel whatever its other extents; their strides must not wrap
    // (an InvalidArgument like shape_numel's: extents whose product, zeros counted as ones, passes 2^56).
    if (__builtin_mul_overflow(acc, std::max<std::int64_t>(shape[i], 1), &acc) || acc > kMaxElements) {
      throw InvalidArgument(fmt::format("shape {} spans more than 2^56 elements, more than Redwood can hold",
                                        shape_str(shape)));
    }
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
