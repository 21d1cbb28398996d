#pragma once
// Byte-level copies shared by the data-movement kernels (Slice, Transpose, Concat, Split, Pad,
// Gather): they move elements of any dtype, so they only need the element size.

#include "backends/cpu/reference/kernel_util.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace redwood::cpu::detail {

/// Reads one tensor's bytes (read-only).
inline const std::byte* bytes_of(const Tensor& t) {
  return static_cast<const std::byte*>(t.raw_data());
}
inline std::byte* bytes_of(Tensor& t) { return static_cast<std::byte*>(t.raw_data()); }

template <std::size_t N>
inline void copy_elements(const std::byte* src, std::int64_t src_stride, std::byte* dst,
                          std::int64_t n) {
  // src_stride in bytes; a fixed N lets the compiler turn each memcpy into one load/store.
  for (std::int64_t i = 0; i < n; ++i)
    std::memcpy(dst + i * std::int64_t(N), src + i * src_stride, N);
}

/// Copies the strided view (shape, strides in elements, possibly negative) starting at `src` into
/// the contiguous buffer `dst`. Rows whose innermost stride is 1 are copied with one memcpy.
inline void copy_strided(const std::byte* src, const Shape& shape, const Strides& strides,
                         std::size_t elem, std::byte* dst) {
  const std::int64_t total = shape_numel(shape);
  if (total == 0) return;
  // Drop extent-1 dimensions and merge neighbours that are contiguous with each other, so that
  // e.g. a slice of whole rows is one memcpy per block.
  Shape dims;
  Strides str;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (!dims.empty() && str.back() == strides[d] * shape[d]) {
      dims.back() *= shape[d];
      str.back() = strides[d];
      continue;
    }
    dims.push_back(shape[d]);
    str.push_back(strides[d]);
  }
  if (dims.empty()) {
    std::memcpy(dst, src, elem);
    return;
  }
  const std::int64_t inner = dims.back();
  const std::int64_t inner_stride = str.back() * static_cast<std::int64_t>(elem);
  const std::int64_t rows = total / inner;
  const std::int64_t row_bytes = inner * static_cast<std::int64_t>(elem);
  const std::size_t outer_rank = dims.size() - 1;

  parallel_for(rows, std::max<std::int64_t>(1, (std::int64_t{1} << 15) / inner),
               [&](std::int64_t begin, std::int64_t end) {
                 for (std::int64_t row = begin; row < end; ++row) {
                   std::int64_t off = 0, rem = row;
                   for (std::size_t d = outer_rank; d-- > 0;) {
                     off += (rem % dims[d]) * str[d];
                     rem /= dims[d];
                   }
                   const std::byte* s = src + off * static_cast<std::int64_t>(elem);
                   std::byte* o = dst + row * row_bytes;
                   if (str.back() == 1) {
                     std::memcpy(o, s, static_cast<std::size_t>(row_bytes));
                     continue;
                   }
                   switch (elem) {
                     case 1:
                       copy_elements<1>(s, inner_stride, o, inner);
                       break;
                     case 2:
                       copy_elements<2>(s, inner_stride, o, inner);
                       break;
                     case 4:
                       copy_elements<4>(s, inner_stride, o, inner);
                       break;
                     case 8:
                       copy_elements<8>(s, inner_stride, o, inner);
                       break;
                     default:
                       for (std::int64_t i = 0; i < inner; ++i) {
                         std::memcpy(o + i * std::int64_t(elem), s + i * inner_stride, elem);
                       }
                   }
                 }
               });
}

/// Repeats the `elem` bytes of `value` n times into dst.
inline void fill_bytes(std::byte* dst, const std::byte* value, std::size_t elem, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) std::memcpy(dst + i * std::int64_t(elem), value, elem);
}

}  // namespace redwood::cpu::detail
